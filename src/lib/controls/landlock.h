/* landlock.h — Landlock rules mirroring the mounts (landlock.c). */
#ifndef BRIG_LANDLOCK_H
#define BRIG_LANDLOCK_H

#include "core/plan.h"

/* The host's Landlock ABI version, 0 when unavailable. */
BRIG_INTERNAL int landlock_abi_version(void);

/* Restrict the command's process (after pivot_root, before seccomp):
 * read-only grants may read and execute, writable grants may also write;
 * with ABI >= 6, abstract unix sockets and signals are scoped to the
 * sandbox; with ABI >= 4, TCP bind/connect follow the network mode. Uses
 * plan->landlock_abi; does nothing when that is 0 (degraded on purpose). */
BRIG_INTERNAL int landlock_apply(const struct run_plan *plan, brig_error **err);
/* The ruleset landlock_apply enforces, made in advance (a persistent
 * sandbox's pid 1, once: each exec then only enforces it, through
 * plan->landlock_ruleset_fd). *ruleset_fd: close-on-exec, or -1 when
 * Landlock is off. */
BRIG_INTERNAL int landlock_prepare(const struct run_plan *plan, int *ruleset_fd, brig_error **err);

#endif
