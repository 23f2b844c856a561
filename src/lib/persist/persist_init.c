/* persist_init.c — pid 1 of a persistent sandbox (brig create).
 *
 * It has built the sandbox and dropped every privilege like the pid 1 of
 * `brig run` (child.c); instead of one command it then waits for exec
 * requests from the supervisor. Each request arrives as a socket of its
 * own carrying argv, environment, cwd and the client's stdio; pid 1 forks
 * and the child takes exactly the path of `brig run`'s command
 * (command_exec: setsid, fds, cwd, rlimits, Landlock, seccomp, execve), so
 * an exec is as confined as a run: same user, namespaces, cgroup, mounts,
 * Landlock rules and syscall filter, with nothing re-entered from the host
 * (no setns, no second privilege drop to get right). The command's wait
 * status goes back on its socket; a client that goes away takes its
 * command down. A detached exec (brig exec --detach) has no client to wait
 * for it: its output goes to a log in the sandbox's /tmp, pid 1 says its
 * pid and lets the socket go, and the command runs until it exits (its
 * timeout still applies) or the sandbox stops. When pid 1 exits, the
 * kernel kills everything left.
 *
 * The spare: so that an exec costs one message and one execve, the
 * supervisor hands pid 1 the socket of the next exec ahead of it
 * (SYNC_SPARE) and pid 1 forks a child for it at once, which takes the
 * same path (command_confine: session, fds, rlimits, Landlock, seccomp)
 * and then waits. What is the request's — argv, environment, stdio, the
 * cwd (resolved here by pid 1, as command_exec would, when the request
 * comes: openat2 is ENOSYS under the filter) — reaches it only then, and
 * it keeps nothing of pid 1's: every descriptor but its two sockets goes
 * at fork. A tty, detached or file-operation exec, or one that comes
 * before the spare said it is ready, is forked as before. */
#define _GNU_SOURCE
#include "core/sync.h"
#include "core/sequence.h"
#include "core/footprint.h"
#include "controls/landlock.h"
#include "controls/mounts.h"
#include "controls/terminal.h"
#include "core/wall.h"
#include "persist/control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

struct exec_slot {
        pid_t pid;
        int fd;                 /* the exec's socket to the supervisor, -1 once closed */
        uint64_t deadline_ms;   /* SIGTERM (then SIGKILL) at this time; 0: none */
        bool timed_out;
        bool last;              /* a pool member's one run (CTL_EXEC_LAST) */
};

/* How long an exec waits for a spare still confining itself (a fork
 * would take about as long) before it is forked instead. */
#define SPARE_WAIT_MS 50

/* The pre-forked child (above) and the exec socket it is for. */
struct spare {
        pid_t pid;              /* 0: none alive */
        int fd;                 /* the next exec's socket, from the supervisor; -1: none */
        int ctl;                /* our end of the socket the child takes its request from */
        bool ready;             /* it is confined and can receive (its one byte came) */
};

struct persist {
        struct run_plan *plan;
        struct spare spare;
        struct exec_slot *slots;
        size_t n;
        bool stopping;
        pid_t gvisor;           /* --wall gvisor: the runsc sandbox every exec enters */
        bool sealed;            /* a pool member's run began: no other exec */
};

static const int handled[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2 };

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The create-time environment with the exec's --env on top. */
static char **merge_env(char **base, char **extra)
{
        size_t nb = 0, ne = 0;
        while (base && base[nb])
                nb++;
        while (extra && extra[ne])
                ne++;
        char **out = calloc(nb + ne + 1, sizeof *out);
        if (!out)
                return NULL;
        size_t n = 0;
        for (size_t i = 0; i < nb; i++) {
                size_t klen = strcspn(base[i], "=");
                bool overridden = false;
                for (size_t j = 0; j < ne && !overridden; j++)
                        overridden = strncmp(extra[j], base[i], klen + 1) == 0;
                if (!overridden)
                        out[n++] = base[i];
        }
        for (size_t j = 0; j < ne; j++)
                out[n++] = extra[j];
        return out;
}

