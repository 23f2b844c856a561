/* fuzz_socks.c — libFuzzer target for the SOCKS parsers
 * (src/lib/net/socks5.c): the SOCKS5 greeting, then the request, from one
 * stream of bytes as a client would send them, fed in two arbitrary
 * pieces to exercise the "need more bytes" paths; and the same bytes as
 * one SOCKS4/4a request, whole and cut short.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int step(const uint8_t *buf, size_t len, bool greeted)
{
        if (!greeted) {
                bool no_auth;
                return socks5_parse_greeting(buf, len, &no_auth);
        }
        struct socks5_request req;
        int r = socks5_parse_request(buf, len, &req);
        if (r > 0 && (size_t)r > len)
                abort();
        if (r > 0 && req.is_name && strlen(req.host) > 255)
                abort();
        /* an address has one form: an IPv4-mapped one is the IPv4 address,
         * as when it came as text (a CIDR rule judges both alike) */
        static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
        if (r > 0 && !req.is_name && req.addr.family == AF_INET6 && memcmp(req.addr.b, mapped, 12) == 0)
                abort();
        if (r > 0 && !req.is_name)
                (void)egress_classify(&req.addr);
        if (r < 0 && r != -SOCKS_GENERAL_FAILURE && r != -SOCKS_CMD_UNSUPPORTED && r != -SOCKS_ATYP_UNSUPPORTED)
                abort();
        return r;
}

/* SOCKS4: a verdict on a prefix agrees with the whole (more bytes never
 * change what a complete request said), and a name stays a C string. */
static void socks4(const uint8_t *buf, size_t len, size_t split)
{
        struct socks5_request whole, part;
        int r = socks4_parse_request(buf, len, &whole);
        if (r > 0 && ((size_t)r > len || (whole.is_name && strlen(whole.host) > 255)))
                abort();
        if (r < -1)
                abort();
        if (split > len)
                return;
        int p = socks4_parse_request(buf, split, &part);
        if (p > 0 && (p != r || part.port != whole.port || part.is_name != whole.is_name ||
                      strcmp(part.host, whole.host) != 0))
                abort();
        if (p < 0 && r >= 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        socks4(data + 1, size - 1, data[0] % size);
        size_t split = data[0] % (size);  /* the first byte: where the first read ends */
        uint8_t *buf = malloc(size);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        size_t len = size - 1, used = 0;
        bool greeted = false;
        /* first piece, then the whole: the parser must agree with itself */
        for (int round = 0; round < 2 && used <= len; round++) {
                size_t avail = round == 0 && split < len ? split : len;
                if (avail < used)
                        continue;
                int r = step(buf + used, avail - used, greeted);
                if (r < 0)
                        break;
                if (r > 0) {
                        used += (size_t)r;
                        if (greeted)
                                break;
                        greeted = true;
                        round--;  /* the request may already be there */
                }
        }
        free(buf);
        return 0;
}

#include "replay.h"
