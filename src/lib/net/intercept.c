/* intercept.c — one intercepted connection, on a thread of its own.
 *
 * The egress loop judged the name and its addresses as for any other
 * connection and connected; for a host with a bound secret or an http rule
 * it hands both sockets here instead of relaying bytes. Then, in order:
 *
 *   1. TLS to the upstream, verified: the trust store and --upstream-ca,
 *      the judged name checked against the certificate. Nothing the client
 *      sends goes anywhere before this holds.
 *   2. TLS to the client with a leaf minted for that name by the
 *      sandbox's CA. A failed step 1 is answered here: 502 with
 *      X-Brig-Deny saying why, over TLS the client trusts.
 *   3. Each request, as it comes (keep-alive, pipelined ones one after the
 *      other): its head judged whole (intercept_judge_head: the Host, the
 *      http rules, every placeholder), refused with 403 or sent on with
 *      the placeholders swapped; its body framed by Content-Length or its
 *      chunks and scanned for placeholders, which end the connection
 *      before the bytes holding them go on; then the response relayed,
 *      framed the same way, and cut if it carries a secret's value back.
 *
 * The thread blocks (SO_RCVTIMEO bounds every read); intercept_stop wakes
 * it with shutdown() and joins it. The audit stream and the refusal
 * summary belong to the egress loop: events are queued here and drained
 * there (intercept_event_fd). */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "net/proxy.h"
#include "core/ossl_fns.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IC_IDLE_S 300
#define IC_BUF (64u << 10)
#define IC_READ_AHEAD (128u << 10)
/* Each holds up to ~360 KiB of buffers in the supervisor while data
 * flows (the upstream's 128 KiB reads among them; an idle one releases
 * its record buffers), ~0.8 MiB with a 16 KiB secret bound to its host
 * (struct held), outside the sandbox's memory limit: at most this many
 * at once. */
#define IC_MAX_CONNS 256

struct ic_conn {
        struct intercept *ic;
        struct ic_conn *next;
        pthread_t thread;
        bool done;            /* the thread has ended: join it */
        struct intercept_conn_args a;
        SSL *client, *up;
        char *in;             /* from the client, not yet handled */
        size_t in_len, in_cap;
        uint64_t requests;
        uint64_t bytes_up, bytes_down;
        bool answered;        /* brig answered the client itself (a refusal) */
};

int intercept_init(struct intercept *ic)
{
        pthread_mutex_init(&ic->lock, NULL);
        ic->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        ic->events = json_array();
        return ic->event_fd < 0 || !ic->events ? -ENOMEM : 0;
}

void intercept_fini(struct intercept *ic)
{
        if (ic->event_fd >= 0)
                close(ic->event_fd);
        json_decref(ic->events);
        pthread_mutex_destroy(&ic->lock);
}

int intercept_event_fd(struct intercept *ic)
{
        return ic->event_fd;
}

static void queue(struct ic_conn *c, json_t *ev, bool refusal)
{
        struct intercept *ic = c->ic;
        pthread_mutex_lock(&ic->lock);
        json_array_append_new(ic->events, json_pack("[o, b]", ev, refusal));
        pthread_mutex_unlock(&ic->lock);
        uint64_t one = 1;
        (void)!write(ic->event_fd, &one, sizeof one);
}

/* Ended threads joined, their sockets closed (the loop's thread). */
static void reap(struct intercept *ic, bool all)
{
        for (;;) {
                pthread_mutex_lock(&ic->lock);
                struct ic_conn **pp = &ic->conns, *c = NULL;
                for (; *pp; pp = &(*pp)->next)
                        if (all || (*pp)->done) {
                                c = *pp;
                                *pp = c->next;
                                break;
                        }
                pthread_mutex_unlock(&ic->lock);
                if (!c)
                        return;
                pthread_join(c->thread, NULL);
                close(c->a.client_fd);
                close(c->a.upstream_fd);
                free(c);
        }
}

