/* netns.c — the sandbox's own network namespace: only loopback, up; in
 * filtered mode also a default route through it (see netfilter.c). */
#define _GNU_SOURCE
#include "net/netns.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
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

/* One request, one ack; the kernel's error as -errno. */
static int rtnl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh)
{
        char buf[8192];  /* acks are small; MNL_SOCKET_BUFFER_SIZE is not a constant */
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof buf);
        if (n < 0)
                return -errno;
        const struct nlmsghdr *ans = (const struct nlmsghdr *)buf;
        if (mnl_nlmsg_ok(ans, (int)n) && ans->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(ans);
                return e->error;
        }
        return 0;
}

static void put_loopback_addr(struct nlmsghdr *nlh, int type, int family)
{
        if (family == AF_INET) {
                struct in_addr lo = { htonl(INADDR_LOOPBACK) };
                mnl_attr_put(nlh, type, sizeof lo, &lo);
        } else {
                struct in6_addr lo = IN6ADDR_LOOPBACK_INIT;
                mnl_attr_put(nlh, type, sizeof lo, &lo);
        }
}

/* Filtered mode: a default route through loopback, source 127.0.0.1 (and
 * ::1), so that a connect() to any address gets as far as the nftables
 * redirect instead of failing with "network unreachable". Nothing can
 * leave this way: loopback delivers only to this namespace. */
static int add_default_route(struct mnl_socket *nl, int family)
{
        char buf[512];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_NEWROUTE;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof *rtm);
        rtm->rtm_family = (unsigned char)family;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_BOOT;
        rtm->rtm_scope = RT_SCOPE_LINK;
        rtm->rtm_type = RTN_UNICAST;
        mnl_attr_put_u32(nlh, RTA_OIF, if_nametoindex("lo"));
        put_loopback_addr(nlh, RTA_PREFSRC, family);
        return rtnl_talk(nl, nlh);
}

/* An address that is not loopback's own, on loopback: glibc's
 * getaddrinfo() with AI_ADDRCONFIG (getent ahostsv4, many clients) returns
 * nothing for a family with no such address. Taken from brig's own pool
 * (names.c hands out .1 upwards); never a source, never a destination
 * anything answers on. */
static int add_family_address(struct mnl_socket *nl, int family)
{
        char buf[512];
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = RTM_NEWADDR;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = (unsigned char)family;
        ifa->ifa_prefixlen = family == AF_INET ? 32 : 128;
        ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;  /* usable at once, no duplicate detection */
        ifa->ifa_scope = RT_SCOPE_HOST;
        ifa->ifa_index = if_nametoindex("lo");
        if (family == AF_INET) {
                struct in_addr a = { htonl(0x64400000) };  /* 100.64.0.0 */
                mnl_attr_put(nlh, IFA_LOCAL, sizeof a, &a);
        } else {
                struct in6_addr a = { .s6_addr = { 0xfd, 0x62, 0x72, 0x69, 0x67 } };  /* fd62:7269:6700:: */
                mnl_attr_put(nlh, IFA_LOCAL, sizeof a, &a);
        }
        return rtnl_talk(nl, nlh);
}

int netns_route_through_loopback(bool *ipv6, brig_error **err)
{
        struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
        if (!nl)
                return brig_err(err, errno, "route: netlink socket");
        int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ? -errno : 0;
        r = r ?: add_default_route(nl, AF_INET);
        r = r ?: add_family_address(nl, AF_INET);
        /* IPv6 may be off in this kernel or namespace: then IPv4 only, and
         * the DNS stub hands out no IPv6 addresses. */
        *ipv6 = r == 0 && add_default_route(nl, AF_INET6) == 0 && add_family_address(nl, AF_INET6) == 0;
        mnl_socket_close(nl);
        return r < 0 ? brig_err(err, -r, "default route through loopback") : 0;
}
