/* egress_dns.c — filtered mode's DNS stub on its sockets: UDP datagrams
 * and TCP connections (two-byte length, message). The answers are
 * dnsstub.c's. */
#define _GNU_SOURCE
#include "net/proxy.h"

#include <string.h>
#include <sys/socket.h>

#define DNS_TCP_QUERY_MAX 1500       /* a question, even with EDNS options, is far smaller */

/* DNS over UDP: one datagram, one answer, from the socket it came to (the
 * kernel turns the source back into the address the program asked). */
void dns_udp_serve(struct egress *e, struct listener *l)
{
        for (int i = 0; i < 64; i++) {
                uint8_t query[1500], reply[512];
                struct sockaddr_storage peer;
                socklen_t plen = sizeof peer;
                ssize_t n = recvfrom(l->w.fd, query, sizeof query, MSG_DONTWAIT, (struct sockaddr *)&peer, &plen);
                if (n < 0)
                        return;
                size_t len = dns_stub_answer(&e->stub, query, (size_t)n, reply, sizeof reply, "udp");
                if (len)
                        (void)sendto(l->w.fd, reply, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&peer, plen);
        }
}

/* DNS over TCP: two-byte length, message; as many as the client sends. */
void dns_tcp_read(struct conn *c)
{
        if (!c->in && !(c->in = malloc(c->in_cap = 2 + DNS_TCP_QUERY_MAX))) {
                conn_close(c);
                return;
        }
        ssize_t n = recv(c->cw.fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                conn_close(c);
                return;
        }
        c->in_len += (size_t)n;
        c->last_ms = now_ms();
        while (c->in_len >= 2) {
                size_t mlen = (size_t)(uint8_t)c->in[0] << 8 | (uint8_t)c->in[1];
                if (mlen > DNS_TCP_QUERY_MAX) {
                        conn_close(c);  /* no resolver asks that much: not worth the memory */
                        return;
                }
                if (c->in_len < 2 + mlen)
                        return;
                uint8_t reply[2 + 4096];
                size_t len = dns_stub_answer(&c->e->stub, (const uint8_t *)c->in + 2, mlen, reply + 2,
                                             sizeof reply - 2, "tcp");
                reply[0] = (uint8_t)(len >> 8);
                reply[1] = (uint8_t)len;
                /* a small answer on a connection that reads its answers: if
                 * the send buffer can't take it whole, the client is not a
                 * resolver worth waiting for */
                if (len && send(c->cw.fd, reply, len + 2, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(len + 2)) {
                        conn_close(c);
                        return;
                }
                memmove(c->in, c->in + 2 + mlen, c->in_len - 2 - mlen);
                c->in_len -= 2 + mlen;
        }
}
