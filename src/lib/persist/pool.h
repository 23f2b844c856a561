/* pool.h — a member of a named warm pool, claimed for one run (pool.c):
 * what brig_run_in_pool (the caller's stdio) and brig_pool_exec_start
 * (an exec handle, engine/engine.c) share. */
#ifndef BRIG_POOL_H
#define BRIG_POOL_H

#include "core/error.h"

#include <stddef.h>

/* The one run in the member just claimed from the pool in DIR: 0, or a
 * negative errno with *err. Its error's errnum ESHUTDOWN, ESRCH or ESTALE
 * says that nothing ran in the member (stopping, dead, its workspace
 * moved away): the member is dropped and the next one used. */
typedef int pool_use_fn(const char *dir, const char *member, void *arg, brig_error **err);

/* Claim a ready member of the pool named NAME, waiting for one as brig
 * run --pool does (up to 30 s while the pool's daemon lives; refused,
 * saying why, when it is gone or cannot make members), and use() it.
 * member (n bytes) gets the member's name, empty when none was claimed.
 * A hang-up of cancel_fd (-1: none) ends the wait, -ECANCELED, nothing
 * claimed. use()'s result, or the claim's refusal with *err. */
BRIG_INTERNAL int pool_named_claim(const char *name, int cancel_fd, pool_use_fn *use, void *arg, char *member,
                                   size_t n, brig_error **err);

#endif
