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

#endif
