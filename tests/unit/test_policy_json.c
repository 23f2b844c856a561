/* test_policy_json.c — unit tests for policy files (src/lib/policy/policy_json.c):
 * merge order (profile, files in order, then setters), "extends", the dump
 * that loads back to the same policy, and one test per error class, each
 * asserting the exact file:line:column and message, plus atomicity (a
 * failing load leaves the policy exactly as it was). Documents are given
 * as strings; brig_policy_load_file is exercised once for its own errors. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "brig.h"

#define assert_contains(haystack, needle)                                                         \
        do {                                                                                      \
                const char *h_ = (haystack), *n_ = (needle);                                      \
                if (!h_ || !strstr(h_, n_))                                                       \
                        fail_msg("expected \"%s\" to contain \"%s\"", h_ ? h_ : "(null)", n_);    \
        } while (0)

/* ---- helpers ---------------------------------------------------------------- */

static char *dump(const brig_policy *p)
{
        brig_error *err = NULL;
        char *s = brig_policy_to_json(p, &err);
        if (!s)
                fail_msg("brig_policy_to_json: %s", err ? err->msg : "?");
        return s;
}

static void load_ok(brig_policy *p, const char *json)
{
        brig_error *err = NULL;
        int r = brig_policy_load_string(p, "p.json", json, &err);
        if (r != 0)
                fail_msg("loading %s failed: %d %s", json, r, err ? err->msg : "-");
        assert_null(err);
}

/* The value at a JSON pointer in the policy's dump, as compact JSON text
 * ("\"1G\"", "256", "true"); "(absent)" when there is nothing there. */
static char *value_at(const brig_policy *p, const char *pointer)
{
        char *text = dump(p);
        json_error_t je;
        json_t *doc = json_loads(text, 0, &je);
        free(text);
        assert_non_null(doc);
        json_t *v = doc;
        char *copy = strdup(pointer), *save = NULL;
        for (char *tok = strtok_r(copy, "/", &save); v && tok; tok = strtok_r(NULL, "/", &save))
                v = json_is_array(v) ? json_array_get(v, strtoul(tok, NULL, 10)) : json_object_get(v, tok);
        free(copy);
        char *out = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("(absent)");
        json_decref(doc);
        return out;
}

#define assert_value(p, pointer, expected)                                                         \
        do {                                                                                       \
                char *got_ = value_at((p), (pointer));                                             \
                if (strcmp(got_, (expected)) != 0)                                                 \
                        fail_msg("%s = %s, expected %s", (pointer), got_, (expected));             \
                free(got_);                                                                        \
        } while (0)

/* Load `json` into a policy that already holds a few settings: the load
 * must fail with exactly `message`, and leave the policy as it was. */
static void expect_error(const char *json, const char *message)
{
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        load_ok(p, "{\"process\": {\"hostname\": \"before\", \"env\": {\"KEPT\": \"1\"}},"
                   " \"limits\": {\"memory\": \"3G\"}}");
        char *before = dump(p);
        brig_error *err = NULL;
        int r = brig_policy_load_string(p, "p.json", json, &err);
        if (r >= 0)
                fail_msg("loading %s succeeded, expected: %s", json, message);
        assert_int_equal(r, -EINVAL);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(err->errnum, EINVAL);
        if (strcmp(err->msg, message) != 0)
                fail_msg("loading %s:\n  got      %s\n  expected %s", json, err->msg, message);
        char *after = dump(p);
        assert_string_equal(before, after);  /* never a partial policy */
        free(before);
        free(after);
        brig_error_free(&err);
        brig_policy_free(p);
}

/* ---- merge order ------------------------------------------------------------ */