static void send_failure(int fd, const char *what, int errnum)
{
        brig_error *err = NULL;
        brig_err(&err, errnum, "exec: %s", what);
        sync_send_error(fd, SYNC_ERROR, err);
        brig_error_free(&err);
}

/* A detached command's stdio, in the child (the sandbox user, inside):
 * /dev/null in, the log out. The log is made new — O_EXCL, O_NOFOLLOW — so
 * nothing planted at its name (a file, a symlink, a FIFO that would block
 * the open) is written to or followed. What is at the name goes first:
 * the log of an earlier process with this pid (a restored snapshot's /tmp
 * comes back while pids start again, so `brig exec --detach` failed after
 * `brig restore`) or a plant; unlink() follows no link. A name that is
 * back at once (or a directory) fails the exec, saying so. */
static int detach_stdio(int fd)
{
        char log[64], what[128];
        snprintf(log, sizeof log, CTL_DETACH_LOG, (int)getpid());
        _cleanup_close_ int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in < 0) {
                send_failure(fd, "open /dev/null", errno);
                return -1;
        }
        (void)unlink(log);  /* ENOENT mostly; any other failure shows as EEXIST below */
        _cleanup_close_ int out = open(log, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0) {
                snprintf(what, sizeof what, "the log %s (made new, never through a link)", log);
                send_failure(fd, what, errno);
                return -1;
        }
        if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) {
                send_failure(fd, "stdio", errno);
                return -1;
        }
        return 0;
}

/* The forked child: become the command (never returns). */
static _Noreturn void exec_child(struct persist *ps, const struct exec_request *req, int fd, const int *stdio,
                                 int slave)
{
        struct run_plan plan = *ps->plan;  /* our own copy after fork */
        if (req->cwd)
                plan.cwd = req->cwd;
        plan.n_pass_fds = 0;  /* brig create refuses --pass-fd; nothing to keep */
        plan.argv = req->argv;
        plan.envp = merge_env(ps->plan->envp, req->env);
        plan.sync_fd = fd;
        plan.pty_slave_fd = slave;
        plan.tty = slave >= 0;  /* the gVisor wall makes gVisor's terminal of it */
        plan.fileop = req->flags & CTL_EXEC_FILEOP;
        if (!plan.envp) {
                send_failure(fd, "environment", ENOMEM);
                _exit(BRIG_EXIT_SETUP);
        }
        if (req->flags & CTL_EXEC_DETACH) {
                if (detach_stdio(fd) < 0)
                        _exit(BRIG_EXIT_SETUP);
        } else if (slave < 0)
                for (int i = 0; i < 3; i++)
                        if (dup2(stdio[i], i) < 0) {
                                send_failure(fd, "stdio", errno);
                                _exit(BRIG_EXIT_SETUP);
                        }
        command_exec(&plan);
}


/* Every descriptor but the three given (-1: none) is closed. */
static void close_all_but(int a, int b, int c)
{
        int keep[3] = { a, b, c };
        for (int i = 0; i < 3; i++)  /* sorted, so the gaps run upward */
                for (int j = i + 1; j < 3; j++)
                        if (keep[j] < keep[i]) {
                                int t = keep[i];
                                keep[i] = keep[j];
                                keep[j] = t;
                        }
        unsigned from = 3;
        for (int i = 0; i < 3; i++) {
                if (keep[i] < (int)from)
                        continue;
                if ((unsigned)keep[i] > from)
                        syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
                from = (unsigned)keep[i] + 1;
        }
        syscall(SYS_close_range, from, ~0U, 0);
}

/* The spare, in the child: confine, then wait for the one request pid 1
 * forwards (header and payload as the supervisor sent them; stdin,
 * stdout, stderr and the cwd's directory, if any). Never returns. */
