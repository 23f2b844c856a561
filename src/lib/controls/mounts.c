/* mounts.c — the sandbox's filesystem, built in the child's own mount
 * namespace on a fresh tmpfs and then made its root with pivot_root.
 *
 * Every path is resolved with openat2(RESOLVE_NO_SYMLINKS), and every mount
 * is made through file descriptors (open_tree, fsmount, move_mount,
 * mount_setattr), so a symlink planted in the workspace — or swapped in
 * while we work — can neither redirect a source nor make us mount over
 * anything outside the new root. */
#define _GNU_SOURCE
#include "core/syscalls.h"
#include "controls/mounts.h"
#include "tools/tools.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

/* Docker's masked and read-only /proc paths: they reveal host details or
 * reach the host kernel (sysrq-trigger, /proc/sys knobs). */
static const char *const proc_masked[] = {
        "asound", "acpi", "kcore", "keys", "latency_stats", "timer_list", "timer_stats",
        "sched_debug", "scsi", "interrupts", NULL,
};
/* pressure: its files take PSI triggers, a write into the host kernel. */
static const char *const proc_readonly[] = { "bus", "fs", "irq", "pressure", "sys", "sysrq-trigger", NULL };
static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };

#define MASK_FILE "dev/.brig-mask"  /* in brig's own /dev; unlinked before the command runs */
#define HOSTS_FILE ".brig-hosts"  /* the same */

/* ---- resolving ---------------------------------------------------------- */

/* Open `rel` below `dirfd` as O_PATH, refusing every symlink and any
 * escape above dirfd. */
static int open_beneath(int dirfd, const char *rel, int extra_flags)
{
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW | extra_flags,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        return sys_openat2(dirfd, *rel ? rel : ".", &how);
}

/* Open a host path for use as a bind source, without following symlinks
 * anywhere in it. Without O_NOFOLLOW a final symlink is one to resolve,
 * which RESOLVE_NO_SYMLINKS refuses like any other (ELOOP): no fstat to
 * tell one apart. */
static int open_host_source(const char *path, brig_error **err)
{
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = sys_openat2(AT_FDCWD, path, &how);
        if (fd < 0 && errno == ELOOP)
                return brig_err(err, ELOOP, "bind source '%s' is or contains a symlink; give the resolved path",
                                path);
        if (fd < 0)
                return brig_err(err, errno, "bind source '%s'", path);
        return fd;
}

/* Walk `path` (absolute, inside the new root) component by component,
 * creating what is missing: directories, or an empty file as the last
 * component when want_file. Returns an O_PATH fd to the mount point. */
static int make_mountpoint(int root_fd, const char *path, bool want_file, brig_error **err)
{
        _cleanup_free_ char *copy = strdup(path);
        if (!copy)
                return brig_err(err, ENOMEM, "mount point");
        /* The walk starts at root_fd itself, not a copy of it (two system
         * calls fewer per mount point); from the first component on, the
         * directory is ours to close. */
        _cleanup_close_ int dir = -EBADF;
        char *save = NULL;
        char *comp = strtok_r(copy, "/", &save);
        if (!comp) {
                int fd = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
                return fd < 0 ? brig_err(err, errno, "dup") : fd;
        }
        while (comp) {
                int at = dir >= 0 ? dir : root_fd;
                char *next = strtok_r(NULL, "/", &save);
                bool last = next == NULL;
                /* A directory is opened as one (O_DIRECTORY refuses a
                 * symlink there, with O_NOFOLLOW, so no fstat is needed);
                 * only a file's point is checked below. A directory is
                 * made first and opened after: most are missing (brig's
                 * own root is empty), and mkdirat says EEXIST, whatever
                 * the name is, for one that is not — one system call
                 * fewer for each missing, one more for each there. */
                bool file = last && want_file;
                if (!file && mkdirat(at, comp, 0755) < 0 && errno != EEXIST)
                        return brig_err(err, errno, "create mount point '%s' (at '%s')", path, comp);
                int fd = open_beneath(at, comp, file ? 0 : O_DIRECTORY);
                if (fd < 0 && errno == ENOENT && file) {
                        int r = openat(at, comp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
                        if (r < 0 && errno != EEXIST)
                                return brig_err(err, errno, "create mount point '%s' (at '%s')", path, comp);
                        if (r >= 0)
                                close(r);
                        fd = open_beneath(at, comp, 0);
                }
                if (fd < 0 && errno == ELOOP)
                        return brig_err(err, ELOOP, "mount point '%s': '%s' is a symlink", path, comp);
                /* O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a symlink too:
                 * which one it was may have changed since, so say both. */
                if (fd < 0 && errno == ENOTDIR && !file)
                        return brig_err(err, ENOTDIR, "mount point '%s': '%s' is a symlink or not a directory",
                                        path, comp);
                if (fd < 0)
                        return brig_err(err, errno, "mount point '%s' (at '%s')", path, comp);
                /* O_PATH|O_NOFOLLOW opens a symlink itself rather than failing:
                 * never mount over, or walk through, one the sandbox planted. */
                struct stat st;
                if (file && (fstat(fd, &st) < 0 || S_ISLNK(st.st_mode))) {
                        close(fd);
                        return brig_err(err, ELOOP, "mount point '%s': '%s' is a symlink", path, comp);
                }
                closep(&dir);
                dir = fd;
                comp = next;
        }
        return TAKE_FD(dir);
}

/* ---- mounting ------------------------------------------------------------ */

static int attach(int tree_fd, int target_fd, const char *what, brig_error **err)
{
        if (sys_move_mount(tree_fd, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return brig_err(err, errno, "move_mount %s", what);
        return 0;
}

/* A detached copy of a host tree with the flags the sandbox needs. Flags
 * are set recursively: a bind does not apply them to submounts by itself. */
static int clone_tree(int src_fd, bool readonly, bool recursive, const char *what, brig_error **err)
{
#ifdef BRIG_TEST_HOOKS
        /* Test builds only: let a test show Landlock alone refusing writes
         * that a wrong mount would have allowed. */
        if (getenv("BRIG_TEST_WRITABLE_BINDS"))
                readonly = false;
#endif
        unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
        _cleanup_close_ int tree = sys_open_tree(src_fd, "", flags);
        if (tree < 0)
                return brig_err(err, errno, "open_tree %s", what);
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0),
                .propagation = MS_PRIVATE,
        };
        if (sys_mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr) < 0)
                return brig_err(err, errno, "mount_setattr %s", what);
        return TAKE_FD(tree);
}

