/* test_tools.c — unit tests for the pure parts of tools.c and sshagent.c:
 * the passwd entry, the npm and pip config filters (no credential may
 * pass), the generated git config, and the agent relay's judge. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

static const char passwd[] = "root:x:0:0:root:/root:/bin/bash\n"
                             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
                             "u:x:1000:1000::/home/u:/bin/sh";

static void test_passwd_home_replaced(void **state)
{
        (void)state;
        char *out = tools_passwd_for(passwd, strlen(passwd), 65534, 65534, "sandbox", "/tmp/h");
        assert_non_null(out);
        assert_non_null(strstr(out, "nobody:x:65534:65534:nobody:/tmp/h:/usr/sbin/nologin\n"));
        assert_non_null(strstr(out, "root:x:0:0:root:/root:/bin/bash\n"));
        assert_non_null(strstr(out, "u:x:1000:1000::/home/u:/bin/sh\n"));
        assert_null(strstr(out, "nonexistent"));
        free(out);
}

static void test_passwd_uid_prefix_is_not_a_match(void **state)
{
        (void)state;
        /* uid 100 must not match "1000:" */
        char *out = tools_passwd_for(passwd, strlen(passwd), 100, 100, "sandbox", "/home/me");
        assert_non_null(out);
        assert_non_null(strstr(out, "u:x:1000:1000::/home/u:/bin/sh\n"));
        assert_non_null(strstr(out, "sandbox:x:100:100:brig sandbox user:/home/me:/bin/sh\n"));
        free(out);
}

static void test_passwd_refuses_colon_in_home(void **state)
{
        (void)state;
        assert_null(tools_passwd_for(passwd, strlen(passwd), 0, 0, "x", "/a:b"));
        assert_null(tools_passwd_for(passwd, strlen(passwd), 0, 0, "x", "/a\nevil:x:0:0::/:/bin/sh"));
}

/* None of TOK1X..TOKnX is in OUT. */
static void assert_no_token(const char *out, int n)
{
        for (int i = 1; i <= n; i++) {
                char tok[16];
                snprintf(tok, sizeof tok, "TOK%dX", i);
                if (strstr(out, tok))
                        fail_msg("%s carried into:\n%s", tok, out);
        }
}

static void test_npmrc_tokens_stay_out(void **state)
{
        (void)state;
        const char in[] = "registry=https://r.test/\n//r.test/:_authToken=TOK1X\n_auth = TOK2X\n"
                          "_password=TOK3X\nusername=TOK4X\nstrict-ssl = false\n@s:registry=https://u:TOK5X@s.test/\n"
                          "@ok:registry=https://ok.test/\nregistry2=${NPM_TOKEN}\nfetch-retries=${TOK6X}\n"
                          "certfile=/x/TOK7X\n; comment TOK8X\n# comment TOK9X\ngarbage TOK10X\n";
        char *out = tools_filter_npmrc(in, strlen(in));
        assert_non_null(out);
        assert_no_token(out, 10);
        assert_non_null(strstr(out, "\nregistry=https://r.test/\n"));
        assert_non_null(strstr(out, "\nstrict-ssl=false\n"));
        assert_non_null(strstr(out, "\n@ok:registry=https://ok.test/\n"));
        assert_non_null(strstr(out, "# brig left out '//r.test/:_authToken' (not on brig's allow list of npm keys)"));
        assert_non_null(strstr(out, "# brig left out '@s:registry' (a URL with credentials)"));
        free(out);
        /* a bare token with base64's '=' padding, or one before a '=',
         * reads as key=value: never named as a key (it is the secret) */
        const char bare[] = "dXNlcjpzM2NyZXQtcGFzc3dvcmQ==\nnpm_AbCdEfGh0123456789abcdef=\nghp_Xy12Ab34=\n"
                            "a3f9c0d1e2b4=\n//Registry.Example.com:8080/:_authToken=x\nfetch-retry-maxtimeout=${X}\n";
        out = tools_filter_npmrc(bare, strlen(bare));
        assert_non_null(out);
        static const char *const tokens[] = { "dXNlcjpz", "AbCdEfGh", "Xy12Ab34", "a3f9c0" };
        for (size_t i = 0; i < ARRAY_SIZE(tokens); i++)
                if (strstr(out, tokens[i]))
                        fail_msg("%s named in:\n%s", tokens[i], out);
        assert_non_null(strstr(out, "# brig left out a line (not on brig's allow list of npm keys)"));
        assert_non_null(strstr(out, "# brig left out '//Registry.Example.com:8080/:_authToken'"));
        assert_non_null(strstr(out, "# brig left out 'fetch-retry-maxtimeout' (refers to an environment variable)"));
        free(out);
}