json_t *intercept_next_event(struct intercept *ic, bool *refusal)
{
        uint64_t n;
        (void)!read(ic->event_fd, &n, sizeof n);
        reap(ic, false);
        pthread_mutex_lock(&ic->lock);
        json_t *pair = json_array_size(ic->events) ? json_incref(json_array_get(ic->events, 0)) : NULL;
        if (pair)
                json_array_remove(ic->events, 0);
        pthread_mutex_unlock(&ic->lock);
        if (!pair)
                return NULL;
        json_t *ev = json_incref(json_array_get(pair, 0));
        *refusal = json_is_true(json_array_get(pair, 1));
        json_decref(pair);
        return ev;
}

void intercept_stop(struct intercept *ic)
{
        pthread_mutex_lock(&ic->lock);
        ic->stopping = true;
        for (struct ic_conn *c = ic->conns; c; c = c->next) {
                shutdown(c->a.client_fd, SHUT_RDWR);
                shutdown(c->a.upstream_fd, SHUT_RDWR);
        }
        pthread_mutex_unlock(&ic->lock);
        reap(ic, true);
}

/* ---- events ----------------------------------------------------------------- */

static json_t *event(struct ic_conn *c, const char *decision, const char *phase, const char *reason)
{
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "event", "net", "decision", decision, "phase",
                              phase, "protocol", "https-intercepted", "host", c->a.host, "port", c->a.port,
                              "address", c->a.address);
        if (reason)
                json_object_set_new(o, "reason", json_string(reason));
        return o;
}

static void log_request(struct ic_conn *c, const char *method, const struct intercept_verdict *v)
{
        json_t *o = event(c, v->status ? "deny" : "allow", "request", v->status ? v->reason : NULL);
        json_object_set_new(o, "method", json_string(method));
        json_object_set_new(o, "path", json_string(v->path));
        if (v->secret) {
                json_object_set_new(o, "secret", json_string(v->secret->spec->name));
                json_object_set_new(o, "exfiltration", json_true());
        }
        queue(c, o, v->status != 0);
}

/* ---- I/O -------------------------------------------------------------------- */

static bool write_all(SSL *ssl, const char *p, size_t n)
{
        while (n) {
                size_t w = 0;
                if (SSL_write_ex(ssl, p, n, &w) != 1)
                        return false;
                p += w;
                n -= w;
        }
        return true;
}

/* More bytes from the client into c->in; false at its end or an error. */
static bool client_fill(struct ic_conn *c)
{
        if (c->in_len == c->in_cap) {
                if (c->in_cap >= HTTP_HEAD_MAX + IC_BUF)
                        return false;
                size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
                char *b = realloc(c->in, cap);
                if (!b)
                        return false;
                c->in = b;
                c->in_cap = cap;
        }
        size_t got = 0;
        if (SSL_read_ex(c->client, c->in + c->in_len, c->in_cap - c->in_len, &got) != 1)
                return false;
        c->in_len += got;
        return true;
}

static void consume(struct ic_conn *c, size_t n)
{
        memmove(c->in, c->in + n, c->in_len - n);
        c->in_len -= n;
}

static void answer(struct ic_conn *c, int status, const char *reason)
{
        const char *text = status == 403 ? "Forbidden" : status == 400 ? "Bad Request" : status == 501 ? "Not Implemented"
                           : status == 503 ? "Service Unavailable" : "Bad Gateway";
        char body[512], head[1400];
        int bl = snprintf(body, sizeof body, "brig: %s refused: %s\n", c->a.host, reason);
        if (bl < 0 || (size_t)bl >= sizeof body)
                bl = (int)strlen(body);
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                          "X-Brig-Deny: %s; %s\r\nConnection: close\r\n\r\n%s",
                          status, text, bl, c->a.host, reason, body);
        if (hl > 0 && (size_t)hl < sizeof head)
                (void)write_all(c->client, head, (size_t)hl);
        c->answered = true;
}

/* After brig's own answer, the client may still be sending what it was
 * sending (the rest of a body refused in its first piece): closing with
 * that unread makes the kernel reset the connection, discarding the
 * answer it has not sent yet, and a client still writing (curl) fails on
 * the reset and never reads the 403. So the answer goes with a FIN and
 * what the client sends after it is read and dropped, until it closes,
 * DRAIN_TIMEOUT_MS pass or LINGER_MAX bytes came, as the proxy does for
 * a plain-http refusal (egress.c, C_REFUSING) and HTTP servers call a
 * lingering close. intercept_stop's shutdown ends the wait at once. */
