/* snapshot.c — brig snapshot / restore / fork: the writable state of a
 * persistent sandbox saved under a tag in its state directory, put back,
 * or used to start a second sandbox.
 *
 * What is saved: the overlay layer (copied with reflinks where the
 * filesystem can, else copied; never hard-linked, the sandbox could write
 * through a link into the snapshot) and the record commit checks conflicts
 * against; $HOME and /tmp, which live in the sandbox's memory, as tar
 * archives made by `tar` run inside the sandbox through exec — so the
 * untrusted contents are only ever packed and unpacked in there, by the
 * sandbox user, under its confinement. The sandbox is frozen while its
 * layer is copied when the cgroup freezer is available (meta.json says).
 *
 * A snapshot appears whole or not at all: it is made in a temporary
 * directory and renamed into place; any failure (a full disk) removes the
 * temporary directory and leaves the sandbox as it was. */
#define _GNU_SOURCE
#include "persist/sandbox.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct snap {
        char *dir;        /* the sandbox's state directory */
        char *snaps;      /* dir/snapshots */
        char *path;       /* dir/snapshots/TAG */
        json_t *state;
};

static void snap_free(struct snap *s)
{
        free(s->dir);
        free(s->snaps);
        free(s->path);
        json_decref(s->state);
}

static int snap_open(const char *name, const char *tag, struct snap *s, brig_error **err)
{
        memset(s, 0, sizeof *s);
        if (!state_name_valid(tag))
                return state_fail(err, EINVAL, "bad snapshot tag '%s': use letters, digits, '_', '.', '-'", tag);
        int r = state_dir(name, false, &s->dir, err);
        if (r < 0)
                return r;
        struct stat st;
        if (lstat(s->dir, &st) < 0)
                return state_fail(err, ENOENT, "no sandbox named '%s'", name);
        s->state = state_read(s->dir, err);
        s->snaps = brig_strdup_printf("%s/snapshots", s->dir);
        s->path = brig_strdup_printf("%s/snapshots/%s", s->dir, tag);
        if (!s->state)
                return -EBADMSG;
        if (!s->snaps || !s->path)
                return brig_err(err, ENOMEM, "snapshot");
        return 0;
}

static bool overlay_mode(json_t *st)
{
        const char *m = json_string_value(json_object_get(st, "workspace_mode"));
        return m && strcmp(m, "overlay") == 0;
}

/* tar inside the sandbox: pack (stdout → file) or unpack (file → stdin)
 * one of its in-memory directories. */
static int tar_in_sandbox(const char *name, const char *where, const char *file, bool pack, brig_error **err)
{
        _cleanup_close_ int fd = pack ? open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                                      : open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (fd < 0 || null < 0)
                return brig_err(err, errno, "snapshot file '%s'", file);
        /* Only the sandbox user's own entries, on this filesystem: mount
         * points brig made (the workspace, binds below /tmp or $HOME) are
         * not the sandbox's state and come back with the mounts.
         * --sparse: a sparse file costs the sandbox no memory, and written
         * out with its holes as zeros it would fill the state directory's
         * disk (truncate -s 1T ~/big). */
        _cleanup_free_ char *script = brig_strdup_printf(
                pack ? "cd \"%s\" && find . -mindepth 1 -maxdepth 1 -user \"$(id -u)\" -print0 | "
                       "tar --one-file-system --sparse --null -T - -cf -"
                     : "cd \"%s\" && exec tar --no-overwrite-dir -xf -",
                where);
        char *argv[] = { "sh", "-c", script, NULL };
        int stdio[3] = { pack ? null : fd, pack ? fd : null, null };
        int code = 0;
        int r = script ? sandbox_run_in(name, argv, stdio, &code, err) : brig_err(err, ENOMEM, "tar");
        if (r < 0)
                return brig_err_prefix(err, "%s %s", pack ? "save" : "restore", where);
        if (code != 0)
                return state_fail(err, EIO, "%s %s: tar inside the sandbox failed (exit %d; a full disk, or no tar in the "
                                            "sandbox?)", pack ? "save" : "restore", where, code);
        if (pack && fsync(fd) < 0)
                return brig_err(err, errno, "save %s", where);
        return 0;
}

