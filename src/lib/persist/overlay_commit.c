/* overlay_commit.c — brig commit: the conflict check against the record
 * of the workspace, then each change applied on the host — written to a
 * temporary name in its own directory and renamed over the old one, under
 * a journal that a later call sweeps — and the record rebased on what it
 * touched. Every path resolved with openat2, never through a symlink. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "persist/overlay.h"
#include "core/reaper.h"
#include "persist/sandbox.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Has the host changed `path` since create (or since our last commit)? */
static const char *host_conflict(struct layer *l, json_t *base, const char *path)
{
        const char *last;
        _cleanup_close_ int parent = open_parent(l->ws, path, &last);
        struct stat st;
        bool exists;
        if (parent < 0) {
                if (parent == -ENOENT || errno == ENOENT)
                        exists = false;
                else
                        return "its directory on the host is a symlink, another filesystem, or unreadable";
        } else {
                exists = fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) == 0;
        }
        json_t *rec = json_object_get(base, path);
        if (!rec && exists)
                return "created on the host since brig create";
        if (rec && !exists)
                return "deleted on the host since brig create";
        if (rec && !record_matches(rec, &st))
                return "changed on the host since brig create";
        return NULL;
}

/* A deleted directory takes everything below it on the host: all of it
 * must still be as recorded. */
static const char *tree_conflict(struct layer *l, json_t *base, const char *path)
{
        const char *why = host_conflict(l, base, path);
        if (why)
                return why;
        size_t n = strlen(path);
        const char *key;
        json_t *v;
        json_object_foreach(base, key, v) {
                if (strncmp(key, path, n) == 0 && key[n] == '/' && (why = host_conflict(l, base, key)))
                        return "something below it changed on the host since brig create";
        }
        json_t *now = json_object();
        _cleanup_close_ int dfd = open_beneath(l->ws, path, O_RDONLY | O_DIRECTORY);
        /* What could not be walked through (deeper than TREE_DEPTH_MAX,
         * EMFILE) may hold host files: then it is not deleted. */
        if (now && dfd >= 0 && record_tree(dfd, path, now, 0) < 0) {
                json_decref(now);
                return "too deep below it on the host to check what it holds";
        }
        json_object_foreach(now, key, v) {
                if (!json_object_get(base, key)) {
                        json_decref(now);
                        return "something below it was created on the host since brig create";
                }
        }
        json_decref(now);
        return NULL;
}

/* Who owns what commit creates: existing entries keep their owner; new
 * ones get their directory's (as root; rootless everything is ours). */
static void set_owner(int parent, const char *name, const struct stat *old, bool existed)
{
        if (geteuid() != 0)
                return;
        struct stat dir;
        if (!existed && fstat(parent, &dir) < 0)
                return;
        const struct stat *from = existed ? old : &dir;
        (void)!fchownat(parent, name, from->st_uid, from->st_gid, AT_SYMLINK_NOFOLLOW);
}

/* ---- the commit's temporary names in the workspace --------------------------
 *
 * A commit writes each file under a temporary name next to its target and
 * renames it over. Killed in between, it would leave that name in the
 * user's workspace for good: so the name says whose it is
 * (.brig-commit-PID-START-PIDNS-N), and it is noted in the sandbox's
 * commit.PID-START-PIDNS journal before it is made. The next commit, reset
 * or rm of the sandbox removes what a dead committer's journal lists
 * (commit_sweep), by name, beneath the workspace, following no symlink. */

#define COMMIT_TEMP ".brig-commit-"

static int temp_name(struct layer *l, const struct change *c, char *buf, size_t n)
{
        static unsigned counter;
        struct owner o;
        char id[96];
        owner_self(&o);
        if (owner_format(&o, id, sizeof id) < 0 || snprintf(buf, n, COMMIT_TEMP "%s-%u", id, ++counter) >= (int)n)
                return -ENAMETOOLONG;
        const char *slash = strrchr(c->path, '/');
        _cleanup_free_ char *line = slash ? brig_strdup_printf("%.*s/%s\n", (int)(slash - c->path), c->path, buf)
                                          : brig_strdup_printf("%s\n", buf);
        if (!line)
                return -ENOMEM;
        if (l->journal >= 0 && write(l->journal, line, strlen(line)) != (ssize_t)strlen(line))
                return -(errno ? errno : EIO);  /* not noted, not made */
        return 0;
}

