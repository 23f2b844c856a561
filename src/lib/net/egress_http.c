/* egress_http.c — the proxy ports' front end: what a client of 3128 or
 * 1080 speaks (its first byte), the HTTP proxy request (CONNECT or an
 * absolute URI), HTTP refusals, and plain http's keep-alive: each response
 * read by its framing, each next request judged from scratch. The SOCKS
 * requests are egress_socks.c's; the connection core is egress.c. */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "net/proxy.h"

#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static const char *status_text(int status)
{
        switch (status) {
        case 400: return "Bad Request";
        case 403: return "Forbidden";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 414: return "URI Too Long";
        case 431: return "Request Header Fields Too Large";
        case 501: return "Not Implemented";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        default: return "Error";
        }
}

/* The readable answer an agent gets: status, a one-line body, and for a
 * policy refusal an X-Brig-Deny header naming the target and the reason.
 * Only validated text (normalized names, formatted addresses, brig's own
 * reasons) goes in, never bytes the client sent. */
void http_refuse(struct conn *c, int status, const char *target, const char *reason)
{
        char body[512], head[2048];
        int bl = target ? snprintf(body, sizeof body, "brig: %s refused: %s\n", target, reason)
                        : snprintf(body, sizeof body, "brig: %s\n", reason);
        if (bl < 0 || (size_t)bl >= sizeof body)
                bl = (int)strlen(body);
        char deny[400] = "";
        if (status == 403 && target)
                snprintf(deny, sizeof deny, "X-Brig-Deny: %s; %s\r\n", target, reason);
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s"
                          "Connection: close\r\n\r\n%s",
                          status, status_text(status), bl, deny, body);
        if (hl < 0 || (size_t)hl >= sizeof head)
                hl = (int)strlen(head);
        conn_refuse_with(c, head, (size_t)hl);
}

static void on_http_request(struct conn *c)
{
        const char *why;
        int r = http_parse_request(c->in, c->in_len, &c->req, &why);
        if (r == 0)
                return;
        if (r < 0) {
                log_decision(c, false, why, NULL);
                http_refuse(c, -r, NULL, why);
                return;
        }
        c->in_used = c->req.head_len;
        snprintf(c->method, sizeof c->method, "%s", c->req.method);
        c->forward = c->req.kind == HTTP_FORWARD;
        c->keep_alive = c->forward && c->req.keep_alive;
        c->protocol = c->forward ? "http" : "http-connect";
        set_interest(c->e, &c->cw, 0);
        if (c->forward && plain_http_refused(c))
                return;
        judge_target(c, c->req.host, c->req.port);
}

/* What a proxy port expects, for the reason a client that spoke
 * something else reads. */
#define PROXY_PROTOCOLS "an HTTP proxy request, SOCKS5 or SOCKS4"

static const char *proxy_port_name(enum egress_listener_kind kind)
{
        return kind == EGRESS_SOCKS ? "SOCKS port" : "HTTP proxy port";
}

/* The first byte is no proxy protocol's: refused at once, logged with
 * what the client seems to have spoken, and answered in words it may
 * show (a TLS alert for TLS, which could show nothing else). */
static void unknown_protocol(struct conn *c)
{
        uint8_t b = (uint8_t)c->in[0];
        bool tls = b == 0x16;
        char reason[256];
        snprintf(reason, sizeof reason,
                 "the client spoke %s (first byte 0x%02x) to brig's %s %d, which expects " PROXY_PROTOCOLS "%s",
                 tls ? "TLS" : "no proxy protocol", b, proxy_port_name(c->port_kind), proxy_port_number(c->port_kind),
                 tls ? " (a proxy URL with https://? brig's proxy is http://127.0.0.1:3128)" : "");
        c->protocol = tls ? "tls" : "unknown";
        log_decision(c, false, reason, NULL);
        if (tls) {
                /* a fatal handshake_failure alert (RFC 8446 6.2) */
                static const char alert[] = { 0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28 };
                conn_refuse_with(c, alert, sizeof alert);
                return;
        }
        http_refuse(c, 400, NULL, reason);
}

