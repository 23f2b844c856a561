/* teardown.h — the end of a run after its caller has the status: the
 * sandbox's cgroups are removed by a helper once its pid 1 is gone
 * (teardown.c). */
#ifndef BRIG_CORE_TEARDOWN_H
#define BRIG_CORE_TEARDOWN_H

#include "core/util.h"

/* Remove `dirs` (cgroup directories, emptied by pid 1's end) and then
 * `record` (the run record naming them) once the process behind `pidfd`
 * has ended, in a helper that outlives this process. Returns 0 when the
 * helper runs, or -errno with nothing started (the caller then waits and
 * removes them itself): -EXDEV for a group named through a descriptor
 * (a detached hierarchy), which the helper would not have. */
BRIG_INTERNAL int teardown_after_exit(int pidfd, const struct strv *dirs, const char *record);

#endif