static void test_merge_order(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_value(p, "/limits/memory", "\"4G\"");
        assert_value(p, "/limits/pids", "1024");

        /* 1. the profile */
        assert_int_equal(brig_policy_apply_profile(p, "strict", &err), 0);
        assert_value(p, "/limits/memory", "\"1G\"");
        assert_value(p, "/limits/pids", "256");
        assert_value(p, "/filesystem/workspace_readonly", "true");
        assert_value(p, "/filesystem/tmp_size", "\"128M\"");

        /* 2. a file: wins over the profile where it speaks, leaves the rest */
        load_ok(p, "{\"limits\": {\"memory\": \"2G\", \"pids\": 100}, \"process\": {\"hostname\": \"first\","
                   " \"env\": {\"A\": \"1\", \"B\": \"1\"}}}");
        assert_value(p, "/limits/memory", "\"2G\"");
        assert_value(p, "/limits/pids", "100");
        assert_value(p, "/filesystem/tmp_size", "\"128M\"");
        assert_value(p, "/process/hostname", "\"first\"");

        /* 3. a later file wins over the earlier one */
        load_ok(p, "{\"limits\": {\"memory\": \"3G\"}, \"process\": {\"env\": {\"B\": \"2\"}},"
                   " \"filesystem\": {\"workspace_readonly\": false}}");
        assert_value(p, "/limits/memory", "\"3G\"");
        assert_value(p, "/limits/pids", "100");
        assert_value(p, "/process/hostname", "\"first\"");
        assert_value(p, "/process/env/A", "\"1\"");
        assert_value(p, "/process/env/B", "\"2\"");
        assert_value(p, "/filesystem/workspace_readonly", "false");

        /* 4. setters (what the flags call) win over every file */
        assert_int_equal(brig_policy_set_limit(p, BRIG_LIMIT_MEMORY, 5ULL << 30, &err), 0);
        assert_int_equal(brig_policy_set_hostname(p, "flag", &err), 0);
        assert_value(p, "/limits/memory", "\"5G\"");
        assert_value(p, "/process/hostname", "\"flag\"");
        assert_value(p, "/limits/pids", "100");
        assert_null(err);
        brig_policy_free(p);
}

/* Lists add up across files; a repeated entry is not duplicated. */
static void test_merge_lists(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        load_ok(p, "{\"filesystem\": {\"deny\": [\"~/.netrc-extra\"], \"binds\": [{\"source\": \"/srv/a\"}]},"
                   " \"process\": {\"keep_env\": [\"TERM\"]}}");
        load_ok(p, "{\"filesystem\": {\"deny\": [\"~/.netrc-extra\", \"/etc/x.key\"],"
                   " \"binds\": [{\"source\": \"/srv/b\", \"destination\": \"/b\", \"readonly\": true}]},"
                   " \"process\": {\"keep_env\": [\"LANG\"]}}");
        assert_value(p, "/filesystem/deny", "[\"~/.netrc-extra\",\"/etc/x.key\"]");
        assert_value(p, "/filesystem/binds/0/source", "\"/srv/a\"");
        assert_value(p, "/filesystem/binds/0/destination", "\"/srv/a\"");
        assert_value(p, "/filesystem/binds/0/readonly", "false");
        assert_value(p, "/filesystem/binds/1/destination", "\"/b\"");
        assert_value(p, "/filesystem/binds/1/readonly", "true");
        assert_value(p, "/process/keep_env", "[\"TERM\",\"LANG\"]");
        brig_policy_free(p);
}

/* ---- extends ----------------------------------------------------------------- */

static void test_extends_applies_profile_first(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        /* "extends" written last still applies before the file's own keys */
        load_ok(p, "{\"limits\": {\"memory\": \"1G\"}, \"extends\": \"build\"}");
        assert_value(p, "/limits/memory", "\"1G\"");
        assert_value(p, "/limits/pids", "4096");
        assert_value(p, "/filesystem/tmp_size", "\"8G\"");
        brig_policy_free(p);
}

/* A chain: profile → file extending another profile → file. Each extends
 * applies its profile on top of what is there (it does not reset). */
static void test_extends_chain(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_apply_profile(p, "browser", &err), 0);
        assert_value(p, "/filesystem/shm_size", "\"1G\"");
        load_ok(p, "{\"process\": {\"hostname\": \"kept\"}}");
        load_ok(p, "{\"extends\": \"strict\", \"limits\": {\"pids\": 300}}");
        assert_value(p, "/filesystem/shm_size", "\"1G\"");      /* browser, strict says nothing */
        assert_value(p, "/filesystem/tmp_size", "\"128M\"");    /* strict over browser */
        assert_value(p, "/limits/memory", "\"1G\"");            /* strict */
        assert_value(p, "/limits/pids", "300");                  /* the file over strict */
        assert_value(p, "/process/hostname", "\"kept\"");       /* not reset */
        load_ok(p, "{\"extends\": \"default\"}");                /* default is empty: changes nothing */
        assert_value(p, "/limits/pids", "300");
        assert_value(p, "/filesystem/workspace_readonly", "true");
        assert_null(err);
        brig_policy_free(p);
}

/* Profiles cannot extend anything and files can only extend profiles, so
 * no cycle can be written; what looks like one is an unknown profile. */
