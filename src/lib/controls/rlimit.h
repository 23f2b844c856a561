/* rlimit.h — rlimits, the OOM score, IPC limits and what runs weaker
 * than asked (rlimit.c, ipc.c). */
#ifndef BRIG_CONTROLS_RLIMIT_H
#define BRIG_CONTROLS_RLIMIT_H

#include "core/plan.h"

BRIG_INTERNAL void rlimits_clamp(struct limits *l);
BRIG_INTERNAL int rlimits_apply(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int rlimits_apply_memory_fallback(const struct run_plan *plan, uint64_t inherited, brig_error **err);
BRIG_INTERNAL int rlimits_lower_memory_fallback(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL uint64_t rlimits_data_in_use(void);
/* What --memory leaves unbounded without a memory cgroup: stable names
 * for the report (NULL-terminated), and one sentence for people. */
BRIG_INTERNAL extern const char *const rlimits_memory_unbounded[];
BRIG_INTERNAL void rlimits_memory_text(const struct run_plan *plan, char *buf, size_t n);
/* One line per control that runs weaker than the policy asks and was not
 * accepted with --allow-degraded (memory, pids, cpus) or was accepted but
 * must still be said (landlock, seccomp): said at the start of a run. */
BRIG_INTERNAL int degraded_warnings(const struct run_plan *plan, struct strv *out);
/* The sandbox's IPC namespace limits (System V shm and messages) from the
 * memory limit; pid 1, while it is root in its user namespace, through
 * PROC, the sandbox's proc (ipc.c). */
BRIG_INTERNAL int ipc_limits_apply(const struct run_plan *plan, int proc, brig_error **err);
BRIG_INTERNAL bool ipc_limits_settable(const struct run_plan *plan);
/* The sandbox's processes are the OOM killer's first choice, before brig
 * and the host's (oom_score_adj 1000; rlimit.c says why). */
BRIG_INTERNAL int rlimits_oom_first(const struct run_plan *plan, brig_error **err);

#endif
