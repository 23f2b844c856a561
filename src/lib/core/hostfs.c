/* hostfs.c — what brig does, on the host and perhaps as root, to paths and
 * trees that sandboxed code can reach: open the output files the user
 * named (--json-report, --audit, brig exec --json-report), which may lie in
 * a workspace, and remove the trees a sandbox made (an overlay layer, a
 * snapshot of it), however deep.
 *
 * The rule for both: never follow a symlink the sandbox may have planted,
 * never cross into another filesystem, and never depend on the sandbox's
 * tree being small. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>

/* ---- output files ---------------------------------------------------------- */

/* Kernels without openat2 (before 5.6, ENOSYS): the same rule, one
 * component at a time. Every directory is opened O_PATH|O_NOFOLLOW|
 * O_DIRECTORY below the one before it, so no symlink — planted before or
 * swapped in during the walk — is ever followed; the last component is
 * opened O_NOFOLLOW below the last directory. Returns an fd or -errno
 * (-ELOOP for a symlink anywhere). */
int output_open_walk(const char *path, int flags, mode_t mode)
{
        _cleanup_close_ int dir = open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        const char *p = path;
        for (;;) {
                while (*p == '/')
                        p++;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n == 0)
                        return -EISDIR;  /* "/" itself, or a name ending in "/" */
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                char comp[NAME_MAX + 1];
                memcpy(comp, p, n);
                comp[n] = '\0';
                const char *rest = end;
                while (*rest == '/')
                        rest++;
                if (!*rest) {
                        if (*end == '/')
                                return -EISDIR;
                        int fd = openat(dir, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
                        return fd < 0 ? -errno : fd;
                }
                int next = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (next < 0) {
                        int e = errno;
                        struct stat st;
                        /* O_PATH|O_NOFOLLOW|O_DIRECTORY says ENOTDIR for a symlink */
                        if (e == ENOTDIR && fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                                e = ELOOP;
                        return -e;
                }
                close(dir);
                dir = next;
                p = end;
        }
}

static int output_openat2(const char *path, int flags, mode_t mode)
{
        /* RESOLVE_NO_SYMLINKS covers every component, the last included,
         * and magic links (/proc/self/fd/N) too. */
        struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), .mode = mode,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = sys_openat2(AT_FDCWD, path, &how);
        if (fd < 0 && errno == ENOSYS)
                return output_open_walk(path, flags, mode);
        return fd < 0 ? -errno : fd;
}

/* The first prefix of `path` that is a symlink, for the message; NULL if
 * none is (any more). */
static char *first_symlink(const char *path)
{
        char *copy = strdup(path);
        if (!copy)
                return NULL;
        for (char *p = copy + 1;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                char saved = *p;
                *p = '\0';
                struct stat st;
                if (lstat(copy, &st) == 0 && S_ISLNK(st.st_mode))
                        return copy;
                if (saved == '\0')
                        break;
                *p = saved;
        }
        free(copy);
        return NULL;
}

/* Is the directory an output path would be written in brig's own state
 * root, or inside it? A report over a pool's pool.json, an audit stream
 * over a sandbox's state, would be brig writing its own trust away. The
 * one such file brig writes itself: a sandbox's own audit stream,
 * ROOT/NAME/audit.jsonl, appended to (BRIG_SANDBOX_AUDIT). */
static const char *in_state_root(const char *path, bool append, const char **root, struct state_guard *g)
{
        memset(g, 0, sizeof *g);
        _cleanup_free_ char *abs = path[0] == '/' ? strdup(path) : NULL;
        if (!abs) {
                _cleanup_free_ char *cwd = getcwd(NULL, 0);
                abs = cwd ? brig_strdup_printf("%s/%s", cwd, path) : NULL;
        }
        char *slash = abs ? strrchr(abs, '/') : NULL;
        if (!slash)
                return NULL;
        slash[slash == abs ? 1 : 0] = '\0';
        brig_error *e = NULL;
        if (state_guard_init(g, geteuid(), &e) < 0) {
                brig_error_free(&e);
                return NULL;  /* no root to be in */
        }
        const char *how = state_guard_test(g, abs, root);
        if (!how || (strcmp(how, "is") != 0 && strcmp(how, "lies inside") != 0))
                return NULL;
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char *up = strrchr(abs, '/');
        if (append && strcmp(base, "audit.jsonl") == 0 && *root && up && up != abs) {
                *up = '\0';  /* ROOT/NAME -> ROOT */
                if (strcmp(abs, *root) == 0)
                        return NULL;
        }
        return how;
}