/* The journal of this commit, made before any temporary name. */
static int journal_open(struct layer *l, char **path, brig_error **err)
{
        struct owner o;
        char id[96];
        owner_self(&o);
        *path = owner_format(&o, id, sizeof id) == 0 ? brig_strdup_printf("%s/commit.%s", l->dir, id) : NULL;
        if (!*path)
                return brig_err(err, ENOMEM, "commit journal");
        l->journal = open(*path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        return l->journal < 0 ? brig_err(err, errno, "commit journal '%s'", *path) : 0;
}

/* Remove the temporary names of commits whose process is gone. */
void commit_sweep(const char *dir, int ws)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
                struct owner o;
                const char *rest;
                if (strncmp(e->d_name, "commit.", 7) != 0 || !owner_parse(e->d_name + 7, &o, &rest) || *rest ||
                    owner_alive(&o) != 0)
                        continue;
                char prefix[128];
                snprintf(prefix, sizeof prefix, COMMIT_TEMP "%s-", e->d_name + 7);
                _cleanup_free_ char *text = ws >= 0 ? state_read_file(dir, e->d_name, NULL) : NULL;
                for (char *line = text, *next; line && *line; line = next) {
                        next = strchr(line, '\n');
                        if (next)
                                *next++ = '\0';
                        const char *last;
                        _cleanup_close_ int parent = open_parent(ws, line, &last);
                        if (parent >= 0 && strncmp(last, prefix, strlen(prefix)) == 0)
                                (void)unlinkat(parent, last, 0);
                }
                if (ws >= 0)
                        (void)unlinkat(dirfd(d), e->d_name, 0);
        }
        if (d)
                closedir(d);
}

void overlay_sweep_commits(const char *dir, json_t *st)
{
        const char *ws = json_string_value(json_object_get(st, "workspace"));
        _cleanup_close_ int fd = ws ? open_dir_nofollow(ws) : -EBADF;
        commit_sweep(dir, fd);
}

/* Copy the layer's file to a temporary name next to the target, then
 * rename it over: the target is the old file or the new one, never half. */
static int commit_file(struct layer *l, const struct change *c, int parent, const char *last)
{
        _cleanup_close_ int src = open_beneath(l->upper, c->path, O_RDONLY | O_NONBLOCK);
        struct stat sst, old;
        if (src < 0 || fstat(src, &sst) < 0 || !S_ISREG(sst.st_mode))
                return src < 0 ? src : -EINVAL;
        bool existed = fstatat(parent, last, &old, AT_SYMLINK_NOFOLLOW) == 0;
        char tmp[128];
        int r = temp_name(l, c, tmp, sizeof tmp);
        if (r < 0)
                return r;
        _cleanup_close_ int dst = -EBADF;
        const char *first = link_first(&l->links, &sst, c->path);
        if (first) {
                /* Another name of an inode this commit already wrote: a
                 * link to that copy (both opened without symlinks, beneath
                 * the workspace), renamed over like any file. */
                const char *flast;
                _cleanup_close_ int fparent = open_parent(l->ws, first, &flast);
                if (fparent < 0)
                        return fparent == -1 ? -errno : fparent;
                if (linkat(fparent, flast, parent, tmp, 0) < 0)
                        return -errno;
                if (existed && S_ISDIR(old.st_mode) && (r = tree_remove_at(parent, last)) < 0)
                        goto fail;
                if (renameat(parent, tmp, parent, last) < 0) {
                        r = -errno;
                        goto fail;
                }
                return 0;
        }
        dst = openat(parent, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return -errno;
        if ((r = copy_data(src, dst)) < 0)
                goto fail;
        /* no setuid/setgid: the layer's owner was the sandbox, the file's
         * owner on the host may be root */
        if (fchmod(dst, c->mode & 0777) < 0 || fsync(dst) < 0) {
                r = -errno;
                goto fail;
        }
        set_owner(parent, tmp, &old, existed);
        test_pause("commit-temp-made");
        if (existed && S_ISDIR(old.st_mode) && (r = tree_remove_at(parent, last)) < 0)
                goto fail;
        if (renameat(parent, tmp, parent, last) < 0) {
                r = -errno;
                goto fail;
        }
        return 0;
fail:
        unlinkat(parent, tmp, 0);
        return r;
}

static int commit_symlink(struct layer *l, const struct change *c, int parent, const char *last)
{
        const char *ulast;
        _cleanup_close_ int uparent = open_parent(l->upper, c->path, &ulast);
        char target[4096];
        ssize_t n = uparent >= 0 ? readlinkat(uparent, ulast, target, sizeof target - 1) : -1;
        if (n < 0)
                return -errno;
        target[n] = '\0';
        struct stat old;
        bool existed = fstatat(parent, last, &old, AT_SYMLINK_NOFOLLOW) == 0;
        char tmp[128];
        int r = temp_name(l, c, tmp, sizeof tmp);
        if (r < 0)
                return r;
        if (symlinkat(target, parent, tmp) < 0)
                return -errno;
        set_owner(parent, tmp, &old, existed);
        if (existed && S_ISDIR(old.st_mode) && (r = tree_remove_at(parent, last)) < 0) {
                unlinkat(parent, tmp, 0);
                return r;
        }
        if (renameat(parent, tmp, parent, last) < 0) {
                r = -errno;
                unlinkat(parent, tmp, 0);
                return r;
        }
        return 0;
}

static int commit_dir(const struct change *c, int parent, const char *last)
{
        struct stat old;
        bool existed = fstatat(parent, last, &old, AT_SYMLINK_NOFOLLOW) == 0;
        if (existed && !S_ISDIR(old.st_mode)) {
                if (unlinkat(parent, last, 0) < 0)
                        return -errno;
                existed = false;
        }
        if (!existed) {
                if (mkdirat(parent, last, 0700) < 0)
                        return -errno;
                set_owner(parent, last, &old, false);
        }
        /* u+rwx until everything below is in (commit_dir_modes), so a
         * directory the sandbox made read-only can still be filled. */
        _cleanup_close_ int fd = openat(parent, last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, (c->mode & 01777) | 0700) < 0)
                return -errno;
        return 0;
}

