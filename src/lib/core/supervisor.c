/* supervisor.c — the event loop on the host side: waits for the sandbox's
 * pid 1 through its pidfd, forwards signals, relays the terminal and
 * collects what the sandbox reports over the sync socket. */
#define _GNU_SOURCE
#include "core/syscalls.h"
#include "core/supervisor.h"
#include "core/footprint.h"
#include "core/timings.h"
#include "controls/terminal.h"
#include "controls/unixguard.h"
#include "tools/tools.h"
#include "net/egress.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

/* The first failure is the cause; a protocol fault of the sandbox's own
 * side ends it (nothing it says can be trusted further). */
static void fail(struct supervision *s, brig_error **e)
{
        if (s->failure.type == 0) {
                s->failure.type = SYNC_ERROR;
                wire_error_encode(&s->failure.error, *e, NULL);
        }
        brig_error_free(e);
        (void)sys_pidfd_send_signal(s->pidfd, SIGKILL);
}

/* What the unix socket guard asks must be the kernel's socket list of the
 * sandbox's network namespace, nothing else of the child's. */
static int check_diag(int fd, brig_error **err)
{
        int domain = 0, protocol = 0;
        socklen_t dl = sizeof domain, pl = sizeof protocol;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &pl) < 0 ||
            domain != AF_NETLINK || protocol != NETLINK_SOCK_DIAG)
                return brig_err(err, EINVAL, "not a NETLINK_SOCK_DIAG socket");
        return 0;
}

/* The network step's sockets, in one message (child.c send_network), each
 * with its kind, in the order the child made them. A count that does not
 * match, or a socket that is not what its kind says, fails the run. */
static void take_network(struct supervision *s, const struct sync_msg *m, int fds[], size_t n)
{
        brig_error *e = NULL;
        /* the text may be cut: it is a reason for the report */
        if (m->text[0])
                snprintf(s->net_fallback, sizeof s->net_fallback, "%.*s", (int)sizeof s->net_fallback - 1, m->text);
        if (m->status < 0 || (size_t)m->status != n)
                brig_err(&e, EPROTO, "network: the sandbox sent %zu sockets for %d", n, m->status);
        for (size_t i = 0; i < n; i++) {
                if (e) {
                        close(fds[i]);
                } else if (m->kinds[i] == SYNC_SOCKET_UNIX_DIAG) {
                        if (check_diag(fds[i], &e) < 0)
                                brig_err_prefix(&e, "unix socket guard");
                        if (!e && s->guard)
                                unixguard_set_diag(s->guard, fds[i]);
                        else
                                close(fds[i]);
                } else if (!s->egress) {
                        brig_err(&e, EPROTO, "network: a proxy listener, but the run has no proxy");
                        close(fds[i]);
                } else if (egress_add_listener(s->egress, fds[i], (enum egress_listener_kind)m->kinds[i], &e) < 0) {
                        brig_err_prefix(&e, "network");
                        close(fds[i]);  /* refused: nothing will answer on it */
                }
        }
        if (e)
                fail(s, &e);
}

static void take_message(struct supervision *s, const struct sync_msg *m, int fds[], size_t n)
{
        if (m->type == SYNC_NETWORK) {
                take_network(s, m, fds, n);
                return;
        }
        /* every other message carries one descriptor at most */
        while (n > 1)
                close(fds[--n]);
        int passed_fd = n ? fds[0] : -1;
        switch (m->type) {
        case SYNC_AGENT:
                if (s->agent && passed_fd >= 0 && sshagent_serve(s->agent, passed_fd) == 0)
                        return;
                break;
        case SYNC_NOTIFY_FD:
                if (passed_fd >= 0 && s->guard) {
                        unixguard_add_listener(s->guard, passed_fd);
                        return;
                }
                break;
        case SYNC_PTY:
                if (terminal_is_pty(s->term) && passed_fd >= 0) {
                        terminal_attach(s->term, passed_fd);
                        return;
                }
                break;
        case SYNC_READY:
                if (s->control)
                        control_ready(s->control);
                break;
        case SYNC_STATUS:
                s->wait_status = m->status;
                s->have_status = true;
                timings_mark(s->timings, TM_STATUS);
                if (s->end_at_status && m->alone) {
                        s->init_left = true;
                        s->cpu_user_us = m->cpu_user_us;
                        s->cpu_system_us = m->cpu_system_us;
                        s->maxrss_kb = m->maxrss_kb;
                }
                break;
        case SYNC_ERROR:
        case SYNC_EXEC_FAILED:
                if (s->failure.type == 0)  /* the first failure is the cause */
                        s->failure = *m;
                break;
        default:
                break;
        }
        if (passed_fd >= 0)
                close(passed_fd);
}

/* Returns false at end of stream. */
static bool read_sync(struct supervision *s)
{
        struct sync_msg m;
        int fds[SYNC_MAX_FDS];
        size_t n;
        int r = sync_recv_fds(s->sync_fd, &m, fds, SYNC_MAX_FDS, &n);
        if (r <= 0)
                return r == -EAGAIN;
        take_message(s, &m, fds, n);
        return true;
}

static void on_signal(struct supervision *s, int sig)
{
        if (s->control && control_on_signal(s->control, sig))
                return;
        switch (sig) {
        case SIGCHLD:
                break;  /* pid 1 is watched through its pidfd */
        case SIGWINCH:
                if (terminal_is_pty(s->term)) {
                        terminal_on_winch(s->term);
                        break;
                }
                /* fall through */
        default:
                /* Our pid 1 forwards it to the command. */
                (void)sys_pidfd_send_signal(s->pidfd, sig);
                break;
        }
}