/* The filesystem of fd, if it is one of the kernel's interfaces (procfs,
 * sysfs, cgroupfs, ...): there a "file" is a control, which a report
 * would set (root's --json-report /proc/sys/...), or one that takes no
 * such write, refused only once the command has run. NULL otherwise. */
static const char *kernel_interface_fs(int fd)
{
        static const struct {
                long magic;
                const char *name;
        } kernel_fs[] = {
                { PROC_SUPER_MAGIC, "procfs" },      { SYSFS_MAGIC, "sysfs" },
                { CGROUP_SUPER_MAGIC, "cgroupfs" },  { CGROUP2_SUPER_MAGIC, "cgroup2" },
                { DEBUGFS_MAGIC, "debugfs" },        { TRACEFS_MAGIC, "tracefs" },
                { SECURITYFS_MAGIC, "securityfs" },  { BPF_FS_MAGIC, "bpffs" },
                { EFIVARFS_MAGIC, "efivarfs" },      { 0x62656570 /* CONFIGFS_MAGIC */, "configfs" },
        };
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(kernel_fs); i++)
                if ((long)sf.f_type == kernel_fs[i].magic)
                        return kernel_fs[i].name;
        return NULL;
}

/* 0, or -EPERM with *err when the path's directory is in brig's state
 * root (in_state_root): `doing` says what brig does not do there. */
static int refuse_in_state_root(const char *path, bool append, const char *what, const char *doing,
                                brig_error **err)
{
        struct state_guard g;
        const char *root = NULL, *how = in_state_root(path, append, &root, &g);
        int r = how ? state_fail(err, EPERM, "%s '%s': its directory %s brig's state directory '%s', which brig %s: "
                                             "give a path outside it",
                                 what, path, how, root ? root : "?", doing)
                    : 0;
        state_guard_free(&g);
        return r;
}

/* -ELOOP with *err naming the symlink on the way (`kind`: what the path is for). */
static int refuse_symlink(const char *path, const char *what, const char *kind, brig_error **err)
{
        _cleanup_free_ char *link = first_symlink(path);
        return state_fail(err, ELOOP, "%s '%s': '%s' is a symlink; brig follows no symlink anywhere in %s (one a "
                                      "sandbox planted would %s): give a path without symlinks",
                          what, path, link ? link : path, kind,
                          strcmp(kind, "an output path") == 0 ? "redirect the write" : "hand it another file");
}

/* fd (an open of path, or -errno) a regular file: 0 with *st, or -errno
 * with *err saying what to give instead. */
static int regular_file(int fd, const char *path, const char *what, const char *instead, struct stat *st,
                        brig_error **err)
{
        if (fd < 0)
                return brig_err(err, -fd, "%s '%s'", what, path);
        if (fstat(fd, st) < 0)
                return brig_err(err, errno, "%s '%s'", what, path);
        if (!S_ISREG(st->st_mode))
                return state_fail(err, EINVAL, "%s '%s' is not a regular file; give %s", what, path, instead);
        return 0;
}

