/* supervisor_exec.h — starting brig-supervisor (supervisor_exec.c) and
 * what it finds where when it starts (src/supervisor/main.c). */
#ifndef BRIG_SUPERVISOR_EXEC_H
#define BRIG_SUPERVISOR_EXEC_H

#include "persist/sandbox.h"

/* The program's descriptors: 0 /dev/null, 1 and 2 the log in the state
 * directory, then these. */
enum {
        SUPERVISOR_FD_READY = 3,   /* control_wait_ready's pipe: ready, or the error */
        SUPERVISOR_FD_CONFIG = 4,  /* a sealed memfd: the configuration (JSON), whole before the start */
        SUPERVISOR_FD_HOLD = 5,    /* an ephemeral sandbox's flocked hold file, kept for life (reaper.c);
                                    * /dev/null for any other */
        SUPERVISOR_FD_EXE = 6,     /* the program itself, closed at once */
        SUPERVISOR_FD_MAX = 10,    /* what the caller moves its sources above */
};

/* brig-supervisor, opened (O_PATH) and checked; *path (optional) gets its
 * path for messages. */
BRIG_INTERNAL int supervisor_exe_open(char **path, brig_error **err);
/* From now on, look for it where this program's own file is now, also
 * once that file is replaced (a long-lived program: a pool's daemon). */
BRIG_INTERNAL void supervisor_dir_pin(void);
/* Start the supervisor of NAME in DIR; it reports on ready_w. Returns
 * once the program has been started (it reads its configuration and
 * detaches on its own). */
BRIG_INTERNAL int supervisor_spawn(const char *dir, const char *name, const brig_policy *p,
                                   const struct sandbox_create_opts *opts, int ready_w, brig_error **err);
/* The same for any configuration the program knows (a sandbox's, a
 * pool's: pool.c): its stdout and stderr the log, its ready pipe, its
 * hold (-1: none); `what` names it in ps. */
BRIG_INTERNAL int supervisor_start(const char *config, const char *log, const char *what, int ready_w, int hold_fd,
                                   brig_error **err);
/* A pool daemon's life (pool.c), in the program: members kept ready
 * until SIGTERM; ready_fd gets one NUL byte once they are, or why not. */
BRIG_INTERNAL _Noreturn void pool_supervise(const char *dir, const char *key, const char *workspace, const brig_policy *p,
                                            unsigned size, int ready_fd);
/* The supervisor's life (sandbox.c), in the program. */
BRIG_INTERNAL _Noreturn void sandbox_supervise(const char *dir, const char *name, const brig_policy *p,
                                               const struct sandbox_create_opts *opts, int ready_fd);

#endif
