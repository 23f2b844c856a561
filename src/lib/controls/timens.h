/* timens.h — the time namespace's offsets, --clock-start (timens.c). */
#ifndef BRIG_CONTROLS_TIMENS_H
#define BRIG_CONTROLS_TIMENS_H

#include "core/plan.h"

/* In the supervisor, just before clone3: the offsets that make the
 * sandbox's monotonic and boot-time clocks read plan->clock_start_ns now. */
BRIG_INTERNAL void timens_offsets_now(struct run_plan *plan);
/* In the child, while it holds its capabilities: a time namespace for
 * what pid 1 starts, with those offsets. */
BRIG_INTERNAL int timens_apply(const struct run_plan *plan, brig_error **err);

#endif
