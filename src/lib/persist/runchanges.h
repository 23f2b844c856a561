/* runchanges.h — what a run changed in its writable trees (runchanges.c):
 * recorded before the sandbox starts, compared when it has ended. */
#ifndef BRIG_RUNCHANGES_H
#define BRIG_RUNCHANGES_H

#include "core/error.h"
#include "core/util.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct runchanges;

/* Open and record each root (host paths: the workspace, writable binds)
 * now, before anything of the sandbox runs. A root that cannot be walked
 * is reported by runchanges_end, not here. max: the most entries each
 * walk records over all roots (--changes-max; 0: no cap). */
BRIG_INTERNAL int runchanges_begin(const char *const *roots, size_t n, uint64_t max, struct runchanges **ret);
/* The files event's fields: added, modified, deleted (counts), changes
 * (at most 1000: change, path, type, size, sha256 of a regular file),
 * complete, errors. */
BRIG_INTERNAL json_t *runchanges_end(struct runchanges *c);
BRIG_INTERNAL void runchanges_free(struct runchanges *c);
/* What begin recorded, to keep ({"v": 1, "max", "roots": [{"path",
 * "error", "stopped", "entries"}]}), and a runchanges again from it — a
 * record runchanges_parse (changes_file.c) has checked — whose end
 * compares the trees as they are now with it. */
BRIG_INTERNAL json_t *runchanges_save(const struct runchanges *c);
/* list_all: every change in the list (brig diff; the walk's cap bounds
 * them), not the files event's first 1000. */
BRIG_INTERNAL int runchanges_from(json_t *saved, bool list_all, struct runchanges **ret);
/* Parse and check a kept record (untrusted bytes: the fuzz target's);
 * -EBADMSG with why. */
BRIG_INTERNAL int runchanges_parse(const char *text, size_t len, json_t **out, char *why, size_t n);
/* changes.c: a persistent sandbox's record since create (bind mode: of
 * the workspace and writable binds; overlay mode: of the binds), in its
 * state directory DIR: kept once (changes_kept), compared with the trees
 * as they are now (changes_since: the files event's fields; list_all as
 * runchanges_from's), and as brig diff lists it (a JSON array, or its
 * text). */
BRIG_INTERNAL bool changes_kept(const char *dir);
BRIG_INTERNAL int changes_keep(const char *dir, const struct runchanges *c, brig_error **err);
BRIG_INTERNAL json_t *changes_since(const char *dir, bool list_all, brig_error **err);
/* changes_since for the files event: its failure is said in it. */
BRIG_INTERNAL json_t *changes_event(const char *dir);
struct brig_change_filter;
BRIG_INTERNAL json_t *changes_diff_list(const char *name, const char *dir, json_t *state,
                                         const struct brig_change_filter *filter, brig_error **err);
BRIG_INTERNAL char *changes_diff_json(const char *name, const char *dir, json_t *state,
                                      const struct brig_change_filter *filter, brig_error **err);
/* brig_tree_hash with a cap of max entries (0: none): -E2BIG past it. */
BRIG_INTERNAL int runchanges_tree_hash(const char *dir, uint64_t max, char sha256[65], uint64_t *entries,
                                       brig_error **err);

#endif
