/* test_intercept.c — unit tests for the interceptor's pure parts: path
 * normalisation and http rules (httprules.c), and a request head judged
 * and rewritten for a bound secret (secrets.c). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/intercept.h"

static void test_path_normalize(void **state)
{
        (void)state;
        static const struct { const char *in, *out; } ok[] = {
                { "/v1/messages", "/v1/messages" },
                { "/v1/m%65ssages?x=1", "/v1/messages" },
                { "/a%2Db", "/a-b" },
                { "/a%3ab", "/a%3Ab" },
                { "/dir/", "/dir/" },
                { "/", "/" },
        };
        static const char *const bad[] = {
                "/v1/../admin", "/v1/./x", "/v1//x", "/x;y", "/a%2fb", "/a%2Fb", "/a%5cb", "/a\\b",
                "/%2e%2e/x", "/a/%2E", "/a%25b", "/a%zz", "/a%4", "*", "v1/x", "/a/..", "/a/.", "/a%00",
                "/a b", "/\xc3\xa9",
        };
        char out[256];
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                const char *why = http_path_normalize(ok[i].in, strlen(ok[i].in), out, sizeof out);
                if (why || strcmp(out, ok[i].out) != 0)
                        fail_msg("'%s': %s, '%s' (expected '%s')", ok[i].in, why ? why : "ok", out, ok[i].out);
        }
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (!http_path_normalize(bad[i], strlen(bad[i]), out, sizeof out))
                        fail_msg("'%s' was accepted as '%s'", bad[i], out);
}

static void test_rules(void **state)
{
        (void)state;
        struct intercept_policy *ip = NULL;
        brig_error *err = NULL;
        assert_int_equal(intercept_policy_add_rule_text(&ip, "api.example.com POST,GET /v1/messages,/v1/models/*,/f/**",
                                                        &err), 0);
        assert_int_equal(intercept_policy_add_rule_text(&ip, "*.cdn.example.com GET", &err), 0);
        assert_true(intercept_policy_add_rule_text(&ip, "api.example.com post /", &err) < 0);
        brig_error_free(&err);
        assert_true(intercept_policy_add_rule_text(&ip, "api.example.com:443 GET /", &err) < 0);
        brig_error_free(&err);
        char why[256];
        assert_true(http_rules_cover(ip, "api.example.com"));
        assert_false(http_rules_cover(ip, "other.example.com"));
        assert_true(http_rules_allow(ip, "api.example.com", "POST", "/v1/messages", why, sizeof why));
        assert_true(http_rules_allow(ip, "api.example.com", "GET", "/v1/models/x", why, sizeof why));
        assert_false(http_rules_allow(ip, "api.example.com", "GET", "/v1/models/x/y", why, sizeof why));
        assert_true(http_rules_allow(ip, "api.example.com", "GET", "/f/a/b/c", why, sizeof why));
        assert_true(http_rules_allow(ip, "api.example.com", "GET", "/f", why, sizeof why));
        assert_false(http_rules_allow(ip, "api.example.com", "GET", "/fx", why, sizeof why));
        assert_false(http_rules_allow(ip, "api.example.com", "DELETE", "/v1/messages", why, sizeof why));
        assert_string_equal(why, "http_rules for api.example.com: DELETE /v1/messages matches none of its 1 rule");
        assert_true(http_rules_allow(ip, "a.cdn.example.com", "GET", "/anything/at/all", why, sizeof why));
        assert_false(http_rules_allow(ip, "a.cdn.example.com", "PUT", "/", why, sizeof why));
        intercept_policy_free(ip);
}

/* A run's secrets without a vault or a CA (what fuzz_intercept does too). */
static char *hosts[] = { "api.example.com" };
static struct secret_spec spec = { .name = "TOKEN", .source = "env:X", .hosts = hosts, .n_hosts = 1,
                                   .header = "authorization" };
static struct intercept_policy policy = { .secrets = &spec, .n_secrets = 1 };
static char value[] = "real-value";

static void setup_ic(struct intercept *ic)
{
        memset(ic, 0, sizeof *ic);
        ic->policy = &policy;
        ic->n = 1;
        ic->secrets[0].spec = &spec;
        memcpy(ic->secrets[0].token, "0123456789abcdef0123456789abcdef", 33);
        snprintf(ic->secrets[0].placeholder, sizeof ic->secrets[0].placeholder, "brig-secret-TOKEN-%s",
                 "0123456789abcdef0123456789abcdef");
        ic->secrets[0].value = value;
        ic->secrets[0].value_len = strlen(value);
}

