/* syscalls.c — thin wrappers for system calls glibc 2.36 does not wrap. */
#define _GNU_SOURCE
#include "core/syscalls.h"

#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stddef.h>
#include <stdio.h>

long sys_clone3(struct clone_args *args)
{
        return syscall(SYS_clone3, args, sizeof *args);
}

/* With RESOLVE_BENEATH or RESOLVE_IN_ROOT, a ".." walked while any rename
 * or mount happens anywhere on the system fails with EAGAIN: the kernel
 * could not prove it stayed inside. Each try is checked again in full, so
 * trying again is safe; a busy host (or a sandbox renaming in a loop) must
 * not turn an ordinary path into a failure. Bounded: an attacker keeping
 * the race going gets EAGAIN, never a weaker lookup. */
int sys_openat2(int dirfd, const char *path, struct open_how *how)
{
        int fd, tries = 0;
        do
                fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof *how);
        while (fd < 0 && errno == EAGAIN && (how->resolve & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) && ++tries < 64);
        return fd;
}

int sys_open_tree(int dirfd, const char *path, unsigned flags)
{
        return (int)syscall(SYS_open_tree, dirfd, path, flags);
}

int sys_move_mount(int from_dirfd, const char *from, int to_dirfd, const char *to, unsigned flags)
{
        return (int)syscall(SYS_move_mount, from_dirfd, from, to_dirfd, to, flags);
}

int sys_mount_setattr(int dirfd, const char *path, unsigned flags, struct mount_attr *attr)
{
        return (int)syscall(SYS_mount_setattr, dirfd, path, flags, attr, sizeof *attr);
}

int sys_fsopen(const char *fsname, unsigned flags)
{
        return (int)syscall(SYS_fsopen, fsname, flags);
}

int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux)
{
        return (int)syscall(SYS_fsconfig, fd, cmd, key, value, aux);
}

int sys_fsmount(int fd, unsigned flags, unsigned attr_flags)
{
        return (int)syscall(SYS_fsmount, fd, flags, attr_flags);
}

int sys_pivot_root(const char *new_root, const char *put_old)
{
        return (int)syscall(SYS_pivot_root, new_root, put_old);
}

int sys_pidfd_send_signal(int pidfd, int sig)
{
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

int sys_pidfd_send_siginfo(int pidfd, int sig, siginfo_t *info)
{
        return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, info, 0);
}

/* statx and statmount as Linux 6.11 defines them (uapi/linux/stat.h and
 * mount.h; glibc 2.36's headers predate them): the mount's unique id, then
 * of that mount its superblock's magic and its options string. */
#ifndef SYS_statmount
#define SYS_statmount 457
#endif
#ifndef SYS_listmount
#define SYS_listmount 458
#endif
#define BRIG_STATX_MNT_ID_UNIQUE 0x4000U
#define BRIG_STATMOUNT_SB_BASIC 0x1U
#define BRIG_STATMOUNT_MNT_BASIC 0x2U
#define BRIG_STATMOUNT_MNT_ROOT 0x8U
#define BRIG_STATMOUNT_MNT_POINT 0x10U
#define BRIG_STATMOUNT_MNT_OPTS 0x80U
#define BRIG_LSMT_ROOT 0xffffffffffffffffULL

struct brig_mnt_id_req {
        uint32_t size, spare;
        uint64_t mnt_id, param;
};

struct brig_statmount {
        uint32_t size, mnt_opts;
        uint64_t mask;
        uint32_t sb_dev_major, sb_dev_minor;
        uint64_t sb_magic;
        uint32_t sb_flags, fs_type;
        uint64_t mnt_id, mnt_parent_id;
        uint32_t mnt_id_old, mnt_parent_id_old;
        uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
        uint32_t mnt_root, mnt_point;  /* offsets into str[] */
        uint64_t spare[50];  /* up to str[], at 512 */
        char str[];
};
_Static_assert(offsetof(struct brig_statmount, mnt_root) == 104, "struct statmount: mnt_root at 104");
_Static_assert(offsetof(struct brig_statmount, str) == 512, "struct statmount: its strings start at 512");

int sys_mount_options(const char *path, unsigned long *magic, char *buf, size_t n)
{
        struct statx sx;
        if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, BRIG_STATX_MNT_ID_UNIQUE, &sx) < 0)
                return -1;
        if (!(sx.stx_mask & BRIG_STATX_MNT_ID_UNIQUE)) {
                errno = ENOSYS;  /* before 6.8: the old id, which statmount does not take */
                return -1;
        }
        union {
                struct brig_statmount sm;
                char bytes[2048];
        } u;
        struct brig_mnt_id_req req = { .size = 24, .mnt_id = sx.stx_mnt_id,
                                       .param = BRIG_STATMOUNT_SB_BASIC | BRIG_STATMOUNT_MNT_OPTS };
        if (syscall(SYS_statmount, &req, &u.sm, sizeof u, 0) < 0)
                return -1;
        if (!(u.sm.mask & BRIG_STATMOUNT_SB_BASIC) || !(u.sm.mask & BRIG_STATMOUNT_MNT_OPTS) ||
            u.sm.mnt_opts >= u.sm.size - offsetof(struct brig_statmount, str)) {
                errno = EINVAL;  /* 6.8-6.10: no options */
                return -1;
        }
        *magic = (unsigned long)u.sm.sb_magic;
        snprintf(buf, n, "%s", u.sm.str + u.sm.mnt_opts);
        return 0;
}

long sys_list_mounts(uint64_t after, uint64_t *ids, size_t n)
{
        struct brig_mnt_id_req req = { .size = 24, .mnt_id = BRIG_LSMT_ROOT, .param = after };
        return syscall(SYS_listmount, &req, ids, n, 0);
}

/* A string of the reply: its offset inside the strings the kernel wrote. */
static const char *statmount_string(const struct brig_statmount *sm, uint32_t at)
{
        size_t strings = sm->size - offsetof(struct brig_statmount, str);
        if (sm->size <= offsetof(struct brig_statmount, str) || at >= strings || !memchr(sm->str + at, '\0', strings - at))
                return NULL;
        return sm->str + at;
}

int sys_mount_place(uint64_t id, void *buf, size_t n, struct sys_mount_place *out)
{
        struct brig_statmount *sm = buf;
        const uint64_t want = BRIG_STATMOUNT_SB_BASIC | BRIG_STATMOUNT_MNT_BASIC | BRIG_STATMOUNT_MNT_ROOT |
                              BRIG_STATMOUNT_MNT_POINT;
        struct brig_mnt_id_req req = { .size = 24, .mnt_id = id, .param = want };
        if (n < sizeof *sm || syscall(SYS_statmount, &req, sm, n, 0) < 0)
                return -1;
        out->root = (sm->mask & want) == want && sm->size <= n ? statmount_string(sm, sm->mnt_root) : NULL;
        out->point = out->root ? statmount_string(sm, sm->mnt_point) : NULL;
        if (!out->point) {
                errno = EINVAL;
                return -1;
        }
        out->id_old = sm->mnt_id_old;
        out->dev_major = sm->sb_dev_major;
        out->dev_minor = sm->sb_dev_minor;
        return 0;
}
