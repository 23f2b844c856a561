/* egress.c — the proxy's event loop and connection life cycle.
 *
 * One epoll fd holds the listeners the sandbox sent, every client and
 * upstream socket, c-ares's sockets and a timerfd (idle and handshake
 * timeouts). The supervisor polls it and calls egress_dispatch(), which
 * never blocks. A connection goes:
 *
 *   REQUEST    read the HTTP head or the SOCKS5 greeting and request
 *   RESOLVING  name allowed by the host rules: c-ares (or --resolve)
 *   CONNECTING to the first answer that passed the address check
 *   RELAY      bytes both ways until both sides are done
 *
 * Plain http (an absolute URI) gets one upstream connection per request,
 * with "Connection: close"; the response head is read and its framing
 * followed (Content-Length, chunked, no body), so a response that ends by
 * its framing lets the client's connection go back to REQUEST for its next
 * request, judged from scratch (keep-alive). A response ended by the
 * upstream's close, or a client that asked to close, ends the connection.
 *   REFUSING   a refusal (403, SOCKS 0x02, ...) is flushed, then closed
 *
 * With an upstream proxy (--upstream-proxy) the judgement is the same —
 * the name, then every address brig's own resolver returns — but an
 * allowed connection goes to the upstream instead of the checked address:
 *
 *   UPSTREAM_DNS  the upstream's own name is being resolved (once per run)
 *   CONNECTING    to the upstream proxy
 *   TUNNEL        "CONNECT host:port" sent, waiting for its 2xx
 *
 * The upstream resolves the name itself, so the no-rebinding guarantee
 * weakens to "brig refuses a name its own resolver maps only to refused
 * addresses" (docs/network.md).
 *
 * The name is judged before any DNS query, so a refused name never leaks
 * into a resolver; every answer is classified, and the proxy connects to
 * exactly the address it checked (no second lookup: no DNS rebinding).
 *
 * Filtered mode adds connections the kernel redirected (netfilter.c) from
 * programs that ignore the proxy settings:
 *
 *   SNIFF      the original destination is known (SO_ORIGINAL_DST); the
 *              first bytes are read for a TLS SNI or an HTTP Host, whole
 *              (a ClientHello reassembled up to SNIFF_HELLO_MAX) or not at
 *              all: what cannot be read within SNIFF_MAX / SNIFF_BARE_MS is
 *              refused, never taken as "no name"
 *
 * then RESOLVING/CONNECTING/RELAY as above, judged by the same rules: a
 * destination brig's DNS stub handed out names its host (and carries no
 * other); a name in the first bytes meets the deny rules first, also for
 * an address a CIDR rule allows; a bare address needs a name from SNI/Host
 * that resolves to that very address, or a CIDR rule. Plain HTTP is parsed
 * by the proxy's parser and forwarded like the proxy's plain http, so each
 * request on the connection goes back to SNIFF and is judged (next_request).
 * A connection let through with no bytes (a server that speaks first) is
 * `late`: its client's first bytes are still judged in RELAY before any go
 * upstream. The stub itself (dnsstub.c) answers on UDP and TCP
 * (egress_dns.c).
 *
 * This file is the connection core: the event loop, a connection's life
 * cycle, the judgement of a target (name, then every address), the
 * upstream connect (directly or through --upstream-proxy) and the relay.
 * Each protocol front end reads its own first bytes and hands the core a
 * target: the HTTP proxy (egress_http.c), SOCKS (egress_socks.c), the
 * redirected connections of filtered mode (egress_filtered.c) and the DNS
 * stub's sockets (egress_dns.c); net/proxy.h is what they share. */
#define _GNU_SOURCE
#include "net/proxy.h"
#include "net/intercept.h"
#include "core/refusals.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

static void target_text(struct conn *c, const struct net_addr *a, char *buf, size_t size);

/* A proxy writes replies and rewritten heads in pieces: without this,
 * Nagle holds each small piece until the peer's delayed ACK (~40 ms),
 * which keep-alive clients would pay on every request. */
