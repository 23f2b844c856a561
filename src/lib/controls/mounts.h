/* mounts.h — the sandbox's root (mounts.c), and the overlay workspace
 * mounted into it (persist/overlay.c). */
#ifndef BRIG_CONTROLS_MOUNTS_H
#define BRIG_CONTROLS_MOUNTS_H

#include "core/plan.h"

/* The sandbox's proc, a new instance for this pid namespace, not attached
 * yet: the child writes its sysctls through it (child.c says why), then
 * mounts_build_root, which takes it, mounts it at /proc. */
BRIG_INTERNAL int mounts_new_proc(brig_error **err);
BRIG_INTERNAL int mounts_build_root(const struct run_plan *plan, int proc, brig_error **err);
BRIG_INTERNAL int mounts_enter_cwd(const char *cwd, brig_error **err);
/* The directory mounts_enter_cwd would enter, as an O_PATH descriptor
 * (or -errno): for a child whose seccomp filter is on already (openat2 is
 * ENOSYS under it), resolved for it by pid 1 (persist_init.c). */
BRIG_INTERNAL int mounts_open_cwd(const char *cwd, brig_error **err);
BRIG_INTERNAL int mounts_check_stdio(brig_error **err);
/* overlay.c: the workspace entry becomes an overlay (persistent sandboxes
 * with --workspace-mode overlay); returns the detached mount. */
BRIG_INTERNAL bool overlay_is_workspace(const struct run_plan *plan, const struct mount_entry *m);
BRIG_INTERNAL int overlay_workspace_tree(const struct run_plan *plan, int src_fd, brig_error **err);

#endif
