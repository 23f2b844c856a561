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
 * upstream. The stub itself (dnsstub.c) answers on UDP and TCP here. */
#define _GNU_SOURCE
#include "net/net.h"
#include "core/refusals.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netfilter_ipv4.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* A proxy writes replies and rewritten heads in pieces: without this,
 * Nagle holds each small piece until the peer's delayed ACK (~40 ms),
 * which keep-alive clients would pay on every request. */
static void no_delay(int fd)
{
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

#define EGRESS_MAX_CONNS 8192
#define HANDSHAKE_TIMEOUT_MS 30000   /* request head, DNS and connect, from accept */
#define IDLE_TIMEOUT_MS 300000       /* a relay with no byte either way */
#define DRAIN_TIMEOUT_MS 2000        /* reading what a refused client still sends */
#define MAX_CANDIDATES 16
#define MAX_DESTINATIONS 256
#define SOCKS_IN_MAX 600             /* greeting (257) + request (262), with room */
#define TUNNEL_HEAD_MAX 8192         /* the upstream proxy's answer to CONNECT */
/* Filtered mode: how long the first bytes are awaited. For an address the
 * stub handed out (or a CIDR rule allows) the name is known or not needed,
 * and a server that speaks first (ssh banners come from both sides, but
 * SMTP, MySQL) must not wait long; for a bare address those bytes are the
 * only way to a name. A first message begun must be whole within
 * SNIFF_BARE_MS, or the connection is refused. */
#define SNIFF_NAMED_MS 250
#define SNIFF_BARE_MS 2000
#define DNS_TCP_IDLE_MS 10000
#define DNS_TCP_QUERY_MAX 1500       /* a question, even with EDNS options, is far smaller */
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80      /* linux/netfilter_ipv6/ip6_tables.h */
#endif

enum watch_kind { W_LISTENER, W_TIMER, W_CLIENT, W_UPSTREAM };

struct watch {
        enum watch_kind kind;
        int fd;
        uint32_t events;
        bool registered;
};

struct listener {
        struct watch w;
        enum egress_listener_kind kind;
        bool paused;          /* out of descriptors: resumed by the timer */
        struct listener *next;
};

enum conn_state { C_REQUEST, C_SNIFF, C_DNS, C_RESOLVING, C_UPSTREAM_DNS, C_CONNECTING, C_TUNNEL, C_RELAY, C_REFUSING, C_DEAD };

struct conn {
        struct egress *e;
        struct conn *prev, *next;
        struct watch cw, uw;  /* client, upstream */
        enum egress_listener_kind kind;  /* what it speaks: on a proxy port, known from its first byte */
        enum egress_listener_kind port_kind;  /* the listener it reached */
        bool detected;        /* proxy port: the first byte said which protocol */
        bool socks4;          /* EGRESS_SOCKS: SOCKS4 or 4a, not SOCKS5 */
        enum conn_state state;
        const char *protocol;
        char method[16];
        char *in;             /* the request as read so far */
        size_t in_len, in_cap, in_used;
        bool greeted;         /* SOCKS: method selection done */
        struct http_request req;
        bool forward;         /* plain http: one request per upstream connection */
        bool keep_alive;      /* plain http: the client connection may carry another request */
        bool resp_head;       /* plain http: reading the response head (in `reply`) */
        bool kept;            /* plain http: waiting for the next request on a kept connection */
        char host[EGRESS_HOST_MAX + 1];  /* normalized name, "" for a literal */
        char why[EGRESS_HOST_MAX + 160];  /* the host rule that allowed the name */
        bool private_ok;      /* ... and it was an --allow-private-host rule */
        bool at_limit;        /* refused for one of brig's own bounds: no flag lets it through */
        uint16_t port;
        struct net_addr cands[MAX_CANDIDATES];
        size_t n_cands, next_cand;
        int connected;        /* index into cands, -1 while none */
        size_t next_up;       /* upstream proxy: the next of its addresses to try */
        char *reply;          /* upstream proxy: its answer to CONNECT so far */
        size_t reply_len, reply_used;
        bool established;     /* relaying (directly or through the upstream) */
        char failure[512];    /* why an allowed connection failed, for the close event */
        int last_errno;
        bool allowed;         /* an allow was logged: a close event follows */
        void *dns;
        struct flow up, down;
        uint64_t started_ms, last_ms;
        /* filtered mode (EGRESS_TRANSPARENT) */
        struct net_addr orig;  /* where the program connected */
        char mapped[EGRESS_HOST_MAX + 1];  /* the name orig was handed out for, or "" */
        bool pinned;          /* a bare address named by SNI/Host: only orig may be used */
        bool cidr_ok;         /* orig itself is allowed (--allow-cidr, or a host rule naming it) */
        bool late;            /* allowed before the client said anything: its first bytes still judged */
        uint64_t late_ms;     /* when those first bytes began */
        size_t sniff_need;    /* a ClientHello: no verdict before in_len reaches this */
        size_t sniffed;       /* in_len at the last look that said "more" */
        bool client_eof;      /* the client shut its side while being sniffed */
};

struct dest {
        char *host;
        uint16_t port;
        bool allowed;
        uint64_t count;
        char *reason;         /* of the first decision */
};

/* A name --allow-private-host let reach private addresses, and which:
 * those of its first lookup in this run (see pin_private). */
struct private_pin {
        char *host;
        struct net_addr addrs[MAX_CANDIDATES];
        size_t n;
};
#define PINS_MAX 256

struct egress {
        const struct egress_policy *policy;
        egress_log_fn log;
        void *log_ctx;
        int epfd;
        struct watch timer;
        int timer_armed;      /* 0 off, 1 one second, 2 fast (sniffing) */
        struct dns *dns;
        struct listener *listeners;
        struct conn *conns, *dead;
        size_t n_conns;
        uint64_t allowed, denied, bytes_up, bytes_down;
        struct dest *dests;
        size_t n_dests;
        bool dests_truncated;
        /* --upstream-proxy: NULL to connect directly */
        const struct egress_upstream *upstream;
        char up_text[EGRESS_HOST_MAX + 16];  /* "host:port" */
        enum { UP_UNRESOLVED, UP_RESOLVING, UP_READY } up_state;
        struct net_addr up_addrs[MAX_CANDIDATES];
        size_t n_up;
        void *up_dns;
        struct refusals *refusals;  /* the run's, for the summary; or NULL */
        struct private_pin *pins;
        size_t n_pins;
        bool offline;         /* network off: only the DNS stub (egress_new_offline) */
        /* filtered mode */
        bool filtered;        /* a redirect listener was added */
        size_t in_held;       /* bytes of first-message buffers: sniffed first bytes, proxy request heads */
        struct dns_stub stub;
};

#define conn_of(w, member) ((struct conn *)((char *)(w) - offsetof(struct conn, member)))

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_interest(struct egress *e, struct watch *w, uint32_t want)
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

static void unwatch(struct egress *e, struct watch *w)
{
        set_interest(e, w, 0);
        if (w->fd >= 0)
                close(w->fd);
        w->fd = -1;
}

/* ---- log and summary ------------------------------------------------------- */

static void target_text(struct conn *c, const struct net_addr *a, char *buf, size_t size);

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

static int proxy_port_number(enum egress_listener_kind kind)
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
static void log_decision(struct conn *c, bool allow, const char *reason, const struct net_addr *addr)
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

static void log_close(struct conn *c)
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

/* A connection's first message is buffered until judged: a proxy
 * request head (1 KiB, grown fourfold up to HTTP_HEAD_MAX), a redirected
 * connection's first bytes (2 KiB, up to SNIFF_MAX). What all of them
 * hold beyond those first sizes is bounded too, or thousands of
 * connections each sending most of a big head or ClientHello would pin
 * the maximum apiece in the supervisor, outside the sandbox's memory
 * limit (8100 proxy connections held 16 KiB heads, 156 MiB, before). */
#define HEAD_BUF_MIN 1024
#define SNIFF_BUF_MIN 2048
#define IN_BUDGET (32u << 20)

static void in_free(struct conn *c)
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
static int in_grow(struct conn *c, size_t cap, size_t base)
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

static void refuse(struct conn *c, const char *reason, const struct net_addr *a);
static void conn_close(struct conn *c);

/* Room for more first bytes; false when the connection was refused. */
static bool sniff_room(struct conn *c)
{
        size_t cap = c->in_cap ? c->in_cap * 4 : SNIFF_BUF_MIN;
        int r = in_grow(c, cap > SNIFF_MAX ? SNIFF_MAX : cap, SNIFF_BUF_MIN);
        if (r == -ENOBUFS) {
                c->at_limit = true;
                refuse(c, "too many large first messages at once (brig holds at most 32 MiB of them)", &c->orig);
                return false;
        }
        if (r < 0 || c->in_len == c->in_cap) {
                conn_close(c);
                return false;
        }
        return true;
}

static void conn_close(struct conn *c)
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
static void conn_refuse_with(struct conn *c, const char *reply, size_t len)
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
static void http_refuse(struct conn *c, int status, const char *target, const char *reason)
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

static void socks_refuse(struct conn *c, uint8_t code)
{
        uint8_t r[10];
        if (c->socks4) {
                socks4_reply(r, false);  /* SOCKS4 has one code for every failure */
                conn_refuse_with(c, (const char *)r, 8);
                return;
        }
        socks5_reply(r, code);
        conn_refuse_with(c, (const char *)r, sizeof r);
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
static void reset_close(struct conn *c);

static void refuse(struct conn *c, const char *reason, const struct net_addr *a)
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

static void relay(struct conn *c);
static void next_request(struct conn *c);
static void sniff_unread(struct conn *c, const char *how);
static bool name_refused(struct conn *c, const char *name, char *why, size_t size);
static void late_timeout(struct conn *c);
static void sniff_timeout(struct conn *c);

static void start_relay(struct conn *c)
{
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
static void on_addresses(struct conn *c, const struct net_addr *addrs, size_t n, bool named)
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
static void judge_target(struct conn *c, const char *host, uint16_t port)
{
        c->port = port;
        struct net_addr a;
        if (net_addr_parse_lenient(host, &a)) {
                on_addresses(c, &a, 1, false);
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
        judge_target(c, c->req.host, c->req.port);
}

/* A SOCKS request, parsed: CONNECT is judged like every other target. */
static void socks_connect(struct conn *c, const struct socks5_request *req)
{
        c->port = req->port;
        if (req->cmd != 1) {
                /* BIND and UDP ASSOCIATE would open paths the proxy does
                 * not judge (an inbound port, datagrams): refused. */
                const char *why = req->cmd == 2 ? (c->socks4 ? "SOCKS4 BIND not supported" : "SOCKS5 BIND not supported")
                                  : c->socks4   ? "SOCKS4 command not supported"
                                                : "SOCKS5 UDP ASSOCIATE not supported";
                log_decision(c, false, why, req->is_name ? NULL : &req->addr);
                socks_refuse(c, SOCKS_CMD_UNSUPPORTED);
                return;
        }
        set_interest(c->e, &c->cw, 0);
        if (req->is_name)
                judge_target(c, req->host, req->port);
        else
                on_addresses(c, &req->addr, 1, false);
}

static void on_socks4_bytes(struct conn *c)
{
        struct socks5_request req;
        int r = socks4_parse_request((const uint8_t *)c->in, c->in_len, &req);
        if (r == 0)
                return;
        if (r < 0) {
                log_decision(c, false, "malformed SOCKS4 request (a user id or name over 255 bytes, or no name)", NULL);
                socks_refuse(c, SOCKS_GENERAL_FAILURE);
                return;
        }
        c->in_used = (size_t)r;
        socks_connect(c, &req);
}

static void on_socks_bytes(struct conn *c)
{
        const uint8_t *b = (const uint8_t *)c->in + c->in_used;
        size_t len = c->in_len - c->in_used;
        if (c->socks4) {
                on_socks4_bytes(c);
                return;
        }
        if (!c->greeted) {
                bool no_auth;
                int r = socks5_parse_greeting(b, len, &no_auth);
                if (r == 0)
                        return;
                if (r < 0) {  /* cannot happen: the first byte said SOCKS5 */
                        conn_close(c);
                        return;
                }
                if (!no_auth) {
                        log_decision(c, false, "SOCKS5 client offers no 'no authentication' method", NULL);
                        conn_refuse_with(c, "\x05\xff", 2);
                        return;
                }
                /* Two bytes on a fresh socket: the send buffer takes them. */
                if (send(c->cw.fd, "\x05\x00", 2, MSG_NOSIGNAL | MSG_DONTWAIT) != 2) {
                        conn_close(c);
                        return;
                }
                c->greeted = true;
                c->in_used += (size_t)r;
                b += r;
                len -= (size_t)r;
        }
        struct socks5_request req;
        int r = socks5_parse_request(b, len, &req);
        if (r == 0)
                return;
        if (r < 0) {
                log_decision(c, false, r == -SOCKS_ATYP_UNSUPPORTED ? "SOCKS5 address type not supported"
                                       : r == -SOCKS_CMD_UNSUPPORTED ? "SOCKS5 command not supported"
                                                                     : "malformed SOCKS5 request",
                             NULL);
                socks_refuse(c, (uint8_t)-r);
                return;
        }
        c->in_used += (size_t)r;
        socks_connect(c, &req);
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

static void read_request(struct conn *c)
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

static void on_http_request(struct conn *c);
static void sniff_judge(struct conn *c);

/* Plain http, the response over by its framing: the upstream connection
 * ends, the client's next request is read and judged from scratch. */
static void next_request(struct conn *c)
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
static bool read_response_head(struct conn *c)
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
                err = flow_prepend(&c->down, c->reply, c->reply_len);
                if (resp.status == 101 && c->req.upgrade) {
                        /* the handshake it asked for: from here on the
                         * client's bytes are the new protocol's, all of
                         * them, to the end */
                        c->up.limited = c->up.chunked = c->up.ended = false;
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

/* ---- filtered mode: first bytes after a server spoke first ---------------- */

static bool sniff_started(const struct conn *c);
static bool http_method_seen(const struct conn *c);
static bool sniff_worth(struct conn *c);
static void sniff_more(struct conn *c, int tls);

/* The late first bytes are judged: they go upstream, and the relay on. */
static enum flow_state late_pass(struct conn *c)
{
        c->late = false;
        int r = flow_prepend(&c->up, c->in, c->in_len);
        in_free(c);
        if (r < 0)
                return FLOW_ERROR;
        c->up.eof = c->client_eof;
        return flow_pump(&c->up);
}

/* A connection decided before its client sent anything (its server was to
 * speak first, or its client is slow): the client's first bytes are read
 * here instead of relayed, and judged like any first bytes — a TLS SNI the
 * rules refuse ends the connection; plain HTTP starts over as a request of
 * its own, judged and forwarded like the first one (next_request). */
static enum flow_state late_read(struct conn *c)
{
        if (c->in_len == c->in_cap && !sniff_room(c))
                return FLOW_ERROR;
        ssize_t n = recv(c->cw.fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? FLOW_WANT_READ : FLOW_ERROR;
        if (!c->in_len)
                c->late_ms = now_ms();
        if (n == 0)
                c->client_eof = true;
        c->in_len += (size_t)n;
        if (!sniff_worth(c))
                return FLOW_WANT_READ;
        char name[EGRESS_HOST_MAX + 1], why[2 * EGRESS_HOST_MAX + 160];
        int r = sniff_tls_sni((const uint8_t *)c->in, c->in_len, name);
        if (r == SNIFF_NOT_THIS) {
                int h = sniff_http_host(c->in, c->in_len, name);
                if (h == SNIFF_NOT_THIS)
                        return late_pass(c);
                if (h == SNIFF_MORE && !http_method_seen(c))
                        return c->client_eof ? late_pass(c) : FLOW_WANT_READ;  /* a method, or a word */
                next_request(c);  /* a request: judged from scratch, on a new upstream connection */
                return FLOW_DONE;
        }
        c->protocol = "tls";
        if (r == SNIFF_MORE && c->client_eof) {
                sniff_unread(c, "ended before it was whole");  /* as in sniff_judge */
                return FLOW_ERROR;
        }
        if (r == SNIFF_MORE && c->in_len < SNIFF_MAX) {
                sniff_more(c, 1);
                return FLOW_WANT_READ;
        }
        if (r == SNIFF_NAME && !name_refused(c, name, why, sizeof why))
                return late_pass(c);
        if (r == SNIFF_NO_NAME)
                return late_pass(c);
        if (r == SNIFF_NAME)
                refuse(c, why, &c->orig);
        else
                sniff_unread(c, r == SNIFF_BAD ? "is malformed (or names two hosts)" : "is too long");
        return FLOW_ERROR;
}

static void late_timeout(struct conn *c)
{
        if (sniff_started(c)) {
                char why[64];
                snprintf(why, sizeof why, "was not whole within %d ms", SNIFF_BARE_MS);
                sniff_unread(c, why);
                return;
        }
        if (late_pass(c) == FLOW_ERROR)
                conn_close(c);
        else
                relay(c);
}

static void relay(struct conn *c)
{
        enum flow_state su = c->late ? late_read(c) : flow_pump(&c->up), sd = FLOW_WANT_READ;
        if (c->state != C_RELAY)
                return;  /* refused, closed, or started over */
        c->last_ms = now_ms();
        if (su == FLOW_ERROR) {
                conn_close(c);
                return;
        }
        if (!c->resp_head || read_response_head(c)) {
                if (c->state != C_RELAY)
                        return;
                sd = flow_pump(&c->down);
                if (su == FLOW_DONE && !c->up.ended && !c->up.shut)
                        su = flow_pump(&c->up);  /* opened again by a 101 */
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

/* ---- filtered mode: redirected connections and the DNS stub ---------------- */

/* Close with a reset: the program sees ECONNRESET / ECONNREFUSED at once. */
static void reset_close(struct conn *c)
{
        struct linger hard = { .l_onoff = 1, .l_linger = 0 };
        (void)setsockopt(c->cw.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        conn_close(c);
}

/* Where the program meant to connect, from the NAT entry of the redirect.
 * A connection made straight to the redirect port has none: refused. */
static int original_destination(int fd, struct net_addr *a, uint16_t *port)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return -errno;
        bool v6 = ss.ss_family == AF_INET6;
        len = sizeof ss;
        if (getsockopt(fd, v6 ? SOL_IPV6 : SOL_IP, v6 ? IP6T_SO_ORIGINAL_DST : SO_ORIGINAL_DST, &ss, &len) < 0)
                return -errno;
        net_addr_from_sockaddr(a, (struct sockaddr *)&ss);
        *port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
        return 0;
}

static void transparent_accept(struct conn *c)
{
        struct egress *e = c->e;
        c->protocol = "tcp";
        /* The rules never redirect loopback, so a loopback "original"
         * destination is a connection made straight to this port. */
        if (original_destination(c->cw.fd, &c->orig, &c->port) < 0 || egress_classify(&c->orig) == ADDR_LOOPBACK) {
                log_decision(c, false, "no original destination (a direct connection to brig's redirect port)", NULL);
                reset_close(c);
                return;
        }
        const char *name = names_lookup(&e->stub.names, &c->orig);
        if (name) {
                snprintf(c->mapped, sizeof c->mapped, "%s", name);
        } else if (names_in_pool(&c->orig)) {
                refuse(c, "an address brig's DNS never handed out", &c->orig);
                return;
        } else {
                /* A CIDR rule (or a host rule naming the literal) allows
                 * the address itself — but the first bytes are read all
                 * the same: a name they show is judged by the deny rules,
                 * and recorded. */
                struct egress_verdict v;
                egress_judge_addr(e->policy, &c->orig, c->port, NULL, false, &v);
                c->cidr_ok = v.allow;
        }
        c->state = C_SNIFF;
        set_interest(e, &c->cw, EPOLLIN);
}

/* A name the first bytes show, against what the connection may carry
 * (sets why and the event's host when refused): brig's address for
 * another name does not carry it (domain fronting), and deny rules win
 * wherever a name is visible — over a CIDR rule for the address too. */
static bool name_refused(struct conn *c, const char *name, char *why, size_t size)
{
        const char *what = strcmp(c->protocol, "tls") == 0 ? "TLS SNI" : "HTTP Host";
        if (c->mapped[0] && strcmp(name, c->mapped) != 0) {
                snprintf(why, size, "sent to brig's address for %s, but its %s names %s", c->mapped, what, name);
                snprintf(c->host, sizeof c->host, "%s", c->mapped);
                return true;
        }
        struct egress_verdict v;
        snprintf(c->host, sizeof c->host, "%s", name);
        if (egress_host_denied(c->e->policy, name, c->port, &v)) {
                snprintf(why, size, "%s (its %s)", v.reason, what);
                return true;
        }
        return false;
}

/* The first bytes are in (or none came in time, name == NULL): judge. */
static void transparent_decide(struct conn *c, const char *name)
{
        struct net_addr literal;
        set_interest(c->e, &c->cw, 0);
        if (name && net_addr_parse_lenient(name, &literal))
                name = NULL;  /* "Host: 192.0.2.1" names no host */
        char why[2 * EGRESS_HOST_MAX + 160];
        if (name && name_refused(c, name, why, sizeof why)) {
                refuse(c, why, &c->orig);
                return;
        }
        if (c->mapped[0]) {
                judge_target(c, c->mapped, c->port);
                return;
        }
        if (name) {
                if (c->cidr_ok) {
                        on_addresses(c, &c->orig, 1, false);
                        return;
                }
                c->pinned = true;
                judge_target(c, name, c->port);
                return;
        }
        if (c->cidr_ok) {
                on_addresses(c, &c->orig, 1, false);
                return;
        }
        refuse(c, "a bare address with no TLS SNI or HTTP Host (allow it with --allow-cidr)", &c->orig);
}

/* A plain-HTTP request sent straight to an address, parsed whole by the
 * proxy's own parser: judged like any first bytes, then forwarded as the
 * proxy forwards (its body by its framing, "Connection: close" upstream),
 * so the next request on the connection is judged too (next_request). */
static void transparent_http(struct conn *c)
{
        char name[EGRESS_HOST_MAX + 1];
        struct net_addr literal;
        c->in_used = c->req.head_len;
        snprintf(c->method, sizeof c->method, "%s", c->req.method);
        c->forward = true;
        c->keep_alive = c->req.keep_alive;
        if (!c->req.host[0] || net_addr_parse_lenient(c->req.host, &literal)) {
                transparent_decide(c, NULL);
                return;
        }
        if (!egress_host_normalize(c->req.host, strlen(c->req.host), name)) {
                refuse(c, "the HTTP Host is not a valid host name", &c->orig);
                return;
        }
        transparent_decide(c, name);
}

static bool http_begun(const struct conn *c)
{
        return sniff_http_host(c->in, c->in_len, (char[EGRESS_HOST_MAX + 1]){ 0 }) != SNIFF_NOT_THIS;
}

/* Past an HTTP method ("GET ", or a word as long as SNIFF_METHOD_MAX): a
 * request head is coming, and only a line end changes what it says. */
static bool http_method_seen(const struct conn *c)
{
        size_t skip = 0;
        while (skip < c->in_len && (c->in[skip] == '\r' || c->in[skip] == '\n'))
                skip++;  /* empty lines before a request line count for nothing */
        size_t n = c->in_len - skip;
        return http_begun(c) &&
               (memchr(c->in + skip, ' ', n) || memchr(c->in + skip, '\t', n) || n >= SNIFF_METHOD_MAX);
}

/* Any byte of a TLS record, or of what can still become an HTTP request
 * (empty lines, the first letters of a method): a first message that must
 * be read whole before anything is decided. A server waits far longer
 * than SNIFF_BARE_MS for the rest of a request line, so "G", a pause and
 * "ET / ..." is a request to it: decided as nameless bytes, it would go
 * upstream unjudged. */
static bool sniff_started(const struct conn *c)
{
        return strcmp(c->protocol, "tls") == 0 || http_begun(c);
}

static void sniff_unread(struct conn *c, const char *how)
{
        char why[160];
        snprintf(why, sizeof why, "the %s %s: no name could be read (refused, not guessed)",
                 strcmp(c->protocol, "tls") == 0 ? "TLS ClientHello" : "HTTP request head", how);
        refuse(c, why, &c->orig);
}

/* Whether new bytes can change a "more": a hello short of its declared
 * length, or a request head with no new line end, cannot — so a client
 * sending its first message a byte at a time costs one parse, not one a
 * byte (sniffing is otherwise quadratic in SNIFF_MAX). */
static bool sniff_worth(struct conn *c)
{
        if (c->client_eof || c->in_len >= SNIFF_MAX)
                return true;
        if (c->in_len < c->sniff_need)
                return false;
        /* past the method, an HTTP verdict changes only at a line end */
        return !(c->sniffed && !memchr(c->in + c->sniffed, '\n', c->in_len - c->sniffed));
}

static void sniff_more(struct conn *c, int tls)
{
        c->sniff_need = tls ? sniff_tls_need((const uint8_t *)c->in, c->in_len) : 0;
        c->sniffed = !tls && http_method_seen(c) ? c->in_len : 0;
}

/* What the first bytes say; waits (returns) while more can decide. */
static void sniff_judge(struct conn *c)
{
        char name[EGRESS_HOST_MAX + 1], why[160];
        if (!sniff_worth(c))
                return;
        int r = sniff_tls_sni((const uint8_t *)c->in, c->in_len, name);
        if (r != SNIFF_NOT_THIS) {
                c->protocol = "tls";
        } else if (sniff_http_host(c->in, c->in_len, name) != SNIFF_NOT_THIS) {
                /* "http-direct" (refusals answered with a 403 or 400) */
                c->protocol = "http-direct";
                const char *bad;
                int h = http_parse_direct(c->in, c->in_len, &c->req, &bad);
                if (h < 0) {
                        log_decision(c, false, bad, &c->orig);
                        http_refuse(c, -h, NULL, bad);
                        return;
                }
                if (h == 1) {
                        transparent_http(c);
                        return;
                }
                r = SNIFF_MORE;
        } else {
                c->protocol = "tcp";
                transparent_decide(c, NULL);
                return;
        }
        switch (r) {
        case SNIFF_MORE:
                if (c->client_eof && strcmp(c->protocol, "tls") == 0) {
                        /* A hello cut short still shows what came of it: an
                         * SNI router (nginx's ssl_preread) routes on a name
                         * as soon as it has read one, and forwards the rest */
                        sniff_unread(c, "ended before it was whole");
                } else if (c->client_eof && !http_method_seen(c)) {
                        /* it can never be a request now: the bytes, as bytes */
                        c->protocol = "tcp";
                        transparent_decide(c, NULL);
                } else if (c->client_eof) {
                        sniff_unread(c, "ended before its blank line");
                } else if (c->in_len >= SNIFF_MAX) {
                        snprintf(why, sizeof why, "was not whole within %d bytes", SNIFF_MAX);
                        sniff_unread(c, why);
                } else {
                        sniff_more(c, strcmp(c->protocol, "tls") == 0);  /* on_timer bounds the wait */
                }
                return;
        case SNIFF_BAD:
                sniff_unread(c, "is malformed (or names two hosts)");
                return;
        case SNIFF_TOO_BIG:
                snprintf(why, sizeof why, "is longer than %d bytes", SNIFF_HELLO_MAX);
                sniff_unread(c, why);
                return;
        default:
                transparent_decide(c, r == SNIFF_NAME ? name : NULL);
        }
}

/* No whole first message in time. Nothing at all: a server that speaks
 * first (an address with a name or a CIDR rule) — decided without a name.
 * A message begun but not whole: refused. */
static void sniff_timeout(struct conn *c)
{
        if (c->in_len && sniff_started(c)) {
                char why[64];
                snprintf(why, sizeof why, "was not whole within %d ms", SNIFF_BARE_MS);
                sniff_unread(c, why);
                return;
        }
        c->late = !c->in_len;  /* its first bytes, when they come, are still judged */
        transparent_decide(c, NULL);
}

static void sniff_read(struct conn *c)
{
        if (c->in_len == c->in_cap && !sniff_room(c))
                return;
        ssize_t n = recv(c->cw.fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n < 0 || (n == 0 && !c->in_len)) {
                conn_close(c);  /* gone before saying anything */
                return;
        }
        if (c->kept && !c->in_len)
                c->started_ms = now_ms();  /* the next request's time starts */
        c->in_len += (size_t)n;
        c->last_ms = now_ms();
        /* said something, then shut its side (a raw request and
         * shutdown(SHUT_WR)): judged by what came, the end is passed on
         * after the bytes */
        if (n == 0)
                c->client_eof = true;
        sniff_judge(c);
}

/* DNS over UDP: one datagram, one answer, from the socket it came to (the
 * kernel turns the source back into the address the program asked). */
static void dns_udp_serve(struct egress *e, struct listener *l)
{
        for (int i = 0; i < 64; i++) {
                uint8_t query[1500], reply[512];
                struct sockaddr_storage peer;
                socklen_t plen = sizeof peer;
                ssize_t n = recvfrom(l->w.fd, query, sizeof query, MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
                if (n < 0)
                        return;
                size_t len = dns_stub_answer(&e->stub, query, (size_t)n, reply, sizeof reply, "udp");
                if (len)
                        (void)sendto(l->w.fd, reply, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&peer, plen);
        }
}

/* DNS over TCP: two-byte length, message; as many as the client sends. */
static void dns_tcp_read(struct conn *c)
{
        if (!c->in && !(c->in = malloc(c->in_cap = 2 + DNS_TCP_QUERY_MAX))) {
                conn_close(c);
                return;
        }
        ssize_t n = recv(c->cw.fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                conn_close(c);
                return;
        }
        c->in_len += (size_t)n;
        c->last_ms = now_ms();
        while (c->in_len >= 2) {
                size_t mlen = (size_t)(uint8_t)c->in[0] << 8 | (uint8_t)c->in[1];
                if (mlen > DNS_TCP_QUERY_MAX) {
                        conn_close(c);  /* no resolver asks that much: not worth the memory */
                        return;
                }
                if (c->in_len < 2 + mlen)
                        return;
                uint8_t reply[2 + 4096];
                size_t len = dns_stub_answer(&c->e->stub, (const uint8_t *)c->in + 2, mlen, reply + 2,
                                             sizeof reply - 2, "tcp");
                reply[0] = (uint8_t)(len >> 8);
                reply[1] = (uint8_t)len;
                /* a small answer on a connection that reads its answers: if
                 * the send buffer can't take it whole, the client is not a
                 * resolver worth waiting for */
                if (len && send(c->cw.fd, reply, len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 2)) {
                        conn_close(c);
                        return;
                }
                memmove(c->in, c->in + 2 + mlen, c->in_len - 2 - mlen);
                c->in_len -= 2 + mlen;
        }
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