static void test_extends_unknown_or_cycle(void **state)
{
        (void)state;
        expect_error("{\"extends\": \"nope\"}",
                     "p.json:1:13: unknown profile 'nope' (expected one of default, strict, build, browser)");
        expect_error("{\"extends\": \"p.json\"}",
                     "p.json:1:13: unknown profile 'p.json' (expected one of default, strict, build, browser)");
        expect_error("{\n  \"extends\": [\"strict\"]\n}", "p.json:2:14: expected a profile name, found an array");

        brig_policy *p = brig_policy_new();
        char *before = dump(p);
        brig_error *err = NULL;
        assert_int_equal(brig_policy_apply_profile(p, "Strict", &err), -EINVAL);
        assert_non_null(err);
        assert_string_equal(err->msg, "unknown profile 'Strict' (expected one of default, strict, build, browser)");
        char *after = dump(p);
        assert_string_equal(before, after);
        free(before);
        free(after);
        brig_error_free(&err);
        brig_policy_free(p);
}

static void test_profile_names(void **state)
{
        (void)state;
        const char *const *names = brig_profile_names();
        const char *want[] = { "default", "strict", "build", "browser", NULL };
        for (size_t i = 0; want[i]; i++) {
                assert_non_null(names[i]);
                assert_string_equal(names[i], want[i]);
        }
        assert_null(names[4]);
}

/* ---- round trip ---------------------------------------------------------------- */

static void check_round_trip(brig_policy *p)
{
        char *first = dump(p);
        brig_policy *q = brig_policy_new();
        brig_error *err = NULL;
        if (brig_policy_load_string(q, "dump", first, &err) != 0)
                fail_msg("the dump does not load back: %s\n%s", err ? err->msg : "-", first);
        char *second = dump(q);
        assert_string_equal(first, second);
        free(first);
        free(second);
        brig_policy_free(q);
}

static void test_round_trip_profiles(void **state)
{
        (void)state;
        for (const char *const *n = brig_profile_names(); *n; n++) {
                brig_policy *p = brig_policy_new();
                brig_error *err = NULL;
                assert_int_equal(brig_policy_apply_profile(p, *n, &err), 0);
                check_round_trip(p);
                brig_policy_free(p);
        }
}

