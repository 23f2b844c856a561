/* unixdiag.c — reads the kernel's NETLINK_SOCK_DIAG answer about unix
 * sockets for the unix socket guard (unixguard.c): is a socket bound to
 * this file (device, inode) or this abstract name? Pure: the fuzz target
 * (tests/fuzz/fuzz_unixdiag.c) runs it alone. The bytes are the kernel's,
 * but the names in them are whatever the sandbox bound. */
#define _GNU_SOURCE
#include "controls/unixguard.h"

#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>

int unixguard_diag_parse(const void *buf, size_t n, uint32_t seq, const struct unix_bound *want, bool *found,
                         uint32_t *sock_ino)
{
        int len = n > INT_MAX ? INT_MAX : (int)n;
        for (const struct nlmsghdr *h = buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
                if (h->nlmsg_seq != seq)
                        continue;  /* left over from a dump that was cut short */
                if (h->nlmsg_type == NLMSG_DONE)
                        return 1;
                if (h->nlmsg_type == NLMSG_ERROR) {
                        const struct nlmsgerr *e = NLMSG_DATA(h);
                        if (h->nlmsg_len < NLMSG_LENGTH(sizeof *e))
                                return -EPROTO;
                        return e->error < 0 && e->error >= -4095 ? e->error : -EPROTO;
                }
                if (*found || h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
                    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
                        continue;
                const struct unix_diag_msg *m = NLMSG_DATA(h);
                int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
                for (const struct rtattr *at = (const struct rtattr *)(m + 1); RTA_OK(at, alen);
                     at = RTA_NEXT(at, alen)) {
                        bool hit = false;
                        if (!want->name && at->rta_type == UNIX_DIAG_VFS &&
                            RTA_PAYLOAD(at) >= sizeof(struct unix_diag_vfs)) {
                                const struct unix_diag_vfs *v = RTA_DATA(at);
                                /* the kernel reports the inode number in 32 bits */
                                hit = v->udiag_vfs_dev == want->dev && v->udiag_vfs_ino == want->ino;
                        } else if (want->name && at->rta_type == UNIX_DIAG_NAME) {
                                hit = RTA_PAYLOAD(at) == want->name_len &&
                                      memcmp(RTA_DATA(at), want->name, want->name_len) == 0;
                        }
                        if (hit) {
                                *found = true;
                                *sock_ino = m->udiag_ino;
                        }
                }
        }
        return 0;
}
