/* cgroup.h — the sandbox's control group (cgroup.c). */
#ifndef BRIG_CGROUP_H
#define BRIG_CGROUP_H

#include "core/plan.h"

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_IO, CG_COUNT };

struct cgroup;

struct cgroup_stats {
        long long memory_peak;    /* bytes, -1 unknown */
        long long pids_peak;      /* -1 unknown */
        long long oom_kills;      /* processes the OOM killer ended */
        long long pids_max_hits;  /* forks refused by the pids limit */
};

/* A memory limit the caller already lives under (its own cgroup or an
 * ancestor: systemd-run -p MemoryMax=, a container's limit), where swap
 * cannot stretch it. It binds the sandbox and brig together. */
struct cgroup_inherited {
        uint64_t bytes;             /* 0: none */
        char dir[512];
        bool v2;
        long long oom_kills_before; /* its oom_kill count when the run started */
};
/* CG: the run's group (its look at the hierarchies is reused), or NULL. */
BRIG_INTERNAL bool cgroup_inherited_memory(const struct cgroup *cg, struct cgroup_inherited *out);
BRIG_INTERNAL long long cgroup_inherited_oom_kills(const struct cgroup_inherited *in);
/* For brig doctor, read-only: how --memory would be enforced here
 * ("cgroup", "inherited cgroup" or "rlimit"), and a line of detail. */
BRIG_INTERNAL const char *cgroup_memory_outlook(char *detail, size_t n);

/* Make the sandbox's group(s) and set the limits (v1 groups alone: only
 * planned, cgroup_make_deferred makes them). *degraded is set when a
 * wanted controller is available nowhere writable; the caller decides
 * whether that is allowed. */
BRIG_INTERNAL int cgroup_create(const struct limits *l, struct cgroup **ret, bool *degraded, brig_error **err);
/* Make what cgroup_create left for after clone3 (v1 groups, when no v2
 * group is made: the record, the mkdirs, the limits), while the child sets
 * up its network; 0 when nothing was left. A failure fails the run: the
 * plan counted them as enforcing. */
BRIG_INTERNAL int cgroup_make_deferred(struct cgroup *cg, const struct limits *l, brig_error **err);
/* Does a group of this sandbox enforce the controller (v2 or v1)? */
BRIG_INTERNAL bool cgroup_enforces(const struct cgroup *cg, int controller);
/* "memory, pids": the controllers the limits want that no group enforces
 * (memory not, when memory_elsewhere: an inherited limit holds it). */
BRIG_INTERNAL void cgroup_missing(const struct cgroup *cg, const struct limits *l, bool memory_elsewhere, char *buf,
                                  size_t n);
/* The v2 directory fd for CLONE_INTO_CGROUP, or -1. */
BRIG_INTERNAL int cgroup_clone_fd(const struct cgroup *cg);
/* v1 groups (no CLONE_INTO_CGROUP there): the supervisor opens each
 * group's `tasks` once they are made and sends them to the child in one
 * message (cgroup_join_send), after the go; the child, single-threaded
 * and before its mounts and anything of the command, joins them all and
 * closes them (cgroup_join_self; an error names the hierarchy: the run
 * fails). */
BRIG_INTERNAL int cgroup_join_open(struct cgroup *cg, brig_error **err);
BRIG_INTERNAL void cgroup_join_close(struct cgroup *cg);
/* Does the child wait for cgroup_join_send's message? */
BRIG_INTERNAL bool cgroup_join_pending(const struct cgroup *cg);
BRIG_INTERNAL int cgroup_join_send(struct cgroup *cg, int sync_fd);
BRIG_INTERNAL int cgroup_join_self(struct cgroup *cg, int sync_fd, brig_error **err);
/* A child that fails before its join takes the message off its socket
 * (and drops it) before it exits, after its error is sent: a unix socket
 * closed with a message unread resets its peer, whose next read is
 * ECONNRESET instead of that error (the run said "pid 1 ended
 * unexpectedly" where it should have named what failed). */
BRIG_INTERNAL void cgroup_join_abandon(struct cgroup *cg, int sync_fd);
BRIG_INTERNAL void cgroup_stats(const struct cgroup *cg, struct cgroup_stats *s);
/* Open cgroup_stats' four files ahead, while brig waits for the child:
 * read after the status, they then cost one system call each, not an
 * open by a long path, an fstat, two reads and a close (0.14 ms of brig
 * run's end as root, v1). Closed by cgroup_destroy and cgroup_hand_over;
 * a file that does not open is read by its path then. */
BRIG_INTERNAL void cgroup_stats_open(struct cgroup *cg);
/* cgroup_stats' oom_kills alone: each brig exec takes it before its
 * request goes to pid 1 (persist/control.c), so its file is opened ahead
 * by cgroup_oom_open (a persistent sandbox's supervisor) or
 * cgroup_stats_open: one pread then, where an open by its long path, an
 * fstat, two reads and a close stood on every exec's way (15-20 µs of the
 * supervisor's CPU, perf). */
BRIG_INTERNAL void cgroup_oom_open(struct cgroup *cg);
BRIG_INTERNAL long long cgroup_oom_kills(const struct cgroup *cg);
/* "memory:v1 pids:v1 cpu:v1" — which hierarchy enforces what. */
BRIG_INTERNAL void cgroup_describe(const struct cgroup *cg, char *buf, size_t n);
/* The group directories, v2 first (for the state of a persistent sandbox). */
BRIG_INTERNAL int cgroup_paths(const struct cgroup *cg, struct strv *out);
/* Freeze or thaw everything in the group (v2 cgroup.freeze); waits until done. */
/* Change the memory, pids and cpu limits l sets (non-zero) of a live
 * group; -EOPNOTSUPP naming the limit when no hierarchy enforces it. */
BRIG_INTERNAL int cgroup_update(struct cgroup *cg, const struct limits *l, brig_error **err);
BRIG_INTERNAL int cgroup_freeze(struct cgroup *cg, bool frozen, brig_error **err);
/* Kill what a dead sandbox left in `dir` and remove it, if `dir` is a
 * cgroup directory named `name` and ours; true when it is gone. */
BRIG_INTERNAL bool cgroup_remove_dead(const char *dir, const char *name);
/* Remove what a brig that died (SIGKILL) left: groups, run records,
 * ephemeral state (reaper.c). Once per run, off the start
 * path (spawn.c: while the child builds the sandbox); cgroup_destroy
 * sweeps if the run ended before. */
BRIG_INTERNAL void cgroup_sweep(struct cgroup *cg);
/* Kill whatever is left in the groups and remove them. */
BRIG_INTERNAL void cgroup_destroy(struct cgroup *cg);
/* For a removal that happens elsewhere, once the groups are empty
 * (core/teardown.c): the directories to remove, in order, and the run
 * record to remove after them (or NULL); cg is freed, nothing removed. */
BRIG_INTERNAL void cgroup_hand_over(struct cgroup *cg, struct strv *dirs, char **record);

#endif
