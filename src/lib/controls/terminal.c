/* terminal.c — what stands between the sandbox and the caller's terminal.
 *
 * With a pty (stdin and stdout are terminals, or --tty): the pty lives in
 * the sandbox's own devpts instance, so `tty` names it and nothing of the
 * host's terminals is visible; the command gets the slave as its
 * controlling terminal, so shells have job control, and never the
 * caller's terminal, so TIOCSTI can inject keystrokes only into its own
 * pty. The supervisor (or the brig exec client) holds the master and
 * relays bytes.
 *
 * Without a pty, a caller's terminal among stdin, stdout and stderr is
 * not handed in either: the command would write to it directly (and a
 * process left in a persistent sandbox would keep reading what the user
 * types into the host shell after brig exec returned). Such a descriptor
 * is replaced by a pipe (output) or a socket (input) that we relay.
 *
 * Either way the output goes through term_filter.c, which drops what acts
 * beyond the screen (clipboard, title, queries); --terminal-passthrough
 * relays it unfiltered, and without a pty hands the terminals in as they
 * are, as before. */
#define _GNU_SOURCE
#include "controls/terminal.h"
#include "controls/term_filter.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>

#define RELAY_READ 16384

/* One direction: bytes read from `from` go to `to`. */
struct relay {
        int from, to;          /* -1: not used; closed when the side ends */
        bool own_to;           /* `to` is our socket to the command: never blocks */
        struct term_filter tf;
        size_t pend_off, pend_len;  /* input not yet taken by the command */
        bool reader_gone;           /* out: the caller's end said EPIPE */
        char pend[4096];
};

enum { R_OUT, R_ERR, R_IN, R_COUNT };

struct terminal {
        bool pty;              /* else: stdio guarded by pipes */
        bool filter;           /* not --terminal-passthrough */
        int master;            /* pty: -1 until the sandbox sends it */
        bool restore;          /* the caller's terminal is in raw mode */
        struct termios saved;
        bool have_saved;
        struct relay r[R_COUNT];
        int theirs[3];         /* guard: the command's ends, until handed over */
        char buf[TERM_FILTER_OUT_MAX(RELAY_READ)];
};

static void relay_init(struct relay *r, int from, int to)
{
        memset(r, 0, sizeof *r);
        r->from = from;
        r->to = to;
        term_filter_init(&r->tf);
}

static void drop(int *fd)
{
        closep(fd);
        *fd = -1;
}

static struct terminal *terminal_new(bool pty, bool passthrough)
{
        struct terminal *t = calloc(1, sizeof *t);
        if (!t)
                return NULL;
        t->pty = pty;
        t->filter = !passthrough;
        t->master = -1;
        for (int i = 0; i < R_COUNT; i++)
                t->r[i].from = t->r[i].to = -1;
        for (int i = 0; i < 3; i++)
                t->theirs[i] = -1;
        return t;
}

/* Our descriptors must not land on 0-2 (a caller may have closed one). */
static int above_stdio(int *fd)
{
        if (*fd > 2)
                return 0;
        int moved = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
        closep(fd);
        *fd = moved;
        return moved < 0 ? -errno : 0;
}

/* Without a pty: a pipe (or, for stdin, a socket, so that writing to a
 * command that has gone raises no SIGPIPE in us) for each of the caller's
 * descriptors that is a terminal. stdout and stderr on the same terminal
 * share one pipe, so their order stays what the command wrote. */
