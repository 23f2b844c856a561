/* overlay_diff.c — what the layer changes (brig diff): a walk of the
 * upper layer against the workspace (whiteouts, opaque directories, the
 * same content), the PATH and --exclude selection, and the changes as
 * JSON. Commit (overlay_commit.c) applies the same list. */
#define _GNU_SOURCE
#include "persist/overlay.h"
#include "persist/runchanges.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

/* ---- on the host: what the layer changes ---------------------------------- */

void changes_free(struct changes *c)
{
        for (size_t i = 0; i < c->n; i++)
                free(c->v[i].path);
        free(c->v);
        c->v = NULL;
        c->n = 0;
        free(c->stopped_at);
        c->stopped_at = NULL;
}

static int changes_add(struct changes *c, const char *path, enum change_kind kind, mode_t mode)
{
        struct change *n = realloc(c->v, (c->n + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        c->v = n;
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        mode_t type = mode & S_IFMT;
        c->v[c->n++] = (struct change){ .path = p, .kind = kind, .type = type, .mode = mode & 07777,
                                        .special = type != S_IFREG && type != S_IFDIR && type != S_IFLNK };
        return 0;
}

/* ---- selecting changes (brig diff/commit PATH --exclude PATTERN) ---------- */

void filter_free(struct filter *f)
{
        strv_free(&f->paths);
        strv_free(&f->excludes);
}

/* A path as the user gave it, relative to the workspace: "src/", "./src",
 * "/abs/ws/src" all become "src"; "." the whole workspace (""). Only the
 * text is looked at — nothing is opened by it: it selects among the
 * changes the layer walk found, which are what commit applies, each
 * opened beneath the workspace without symlinks as before. So '..' and
 * paths outside the workspace are refused rather than made sense of. */
static int filter_path(const char *workspace, const char *in, char **out, brig_error **err)
{
        const char *rel = in;
        size_t wl = strlen(workspace);
        if (!*in)
                return state_fail(err, EINVAL, "an empty path (give a path in the workspace, or '.' for all of it)");
        if (in[0] == '/') {
                if (strncmp(in, workspace, wl) != 0 || (in[wl] != '/' && in[wl] != '\0'))
                        return state_fail(err, EINVAL, "'%s' is not in the workspace %s (give a path in it, "
                                                       "relative to it or absolute)", in, workspace);
                rel = in + wl;
        }
        _cleanup_free_ char *norm = malloc(strlen(rel) + 1);
        if (!norm)
                return brig_err(err, ENOMEM, "path");
        size_t n = 0;
        for (const char *p = rel; *p;) {
                while (*p == '/')
                        p++;
                size_t len = strcspn(p, "/");
                if (len == 0)
                        break;
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return state_fail(err, EINVAL, "'%s': '..' is not allowed (give a path in the workspace)", in);
                if (!(len == 1 && p[0] == '.')) {
                        if (n)
                                norm[n++] = '/';
                        memcpy(norm + n, p, len);
                        n += len;
                }
                p += len;
        }
        norm[n] = '\0';
        *out = TAKE_PTR(norm);
        return 0;
}

int filter_prepare(const char *workspace, const brig_change_filter *in, struct filter *f, brig_error **err)
{
        *f = (struct filter){ 0 };
        for (const char *const *p = in && in->paths ? in->paths : NULL; p && *p; p++) {
                char *rel = NULL;
                int r = filter_path(workspace, *p, &rel, err);
                if (r < 0)
                        return r;
                if (strv_push_take(&f->paths, rel) < 0)
                        return brig_err(err, ENOMEM, "path");
        }
        for (const char *const *p = in && in->excludes ? in->excludes : NULL; p && *p; p++) {
                /* "/build" and "src/gen" are anchored at the workspace,
                 * kept as "/build" and "/src/gen"; "node_modules/" is
                 * "node_modules" (a match excludes what is below anyway) */
                const char *pat = *p;
                bool anchored = pat[0] == '/';
                while (*pat == '/')
                        pat++;
                size_t n = strlen(pat);
                while (n && pat[n - 1] == '/')
                        n--;
                if (!n)
                        return state_fail(err, EINVAL, "--exclude '%s': an empty pattern", *p);
                anchored = anchored || memchr(pat, '/', n);
                char *copy = brig_strdup_printf("%s%.*s", anchored ? "/" : "", (int)n, pat);
                if (!copy || strv_push_take(&f->excludes, copy) < 0)
                        return brig_err(err, ENOMEM, "exclude");
        }
        return 0;
}

/* A pattern without '/' matches any one component ("node_modules",
 * "*.o"); one with a '/' matches the path from the workspace down, one
 * component per '/' ("src/gen", "build/x.log"). Matching a directory excludes
 * everything below it. */
static bool filter_excludes(const struct filter *f, const char *path)
{
        for (size_t i = 0; i < f->excludes.n; i++) {
                const char *pat = f->excludes.items[i];
                bool anchored = pat[0] == '/';
                pat += anchored;
                _cleanup_free_ char *prefix = strdup(path);
                if (!prefix)
                        return true;  /* out of memory: select less, never more */
                for (char *p = prefix;; p++) {
                        if (*p != '/' && *p != '\0')
                                continue;
                        char saved = *p;
                        *p = '\0';
                        const char *comp = strrchr(prefix, '/');
                        comp = comp ? comp + 1 : prefix;
                        bool hit = anchored ? fnmatch(pat, prefix, FNM_PATHNAME | FNM_PERIOD) == 0
                                            : fnmatch(pat, comp, 0) == 0;
                        if (hit)
                                return true;
                        if (!saved)
                                break;
                        *p = saved;
                }
        }
        return false;
}

bool below(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return n == 0 || (strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0'));
}

/* Is `path` selected (at or below a given path, and not excluded)? */
bool filter_selects(const struct filter *f, const char *path)
{
        if (filter_excludes(f, path))
                return false;
        if (!f->paths.n)
                return true;
        for (size_t i = 0; i < f->paths.n; i++)
                if (below(path, f->paths.items[i]))
                        return true;
        return false;
}

/* Can anything at or below `path` be selected? The walk skips the rest
 * (a node_modules of 6,000 entries is not read at all). */
static bool filter_may_select(const struct filter *f, const char *path)
{
        if (!f)
                return true;
        if (filter_excludes(f, path))
                return false;
        if (!f->paths.n)
                return true;
        for (size_t i = 0; i < f->paths.n; i++)
                if (below(path, f->paths.items[i]) || below(f->paths.items[i], path))
                        return true;
        return false;
}

static int find_change(const struct changes *c, const char *path)
{
        size_t lo = 0, hi = c->n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int d = strcmp(c->v[mid].path, path);
                if (d == 0)
                        return (int)mid;
                if (d < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return -1;
}

/* Keep only the selected changes of the sorted list. With `base` (the
 * commit's record of the host): also the directories a kept change lies in
 * that the sandbox created, or made where the host has no directory —
 * without them it could not be applied; they are applied and checked for
 * conflicts with the rest. A directory the host has already is not
 * (its mode change was not selected). */
int filter_changes(struct changes *c, const struct filter *f, json_t *base)
{
        if (!f->paths.n && !f->excludes.n)
                return 0;
        bool *keep = calloc(c->n ? c->n : 1, sizeof *keep);
        if (!keep)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++)
                keep[i] = filter_selects(f, c->v[i].path);
        for (size_t i = 0; base && i < c->n; i++) {
                if (!keep[i])
                        continue;
                _cleanup_free_ char *up = strdup(c->v[i].path);
                if (!up) {
                        free(keep);
                        return -ENOMEM;
                }
                for (char *slash; (slash = strrchr(up, '/'));) {
                        *slash = '\0';
                        int j = find_change(c, up);
                        if (j < 0 || keep[j] || c->v[j].kind == CH_DELETED || c->v[j].type != S_IFDIR)
                                continue;
                        const char *was = json_string_value(json_array_get(json_object_get(base, up), 0));
                        if (c->v[j].kind == CH_ADDED || !was || was[0] != 'd')
                                keep[j] = true;
                }
        }
        size_t n = 0;
        for (size_t i = 0; i < c->n; i++) {
                if (keep[i])
                        c->v[n++] = c->v[i];
                else
                        free(c->v[i].path);
        }
        c->n = n;
        free(keep);
        return 0;
}

static bool is_whiteout(const struct stat *st)
{
        return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool is_opaque(int dfd, const char *name)
{
        char v[2] = { 0 };
        _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd >= 0 && fgetxattr(fd, "user.overlay.opaque", v, sizeof v) > 0 && v[0] == 'y';
}

/* Same bytes? Only regular files; compares at most what is there. */
static bool same_content(int a_dir, int b_dir, const char *name, off_t size)
{
        _cleanup_close_ int a = openat(a_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_close_ int b = openat(b_dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (a < 0 || b < 0)
                return false;
        static char x[65536], y[65536];
        off_t done = 0;
        while (done < size) {
                ssize_t n = read(a, x, sizeof x);
                if (n <= 0 || read(b, y, (size_t)n) != n || memcmp(x, y, (size_t)n) != 0)
                        return false;
                done += n;
        }
        return true;
}

static bool same_link(int a_dir, int b_dir, const char *name)
{
        char x[4096], y[4096];
        ssize_t n = readlinkat(a_dir, name, x, sizeof x);
        ssize_t m = readlinkat(b_dir, name, y, sizeof y);
        return n >= 0 && n == m && memcmp(x, y, (size_t)n) == 0;
}

static int diff_dir(int upper, int lower, const char *rel, bool opaque, struct changes *out, int depth);
char *brig_sandbox_diff_filtered_json(const char *name, const brig_change_filter *filter, brig_error **err);

/* Everything below a directory the layer adds (or makes opaque). */
static int diff_entry(int upper, int lower, const char *name, const char *rel, struct changes *out, int depth)
{
        struct stat us, ls;
        if (fstatat(upper, name, &us, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;  /* vanished meanwhile */
        bool in_lower = lower >= 0 && fstatat(lower, name, &ls, AT_SYMLINK_NOFOLLOW) == 0;
        _cleanup_free_ char *path = join(rel, name);
        if (!path)
                return -ENOMEM;
        if (!filter_may_select(out->filter, path))
                return 0;
        if (is_whiteout(&us))
                return in_lower ? changes_add(out, path, CH_DELETED, ls.st_mode) : 0;
        /* Rootless, what the sandbox made unreadable (chmod 000) cannot be
         * read here either: a directory would drop out of the diff without
         * a word, a file stop a commit halfway. Refuse it up front. */
        if (geteuid() != 0 && ((S_ISDIR(us.st_mode) && (us.st_mode & 0500) != 0500) ||
                               (S_ISREG(us.st_mode) && !(us.st_mode & 0400))))
                return note_stop(&out->stopped_at, path, EACCES);
        if (S_ISDIR(us.st_mode)) {
                bool both_dirs = in_lower && S_ISDIR(ls.st_mode);
                int r = 0;
                if (!in_lower)
                        r = changes_add(out, path, CH_ADDED, us.st_mode);
                else if (!both_dirs || (us.st_mode & 07777) != (ls.st_mode & 07777))
                        r = changes_add(out, path, CH_MODIFIED, us.st_mode);
                if (r < 0)
                        return r;
                _cleanup_close_ int usub = openat(upper, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int lsub = both_dirs ? openat(lower, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                                     : -EBADF;
                if (usub < 0)
                        return errno == ENOENT ? 0 : -errno;  /* vanished meanwhile, or say why */
                return diff_dir(usub, lsub, path, both_dirs && is_opaque(upper, name), out, depth + 1);
        }
        if (!in_lower)
                return changes_add(out, path, CH_ADDED, us.st_mode);
        bool same = (us.st_mode & S_IFMT) == (ls.st_mode & S_IFMT) && (us.st_mode & 07777) == (ls.st_mode & 07777);
        if (same && S_ISREG(us.st_mode))
                same = us.st_size == ls.st_size && same_content(upper, lower, name, us.st_size);
        else if (same && S_ISLNK(us.st_mode))
                same = same_link(upper, lower, name);
        else if (same)
                same = false;  /* a special file in the layer */
        return same ? 0 : changes_add(out, path, CH_MODIFIED, us.st_mode);
}

static int diff_dir(int upper, int lower, const char *rel, bool opaque, struct changes *out, int depth)
{
        if (depth > TREE_DEPTH_MAX)
                return note_stop(&out->stopped_at, rel, ELOOP);
        int fd = fcntl(upper, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                closep(&fd);
                return -errno;
        }
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        r = diff_entry(upper, lower, e->d_name, rel, out, depth);
        closedir(d);
        if (r < 0 || !opaque || lower < 0)
                return r;
        /* An opaque directory hides everything the lower one holds: what
         * the layer does not have again is deleted. */
        fd = fcntl(lower, F_DUPFD_CLOEXEC, 3);
        d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                closep(&fd);
                return -errno;
        }
        while (r == 0 && (e = readdir(d))) {
                struct stat st;
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                    fstatat(upper, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
                    fstatat(lower, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                _cleanup_free_ char *path = join(rel, e->d_name);
                r = path ? changes_add(out, path, CH_DELETED, st.st_mode) : -ENOMEM;
        }
        closedir(d);
        return r;
}

const char *kind_name(enum change_kind k)
{
        return k == CH_ADDED ? "added" : k == CH_MODIFIED ? "modified" : "deleted";
}

const char *type_name(mode_t t)
{
        return t == S_IFDIR ? "dir" : t == S_IFREG ? "file" : t == S_IFLNK ? "symlink" : "special";
}

static json_t *changes_json(const struct changes *c)
{
        json_t *a = json_array();
        for (size_t i = 0; a && i < c->n; i++)
                json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:i}", "path", c->v[i].path, "change",
                                                   kind_name(c->v[i].kind), "type", type_name(c->v[i].type),
                                                   "mode", (int)c->v[i].mode));
        return a;
}

static int by_path(const void *a, const void *b)
{
        /* a parent sorts before what is below it: its name is a prefix */
        return strcmp(((const struct change *)a)->path, ((const struct change *)b)->path);
}

/* The layer against the workspace (the lower layer as the sandbox saw it). */
int layer_diff(struct layer *l, struct changes *c)
{
        int r = diff_dir(l->upper, l->ws, "", false, c, 0);
        if (r == 0 && c->n)
                qsort(c->v, c->n, sizeof *c->v, by_path);
        return r;
}

char *brig_sandbox_diff_json(const char *name, brig_error **err)
{
        return brig_sandbox_diff_filtered_json(name, NULL, err);
}

char *brig_sandbox_diff_filtered_json(const char *name, const brig_change_filter *filter, brig_error **err)
{
        struct layer l;
        struct changes c = { 0 };
        struct filter f = { 0 };
        char *text = NULL;
        int r = layer_open(name, &l, err);
        const char *mode = json_string_value(json_object_get(l.state, "workspace_mode"));
        if (r < 0 && l.state && (!mode || strcmp(mode, "overlay") != 0)) {
                /* bind mode: what changed since create (changes.c) */
                if (err)
                        brig_error_free(err);
                text = changes_diff_json(name, l.dir, l.state, filter, err);
                layer_close(&l);
                return text;
        }
        if (r == 0 && (r = filter_prepare(l.workspace, filter, &f, err)) < 0)
                brig_err_prefix(err, "diff '%s'", name);
        if (r == 0) {
                c.filter = &f;
                r = layer_diff(&l, &c);
                if (r == 0)
                        r = filter_changes(&c, &f, NULL);
                if (r < 0 && c.stopped_at)
                        layer_walk_failed(err, "diff", name, r, c.stopped_at);
                else if (r < 0)
                        brig_err(err, -r, "diff '%s'", name);
        }
        json_t *a = r == 0 ? changes_json(&c) : NULL, *binds = NULL;
        if (r == 0 && !a) {
                brig_err(err, ENOMEM, "diff");
        } else if (a && changes_kept(l.dir)) {
                /* and its writable binds, written through, since create
                 * (changes.c; a sandbox made by an older brig has no
                 * record of them): all of it, or no list */
                binds = changes_diff_list(name, l.dir, l.state, filter, err);
                if (!binds || json_array_extend(a, binds) < 0) {
                        json_decref(a);
                        a = NULL;
                }
        }
        if (a && !(text = json_dumps(a, JSON_INDENT(2))))
                brig_err(err, ENOMEM, "diff");
        json_decref(binds);
        json_decref(a);
        filter_free(&f);
        changes_free(&c);
        layer_close(&l);
        return text;
}
