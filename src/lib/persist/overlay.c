/* overlay.c — --workspace-mode overlay: the sandbox writes to a
 * copy-on-write layer (overlayfs, mounted inside the sandbox's user
 * namespace) kept in the state directory; the real workspace is only the
 * read-only lower layer. On the host, diff lists what the layer changes,
 * commit applies it to the real workspace — each file written to a
 * temporary name in its own directory and renamed over the old one, so
 * never half-written — and reset throws the layer away.
 *
 * Conflicts: at create brig records every workspace entry's (type, inode,
 * size, mtime). A path the sandbox changed whose host entry no longer
 * matches that record was changed on the host too: commit refuses it and
 * applies nothing at all.
 *
 * The layer is written by untrusted code: every path in it and in the
 * workspace is resolved with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS),
 * never through a symlink, and commit strips setuid/setgid bits, skips
 * device nodes, FIFOs and sockets, and gives new files the owner of their
 * directory (existing files keep theirs). */
#define _GNU_SOURCE
#include "core/internal.h"
#include "core/reaper.h"
#include "persist/sandbox.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>

#define MANIFEST "base.json"

/* ---- resolving without symlinks ---------------------------------------- */

static int open_beneath(int dirfd, const char *rel, int flags)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        return sys_openat2(dirfd, *rel ? rel : ".", &how);
}

static int open_dir_nofollow(const char *path)
{
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        return sys_openat2(AT_FDCWD, path, &how);
}

/* The directory holding `rel` (opened beneath root), and its last part. */
static int open_parent(int root, const char *rel, const char **base)
{
        const char *slash = strrchr(rel, '/');
        *base = slash ? slash + 1 : rel;
        if (!slash)
                return fcntl(root, F_DUPFD_CLOEXEC, 3);
        _cleanup_free_ char *dir = strndup(rel, (size_t)(slash - rel));
        return dir ? open_beneath(root, dir, O_RDONLY | O_DIRECTORY) : -ENOMEM;
}

static char *join(const char *dir, const char *name)
{
        return *dir ? brig_strdup_printf("%s/%s", dir, name) : strdup(name);
}

/* How deep diff, commit and layer copies (snapshot, restore, fork) go.
 * They recurse with a few descriptors a level and keep paths relative to
 * the layer's root, which the kernel takes only up to PATH_MAX; a layer
 * deeper than this is refused with layer_walk_failed's message rather than
 * half handled. Removal has no such limit (tree_remove_at), so such a
 * sandbox can always be reset or removed. */
#define TREE_DEPTH_MAX 256

/* Remember where a walk of the layer stopped (the first time) and why:
 * -ELOOP too deep, -EACCES unreadable (diff, rootless). */
static int note_stop(char **at, const char *rel, int errnum)
{
        if (!*at)
                *at = strndup(rel, 96);
        return -errnum;
}

static int layer_walk_failed(brig_error **err, const char *what, const char *name, int r, const char *at)
{
        if (r == -EACCES)
                return state_fail(err, EACCES, "%s '%s': the layer's '%s' is not readable to you (the sandbox made it so, "
                                               "chmod 000 or the like); rootless, brig diff and commit do not change "
                                               "the layer to read it: make it readable inside (chmod u+rx for a "
                                               "directory, u+r for a file), then try again; nothing was changed", what, name, at ? at : "");
        return state_fail(err, ELOOP, "%s '%s': the layer holds directories nested more than %d deep (at '%s...'); "
                                      "brig diff, commit and snapshots handle no deeper tree: remove it inside "
                                      "the sandbox, or brig reset, then try again; nothing was changed",
                          what, name, TREE_DEPTH_MAX, at ? at : "");
}

/* Copy a regular file's bytes, keeping its holes. A sparse file costs the
 * sandbox almost nothing in its layer (truncate -s 1T), but copied byte by
 * byte, holes written as zeros, it would fill the host's disk: the
 * workspace on commit, the state directory on a snapshot. Only the data
 * segments are copied (SEEK_DATA/SEEK_HOLE; a filesystem without them
 * reports one segment, the whole file), then the size is set. */
