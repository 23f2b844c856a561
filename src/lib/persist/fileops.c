/* fileops.c — file operations on a persistent sandbox as the sandbox sees
 * them (brig cp, brig files, brig_sandbox_file).
 *
 * Nothing here resolves a sandbox path from the host: no /proc/PID/root,
 * no setns. An operation is an exec request with CTL_EXEC_FILEOP; pid 1
 * forks for it exactly as for a command, and the child takes all of
 * command_exec (setsid, fds, rlimits, Landlock, seccomp: the sandbox
 * user, its namespaces and cgroup) and only then, instead of execve, runs
 * fileop_main below. Whatever a path or a symlink planted inside points
 * at, it is resolved in the sandbox's own mount namespace with the
 * sandbox's own rights: brig can touch nothing the sandbox could not.
 * The data goes over the stdio the control socket passes (stdin in,
 * stdout out); a failure goes back as the exec's failure, with the errno
 * the sandbox got (ENOENT, EISDIR, ELOOP ...).
 *
 * tar-out and tar-in run the sandbox's own tar, confined the same way:
 * it reads and writes only what the sandbox could. Its output is data the
 * sandbox made; unpacking it on the host is the caller's business and must
 * treat it as untrusted (brig does not). */
#define _GNU_SOURCE
#include "controls/rlimit.h"
#include "core/sync.h"
#include "persist/control.h"
#include "persist/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#define FILEOP_DEFAULT_MAX (64ull << 20)   /* read and write, unless max_bytes says otherwise */
#define FILEOP_DEFAULT_TAR_MAX (1ull << 30) /* a tar stream, in or out */
#define FILEOP_DEFAULT_TIMEOUT_MS 60000
#define FILEOP_MAX_ENTRIES 100000           /* list */
#define FILEOP_ERR_TEXT 512                 /* of tar's stderr, in the error */

static const char *const op_names[] = {
        [BRIG_FILE_READ] = "read",       [BRIG_FILE_WRITE] = "write",   [BRIG_FILE_LIST] = "list",
        [BRIG_FILE_STAT] = "stat",       [BRIG_FILE_MKDIR] = "mkdir",   [BRIG_FILE_REMOVE] = "remove",
        [BRIG_FILE_TAR_OUT] = "tar-out", [BRIG_FILE_TAR_IN] = "tar-in",
};

static int op_from_name(const char *s)
{
        for (size_t i = 1; i < ARRAY_SIZE(op_names); i++)
                if (strcmp(s, op_names[i]) == 0)
                        return (int)i;
        return -1;
}

/* A path as an operation takes it: absolute, of a sane length, and no
 * byte below 0x20 or 0x7f (a name that would act on a terminal when said
 * back, or split a line of a log). Returns a reason, or NULL. */
static const char *path_problem(const char *path)
{
        if (!path || path[0] != '/')
                return "give an absolute path inside the sandbox";
        size_t n = strnlen(path, PATH_MAX);
        if (n >= PATH_MAX)
                return "the path is too long";
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
                        return "the path contains a control character";
        return NULL;
}

/* ---- inside: the forked child of pid 1, confined --------------------- */

__attribute__((format(printf, 3, 4))) static _Noreturn void op_fail(const struct run_plan *plan, int errnum,
                                                                   const char *fmt, ...)
{
        brig_error *err = NULL;
        char what[600];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        /* exit 1: the operation failed as the sandbox saw it, not brig */
        brig_err_code(&err, 1, errnum, "%s", what);
        sync_send_error(plan->sync_fd, SYNC_EXEC_FAILED, err);
        _exit(1);
}