static _Noreturn void spare_main(struct persist *ps, int sock, int ctl)
{
        struct run_plan plan = *ps->plan;  /* our own copy after fork */
        plan.sync_fd = sock;  /* the listener and any failure go to the exec's supervisor end */
        plan.n_pass_fds = 0;
        plan.pty_slave_fd = -1;
        plan.tty = false;
        plan.fileop = false;
        plan.cwd = NULL;  /* the request's, resolved by pid 1 when it comes */
        /* pid 1's other descriptors (the sync socket, running execs'
         * sockets, what a request in flight holds) are not ours to keep
         * until the request: closed now, before anything else. */
        close_all_but(sock, ctl, plan.landlock_ruleset_fd);
        brig_error *err = NULL;
        uint64_t inherited = 0;
        /* What the request needs is allocated before the limits: the
         * fork of an exec allocates before them too. */
        char *buf = malloc(CTL_MAX_MSG);
        if (!buf)
                _exit(BRIG_EXIT_SETUP);
        /* A failure here is said by nobody: pid 1 forks the exec instead,
         * and that child reports the same failure to its client. */
        if (command_confine(&plan, &inherited, &err) < 0)
                _exit(BRIG_EXIT_SETUP);
        /* Ready only if the filter lets the request in: a policy may
         * refuse recvmsg (or write), and then nothing is ready. */
        char one = 'r';
        struct msghdr probe = { 0 };
        if (recvmsg(ctl, &probe, MSG_DONTWAIT) >= 0 || errno != EAGAIN || write(ctl, &one, 1) != 1)
                _exit(BRIG_EXIT_SETUP);
        int fds[CTL_MAX_FDS], nfds = 0;
        struct exec_request req = { 0 };
        ssize_t n = ctl_recv(ctl, buf, CTL_MAX_MSG, fds, &nfds);
        if (n <= 0)
                _exit(BRIG_EXIT_SETUP);  /* pid 1 is gone or let us go */
        close(ctl);
        if (exec_request_parse(buf, (size_t)n, &req) < 0 || (nfds != 3 && nfds != 4)) {
                send_failure(sock, "malformed request", EBADMSG);
                _exit(BRIG_EXIT_SETUP);
        }
        plan.argv = req.argv;
        plan.envp = merge_env(ps->plan->envp, req.env);
        if (!plan.envp) {
                send_failure(sock, "environment", ENOMEM);
                _exit(BRIG_EXIT_SETUP);
        }
        if (nfds == 4 && fchdir(fds[3]) < 0) {
                send_failure(sock, "cwd", errno);
                _exit(BRIG_EXIT_SETUP);
        }
        for (int i = 0; i < 3; i++)
                if (dup2(fds[i], i) < 0) {
                        send_failure(sock, "stdio", errno);
                        _exit(BRIG_EXIT_SETUP);
                }
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        /* What command_confine checked and marked for the stdio pid 1
         * had, again for the caller's. */
        if (mounts_check_stdio(&err) < 0 ||
            (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0 && brig_err(&err, errno, "close_range"))) {
                brig_err_prefix(&err, "command");
                sync_send_error(sock, SYNC_ERROR, err);
                _exit(BRIG_EXIT_SETUP);
        }
        command_become(&plan, inherited);
}

static void spare_forget(struct persist *ps)
{
        if (ps->spare.pid > 0)
                kill(ps->spare.pid, SIGKILL);  /* reaped as any child */
        ps->spare.pid = 0;
        ps->spare.ready = false;
        closep(&ps->spare.ctl);
}

/* SYNC_SPARE: the socket of the next exec. It is ours to serve whatever
 * becomes of the child (a request on it is forked, as one on a
 * SYNC_EXEC's socket, if the child cannot take it). */
