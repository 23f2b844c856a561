/* userns.h — the user namespace (userns.c). */
#ifndef BRIG_CONTROLS_USERNS_H
#define BRIG_CONTROLS_USERNS_H

#include "core/plan.h"

BRIG_INTERNAL int userns_write_maps(pid_t pid, const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int userns_become_sandbox_user(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int userns_forbid_nesting(brig_error **err);
BRIG_INTERNAL int userns_idmapped_workspace(const struct run_plan *plan, int *ret_fd, brig_error **err);

#endif
