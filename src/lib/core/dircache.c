/* dircache.c — what the policy step found missing from a home, kept for
 * the next run.
 *
 * The deny list's "~/" entries are looked up in every home a bind
 * reaches — on Debian /usr/sbin, /usr/bin and /usr/games (daemon, bin,
 * games) inside the /usr every run binds — and in the caller's own: about
 * 180 lookups, 150 us of a 600 us policy step, nearly all of them of
 * names that are not there, the same on every run. A directory's inode
 * change time moves whenever an entry is made, removed or renamed in it
 * (and on utimensat: nothing sets it back), so a directory whose device,
 * inode and change time are what they were when a name was found missing
 * still lacks it. The next run asks one fstat of the home instead of its
 * lookups.
 *
 * Trusted only where the change time tells: a filesystem that keeps it
 * (ext2/3/4, xfs, btrfs, f2fs, tmpfs: not NFS, FUSE or overlayfs, whose
 * times may lag or be another layer's), a directory seen the same before
 * and after its lookups, and a change time older than DIRCACHE_MARGIN_NS
 * (a timestamp is coarse: a change in the same tick as the last one may
 * keep it; any later change gets a later time). The file lives in the
 * cache directory of brig's state root (0700, refused to every grant by
 * the state guard, like the seccomp filter cache) and is read only when
 * it is brig's own (owner, one link, mode); its reader is strict and has
 * a fuzz target. */
#define _GNU_SOURCE
#include "core/dircache.h"
#include "core/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

static const char magic[] = "brig-dirs-1\n";
#define MAGIC_LEN (sizeof magic - 1)

struct reader {
        const unsigned char *p;
        size_t left;
};

static bool take(struct reader *r, void *out, size_t n)
{
        if (r->left < n)
                return false;
        memcpy(out, r->p, n);
        r->p += n;
        r->left -= n;
        return true;
}

static void recs_free(struct dircache_rec *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                strv_free(&v[i].added);
        free(v);
}

void dircache_free(struct dircache *dc)
{
        recs_free(dc->v, dc->n);
        free(dc->buf);
        dc->v = NULL;
        dc->n = 0;
        dc->buf = NULL;
}

