/* wall.h — the walls a plan can run behind (docs/walls.md): brig's own
 * namespaces, or gVisor's runsc under brig's namespaces (wall_gvisor.c). */
#ifndef BRIG_CORE_WALL_H
#define BRIG_CORE_WALL_H

#include "core/error.h"
#include "core/util.h"

#include <stddef.h>

struct run_plan;

/* The supervisor's side: find runsc for a gvisor plan and refuse what
 * it cannot run. 0 for the namespace wall. */
BRIG_INTERNAL int wall_plan(struct run_plan *plan, brig_error **err);

/* brig doctor: is the gvisor wall usable here? 0 and the runsc found in
 * `path`, or -errno and why not in `why`. */
BRIG_INTERNAL int wall_gvisor_probe(char *path, size_t path_len, char *why, size_t why_len);

/* Inside, as pid 1's child, after the root is built: write the OCI
 * bundle of the plan and execute runsc on it. Returns only on failure. */
BRIG_INTERNAL int wall_gvisor_exec(const struct run_plan *plan, brig_error **err);

#endif