static int write_all(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Copy from `in` to `out`, at most max bytes: -EFBIG past that. */
static int copy_bounded(int in, int out, uint64_t max)
{
        static char buf[65536];
        uint64_t total = 0;
        for (;;) {
                ssize_t n = read(in, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                total += (uint64_t)n;
                if (total > max)
                        return -EFBIG;
                int r = write_all(out, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

static void op_read(const struct run_plan *plan, const char *path, uint64_t max)
{
        /* O_PATH first: opening a FIFO, a device or a socket could block or
         * act; only a regular file is opened for reading, through the very
         * inode just checked (its /proc/self/fd link, no second lookup). */
        _cleanup_close_ int pfd = open(path, O_PATH | O_CLOEXEC);
        struct stat st;
        if (pfd < 0)
                op_fail(plan, errno, "read '%s'", path);
        if (fstat(pfd, &st) < 0)
                op_fail(plan, errno, "read '%s': stat", path);
        if (S_ISDIR(st.st_mode))
                op_fail(plan, EISDIR, "read '%s': a directory (list it, or tar-out)", path);
        if (!S_ISREG(st.st_mode))
                op_fail(plan, EINVAL, "read '%s': not a regular file (a FIFO, socket or device is never opened)",
                        path);
        if ((uint64_t)st.st_size > max)
                op_fail(plan, EFBIG, "read '%s': %" PRIu64 " bytes, more than the cap of %" PRIu64
                        " (raise it with --max-size)", path, (uint64_t)st.st_size, max);
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
        _cleanup_close_ int fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                op_fail(plan, errno, "read '%s'", path);
        int r = copy_bounded(fd, 1, max);
        if (r < 0)
                op_fail(plan, -r, r == -EFBIG ? "read '%s': grew past the cap of %" PRIu64 " bytes while read "
                                                "(raise it with --max-size)"
                                              : "read '%s'",
                        path, max);
}

/* The directory part and the last name of path, in dir (PATH_MAX). */
static void split_path(const struct run_plan *plan, const char *op, const char *path, char *dir, const char **base)
{
        snprintf(dir, PATH_MAX, "%s", path);
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
                dir[--n] = '\0';
        char *slash = strrchr(dir, '/');
        *base = path + (slash - dir) + 1;
        if (!**base || strcmp(*base, ".") == 0 || strcmp(*base, "..") == 0 || strchr(*base, '/'))
                op_fail(plan, EINVAL, "%s '%s': name a file, not a directory ('.', '..' or a trailing '/')", op,
                        path);
        slash[slash == dir ? 1 : 0] = '\0';
}

static void op_write(const struct run_plan *plan, const char *path, uint64_t max, mode_t mode)
{
        char dir[PATH_MAX];
        const char *base;
        split_path(plan, "write", path, dir, &base);
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                op_fail(plan, errno, "write '%s': its directory '%s'", path, dir);
        /* A temporary file made new beside it (nothing planted at the name
         * is followed or written to), then renamed over the name: a reader
         * sees the old file or the whole new one; a link at the name is
         * replaced, never written through. */
        char tmp[NAME_MAX + 1];
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(tmp, sizeof tmp, ".brig-write.%d.%ld", (int)getpid(), ts.tv_nsec);
        _cleanup_close_ int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd < 0)
                op_fail(plan, errno, "write '%s': a temporary file in '%s'", path, dir);
        int r = copy_bounded(0, fd, max);
        if (r == 0 && fchmod(fd, mode) < 0)  /* not the umask's */
                r = -errno;
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, base) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dfd, tmp, 0);
                op_fail(plan, -r, r == -EFBIG ? "write '%s': more than the cap of %" PRIu64 " bytes (raise it "
                                                "with --max-size); nothing written"
                                              : "write '%s'; nothing written",
                        path, max);
        }
}

static const char *type_name(mode_t m)
{
        return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : S_ISFIFO(m) ? "fifo"
               : S_ISSOCK(m) ? "socket" : S_ISCHR(m) ? "char" : S_ISBLK(m) ? "block" : "other";
}

/* A name as JSON: the string when it is UTF-8, else null and its bytes in hex. */
static void set_name(json_t *o, const char *key, const char *name)
{
        json_t *s = json_string(name);
        if (s) {
                json_object_set_new(o, key, s);
                return;
        }
        size_t n = strlen(name);
        char *hex = malloc(2 * n + 1);
        for (size_t i = 0; hex && i < n; i++)
                snprintf(hex + 2 * i, 3, "%02x", (unsigned char)name[i]);
        json_object_set_new(o, key, json_null());
        char hkey[64];
        snprintf(hkey, sizeof hkey, "%s_hex", key);
        json_object_set_new(o, hkey, hex ? json_string(hex) : json_null());
        free(hex);
}

static json_t *stat_json(int dfd, const char *name, const struct stat *st)
{
        json_t *o = json_object();
        json_object_set_new(o, "type", json_string(type_name(st->st_mode)));
        json_object_set_new(o, "size", json_integer((json_int_t)st->st_size));
        json_object_set_new(o, "mode", json_integer(st->st_mode & 07777));
        json_object_set_new(o, "uid", json_integer(st->st_uid));
        json_object_set_new(o, "gid", json_integer(st->st_gid));
        json_object_set_new(o, "mtime", json_integer((json_int_t)st->st_mtim.tv_sec));
        if (S_ISLNK(st->st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
                if (n >= 0) {
                        target[n] = '\0';
                        set_name(o, "target", target);
                }
        }
        return o;
}

static void put_json(const struct run_plan *plan, const char *op, const char *path, json_t *doc)
{
        char *text = json_dumps(doc, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_SORT_KEYS);
        json_decref(doc);
        if (!text)
                op_fail(plan, ENOMEM, "%s '%s'", op, path);
        size_t n = strlen(text);
        text[n] = '\n';
        int r = write_all(1, text, n + 1);
        free(text);
        if (r < 0)
                op_fail(plan, -r, "%s '%s': write the answer", op, path);
}

static void op_stat(const struct run_plan *plan, const char *path)
{
        struct stat st;
        if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
                op_fail(plan, errno, "stat '%s'", path);
        json_t *o = stat_json(AT_FDCWD, path, &st);
        set_name(o, "path", path);
        put_json(plan, "stat", path, o);
}

static void op_list(const struct run_plan *plan, const char *path)
{
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                op_fail(plan, errno, "list '%s'", path);
        DIR *d = fdopendir(fd);
        if (!d)
                op_fail(plan, errno, "list '%s'", path);
        json_t *arr = json_array();
        struct dirent *e;
        size_t n = 0;
        while ((errno = 0, e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                if (++n > FILEOP_MAX_ENTRIES)
                        op_fail(plan, E2BIG, "list '%s': more than %d entries", path, FILEOP_MAX_ENTRIES);
                struct stat st;
                if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;  /* gone meanwhile */
                json_t *o = stat_json(dirfd(d), e->d_name, &st);
                set_name(o, "name", e->d_name);
                json_array_append_new(arr, o);
        }
        if (errno)
                op_fail(plan, errno, "list '%s'", path);
        closedir(d);
        put_json(plan, "list", path, arr);
}

/* tar-out and tar-in: the sandbox's tar, on a pipe of ours. The stream
 * passes through this process, which counts it: past `max` bytes tar is
 * killed and the operation fails, naming the cap (EFBIG). This process is
 * brig's code, confined like tar but never executed anew: it stays
 * non-dumpable (command_exec), so nothing the sandbox runs can ptrace it
 * or reach its descriptors to write past the count; tar (dumpable again
 * after its execve) holds only its end of the pipe. */
static _Noreturn void op_tar(const struct run_plan *plan, bool out, const char *path, uint64_t max)
{
        const char *op = out ? "tar-out" : "tar-in";
        /* The directory is checked here so its error is the sandbox's own
         * errno, not a line of tar's. */
        _cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                op_fail(plan, errno, "%s '%s'", op, path);
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                op_fail(plan, errno, "%s '%s': pipe", op, path);
        pid_t pid = fork();
        if (pid < 0)
                op_fail(plan, errno, "%s '%s': fork", op, path);
        if (pid == 0) {
                if (dup2(out ? p[1] : p[0], out ? 1 : 0) < 0)
                        op_fail(plan, errno, "%s '%s': the pipe", op, path);
                char dir[PATH_MAX + 16];
                snprintf(dir, sizeof dir, "--directory=%s", path);
                char *create[] = { "tar", "--create", "--file=-", dir, ".", NULL };
                char *extract[] = { "tar", "--extract", "--file=-", dir, "--no-same-owner", "--no-same-permissions",
                                    NULL };
                /* tar gets --memory itself, not what this fork of pid 1 was
                 * allowed above its inherited mappings (rlimit.c). */
                brig_error *lerr = NULL;
                if (rlimits_lower_memory_fallback(plan, &lerr) < 0)
                        op_fail(plan, lerr->errnum, "%s '%s': %s", op, path, lerr->msg);
                environ = plan->envp;
                execvp("tar", out ? create : extract);
                op_fail(plan, errno, "%s '%s': the sandbox has no runnable tar", op, path);
        }
        close(out ? p[1] : p[0]);
        int r = out ? copy_bounded(p[0], 1, max) : copy_bounded(0, p[1], max);
        close(out ? p[0] : p[1]);  /* tar-in: its end of file */
        if (r == -EFBIG)
                kill(pid, SIGKILL);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == -EFBIG)
                op_fail(plan, EFBIG, "%s '%s': the tar stream passed the cap of %" PRIu64 " bytes and was cut off "
                        "(raise it with --max-size)%s", op, path, max,
                        out ? "" : "; what tar unpacked before stays");
        /* tar's own end is the operation's: its status and what it said */
        if (WIFSIGNALED(status)) {
                signal(WTERMSIG(status), SIG_DFL);
                raise(WTERMSIG(status));
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
                _exit(WEXITSTATUS(status));
        /* tar ended well but the other side failed (tar-in: it stopped
         * reading early, EPIPE; tar-out: the reader went away) */
        if (r < 0)
                op_fail(plan, -r, "%s '%s': the stream", op, path);
        _exit(0);
}

_Noreturn void fileop_main(const struct run_plan *plan)
{
        char *const *a = plan->argv + 1;  /* argv[0] is "" (control_msg.c) */
        int op = a[0] ? op_from_name(a[0]) : -1;
        if (op < 0 || !a[1] || !a[2] || !a[3] || a[4])
                op_fail(plan, EBADMSG, "file operation: malformed request");
        const char *path = a[1], *why = path_problem(path);
        if (why)
                op_fail(plan, EINVAL, "%s: %s", a[0], why);
        uint64_t max = strtoull(a[2], NULL, 10);
        mode_t mode = (mode_t)strtoul(a[3], NULL, 8) & 07777;
        /* Only stdio and the sync socket: the child did not execve, so the
         * descriptors marked close-on-exec by command_exec are still here. */
        if (plan->sync_fd > 3)
                syscall(SYS_close_range, 3, plan->sync_fd - 1, 0);
        syscall(SYS_close_range, plan->sync_fd + 1, ~0U, 0);
        switch (op) {
        case BRIG_FILE_READ:
                op_read(plan, path, max);
                break;
        case BRIG_FILE_WRITE:
                op_write(plan, path, max, mode);
                break;
        case BRIG_FILE_LIST:
                op_list(plan, path);
                break;
        case BRIG_FILE_STAT:
                op_stat(plan, path);
                break;
        case BRIG_FILE_MKDIR:
                if (mkdir(path, mode) < 0)
                        op_fail(plan, errno, "mkdir '%s'", path);
                break;
        case BRIG_FILE_REMOVE:
                /* unlink follows no link; a directory goes only when empty */
                if (unlinkat(AT_FDCWD, path, 0) < 0 &&
                    (errno != EISDIR || unlinkat(AT_FDCWD, path, AT_REMOVEDIR) < 0))
                        op_fail(plan, errno, "remove '%s'", path);
                break;
        case BRIG_FILE_TAR_OUT:
        case BRIG_FILE_TAR_IN:
                op_tar(plan, op == BRIG_FILE_TAR_OUT, path, max);
        }
        _exit(0);
}

/* ---- the client ------------------------------------------------------- */

static bool reads_from_fd(uint32_t op)
{
        return op == BRIG_FILE_WRITE || op == BRIG_FILE_TAR_IN;
}

static bool writes_to_fd(uint32_t op)
{
        return op == BRIG_FILE_READ || op == BRIG_FILE_TAR_OUT || op == BRIG_FILE_LIST || op == BRIG_FILE_STAT;
}

const char *fileop_name(uint32_t op)
{
        return op > 0 && op < ARRAY_SIZE(op_names) ? op_names[op] : NULL;
}

int fileop_check(const brig_file_spec *s, brig_error **err)
{
        const char *op = fileop_name(s->op);
        if (!op)
                return brig_err(err, EINVAL, "file operation %u: not one brig knows", s->op);
        const char *why = path_problem(s->path);
        if (why)
                return brig_err(err, EINVAL, "%s '%s': %s", op, s->path ? s->path : "(null)", why);
        if (s->mode & ~07777u)
                return brig_err(err, EINVAL, "%s: mode %o has more than permission bits (--mode)", op, s->mode);
        int fl = s->fd >= 0 ? fcntl(s->fd, F_GETFL) : -1;
        int acc = fl & O_ACCMODE;
        if (reads_from_fd(s->op) && (fl < 0 || (fl & O_PATH) || acc == O_WRONLY))
                return brig_err(err, EBADF, "%s: the descriptor to read the data from is not open for reading", op);
        if (writes_to_fd(s->op) && (fl < 0 || (fl & O_PATH) || acc == O_RDONLY))
                return brig_err(err, EBADF, "%s: the descriptor for the answer is not open for writing", op);
        return 0;
}

/* What tar said on its stderr (a memfd), for the error; "" when nothing. */
static void read_back(int fd, char *buf, size_t cap)
{
        buf[0] = '\0';
        ssize_t n = pread(fd, buf, cap - 1, 0);
        if (n <= 0)
                return;
        buf[n] = '\0';
        for (ssize_t i = n - 1; i >= 0 && (buf[i] == '\n' || buf[i] == ' '); i--)
                buf[i] = '\0';
}

int fileop_prepare(const brig_file_spec *s, struct fileop_call *c, brig_error **err)
{
        memset(c, 0, sizeof *c);
        c->null = c->errfd = -1;
        int r = fileop_check(s, err);
        if (r < 0)
                return r;
        const char *op = fileop_name(s->op);
        c->null = open("/dev/null", O_RDWR | O_CLOEXEC);
        c->errfd = memfd_create("brig-fileop-stderr", MFD_CLOEXEC);
        if (c->null < 0 || c->errfd < 0) {
                r = brig_err(err, errno, "%s: descriptors", op);
                fileop_call_free(c);
                return r;
        }
        c->stdio[0] = reads_from_fd(s->op) ? s->fd : c->null;
        c->stdio[1] = writes_to_fd(s->op) ? s->fd : c->null;
        c->stdio[2] = c->errfd;
        bool tar = s->op == BRIG_FILE_TAR_OUT || s->op == BRIG_FILE_TAR_IN;
        snprintf(c->max, sizeof c->max, "%" PRIu64,
                 (uint64_t)(s->max_bytes ? s->max_bytes : tar ? FILEOP_DEFAULT_TAR_MAX : FILEOP_DEFAULT_MAX));
        snprintf(c->mode, sizeof c->mode, "%o", s->mode ? s->mode : s->op == BRIG_FILE_MKDIR ? 0755u : 0644u);
        c->argv[0] = "";
        c->argv[1] = (char *)op;
        c->argv[2] = (char *)s->path;
        c->argv[3] = c->max;
        c->argv[4] = c->mode;
        c->argv[5] = NULL;
        c->opts = (brig_exec_opts){ .argv = c->argv, .tty = BRIG_TTY_NEVER,
                                    .timeout_ms = s->timeout_ms ? s->timeout_ms : FILEOP_DEFAULT_TIMEOUT_MS };
        return 0;
}

void fileop_call_free(struct fileop_call *c)
{
        closep(&c->null);
        closep(&c->errfd);
}

/* The supervisor's refusals name their sandbox already ("sandbox 'X' is
 * a member of a warm pool: ..."): said once is enough. */
static bool names_sandbox(brig_error **err, const char *name)
{
        char said[128];
        snprintf(said, sizeof said, "sandbox '%s'", name);
        return err && *err && (*err)->msg && strncmp((*err)->msg, said, strlen(said)) == 0;
}

int fileop_outcome(const char *name, uint32_t op_num, const char *path, uint64_t timeout_ms, int errfd, int r,
                   const brig_result *res, brig_error **err)
{
        const char *op = fileop_name(op_num);
        if (r == -EBADMSG)
                brig_err_prefix(err, "sandbox '%s' (started by an older brig? brig stop %s && brig start %s)", name,
                                name, name);
        else if (r < 0 && !names_sandbox(err, name))
                brig_err_prefix(err, "sandbox '%s'", name);
        if (r < 0)
                return r;
        if (res->exit_code == 0)
                return 0;
        char said[FILEOP_ERR_TEXT];
        read_back(errfd, said, sizeof said);
        if (res->reason == BRIG_REASON_TIMEOUT)
                return brig_err_code(err, 1, ETIMEDOUT, "sandbox '%s': %s '%s': not done in %" PRIu64
                                     " ms (raise it with --timeout)", name, op, path,
                                     timeout_ms ? timeout_ms : (uint64_t)FILEOP_DEFAULT_TIMEOUT_MS);
        return brig_err_code(err, 1, EIO, "sandbox '%s': %s '%s': tar %s %d%s%s", name, op, path,
                             res->signal ? "was killed by signal" : "exited", res->signal ? res->signal : res->exit_code,
                             said[0] ? ": " : "", said);
}
