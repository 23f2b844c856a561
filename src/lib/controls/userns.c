/* userns.c — the user namespace: uid/gid maps, becoming the sandbox user,
 * and the idmapped workspace used when root runs brig on a root-owned
 * workspace. */
#define _GNU_SOURCE
#include "controls/userns.h"
#include "core/reaper.h"
#include "core/syscalls.h"

#include <fcntl.h>
#include <pthread.h>
#include <grp.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int write_file(const char *path, const char *text, brig_error **err)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return brig_err(err, errno, "open %s", path);
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t)n)
                return brig_err(err, errno, "write %s", path);
        return 0;
}

static int write_maps_for(pid_t pid, const char *uid_map, const char *gid_map, bool deny_setgroups,
                          brig_error **err)
{
        char path[64];
        int r;
        if (deny_setgroups) {
                /* Unprivileged writers must deny setgroups before writing a
                 * gid map (user_namespaces(7)); the caller's groups stay. */
                snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
                r = write_file(path, "deny", err);
                if (r < 0)
                        return r;
        }
        snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
        r = write_file(path, uid_map, err);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
        return write_file(path, gid_map, err);
}

int userns_write_maps(pid_t pid, const struct run_plan *plan, brig_error **err)
{
        char uid_map[128], gid_map[128];
        /* (the gVisor wall's root of root's workspace: 0 is the sandbox user) */
        if (!plan->map_root_for_setup || plan->sandbox_uid == 0) {
                snprintf(uid_map, sizeof uid_map, "%u %u 1\n", plan->sandbox_uid, plan->host_uid);
                snprintf(gid_map, sizeof gid_map, "%u %u 1\n", plan->sandbox_gid, plan->host_gid);
                return write_maps_for(pid, uid_map, gid_map, !plan->map_root_for_setup, err);
        }
        /* As root: inside 0 is host 0 only while the child builds the
         * sandbox (it must read root-owned bind sources and create files in
         * its tmpfs as a mapped user). Every process drops to the sandbox
         * user before any untrusted code runs, with SECBIT_NOROOT locked. */
        snprintf(uid_map, sizeof uid_map, "0 0 1\n%u %u 1\n", plan->sandbox_uid, plan->host_uid);
        char groups[BRIG_MAX_GROUPS * 24 + 64];
        int n = snprintf(groups, sizeof groups, "0 0 1\n%u %u 1\n", plan->sandbox_gid, plan->host_gid);
        /* /process/user's supplementary groups, each to its host gid */
        for (size_t i = 0; i < plan->n_groups && n > 0 && (size_t)n < sizeof groups; i++)
                n += snprintf(groups + n, sizeof groups - (size_t)n, "%u %u 1\n", plan->sandbox_groups[i],
                              plan->host_groups[i]);
        return write_maps_for(pid, uid_map, groups, false, err);
}

int userns_become_sandbox_user(const struct run_plan *plan, brig_error **err)
{
        /* Host root's supplementary groups would still grant group access
         * on host files; rootless, the caller's own groups stay (setgroups
         * is denied), which grants nothing the caller lacks. */
        if (plan->map_root_for_setup && setgroups(plan->n_groups, plan->sandbox_groups) < 0)
                return brig_err(err, errno, "setgroups");
        if (setresgid(plan->sandbox_gid, plan->sandbox_gid, plan->sandbox_gid) < 0)
                return brig_err(err, errno, "setresgid %u", plan->sandbox_gid);
        if (setresuid(plan->sandbox_uid, plan->sandbox_uid, plan->sandbox_uid) < 0)
                return brig_err(err, errno, "setresuid %u", plan->sandbox_uid);
        uid_t r, e, s;
        if (getresuid(&r, &e, &s) < 0 || r != plan->sandbox_uid || e != r || s != r)
                return brig_err(err, EPERM, "uid did not change to %u", plan->sandbox_uid);
        return 0;
}

/* The helper's whole life: it exists so that its user namespace can be
 * given a map and opened, and ends once it has been, or once brig is gone
 * (its copy of the pipe's write end closed, the read sees the end of the
 * pipe either way: no helper outlives a brig killed meanwhile). It shares
 * the caller's memory (CLONE_VM) and runs on a stack of its own with
 * every signal blocked: raw system calls only, which touch no libc state
 * (errno is set on failure alone, and none of these fails). Its stack and
 * the pipe's numbers are a mapping of their own, kept until it is reaped:
 * it may still run after the call that made it has returned. */
static int userns_helper(void *arg)
{
        const int *pipe_fds = arg;
        char c;
        syscall(SYS_close, pipe_fds[1]);
        syscall(SYS_read, pipe_fds[0], &c, 1);
        return 0;
}

#define HELPER_MAP (64 * 1024)

