/* test_egress.c — unit tests for the egress proxy's pure logic: the address
 * classifier, host normalization and patterns, the policy parsers and
 * judgements, and the HTTP and SOCKS5 request parsers. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "net/net.h"

/* ---- classification ------------------------------------------------------- */

static void check_class(const char *text, enum addr_class want)
{
        struct net_addr a;
        if (!net_addr_parse_lenient(text, &a))
                fail_msg("'%s' did not parse", text);
        enum addr_class got = egress_classify(&a);
        if (got != want)
                fail_msg("'%s' classified %s, expected %s", text, addr_class_name(got), addr_class_name(want));
}

static void test_classify_v4(void **state)
{
        (void)state;
        check_class("127.0.0.1", ADDR_LOOPBACK);
        check_class("127.255.255.254", ADDR_LOOPBACK);
        check_class("0.0.0.0", ADDR_UNSPECIFIED);
        check_class("0.1.2.3", ADDR_THIS_NETWORK);
        check_class("10.0.0.1", ADDR_PRIVATE);
        check_class("172.16.0.1", ADDR_PRIVATE);
        check_class("172.31.255.255", ADDR_PRIVATE);
        check_class("172.32.0.1", ADDR_PUBLIC);
        check_class("192.168.1.1", ADDR_PRIVATE);
        check_class("100.64.0.1", ADDR_CGNAT);
        check_class("100.127.255.255", ADDR_CGNAT);
        check_class("100.128.0.1", ADDR_PUBLIC);
        check_class("169.254.169.254", ADDR_METADATA);
        check_class("100.100.100.200", ADDR_METADATA);  /* Alibaba Cloud, inside CGNAT */
        check_class("100.100.100.201", ADDR_CGNAT);
        check_class("168.63.129.16", ADDR_METADATA);    /* Azure's WireServer, a public address */
        check_class("169.254.1.1", ADDR_LINK_LOCAL);
        check_class("224.0.0.1", ADDR_MULTICAST);
        check_class("239.255.255.250", ADDR_MULTICAST);
        check_class("255.255.255.255", ADDR_BROADCAST);
        check_class("240.0.0.1", ADDR_RESERVED);
        check_class("192.0.2.1", ADDR_DOCUMENTATION);
        check_class("198.51.100.1", ADDR_DOCUMENTATION);
        check_class("203.0.113.9", ADDR_DOCUMENTATION);
        check_class("198.18.0.1", ADDR_BENCHMARKING);
        check_class("198.19.255.255", ADDR_BENCHMARKING);
        check_class("198.20.0.1", ADDR_PUBLIC);
        check_class("8.8.8.8", ADDR_PUBLIC);
        check_class("1.1.1.1", ADDR_PUBLIC);
}

static void test_classify_legacy_v4_spellings(void **state)
{
        (void)state;
        check_class("0x7f000001", ADDR_LOOPBACK);
        check_class("2130706433", ADDR_LOOPBACK);
        check_class("127.1", ADDR_LOOPBACK);
        check_class("0177.0.0.1", ADDR_LOOPBACK);
        check_class("0xa9.0xfe.0xa9.0xfe", ADDR_METADATA);
        check_class("127.0.0.1.", ADDR_LOOPBACK);
}

static void test_classify_v6(void **state)
{
        (void)state;
        check_class("::1", ADDR_LOOPBACK);
        check_class("::", ADDR_UNSPECIFIED);
        check_class("fe80::1", ADDR_LINK_LOCAL);
        check_class("febf::1", ADDR_LINK_LOCAL);
        check_class("fc00::1", ADDR_ULA);
        check_class("fd12:3456::1", ADDR_ULA);
        check_class("fd00:ec2::254", ADDR_METADATA);
        check_class("fd00:ec2::23", ADDR_METADATA);       /* EKS pod identity credentials */
        check_class("fd20:ce::254", ADDR_METADATA);       /* Google */
        check_class("fd00:c1::a9fe:a9fe", ADDR_METADATA); /* Oracle */
        check_class("fd00:ec3::254", ADDR_ULA);
        check_class("ff02::1", ADDR_MULTICAST);
        check_class("2001:db8::1", ADDR_DOCUMENTATION);
        check_class("2001:4860:4860::8888", ADDR_PUBLIC);
        check_class("2606:4700::1111", ADDR_PUBLIC);
        check_class("100::1", ADDR_RESERVED);
        check_class("[::1]", ADDR_LOOPBACK);
}

static void test_classify_embedded_v4(void **state)
{
        (void)state;
        check_class("::ffff:127.0.0.1", ADDR_LOOPBACK);
        check_class("::ffff:7f00:1", ADDR_LOOPBACK);
        check_class("::ffff:169.254.169.254", ADDR_METADATA);
        check_class("::ffff:100.100.100.200", ADDR_METADATA);
        check_class("64:ff9b::100.100.100.200", ADDR_METADATA);
        check_class("::ffff:8.8.8.8", ADDR_PUBLIC);
        check_class("64:ff9b::10.0.0.1", ADDR_PRIVATE);
        check_class("64:ff9b::8.8.8.8", ADDR_PUBLIC);
        check_class("2002:7f00:1::", ADDR_LOOPBACK);       /* 6to4 of 127.0.0.1 */
        check_class("2002:a9fe:a9fe::1", ADDR_METADATA);
        check_class("::127.0.0.1", ADDR_LOOPBACK);         /* IPv4-compatible */
        check_class("::10.1.2.3", ADDR_PRIVATE);
        check_class("::ffff:0:10.0.0.1", ADDR_PRIVATE);    /* SIIT */
}