static void spare_make(struct persist *ps, int fd)
{
        if (ps->gvisor || ps->sealed || ps->stopping || ps->spare.fd >= 0) {
                close(fd);
                return;
        }
        ps->spare.fd = fd;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return;
        pid_t pid = fork();
        if (pid == 0)
                spare_main(ps, fd, sv[1]);
        close(sv[1]);
        if (pid < 0) {
                close(sv[0]);
                return;
        }
        ps->spare = (struct spare){ .pid = pid, .fd = fd, .ctl = sv[0] };
}

/* Its one byte: confined, and its filter lets it receive. */
static void spare_on_ctl(struct persist *ps)
{
        char one;
        if (read(ps->spare.ctl, &one, 1) == 1 && one == 'r')
                ps->spare.ready = true;
        else
                spare_forget(ps);  /* it died or said something else */
}

/* Hand a plain request to the ready spare: the cwd it would enter, then
 * the request with the stdio. The spare's pid is the exec's from now on.
 * 0, or -1 when the request went nowhere (the spare is gone then). */
static int spare_hand(struct persist *ps, const struct exec_request *req, const char *buf, size_t n, const int *stdio,
                      int fd)
{
        const char *cwd = req->cwd ? req->cwd : ps->plan->cwd;
        brig_error *err = NULL;
        _cleanup_close_ int dir = cwd ? mounts_open_cwd(cwd, &err) : -EBADF;
        if (cwd && dir < 0) {
                brig_err_prefix(&err, "command");
                sync_send_error(fd, SYNC_ERROR, err);
                brig_error_free(&err);
                spare_forget(ps);
                return -1;
        }
        int fds[4] = { stdio[0], stdio[1], stdio[2], dir };
        const struct ctl_hdr *h = (const struct ctl_hdr *)buf;
        if (ctl_send(ps->spare.ctl, h, buf + sizeof *h, n - sizeof *h, fds, dir >= 0 ? 4 : 3) < 0) {
                send_failure(fd, "hand the request to the exec child", EPIPE);
                spare_forget(ps);
                return -1;
        }
        closep(&ps->spare.ctl);
        return 0;
}