static void no_delay(int fd)
{
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void set_interest(struct egress *e, struct watch *w, uint32_t want)
{
        if (w->fd < 0)
                return;
        /* Deregister rather than wait with no events: epoll reports HUP and
         * ERR regardless of the mask, and level-triggered that would spin. */
        if (!want) {
                if (w->registered)
                        epoll_ctl(e->epfd, EPOLL_CTL_DEL, w->fd, NULL);
                w->registered = false;
                return;
        }
        if (w->registered && w->events == want)
                return;
        struct epoll_event ev = { .events = want, .data.ptr = w };
        if (epoll_ctl(e->epfd, w->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, w->fd, &ev) == 0) {
                w->registered = true;
                w->events = want;
        }
}

void unwatch(struct egress *e, struct watch *w)
{
        set_interest(e, w, 0);
        if (w->fd >= 0)
                close(w->fd);
        w->fd = -1;
}

/* ---- log and summary ------------------------------------------------------- */

static void count_destination(struct egress *e, const char *name, uint16_t port, bool allowed, const char *reason)
{
        for (size_t i = 0; i < e->n_dests; i++)
                if (e->dests[i].port == port && e->dests[i].allowed == allowed && strcmp(e->dests[i].host, name) == 0) {
                        e->dests[i].count++;
                        return;
                }
        if (e->n_dests == MAX_DESTINATIONS) {  /* bounded memory, and say so */
                e->dests_truncated = true;
                return;
        }
        struct dest *grown = realloc(e->dests, (e->n_dests + 1) * sizeof *grown);
        char *copy = strdup(name), *why = strdup(reason ? reason : "");
        if (!grown || !copy || !why) {
                free(copy);
                free(why);
                if (grown)
                        e->dests = grown;
                return;
        }
        e->dests = grown;
        e->dests[e->n_dests++] = (struct dest){ .host = copy, .port = port, .allowed = allowed, .count = 1,
                                                .reason = why };
}

/* Is `a` an address of one of this host's interfaces? The proxy connects
 * from the host's network namespace, so such an address reaches the
 * host's own services (anything bound to 0.0.0.0 or to that address) as
 * surely as loopback does: a LAN address of the host that an
 * --allow-private-host name resolves to, or its public address under a
 * wildcard like '*.nip.io'. Asked at each judgement: interfaces come
 * and go. */
static bool host_own_address(const struct net_addr *a)
{
        struct ifaddrs *list = NULL;
        bool own = false;
        if (getifaddrs(&list) < 0)
                return false;
        for (struct ifaddrs *i = list; i && !own; i = i->ifa_next) {
                if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                        continue;
                struct net_addr mine;
                net_addr_from_sockaddr(&mine, i->ifa_addr);
                own = memcmp(mine.b, a->b, sizeof mine.b) == 0;  /* IPv4 in both as ::ffff:a.b.c.d */
        }
        freeifaddrs(list);
        return own;
}

/* The flag that would have let a refused attempt through, or "" when
 * none would: the host rule a name lacks (at its port), else the address
 * rule for what the program reached. A --deny-host of the user's is not
 * undone by a suggestion, a request brig could not read names nothing
 * to allow, and no flag lifts a bound of brig's own (at_limit). Nor is
 * any flag offered for a metadata name or an address of a class no
 * suggestion opens (egress_class_never_suggested). */
static void refusal_fix(const struct conn *c, const struct net_addr *addr, char *fix, size_t size)
{
        const struct egress_policy *ep = c->e->policy;
        struct egress_verdict v;
        fix[0] = '\0';
        if (c->at_limit)
                return;
        if (c->host[0] && egress_is_metadata_name(c->host))
                return;
        if (addr && egress_class_never_suggested(egress_classify(addr)))
                return;
        if (c->host[0] && c->port) {
                if (egress_host_denied(ep, c->host, c->port, &v))
                        return;
                egress_judge_host(ep, c->host, c->port, &v);
                if (!v.allow) {
                        if (c->port == 80 || c->port == 443)
                                snprintf(fix, size, "--allow-host %s", c->host);
                        else
                                snprintf(fix, size, "--allow-host %s:%u", c->host, c->port);
                        return;
                }
        }
        if (!addr || !c->port)
                return;
        /* an allowed name on a private address: the one rule for that name
         * (not for the host's own, which no host rule opens) */
        if (c->host[0] && !c->private_ok && egress_class_private(egress_classify(addr)) && !host_own_address(addr)) {
                snprintf(fix, size, "--allow-private-host %s:%u", c->host, c->port);
                return;
        }
        char text[INET6_ADDRSTRLEN];
        net_addr_format(addr, text, sizeof text);
        if (addr->family == AF_INET6)
                snprintf(fix, size, "--allow-cidr [%s]/128:%u", text, c->port);
        else
                snprintf(fix, size, "--allow-cidr %s/32:%u", text, c->port);
}

static void note_refusal(struct conn *c, const char *reason, const struct net_addr *addr)
{
        if (!c->e->refusals)
                return;
        char target[EGRESS_HOST_MAX + 16], fix[EGRESS_HOST_MAX + 64];
        target_text(c, addr, target, sizeof target);
        refusal_fix(c, addr, fix, sizeof fix);
        refusals_add(c->e->refusals, REFUSAL_CONNECTION, target, reason ? reason : "refused", fix[0] ? fix : NULL, 1);
}

int proxy_port_number(enum egress_listener_kind kind)
{
        return kind == EGRESS_SOCKS ? BRIG_SOCKS_PROXY_PORT : BRIG_HTTP_PROXY_PORT;
}

/* Refused before the client named any target (it spoke no proxy
 * protocol, or not one whole request): the proxy port it reached is what
 * the report and the summary name — nothing to allow there. */
static bool before_target(const struct conn *c, const struct net_addr *addr)
{
        return !c->host[0] && !addr && !c->port && (c->port_kind == EGRESS_HTTP || c->port_kind == EGRESS_SOCKS);
}

static json_t *event_base(struct conn *c, const char *decision, const char *reason, const struct net_addr *addr)
{
        char text[INET6_ADDRSTRLEN];
        if (addr)
                net_addr_format(addr, text, sizeof text);
        json_t *o = json_pack("{s:s, s:s, s:s}", "event", "net", "decision", decision, "protocol", c->protocol);
        json_object_set_new(o, "host", c->host[0] ? json_string(c->host) : json_null());
        json_object_set_new(o, "address", addr ? json_string(text) : json_null());
        json_object_set_new(o, "port", c->port ? json_integer(c->port) : json_null());
        if (reason)
                json_object_set_new(o, "reason", json_string(reason));
        if (c->method[0])
                json_object_set_new(o, "method", json_string(c->method));
        /* either proxy port serves every proxy protocol: which one the
         * client reached tells which setting it took */
        if (c->port_kind == EGRESS_HTTP || c->port_kind == EGRESS_SOCKS)
                json_object_set_new(o, "proxy_port", json_integer(proxy_port_number(c->port_kind)));
        return o;
}

/* Every attempt, allowed or not, is one "net" event and one count. */
void log_decision(struct conn *c, bool allow, const char *reason, const struct net_addr *addr)
{
        struct egress *e = c->e;
        allow ? e->allowed++ : e->denied++;
        char text[INET6_ADDRSTRLEN] = "";
        if (addr)
                net_addr_format(addr, text, sizeof text);
        bool at_port = before_target(c, addr);
        count_destination(e, c->host[0] ? c->host : addr ? text : at_port ? "localhost" : "?",
                          at_port ? (uint16_t)proxy_port_number(c->port_kind) : c->port, allow, reason);
        if (!allow)
                note_refusal(c, reason, addr);
        c->allowed = allow;
        if (!e->log)
                return;
        json_t *o = event_base(c, allow ? "allow" : "deny", reason, addr);
        json_object_set_new(o, "phase", json_string("connect"));
        if (allow && e->upstream)
                json_object_set_new(o, "upstream_proxy", json_string(e->up_text));
        e->log(e->log_ctx, o);
}

void log_close(struct conn *c)
{
        struct egress *e = c->e;
        e->bytes_up += c->up.bytes;
        e->bytes_down += c->down.bytes;
        if (!e->log)
                return;
        const struct net_addr *a = c->connected >= 0 ? &c->cands[c->connected] : c->n_cands ? &c->cands[0] : NULL;
        json_t *o = event_base(c, "allow", NULL, a);
        json_object_set_new(o, "phase", json_string("close"));
        json_object_set_new(o, "bytes_up", json_integer((json_int_t)c->up.bytes));
        json_object_set_new(o, "bytes_down", json_integer((json_int_t)c->down.bytes));
        json_object_set_new(o, "duration_ms", json_integer((json_int_t)(now_ms() - c->started_ms)));
        if (e->upstream)
                json_object_set_new(o, "upstream_proxy", json_string(e->up_text));
        if (!c->established)
                json_object_set_new(o, "error", json_string(c->failure[0] ? c->failure
                                                            : c->last_errno ? strerror(c->last_errno) : "closed"));
        e->log(e->log_ctx, o);
}

/* ---- connection life cycle ------------------------------------------------ */

void in_free(struct conn *c)
{
        if (c->kind != EGRESS_DNS_TCP)
                c->e->in_held -= c->in_cap;
        free(c->in);
        c->in = NULL;
        c->in_len = c->in_cap = c->in_used = 0;
}

/* Grow c->in to `cap` bytes: 0, -ENOBUFS when that would take the
 * first-message buffers past IN_BUDGET (the first `base` bytes of each
 * always fit), -ENOMEM. */
int in_grow(struct conn *c, size_t cap, size_t base)
{
        struct egress *e = c->e;
        if (cap <= c->in_cap)
                return 0;
        if (cap > base && e->in_held + cap - c->in_cap > IN_BUDGET)
                return -ENOBUFS;
        char *grown = realloc(c->in, cap);
        if (!grown)
                return -ENOMEM;
        e->in_held += cap - c->in_cap;
        c->in = grown;
        c->in_cap = cap;
        return 0;
}

void conn_close(struct conn *c)
{
        if (c->state == C_DEAD)
                return;
        struct egress *e = c->e;
        if (c->allowed)
                log_close(c);
        dns_cancel(c->dns);
        c->dns = NULL;
        unwatch(e, &c->cw);
        unwatch(e, &c->uw);
        flow_free(&c->up);
        flow_free(&c->down);
        in_free(c);
        free(c->reply);
        c->reply = NULL;
        c->state = C_DEAD;
        if (c->prev)
                c->prev->next = c->next;
        else
                e->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        e->n_conns--;
        /* freed after this dispatch round: its watches may still be in the
         * batch of events being handled */
        c->next = e->dead;
        e->dead = c;
}

/* Send `reply` to the client, then close (after reading what it still
 * sends for a moment, so the close doesn't reset the reply away). */
void conn_refuse_with(struct conn *c, const char *reply, size_t len)
{
        unwatch(c->e, &c->uw);
        dns_cancel(c->dns);
        c->dns = NULL;
        flow_free(&c->down);
        flow_init(&c->down, -1, c->cw.fd);
        if (flow_prepend(&c->down, reply, len) < 0) {
                conn_close(c);
                return;
        }
        c->down.eof = true;  /* nothing follows the reply */
        c->state = C_REFUSING;
        c->last_ms = now_ms();
        set_interest(c->e, &c->cw, EPOLLOUT);
}

static void target_text(struct conn *c, const struct net_addr *a, char *buf, size_t size)
{
        char addr[INET6_ADDRSTRLEN];
        if (c->host[0]) {
                snprintf(buf, size, "%s:%u", c->host, c->port);
        } else if (a) {
                net_addr_format(a, addr, sizeof addr);
                snprintf(buf, size, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", addr, c->port);
        } else if (before_target(c, NULL)) {
                snprintf(buf, size, "localhost:%d", proxy_port_number(c->port_kind));
        } else {
                snprintf(buf, size, "?");
        }
}

/* A policy refusal: logged, counted, answered. */
void refuse(struct conn *c, const char *reason, const struct net_addr *a)
{
        log_decision(c, false, reason, a);
        if (c->kind == EGRESS_TRANSPARENT && strcmp(c->protocol, "http-direct") != 0) {
                reset_close(c);  /* nothing to answer a TLS or raw TCP client with */
                return;
        }
        if (c->kind == EGRESS_SOCKS) {
                socks_refuse(c, SOCKS_NOT_ALLOWED);
                return;
        }
        char target[EGRESS_HOST_MAX + 16];
        target_text(c, a, target, sizeof target);
        http_refuse(c, 403, target, reason);
}

/* Allowed, but the destination can't be reached. */
static void fail_upstream(struct conn *c, int err, bool timeout)
{
        c->last_errno = err;
        if (c->kind == EGRESS_TRANSPARENT) {
                snprintf(c->failure, sizeof c->failure, "cannot reach the destination: %s",
                         timeout ? "timed out" : err == ENOENT ? "name does not resolve" : strerror(err));
                reset_close(c);
                return;
        }
        if (c->kind == EGRESS_SOCKS) {
                uint8_t code = err == ECONNREFUSED ? SOCKS_CONN_REFUSED
                               : err == ENETUNREACH ? SOCKS_NET_UNREACHABLE
                               : err == EHOSTUNREACH || err == ENOENT || timeout ? SOCKS_HOST_UNREACHABLE
                                                                                : SOCKS_GENERAL_FAILURE;
                socks_refuse(c, code);
                return;
        }
        char target[EGRESS_HOST_MAX + 32], why[EGRESS_HOST_MAX + 96];
        if (c->e->upstream && !(err == ENOENT && !timeout))
                snprintf(target, sizeof target, "upstream proxy %s", c->e->up_text);
        else
                target_text(c, c->n_cands ? &c->cands[0] : NULL, target, sizeof target);
        snprintf(why, sizeof why, "cannot reach %s: %s", target,
                 timeout ? "timed out" : err == ENOENT ? "name does not resolve" : strerror(err));
        snprintf(c->failure, sizeof c->failure, "%s", why);
        http_refuse(c, timeout ? 504 : 502, NULL, why);
}

/* A host whose requests must be seen (intercept.h): both sockets go to
 * the interceptor's thread, which verifies the upstream, answers the
 * client with a minted leaf and judges every request. */
static bool hand_over(struct conn *c)
{
        struct egress *e = c->e;
        if (!e->ic || c->forward || c->kind == EGRESS_DNS_TCP || !intercept_wants(e->ic, c->host, c->port))
                return false;
        if (c->kind == EGRESS_TRANSPARENT && strcmp(c->protocol, "tls") != 0)
                return false;  /* plain http there is judged by the proxy itself */
        struct intercept_conn_args a = { .port = c->port, .protocol = c->protocol };
        snprintf(a.host, sizeof a.host, "%s", c->host);
        if (c->connected >= 0)
                net_addr_format(&c->cands[c->connected], a.address, sizeof a.address);
        a.connect_reply = c->kind == EGRESS_HTTP;
        if (c->kind == EGRESS_SOCKS) {
                uint8_t ok[10];
                if (c->socks4)
                        socks4_reply(ok, true);
                else
                        socks5_reply(ok, SOCKS_OK);
                if (send(c->cw.fd, ok, c->socks4 ? 8 : sizeof ok, MSG_NOSIGNAL | MSG_DONTWAIT) !=
                    (ssize_t)(c->socks4 ? 8 : sizeof ok)) {
                        conn_close(c);
                        return true;
                }
        }
        size_t extra = c->in_len > c->in_used ? c->in_len - c->in_used : 0;
        if (extra && (a.early = malloc(extra))) {
                memcpy(a.early, c->in + c->in_used, extra);
                a.early_len = extra;
        } else if (extra) {
                conn_close(c);
                return true;
        }
        set_interest(e, &c->cw, 0);
        set_interest(e, &c->uw, 0);
        a.client_fd = c->cw.fd;
        a.upstream_fd = c->uw.fd;
        int r = intercept_start(e->ic, &a);
        if (r < 0) {
                free(a.early);
                snprintf(c->failure, sizeof c->failure, "the interceptor could not take the connection: %s",
                         strerror(-r));
                conn_close(c);
                return true;
        }
        c->cw.fd = c->uw.fd = -1;  /* the interceptor's now; it logs the close */
        c->allowed = false;
        conn_close(c);
        return true;
}

/* Plain http in a run with secrets: the whole body is searched, not only
 * what came with its head (plain_http_refused): the relay searches each
 * piece before it sends it (relay.c), from the bytes already here on. */
static int scan_body(struct conn *c, size_t extra)
{
        if (!c->e->ic || !intercept_secret_count(c->e->ic))
                return 0;
        struct placeholder_scan *ps = calloc(1, sizeof *ps);
        if (!ps) {
                conn_close(c);
                return -1;
        }
        ps->chunked = c->req.has_te;
        ps->ch.strict = true;
        c->up.scan = ps;
        c->up.scan_ic = c->e->ic;
        if (placeholder_scan(c->e->ic, ps, c->in + c->in_used, extra)) {
                conn_close(c);  /* plain_http_refused judged these bytes already */
                return -1;
        }
        return 0;
}

/* A placeholder in a plain-http body, in a piece after its head: the
 * upstream got the bytes before it and is cut off; the client gets the
 * refusal if no response has begun (a 1xx aside), else the connection
 * ends. */
static void body_leak(struct conn *c)
{
        const struct secret *s = c->up.found;
        char why[160];
        snprintf(why, sizeof why, "exfiltration: the placeholder of secret %s in a plain-http request body",
                 s->spec->name);
        shutdown(c->uw.fd, SHUT_RDWR);
        bool answered = c->resp_head ? c->reply_len > 0 || c->down.bytes > 0
                                     : c->down.bytes > c->interim || c->down.off < c->down.len || c->down.in_pipe;
        if (!answered) {  /* nothing, or a 100 Continue whole: a 403 may follow */
                refuse(c, why, c->kind == EGRESS_TRANSPARENT ? &c->orig : NULL);
                return;
        }
        log_decision(c, false, why, NULL);
        conn_close(c);
}

static void start_relay(struct conn *c)
{
        if (hand_over(c))
                return;
        flow_init(&c->up, c->cw.fd, c->uw.fd);
        flow_init(&c->down, c->uw.fd, c->cw.fd);
        c->up.eof = c->client_eof;
        int r = 0;
        /* what the upstream proxy sent after its 2xx head: the destination's
         * first bytes (a banner), delivered after our own reply below */
        if (c->reply_len > c->reply_used)
                r = flow_prepend(&c->down, c->reply + c->reply_used, c->reply_len - c->reply_used);
        free(c->reply);
        c->reply = NULL;
        c->reply_len = c->reply_used = 0;
        if (r < 0) {
                /* fall through to the close below */
        } else if (c->kind == EGRESS_SOCKS) {
                uint8_t ok[10];
                if (c->socks4)
                        socks4_reply(ok, true);
                else
                        socks5_reply(ok, SOCKS_OK);
                r = flow_prepend(&c->down, ok, c->socks4 ? 8 : sizeof ok);
        } else if (!c->forward && c->kind != EGRESS_TRANSPARENT) {
                static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                r = flow_prepend(&c->down, established, sizeof established - 1);
        }
        size_t extra = c->in_len - c->in_used;
        if (c->forward) {
                /* Plain http: the request's body (by its Content-Length or
                 * its chunks; none without either) goes upstream and no
                 * byte more — what follows is the client's next request,
                 * judged on its own (next_request). */
                if (c->req.has_te) {
                        c->up.chunked = true;
                        c->up.chunk.strict = true;
                        ssize_t used = http_chunk_feed(&c->up.chunk, c->in + c->in_used, extra);
                        if (used < 0) {
                                snprintf(c->failure, sizeof c->failure, "bad chunked request body");
                                http_refuse(c, 400, NULL, c->failure);
                                return;
                        }
                        extra = (size_t)used;
                        c->up.ended = c->up.chunk.done;
                } else {
                        if (extra > c->req.length)
                                extra = (size_t)c->req.length;
                        c->up.limited = true;
                        c->up.remain = c->req.length - extra;
                }
                if (scan_body(c, extra) < 0)
                        return;
                c->resp_head = true;
                if (c->down.len) {
                        /* bytes from an upstream proxy's tunnel before the
                         * request went out: not a head to parse; relayed
                         * as they come, to the end of the connection */
                        c->keep_alive = false;
                        c->resp_head = false;
                }
        }
        /* bytes the client sent after its request (a TLS hello, a body) */
        if (r == 0 && extra)
                r = flow_prepend(&c->up, c->in + c->in_used, extra);
        if (r == 0 && c->forward) {
                size_t len;
                char *head = http_rewrite_request(c->in, &c->req, &len);
                r = head ? flow_prepend(&c->up, head, len) : -ENOMEM;
                free(head);
        }
        size_t rest = c->in_len - c->in_used - extra;
        if (c->forward && rest && r == 0) {
                /* a pipelined request: kept for after this exchange */
                memmove(c->in, c->in + c->in_used + extra, rest);
                c->in_len = rest;
                c->in_used = 0;
        } else {
                in_free(c);
        }
        if (r < 0) {
                conn_close(c);
                return;
        }
        c->state = C_RELAY;
        c->established = true;
        relay(c);
}

static void connect_next(struct conn *c)
{
        struct egress *e = c->e;
        unwatch(e, &c->uw);
        /* Through an upstream proxy: its addresses, not the checked ones. */
        const struct net_addr *list = e->upstream ? e->up_addrs : c->cands;
        size_t n = e->upstream ? e->n_up : c->n_cands, *next = e->upstream ? &c->next_up : &c->next_cand;
        uint16_t port = e->upstream ? e->upstream->port : c->port;
        while (*next < n) {
                const struct net_addr *a = &list[(*next)++];
                struct sockaddr_storage ss;
                socklen_t len;
                net_addr_to_sockaddr(a, port, &ss, &len);
                int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        c->last_errno = errno;
                        continue;
                }
                no_delay(fd);
                if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
                        c->last_errno = errno;
                        close(fd);
                        continue;
                }
                c->uw = (struct watch){ .kind = W_UPSTREAM, .fd = fd };
                c->state = C_CONNECTING;
                set_interest(e, &c->uw, EPOLLOUT);
                return;
        }
        fail_upstream(c, c->last_errno ? c->last_errno : EHOSTUNREACH, false);
}