/* A detached copy of one directory of brig's own root tmpfs (not what is
 * mounted below it), with exactly these flags: a mount of that
 * filesystem instead of a filesystem of its own, which costs the kernel a
 * superblock (about 16 us here, the most expensive thing a mount does). */
static int bind_dir(int dir_fd, unsigned attrs, const char *what, brig_error **err)
{
        _cleanup_close_ int tree = sys_open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return brig_err(err, errno, "open_tree %s", what);
        struct mount_attr attr = { .attr_set = attrs, .attr_clr = ~attrs & (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                                           MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC),
                                   .propagation = MS_PRIVATE };
        if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0)
                return brig_err(err, errno, "mount_setattr %s", what);
        return TAKE_FD(tree);
}

/* The directory `name` made now in brig's own root tmpfs (not a rootfs:
 * its directories are the image's), opened: nothing can be in it. -1
 * when brig's root is an image's or the name was there already. */
static int fresh_dir(int root_fd, const struct run_plan *plan, const char *name, unsigned mode)
{
        if (plan->rootfs || mkdirat(root_fd, name, mode) < 0)
                return -1;
        return open_beneath(root_fd, name, O_DIRECTORY);
}

/* A new, detached filesystem instance (tmpfs, proc, devpts, sysfs). */
static int new_fs(const char *type, const char *const *options, unsigned attrs, brig_error **err)
{
        _cleanup_close_ int fs = sys_fsopen(type, FSOPEN_CLOEXEC);
        if (fs < 0)
                return brig_err(err, errno, "fsopen %s", type);
        for (size_t i = 0; options && options[i]; i += 2) {
                int r = options[i + 1]
                        ? sys_fsconfig(fs, FSCONFIG_SET_STRING, options[i], options[i + 1], 0)
                        : sys_fsconfig(fs, FSCONFIG_SET_FLAG, options[i], NULL, 0);
                if (r < 0)
                        return brig_err(err, errno, "%s option %s=%s", type, options[i],
                                        options[i + 1] ? options[i + 1] : "");
        }
        if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return brig_err(err, errno, "create %s", type);
        int mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, attrs);
        if (mnt < 0)
                return brig_err(err, errno, "fsmount %s", type);
        return mnt;
}

/* One inode per KiB of size, at least 1024. Without nr_inodes a tmpfs
 * allows half the host's RAM pages in inodes, and empty files use no
 * blocks: millions of them cost about 1 KiB of kernel memory each (inode
 * and dentry), outside the size limit and, rootless, outside any cgroup.
 * With it, the inodes cost about as much as the size allows in data. */
#define TMPFS_BYTES_PER_INODE 1024
#define TMPFS_MIN_INODES 1024

/* Who builds the root: the child's own ids, read once at the start of
 * mounts_build_root (the child alone calls it, before it changes them). */
static uid_t builder_uid;
static gid_t builder_gid;

