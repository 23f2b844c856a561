/* manifest.h — --manifest FILE: what replays a run (manifest.c). */
#ifndef BRIG_MANIFEST_H
#define BRIG_MANIFEST_H

#include "core/plan.h"

#include <jansson.h>

struct audit;
struct manifest;

/* Before the sandbox starts: the file opened (as the report), the
 * workspace tree hashed. */
BRIG_INTERNAL int manifest_begin(const struct run_plan *plan, const brig_policy *p, struct manifest **ret,
                                 brig_error **err);
/* The run has ended: write it. files: the files event's object (or NULL). */
BRIG_INTERNAL int manifest_end(struct manifest *m, const struct run_plan *plan, const brig_result *res,
                               struct audit *audit, json_t *files, brig_error **err);
BRIG_INTERNAL void manifest_free(struct manifest *m);

#endif