static int guard_stdio(struct terminal *t, const int stdio[3], brig_error **err)
{
        struct stat st[3];
        bool tty[3];
        for (int i = 0; i < 3; i++)
                tty[i] = isatty(stdio[i]) && fstat(stdio[i], &st[i]) == 0;
        if (tty[0]) {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                        return brig_err(err, errno, "socketpair for stdin");
                if (above_stdio(&sv[0]) < 0 || above_stdio(&sv[1]) < 0) {
                        drop(&sv[0]);
                        drop(&sv[1]);
                        return brig_err(err, errno, "socketpair for stdin");
                }
                (void)shutdown(sv[1], SHUT_WR);  /* the command's end only reads */
                (void)fcntl(sv[0], F_SETFL, O_NONBLOCK);
                relay_init(&t->r[R_IN], stdio[0], sv[0]);
                t->r[R_IN].own_to = true;
                t->theirs[0] = sv[1];
        }
        for (int i = 1; i < 3; i++) {
                if (!tty[i])
                        continue;
                if (i == 2 && tty[1] && st[1].st_rdev == st[2].st_rdev) {
                        t->theirs[2] = fcntl(t->theirs[1], F_DUPFD_CLOEXEC, 3);
                        if (t->theirs[2] < 0)
                                return brig_err(err, errno, "dup for stderr");
                        continue;
                }
                int pfd[2];
                if (pipe2(pfd, O_CLOEXEC) < 0)
                        return brig_err(err, errno, "pipe for %s", i == 1 ? "stdout" : "stderr");
                if (above_stdio(&pfd[0]) < 0 || above_stdio(&pfd[1]) < 0) {
                        drop(&pfd[0]);
                        drop(&pfd[1]);
                        return brig_err(err, errno, "pipe for %s", i == 1 ? "stdout" : "stderr");
                }
                (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
                relay_init(&t->r[i == 1 ? R_OUT : R_ERR], pfd[0], stdio[i]);
                t->theirs[i] = pfd[1];
        }
        return 0;
}

int terminal_prepare(enum brig_tty_mode mode, bool passthrough, const int stdio[3], struct terminal **ret,
                     brig_error **err)
{
        static const int std_fds[3] = { STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO };
        *ret = NULL;
        bool in_tty = isatty(STDIN_FILENO), out_tty = isatty(STDOUT_FILENO);
        bool pty = mode == BRIG_TTY_ALWAYS || (mode == BRIG_TTY_AUTO && in_tty && out_tty);
        if (!stdio)
                stdio = std_fds;
        if (!pty && (passthrough || !(isatty(stdio[0]) || isatty(stdio[1]) || isatty(stdio[2]))))
                return 0;  /* the caller's descriptors go in as they are */
        struct terminal *t = terminal_new(pty, passthrough);
        if (!t)
                return brig_err(err, ENOMEM, "terminal");
        if (pty) {
                t->have_saved = in_tty && tcgetattr(STDIN_FILENO, &t->saved) == 0;
        } else {
                int r = guard_stdio(t, stdio, err);
                if (r < 0) {
                        terminal_close(t);
                        return r;
                }
        }
        *ret = t;
        return 0;
}

bool terminal_is_pty(const struct terminal *t)
{
        return t && t->pty;
}

void terminal_stdio(const struct terminal *t, int fds[3])
{
        for (int i = 0; i < 3; i++)
                if (t && !t->pty && t->theirs[i] >= 0)
                        fds[i] = t->theirs[i];
}

void terminal_handed_over(struct terminal *t)
{
        for (int i = 0; t && i < 3; i++)
                drop(&t->theirs[i]);
}

int terminal_child_stdio(struct terminal *t, brig_error **err)
{
        if (!t || t->pty)
                return 0;
        for (int i = 0; i < 3; i++)
                if (t->theirs[i] >= 0 && dup2(t->theirs[i], i) < 0)  /* the copy is not CLOEXEC */
                        return brig_err(err, errno, "replace the caller's terminal on fd %d", i);
        terminal_handed_over(t);
        for (int i = 0; i < R_COUNT; i++)
                if (t->r[i].from >= 0)
                        drop(i == R_IN ? &t->r[i].to : &t->r[i].from);  /* the supervisor's ends */
        return 0;
}

int terminal_create_inside(int *master, int *slave, brig_error **err)
{
        _cleanup_close_ int m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return brig_err(err, errno, "open /dev/ptmx");
        if (unlockpt(m) < 0)
                return brig_err(err, errno, "unlockpt");
        /* TIOCGPTPEER opens the slave through the master, not by a path
         * that could be raced (ioctl_tty(2)). */
        int s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
                return brig_err(err, errno, "open the pty slave");
        *master = TAKE_FD(m);
        *slave = s;
        return 0;
}

void terminal_attach(struct terminal *t, int master)
{
        closep(&t->master);
        t->master = master;
        relay_init(&t->r[R_OUT], master, STDOUT_FILENO);
        relay_init(&t->r[R_IN], STDIN_FILENO, master);
        if (t->have_saved) {
                (void)tcsetattr(master, TCSANOW, &t->saved);  /* the caller's line settings */
                struct termios raw = t->saved;
                cfmakeraw(&raw);
                if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
                        t->restore = true;
        }
        terminal_on_winch(t);
}

void terminal_on_winch(struct terminal *t)
{
        struct winsize ws;
        if (t->master < 0)
                return;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
                (void)ioctl(t->master, TIOCSWINSZ, &ws);  /* the kernel sends SIGWINCH inside */
}

static bool write_all(int fd, const char *buf, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, buf, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                buf += w;
                n -= (size_t)w;
        }
        return true;
}

