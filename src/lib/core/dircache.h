/* dircache.h — what the policy step found missing from a home, kept for
 * the next run (dircache.c; docs/security.md "The directory cache"). */
#ifndef BRIG_CORE_DIRCACHE_H
#define BRIG_CORE_DIRCACHE_H

#include "core/util.h"

#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* One directory as it was when its names were looked up: its identity
 * and inode change time, and the names found missing in it. */
struct dircache_rec {
        dev_t dev;
        ino_t ino;
        struct timespec ctime;
        const char *names;   /* the file's: n_names times a length byte and the name */
        uint32_t n_names;
        uint32_t next;       /* the name after the last one found, and its offset in names */
        size_t next_at;
        struct strv added;   /* learned this run */
        bool used;  /* asked or learned this run: kept first when the file is full */
};

struct dircache {
        char *buf;           /* the file as read: the records' names point into it */
        struct dircache_rec *v;
        size_t n;
        bool dirty;          /* learned something: dircache_store writes the file */
        int64_t margin_ns;   /* a change time this recent is not trusted (DIRCACHE_MARGIN_NS) */
        struct {
                dev_t dev;
                bool ok;
        } fs[8];             /* which devices hold a filesystem whose change times tell (fstatfs, once each) */
        size_t n_fs;
};

#define DIRCACHE_FILE "dirs-1"
#define DIRCACHE_MAX_RECORDS 128
/* Of the records no lookup of this run used (other homes', and those of
 * directories gone: a test suite's scratch homes), the first this many
 * are written again: every run reads and checks the whole file (87
 * records, 28 KB, after a run of the tests cost each run's policy step
 * 30 us), and no record is ever found stale by itself. */
#define DIRCACHE_MAX_UNUSED 16
#define DIRCACHE_MAX_NAMES 256
#define DIRCACHE_MAX_BYTES (256u << 10)
/* A change within this long of "now" may share its change time with the
 * next one (coarse timestamps): the directory is not recorded. */
#define DIRCACHE_MARGIN_NS (2 * INT64_C(1000000000))

/* The file's bytes, strictly: any fault and *dc stays empty (-EINVAL);
 * -ENOMEM. On success *dc owns BUF (malloc'd): the names stay in it. Its
 * own fuzz target (tests/fuzz/fuzz_dircache.c). */
BRIG_INTERNAL int dircache_parse(struct dircache *dc, char *buf, size_t len);
/* The file's bytes for *dc: the records used this run first, then at
 * most DIRCACHE_MAX_UNUSED others, at most DIRCACHE_MAX_RECORDS in all. */
BRIG_INTERNAL int dircache_format(const struct dircache *dc, char **buf, size_t *len);
/* Was NAME missing from directory DIR (its lstat or fstat, this run) when
 * it was last looked up, with DIR unchanged since (same device, inode and
 * change time)? */
BRIG_INTERNAL bool dircache_absent(struct dircache *dc, const struct stat *dir, const char *name);
/* NAMES were missing from the directory FD is (or is on the filesystem
 * of) between BEFORE and AFTER, two looks at it: kept when both show the
 * same directory unchanged, its change time older than the margin and its
 * filesystem one whose change times tell (ext2/3/4, xfs, btrfs, f2fs,
 * tmpfs). */
BRIG_INTERNAL int dircache_learn(struct dircache *dc, int fd, const struct stat *before, const struct stat *after,
                                 const struct strv *names);
/* DIR's file DIRCACHE_FILE, if it is what brig writes (a regular file of
 * ours, one link, writable by nobody else, at most DIRCACHE_MAX_BYTES);
 * else none. */
BRIG_INTERNAL void dircache_load(struct dircache *dc, int dir);
/* The file written whole and linked in, when something was learned or
 * it holds more than DIRCACHE_MAX_UNUSED records this run did not use. */
BRIG_INTERNAL void dircache_store(const struct dircache *dc, int dir);
BRIG_INTERNAL void dircache_free(struct dircache *dc);

#endif
