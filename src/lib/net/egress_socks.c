/* egress_socks.c — the SOCKS front end of the proxy ports: the SOCKS5
 * greeting and request, SOCKS4 and 4a, and SOCKS refusals. The parsers are
 * socks5.c's; a CONNECT is judged by the connection core (egress.c). */
#define _GNU_SOURCE
#include "net/proxy.h"

#include <sys/socket.h>

void socks_refuse(struct conn *c, uint8_t code)
{
        uint8_t r[10];
        if (c->socks4) {
                socks4_reply(r, false);  /* SOCKS4 has one code for every failure */
                conn_refuse_with(c, (const char *)r, 8);
                return;
        }
        socks5_reply(r, code);
        conn_refuse_with(c, (const char *)r, sizeof r);
}

/* A SOCKS request, parsed: CONNECT is judged like every other target. */
static void socks_connect(struct conn *c, const struct socks5_request *req)
{
        c->port = req->port;
        if (req->cmd != 1) {
                /* BIND and UDP ASSOCIATE would open paths the proxy does
                 * not judge (an inbound port, datagrams): refused. */
                const char *why = req->cmd == 2 ? (c->socks4 ? "SOCKS4 BIND not supported" : "SOCKS5 BIND not supported")
                                  : c->socks4   ? "SOCKS4 command not supported"
                                                : "SOCKS5 UDP ASSOCIATE not supported";
                log_decision(c, false, why, req->is_name ? NULL : &req->addr);
                socks_refuse(c, SOCKS_CMD_UNSUPPORTED);
                return;
        }
        set_interest(c->e, &c->cw, 0);
        if (req->is_name)
                judge_target(c, req->host, req->port);
        else
                on_addresses(c, &req->addr, 1, false);
}

static void on_socks4_bytes(struct conn *c)
{
        struct socks5_request req;
        int r = socks4_parse_request((const uint8_t *)c->in, c->in_len, &req);
        if (r == 0)
                return;
        if (r < 0) {
                log_decision(c, false, "malformed SOCKS4 request (a user id or name over 255 bytes, or no name)", NULL);
                socks_refuse(c, SOCKS_GENERAL_FAILURE);
                return;
        }
        c->in_used = (size_t)r;
        socks_connect(c, &req);
}

void on_socks_bytes(struct conn *c)
{
        const uint8_t *b = (const uint8_t *)c->in + c->in_used;
        size_t len = c->in_len - c->in_used;
        if (c->socks4) {
                on_socks4_bytes(c);
                return;
        }
        if (!c->greeted) {
                bool no_auth;
                int r = socks5_parse_greeting(b, len, &no_auth);
                if (r == 0)
                        return;
                if (r < 0) {  /* cannot happen: the first byte said SOCKS5 */
                        conn_close(c);
                        return;
                }
                if (!no_auth) {
                        log_decision(c, false, "SOCKS5 client offers no 'no authentication' method", NULL);
                        conn_refuse_with(c, "\x05\xff", 2);
                        return;
                }
                /* Two bytes on a fresh socket: the send buffer takes them. */
                if (send(c->cw.fd, "\x05\x00", 2, MSG_NOSIGNAL | MSG_DONTWAIT) != 2) {
                        conn_close(c);
                        return;
                }
                c->greeted = true;
                c->in_used += (size_t)r;
                b += r;
                len -= (size_t)r;
        }
        struct socks5_request req;
        int r = socks5_parse_request(b, len, &req);
        if (r == 0)
                return;
        if (r < 0) {
                log_decision(c, false, r == -SOCKS_ATYP_UNSUPPORTED ? "SOCKS5 address type not supported"
                                       : r == -SOCKS_CMD_UNSUPPORTED ? "SOCKS5 command not supported"
                                                                     : "malformed SOCKS5 request",
                             NULL);
                socks_refuse(c, (uint8_t)-r);
                return;
        }
        c->in_used += (size_t)r;
        socks_connect(c, &req);
}
