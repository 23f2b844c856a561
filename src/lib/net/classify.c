/* classify.c — what kind of address is this? (pure functions)
 *
 * Every address the proxy would connect to — resolved or sent literally —
 * passes through egress_classify(); anything but ADDR_PUBLIC is refused
 * unless an --allow-cidr rule names it. The point is that an allowed *name*
 * must not become a way into the host's loopback services, the LAN, or a
 * cloud metadata endpoint, whatever its DNS answers say. */
#define _GNU_SOURCE
#include "net/net.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static const uint8_t v4mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

void net_addr_from_v4(struct net_addr *a, const uint8_t v4[4])
{
        a->family = AF_INET;
        memcpy(a->b, v4mapped_prefix, 12);
        memcpy(a->b + 12, v4, 4);
}

/* ::ffff:a.b.c.d is a.b.c.d on the wire: one form, so an IPv4 CIDR rule
 * or class applies to both spellings alike — whether the address came as
 * text, from a socket or in a SOCKS5 request's 16 bytes. */
void net_addr_from_v6(struct net_addr *a, const uint8_t v6[16])
{
        memcpy(a->b, v6, 16);
        a->family = memcmp(a->b, v4mapped_prefix, 12) == 0 ? AF_INET : AF_INET6;
}

void net_addr_from_sockaddr(struct net_addr *a, const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
                net_addr_from_v4(a, (const uint8_t *)&in->sin_addr);
        } else {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
                net_addr_from_v6(a, (const uint8_t *)&in6->sin6_addr);
        }
}

void net_addr_to_sockaddr(const struct net_addr *a, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
        memset(ss, 0, sizeof *ss);
        if (a->family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *)ss;
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
                memcpy(&in->sin_addr, a->b + 12, 4);
                *len = sizeof *in;
        } else {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
                memcpy(&in6->sin6_addr, a->b, 16);
                *len = sizeof *in6;
        }
}

void net_addr_format(const struct net_addr *a, char *buf, size_t size)
{
        if (!inet_ntop(a->family, a->family == AF_INET ? a->b + 12 : a->b, buf, (socklen_t)size))
                snprintf(buf, size, "?");
}

bool net_addr_parse(const char *s, struct net_addr *a)
{
        char tmp[INET6_ADDRSTRLEN + 2];
        size_t n = strlen(s);
        if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
                if (n - 2 >= sizeof tmp)
                        return false;
                memcpy(tmp, s + 1, n - 2);
                tmp[n - 2] = '\0';
                s = tmp;
        }
        uint8_t v4[4];
        if (inet_pton(AF_INET, s, v4) == 1) {
                net_addr_from_v4(a, v4);
                return true;
        }
        if (strchr(s, '%'))  /* zone ids: no link-local scoping through the proxy */
                return false;
        uint8_t v6[16];
        if (inet_pton(AF_INET6, s, v6) == 1) {
                net_addr_from_v6(a, v6);
                return true;
        }
        return false;
}

bool net_addr_parse_lenient(const char *s, struct net_addr *a)
{
        if (net_addr_parse(s, a))
                return true;
        /* inet_aton is exactly the legacy grammar (hex, octal, 1-3 parts)
         * that getaddrinfo and most clients accept for IPv4. */
        struct in_addr in;
        size_t n = strlen(s);
        char tmp[64];
        if (n && n < sizeof tmp && s[n - 1] == '.') {  /* "127.0.0.1." */
                memcpy(tmp, s, n - 1);
                tmp[n - 1] = '\0';
                s = tmp;
        }
        if (inet_aton(s, &in)) {
                net_addr_from_v4(a, (const uint8_t *)&in);
                return true;
        }
        return false;
}

/* ---- ranges ---------------------------------------------------------------- */

static bool in_v4(const uint8_t ip[4], uint8_t a, uint8_t b, uint8_t c, uint8_t d, int bits)
{
        uint32_t x = (uint32_t)ip[0] << 24 | (uint32_t)ip[1] << 16 | (uint32_t)ip[2] << 8 | ip[3];
        uint32_t net = (uint32_t)a << 24 | (uint32_t)b << 16 | (uint32_t)c << 8 | d;
        uint32_t mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
        return (x & mask) == (net & mask);
}