/* A name of the file: 1..255 bytes, no '/', no NUL, not "." or "..". */
static bool name_ok(const char *name, size_t len)
{
        return len > 0 && len <= 255 && !memchr(name, '/', len) && !memchr(name, '\0', len) &&
               !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

int dircache_parse(struct dircache *dc, char *buf, size_t len)
{
        struct reader r = { (const unsigned char *)buf, len };
        char m[MAGIC_LEN];
        uint32_t n;
        if (len > DIRCACHE_MAX_BYTES || !take(&r, m, MAGIC_LEN) || memcmp(m, magic, MAGIC_LEN) != 0 || !take(&r, &n, sizeof n) ||
            n > DIRCACHE_MAX_RECORDS)
                return -EINVAL;
        struct dircache_rec *v = calloc(n ? n : 1, sizeof *v);
        if (!v)
                return -ENOMEM;
        bool ok = true;
        for (uint32_t i = 0; i < n && ok; i++) {
                uint64_t dev, ino;
                int64_t sec;
                uint32_t nsec, k;
                ok = take(&r, &dev, sizeof dev) && take(&r, &ino, sizeof ino) && take(&r, &sec, sizeof sec) &&
                     take(&r, &nsec, sizeof nsec) && take(&r, &k, sizeof k) && nsec < 1000000000u && k > 0 &&
                     k <= DIRCACHE_MAX_NAMES;
                if (!ok)
                        break;
                v[i] = (struct dircache_rec){ .dev = (dev_t)dev, .ino = (ino_t)ino,
                                              .ctime = { .tv_sec = (time_t)sec, .tv_nsec = (long)nsec },
                                              .names = (const char *)r.p, .n_names = k };
                for (uint32_t j = 0; j < i && ok; j++)
                        ok = !(v[j].dev == v[i].dev && v[j].ino == v[i].ino);  /* one record a directory */
                for (uint32_t j = 0; j < k && ok; j++) {
                        unsigned char l;
                        ok = take(&r, &l, 1) && l <= r.left && name_ok((const char *)r.p, l);
                        if (ok) {
                                r.p += l;
                                r.left -= l;
                        }
                }
        }
        if (!ok || r.left) {
                recs_free(v, n);
                return -EINVAL;
        }
        dircache_free(dc);
        dc->buf = buf;
        dc->v = v;
        dc->n = n;
        return 0;
}

/* Is NAME among the file's names of REC? Looked for from the name after
 * the last one found, round to it: the policy step asks a directory for
 * the names in the order it learned them missing (the deny list's), so
 * the answer is most often the next one: a run's 145 lookups here took
 * 2293 steps from the first name, 257 from there. */
static bool in_file(struct dircache_rec *rec, const char *name)
{
        size_t len = strlen(name);
        const unsigned char *names = (const unsigned char *)rec->names;
        uint32_t j = rec->next;
        size_t at = rec->next_at;
        for (uint32_t seen = 0; names && seen < rec->n_names; seen++) {
                if (j == rec->n_names) {
                        j = 0;
                        at = 0;
                }
                const unsigned char *p = names + at;
                j++;
                at += 1 + (size_t)p[0];
                if (p[0] == len && memcmp(p + 1, name, len) == 0) {
                        rec->next = j;
                        rec->next_at = at;
                        return true;
                }
        }
        return false;
}

static bool has(struct dircache_rec *rec, const char *name)
{
        return in_file(rec, name) || strv_contains(&rec->added, name);
}

static bool writable(const struct dircache_rec *rec)
{
        return rec->n_names + rec->added.n > 0;
}

/* REC's names written (at most DIRCACHE_MAX_NAMES: *k) and its bytes. */
static size_t record_bytes(const struct dircache_rec *rec, uint32_t *k)
{
        size_t all = rec->n_names + rec->added.n, bytes = 32;
        *k = all < DIRCACHE_MAX_NAMES ? (uint32_t)all : DIRCACHE_MAX_NAMES;
        const unsigned char *p = (const unsigned char *)rec->names;
        for (uint32_t j = 0; j < *k; j++) {
                size_t l = j < rec->n_names ? p[0] : strlen(rec->added.items[j - rec->n_names]);
                if (j < rec->n_names)
                        p += 1 + p[0];
                bytes += 1 + l;
        }
        return bytes;
}

int dircache_format(const struct dircache *dc, char **buf, size_t *len)
{
        /* the records of this run first: a full file (records or bytes:
         * what dircache_load would refuse) drops the others, and so does
         * the bound on the unused */
        size_t pick[DIRCACHE_MAX_RECORDS], bytes = MAGIC_LEN + 4;
        uint32_t count = 0, unused = 0, k;
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < dc->n && count < DIRCACHE_MAX_RECORDS; i++) {
                        const struct dircache_rec *rec = &dc->v[i];
                        size_t b = record_bytes(rec, &k);
                        if (!writable(rec) || rec->used != (pass == 0) || bytes + b > DIRCACHE_MAX_BYTES ||
                            (pass == 1 && unused == DIRCACHE_MAX_UNUSED))
                                continue;
                        bytes += b;
                        pick[count++] = i;
                        unused += pass == 1;
                }
        FILE *f = open_memstream(buf, len);
        if (!f)
                return -ENOMEM;
        fwrite(magic, 1, MAGIC_LEN, f);
        fwrite(&count, sizeof count, 1, f);
        for (uint32_t c = 0; c < count; c++) {
                const struct dircache_rec *rec = &dc->v[pick[c]];
                (void)record_bytes(rec, &k);
                uint64_t dev = rec->dev, ino = rec->ino;
                int64_t sec = rec->ctime.tv_sec;
                uint32_t nsec = (uint32_t)rec->ctime.tv_nsec;
                fwrite(&dev, sizeof dev, 1, f);
                fwrite(&ino, sizeof ino, 1, f);
                fwrite(&sec, sizeof sec, 1, f);
                fwrite(&nsec, sizeof nsec, 1, f);
                fwrite(&k, sizeof k, 1, f);
                const unsigned char *p = (const unsigned char *)rec->names;
                for (uint32_t j = 0; j < k; j++) {
                        if (j < rec->n_names) {
                                fwrite(p, 1, 1 + (size_t)p[0], f);
                                p += 1 + p[0];
                                continue;
                        }
                        const char *name = rec->added.items[j - rec->n_names];
                        unsigned char l = (unsigned char)strlen(name);
                        fwrite(&l, 1, 1, f);
                        fwrite(name, 1, l, f);
                }
        }
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
        return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static struct dircache_rec *find(struct dircache *dc, dev_t dev, ino_t ino)
{
        for (size_t i = 0; i < dc->n; i++)
                if (dc->v[i].dev == dev && dc->v[i].ino == ino)
                        return &dc->v[i];
        return NULL;
}

bool dircache_absent(struct dircache *dc, const struct stat *dir, const char *name)
{
        struct dircache_rec *rec = dc ? find(dc, dir->st_dev, dir->st_ino) : NULL;
        if (!rec || !same_time(&rec->ctime, &dir->st_ctim))
                return false;
        rec->used = true;
        return has(rec, name);
}

/* Does FD's filesystem keep its directories' change times (FD on device
 * DEV)? Asked once a device. */
static bool trusted_fs(struct dircache *dc, int fd, dev_t dev)
{
        for (size_t i = 0; i < dc->n_fs; i++)
                if (dc->fs[i].dev == dev)
                        return dc->fs[i].ok;
        struct statfs sf;
        struct stat st;
        bool ok = fstat(fd, &st) == 0 && st.st_dev == dev && fstatfs(fd, &sf) == 0 &&
                  (sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC || sf.f_type == BTRFS_SUPER_MAGIC ||
                   sf.f_type == F2FS_SUPER_MAGIC || sf.f_type == TMPFS_MAGIC);
        /* a device FD is not on is asked again (the answer was FD's) */
        if (st.st_dev == dev && dc->n_fs < ARRAY_SIZE(dc->fs))
                dc->fs[dc->n_fs++] = (typeof(dc->fs[0])){ dev, ok };
        return ok;
}

int dircache_learn(struct dircache *dc, int fd, const struct stat *before, const struct stat *after,
                   const struct strv *names)
{
        if (!dc || !names->n || !S_ISDIR(before->st_mode) || before->st_dev != after->st_dev ||
            before->st_ino != after->st_ino || !same_time(&before->st_ctim, &after->st_ctim))
                return 0;
        struct timespec now;
        if (clock_gettime(CLOCK_REALTIME, &now) < 0)
                return 0;
        /* a change time in the future is as untrusted as a recent one */
        int64_t age = (int64_t)(now.tv_sec - before->st_ctim.tv_sec) * 1000000000 +
                      (now.tv_nsec - before->st_ctim.tv_nsec);
        if (age < dc->margin_ns || !trusted_fs(dc, fd, before->st_dev))
                return 0;
        struct dircache_rec *rec = find(dc, before->st_dev, before->st_ino);
        if (rec && !same_time(&rec->ctime, &before->st_ctim)) {
                /* changed since: what it said is gone */
                rec->names = NULL;
                rec->n_names = 0;
                rec->next = 0;
                rec->next_at = 0;
                strv_free(&rec->added);
                rec->ctime = before->st_ctim;
                dc->dirty = true;
        }
        if (!rec) {
                if (dc->n >= 4 * DIRCACHE_MAX_RECORDS)
                        return 0;
                struct dircache_rec *grown = realloc(dc->v, (dc->n + 1) * sizeof *grown);
                if (!grown)
                        return -ENOMEM;
                dc->v = grown;
                rec = &dc->v[dc->n++];
                *rec = (struct dircache_rec){ .dev = before->st_dev, .ino = before->st_ino, .ctime = before->st_ctim };
        }
        rec->used = true;
        for (size_t i = 0; i < names->n && rec->n_names + rec->added.n < DIRCACHE_MAX_NAMES; i++) {
                const char *name = names->items[i];
                if (!name_ok(name, strlen(name)) || has(rec, name))
                        continue;
                if (strv_push(&rec->added, name) < 0)
                        return -ENOMEM;
                dc->dirty = true;
        }
        return 0;
}

void dircache_load(struct dircache *dc, int dir)
{
        int fd = dir >= 0 ? openat(dir, DIRCACHE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
        struct stat st;
        if (fd < 0)
                return;
        char *buf = NULL;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 &&
            !(st.st_mode & 022) && st.st_size > 0 && st.st_size <= (off_t)DIRCACHE_MAX_BYTES &&
            (buf = malloc((size_t)st.st_size)) && read(fd, buf, (size_t)st.st_size) == st.st_size &&
            dircache_parse(dc, buf, (size_t)st.st_size) == 0)
                buf = NULL;  /* dc's now; a file that is not one: none */
        free(buf);
        close(fd);
}

/* More records than the file keeps of those this run did not use: the
 * file read had them (an older brig's, or a run's that used more). */
static bool overfull(const struct dircache *dc)
{
        size_t unused = 0;
        for (size_t i = 0; i < dc->n; i++)
                unused += writable(&dc->v[i]) && !dc->v[i].used;
        return unused > DIRCACHE_MAX_UNUSED;
}

void dircache_store(const struct dircache *dc, int dir)
{
        char *buf = NULL;
        size_t len = 0;
        if (dir < 0 || !(dc->dirty || overfull(dc)) || dircache_format(dc, &buf, &len) < 0)
                return;
        /* Written nameless (O_TMPFILE) and linked in whole, over the old
         * file: a reader sees the old file, the new one or none (then it
         * looks the homes up), never a part; a brig killed before the link
         * leaves nothing, so no temporary name is ever left to sweep. */
        int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        bool ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;
        free(buf);
        if (ok)
                (void)tmpfile_link_over(fd, dir, DIRCACHE_FILE);
        if (fd >= 0)
                close(fd);
}