/* ---- names and patterns ---------------------------------------------------- */

static void test_normalize(void **state)
{
        (void)state;
        char out[EGRESS_HOST_MAX + 1];
        assert_true(egress_host_normalize("PyPI.Org.", 9, out));
        assert_string_equal(out, "pypi.org");
        assert_true(egress_host_normalize("a_b-c.example", 13, out));
        assert_false(egress_host_normalize("", 0, out));
        assert_false(egress_host_normalize(".", 1, out));
        assert_false(egress_host_normalize("a..b", 4, out));
        assert_false(egress_host_normalize("a b", 3, out));
        assert_false(egress_host_normalize("a\nb", 3, out));
        assert_false(egress_host_normalize("x.999", 5, out));  /* numeric last label */
        char long_label[80];
        memset(long_label, 'a', 64);
        assert_false(egress_host_normalize(long_label, 64, out));
}

static void test_patterns(void **state)
{
        (void)state;
        assert_true(egress_pattern_match("pypi.org", "pypi.org"));
        assert_false(egress_pattern_match("pypi.org", "evilpypi.org"));
        assert_false(egress_pattern_match("pypi.org", "x.pypi.org"));
        assert_true(egress_pattern_match("*.example.org", "files.example.org"));
        assert_true(egress_pattern_match("*.example.org", "a.b.example.org"));
        assert_false(egress_pattern_match("*.example.org", "example.org"));
        assert_false(egress_pattern_match("*.example.org", "badexample.org"));
}

/* ---- policy ------------------------------------------------------------------ */

static void expect_bad(int (*add)(struct egress_policy **, const char *, brig_error **), const char *text)
{
        struct egress_policy *ep = NULL;
        brig_error *err = NULL;
        int r = add(&ep, text, &err);
        if (r >= 0)
                fail_msg("'%s' was accepted", text);
        assert_non_null(err);
        /* named, except a URL's credentials, which never appear in messages */
        const char *at = strchr(text, '@');
        const char *named = at && strncmp(text, "http://", 7) == 0 ? at + 1 : text;
        if (!strstr(err->msg, named))
                fail_msg("error for '%s' does not name it: %s", text, err->msg);
        if (at && strncmp(text, "http://", 7) == 0 && strstr(err->msg, text))
                fail_msg("error for '%s' shows the credentials: %s", text, err->msg);
        brig_error_free(&err);
        egress_policy_free(ep);
}

static void test_policy_parse_errors(void **state)
{
        (void)state;
        expect_bad(egress_policy_allow_host, "*");
        expect_bad(egress_policy_allow_host, "a.*.org");
        expect_bad(egress_policy_allow_host, "bad host");
        expect_bad(egress_policy_allow_host, "example.org:0");
        expect_bad(egress_policy_allow_host, "example.org:99999");
        expect_bad(egress_policy_allow_host, "example.org:http");
        expect_bad(egress_policy_deny_host, "");
        expect_bad(egress_policy_allow_cidr, "10.0.0.0/33");
        expect_bad(egress_policy_allow_cidr, "10.1.0.0/8");
        expect_bad(egress_policy_allow_cidr, "banana/8");
        expect_bad(egress_policy_allow_cidr, "10.0.0.0/8:0");
        expect_bad(egress_policy_allow_cidr, "fd00::/129");
        expect_bad(egress_policy_allow_cidr, "10.0.0.0/");
        expect_bad(egress_policy_add_resolve, "nohost");
        expect_bad(egress_policy_add_resolve, "host.example:not-an-ip");
}

static void expect_upstream(const char *url, const char *shown)
{
        struct egress_policy *ep = NULL;
        brig_error *err = NULL;
        if (egress_policy_set_upstream(&ep, url, &err) < 0)
                fail_msg("'%s' refused: %s", url, err->msg);
        json_t *j = egress_policy_json(ep);
        assert_string_equal(json_string_value(json_object_get(j, "upstream_proxy")), shown);
        json_decref(j);
        egress_policy_free(ep);
}