#define LINGER_MAX (16u << 20)
static void linger(int fd)
{
        if (shutdown(fd, SHUT_WR) < 0)
                return;
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        char drop[16384];
        size_t dropped = 0;
        for (;;) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                long left = DRAIN_TIMEOUT_MS - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (left <= 0 || dropped >= LINGER_MAX || poll(&p, 1, (int)left) <= 0)
                        return;
                ssize_t n = read(fd, drop, sizeof drop);
                if (n <= 0)
                        return;
                dropped += (size_t)n;
        }
}

/* ---- the request body: framed, scanned, sent on ------------------------------ */

/* Bytes of the message in c->in: sent upstream unless they hold a
 * placeholder (or complete one begun in the pieces before). Returns 0, or
 * -1 (refused: logged and answered). */
static int body_piece(struct ic_conn *c, struct placeholder_scan *ps, const char *method, size_t n)
{
        const struct secret *s = placeholder_scan(c->ic, ps, c->in, n);
        if (s) {
                struct intercept_verdict v = { .status = 403, .secret = s };
                snprintf(v.reason, sizeof v.reason, "exfiltration: the placeholder of secret %s in the request body "
                         "to %s", s->spec->name, c->a.host);
                log_request(c, method, &v);
                answer(c, 403, v.reason);
                return -1;
        }
        if (!write_all(c->up, c->in, n))
                return -1;
        c->bytes_up += n;
        consume(c, n);
        return 0;
}

static int relay_body(struct ic_conn *c, const struct http_request *req)
{
        struct placeholder_scan ps = { .chunked = req->has_te, .ch.strict = true };
        if (!req->has_te) {
                uint64_t left = req->length;
                while (left) {
                        if (!c->in_len && !client_fill(c))
                                return -1;
                        size_t n = c->in_len < left ? c->in_len : (size_t)left;
                        if (body_piece(c, &ps, req->method, n) < 0)
                                return -1;
                        left -= n;
                }
                return 0;
        }
        struct http_chunk ch = { .strict = true };
        while (!ch.done) {
                if (!c->in_len && !client_fill(c))
                        return -1;
                ssize_t used = http_chunk_feed(&ch, c->in, c->in_len);
                if (used < 0) {
                        answer(c, 400, "bad chunked request body");
                        return -1;
                }
                if (body_piece(c, &ps, req->method, (size_t)used) < 0)
                        return -1;
        }
        return 0;
}

/* ---- the response: framed, checked for a value, sent back ------------------- */

/* What a response passes through: the bytes held back, the seam between
 * two pieces, and room to decode a piece (echo_find), sized for the
 * secrets bound to this host (none: nothing is searched). */
struct held {
        size_t hold;          /* the longest echo's raw form, less one */
        char *buf;            /* hold bytes */
        size_t len;
        char *seam;           /* 2 * hold */
        char *scratch;        /* a piece or a seam, decoded */
        bool chunked;         /* the bytes are a chunked body's data: brig frames them */
};

/* Checked bytes to the client; a chunked body's data in chunks of brig's
 * own, its search having run over the data alone (the upstream's framing
 * between two halves of a value would hide it). */
static bool send_down(struct ic_conn *c, const struct held *h, const char *p, size_t n)
{
        if (!n)
                return true;  /* a zero-size chunk would end the body */
        if (!h->chunked)
                return write_all(c->client, p, n);
        char size[24];
        int sl = snprintf(size, sizeof size, "%zx\r\n", n);
        return write_all(c->client, size, (size_t)sl) && write_all(c->client, p, n) &&
               write_all(c->client, "\r\n", 2);
}

/* Does a secret go to this connection's host (its responses may echo it)? */
static bool host_bound(const struct ic_conn *c)
{
        return echo_longest(c->ic, c->a.host) > 0;
}

/* The upstream sent back a secret's value (an echo, a debug page): the
 * connection is cut before it reaches the sandbox. */
