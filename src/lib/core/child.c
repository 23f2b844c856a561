/* child.c — the run sequence inside the new namespaces, top to bottom.
 *
 * This process is pid 1 of the sandbox. It builds the sandbox while it
 * still holds capabilities in its user namespace, gives them all up, then
 * forks the command and stays behind as its init (init.c). Any failure is
 * sent to the supervisor as one message and the process exits 125. */
#define _GNU_SOURCE
#include "core/sync.h"
#include "core/sequence.h"
#include "core/timings.h"
#include "core/wall.h"
#include "controls/userns.h"
#include "controls/timens.h"
#include "controls/mounts.h"
#include "controls/rlimit.h"
#include "controls/caps.h"
#include "controls/cgroup.h"
#include "controls/terminal.h"
#include "net/netns.h"
#include "controls/landlock.h"
#include "controls/seccomp_filter.h"
#include "net/intercept.h"
#include "tools/tools.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/close_range.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <limits.h>

extern char **environ;

static int wait_for_maps(int sync_fd, brig_error **err)
{
        struct sync_msg m;
        int r = sync_recv(sync_fd, &m, NULL);
        if (r == 0)
                _exit(BRIG_EXIT_SETUP);  /* the supervisor is gone: nobody to serve */
        if (r < 0 || m.type != SYNC_GO)
                return brig_err(err, r < 0 ? -r : EPROTO, "waiting for the uid map");
        return 0;
}

static int still_supervised(int sync_fd)
{
        struct pollfd p = { .fd = sync_fd, .events = POLLIN };
        return !(poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)));
}

/* A pty in our own devpts, opened as the sandbox user; the master goes to
 * the supervisor, the slave stays for the command. */
static int send_terminal(struct run_plan *plan, brig_error **err)
{
        int master, slave;
        int r = terminal_create_inside(&master, &slave, err);
        if (r < 0)
                return r;
        struct sync_msg m = { .type = SYNC_PTY };
        r = sync_send_fd(plan->sync_fd, &m, master);
        close(master);
        if (r < 0) {
                close(slave);
                return brig_err(err, -r, "send the pty to the supervisor");
        }
        plan->pty_slave_fd = slave;
        return 0;
}

/* The network step's sockets, made in our network namespace, go to the
 * supervisor in one message (each one more was a wakeup of the supervisor
 * while we waited for the CPU): the proxy's listening sockets or the DNS
 * stub's, which the supervisor serves from the host side, so nothing of
 * the proxy runs in here and nothing listens on the host's network; and
 * the socket the unix socket guard (unixguard.c) asks which unix sockets
 * the sandbox's processes have bound, made here so it belongs to the
 * sandbox's network namespace (no capability needed). The message's text
 * is why filtered mode fell back, if it did (filter_egress). */
#ifdef BRIG_TEST_HOOKS
/* Test builds only: BRIG_TEST_FORGE_NETWORK=count|kind|diag makes pid 1
 * lie about its sockets, for the supervisor's checks of each one
 * (tests/integration/test_sync_network.py). */
static void forge_network(struct sync_msg *m, int fds[], int n)
{
        const char *forge = getenv("BRIG_TEST_FORGE_NETWORK");
        if (!forge || n == 0)
                return;
        if (strcmp(forge, "count") == 0) {
                m->status = n - 1;
        } else if (strcmp(forge, "kind") == 0) {
                m->kinds[0] = 99;
        } else if (strcmp(forge, "diag") == 0 && m->kinds[n - 1] == SYNC_SOCKET_UNIX_DIAG) {
                int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                if (udp >= 0) {
                        close(fds[n - 1]);
                        fds[n - 1] = udp;
                }
        }
}
#endif

static int send_network(const struct run_plan *plan, struct sync_msg *m, bool ipv6_redirect, brig_error **err)
{
        int fds[SYNC_MAX_FDS];
        enum egress_listener_kind kinds[SYNC_MAX_FDS];
        int n = 0;
        if (plan->net_mode != BRIG_NET_HOST) {
                /* one place left for the guard's */
                n = egress_make_listeners(fds, kinds, SYNC_MAX_FDS - 1, plan->net_mode, ipv6_redirect, err);
                if (n < 0)
                        return brig_err_prefix(err, "%s", plan->net_mode == BRIG_NET_NONE ? "network off: DNS stub"
                                                                                         : "network proxy");
        }
        for (int i = 0; i < n; i++)
                m->kinds[i] = (int)kinds[i];
        int r = 0;
        if (!plan->seccomp_degraded) {
                fds[n] = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
                if (fds[n] < 0)
                        r = brig_err(err, errno, "unix socket guard: socket(NETLINK_SOCK_DIAG)");
                else
                        m->kinds[n++] = SYNC_SOCKET_UNIX_DIAG;
        }
        m->type = SYNC_NETWORK;
        m->status = n;
#ifdef BRIG_TEST_HOOKS
        forge_network(m, fds, n);
#endif
        if (r == 0 && (n || m->text[0]) && (r = sync_send_fds(plan->sync_fd, m, fds, (size_t)n)) < 0)
                r = brig_err(err, -r, "network: send its sockets to the supervisor");
        while (n)
                close(fds[--n]);
        return r;
}