static void test_upstream_url(void **state)
{
        (void)state;
        expect_upstream("http://proxy.example:3128", "http://proxy.example:3128");
        expect_upstream("HTTP://Proxy.Example.:8080/", "http://proxy.example:8080");
        expect_upstream("http://192.0.2.1:3128", "http://192.0.2.1:3128");
        expect_upstream("http://[2001:db8::1]:3128", "http://[2001:db8::1]:3128");
        expect_upstream("http://127.0.0.1:1", "http://127.0.0.1:1");  /* not classified: named explicitly */
        static const char *const bad[] = {
                "", "ftp://x:1", "https://x:1", "x:1", "http://user@x:1", "http://u:p@x:1", "http://x",
                "http://:80", "http://x:0", "http://x:65536", "http://x:1/path", "http://2001:db8::1:80",
                "http://[x]:1", "http://[192.0.2.1]:1", "http://bad host:1", "http://x:1?q", "http://[::1]",
                "http://x:", "http://x:1x",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                expect_bad(egress_policy_set_upstream, bad[i]);
        struct egress_policy *ep = NULL;
        json_t *j = egress_policy_json(ep);
        assert_null(json_object_get(j, "upstream_proxy"));  /* unset: not shown */
        json_decref(j);
}

struct fixture {
        struct egress_policy *ep;
};

static struct egress_policy *policy(const char *const *allow, const char *const *deny, const char *const *cidr)
{
        struct egress_policy *ep = NULL;
        brig_error *err = NULL;
        for (; allow && *allow; allow++)
                assert_int_equal(egress_policy_allow_host(&ep, *allow, &err), 0);
        for (; deny && *deny; deny++)
                assert_int_equal(egress_policy_deny_host(&ep, *deny, &err), 0);
        for (; cidr && *cidr; cidr++)
                if (egress_policy_allow_cidr(&ep, *cidr, &err) < 0)
                        fail_msg("cidr %s: %s", *cidr, err->msg);
        return ep;
}

static bool host_ok(const struct egress_policy *ep, const char *host, uint16_t port)
{
        struct egress_verdict v;
        egress_judge_host(ep, host, port, &v);
        return v.allow;
}

static bool addr_ok(const struct egress_policy *ep, const char *text, uint16_t port, bool named)
{
        struct net_addr a;
        assert_true(net_addr_parse_lenient(text, &a));
        struct egress_verdict v;
        egress_judge_addr(ep, &a, port, named ? "named.example" : NULL, false, &v);
        return v.allow;
}

/* The name judged first (as egress.c does), then the address with the
 * name's verdict. */
static bool private_ok(const struct egress_policy *ep, const char *host, const char *text, uint16_t port, char *why)
{
        struct egress_verdict hv, v;
        egress_judge_host(ep, host, port, &hv);
        if (!hv.allow) {
                snprintf(why, 512, "%s", hv.reason);
                return false;
        }
        struct net_addr a;
        assert_true(net_addr_parse_lenient(text, &a));
        egress_judge_addr(ep, &a, port, host, hv.private_ok, &v);
        snprintf(why, 512, "%s", v.reason);
        return v.allow;
}

static void test_judge_private_hosts(void **state)
{
        (void)state;
        struct egress_policy *ep = NULL;
        brig_error *err = NULL;
        assert_int_equal(egress_policy_allow_private_host(&ep, "db.internal:5432", &err), 0);
        assert_int_equal(egress_policy_allow_private_host(&ep, "*.corp.example", &err), 0);
        assert_int_equal(egress_policy_allow_host(&ep, "pub.example", &err), 0);
        assert_int_equal(egress_policy_allow_private_host(&ep, "metadata.google.internal", &err), 0);
        char why[512];
        assert_true(private_ok(ep, "db.internal", "10.1.2.3", 5432, why));
        assert_non_null(strstr(why, "allowed for db.internal by --allow-private-host"));
        assert_true(private_ok(ep, "db.internal", "192.168.7.7", 5432, why));
        assert_true(private_ok(ep, "db.internal", "fd12:3456::1", 5432, why));
        assert_true(private_ok(ep, "db.internal", "100.100.1.1", 5432, why));   /* CGNAT: tailnets */
        assert_true(private_ok(ep, "db.internal", "8.8.8.8", 5432, why));       /* public stays public */
        assert_false(private_ok(ep, "db.internal", "10.1.2.3", 5433, why));     /* the rule's port only */
        /* what no flag opens to a name */
        const char *never[] = { "127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "169.254.170.2",
                                "100.100.100.200", "::ffff:100.100.100.200", "fd20:ce::254", "fd00:ec2::23",
                                "fd00:c1::a9fe:a9fe",
                                "fe80::1", "0.0.0.0", "::ffff:127.0.0.1", "198.18.0.1", NULL };
        for (const char **a = never; *a; a++)
                if (private_ok(ep, "db.internal", *a, 5432, why))
                        fail_msg("%s allowed for a private host: %s", *a, why);
        assert_false(private_ok(ep, "metadata.google.internal", "169.254.169.254", 80, why));
        /* the wildcard's names, not its parent */
        assert_true(private_ok(ep, "git.corp.example", "10.9.9.9", 443, why));
        assert_false(private_ok(ep, "corp.example", "10.9.9.9", 443, why));
        /* a plain rule: refused (egress.c's refusal names the flag) */
        assert_false(private_ok(ep, "pub.example", "10.1.2.3", 443, why));
        assert_string_equal(why, "address 10.1.2.3 is private");
        /* a literal private address is never a private host's */
        struct net_addr a;
        struct egress_verdict v;
        assert_true(net_addr_parse("10.1.2.3", &a));
        egress_judge_addr(ep, &a, 5432, NULL, true, &v);
        assert_false(v.allow);
        /* the policy's JSON keeps the two kinds apart */
        json_t *j = egress_policy_json(ep);
        assert_int_equal(json_array_size(json_object_get(j, "allow_private_hosts")), 3);
        assert_int_equal(json_array_size(json_object_get(j, "allow_hosts")), 1);
        json_decref(j);
        egress_policy_free(ep);
}

static void test_judge_hosts(void **state)
{
        (void)state;
        const char *allow[] = { "pypi.org", "*.pythonhosted.example", "git.example:8443", "METADATA.GOOGLE.INTERNAL",
                                "*.internal", NULL };
        const char *deny[] = { "bad.pythonhosted.example", "pypi.org:80", NULL };
        struct egress_policy *ep = policy(allow, deny, NULL);
        assert_true(host_ok(ep, "pypi.org", 443));
        assert_false(host_ok(ep, "pypi.org", 80));            /* deny with a port: that port */
        assert_false(host_ok(ep, "pypi.org", 8080));          /* default ports only */
        assert_true(host_ok(ep, "files.pythonhosted.example", 443));
        assert_false(host_ok(ep, "pythonhosted.example", 443));
        assert_false(host_ok(ep, "bad.pythonhosted.example", 443));   /* deny wins */
        assert_true(host_ok(ep, "git.example", 8443));
        assert_false(host_ok(ep, "git.example", 443));
        assert_true(host_ok(ep, "metadata.google.internal", 80));     /* named exactly */
        assert_false(host_ok(NULL, "metadata.google.internal", 80));
        egress_policy_free(ep);
        /* a suffix rule that covers a metadata name is not consent */
        const char *allow2[] = { "*.google.internal", NULL };
        ep = policy(allow2, NULL, NULL);
        assert_true(host_ok(ep, "other.google.internal", 443));
        assert_false(host_ok(ep, "metadata.google.internal", 80));
        egress_policy_free(ep);
}

static void test_judge_addresses(void **state)
{
        (void)state;
        const char *allow[] = { "192.0.2.7", NULL };
        const char *cidr[] = { "127.0.0.1/32", "10.0.0.0/8:5432", "fd00::/8", "[fd00:ec2::254]:80", NULL };
        struct egress_policy *ep = policy(allow, NULL, cidr);
        assert_true(addr_ok(ep, "8.8.8.8", 443, true));          /* a public answer for an allowed name */
        assert_false(addr_ok(ep, "8.8.8.8", 443, false));        /* a public literal needs a rule */
        assert_true(addr_ok(ep, "127.0.0.1", 9999, true));
        assert_false(addr_ok(ep, "127.0.0.2", 80, true));
        assert_false(addr_ok(ep, "::ffff:127.0.0.2", 80, true));
        assert_true(addr_ok(ep, "::ffff:127.0.0.1", 80, true));  /* same address, mapped */
        assert_true(addr_ok(ep, "10.2.3.4", 5432, false));
        assert_false(addr_ok(ep, "10.2.3.4", 5433, false));
        assert_true(addr_ok(ep, "fd12::1", 22, false));
        assert_false(addr_ok(ep, "169.254.169.254", 80, true));
        assert_false(addr_ok(ep, "0x7f000002", 80, false));
        egress_policy_free(ep);
        ep = policy(NULL, NULL, NULL);
        assert_false(addr_ok(ep, "192.168.1.1", 80, true));
        assert_false(addr_ok(NULL, "::1", 80, true));
        egress_policy_free(ep);
}

static void test_resolve_and_json(void **state)
{
        (void)state;
        struct egress_policy *ep = NULL;
        brig_error *err = NULL;
        assert_int_equal(egress_policy_add_resolve(&ep, "Test.Example:127.0.0.1", &err), 0);
        assert_int_equal(egress_policy_add_resolve(&ep, "test.example:::1", &err), 0);
        assert_int_equal(egress_policy_add_resolve(&ep, "test.example:[2001:db8::1]", &err), 0);
        struct net_addr out[4];
        assert_int_equal(egress_policy_resolve(ep, "test.example", out, 4), 3);
        assert_int_equal(egress_policy_resolve(ep, "other.example", out, 4), 0);
        assert_false(egress_policy_has_allows(ep));
        assert_int_equal(egress_policy_allow_cidr(&ep, "[fd00::]/8:443", &err), 0);
        assert_true(egress_policy_has_allows(ep));
        json_t *j = egress_policy_json(ep);
        char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        assert_non_null(strstr(s, "\"[fd00::]/8:443\""));
        assert_non_null(strstr(s, "\"test.example:127.0.0.1\""));
        free(s);
        json_decref(j);
        egress_policy_free(ep);
}

/* ---- HTTP parser --------------------------------------------------------------- */

static int parse(const char *text, struct http_request *req)
{
        const char *why;
        return http_parse_request(text, strlen(text), req, &why);
}

static void test_http_connect(void **state)
{
        (void)state;
        struct http_request r;
        assert_int_equal(parse("CONNECT Example.org:443 HTTP/1.1\r\nHost: x\r\n\r\n", &r), 1);
        assert_int_equal(r.kind, HTTP_CONNECT);
        assert_string_equal(r.host, "Example.org");
        assert_int_equal(r.port, 443);
        assert_int_equal(parse("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n", &r), 1);
        assert_string_equal(r.host, "::1");
        assert_int_equal(r.port, 8080);
        assert_int_equal(parse("CONNECT example.org HTTP/1.1\r\n\r\n", &r), -400);   /* port required */
        assert_int_equal(parse("CONNECT example.org:0 HTTP/1.1\r\n\r\n", &r), -400);
        assert_int_equal(parse("CONNECT example.org:443 HTTP/1.1\r\n", &r), 0);      /* incomplete */
        assert_int_equal(parse("CONNECT example.org:443 HTTP/2.0\r\n\r\n", &r), -505);
}

static void test_http_forward(void **state)
{
        (void)state;
        struct http_request r;
        const char *req = "GET http://test.example:8080/a/b?c=d HTTP/1.1\r\nHost: spoofed.example\r\n"
                          "Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\nBODY";
        assert_int_equal(parse(req, &r), 1);
        assert_int_equal(r.kind, HTTP_FORWARD);
        assert_string_equal(r.host, "test.example");
        assert_int_equal(r.port, 8080);
        assert_int_equal(r.head_len, strlen(req) - 4);
        size_t len;
        char *out = http_rewrite_request(req, &r, &len);
        assert_non_null(out);
        const char *want = "GET /a/b?c=d HTTP/1.1\r\nHost: test.example:8080\r\nAccept: */*\r\n"
                           "Connection: close\r\n\r\n";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        free(out);
        assert_int_equal(parse("GET http://h.example HTTP/1.0\n\n", &r), 1);  /* bare LF, no path */
        assert_int_equal(r.port, 80);
        out = http_rewrite_request("GET http://h.example HTTP/1.0\n\n", &r, &len);
        assert_non_null(strstr(out, "GET / HTTP/1.0\r\nHost: h.example\r\n"));
        free(out);
}

static int parse_resp(const char *text, struct http_response *resp)
{
        const char *why;
        return http_parse_response(text, strlen(text), resp, &why);
}

static void test_http_request_framing(void **state)
{
        (void)state;
        struct http_request r;
        assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\n\r\n", &r), 1);
        assert_true(r.keep_alive);
        assert_false(r.has_te);
        assert_int_equal(r.length, 0);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\nConnection: foo, Close\r\n\r\n", &r), 1);
        assert_false(r.keep_alive);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.0\r\n\r\n", &r), 1);
        assert_false(r.keep_alive);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.0\r\nProxy-Connection: Keep-Alive\r\n\r\n", &r), 1);
        assert_true(r.keep_alive);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n", &r), 1);
        assert_int_equal(r.length, 12);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &r), 1);
        assert_true(r.has_te);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &r), -400);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", &r), -400);
}

