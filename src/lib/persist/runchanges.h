/* runchanges.h — what a run changed in its writable trees (runchanges.c):
 * recorded before the sandbox starts, compared when it has ended. */
#ifndef BRIG_RUNCHANGES_H
#define BRIG_RUNCHANGES_H

#include "core/util.h"

#include <jansson.h>
#include <stddef.h>

struct runchanges;

/* Open and record each root (host paths: the workspace, writable binds)
 * now, before anything of the sandbox runs. A root that cannot be walked
 * is reported by runchanges_end, not here. */
BRIG_INTERNAL int runchanges_begin(const char *const *roots, size_t n, struct runchanges **ret);
/* The files event's fields: added, modified, deleted (counts), changes
 * (at most 1000: change, path, type, size, sha256 of a regular file),
 * complete, errors. */
BRIG_INTERNAL json_t *runchanges_end(struct runchanges *c);
BRIG_INTERNAL void runchanges_free(struct runchanges *c);

#endif