static void test_pip_conf_credentials_stay_out(void **state)
{
        (void)state;
        const char in[] = "[global]\nindex-url = https://u:TOK1X@p.test/simple\n"
                          "extra-index-url =\n  https://ok.test/simple\n  https://TOK2X@q.test/simple\n"
                          "Trusted_Host: ok.test\nclient-cert = /home/TOK3X.pem\nkeyring-provider = TOK4X\n"
                          "[install]\ntimeout = 10\n[bad section TOK5X\n";
        char *out = tools_filter_pip_conf(in, strlen(in));
        assert_non_null(out);
        assert_no_token(out, 5);
        assert_non_null(strstr(out, "[global]\n"));
        assert_non_null(strstr(out, "extra-index-url = \n    https://ok.test/simple\n"));
        assert_non_null(strstr(out, "trusted-host = ok.test\n"));
        assert_non_null(strstr(out, "[install]\ntimeout = 10\n"));
        free(out);
}

static void test_gitconfig_quotes_and_refuses_newlines(void **state)
{
        (void)state;
        char *out = tools_gitconfig("A \"B\" \\C", "a@b");
        assert_non_null(out);
        assert_non_null(strstr(out, "\tname = \"A \\\"B\\\" \\\\C\"\n\temail = \"a@b\"\n"));
        free(out);
        assert_null(tools_gitconfig("A\n[core]\n\tsshCommand = evil", "a@b"));
        assert_null(tools_gitconfig("A", "a@b\r"));
}

static size_t msg(uint8_t *buf, uint8_t type, const uint8_t *body, size_t n)
{
        uint32_t len = (uint32_t)(n + 1);
        buf[0] = (uint8_t)(len >> 24), buf[1] = (uint8_t)(len >> 16), buf[2] = (uint8_t)(len >> 8), buf[3] = (uint8_t)len;
        buf[4] = type;
        if (n)  /* body may be NULL for none */
                memcpy(buf + 5, body, n);
        return n + 5;
}

static size_t put_string(uint8_t *p, const void *s, size_t n)
{
        p[0] = (uint8_t)(n >> 24), p[1] = (uint8_t)(n >> 16), p[2] = (uint8_t)(n >> 8), p[3] = (uint8_t)n;
        memcpy(p + 4, s, n);
        return 4 + n;
}

/* A sign request with the key "kk" for a userauth request by METHOD with
 * the key LOGIN_KEY (the hostbound method adds a host key), TRAILING bytes
 * more. */
static size_t login_sign(uint8_t *buf, const char *method, const char *login_key, size_t trailing)
{
        uint8_t data[160], body[200];
        size_t d = put_string(data, "0123456789abcdef0123456789abcdef", 32);
        data[d++] = 50;
        d += put_string(data + d, "git", 3);
        d += put_string(data + d, "ssh-connection", 14);
        d += put_string(data + d, method, strlen(method));
        data[d++] = 1;
        d += put_string(data + d, "ssh-ed25519", 11);
        d += put_string(data + d, login_key, strlen(login_key));
        if (strstr(method, "hostbound"))
                d += put_string(data + d, "hk", 2);
        memset(data + d, 'x', trailing);
        d += trailing;
        size_t b = put_string(body, "kk", 2);
        b += put_string(body + b, data, d);
        memset(body + b, 0, 4);
        return msg(buf, SSH_AGENTC_SIGN_REQUEST, body, b + 4);
}