/* ---- the upstream proxy ----------------------------------------------------- */

/* Allowed, then refused or failed by the upstream proxy: a "net" event
 * naming its answer, and 502 / SOCKS 0x05 for the client. */
static void fail_tunnel(struct conn *c, const char *what)
{
        struct egress *e = c->e;
        snprintf(c->failure, sizeof c->failure, "upstream proxy %s %s", e->up_text, what);
        if (e->log) {
                json_t *o = event_base(c, "deny", c->failure, c->n_cands ? &c->cands[0] : NULL);
                json_object_set_new(o, "phase", json_string("upstream"));
                json_object_set_new(o, "upstream_proxy", json_string(e->up_text));
                e->log(e->log_ctx, o);
        }
        if (c->kind == EGRESS_SOCKS)
                socks_refuse(c, SOCKS_CONN_REFUSED);
        else if (c->kind == EGRESS_TRANSPARENT)
                reset_close(c);
        else
                http_refuse(c, 502, NULL, c->failure);
}

static void send_tunnel_request(struct conn *c)
{
        char target[EGRESS_HOST_MAX + 16], req[2 * sizeof target + 64];
        /* the name as the client gave it (normalized), or the literal */
        target_text(c, c->n_cands ? &c->cands[0] : NULL, target, sizeof target);
        int n = snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
        /* a few hundred bytes on a freshly connected socket: the send
         * buffer takes them whole */
        if (n < 0 || (size_t)n >= sizeof req || send(c->uw.fd, req, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
                fail_upstream(c, errno ? errno : EIO, false);
                return;
        }
        c->state = C_TUNNEL;
        set_interest(c->e, &c->uw, EPOLLIN);
}

/* The upstream's answer: "HTTP/1.x 2xx ..." and headers, then the tunnel. */
static void read_tunnel_reply(struct conn *c)
{
        if (!c->reply && !(c->reply = malloc(TUNNEL_HEAD_MAX))) {
                conn_close(c);
                return;
        }
        ssize_t n = recv(c->uw.fd, c->reply + c->reply_len, TUNNEL_HEAD_MAX - c->reply_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n < 0) {
                fail_upstream(c, errno, false);
                return;
        }
        if (n == 0) {
                fail_tunnel(c, "closed the connection without answering");
                return;
        }
        c->reply_len += (size_t)n;
        const char *end = memmem(c->reply, c->reply_len, "\r\n\r\n", 4);
        size_t head = end ? (size_t)(end - c->reply) + 4 : 0;
        if (!end && (end = memmem(c->reply, c->reply_len, "\n\n", 2)))
                head = (size_t)(end - c->reply) + 2;
        if (!end) {
                if (c->reply_len == TUNNEL_HEAD_MAX)
                        fail_tunnel(c, "sent an oversized answer");
                return;
        }
        /* The status line, made printable: it goes into a log line and a
         * response body, never a header. */
        char line[100];
        size_t ll = 0;
        for (size_t i = 0; i < c->reply_len && c->reply[i] != '\r' && c->reply[i] != '\n' && ll < sizeof line - 1; i++)
                line[ll++] = c->reply[i] >= 0x20 && c->reply[i] < 0x7f ? c->reply[i] : '?';
        line[ll] = '\0';
        bool http = ll >= 12 && strncmp(line, "HTTP/1.", 7) == 0 && line[8] == ' ';
        if (http && line[9] == '2' && line[10] >= '0' && line[10] <= '9' && line[11] >= '0' && line[11] <= '9' &&
            (ll == 12 || line[12] == ' ')) {
                c->reply_used = head;
                start_relay(c);
                return;
        }
        char what[160];
        snprintf(what, sizeof what, http ? "answered '%s'" : "sent a malformed answer '%s'", line);
        fail_tunnel(c, what);
}

static void on_upstream_resolved(void *ctx, int status, const struct net_addr *addrs, size_t n)
{
        struct egress *e = ctx;
        e->up_dns = NULL;
        if (status == 0 && n) {
                e->n_up = n < MAX_CANDIDATES ? n : MAX_CANDIDATES;
                memcpy(e->up_addrs, addrs, e->n_up * sizeof *addrs);
                e->up_state = UP_READY;
        } else {
                e->up_state = UP_UNRESOLVED;  /* the next connection tries again */
        }
        struct conn *next;
        for (struct conn *c = e->conns; c; c = next) {
                next = c->next;
                if (c->state != C_UPSTREAM_DNS)
                        continue;
                if (e->up_state == UP_READY) {
                        connect_next(c);
                } else {
                        char what[EGRESS_HOST_MAX + 32];
                        snprintf(what, sizeof what, "does not resolve");
                        c->last_errno = ENOENT;
                        fail_tunnel(c, what);
                }
        }
}

/* An allowed connection, through the upstream proxy. The upstream's own
 * address is deliberately not classified: the user named it explicitly
 * (it is often on a private network), and the destination was judged. */
static void via_upstream(struct conn *c)
{
        struct egress *e = c->e;
        c->next_up = 0;
        if (e->up_state == UP_READY) {
                connect_next(c);
                return;
        }
        c->state = C_UPSTREAM_DNS;
        set_interest(e, &c->cw, 0);
        if (e->up_state == UP_RESOLVING)
                return;  /* on_upstream_resolved picks it up */
        e->up_state = UP_RESOLVING;
        struct net_addr fixed[MAX_CANDIDATES];
        size_t n = 0;
        if (e->upstream->literal)
                fixed[n++] = e->upstream->addr;
        else
                n = egress_policy_resolve(e->policy, e->upstream->host, fixed, MAX_CANDIDATES);
        if (n) {
                on_upstream_resolved(e, 0, fixed, n);
                return;
        }
        /* resolved once per run; the callback may run right away */
        e->up_dns = dns_resolve(e->dns, e->upstream->host, on_upstream_resolved, e);
}

static void connect_done(struct conn *c)
{
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->uw.fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        if (err == EINPROGRESS || err == EALREADY)
                return;
        if (err) {
                c->last_errno = err;
                connect_next(c);  /* the next address that passed the check */
                return;
        }
        if (c->e->upstream) {
                send_tunnel_request(c);
                return;
        }
        c->connected = (int)c->next_cand - 1;
        start_relay(c);
}

/* DNS rebinding inside a private network: a private host's name may lead
 * only to the private addresses it had at its first lookup in this run.
 * Its DNS answering another private address later is refused, however
 * private — a name the sandbox can make resolve anywhere on the LAN would
 * be an --allow-cidr for all of it. (Loopback, link-local and metadata
 * never pass at all.) Public answers are not pinned. Returns false, with
 * `why` and `*refused`, when none of the private candidates is left;
 * drops the unpinned ones from c->cands. */
static bool pin_private(struct conn *c, const bool *priv, char *why, size_t size, struct net_addr *refused)
{
        struct egress *e = c->e;
        struct private_pin *pin = NULL;
        for (size_t i = 0; i < e->n_pins && !pin; i++)
                if (strcmp(e->pins[i].host, c->host) == 0)
                        pin = &e->pins[i];
        if (!pin) {
                struct private_pin *grown = e->n_pins < PINS_MAX ? realloc(e->pins, (e->n_pins + 1) * sizeof *grown)
                                                                 : NULL;
                char *host = grown ? strdup(c->host) : NULL;
                if (grown)
                        e->pins = grown;
                if (!host) {
                        snprintf(why, size, "brig keeps the addresses of at most %d private host names per run "
                                 "(DNS rebinding)", PINS_MAX);
                        for (size_t i = 0; i < c->n_cands; i++)
                                if (priv[i])
                                        *refused = c->cands[i];
                        return false;
                }
                pin = &e->pins[e->n_pins++];
                *pin = (struct private_pin){ .host = host };
                for (size_t i = 0; i < c->n_cands; i++)
                        if (priv[i])
                                pin->addrs[pin->n++] = c->cands[i];
                return true;
        }
        size_t kept = 0;
        bool dropped = false;
        for (size_t i = 0; i < c->n_cands; i++) {
                bool ok = !priv[i];
                for (size_t j = 0; !ok && j < pin->n; j++)
                        ok = memcmp(&pin->addrs[j], &c->cands[i], sizeof c->cands[i]) == 0;
                if (ok) {
                        c->cands[kept++] = c->cands[i];
                } else if (!dropped) {
                        dropped = true;
                        *refused = c->cands[i];
                }
        }
        c->n_cands = kept;
        if (kept)
                return true;
        char now[INET6_ADDRSTRLEN], first[INET6_ADDRSTRLEN];
        net_addr_format(refused, now, sizeof now);
        net_addr_format(&pin->addrs[0], first, sizeof first);
        snprintf(why, size, "%s now resolves to %s, but to %s at its first lookup in this run (DNS rebinding: a private "
                 "host keeps its first addresses; --resolve %s:ADDR names one for good)", c->host, now, first, c->host);
        return false;
}

/* Every answer is judged; only the ones that pass are tried. */
void on_addresses(struct conn *c, const struct net_addr *addrs, size_t n, bool named)
{
        struct egress_verdict v, first_ok = { 0 }, first_refusal = { 0 };
        if (c->pinned) {
                /* A bare address and a name from SNI/Host: the name must
                 * really lead there, or an allowed name would carry any
                 * destination through (spoofing). */
                size_t i = 0;
                while (i < n && memcmp(&addrs[i], &c->orig, sizeof c->orig) != 0)
                        i++;
                if (i == n) {
                        char text[INET6_ADDRSTRLEN], why[EGRESS_HOST_MAX + 160];
                        net_addr_format(&c->orig, text, sizeof text);
                        snprintf(why, sizeof why, "%s is not an address of %s (%s names it)", text, c->host,
                                 strcmp(c->protocol, "tls") == 0 ? "the TLS SNI" : "the HTTP Host");
                        refuse(c, why, &c->orig);
                        return;
                }
                addrs = &c->orig;
                n = 1;
        }
        const struct net_addr *refused = NULL;
        bool priv[MAX_CANDIDATES], any_priv = false;
        c->n_cands = 0;
        for (size_t i = 0; i < n; i++) {
                egress_judge_addr(c->e->policy, &addrs[i], c->port, named ? c->host : NULL, named && c->private_ok, &v);
                /* a name's address, not one a rule named: never the host itself */
                if (v.allow && named && !egress_cidr_allows(c->e->policy, &addrs[i], c->port) &&
                    host_own_address(&addrs[i])) {
                        char text[INET6_ADDRSTRLEN];
                        net_addr_format(&addrs[i], text, sizeof text);
                        v.allow = false;
                        snprintf(v.reason, sizeof v.reason, "address %s is this host's own (one of its interfaces' "
                                 "addresses: its own services)", text);
                }
                if (v.allow && c->n_cands < MAX_CANDIDATES) {
                        if (!c->n_cands)
                                first_ok = v;
                        any_priv |= priv[c->n_cands] = v.private_ok;
                        c->cands[c->n_cands++] = addrs[i];
                } else if (!v.allow && !refused) {
                        refused = &addrs[i];
                        first_refusal = v;
                }
        }
        if (!c->n_cands) {
                refuse(c, refused ? first_refusal.reason : "no address", refused);
                return;
        }
        struct net_addr rebound;
        char why[EGRESS_HOST_MAX * 2 + 256];
        if (any_priv && !pin_private(c, priv, why, sizeof why, &rebound)) {
                refuse(c, why, &rebound);
                return;
        }
        if (any_priv)  /* the first candidate may have gone: the reason is its own */
                egress_judge_addr(c->e->policy, &c->cands[0], c->port, c->host, c->private_ok, &first_ok);
        /* for a name: the host rule, and the CIDR rule when one let the address in */
        char reason[sizeof c->why + sizeof first_ok.reason + 2];
        if (named && strcmp(first_ok.reason, "public address") != 0)
                snprintf(reason, sizeof reason, "%s; %s", c->why, first_ok.reason);
        else
                snprintf(reason, sizeof reason, "%s", named ? c->why : first_ok.reason);
        log_decision(c, true, reason, &c->cands[0]);
        if (c->e->upstream)
                via_upstream(c);
        else
                connect_next(c);
}

static void on_resolved(void *ctx, int status, const struct net_addr *addrs, size_t n)
{
        struct conn *c = ctx;
        c->dns = NULL;
        if (c->state != C_RESOLVING)
                return;
        if ((status < 0 || n == 0) && c->e->upstream && !c->pinned) {
                /* Networks that need an upstream proxy often can't resolve
                 * outside names themselves: the name (allowed by a host
                 * rule) goes to the upstream, which resolves it. Nothing
                 * brig could check says it is refused. */
                char reason[sizeof c->why + 64];
                snprintf(reason, sizeof reason, "%s; not resolved here, left to the upstream proxy", c->why);
                c->n_cands = 0;
                log_decision(c, true, reason, NULL);
                via_upstream(c);
                return;
        }
        if (status < 0 || n == 0) {
                log_decision(c, false, "name does not resolve", NULL);
                c->allowed = false;
                fail_upstream(c, ENOENT, false);
                return;
        }
        on_addresses(c, addrs, n, true);
}

/* The target of a request, as the client named it. */
/* Plain http, judged before its name: the http rules, and a placeholder,
 * which never goes out unencrypted and unverified (intercept.h). */
bool plain_http_refused(struct conn *c)
{
        if (!c->e->ic)
                return false;
        struct intercept_verdict v;
        intercept_judge_head(c->e->ic, intercept_policy_of(c->e->ic), NULL, false, c->in, &c->req, &v);
        free(v.head);
        /* the body as far as it came with its head (the rest is relayed
         * unread: docs/secrets.md) */
        size_t body = c->in_len > c->req.head_len ? c->in_len - c->req.head_len : 0;
        if (!c->req.has_te && body > c->req.length)
                body = (size_t)c->req.length;
        const struct secret *leak = v.status ? NULL : intercept_find(c->e->ic, c->in + c->req.head_len, body, NULL);
        if (leak) {
                v.status = 403;
                snprintf(v.reason, sizeof v.reason, "exfiltration: the placeholder of secret %s in a plain-http "
                         "request body", leak->spec->name);
        }
        if (!v.status)
                return false;
        if (c->req.host[0] && !egress_host_normalize(c->req.host, strlen(c->req.host), c->host))
                c->host[0] = '\0';
        if (c->kind != EGRESS_TRANSPARENT)
                c->port = c->req.port ? c->req.port : 80;
        refuse(c, v.reason, c->kind == EGRESS_TRANSPARENT ? &c->orig : NULL);
        return true;
}

void judge_target(struct conn *c, const char *host, uint16_t port)
{
        c->port = port;
        struct net_addr a;
        if (net_addr_parse_lenient(host, &a)) {
                on_addresses(c, &a, 1, false);
                return;
        }
        const struct secret *leak = intercept_in_name(c->e->ic, host);
        if (leak) {
                /* never resolved, never named in a log as it was sent */
                char why[160];
                snprintf(why, sizeof why, "exfiltration: the placeholder of secret %s in a host name",
                         leak->spec->name);
                snprintf(c->host, sizeof c->host, "{%s}", leak->spec->name);
                refuse(c, why, NULL);
                return;
        }
        if (!egress_host_normalize(host, strlen(host), c->host)) {
                c->host[0] = '\0';
                refuse(c, "not a valid host name", NULL);
                return;
        }
        struct egress_verdict v;
        egress_judge_host(c->e->policy, c->host, port, &v);
        if (!v.allow) {
                refuse(c, v.reason, NULL);
                return;
        }
        snprintf(c->why, sizeof c->why, "%s", v.reason);
        c->private_ok = v.private_ok;
        struct net_addr fixed[MAX_CANDIDATES];
        size_t n = egress_policy_resolve(c->e->policy, c->host, fixed, MAX_CANDIDATES);
        if (n) {
                on_addresses(c, fixed, n, true);
                return;
        }
        c->state = C_RESOLVING;
        set_interest(c->e, &c->cw, 0);
        c->dns = dns_resolve(c->e->dns, c->host, on_resolved, c);
}

void relay(struct conn *c)
{
        enum flow_state su = c->late ? late_read(c) : flow_pump(&c->up), sd = FLOW_WANT_READ;
        if (c->state != C_RELAY)
                return;  /* refused, closed, or started over */
        c->last_ms = now_ms();
        if (su == FLOW_ERROR) {
                if (c->up.found)
                        body_leak(c);
                else
                        conn_close(c);
                return;
        }
        if (!c->resp_head || read_response_head(c)) {
                if (c->state != C_RELAY)
                        return;
                sd = flow_pump(&c->down);
                if (su == FLOW_DONE && !c->up.ended && !c->up.shut)
                        su = flow_pump(&c->up);  /* opened again by a 101 */
                if (su == FLOW_ERROR && c->up.found) {
                        body_leak(c);
                        return;
                }
        } else if (c->state != C_RELAY) {
                return;  /* answered with an error, or closed */
        }
        if (c->forward && sd == FLOW_DONE && c->keep_alive && c->down.ended && su == FLOW_DONE && c->up.ended) {
                next_request(c);
                return;
        }
        if (su == FLOW_ERROR || sd == FLOW_ERROR || (su == FLOW_DONE && sd == FLOW_DONE) ||
            (c->forward && sd == FLOW_DONE)) {  /* plain http: the response ended the exchange */
                conn_close(c);
                return;
        }
        set_interest(c->e, &c->cw, (su == FLOW_WANT_READ ? EPOLLIN : 0) | (sd == FLOW_WANT_WRITE ? EPOLLOUT : 0));
        set_interest(c->e, &c->uw, (su == FLOW_WANT_WRITE ? EPOLLOUT : 0) | (sd == FLOW_WANT_READ ? EPOLLIN : 0));
}

static void refusing(struct conn *c)
{
        if (!c->down.shut) {
                enum flow_state s = flow_pump(&c->down);
                if (s == FLOW_ERROR) {
                        conn_close(c);
                } else if (s == FLOW_DONE) {
                        c->last_ms = now_ms();
                        set_interest(c->e, &c->cw, EPOLLIN);
                } else {
                        set_interest(c->e, &c->cw, EPOLLOUT);
                }
                return;
        }
        char sink[4096];
        ssize_t n = recv(c->cw.fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                conn_close(c);
}

/* Past EGRESS_MAX_CONNS at once a new connection is refused, and counted
 * and logged like every refusal: it was closed unsaid, and a client that
 * opens many (a crawler, a flood of its own) failed with nothing to say
 * why. Nothing of it was read, so nothing but where it went is known. */
static void refuse_over_limit(struct egress *e, const struct listener *l, int fd)
{
        struct conn c = { .e = e, .kind = l->kind, .port_kind = l->kind, .connected = -1, .at_limit = true,
                          .protocol = l->kind == EGRESS_TRANSPARENT ? "tcp"
                                      : l->kind == EGRESS_DNS_TCP   ? "dns"
                                      : l->kind == EGRESS_HTTP      ? "http"
                                                                    : "socks5" };
        struct net_addr orig;
        bool known = l->kind == EGRESS_TRANSPARENT && original_destination(fd, &orig, &c.port) == 0;
        log_decision(&c, false, "brig serves at most 8192 connections of a sandbox at once", known ? &orig : NULL);
        close(fd);
}

static void on_accept(struct egress *e, struct listener *l)
{
        for (int i = 0; i < 64; i++) {
                int fd = accept4(l->w.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd >= 0)
                        no_delay(fd);
                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                                /* the pending connection would wake us forever */
                                set_interest(e, &l->w, 0);
                                l->paused = true;
                        }
                        return;
                }
                if (e->n_conns >= EGRESS_MAX_CONNS) {
                        refuse_over_limit(e, l, fd);
                        continue;
                }
                struct conn *c = calloc(1, sizeof *c);
                if (!c) {
                        close(fd);
                        continue;
                }
                c->e = e;
                c->kind = c->port_kind = l->kind;
                c->protocol = l->kind == EGRESS_HTTP ? "http" : "socks5";
                c->cw = (struct watch){ .kind = W_CLIENT, .fd = fd };
                c->uw = (struct watch){ .kind = W_UPSTREAM, .fd = -1 };
                flow_init(&c->up, -1, -1);
                flow_init(&c->down, -1, -1);
                c->connected = -1;
                c->started_ms = c->last_ms = now_ms();
                c->state = l->kind == EGRESS_DNS_TCP ? C_DNS : C_REQUEST;
                c->next = e->conns;
                if (e->conns)
                        e->conns->prev = c;
                e->conns = c;
                e->n_conns++;
                if (l->kind == EGRESS_TRANSPARENT)
                        transparent_accept(c);
                else
                        set_interest(e, &c->cw, EPOLLIN);
        }
}

