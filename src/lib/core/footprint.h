/* footprint.h — what an idle sandbox keeps mapped (src/lib/core/footprint.c). */
#ifndef BRIG_CORE_FOOTPRINT_H
#define BRIG_CORE_FOOTPRINT_H

#include "core/util.h"

/* How long a supervisor or pid 1 waits with nothing to do before it sheds
 * what only setup needed: a short run never pays for it. */
#define FOOTPRINT_IDLE_MS 200
/* and again after this long without an event, once events came after a
 * shed (each shed reads /proc/self/smaps: about 0.2 ms of CPU) */
#define FOOTPRINT_AGAIN_MS 1000

/* Give back what only setup needed, once the process is idle: the pages
 * of code and read-only data setup ran (they stay in the page cache, the
 * loop faults back the few it runs) and malloc's free memory. Keeps
 * every byte the process holds: it is an optimisation, never a control,
 * and does nothing where /proc/self/smaps cannot be read. */
BRIG_INTERNAL void footprint_shed(void);

/* The same in an event loop: shed after FOOTPRINT_IDLE_MS without an
 * event, and after FOOTPRINT_AGAIN_MS when events came since.
 * footprint_timeout gives poll's timeout (`wait_ms` or sooner),
 * footprint_polled takes poll's result. */
struct footprint {
        uint64_t due_ms;  /* 0: nothing to shed now */
        bool shed;        /* at least once */
};
BRIG_INTERNAL int footprint_timeout(struct footprint *fp, int wait_ms);
BRIG_INTERNAL void footprint_polled(struct footprint *fp, int polled);

#endif