static void start_exec(struct persist *ps, int fd)
{
        /* The spare's socket: this exec's now, whatever becomes of it. */
        bool own = fd == ps->spare.fd;
        if (own)
                ps->spare.fd = -1;
        _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
        int fds[CTL_MAX_FDS], nfds = 0, slave = -1;
        struct exec_request req = { 0 };
        ssize_t n = buf ? ctl_recv(fd, buf, CTL_MAX_MSG, fds, &nfds) : -ENOMEM;
        if (n <= 0 || exec_request_parse(buf, (size_t)n, &req) < 0 ||
            nfds != (req.flags & (CTL_EXEC_TTY | CTL_EXEC_DETACH) ? 0 : 3) ||
            ((req.flags & CTL_EXEC_TTY) && (req.flags & CTL_EXEC_DETACH)) ||
            ((req.flags & CTL_EXEC_FILEOP) && (req.flags & (CTL_EXEC_TTY | CTL_EXEC_DETACH)))) {
                send_failure(fd, "malformed request", EBADMSG);
                goto out;
        }
        /* Behind the gVisor wall the command's world is gVisor's: a file
         * operation here would see brig's root instead (another /tmp), and
         * a detached log in brig's /tmp could not be read from inside. */
        if (ps->gvisor && (req.flags & (CTL_EXEC_FILEOP | CTL_EXEC_DETACH))) {
                send_failure(fd, req.flags & CTL_EXEC_FILEOP
                                         ? "--wall gvisor: file operations (brig cp, brig files, the API's files) "
                                           "are not supported yet; use brig exec with cat or tar, or --wall namespaces"
                                         : "--wall gvisor: brig exec --detach is not supported yet; run it in the "
                                           "background with brig exec NAME sh -c 'CMD >LOG 2>&1 &', or --wall "
                                           "namespaces",
                             ENOTSUP);
                goto out;
        }
        /* The supervisor lets one exec into a pool member; checked again
         * here, where a second one would share the member's processes. */
        bool last = req.flags & CTL_EXEC_LAST;
        if (ps->sealed || (last && ps->n > 0)) {
                send_failure(fd, "a pool member serves one run", EBUSY);
                goto out;
        }
        struct exec_slot *grown = realloc(ps->slots, (ps->n + 1) * sizeof *grown);
        if (!grown) {
                send_failure(fd, "slot", ENOMEM);
                goto out;
        }
        ps->slots = grown;
        if (req.flags & CTL_EXEC_TTY) {
                /* A pty in the sandbox's own devpts; the master goes out to
                 * the client, the slave becomes the command's terminal. */
                int master;
                brig_error *err = NULL;
                if (terminal_create_inside(&master, &slave, &err) < 0) {
                        sync_send_error(fd, SYNC_ERROR, err);
                        brig_error_free(&err);
                        goto out;
                }
                struct sync_msg m = { .type = SYNC_PTY };
                int r = sync_send_fd(fd, &m, master);
                close(master);
                if (r < 0)
                        goto out;
        }
        /* The spare serves a plain exec on its own socket (the supervisor
         * sends no other there; a tty, a detached command or a file
         * operation is forked). */
        pid_t pid;
        bool plain = !(req.flags & (CTL_EXEC_TTY | CTL_EXEC_DETACH | CTL_EXEC_FILEOP));
        if (own && plain && ps->spare.pid > 0 && !ps->spare.ready) {
                /* Still confining (a request right after the last exec):
                 * it started before a fork now would, so wait for it, a
                 * little (one stopped by a command of this sandbox is
                 * given up on, and the exec forked). */
                struct pollfd w = { .fd = ps->spare.ctl, .events = POLLIN };
                if (poll(&w, 1, SPARE_WAIT_MS) > 0)
                        spare_on_ctl(ps);
        }
        if (own && plain && ps->spare.ready) {
                pid = ps->spare.pid;
                if (spare_hand(ps, &req, buf, (size_t)n, fds, fd) < 0)
                        goto out;
                ps->spare.pid = 0;
                ps->spare.ready = false;
        } else {
                pid = fork();
                if (pid < 0) {
                        send_failure(fd, "fork", errno);
                        goto out;
                }
                if (pid == 0)
                        exec_child(ps, &req, fd, fds, slave);
        }
        uint64_t timeout = req.timeout_ms ? req.timeout_ms : ps->plan->limits.timeout_ms;
        ps->slots[ps->n++] = (struct exec_slot){ .pid = pid, .fd = fd, .last = last,
                                                 .deadline_ms = timeout ? mono_ms() + timeout : 0 };
        ps->sealed = last;
        if (req.flags & CTL_EXEC_DETACH) {
                /* Its pid and log for the client; the socket goes with the
                 * command's own copy at execve, which tells the supervisor
                 * it runs (or its failure comes first). No slot socket: no
                 * client's going away can end it. */
                struct sync_msg m = { .type = SYNC_STARTED, .status = pid };
                snprintf(m.text, sizeof m.text, CTL_DETACH_LOG, (int)pid);
                sync_send(fd, &m);
                ps->slots[ps->n - 1].fd = -1;
                goto out;
        }
        fd = -1;  /* the slot owns it */
out:
        if (own && ps->spare.pid > 0 && ps->spare.fd < 0)
                spare_forget(ps);  /* not handed its request: it has no socket left to serve */
        exec_request_free(&req);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        closep(&slave);
        closep(&fd);
}

static void kill_exec(const struct persist *ps, const struct exec_slot *s, int sig)
{
        if (ps->gvisor) {
                wall_gvisor_signal(ps->plan, s->pid, sig, true);
                if (sig == SIGKILL)
                        kill(s->pid, sig);
                return;
        }
        /* The command leads its own session (command_exec), so its group
         * holds what it started, unless something left on purpose. */
        kill(-s->pid, sig);
        kill(s->pid, sig);
}