static int new_tmpfs(uint64_t size, unsigned mode, uid_t uid, gid_t gid, unsigned attrs, brig_error **err)
{
        char size_s[32], mode_s[16], uid_s[16], gid_s[16], inodes_s[32];
        uint64_t inodes = size / TMPFS_BYTES_PER_INODE;
        snprintf(inodes_s, sizeof inodes_s, "%llu",
                 (unsigned long long)(inodes < TMPFS_MIN_INODES ? TMPFS_MIN_INODES : inodes));
        snprintf(size_s, sizeof size_s, "%llu", (unsigned long long)size);
        snprintf(mode_s, sizeof mode_s, "%o", mode);
        snprintf(uid_s, sizeof uid_s, "%u", uid);
        snprintf(gid_s, sizeof gid_s, "%u", gid);
        /* A tmpfs's root belongs to whoever makes it (the fsuid and fsgid):
         * the owner is given only when it differs, two system calls fewer
         * for brig's own mounts. */
        const char *opts[11] = { "size", size_s, "nr_inodes", inodes_s, "mode", mode_s };
        size_t n = 6;
        if (uid != builder_uid) {
                opts[n++] = "uid";
                opts[n++] = uid_s;
        }
        if (gid != builder_gid) {
                opts[n++] = "gid";
                opts[n++] = gid_s;
        }
        opts[n] = NULL;
        return new_fs("tmpfs", opts, attrs, err);
}

/* Who owns brig's own tmpfs mounts: root while it builds as root (inside 0
 * is mapped then), else the only mapped user, the caller. */
static uid_t owner_uid(const struct run_plan *plan)
{
        return plan->map_root_for_setup ? 0 : plan->sandbox_uid;
}

static gid_t owner_gid(const struct run_plan *plan)
{
        return plan->map_root_for_setup ? 0 : plan->sandbox_gid;
}

/* The workspace's grant, when the supervisor made it idmapped (root, a
 * root-owned workspace): that tree is attached in its place, and no copy
 * of the source is made for it. */
static bool uses_idmapped_tree(const struct run_plan *plan, const struct mount_entry *m)
{
        return plan->idmapped_workspace_fd >= 0 && !plan->overlay_upper && m->kind == MOUNT_BIND &&
               strcmp(m->src, plan->workspace) == 0 && strcmp(m->dst, plan->workspace) == 0 && !m->readonly;
}

