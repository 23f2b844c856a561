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
 * directory (existing files keep theirs).
 *
 * This file holds the layer itself: resolving without symlinks (shared
 * by every part), its directories at create, the overlay mount inside,
 * opening it on the host, and reset. The other parts: the record of the
 * workspace (overlay_manifest.c), what the layer changes (overlay_diff.c),
 * applying it (overlay_commit.c) and copies of a layer for snapshots
 * (overlay_copy.c); persist/overlay.h is what they share. */
#define _GNU_SOURCE
#include "controls/mounts.h"
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "core/model.h"
#include "persist/overlay.h"
#include "persist/sandbox.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- resolving without symlinks ---------------------------------------- */

int open_beneath(int dirfd, const char *rel, int flags)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        return sys_openat2(dirfd, *rel ? rel : ".", &how);
}

int open_dir_nofollow(const char *path)
{
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        return sys_openat2(AT_FDCWD, path, &how);
}

/* The directory holding `rel` (opened beneath root), and its last part. */
int open_parent(int root, const char *rel, const char **base)
{
        const char *slash = strrchr(rel, '/');
        *base = slash ? slash + 1 : rel;
        if (!slash)
                return fcntl(root, F_DUPFD_CLOEXEC, 3);
        _cleanup_free_ char *dir = strndup(rel, (size_t)(slash - rel));
        return dir ? open_beneath(root, dir, O_RDONLY | O_DIRECTORY) : -ENOMEM;
}

char *join(const char *dir, const char *name)
{
        return *dir ? brig_strdup_printf("%s/%s", dir, name) : strdup(name);
}

/* Remember where a walk of the layer stopped (the first time) and why:
 * -ELOOP too deep, -EACCES unreadable (diff, rootless). */
int note_stop(char **at, const char *rel, int errnum)
{
        if (!*at)
                *at = strndup(rel, 96);
        return -errnum;
}

int layer_walk_failed(brig_error **err, const char *what, const char *name, int r, const char *at)
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
int copy_data(int in, int out)
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

void link_free(void *p)
{
        struct link_seen *l = p;
        free(l->path);
        free(l);
}

/* The first copy's path when `st` was seen before; else remembers `path`
 * (a file with a single name is never remembered) and returns NULL. */
const char *link_first(void **seen, const struct stat *st, const char *path)
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

/* ---- create: the layer's directories ------------------------------------ */

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

/* ---- on the host: the layer opened -------------------------------------- */

void layer_close(struct layer *l)
{
        free(l->dir);
        json_decref(l->state);
        closep(&l->upper);
        closep(&l->journal);
        closep(&l->ws);
        tdestroy(l->links, link_free);
        l->links = NULL;
}

int layer_open(const char *name, struct layer *l, brig_error **err)
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