/* A pool member's run ended: so does everything it left (background
 * processes, a daemon it setsid'ed), as when a brig run's pid 1 exits and
 * the kernel takes the pid namespace with it. Killed and reaped before
 * the status goes back, so nothing of the run acts after brig returns:
 * kill(-1) from pid 1 reaches every other process of the namespace, and
 * ECHILD means none is left (every one is pid 1's descendant; orphans,
 * a subreaper's too once it dies, come to pid 1). */
static void end_of_run(void)
{
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
                ;
}

/* A pool member has served its one run and is sealed: no process of a
 * run is left or will come, only the member's end (its mounts, its
 * namespaces), which then shares no core on equal terms with the next
 * run its caller starts. Raising one's own nice value needs no
 * privilege; nothing is forked from here any more to inherit it. */
static void end_served(void)
{
        member_end_yield();
}

static void reap(struct persist *ps)
{
        int status;
        pid_t pid;
        struct rusage ru;
        /* wait4: the exec's own CPU time and peak memory (the command and
         * every descendant it waited for), for its result and report */
        while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
                if (ps->gvisor == pid && !ps->stopping) {
                        /* The gVisor sandbox is gone (killed, out of
                         * memory): no exec can run any more, and none may
                         * run outside it. The sandbox ends with it. */
                        kill(-1, SIGKILL);
                        _exit(BRIG_EXIT_SETUP);
                }
                if (ps->gvisor)
                        wall_gvisor_forget(pid);
                if (pid == ps->spare.pid) {  /* before its request: a later one is forked */
                        ps->spare.pid = 0;
                        spare_forget(ps);
                        continue;
                }
                for (size_t i = 0; i < ps->n; i++) {
                        struct exec_slot *s = &ps->slots[i];
                        if (s->pid != pid)
                                continue;
                        if (s->last)
                                end_of_run();
                        if (s->fd >= 0) {
                                struct sync_msg m = {
                                        .type = SYNC_STATUS, .status = status,
                                        .exit_code = s->timed_out ? BRIG_EXIT_TIMEOUT : 0,
                                        .cpu_user_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 +
                                                       (uint64_t)ru.ru_utime.tv_usec,
                                        .cpu_system_us = (uint64_t)ru.ru_stime.tv_sec * 1000000 +
                                                         (uint64_t)ru.ru_stime.tv_usec,
                                        .maxrss_kb = ru.ru_maxrss,
                                };
                                sync_send(s->fd, &m);
                                close(s->fd);
                        }
                        if (s->last)
                                end_served();
                        ps->slots[i] = ps->slots[--ps->n];
                        break;
                }
        }
        /* Stopping and nobody left: done (the supervisor reaps us). */
        if (ps->stopping && pid < 0 && errno == ECHILD) {
                struct sync_msg m = { .type = SYNC_STATUS, .status = 0 };  /* a clean end */
                sync_send(ps->plan->sync_fd, &m);
                _exit(0);
        }
}

static void on_signal(struct persist *ps, const struct signalfd_siginfo *si)
{
        if ((int)si->ssi_signo == SIGCHLD) {
                /* A spare that a command of this sandbox stopped (SIGSTOP,
                 * same user) would hold the next exec: it is let go, and
                 * that exec forked. */
                int st;
                if (ps->spare.pid > 0 && waitpid(ps->spare.pid, &st, WNOHANG | WUNTRACED) == ps->spare.pid) {
                        if (!WIFSTOPPED(st))
                                ps->spare.pid = 0;  /* it died, and is reaped now */
                        spare_forget(ps);
                }
                reap(ps);
                return;
        }
        /* Only the supervisor's "everyone" signals mean anything here: the
         * stop sequence. In a pid namespace kill(-1) from pid 1 reaches
         * every other process of the sandbox. */
        if (si->ssi_code == SI_QUEUE && si->ssi_int == BRIG_SIGNAL_EVERYONE) {
                ps->stopping = true;
                kill(-1, (int)si->ssi_signo);
                reap(ps);
        }
}