int output_open(const char *path, const char *what, bool append, brig_error **err)
{
        int r = refuse_in_state_root(path, append, what, "writes nothing else into", err);
        if (r < 0)
                return r;
        /* Opened before any sandboxed code runs, and never through a
         * symlink in any component: the workspace, where an output path
         * may well lie, is the sandbox's to rearrange — an earlier run, or
         * a persistent sandbox that is running now, can turn a directory
         * on the path into a symlink to anywhere, and brig writes as the
         * user, perhaps root. O_NONBLOCK so that a FIFO there cannot hang
         * us; no O_TRUNC before the checks below, so a refused file is
         * left as it was. */
        int flags = O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | (append ? O_APPEND : 0);
        _cleanup_close_ int fd = output_openat2(path, flags, 0644);
        if (fd == -ELOOP)
                return refuse_symlink(path, what, "an output path", err);
        /* ENXIO: a FIFO nobody reads (O_NONBLOCK) or a socket */
        if (fd == -ENXIO)
                return state_fail(err, EINVAL, "%s '%s' is not a regular file (a FIFO or a socket); give a new "
                                               "path or a regular file", what, path);
        struct stat st;
        if ((r = regular_file(fd, path, what, "a new path or a regular file", &st, err)) < 0)
                return r;
        const char *fs = kernel_interface_fs(fd);
        if (fs)
                return state_fail(err, EINVAL, "%s '%s' is a file of %s, whose writes are requests to the kernel "
                                               "(a setting changed, or the write refused after the command ran): "
                                               "give a path on an ordinary filesystem",
                                  what, path, fs);
        /* A second name is a hard link someone made: perhaps a sandbox,
         * to a file it may no longer write (or that was not there yet to
         * matter), which brig's write would then overwrite. */
        if (st.st_nlink > 1)
                return state_fail(err, EMLINK, "%s '%s' has %ju hard links; brig writes no file that has other "
                                               "names (remove it, or give a new path)",
                                  what, path, (uintmax_t)st.st_nlink);
        if (!append && ftruncate(fd, 0) < 0)
                return brig_err(err, errno, "%s '%s': truncate", what, path);
        fcntl(fd, F_SETFL, append ? O_APPEND : 0);  /* blocking writes from here on */
        return TAKE_FD(fd);
}

int input_open(const char *path, const char *what, brig_error **err)
{
        int r = refuse_in_state_root(path, false, what, "hands nothing out of", err);
        if (r < 0)
                return r;
        /* As an output is opened, and for the same reason: the path may
         * lie in a workspace, which a sandbox arranges as it likes — a
         * symlink it planted there (a file, or a directory on the way)
         * would hand it whatever the user can read on the host.
         * O_NONBLOCK: a FIFO it made cannot hang us. */
        _cleanup_close_ int fd = output_openat2(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
        if (fd == -ELOOP)
                return refuse_symlink(path, what, "a path it reads for a sandbox", err);
        struct stat st;
        if ((r = regular_file(fd, path, what, "a regular file, or - for stdin", &st, err)) < 0)
                return r;
        fcntl(fd, F_SETFL, 0);  /* blocking reads from here on */
        return TAKE_FD(fd);
}

const char *output_same_stream(int fd, int other)
{
        struct stat st, o;
        if (fstat(fd, &st) < 0 || fstat(other, &o) < 0 || st.st_dev != o.st_dev || st.st_ino != o.st_ino)
                return NULL;
        return S_ISFIFO(st.st_mode) ? "pipe" : S_ISSOCK(st.st_mode) ? "socket" : S_ISREG(st.st_mode) ? "file" : NULL;
}

int output_fd_check(int fd, const char *what, brig_error **err)
{
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 && errno == EBADF)
                return brig_err(err, EBADF, "%s %d: no such open descriptor in brig; open it when starting brig "
                                            "(e.g. %d>report.json, or a pipe's write end)", what, fd, fd);
        if (fl < 0)
                return brig_err(err, errno, "%s %d", what, fd);
        if ((fl & O_PATH) || (fl & O_ACCMODE) == O_RDONLY)
                return brig_err(err, EBADF, "%s %d: the descriptor is not open for writing (give a write end: "
                                            "%d>FILE, or a pipe's write end)", what, fd, fd);
        /* The same pipe, socket or file as brig's stdout or stderr (3>&1):
         * the command's output, relayed there, would be mixed into brig's
         * lines, and could forge them ({"event":"end",...}). A terminal or
         * /dev/null shared is no stream anyone parses. */
        const char *kind;
        for (int std = 1; std <= 2; std++)
                if ((kind = output_same_stream(fd, std)))
                        return brig_err(err, EINVAL, "%s %d: the same %s as brig's %s (fd %d): the command's output "
                                                     "would be mixed into it, and could forge its lines; give a "
                                                     "descriptor of its own", what, fd, kind,
                                        std == 1 ? "stdout" : "stderr", std);
        /* A listening socket reads as open for writing, and takes nothing:
         * every line would wait for the end of the run, then be lost. */
        int listening = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(socklen_t){ sizeof listening }) == 0 && listening)
                return brig_err(err, EINVAL, "%s %d: the descriptor is a listening socket (give a connected "
                                             "socket, a pipe's write end or %d>FILE)", what, fd, fd);
        return 0;
}