static int copy_data(int in, int out)
{
        struct stat st;
        if (fstat(in, &st) < 0)
                return -errno;
        static char buf[65536];
        off_t pos = 0;
        while (pos < st.st_size) {
                off_t data = lseek(in, pos, SEEK_DATA);
                if (data < 0 && errno == ENXIO)
                        break;  /* only a hole is left */
                off_t hole = data < 0 ? -1 : lseek(in, data, SEEK_HOLE);
                if (hole < 0 || lseek(in, data, SEEK_SET) < 0 || lseek(out, data, SEEK_SET) < 0)
                        return -errno;
                for (off_t left = hole - data; left > 0;) {
                        ssize_t n = read(in, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                break;  /* it shrank meanwhile */
                        for (ssize_t off = 0; off < n;) {
                                ssize_t w = write(out, buf + off, (size_t)(n - off));
                                if (w < 0 && errno != EINTR)
                                        return -errno;
                                off += w > 0 ? w : 0;
                        }
                        left -= n;
                }
                pos = hole;
        }
        return ftruncate(out, st.st_size) < 0 ? -errno : 0;
}

/* Hard links seen in a layer: (device, inode) → the path its first copy
 * got. Copied once per name, one inode linked N times would be written N
 * times over — 10000 links to a 100 MB file cost the sandbox 100 MB and
 * the host a terabyte — so every further name is linked to the first copy
 * instead, as it was in the layer. */
struct link_seen {
        dev_t dev;
        ino_t ino;
        char *path;  /* relative to the destination's root */
};

static int link_cmp(const void *a, const void *b)
{
        const struct link_seen *x = a, *y = b;
        if (x->dev != y->dev)
                return x->dev < y->dev ? -1 : 1;
        return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void link_free(void *p)
{
        struct link_seen *l = p;
        free(l->path);
        free(l);
}

/* The first copy's path when `st` was seen before; else remembers `path`
 * (a file with a single name is never remembered) and returns NULL. */
static const char *link_first(void **seen, const struct stat *st, const char *path)
{
        if (st->st_nlink < 2)
                return NULL;
        struct link_seen key = { .dev = st->st_dev, .ino = st->st_ino };
        struct link_seen **found = tfind(&key, seen, link_cmp);
        if (found)
                return (*found)->path;
        struct link_seen *n = malloc(sizeof *n);
        if (n && (n->path = strdup(path))) {
                *n = (struct link_seen){ .dev = st->st_dev, .ino = st->st_ino, .path = n->path };
                if (tsearch(n, seen, link_cmp))
                        return NULL;
                free(n->path);
        }
        free(n);
        return NULL;  /* out of memory: this name is copied in full */
}

/* ---- create: layer directories and the record of the workspace ---------- */

static json_t *entry_record(const struct stat *st)
{
        char type = S_ISDIR(st->st_mode) ? 'd' : S_ISREG(st->st_mode) ? 'f' : S_ISLNK(st->st_mode) ? 'l' : 'o';
        return json_pack("[s#, I, I, I]", &type, (size_t)1, (json_int_t)st->st_ino, (json_int_t)st->st_size,
                         (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
}

static int record_tree(int dfd, const char *rel, json_t *out, int depth)
{
        if (depth > TREE_DEPTH_MAX)
                return -ELOOP;
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                closep(&fd);
                return -errno;
        }
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;  /* vanished meanwhile */
                _cleanup_free_ char *path = join(rel, e->d_name);
                if (!path)
                        r = -ENOMEM;
                else
                        json_object_set_new(out, path, entry_record(&st));
                if (r == 0 && S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd(d), e->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        /* another filesystem mounted here is not part of the
                         * lower layer: overlayfs does not cross mounts */
                        struct stat sst;
                        if (sub >= 0 && fstat(sub, &sst) == 0 && sst.st_dev == st.st_dev)
                                r = record_tree(sub, path, out, depth + 1);
                }
        }
        closedir(d);
        return r;
}

static int manifest_write(const char *dir, json_t *m, brig_error **err)
{
        _cleanup_free_ char *tmp = brig_strdup_printf("%s/." MANIFEST ".tmp", dir);
        _cleanup_free_ char *final = brig_strdup_printf("%s/" MANIFEST, dir);
        if (!tmp || !final)
                return brig_err(err, ENOMEM, "overlay record");
        if (json_dump_file(m, tmp, JSON_COMPACT) < 0 || rename(tmp, final) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return brig_err(err, e, "write the workspace record '%s'", final);
        }
        return 0;
}

static int record_workspace(const char *workspace, const char *dir, brig_error **err)
{
        _cleanup_close_ int ws = open_dir_nofollow(workspace);
        if (ws < 0)
                return brig_err(err, errno, "workspace '%s' (symlinks are not followed)", workspace);
        json_t *m = json_object();
        int r = m ? record_tree(ws, "", m, 0) : -ENOMEM;
        if (r < 0)
                json_decref(m);
        if (r == -ELOOP)  /* an earlier run in bind mode may have made it */
                return state_fail(err, ELOOP, "record the workspace '%s': it holds directories nested more than %d "
                                              "deep; overlay mode records every entry and goes no deeper: remove "
                                              "them, or use --workspace-mode bind", workspace, TREE_DEPTH_MAX);
        if (r < 0)
                return brig_err(err, -r, "record the workspace '%s'", workspace);
        r = manifest_write(dir, m, err);
        json_decref(m);
        return r;
}

/* The layer's root gives the workspace its owner and mode inside. */
static int make_layer_dirs(const char *workspace, const char *dir, brig_error **err)
{
        struct stat ws;
        if (stat(workspace, &ws) < 0)
                return brig_err(err, errno, "workspace '%s'", workspace);
        static const char *const sub[] = { "upper", "work" };
        for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
                _cleanup_free_ char *path = brig_strdup_printf("%s/%s", dir, sub[i]);
                if (!path || mkdir(path, 0700) < 0)
                        return brig_err(err, path ? errno : ENOMEM, "overlay: create '%s/%s'", dir, sub[i]);
                if (i != 0)
                        continue;
                /* As root the sandbox user is the workspace's owner, or
                 * nobody seeing a root-owned workspace through an idmap
                 * (plan.c); the layer's root must be that user's too. */
                if (geteuid() == 0) {
                        uid_t uid = ws.st_uid ? ws.st_uid : BRIG_NOBODY_UID;
                        gid_t gid = ws.st_uid ? (ws.st_gid ? ws.st_gid : ws.st_uid) : BRIG_NOBODY_UID;
                        if (chown(path, uid, gid) < 0)
                                return brig_err(err, errno, "overlay: chown '%s'", path);
                }
                if (chmod(path, ws.st_mode & 07777) < 0)
                        return brig_err(err, errno, "overlay: chmod '%s'", path);
        }
        return 0;
}

static char *policy_workspace(const brig_policy *p)
{
        char *ws = p->workspace ? strdup(p->workspace) : getcwd(NULL, 0);
        char *norm = ws ? path_normalize(ws) : NULL;
        free(ws);
        return norm;
}

int overlay_prepare(const brig_policy *p, const char *dir, brig_error **err)
{
        if (p->workspace_readonly)
                return brig_err(err, EINVAL, "--workspace-mode overlay and --read-only-workspace exclude each other");
        _cleanup_free_ char *ws = policy_workspace(p);
        if (!ws)
                return brig_err(err, errno, "workspace");
        int r = make_layer_dirs(ws, dir, err);
        return r < 0 ? r : record_workspace(ws, dir, err);
}

/* ---- inside: the overlay mount ------------------------------------------- */

bool overlay_is_workspace(const struct run_plan *plan, const struct mount_entry *m)
{
        return plan->overlay_upper && m->kind == MOUNT_BIND && strcmp(m->src, plan->workspace) == 0 &&
               strcmp(m->dst, plan->workspace) == 0;
}

static int fsconfig_string(int fs, const char *key, const char *value, brig_error **err)
{
        if (sys_fsconfig(fs, FSCONFIG_SET_STRING, key, value, 0) < 0)
                return brig_err(err, errno, "overlay option %s=%s", key, value);
        return 0;
}

int overlay_workspace_tree(const struct run_plan *plan, int src_fd, brig_error **err)
{
        /* The lower layer: the workspace as the sandbox would see it bound
         * (through the idmap when root runs it on a root-owned one). The
         * idmapped mount was made by the supervisor, so its detached tree
         * belongs to the host's user namespace and overlayfs may not clone
         * it from in here: attach it over the workspace in our private
         * mount namespace first (nothing propagates to the host). */
        if (plan->idmapped_workspace_fd >= 0 &&
            sys_move_mount(plan->idmapped_workspace_fd, "", src_fd, "",
                           MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return brig_err(err, errno, "overlay: attach the idmapped workspace");
        _cleanup_close_ int lower = plan->idmapped_workspace_fd >= 0
                                            ? fcntl(plan->idmapped_workspace_fd, F_DUPFD_CLOEXEC, 3)
                                            : sys_open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (lower < 0)
                return brig_err(err, errno, "overlay: lower layer '%s'", plan->workspace);
        _cleanup_close_ int upper = open_dir_nofollow(plan->overlay_upper);
        _cleanup_close_ int work = open_dir_nofollow(plan->overlay_work);
        if (upper < 0 || work < 0)
                return brig_err(err, errno, "overlay: layer directories in '%s'", plan->overlay_upper);
        _cleanup_close_ int fs = sys_fsopen("overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
                return brig_err(err, errno, "fsopen overlay (overlayfs in a user namespace needs Linux 5.11+)");
        char l[64], u[64], w[64];
        /* By descriptor (through /proc/self/fd): the paths were checked
         * when these were opened, nothing can swap them now. */
        snprintf(l, sizeof l, "/proc/self/fd/%d", lower);
        snprintf(u, sizeof u, "/proc/self/fd/%d", upper);
        snprintf(w, sizeof w, "/proc/self/fd/%d", work);
        int r = fsconfig_string(fs, "lowerdir", l, err);
        r = r ?: fsconfig_string(fs, "upperdir", u, err);
        r = r ?: fsconfig_string(fs, "workdir", w, err);
        /* trusted.* xattrs need host root; user.* work in a user namespace */
        if (r == 0 && sys_fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
                r = brig_err(err, errno, "overlay option userxattr");
        if (r < 0)
                return r;
        if (sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return brig_err(err, errno, "create the overlay over '%s' (layer in '%s')", plan->workspace,
                                plan->overlay_upper);
        int mnt = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return brig_err(err, errno, "fsmount overlay");
        return mnt;
}

/* ---- on the host: what the layer changes ---------------------------------- */

enum change_kind { CH_ADDED = 'A', CH_MODIFIED = 'M', CH_DELETED = 'D' };

struct change {
        char *path;
        enum change_kind kind;
        mode_t type;     /* S_IFREG, S_IFDIR, S_IFLNK (the new one; the old one for deletions) */
        mode_t mode;     /* permission bits in the layer */
        bool special;    /* device, FIFO or socket: never committed */
};

/* brig diff/commit PATH... --exclude PATTERN... (filter_prepare). */
struct filter {
        struct strv paths;     /* workspace-relative, normalized; "" the whole workspace; none: everything */
        struct strv excludes;  /* patterns; "/..." anchored at the workspace (filter_excludes) */
};

struct changes {
        struct change *v;
        size_t n;
        char *stopped_at;  /* where diff_dir stopped (note_stop) */
        const struct filter *filter;  /* the walk skips what it can never select, or NULL */
};

static void changes_free(struct changes *c)
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

static void filter_free(struct filter *f)
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

static int filter_prepare(const char *workspace, const brig_change_filter *in, struct filter *f, brig_error **err)
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

static bool below(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return n == 0 || (strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0'));
}

/* Is `path` selected (at or below a given path, and not excluded)? */
static bool filter_selects(const struct filter *f, const char *path)
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
static int filter_changes(struct changes *c, const struct filter *f, json_t *base)
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

struct layer {
        char *dir;         /* the state directory */
        json_t *state;
        const char *workspace;
        int upper, ws;
        void *links;       /* commit: hard links in the layer (link_first) */
        int journal;       /* commit: where its temporary names are noted first */
};

static void layer_close(struct layer *l)
{
        free(l->dir);
        json_decref(l->state);
        closep(&l->upper);
        closep(&l->journal);
        closep(&l->ws);
        tdestroy(l->links, link_free);
        l->links = NULL;
}

static int layer_open(const char *name, struct layer *l, brig_error **err)
{
        *l = (struct layer){ .upper = -1, .ws = -1, .journal = -1 };
        int r = state_dir(name, false, &l->dir, err);
        if (r < 0)
                return r;
        struct stat st;
        if (lstat(l->dir, &st) < 0)
                return state_fail(err, ENOENT, "no sandbox named '%s'", name);
        l->state = state_read(l->dir, err);
        if (!l->state)
                return -EBADMSG;
        const char *mode = json_string_value(json_object_get(l->state, "workspace_mode"));
        l->workspace = json_string_value(json_object_get(l->state, "workspace"));
        if (!mode || strcmp(mode, "overlay") != 0)
                return state_fail(err, EINVAL, "sandbox '%s' has no overlay (create it with --workspace-mode overlay)",
                                  name);
        if (!l->workspace)
                return state_fail(err, EBADMSG, "sandbox '%s': its state names no workspace", name);
        _cleanup_free_ char *upper = brig_strdup_printf("%s/upper", l->dir);
        l->upper = upper ? open_dir_nofollow(upper) : -1;
        if (l->upper < 0)
                return brig_err(err, errno, "overlay layer '%s'", upper ? upper : "");
        l->ws = open_dir_nofollow(l->workspace);
        if (l->ws < 0)
                return brig_err(err, errno, "workspace '%s'", l->workspace);
        return 0;
}

static const char *kind_name(enum change_kind k)
{
        return k == CH_ADDED ? "added" : k == CH_MODIFIED ? "modified" : "deleted";
}

static const char *type_name(mode_t t)
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
static int layer_diff(struct layer *l, struct changes *c)
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
        if (r == 0) {
                json_t *a = changes_json(&c);
                text = a ? json_dumps(a, JSON_INDENT(2)) : NULL;
                json_decref(a);
                if (!text)
                        brig_err(err, ENOMEM, "diff");
        }
        filter_free(&f);
        changes_free(&c);
        layer_close(&l);
        return text;
}

/* ---- commit ---------------------------------------------------------------- */

static bool record_matches(json_t *rec, const struct stat *st)
{
        json_t *now = entry_record(st);
        bool same;
        if (S_ISDIR(st->st_mode))
                /* A directory's size and mtime change whenever an entry in
                 * it does (our own commit too): type and inode say enough. */
                same = json_equal(json_array_get(rec, 0), json_array_get(now, 0)) &&
                       json_equal(json_array_get(rec, 1), json_array_get(now, 1));
        else
                same = json_equal(rec, now);
        json_decref(now);
        return same;
}

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
static void commit_sweep(const char *dir, int ws)
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

static json_t *manifest_read(const char *dir, brig_error **err)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/" MANIFEST, dir);
        json_error_t je;
        json_t *m = path ? json_load_file(path, 0, &je) : NULL;
        if (!m || !json_is_object(m)) {
                json_decref(m);
                brig_err(err, EBADMSG, "the workspace record '%s': %s", path ? path : "", m ? "not an object" : je.text);
                return NULL;
        }
        return m;
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

/* ---- reset ----------------------------------------------------------------- */

int brig_sandbox_reset(const char *name, brig_error **err)
{
        struct layer l;
        _cleanup_free_ char *root = NULL;
        int r = state_root(false, &root, err);
        if (r < 0)
                return r;
        _cleanup_close_ int lock = state_lock(root, err);
        if (lock < 0)
                return lock;
        r = layer_open(name, &l, err);
        if (r == 0)
                commit_sweep(l.dir, l.ws);
        if (r == 0 && state_supervisor_alive(l.state)) {
                /* Files under a mounted overlay must not change behind its
                 * back: running processes would see a mix of old and new. */
                r = state_fail(err, EBUSY, "sandbox '%s' is running: stop it first (brig stop %s), then reset",
                               name, name);
        }
        if (r == 0) {
                _cleanup_free_ char *upper = brig_strdup_printf("%s/upper", l.dir);
                _cleanup_free_ char *work = brig_strdup_printf("%s/work", l.dir);
                struct stat st;
                if (!upper || !work || lstat(upper, &st) < 0)
                        r = brig_err(err, errno ? errno : ENOMEM, "reset '%s'", name);
                /* Empty the layer in place: its root keeps owner and mode. */
                DIR *d = r == 0 ? fdopendir(fcntl(l.upper, F_DUPFD_CLOEXEC, 3)) : NULL;
                struct dirent *e;
                while (d && r == 0 && (e = readdir(d)))
                        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                                r = tree_remove_at(l.upper, e->d_name);
                if (d)
                        closedir(d);
                if (r < 0 && !(err && *err))
                        brig_err(err, -r, "reset '%s': empty the layer", name);
                if (r == 0 && (r = state_remove_tree(work, err)) == 0 && mkdir(work, 0700) < 0)
                        r = brig_err(err, errno, "reset '%s': recreate '%s'", name, work);
        }
        /* From now on the workspace as it is is the base. */
        if (r == 0)
                r = record_workspace(l.workspace, l.dir, err);
        layer_close(&l);
        return r;
}

/* ---- copies of a layer (snapshots) ------------------------------------------ */

#include <linux/fs.h>
#include <sys/ioctl.h>

static int copy_xattrs(int src, int dst)
{
        char names[4096];
        ssize_t n = flistxattr(src, names, sizeof names);
        for (ssize_t off = 0; n > 0 && off < n; off += (ssize_t)strlen(names + off) + 1) {
                const char *name = names + off;
                if (strncmp(name, "user.", 5) != 0)
                        continue;  /* overlay's marks live in user.overlay.* here */
                char value[4096];
                ssize_t v = fgetxattr(src, name, value, sizeof value);
                if (v >= 0 && fsetxattr(dst, name, value, (size_t)v, 0) < 0)
                        return -errno;
        }
        return 0;
}

static void copy_owner(int parent, const char *name, const struct stat *st)
{
        if (geteuid() == 0)
                (void)!fchownat(parent, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW);
}

struct copy {
        int droot;      /* the destination's root */
        void *links;    /* link_first */
        char *too_deep; /* where copy_dir stopped (note_stop) */
};

/* Open an entry of the source to copy it. Rootless, the layer's entries
 * are the caller's own, but the sandbox may have made one unreadable
 * (chmod 000), and the copy would fail: such an entry gets u+r (a
 * directory u+rx, to reach what is below it) for the copy, and *restore
 * says to put its mode back (fchmod on the fd) when done. Root reads it
 * anyway. */
static int open_source(int dir, const char *name, int flags, const struct stat *st, bool *restore)
{
        *restore = false;
        int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != EACCES || st->st_uid != geteuid())
                return fd < 0 ? -errno : fd;
        mode_t add = S_ISDIR(st->st_mode) ? 0500 : 0400;
        if (fchmodat(dir, name, (st->st_mode & 07777) | add, AT_SYMLINK_NOFOLLOW) < 0)
                return -EACCES;
        fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                (void)!fchmodat(dir, name, st->st_mode & 07777, AT_SYMLINK_NOFOLLOW);
                return -e;
        }
        *restore = true;
        return fd;
}

static int copy_file(int sdir, int ddir, const char *name, const struct stat *st)
{
        bool restore;
        _cleanup_close_ int in = open_source(sdir, name, O_RDONLY | O_NONBLOCK, st, &restore);
        if (in < 0)
                return in;
        if (restore)
                (void)!fchmod(in, st->st_mode & 07777);  /* the fd reads on */
        _cleanup_close_ int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        /* A reflink shares the blocks until either side writes: cheap and
         * safe (a hard link would let the sandbox change the snapshot). */
        int r = 0;
        if (ioctl(out, FICLONE, in) < 0 && (r = copy_data(in, out)) < 0)
                return r;
        r = copy_xattrs(in, out);
        if (r == 0 && (fchmod(out, st->st_mode & 07777) < 0 || fsync(out) < 0))
                r = -errno;
        if (r == 0)
                copy_owner(ddir, name, st);
        return r;
}

static int copy_dir(struct copy *cp, int sdir, int ddir, const char *rel, int depth);

static int copy_entry(struct copy *cp, int sdir, int ddir, const char *rel, const char *name, int depth)
{
        struct stat st;
        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        _cleanup_free_ char *path = join(rel, name);
        if (!path)
                return -ENOMEM;
        if (S_ISREG(st.st_mode)) {
                const char *first = link_first(&cp->links, &st, path);
                if (first)
                        return linkat(cp->droot, first, ddir, name, 0) < 0 ? -errno : 0;
                return copy_file(sdir, ddir, name, &st);
        }
        if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlinkat(sdir, name, target, sizeof target - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if (symlinkat(target, ddir, name) < 0)
                        return -errno;
                copy_owner(ddir, name, &st);
                return 0;
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
                /* whiteouts (0/0) need no privilege; other devices are not
                 * possible in a layer made inside the sandbox (nodev) */
                if (S_ISCHR(st.st_mode) && st.st_rdev != makedev(0, 0))
                        return 0;
                if (mknodat(ddir, name, st.st_mode & (S_IFMT | 07777), S_ISCHR(st.st_mode) ? makedev(0, 0) : 0) < 0)
                        return -errno;
                copy_owner(ddir, name, &st);
                return 0;
        }
        if (!S_ISDIR(st.st_mode))
                return 0;  /* sockets: nothing to keep */
        if (mkdirat(ddir, name, 0700) < 0)
                return -errno;
        bool restore;
        _cleanup_close_ int s = open_source(sdir, name, O_RDONLY | O_DIRECTORY, &st, &restore);
        if (s < 0)
                return s;
        _cleanup_close_ int d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
                return -errno;
        int r = copy_dir(cp, s, d, path, depth + 1);
        if (restore)
                (void)!fchmod(s, st.st_mode & 07777);
        if (r == 0)
                r = copy_xattrs(s, d);
        if (r == 0 && fchmod(d, st.st_mode & 07777) < 0)
                r = -errno;
        if (r == 0)
                copy_owner(ddir, name, &st);
        return r;
}

static int copy_dir(struct copy *cp, int sdir, int ddir, const char *rel, int depth)
{
        if (depth > TREE_DEPTH_MAX)
                return note_stop(&cp->too_deep, rel, ELOOP);
        DIR *d = fdopendir(fcntl(sdir, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                        r = copy_entry(cp, sdir, ddir, rel, e->d_name, depth);
        closedir(d);
        return r;
}

int overlay_copy_tree(const char *src, const char *dst, brig_error **err)
{
        _cleanup_close_ int s = open_dir_nofollow(src);
        if (s < 0)
                return brig_err(err, errno, "copy '%s'", src);
        struct stat st;
        if (fstat(s, &st) < 0 || mkdir(dst, 0700) < 0)
                return brig_err(err, errno, "copy to '%s'", dst);
        _cleanup_close_ int d = open_dir_nofollow(dst);
        if (d < 0)
                return brig_err(err, errno, "copy to '%s'", dst);
        struct copy cp = { .droot = d };
        int r = copy_dir(&cp, s, d, "", 0);
        tdestroy(cp.links, link_free);
        if (r == 0)
                r = copy_xattrs(s, d);
        if (r == 0 && fchmod(d, st.st_mode & 07777) < 0)
                r = -errno;
        if (r == 0 && geteuid() == 0 && fchown(d, st.st_uid, st.st_gid) < 0)
                r = -errno;
        if (r < 0 && cp.too_deep)
                layer_walk_failed(err, "copy of the layer", src, -ELOOP, cp.too_deep);
        free(cp.too_deep);
        return r < 0 ? brig_err(err, -r, "copy '%s' to '%s'", src, dst) : 0;
}