static void test_agent_judge(void **state)
{
        (void)state;
        uint8_t buf[256];
        size_t len, n;
        uint8_t type;
        n = msg(buf, SSH_AGENTC_REQUEST_IDENTITIES, NULL, 0);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_FORWARD);
        assert_int_equal(len, 5);
        assert_int_equal(sshagent_judge(buf, n - 1, &len, &type), AGENT_MORE);
        assert_int_equal(sshagent_judge(buf, 3, &len, &type), AGENT_MORE);
        /* identities with a payload: not the protocol's shape */
        n = msg(buf, SSH_AGENTC_REQUEST_IDENTITIES, (const uint8_t *)"x", 1);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
        /* sign: string key, string data, uint32 flags — data that is no
         * login is refused (an SSHSIG of a commit, anything) */
        static const uint8_t sign[] = { 0, 0, 0, 2, 'k', 'k', 0, 0, 0, 1, 'd', 0, 0, 0, 4 };
        n = msg(buf, SSH_AGENTC_SIGN_REQUEST, sign, sizeof sign);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE_NOT_LOGIN);
        assert_int_equal(len, n);
        /* a login (userauth request) with the key it names: passed on */
        n = login_sign(buf, "publickey", "kk", 0);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_FORWARD);
        assert_int_equal(len, n);
        n = login_sign(buf, "publickey-hostbound-v00@openssh.com", "kk", 0);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_FORWARD);
        /* another key in the login than the one asked to sign, another
         * method or service, trailing bytes */
        n = login_sign(buf, "publickey", "kx", 0);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE_NOT_LOGIN);
        n = login_sign(buf, "password", "kk", 0);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE_NOT_LOGIN);
        n = login_sign(buf, "publickey", "kk", 1);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE_NOT_LOGIN);
        static const uint8_t sign_bad_flags[] = { 0, 0, 0, 2, 'k', 'k', 0, 0, 0, 1, 'd', 0, 0, 1, 0 };
        n = msg(buf, SSH_AGENTC_SIGN_REQUEST, sign_bad_flags, sizeof sign_bad_flags);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
        static const uint8_t sign_long_string[] = { 0, 0, 0, 200, 'k', 'k', 0, 0, 0, 1, 'd', 0, 0, 0, 4 };
        n = msg(buf, SSH_AGENTC_SIGN_REQUEST, sign_long_string, sizeof sign_long_string);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
        static const uint8_t sign_trailing[] = { 0, 0, 0, 2, 'k', 'k', 0, 0, 0, 1, 'd', 0, 0, 0, 4, 9 };
        n = msg(buf, SSH_AGENTC_SIGN_REQUEST, sign_trailing, sizeof sign_trailing);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
        /* session-bind@openssh.com with its four fields passes (the agent
         * checks it, and keys' destination constraints with it); without
         * them, or another extension, it does not */
        {
                uint8_t body[128];
                size_t b = put_string(body, "session-bind@openssh.com", 24);
                b += put_string(body + b, "hostkey", 7);
                b += put_string(body + b, "0123456789abcdef0123456789abcdef", 32);
                b += put_string(body + b, "signature", 9);
                body[b++] = 0;
                n = msg(buf, SSH_AGENTC_EXTENSION, body, b);
                assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_FORWARD);
                n = msg(buf, SSH_AGENTC_EXTENSION, body, b - 1);
                assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
                body[b - 1] = 2;
                n = msg(buf, SSH_AGENTC_EXTENSION, body, b);
                assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
                memcpy(body + 4, "query@openssh.com\0\0\0\0\0\0\0", 24);
                n = msg(buf, SSH_AGENTC_EXTENSION, body, b);
                assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
        }
        /* add identity (17), remove all (19), lock (22), extension (27) */
        static const uint8_t refused[] = { 17, 18, 19, 20, 21, 22, 23, 25, 26, 27, 0, 255 };
        for (size_t i = 0; i < sizeof refused; i++) {
                n = msg(buf, refused[i], (const uint8_t *)"abc", 3);
                assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_REFUSE);
                assert_int_equal(type, refused[i]);
                assert_int_equal(len, n);
        }
        /* lengths the protocol does not allow */
        static const uint8_t zero[] = { 0, 0, 0, 0, 11 };
        assert_int_equal(sshagent_judge(zero, sizeof zero, &len, &type), AGENT_BAD);
        static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff, 11 };
        assert_int_equal(sshagent_judge(huge, sizeof huge, &len, &type), AGENT_BAD);
        /* two messages: the first is judged, the second stays */
        n = msg(buf, SSH_AGENTC_REQUEST_IDENTITIES, NULL, 0);
        n += msg(buf + n, 22, (const uint8_t *)"pw", 2);
        assert_int_equal(sshagent_judge(buf, n, &len, &type), AGENT_FORWARD);
        assert_int_equal(sshagent_judge(buf + len, n - len, &len, &type), AGENT_REFUSE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_passwd_home_replaced),
                cmocka_unit_test(test_passwd_uid_prefix_is_not_a_match),
                cmocka_unit_test(test_passwd_refuses_colon_in_home),
                cmocka_unit_test(test_npmrc_tokens_stay_out),
                cmocka_unit_test(test_pip_conf_credentials_stay_out),
                cmocka_unit_test(test_gitconfig_quotes_and_refuses_newlines),
                cmocka_unit_test(test_agent_judge),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
