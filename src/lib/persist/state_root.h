/* state_root.h — the per-user state root and a sandbox's directory in it,
 * found and checked (state_root.c; the rest of the state: state.h). */
#ifndef BRIG_STATE_ROOT_H
#define BRIG_STATE_ROOT_H

#include "core/error.h"

#include <stdbool.h>
#include <sys/types.h>

/* A complete sentence for the user (no ": strerror" added); errnum kept. */
BRIG_INTERNAL int state_fail(brig_error **err, int errnum, const char *fmt, ...) BRIG_PRINTF(3, 4);
/* [A-Za-z0-9][A-Za-z0-9_.-]{0,63} */
BRIG_INTERNAL bool state_name_valid(const char *name);
/* The per-user state root: $XDG_RUNTIME_DIR/brig, else /run/brig for
 * root, else /run/user/UID/brig when that runtime directory exists and is
 * ours alone (0700), else /tmp/brig-UID. Only the path: nothing checked. */
BRIG_INTERNAL char *state_root_path(void);
/* The root, opened (O_DIRECTORY, no symlink) and checked on the open
 * descriptor: ours and 0700. Created 0700 when `create`. Returns the fd;
 * *out (optional) gets the path. */
BRIG_INTERNAL int state_root_open(bool create, char **out, brig_error **err);
/* The same, for callers that want only the checked path. */
BRIG_INTERNAL int state_root(bool create, char **out, brig_error **err);
/* root/NAME, after checking the name. */
BRIG_INTERNAL int state_dir(const char *name, bool create_root, char **out, brig_error **err);
/* An exclusive flock on the state root (create and rm of any name);
 * returns the fd that holds it, a directory checked ours and 0700. */
BRIG_INTERNAL int state_lock(const char *root, brig_error **err);
/* Start time of a process (clock ticks after boot, /proc/PID/stat field
 * 22), 0 when it does not exist: a pid plus its start time names a
 * process for good, even after the pid is reused. */
BRIG_INTERNAL unsigned long long state_process_start(pid_t pid);

#endif