static bool prefix_match(const uint8_t *x, const uint8_t *net, int bits)
{
        int full = bits / 8, rest = bits % 8;
        if (memcmp(x, net, (size_t)full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (x[full] & mask) == (net[full] & mask);
}

static enum addr_class classify_v4(const uint8_t ip[4])
{
        static const struct {
                uint8_t a, b, c, d;
                int bits;
                enum addr_class cls;
        } table[] = {
                { 169, 254, 169, 254, 32, ADDR_METADATA },  /* before link-local: the more telling name */
                /* Metadata and platform endpoints outside link-local: in
                 * CGNAT space, which --allow-private-host opens to a name
                 * (Alibaba Cloud's instance metadata), and in public space
                 * (Azure's WireServer, which hands a VM its certificates
                 * and extensions). */
                { 100, 100, 100, 200, 32, ADDR_METADATA },
                { 168, 63, 129, 16, 32, ADDR_METADATA },
                { 127, 0, 0, 0, 8, ADDR_LOOPBACK },
                { 0, 0, 0, 0, 32, ADDR_UNSPECIFIED },
                { 0, 0, 0, 0, 8, ADDR_THIS_NETWORK },       /* Linux connects 0.x to the local host */
                { 10, 0, 0, 0, 8, ADDR_PRIVATE },
                { 172, 16, 0, 0, 12, ADDR_PRIVATE },
                { 192, 168, 0, 0, 16, ADDR_PRIVATE },
                { 100, 64, 0, 0, 10, ADDR_CGNAT },
                { 169, 254, 0, 0, 16, ADDR_LINK_LOCAL },
                { 192, 0, 0, 0, 24, ADDR_RESERVED },        /* IETF protocol assignments */
                { 192, 0, 2, 0, 24, ADDR_DOCUMENTATION },
                { 198, 51, 100, 0, 24, ADDR_DOCUMENTATION },
                { 203, 0, 113, 0, 24, ADDR_DOCUMENTATION },
                { 192, 88, 99, 0, 24, ADDR_RESERVED },      /* deprecated 6to4 relay anycast */
                { 198, 18, 0, 0, 15, ADDR_BENCHMARKING },
                { 224, 0, 0, 0, 4, ADDR_MULTICAST },
                { 255, 255, 255, 255, 32, ADDR_BROADCAST },
                { 240, 0, 0, 0, 4, ADDR_RESERVED },
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (in_v4(ip, table[i].a, table[i].b, table[i].c, table[i].d, table[i].bits))
                        return table[i].cls;
        return ADDR_PUBLIC;
}

enum addr_class egress_classify(const struct net_addr *a)
{
        const uint8_t *b = a->b;
        static const uint8_t zero[16];
        /* IPv4 embedded in IPv6: the kernel or a translator delivers these
         * to the IPv4 address inside, so that address is what counts. */
        if (a->family == AF_INET || memcmp(b, v4mapped_prefix, 12) == 0)
                return classify_v4(b + 12);
        static const uint8_t nat64[12] = { 0, 0x64, 0xff, 0x9b };
        if (memcmp(b, nat64, 12) == 0)
                return classify_v4(b + 12);
        /* ::ffff:0:a.b.c.d (SIIT, RFC 2765) */
        static const uint8_t siit[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0 };
        if (memcmp(b, siit, 12) == 0)
                return classify_v4(b + 12);
        if (b[0] == 0x20 && b[1] == 0x02)  /* 6to4: 2002:a.b.c.d::/48 */
                return classify_v4(b + 2);
        if (memcmp(b, zero, 16) == 0)
                return ADDR_UNSPECIFIED;
        if (memcmp(b, zero, 15) == 0 && b[15] == 1)
                return ADDR_LOOPBACK;
        if (memcmp(b, zero, 12) == 0)  /* deprecated IPv4-compatible ::a.b.c.d */
                return classify_v4(b + 12);
        /* Cloud metadata and credential endpoints on unique-local
         * addresses, which --allow-private-host opens to a name: AWS's
         * service prefix fd00:ec2::/32 (instance metadata ::254, the EKS pod
         * identity agent's credentials ::23, DNS ::253), Google's metadata
         * server fd20:ce::254, Oracle's fd00:c1::a9fe:a9fe. */
        static const uint8_t aws[] = { 0xfd, 0x00, 0x0e, 0xc2 };
        static const uint8_t gcp[16] = { 0xfd, 0x20, 0x00, 0xce, [14] = 0x02, [15] = 0x54 };
        static const uint8_t oci[16] = { 0xfd, 0x00, 0x00, 0xc1, [12] = 0xa9, 0xfe, 0xa9, 0xfe };
        if (prefix_match(b, aws, 32) || memcmp(b, gcp, 16) == 0 || memcmp(b, oci, 16) == 0)
                return ADDR_METADATA;
        if (b[0] == 0xff)
                return ADDR_MULTICAST;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
                return ADDR_LINK_LOCAL;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)  /* deprecated site-local fec0::/10 */
                return ADDR_PRIVATE;
        if ((b[0] & 0xfe) == 0xfc)
                return ADDR_ULA;
        static const uint8_t doc[] = { 0x20, 0x01, 0x0d, 0xb8 }, doc2[] = { 0x3f, 0xff, 0x00 };
        if (prefix_match(b, doc, 32) || prefix_match(b, doc2, 20))
                return ADDR_DOCUMENTATION;
        static const uint8_t bench[] = { 0x20, 0x01, 0x00, 0x02, 0x00, 0x00 };
        if (prefix_match(b, bench, 48))
                return ADDR_BENCHMARKING;
        /* 2001::/23 holds Teredo (2001::/32, an obfuscated IPv4 inside) and
         * other IETF assignments: not a destination an agent needs. */
        static const uint8_t ietf[] = { 0x20, 0x01, 0x00 };
        if (prefix_match(b, ietf, 23))
                return ADDR_RESERVED;
        /* Only global unicast (2000::/3) is public; the rest (including
         * 64:ff9b:1::/48 local NAT64 and 100::/64 discard) is not. */
        if ((b[0] & 0xe0) != 0x20)
                return ADDR_RESERVED;
        return ADDR_PUBLIC;
}

/* The classes --allow-private-host opens, for its names only: the LAN's
 * own ranges (RFC 1918, IPv6 unique-local and site-local) and carrier-grade
 * NAT space (where Tailscale and similar networks number their hosts).
 * Never loopback (the host's own services), link-local (169.254/16 and
 * fe80::/10 hold the cloud metadata and credential endpoints), metadata
 * or anything reserved: no flag opens those to a name. */
bool egress_class_private(enum addr_class c)
{
        return c == ADDR_PRIVATE || c == ADDR_ULA || c == ADDR_CGNAT;
}

/* The classes a refusal's summary never offers a flag for: the cloud
 * metadata and credential endpoints and the rest of link-local, 0.0.0.0
 * (which the kernel takes for the host's loopback, any port) and "this
 * network". An --allow-cidr rule can still name them — the user's own
 * decision — but the summary is read by the agent whose attempt it
 * describes, and "allow with --allow-cidr 169.254.169.254/32:80" would
 * talk it into handing out the host's credentials. Loopback at one port
 * is still offered: a dev server on the host is the common case, and
 * the rule names that port only. */
bool egress_class_never_suggested(enum addr_class c)
{
        return c == ADDR_UNSPECIFIED || c == ADDR_LINK_LOCAL || c == ADDR_METADATA || c == ADDR_THIS_NETWORK;
}

const char *addr_class_name(enum addr_class c)
{
        static const char *const names[] = {
                [ADDR_PUBLIC] = "public",
                [ADDR_LOOPBACK] = "loopback",
                [ADDR_UNSPECIFIED] = "unspecified",
                [ADDR_PRIVATE] = "private",
                [ADDR_CGNAT] = "cgnat",
                [ADDR_LINK_LOCAL] = "link-local",
                [ADDR_METADATA] = "metadata",
                [ADDR_ULA] = "unique-local",
                [ADDR_MULTICAST] = "multicast",
                [ADDR_BROADCAST] = "broadcast",
                [ADDR_RESERVED] = "reserved",
                [ADDR_THIS_NETWORK] = "this-network",
                [ADDR_DOCUMENTATION] = "documentation",
                [ADDR_BENCHMARKING] = "benchmarking",
        };
        return (unsigned)c < ARRAY_SIZE(names) && names[c] ? names[c] : "unknown";
}
