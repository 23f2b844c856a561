/* fuzz_serve.c — libFuzzer target for what brig serve reads of a request
 * before any handler: the route and its parameters (route.c route_match),
 * JSON bodies held to a route's fields (body.c body_parse), base64
 * (b64_decode, which must round-trip b64_encode), the bytes-to-text
 * cleaning of output and messages (json_text_of_bytes), signals and
 * modes. The first byte picks which; the rest is the input.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct field fields[] = {
        { "argv", F_ARRAY_STRINGS, false }, { "cmd", F_STRING, false }, { "env", F_OBJECT_STRINGS, false },
        { "timeout_ms", F_INT, false }, { "tty", F_BOOL, false }, { "policy", F_OBJECT, false },
        { "signal", F_ANY, false }, { "tag", F_STRING, true }, { NULL, 0, false },
};

static void route(const char *text)
{
        /* "METHOD PATH" */
        const char *sp = strchr(text, ' ');
        if (!sp)
                return;
        char method[16];
        size_t n = (size_t)(sp - text) < sizeof method - 1 ? (size_t)(sp - text) : sizeof method - 1;
        memcpy(method, text, n);
        method[n] = '\0';
        struct route_params p;
        int r = route_match(method, sp + 1, &p);
        if (r >= 0) {
                if (r >= R_COUNT || strcmp(route_method((enum route)r), method) != 0)
                        abort();
                const char *t = route_template((enum route)r);
                if (strstr(t, "{name}") && !serve_name_valid(p.name))
                        abort();
                if (strstr(t, "{tag}") && !serve_tag_valid(p.tag))
                        abort();
                /* one path component each, never "." or ".." */
                if (strchr(p.name, '/') || strchr(p.tag, '/') || strcmp(p.name, "..") == 0 || strcmp(p.tag, "..") == 0 ||
                    strcmp(p.name, ".") == 0 || strcmp(p.tag, ".") == 0)
                        abort();
        } else if (r == ROUTE_BAD_NAME && !p.bad) {
                abort();
        }
}

static void body(const char *text, size_t len)
{
        const char *code, *field;
        char msg[256];
        json_t *doc = body_parse(text, len, len & 1, fields, &code, &field, msg, sizeof msg);
        if (doc) {
                const char *k;
                json_t *v;
                json_object_foreach(doc, k, v) {
                        const struct field *f = fields;
                        while (f->name && strcmp(f->name, k) != 0)
                                f++;
                        if (!f->name)
                                abort();  /* an unknown field let through */
                }
                if (len && !json_object_get(doc, "tag"))
                        abort();  /* a required field missing */
                json_decref(doc);
        } else if (!code || !msg[0]) {
                abort();
        }
}

static void b64(const char *text, size_t len)
{
        char *out = NULL;
        ssize_t n = b64_decode(text, len, &out);
        if (n >= 0) {
                char *again = b64_encode(out, (size_t)n);
                /* what decodes, encodes back to what it was (no second spelling) */
                if (!again || strlen(again) != len || memcmp(again, text, len) != 0)
                        abort();
                free(again);
        }
        free(out);
        char *enc = b64_encode(text, len);
        n = enc ? b64_decode(enc, strlen(enc), &out) : -1;
        if (n != (ssize_t)len || memcmp(out, text, len) != 0)
                abort();
        free(out);
        free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        /* a heap copy, NUL-terminated: an over-read is caught */
        char *buf = malloc(size);
        if (!buf)
                abort();
        memcpy(buf, data + 1, size - 1);
        buf[size - 1] = '\0';
        size_t len = size - 1;
        switch (data[0] % 5) {
        case 0:
                route(buf);
                break;
        case 1:
                body(buf, len);
                break;
        case 2:
                b64(buf, len);
                break;
        case 3: {
                json_t *s = json_text_of_bytes(buf, len);
                if (!s || !json_is_string(s))
                        abort();
                json_decref(s);
                break;
        }
        default: {
                json_t *s = json_stringn_nocheck(buf, strnlen(buf, len));
                int sig = signal_parse(s);
                if (sig != -1 && (sig < 1 || sig > 64))
                        abort();
                json_decref(s);
                int m = mode_parse(buf);
                if (m != -1 && (m < 0 || m > 07777))
                        abort();
        }
        }
        free(buf);
        return 0;
}

#include "replay.h"