static void value_echoed(struct ic_conn *c, const struct secret *s)
{
        char why[256];
        snprintf(why, sizeof why, "the upstream sent back the value of secret %s: the connection was cut before "
                 "it reached the sandbox", s->spec->name);
        json_t *o = event(c, "deny", "response", why);
        json_object_set_new(o, "secret", json_string(s->spec->name));
        queue(c, o, true);
}

/* Send p[0..n) to the client after checking it for an echo of every
 * value bound to the host, holding back the last (longest form - 1)
 * bytes, so that an echo split across two pieces is found before any of
 * it leaves; `end` sends all. Only a host a secret goes to is searched
 * (no other was ever sent a value). */
static int pass_down(struct ic_conn *c, struct held *h, const char *p, size_t n, bool end)
{
        const struct intercept *ic = c->ic;
        size_t hold = h->hold;
        const struct secret *s = hold ? echo_find(ic, c->a.host, p, n, h->scratch) : NULL;
        if (!s && h->len) {
                /* the seam: what is held, and the first bytes of p */
                size_t k = n < hold ? n : hold;
                memcpy(h->seam, h->buf, h->len);
                memcpy(h->seam + h->len, p, k);
                s = echo_find(ic, c->a.host, h->seam, h->len + k, h->scratch);
        }
        if (s) {
                value_echoed(c, s);
                return -1;
        }
        size_t total = h->len + n, keep = end ? 0 : total < hold ? total : hold;
        size_t send = total - keep;
        /* what is held goes first; then p, but its last `keep` bytes */
        size_t from_held = send < h->len ? send : h->len;
        if (!send_down(c, h, h->buf, from_held))
                return -1;
        size_t from_p = send - from_held;
        if (!send_down(c, h, p, from_p))
                return -1;
        c->bytes_down += send;
        memmove(h->buf, h->buf + from_held, h->len - from_held);
        h->len -= from_held;
        memcpy(h->buf + h->len, p + from_p, n - from_p);
        h->len += n - from_p;
        return 0;
}

/* Returns 1 when the connection may carry another request, 0 when it
 * ends after this response, -1 on an error. */
static int relay_response_in(struct ic_conn *c, const struct http_request *req, char *buf, struct held *h)
{
        size_t len = 0;
        for (;;) {
                struct http_response resp;
                const char *why;
                int r;
                while ((r = http_parse_response(buf, len, &resp, &why)) == 0) {
                        size_t got = 0;
                        if (SSL_read_ex(c->up, buf + len, HTTP_HEAD_MAX - len, &got) != 1) {
                                answer(c, 502, "the upstream closed before its response");
                                return -1;
                        }
                        len += got;
                }
                if (r < 0) {
                        answer(c, 502, why);
                        return -1;
                }
                if (resp.coded && host_bound(c)) {
                        /* Compressed bytes hide a value from the search
                         * above, and the client inflates them: brig asked
                         * for identity (intercept_judge_head), so refuse. */
                        const char *coded = "the response is compressed (Content-Encoding or a transfer coding "
                                            "other than chunked), which hides a secret's value from brig's check; "
                                            "brig asked for Accept-Encoding: identity";
                        json_t *o = event(c, "deny", "response", coded);
                        queue(c, o, true);
                        answer(c, 502, coded);
                        return -1;
                }
                if (pass_down(c, h, buf, resp.head_len, true) < 0)
                        return -1;
                memmove(buf, buf + resp.head_len, len - resp.head_len);
                len -= resp.head_len;
                if (resp.status >= 100 && resp.status < 200 && resp.status != 101)
                        continue;  /* 100, 103: the final response follows */
                if (resp.status == 101)
                        return -1;  /* upgrades are refused before this (no 101 is asked for) */
                bool none = strcmp(req->method, "HEAD") == 0 || resp.status == 204 || resp.status == 304;
                bool to_close = !resp.has_length && !resp.chunked;
                struct http_chunk ch = { 0 };
                uint64_t left = resp.has_length ? resp.length : 0;
                while (!none) {
                        if (!len) {
                                size_t got = 0;
                                if (SSL_read_ex(c->up, buf, HTTP_HEAD_MAX + IC_BUF, &got) != 1) {
                                        if (to_close)
                                                return pass_down(c, h, "", 0, true) < 0 ? -1 : 0;
                                        return -1;
                                }
                                len = got;
                                /* the records already read ahead, in the same piece: fewer,
                                 * bigger writes to the client */
                                while (len < HTTP_HEAD_MAX + IC_BUF && SSL_has_pending(c->up) &&
                                       SSL_read_ex(c->up, buf + len, HTTP_HEAD_MAX + IC_BUF - len, &got) == 1)
                                        len += got;
                        }
                        size_t n = len;
                        if (resp.chunked) {
                                /* the data searched and sent, the framing read here */
                                h->chunked = true;
                                size_t used = 0;
                                while (used < len && !ch.done) {
                                        uint64_t data = http_chunk_data_left(&ch);
                                        size_t m = !data ? 1 : len - used < data ? len - used : (size_t)data;
                                        if (http_chunk_feed(&ch, buf + used, m) != (ssize_t)m)
                                                return -1;
                                        if (data && pass_down(c, h, buf + used, m, false) < 0)
                                                return -1;
                                        used += m;
                                }
                                if (ch.done && (pass_down(c, h, "", 0, true) < 0 ||
                                                !write_all(c->client, "0\r\n\r\n", 5)))
                                        return -1;  /* trailers dropped: nothing searched them */
                                memmove(buf, buf + used, len - used);
                                len -= used;
                                if (ch.done)
                                        break;
                                continue;
                        } else if (!to_close && n > left) {
                                n = (size_t)left;
                        }
                        bool end = !to_close && left == n;
                        if (pass_down(c, h, buf, n, end) < 0)
                                return -1;
                        if (!to_close)
                                left -= n;
                        memmove(buf, buf + n, len - n);
                        len -= n;
                        if (end)
                                break;
                }
                return to_close ? 0 : 1;
        }
}