static int copy_file_plain(const char *from, const char *to, brig_error **err)
{
        _cleanup_close_ int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int out = in >= 0 ? open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
        if (in < 0 || out < 0)
                return brig_err(err, errno, "copy '%s'", from);
        char buf[65536];
        ssize_t n;
        while ((n = read(in, buf, sizeof buf)) > 0)
                if (write(out, buf, (size_t)n) != n)
                        return brig_err(err, errno ? errno : EIO, "copy '%s' to '%s'", from, to);
        if (n < 0 || fsync(out) < 0)
                return brig_err(err, errno, "copy '%s'", from);
        return 0;
}

static int write_meta(const char *path, json_t *meta, brig_error **err)
{
        _cleanup_free_ char *file = brig_strdup_printf("%s/meta.json", path);
        if (!file || json_dump_file(meta, file, JSON_INDENT(2)) < 0)
                return brig_err(err, errno ? errno : ENOMEM, "write '%s/meta.json'", path);
        return 0;
}

int brig_sandbox_snapshot(const char *name, const char *tag, brig_error **err)
{
        struct snap s;
        int r = snap_open(name, tag, &s, err);
        _cleanup_free_ char *tmp = NULL, *home_tar = NULL, *tmp_tar = NULL, *upper = NULL, *dst = NULL,
                            *base = NULL, *base_dst = NULL;
        bool running = false, frozen = false;
        if (r < 0)
                goto out;
        if (mkdir(s.snaps, 0700) < 0 && errno != EEXIST) {
                r = brig_err(err, errno, "create '%s'", s.snaps);
                goto out;
        }
        struct stat st;
        if (lstat(s.path, &st) == 0) {
                r = state_fail(err, EEXIST, "sandbox '%s' already has a snapshot '%s'", name, tag);
                goto out;
        }
        tmp = brig_strdup_printf("%s/.%s.tmp", s.snaps, tag);
        if (!tmp) {
                r = brig_err(err, ENOMEM, "snapshot");
                goto out;
        }
        state_remove_tree(tmp, NULL);  /* a crashed snapshot's leftovers */
        if (mkdir(tmp, 0700) < 0) {
                r = brig_err(err, errno, "create '%s'", tmp);
                goto out;
        }
        running = state_supervisor_alive(s.state);
        json_t *meta = json_pack("{s:s, s:I, s:b, s:b}", "tag", tag, "created", (json_int_t)time(NULL), "home",
                                 running, "overlay", overlay_mode(s.state));
        if (running) {
                home_tar = brig_strdup_printf("%s/home.tar", tmp);
                tmp_tar = brig_strdup_printf("%s/tmp.tar", tmp);
                r = home_tar && tmp_tar ? 0 : brig_err(err, ENOMEM, "snapshot");
                if (r == 0)
                        r = tar_in_sandbox(name, "$HOME", home_tar, true, err);
                if (r == 0)
                        r = tar_in_sandbox(name, "/tmp", tmp_tar, true, err);
                /* Frozen while the layer is copied, so it is one moment's. */
                brig_error *perr = NULL;
                frozen = r == 0 && overlay_mode(s.state) && brig_sandbox_pause(name, &perr) == 0;
                brig_error_free(&perr);
        }
        json_object_set_new(meta, "frozen", json_boolean(frozen));
        if (r == 0 && overlay_mode(s.state)) {
                upper = brig_strdup_printf("%s/upper", s.dir);
                dst = brig_strdup_printf("%s/upper", tmp);
                base = brig_strdup_printf("%s/base.json", s.dir);
                base_dst = brig_strdup_printf("%s/base.json", tmp);
                r = upper && dst && base && base_dst ? overlay_copy_tree(upper, dst, err)
                                                     : brig_err(err, ENOMEM, "snapshot");
                if (r == 0)
                        r = copy_file_plain(base, base_dst, err);
        }
        if (frozen) {
                brig_error *rerr = NULL;
                if (brig_sandbox_resume(name, &rerr) < 0 && r == 0)
                        r = brig_err(err, rerr && rerr->errnum ? rerr->errnum : EIO, "resume after the snapshot: %s",
                                     rerr && rerr->msg ? rerr->msg : "?");
                brig_error_free(&rerr);
        }
        if (r == 0)
                r = write_meta(tmp, meta, err);
        json_decref(meta);
        if (r == 0 && rename(tmp, s.path) < 0)
                r = brig_err(err, errno, "publish '%s'", s.path);
        if (r < 0) {
                state_remove_tree(tmp, NULL);  /* nothing half-made stays */
                brig_err_prefix(err, "snapshot '%s' of '%s' (nothing saved; the sandbox is unchanged)", tag, name);
        }
out:
        snap_free(&s);
        return r;
}

