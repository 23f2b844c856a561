/* state.c — the state of named sandboxes: one directory per sandbox under
 * a per-user root that nobody else can write, a flock for create and rm,
 * and a state.json the supervisor rewrites whole (rename) so a reader never
 * sees half of it. */
#define _GNU_SOURCE
#include "controls/mountinfo.h"
#include "core/fsutil.h"
#include "core/hostfs.h"
#include "persist/state.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

int state_dir_locked(const char *name, bool create_root, char **dir_out, char **root_out, brig_error **err)
{
        _cleanup_free_ char *dir = NULL, *root = NULL;
        int r = state_dir(name, create_root, &dir, err);
        if (r == 0)
                r = state_root(false, &root, err);
        if (r < 0)
                return r;
        int lock = state_lock(root, err);
        if (lock < 0)
                return lock;
        *dir_out = TAKE_PTR(dir);
        if (root_out)
                *root_out = TAKE_PTR(root);
        return lock;
}

int state_write(const char *dir, json_t *doc, brig_error **err)
{
        return state_write_file(dir, "state.json", doc, JSON_INDENT(2) | JSON_SORT_KEYS, err);
}

int state_write_file(const char *dir, const char *name, json_t *doc, size_t json_flags, brig_error **err)
{
        _cleanup_free_ char *tmp = brig_strdup_printf("%s/.%s.tmp", dir, name);
        _cleanup_free_ char *final = brig_strdup_printf("%s/%s", dir, name);
        _cleanup_free_ char *text = json_dumps(doc, json_flags);
        if (!tmp || !final || !text)
                return brig_err(err, ENOMEM, "state file");
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return brig_err(err, errno, "write '%s'", tmp);
        size_t n = strlen(text);
        if (write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 || fsync(fd) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return brig_err(err, e, "write '%s'", tmp);
        }
        if (rename(tmp, final) < 0) {
                int e = errno;
                unlink(tmp);
                return brig_err(err, e, "rename '%s'", tmp);
        }
        return 0;
}

char *state_read_file(const char *dir, const char *name, brig_error **err)
{
        return state_read_file_max(dir, name, STATE_FILE_MAX, err);
}

char *state_read_file_max(const char *dir, const char *name, off_t max, brig_error **err)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/%s", dir, name);
        if (!path) {
                brig_err(err, ENOMEM, "state file");
                return NULL;
        }
        /* O_NONBLOCK: a FIFO put in its place must not hang brig */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
                brig_err(err, errno, "read '%s'", path);
                return NULL;
        }
        /* Only brig writes these (0600, a fresh file each time): anything
         * else was not made by brig and is not believed. */
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) || st.st_nlink != 1 ||
            st.st_size > max) {
                state_fail(err, EPERM, "state file '%s' was not written by brig (type, owner, mode or link count "
                                       "changed); remove the sandbox with brig rm", path);
                return NULL;
        }
        char *text = malloc((size_t)st.st_size + 1);
        ssize_t n = text ? read(fd, text, (size_t)st.st_size) : -1;
        if (n != st.st_size) {
                brig_err(err, n < 0 ? errno : EIO, "read '%s'", path);
                free(text);
                return NULL;
        }
        text[n] = '\0';
        return text;
}

json_t *state_read(const char *dir, brig_error **err)
{
        _cleanup_free_ char *text = state_read_file(dir, "state.json", err);
        if (!text)
                return NULL;
        json_error_t je;
        json_t *doc = json_loads(text, 0, &je);
        if (!doc || !json_is_object(doc)) {
                json_decref(doc);
                brig_err(err, EBADMSG, "state file '%s/state.json': %s", dir, je.text);
                return NULL;
        }
        return doc;
}

bool state_supervisor_alive(json_t *st)
{
        json_int_t pid = json_integer_value(json_object_get(st, "supervisor_pid"));
        json_int_t start = json_integer_value(json_object_get(st, "supervisor_start"));
        if (pid <= 0 || start <= 0)
                return false;
        return state_process_start((pid_t)pid) == (unsigned long long)start;
}

