/* socks5.c — the SOCKS5 parser (RFC 1928; pure functions over a byte
 * buffer, fuzzed by tests/fuzz/fuzz_socks.c). Only "no authentication"
 * and CONNECT are served: BIND and UDP ASSOCIATE would open paths (a
 * listening port, datagrams) the proxy does not judge. */
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
                req->addr.family = AF_INET6;
                memcpy(req->addr.b, buf + 4, 16);
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
