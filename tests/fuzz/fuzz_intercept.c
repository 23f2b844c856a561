/* fuzz_intercept.c — libFuzzer target for the interceptor's request path
 * (src/lib/net/secrets.c, httprules.c): a request head from inside the
 * sandbox, parsed as a direct request, judged for a host with a bound
 * secret and http rules, and rewritten with the placeholders swapped.
 *
 * Checks, beyond "no crash":
 *   - a forwarded head holds no placeholder, ends in a blank line, and
 *     holds the value only when the request named the placeholder in the
 *     secret's header, to its bound host, over verified TLS;
 *   - a refusal says why, and a refusal for a placeholder names a secret;
 *   - nothing is ever forwarded for the unverified (plain http) judgement
 *     when the head holds a placeholder;
 *   - a normalised path starts with '/', holds no ';', '\', "//", and no
 *     "." or ".." segment, and fits its buffer;
 *   - the bytes after the head, as a body (plain and chunked) cut into
 *     pieces of sizes the input picks: placeholder_scan finds a
 *     placeholder in some piece exactly when the body's data (dechunked)
 *     holds one, wherever the cuts fall;
 *   - the whole input as a response from the bound host: echo_find finds
 *     the value whenever it (or a run of `partial` of its bytes, or its
 *     hex) is there, also once decoded; echo_decode never grows its input.
 *
 * Build and run with tests/fuzz/run-fuzz-net; without -DBRIG_LIBFUZZER a
 * main() replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/intercept.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *hosts[] = { "api.example.com" };
static char *methods[] = { "GET", "POST" };
static char *paths[] = { "/v1/messages", "/v1/models/*", "/files/**" };
static struct secret_spec spec = { .name = "TOKEN", .source = "env:X", .hosts = hosts, .n_hosts = 1,
                                   .header = "authorization" };
static struct http_rule rule = { .host = "api.example.com", .methods = methods, .n_methods = 2, .paths = paths,
                                 .n_paths = 3 };
static struct intercept_policy policy = { .secrets = &spec, .n_secrets = 1, .rules = &rule, .n_rules = 1 };
static char value[] = "VALUE-0123456789";

static char hex_lo[] = "56414c55452d30313233343536373839", hex_up[] = "56414C55452D30313233343536373839";
static uint8_t all_runs[ECHO_RUN_BITS / 8];

static struct intercept *make(void)
{
        static struct intercept ic;
        if (!ic.n) {
                /* every run's bit set: each 8-byte run is measured against the value */
                memset(all_runs, 0xff, sizeof all_runs);
                ic.secrets[0].hex[0] = hex_lo;
                ic.secrets[0].hex[1] = hex_up;
                ic.secrets[0].hex_len = strlen(hex_lo);
                ic.secrets[0].partial = 12;
                ic.secrets[0].step = 12 - ECHO_RUN + 1;
                ic.secrets[0].runs = all_runs;
                ic.policy = &policy;
                ic.n = 1;
                ic.secrets[0].spec = &spec;
                /* what the corpus spells: brig-secret-TOKEN-00112233445566778899aabbccddeeff */
                memcpy(ic.secrets[0].token, "00112233445566778899aabbccddeeff", 33);
                snprintf(ic.secrets[0].placeholder, sizeof ic.secrets[0].placeholder, "brig-secret-TOKEN-%s",
                         "00112233445566778899aabbccddeeff");
                ic.secrets[0].value = value;
                ic.secrets[0].value_len = strlen(value);
        }
        return &ic;
}

static void check_path(const char *p, size_t n)
{
        char out[1024];
        const char *bad = http_path_normalize(p, n, out, sizeof out);
        if (bad)
                return;
        size_t len = strlen(out);
        if (len >= sizeof out || out[0] != '/' || strchr(out, ';') || strchr(out, '\\') || strstr(out, "//") ||
            strstr(out, "/./") || strstr(out, "/../"))
                abort();
        if ((len >= 2 && strcmp(out + len - 2, "/.") == 0) || (len >= 3 && strcmp(out + len - 3, "/..") == 0))
                abort();
}

