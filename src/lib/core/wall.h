/* wall.h — the walls a plan can run behind (docs/walls.md): brig's own
 * namespaces, or gVisor's runsc under brig's namespaces (wall_gvisor.c). */
#ifndef BRIG_CORE_WALL_H
#define BRIG_CORE_WALL_H

#include "core/error.h"
#include "core/util.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct run_plan;

/* The supervisor's side: find runsc for a gvisor plan and refuse what
 * it cannot run. 0 for the namespace wall. */
BRIG_INTERNAL int wall_plan(struct run_plan *plan, brig_error **err);

/* After the layout: a gvisor plan's /tmp must be brig's own tmpfs, which
 * holds runsc's bundle and state and which gVisor covers with its own. */
BRIG_INTERNAL int wall_gvisor_check_layout(const struct run_plan *plan, brig_error **err);

/* brig doctor: is the gvisor wall usable here? 0 and the runsc found in
 * `path`, or -errno and why not in `why`. */
BRIG_INTERNAL int wall_gvisor_probe(char *path, size_t path_len, char *why, size_t why_len);

/* Inside, as pid 1's child, after the root is built: write the OCI
 * bundle of the plan and execute runsc run on it (brig run), or runsc
 * exec into the container of wall_gvisor_start (a persistent plan's brig
 * exec). Returns only on failure. */
BRIG_INTERNAL int wall_gvisor_exec(const struct run_plan *plan, brig_error **err);

/* Persistent sandboxes, in their pid 1 (persist_init.c): start the one
 * container each exec enters (its runsc sandbox's pid in *sandbox_pid);
 * signal an exec's command (and what it started) inside gVisor, where a
 * signal to its runsc exec does not reach; forget an exec's files once
 * reaped. */
BRIG_INTERNAL int wall_gvisor_start(const struct run_plan *plan, pid_t *sandbox_pid, brig_error **err);
BRIG_INTERNAL void wall_gvisor_signal(const struct run_plan *plan, pid_t exec_pid, int sig, bool descendants);
BRIG_INTERNAL void wall_gvisor_forget(pid_t exec_pid);

#endif
