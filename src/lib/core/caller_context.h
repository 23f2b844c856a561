/* caller_context.h — what a cold run takes from its caller beside the
 * policy, as one text (caller_context.c): a pool member made from another
 * caller would give the run other values, so a pooled run is served only
 * by a member whose text is the caller's (persist/pool.c, control.c).
 * libc only: the brig front end (src/front/brig.c) writes it too. */
#ifndef BRIG_CALLER_CONTEXT_H
#define BRIG_CALLER_CONTEXT_H

#include "core/error.h"

#include <stddef.h>

/* The caller's variables a sandbox's environment takes as they are
 * (plan.c's plan_env), NULL-terminated. */
BRIG_INTERNAL extern const char *const caller_passthrough_env[];

struct caller_context_spec {
        int umask;                /* the caller's, or -1 where the policy sets one */
        unsigned fixed_rlimits;   /* 1 << RLIMIT_x for each limit the policy sets (its hard one counts) */
        const char *const *vars;  /* the further variables the plan reads (--keep-env, secrets' env:) */
        size_t n_vars;
};

/* The text, one input a line: uid, gid (and umask), each variable the plan
 * reads (NAME=VALUE or NAME when unset), each resource limit, the mount,
 * network and user namespaces, the cgroups, the LC_* variables sorted.
 * NULL when out of memory or /proc/self/cgroup cannot be read. free()
 * after explicit_bzero: a --keep-env value may be a token. */
BRIG_INTERNAL char *caller_context_text(const struct caller_context_spec *spec);

/* What stands at the workspace's path now, as the first line of
 * plan_sources_identity ("ws=DEV:INO\n", "ws=-\n" when nothing does):
 * the whole of it for a policy that binds nothing (the front end's plain
 * pooled run). CALLER_WORKSPACE_IDENTITY_LEN bytes hold it. */
#define CALLER_WORKSPACE_IDENTITY_LEN 64
BRIG_INTERNAL void caller_workspace_identity(const char *workspace, char *out, size_t n);

#endif
