/* netns.h — the sandbox's network namespace (netns.c) and filtered
 * mode's nftables rules (netfilter.c), set up by the child. */
#ifndef BRIG_NET_NETNS_H
#define BRIG_NET_NETNS_H

#include "core/error.h"

#include <stdbool.h>
#include <stdint.h>

BRIG_INTERNAL int netns_loopback_up(brig_error **err);
/* Filtered mode: default routes through loopback; *ipv6 says whether the
 * IPv6 one could be made. */
BRIG_INTERNAL int netns_route_through_loopback(bool *ipv6, brig_error **err);
/* Filtered mode: the nftables redirect of every outbound TCP connection
 * and DNS query to brig, everything else rejected (netfilter.c). */
BRIG_INTERNAL int netfilter_redirect_egress(brig_error **err);
/* A netlink socket's answers read until the ack of message LAST; each
 * error answer goes to ON_ERROR (seq, -errno, ctx), which stops the read
 * with it (< 0) or lets it go on (0). 0 or -errno. */
BRIG_INTERNAL int netlink_answers(int fd, uint32_t last, int (*on_error)(uint32_t seq, int error, void *ctx),
                                  void *ctx);

#endif
