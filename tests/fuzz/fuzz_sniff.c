/* fuzz_sniff.c — libFuzzer target for the filtered mode's first-bytes
 * readers (src/lib/net/sniff.c): the TLS ClientHello's server_name and
 * the HTTP/1.x Host. The first byte of the input says where a first read
 * ends; both readers see that prefix, then the whole stream, each from a
 * heap copy of exactly that many bytes (so any over-read is caught), and
 * must agree with themselves: a TLS verdict other than SNIFF_MORE never
 * changes with more bytes, and neither do the HTTP reader's; and below
 * the length sniff_tls_need() names, the TLS reader says "more" (or "bad").
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A name the sniffer returns is a normalized host name. */
static void check_name(const char *host)
{
        size_t n = strnlen(host, EGRESS_HOST_MAX + 1);
        if (n == 0 || n > EGRESS_HOST_MAX)
                abort();
        char again[EGRESS_HOST_MAX + 1];
        if (!egress_host_normalize(host, n, again) || strcmp(again, host) != 0)
                abort();
}

static int run(bool tls, const uint8_t *data, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy)
                abort();
        memcpy(copy, data, len);
        memset(host, 0, EGRESS_HOST_MAX + 1);
        int r = tls ? sniff_tls_sni(copy, len, host) : sniff_http_host((const char *)copy, len, host);
        free(copy);
        if (r != SNIFF_NOT_THIS && r != SNIFF_MORE && r != SNIFF_NAME && r != SNIFF_NO_NAME && r != SNIFF_BAD &&
            r != SNIFF_TOO_BIG)
                abort();
        if (!tls && (r == SNIFF_BAD || r == SNIFF_TOO_BIG))
                abort();
        if (r == SNIFF_NAME)
                check_name(host);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const uint8_t *stream = data + 1;
        size_t len = size - 1;
        size_t split = len ? (size_t)data[0] * len / 255 : 0;  /* the first read's end */
        if (split > len)
                split = len;
        for (int tls = 0; tls < 2; tls++) {
                char first[EGRESS_HOST_MAX + 1], whole[EGRESS_HOST_MAX + 1];
                int a = run(tls, stream, split, first);
                int b = run(tls, stream, len, whole);
                /* a name found in the first bytes is the name of the stream */
                if (a == SNIFF_NAME && b == SNIFF_NAME && strcmp(first, whole) != 0)
                        abort();
                /* a ClientHello is judged whole: every verdict but "more"
                 * is final, whatever bytes follow (a name cannot appear,
                 * change or vanish later) */
                if (tls && a != SNIFF_MORE && a != b)
                        abort();
                /* sniff_tls_need() is a lower bound: below it, still more
                 * (or a bad record header that came since) */
                if (tls) {
                        uint8_t *copy = malloc(split ? split : 1);
                        if (!copy)
                                abort();
                        memcpy(copy, stream, split);
                        size_t need = sniff_tls_need(copy, split);
                        free(copy);
                        if (need < split)
                                abort();
                        int c = need > split && need - 1 <= len ? run(tls, stream, need - 1, first) : SNIFF_MORE;
                        if (c != SNIFF_MORE && c != SNIFF_BAD)
                                abort();
                }
                if (!tls) {
                        /* the HTTP reader decides on the head alone */
                        if (a == SNIFF_NAME && b != SNIFF_NAME)
                                abort();
                        if (a == SNIFF_NOT_THIS && b != SNIFF_NOT_THIS)
                                abort();
                        if (a == SNIFF_NO_NAME && b != SNIFF_NO_NAME)
                                abort();
                }
        }
        return 0;
}

#include "replay.h"