/* Filtered mode: the nftables redirect, then the routes that let a
 * connect() reach it (rules without routes change nothing, so a failure
 * in between leaves plain proxy mode). Where the host can't, and the
 * policy did not insist on filtered, proxy mode it is, and the
 * supervisor is told why, for the report (m's text, send_network). */
static int filter_egress(struct run_plan *plan, struct sync_msg *m, bool *ipv6, brig_error **err)
{
        *ipv6 = false;
        int r = netfilter_redirect_egress(err);
        if (r == 0)
                r = netns_route_through_loopback(ipv6, err);
        if (r == 0 || plan->net_filtered_required)
                return r;
        snprintf(m->text, sizeof m->text, "%s", err && *err ? (*err)->msg : "unknown error");
        brig_error_free(err);
        plan->net_mode = BRIG_NET_PROXY;
        return 0;
}

#define STEP(call, name)                                          \
        do {                                                      \
                int _r = (call);                                  \
                if (_r < 0)                                       \
                        return brig_err_prefix(err, "%s", name);  \
        } while (0)

static int child_setup(struct run_plan *plan, brig_error **err)
{
        /* brig's own umask while it builds the sandbox: a mount point it
         * makes inside (/run for /run/brig) must be searchable by the
         * sandbox user whatever the caller's umask (077: Landlock's open of
         * /run/brig failed, every run as root). The command gets the
         * caller's (command_exec). */
        umask(022);
        /* First: no terminal of the caller's stays among our descriptors. */
        STEP(terminal_child_stdio(plan->term, err), "terminal");
        /* Die with the supervisor, even when it is SIGKILLed; as pid 1 our
         * death takes every process of the sandbox with it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_PDEATHSIG");
        STEP(wait_for_maps(plan->sync_fd, err), "user namespace");
        timings_mark(plan->timings, TM_CHILD_GO);
        /* While dumpable: /proc/self/oom_score_adj is ours to write only then. */
        STEP(rlimits_oom_first(plan, err), "OOM score");
        /* No other process of the caller's may ptrace us or read our memory
         * while we hold capabilities. Only now: a non-dumpable process's
         * /proc files belong to root, and a rootless supervisor could no
         * longer write our uid map. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_DUMPABLE");
        /* Out of the caller's process group, so that what the terminal or
         * a shell sends to it (Ctrl-C, Ctrl-Z, a hangup, kill -INT -PGID)
         * reaches brig alone, which forwards it once. Only the group, not
         * a session of our own: setsid also makes a scheduler autogroup
         * and asks for a reschedule, and the supervisor, sweeping what
         * dead brigs left, then had the CPU for all of its work while we
         * waited (0.15-0.25 ms; bench/floor.c setsid_beside_busy). We
         * hold no terminal (terminal_child_stdio; init_detach_stdio), and
         * nothing of the sandbox ever runs in our session: every process
         * we fork leads a session of its own before it runs anything
         * (command_confine), so the caller's terminal stays out of reach
         * of /dev/tty, TIOCSTI and TIOCSCTTY (test_session.py). */
        if (setpgid(0, 0) < 0)
                return brig_err(err, errno, "setpgid");
        if (sethostname(plan->hostname, strlen(plan->hostname)) < 0)
                return brig_err(err, errno, "sethostname");
        if (plan->net_mode != BRIG_NET_HOST)
                STEP(netns_loopback_up(err), "network");
        bool ipv6_redirect = false;
        struct sync_msg net = { 0 };
        if (plan->net_mode == BRIG_NET_FILTERED)
                STEP(filter_egress(plan, &net, &ipv6_redirect, err), "network (filtered mode: nftables)");
        /* network off: the DNS stub's, so names fail at once, and say why;
         * its errors name their step (network proxy, DNS stub, guard) */
        int r = send_network(plan, &net, ipv6_redirect, err);
        if (r < 0)
                return r;
        timings_mark(plan->timings, TM_NET);
        /* The sysctls go through the sandbox's own proc, made now and
         * mounted at /proc later: a name looked up in the host's /proc/sys
         * from our user namespace leaves the host's dentry cache an entry
         * of this namespace's beside the host's own, which outlives the
         * sandbox by seconds, and the host's next lookups of that name
         * walk every such entry (brig's check_host read
         * /proc/sys/user/max_user_namespaces in 57 us after 200 runs,
         * 5 us after none). */
        _cleanup_close_ int proc = mounts_new_proc(err);
        if (proc < 0)
                return brig_err_prefix(err, "filesystem");
        STEP(userns_forbid_nesting(proc, err), "user namespace");
        /* While still root in the user namespace: the kernel grants the
         * ipc sysctls to uid 0 there, not to a capability. */
        STEP(ipc_limits_apply(plan, proc, err), "IPC limits");
        timings_mark(plan->timings, TM_SYSCTLS);
        /* Into the v1 groups (v2: born there), sent by the supervisor,
         * which made them meanwhile: while this is the only process and
         * thread of the sandbox, so whatever it starts inherits them, and
         * before the mounts, whose memory the kernel charges to the
         * memory group (all but the superblock of the sandbox's proc,
         * made above for the sysctls). Fails the run, never runs it
         * outside. */
        STEP(cgroup_join_self(plan->cgroup, plan->sync_fd, err), "cgroup");
        timings_mark(plan->timings, TM_ATTACHED);
        STEP(mounts_build_root(plan, TAKE_FD(proc), err), "filesystem");
        timings_mark(plan->timings, TM_MOUNTS);
        /* a rootfs workspace is "/" here */
        if (chdir(plan->rootfs ? "/" : plan->workspace) < 0)
                return brig_err(err, errno, "enter workspace '%s'", plan->workspace);
        STEP(tools_finish_inside(plan, err), "tools");
        /* Needs CAP_SYS_ADMIN and CAP_SYS_TIME of our user namespace. */
        if (plan->clock_pinned)
                STEP(timens_apply(plan, err), "--clock-start");
        /* Privileges, in the only order that works: the bounding set needs
         * CAP_SETPCAP, the uid change needs CAP_SETUID, and the last capset
         * clears what a same-uid change (rootless) leaves. */
        /* The gVisor wall: runsc needs root of our user namespace to
         * build its own sandbox; the command never runs here, but under
         * gVisor's kernel, as the plan's user there (wall_gvisor.c). */
        if (plan->wall != BRIG_WALL_GVISOR) {
                STEP(caps_drop_bounding(err), "capabilities");
                STEP(userns_become_sandbox_user(plan, err), "user");
                STEP(caps_drop_all(err), "capabilities");
        }
        if (plan->tty)
                STEP(send_terminal(plan, err), "terminal");
        /* The uid change cleared the parent-death signal (prctl(2)). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_PDEATHSIG");
        if (!still_supervised(plan->sync_fd))
                _exit(BRIG_EXIT_SETUP);
        timings_mark(plan->timings, TM_PRIVS);
        return 0;
}

static void reset_signals(void)
{
        /* Through the system call: glibc's signal() refuses its own two
         * (SIGCANCEL and SIGSETXID, 32 and 33), which posix_spawn leaves
         * ignored in the child of a parent that had handlers for them —
         * brig-supervisor of a persistent sandbox, so pid 1 and every exec
         * — and an ignored signal stays ignored across execve: a pooled
         * run's command ignored 32 and 33, a cold run's did not. */
        struct {
                void *handler;
                unsigned long flags;
                void *restorer;
                uint64_t mask;
        } dfl = { .handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);  /* EINVAL for SIGKILL/SIGSTOP */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}

