/* dnsstub.c — brig's DNS stub for filtered sandboxes, and for sandboxes
 * with the network off, where every name gets NXDOMAIN at once: a client
 * learns "no such name" immediately instead of waiting on a resolver it
 * cannot reach, and the run's summary names what it looked up.
 *
 * Every DNS question from inside (any server, port 53, UDP or TCP — the
 * nftables rules send them all here) is judged by the host rules alone:
 * an allowed name gets brig's own address for it (names.c), a refused one
 * NXDOMAIN. No question ever reaches a real resolver from here, so a
 * refused name leaks nowhere and DNS cannot carry data out; the real
 * lookup happens when a connection to the handed-out address is made. */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "core/refusals.h"

#include <stdio.h>
#include <string.h>

/* Short: the addresses never change for a run, but a program that caches
 * answers across runs (none should) would not keep them long. */
#define DNS_TTL 60
/* For the summary; `by_rules`: the host rules refused the name, and one
 * --allow-host NAME (turning the network on, filtered, for that name)
 * would let it resolve — unless a --deny-host of the user's named it, or
 * it is a cloud metadata name (never offered: egress.c refusal_fix). */
static void note_refusal(struct dns_stub *s, const char *name, const char *reason, bool by_rules)
{
        char fix[EGRESS_HOST_MAX + 16] = "";
        struct egress_verdict v;
        if (by_rules && !egress_is_metadata_name(name) && !egress_host_denied(s->policy, name, 0, &v))
                snprintf(fix, sizeof fix, "--allow-host %s", name);
        refusals_add(s->refusals, REFUSAL_DNS, name, reason, fix[0] ? fix : NULL, 1);
}

static void log_query(struct dns_stub *s, const char *name, uint16_t qtype, bool allow, const char *reason,
                      const struct net_addr *answers, size_t n, const char *transport)
{
        allow ? s->allowed++ : s->denied++;
        if (!s->log)
                return;  /* (the audit stream holds network events to 100 lines a second) */
        char tbuf[8];
        json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "event", "dns", "decision", allow ? "allow" : "deny", "type",
                              dns_type_name(qtype, tbuf), "transport", transport);
        json_object_set_new(o, "name", name ? json_string(name) : json_null());
        json_object_set_new(o, "reason", json_string(reason));
        json_t *list = json_array();
        for (size_t i = 0; i < n; i++) {
                char text[INET6_ADDRSTRLEN];
                net_addr_format(&answers[i], text, sizeof text);
                json_array_append_new(list, json_string(text));
        }
        json_object_set_new(o, "answers", list);
        s->log(s->log_ctx, o);
}

size_t dns_stub_answer(struct dns_stub *s, const uint8_t *query, size_t len, uint8_t *out, size_t cap,
                       const char *transport)
{
        struct dns_question q;
        int r = dns_parse_query(query, len, &q);
        if (r == DNS_DROP)
                return 0;
        if (r < 0) {
                log_query(s, NULL, q.qtype, false, "malformed or unsupported query", NULL, 0, transport);
                return dns_build_reply(&q, -r, NULL, 0, 0, out, cap);
        }
        char host[EGRESS_HOST_MAX + 1];
        struct egress_verdict v = { .allow = false };
        struct net_addr answer;
        size_t n = 0;
        int rcode = DNS_RCODE_NOERROR;
        const struct secret *leak = intercept_in_name(s->intercept, q.name);
        if (leak) {
                /* a name that carries a placeholder out: refused, and logged
                 * by the secret's name, never as it was asked */
                char why[160], shown[SECRET_NAME_MAX + 3];
                snprintf(why, sizeof why, "exfiltration: the placeholder of secret %s in a DNS name",
                         leak->spec->name);
                snprintf(shown, sizeof shown, "{%s}", leak->spec->name);
                log_query(s, shown, q.qtype, false, why, NULL, 0, transport);
                refusals_add(s->refusals, REFUSAL_DNS, shown, why, NULL, 1);
                return dns_build_reply(&q, DNS_RCODE_NXDOMAIN, NULL, 0, 0, out, cap);
        }
        if (!egress_host_normalize(q.name, strlen(q.name), host)) {
                log_query(s, NULL, q.qtype, false, "not a valid host name", NULL, 0, transport);
                return dns_build_reply(&q, DNS_RCODE_NXDOMAIN, NULL, 0, 0, out, cap);
        }
        if (q.qclass != DNS_CLASS_IN) {
                log_query(s, host, q.qtype, false, "not an Internet-class query", NULL, 0, transport);
                note_refusal(s, host, "not an Internet-class query", false);
                return dns_build_reply(&q, DNS_RCODE_REFUSED, NULL, 0, 0, out, cap);
        }
        egress_judge_name(s->policy, host, &v);
        if (s->offline)
                snprintf(v.reason, sizeof v.reason, "network is off for this sandbox");
        if (!v.allow) {
                rcode = DNS_RCODE_NXDOMAIN;
        } else if (q.qtype == DNS_TYPE_A || (q.qtype == DNS_TYPE_AAAA && s->ipv6)) {
                int i = names_index(&s->names, host);
                if (i < 0) {
                        rcode = DNS_RCODE_SERVFAIL;
                        v.allow = false;
                        snprintf(v.reason, sizeof v.reason, "brig's address pool is full (%d names)", NAMES_MAX);
                } else {
                        names_addr(i, q.qtype == DNS_TYPE_A ? AF_INET : AF_INET6, &answer);
                        n = 1;
                }
        }
        /* other types of an allowed name (MX, TXT, HTTPS, ...): an empty
         * answer, so clients go on with A/AAAA */
        log_query(s, host, q.qtype, v.allow, v.reason, &answer, n, transport);
        if (!v.allow)
                note_refusal(s, host, v.reason, rcode == DNS_RCODE_NXDOMAIN);
        return dns_build_reply(&q, rcode, &answer, n, DNS_TTL, out, cap);
}
