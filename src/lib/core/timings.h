/* timings.h — brig run --timings: CLOCK_MONOTONIC stamps of the run
 * sequence's steps, taken in the supervisor, the child and the command's
 * fork, into one shared anonymous page (docs/benchmarks.md#where-the-time-goes).
 * Off (NULL) unless asked for: then a mark is one pointer test. */
#ifndef BRIG_CORE_TIMINGS_H
#define BRIG_CORE_TIMINGS_H

#include "core/util.h"

#include <stdint.h>
#include <stddef.h>

/* In the order a run passes them; each step is named by the stamp that
 * ends it (timings.c has the names). */
enum timing_mark {
        TM_START,          /* spawn_run entered */
        TM_PLAN,           /* the policy became a plan */
        TM_PROBE,          /* host probe and checks */
        TM_CGROUP,         /* the cgroup made */
        TM_SECCOMP,        /* the filter compiled (or taken from the cache) */
        TM_EGRESS,         /* unix guard, egress proxy or DNS stub, ssh agent */
        TM_IDMAP,          /* the idmapped workspace (root) */
        TM_PREPARED,       /* terminal, socketpair */
        TM_CLONED,         /* clone3 returned in the supervisor */
        TM_MAPPED,         /* uid/gid maps written, child told to go */
        TM_CHILD_GO,       /* the child saw the maps */
        TM_NET,            /* loopback, nftables, listeners handed over */
        TM_SYSCTLS,        /* max_user_namespaces 0, the IPC namespace's limits */
        TM_ATTACHED,       /* the child joined its cgroup v1 groups */
        TM_MOUNTS,         /* the root built */
        TM_PRIVS,          /* tools, capabilities, user */
        TM_FORKED,         /* the command's fork from pid 1 running */
        TM_LANDLOCK,       /* Landlock applied */
        TM_SECCOMP_LOAD,   /* the filter loaded */
        TM_EXEC,           /* just before execve of the command */
        TM_REAPED,         /* pid 1 reaped the command */
        TM_STATUS,         /* the supervisor had its status from pid 1 */
        TM_EXITED,         /* the supervisor saw pid 1 end */
        TM_TEARDOWN,       /* cgroup removed, guard and audit done */
        TM_COUNT,
};

struct timings {
        uint64_t ns[TM_COUNT];
};

/* A shared page (MAP_SHARED: the sandbox's processes write into the
 * supervisor's copy until their execve drops it), or NULL. */
BRIG_INTERNAL struct timings *timings_new(void);
BRIG_INTERNAL void timings_free(struct timings *t);
BRIG_INTERNAL void timings_mark(struct timings *t, enum timing_mark m);
/* The steps as "name ms" lines, or a JSON object; a stamp the sandbox
 * side never wrote (or wrote out of order) is left out, never invented. */
BRIG_INTERNAL void timings_text(const struct timings *t, char *buf, size_t n);
struct json_t;
BRIG_INTERNAL struct json_t *timings_json(const struct timings *t);

#endif