static void judge(const struct intercept *ic, const char *buf, const struct http_request *req, bool verified,
                  const char *host)
{
        struct intercept_verdict v;
        intercept_judge_head(ic, &policy, host, verified, buf, req, &v);
        bool had = intercept_find(ic, buf, req->head_len, NULL) != NULL;
        if (v.status) {
                if (!v.reason[0] || v.head)
                        abort();
                if (v.secret && v.secret != &ic->secrets[0])
                        abort();
                return;
        }
        if (!v.head || v.head_len < 4 || memcmp(v.head + v.head_len - 4, "\r\n\r\n", 4) != 0)
                abort();
        if (intercept_find(ic, v.head, v.head_len, NULL))
                abort();  /* a placeholder went on */
        if (had && (!verified || !host))
                abort();  /* swapped where nothing was verified */
        bool valued = memmem(v.head, v.head_len, value, strlen(value)) != NULL;
        bool basic = memmem(v.head, v.head_len, "VkFMVUUtMDEyMzQ1Njc4OQ", 22) != NULL;  /* base64 of it */
        if ((valued || basic) && !had && !memmem(buf, req->head_len, value, strlen(value)) &&
            !memmem(buf, req->head_len, "VkFMVUUtMDEyMzQ1Njc4OQ", 22))
                abort();  /* a value from nowhere */
        if (had && !secret_bound_to(&ic->secrets[0], host))
                abort();
        free(v.head);
}

/* The body in pieces: does the scan find what a search of the whole finds? */
static void scan_body(const struct intercept *ic, const char *body, size_t n, bool chunked, const uint8_t *cuts,
                      size_t n_cuts)
{
        static char data[1 << 16];
        size_t dl = 0, end = n;
        if (chunked) {
                /* the oracle: the data alone, as far as the framing holds */
                struct http_chunk ch = { .strict = true };
                for (size_t i = 0; i < n && !ch.done; i++) {
                        bool is_data = http_chunk_data_left(&ch) > 0;
                        if (http_chunk_feed(&ch, body + i, 1) != 1) {
                                end = i;
                                break;
                        }
                        if (is_data && dl < sizeof data)
                                data[dl++] = body[i];
                        end = i + 1;
                }
        } else {
                memcpy(data, body, n < sizeof data ? n : sizeof data);
                dl = n < sizeof data ? n : sizeof data;
        }
        bool want = intercept_find(ic, data, dl, NULL) != NULL;
        struct placeholder_scan ps = { .chunked = chunked, .ch.strict = true };
        bool got = false;
        for (size_t off = 0, k = 0; off < end && !got; k++) {
                size_t m = n_cuts ? (size_t)cuts[k % n_cuts] % 64 + 1 : end - off;
                if (m > end - off)
                        m = end - off;
                got = placeholder_scan(ic, &ps, body + off, m) != NULL;
                off += m;
        }
        if (got != want)
                abort();
}

/* Is a run of at least k bytes of the value in p? */
static bool has_run(const char *p, size_t n, size_t k)
{
        size_t vl = strlen(value);
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < vl; j++) {
                        size_t l = 0;
                        while (i + l < n && j + l < vl && p[i + l] == value[j + l])
                                l++;
                        if (l >= k)
                                return true;
                }
        return false;
}

static void echo(const struct intercept *ic, const char *p, size_t n)
{
        static char scratch[1 << 16], decoded[1 << 16];
        if (n > sizeof scratch)
                return;
        size_t dn = echo_decode(p, n, decoded);
        if (dn > n)
                abort();
        bool want = has_run(p, n, 12) || has_run(decoded, dn, 12) || memmem(p, n, hex_lo, strlen(hex_lo)) ||
                    memmem(p, n, hex_up, strlen(hex_up));
        const struct secret *s = echo_find(ic, "api.example.com", p, n, scratch);
        if (want && !s)
                abort();  /* an echo let through */
        if (echo_find(ic, "other.example.com", p, n, scratch))
                abort();  /* a host the value never went to */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct intercept *ic = make();
        if (size <= 4096)
                echo(ic, (const char *)data, size);
        const char *buf = (const char *)data;
        struct http_request req;
        const char *why = NULL;
        check_path(buf, size < 2048 ? size : 2048);
        if (http_parse_direct(buf, size, &req, &why) != 1)
                return 0;
        check_path(buf + req.path_off, req.path_len);
        judge(ic, buf, &req, true, "api.example.com");
        judge(ic, buf, &req, true, "other.example.com");
        judge(ic, buf, &req, false, NULL);
        /* the cuts: the head's own bytes pick them */
        size_t body = size - req.head_len;
        if (body <= sizeof(((struct secret *)0)->placeholder) * 64) {
                scan_body(ic, buf + req.head_len, body, false, data, req.head_len < 16 ? req.head_len : 16);
                scan_body(ic, buf + req.head_len, body, true, data, req.head_len < 16 ? req.head_len : 16);
        }
        return 0;
}

#ifndef BRIG_LIBFUZZER
int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                FILE *f = fopen(argv[i], "rb");
                if (!f)
                        continue;
                static uint8_t buf[1 << 16];
                size_t n = fread(buf, 1, sizeof buf, f);
                fclose(f);
                LLVMFuzzerTestOneInput(buf, n);
        }
        return 0;
}
#endif