static void test_round_trip_everything(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        load_ok(p,
                "{\"$schema\": \"https://example.invalid/policy.schema.json\", \"extends\": \"strict\",\n"
                " \"filesystem\": {\"workspace\": \"/work/project/\", \"workspace_readonly\": false,\n"
                "   \"binds\": [{\"source\": \"/usr/share/fonts\", \"readonly\": true},\n"
                "             {\"source\": \"/srv/cache\", \"destination\": \"/cache\"}],\n"
                "   \"tmpfs\": [{\"destination\": \"/scratch\", \"size\": \"256M\"}, {\"destination\": \"/var/tmp\"}],\n"
                "   \"tmp_size\": \"1G\", \"home_size\": 268435457, \"shm_size\": \"1.5G\", \"sys\": true,\n"
                "   \"deny\": [\"~/.config/gh\", \"/etc/*.key\"], \"unsafe_allow_secrets\": [\"/etc/gshadow\"]},\n"
                " \"process\": {\"env\": {\"CI\": \"1\", \"QUOTED\": \"a \\\"b\\\" \\u00e9\"}, \"keep_env\": [\"TERM\"],\n"
                "   \"cwd\": \"/work/project/src\", \"hostname\": \"agent-1\", \"tty\": \"never\",\n"
                "   \"terminal_passthrough\": true},\n"
                " \"limits\": {\"memory\": \"2G\", \"pids\": 512, \"cpus\": 1.5, \"io_weight\": 100,\n"
                "   \"timeout\": \"1h30m\", \"kill_after\": \"1500ms\", \"cpu_time\": 600, \"nofile\": 2048,\n"
                "   \"nproc\": 77, \"fsize\": \"1G\", \"stack\": \"8M\", \"required\": true},\n"
                " \"syscalls\": {\"rules\": [{\"name\": \"ptrace\", \"action\": \"errno:EPERM\"},\n"
                "   {\"name\": \"getpriority(a0==0)\", \"action\": \"allow\"}, {\"name\": \"@debug\", \"action\": \"deny-log\"},\n"
                "   {\"name\": \"kcmp(a2&0x3==0x1)\", \"action\": \"kill\"}, {\"name\": \"uname\", \"action\": \"log\"}],\n"
                "   \"allow_degraded\": [\"landlock\", \"seccomp\", \"memory\"]},\n"
                " \"network\": {\"mode\": \"none\", \"allow_hosts\": [\"pypi.org\", \"*.pythonhosted.org:443\"],\n"
                "   \"deny_hosts\": [\"evil.example\"], \"allow_cidrs\": [\"10.1.0.0/16:5432\", \"fd00::/8\"],\n"
                "   \"resolve\": {\"pypi.org\": \"151.101.0.223\", \"v6.example\": \"::1\"}},\n"
                " \"audit\": {\"file\": \"/tmp/audit.jsonl\"}, \"report\": {\"file\": \"/tmp/report.json\"}}");
        assert_value(p, "/filesystem/workspace", "\"/work/project\"");
        assert_value(p, "/filesystem/home_size", "268435457");
        assert_value(p, "/filesystem/shm_size", "\"1536M\"");
        assert_value(p, "/limits/kill_after", "\"1500ms\"");
        assert_value(p, "/limits/cpu_time", "\"600s\"");
        assert_value(p, "/limits/cpus", "1.5");
        assert_value(p, "/network/mode", "\"none\"");
        assert_value(p, "/process/terminal_passthrough", "true");
        assert_value(p, "/syscalls/rules/3/name", "\"kcmp(a2&0x3==0x1)\"");
        assert_value(p, "/syscalls/allow_degraded/2", "\"memory\"");
        check_round_trip(p);

        /* and a policy built by setters only, as the flags build it */
        brig_policy *s = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_add_bind(s, "/opt/x", "/x", BRIG_BIND_READONLY, &err), 0);
        assert_int_equal(brig_policy_add_tmpfs(s, "/t", 12345 * 4096ULL, &err), 0);
        assert_int_equal(brig_policy_set_env(s, "Z", "", &err), 0);
        assert_int_equal(brig_policy_set_limit(s, BRIG_LIMIT_TIMEOUT_MS, 90500, &err), 0);
        assert_int_equal(brig_policy_set_limit(s, BRIG_LIMIT_CPUS_MILLI, 250, &err), 0);
        assert_int_equal(brig_policy_add_syscall_rule(s, "@mount", "allow", &err), 0);
        brig_policy_set_net_mode(s, BRIG_NET_HOST);
        brig_policy_set_tty(s, BRIG_TTY_ALWAYS);
        assert_null(err);
        check_round_trip(s);
        brig_policy_free(s);
        brig_policy_free(p);
}

/* ---- one test per error class ------------------------------------------------- */

static void test_error_json_syntax(void **state)
{
        (void)state;
        expect_error("{\"limits\": {\"memory\": \"1G\",}}", "p.json:1:28: string or '}' expected near '}'");
        expect_error("{\n  \"limits\": {\n    \"memory\": \"1G\"\n  }\n", "p.json:5:0: '}' expected near end of file");
        expect_error("", "p.json:1:0: '[' or '{' expected near end of file");
        expect_error("{} {}", "p.json:1:4: end of file expected near '{'");
}

static void test_error_unknown_top_level_key(void **state)
{
        (void)state;
        expect_error("{\"limit\": {}}", "p.json:1:2: unknown key 'limit', did you mean 'limits'?");
        expect_error("{\n  \"process\": {},\n  \"netwrok\": {}\n}",
                     "p.json:3:3: unknown key 'netwrok', did you mean 'network'?");
}

static void test_error_unknown_nested_key_suggestion(void **state)
{
        (void)state;
        expect_error("{\n  \"limits\": {\n    \"pids\": 10,\n    \"memroy\": \"1G\"\n  }\n}",
                     "p.json:4:5: unknown key 'memroy', did you mean 'memory'?");
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/a\", \"readnly\": true}]}}",
                     "p.json:1:44: unknown key 'readnly', did you mean 'readonly'?");
        expect_error("{\"syscalls\": {\"rules\": [{\"nmae\": \"ptrace\", \"action\": \"allow\"}]}}",
                     "p.json:1:26: unknown key 'nmae', did you mean 'name'?");
        expect_error("{\"process\": {\"hostnme\": \"x\"}}",
                     "p.json:1:14: unknown key 'hostnme', did you mean 'hostname'?");
}

