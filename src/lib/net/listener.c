/* listener.c — the proxy's listening sockets, made by pid 1 inside the
 * sandbox's network namespace (which has only loopback) and handed to the
 * supervisor. They are bound to loopback only: nothing outside the sandbox
 * can reach them, and nothing listens on the host's own network. */
#define _GNU_SOURCE
#include "net/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <string.h>

#define LISTEN_BACKLOG 512

static int listen_on(int family, int type, uint16_t port, brig_error **err)
{
        struct net_addr a;
        struct sockaddr_storage ss;
        socklen_t len;
        net_addr_parse(family == AF_INET ? "127.0.0.1" : "::1", &a);
        net_addr_to_sockaddr(&a, port, &ss, &len);
        _cleanup_close_ int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return family == AF_INET6 ? -errno : brig_err(err, errno, "proxy listener socket");
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (type == SOCK_STREAM && listen(fd, LISTEN_BACKLOG) < 0)) {
                if (family == AF_INET6)
                        return -errno;  /* no ::1 (IPv6 disabled): IPv4 only */
                return brig_err(err, errno, "%s on 127.0.0.1:%u", type == SOCK_STREAM ? "listener" : "DNS socket",
                                port);
        }
        return TAKE_FD(fd);
}

int egress_make_listeners(int fds[], enum egress_listener_kind kinds[], size_t max, enum brig_net_mode mode,
                          bool ipv6_redirect, brig_error **err)
{
        /* NONE: only the DNS stub's datagram sockets, so a lookup gets
         * brig's NXDOMAIN at once (docs/network.md) */
        enum { P = 1 << BRIG_NET_PROXY, F = 1 << BRIG_NET_FILTERED, N = 1 << BRIG_NET_NONE };
        static const struct {
                int family, type;
                uint16_t port;
                enum egress_listener_kind kind;
                unsigned modes;
        } want[] = {
                { AF_INET, SOCK_STREAM, BRIG_HTTP_PROXY_PORT, EGRESS_HTTP, P | F },
                { AF_INET, SOCK_STREAM, BRIG_SOCKS_PROXY_PORT, EGRESS_SOCKS, P | F },
                { AF_INET6, SOCK_STREAM, BRIG_HTTP_PROXY_PORT, EGRESS_HTTP, P | F },
                { AF_INET6, SOCK_STREAM, BRIG_SOCKS_PROXY_PORT, EGRESS_SOCKS, P | F },
                { AF_INET, SOCK_STREAM, BRIG_TRANSPARENT_PORT, EGRESS_TRANSPARENT, F },
                { AF_INET6, SOCK_STREAM, BRIG_TRANSPARENT_PORT, EGRESS_TRANSPARENT, F },
                { AF_INET, SOCK_DGRAM, BRIG_DNS_PORT, EGRESS_DNS_UDP, F | N },
                { AF_INET6, SOCK_DGRAM, BRIG_DNS_PORT, EGRESS_DNS_UDP, F | N },
                { AF_INET, SOCK_STREAM, BRIG_DNS_PORT, EGRESS_DNS_TCP, F },
                { AF_INET6, SOCK_STREAM, BRIG_DNS_PORT, EGRESS_DNS_TCP, F },
        };
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                if (!(want[i].modes & (1u << mode)))
                        continue;
                if (want[i].kind == EGRESS_TRANSPARENT && want[i].family == AF_INET6 && !ipv6_redirect)
                        continue;
                int fd = n == max ? brig_err(err, ENOBUFS, "too many listeners")
                                  : listen_on(want[i].family, want[i].type, want[i].port, err);
                if (fd < 0 && want[i].family == AF_INET6 && n < max)
                        continue;
                if (fd < 0) {
                        while (n)
                                close(fds[--n]);
                        return fd;
                }
                fds[n] = fd;
                kinds[n++] = want[i].kind;
        }
        return (int)n;
}
