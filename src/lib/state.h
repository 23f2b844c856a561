/* state.h — where persistent sandboxes keep their state, and how brig
 * finds, locks, reads and removes it (state.c). */
#ifndef BRIG_STATE_H
#define BRIG_STATE_H

#include "internal.h"

#include <jansson.h>

/* A complete sentence for the user (no ": strerror" added); errnum kept. */
BRIG_INTERNAL int state_fail(brig_error **err, int errnum, const char *fmt, ...) BRIG_PRINTF(3, 4);
/* [A-Za-z0-9][A-Za-z0-9_.-]{0,63} */
BRIG_INTERNAL bool state_name_valid(const char *name);
/* The per-user state root: $XDG_RUNTIME_DIR/brig, else /run/brig for root,
 * else /tmp/brig-UID. Created 0700 when `create`; refused when it is a
 * symlink, not ours, or open to others. */
BRIG_INTERNAL int state_root(bool create, char **out, brig_error **err);
/* root/NAME, after checking the name. */
BRIG_INTERNAL int state_dir(const char *name, bool create_root, char **out, brig_error **err);
/* An exclusive flock on the state root (create and rm of any name);
 * returns the fd that holds it. */
BRIG_INTERNAL int state_lock(const char *root, brig_error **err);
/* dir/state.json, written whole through a rename. */
BRIG_INTERNAL int state_write(const char *dir, json_t *doc, brig_error **err);
BRIG_INTERNAL json_t *state_read(const char *dir, brig_error **err);
/* Start time of a process (clock ticks after boot, /proc/PID/stat field
 * 22), 0 when it does not exist: a pid plus its start time names a
 * process for good, even after the pid is reused. */
BRIG_INTERNAL unsigned long long state_process_start(pid_t pid);
/* Is the supervisor recorded in this state alive? */
BRIG_INTERNAL bool state_supervisor_alive(json_t *st);
/* rm -rf that never follows a symlink and makes unreadable directories
 * (overlay's work/work) readable first. */
BRIG_INTERNAL int state_remove_tree(const char *path, brig_error **err);

#endif
