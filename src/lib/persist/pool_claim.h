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
/* How every member's name begins (POOL_MEMBER_PREFIX, 8 digits of the
 * key, "-PID-N"): no other sandbox may be so named (sandbox.c). */
#define POOL_MEMBER_PREFIX "pool-"

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
/* A pool's key, the name of ROOT/pools/KEY: FNV-1a over what names the
 * pool (pool.c): its policy's JSON, its workspace and its caller's
 * context (core/caller_context.h). Not a security boundary: the member
 * compares the whole text itself (control.c). */
BRIG_INTERNAL void pool_key_text(const char *json, const char *ws, const char *context,
                                 char out[POOL_KEY_LEN + 1]);

/* The policy of a plain `brig run --pooled -- COMMAND` (no other option,
 * no BRIG_POLICY) is the engine's defaults alone, so the front end serves
 * such a run without the engine, from what the engine wrote down the
 * first time: ROOT/cache/pooled-plain-ID, ID named by the engine's file
 * (its descriptor: device, inode, size, times: another build writes its
 * own), holding
 *
 *     POOL_PLAIN_MAGIC        a line
 *     umask=0|1 fixed=N       a line: the caller_context_spec of that policy
 *     JSON                    its pool policy's JSON, to the end
 *
 * Its name in the cache into out; -errno. */
#define POOL_PLAIN_MAGIC "brig pooled-plain 1"
#define POOL_PLAIN_NAME_LEN 32
BRIG_INTERNAL int pool_plain_name(int engine_fd, char out[POOL_PLAIN_NAME_LEN]);

/* In pool.c, the engine's: after a plain `brig run --pooled` or `brig
 * pool` (no option, no BRIG_POLICY: the caller says), its policy p
 * written down as above, once for each build of the engine. Best effort:
 * without it, the next such run is the engine's again. */
BRIG_INTERNAL void pool_remember_plain(const brig_policy *p);

/* For brig ls (in pool.c, the engine's): if NAME is a member of one of
 * the pools in ROOT/pools, its pool's key (key_out) and where it stands:
 * "ready", "in use" (claimed by a run), else "starting or ending". NULL:
 * no pool's member. */
BRIG_INTERNAL const char *pool_member_state(const char *root, const char *name, char key_out[POOL_KEY_LEN + 1]);

#endif