static int prepare_fds(const struct run_plan *plan, brig_error **err)
{
        if (plan->pty_slave_fd >= 0) {
                if (ioctl(plan->pty_slave_fd, TIOCSCTTY, 0) < 0)
                        return brig_err(err, errno, "make the pty the controlling terminal");
                for (int fd = 0; fd < 3; fd++)
                        if (dup2(plan->pty_slave_fd, fd) < 0)
                                return brig_err(err, errno, "dup2 pty");
        }
        int r = mounts_check_stdio(err);
        if (r < 0)
                return r;
        /* Every inherited descriptor but 0, 1, 2 is closed at execve (the
         * sync socket must live until then to report an exec failure);
         * --pass-fd keeps one on purpose. */
        if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                return brig_err(err, errno, "close_range");
        for (size_t i = 0; i < plan->n_pass_fds; i++) {
                int fd = plan->pass_fds[i];
                int flags = fcntl(fd, F_GETFD);
                if (flags < 0 || fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0)
                        return brig_err(err, errno, "--pass-fd %d", fd);
        }
        return 0;
}

/* The shortest prefix of `path` that does not exist here: the directory
 * a grant would have to add ("/root/.pyenv" for a link into it), with
 * its existing parent spelt without "..", links or a relative start. */
static bool first_missing(const char *path, char *buf, size_t n)
{
        struct stat st;
        char *slash = NULL;
        bool above = false;
        snprintf(buf, n, "%s", path);
        for (char *s = buf + 1; (s = strchr(s, '/')); s++) {
                *s = '\0';
                bool there = lstat(buf, &st) == 0;
                *s = '/';
                if (!there) {
                        *s = '\0';
                        above = true;
                        break;
                }
        }
        /* Only the last name missing: its directory is in the sandbox, so
         * no grant would show it (dangling on the host too, or a secret). */
        if (!above || !(slash = strrchr(buf, '/')))
                return false;
        *slash = '\0';
        _cleanup_free_ char *parent = realpath(*buf ? buf : "/", NULL);
        char *last = brig_strdup_printf("%s", slash + 1);
        *slash = '/';
        if (parent && last)
                snprintf(buf, n, "%s/%s", strcmp(parent, "/") ? parent : "", last);
        free(last);
        return true;
}

