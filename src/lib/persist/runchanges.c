/* runchanges.c — what a run changed in the workspace and the other
 * writable grants: every entry recorded before the sandbox starts, again
 * when it has ended, compared; added, modified and deleted paths with
 * their sizes and, for regular files, the SHA-256 of what is there now
 * (the audit stream's `files` event, replay's comparison).
 *
 * The sandbox wrote these trees and may have planted anything in them:
 * symlinks to the host's files, FIFOs, devices, directories nested past
 * any depth, mounts. The walk is the overlay's (record_tree_with: lstat,
 * O_NOFOLLOW, never across a mount), each root is opened before the
 * sandbox runs and kept, and a file is opened for its hash only beneath
 * its root without any symlink (open_beneath), non-blocking, and read
 * only when it is a regular file: a planted link is reported as a link,
 * never followed. A record has the inode's ctime, which no process can
 * set back (utimensat sets mtime and atime only): a file rewritten with
 * its size and mtime restored is still seen.
 *
 * Bounded, so that a tree of millions of entries cannot make the end of
 * a run unbounded in time or memory: each walk records at most
 * --changes-max entries over all roots (100000 by default), directories
 * at most TREE_DEPTH_MAX deep, and hashes at most HASH_TOTAL_MAX bytes.
 * A walk that stops says so (stopped_at, errors, complete false) and
 * lists only what both walks saw changed: what it did not reach is
 * neither added nor deleted. */
#define _GNU_SOURCE
#include "persist/runchanges.h"
#include "persist/overlay.h"
#include "core/ossl_fns.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The changes listed in the event; past it they are only counted. */
#define CHANGES_LISTED 1000
/* Bytes hashed per file and per run; a larger file's hash is null. */
#define HASH_FILE_MAX (64ULL << 20)
#define HASH_TOTAL_MAX (512ULL << 20)
#define PATH_MAX_TEXT 4096

struct root {
        char *path;   /* on the host */
        int fd;
        json_t *before;
        int error;    /* the walk before failed: nothing to compare */
        bool stopped; /* the walk before reached the cap */
        char *unreadable; /* the first directory the walk before could not open */
};

struct runchanges {
        struct root *roots;
        size_t n;
        bool live;          /* brig diff: the sandbox may be running */
        uint64_t max;       /* entries per walk over all roots; 0: no cap */
        size_t listed;      /* changes listed; past it only counted */
        uint64_t hashed;
        uint64_t unhashed;  /* files listed without their hash (the caps) */
};

