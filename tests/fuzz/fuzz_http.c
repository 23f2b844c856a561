/* fuzz_http.c — libFuzzer target for the HTTP proxy's request parser and
 * rewriter (src/lib/net/http.c): the first thing the proxy does with bytes
 * from inside the sandbox.
 *
 * Checks, beyond "no crash": a complete head lies within the input; the
 * target's host is a C string of bounded length; the rewritten request ends
 * with "Connection: close" and a blank line and fits its documented bound.
 * The same bytes then go through the response-head parser and rewriter and
 * the chunked-body follower (the upstream's side of plain-http keep-alive):
 * a chunked body never claims bytes past its end or past the input.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* an exact-size copy, so ASan catches any read past the end */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct http_request req;
        const char *why = NULL;
        int r = http_parse_request(buf, size, &req, &why);
        if (r < 0 && !why)
                abort();
        if (r == 1) {
                if (req.head_len > size || strlen(req.host) >= sizeof req.host)
                        abort();
                char norm[EGRESS_HOST_MAX + 1];
                struct net_addr a;
                if (!net_addr_parse_lenient(req.host, &a))
                        (void)egress_host_normalize(req.host, strlen(req.host), norm);
                if (req.kind == HTTP_FORWARD) {
                        size_t len;
                        char *out = http_rewrite_request(buf, &req, &len);
                        static const char tail[] = "Connection: close\r\n\r\n";
                        if (!out || len > 2 * req.head_len + req.auth_len + 64 || len < sizeof tail - 1 ||
                            memcmp(out + len - (sizeof tail - 1), tail, sizeof tail - 1) != 0)
                                abort();
                        free(out);
                }
        }
        /* the same bytes as an upstream's response head, then as a chunked body */
        struct http_response resp;
        why = NULL;
        r = http_parse_response(buf, size, &resp, &why);
        if (r < 0 && !why)
                abort();
        if (r == 1) {
                if (resp.head_len > size || resp.status < 100 || resp.status > 999 || (resp.has_length && resp.has_te))
                        abort();
                size_t len;
                char *out = http_rewrite_response(buf, &resp, size & 1, &len);
                if (!out || len > 2 * resp.head_len + 32 || len < 4 || memcmp(out + len - 4, "\r\n\r\n", 4) != 0)
                        abort();
                free(out);
        }
        struct http_chunk ch = { 0 };
        ssize_t used = http_chunk_feed(&ch, buf, size / 2);
        if (used >= 0 && !ch.done) {
                ssize_t more = http_chunk_feed(&ch, buf + size / 2, size - size / 2);
                if (more > (ssize_t)(size - size / 2))
                        abort();
        }
        if (used > (ssize_t)(size / 2) || (used >= 0 && (size_t)used < size / 2 && !ch.done))
                abort();
        free(buf);
        return 0;
}

#include "replay.h"
