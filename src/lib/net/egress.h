/* egress.h — network egress through brig's proxy (src/lib/net/).
 *
 * In proxy mode the sandbox keeps its own network namespace with only
 * loopback. Inside it, pid 1 creates listening sockets (HTTP proxy and
 * SOCKS5, on 127.0.0.1 and ::1, fixed ports) and hands them to the
 * supervisor, which serves them here, on the host side: every connection
 * is judged by the host policy and the address classification, and every
 * attempt is logged. Nothing listens on the host's own network. */
#ifndef BRIG_EGRESS_H
#define BRIG_EGRESS_H

#include "core/error.h"

#include <jansson.h>

/* Fixed, documented ports inside the sandbox. */
#define BRIG_HTTP_PROXY_PORT 3128
#define BRIG_SOCKS_PROXY_PORT 1080
/* Filtered mode: where nftables sends every outbound TCP connection, and
 * the DNS stub (every query to port 53 is redirected to it). */
#define BRIG_TRANSPARENT_PORT 15001
#define BRIG_DNS_PORT 53

enum egress_listener_kind {
        EGRESS_HTTP = 0,
        EGRESS_SOCKS = 1,
        EGRESS_TRANSPARENT = 2,   /* redirected TCP: SO_ORIGINAL_DST, SNI/Host */
        EGRESS_DNS_UDP = 3,       /* a bound UDP socket, not a listener */
        EGRESS_DNS_TCP = 4,
};

/* ---- policy (built from flags and policy files; validated on entry) ----- */

struct egress_policy;
BRIG_INTERNAL int egress_policy_allow_host(struct egress_policy **ep, const char *pattern, brig_error **err);
/* An allow rule whose names may resolve to private addresses (LAN,
 * unique-local, CGNAT; never loopback, link-local or metadata). */
BRIG_INTERNAL int egress_policy_allow_private_host(struct egress_policy **ep, const char *pattern, brig_error **err);
BRIG_INTERNAL int egress_policy_deny_host(struct egress_policy **ep, const char *pattern, brig_error **err);
BRIG_INTERNAL int egress_policy_allow_cidr(struct egress_policy **ep, const char *cidr_port, brig_error **err);
BRIG_INTERNAL int egress_policy_add_resolve(struct egress_policy **ep, const char *host_addr, brig_error **err);
/* "http://HOST:PORT": tunnel every allowed connection through that HTTP
 * proxy with CONNECT (the policy decision stays brig's). No credentials. */
BRIG_INTERNAL int egress_policy_set_upstream(struct egress_policy **ep, const char *url, brig_error **err);
/* Secrets, http rules and upstream CAs (net/intercept.h). */
struct intercept_policy;
BRIG_INTERNAL struct intercept_policy **egress_policy_intercept(struct egress_policy **ep);
BRIG_INTERNAL const struct intercept_policy *egress_policy_intercept_of(const struct egress_policy *ep);
/* True when the policy allows anything at all (any allow rule). */
BRIG_INTERNAL bool egress_policy_has_allows(const struct egress_policy *ep);
/* For the report: the rules as JSON ({"allow_hosts": [...], ...}). */
BRIG_INTERNAL json_t *egress_policy_json(const struct egress_policy *ep);
BRIG_INTERNAL void egress_policy_free(struct egress_policy *ep);
/* Take one allow (or deny) host rule out again, as PATTERN names it;
 * -ENOENT when the policy has none such. */
BRIG_INTERNAL int egress_policy_remove_host(struct egress_policy *ep, const char *pattern, bool deny,
                                            brig_error **err);

/* ---- inside the sandbox (pid 1, before it drops privileges) ------------- */

/* Create the listening sockets in the sandbox's network namespace:
 * for PROXY, HTTP on 127.0.0.1 and [::1] port BRIG_HTTP_PROXY_PORT, SOCKS5
 * on the same addresses port BRIG_SOCKS_PROXY_PORT (IPv6 ones skipped when
 * ::1 is unavailable); for FILTERED, also the redirect target
 * (BRIG_TRANSPARENT_PORT; on ::1 only with ipv6_redirect, when IPv6 is
 * routed to it) and the DNS stub (UDP and TCP, BRIG_DNS_PORT); for NONE,
 * the DNS stub's UDP sockets alone (egress_new_offline).
 * Fills fds/kinds, returns how many, or -errno. */
BRIG_INTERNAL int egress_make_listeners(int fds[], enum egress_listener_kind kinds[], size_t max,
                                        enum brig_net_mode mode, bool ipv6_redirect, brig_error **err);

/* ---- the supervisor ------------------------------------------------------ */

struct egress;
/* Called for every attempt (allowed or refused) with one JSON object; the
 * callee owns it. The object has at least: "event": "net", "decision"
 * ("allow"|"deny"), "reason", "host" (or null), "address", "port",
 * "protocol" ("http-connect"|"http"|"socks5", and in filtered mode
 * "tls"|"http-direct"|"tcp"), and on close "bytes_up", "bytes_down".
 * The DNS stub logs "event": "dns" with "name", "type", "decision",
 * "reason" and the "answers" it gave. */
typedef void (*egress_log_fn)(void *ctx, json_t *event);

BRIG_INTERNAL struct egress *egress_new(const struct egress_policy *ep, egress_log_fn log, void *log_ctx,
                                        brig_error **err);
/* Network off (mode none): only the DNS stub, which answers every name
 * NXDOMAIN at once ("network is off for this sandbox") and never resolves
 * anything; no resolver of the host's is even set up. */
BRIG_INTERNAL struct egress *egress_new_offline(egress_log_fn log, void *log_ctx, brig_error **err);
/* Where refusals go for the end-of-run summary (refusals.h), or NULL. */
struct refusals;
BRIG_INTERNAL void egress_set_refusals(struct egress *e, struct refusals *r);
/* Secrets and http rules (net/intercept.h): the hosts whose requests the
 * proxy sees. The caller keeps ic (the run's plan owns it). */
struct intercept;
BRIG_INTERNAL void egress_set_intercept(struct egress *e, struct intercept *ic);
/* Take ownership of a listening socket the sandbox sent. */
BRIG_INTERNAL int egress_add_listener(struct egress *e, int fd, enum egress_listener_kind kind, brig_error **err);
/* One fd (epoll) to poll for readability; then call egress_dispatch. */
BRIG_INTERNAL int egress_poll_fd(const struct egress *e);
/* Do all pending work without blocking (accept, relay, resolve, timers). */
BRIG_INTERNAL void egress_dispatch(struct egress *e);
/* Counts for the report: {"allowed": N, "denied": M, "destinations": [...]} */
BRIG_INTERNAL json_t *egress_summary_json(const struct egress *e);
/* The rules changed live (brig_sandbox_net_rule): judge by EP from now on
 * (the proxy and the DNS stub; connections already made stay). */
BRIG_INTERNAL void egress_set_policy(struct egress *e, const struct egress_policy *ep);
/* Close every connection and listener. */
BRIG_INTERNAL void egress_free(struct egress *e);

#endif