static void test_error_unknown_key_no_suggestion(void **state)
{
        (void)state;
        expect_error("{\"zzzzzz\": 1}", "p.json:1:2: unknown key 'zzzzzz' at the top level (expected one of: $schema, "
                                        "extends, filesystem, process, limits, syscalls, network, audit, manifest, report, tools)");
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/srv\", \"ro\": true}]}}",
                     "p.json:1:46: unknown key 'ro' in filesystem.binds[0] (expected one of: source, destination, "
                     "readonly)");
        expect_error("{\"audit\": {\"path\": \"/tmp/a\"}}",
                     "p.json:1:12: unknown key 'path' in audit (expected one of: file, no_exec, changes_max)");
        expect_error("{\"network\": {\"allow\": [\"x\"]}}",
                     "p.json:1:14: unknown key 'allow' in network (expected one of: mode, allow_hosts, "
                     "allow_private_hosts, deny_hosts, allow_cidrs, resolve, upstream_proxy, secrets, http_rules, "
                     "upstream_ca, allow_unix)");
}

static void test_error_wrong_type(void **state)
{
        (void)state;
        /* string where a number */
        expect_error("{\"limits\": {\"pids\": \"many\"}}", "p.json:1:21: expected a whole number, found a string");
        expect_error("{\"limits\": {\"cpus\": \"2\"}}",
                     "p.json:1:21: expected a number of cores such as 1.5, found a string");
        expect_error("{\"limits\": {\"pids\": 1e3}}", "p.json:1:21: expected a whole number, found a number");
        expect_error("{\"limits\": {\"nofile\": -1}}", "p.json:1:23: expected a whole number, found an integer");
        /* object where an array, array where an object */
        expect_error("{\"filesystem\": {\"binds\": {}}}",
                     "p.json:1:26: expected an array of binds, found an object");
        expect_error("{\"filesystem\": []}", "p.json:1:16: expected an object, found an array");
        expect_error("{\"process\": {\"env\": []}}",
                     "p.json:1:21: expected an object of NAME: value, found an array");
        expect_error("[]", "p.json:1:1: expected an object, found an array");
        /* a string where a boolean, null, numbers in string lists */
        expect_error("{\"filesystem\": {\"workspace_readonly\": \"yes\"}}",
                     "p.json:1:39: expected true or false, found a string");
        expect_error("{\"process\": {\"hostname\": null}}", "p.json:1:26: expected a string, found null");
        expect_error("{\"process\": {\"keep_env\": [\"A\", 2]}}", "p.json:1:32: expected a string, found an integer");
        expect_error("{\"process\": {\"env\": {\"A\": 1}}}", "p.json:1:27: expected a string, found an integer");
        expect_error("{\"audit\": \"/tmp/a\"}", "p.json:1:11: expected an object {\"file\": PATH, \"no_exec\": BOOL}, found a string");
        expect_error("{\"network\": {\"resolve\": {\"a.example\": 5}}}",
                     "p.json:1:39: expected an address, found an integer");
        /* missing required members */
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"ptrace\"}]}}",
                     "p.json:1:25: a rule needs \"name\" and \"action\"");
        expect_error("{\"filesystem\": {\"tmpfs\": [{\"size\": \"1M\"}]}}", "p.json:1:27: a tmpfs needs a \"destination\"");
        expect_error("{\"filesystem\": {\"binds\": [{\"readonly\": true}]}}", "p.json:1:27: a bind needs a \"source\"");
}

static void test_error_bad_size(void **state)
{
        (void)state;
        expect_error("{\"limits\": {\"memory\": \"12Q\"}}",
                     "p.json:1:23: size '12Q': expected a number with an optional unit (K, M, G, T): Invalid argument");
        expect_error("{\n  \"filesystem\": {\n    \"tmp_size\": \"lots\"\n  }\n}",
                     "p.json:3:17: size 'lots': expected a number with an optional unit (K, M, G, T): Invalid argument");
        expect_error("{\"limits\": {\"memory\": 1.5}}",
                     "p.json:1:23: expected a size such as \"512M\" or a number of bytes, found a number");
        expect_error("{\"limits\": {\"memory\": \"100K\"}}",
                     "p.json:1:23: memory limit 102400 bytes: at least 1M: Invalid argument");
        expect_error("{\"filesystem\": {\"tmpfs\": [{\"destination\": \"/t\", \"size\": \"1Z\"}]}}",
                     "p.json:1:57: size '1Z': expected a number with an optional unit (K, M, G, T): Invalid argument");
}