static void on_timer(struct egress *e)
{
        uint64_t ticks;
        (void)!read(e->timer.fd, &ticks, sizeof ticks);
        dns_on_timer(e->dns);
        for (struct listener *l = e->listeners; l; l = l->next)
                if (l->paused) {
                        l->paused = false;
                        set_interest(e, &l->w, EPOLLIN);
                }
        uint64_t now = now_ms();
        struct conn *next;
        for (struct conn *c = e->conns; c; c = next) {
                next = c->next;
                switch (c->state) {
                case C_REQUEST:
                        if (c->kept && !c->in_len) {
                                /* a kept-alive client between requests */
                                if (now - c->last_ms > IDLE_TIMEOUT_MS)
                                        conn_close(c);
                        } else if (now - c->started_ms > HANDSHAKE_TIMEOUT_MS) {
                                /* a client that began and stalled hears why;
                                 * an unused one (browsers open spare
                                 * connections) is closed unlogged */
                                if (!c->in_len) {
                                        conn_close(c);
                                } else if (c->kind == EGRESS_HTTP) {
                                        log_decision(c, false, "request not received whole in time", NULL);
                                        http_refuse(c, 408, NULL, "request not received in time");
                                } else {
                                        log_decision(c, false, "SOCKS request not received whole in time", NULL);
                                        socks_refuse(c, SOCKS_GENERAL_FAILURE);
                                }
                        }
                        break;
                case C_SNIFF:
                        if (c->kept && !c->in_len) {
                                /* a kept-alive plain-HTTP client between requests */
                                if (now - c->last_ms > IDLE_TIMEOUT_MS)
                                        conn_close(c);
                        } else if (now - c->started_ms > SNIFF_BARE_MS ||
                                   (!c->in_len && (c->mapped[0] || c->cidr_ok) && now - c->started_ms > SNIFF_NAMED_MS)) {
                                sniff_timeout(c);
                        }
                        break;
                case C_DNS:
                        if (now - c->last_ms > DNS_TCP_IDLE_MS)
                                conn_close(c);
                        break;
                case C_RESOLVING:
                case C_UPSTREAM_DNS:
                case C_CONNECTING:
                case C_TUNNEL:
                        if (now - c->started_ms > HANDSHAKE_TIMEOUT_MS)
                                fail_upstream(c, ETIMEDOUT, true);
                        break;
                case C_RELAY:
                        if (c->late && c->in_len && now - c->late_ms > SNIFF_BARE_MS)
                                late_timeout(c);
                        else if (now - c->last_ms > IDLE_TIMEOUT_MS)
                                conn_close(c);
                        break;
                case C_REFUSING:
                        if (now - c->last_ms > DRAIN_TIMEOUT_MS)
                                conn_close(c);
                        break;
                case C_DEAD:
                        break;
                }
        }
}

