/* fuzz_dns.c — libFuzzer target for the filtered mode's DNS stub
 * (src/lib/net/dnsmsg.c, dnsstub.c, names.c): a query as it arrives on
 * port 53 is parsed, answered into buffers of every awkward size, and
 * answered by the stub under a fixed policy; every reply must fit its
 * buffer and say what it contains. The stub of a sandbox with the
 * network off (every name refused) must never answer an address.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"
#include "core/refusals.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned be16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

/* A reply of n bytes in a buffer of cap: consistent with its counts. */
static void check_reply(const struct dns_question *q, const uint8_t *out, size_t n, size_t cap, bool parsed)
{
        if (n > cap)
                abort();
        if (n == 0) {
                if (cap >= 12)
                        abort();
                return;
        }
        if (n < 12 || be16(out) != q->id || !(be16(out + 2) & 0x8000))
                abort();
        unsigned qd = be16(out + 4), an = be16(out + 6);
        if (qd > 1 || (qd && !parsed) || be16(out + 8) || be16(out + 10))
                abort();
        size_t off = 12 + (qd ? q->question_len : 0);
        for (unsigned i = 0; i < an; i++) {
                if (off + 12 > n)
                        abort();
                unsigned type = be16(out + off + 2), rdlen = be16(out + off + 10);
                if (be16(out + off) != 0xc00c || (type == 1 ? rdlen != 4 : type == 28 ? rdlen != 16 : 1))
                        abort();
                off += 12 + rdlen;
        }
        if (off != n)
                abort();
}

static void log_event(void *ctx, json_t *event)
{
        (void)ctx;
        const char *e = json_string_value(json_object_get(event, "event"));
        const char *d = json_string_value(json_object_get(event, "decision"));
        if (!e || strcmp(e, "dns") != 0 || !d || (strcmp(d, "allow") != 0 && strcmp(d, "deny") != 0))
                abort();
        json_decref(event);
}

static struct dns_stub *stub(void)
{
        static struct dns_stub s;
        static bool made;
        if (!made) {
                struct egress_policy *ep = NULL;
                brig_error *err = NULL;
                if (egress_policy_allow_host(&ep, "*.example.test", &err) < 0 ||
                    egress_policy_allow_host(&ep, "secure.test", &err) < 0 ||
                    egress_policy_allow_host(&ep, "*.internal", &err) < 0 ||
                    egress_policy_deny_host(&ep, "bad.example.test", &err) < 0)
                        abort();
                s.policy = ep;
                s.ipv6 = true;
                s.log = log_event;
                made = true;
        }
        /* a bounded book: the fuzzer would otherwise fill the pool slowly */
        if (s.names.n > 4096)
                names_free(&s.names);
        return &s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        uint8_t *query = malloc(size ? size : 1);
        if (!query)
                return 0;
        memcpy(query, data, size);
        struct dns_question q;
        int r = dns_parse_query(query, size, &q);
        if (r != 0 && r != DNS_DROP && r != -DNS_RCODE_FORMERR && r != -DNS_RCODE_NOTIMP)
                abort();
        if (r == 0) {
                size_t n = strnlen(q.name, sizeof q.name);
                if (n > EGRESS_HOST_MAX || q.question != query + 12 || q.question_len < 5 ||
                    12 + q.question_len > size)
                        abort();
                if (n && (q.name[0] == '.' || q.name[n - 1] == '.' || strstr(q.name, "..")))
                        abort();
        }
        if (r != DNS_DROP) {
                struct net_addr addrs[3];
                names_addr(0, AF_INET, &addrs[0]);
                names_addr(1, AF_INET6, &addrs[1]);
                names_addr(NAMES_MAX - 1, AF_INET, &addrs[2]);
                size_t ql = r == 0 ? q.question_len : 0;
                const size_t caps[] = { 0, 11, 12, 12 + ql - (ql > 0), 12 + ql, 12 + ql + 15, 12 + ql + 16,
                                        12 + ql + 43, 12 + ql + 44, 512 };
                static uint8_t out[600];
                for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
                        for (size_t k = 0; k <= 3; k++) {
                                int rcode = r == 0 ? (k == 3 ? DNS_RCODE_NXDOMAIN : DNS_RCODE_NOERROR) : -r;
                                size_t n = dns_build_reply(&q, rcode, addrs, k, 60, out, caps[i]);
                                check_reply(&q, out, n, caps[i], r == 0);
                        }
                }
        }
        /* the stub: the whole path, as the supervisor runs it */
        struct dns_stub *s = stub();
        static uint8_t out[512];
        uint64_t before = s->allowed + s->denied;
        size_t n = dns_stub_answer(s, query, size, out, sizeof out, "udp");
        if (r == DNS_DROP ? n != 0 || s->allowed + s->denied != before : n < 12 || s->allowed + s->denied != before + 1)
                abort();
        if (n) {
                if (be16(out) != q.id || !(be16(out + 2) & 0x8000) || n > sizeof out)
                        abort();
                /* an address answered is one of the pool, for an allowed name */
                if (be16(out + 6)) {
                        if (r != 0 || (be16(out + 2) & 0xf) != DNS_RCODE_NOERROR)
                                abort();
                        check_reply(&q, out, n, sizeof out, true);
                        const uint8_t *ans = out + 12 + q.question_len;
                        struct net_addr a = { 0 };
                        if (be16(ans + 2) == 1) {
                                net_addr_from_v4(&a, ans + 12);
                        } else {
                                a.family = AF_INET6;
                                memcpy(a.b, ans + 12, 16);
                        }
                        const char *name = names_lookup(&s->names, &a);
                        char host[EGRESS_HOST_MAX + 1];
                        if (!name || !egress_host_normalize(q.name, strlen(q.name), host) || strcmp(name, host) != 0)
                                abort();
                        struct egress_verdict v;
                        egress_judge_name(s->policy, host, &v);
                        if (!v.allow)
                                abort();
                }
        }
        /* network off: the same bytes get no address, ever, and the
         * summary's collection of names stays bounded */
        static struct dns_stub off = { .offline = true };
        static struct refusals *seen;
        if (!seen && !(seen = refusals_new()))
                abort();
        off.refusals = seen;
        n = dns_stub_answer(&off, query, size, out, sizeof out, "udp");
        if (n && (n < 12 || be16(out + 6) != 0 || ((be16(out + 2) & 0xf) == DNS_RCODE_NOERROR && r == 0)))
                abort();
        static char text[2048];
        refusals_text(seen, 8, text, sizeof text);
        size_t len = strlen(text);
        if (len && text[len - 1] != '\n')  /* whole lines only */
                abort();
        free(query);
        return 0;
}

#include "replay.h"
