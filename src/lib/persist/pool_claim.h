/* pool_claim.h — a ready member of a warm pool, claimed (pool_claim.c):
 * the part of a pooled run that reads no policy, shared by libbrig's
 * pool.c and the brig front end (src/front/brig.c). libc only. */
#ifndef BRIG_POOL_CLAIM_H
#define BRIG_POOL_CLAIM_H

#include "core/error.h"

#include <stdbool.h>
#include <stddef.h>

/* A pool's key: 16 hex digits (pool.c names ROOT/pools/KEY by it). */
#define POOL_KEY_LEN 16

/* The pool `brig pool --name NAME` started: ROOT/pools/names/NAME, a
 * symlink to the pool's KEY, read after the state root's checks. *dir_out
 * (free()) is ROOT/pools/KEY, key_out its key, *root_out (if not NULL;
 * free()) the checked ROOT. -ENOENT (said) when no pool has that name,
 * -EINVAL for a name that is not one. */
BRIG_INTERNAL int pool_named(const char *name, char **dir_out, char key_out[POOL_KEY_LEN + 1], char **root_out,
                             brig_error **err);
/* Is NAME a member of the pool with this key ("pool-" and its first 8
 * digits: what its daemon names them)? */
BRIG_INTERNAL bool pool_member_of(const char *key, const char *name);
/* This process as a claim names it: PID-START-PIDNS. */
BRIG_INTERNAL int pool_claim_owner(char *buf, size_t n);
/* Claim the first ready member of the pool in DIR: one rename of
 * ready/MEMBER to claimed/MEMBER.OWNER, which succeeds for one run only.
 * 0 with its name in member; -EAGAIN when none is ready, -ENOENT when the
 * pool has no ready/ (it is gone). */
BRIG_INTERNAL int pool_claim_ready(const char *dir, const char *key, char *member, size_t n);
/* A member claimed and not used (it would not connect: it is stopping):
 * to done/, whose members the daemon removes. */
BRIG_INTERNAL void pool_claim_drop(const char *dir, const char *member);
/* For brig ls (in pool.c, the engine's): if NAME is a member of one of
 * the pools in ROOT/pools, its pool's key (key_out) and where it stands:
 * "ready", "in use" (claimed by a run), else "starting or ending". NULL:
 * no pool's member. */
BRIG_INTERNAL const char *pool_member_state(const char *root, const char *name, char key_out[POOL_KEY_LEN + 1]);

#endif
