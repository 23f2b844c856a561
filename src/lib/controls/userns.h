/* userns.h — the user namespace (userns.c). */
#ifndef BRIG_CONTROLS_USERNS_H
#define BRIG_CONTROLS_USERNS_H

#include "core/plan.h"

BRIG_INTERNAL int userns_write_maps(pid_t pid, const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int userns_become_sandbox_user(const struct run_plan *plan, brig_error **err);
/* max_user_namespaces 0 in ours, written through PROC (the sandbox's
 * proc: mounts_new_proc). */
BRIG_INTERNAL int userns_forbid_nesting(int proc, brig_error **err);
/* The (ending) process whose user namespace the idmapped workspace uses,
 * and the mapping it runs on: reaped and unmapped by userns_helper_reap
 * once nothing waits on it. */
struct userns_helper {
        pid_t pid;
        void *map;
};
#define USERNS_HELPER_INIT { .pid = -1, .map = NULL }
/* The idmapped workspace's detached mount in *ret_fd; *helper is filled
 * (even on failure) for userns_helper_reap. */
BRIG_INTERNAL int userns_idmapped_workspace(const struct run_plan *plan, int *ret_fd, struct userns_helper *helper,
                                            brig_error **err);
/* Reap it and free its mapping (a no-op when there is none). */
BRIG_INTERNAL void userns_helper_reap(struct userns_helper *helper);

#endif