static int mount_entry(int root_fd, const struct run_plan *plan, const struct mount_entry *m, int src_tree,
                       brig_error **err)
{
        /* A tmpfs made here is ours to close; a bind's tree stays its
         * owner's (open_sources', the plan's), attached in place. */
        _cleanup_close_ int made = -EBADF;
        int tree;
        bool is_dir = true;
        if (m->kind == MOUNT_TMPFS) {
                uid_t uid = m->user_owned ? plan->sandbox_uid : owner_uid(plan);
                gid_t gid = m->user_owned ? plan->sandbox_gid : owner_gid(plan);
                tree = made = new_tmpfs(m->size, m->mode, uid, gid, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
                if (tree < 0)
                        return tree;
        } else if (uses_idmapped_tree(plan, m)) {
                tree = plan->idmapped_workspace_fd;
        } else {
                struct stat st;
                if (fstat(src_tree, &st) < 0)
                        return brig_err(err, errno, "stat '%s'", m->src);
                is_dir = S_ISDIR(st.st_mode);
                tree = src_tree;
        }
        _cleanup_close_ int target = make_mountpoint(root_fd, m->dst, !is_dir, err);
        if (target < 0)
                return brig_err_prefix(err, "%s '%s'", m->kind == MOUNT_TMPFS ? "tmpfs" : "bind", m->dst);
        return attach(tree, target, m->dst, err);
}

static int make_symlinks(int root_fd, const struct run_plan *plan, brig_error **err)
{
        for (size_t i = 0; i + 1 < plan->symlinks.n; i += 2) {
                const char *path = plan->symlinks.items[i] + 1;  /* system dirs are top level */
                if (symlinkat(plan->symlinks.items[i + 1], root_fd, path) < 0)
                        return brig_err(err, errno, "symlink '%s'", plan->symlinks.items[i]);
        }
        return 0;
}

/* The masks made so far, one of each kind, attached: every later mask is
 * a copy of one of them (open_tree copies the mount with its read-only,
 * nosuid, nodev and noexec flags), so hiding a path costs one copy and one
 * move_mount rather than a new filesystem, or a copy and its flags. */
struct mask_src {
        int file;       /* the empty file, bound read-only */
        int dir;        /* the empty read-only directory */
        int empty_dir;  /* where the first comes from: see mount_proc */
};

#define MASK_SRC_INIT { .file = -EBADF, .dir = -EBADF, .empty_dir = -EBADF }

static void mask_src_done(struct mask_src *src)
{
        closep(&src->file);
        closep(&src->dir);
        closep(&src->empty_dir);
}

/* Hide one path: an empty read-only directory over a directory (the
 * empty one under /proc of brig's root, or a tmpfs of its own over an
 * image's root), an empty read-only file over anything else. Absent paths need no hiding. */
static int mask_path(int root_fd, struct mask_src *src, const char *path, bool ignore_missing, brig_error **err)
{
        _cleanup_close_ int target = open_beneath(root_fd, path[0] == '/' ? path + 1 : path, 0);
        if (target < 0 && errno == ENOENT && ignore_missing)
                return 0;
        if (target < 0)
                return brig_err(err, errno, "hide '%s'", path);
        struct stat st;
        if (fstat(target, &st) < 0)
                return brig_err(err, errno, "stat '%s'", path);
        if (S_ISLNK(st.st_mode))
                return brig_err(err, ELOOP, "hide '%s': it became a symlink", path);
        int *first = S_ISDIR(st.st_mode) ? &src->dir : &src->file;
        _cleanup_close_ int tree = -EBADF;
        if (*first >= 0) {
                /* Not recursive: the mask alone, never what a later mask
                 * put over or below it. */
                tree = sys_open_tree(*first, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (tree < 0)
                        return brig_err(err, errno, "open_tree mask for '%s'", path);
        } else if (S_ISDIR(st.st_mode) && src->empty_dir >= 0) {
                tree = bind_dir(src->empty_dir, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                MOUNT_ATTR_NOEXEC, "mask directory", err);
        } else if (S_ISDIR(st.st_mode)) {
                const char *opts[] = { "size", "4096", "nr_inodes", "1", "mode", "0555", NULL };
                tree = new_fs("tmpfs", opts,
                              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
        } else {
                _cleanup_close_ int empty = open_beneath(root_fd, MASK_FILE, 0);
                if (empty < 0)
                        return brig_err(err, errno, "open mask file");
                tree = clone_tree(empty, true, false, "mask file", err);
        }
        if (tree < 0)
                return tree;
        int r = attach(tree, target, path, err);
        if (r == 0 && *first < 0)
                *first = TAKE_FD(tree);  /* attached now: the copies' source */
        return r;
}

/* Filtered mode: the sandbox's own /etc/hosts, with only its loopback
 * names and its hostname. The host's file lists names with their real
 * addresses (internal hosts, often private): glibc would resolve those
 * inside without asking DNS, so a program would connect to a bare
 * address that no name vouches for and be refused, however the name is
 * allowed. Without them every name goes to brig's DNS stub and is judged
 * like any other; the supervisor's resolver still reads the host's file
 * when it looks the allowed name up. A host whose /etc/hosts is missing
 * or a symlink keeps what it has (names there stay bare addresses), and so
 * does a run that binds its own file there. */
static int hosts_file(int root_fd, const struct run_plan *plan, brig_error **err)
{
        for (size_t i = 0; i < plan->n_mounts; i++)
                if (plan->mounts[i].from_user && strcmp(plan->mounts[i].dst, "/etc/hosts") == 0)
                        return 0;  /* a file the user put there on purpose (--ro-bind FILE:/etc/hosts) */
        _cleanup_close_ int target = open_beneath(root_fd, "etc/hosts", 0);
        struct stat st;
        if (target < 0 || fstat(target, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        const char *name = plan->hostname;
        _cleanup_close_ int fd = openat(root_fd, HOSTS_FILE, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
        if (fd < 0 || dprintf(fd, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                                  "127.0.1.1\t%s\n", name) < 0)
                return brig_err(err, errno, "write the sandbox's /etc/hosts");
        closep(&fd);  /* a writer left open would keep "/" from turning read-only */
        _cleanup_close_ int file = open_beneath(root_fd, HOSTS_FILE, 0);
        int tree = file < 0 ? brig_err(err, errno, "open the sandbox's /etc/hosts")
                            : clone_tree(file, true, false, "/etc/hosts", err);
        if (tree < 0)
                return tree;
        int r = attach(tree, target, "/etc/hosts", err);
        close(tree);
        if (r == 0 && unlinkat(root_fd, HOSTS_FILE, 0) < 0)
                r = brig_err(err, errno, "remove '%s'", HOSTS_FILE);
        return r;
}

/* Network off: an empty /etc/resolv.conf, so every resolver (glibc,
 * musl, Go, c-ares) asks its default, port 53 of 127.0.0.1 and ::1, where
 * brig's stub answers NXDOMAIN at once and the summary names the name;
 * the host's nameserver would be unreachable, and clients take that for a
 * passing failure and retry (npm: 70 s). A symlink there (systemd-resolved's)
 * points into /run, absent inside: resolvers use the default anyway. */
static int empty_resolv_conf(int root_fd, struct mask_src *masks, brig_error **err)
{
        struct stat st;
        if (fstatat(root_fd, "etc/resolv.conf", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return 0;
        return mask_path(root_fd, masks, "/etc/resolv.conf", true, err);
}

/* Make a directory a mountpoint: a copy of itself, with every mount below
 * it (a nested grant must stay where it is) and the flags and idmap of the
 * mount it is in (open_tree copies them), attached over it. From then on
 * rename, rmdir and rename over it fail with EBUSY in this namespace. A
 * symlink a secret was named through is bound onto itself the same way
 * (unlink and rename over it: EBUSY; it still leads where it led). A
 * directory gone since the plan leaves nothing below it to protect. */
static int pin_path(int root_fd, const char *path, brig_error **err)
{
        _cleanup_close_ int target = open_beneath(root_fd, path + 1, 0);
        if (target < 0 && (errno == ENOENT || errno == ENOTDIR))
                return 0;
        if (target < 0 && errno == ELOOP)
                return brig_err(err, ELOOP, "pin '%s' (a directory holding a hidden secret): "
                                "it went through a symlink", path);
        if (target < 0)
                return brig_err(err, errno, "pin '%s' (a directory holding a hidden secret)", path);
        struct stat st;
        if (fstat(target, &st) < 0)
                return brig_err(err, errno, "pin '%s'", path);
        if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
                return 0;
        _cleanup_close_ int tree = sys_open_tree(target, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                                 (S_ISDIR(st.st_mode) ? AT_RECURSIVE : 0));
        if (tree < 0)
                return brig_err(err, errno, "open_tree '%s' (pinning a %s holding a hidden secret)", path,
                                S_ISDIR(st.st_mode) ? "directory" : "symlink to the directory");
        return attach(tree, target, path, err);
}

int mounts_new_proc(brig_error **err)
{
        /* A proc for our pid namespace: only the sandbox's processes. */
        return new_fs("proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
}

static int mount_proc(int root_fd, const struct run_plan *plan, struct mask_src *masks, int proc, brig_error **err)
{
        /* Its mount point, made now in brig's root and covered by proc at
         * once, stays empty for good: the source of the directory masks
         * (mask_path), which then need no tmpfs of their own. 0555 and the
         * builder's, as that tmpfs's root was. */
        masks->empty_dir = fresh_dir(root_fd, plan, "proc", 0555);
        _cleanup_close_ int made = masks->empty_dir < 0 ? make_mountpoint(root_fd, "/proc", false, err) : -EBADF;
        if (masks->empty_dir < 0 && made < 0)
                return made;
        int r = attach(proc, masks->empty_dir >= 0 ? masks->empty_dir : made, "/proc", err);
        if (r < 0)
                return r;
        for (size_t i = 0; proc_readonly[i]; i++) {
                char path[64];
                snprintf(path, sizeof path, "proc/%s", proc_readonly[i]);
                _cleanup_close_ int sub = open_beneath(root_fd, path, 0);
                if (sub < 0 && errno == ENOENT)
                        continue;
                if (sub < 0)
                        return brig_err(err, errno, "/%s", path);
                _cleanup_close_ int tree = clone_tree(sub, true, true, path, err);
                if (tree < 0)
                        return tree;
                r = attach(tree, sub, path, err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; proc_masked[i]; i++) {
                char path[64];
                snprintf(path, sizeof path, "/proc/%s", proc_masked[i]);
                r = mask_path(root_fd, masks, path, true, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A mount point in brig's own /dev, a tmpfs just attached that nothing
 * else can reach yet: made and opened in one or two calls rather than
 * walked from the root (O_EXCL: nothing was there, so no link either; a
 * file opened read-only, so no writer keeps /dev from turning read-only). */
static int dev_point(int devdir, const char *name, bool dir, brig_error **err)
{
        int fd;
        if (dir) {
                if (mkdirat(devdir, name, 0755) < 0)
                        return brig_err(err, errno, "create mount point '/dev/%s'", name);
                fd = open_beneath(devdir, name, O_DIRECTORY);
        } else {
                fd = openat(devdir, name, O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0444);
        }
        return fd < 0 ? brig_err(err, errno, "mount point '/dev/%s'", name) : fd;
}

/* /dev: brig's root tmpfs's own directory bound over itself (a mount,
 * nosuid and noexec, read-only at the end as the root is), rather than
 * a tmpfs of its own, the superblock's cost saved: both are brig's, of
 * 1 MiB, written only while brig builds them. Over an image's root
 * (OCI) a tmpfs of its own: the image's /dev is neither empty nor brig's. */
static int dev_tree(int root_fd, const struct run_plan *plan, int *target, brig_error **err)
{
        const unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC;
        *target = fresh_dir(root_fd, plan, "dev", 0755);
        if (*target < 0) {
                *target = make_mountpoint(root_fd, "/dev", false, err);
                return *target < 0 ? *target : new_tmpfs(1 << 20, 0755, owner_uid(plan), owner_gid(plan), attrs, err);
        }
        /* the owner a tmpfs of its own is given (new_tmpfs) */
        if ((owner_uid(plan) != builder_uid || owner_gid(plan) != builder_gid) &&
            fchownat(*target, "", owner_uid(plan), owner_gid(plan), AT_EMPTY_PATH) < 0)
                return brig_err(err, errno, "chown /dev");
        return bind_dir(*target, attrs, "/dev", err);
}

static int mount_dev(int root_fd, const struct run_plan *plan, const int *node_fds, brig_error **err)
{
        _cleanup_close_ int target = -EBADF;
        _cleanup_close_ int dev = dev_tree(root_fd, plan, &target, err);
        if (dev < 0)
                return dev;
        int r = attach(dev, target, "/dev", err);
        if (r < 0)
                return r;
        _cleanup_close_ int devdir = open_beneath(root_fd, "dev", O_DIRECTORY);
        if (devdir < 0)
                return brig_err(err, errno, "/dev");
        for (size_t i = 0; dev_nodes[i]; i++) {
                char inside[64];
                snprintf(inside, sizeof inside, "/dev/%s", dev_nodes[i]);
                /* not nodev: these are the device nodes the sandbox may use;
                 * nosuid and noexec come below, for all of them at once */
                _cleanup_close_ int tree = sys_open_tree(node_fds[i], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                if (tree < 0)
                        return brig_err(err, errno, "open_tree %s", inside);  /* the host's, same path */
                _cleanup_close_ int node = dev_point(devdir, dev_nodes[i], false, err);
                if (node < 0)
                        return node;
                r = attach(tree, node, inside, err);
                if (r < 0)
                        return r;
        }
        /* The nodes' flags in one call: /dev and everything on it so far
         * (the nodes only: /dev itself is nosuid and noexec from dev_tree)
         * become nosuid, noexec and private. Nothing of the
         * sandbox runs yet, so no node is ever used without them. */
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, .propagation = MS_PRIVATE };
        if (sys_mount_setattr(devdir, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0)
                return brig_err(err, errno, "mount_setattr /dev and its device nodes");
        /* A private devpts: the sandbox sees only its own terminals. */
        const char *pts_opts[] = { "newinstance", NULL, "ptmxmode", "0666", "mode", "0620", NULL };
        _cleanup_close_ int pts = new_fs("devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err);
        if (pts < 0)
                return pts;
        _cleanup_close_ int pts_target = dev_point(devdir, "pts", true, err);
        if (pts_target < 0)
                return pts_target;
        r = attach(pts, pts_target, "/dev/pts", err);
        if (r < 0)
                return r;
        _cleanup_close_ int shm = new_tmpfs(plan->shm_size, 01777, owner_uid(plan), owner_gid(plan),
                                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
        if (shm < 0)
                return shm;
        _cleanup_close_ int shm_target = dev_point(devdir, "shm", true, err);
        if (shm_target < 0)
                return shm_target;
        r = attach(shm, shm_target, "/dev/shm", err);
        if (r < 0)
                return r;
        static const char *const links[] = {
                "ptmx", "pts/ptmx", "fd", "/proc/self/fd", "stdin", "/proc/self/fd/0",
                "stdout", "/proc/self/fd/1", "stderr", "/proc/self/fd/2", "core", "/proc/kcore", NULL,
        };
        for (size_t i = 0; links[i]; i += 2)
                if (symlinkat(links[i + 1], devdir, links[i]) < 0)
                        return brig_err(err, errno, "symlink /dev/%s", links[i]);
        return 0;
}

static int mount_sys(int root_fd, brig_error **err)
{
        /* A fresh sysfs shows the sandbox's own network namespace, not the
         * host's interfaces; read-only. */
        _cleanup_close_ int sys = new_fs("sysfs", NULL,
                                         MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
        if (sys < 0)
                return sys;
        _cleanup_close_ int target = make_mountpoint(root_fd, "/sys", false, err);
        if (target < 0)
                return target;
        return attach(sys, target, "/sys", err);
}

static int set_readonly(int fd, const char *what, brig_error **err)
{
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
        if (sys_mount_setattr(fd, "", AT_EMPTY_PATH, &attr) < 0)
                return brig_err(err, errno, "make %s read-only", what);
        return 0;
}

static void close_all(int *fds, size_t n)
{
        for (size_t i = 0; fds && i < n; i++)
                closep(&fds[i]);
        free(fds);
}

/* Every host tree is copied before the new root is attached over "/":
 * from then on host paths are out of reach by name, and a recursive copy
 * of "/" itself would include the new root stacked on top of it. */
static int open_sources(const struct run_plan *plan, int **ret_fds, int *node_fds, brig_error **err)
{
        int *fds = calloc(plan->n_mounts + 1, sizeof *fds);
        if (!fds)
                return brig_err(err, ENOMEM, "sources");
        for (size_t i = 0; i < plan->n_mounts; i++)
                fds[i] = -EBADF;
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                /* A copy never attached is dissolved when its descriptor
                 * is closed, and that unmount waits for an RCU grace
                 * period (0.1-0.4 ms, every run as root): the idmapped
                 * tree stands in for the workspace, so none is made. */
                if (m->kind != MOUNT_BIND || uses_idmapped_tree(plan, m))
                        continue;
                _cleanup_close_ int src = open_host_source(m->src, err);
                fds[i] = src < 0 ? src
                         : overlay_is_workspace(plan, m) ? overlay_workspace_tree(plan, src, err)
                                                         : clone_tree(src, m->readonly, true, m->src, err);
                if (fds[i] < 0) {
                        int r = fds[i];
                        close_all(fds, plan->n_mounts);
                        return r;
                }
        }
        for (size_t i = 0; dev_nodes[i]; i++) {
                char host[64];
                snprintf(host, sizeof host, "/dev/%s", dev_nodes[i]);
                node_fds[i] = open_host_source(host, err);
                if (node_fds[i] < 0) {
                        close_all(fds, plan->n_mounts);
                        return node_fds[i];  /* the caller closes node_fds */
                }
        }
        *ret_fds = fds;
        return 0;
}

static int build_tree(int root, const struct run_plan *plan, int proc, const int *src_fds, const int *node_fds,
                      brig_error **err)
{
        _cleanup_(mask_src_done) struct mask_src masks = MASK_SRC_INIT;
        int r = make_symlinks(root, plan, err);
        if (r < 0)
                return r;
        /* Sorted parents first, so nested grants land on top of their parents. */
        for (size_t i = 0; i < plan->n_mounts; i++) {
                r = mount_entry(root, plan, &plan->mounts[i], src_fds[i], err);
                if (r < 0)
                        return r;
        }
        /* Files for the sandbox's tools, in its own tmpfs mounts only. */
        r = tools_populate(root, plan, err);
        if (r < 0)
                return r;
        r = mount_dev(root, plan, node_fds, err);
        if (r < 0)
                return r;
        /* An empty file to bind over hidden files (/proc's and secrets),
         * in brig's /dev: a rootfs may not be writable by brig. */
        int mask_file = openat(root, MASK_FILE, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
        if (mask_file < 0)
                return brig_err(err, errno, "create mask file");
        close(mask_file);  /* a writer left open would keep /dev from turning read-only */
        r = mount_proc(root, plan, &masks, proc, err);
        if (r < 0)
                return r;
        if (plan->mount_sys) {
                r = mount_sys(root, err);
                if (r < 0)
                        return r;
        }
        if (plan->net_mode == BRIG_NET_FILTERED) {
                r = hosts_file(root, plan, err);
                if (r < 0)
                        return r;
        }
        /* Secrets last, so no later mount can uncover one again; the
         * directories holding them first, so their copies (recursive: a
         * nested grant stays visible) are made before any mask exists and
         * the masks land on top. Parents first: each copy includes the
         * pins above it. */
        for (size_t i = 0; i < plan->pins.n; i++) {
                r = pin_path(root, plan->pins.items[i], err);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < plan->masks.n; i++) {
                r = mask_path(root, &masks, plan->masks.items[i], true, err);
                if (r < 0)
                        return r;
        }
        if (plan->net_mode == BRIG_NET_NONE) {
                r = empty_resolv_conf(root, &masks, err);
                if (r < 0)
                        return r;
        }
        /* The mounts keep the empty inode alive; the name goes. */
        if (unlinkat(root, MASK_FILE, 0) < 0)
                return brig_err(err, errno, "remove mask file");

        /* Only the grants are writable: the root and /dev become read-only. */
        _cleanup_close_ int devfd = open_beneath(root, "dev", O_DIRECTORY);
        if (devfd < 0)
                return brig_err(err, errno, "/dev");
        r = set_readonly(devfd, "/dev", err);
        if (r < 0)
                return r;
        /* A rootfs is the sandbox's to write unless it asked otherwise
         * (OCI root.readonly). */
        if (plan->rootfs && !plan->rootfs_readonly)
                return 0;
        return set_readonly(root, "/", err);
}

int mounts_build_root(const struct run_plan *plan, int proc_given, brig_error **err)
{
        _cleanup_close_ int proc = proc_given;
        builder_uid = geteuid();
        builder_gid = getegid();
        /* Nothing we do may propagate back to the host's mounts. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return brig_err(err, errno, "make mounts private");

        int *src_fds = NULL;
        int node_fds[ARRAY_SIZE(dev_nodes)];
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++)
                node_fds[i] = -EBADF;
        int r = open_sources(plan, &src_fds, node_fds, err);
        if (r < 0)
                return r;

        /* The new root is an empty tmpfs, attached over "/" of our private
         * namespace (some kernels refuse mounts onto a detached tree) —
         * or a copy of the rootfs (an OCI bundle's), opened without
         * following a symlink anywhere in its path; the layout's mounts
         * land on it as on the tmpfs, each mount point walked without
         * symlinks (make_mountpoint), so a link in the image cannot
         * redirect one to the host. */
        _cleanup_close_ int root = -EBADF;
        if (plan->rootfs) {
                _cleanup_close_ int src = open_host_source(plan->workspace, err);
                root = src < 0 ? brig_err_prefix(err, "rootfs") : clone_tree(src, false, true, plan->workspace, err);
        } else {
                root = new_tmpfs(1 << 20, 0755, owner_uid(plan), owner_gid(plan), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
        }
        if (root < 0) {
                r = brig_err_prefix(err, "new root");
                goto out;
        }
        if (sys_move_mount(root, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                r = brig_err(err, errno, "attach new root");
                goto out;
        }
        r = build_tree(root, plan, proc, src_fds, node_fds, err);
        if (r < 0)
                goto out;

        if (fchdir(root) < 0) {
                r = brig_err(err, errno, "enter new root");
                goto out;
        }
        if (sys_pivot_root(".", ".") < 0) {
                r = brig_err(err, errno, "pivot_root");
                goto out;
        }
        /* The old root now sits under the new one; detach it so no path
         * leads back to the host's filesystem. */
        if (umount2(".", MNT_DETACH) < 0) {
                r = brig_err(err, errno, "detach old root");
                goto out;
        }
        if (chdir("/") < 0)
                r = brig_err(err, errno, "chdir /");
out:
        close_all(src_fds, plan->n_mounts);
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++)
                closep(&node_fds[i]);
        return r;
}

/* The command's working directory (--cwd), resolved inside the new root
 * only. chdir() would follow /proc/self/fd/N, a magic link to whatever a
 * descriptor still open in this process refers to — one the caller leaked
 * to brig is a host directory, outside the root (CVE-2024-21626) — and the
 * command would start there. RESOLVE_IN_ROOT keeps ".." and symlinks
 * inside "/", RESOLVE_NO_MAGICLINKS refuses /proc's fd and cwd links. */
int mounts_open_cwd(const char *cwd, brig_error **err)
{
        _cleanup_close_ int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return brig_err(err, errno, "open /");
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int dir = sys_openat2(root, cwd, &how);
        if (dir < 0 && errno == ELOOP)
                return brig_err(err, ELOOP, "cwd '%s' goes through a /proc link to a descriptor", cwd);
        if (dir < 0)
                return brig_err(err, errno, "cwd '%s'", cwd);
        return dir;
}

int mounts_enter_cwd(const char *cwd, brig_error **err)
{
        _cleanup_close_ int dir = mounts_open_cwd(cwd, err);
        if (dir < 0)
                return dir;
        if (fchdir(dir) < 0)
                return brig_err(err, errno, "cwd '%s'", cwd);
        return 0;
}

/* The command's stdin, stdout and stderr come from the caller as they are.
 * A directory (or O_PATH) descriptor among them is a handle on a host
 * directory, outside the new root: openat(0, "..") or /proc/self/fd/0/x
 * reach whatever lies there, masks included (the CVE-2024-21626 pattern).
 * stdio must be something to read or write; a closed one is fine. */
int mounts_check_stdio(brig_error **err)
{
        static const char *const names[] = { "stdin", "stdout", "stderr" };
        for (int fd = 0; fd < 3; fd++) {
                int fl = fcntl(fd, F_GETFL);
                if (fl < 0 && errno == EBADF)
                        continue;
                struct stat st;
                if (fl < 0 || fstat(fd, &st) < 0)
                        return brig_err(err, errno, "%s", names[fd]);
                if (S_ISDIR(st.st_mode) || (fl & O_PATH))
                        return brig_err(err, EBADF, "%s is a directory or a path-only descriptor: a handle on a "
                                        "host directory for the command", names[fd]);
        }
        return 0;
}
