/* egress_filtered.c — filtered mode's front end: connections the kernel
 * redirected (netfilter.c) to brig's port, their original destination,
 * the first bytes sniffed for a TLS SNI or an HTTP Host (sniff.c parses),
 * the verdict on what they show, and a late client's first bytes judged
 * in the relay (see egress.c's first comment for the states). */
#define _GNU_SOURCE
#include "net/proxy.h"

#include <linux/netfilter_ipv4.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static bool name_refused(struct conn *c, const char *name, char *why, size_t size);
static bool http_method_seen(const struct conn *c);
static void sniff_unread(struct conn *c, const char *how);
static bool sniff_worth(struct conn *c);
static void sniff_more(struct conn *c, int tls);
static bool sniff_started(const struct conn *c);

#ifndef IP6T_SO_ORIGINAL_DST

#define IP6T_SO_ORIGINAL_DST 80      /* linux/netfilter_ipv6/ip6_tables.h */

#endif

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

/* ---- filtered mode: first bytes after a server spoke first ---------------- */

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
enum flow_state late_read(struct conn *c)
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

void late_timeout(struct conn *c)
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

/* ---- filtered mode: redirected connections and the DNS stub ---------------- */

/* Close with a reset: the program sees ECONNRESET / ECONNREFUSED at once. */
void reset_close(struct conn *c)
{
        struct linger hard = { .l_onoff = 1, .l_linger = 0 };
        (void)setsockopt(c->cw.fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
        conn_close(c);
}

/* Where the program meant to connect, from the NAT entry of the redirect.
 * A connection made straight to the redirect port has none: refused. */
int original_destination(int fd, struct net_addr *a, uint16_t *port)
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

void transparent_accept(struct conn *c)
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
        if (plain_http_refused(c))
                return;
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
void sniff_judge(struct conn *c)
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
void sniff_timeout(struct conn *c)
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

void sniff_read(struct conn *c)
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
