/* syscalls.h — system call wrappers glibc 2.36 lacks (syscalls.c). */
#ifndef BRIG_CORE_SYSCALLS_H
#define BRIG_CORE_SYSCALLS_H

#include "core/util.h"

#include <signal.h>

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

#endif