static json_t *read_meta(const char *path, brig_error **err)
{
        _cleanup_free_ char *file = brig_strdup_printf("%s/meta.json", path);
        json_error_t je;
        json_t *m = file ? json_load_file(file, 0, &je) : NULL;
        if (!m)
                brig_err(err, EBADMSG, "snapshot '%s': %s", path, file ? je.text : "out of memory");
        return m;
}

/* Put $HOME and /tmp back into a running sandbox. */
static int restore_memory(const char *name, const char *path, json_t *meta, brig_error **err)
{
        if (!json_is_true(json_object_get(meta, "home")))
                return 0;
        _cleanup_free_ char *home_tar = brig_strdup_printf("%s/home.tar", path);
        _cleanup_free_ char *tmp_tar = brig_strdup_printf("%s/tmp.tar", path);
        if (!home_tar || !tmp_tar)
                return brig_err(err, ENOMEM, "restore");
        int r = tar_in_sandbox(name, "$HOME", home_tar, false, err);
        return r < 0 ? r : tar_in_sandbox(name, "/tmp", tmp_tar, false, err);
}

/* dir/upper becomes a copy of the snapshot's; the old one goes only once
 * the copy is complete. */
static int restore_layer(const char *dir, const char *path, brig_error **err)
{
        _cleanup_free_ char *src = brig_strdup_printf("%s/upper", path);
        _cleanup_free_ char *fresh = brig_strdup_printf("%s/.upper.new", dir);
        _cleanup_free_ char *old = brig_strdup_printf("%s/.upper.old", dir);
        _cleanup_free_ char *upper = brig_strdup_printf("%s/upper", dir);
        _cleanup_free_ char *work = brig_strdup_printf("%s/work", dir);
        _cleanup_free_ char *base_src = brig_strdup_printf("%s/base.json", path);
        _cleanup_free_ char *base_new = brig_strdup_printf("%s/.base.json.new", dir);
        _cleanup_free_ char *base = brig_strdup_printf("%s/base.json", dir);
        if (!src || !fresh || !old || !upper || !work || !base_src || !base_new || !base)
                return brig_err(err, ENOMEM, "restore");
        state_remove_tree(fresh, NULL);
        state_remove_tree(old, NULL);
        unlink(base_new);
        int r = overlay_copy_tree(src, fresh, err);
        if (r == 0)
                r = copy_file_plain(base_src, base_new, err);
        if (r < 0) {
                state_remove_tree(fresh, NULL);
                unlink(base_new);
                return r;
        }
        if ((rename(upper, old) < 0 && errno != ENOENT) || rename(fresh, upper) < 0 || rename(base_new, base) < 0)
                return brig_err(err, errno, "put the layer in place in '%s'", dir);
        state_remove_tree(old, NULL);
        r = state_remove_tree(work, err);
        if (r == 0 && mkdir(work, 0700) < 0)
                r = brig_err(err, errno, "recreate '%s'", work);
        return r;
}

int brig_sandbox_restore(const char *name, const char *tag, brig_error **err)
{
        struct snap s;
        json_t *meta = NULL;
        int r = snap_open(name, tag, &s, err);
        struct stat st;
        if (r == 0 && lstat(s.path, &st) < 0)
                r = state_fail(err, ENOENT, "sandbox '%s' has no snapshot '%s'", name, tag);
        if (r == 0 && !(meta = read_meta(s.path, err)))
                r = -EBADMSG;
        /* The layer cannot change under a mounted overlay: stop, swap, start. */
        if (r == 0 && state_supervisor_alive(s.state))
                r = brig_sandbox_stop(name, err);
        if (r == 0 && json_is_true(json_object_get(meta, "overlay")))
                r = restore_layer(s.dir, s.path, err);
        if (r == 0)
                r = brig_sandbox_start(name, err);
        if (r == 0)
                r = restore_memory(name, s.path, meta, err);
        if (r < 0)
                brig_err_prefix(err, "restore '%s' of '%s'", tag, name);
        json_decref(meta);
        snap_free(&s);
        return r;
}

