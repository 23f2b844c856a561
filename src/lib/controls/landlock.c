/* landlock.c — Landlock rules mirroring the mounts: defense in depth.
 *
 * The mounts already decide what the sandbox can see and write; Landlock
 * says the same thing a second time, in the kernel's LSM layer, so that a
 * mistake in the mount table (a grant too wide, a mount left writable)
 * still does not let the command write outside its writable grants.
 *
 * Landlock can only add up: a path is allowed an access when any rule on
 * it or on one of its parents grants it. So a read-only bind nested in a
 * writable grant stays read-only through its mount flag alone. */
#define _GNU_SOURCE
#include "controls/landlock.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Debian 12's <linux/landlock.h> stops at ABI 2; the later rights are
 * stable kernel ABI, spelled out here. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)          /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)         /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)          /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)   /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The ABI 6 layout of struct landlock_ruleset_attr. Older kernels accept
 * the larger size as long as the fields they do not know are zero. */
struct ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};

#define FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_READ_EXEC (FS_READ | LANDLOCK_ACCESS_FS_EXECUTE)
/* Everything a build or an editor does in its own tree. MAKE_CHAR and
 * MAKE_BLOCK too: without CAP_MKNOD only overlayfs whiteouts can be made,
 * the grants are nodev, and the kernel's EPERM is the clearer refusal. */
#define FS_WRITE                                                                                   \
        (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE | \
         LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |       \
         LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |     \
         LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE)
/* The usable device nodes: read, write, and their ioctls (a terminal
 * needs TCGETS; /dev/null's O_TRUNC is harmless). */