static int relay_response(struct ic_conn *c, const struct http_request *req)
{
        size_t longest = echo_longest(c->ic, c->a.host);
        struct held h = { .hold = longest ? longest - 1 : 0 };
        /* held, the seam, and a piece or a seam decoded */
        size_t piece = 2 * h.hold > HTTP_HEAD_MAX + IC_BUF ? 2 * h.hold : HTTP_HEAD_MAX + IC_BUF;
        size_t size = h.hold ? 3 * h.hold + piece : 1;
        _cleanup_free_ char *buf = malloc(HTTP_HEAD_MAX + IC_BUF);
        _cleanup_free_ char *held = malloc(size);
        if (!buf || !held)
                return -1;
        h.buf = held;
        h.seam = held + h.hold;
        h.scratch = held + 3 * h.hold;
        int r = relay_response_in(c, req, buf, &h);
        /* what a cut response held (a value echoed) is not left in the heap */
        explicit_bzero(buf, HTTP_HEAD_MAX + IC_BUF);
        explicit_bzero(held, size);
        return r;
}

/* ---- a request ------------------------------------------------------------- */

/* Returns 1 for the next request, 0 at the client's end, -1 to close. */
static int one_request(struct ic_conn *c)
{
        struct http_request req;
        const char *why = NULL;
        int r;
        while ((r = http_parse_direct(c->in, c->in_len, &req, &why)) == 0)
                if (!client_fill(c))
                        return c->in_len ? -1 : 0;
        if (r < 0) {
                struct intercept_verdict v = { .status = -r };
                snprintf(v.reason, sizeof v.reason, "%s", why);
                log_request(c, "?", &v);
                answer(c, -r, why);
                return -1;
        }
        c->requests++;
        struct intercept_verdict v;
        intercept_judge_head(c->ic, c->ic->policy, c->a.host, true, c->in, &req, &v);
        if (v.status == 0 && req.upgrade) {
                /* After a 101 the bytes are frames, not requests: nothing
                 * would judge them (a client's frames are masked, so not
                 * even a placeholder could be searched for). */
                explicit_bzero(v.head, v.head_len);  /* it may hold a value */
                free(v.head);
                v.head = NULL;
                v.status = 501;
                snprintf(v.reason, sizeof v.reason, "protocol upgrades (WebSocket, h2c) are not relayed to a host "
                         "brig intercepts (a --secret-host or --http-rule names it): what follows the upgrade "
                         "could not be judged; a host with neither stays end to end");
        }
        if (v.status) {
                log_request(c, req.method, &v);
                answer(c, v.status, v.reason);
                return -1;
        }
        /* A small body is read whole and judged before anything goes on
         * (the usual case); a bigger one follows its head, piece by piece,
         * and a placeholder in it cuts the request short upstream. */
        bool small = !req.has_te && req.length <= IC_BUF;
        while (small && c->in_len - req.head_len < req.length)
                if (!client_fill(c)) {
                        free(v.head);
                        return -1;
                }
        size_t at;
        const struct secret *s = small ? intercept_find(c->ic, c->in + req.head_len, (size_t)req.length, &at) : NULL;
        if (s) {
                explicit_bzero(v.head, v.head_len);
                free(v.head);
                v = (struct intercept_verdict){ .status = 403, .secret = s };
                snprintf(v.reason, sizeof v.reason, "exfiltration: the placeholder of secret %s in the request "
                         "body to %s", s->spec->name, c->a.host);
                log_request(c, req.method, &v);
                answer(c, 403, v.reason);
                return -1;
        }
        log_request(c, req.method, &v);
        consume(c, req.head_len);
        bool ok = write_all(c->up, v.head, v.head_len);
        c->bytes_up += v.head_len;
        explicit_bzero(v.head, v.head_len);  /* it holds the values */
        free(v.head);
        if (!ok || relay_body(c, &req) < 0)
                return -1;
        r = relay_response(c, &req);
        return r < 0 ? -1 : r == 0 || !req.keep_alive ? 0 : 1;
}