static void test_error_bad_duration(void **state)
{
        (void)state;
        expect_error("{\"limits\": {\"timeout\": \"5 minutes\"}}",
                     "p.json:1:24: duration '5 minutes': expected a duration like 90s, 10m, 1h30m or 500ms: "
                     "Invalid argument");
        expect_error("{\"limits\": {\"cpu_time\": true}}",
                     "p.json:1:25: expected a duration such as \"90s\" or a number of seconds, found a boolean");
        expect_error("{\"limits\": {\"kill_after\": \"10x\"}}",
                     "p.json:1:27: duration '10x': expected a duration like 90s, 10m, 1h30m or 500ms: "
                     "Invalid argument");
}

static void test_error_bad_env_name(void **state)
{
        (void)state;
        expect_error("{\"process\": {\"env\": {\"BAD-NAME\": \"x\"}}}",
                     "p.json:1:34: environment name 'BAD-NAME': expected letters, digits and '_': Invalid argument");
        expect_error("{\"process\": {\"keep_env\": [\"A=B\"]}}",
                     "p.json:1:27: environment name 'A=B': expected letters, digits and '_': Invalid argument");
}

static void test_error_bad_hostname(void **state)
{
        (void)state;
        expect_error("{\"process\": {\"hostname\": \"bad host\"}}",
                     "p.json:1:26: hostname 'bad host': unexpected character ' ': Invalid argument");
        expect_error("{\"network\": {\n  \"allow_hosts\": [\"ok.example\", \"bad..host\"]}}",
                     "p.json:2:33: 'bad..host': not a host name or pattern (expected host, *.domain, optional :port): "
                     "Invalid argument");
        expect_error("{\"network\": {\"deny_hosts\": [\"exa mple.com\"]}}",
                     "p.json:1:29: 'exa mple.com': not a host name or pattern (expected host, *.domain, optional "
                     ":port): Invalid argument");
        expect_error("{\"network\": {\"resolve\": {\"bad host\": \"1.2.3.4\"}}}",
                     "p.json:1:38: 'bad host:1.2.3.4': 'bad host' is not a host name: Invalid argument");
        expect_error("{\"network\": {\"resolve\": {\"a.example\": \"nope\"}}}",
                     "p.json:1:39: 'a.example:nope': 'nope' is not an IPv4 or IPv6 address: Invalid argument");
        expect_error("{\"network\": {\"allow_cidrs\": [\"10.0.0.0/33\"]}}",
                     "p.json:1:30: '10.0.0.0/33': bad prefix length (expected 0-32): Invalid argument");
}

static void test_error_unknown_syscall(void **state)
{
        (void)state;
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"frobnicate\", \"action\": \"allow\"}]}}",
                     "p.json:1:25: syscall rule: unknown syscall 'frobnicate': Invalid argument");
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"@nonsense\", \"action\": \"allow\"}]}}",
                     "p.json:1:25: syscall rule: unknown syscall group '@nonsense': Invalid argument");
}

static void test_error_unknown_syscall_action(void **state)
{
        (void)state;
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"ptrace\", \"action\": \"maybe\"}]}}",
                     "p.json:1:25: syscall rule 'ptrace': unknown action 'maybe' (expected allow, kill, log, "
                     "deny-log or errno:N): Invalid argument");
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"ptrace\", \"action\": \"errno:EWHAT\"}]}}",
                     "p.json:1:25: syscall rule 'ptrace': 'EWHAT' is not an errno (a number 1-4095 or a name like "
                     "EPERM): Invalid argument");
        expect_error("{\"syscalls\": {\"allow_degraded\": [\"apparmor\"]}}",
                     "p.json:1:34: --allow-degraded 'apparmor': expected landlock, seccomp, memory, pids, cpus or io: "
                     "Invalid argument");
}

static void test_error_bad_seccomp_condition(void **state)
{
        (void)state;
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"getpriority(b0==1)\", \"action\": \"allow\"}]}}",
                     "p.json:1:25: syscall rule 'getpriority(b0==1)': condition 'b0==1' is not aN OP VALUE (N 0-5; "
                     "OP ==, !=, <, <=, >, >=; or aN&MASK==VALUE): Invalid argument");
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"@debug(a0==1)\", \"action\": \"allow\"}]}}",
                     "p.json:1:25: syscall rule '@debug(a0==1)': conditions need one syscall, not a group: "
                     "Invalid argument");
        expect_error("{\"syscalls\": {\"rules\": [{\"name\": \"getpriority()\", \"action\": \"allow\"}]}}",
                     "p.json:1:25: syscall rule 'getpriority()': empty condition list: Invalid argument");
}

