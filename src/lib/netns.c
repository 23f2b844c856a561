/* netns.c — the sandbox's own network namespace: only loopback, up. */
#define _GNU_SOURCE
#include "internal.h"

#include <net/if.h>
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