static void on_exec_socket(struct persist *ps, size_t i, short revents)
{
        struct exec_slot *s = &ps->slots[i];
        if (revents & POLLIN) {
                struct ctl_hdr h;
                int fds[CTL_MAX_FDS], nfds;
                ssize_t n = ctl_recv(s->fd, &h, sizeof h, fds, &nfds);
                for (int k = 0; k < nfds; k++)
                        close(fds[k]);
                if (n > 0 && h.type == CTL_SIGNAL && h.arg > 0 && h.arg < NSIG) {
                        if (ps->gvisor)
                                wall_gvisor_signal(ps->plan, s->pid, h.arg, false);
                        else
                                kill(s->pid, h.arg);
                        return;
                }
                if (n != 0 && n != -ECONNRESET)
                        return;  /* anything else: ignored */
        }
        /* The client is gone (the supervisor closed our socket): the
         * command must not run on unattended. */
        kill_exec(ps, s, SIGKILL);
        closep(&s->fd);
}

BRIG_IDLE_LOOP static int next_timeout(struct persist *ps)
{
        uint64_t now = mono_ms(), next = 0;
        for (size_t i = 0; i < ps->n; i++) {
                struct exec_slot *s = &ps->slots[i];
                if (!s->deadline_ms)
                        continue;
                if (s->deadline_ms <= now) {
                        /* The wall clock ran out: SIGTERM, then SIGKILL after the grace. */
                        kill_exec(ps, s, s->timed_out ? SIGKILL : SIGTERM);
                        s->deadline_ms = s->timed_out ? 0 : now + ps->plan->limits.kill_after_ms;
                        s->timed_out = true;
                        if (!s->deadline_ms)
                                continue;
                }
                if (!next || s->deadline_ms < next)
                        next = s->deadline_ms;
        }
        return next ? (int)(next - now) : -1;
}