#define FS_DEVICE                                                                                  \
        (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |   \
         LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* The only rights a rule on a non-directory may carry. */
#define FS_FILE_RIGHTS                                                                             \
        (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |    \
         LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

int landlock_abi_version(void)
{
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi < 0 ? 0 : (int)abi;
}

/* Every filesystem right the kernel's ABI knows: all of them handled, so
 * what no rule grants is refused. */
static uint64_t fs_rights_for_abi(int abi)
{
        uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  /* ABI 1: bits 0..12 */
        if (abi >= 2)
                all |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                all |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return all;
}

struct ruleset {
        int fd;
        uint64_t handled;  /* rights a rule may mention on this ABI */
};

/* Grant `access` beneath `path` (a path inside the new root). */
static int allow_path(const struct ruleset *rs, const char *path, uint64_t access, brig_error **err)
{
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return brig_err(err, errno, "landlock: open '%s'", path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return brig_err(err, errno, "landlock: stat '%s'", path);
        if (!S_ISDIR(st.st_mode))
                access &= FS_FILE_RIGHTS;  /* directory rights on a file are EINVAL */
        struct landlock_path_beneath_attr pb = { .allowed_access = access & rs->handled, .parent_fd = fd };
        if (pb.allowed_access == 0)
                return 0;
        if (syscall(SYS_landlock_add_rule, rs->fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
                return brig_err(err, errno, "landlock: rule for '%s'", path);
        return 0;
}

/* A writable rootfs (an OCI bundle's): everything in it but the /dev,
 * /proc and /sys brig mounts there, which keep their own rules below — a
 * rule on "/" itself would reach into them (rules are inherited), /proc's
 * writable files act on processes. New names right in "/" stay refused. */
static int allow_rootfs_writes(const struct ruleset *rs, brig_error **err)
{
        _cleanup_close_ int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return brig_err(err, errno, "landlock: open /");
        DIR *d = fdopendir(fd);
        if (!d)
                return brig_err(err, errno, "landlock: list /");
        fd = -EBADF;  /* the DIR owns it now */
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "dev") ||
                    !strcmp(e->d_name, "proc") || !strcmp(e->d_name, "sys") || e->d_type == DT_LNK)
                        continue;
                char path[NAME_MAX + 2];
                snprintf(path, sizeof path, "/%s", e->d_name);
                r = allow_path(rs, path, FS_READ_EXEC | FS_WRITE, err);
        }
        closedir(d);
        return r;
}

/* The grants: the same list the mounts were built from. Masked secrets
 * need nothing: they lie under these rules and are empty. */
static int allow_mounts(const struct ruleset *rs, const struct run_plan *plan, brig_error **err)
{
        /* Listing "/" is what an agent does first. READ_DIR is inherited
         * by the whole tree, so names (never contents) stay listable even
         * where no grant reads: an accepted cost. */
        int r = allow_path(rs, "/", plan->rootfs ? FS_READ_EXEC : LANDLOCK_ACCESS_FS_READ_DIR, err);
        if (r == 0 && plan->rootfs && !plan->rootfs_readonly)
                r = allow_rootfs_writes(rs, err);
        for (size_t i = 0; r == 0 && i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                bool writable = m->kind == MOUNT_TMPFS || !m->readonly;
                r = allow_path(rs, m->dst, writable ? FS_READ_EXEC | FS_WRITE : FS_READ_EXEC, err);
        }
        return r;
}

/* What mounts.c puts in /dev, /proc and /sys. */
static int allow_system(const struct ruleset *rs, const struct run_plan *plan, brig_error **err)
{
        static const char *const devices[] = {
                "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
        };
        for (size_t i = 0; i < ARRAY_SIZE(devices); i++) {
                int r = allow_path(rs, devices[i], FS_DEVICE, err);
                if (r < 0)
                        return r;
        }
        /* The sandbox's own terminals, and ptmx to make new ones. */
        int r = allow_path(rs, "/dev/pts", FS_DEVICE | LANDLOCK_ACCESS_FS_READ_DIR, err);
        if (r < 0)
                return r;
        /* POSIX shared memory and semaphores (Python's multiprocessing). */
        r = allow_path(rs, "/dev/shm", FS_READ | FS_WRITE, err);
        if (r < 0)
                return r;
        /* /proc is read-only to Landlock: nothing we run needs to write it,
         * and its writable files (oom_score_adj, comm, attr/, clear_refs)
         * act on processes. Reopening /proc/self/fd/N is checked against
         * the file it leads to, not against /proc. */
        r = allow_path(rs, "/proc", FS_READ, err);
        if (r < 0)
                return r;
        if (plan->mount_sys)
                r = allow_path(rs, "/sys", FS_READ, err);
        return r;
}

int landlock_prepare(const struct run_plan *plan, int *ruleset_fd, brig_error **err)
{
        *ruleset_fd = -1;
        int abi = plan->landlock_abi;
#ifdef BRIG_TEST_HOOKS
        /* Test builds only: the control run that shows a relaxed mount lets
         * a write through when Landlock is absent. */
        if (getenv("BRIG_TEST_NO_LANDLOCK"))
                abi = 0;
#endif
        if (abi <= 0)
                return 0;  /* degraded, and the policy said that is acceptable */

        struct ruleset_attr attr = { .handled_access_fs = fs_rights_for_abi(abi) };
        /* TCP (ABI 4) is deliberately not handled in network mode "none":
         * the sandbox's network namespace holds only its own loopback, so
         * the namespace is already the wall, and Landlock can filter TCP
         * only by port, not by address — refusing it would break every test
         * suite that starts a local server, and protect nothing. The egress
         * modes will handle TCP and allow just the proxy's ports. */
        if (abi >= 6)
                /* No connecting to abstract unix sockets of processes outside
                 * this domain (brig's pid 1, anything sharing the netns) and no
                 * signals to them. */
                attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;

        struct ruleset rs = { .handled = attr.handled_access_fs };
        rs.fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);  /* close-on-exec */
        if (rs.fd < 0)
                return brig_err(err, errno, "landlock: create ruleset (ABI %d)", abi);
        _cleanup_close_ int fd = rs.fd;

        int r = allow_mounts(&rs, plan, err);
        if (r == 0)
                r = allow_system(&rs, plan, err);
        if (r < 0)
                return r;
        *ruleset_fd = TAKE_FD(fd);
        return 0;
}

int landlock_apply(const struct run_plan *plan, brig_error **err)
{
        /* A persistent sandbox's pid 1 made the ruleset once, before any
         * command ran (persist_init.c); each exec only enforces it. */
        _cleanup_close_ int fd = plan->landlock_ruleset_fd;
        if (fd < 0) {
                int r = landlock_prepare(plan, &fd, err);
                if (r < 0 || fd < 0)
                        return r;
        }
        /* Needs no_new_privs (set by pid 1 before forking the command). The
         * descriptor is closed here: a file operation runs on without an
         * execve, and a ruleset it held could gain rules for later execs. */
        if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
                return brig_err(err, errno, "landlock: restrict self");
        return 0;
}