/* A user namespace whose only mapping is inside 0 → uid/gid, made by a
 * short-lived helper; returns an fd to it.
 *
 * The helper is a clone with CLONE_VM, not a fork: a fork copied the page
 * tables of the whole caller (brig with its libraries, or a server's big
 * heap) and tore the copy down again at its exit, and the helper then
 * had to run (unshare, a message each way) before the maps could be
 * written. Born in its namespace, this one need not run first. bench:
 * 357 us against 62 us per namespace in a 4 MiB process, 8.9 ms against
 * 0.19 ms in a 64 MiB one. Its exit signal is 0, so a caller's SIGCHLD
 * handler or waitpid(-1) never sees it. Told to end before this returns,
 * it is reaped by the caller later (userns_helper_reap, __WALL): waiting
 * for it to be scheduled and exit, on a loaded host, was most of what the
 * step still cost. */
static int userns_fd_mapping_root_to(uid_t uid, gid_t gid, struct userns_helper *helper, brig_error **err)
{
        /* the pipe's numbers at the bottom, the stack growing down from the top */
        void *map = mmap(NULL, HELPER_MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (map == MAP_FAILED)
                return brig_err(err, errno, "mmap");
        int *pipe_fds = map;
        if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
                int e = errno;
                munmap(map, HELPER_MAP);
                return brig_err(err, e, "pipe");
        }
        sigset_t all, saved;
        sigfillset(&all);
        /* the helper inherits this thread's mask: nothing can run a
         * handler of the caller's on its stack in the caller's memory */
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        pid_t pid = clone(userns_helper, (char *)map + HELPER_MAP, CLONE_VM | CLONE_NEWUSER, pipe_fds);
        int clone_errno = errno;
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (pid < 0) {
                close(pipe_fds[0]);
                close(pipe_fds[1]);
                munmap(map, HELPER_MAP);
                return brig_err(err, clone_errno, "helper user namespace for the idmapped workspace");
        }
        helper->pid = pid;
        helper->map = map;
        test_pause("idmap-helper");
        int ret = -1;
        char uid_map[64], gid_map[64], path[64];
        snprintf(uid_map, sizeof uid_map, "0 %u 1\n", uid);
        snprintf(gid_map, sizeof gid_map, "0 %u 1\n", gid);
        snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
        if (write_maps_for(pid, uid_map, gid_map, false, err) < 0)
                goto out;
        ret = open(path, O_RDONLY | O_CLOEXEC);
        if (ret < 0)
                ret = brig_err(err, errno, "open %s", path);
out:
        /* the last write end (the helper closed its own copy): it ends */
        close(pipe_fds[1]);
        close(pipe_fds[0]);
        return ret;
}

void userns_helper_reap(struct userns_helper *helper)
{
        if (helper->pid <= 0)
                return;
        while (waitpid(helper->pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
        munmap(helper->map, HELPER_MAP);
        *helper = (struct userns_helper)USERNS_HELPER_INIT;
}

int userns_idmapped_workspace(const struct run_plan *plan, int *ret_fd, struct userns_helper *helper,
                              brig_error **err)
{
        /* Files the workspace holds as host root appear owned by the sandbox
         * user, and files it creates land on disk as root: the workspace
         * stays as root expects without the sandbox ever being root. */
        _cleanup_close_ int userns_fd = userns_fd_mapping_root_to(plan->host_uid, plan->host_gid, helper, err);
        if (userns_fd < 0)
                return brig_err_prefix(err, "idmapped workspace");
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_DIRECTORY,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int src = sys_openat2(AT_FDCWD, plan->workspace, &how);
        if (src < 0)
                return brig_err(err, errno, "workspace '%s' (symlinks are not followed)", plan->workspace);
        _cleanup_close_ int tree = sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (tree < 0)
                return brig_err(err, errno, "open_tree workspace '%s'", plan->workspace);
        struct mount_attr attr = {
                .attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .userns_fd = (uint64_t)userns_fd,
        };
        if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0)
                return brig_err(err, errno, "idmapped mount of workspace '%s' (does its filesystem support idmapped mounts?)",
                                plan->workspace);
        *ret_fd = TAKE_FD(tree);
        return 0;
}

int userns_forbid_nesting(int proc, brig_error **err)
{
        /* The limit is per user namespace and applies to namespaces created
         * inside ours; the sandbox can never raise it again (it has no
         * CAP_SYS_RESOURCE, and /proc/sys is read-only inside). The seccomp
         * filter refuses unshare/clone flags too: two independent walls. */
        _cleanup_close_ int fd = openat(proc, "sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                return brig_err(err, errno, "set user.max_user_namespaces = 0 in the sandbox's user namespace");
        return 0;
}