/* The directories' own modes, once the first n changes are applied:
 * deepest first (the list is sorted parents first), so every directory
 * above is still open to us while one below is set. */
static void commit_dir_modes(struct layer *l, const struct changes *c, size_t n)
{
        for (size_t i = n; i-- > 0;) {
                const struct change *ch = &c->v[i];
                if (ch->kind == CH_DELETED || ch->type != S_IFDIR || (ch->mode & 0700) == 0700)
                        continue;
                _cleanup_close_ int fd = open_beneath(l->ws, ch->path, O_RDONLY | O_DIRECTORY);
                if (fd >= 0)
                        (void)!fchmod(fd, ch->mode & 01777);
        }
}

static int apply_change(struct layer *l, const struct change *c)
{
        const char *last;
        _cleanup_close_ int parent = open_parent(l->ws, c->path, &last);
        if (parent < 0)
                return parent == -1 ? -errno : parent;
        /* A filesystem mounted in the workspace is not the workspace's
         * (the sandbox saw an empty directory): never emptied (EXDEV). */
        if (c->kind == CH_DELETED)
                return tree_remove_at(parent, last);
        switch (c->type) {
        case S_IFREG: return commit_file(l, c, parent, last);
        case S_IFLNK: return commit_symlink(l, c, parent, last);
        case S_IFDIR: return commit_dir(c, parent, last);
        default: return 0;  /* special files are never committed */
        }
}