/* A one-second tick while there is anything to time out; a 50 ms one
 * while a redirected connection waits for its first bytes. */
static void update_timer(struct egress *e)
{
        bool paused = false, sniffing = false;
        for (struct listener *l = e->listeners; l; l = l->next)
                paused |= l->paused;
        for (struct conn *c = e->conns; c && !sniffing; c = c->next)
                sniffing = (c->state == C_SNIFF && !(c->kept && !c->in_len)) || (c->late && c->in_len);
        int want = sniffing ? 2 : e->n_conns > 0 || paused ? 1 : 0;
        if (want == e->timer_armed)
                return;
        struct itimerspec its = { 0 };
        if (want == 1)
                its.it_value.tv_sec = its.it_interval.tv_sec = 1;
        else if (want == 2)
                its.it_value.tv_nsec = its.it_interval.tv_nsec = 50 * 1000000L;
        if (timerfd_settime(e->timer.fd, 0, &its, NULL) == 0)
                e->timer_armed = want;
}

/* ---- the contract ---------------------------------------------------------- */

void egress_set_policy(struct egress *e, const struct egress_policy *ep)
{
        e->policy = ep;
        e->stub.policy = ep;
}

static struct egress *egress_make(const struct egress_policy *ep, egress_log_fn log, void *log_ctx, bool offline,
                                  brig_error **err)
{
        struct egress *e = calloc(1, sizeof *e);
        if (!e) {
                brig_err(err, ENOMEM, "egress proxy");
                return NULL;
        }
        e->policy = ep;
        e->upstream = egress_policy_upstream(ep);
        if (e->upstream)
                egress_upstream_format(e->upstream, e->up_text, sizeof e->up_text);
        e->log = log;
        e->log_ctx = log_ctx;
        e->offline = offline;
        e->stub = (struct dns_stub){ .policy = ep, .log = log, .log_ctx = log_ctx, .offline = offline };
        e->timer = (struct watch){ .kind = W_TIMER, .fd = -1 };
        e->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (e->epfd < 0) {
                brig_err(err, errno, "epoll");
                goto fail;
        }
        e->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (e->timer.fd < 0) {
                brig_err(err, errno, "timerfd");
                goto fail;
        }
        set_interest(e, &e->timer, EPOLLIN);
        if (offline)
                return e;  /* nothing is ever resolved */
        e->dns = dns_new(e->epfd, err);
        if (!e->dns)
                goto fail;
        return e;
fail:
        egress_free(e);
        return NULL;
}