/* The pty master is both ends of two relays: closed once, by the out one. */
static void relay_end(struct terminal *t, struct relay *r)
{
        if (r == &t->r[R_IN]) {
                if (r->own_to)
                        drop(&r->to);  /* EOF for the command's stdin */
                r->from = r->to = -1;
                return;
        }
        if (!t->pty)
                drop(&r->from);  /* the command's next write: EPIPE, SIGPIPE */
        r->from = -1;
        if (t->pty && r->reader_gone) {
                t->r[R_IN].to = -1;
                closep(&t->master);  /* a hangup: SIGHUP to the command, as a closed terminal */
        }
}

/* Toward the caller: read, filter, write all of it (the caller's
 * descriptor is theirs: we do not make it non-blocking). Returns 1 when
 * bytes moved, 0 when none were there, -1 at the end. */
static int relay_out(struct terminal *t, struct relay *r)
{
        char in[RELAY_READ];
        ssize_t n = read(r->from, in, sizeof in);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0)
                return -1;  /* EOF; EIO: every slave fd is closed */
        bool written = !t->filter ? write_all(r->to, in, (size_t)n)
                                  : write_all(r->to, t->buf, term_filter_feed(&r->tf, in, (size_t)n, t->buf));
        /* The caller's reader has gone (EPIPE: brig never dies of its
         * SIGPIPE, main.c): the relay ends as the pipe would have, so the
         * command is told and does not write on into nothing. */
        if (!written && errno == EPIPE) {
                r->reader_gone = true;
                return -1;
        }
        return 1;
}

/* Toward the command, unfiltered: what the user types. Into our socket,
 * what the command does not take yet waits (and stdin is not read). */
static bool relay_in(struct relay *r)
{
        if (r->own_to && r->pend_len) {
                ssize_t w = send(r->to, r->pend + r->pend_off, r->pend_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0 && (errno == EINTR || errno == EAGAIN))
                        return true;
                if (w <= 0)
                        return false;  /* the command closed its stdin */
                r->pend_off += (size_t)w;
                r->pend_len -= (size_t)w;
                return true;
        }
        ssize_t n = read(r->from, r->pend, sizeof r->pend);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return true;
        if (n <= 0)
                return false;
        if (!r->own_to)
                return write_all(r->to, r->pend, (size_t)n);
        r->pend_off = 0;
        r->pend_len = (size_t)n;
        return relay_in(r);
}

BRIG_IDLE_LOOP int terminal_poll_fds(struct terminal *t, struct pollfd *p)
{
        int n = 0;
        for (int i = 0; t && i < R_COUNT; i++) {
                struct relay *r = &t->r[i];
                if (r->from < 0 || r->to < 0)
                        continue;
                if (i == R_IN && t->pty && t->r[R_OUT].from < 0)
                        continue;  /* nothing to type into any more */
                if (r->own_to && r->pend_len)
                        p[n++] = (struct pollfd){ .fd = r->to, .events = POLLOUT };
                else
                        p[n++] = (struct pollfd){ .fd = r->from, .events = POLLIN };
        }
        return n;
}

void terminal_dispatch(struct terminal *t, const struct pollfd *p, int n)
{
        for (int k = 0; k < n; k++) {
                if (!p[k].revents)
                        continue;
                for (int i = 0; i < R_COUNT; i++) {
                        struct relay *r = &t->r[i];
                        bool mine = p[k].events & POLLIN ? p[k].fd == r->from : r->own_to && p[k].fd == r->to;
                        if (r->from < 0 || r->to < 0 || !mine)
                                continue;
                        if (i == R_IN ? !relay_in(r) : relay_out(t, r) < 0)
                                relay_end(t, r);
                        break;
                }
        }
}

void terminal_drain(struct terminal *t)
{
        if (!t)
                return;
        /* A pty is read until every slave is closed (brig run: all of the
         * sandbox is gone by now); our pipes only for what is there, as a
         * process left in a persistent sandbox may hold them open. */
        for (int i = R_OUT; i <= R_ERR; i++) {
                int r = 0;
                while (t->r[i].from >= 0 && t->r[i].to >= 0 && (r = relay_out(t, &t->r[i])) >= 0)
                        if (r == 0 && !t->pty)
                                break;
                if (r < 0)
                        relay_end(t, &t->r[i]);
        }
}

void terminal_close(struct terminal *t)
{
        if (!t)
                return;
        if (t->restore)
                (void)tcsetattr(STDIN_FILENO, TCSADRAIN, &t->saved);
        terminal_handed_over(t);
        if (!t->pty) {
                drop(&t->r[R_OUT].from);
                drop(&t->r[R_ERR].from);
                if (t->r[R_IN].own_to)
                        drop(&t->r[R_IN].to);
        }
        closep(&t->master);
        free(t);
}