int output_fd(int fd, const char *what, brig_error **err)
{
        int r = output_fd_check(fd, what, err);
        if (r < 0)
                return r;
        /* brig's copy is close-on-exec, and the caller's number is closed
         * in the child before the command (close_range in prepare_fds) */
        int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return copy < 0 ? brig_err(err, errno, "%s %d: duplicate it", what, fd) : copy;
}

/* Write all of buf to an output the caller gave (a report, the audit
 * stream): 0, or -errno. A pipe or socket whose reader has gone answers
 * EPIPE, and raises SIGPIPE, whose default kills brig before it cleans up:
 * the signal is blocked in this thread for the write, and the one the
 * write raised is taken back, so EPIPE is an error like any other. Not
 * SIG_IGN: an ignored signal stays ignored across exec, in the command. */
void sigpipe_hold(sigset_t *saved)
{
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, saved);
}

void sigpipe_release(const sigset_t *saved)
{
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        /* the one a write raised while held (was it pending before, it goes too) */
        if (!sigismember(saved, SIGPIPE))
                while (sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0 }) == SIGPIPE)
                        ;
        pthread_sigmask(SIG_SETMASK, saved, NULL);
}

int output_write(int fd, const void *buf, size_t len)
{
        sigset_t saved;
        sigpipe_hold(&saved);
        const char *p = buf;
        int e = 0;
        while (len > 0 && !e) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        e = n < 0 ? errno : EIO;
                        break;
                }
                p += n;
                len -= (size_t)n;
        }
        sigpipe_release(&saved);
        return -e;
}

ssize_t output_write_some(int fd, const void *buf, size_t len)
{
        if (len > PIPE_BUF)
                len = PIPE_BUF;
        ssize_t n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == ENOTSOCK)
                n = write(fd, buf, len);
        return n < 0 ? -errno : n;
}

int output_write_bounded(int fd, const void *buf, size_t len, int idle_ms)
{
        sigset_t saved;
        sigpipe_hold(&saved);
        const char *p = buf;
        int e = 0;
        while (len > 0 && !e) {
                struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                int ready = poll(&pfd, 1, idle_ms);
                if (ready < 0 && errno == EINTR)
                        continue;
                if (ready <= 0) {
                        e = ready < 0 ? errno : ETIMEDOUT;
                        break;
                }
                ssize_t n = output_write_some(fd, p, len);
                if (n == -EINTR || n == -EAGAIN)
                        continue;
                if (n <= 0) {
                        e = n < 0 ? (int)-n : EIO;
                        break;
                }
                p += n;
                len -= (size_t)n;
        }
        sigpipe_release(&saved);
        return -e;
}

/* ---- removing trees ---------------------------------------------------------- */

/* A tree a sandbox made can be deeper than any recursion or descriptor
 * budget allows — mkdir -p of 50000 levels costs it nothing, its paths run
 * far past PATH_MAX — and as wide as it likes. So the walk is a loop, not
 * a recursion, and its descriptors are bounded: it keeps the directory
 * streams of the WINDOW deepest levels it is in open, and closes the one
 * above as it goes deeper. Coming back up to a level whose stream was
 * closed, it opens ".." of the level below, and checks it is the
 * directory it recorded (st_dev, st_ino) on the way down: a directory
 * moved meanwhile ends the walk with ESTALE rather than emptying whatever
 * ".." has become. (Re-opening by path from the top could not work: the
 * paths are longer than any syscall takes.) Going down, every directory is
 * opened by name below the one before with O_NOFOLLOW, so a symlink is
 * unlinked, never entered; and never below another mount (mount id, or
 * st_dev where statx has none): that is EXDEV, and the tree stays.
 *
 * Entries are unlinked as they are read; a directory is tried with rmdir
 * first and entered only when that fails. A level that entered
 * subdirectories is read once more when it ends, and the subdirectories,
 * empty by then, go with rmdir: no names are kept, the memory is 32 bytes
 * a level. Directories made unreadable or unwritable inside (chmod 000;
 * overlayfs leaves its work/work so too) get u+rwx first: rootless they
 * are the caller's, and root may. */
#define WINDOW 16

struct level {
        dev_t dev;
        ino_t ino;
        DIR *d;          /* NULL once out of the window */
        bool entered;    /* went into a subdirectory: read again at the end */
};

struct walk {
        struct level *v;
        size_t n, cap;
        uint64_t mnt;    /* the top's mount id */
        bool has_mnt;
        dev_t dev;
};

