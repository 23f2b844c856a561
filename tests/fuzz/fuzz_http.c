/* fuzz_http.c — libFuzzer target for the HTTP proxy's request parser and
 * rewriter (src/lib/net/http.c): the first thing the proxy does with bytes
 * from inside the sandbox.
 *
 * Checks, beyond "no crash": a complete head lies within the input; the
 * target's host is a C string of bounded length; the rewritten request ends
 * with "Connection: close" (a direct upgrade request: "Connection: upgrade")
 * and a blank line and fits its documented bound;
 * an accepted head holds no bare CR and no control byte but HTAB, CR LF,
 * and no request is accepted with both Content-Length and
 * Transfer-Encoding. The same for the direct (filtered mode) parser, whose
 * origin-form requests rewrite the same way.
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

/* What an accepted head may hold: CR only before LF, no control byte. */
static void check_head_bytes(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)buf[i];
                if ((c == '\r' && (i + 1 == len || buf[i + 1] != '\n')) ||
                    (c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f)
                        abort();
        }
}

static void check_request(const char *buf, size_t size, bool direct)
{
        struct http_request req;
        const char *why = NULL;
        int r = direct ? http_parse_direct(buf, size, &req, &why) : http_parse_request(buf, size, &req, &why);
        if (r < 0 && !why)
                abort();
        if (r != 1)
                return;
        if (req.head_len > size || strlen(req.host) >= sizeof req.host)
                abort();
        check_head_bytes(buf, req.head_len);
        if (req.has_te && req.length)
                abort();
        if ((req.kind == HTTP_ORIGIN && !direct) || (req.kind == HTTP_CONNECT && direct))
                abort();
        if (req.auth_off + req.auth_len > req.head_len || req.path_off + req.path_len > req.head_len)
                abort();
        char norm[EGRESS_HOST_MAX + 1];
        struct net_addr a;
        if (req.host[0] && !net_addr_parse_lenient(req.host, &a))
                (void)egress_host_normalize(req.host, strlen(req.host), norm);
        if (req.kind != HTTP_CONNECT) {
                size_t len;
                char *out = http_rewrite_request(buf, &req, &len);
                const char *tail = req.upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: close\r\n\r\n";
                size_t tl = strlen(tail);
                if (!out || len > 2 * req.head_len + req.auth_len + 64 || len < tl ||
                    memcmp(out + len - tl, tail, tl) != 0 || (req.upgrade && !direct))
                        abort();
                check_head_bytes(out, len);
                free(out);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* an exact-size copy, so ASan catches any read past the end */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        for (int direct = 0; direct < 2; direct++)
                check_request(buf, size, direct);
        /* the same bytes as an upstream's response head, then as a chunked body */
        struct http_response resp;
        const char *why = NULL;
        int r = http_parse_response(buf, size, &resp, &why);
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
        ssize_t whole[2];
        bool done[2];
        for (int strict = 0; strict < 2; strict++) {
                struct http_chunk ch = { .strict = strict };
                ssize_t used = http_chunk_feed(&ch, buf, size / 2);
                if (used >= 0 && !ch.done) {
                        ssize_t more = http_chunk_feed(&ch, buf + size / 2, size - size / 2);
                        if (more > (ssize_t)(size - size / 2))
                                abort();
                }
                if (used > (ssize_t)(size / 2) || (used >= 0 && (size_t)used < size / 2 && !ch.done))
                        abort();
                struct http_chunk one = { .strict = strict };
                whole[strict] = http_chunk_feed(&one, buf, size);
                done[strict] = one.done;
        }
        /* strict accepts a subset, and ends a body where the lenient one does */
        if (whole[1] >= 0 && done[1] && (whole[0] != whole[1] || !done[0]))
                abort();
        /* the interceptor's walk (framing a byte at a time, each data run
         * whole as http_chunk_data_left says) ends where one feed does, and
         * its data runs never pass the input */
        struct http_chunk walk = { 0 };
        size_t at = 0;
        while (at < size && !walk.done) {
                uint64_t data = http_chunk_data_left(&walk);
                size_t m = !data ? 1 : size - at < data ? size - at : (size_t)data;
                if (http_chunk_feed(&walk, buf + at, m) != (ssize_t)m)
                        break;
                at += m;
        }
        if (whole[0] >= 0 && walk.done != done[0])
                abort();
        if (walk.done && (ssize_t)at != whole[0])
                abort();
        free(buf);
        return 0;
}

#include "replay.h"