static void test_http_response_head(void **state)
{
        (void)state;
        struct http_response h;
        const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\nX-A: b\r\n\r\nhello";
        assert_int_equal(parse_resp(resp, &h), 1);
        assert_int_equal(h.status, 200);
        assert_int_equal(h.minor, 1);
        assert_true(h.has_length);
        assert_int_equal(h.length, 5);
        assert_int_equal(h.head_len, strlen(resp) - 5);
        size_t len;
        char *out = http_rewrite_response(resp, &h, true, &len);
        const char *want = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\nConnection: keep-alive\r\n\r\n";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        free(out);
        out = http_rewrite_response(resp, &h, false, &len);
        assert_non_null(strstr(out, "Connection: close\r\n\r\n"));
        free(out);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h), 1);
        assert_true(h.chunked);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", &h), 1);
        assert_true(h.has_te);
        assert_false(h.chunked);     /* close-delimited */
        assert_int_equal(parse_resp("HTTP/1.0 204\n\n", &h), 1);
        assert_int_equal(h.status, 204);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", &h), 0);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", &h),
                         -502);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &h), -502);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &h), 1);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", &h), -502);
        assert_int_equal(parse_resp("HTTP/2 200\r\n\r\n", &h), -502);
        assert_int_equal(parse_resp("HTTP/1.1 20 OK\r\n\r\n", &h), -502);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\n folded\r\n\r\n", &h), -502);
        char *big = malloc(HTTP_HEAD_MAX + 10);
        memset(big, 'a', HTTP_HEAD_MAX + 10);
        memcpy(big, "HTTP/1.1 200 OK\r\nX: ", 21);
        const char *why;
        assert_int_equal(http_parse_response(big, HTTP_HEAD_MAX + 10, &h, &why), -502);
        free(big);
        /* coded: what hides a value from the interceptor's search */
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n", &h), 1);
        assert_false(h.coded);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nContent-Encoding: GZip\r\nContent-Length: 1\r\n\r\n", &h), 1);
        assert_true(h.coded);
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h), 1);
        assert_true(h.coded && h.chunked);
}