/* execvp found nothing: is the reason a link to where the sandbox shows
 * nothing (a toolchain in $HOME: pyenv, nvm, rustup; a directory not
 * granted)? Then say where it points and what grant would show it. Read
 * here, inside, as the sandbox user, before anything of the command ran:
 * readlink and lstat never follow a link, and the host is not asked about
 * paths the sandbox named. */
static void missing_link_hint(const struct run_plan *plan, char *buf, size_t n)
{
        const char *name = plan->argv[0], *path = "";
        for (char *const *e = plan->envp; e && *e && !strchr(name, '/'); e++)
                if (strncmp(*e, "PATH=", 5) == 0)
                        path = *e + 5;
        buf[0] = '\0';
        for (const char *dir = path;;) {
                const char *end = strchrnul(dir, ':');
                char link[PATH_MAX], at[PATH_MAX], target[PATH_MAX];
                if (strchr(name, '/'))
                        snprintf(link, sizeof link, "%s", name);
                else
                        snprintf(link, sizeof link, "%.*s/%s", (int)(end - dir), end > dir ? dir : ".", name);
                snprintf(at, sizeof at, "%s", link);
                struct stat st;
                for (int hop = 0; hop < 8 && lstat(at, &st) == 0 && S_ISLNK(st.st_mode); hop++) {
                        ssize_t len = readlink(at, target, sizeof target - 1);
                        if (len < 0)
                                break;
                        target[len] = '\0';
                        if (target[0] != '/') {  /* relative to the link's directory */
                                char *slash = strrchr(at, '/');
                                char rel[PATH_MAX];
                                if (snprintf(rel, sizeof rel, "%.*s/%s", slash ? (int)(slash - at) : 1,
                                             slash ? at : ".", target) >= (int)sizeof rel)
                                        break;
                                memcpy(target, rel, sizeof target);
                        }
                        if (lstat(target, &st) < 0 && (errno == ENOENT || errno == ENOTDIR)) {
                                char grant[PATH_MAX];
                                int used = first_missing(target, grant, sizeof grant)
                                        ? snprintf(buf, n, ": '%s' is a link to '%s', which is not in the sandbox "
                                                           "(grant it with --ro-bind %s)", link, target, grant)
                                        : snprintf(buf, n, ": '%s' is a link to '%s', which does not exist",
                                                   link, target);
                                if (used >= (int)n)
                                        buf[0] = '\0';  /* a cut path would mislead */
                                /* The names are the sandbox's (a link it left in the
                                 * workspace): text on one line, no control bytes to
                                 * forge a line of brig's own (the CLI escapes the rest). */
                                for (char *c = buf; *c; c++)
                                        if ((unsigned char)*c < 0x20 || *c == 0x7f)
                                                *c = '?';
                                return;
                        }
                        snprintf(at, sizeof at, "%s", target);
                }
                if (strchr(name, '/') || !*end)
                        return;
                dir = end + 1;
        }
}

