/* program.h — one of brig's own programs, opened from a directory and
 * checked on the descriptor it will be run through (program.c). Shared by
 * libbrig (brig-supervisor, brig-serve: engine/supervisor_exec.c) and by
 * the brig command's front end (brig-engine: src/front/brig.c), which is
 * built against another C library: this file needs nothing but libc and
 * core/error.c. */
#ifndef BRIG_CORE_PROGRAM_H
#define BRIG_CORE_PROGRAM_H

#include "core/error.h"

/* Where brig's own programs are installed (meson.build defines each):
 * libexec/brig from a program's directory (bindir), and the configured
 * path. */
#ifndef BRIG_LIBEXEC_FROM_BINDIR
#define BRIG_LIBEXEC_FROM_BINDIR "../libexec/brig"
/* What each brig command does first, the front end and the engine alike:
 * a stdin, stdout or stderr the caller closed (`<&-`, a daemon) becomes
 * /dev/null, else the next descriptor brig opens (an exec's control
 * socket) takes its number and goes to the command as its stdio
 * (persist/exec.c refuses that); and SIGPIPE is blocked (program.c says
 * why). -errno when /dev/null cannot be opened. */
BRIG_INTERNAL int program_start(void);

#endif
#ifndef BRIG_LIBEXECDIR
#define BRIG_LIBEXECDIR "/usr/local/libexec/brig"
/* What each brig command does first, the front end and the engine alike:
 * a stdin, stdout or stderr the caller closed (`<&-`, a daemon) becomes
 * /dev/null, else the next descriptor brig opens (an exec's control
 * socket) takes its number and goes to the command as its stdio
 * (persist/exec.c refuses that); and SIGPIPE is blocked (program.c says
 * why). -errno when /dev/null cannot be opened. */
BRIG_INTERNAL int program_start(void);

#endif

/* DIR/PROG as an O_PATH descriptor, checked: a regular executable file
 * owned by root or by us in a directory owned by root or by us, neither
 * writable by anyone else (a sandbox or another user who could put a
 * program there could replace brig itself). -ENOENT when DIR has no PROG
 * (the caller tries its next place), another error (said in *err) when it
 * has one brig must not run: then the caller tries no other place. */
BRIG_INTERNAL int program_open_in(const char *dir, const char *prog, brig_error **err);

/* What each brig command does first, the front end and the engine alike:
 * a stdin, stdout or stderr the caller closed (`<&-`, a daemon) becomes
 * /dev/null, else the next descriptor brig opens (an exec's control
 * socket) takes its number and goes to the command as its stdio
 * (persist/exec.c refuses that); and SIGPIPE is blocked (program.c says
 * why). -errno when /dev/null cannot be opened. */
BRIG_INTERNAL int program_start(void);

#endif