static void test_http_chunks(void **state)
{
        (void)state;
        const char *body = "5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nTrailer: x\r\n\r\nNEXT";
        struct http_chunk ch = { 0 };
        assert_int_equal(http_chunk_feed(&ch, body, strlen(body)), strlen(body) - 4);
        assert_true(ch.done);
        /* byte at a time gives the same answer */
        memset(&ch, 0, sizeof ch);
        size_t used = 0;
        for (size_t i = 0; i < strlen(body); i++)
                used += (size_t)http_chunk_feed(&ch, body + i, 1);
        assert_int_equal(used, strlen(body) - 4);
        assert_true(ch.done);
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "0\n\n", 3), 3);
        assert_true(ch.done);
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "5\r\nhel", 6), 6);
        assert_false(ch.done);
        assert_int_equal(http_chunk_data_left(&ch), 2);  /* "lo" of the chunk still to come */
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "zz\r\n", 4), -1);
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "\r\n", 2), -1);            /* no size */
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "1\r\nabc", 6), -1);        /* data longer than the size */
        memset(&ch, 0, sizeof ch);
        assert_int_equal(http_chunk_feed(&ch, "fffffffffffffffff\r\n", 19), -1);  /* overflow */
}

static void test_http_refusals(void **state)
{
        (void)state;
        struct http_request r;
        assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n", &r), -400);                 /* not a proxy request */
        assert_int_equal(parse("GET https://a.example/ HTTP/1.1\r\n\r\n", &r), -400);
        assert_int_equal(parse("GET http://ok.example@evil.example/ HTTP/1.1\r\n\r\n", &r), -400);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\n folded\r\n\r\n", &r), -400);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n", &r), -400);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\nbad header\r\n\r\n", &r), -400);
        assert_int_equal(parse("\x16\x03\x01 junk\r\n\r\n", &r), -400);
        char *big = malloc(HTTP_HEAD_MAX + 10);
        memset(big, 'a', HTTP_HEAD_MAX + 10);
        const char *why;
        assert_int_equal(http_parse_request(big, HTTP_HEAD_MAX + 10, &r, &why), -431);
        free(big);
}

