/* socks5.c — the SOCKS5 parser (RFC 1928) and the SOCKS4/4a one (pure
 * functions over a byte buffer, fuzzed by tests/fuzz/fuzz_socks.c). Only
 * "no authentication" and CONNECT are served: BIND and UDP ASSOCIATE
 * would open paths (a listening port, datagrams) the proxy does not
 * judge. SOCKS4 is served because clients pick it from a bare socks://
 * URL or SOCKS_VERSION=4 (Chromium among them), and turning them away
 * would only make them fail without saying why. */
#define _GNU_SOURCE
#include "net/net.h"

#include <string.h>

int socks5_parse_greeting(const uint8_t *buf, size_t len, bool *no_auth)
{
        *no_auth = false;
        if (len < 1)
                return 0;
        if (buf[0] != 5)
                return -1;
        if (len < 2)
                return 0;
        size_t n = buf[1];
        if (len < 2 + n)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (buf[2 + i] == 0x00)
                        *no_auth = true;
        return (int)(2 + n);
}

int socks5_parse_request(const uint8_t *buf, size_t len, struct socks5_request *req)
{
        memset(req, 0, sizeof *req);
        if (len < 4)
                return 0;
        if (buf[0] != 5 || buf[2] != 0)
                return -SOCKS_GENERAL_FAILURE;
        req->cmd = buf[1];
        if (req->cmd < 1 || req->cmd > 3)
                return -SOCKS_CMD_UNSUPPORTED;
        size_t need;
        switch (buf[3]) {
        case 0x01:  /* IPv4 */
                need = 4 + 4 + 2;
                if (len < need)
                        return 0;
                net_addr_from_v4(&req->addr, buf + 4);
                break;
        case 0x03: {  /* domain name: length byte, then the name */
                if (len < 5)
                        return 0;
                size_t n = buf[4];
                need = 5 + n + 2;
                if (len < need)
                        return 0;
                if (n == 0 || memchr(buf + 5, '\0', n))
                        return -SOCKS_GENERAL_FAILURE;
                req->is_name = true;
                memcpy(req->host, buf + 5, n);
                req->host[n] = '\0';
                break;
        }
        case 0x04:  /* IPv6 */
                need = 4 + 16 + 2;
                if (len < need)
                        return 0;
                net_addr_from_v6(&req->addr, buf + 4);
                break;
        default:
                return -SOCKS_ATYP_UNSUPPORTED;
        }
        req->port = (uint16_t)(buf[need - 2] << 8 | buf[need - 1]);
        return (int)need;
}

void socks5_reply(uint8_t out[10], uint8_t code)
{
        static const uint8_t base[10] = { 5, 0, 0, 1, 0, 0, 0, 0, 0, 0 };
        memcpy(out, base, sizeof base);
        out[1] = code;
}

/* SOCKS4 (the 1992 NEC text) and 4a (its name extension): VN=4, CD,
 * DSTPORT, DSTIP, a NUL-terminated USERID, and when DSTIP is 0.0.0.x with
 * x != 0 a NUL-terminated host name. Both strings are bounded: a client
 * that never sends the NUL is malformed, not "more". */
#define SOCKS4_FIELD_MAX 255

static int socks4_string(const uint8_t *buf, size_t len, size_t off, size_t *end)
{
        size_t avail = len - off < SOCKS4_FIELD_MAX + 1 ? len - off : SOCKS4_FIELD_MAX + 1;
        const uint8_t *nul = memchr(buf + off, '\0', avail);
        if (!nul)
                return avail == SOCKS4_FIELD_MAX + 1 ? -1 : 0;
        *end = (size_t)(nul - buf) + 1;
        return 1;
}

int socks4_parse_request(const uint8_t *buf, size_t len, struct socks5_request *req)
{
        memset(req, 0, sizeof *req);
        if (len < 1)
                return 0;
        if (buf[0] != 4)
                return -1;
        if (len < 9)
                return 0;
        req->cmd = buf[1];
        req->port = (uint16_t)(buf[2] << 8 | buf[3]);
        size_t end;
        int r = socks4_string(buf, len, 8, &end);  /* USERID */
        if (r <= 0)
                return r;
        if (buf[4] == 0 && buf[5] == 0 && buf[6] == 0 && buf[7] != 0) {
                size_t start = end;
                if (start == len)
                        return 0;
                r = socks4_string(buf, len, start, &end);
                if (r <= 0)
                        return r;
                if (end - start < 2)
                        return -1;  /* an empty name */
                req->is_name = true;
                memcpy(req->host, buf + start, end - start);  /* with its NUL */
        } else {
                net_addr_from_v4(&req->addr, buf + 4);
        }
        return (int)end;
}

void socks4_reply(uint8_t out[8], bool granted)
{
        memset(out, 0, 8);
        out[1] = granted ? 0x5a : 0x5b;
}