static void test_error_relative_bind(void **state)
{
        (void)state;
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"relative/dir\"}]}}",
                     "p.json:1:27: bind source 'relative/dir': expected an absolute path: Invalid argument");
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/srv\", \"destination\": \"srv\"}]}}",
                     "p.json:1:27: bind destination 'srv': expected an absolute path: Invalid argument");
        expect_error("{\"filesystem\": {\"workspace\": \"ws\"}}",
                     "p.json:1:30: workspace 'ws': expected an absolute path: Invalid argument");
        expect_error("{\"process\": {\"cwd\": \"rel\"}}",
                     "p.json:1:21: cwd 'rel': expected an absolute path: Invalid argument");
        expect_error("{\"filesystem\": {\"deny\": [\"relative\"]}}",
                     "p.json:1:26: secret path 'relative': expected an absolute path or ~/PATH: Invalid argument");
}

static void test_error_bind_over_proc(void **state)
{
        (void)state;
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/srv\", \"destination\": \"/proc/x\"}]}}",
                     "p.json:1:27: cannot mount over '/proc/x': /proc and /dev are brig's own: Invalid argument");
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/proc\"}]}}",
                     "p.json:1:27: cannot mount over '/proc': /proc and /dev are brig's own: Invalid argument");
        expect_error("{\"filesystem\": {\"tmpfs\": [{\"destination\": \"/dev/shm\"}]}}",
                     "p.json:1:27: cannot mount over '/dev/shm': /proc and /dev are brig's own: Invalid argument");
        expect_error("{\"filesystem\": {\"binds\": [{\"source\": \"/srv\", \"destination\": \"/\"}]}}",
                     "p.json:1:27: cannot mount over '/': the sandbox root is brig's own: Invalid argument");
}

static void test_error_duplicate_keys(void **state)
{
        (void)state;
        /* jansson reports the end of the repeated key */
        expect_error("{\"limits\": {\"memory\": \"1G\", \"memory\": \"2G\"}}",
                     "p.json:1:36: duplicate object key near '\"memory\"'");
        expect_error("{\"limits\": {}, \"limits\": {}}", "p.json:1:23: duplicate object key near '\"limits\"'");
}

static void test_error_bad_tty(void **state)
{
        (void)state;
        expect_error("{\"process\": {\"tty\": \"sometimes\"}}",
                     "p.json:1:21: tty 'sometimes': expected \"auto\", \"always\" or \"never\"");
        expect_error("{\"process\": {\"tty\": true}}",
                     "p.json:1:21: expected \"auto\", \"always\" or \"never\", found a boolean");
        expect_error("{\"process\": {\"terminal_passthrough\": \"yes\"}}",
                     "p.json:1:38: expected true or false, found a string");
}

static void test_error_bad_network_mode(void **state)
{
        (void)state;
        expect_error("{\"network\": {\"mode\": \"internet\"}}",
                     "p.json:1:22: network mode 'internet': expected \"none\", \"proxy\", \"filtered\" or \"host\"");
        expect_error("{\"network\": {\"mode\": \"None\"}}",
                     "p.json:1:22: network mode 'None': expected \"none\", \"proxy\", \"filtered\" or \"host\"");
}

static void test_error_unsafe_allow_unknown(void **state)
{
        (void)state;
        expect_error("{\"filesystem\": {\"unsafe_allow_secrets\": [\"/nope\"]}}",
                     "p.json:1:42: '/nope' is not on the built-in secret list: No such file or directory");
}

/* ---- atomicity ------------------------------------------------------------------- */

/* Everything before the error would be valid, and touches every section;
 * the error comes last. The policy must be byte-for-byte unchanged. */