/* RFC 9112 violations that would let the upstream frame or read a request
 * differently from brig: all 400. */
static void test_http_rfc9112_refusals(void **state)
{
        (void)state;
        struct http_request r;
        static const char *const bad[] = {
                "GET http://a.example/ HTTP/1.1\r\nX-A: one\rX-B: two\r\n\r\n",      /* bare CR in a value */
                "GET http://a.example/ HTTP/1.1\rHost: b.example\r\n\r\n",            /* bare CR ending a line */
                "GET http://a.example/ HTTP/1.1\r\nX-A: a\x01" "b\r\n\r\n",            /* control character */
                "GET http://a.example/ HTTP/1.1\r\nX-A: a\x7f" "b\r\n\r\n",
                "GET http://a.example/\x0b HTTP/1.1\r\n\r\n",                          /* ... in the request line */
                "GET http://a.example/ HTTP/1.1\r\nX-A: a\r\n\tfolded\r\n\r\n",     /* obs-fold */
                "POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
                "POST http://a.example/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
                "GET http://a.example/ HTTP/1.1\r\nHost : a.example\r\n\r\n",          /* space before the colon */
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                int got = parse(bad[i], &r);
                if (got != -400)
                        fail_msg("request %zu: %d, expected -400", i, got);
        }
        /* NUL is caught even though strlen() would stop at it */
        const char nul[] = "GET http://a.example/ HTTP/1.1\r\nX-A: a\0b\r\n\r\n";
        const char *why;
        assert_int_equal(http_parse_request(nul, sizeof nul - 1, &r, &why), -400);
        /* the lawful spellings still pass */
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", &r), 1);
        assert_true(r.has_te);
        assert_int_equal(parse("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n"
                               "Transfer-Encoding: ,chunked\r\n\r\n", &r), 1);
        assert_int_equal(parse("GET http://a.example/ HTTP/1.1\r\nX-A: tab\there \xc3\xa9\r\n\r\n", &r), 1);
        /* a response with a bare CR is the upstream's fault: 502 */
        struct http_response h;
        assert_int_equal(parse_resp("HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", &h), -502);
}

static int parse_direct(const char *text, struct http_request *req)
{
        const char *why;
        return http_parse_direct(text, strlen(text), req, &why);
}