BRIG_IDLE_LOOP _Noreturn void persist_init_main(struct run_plan *plan)
{
        struct persist ps = { .plan = plan, .spare = { .fd = -1, .ctl = -1 } };
        closep(&plan->pty_slave_fd);
        /* Only the sync socket stays: pid 1 lives as long as the sandbox and
         * must hold nothing of the supervisor's (its pipe to brig create,
         * its log) that a command could inherit through a bug. */
        if (plan->sync_fd > 3)
                syscall(SYS_close_range, 3, plan->sync_fd - 1, 0);
        syscall(SYS_close_range, plan->sync_fd + 1, ~0U, 0);
        init_detach_stdio();
        init_hide_command_line();
        /* The Landlock ruleset once, from the mounts as they are now, before
         * any command ran: an exec only enforces it (the rules' paths are
         * never resolved again in a tree the sandbox has had its hands on). */
        if (plan->wall != BRIG_WALL_GVISOR) {  /* behind gVisor, gVisor's own file checks apply */
                brig_error *err = NULL;
                if (landlock_prepare(plan, &plan->landlock_ruleset_fd, &err) < 0) {
                        sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                        _exit(BRIG_EXIT_SETUP);
                }
        }
        sigset_t set;
        sigemptyset(&set);
        for (size_t i = 0; i < ARRAY_SIZE(handled); i++)
                sigaddset(&set, handled[i]);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                _exit(BRIG_EXIT_SETUP);
        if (plan->wall == BRIG_WALL_GVISOR) {
                brig_error *err = NULL;
                if (wall_gvisor_start(plan, &ps.gvisor, &err) < 0) {
                        sync_send_error(plan->sync_fd, SYNC_ERROR, err);
                        kill(-1, SIGKILL);
                        _exit(BRIG_EXIT_SETUP);
                }
        }
        struct sync_msg ready = { .type = SYNC_READY };
        if (sync_send(plan->sync_fd, &ready) < 0)
                _exit(BRIG_EXIT_SETUP);
        struct pollfd *p = NULL;
        struct footprint fp = { 0 };
        for (;;) {
                enum { P_SIG, P_SYNC, P_SPARE, P_SPARE_CTL, P_SLOTS };
                struct pollfd *grown = realloc(p, (ps.n + P_SLOTS) * sizeof *p);
                if (!grown)
                        _exit(BRIG_EXIT_SETUP);
                p = grown;
                p[P_SIG] = (struct pollfd){ .fd = sfd, .events = POLLIN };
                p[P_SYNC] = (struct pollfd){ .fd = ps.stopping ? -1 : plan->sync_fd, .events = POLLIN };
                p[P_SPARE] = (struct pollfd){ .fd = ps.stopping ? -1 : ps.spare.fd, .events = POLLIN };
                p[P_SPARE_CTL] = (struct pollfd){ .fd = ps.spare.ready ? -1 : ps.spare.ctl, .events = POLLIN };
                for (size_t i = 0; i < ps.n; i++)
                        p[i + P_SLOTS] = (struct pollfd){ .fd = ps.slots[i].fd, .events = POLLIN };
                size_t n = ps.n;
                int polled = poll(p, n + P_SLOTS, footprint_timeout(&fp, next_timeout(&ps)));
                footprint_polled(&fp, polled);
                /* EINVAL: more descriptors than the open-file limit (lowered
                 * under us: the filter lets no command do it, prlimit64).
                 * The soft limit goes back up to the hard one; failing that,
                 * pid 1 ends rather than spin on it: the supervisor then
                 * answers every exec that the sandbox went away. */
                if (polled < 0 && errno == EINVAL) {
                        struct rlimit nofile;
                        if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max &&
                            (nofile.rlim_cur = nofile.rlim_max, setrlimit(RLIMIT_NOFILE, &nofile) == 0))
                                continue;
                        _exit(BRIG_EXIT_SETUP);
                }
                if (polled < 0)
                        continue;
                /* Socket events first: the slots may move when reaped. */
                for (size_t i = n; i-- > 0;)
                        if (p[i + P_SLOTS].fd >= 0 && p[i + P_SLOTS].revents && i < ps.n &&
                            ps.slots[i].fd == p[i + P_SLOTS].fd)
                                on_exec_socket(&ps, i, p[i + P_SLOTS].revents);
                if (p[P_SPARE_CTL].fd >= 0 && p[P_SPARE_CTL].revents && p[P_SPARE_CTL].fd == ps.spare.ctl)
                        spare_on_ctl(&ps);
                /* The next exec's request (the spare's socket); a hangup
                 * there is the supervisor's end going: nothing to serve */
                if (p[P_SPARE].fd >= 0 && p[P_SPARE].fd == ps.spare.fd && (p[P_SPARE].revents & POLLIN))
                        start_exec(&ps, ps.spare.fd);
                else if (p[P_SPARE].fd >= 0 && p[P_SPARE].fd == ps.spare.fd && p[P_SPARE].revents) {
                        closep(&ps.spare.fd);
                        spare_forget(&ps);
                }
                if (p[P_SYNC].revents) {
                        struct sync_msg m;
                        int passed = -1;
                        int r = sync_recv(plan->sync_fd, &m, &passed);
                        if (r == 0 || (r < 0 && r != -EAGAIN && r != -EBADMSG)) {
                                /* The supervisor is gone: so is the sandbox. */
                                kill(-1, SIGKILL);
                                _exit(BRIG_EXIT_SETUP);
                        }
                        if (r > 0 && m.type == SYNC_EXEC && passed >= 0)
                                start_exec(&ps, passed);
                        else if (r > 0 && m.type == SYNC_SPARE && passed >= 0)
                                spare_make(&ps, passed);
                        else
                                closep(&passed);
                }
                if (p[P_SIG].revents) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                                on_signal(&ps, &si);
                }
        }
}