static void test_atomic_late_failure(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_apply_profile(p, "build", &err), 0);
        load_ok(p, "{\"process\": {\"hostname\": \"orig\"}, \"filesystem\": {\"binds\": [{\"source\": \"/srv\"}]}}");
        char *before = dump(p);
        static const char *const bad[] = {
                /* the failure in the last section applied (report) */
                "{\"extends\": \"strict\", \"filesystem\": {\"workspace_readonly\": true, \"binds\": [{\"source\": \"/x\"}],"
                " \"deny\": [\"/etc/y\"], \"unsafe_allow_secrets\": [\"/etc/shadow\"], \"tmpfs\": [{\"destination\": \"/t\"}]},"
                " \"process\": {\"hostname\": \"changed\", \"env\": {\"A\": \"1\"}, \"keep_env\": [\"B\"]},"
                " \"limits\": {\"memory\": \"2G\", \"pids\": 3}, \"syscalls\": {\"rules\": [{\"name\": \"ptrace\","
                " \"action\": \"allow\"}], \"allow_degraded\": [\"landlock\"]}, \"network\": {\"mode\": \"host\"},"
                " \"audit\": {\"file\": \"/tmp/a\"}, \"report\": {\"file\": \"\"}}",
                /* the second of two binds */
                "{\"filesystem\": {\"binds\": [{\"source\": \"/ok\"}, {\"source\": \"/srv\", \"destination\": \"/dev/x\"}]}}",
                /* the second env variable */
                "{\"process\": {\"env\": {\"GOOD\": \"1\", \"B-AD\": \"2\"}}}",
                /* the third syscall rule */
                "{\"syscalls\": {\"rules\": [{\"name\": \"ptrace\", \"action\": \"allow\"}, {\"name\": \"uname\", \"action\": \"log\"},"
                " {\"name\": \"nosuchcall\", \"action\": \"allow\"}]}}",
                /* a limit after others */
                "{\"limits\": {\"memory\": \"1G\", \"pids\": 5, \"stack\": \"1K\"}}",
                /* syntax error at the very end */
                "{\"process\": {\"hostname\": \"changed\"}",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                err = NULL;
                if (brig_policy_load_string(p, "bad.json", bad[i], &err) >= 0)
                        fail_msg("loading %s succeeded", bad[i]);
                assert_non_null(err);
                assert_contains(err->msg, "bad.json:");
                char *after = dump(p);
                if (strcmp(before, after) != 0)
                        fail_msg("a failed load changed the policy:\n%s\n--- before\n%s\n--- after\n%s", bad[i], before,
                                 after);
                free(after);
                brig_error_free(&err);
        }
        /* and the policy still takes a good file afterwards */
        load_ok(p, "{\"process\": {\"hostname\": \"later\"}}");
        assert_value(p, "/process/hostname", "\"later\"");
        free(before);
        brig_policy_free(p);
}

/* ---- files ---------------------------------------------------------------------- */

static void test_load_file(void **state)
{
        (void)state;
        char path[] = "/tmp/brig-test-policy-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char *text = "{\n  \"limits\": {\n    \"pids\": 77\n  },\n  \"process\": {\"tty\": \"often\"}\n}\n";
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_true(brig_policy_load_file(p, path, &err) < 0);
        char want[256];
        snprintf(want, sizeof want, "%s:5:22: tty 'often': expected \"auto\", \"always\" or \"never\"", path);
        assert_string_equal(err->msg, want);
        assert_value(p, "/limits/pids", "1024");
        brig_error_free(&err);
        unlink(path);

        assert_true(brig_policy_load_file(p, path, &err) < 0);
        assert_int_equal(err->errnum, ENOENT);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_contains(err->msg, path);
        brig_error_free(&err);
        brig_policy_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_merge_order),
                cmocka_unit_test(test_merge_lists),
                cmocka_unit_test(test_extends_applies_profile_first),
                cmocka_unit_test(test_extends_chain),
                cmocka_unit_test(test_extends_unknown_or_cycle),
                cmocka_unit_test(test_profile_names),
                cmocka_unit_test(test_round_trip_profiles),
                cmocka_unit_test(test_round_trip_everything),
                cmocka_unit_test(test_error_json_syntax),
                cmocka_unit_test(test_error_unknown_top_level_key),
                cmocka_unit_test(test_error_unknown_nested_key_suggestion),
                cmocka_unit_test(test_error_unknown_key_no_suggestion),
                cmocka_unit_test(test_error_wrong_type),
                cmocka_unit_test(test_error_bad_size),
                cmocka_unit_test(test_error_bad_duration),
                cmocka_unit_test(test_error_bad_env_name),
                cmocka_unit_test(test_error_bad_hostname),
                cmocka_unit_test(test_error_unknown_syscall),
                cmocka_unit_test(test_error_unknown_syscall_action),
                cmocka_unit_test(test_error_bad_seccomp_condition),
                cmocka_unit_test(test_error_relative_bind),
                cmocka_unit_test(test_error_bind_over_proc),
                cmocka_unit_test(test_error_duplicate_keys),
                cmocka_unit_test(test_error_bad_tty),
                cmocka_unit_test(test_error_bad_network_mode),
                cmocka_unit_test(test_error_unsafe_allow_unknown),
                cmocka_unit_test(test_atomic_late_failure),
                cmocka_unit_test(test_load_file),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
