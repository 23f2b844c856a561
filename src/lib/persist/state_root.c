/* state_root.c — where brig keeps its state and whether it may trust it:
 * the per-user root (XDG_RUNTIME_DIR/brig, /run/brig for root, ...), the
 * directories above it, the root itself (ours alone, 0700), a sandbox's
 * directory in it, and the root's lock. Apart from state.c because the
 * brig command's front end (src/front/brig.c), built against another C
 * library, connects to a sandbox through the same checks: this file needs
 * nothing but libc, core/error.c and core/fsutil.c. */
#define _GNU_SOURCE
#include "core/fsutil.h"
#include "persist/state_root.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

int state_fail(brig_error **err, int errnum, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        brig_err_code(err, BRIG_EXIT_SETUP, 0, "%s", msg);
        if (err && *err && (*err)->errnum == 0)
                (*err)->errnum = errnum;
        return -errnum;
}

bool state_name_valid(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        /* the warm pools' directory (pool.c), the syscall filter cache
         * (seccomp.c) and the run records (reaper.c) */
        if (n == 0 || n > 64 || strcmp(name, "pools") == 0 || strcmp(name, "cache") == 0 || strcmp(name, "runs") == 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || !strchr("_.-", c)))
                        return false;
        }
        return true;
}

/* The root must be ours alone: another user who could write it could
 * plant a socket or a symlink that brig would then trust. Checked on the
 * open directory, not on a path that could change after the check. */
static int check_private_fd(int fd, const char *path, brig_error **err)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return brig_err(err, errno, "state directory '%s'", path);
        if (st.st_uid != geteuid())
                return brig_err(err, EPERM, "state directory '%s' belongs to uid %u, not to us (uid %u)", path,
                                st.st_uid, geteuid());
        if (st.st_mode & 077)
                return brig_err(err, EPERM, "state directory '%s' is open to other users (mode %03o; want 0700)",
                                path, st.st_mode & 0777);
        return 0;
}

char *state_root_path(void)
{
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && xdg[0] == '/')
                return brig_strdup_printf("%s/brig", xdg);
        if (geteuid() == 0)
                return strdup("/run/brig");
        /* systemd's runtime directory for the user, when there is one and
         * it is ours alone (it is not world-writable like /tmp, so no one
         * can have made brig's directory in it before us). */
        char run[64];
        struct stat st;
        snprintf(run, sizeof run, "/run/user/%u", geteuid());
        if (lstat(run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 0777) == 0700)
                return brig_strdup_printf("%s/brig", run);
        return brig_strdup_printf("/tmp/brig-%u", geteuid());
}

/* Is ROOT the one XDG_RUNTIME_DIR names (state_root_path)? */
static bool from_xdg(const char *root)
{
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        size_t n = xdg ? strlen(xdg) : 0;
        return n && xdg[0] == '/' && strncmp(root, xdg, n) == 0 && strcmp(root + n, "/brig") == 0;
}

/* The directories the root's path goes through must be ours or root's,
 * and no one else's to write: another user who could rename one (root's
 * brig under `su` or `sudo -E` keeps the caller's XDG_RUNTIME_DIR, a
 * directory of theirs) could swap brig's state for another between its
 * check and its use, or put back an older one. A symlink on the way
 * counts as the directory it sits in. Asked once a process for its root. */
