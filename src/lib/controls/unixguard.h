/* unixguard.h — the supervisor's side of the syscall filter's
 * notifications: audit answers, and the guard that keeps pathname unix
 * sockets of the host out of reach (unixguard.c). */
#ifndef BRIG_UNIXGUARD_H
#define BRIG_UNIXGUARD_H

#include "core/plan.h"

struct audit;
struct seccomp_replies;
struct unixguard;

/* replies: audit mode's answers per syscall (NULL without an audit stream).
 * host_netns: the sandbox shares the host's network namespace (--net
 * host), so the listeners of its namespace are not the sandbox's alone. */
BRIG_INTERNAL int unixguard_new(const struct run_plan *plan, struct audit *audit,
                                const struct seccomp_replies *replies, struct unixguard **ret, brig_error **err);
/* A seccomp listener (one per command: brig run's, each brig exec's).
 * Takes the fd; returns an id for unixguard_take_refused (0: not added). */
BRIG_INTERNAL uint64_t unixguard_add_listener(struct unixguard *g, int fd);
/* What that command's filter had refused (count, first path into
 * first[len]) since the last call; forgets the listener once it is gone. */
BRIG_INTERNAL uint64_t unixguard_take_refused(struct unixguard *g, uint64_t id, char *first, size_t len);
/* The sandbox's NETLINK_SOCK_DIAG socket, made by its pid 1. Takes the fd. */
BRIG_INTERNAL void unixguard_set_diag(struct unixguard *g, int fd);
/* One fd to poll for all listeners; dispatch answers what is pending. */
BRIG_INTERNAL int unixguard_poll_fd(const struct unixguard *g);
BRIG_INTERNAL void unixguard_dispatch(struct unixguard *g);
/* -1 when the listeners may be read now, else the milliseconds until
 * they may (refused calls are answered at a bounded pace). */
BRIG_INTERNAL int unixguard_wait_ms(struct unixguard *g);
/* Connections refused so far, and the first refused path ("" if none). */
BRIG_INTERNAL uint64_t unixguard_refused(const struct unixguard *g, const char **first);
/* Where refusals go for the run's summary (refusals.h), or NULL. */
struct refusals;
BRIG_INTERNAL void unixguard_set_refusals(struct unixguard *g, struct refusals *r);
/* The run is over: what is still owed to the audit stream (exec events'
 * exits). */
BRIG_INTERNAL void unixguard_finish(struct unixguard *g);
BRIG_INTERNAL void unixguard_free(struct unixguard *g);

/* What the sock_diag dump is searched for: a socket file (device in the
 * kernel's encoding, inode in its low 32 bits) or an abstract name. */
struct unix_bound {
        uint32_t dev, ino;
        const char *name;  /* abstract: the address after sun_family, leading NUL included */
        size_t name_len;
};
/* One recv of a NETLINK_SOCK_DIAG dump (exposed for the fuzz target):
 * sets *found and *sock_ino on a match; returns 1 at the dump's end, 0 for
 * more, -errno for an error answer. Messages of another seq are skipped. */
BRIG_INTERNAL int unixguard_diag_parse(const void *buf, size_t n, uint32_t seq, const struct unix_bound *want,
                                       bool *found, uint32_t *sock_ino);

#endif