/* After a commit, the host state of what it touched is the new base. */
static void rebase(struct layer *l, json_t *base, const struct change *c)
{
        const char *last;
        _cleanup_close_ int parent = open_parent(l->ws, c->path, &last);
        struct stat st;
        size_t n = strlen(c->path);
        if (c->kind == CH_DELETED || parent < 0 || fstatat(parent, last, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                json_object_del(base, c->path);
                const char *key;
                void *tmp;
                json_t *v;
                json_object_foreach_safe(base, tmp, key, v)
                        if (strncmp(key, c->path, n) == 0 && key[n] == '/')
                                json_object_del(base, key);
                return;
        }
        json_object_set_new(base, c->path, entry_record(&st));
}

#ifdef BRIG_TEST_HOOKS
/* Test builds only: BRIG_TEST_COMMIT_PAUSE=DIR stops commit between the
 * conflict check and the first write — it makes DIR/checked and waits
 * (up to 60 s) for DIR/go — so a test can swap workspace directories for
 * symlinks exactly where a race would have to land. */
static void test_pause_before_writes(void)
{
        const char *dir = getenv("BRIG_TEST_COMMIT_PAUSE");
        if (!dir)
                return;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return;
        close(openat(dfd, "checked", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        for (int i = 0; i < 6000 && faccessat(dfd, "go", F_OK, 0) < 0; i++)
                nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
}
#else
static void test_pause_before_writes(void)
{
}
#endif

int brig_sandbox_commit_filtered(const char *name, const brig_change_filter *filter, char **applied_json,
                                 brig_error **err);

int brig_sandbox_commit(const char *name, char **applied_json, brig_error **err)
{
        return brig_sandbox_commit_filtered(name, NULL, applied_json, err);
}

int brig_sandbox_commit_filtered(const char *name, const brig_change_filter *filter, char **applied_json,
                                 brig_error **err)
{
        struct layer l;
        struct changes c = { 0 };
        struct filter sel = { 0 };
        json_t *base = NULL;
        _cleanup_free_ char *root = NULL, *journal = NULL;
        _cleanup_close_ int lock = -EBADF;
        if (applied_json)
                *applied_json = NULL;
        int r = state_root(false, &root, err);
        if (r == 0 && (lock = state_lock(root, err)) < 0)
                r = lock;
        if (r < 0)
                return r;
        r = layer_open(name, &l, err);
        if (r < 0)
                goto out;
        commit_sweep(l.dir, l.ws);  /* what a killed commit left in the workspace */
        r = journal_open(&l, &journal, err);
        if (r < 0) {
                brig_err_prefix(err, "commit '%s'", name);
                goto out;
        }
        r = filter_prepare(l.workspace, filter, &sel, err);
        if (r < 0) {
                brig_err_prefix(err, "commit '%s'", name);
                goto out;
        }
        c.filter = &sel;
        r = layer_diff(&l, &c);
        if (r < 0 && c.stopped_at) {
                layer_walk_failed(err, "commit", name, r, c.stopped_at);
                goto out;
        }
        if (r < 0) {
                brig_err(err, -r, "commit '%s': read the layer", name);
                goto out;
        }
        base = manifest_read(l.dir, err);
        if (!base) {
                r = -EBADMSG;
                goto out;
        }
        /* Only what is selected is checked and applied (and what it needs). */
        r = filter_changes(&c, &sel, base);
        if (r < 0) {
                brig_err(err, -r, "commit '%s'", name);
                goto out;
        }
        /* Every conflict first; with any, nothing is applied. */
        char *report = NULL;
        size_t len = 0, conflicts = 0;
        FILE *f = open_memstream(&report, &len);
        for (size_t i = 0; f && i < c.n; i++) {
                /* Deleting a host directory, or replacing it by a file or a
                 * symlink, removes everything below it on the host: all of
                 * it must still be as recorded, or the host's files added
                 * there since create would be deleted without a word. */
                const char *was = json_string_value(json_array_get(json_object_get(base, c.v[i].path), 0));
                bool host_dir = was && was[0] == 'd';
                bool drops_dir = (c.v[i].kind == CH_DELETED && c.v[i].type == S_IFDIR) ||
                                 (c.v[i].kind == CH_MODIFIED && c.v[i].type != S_IFDIR && host_dir);
                const char *why = drops_dir ? tree_conflict(&l, base, c.v[i].path)
                                            : host_conflict(&l, base, c.v[i].path);
                if (why) {
                        fprintf(f, "\n  %s: %s", c.v[i].path, why);
                        conflicts++;
                }
        }
        if (f)
                fclose(f);
        if (!report) {
                r = brig_err(err, ENOMEM, "commit");
                goto out;
        }
        if (conflicts) {
                r = state_fail(err, EBUSY, "commit '%s': %zu conflict%s, nothing applied (the host's version is kept; "
                                           "brig diff shows the sandbox's changes):%s",
                               name, conflicts, conflicts == 1 ? "" : "s", report);
                free(report);
                goto out;
        }
        free(report);
        test_pause_before_writes();
        json_t *applied = json_array();
        size_t i;
        for (i = 0; i < c.n; i++) {
                if (c.v[i].special)
                        continue;
                r = apply_change(&l, &c.v[i]);
                if (r < 0) {
                        brig_err(err, -r, "commit '%s': %s '%s' (changes before it are applied)", name,
                                 kind_name(c.v[i].kind), c.v[i].path);
                        rebase(&l, base, &c.v[i]);
                        i++;
                        break;
                }
                rebase(&l, base, &c.v[i]);
                json_array_append_new(applied, json_pack("{s:s, s:s, s:s}", "path", c.v[i].path, "change",
                                                         kind_name(c.v[i].kind), "type", type_name(c.v[i].type)));
        }
        commit_dir_modes(&l, &c, i);
        /* Even after a failure midway: what was applied is the new base. */
        brig_error *merr = NULL;
        int mr = manifest_write(l.dir, base, r < 0 ? &merr : err);
        brig_error_free(&merr);
        if (r == 0)
                r = mr;
        if (r == 0 && applied_json)
                *applied_json = json_dumps(applied, JSON_INDENT(2));
        json_decref(applied);
out:
        if (journal && l.journal >= 0)
                unlink(journal);  /* every temporary name is gone: renamed over, or removed */
        json_decref(base);
        filter_free(&sel);
        changes_free(&c);
        layer_close(&l);
        return r;
}
