/* syscalls.h — system call wrappers glibc 2.36 lacks (syscalls.c). */
#ifndef BRIG_CORE_SYSCALLS_H
#define BRIG_CORE_SYSCALLS_H

#include "core/util.h"

#include <signal.h>
#include <stdint.h>

struct clone_args;
struct open_how;
struct mount_attr;
BRIG_INTERNAL long sys_clone3(struct clone_args *args);
BRIG_INTERNAL int sys_openat2(int dirfd, const char *path, struct open_how *how);
BRIG_INTERNAL int sys_open_tree(int dirfd, const char *path, unsigned flags);
BRIG_INTERNAL int sys_move_mount(int from_dirfd, const char *from, int to_dirfd, const char *to, unsigned flags);
BRIG_INTERNAL int sys_mount_setattr(int dirfd, const char *path, unsigned flags, struct mount_attr *attr);
BRIG_INTERNAL int sys_fsopen(const char *fsname, unsigned flags);
BRIG_INTERNAL int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux);
BRIG_INTERNAL int sys_fsmount(int fd, unsigned flags, unsigned attr_flags);
BRIG_INTERNAL int sys_pivot_root(const char *new_root, const char *put_old);
BRIG_INTERNAL int sys_pidfd_send_signal(int pidfd, int sig);
/* Linux 6.11+: the options of the filesystem mounted at `path` (as
 * mountinfo's last field shows them), or -1 with errno (ENOSYS, EINVAL
 * on an older kernel: ask the mount table). */
BRIG_INTERNAL int sys_mount_options(const char *path, unsigned long *magic, char *buf, size_t n);
BRIG_INTERNAL int sys_pidfd_send_siginfo(int pidfd, int sig, siginfo_t *info);
/* Linux 6.8+ (listmount): up to N ids of the mounts of this mount
 * namespace the caller can see, those after AFTER (0: from the first), in
 * the kernel's order (by id, as /proc/self/mountinfo lists them); their
 * count, or -1 with errno (ENOSYS on an older kernel). */
BRIG_INTERNAL long sys_list_mounts(uint64_t after, uint64_t *ids, size_t n);
/* Linux 6.8+ (statmount): where mount ID is, as mountinfo's fields 1, 3,
 * 4 and 5 show it: its old id, its superblock's device, the directory it
 * mounts (inside its filesystem) and its mount point, both pointing into
 * BUF (N bytes); "" for a mount point the caller's root does not reach.
 * -1 with errno (ENOENT: gone meanwhile; EINVAL: a kernel that gave not
 * all of it). */
struct sys_mount_place {
        uint32_t id_old, dev_major, dev_minor;
        const char *root, *point;
};
BRIG_INTERNAL int sys_mount_place(uint64_t id, void *buf, size_t n, struct sys_mount_place *out);

#endif