/* ---- the connection --------------------------------------------------------- */

static void set_blocking(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        if (fl >= 0)
                (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        /* TLS writes its records in pieces: without this, Nagle holds each
         * small one until the peer's delayed ACK (40 ms a connection) */
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct timeval tv = { .tv_sec = IC_IDLE_S };
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static bool send_plain(int fd, const char *s)
{
        size_t n = strlen(s);
        while (n) {
                ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                s += w;
                n -= (size_t)w;
        }
        return true;
}

/* Step 1: TLS to the upstream, its certificate verified for the name. */
static bool upstream_tls(struct ic_conn *c, char *why, size_t size)
{
        SSL_CTX *ctx = tls_client_ctx(c->ic->ca, c->ic->policy->upstream_cas, c->ic->policy->n_upstream_cas, why,
                                      size);
        if (!ctx)
                return false;
        c->up = SSL_new(ctx);
        SSL_CTX_free(ctx);
        if (!c->up || SSL_set_fd(c->up, c->a.upstream_fd) != 1 ||
            SSL_set_tlsext_host_name(c->up, c->a.host) != 1 || SSL_set1_host(c->up, c->a.host) != 1) {
                snprintf(why, size, "cannot set up TLS to the upstream");
                return false;
        }
        SSL_set_hostflags(c->up, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set_read_ahead(c->up, 1);  /* whole socket reads, not one record header at a time */
        /* ... of IC_READ_AHEAD: several records per read(), not one */
        SSL_set_default_read_buffer_len(c->up, IC_READ_AHEAD);
        if (!host_bound(c))
                SSL_clear_options(c->up, SSL_OP_CLEANSE_PLAINTEXT);  /* no value went there to come back */
        if (SSL_connect(c->up) == 1 && SSL_get_verify_result(c->up) == X509_V_OK)
                return true;
        long v = SSL_get_verify_result(c->up);
        if (v != X509_V_OK)
                snprintf(why, size, "the upstream's certificate is not valid for %s: %s", c->a.host,
                         X509_verify_cert_error_string(v));
        else
                snprintf(why, size, "TLS to the upstream failed: %s",
                         ERR_reason_error_string(ERR_peek_last_error()) ?: "the handshake did not complete");
        return false;
}

/* Step 2: TLS to the client, with a leaf for the name. */
static bool client_tls(struct ic_conn *c)
{
        SSL_CTX *ctx = tls_server_ctx(c->ic->ca, c->a.host);
        if (!ctx)
                return false;
        c->client = SSL_new(ctx);
        SSL_CTX_free(ctx);
        if (!c->client)
                return false;
        BIO *rb = c->a.early_len ? BIO_new(BIO_s_mem()) : NULL;
        if (rb) {
                /* filtered mode: the ClientHello the sniffer read comes first */
                (void)BIO_write(rb, c->a.early, (int)c->a.early_len);
                BIO *sock = BIO_new_socket(c->a.client_fd, BIO_NOCLOSE);
                SSL_set_bio(c->client, rb, sock);
                int r;
                while ((r = SSL_accept(c->client)) != 1) {
                        if (SSL_get_error(c->client, r) != SSL_ERROR_WANT_READ)
                                return false;
                        /* the rest of the handshake from the socket itself */
                        BIO_up_ref(sock);
                        SSL_set0_rbio(c->client, sock);
                }
                return true;
        }
        return SSL_set_fd(c->client, c->a.client_fd) == 1 && SSL_accept(c->client) == 1;
}

static void *conn_main(void *arg)
{
        struct ic_conn *c = arg;
        char why[320] = "";
        set_blocking(c->a.client_fd);
        set_blocking(c->a.upstream_fd);
        if (c->a.connect_reply && !send_plain(c->a.client_fd, "HTTP/1.1 200 Connection established\r\n\r\n"))
                goto out;
        bool verified = upstream_tls(c, why, sizeof why);
        if (!verified) {
                json_t *o = event(c, "deny", "tls", why);
                queue(c, o, true);
        }
        if (!client_tls(c)) {
                if (verified) {
                        json_t *o = event(c, "deny", "tls", "the client did not complete TLS with the sandbox's CA "
                                          "(does it trust $SSL_CERT_FILE?)");
                        queue(c, o, false);
                }
                goto out;
        }
        if (!verified) {
                answer(c, 502, why);
                goto out;
        }
        for (;;) {
                pthread_mutex_lock(&c->ic->lock);
                bool stop = c->ic->stopping;
                pthread_mutex_unlock(&c->ic->lock);
                if (stop || one_request(c) != 1)
                        break;
        }
out:
        if (c->client)
                (void)SSL_shutdown(c->client);
        if (c->answered)
                linger(c->a.client_fd);
        SSL_free(c->client);
        SSL_free(c->up);
        c->client = c->up = NULL;
        if (c->in)
                explicit_bzero(c->in, c->in_cap);
        free(c->in);
        free(c->a.early);
        json_t *o = event(c, "allow", "close", NULL);
        json_object_set_new(o, "requests", json_integer((json_int_t)c->requests));
        json_object_set_new(o, "bytes_up", json_integer((json_int_t)c->bytes_up));
        json_object_set_new(o, "bytes_down", json_integer((json_int_t)c->bytes_down));
        queue(c, o, false);
        ERR_clear_error();
        OPENSSL_thread_stop();
        pthread_mutex_lock(&c->ic->lock);
        c->done = true;
        pthread_mutex_unlock(&c->ic->lock);
        uint64_t one = 1;
        (void)!write(c->ic->event_fd, &one, sizeof one);  /* join it */
        return NULL;
}

int intercept_start(struct intercept *ic, struct intercept_conn_args *a)
{
        reap(ic, false);
        struct ic_conn *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->ic = ic;
        c->a = *a;
        a->early = NULL;
        pthread_mutex_lock(&ic->lock);
        size_t n = 0;
        for (struct ic_conn *i = ic->conns; i; i = i->next)
                n++;
        int r = n >= IC_MAX_CONNS || ic->stopping ? -EMFILE : 0;
        if (r == 0) {
                pthread_attr_t attr;
                pthread_attr_init(&attr);
                pthread_attr_setstacksize(&attr, 256u << 10);
                r = -pthread_create(&c->thread, &attr, conn_main, c);
                pthread_attr_destroy(&attr);
        }
        if (r == 0) {
                c->next = ic->conns;
                ic->conns = c;
        }
        pthread_mutex_unlock(&ic->lock);
        if (r < 0) {
                free(c->a.early);
                free(c);
        }
        return r;
}