int command_confine(const struct run_plan *plan, uint64_t *inherited, brig_error **err)
{
        timings_mark(plan->timings, TM_FORKED);
        reset_signals();
        /* A session of its own: TIOCSTI reaches only a terminal that is
         * this session's controlling terminal — its own pty, or none. */
        if (setsid() < 0)
                return brig_err(err, errno, "setsid");
        int r = prepare_fds(plan, err);
        if (r < 0)
                return r;
        umask(plan->umask);  /* /process/umask, else the caller's (plan.c) */
        if (plan->wall == BRIG_WALL_GVISOR) {
                /* rlimits, cwd, user and env are the bundle's: they hold
                 * inside gVisor, not on runsc itself */
                r = wall_gvisor_exec(plan, err);  /* returns only when it failed */
                return r < 0 ? r : -EIO;
        }
        if (plan->cwd && (r = mounts_enter_cwd(plan->cwd, err)) < 0)
                return r;
        if ((r = rlimits_apply(plan, err)) < 0)
                return r;
        /* Nested user namespaces are off (max_user_namespaces is 0 inside):
         * check it holds, as bwrap does, before handing over. */
        if (unshare(CLONE_NEWUSER) == 0)
                return brig_err(err, EPERM, "a nested user namespace could still be created");
        /* A file operation goes on in this fork of pid 1 without an
         * execve: what it inherited counts toward RLIMIT_DATA (rlimit.c).
         * Read while /proc/self is still ours to read. */
        *inherited = plan->fileop ? rlimits_data_in_use() : 0;
        /* Landlock after the mounts it mirrors; it needs no_new_privs,
         * which pid 1 set before forking us. */
        if ((r = landlock_apply(plan, err)) < 0)
                return r;
        timings_mark(plan->timings, TM_LANDLOCK);
        /* seccomp last: the filter need not allow any setup call. */
        if ((r = seccomp_apply(plan, err)) < 0)
                return r;
        timings_mark(plan->timings, TM_SECCOMP_LOAD);
        return 0;
}

_Noreturn void command_become(const struct run_plan *plan, uint64_t inherited)
{
        brig_error *err = NULL;
        /* Last before the command: where no cgroup bounds memory, the
         * limit that stands in for it leaves brig's own setup alone. */
        if (rlimits_apply_memory_fallback(plan, inherited, &err) < 0) {
                brig_err_prefix(&err, "command");
                sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                _exit(BRIG_EXIT_SETUP);
        }
        if (plan->fileop)
                fileop_main(plan);  /* as confined as the command it stands for */
        environ = plan->envp;  /* execvp searches the sandbox's PATH */
        /* The last stamp: execve drops the shared page (timings.h). */
        timings_mark(plan->timings, TM_EXEC);
        execvp(plan->argv[0], plan->argv);
        int e = errno;
        bool missing = e == ENOENT || e == ENOTDIR;
        char hint[600] = "";
        if (missing)
                missing_link_hint(plan, hint, sizeof hint);
        brig_err_code(&err, missing ? BRIG_EXIT_NOT_FOUND : BRIG_EXIT_NOT_EXECUTABLE, e, "%s '%s'%s",
                      missing ? "command not found" : "cannot execute", plan->argv[0], hint);
        sync_send_error(plan->sync_fd, SYNC_EXEC_FAILED, err);
        _exit(err->exit_code);
}

_Noreturn void command_exec(const struct run_plan *plan)
{
        brig_error *err = NULL;
        uint64_t inherited = 0;
        if (command_confine(plan, &inherited, &err) < 0) {
                brig_err_prefix(&err, "command");
                sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                _exit(BRIG_EXIT_SETUP);
        }
        command_become(plan, inherited);
}

_Noreturn void child_main(struct run_plan *plan)
{
        brig_error *err = NULL;
        /* A copy of brig's memory: an env:VAR secret's value is in the
         * environment it inherited (the vault itself reads as zeros here). */
        intercept_scrub_environ(plan->intercept_policy);
        closep(&plan->report_fd);  /* the supervisor's alone */
        closep(&plan->audit_fd);
        if (child_setup(plan, &err) < 0) {
                sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                cgroup_join_abandon(plan->cgroup, plan->sync_fd);
                _exit(BRIG_EXIT_SETUP);
        }
        if (plan->persistent)
                persist_init_main(plan);  /* brig create: commands come later, through brig exec */
        /* vfork: the command's last setup (Landlock, seccomp, its fds and
         * limits: each the task's own, none shared with us) runs in our
         * memory until its execve, while we wait; a fork copied our page
         * tables — a copy of brig's — for the exec to throw away, and
         * faulted in copies of every page either side wrote. execvp sets
         * environ, a variable of ours: put back once it has exec'd. */
        char **own_environ = environ;
        pid_t pid = vfork();
        environ = own_environ;
        if (pid < 0) {
                brig_err(&err, errno, "fork the command");
                sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                _exit(BRIG_EXIT_SETUP);
        }
        if (pid == 0)
                command_exec(plan);
        init_main(plan, pid);
}
