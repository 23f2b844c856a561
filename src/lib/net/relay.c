/* relay.c — moving the bytes of one direction of a connection.
 *
 * Bytes go socket → pipe → socket with splice(), so they never cross into
 * user space; when no pipe can be had (out of descriptors), a small buffer
 * does the same job. Either way at most one pipe- or buffer-full is held
 * per direction: a direction whose data has not been delivered does not
 * read more, which is the backpressure — a slow reader stalls its own
 * sender, never the supervisor's memory. */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "net/net.h"

#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

/* Bytes moved per splice. A 1 MiB pipe makes bulk transfers ~10% faster
 * than the default 64 KiB, but a stalled reader leaves a full pipe in the
 * supervisor's memory: only the first BIG_PIPES directions get one, so a
 * sandbox holding thousands of connections open pins at most 64 MiB. */
#define FLOW_CHUNK (1 << 20)
#define BIG_PIPES 64
#define FLOW_BUF 16384
/* Turns per call before yielding, so one fast stream can't starve the rest. */
#define FLOW_TURNS 8

void flow_init(struct flow *f, int from, int to)
{
        memset(f, 0, sizeof *f);
        f->from = from;
        f->to = to;
        f->pipe[0] = f->pipe[1] = -1;
}

int flow_prepend(struct flow *f, const void *data, size_t len)
{
        if (!len)
                return 0;
        size_t pending = f->len - f->off;
        char *nb = malloc(pending + len > FLOW_BUF ? pending + len : FLOW_BUF);
        if (!nb)
                return -ENOMEM;
        memcpy(nb, data, len);
        if (pending)
                memcpy(nb + len, f->buf + f->off, pending);
        free(f->buf);
        f->buf = nb;
        f->off = 0;
        f->len = pending + len;
        f->cap = f->len > FLOW_BUF ? f->len : FLOW_BUF;
        return 0;
}

/* Pipes cost two descriptors per direction, sockets one per side: left
 * unchecked, pipes would take the descriptors new connections need (6 per
 * tunnel instead of 2). Pipes may use at most a quarter of the limit; past
 * that, directions use the buffer. Counted across every run in this
 * process, hence atomic. */
static _Atomic long pipe_fds;
static _Atomic int big_pipes;

static long pipe_budget(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return 1L << 20;
        return (long)(rl.rlim_cur / 4);
}

static bool try_pipe(struct flow *f)
{
        if (f->pipe[0] >= 0)
                return true;
        if (pipe_fds + 2 > pipe_budget())
                return false;
        if (pipe2(f->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
                f->pipe[0] = f->pipe[1] = -1;
                return false;
        }
        pipe_fds += 2;
        if (big_pipes < BIG_PIPES && fcntl(f->pipe[1], F_SETPIPE_SZ, FLOW_CHUNK) >= 0) {
                big_pipes++;
                f->big_pipe = true;
        }
        return true;
}

enum flow_state flow_pump(struct flow *f)
{
        for (int turn = 0; turn < FLOW_TURNS; turn++) {
                if (f->off < f->len) {
                        ssize_t n = send(f->to, f->buf + f->off, f->len - f->off, MSG_NOSIGNAL | MSG_DONTWAIT);
                        if (n < 0)
                                return errno == EAGAIN || errno == EINTR ? FLOW_WANT_WRITE : FLOW_ERROR;
                        f->off += (size_t)n;
                        f->bytes += (uint64_t)n;
                        if (f->off == f->len)
                                f->off = f->len = 0;
                        continue;
                }
                if (f->in_pipe) {
                        ssize_t n = splice(f->pipe[0], NULL, f->to, NULL, f->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n < 0)
                                return errno == EAGAIN || errno == EINTR ? FLOW_WANT_WRITE : FLOW_ERROR;
                        f->in_pipe -= (size_t)n;
                        f->bytes += (uint64_t)n;
                        continue;
                }
                if (f->limited && f->remain == 0)
                        f->ended = true;
                if (f->ended)
                        return FLOW_DONE;  /* the message is over; the connection is not */
                if (f->eof) {
                        /* Half-close: pass the sender's FIN on, keep the
                         * other direction running. */
                        if (!f->shut && shutdown(f->to, SHUT_WR) < 0 && errno != ENOTCONN)
                                return FLOW_ERROR;
                        f->shut = true;
                        return FLOW_DONE;
                }
                ssize_t n;
                size_t want = f->limited && f->remain < FLOW_CHUNK ? (size_t)f->remain : FLOW_CHUNK;
                if (!f->chunked && !f->scan && try_pipe(f)) {
                        n = splice(f->from, NULL, f->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0)
                                f->in_pipe = (size_t)n;
                } else {
                        if (f->cap < FLOW_BUF) {
                                char *nb = realloc(f->buf, FLOW_BUF);
                                if (!nb)
                                        return FLOW_ERROR;
                                f->buf = nb;
                                f->cap = FLOW_BUF;
                        }
                        /* A chunked message is looked at before it is
                         * taken: what follows its last chunk (the client's
                         * next request) stays in the socket for whoever
                         * reads the next message. */
                        n = recv(f->from, f->buf, want < f->cap ? want : f->cap,
                                 MSG_DONTWAIT | (f->chunked ? MSG_PEEK : 0));
                        if (n > 0 && f->chunked) {
                                ssize_t used = http_chunk_feed(&f->chunk, f->buf, (size_t)n);
                                if (used < 0)
                                        return FLOW_ERROR;
                                /* the same bytes again, now taken: nothing
                                 * else reads this socket */
                                n = used ? recv(f->from, f->buf, (size_t)used, MSG_DONTWAIT) : 0;
                                if (n != used)
                                        return FLOW_ERROR;
                                f->ended = f->chunk.done;
                                if (!n) {
                                        /* a message that ended with bytes already fed */
                                        continue;
                                }
                        }
                        if (n > 0) {
                                f->off = 0;
                                f->len = (size_t)n;
                        }
                }
                if (n > 0 && f->scan && (f->found = placeholder_scan(f->scan_ic, f->scan, f->buf, (size_t)n))) {
                        explicit_bzero(f->buf, (size_t)n);
                        f->off = f->len = 0;
                        return FLOW_ERROR;
                }
                if (n > 0 && f->limited)
                        f->remain -= (uint64_t)n;
                if (n == 0)
                        f->eof = true;
                else if (n < 0)
                        return errno == EAGAIN || errno == EINTR ? FLOW_WANT_READ : FLOW_ERROR;
        }
        return f->off < f->len || f->in_pipe ? FLOW_WANT_WRITE : FLOW_WANT_READ;
}

void flow_free(struct flow *f)
{
        if (f->pipe[0] >= 0) {
                close(f->pipe[0]);
                close(f->pipe[1]);
                pipe_fds -= 2;
                if (f->big_pipe)
                        big_pipes--;
                f->big_pipe = false;
        }
        f->pipe[0] = f->pipe[1] = -1;
        free(f->buf);
        f->buf = NULL;
        f->off = f->len = f->cap = 0;
        free(f->scan);
        f->scan = NULL;
}