static int check_root_above(const char *root, brig_error **err)
{
        static char checked[PATH_MAX];
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        bool done = strcmp(checked, root) == 0;
        pthread_mutex_unlock(&lock);
        if (done)
                return 0;
        uid_t me = geteuid();
        char prefix[PATH_MAX], real[PATH_MAX], where[PATH_MAX];
        struct stat st;
        size_t len = strlen(root);
        if (len >= sizeof prefix)
                return brig_err(err, ENAMETOOLONG, "state directory '%s'", root);
        /* every prefix of the path as given, up to the root's parent: each
         * symlink is judged by the directory it sits in, the parent by all
         * the directories of its real path */
        for (size_t i = 1; i <= len; i++) {
                if (i < len && root[i] != '/')
                        continue;
                memcpy(prefix, root, i);
                prefix[i] = '\0';
                bool last = i == len;
                if (!last && (lstat(prefix, &st) < 0 || !S_ISLNK(st.st_mode)))
                        continue;
                uid_t entry = last ? me : st.st_uid;
                char *slash = strrchr(prefix, '/');
                *slash = '\0';
                /* a root named by XDG_RUNTIME_DIR in a directory that is
                 * not there (a stale or mistyped variable): say which */
                if (!realpath(prefix[0] ? prefix : "/", real)) {
                        int e = errno;
                        return brig_err(err, e, "state directory '%s'%s: the directory '%s'", root,
                                        from_xdg(root) ? " (from XDG_RUNTIME_DIR: set it to a directory of your "
                                                         "own, or unset it)"
                                                       : "",
                                        prefix);
                }
                size_t rl = strlen(real);  /* real/x: the directory itself and those above it */
                snprintf(real + rl, sizeof real - rl, "%s", rl == 1 ? "x" : "/x");
                if (!dirs_above_only(real, me, entry, where, sizeof where))
                        return state_fail(err, EPERM,
                                          "state directory '%s': %s is not yours or root's, or others may write it, "
                                          "so another user could replace brig's state: set XDG_RUNTIME_DIR to a "
                                          "directory of your own, or unset it (su and sudo -E keep the caller's)",
                                          root, where);
        }
        pthread_mutex_lock(&lock);
        snprintf(checked, sizeof checked, "%s", root);
        pthread_mutex_unlock(&lock);
        return 0;
}

int state_root_open(bool create, char **out, brig_error **err)
{
        _cleanup_free_ char *root = state_root_path();
        if (!root)
                return brig_err(err, ENOMEM, "state directory");
        int r = check_root_above(root, err);
        if (r < 0)
                return r;
        /* O_PATH: another user's root is refused by its owner, not by
         * the EACCES that reading it would give. Opened first, made only
         * when missing: every run opens it a few times, and a mkdir that
         * finds it there is a lookup of its own. */
        int fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create) {
                if (mkdir(root, 0700) < 0 && errno != EEXIST)
                        return brig_err(err, errno, "create the state directory '%s'", root);
                fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR))
                return brig_err(err, ENOTDIR, "state directory '%s' is not a directory (a symlink?)", root);
        if (fd < 0)
                return brig_err(err, errno, "state directory '%s'", root);
        r = check_private_fd(fd, root, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        if (out)
                *out = TAKE_PTR(root);
        return fd;
}

int state_root(bool create, char **out, brig_error **err)
{
        int fd = state_root_open(create, out, err);
        if (fd < 0)
                return fd;
        close(fd);
        return 0;
}

int state_dir(const char *name, bool create_root, char **out, brig_error **err)
{
        if (!state_name_valid(name))
                return state_fail(err, EINVAL, "bad sandbox name '%s': use letters, digits, '_', '.', '-' "
                                             "(at most 64, starting with a letter or digit)", name ? name : "");
        _cleanup_free_ char *root = NULL;
        int r = state_root(create_root, &root, err);
        if (r < 0)
                return r;
        *out = brig_strdup_printf("%s/%s", root, name);
        return *out ? 0 : brig_err(err, ENOMEM, "state directory");
}

int state_lock(const char *root, brig_error **err)
{
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return brig_err(err, errno, "open the state directory '%s'", root);
        /* The descriptor callers create in (mkdirat): checked itself, not
         * only the path it was opened by. */
        int r = check_private_fd(fd, root, err);
        if (r < 0) {
                close(fd);
                return r;
        }
        while (flock(fd, LOCK_EX) < 0) {
                if (errno == EINTR)
                        continue;
                int e = errno;
                close(fd);
                return brig_err(err, e, "lock the state directory '%s'", root);
        }
        return fd;
}

unsigned long long state_process_start(pid_t pid)
{
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        char *p = strrchr(buf, ')');  /* comm may hold spaces and parentheses */
        unsigned long long start = 0;
        char state;
        if (!p || sscanf(p + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                         &state, &start) != 2)
                return 0;
        return state == 'Z' || state == 'X' ? 0 : start;  /* a zombie supervises nothing */
}