int brig_sandbox_fork(const char *name, const char *tag, const char *new_name, brig_error **err)
{
        struct snap s;
        json_t *meta = NULL;
        brig_policy *p = NULL;
        struct sandbox_create_opts opts = { 0 };
        _cleanup_free_ char *new_dir = NULL;
        _cleanup_close_ int lock = -EBADF;
        bool made = false;
        int r = snap_open(name, tag, &s, err);
        struct stat st;
        if (r == 0 && lstat(s.path, &st) < 0)
                r = state_fail(err, ENOENT, "sandbox '%s' has no snapshot '%s'", name, tag);
        if (r == 0 && !(meta = read_meta(s.path, err)))
                r = -EBADMSG;
        if (r == 0)
                r = sandbox_load_policy(s.dir, s.state, &p, &opts, err);
        /* a fork is the caller's sandbox, not the owner's of the one it
         * was forked from */
        opts.owned = false;
        opts.owner_pid = 0;
        opts.owner_start = 0;
        if (r == 0)
                r = sandbox_name_not_a_pools(new_name, err);
        if (r == 0) {
                r = sandbox_new_dir(new_name, &new_dir, &lock, err);
                made = r == 0;
        }
        if (r == 0) {
                _cleanup_free_ char *pol = brig_strdup_printf("%s/policy.json", s.dir);
                _cleanup_free_ char *pol_new = brig_strdup_printf("%s/policy.json", new_dir);
                r = pol && pol_new ? copy_file_plain(pol, pol_new, err) : brig_err(err, ENOMEM, "fork");
        }
        if (r == 0 && opts.overlay)
                r = restore_layer(new_dir, s.path, err);
        if (r == 0)
                r = sandbox_launch(new_dir, new_name, p, &opts, lock, err);
        closep(&lock);
        if (r == 0)
                r = restore_memory(new_name, s.path, meta, err);
        if (r < 0) {
                brig_err_prefix(err, "fork '%s' of '%s' as '%s'", tag, name, new_name);
                if (made) {
                        brig_error *rerr = NULL;
                        (void)brig_sandbox_remove(new_name, &rerr);  /* nothing half-made stays */
                        brig_error_free(&rerr);
                }
        }
        brig_policy_free(p);
        json_decref(meta);
        snap_free(&s);
        return r;
}

char *brig_sandbox_snapshots_json(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        if (state_dir(name, false, &dir, err) < 0)
                return NULL;
        struct stat st;
        if (lstat(dir, &st) < 0) {
                state_fail(err, ENOENT, "no sandbox named '%s'", name);
                return NULL;
        }
        _cleanup_free_ char *snaps = brig_strdup_printf("%s/snapshots", dir);
        json_t *out = json_array();
        DIR *d = snaps ? opendir(snaps) : NULL;
        struct dirent *e;
        while (out && d && (e = readdir(d))) {
                if (!state_name_valid(e->d_name))
                        continue;  /* also skips .TAG.tmp of a snapshot in progress */
                _cleanup_free_ char *path = brig_strdup_printf("%s/%s", snaps, e->d_name);
                brig_error *merr = NULL;
                json_t *meta = path ? read_meta(path, &merr) : NULL;
                brig_error_free(&merr);
                if (meta)
                        json_array_append_new(out, meta);
        }
        if (d)
                closedir(d);
        char *text = out ? json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(out);
        if (!text)
                brig_err(err, ENOMEM, "snapshots");
        return text;
}

int brig_sandbox_snapshot_remove(const char *name, const char *tag, brig_error **err)
{
        struct snap s;
        int r = snap_open(name, tag, &s, err);
        struct stat st;
        if (r == 0 && lstat(s.path, &st) < 0)
                r = state_fail(err, ENOENT, "sandbox '%s' has no snapshot '%s'", name, tag);
        if (r == 0)
                r = state_remove_tree(s.path, err);
        snap_free(&s);
        return r;
}