/* Filtered mode: a request sent straight to a server. */
static void test_http_direct(void **state)
{
        (void)state;
        struct http_request r;
        const char *req = "GET /a?b HTTP/1.1\r\nHost: Named.Example:8080\r\nConnection: keep-alive\r\n\r\n";
        assert_int_equal(parse_direct(req, &r), 1);
        assert_int_equal(r.kind, HTTP_ORIGIN);
        assert_string_equal(r.host, "Named.Example");
        assert_int_equal(r.port, 8080);
        assert_true(r.keep_alive);
        size_t len;
        char *out = http_rewrite_request(req, &r, &len);
        const char *want = "GET /a?b HTTP/1.1\r\nHost: Named.Example:8080\r\nConnection: close\r\n\r\n";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        free(out);
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\nHost: n.example\r\n\r\n", &r), 1);
        assert_int_equal(r.port, 0);                   /* the connection's own port */
        assert_int_equal(parse_direct("OPTIONS * HTTP/1.1\r\nHost: n.example\r\n\r\n", &r), 1);
        assert_int_equal(parse_direct("GET / HTTP/1.0\r\n\r\n", &r), 1);  /* 1.0: no Host, no name */
        assert_string_equal(r.host, "");
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\nHost:\r\n\r\n", &r), 1);
        assert_string_equal(r.host, "");
        assert_int_equal(parse_direct("GET http://abs.example/x HTTP/1.1\r\nHost: other.example\r\n\r\n", &r), 1);
        assert_string_equal(r.host, "abs.example");   /* absolute-form wins over Host (RFC 9112 3.2.2) */
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\n\r\n", &r), -400);                     /* no Host */
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", &r),
                         -400);
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\nHost: a.example\rHost: b.example\r\n\r\n", &r), -400);
        assert_int_equal(parse_direct("GET / HTTP/1.1\r\nHost: u@a.example\r\n\r\n", &r), -400);
        assert_int_equal(parse_direct("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", &r), -405);
        assert_int_equal(parse_direct("GET a.example HTTP/1.1\r\nHost: a.example\r\n\r\n", &r), -400);
        /* empty lines before the request line are skipped, and dropped */
        const char *crlf = "\r\n\nGET /e HTTP/1.1\r\nHost: e.example\r\nX: y\r\n\r\n";
        assert_int_equal(parse_direct(crlf, &r), 1);
        assert_string_equal(r.host, "e.example");
        assert_int_equal(r.head_len, strlen(crlf));
        out = http_rewrite_request(crlf, &r, &len);
        want = "GET /e HTTP/1.1\r\nHost: e.example\r\nX: y\r\nConnection: close\r\n\r\n";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        free(out);
        assert_int_equal(parse_direct("\r\r\nGET / HTTP/1.1\r\nHost: e.example\r\n\r\n", &r), -400);
        /* a WebSocket handshake keeps its Upgrade, sent straight to a server */
        const char *wsreq = "GET /ws HTTP/1.1\r\nHost: w.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
        assert_int_equal(parse_direct(wsreq, &r), 1);
        assert_true(r.upgrade);
        out = http_rewrite_request(wsreq, &r, &len);
        want = "GET /ws HTTP/1.1\r\nHost: w.example\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        free(out);
        assert_int_equal(parse("GET http://w.example/ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                               &r), 1);
        assert_false(r.upgrade);     /* through the proxy: dropped, as before */
        assert_int_equal(parse_direct("GET /ws HTTP/1.1\r\nHost: w.example\r\nUpgrade: websocket\r\n\r\n", &r), 1);
        assert_false(r.upgrade);     /* no "Connection: upgrade": no upgrade */
        /* the proxy parser still wants an absolute URL */
        assert_int_equal(parse("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n", &r), -400);
}

/* Request bodies: strict chunk lines, so brig and the upstream agree where
 * the body ends (and the next request starts). */
static void test_http_chunks_strict(void **state)
{
        (void)state;
        const char *body = "5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nTrailer: x\r\n\r\nGET ";
        struct http_chunk ch = { .strict = true };
        assert_int_equal(http_chunk_feed(&ch, body, strlen(body)), strlen(body) - 4);
        assert_true(ch.done);
        memset(&ch, 0, sizeof ch);
        ch.strict = true;
        size_t used = 0;
        for (size_t i = 0; i < strlen(body); i++)
                used += (size_t)http_chunk_feed(&ch, body + i, 1);
        assert_int_equal(used, strlen(body) - 4);
        static const char *const bad[] = { "5\nhello\r\n0\r\n\r\n", "5\r\nhello\n0\r\n\r\n", "0\n\n",
                                           "0\r\n\n", "0\r\nX: a\n\r\n", "1;a\rb\r\nx\r\n0\r\n\r\n",
                                           "1;a\x01\r\nx\r\n0\r\n\r\n", "0\r\nX: a\rb\r\n\r\n",
                                           " 1\r\nx\r\n0\r\n\r\n", "0x1\r\nx\r\n0\r\n\r\n",
                                           "-1\r\n", "fffffffffffffffff\r\n" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                memset(&ch, 0, sizeof ch);
                ch.strict = true;
                if (http_chunk_feed(&ch, bad[i], strlen(bad[i])) != -1)
                        fail_msg("chunked body %zu accepted", i);
        }
}

/* ---- SOCKS5 parser ------------------------------------------------------------- */

static void test_socks(void **state)
{
        (void)state;
        bool no_auth;
        assert_int_equal(socks5_parse_greeting((const uint8_t *)"\x05\x01\x00", 3, &no_auth), 3);
        assert_true(no_auth);
        assert_int_equal(socks5_parse_greeting((const uint8_t *)"\x05\x01\x02", 3, &no_auth), 3);
        assert_false(no_auth);
        assert_int_equal(socks5_parse_greeting((const uint8_t *)"\x05\x02\x00", 3, &no_auth), 0);
        assert_int_equal(socks5_parse_greeting((const uint8_t *)"\x04\x01", 2, &no_auth), -1);

        struct socks5_request r;
        const uint8_t v4[] = { 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90 };
        assert_int_equal(socks5_parse_request(v4, sizeof v4, &r), 10);
        assert_false(r.is_name);
        assert_int_equal(r.port, 8080);
        assert_int_equal(egress_classify(&r.addr), ADDR_LOOPBACK);
        assert_int_equal(socks5_parse_request(v4, 9, &r), 0);
        const uint8_t name[] = { 5, 1, 0, 3, 12, 't', 'e', 's', 't', '.', 'e', 'x', 'a', 'm', 'p', 'l', 'e', 0, 80 };
        assert_int_equal(socks5_parse_request(name, sizeof name, &r), (int)sizeof name);
        assert_true(r.is_name);
        assert_string_equal(r.host, "test.example");
        const uint8_t v6[22] = { 5, 1, 0, 4, [19] = 1, [20] = 0, [21] = 80 };
        assert_int_equal(socks5_parse_request(v6, sizeof v6, &r), 22);
        assert_int_equal(egress_classify(&r.addr), ADDR_LOOPBACK);
        const uint8_t udp[] = { 5, 3, 0, 1, 0, 0, 0, 0, 0, 0 };
        assert_int_equal(socks5_parse_request(udp, sizeof udp, &r), 10);
        assert_int_equal(r.cmd, 3);
        const uint8_t badcmd[] = { 5, 9, 0, 1, 0, 0, 0, 0, 0, 0 };
        assert_int_equal(socks5_parse_request(badcmd, sizeof badcmd, &r), -SOCKS_CMD_UNSUPPORTED);
        const uint8_t badatyp[] = { 5, 1, 0, 7, 0, 0, 0, 0, 0, 0 };
        assert_int_equal(socks5_parse_request(badatyp, sizeof badatyp, &r), -SOCKS_ATYP_UNSUPPORTED);
        uint8_t reply[10];
        socks5_reply(reply, SOCKS_NOT_ALLOWED);
        assert_int_equal(reply[0], 5);
        assert_int_equal(reply[1], 2);
}

static void test_socks4(void **state)
{
        (void)state;
        struct socks5_request r;
        const uint8_t v4[] = { 4, 1, 0x1f, 0x90, 127, 0, 0, 1, 'u', 0 };
        assert_int_equal(socks4_parse_request(v4, sizeof v4, &r), (int)sizeof v4);
        assert_false(r.is_name);
        assert_int_equal(r.cmd, 1);
        assert_int_equal(r.port, 8080);
        assert_int_equal(egress_classify(&r.addr), ADDR_LOOPBACK);
        assert_int_equal(socks4_parse_request(v4, sizeof v4 - 1, &r), 0);     /* the user id's NUL still to come */
        const uint8_t name[] = { 4, 1, 0, 80, 0, 0, 0, 9, 0, 'w', 'e', 'b', '.', 't', 'e', 's', 't', 0 };
        assert_int_equal(socks4_parse_request(name, sizeof name, &r), (int)sizeof name);
        assert_true(r.is_name);
        assert_string_equal(r.host, "web.test");
        assert_int_equal(socks4_parse_request(name, 9, &r), 0);                /* 4a: the name still to come */
        const uint8_t empty[] = { 4, 1, 0, 80, 0, 0, 0, 1, 0, 0 };
        assert_int_equal(socks4_parse_request(empty, sizeof empty, &r), -1);
        const uint8_t bind[] = { 4, 2, 0, 80, 10, 0, 0, 1, 0 };
        assert_int_equal(socks4_parse_request(bind, sizeof bind, &r), (int)sizeof bind);
        assert_int_equal(r.cmd, 2);
        assert_int_equal(socks4_parse_request((const uint8_t *)"\x05\x01\x00", 3, &r), -1);
        uint8_t id[8 + 300];
        memcpy(id, v4, 8);
        memset(id + 8, 'a', sizeof id - 8);                                    /* a user id without end */
        assert_int_equal(socks4_parse_request(id, sizeof id, &r), -1);
        assert_int_equal(socks4_parse_request(id, 8 + 255, &r), 0);
        uint8_t reply[8];
        socks4_reply(reply, true);
        assert_int_equal(reply[0], 0);
        assert_int_equal(reply[1], 0x5a);
        socks4_reply(reply, false);
        assert_int_equal(reply[1], 0x5b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_classify_v4),
                cmocka_unit_test(test_classify_legacy_v4_spellings),
                cmocka_unit_test(test_classify_v6),
                cmocka_unit_test(test_classify_embedded_v4),
                cmocka_unit_test(test_normalize),
                cmocka_unit_test(test_patterns),
                cmocka_unit_test(test_policy_parse_errors),
                cmocka_unit_test(test_judge_hosts),
                cmocka_unit_test(test_judge_addresses),
        cmocka_unit_test(test_judge_private_hosts),
                cmocka_unit_test(test_resolve_and_json),
                cmocka_unit_test(test_upstream_url),
                cmocka_unit_test(test_http_connect),
                cmocka_unit_test(test_http_forward),
                cmocka_unit_test(test_http_refusals),
                cmocka_unit_test(test_http_rfc9112_refusals),
                cmocka_unit_test(test_http_direct),
                cmocka_unit_test(test_http_chunks_strict),
                cmocka_unit_test(test_http_request_framing),
                cmocka_unit_test(test_http_response_head),
                cmocka_unit_test(test_http_chunks),
                cmocka_unit_test(test_socks),
                cmocka_unit_test(test_socks4),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
