/* netfilter.c — the kernel half of filtered mode: nftables rules in the
 * sandbox's own network namespace, written by pid 1 while it still holds
 * CAP_NET_ADMIN there (and nowhere else). The batch of them is built
 * at build time, through libnftnl + libmnl, by nftgen.c (why there: its
 * comment), and sent here as it is:
 *
 *   table inet brig
 *     chain redirect  (nat, output, priority -100)
 *       udp dport 53 redirect to :53            every DNS query → brig's stub
 *       tcp dport 53 redirect to :53
 *       ip  daddr != 127.0.0.0/8 tcp → redirect to :BRIG_TRANSPARENT_PORT
 *       ip6 daddr != ::1         tcp → redirect to :BRIG_TRANSPARENT_PORT
 *     chain guard     (filter, output, priority 0)
 *       ip daddr 127.0.0.0/8 accept; ip6 daddr ::1 accept
 *       tcp → reject with tcp reset; everything else → reject admin-prohibited
 *
 * So every outbound TCP connection reaches the supervisor (which finds the
 * original destination with SO_ORIGINAL_DST) and every DNS question the
 * stub; UDP to anything else, ICMP and all other protocols are refused at
 * once rather than left to time out. The rules are a convenience on top of
 * the wall, not the wall: the namespace has only loopback, so a packet
 * that escaped them would have nowhere to go. The sandboxed command has no
 * CAP_NET_ADMIN and cannot change them. */
#define _GNU_SOURCE
#include "net/netns.h"
#include "net/egress.h"
#include "nft_batch.h"

#include <errno.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Any error of the batch (a message's, or the commit's) fails it. */
static int batch_error(uint32_t seq, int error, void *ctx)
{
        return error;
}

int netfilter_redirect_egress(brig_error **err)
{
#ifdef BRIG_TEST_HOOKS
        /* Test builds only: a host without nftables NAT, for the fallback
         * and the refusal (tests/integration/test_egress_filtered.py). */
        if (getenv("BRIG_TEST_NO_NFTABLES"))
                return brig_err(err, EOPNOTSUPP, "nftables: unavailable (BRIG_TEST_NO_NFTABLES test hook)");
#endif
        /* Unbound: the send binds it to a port id of the kernel's choosing,
         * and the answers come to that; nobody else's reach it (no groups). */
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        if (fd < 0)
                return brig_err(err, errno, "nftables: netlink socket");
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        ssize_t sent = sendto(fd, nft_batch, sizeof nft_batch, 0, (const struct sockaddr *)&kernel, sizeof kernel);
        if (sent != (ssize_t)sizeof nft_batch)
                return brig_err(err, sent < 0 ? errno : EMSGSIZE, "nftables: send the rules");
        /* the one ack the batch asks for (its last rule's); an error of
         * any message, or of the commit, comes before it */
        int r = netlink_answers(fd, NFT_BATCH_ACK_SEQ, batch_error, NULL);
        return r < 0 ? brig_err(err, -r, "nftables: loading the rules") : 0;
}
