/* netns.h — the sandbox's network namespace (netns.c) and filtered
 * mode's nftables rules (netfilter.c), set up by the child. */
#ifndef BRIG_NET_NETNS_H
#define BRIG_NET_NETNS_H

#include "core/error.h"

#include <stdbool.h>

BRIG_INTERNAL int netns_loopback_up(brig_error **err);
/* Filtered mode: default routes through loopback; *ipv6 says whether the
 * IPv6 one could be made. */
BRIG_INTERNAL int netns_route_through_loopback(bool *ipv6, brig_error **err);
/* Filtered mode: the nftables redirect of every outbound TCP connection
 * and DNS query to brig, everything else rejected (netfilter.c). */
BRIG_INTERNAL int netfilter_redirect_egress(brig_error **err);

#endif