/* type, inode, size, mtime and ctime (ns), mode */
static json_t *change_record(const struct stat *st)
{
        char type = S_ISDIR(st->st_mode) ? 'd' : S_ISREG(st->st_mode) ? 'f' : S_ISLNK(st->st_mode) ? 'l' : 'o';
        return json_pack("[s#, I, I, I, I, i]", &type, (size_t)1, (json_int_t)st->st_ino, (json_int_t)st->st_size,
                         (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
                         (json_int_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec,
                         (int)(st->st_mode & 07777));
}

/* -E2BIG: stopped at the cap, *out holds what it recorded. */
static int walk(const struct root *r, json_t **out, struct tree_cap *cap)
{
        *out = json_object();
        if (!*out)
                return -ENOMEM;
        /* record_tree reads a duplicate, which shares the offset: from
         * the start again at the end of the run */
        lseek(r->fd, 0, SEEK_SET);
        int e = record_tree_with(r->fd, "", *out, 0, change_record, cap);
        if (e < 0 && e != -E2BIG) {
                json_decref(*out);
                *out = NULL;
        }
        return e;
}

/* A directory's record: type, inode, size, mtime, ctime, mode. */
static bool is_dir(json_t *rec)
{
        const char *t = json_string_value(json_array_get(rec, 0));
        return t && *t == 'd';
}

/* Every directory of a the same in b, and b has none a lacks. */
static bool dirs_same(json_t *a, json_t *b)
{
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v)
                if (is_dir(v) && !json_equal(v, json_object_get(b, k)))
                        return false;
        json_object_foreach(b, k, v)
                if (is_dir(v) && !json_object_get(a, k))
                        return false;
        return true;
}

static bool times_same(const struct stat *a, const struct stat *b)
{
        return a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
               a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

#define SETTLE_TRIES 4

/* brig diff walks a sandbox that may be running, and a file it moves
 * from a directory the walk has not read yet into one it has read is
 * in neither (a rename back and forth hid an added file from one diff
 * in six). A rename changes both directories' mtime and ctime: the walk
 * is taken when a second one finds the root's and every directory's
 * the same, else walked again; -EAGAIN when it never settles. */
static int walk_settled(const struct root *r, json_t **out, struct tree_cap *cap)
{
        for (int i = 0; i < SETTLE_TRIES; i++) {
                struct tree_cap c1 = { .max = cap->max, .left = cap->left };
                struct tree_cap c2 = c1;
                struct stat s0, s1;
                json_t *again = NULL;
                int e = fstat(r->fd, &s0) < 0 ? -errno : walk(r, out, &c1);
                int e2 = e == 0 || e == -E2BIG ? walk(r, &again, &c2) : e;
                bool settled = e2 == e && (e < 0 && e != -E2BIG ? true : dirs_same(*out, again)) &&
                               fstat(r->fd, &s1) == 0 && times_same(&s0, &s1);
                json_decref(again);
                free(c2.unreadable);
                if (settled) {
                        cap->left = c1.left;
                        cap->unreadable = c1.unreadable;
                        return e;
                }
                free(c1.unreadable);
                json_decref(*out);
                *out = NULL;
        }
        return -EAGAIN;
}

int runchanges_begin(const char *const *roots, size_t n, uint64_t max, struct runchanges **ret)
{
        struct runchanges *c = calloc(1, sizeof *c);
        if (!c || (n && !(c->roots = calloc(n, sizeof *c->roots)))) {
                free(c);
                return -ENOMEM;
        }
        c->max = max;
        c->listed = CHANGES_LISTED;
        struct tree_cap cap = { .max = max, .left = max };
        for (size_t i = 0; i < n; i++) {
                struct root *r = &c->roots[c->n++];
                r->fd = -1;
                r->path = strdup(roots[i]);
                if (!r->path) {
                        runchanges_free(c);
                        return -ENOMEM;
                }
                r->fd = open_dir_nofollow(roots[i]);
                int e = r->fd < 0 ? -errno : walk(r, &r->before, &cap);
                r->stopped = e == -E2BIG;
                r->error = e < 0 && !r->stopped ? -e : 0;
                r->unreadable = TAKE_PTR(cap.unreadable);
        }
        *ret = c;
        return 0;
}

/* The SHA-256 of a regular file beneath root, or null. */
static json_t *file_hash(struct runchanges *c, int root, const char *rel, uint64_t size)
{
        if (size > HASH_FILE_MAX || c->hashed + size > HASH_TOTAL_MAX) {
                c->unhashed++;
                return json_null();
        }
        _cleanup_close_ int fd = open_beneath(root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        char hex[SHA256_HEX];
        bool hashed = false;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
                c->hashed += size;  /* counted as what it had: a file that grows is cut off by sha256_fd */
                hashed = sha256_fd(fd, HASH_FILE_MAX, hex) == 0;
        }
        if (hashed)
                return json_string(hex);
        c->unhashed++;  /* swapped meanwhile or unreadable: listed without its hash, and counted */
        return json_null();
}

static const char *entry_type(json_t *rec)
{
        const char *t = json_string_value(json_array_get(rec, 0));
        return !t ? "other" : *t == 'd' ? "directory" : *t == 'f' ? "file" : *t == 'l' ? "symlink" : "other";
}

/* A directory's size and times change with its entries: its type, inode
 * and mode say whether it is the same. */
static bool same(json_t *a, json_t *b)
{
        const char *ta = json_string_value(json_array_get(a, 0)), *tb = json_string_value(json_array_get(b, 0));
        if (ta && tb && *ta == 'd' && *tb == 'd')
                return json_equal(json_array_get(a, 1), json_array_get(b, 1)) &&
                       json_equal(json_array_get(a, 5), json_array_get(b, 5));
        return json_equal(a, b);
}

static void add_change(struct runchanges *c, const struct root *r, json_t *list, const char *change,
                       const char *rel, json_t *rec, uint64_t *counts)
{
        counts[change[0] == 'a' ? 0 : change[0] == 'm' ? 1 : 2]++;
        if (json_array_size(list) >= c->listed)
                return;
        _cleanup_free_ char *path = join(r->path, rel);
        json_t *size = json_array_get(rec, 2);
        bool file = strcmp(entry_type(rec), "file") == 0;
        json_t *o = json_pack("{s:s, s:s, s:s, s:O, s:O}", "change", change, "path", path ? path : "?", "type",
                              entry_type(rec), "size", size ? size : json_null(), "mode",
                              json_array_get(rec, 5) ?: json_null());
        if (file && change[0] != 'd')
                json_object_set_new(o, "sha256", file_hash(c, r->fd, rel, (uint64_t)json_integer_value(size)));
        json_array_append_new(list, o);
}

json_t *runchanges_end(struct runchanges *c)
{
        json_t *list = json_array(), *errors = json_array();
        uint64_t counts[3] = { 0 };
        struct tree_cap cap = { .max = c ? c->max : 0, .left = c ? c->max : 0 };
        bool stopped = false;
        for (size_t i = 0; c && i < c->n; i++) {
                struct root *r = &c->roots[i];
                json_t *after = NULL;
                int e = r->error ? -r->error : r->fd < 0 ? -EBADF : c->live ? walk_settled(r, &after, &cap)
                                                                             : walk(r, &after, &cap);
                _cleanup_free_ char *unreadable = TAKE_PTR(cap.unreadable);
                const char *hidden = r->unreadable ? r->unreadable : unreadable;
                /* Stopped at the cap, before or now, or a directory it could
                 * not read: what one walk did not reach is neither added nor
                 * deleted, only what both saw is compared, and the event
                 * says so. An entry the walk now reached that a complete
                 * walk before did not see is added all the same: the
                 * sandbox, which shapes the walk now (chmod 000, entries
                 * past the cap), would otherwise hide every file it added
                 * anywhere in the root behind one such directory. */
                bool capped = r->stopped || e == -E2BIG, partial = capped || hidden;
                bool before_partial = r->stopped || r->unreadable;
                e = e == -E2BIG ? 0 : -e;
                char what[768];
                if (!e && capped) {
                        snprintf(what, sizeof what, "%s: the walk stopped at %llu entries (--changes-max): only "
                                 "changes to entries it reached are listed", r->path, (unsigned long long)c->max);
                        json_array_append_new(errors, json_string(what));
                        stopped = true;
                }
                if (!e && hidden) {
                        snprintf(what, sizeof what, "%s/%.256s: a directory brig cannot read (made so inside, "
                                 "chmod 000 or the like): only changes to entries it reached are listed",
                                 r->path, hidden);
                        json_array_append_new(errors, json_string(what));
                }
                if (e) {
                        /* fail visible: no list that would call the rest deleted */
                        snprintf(what, sizeof what, "%s: %s", r->path,
                                 e == ELOOP    ? "directories nested deeper than brig walks (256)"
                                 : e == EAGAIN ? "its entries kept moving while brig walked it (a running "
                                                 "sandbox): brig pause NAME, or stop it, then diff again"
                                               : strerror(e));
                        json_array_append_new(errors, json_string(what));
                        continue;
                }
                const char *rel;
                json_t *rec;
                json_object_foreach(after, rel, rec) {
                        json_t *was = json_object_get(r->before, rel);
                        if (!was && !before_partial)
                                add_change(c, r, list, "added", rel, rec, counts);
                        else if (was && !same(was, rec))
                                add_change(c, r, list, "modified", rel, rec, counts);
                }
                json_object_foreach(r->before, rel, rec)
                        if (!partial && !json_object_get(after, rel))
                                add_change(c, r, list, "deleted", rel, rec, counts);
                json_decref(after);
        }
        json_t *o = json_pack("{s:I, s:I, s:I, s:o, s:b}", "added", (json_int_t)counts[0], "modified",
                              (json_int_t)counts[1], "deleted", (json_int_t)counts[2], "changes", list, "complete",
                              json_array_size(list) == counts[0] + counts[1] + counts[2] && !json_array_size(errors));
        if (json_array_size(errors))
                json_object_set_new(o, "errors", errors);
        else
                json_decref(errors);
        if (stopped)
                json_object_set_new(o, "stopped_at", json_integer((json_int_t)c->max));
        if (c && c->unhashed)
                json_object_set_new(o, "unhashed", json_integer((json_int_t)c->unhashed));
        return o;
}

/* ---- kept: a persistent sandbox's record since create -------------------- */

json_t *runchanges_save(const struct runchanges *c)
{
        json_t *roots = json_array();
        for (size_t i = 0; roots && i < c->n; i++) {
                const struct root *r = &c->roots[i];
                json_t *o = json_pack("{s:s, s:i, s:b, s:o}", "path", r->path, "error", r->error, "stopped",
                                      r->stopped, "entries", r->before ? json_incref(r->before) : json_object());
                if (o && r->unreadable)
                        json_object_set_new(o, "unreadable", json_string(r->unreadable));
                json_array_append_new(roots, o);
        }
        return json_pack("{s:i, s:I, s:o}", "v", 1, "max", (json_int_t)c->max, "roots", roots);
}

int runchanges_from(json_t *saved, bool list_all, struct runchanges **ret)
{
        json_t *roots = json_object_get(saved, "roots");
        size_t n = json_array_size(roots);
        struct runchanges *c = calloc(1, sizeof *c);
        if (!c || (n && !(c->roots = calloc(n, sizeof *c->roots)))) {
                free(c);
                return -ENOMEM;
        }
        c->max = (uint64_t)json_integer_value(json_object_get(saved, "max"));
        c->listed = list_all ? SIZE_MAX : CHANGES_LISTED;
        c->live = list_all;  /* brig diff, perhaps of a running sandbox; the stop's event walks a stopped one */
        for (size_t i = 0; i < n; i++) {
                json_t *o = json_array_get(roots, i);
                struct root *r = &c->roots[c->n++];
                r->fd = -1;
                r->path = strdup(json_string_value(json_object_get(o, "path")) ?: "?");
                if (!r->path) {
                        runchanges_free(c);
                        return -ENOMEM;
                }
                r->before = json_incref(json_object_get(o, "entries"));
                r->stopped = json_is_true(json_object_get(o, "stopped"));
                const char *hidden = json_string_value(json_object_get(o, "unreadable"));
                if (hidden && !(r->unreadable = strdup(hidden))) {
                        runchanges_free(c);
                        return -ENOMEM;
                }
                r->error = (int)json_integer_value(json_object_get(o, "error"));
                /* the same path, opened again: a root that became a symlink
                 * since is not followed (its error says so) */
                r->fd = open_dir_nofollow(r->path);
                if (r->fd < 0 && !r->error)
                        r->error = errno;
        }
        *ret = c;
        return 0;
}

void runchanges_free(struct runchanges *c)
{
        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++) {
                closep(&c->roots[i].fd);
                free(c->roots[i].path);
                free(c->roots[i].unreadable);
                json_decref(c->roots[i].before);
        }
        free(c->roots);
        free(c);
}

/* ---- a tree's hash, for a manifest and brig replay ------------------------ */

static int by_key(const void *x, const void *y)
{
        return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Every entry, sorted by path: "path\0type\0mode\0what\n" where what is a
 * regular file's SHA-256 (its size past HASH_FILE_MAX), a symlink's
 * target (read, never followed), "" for the rest. Inodes and times are
 * left out: a copy of the tree has the same hash. */
static int tree_hash(int root, uint64_t max, char sha256[65], uint64_t *entries)
{
        json_t *tree = NULL;
        struct root r = { .fd = root };
        struct tree_cap cap = { .max = max, .left = max };
        int e = walk(&r, &tree, &cap);
        free(cap.unreadable);  /* the entry is there, with its mode: the hash changes with it */
        if (e < 0) {
                json_decref(tree);
                return e;
        }
        size_t n = json_object_size(tree), i = 0;
        const char **keys = calloc(n + 1, sizeof *keys);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!keys || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
                free(keys);
                EVP_MD_CTX_free(md);
                json_decref(tree);
                return -ENOMEM;
        }
        const char *k;
        json_t *v;
        json_object_foreach(tree, k, v)
                keys[i++] = k;
        qsort(keys, i, sizeof *keys, by_key);
        struct runchanges unlimited = { .hashed = 0 };
        for (size_t j = 0; j < i; j++) {
                json_t *rec = json_object_get(tree, keys[j]);
                const char *type = json_string_value(json_array_get(rec, 0));
                char what[PATH_MAX_TEXT] = "";
                if (type && *type == 'f') {
                        unlimited.hashed = 0;
                        json_t *h = file_hash(&unlimited, root, keys[j], (uint64_t)json_integer_value(json_array_get(rec, 2)));
                        snprintf(what, sizeof what, "%s", json_is_string(h) ? json_string_value(h) : "");
                        if (!json_is_string(h))
                                snprintf(what, sizeof what, "size:%lld", (long long)json_integer_value(json_array_get(rec, 2)));
                        json_decref(h);
                } else if (type && *type == 'l') {
                        const char *base;
                        int pfd = open_parent(root, keys[j], &base);
                        ssize_t len = pfd >= 0 ? readlinkat(pfd, base, what, sizeof what - 1) : -1;
                        what[len > 0 ? len : 0] = '\0';
                        closep(&pfd);
                }
                char head[64];
                snprintf(head, sizeof head, "%c%c%o%c", type ? *type : '?', '\0',
                         (unsigned)json_integer_value(json_array_get(rec, 5)), '\0');
                EVP_DigestUpdate(md, keys[j], strlen(keys[j]) + 1);
                EVP_DigestUpdate(md, head, 2 + strlen(head + 2) + 1);
                EVP_DigestUpdate(md, what, strlen(what));
                EVP_DigestUpdate(md, "\n", 1);
        }
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned len = 0;
        bool ok = EVP_DigestFinal_ex(md, out, &len);
        for (unsigned j = 0; ok && j < len && j < 32; j++)
                snprintf(sha256 + 2 * j, 3, "%02x", out[j]);
        EVP_MD_CTX_free(md);
        free(keys);
        json_decref(tree);
        if (entries)
                *entries = i;
        return ok ? 0 : -EIO;
}

int runchanges_tree_hash(const char *dir, uint64_t max, char sha256[65], uint64_t *entries, brig_error **err)
{
        _cleanup_close_ int fd = open_dir_nofollow(dir);
        if (fd < 0)
                return brig_err(err, errno, "'%s' (a directory; symlinks are not followed)", dir);
        int r = tree_hash(fd, max, sha256, entries);
        if (r == -ELOOP)
                return brig_err(err, ELOOP, "hash the tree '%s': directories nested deeper than %d", dir,
                                TREE_DEPTH_MAX);
        if (r == -E2BIG)
                return brig_err(err, E2BIG, "hash the tree '%s': more than %llu entries (--changes-max N raises "
                                "the cap)", dir, (unsigned long long)max);
        return r < 0 ? brig_err(err, -r, "hash the tree '%s'", dir) : 0;
}

int brig_tree_hash(const char *dir, char sha256[65], uint64_t *entries, brig_error **err)
{
        return runchanges_tree_hash(dir, 0, sha256, entries, err);
}