struct egress *egress_new(const struct egress_policy *ep, egress_log_fn log, void *log_ctx, brig_error **err)
{
        return egress_make(ep, log, log_ctx, false, err);
}

struct egress *egress_new_offline(egress_log_fn log, void *log_ctx, brig_error **err)
{
        return egress_make(NULL, log, log_ctx, true, err);
}

void egress_set_refusals(struct egress *e, struct refusals *r)
{
        e->refusals = r;
        e->stub.refusals = r;
}

int egress_add_listener(struct egress *e, int fd, enum egress_listener_kind kind, brig_error **err)
{
        int listening = 0, type = 0;
        socklen_t len = sizeof listening, tlen = sizeof type;
        if (kind < EGRESS_HTTP || kind > EGRESS_DNS_TCP)
                return brig_err(err, EINVAL, "unknown proxy listener kind %d", (int)kind);
        if (e->offline && kind != EGRESS_DNS_UDP)
                return brig_err(err, EINVAL, "network off: only the DNS stub listens");
        if (kind == EGRESS_DNS_UDP) {
                if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_DGRAM)
                        return brig_err(err, EINVAL, "DNS stub: not a datagram socket");
        } else if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
                return brig_err(err, EINVAL, "proxy listener: not a listening socket");
        }
        if (kind == EGRESS_TRANSPARENT) {
                struct sockaddr_storage ss;
                socklen_t sl = sizeof ss;
                e->filtered = true;
                /* an IPv6 redirect target exists only where IPv6 is routed
                 * to brig: then AAAA questions get answers */
                if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET6)
                        e->stub.ipv6 = true;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return brig_err(err, errno, "proxy listener");
        struct listener *l = calloc(1, sizeof *l);
        if (!l)
                return brig_err(err, ENOMEM, "proxy listener");
        l->w = (struct watch){ .kind = W_LISTENER, .fd = fd };
        l->kind = kind;
        set_interest(e, &l->w, EPOLLIN);
        if (!l->w.registered) {
                free(l);
                return brig_err(err, errno, "proxy listener: epoll");
        }
        l->next = e->listeners;
        e->listeners = l;
        return 0;
}

