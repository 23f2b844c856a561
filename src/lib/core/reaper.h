/* reaper.h — proof of what a brig made, and removal of what a dead one
 * left (reaper.c). */
#ifndef BRIG_REAPER_H
#define BRIG_REAPER_H

#include "core/error.h"

/* The process that made something, named for good: its pid, its start
 * time (clock ticks after boot) and its pid namespace's inode. A pid is
 * reused, the three together are not (within one boot). */
struct owner {
        pid_t pid;
        unsigned long long start;
        unsigned long long pidns;
};
BRIG_INTERNAL void owner_self(struct owner *o);
/* 1: it runs; 0: provably gone (or a zombie); -1: cannot be told from
 * here (made in another pid namespace). */
BRIG_INTERNAL int owner_alive(const struct owner *o);
/* "PID-START-PIDNS" and back; parse returns false for anything else. */
BRIG_INTERNAL int owner_format(const struct owner *o, char *buf, size_t n);
BRIG_INTERNAL bool owner_parse(const char *s, struct owner *o, const char **rest);

/* <root>/runs/PID-START-PIDNS-SEQ: written before a run makes any cgroup,
 * listing the directories it is about to make; removed after they are
 * (emptied and kept as the next record's file, runs/spare, where there is
 * none yet).
 * *path gets the record's path. Fails (and so does the run) when the
 * record cannot be written: a cgroup no record names could not be proven
 * ours after a SIGKILL. */
BRIG_INTERNAL int run_record_write(const char *name, const struct strv *cgroups, char **path, brig_error **err);
/* The file a finished run's record leaves for the next one, empty, beside
 * the records: a new inode on ext4 (a /run on the root filesystem) cost
 * 30-40 us of every run's start, most of it the allocator skipping the
 * inodes the runs just before freed (recently_deleted, perf), and the
 * unlink as much again in the teardown. Never read: only its inode is
 * taken, once checked to be a plain file of ours with no other name. */
#define RUN_RECORD_SPARE "spare"
BRIG_INTERNAL void run_record_remove(const char *path);

/* What dead brigs of this user left: the cgroups their run records name,
 * their temporary files in the filter cache, pools whose daemon is gone.
 * Never another user's (the state root is ours alone and every cgroup's
 * owner is checked), never a live one's (pid, start time, pid namespace,
 * boot). Called at the start of every run and by ls, rm and pool. */
BRIG_INTERNAL void reaper_sweep(void);
/* Pools whose daemon is gone: members removed (pool.c). Not from inside a
 * supervisor or under the state lock: it removes sandboxes (brig rm). */
BRIG_INTERNAL void pool_sweep(void);

/* Test hook (meson -Dtest_hooks=true): BRIG_TEST_PAUSE_AT=STEP[,STEP...]
 * stops this process (SIGSTOP) at that step, so a test can SIGKILL it
 * there, or act and SIGCONT it. A no-op in other builds. */
BRIG_INTERNAL void test_pause(const char *step);

#endif
