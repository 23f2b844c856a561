/* syscalls.c — thin wrappers for system calls glibc 2.36 does not wrap. */
#define _GNU_SOURCE
#include "core/syscalls.h"

#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>

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