/* Which protocol a client of a proxy port speaks, from its first byte.
 * Either port serves an HTTP proxy request, SOCKS5 and SOCKS4 under the
 * same judgement: clients pick their proxy from variables each reads
 * differently (Chromium takes ALL_PROXY's socks5h:// for an HTTP proxy
 * and speaks HTTP to the SOCKS port), and a client cut off unread fails
 * without anyone knowing why. False when it was refused. */
static bool detect_protocol(struct conn *c)
{
        uint8_t b = (uint8_t)c->in[0];
        c->detected = true;
        if (b == 5 || b == 4) {
                c->kind = EGRESS_SOCKS;
                c->socks4 = b == 4;
                c->protocol = c->socks4 ? "socks4" : "socks5";
                return true;
        }
        if ((b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z')) {
                c->kind = EGRESS_HTTP;  /* a method: the parser judges the rest */
                c->protocol = "http";
                return true;
        }
        unknown_protocol(c);
        return false;
}

void read_request(struct conn *c)
{
        size_t max = c->kind == EGRESS_HTTP ? HTTP_HEAD_MAX : SOCKS_IN_MAX;
        if (c->in_len == c->in_cap) {
                if (c->in_cap >= max) {
                        if (c->kind == EGRESS_HTTP) {
                                on_http_request(c);  /* reports 431 */
                        } else {
                                log_decision(c, false, "SOCKS request too long", NULL);
                                socks_refuse(c, SOCKS_GENERAL_FAILURE);
                        }
                        return;
                }
                size_t cap = c->in_cap ? c->in_cap * 4 : HEAD_BUF_MIN;
                int r = in_grow(c, cap > max ? max : cap, HEAD_BUF_MIN);
                if (r == -ENOBUFS) {
                        static const char why[] = "too many large request heads at once (brig holds at most 32 MiB "
                                                  "of them)";
                        c->at_limit = true;
                        log_decision(c, false, why, NULL);
                        if (c->kind == EGRESS_HTTP)
                                http_refuse(c, 503, NULL, why);
                        else
                                socks_refuse(c, SOCKS_GENERAL_FAILURE);
                        return;
                }
                if (r < 0) {
                        conn_close(c);
                        return;
                }
        }
        ssize_t n = recv(c->cw.fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                conn_close(c);  /* gone before asking for anything */
                return;
        }
        if (c->kept && !c->in_len)
                c->started_ms = now_ms();  /* the next request's handshake time starts */
        c->in_len += (size_t)n;
        c->last_ms = now_ms();
        if (!c->detected && !detect_protocol(c))
                return;
        /* a head is only complete at a line end: don't rescan for nothing
         * (a byte-at-a-time sender would make parsing quadratic) */
        if (c->kind == EGRESS_HTTP && !memchr(c->in + c->in_len - n, '\n', (size_t)n) && c->in_len < c->in_cap)
                return;
        if (c->kind == EGRESS_HTTP)
                on_http_request(c);
        else
                on_socks_bytes(c);
}

/* Plain http, the response over by its framing: the upstream connection
 * ends, the client's next request is read and judged from scratch. */
void next_request(struct conn *c)
{
        struct egress *e = c->e;
        if (c->allowed)
                log_close(c);
        c->allowed = false;
        unwatch(e, &c->uw);
        flow_free(&c->up);
        flow_free(&c->down);
        flow_init(&c->up, -1, -1);
        flow_init(&c->down, -1, -1);
        free(c->reply);
        c->reply = NULL;
        c->reply_len = c->reply_used = 0;
        c->method[0] = c->host[0] = c->why[0] = c->failure[0] = '\0';
        if (c->kind != EGRESS_TRANSPARENT)
                c->port = 0;  /* a redirected connection keeps its original destination */
        c->n_cands = c->next_cand = c->next_up = 0;
        c->connected = -1;
        c->established = c->forward = c->keep_alive = c->resp_head = false;
        c->interim = 0;
        c->last_errno = 0;
        memset(&c->req, 0, sizeof c->req);
        c->kept = true;
        c->started_ms = c->last_ms = now_ms();
        set_interest(e, &c->cw, EPOLLIN);
        if (c->kind == EGRESS_TRANSPARENT) {
                /* filtered mode: the next request is sniffed and judged
                 * like the first (a name, deny rules, the mapped name) */
                c->protocol = "http-direct";
                c->pinned = c->late = false;
                c->sniff_need = c->sniffed = 0;  /* what is in is new */
                c->state = C_SNIFF;
                if (c->in_len)
                        sniff_judge(c);
                return;
        }
        c->protocol = "http";
        c->state = C_REQUEST;
        if (c->in_len)
                on_http_request(c);  /* pipelined */
}

/* Plain http: the upstream's response head, read whole so that its framing
 * is known. Returns true when the body relay may go on. */
bool read_response_head(struct conn *c)
{
        if (!c->reply && !(c->reply = malloc(HTTP_HEAD_MAX))) {
                conn_close(c);
                return false;
        }
        ssize_t n = recv(c->uw.fd, c->reply + c->reply_len, HTTP_HEAD_MAX - c->reply_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return false;
        if (n <= 0) {
                c->keep_alive = false;
                snprintf(c->failure, sizeof c->failure, "upstream closed the connection without a response");
                http_refuse(c, 502, NULL, c->failure);
                return false;
        }
        c->reply_len += (size_t)n;
        struct http_response resp;
        const char *why;
        int r = http_parse_response(c->reply, c->reply_len, &resp, &why);
        if (r == 0)
                return false;
        if (r < 0) {
                snprintf(c->failure, sizeof c->failure, "upstream sent a bad response: %s", why);
                http_refuse(c, 502, NULL, c->failure);
                return false;
        }
        const char *body = c->reply + resp.head_len;
        size_t extra = c->reply_len - resp.head_len;
        bool no_body = strcmp(c->method, "HEAD") == 0 || resp.status == 204 || resp.status == 304;
        char *head = NULL;
        size_t hlen = 0;
        int err = 0;
        if (resp.status < 200) {
                /* an interim response (100 Continue) or 101: relayed as it
                 * comes, to the end of the connection */
                c->keep_alive = false;
                c->interim = c->down.bytes + c->reply_len;
                err = flow_prepend(&c->down, c->reply, c->reply_len);
                if (resp.status == 101 && c->req.upgrade) {
                        /* the handshake it asked for: from here on the
                         * client's bytes are the new protocol's, all of
                         * them, to the end */
                        c->up.limited = c->up.chunked = c->up.ended = false;
                        if (c->up.scan)
                                c->up.scan->chunked = false;  /* the new protocol's bytes, all searched */
                }
        } else {
                if (no_body) {
                        extra = 0;
                        c->down.limited = true;
                } else if (resp.has_length) {
                        if (extra > resp.length)
                                extra = (size_t)resp.length;
                        c->down.limited = true;
                        c->down.remain = resp.length - extra;
                } else if (resp.chunked) {
                        c->down.chunked = true;
                        ssize_t used = http_chunk_feed(&c->down.chunk, body, extra);
                        if (used < 0) {
                                snprintf(c->failure, sizeof c->failure, "upstream sent a bad chunked body");
                                http_refuse(c, 502, NULL, c->failure);
                                return false;
                        }
                        extra = (size_t)used;
                        c->down.ended = c->down.chunk.done;
                } else {
                        c->keep_alive = false;  /* the response ends with the connection */
                }
                head = http_rewrite_response(c->reply, &resp, c->keep_alive, &hlen);
                if (!head || (extra && flow_prepend(&c->down, body, extra) < 0) || flow_prepend(&c->down, head, hlen) < 0)
                        err = -ENOMEM;
        }
        free(head);
        free(c->reply);
        c->reply = NULL;
        c->reply_len = 0;
        c->resp_head = false;
        if (err < 0) {
                conn_close(c);
                return false;
        }
        return true;
}