/* The interceptor's events, into the log and the summary from here: the
 * audit stream is this loop's alone. */
static void drain_intercept(struct egress *e)
{
        json_t *ev;
        bool refusal;
        while ((ev = intercept_next_event(e->ic, &refusal))) {
                const char *decision = json_string_value(json_object_get(ev, "decision"));
                const char *host = json_string_value(json_object_get(ev, "host"));
                json_int_t port = json_integer_value(json_object_get(ev, "port"));
                if (refusal) {
                        e->denied++;
                        char target[EGRESS_HOST_MAX + 16];
                        snprintf(target, sizeof target, "%s:%d", host ? host : "?", (int)port);
                        const char *why = json_string_value(json_object_get(ev, "reason"));
                        count_destination(e, host ? host : "?", (uint16_t)port, false, why);
                        refusals_add(e->refusals, REFUSAL_CONNECTION, target, why ? why : "refused", NULL, 1);
                } else if (decision && strcmp(decision, "allow") == 0 &&
                           strcmp(json_string_value(json_object_get(ev, "phase")) ?: "", "close") == 0) {
                        e->bytes_up += (uint64_t)json_integer_value(json_object_get(ev, "bytes_up"));
                        e->bytes_down += (uint64_t)json_integer_value(json_object_get(ev, "bytes_down"));
                }
                if (e->log)
                        e->log(e->log_ctx, ev);
                else
                        json_decref(ev);
        }
}

