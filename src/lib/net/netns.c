/* netns.c — the sandbox's own network namespace: only loopback, up; in
 * filtered mode also a default route through it (see netfilter.c). */
#define _GNU_SOURCE
#include "net/netns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

int netns_loopback_up(brig_error **err)
{
        _cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return brig_err(err, errno, "socket for loopback setup");
        struct ifreq ifr = { 0 };
        strcpy(ifr.ifr_name, "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
                return brig_err(err, errno, "read loopback flags");
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                return brig_err(err, errno, "bring loopback up");
        return 0;
}

int netlink_answers(int fd, uint32_t last, int (*on_error)(uint32_t seq, int error, void *ctx), void *ctx)
{
        for (;;) {
                char buf[8192];  /* one answer per read: an ack, or an error quoting its message */
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                int len = (int)n;
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf; NLMSG_OK(nlh, len);
                     nlh = NLMSG_NEXT(nlh, len)) {
                        if (nlh->nlmsg_type != NLMSG_ERROR)
                                continue;
                        if (nlh->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                                return -EPROTO;
                        const struct nlmsgerr *e = NLMSG_DATA(nlh);
                        int r = e->error != 0 ? on_error(nlh->nlmsg_seq, e->error, ctx) : 0;
                        if (r < 0)
                                return r;
                        if (nlh->nlmsg_seq == last)
                                return 0;
                }
        }
}

/* A netlink message being built in a caller's buffer: four messages of
 * fixed shape, the whole of what libmnl did here, which no longer has to
 * be loaded at every start for them (nftgen.c says why). */
struct nlbuf {
        char *buf;
        size_t cap, len;
};

static void *put(struct nlbuf *b, size_t n)
{
        size_t at = NLMSG_ALIGN(b->len);
        if (at + NLMSG_ALIGN(n) > b->cap)
                abort();  /* a fixed few messages, sized below: a bug, never input */
        memset(b->buf + at, 0, NLMSG_ALIGN(n));
        b->len = at + n;
        return b->buf + at;
}

static struct nlmsghdr *msg_start(struct nlbuf *b, uint16_t type, uint32_t seq)
{
        struct nlmsghdr *nlh = put(b, NLMSG_HDRLEN);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL;
        nlh->nlmsg_seq = seq;
        return nlh;
}

static void msg_end(struct nlbuf *b, struct nlmsghdr *nlh)
{
        b->len = NLMSG_ALIGN(b->len);
        nlh->nlmsg_len = (uint32_t)(b->buf + b->len - (char *)nlh);
}

static void attr_put(struct nlbuf *b, uint16_t type, const void *data, size_t n)
{
        struct rtattr *rta = put(b, RTA_LENGTH(n));
        rta->rta_type = type;
        rta->rta_len = (unsigned short)RTA_LENGTH(n);
        memcpy(RTA_DATA(rta), data, n);
}

static void put_loopback_addr(struct nlbuf *b, int type, int family)
{
        if (family == AF_INET) {
                struct in_addr lo = { htonl(INADDR_LOOPBACK) };
                attr_put(b, (uint16_t)type, &lo, sizeof lo);
        } else {
                struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
                attr_put(b, (uint16_t)type, &lo, sizeof lo);
        }
}

/* Filtered mode: a default route through loopback, source 127.0.0.1 (and
 * ::1), so that a connect() to any address gets as far as the nftables
 * redirect instead of failing with "network unreachable". Nothing can
 * leave this way: loopback delivers only to this namespace. */
static void add_default_route(struct nlbuf *b, uint32_t seq, int family, uint32_t lo)
{
        struct nlmsghdr *nlh = msg_start(b, RTM_NEWROUTE, seq);
        struct rtmsg *rtm = put(b, sizeof *rtm);
        rtm->rtm_family = (unsigned char)family;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_BOOT;
        rtm->rtm_scope = RT_SCOPE_LINK;
        rtm->rtm_type = RTN_UNICAST;
        attr_put(b, RTA_OIF, &lo, sizeof lo);
        put_loopback_addr(b, RTA_PREFSRC, family);
        msg_end(b, nlh);
}

/* An address that is not loopback's own, on loopback: glibc's
 * getaddrinfo() with AI_ADDRCONFIG (getent ahostsv4, many clients) returns
 * nothing for a family with no such address. Taken from brig's own pool
 * (names.c hands out .1 upwards); never a source, never a destination
 * anything answers on. */
static void add_family_address(struct nlbuf *b, uint32_t seq, int family, uint32_t lo)
{
        struct nlmsghdr *nlh = msg_start(b, RTM_NEWADDR, seq);
        struct ifaddrmsg *ifa = put(b, sizeof *ifa);
        ifa->ifa_family = (unsigned char)family;
        ifa->ifa_prefixlen = family == AF_INET ? 32 : 128;
        ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;  /* usable at once, no duplicate detection */
        ifa->ifa_scope = RT_SCOPE_HOST;
        ifa->ifa_index = lo;
        if (family == AF_INET) {
                struct in_addr a = { htonl(0x64400000) };  /* 100.64.0.0 */
                attr_put(b, IFA_LOCAL, &a, sizeof a);
        } else {
                struct in6_addr a = { .s6_addr = { 0xfd, 0x62, 0x72, 0x69, 0x67 } };  /* fd62:7269:6700:: */
                attr_put(b, IFA_LOCAL, &a, sizeof a);
        }
        msg_end(b, nlh);
}

/* The four messages go in one send, in order (IPv4's route, its address,
 * then IPv6's): rtnetlink runs each in turn and answers an error of any,
 * so only the last asks for an ack, and one read tells all on success.
 * The error of a message names it by its sequence number. */
enum { SEQ_ROUTE4 = 1, SEQ_ADDR4, SEQ_ROUTE6, SEQ_ADDR6 };

/* IPv4's errors fail the run's filtered mode; IPv6's only leave it out. */
static int route_error(uint32_t seq, int error, void *v6_failed)
{
        if (seq == SEQ_ROUTE4 || seq == SEQ_ADDR4)
                return error;
        *(bool *)v6_failed = true;
        return 0;
}

int netns_route_through_loopback(bool *ipv6, brig_error **err)
{
        *ipv6 = false;
        unsigned lo = if_nametoindex("lo");
        if (!lo)
                return brig_err(err, errno, "route: no loopback device");
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return brig_err(err, errno, "route: netlink socket");
        _Alignas(struct nlmsghdr) char buf[512];
        struct nlbuf b = { .buf = buf, .cap = sizeof buf };
        add_default_route(&b, SEQ_ROUTE4, AF_INET, lo);
        add_family_address(&b, SEQ_ADDR4, AF_INET, lo);
        add_default_route(&b, SEQ_ROUTE6, AF_INET6, lo);
        struct nlmsghdr *last = (struct nlmsghdr *)(buf + b.len);
        add_family_address(&b, SEQ_ADDR6, AF_INET6, lo);
        last->nlmsg_flags |= NLM_F_ACK;
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        ssize_t sent = sendto(fd, buf, b.len, 0, (const struct sockaddr *)&kernel, sizeof kernel);
        if (sent != (ssize_t)b.len)
                return brig_err(err, sent < 0 ? errno : EMSGSIZE, "default route through loopback: send");
        /* IPv6 may be off in this kernel or namespace: then IPv4 only, and
         * the DNS stub hands out no IPv6 addresses. */
        bool v6_failed = false;
        int r = netlink_answers(fd, SEQ_ADDR6, route_error, &v6_failed);
        if (r < 0)
                return brig_err(err, -r, "default route through loopback");
        *ipv6 = !v6_failed;
        return 0;
}