enum {
        POLL_PIDFD, POLL_SIGNAL, POLL_SYNC, POLL_TERM, POLL_TIMER = POLL_TERM + TERMINAL_POLL_MAX,
        POLL_NOTIFY, POLL_EGRESS, POLL_CONTROL, POLL_COUNT
};

static int arm(int tfd, uint64_t ms)
{
        struct itimerspec it = { .it_value = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 } };
        if (ms == 0)
                it.it_value.tv_nsec = 1;  /* zero would disarm */
        return timerfd_settime(tfd, 0, &it, NULL);
}

/* The wall clock ran out: SIGTERM to every process inside, then, after the
 * grace period, SIGKILL to pid 1 (the kernel takes the rest with it). */
static void on_timer(struct supervision *s, int tfd, bool *term_sent)
{
        uint64_t ticks;
        (void)!read(tfd, &ticks, sizeof ticks);
        if (!*term_sent) {
                siginfo_t info = { .si_signo = SIGTERM, .si_code = SI_QUEUE };
                info.si_int = BRIG_SIGNAL_EVERYONE;
                info.si_pid = getpid();
                info.si_uid = getuid();
                if (sys_pidfd_send_siginfo(s->pidfd, SIGTERM, &info) < 0)
                        (void)sys_pidfd_send_signal(s->pidfd, SIGKILL);
                s->timed_out = true;
                *term_sent = true;
                arm(tfd, s->kill_after_ms);
        } else {
                (void)sys_pidfd_send_signal(s->pidfd, SIGKILL);
        }
}

BRIG_IDLE_LOOP int supervise(struct supervision *s, brig_error **err)
{
        sigset_t set;
        sigprocmask(SIG_BLOCK, NULL, &set);  /* what brig_run blocked */
        /* but not a SIGPIPE of brig's own (the CLI blocks it for good: a
         * write of ours to a stream whose reader has gone): not the
         * command's to get */
        sigdelset(&set, SIGPIPE);
        _cleanup_close_ int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                return brig_err(err, errno, "signalfd");
        struct pollfd p[POLL_COUNT];
        for (int i = 0; i < POLL_COUNT; i++)
                p[i] = (struct pollfd){ .fd = -1, .events = POLLIN };
        p[POLL_PIDFD].fd = s->pidfd;
        p[POLL_SIGNAL].fd = sfd;
        p[POLL_SYNC].fd = s->sync_fd;
        p[POLL_EGRESS].fd = s->egress ? egress_poll_fd(s->egress) : -1;
        p[POLL_CONTROL].fd = s->control ? control_poll_fd(s->control) : -1;
        _cleanup_close_ int tfd = -EBADF;
        bool term_sent = false;
        struct footprint fp = { 0 };
        /* every command's seccomp listener, in one epoll set (set in the loop) */
        if (s->timeout_ms) {
                tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
                if (tfd < 0 || arm(tfd, s->timeout_ms) < 0)
                        return brig_err(err, errno, "timerfd");
                p[POLL_TIMER].fd = tfd;
        }
        for (;;) {
                /* the pty's master arrives over the sync socket once it exists */
                int nterm = terminal_poll_fds(s->term, &p[POLL_TERM]);
                for (int i = nterm; i < TERMINAL_POLL_MAX; i++)
                        p[POLL_TERM + i] = (struct pollfd){ .fd = -1 };
                /* refused calls at a bounded pace: their listeners rest */
                int wait = s->guard ? unixguard_wait_ms(s->guard) : -1;
                p[POLL_NOTIFY].fd = s->guard && wait < 0 ? unixguard_poll_fd(s->guard) : -1;
                int polled = poll(p, POLL_COUNT, footprint_timeout(&fp, wait));
                if (polled < 0) {
                        if (errno == EINTR)
                                continue;
                        return brig_err(err, errno, "poll");
                }
                footprint_polled(&fp, polled);
                if (p[POLL_SIGNAL].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                                on_signal(s, (int)si.ssi_signo);
                }
                if (p[POLL_SYNC].revents && !read_sync(s))
                        p[POLL_SYNC].fd = -1;
                if (nterm)
                        terminal_dispatch(s->term, &p[POLL_TERM], nterm);
                if (p[POLL_TIMER].revents)
                        on_timer(s, tfd, &term_sent);
                if (p[POLL_EGRESS].revents)
                        egress_dispatch(s->egress);
                if (p[POLL_CONTROL].revents)
                        control_dispatch(s->control);
                if (p[POLL_NOTIFY].fd >= 0 && p[POLL_NOTIFY].revents)
                        unixguard_dispatch(s->guard);
                if (p[POLL_PIDFD].revents || s->init_left)
                        break;
        }
        /* pid 1 is gone: collect what is still buffered. */
        int fl = fcntl(s->sync_fd, F_GETFL);
        if (fl >= 0)
                fcntl(s->sync_fd, F_SETFL, fl | O_NONBLOCK);
        while (p[POLL_SYNC].fd >= 0 && read_sync(s)) {
                struct pollfd q = { .fd = s->sync_fd, .events = POLLIN };
                if (poll(&q, 1, 0) <= 0)
                        break;
        }
        terminal_drain(s->term);
        if (s->init_left)
                return 0;  /* alone and done: spawn_run waits for it later */
        siginfo_t info = { 0 };
        if (waitid(P_PIDFD, (id_t)s->pidfd, &info, WEXITED) < 0)
                return brig_err(err, errno, "waitid");
        s->init_status = info.si_code == CLD_EXITED ? W_EXITCODE(info.si_status, 0) : info.si_status;
        return 0;
}