void egress_set_intercept(struct egress *e, struct intercept *ic)
{
        e->ic = ic;
        e->stub.intercept = ic;
        if (!ic)
                return;
        e->icw = (struct watch){ .kind = W_INTERCEPT, .fd = intercept_event_fd(ic) };
        set_interest(e, &e->icw, EPOLLIN);
}

int egress_poll_fd(const struct egress *e)
{
        return e ? e->epfd : -1;
}

void egress_dispatch(struct egress *e)
{
        struct epoll_event evs[256];
        int n = epoll_wait(e->epfd, evs, ARRAY_SIZE(evs), 0);
        for (int i = 0; i < n; i++) {
                void *tag = evs[i].data.ptr;
                int dfd;
                if (dns_owns(e->dns, tag, &dfd)) {
                        dns_on_event(e->dns, dfd, evs[i].events);
                        continue;
                }
                struct watch *w = tag;
                struct conn *c;
                switch (w->kind) {
                case W_LISTENER:
                        if (((struct listener *)w)->kind == EGRESS_DNS_UDP)
                                dns_udp_serve(e, (struct listener *)w);
                        else
                                on_accept(e, (struct listener *)w);
                        break;
                case W_TIMER:
                        on_timer(e);
                        break;
                case W_CLIENT:
                        c = conn_of(w, cw);
                        if (c->state == C_REQUEST)
                                read_request(c);
                        else if (c->state == C_SNIFF)
                                sniff_read(c);
                        else if (c->state == C_DNS)
                                dns_tcp_read(c);
                        else if (c->state == C_RELAY)
                                relay(c);
                        else if (c->state == C_REFUSING)
                                refusing(c);
                        break;
                case W_INTERCEPT:
                        drain_intercept(e);
                        break;
                case W_UPSTREAM:
                        c = conn_of(w, uw);
                        if (c->state == C_CONNECTING)
                                connect_done(c);
                        else if (c->state == C_TUNNEL)
                                read_tunnel_reply(c);
                        else if (c->state == C_RELAY)
                                relay(c);
                        break;
                }
        }
        while (e->dead) {
                struct conn *c = e->dead;
                e->dead = c->next;
                free(c);
        }
        update_timer(e);
}

json_t *egress_summary_json(const struct egress *e)
{
        json_t *dests = json_array();
        for (size_t i = 0; e && i < e->n_dests; i++)
                json_array_append_new(dests, json_pack("{s:s, s:i, s:s, s:I, s:s}", "host", e->dests[i].host, "port",
                                                       (int)e->dests[i].port, "decision",
                                                       e->dests[i].allowed ? "allow" : "deny", "count",
                                                       (json_int_t)e->dests[i].count, "reason", e->dests[i].reason));
        json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:o}", "allowed", (json_int_t)(e ? e->allowed : 0), "denied",
                              (json_int_t)(e ? e->denied : 0), "bytes_up", (json_int_t)(e ? e->bytes_up : 0),
                              "bytes_down", (json_int_t)(e ? e->bytes_down : 0), "destinations", dests);
        if (e && e->dests_truncated)
                json_object_set_new(o, "destinations_truncated", json_true());
        if (e && e->filtered)
                json_object_set_new(o, "dns", json_pack("{s:I, s:I, s:I}", "answered", (json_int_t)e->stub.allowed,
                                                        "refused", (json_int_t)e->stub.denied, "names",
                                                        (json_int_t)e->stub.names.n));
        return o;
}

void egress_free(struct egress *e)
{
        if (!e)
                return;
        /* The run is over (its audit stream ended): connections still open
         * are closed without further events; the summary has their counts. */
        e->log = NULL;
        e->stub.log = NULL;
        if (e->ic)
                set_interest(e, &e->icw, 0);  /* the fd is the interceptor's */
        while (e->conns)
                conn_close(e->conns);
        while (e->dead) {
                struct conn *c = e->dead;
                e->dead = c->next;
                free(c);
        }
        dns_free(e->dns);
        names_free(&e->stub.names);
        for (size_t i = 0; i < e->n_pins; i++)
                free(e->pins[i].host);
        free(e->pins);
        while (e->listeners) {
                struct listener *l = e->listeners;
                e->listeners = l->next;
                unwatch(e, &l->w);
                free(l);
        }
        if (e->timer.fd >= 0)
                close(e->timer.fd);
        if (e->epfd >= 0)
                close(e->epfd);
        for (size_t i = 0; i < e->n_dests; i++) {
                free(e->dests[i].host);
                free(e->dests[i].reason);
        }
        free(e->dests);
        free(e);
}