/* Who `fd` is; with `ref`, refuse it unless it is on ref's mount. */
static int dir_id(int fd, const struct walk *ref, struct walk *set, struct level *out, mode_t *mode)
{
        struct statx sx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_MODE | STATX_INO | STATX_MNT_ID,
                  &sx) < 0)
                return -errno;
        dev_t dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        bool has_mnt = sx.stx_mask & STATX_MNT_ID;
        if (set) {
                set->dev = dev;
                set->has_mnt = has_mnt;
                set->mnt = sx.stx_mnt_id;
        }
        if (ref && (dev != ref->dev || (ref->has_mnt && has_mnt && sx.stx_mnt_id != ref->mnt)))
                return -EXDEV;
        out->dev = dev;
        out->ino = sx.stx_ino;
        *mode = sx.stx_mode;
        return 0;
}

/* Open directory `name` below `dir`, never through a symlink. */
static int open_subdir(int dir, const char *name)
{
        int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == EACCES && fchmodat(dir, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
                fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Level n+1 (directory `name` in level n, or the top), opened and pushed. */
static int walk_down(struct walk *w, int dir, const char *name)
{
        if (w->n == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 64;
                struct level *v = realloc(w->v, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                w->v = v;
                w->cap = cap;
        }
        _cleanup_close_ int fd = open_subdir(dir, name);
        if (fd < 0)
                return fd;
        struct level *l = &w->v[w->n];
        *l = (struct level){ 0 };
        mode_t mode;
        int r = dir_id(fd, w, NULL, l, &mode);
        if (r < 0)
                return r;
        if ((mode & 0700) != 0700)
                (void)!fchmod(fd, (mode & 07777) | 0700);  /* else unlinking inside fails */
        l->d = fdopendir(fd);
        if (!l->d)
                return -errno;
        TAKE_FD(fd);
        if (w->n >= WINDOW && w->v[w->n - WINDOW].d) {
                closedir(w->v[w->n - WINDOW].d);
                w->v[w->n - WINDOW].d = NULL;
        }
        w->n++;
        return 0;
}

/* Back to level n-1: its stream if still open, else ".." checked. */
static int walk_up(struct walk *w)
{
        struct level *l = &w->v[w->n - 1], *up = &w->v[w->n - 2];
        int r = 0;
        if (!up->d) {
                _cleanup_close_ int fd = openat(dirfd(l->d), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0)
                        r = -errno;
                else if (st.st_dev != up->dev || st.st_ino != up->ino)
                        r = -ESTALE;  /* moved while we were below it */
                else if (!(up->d = fdopendir(fd)))
                        r = -errno;
                else
                        TAKE_FD(fd);
                up->entered = false;  /* a fresh stream reads everything anyway */
        }
        closedir(l->d);
        l->d = NULL;
        w->n--;
        return r;
}

static void walk_free(struct walk *w)
{
        for (size_t i = 0; i < w->n; i++)
                if (w->v[i].d)
                        closedir(w->v[i].d);
        free(w->v);
}

/* One step in the current level: 1 when it is done (empty). */
static int walk_step(struct walk *w)
{
        struct level *l = &w->v[w->n - 1];
        int dfd = dirfd(l->d);
        errno = 0;
        struct dirent *e = readdir(l->d);
        if (!e && errno)
                return -errno;
        if (!e) {
                if (!l->entered)
                        return 1;
                l->entered = false;
                rewinddir(l->d);
                return 0;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                return 0;
        if (unlinkat(dfd, e->d_name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (unlinkat(dfd, e->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
        l->entered = true;
        return walk_down(w, dfd, e->d_name);
}

int tree_remove_at(int parent, const char *name)
{
        if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
        /* The top must be on the mount of its parent too: a filesystem
         * mounted there is someone else's tree. */
        struct walk w = { 0 };
        struct level pl;
        mode_t mode;
        int r = dir_id(parent, NULL, &w, &pl, &mode);
        r = r ?: walk_down(&w, parent, name);
        while (r == 0 && w.n > 0) {
                r = walk_step(&w);
                if (r == 1 && w.n > 1) {
                        r = walk_up(&w);
                } else if (r == 1) {
                        closedir(w.v[0].d);  /* the top is empty */
                        w.n = 0;
                        r = 0;
                }
        }
        walk_free(&w);
        if (r == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = -errno;
        return r;
}
