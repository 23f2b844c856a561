/* overlay_copy.c — copies of a layer (snapshot, restore, fork): a tree
 * copied with its owners, modes, xattrs, holes and hard links, resolved
 * beneath its root without following a symlink. */
#define _GNU_SOURCE
#include "persist/overlay.h"
#include "persist/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <search.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

/* ---- copies of a layer (snapshots) ------------------------------------------ */

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