static int judge(const char *head, const char *host, bool verified, struct intercept_verdict *v)
{
        static struct intercept ic;
        setup_ic(&ic);
        struct http_request req;
        const char *why;
        if (http_parse_direct(head, strlen(head), &req, &why) != 1)
                fail_msg("'%s' did not parse: %s", head, why);
        intercept_judge_head(&ic, &policy, host, verified, head, &req, v);
        return v->status;
}

#define PH "brig-secret-TOKEN-0123456789abcdef0123456789abcdef"

static void test_judge_head(void **state)
{
        (void)state;
        struct intercept_verdict v;
        /* swapped: its header, its host, verified */
        assert_int_equal(judge("GET /x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n",
                               "api.example.com", true, &v), 0);
        assert_non_null(strstr(v.head, "Authorization: Bearer real-value\r\n"));
        assert_null(strstr(v.head, PH));
        free(v.head);
        /* Basic: decoded, swapped, encoded ("u:" PH -> "u:real-value") */
        assert_int_equal(judge("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Basic "
                               "dTpicmlnLXNlY3JldC1UT0tFTi0wMTIzNDU2Nzg5YWJjZGVmMDEyMzQ1Njc4OWFiY2RlZg==\r\n\r\n", "api.example.com", true, &v), 0);
        assert_non_null(strstr(v.head, "Authorization: Basic dTpyZWFsLXZhbHVl\r\n"));
        free(v.head);
        /* refused: unverified, another host, another header, the URL, a part of it, a fronted Host */
        assert_int_equal(judge("GET /x HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n",
                               NULL, false, &v), 403);
        assert_non_null(strstr(v.reason, "over plain http"));
        assert_ptr_not_equal(v.secret, NULL);
        assert_int_equal(judge("GET /x HTTP/1.1\r\nHost: other.example.com\r\nAuthorization: Bearer " PH "\r\n\r\n",
                               "other.example.com", true, &v), 403);
        assert_non_null(strstr(v.reason, "not bound"));
        assert_int_equal(judge("GET /x HTTP/1.1\r\nHost: api.example.com\r\nX-Key: " PH "\r\n\r\n",
                               "api.example.com", true, &v), 403);
        assert_non_null(strstr(v.reason, "in header X-Key"));
        assert_int_equal(judge("GET /x?k=" PH " HTTP/1.1\r\nHost: api.example.com\r\n\r\n", "api.example.com", true,
                               &v), 403);
        assert_non_null(strstr(v.reason, "in the URL"));
        assert_string_equal(v.path, "/x?k={TOKEN}");
        assert_int_equal(judge("GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer "
                               "0123456789abcdef0123456789abcdef\r\n\r\n", "api.example.com", true, &v), 403);
        assert_int_equal(judge("GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n", "api.example.com", true, &v), 403);
        assert_non_null(strstr(v.reason, "names host 'other.example.com'"));
        /* absolute-form naming the host, a Host header another (fronting); its own with a port and a dot */
        assert_int_equal(judge("GET http://api.example.com/ HTTP/1.1\r\nHost: evil.example\r\n\r\n",
                               "api.example.com", true, &v), 403);
        assert_non_null(strstr(v.reason, "names host 'evil.example' in its Host header"));
        assert_int_equal(judge("GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com:x\r\n\r\n",
                               "api.example.com", true, &v), 403);
        assert_int_equal(judge("GET http://api.example.com/ HTTP/1.1\r\nHost: API.example.com.:443\r\n\r\n",
                               "api.example.com", true, &v), 0);
        free(v.head);
        /* nothing to swap: forwarded, lines ending in CRLF; a bound host
         * asked for identity (its responses are searched for the value) */
        assert_int_equal(judge("GET / HTTP/1.1\nHost: api.example.com\nAccept-Encoding: gzip\nTE: gzip\n\n",
                               "api.example.com", true, &v), 0);
        assert_string_equal(v.head, "GET / HTTP/1.1\r\nHost: api.example.com\r\nAccept-Encoding: identity\r\n\r\n");
        free(v.head);
        /* a host no secret is bound to keeps its Accept-Encoding */
        assert_int_equal(judge("GET / HTTP/1.1\nHost: other.example.com\nAccept-Encoding: gzip\n\n",
                               "other.example.com", true, &v), 0);
        assert_string_equal(v.head, "GET / HTTP/1.1\r\nHost: other.example.com\r\nAccept-Encoding: gzip\r\n\r\n");
        free(v.head);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_path_normalize),
                cmocka_unit_test(test_rules),
                cmocka_unit_test(test_judge_head),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