int state_remove_tree(const char *path, brig_error **err)
{
        /* The trees removed here are a sandbox's work (an overlay layer, a
         * snapshot of one): tree_remove_at takes any depth and follows
         * nothing planted in them. */
        _cleanup_free_ char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;
        if (!slash || !slash[1])
                return brig_err(err, dir ? EINVAL : ENOMEM, "remove '%s'", path);
        *slash = '\0';
        _cleanup_close_ int parent = open(slash == dir ? "/" : dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (parent < 0)
                return errno == ENOENT ? 0 : brig_err(err, errno, "remove '%s'", path);
        int r = tree_remove_at(parent, slash + 1);
        if (r == -EXDEV)
                return state_fail(err, EXDEV, "remove '%s': another filesystem is mounted below it (unmount it, "
                                              "then try again)", path);
        if (r == -ESTALE)
                return state_fail(err, ESTALE, "remove '%s': a directory in it moved while it was being removed "
                                               "(try again)", path);
        return r < 0 ? brig_err(err, -r, "remove '%s'", path) : 0;
}

int state_cache_dir_open(brig_error **why)
{
        brig_error *e = NULL;
        _cleanup_close_ int root = state_root_open(true, NULL, &e);
        if (root < 0) {
                /* no private state root: no cache, which costs time only,
                 * and the caller says so */
                if (why)
                        *why = e;
                else
                        brig_error_free(&e);
                return -1;
        }
        int fd = openat(root, "cache", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                if (mkdirat(root, "cache", 0700) < 0 && errno != EEXIST)
                        return -1;
                fd = openat(root, "cache", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
                close(fd);
                return -1;
        }
        return fd;
}

/* ---- grants that would hand a sandbox brig's own state ----------------- */

static bool same_ident(const struct stat *a, const struct state_ident *b)
{
        return a->st_dev == b->dev && a->st_ino == b->ino;
}

/* The identities of a plain path's directories, by name: lstat of each
 * prefix, each asked once for every root and grant of one guard (they
 * share "/", "/run", "/tmp"). A plain path (absolute, no "//", "." or
 * "..", no symlink on the way: each prefix's lstat says) names by its
 * prefixes the directories ".." leads to from it — across mount points
 * as well: a prefix that is a mount point names the mounted root, as
 * ".." from below it does. Anything else (a symlink, an odd spelling)
 * takes the walk by ".." from the opened directory below: 3 system
 * calls a level (openat, fstat, close) for each root and grant, where
 * this asks one a directory once (75 calls before clone3 down to 12). */
struct guard_seen {
        char *path;
        int err;  /* 0, or lstat's errno */
        struct stat st;
};
struct guard_memo {
        struct guard_seen *v;
        size_t n;
};

static bool plain_path(const char *p)
{
        if (p[0] != '/' || strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../"))
                return false;
        size_t n = strlen(p);
        if (n > 1 && p[n - 1] == '/')
                return false;
        const char *last = strrchr(p, '/');
        return strcmp(last, "/.") != 0 && strcmp(last, "/..") != 0;
}

/* lstat of PATH's first N bytes ("/" when N is 0), asked once; NULL
 * (errno set) when it is not there or cannot be asked. */
static const struct stat *guard_lstat(struct guard_memo *m, const char *path, size_t n)
{
        char buf[PATH_MAX];
        if (n == 0)
                n = 1;
        if (n >= sizeof buf) {
                errno = ENAMETOOLONG;
                return NULL;
        }
        memcpy(buf, path, n);
        buf[n] = '\0';
        for (size_t i = 0; i < m->n; i++)
                if (strcmp(m->v[i].path, buf) == 0) {
                        errno = m->v[i].err;
                        return m->v[i].err ? NULL : &m->v[i].st;
                }
        struct guard_seen seen = { 0 };
        seen.err = lstat(buf, &seen.st) < 0 ? errno : 0;
        struct guard_seen *grown = realloc(m->v, (m->n + 1) * sizeof *grown);
        if (grown && (seen.path = strdup(buf))) {
                m->v = grown;
                m->v[m->n++] = seen;
        } else if (grown) {
                m->v = grown;
        }
        errno = seen.err;
        return seen.err ? NULL : (grown && seen.path ? &m->v[m->n - 1].st : NULL);
}

/* The directories of plain PATH's first N bytes up to "/", by identity,
 * into ID (at most MAX): how many, or -1 when the walk by name cannot
 * stand in for ".." (not plain, a symlink or no directory on the way,
 * something gone, out of memory). */
static ssize_t guard_chain_by_name(struct guard_memo *m, const char *path, size_t n, struct state_ident *id,
                                   size_t max)
{
        size_t k = 0;
        for (;;) {
                const struct stat *st = guard_lstat(m, path, n);
                if (!st || !S_ISDIR(st->st_mode) || k == max)
                        return -1;
                id[k++] = (struct state_ident){ st->st_dev, st->st_ino };
                if (n <= 1)
                        return (ssize_t)k;
                while (n > 0 && path[n - 1] != '/')
                        n--;
                if (n > 1)
                        n--;  /* the slash before the last name */
        }
}

static void guard_memo_free(struct guard_memo *m)
{
        for (size_t i = 0; m && i < m->n; i++)
                free(m->v[i].path);
        if (m)
                free(m->v);
        free(m);
}

/* One root: its identity (or, while it does not exist, its deepest
 * existing ancestor's: a grant of that ancestor would let the sandbox make
 * the root itself) and every directory above it. Identities, not names:
 * every spelling of a directory (symlinks, "..") has the same
 * st_dev/st_ino, and ".." from an open directory leads to its real parent
 * across mount points. */
static int guard_root_by_name(struct state_guard_root *gr, struct guard_memo *m)
{
        if (!m || !plain_path(gr->path))
                return -1;
        size_t n = strlen(gr->path);
        gr->exists = true;
        for (;;) {
                const struct stat *st = guard_lstat(m, gr->path, n);
                int e = st ? 0 : errno;
                if (st && S_ISLNK(st->st_mode))
                        return -1;  /* open() would follow it: the walk by ".." */
                if (st && S_ISDIR(st->st_mode))
                        break;
                /* what open(O_DIRECTORY) would have refused, and gone on above */
                if (st ? false : (e != ENOENT && e != ENOTDIR && e != EACCES))
                        return -1;
                if (n <= 1)
                        return -1;
                while (n > 0 && gr->path[n - 1] != '/')
                        n--;
                if (n > 1)
                        n--;
                gr->exists = false;
        }
        ssize_t k = guard_chain_by_name(m, gr->path, n, gr->id, ARRAY_SIZE(gr->id));
        if (k <= 0)
                return -1;
        gr->n = (size_t)k;
        gr->by_name = true;
        return 0;
}

static int guard_root(struct state_guard_root *gr, char *path, struct guard_memo *m, brig_error **err)
{
        gr->path = path;
        if (path && guard_root_by_name(gr, m) == 0)
                return 0;
        gr->n = 0;
        _cleanup_free_ char *p = path ? strdup(path) : NULL;
        if (!p)
                return brig_err(err, ENOMEM, "state directory");
        int fd;
        gr->exists = true;
        while ((fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
                char *slash = strrchr(p, '/');
                if ((errno != ENOENT && errno != ENOTDIR && errno != EACCES) || !slash)
                        return brig_err(err, errno, "state directory '%s'", gr->path);
                slash[slash == p ? 1 : 0] = '\0';
                gr->exists = false;
        }
        struct stat st;
        while (fd >= 0 && fstat(fd, &st) == 0) {
                if (gr->n > 0 && same_ident(&st, &gr->id[gr->n - 1]))
                        break;  /* "/" is its own parent */
                if (gr->n == ARRAY_SIZE(gr->id)) {
                        close(fd);
                        return brig_err(err, ELOOP, "state directory '%s' is too deep", gr->path);
                }
                gr->id[gr->n++] = (struct state_ident){ st.st_dev, st.st_ino };
                int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = up;
        }
        if (fd >= 0)
                close(fd);
        return gr->n > 0 ? 0 : brig_err(err, errno ? errno : EIO, "state directory '%s'", gr->path);
}

/* The root in use, and the default places brig uses without
 * XDG_RUNTIME_DIR: a sandbox given one of those while XDG_RUNTIME_DIR
 * points elsewhere must not be able to prepare a root (a planted filter
 * cache, a policy) for a later run without it. As root, the sandbox runs
 * as another user (`other`: the workspace's owner, or nobody), and what it
 * makes in that user's default roots is that user's own — a later
 * rootless run of theirs would trust it: those roots are guarded too. */
int state_guard_init(struct state_guard *g, uid_t other, brig_error **err)
{
        g->n_roots = 0;
        /* out of memory: every root and grant walked by ".." */
        g->memo = plan_long_way() ? NULL : calloc(1, sizeof *g->memo);
        char *paths[ARRAY_SIZE(g->roots)] = { state_root_path() };
        uid_t uids[ARRAY_SIZE(g->roots)] = { geteuid() };
        size_t n = 1;
        uid_t users[2] = { geteuid(), other };
        for (size_t u = 0; u < (other == geteuid() ? 1 : 2); u++) {
                if (users[u] == 0) {
                        uids[n] = 0;
                        paths[n++] = strdup("/run/brig");
                        continue;
                }
                uids[n] = uids[n + 1] = users[u];
                paths[n++] = brig_strdup_printf("/run/user/%u/brig", users[u]);
                paths[n++] = brig_strdup_printf("/tmp/brig-%u", users[u]);
        }
        /* What brig serve and brig oci trust, where it stands now: serve's
         * owner records (a grant of its directory contains them, and its
         * socket beside them; its sandboxes' own workspaces/ are granted,
         * each to its sandbox), and oci's whole root (each container's
         * state.json). Where one would be made is inside a directory
         * already guarded above (/run, /tmp, XDG_RUNTIME_DIR), so one not
         * made yet needs no guard of its own. */
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        for (size_t u = 0; u < (other == geteuid() ? 1 : 2); u++) {
                char *extra[6] = { NULL };
                size_t k = 0;
                if (users[u] == 0) {
                        extra[k++] = strdup("/run/brig-serve/owners");
                        extra[k++] = strdup("/run/brig-oci");
                } else {
                        extra[k++] = brig_strdup_printf("/tmp/brig-serve-%u/owners", users[u]);
                        extra[k++] = brig_strdup_printf("/tmp/brig-oci-%u", users[u]);
                }
                if (users[u] == geteuid() && xdg && xdg[0] == '/') {
                        extra[k++] = brig_strdup_printf("%s/brig-serve/owners", xdg);
                        extra[k++] = brig_strdup_printf("%s/brig-oci", xdg);
                }
                for (size_t i = 0; i < k; i++) {
                        struct stat st;
                        if (extra[i] && lstat(extra[i], &st) == 0 && n < ARRAY_SIZE(paths)) {
                                uids[n] = users[u];
                                paths[n++] = TAKE_PTR(extra[i]);
                        }
                        free(extra[i]);
                }
        }
        int r = 0;
        for (size_t i = 0; i < n; i++) {
                bool dup = false;
                for (size_t j = 0; paths[i] && j < g->n_roots; j++)
                        dup = dup || strcmp(paths[i], g->roots[j].path) == 0;
                if (dup || r < 0) {
                        free(paths[i]);
                        continue;
                }
                struct state_guard_root *gr = &g->roots[g->n_roots++];
                memset(gr, 0, offsetof(struct state_guard_root, id));
                gr->uid = uids[i];
                r = guard_root(gr, paths[i], g->memo, err);
        }
        return r;
}

void state_guard_free(struct state_guard *g)
{
        for (size_t i = 0; i < g->n_roots; i++) {
                free(g->roots[i].path);
                free(g->roots[i].parts);
        }
        guard_memo_free(g->memo);
        g->n_roots = 0;
        g->memo = NULL;
}

/* A bind of a directory inside a root shown elsewhere (<root>/cache at
 * /srv/c, as containers and chroots make), or of one file of it (a
 * control socket, a cached filter): the walk from a grant below /srv/c
 * goes up through /srv, never through the root, and /srv/c's identity is
 * the cache directory's, none of the root's chain. The mount table names
 * such mounts (their device and root inside the filesystem,
 * mountinfo_aliases); their roots count as parts of the state root. No
 * system call unless there is one (an lstat of its mount point). */
int state_guard_mounts(struct state_guard *g, const struct mountinfo *mi, brig_error **err)
{
        for (size_t i = 0; i < g->n_roots; i++) {
                struct state_guard_root *gr = &g->roots[i];
                if (!gr->exists || !gr->path)
                        continue;
                /* the table's paths are real ones: so must the root's be */
                _cleanup_free_ char *real = gr->by_name ? NULL : realpath(gr->path, NULL);
                if (!gr->by_name && !real)
                        continue;  /* gone meanwhile: nothing in it to show */
                struct path_alias *v = NULL;
                size_t n = 0;
                int r = mountinfo_aliases(mi, real ? real : gr->path, &v, &n);
                if (r < 0)
                        return brig_err(err, -r, "state directory '%s': the mount table", gr->path);
                for (size_t k = 0; r == 0 && k < n; k++) {
                        struct stat st;
                        /* rel "": the whole root there, the same identity;
                         * else a directory of it or one file (a control
                         * socket, a cached filter) bound there */
                        if (!v[k].rel[0] || lstat(v[k].host, &st) < 0)
                                continue;
                        struct state_ident *grown = realloc(gr->parts, (gr->n_parts + 1) * sizeof *grown);
                        if (!grown)
                                r = brig_err(err, ENOMEM, "state directory '%s'", gr->path);
                        else {
                                gr->parts = grown;
                                gr->parts[gr->n_parts++] = (struct state_ident){ st.st_dev, st.st_ino };
                        }
                }
                path_aliases_free(v, n);
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool is_part(const struct state_guard_root *gr, dev_t dev, ino_t ino)
{
        for (size_t i = 0; i < gr->n_parts; i++)
                if (gr->parts[i].dev == dev && gr->parts[i].ino == ino)
                        return true;
        return false;
}

/* The directories from the grant's (its own, or its parent's when it is
 * a file) up to "/", by identity: walked once for all the roots. */
struct grant_chain {
        struct state_ident *id;
        size_t n;
        bool partial;  /* out of memory on the way: taken as inside (fail closed) */
};

static void grant_chain_walk(struct grant_chain *c, int dirfd)
{
        int cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        struct stat now, prev = { 0 };
        for (int depth = 0; cur >= 0 && depth < 4096 && fstat(cur, &now) == 0; depth++) {
                if (depth > 0 && now.st_dev == prev.st_dev && now.st_ino == prev.st_ino)
                        break;  /* reached "/" */
                struct state_ident *grown = realloc(c->id, (c->n + 1) * sizeof *grown);
                if (!grown) {
                        c->partial = true;
                        break;
                }
                c->id = grown;
                c->id[c->n++] = (struct state_ident){ now.st_dev, now.st_ino };
                prev = now;
                int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
                close(cur);
                cur = up;
        }
        if (cur >= 0)
                close(cur);
}

/* How `st` (a grant, its directories in `chain`, walked when first needed
 * from `dirfd`, or -1) meets one root. */
static const char *guard_meets(const struct state_guard_root *gr, const struct stat *st, int dirfd,
                               struct grant_chain *chain, bool *walked)
{
        for (size_t i = 0; i < gr->n; i++)
                if (same_ident(st, &gr->id[i]))
                        return i == 0 && gr->exists ? "is" : "contains";
        if (is_part(gr, st->st_dev, st->st_ino))
                return "lies inside";
        if (!gr->exists || dirfd < 0)
                return NULL;
        /* Inside the root? Look for it on the way from the grant to "/". */
        if (!*walked) {
                grant_chain_walk(chain, dirfd);
                *walked = true;
        }
        for (size_t i = 0; i < chain->n; i++)
                if ((chain->id[i].dev == gr->id[0].dev && chain->id[i].ino == gr->id[0].ino) ||
                    is_part(gr, chain->id[i].dev, chain->id[i].ino))
                        return "lies inside";
        return chain->partial ? "lies inside" : NULL;
}

/* state_guard_test by name (guard_chain_by_name): NULL with *done set
 * when it answered, else the walk by ".." answers. */
static const char *guard_test_by_name(const struct state_guard *g, const char *path, const char **root, bool *done)
{
        *done = false;
        if (!g->memo || !plain_path(path))
                return NULL;
        size_t n = strlen(path);
        const struct stat *own = guard_lstat(g->memo, path, n);
        if (!own) {
                /* open() fails the same way (a prefix's search permission,
                 * ENOENT): nothing to bind */
                *done = errno == ENOENT || errno == ENOTDIR || errno == EACCES;
                return NULL;
        }
        if (S_ISLNK(own->st_mode))
                return NULL;
        struct stat st = *own;
        size_t dir = n;
        if (!S_ISDIR(st.st_mode)) {
                while (dir > 0 && path[dir - 1] != '/')
                        dir--;
                if (dir > 1)
                        dir--;
        }
        struct state_ident chain[256];
        ssize_t k = guard_chain_by_name(g->memo, path, dir, chain, ARRAY_SIZE(chain));
        if (k <= 0)
                return NULL;
        *done = true;
        for (size_t i = 0; i < g->n_roots; i++) {
                const struct state_guard_root *gr = &g->roots[i];
                const char *how = NULL;
                for (size_t j = 0; j < gr->n && !how; j++)
                        if (same_ident(&st, &gr->id[j]))
                                how = j == 0 && gr->exists ? "is" : "contains";
                if (!how && is_part(gr, st.st_dev, st.st_ino))
                        how = "lies inside";
                for (ssize_t j = 0; !how && gr->exists && j < k; j++)
                        if ((chain[j].dev == gr->id[0].dev && chain[j].ino == gr->id[0].ino) ||
                            is_part(gr, chain[j].dev, chain[j].ino))
                                how = "lies inside";
                if (how) {
                        *root = gr->path;
                        return how;
                }
        }
        return NULL;
}

const char *state_guard_test(const struct state_guard *g, const char *path, const char **root)
{
        bool done;
        const char *by_name = guard_test_by_name(g, path, root, &done);
        if (done)
                return by_name;
        _cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return NULL;  /* nothing to bind: the mount says so */
        _cleanup_close_ int dir = -EBADF;
        if (S_ISDIR(st.st_mode)) {
                dir = TAKE_FD(fd);
        } else {
                _cleanup_free_ char *d = strdup(path);
                char *slash = d ? strrchr(d, '/') : NULL;
                if (slash) {
                        slash[slash == d ? 1 : 0] = '\0';
                        dir = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
                }
        }
        struct grant_chain chain = { 0 };
        bool walked = false;
        const char *how = NULL;
        for (size_t i = 0; i < g->n_roots && !how; i++) {
                how = guard_meets(&g->roots[i], &st, dir, &chain, &walked);
                if (how)
                        *root = g->roots[i].path;
        }
        free(chain.id);
        return how;
}
