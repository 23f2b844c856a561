/* oci.c — brig oci: the runc command line that container engines drive
 * (podman's conmon, containerd's runc v2 shim), over libbrig's handle API
 * (docs/oci.md). A container is a persistent sandbox of brig's whose
 * layout is the bundle's rootfs, watched by one monitor process per
 * container: `create` starts it and returns; it holds the engine's stdio
 * (or the terminal it sent to --console-socket), waits for `start`, runs
 * the spec's process as a brig exec, forwards the signals `kill` sends it,
 * and exits with the process's status — the pid the engine was given in
 * --pid-file and waits for. Nothing of the runtime runs inside: execs are
 * started by the sandbox's own pid 1 (no /proc/self/exe of brig to
 * reopen, no descriptor of the host's but the stdio handed on). */
#define _GNU_SOURCE
#include "oci/oci.h"
#include "core/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define OCI_VERSION "1.1.0"

static const char *log_path;
static bool log_json;

/* An error: on stderr, and in --log as the engine reads it (runc's JSON
 * lines with --log-format json). */
__attribute__((format(printf, 1, 2))) static int oops(const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        va_end(ap);
        fprintf(stderr, "brig oci: %s\n", text ? text : fmt);
        if (log_path) {
                FILE *f = fopen(log_path, "ae");
                if (f) {
                        if (log_json) {
                                char when[32];
                                time_t now = time(NULL);
                                strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
                                json_t *o = json_pack("{s:s, s:s, s:s}", "level", "error", "msg",
                                                      text ? text : fmt, "time", when);
                                char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
                                if (line)
                                        fprintf(f, "%s\n", line);
                                free(line);
                                json_decref(o);
                        } else {
                                fprintf(f, "brig oci: %s\n", text ? text : fmt);
                        }
                        fclose(f);
                }
        }
        free(text);
        return BRIG_EXIT_SETUP;
}

static int brig_oops(const char *what, brig_error *e)
{
        int r = oops("%s: %s", what, e && e->msg ? e->msg : "failed");
        brig_error_free(&e);
        return r;
}

/* ---- state ------------------------------------------------------------ */

static char state_root[4096];

static int set_root(const char *root)
{
        if (root) {
                if (root[0] != '/' || strlen(root) >= sizeof state_root - 80)
                        return oops("--root '%s': expected an absolute path", root);
                snprintf(state_root, sizeof state_root, "%s", root);
        } else if (geteuid() == 0) {
                snprintf(state_root, sizeof state_root, "/run/brig-oci");
        } else if (getenv("XDG_RUNTIME_DIR") && getenv("XDG_RUNTIME_DIR")[0] == '/') {
                snprintf(state_root, sizeof state_root, "%.4000s/brig-oci", getenv("XDG_RUNTIME_DIR"));
        } else {
                snprintf(state_root, sizeof state_root, "/tmp/brig-oci-%u", (unsigned)geteuid());
        }
        /* engines name a directory of theirs that may not exist yet */
        for (char *s = state_root + 1;; s++) {
                bool end = *s == '\0';
                if (*s == '/' || end) {
                        *s = '\0';
                        if (mkdir(state_root, 0711) < 0 && errno != EEXIST)
                                return oops("--root '%s': %s", state_root, strerror(errno));
                        if (!end)
                                *s = '/';
                }
                if (end)
                        break;
        }
        /* Each container's state.json there names the sandbox a delete
         * removes and the pid a kill signals: the root must be ours alone,
         * as brig's own state root is (persist/state_root.c), and so must
         * what leads to it. Above all the default /tmp/brig-oci-UID: another
         * user who made it first would hand us containers of theirs. */
        struct stat st;
        char real[4200], where[4200];
        _cleanup_close_ int dfd = open(state_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 || fstat(dfd, &st) < 0)
                return oops("--root '%s': %s", state_root, strerror(errno == ELOOP ? ENOTDIR : errno));
        if (st.st_uid != geteuid() || (st.st_mode & 022))
                return oops("--root '%s' belongs to uid %u (mode %03o), not to us (uid %u) alone: another user "
                            "could plant containers there; remove it, or give --root a directory of your own",
                            state_root, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777), (unsigned)geteuid());
        if (!realpath(state_root, real) || strlen(real) + 3 > sizeof real)
                return oops("--root '%s': %s", state_root, strerror(errno));
        strcat(real, "/x");
        if (!dirs_above_only(real, geteuid(), geteuid(), where, sizeof where))
                return oops("--root '%s': %s is not yours or root's, or others may write it, so another user "
                            "could replace the containers' state: give --root a directory of your own",
                            state_root, where);
        char logs[4200];
        snprintf(logs, sizeof logs, "%s/logs", state_root);
        if (mkdir(logs, 0750) < 0 && errno != EEXIST)
                return oops("'%s': %s", logs, strerror(errno));
        return 0;
}

/* Container IDs as engines make them (64 hex digits, or names). */
static bool valid_id(const char *id)
{
        size_t n = strlen(id);
        if (n == 0 || n > 128 || id[0] == '.')
                return false;
        for (const char *c = id; *c; c++)
                if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9') &&
                    *c != '-' && *c != '_' && *c != '.')
                        return false;
        return true;
}

static void path_of(char *buf, size_t n, const char *id, const char *file)
{
        snprintf(buf, n, "%s/%s%s%s", state_root, id, file ? "/" : "", file ? file : "");
}

static void log_of(char *buf, size_t n, const char *id, const char *file)
{
        snprintf(buf, n, "%s/logs/%s.%s", state_root, id, file);
}

/* brig's sandbox name for container ID: the name's alphabet, 64 at most;
 * sandbox names are the user's, IDs only --root's: the root's hash too. */
static void sandbox_name(char *buf, size_t n, const char *id)
{
        uint32_t h = 2166136261u;  /* FNV-1a */
        for (const char *c = state_root; *c; c++)
                h = (h ^ (unsigned char)*c) * 16777619u;
        snprintf(buf, n, "oci-%08x-%.51s", h, id);
        for (char *c = buf; *c; c++)
                if (*c == '.')
                        *c = '_';
}

static json_t *state_load(const char *id)
{
        char path[4300];
        path_of(path, sizeof path, id, "state.json");
        return json_load_file(path, 0, NULL);
}

static int state_save(const char *id, json_t *st)
{
        char path[4300], tmp[4310];
        path_of(path, sizeof path, id, "state.json");
        snprintf(tmp, sizeof tmp, "%s.%d", path, getpid());
        if (json_dump_file(st, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0) {
                unlink(tmp);
                return -EIO;
        }
        return 0;
}

static void state_set(const char *id, json_t *st, const char *key, json_t *v)
{
        json_object_set_new(st, key, v);
        state_save(id, st);
}

/* The monitor holds an exclusive lock on ID/monitor.lock for its life:
 * alive is "the lock is taken", whatever became of its pid (reused, or a
 * zombie its engine has not reaped yet). */
static int monitor_lock(const char *id)
{
        char path[4300];
        path_of(path, sizeof path, id, "monitor.lock");
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
                close(fd);
                return -EBUSY;
        }
        return fd < 0 ? -errno : fd;
}

static bool monitor_alive(json_t *st)
{
        const char *id = json_string_value(json_object_get(st, "id"));
        char path[4300];
        if (!id)
                return false;
        path_of(path, sizeof path, id, "monitor.lock");
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return false;
        bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        close(fd);
        return held;
}

static const char *status_of(json_t *st)
{
        const char *s = json_string_value(json_object_get(st, "status"));
        if (!s)
                return "stopped";
        if (strcmp(s, "stopped") != 0 && !monitor_alive(st))
                return "stopped";
        return s;
}

static json_t *need_container(const char *id)
{
        if (!valid_id(id)) {
                oops("container id '%s': expected letters, digits, '-', '_' and '.'", id);
                return NULL;
        }
        json_t *st = state_load(id);
        if (!st)
                oops("container '%s' does not exist (in --root %s)", id, state_root);
        return st;
}

/* ---- terminal --------------------------------------------------------- */

/* A pty for the container: its master to the engine through the console
 * socket (as runc sends it: SCM_RIGHTS, the slave's name as payload), the
 * slave kept for the process's stdio. */
static int console_pty(const char *socket_path, const struct oci_process *proc, int *slave_out)
{
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
                return oops("--console-socket: a pseudo-terminal: %s", strerror(errno));
        char name[64];
        if (ptsname_r(master, name, sizeof name) != 0) {
                close(master);
                return oops("--console-socket: ptsname: %s", strerror(errno));
        }
        int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
                close(master);
                return oops("--console-socket: open %s: %s", name, strerror(errno));
        }
        /* raw: the line discipline is the pty's inside, this one only carries bytes */
        struct termios tio;
        if (tcgetattr(slave, &tio) == 0) {
                cfmakeraw(&tio);
                tcsetattr(slave, TCSANOW, &tio);
        }
        if (proc->rows && proc->cols) {
                struct winsize ws = { .ws_row = (unsigned short)proc->rows, .ws_col = (unsigned short)proc->cols };
                ioctl(slave, TIOCSWINSZ, &ws);
        }
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (strlen(socket_path) >= sizeof sa.sun_path || s < 0) {
                close(master);
                close(slave);
                if (s >= 0)
                        close(s);
                return oops("--console-socket '%s': too long a path, or no socket", socket_path);
        }
        strcpy(sa.sun_path, socket_path);
        char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
        struct iovec iov = { .iov_base = name, .iov_len = strlen(name) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &master, sizeof(int));
        int r = connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 || sendmsg(s, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
        close(s);
        close(master);
        if (r < 0) {
                close(slave);
                return oops("--console-socket '%s': %s", socket_path, strerror(-r));
        }
        *slave_out = slave;
        return 0;
}

/* ---- the monitor ------------------------------------------------------ */

static int forward_set(sigset_t *set)
{
        sigemptyset(set);
        static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
                                    SIGTSTP, SIGALRM, SIGPIPE };
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
                sigaddset(set, sigs[i]);
        for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
                sigaddset(set, s);
        return sigprocmask(SIG_BLOCK, set, NULL);
}

/* The audit stream as it stands, to the container's audit file. */
static void copy_audit(int from, int to)
{
        char buf[65536];
        ssize_t n;
        while (from >= 0 && to >= 0 && (n = read(from, buf, sizeof buf)) > 0)
                if (write(to, buf, (size_t)n) != n)
                        break;
}

/* Copy what is readable on `from` to `to` (both non-blocking is fine). */
static void pump(int from, int to)
{
        char buf[16384];
        ssize_t n;
        while ((n = read(from, buf, sizeof buf)) > 0) {
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(to, buf + off, (size_t)(n - off));
                        if (w < 0 && errno == EAGAIN) {
                                struct pollfd p = { .fd = to, .events = POLLOUT };
                                poll(&p, 1, 1000);
                                continue;
                        }
                        if (w <= 0)
                                return;
                        off += w;
                }
        }
}

/* Start a process in the sandbox with stdio (or, with tty_slave >= 0, a
 * pty of the sandbox's own relayed to the engine's terminal, so the
 * process's terminal lives in the container's devpts), forward the
 * signals that come on sig_fd, copy the audit stream (audit_in to
 * audit_out, -1: none) while it runs, and return the exit status;
 * *report (may be NULL) gets its report (free()). */
static int exec_and_wait(brig_sandbox *sb, const struct oci_process *proc, const int stdio[3], int tty_slave,
                         int sig_fd, int audit_in, int audit_out, void (*started)(void *), void *data, char **report)
{
        brig_error *e = NULL;
        brig_exec_spec spec = { .size = sizeof spec, .stdio = BRIG_STDIO_FDS, .argv = proc->argv, .env = proc->env,
                                .cwd = proc->cwd, .fds = { stdio[0], stdio[1], stdio[2] } };
        if (tty_slave >= 0) {
                struct winsize ws = { 0 };
                ioctl(tty_slave, TIOCGWINSZ, &ws);
                spec.stdio = BRIG_STDIO_PTY;
                spec.rows = ws.ws_row ? ws.ws_row : (uint16_t)proc->rows;
                spec.cols = ws.ws_col ? ws.ws_col : (uint16_t)proc->cols;
        }
        brig_exec *x = NULL;
        if (brig_exec_start(sb, &spec, &x, &e) < 0) {
                int code = e ? e->exit_code : BRIG_EXIT_SETUP;
                brig_oops("start the process", e);
                return code;
        }
        if (started)
                started(data);
        int master = tty_slave >= 0 ? brig_exec_stdio_fd(x, 0) : -1;
        if (master >= 0) {
                fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
                fcntl(tty_slave, F_SETFL, fcntl(tty_slave, F_GETFL) | O_NONBLOCK);
        }
        struct pollfd pfd[4] = { { .fd = brig_exec_fd(x), .events = POLLIN }, { .fd = sig_fd, .events = POLLIN },
                                 { .fd = master, .events = POLLIN }, { .fd = master >= 0 ? tty_slave : -1,
                                                                       .events = POLLIN } };
        for (;;) {
                copy_audit(audit_in, audit_out);
                if (poll(pfd, 4, 1000) < 0 && errno != EINTR)
                        break;
                if (pfd[2].revents & POLLIN)
                        pump(master, tty_slave);
                if (pfd[3].revents & POLLIN)
                        pump(tty_slave, master);
                if (pfd[3].revents & (POLLHUP | POLLERR))
                        pfd[3].fd = -1;  /* the engine closed its end: output is dropped from now on */
                if (pfd[0].revents)
                        break;
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        if (read(sig_fd, &si, sizeof si) != sizeof si || si.ssi_signo == SIGPIPE)
                                continue;
                        struct winsize ws;
                        /* the engine resized its terminal: the same size inside */
                        if (si.ssi_signo == SIGWINCH && master >= 0 && ioctl(tty_slave, TIOCGWINSZ, &ws) == 0)
                                brig_exec_resize(x, ws.ws_row, ws.ws_col, NULL);
                        else
                                brig_exec_kill(x, (int)si.ssi_signo, NULL);
                }
        }
        if (master >= 0)
                pump(master, tty_slave);  /* what it wrote last */
        brig_result res = { 0 };
        int r = brig_exec_wait(x, 0, &res, &e);
        int code = r < 0 ? (e ? e->exit_code : BRIG_EXIT_SETUP) : res.exit_code;
        if (r < 0)
                brig_oops("the process", e);
        if (report)
                *report = brig_exec_report_json(x, NULL);
        copy_audit(audit_in, audit_out);
        brig_exec_close(x);
        return code;
}

struct container {
        const char *id;
        json_t *st;
        brig_policy *policy;
        struct oci_process proc;
        int stdio[3];
        int tty_slave;     /* the engine's terminal (our end), or -1 */
        int start_fd;      /* the start FIFO, read end; -1 for run */
};

static void mark_running(void *data)
{
        struct container *c = data;
        for (int i = 0; i < 3; i++)
                if (c->stdio[i] > 2)
                        close(c->stdio[i]);
        state_set(c->id, c->st, "status", json_string("running"));
}

/* Run the container's process in its sandbox and wait for it; signals
 * for the container go to the process. Returns the exit status. */
static int run_process(struct container *c, brig_sandbox *sb, int sig_fd)
{
        char audit_path[4300];
        log_of(audit_path, sizeof audit_path, c->id, "audit.jsonl");
        int audit_in = brig_sandbox_audit_fd(sb, NULL);
        int audit_out = open(audit_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640);
        char *report = NULL;
        int code = exec_and_wait(sb, &c->proc, c->stdio, c->tty_slave, sig_fd, audit_in, audit_out, mark_running, c,
                                 &report);
        if (report) {
                char rp[4300];
                log_of(rp, sizeof rp, c->id, "report.json");
                int fd = open(rp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
                if (fd >= 0) {
                        if (write(fd, report, strlen(report)) < 0)
                                (void)0;
                        close(fd);
                }
                free(report);
        }
        if (audit_in >= 0)
                close(audit_in);
        if (audit_out >= 0)
                close(audit_out);
        return code;
}

/* The monitor: make the sandbox, say so on `ready` (a message there is
 * the error), wait for start, run, record. Returns its exit status. */
static int monitor(struct container *c, int ready)
{
        sigset_t set;
        forward_set(&set);
        int sig_fd = signalfd(-1, &set, SFD_CLOEXEC);
        int lock = monitor_lock(c->id);  /* held until this process ends */
        if (lock < 0) {
                if (ready >= 0)
                        dprintf(ready, "container '%s': its monitor lock: %s", c->id, strerror(-lock));
                return ready >= 0 ? BRIG_EXIT_SETUP : oops("container '%s': its monitor lock: %s", c->id,
                                                            strerror(-lock));
        }
        char name[72];
        sandbox_name(name, sizeof name, c->id);
        brig_sandbox_opts so = { .size = sizeof so, .flags = BRIG_SANDBOX_EPHEMERAL | BRIG_SANDBOX_AUDIT,
                                 .name = name };
        brig_sandbox *sb = NULL;
        brig_error *e = NULL;
        if (brig_sandbox_new(c->policy, &so, &sb, &e) < 0) {
                if (ready >= 0) {
                        dprintf(ready, "create the sandbox: %s", e && e->msg ? e->msg : "failed");
                        brig_error_free(&e);
                        return BRIG_EXIT_SETUP;
                }
                return brig_oops("create the sandbox", e);
        }
        json_object_set_new(c->st, "pid", json_integer(getpid()));
        json_object_set_new(c->st, "sandbox", json_string(name));
        state_set(c->id, c->st, "status", json_string("created"));
        if (ready >= 0)
                close(ready);  /* end of file, no message: created */
        int code = 0;
        bool start = c->start_fd < 0;
        while (!start) {
                struct pollfd pfd[2] = { { .fd = c->start_fd, .events = POLLIN }, { .fd = sig_fd, .events = POLLIN } };
                if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                        break;
                if (pfd[0].revents & POLLIN) {
                        char b;
                        start = read(c->start_fd, &b, 1) == 1;
                }
                struct signalfd_siginfo si;
                if ((pfd[1].revents & POLLIN) && read(sig_fd, &si, sizeof si) == sizeof si &&
                    si.ssi_signo != SIGWINCH && si.ssi_signo != SIGPIPE && si.ssi_signo != SIGCONT) {
                        code = 128 + (int)si.ssi_signo;  /* killed before it started */
                        break;
                }
        }
        if (start)
                code = run_process(c, sb, sig_fd);
        json_object_set_new(c->st, "exit_code", json_integer(code));
        state_set(c->id, c->st, "status", json_string("stopped"));
        brig_sandbox_close(sb, NULL);
        return code;
}

/* ---- commands ---------------------------------------------------------- */

static char *read_file(const char *path, size_t *len, size_t max)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        struct stat s;
        char *buf = NULL;
        if (fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && (size_t)s.st_size <= max && (buf = malloc((size_t)s.st_size + 1))) {
                ssize_t n = read(fd, buf, (size_t)s.st_size);
                if (n != s.st_size) {
                        free(buf);
                        buf = NULL;
                        errno = EIO;
                } else {
                        buf[n] = '\0';
                        *len = (size_t)n;
                }
        } else if (errno == 0 || buf == NULL) {
                errno = S_ISREG(s.st_mode) ? EFBIG : EINVAL;
        }
        close(fd);
        return buf;
}

static void notice(const char *line, void *data)
{
        (void)data;
        fprintf(stderr, "brig oci: %s\n", line);
}

/* The operator's policy: /etc/brig/oci-policy.json, or the file
 * $BRIG_OCI_POLICY names (the engine's environment is the operator's; a
 * container's config cannot set it). */
static const char *operator_policy(void)
{
        const char *env = getenv("BRIG_OCI_POLICY");
        return env && *env ? env : OCI_OPERATOR_POLICY;
}

static const char *const limit_what[OCI_N_LIMITS] = { "memory", "pids", "cpu" };

static void limit_text(char *buf, size_t n, int i, uint64_t v)
{
        if (v == 0)
                snprintf(buf, n, "none");
        else if (i == 2)
                snprintf(buf, n, "%llu.%03llu cores", (unsigned long long)(v / 1000), (unsigned long long)(v % 1000));
        else
                snprintf(buf, n, i == 0 ? "%llu bytes" : "%llu", (unsigned long long)v);
}

/* The memory, pids and cpu limits the operator's file sets (0: none):
 * the most any container gets, from its annotations, its config or an
 * update. */
static int operator_ceiling(uint64_t ceil[OCI_N_LIMITS])
{
        memset(ceil, 0, OCI_N_LIMITS * sizeof *ceil);
        const char *path = operator_policy();
        if (access(path, F_OK) != 0)
                return 0;
        brig_policy *p = oci_policy_without_limits();
        brig_error *e = NULL;
        if (!p || brig_policy_load_file(p, path, &e) < 0) {
                brig_policy_free(p);
                return brig_oops("the operator's policy", e);
        }
        for (int i = 0; i < OCI_N_LIMITS; i++)
                ceil[i] = brig_policy_get_limit(p, oci_limits[i]);
        brig_policy_free(p);
        return 0;
}

/* v (0: no limit) for limit i, asked for by `who`, within the ceiling. */
static int within_ceiling(const uint64_t ceil[OCI_N_LIMITS], int i, uint64_t v, const char *who)
{
        if (!ceil[i] || (v && v <= ceil[i]))
                return 0;
        char a[48], b[48];
        limit_text(a, sizeof a, i, v);
        limit_text(b, sizeof b, i, ceil[i]);
        return oops("%s: a %s limit of %s is above the operator's %s (%s): ask for less, or raise it there", who,
                    limit_what[i], a, b, operator_policy());
}

/* The policy of a container: brig's defaults, the operator's file, the
 * annotations, then the bundle (config.c). */
static int load_bundle(const char *bundle, struct container *c, json_t **annotations)
{
        char *real = realpath(bundle, NULL);
        if (!real)
                return oops("--bundle '%s': %s", bundle, strerror(errno));
        char cfg[4200];
        snprintf(cfg, sizeof cfg, "%.4000s/config.json", real);
        size_t len = 0;
        char *text = read_file(cfg, &len, 4 << 20);
        if (!text) {
                free(real);
                return oops("%s: %s (at most 4 MiB)", cfg, strerror(errno));
        }
        c->policy = brig_policy_new();
        brig_policy_set_notice(c->policy, notice, NULL);
        brig_error *e = NULL;
        uint64_t ceil[OCI_N_LIMITS];
        int r = operator_ceiling(ceil);
        if (r == 0 && access(operator_policy(), F_OK) == 0 &&
            brig_policy_load_file(c->policy, operator_policy(), &e) < 0)
                r = brig_oops("the operator's policy", e);
        if (r) {
                free(text);
                free(real);
                return r;
        }
        char *msg = NULL;
        r = oci_config_apply(c->policy, cfg, text, len, real, &c->proc, annotations, &msg);
        free(text);
        free(real);
        if (r < 0) {
                oops("%s", msg ? msg : "config.json: out of memory");
                free(msg);
                return BRIG_EXIT_SETUP;
        }
        /* the annotations and the spec come after the operator's file:
         * neither may loosen its limits */
        for (int i = 0; i < OCI_N_LIMITS; i++) {
                char who[4300];
                snprintf(who, sizeof who, "%.4000s: /linux/resources/%s (or %s)", cfg, limit_what[i],
                         OCI_ANNOTATION_POLICY);
                if ((r = within_ceiling(ceil, i, brig_policy_get_limit(c->policy, oci_limits[i]), who))) {
                        json_decref(*annotations);
                        *annotations = NULL;
                        return r;
                }
        }
        return 0;
}

static int write_pid_file(const char *path, pid_t pid)
{
        if (!path)
                return 0;
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%.4000s.brig-%d", path, getpid());
        FILE *f = fopen(tmp, "we");
        if (!f || fprintf(f, "%d", pid) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
                unlink(tmp);
                return oops("--pid-file '%s': %s", path, strerror(errno));
        }
        return 0;
}

struct create_opts {
        const char *bundle, *pid_file, *console_socket;
        bool detach;
};

static void remove_dir(const char *id)
{
        char p[4300];
        static const char *const files[] = { "state.json", "start", "monitor.lock", NULL };
        for (size_t i = 0; files[i]; i++) {
                path_of(p, sizeof p, id, files[i]);
                unlink(p);
        }
        path_of(p, sizeof p, id, NULL);
        rmdir(p);
}

/* create, and run (foreground: this process is the monitor). */
static int do_create(const char *id, const struct create_opts *o, bool run)
{
        if (!valid_id(id))
                return oops("container id '%s': expected letters, digits, '-', '_' and '.'", id);
        struct container c = { .id = id, .stdio = { 0, 1, 2 }, .tty_slave = -1, .start_fd = -1 };
        json_t *annotations = NULL;
        int r = load_bundle(o->bundle ? o->bundle : ".", &c, &annotations);
        if (r) {
                brig_policy_free(c.policy);
                oci_process_clear(&c.proc);
                return r;
        }
        int slave = -1;
        if (c.proc.terminal && !o->console_socket) {
                r = oops("/process/terminal is true: give --console-socket (the engine's end of the terminal)");
                goto out;
        }
        char dir[4300];
        path_of(dir, sizeof dir, id, NULL);
        if (mkdir(dir, 0700) < 0) {
                r = oops(errno == EEXIST ? "container '%s' exists already" : "container '%s': %s", id,
                         strerror(errno));
                goto out;
        }
        char *bundle = realpath(o->bundle ? o->bundle : ".", NULL);
        c.st = json_pack("{s:s, s:s, s:s, s:s, s:o}", "ociVersion", OCI_VERSION, "id", id, "status", "creating",
                         "bundle", bundle ? bundle : "", "annotations", annotations ? annotations : json_object());
        /* exec's --process must ask for the same user (do_exec) */
        if (c.st && c.proc.user)
                json_object_set_new(c.st, "user", json_string(c.proc.user));
        if (c.st && c.proc.umask)
                json_object_set_new(c.st, "umask", json_string(c.proc.umask));
        annotations = NULL;
        free(bundle);
        state_save(id, c.st);
        if (c.proc.terminal && (r = console_pty(o->console_socket, &c.proc, &slave))) {
                remove_dir(id);
                goto out;
        }
        c.tty_slave = slave;
        if (run && !o->detach) {
                json_object_set_new(c.st, "pid", json_integer(getpid()));
                write_pid_file(o->pid_file, getpid());
                r = monitor(&c, -1);
                remove_dir(id);  /* run: the container goes with its process */
                goto out;
        }
        char fifo[4300];
        path_of(fifo, sizeof fifo, id, "start");
        if (!run) {
                if (mkfifo(fifo, 0600) < 0) {
                        r = oops("start fifo: %s", strerror(errno));
                        remove_dir(id);
                        goto out;
                }
                /* O_RDWR: the monitor's own writer keeps it from reading
                 * end of file before start opens it */
                c.start_fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        }
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                r = oops("pipe: %s", strerror(errno));
                goto out;
        }
        pid_t mid = fork();
        if (mid == 0) {
                close(pipefd[0]);
                /* A grandchild, so the engine's subreaper (conmon, the
                 * shim) adopts and reaps it; its own session. */
                if (fork() != 0)
                        _exit(0);
                setsid();
                /* the engine's terminal ours: its resizes come as SIGWINCH */
                if (c.tty_slave >= 0)
                        ioctl(c.tty_slave, TIOCSCTTY, 0);
                _exit(monitor(&c, pipefd[1]) & 0xff);
        }
        close(pipefd[1]);
        if (mid > 0)
                waitpid(mid, NULL, 0);
        char msg[2048];
        ssize_t n = mid < 0 ? -1 : read(pipefd[0], msg, sizeof msg - 1);
        close(pipefd[0]);
        json_t *st = state_load(id);
        if (n != 0 || !st || !json_integer_value(json_object_get(st, "pid"))) {
                if (n > 0) {
                        msg[n] = '\0';
                        oops("%s", msg);
                } else {
                        oops("create: the monitor died before the container was ready");
                }
                remove_dir(id);
                json_decref(st);
                r = BRIG_EXIT_SETUP;
                goto out;
        }
        pid_t monitor_pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
        r = write_pid_file(o->pid_file, monitor_pid);
        json_decref(st);
        if (r) {  /* the engine cannot find it: it must not live on */
                kill(monitor_pid, SIGKILL);
                remove_dir(id);
        }
out:
        if (slave >= 0)
                close(slave);
        if (c.start_fd >= 0)
                close(c.start_fd);
        json_decref(annotations);
        json_decref(c.st);
        brig_policy_free(c.policy);
        oci_process_clear(&c.proc);
        return r;
}

static int do_start(const char *id)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        const char *s = status_of(st);
        int r = 0;
        if (strcmp(s, "created") != 0) {
                r = oops("container '%s' is %s: only a created container starts", id, s);
        } else {
                char fifo[4300];
                path_of(fifo, sizeof fifo, id, "start");
                int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (fd < 0 || write(fd, "s", 1) != 1)
                        r = oops("start '%s': %s", id, strerror(errno));
                if (fd >= 0)
                        close(fd);
                unlink(fifo);  /* once */
                /* return once the process runs (an engine's exec follows at
                 * once), or has already ended, or its monitor is gone */
                for (int i = 0; r == 0 && i < 6000; i++) {
                        json_t *now = state_load(id);
                        bool waiting = now && strcmp(status_of(now), "created") == 0;
                        json_decref(now);
                        if (!waiting)
                                break;
                        usleep(5000);
                }
        }
        json_decref(st);
        return r;
}

static int do_state(const char *id)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        json_t *out = json_pack("{s:s, s:s, s:s, s:I, s:O, s:O}", "ociVersion", OCI_VERSION, "id", id, "status",
                                status_of(st), "pid", strcmp(status_of(st), "stopped") == 0 ? (json_int_t)0
                                : json_integer_value(json_object_get(st, "pid")),
                                "bundle", json_object_get(st, "bundle"), "annotations",
                                json_object_get(st, "annotations"));
        char *text = out ? json_dumps(out, JSON_INDENT(2)) : NULL;
        if (text)
                printf("%s\n", text);
        free(text);
        json_decref(out);
        json_decref(st);
        return 0;
}

static int parse_signal(const char *s)
{
        if (!s)
                return SIGTERM;
        char *end;
        long n = strtol(s, &end, 10);
        if (*s && !*end)
                return n >= 1 && n <= 64 ? (int)n : -1;
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (int i = 1; i < 65; i++) {
                const char *abbr = sigabbrev_np(i);
                if (abbr && strcasecmp(abbr, s) == 0)
                        return i;
        }
        return -1;
}

static int do_kill(const char *id, const char *sigtext)
{
        int sig = parse_signal(sigtext);
        if (sig < 0)
                return oops("kill: unknown signal '%s'", sigtext);
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        int r = 0;
        if (!monitor_alive(st))
                r = oops("container '%s' is not running", id);
        else if (kill((pid_t)json_integer_value(json_object_get(st, "pid")), sig) < 0)
                r = oops("kill '%s': %s", id, strerror(errno));
        json_decref(st);
        return r;
}

static int do_delete(const char *id, bool force)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        const char *s = status_of(st);
        if (strcmp(s, "stopped") != 0 && strcmp(s, "created") != 0 && !force) {
                oops("container '%s' is %s: stop it first, or delete --force", id, s);
                json_decref(st);
                return BRIG_EXIT_SETUP;
        }
        if (monitor_alive(st)) {
                pid_t pid = (pid_t)json_integer_value(json_object_get(st, "pid"));
                kill(pid, SIGKILL);
                for (int i = 0; i < 500 && monitor_alive(st); i++)
                        usleep(10000);
        }
        const char *name = json_string_value(json_object_get(st, "sandbox"));
        brig_error *e = NULL;
        if (name && brig_sandbox_remove(name, &e) < 0 && e && e->errnum != ENOENT) {
                json_decref(st);
                return brig_oops("delete the sandbox", e);
        }
        brig_error_free(&e);
        remove_dir(id);
        json_decref(st);
        return 0;
}

static int do_pause(const char *id, bool pause)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        const char *name = json_string_value(json_object_get(st, "sandbox"));
        brig_error *e = NULL;
        int r = !name || !monitor_alive(st) ? oops("container '%s' is not running", id)
                : (pause ? brig_sandbox_pause(name, &e) : brig_sandbox_resume(name, &e)) < 0
                        ? brig_oops(pause ? "pause" : "resume", e) : 0;
        if (r == 0)
                state_set(id, st, "status", json_string(pause ? "paused" : "running"));
        json_decref(st);
        return r;
}

/* The host pids of a container's processes: the monitor's and those below
 * its sandbox's supervisor. */
static int do_ps(const char *id, bool as_json)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        json_t *pids = json_array();
        if (monitor_alive(st)) {
                const char *name = json_string_value(json_object_get(st, "sandbox"));
                char *list = brig_sandbox_list_json(NULL);
                json_t *all = list ? json_loads(list, 0, NULL) : NULL;
                free(list);
                json_int_t sup = 0;
                size_t i;
                json_t *sb;
                json_array_foreach(all, i, sb)
                        if (name && json_is_string(json_object_get(sb, "name")) &&
                            strcmp(json_string_value(json_object_get(sb, "name")), name) == 0)
                                sup = json_integer_value(json_object_get(sb, "supervisor_pid"));
                json_decref(all);
                /* descendants of the supervisor, found by parent pid */
                json_t *tree = json_array();
                if (sup > 0)
                        json_array_append_new(tree, json_integer(sup));
                for (size_t round = 0; round < 8; round++) {
                        DIR *d = opendir("/proc");
                        struct dirent *de;
                        while (d && (de = readdir(d))) {
                                int pid = atoi(de->d_name);
                                if (pid <= 0)
                                        continue;
                                char path[64], buf[512];
                                snprintf(path, sizeof path, "/proc/%d/stat", pid);
                                int fd = open(path, O_RDONLY | O_CLOEXEC);
                                ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
                                if (fd >= 0)
                                        close(fd);
                                if (n <= 0)
                                        continue;
                                buf[n] = '\0';
                                char *p = strrchr(buf, ')');
                                int ppid = 0;
                                if (!p || sscanf(p + 2, "%*c %d", &ppid) != 1)
                                        continue;
                                size_t k;
                                json_t *t;
                                bool parent_in = false, in = false;
                                json_array_foreach(tree, k, t) {
                                        parent_in |= json_integer_value(t) == ppid;
                                        in |= json_integer_value(t) == pid;
                                }
                                if (parent_in && !in)
                                        json_array_append_new(tree, json_integer(pid));
                        }
                        if (d)
                                closedir(d);
                }
                size_t k;
                json_t *t;
                json_array_foreach(tree, k, t)
                        if (json_integer_value(t) != sup)
                                json_array_append(pids, t);
                json_decref(tree);
        }
        if (as_json) {
                char *text = json_dumps(pids, JSON_COMPACT);
                printf("%s\n", text ? text : "[]");
                free(text);
        } else {
                printf("PID\n");
                size_t k;
                json_t *t;
                json_array_foreach(pids, k, t)
                        printf("%lld\n", (long long)json_integer_value(t));
        }
        json_decref(pids);
        json_decref(st);
        return 0;
}

struct exec_opts {
        const char *process, *pid_file, *console_socket, *cwd;
        bool detach, tty;
        char **env;
        size_t n_env;
};

/* An exec runs as the container's user: pid 1, which starts it, gave up
 * every privilege to change users before the container's process ran. */
static int same_user(const char *name, json_t *st, const struct oci_process *proc)
{
        const char *user = json_string_value(json_object_get(st, "user"));
        const char *mask = json_string_value(json_object_get(st, "umask"));
        if (proc->user && strcmp(proc->user, user ? user : "0:0") != 0)
                return oops("%s: /process/user: '%s' (uid:gid:groups) is not the container's user '%s': an exec "
                            "runs as the container's own user, which brig cannot change once the container "
                            "runs", name, proc->user, user ? user : "0:0");
        if (proc->umask && strcmp(proc->umask, mask ? mask : "") != 0)
                return oops("%s: /process/user/umask: %s is not the container's (%s): an exec runs with the "
                            "container's umask", name, proc->umask, mask ? mask : "the runtime's");
        return 0;
}

static int do_exec(const char *id, const struct exec_opts *o, char **args)
{
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        char *name = json_string_value(json_object_get(st, "sandbox")) ?
                     strdup(json_string_value(json_object_get(st, "sandbox"))) : NULL;
        struct oci_process proc = { 0 };
        int r = 0;
        if (!name || strcmp(status_of(st), "running") != 0) {
                r = oops("container '%s' is %s: exec needs a running one", id, status_of(st));
        } else if (o->process) {
                size_t len = 0;
                char *text = read_file(o->process, &len, 1 << 20);
                char *msg = NULL;
                if (!text)
                        r = oops("--process '%s': %s", o->process, strerror(errno));
                else if (oci_process_parse(o->process, text, len, &proc, &msg) < 0)
                        r = oops("%s", msg ? msg : "--process: out of memory");
                else
                        r = same_user(o->process, st, &proc);
                free(msg);
                free(text);
        } else if (!args || !args[0]) {
                r = oops("exec: give --process FILE or the command");
        } else {
                size_t n = 0;
                while (args[n])
                        n++;
                proc.argv = calloc(n + 1, sizeof *proc.argv);
                for (size_t i = 0; proc.argv && i < n; i++)
                        proc.argv[i] = strdup(args[i]);
                proc.terminal = o->tty;
                proc.cwd = o->cwd ? strdup(o->cwd) : NULL;
        }
        json_decref(st);
        if (r)
                goto out;
        int stdio[3] = { 0, 1, 2 }, slave = -1;
        if (proc.terminal) {
                if (!o->console_socket) {
                        r = oops("exec --tty: give --console-socket");
                        goto out;
                }
                if ((r = console_pty(o->console_socket, &proc, &slave)))
                        goto out;
        }
        if (o->detach) {
                pid_t child = fork();
                if (child < 0) {
                        r = oops("fork: %s", strerror(errno));
                        goto out;
                }
                if (child > 0) {
                        r = write_pid_file(o->pid_file, child);
                        goto out;
                }
                setsid();
                if (slave >= 0)
                        ioctl(slave, TIOCSCTTY, 0);
        } else if (o->pid_file && (r = write_pid_file(o->pid_file, getpid()))) {
                goto out;
        }
        sigset_t set;
        forward_set(&set);
        int sig_fd = signalfd(-1, &set, SFD_CLOEXEC);
        brig_sandbox *sb = NULL;
        brig_error *e = NULL;
        if (brig_sandbox_open(name, &sb, &e) < 0) {
                r = brig_oops("exec", e);
                goto done;
        }
        r = exec_and_wait(sb, &proc, stdio, slave, sig_fd, -1, -1, NULL, NULL, NULL);
        brig_sandbox_close(sb, NULL);
done:
        if (o->detach)
                _exit(r & 0xff);
out:
        if (slave >= 0)
                close(slave);
        free(name);
        oci_process_clear(&proc);
        return r;
}

struct update_opts {
        const char *resources, *memory, *pids, *cpu_quota, *cpu_period;
};

/* update: linux.resources from -r FILE (- for stdin, as containerd's
 * shim sends it) and runc's flags over it, within the operator's
 * ceiling, to the running sandbox's cgroup (brig_sandbox_set_limit). */
static int do_update(const char *id, const struct update_opts *o)
{
        uint64_t want[OCI_N_LIMITS] = { 0 }, ceil[OCI_N_LIMITS];
        int r = operator_ceiling(ceil);
        if (r)
                return r;
        if (o->resources) {
                bool in = strcmp(o->resources, "-") == 0;
                size_t len = 0;
                char *text = in ? NULL : read_file(o->resources, &len, 1 << 20);
                if (in) {
                        FILE *f = fdopen(dup(0), "r");
                        text = f ? calloc(1, 1 << 20) : NULL;
                        len = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
                        if (f)
                                fclose(f);
                }
                char *msg = NULL;
                if (!text)
                        return oops("--resources '%s': %s", o->resources, strerror(errno));
                r = oci_resources_parse(in ? "--resources (stdin)" : o->resources, text, len, want, &msg);
                free(text);
                if (r < 0) {
                        oops("%s", msg ? msg : "--resources: out of memory");
                        free(msg);
                        return BRIG_EXIT_SETUP;
                }
        }
        brig_error *e = NULL;
        if (o->memory && brig_parse_size(o->memory, &want[0], &e) < 0)
                return brig_oops("--memory", e);
        char *end = NULL;
        if (o->pids && ((want[1] = strtoull(o->pids, &end, 10)) == 0 || *end))
                return oops("--pids-limit '%s': expected a number above 0", o->pids);
        if (o->cpu_quota || o->cpu_period) {
                unsigned long long q = o->cpu_quota ? strtoull(o->cpu_quota, &end, 10) : 0;
                if (!o->cpu_quota || !q || *end)
                        return oops("--cpu-quota '%s': expected microseconds above 0 (with --cpu-period, "
                                    "default 100000)", o->cpu_quota ? o->cpu_quota : "");
                unsigned long long per = o->cpu_period ? strtoull(o->cpu_period, &end, 10) : 100000;
                if (per < 1000 || per > 1000000 || (o->cpu_period && *end))
                        return oops("--cpu-period '%s': expected 1000 to 1000000 microseconds", o->cpu_period);
                want[2] = q * 1000 / per ? q * 1000 / per : 1;
        }
        if (!want[0] && !want[1] && !want[2])
                return oops("update: nothing to change: give -r FILE, --memory, --pids-limit or --cpu-quota");
        static const char *const flag[OCI_N_LIMITS] = { "--memory", "--pids-limit", "--cpu-quota" };
        for (int i = 0; i < OCI_N_LIMITS; i++)
                if (want[i] && (r = within_ceiling(ceil, i, want[i], flag[i])))
                        return r;
        json_t *st = need_container(id);
        if (!st)
                return BRIG_EXIT_SETUP;
        const char *name = json_string_value(json_object_get(st, "sandbox"));
        brig_sandbox *sb = NULL;
        if (!name || !monitor_alive(st))
                r = oops("container '%s' is %s: update needs a live one", id, status_of(st));
        else if (brig_sandbox_open(name, &sb, &e) < 0)
                r = brig_oops("update", e);
        for (int i = 0; r == 0 && i < OCI_N_LIMITS; i++)
                if (want[i] && brig_sandbox_set_limit(sb, oci_limits[i], want[i], &e) < 0)
                        r = brig_oops(flag[i], e);
        if (sb)
                brig_sandbox_close(sb, NULL);
        json_decref(st);
        return r;
}

static int do_features(void)
{
        json_t *f = json_pack("{s:s, s:s, s:[], s:[s,s,s,s,s,s,s,s,s,s], s:{s:[s,s,s,s,s,s,s,s], s:[], "
                              "s:{s:b}, s:{s:b, s:[s,s,s,s]}, s:{s:b}, s:{s:b}}, s:{s:s, s:s, s:s}}",
                              "ociVersionMin", "1.0.0", "ociVersionMax", OCI_VERSION, "hooks",
                              "mountOptions", "ro", "rw", "bind", "rbind", "nosuid", "nodev", "noexec", "size",
                              "mode", "private",
                              "linux", "namespaces", "pid", "network", "mount", "ipc", "uts", "user", "cgroup", "time",
                              "capabilities", "cgroup", "v1", true, "seccomp", "enabled", true, "actions",
                              "SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_TRAP",
                              "apparmor", "enabled", false, "selinux", "enabled", false,
                              "annotations", "org.opencontainers.runtime-spec.features.brig", "1",
                              OCI_ANNOTATION_POLICY, "policy JSON or a profile name",
                              OCI_ANNOTATION_ALLOW_HOSTS, "host patterns, comma-separated");
        char *text = f ? json_dumps(f, JSON_INDENT(2)) : NULL;
        if (text)
                printf("%s\n", text);
        free(text);
        json_decref(f);
        return text ? 0 : BRIG_EXIT_SETUP;
}

static const char usage[] =
        "usage: brig oci [--root DIR] [--log FILE] [--log-format text|json] COMMAND [options] ID\n"
        "       brig-oci ... (the same, for an engine's runtime binary; docs/oci.md)\n"
        "\n"
        "The runc command line that container engines drive (podman, containerd's runc v2 shim).\n"
        "\n"
        "Commands:\n"
        "  create ID                       make the container from --bundle; its process waits for start\n"
        "  start ID                        run the created container's process\n"
        "  run ID                          create, start and wait (the container goes when it ends)\n"
        "  state ID                        the OCI state as JSON\n"
        "  kill ID [SIGNAL]                send SIGNAL (default TERM) to the container's process\n"
        "  delete ID                       remove a stopped (or created) container\n"
        "  exec ID [CMD...]                run a command in the running container, as confined\n"
        "  ps ID                           the host pids of the container's processes\n"
        "  pause ID / resume ID            freeze and thaw every process inside\n"
        "  update ID                       change the running container's memory, pids and cpu limits\n"
        "  features                        what this runtime supports, as JSON\n"
        "\n"
        "Options of the commands:\n"
        "  --bundle DIR                    (create, run) the bundle: config.json and the rootfs (default .)\n"
        "  --pid-file FILE                 (create, run, exec) write the pid the engine waits for\n"
        "  --console-socket SOCK           (create, run, exec) send the terminal's master there\n"
        "  --detach                        (run, exec) return once started\n"
        "  --no-pivot  --no-new-keyring    (create, run) accepted: brig always pivots, keyrings are refused\n"
        "  --preserve-fds N                (create, run) 0 only: no descriptor goes into a container\n"
        "  --force                         (delete) kill a running container first\n"
        "  --all                           (kill) accepted: the signal reaches the process, which brig's\n"
        "                                  init forwards it to\n"
        "  --format table|json             (ps) the list's format\n"
        "  --process FILE                  (exec) the process as config.json's \"process\" object\n"
        "  --tty                           (exec) a terminal, sent to --console-socket\n"
        "  --cwd DIR                       (exec) its working directory inside\n"
        "  --resources FILE                (update, also -r) linux.resources as JSON (- for stdin)\n"
        "  --memory SIZE                   (update) the memory limit (K, M, G)\n"
        "  --pids-limit N                  (update) the process limit\n"
        "  --cpu-quota US  --cpu-period US (update) the CPU quota per period (default 100000 us)\n"
        "\n"
        "Global options:\n"
        "  --root DIR                      state directory (default /run/brig-oci; rootless\n"
        "                                  $XDG_RUNTIME_DIR/brig-oci); audit streams and reports in DIR/logs\n"
        "  --log FILE                      errors also to FILE\n"
        "  --log-format text|json          ... as text, or as JSON lines (level, msg, time)\n"
        "  --systemd-cgroup                refused: brig makes the container's cgroup itself (use cgroupfs)\n"
        "  --debug                         accepted, ignored\n"
        "  --version                       the versions of brig and of the runtime spec\n";

int oci_main(int argc, char **argv)
{
        const char *root = NULL;
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                const char *val = NULL;
                const char *eq = strchr(a, '=');
                size_t klen = eq ? (size_t)(eq - a) : strlen(a);
#define IS(name) (klen == strlen(name) && strncmp(a, name, klen) == 0)
                bool takes = IS("--root") || IS("--log") || IS("--log-format");
                if (takes) {
                        val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                        if (!val)
                                return oops("%.*s: needs a value", (int)klen, a);
                }
                if (IS("--root"))
                        root = val;
                else if (IS("--log"))
                        log_path = val;
                else if (IS("--log-format")) {
                        if (strcmp(val, "json") && strcmp(val, "text"))
                                return oops("--log-format '%s': expected text or json", val);
                        log_json = strcmp(val, "json") == 0;
                } else if (IS("--systemd-cgroup"))
                        return oops("--systemd-cgroup: not supported — brig makes the container's cgroup itself, "
                                    "under its own; configure the engine for cgroupfs (podman --cgroup-manager "
                                    "cgroupfs, containerd SystemdCgroup = false)");
                else if (IS("--debug"))
                        ;
                else if (IS("--version") || IS("-v")) {
                        printf("brig-oci version %s\nspec: %s\n", brig_version(), OCI_VERSION);
                        return 0;
                } else if (IS("--help") || IS("-h")) {
                        fputs(usage, stdout);
                        return 0;
                } else
                        return oops("unknown global option '%s'\n%s", a, usage);
#undef IS
        }
        if (i >= argc)
                return oops("no command\n%s", usage);
        const char *cmd = argv[i];
        if (strcmp(cmd, "features") == 0)
                return do_features();
        if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
                printf("brig-oci version %s\nspec: %s\n", brig_version(), OCI_VERSION);
                return 0;
        }
        int r = set_root(root);
        if (r)
                return r;
        int cargc = argc - i;
        char **cargv = argv + i;
        static const struct option create_opts_l[] = {
                { "bundle", required_argument, NULL, 'b' }, { "pid-file", required_argument, NULL, 'p' },
                { "console-socket", required_argument, NULL, 'c' }, { "no-pivot", no_argument, NULL, 'N' },
                { "no-new-keyring", no_argument, NULL, 'K' }, { "detach", no_argument, NULL, 'd' },
                { "preserve-fds", required_argument, NULL, 'P' }, { "force", no_argument, NULL, 'f' },
                { "all", no_argument, NULL, 'a' }, { "format", required_argument, NULL, 'F' },
                { "process", required_argument, NULL, 'x' }, { "tty", no_argument, NULL, 't' },
                { "cwd", required_argument, NULL, 'w' },
                /* update */
                { "resources", required_argument, NULL, 'r' }, { "memory", required_argument, NULL, 'M' },
                { "pids-limit", required_argument, NULL, 'L' }, { "cpu-quota", required_argument, NULL, 'Q' },
                { "cpu-period", required_argument, NULL, 'E' },
                { "memory-reservation", required_argument, NULL, 'U' }, { "memory-swap", required_argument, NULL, 'U' },
                { "kernel-memory", required_argument, NULL, 'U' }, { "kernel-memory-tcp", required_argument, NULL, 'U' },
                { "cpu-shares", required_argument, NULL, 'U' }, { "cpuset-cpus", required_argument, NULL, 'U' },
                { "cpuset-mems", required_argument, NULL, 'U' }, { "blkio-weight", required_argument, NULL, 'U' },
                { "cpu-rt-period", required_argument, NULL, 'U' }, { "cpu-rt-runtime", required_argument, NULL, 'U' },
                { "l3-cache-schema", required_argument, NULL, 'U' }, { "mem-bw-schema", required_argument, NULL, 'U' },
                { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
        };
        struct create_opts co = { 0 };
        struct exec_opts eo = { 0 };
        struct update_opts uo = { 0 };
        bool force = false, json = false;
        optind = 1;
        opterr = 0;
        int c;
        int li = 0;
        while ((c = getopt_long(cargc, cargv, "+b:dtfr:", create_opts_l, &li)) != -1) {
                switch (c) {
                case 'b': co.bundle = optarg; break;
                case 'p': co.pid_file = eo.pid_file = optarg; break;
                case 'c': co.console_socket = eo.console_socket = optarg; break;
                case 'N': case 'K': case 'a': break;
                case 'd': co.detach = eo.detach = true; break;
                case 'P':
                        if (strcmp(optarg, "0") != 0)
                                return oops("--preserve-fds %s: brig passes no descriptors into a container", optarg);
                        break;
                case 'f': force = true; break;
                case 'F':
                        if (strcmp(optarg, "json") && strcmp(optarg, "table"))
                                return oops("--format '%s': expected table or json", optarg);
                        json = strcmp(optarg, "json") == 0;
                        break;
                case 'x': eo.process = optarg; break;
                case 't': eo.tty = true; break;
                case 'w': eo.cwd = optarg; break;
                case 'r': uo.resources = optarg; break;
                case 'M': uo.memory = optarg; break;
                case 'L': uo.pids = optarg; break;
                case 'Q': uo.cpu_quota = optarg; break;
                case 'E': uo.cpu_period = optarg; break;
                case 'U':
                        /* runc's other knobs: nothing of brig's stands for them */
                        return oops("%s: --%s is not supported: brig changes memory, pids and cpu quota only "
                                    "(--memory, --pids-limit, --cpu-quota, -r FILE)", cmd, create_opts_l[li].name);
                case 'h': fputs(usage, stdout); return 0;
                default:
                        return oops("%s: unknown option '%s'", cmd, cargv[optind - 1]);
                }
        }
        if (optind >= cargc)
                return oops("%s: the container id is missing", cmd);
        const char *id = cargv[optind];
        char **rest = cargv + optind + 1;
        if (strcmp(cmd, "update") != 0 && (uo.resources || uo.memory || uo.pids || uo.cpu_quota || uo.cpu_period))
                return oops("%s: -r, --memory, --pids-limit, --cpu-quota and --cpu-period are update's (the "
                            "container's limits are config.json's linux.resources)", cmd);
        if (strcmp(cmd, "create") == 0)
                return do_create(id, &co, false);
        if (strcmp(cmd, "run") == 0) {
                if (co.detach) {
                        r = do_create(id, &co, false);
                        return r ? r : do_start(id);
                }
                return do_create(id, &co, true);
        }
        if (strcmp(cmd, "start") == 0)
                return do_start(id);
        if (strcmp(cmd, "state") == 0)
                return do_state(id);
        if (strcmp(cmd, "kill") == 0)
                return do_kill(id, rest[0]);
        if (strcmp(cmd, "delete") == 0)
                return do_delete(id, force);
        if (strcmp(cmd, "exec") == 0)
                return do_exec(id, &eo, rest);
        if (strcmp(cmd, "ps") == 0)
                return do_ps(id, json);
        if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0)
                return do_pause(id, strcmp(cmd, "pause") == 0);
        if (strcmp(cmd, "update") == 0)
                return do_update(id, &uo);
        return oops("unknown command '%s'\n%s", cmd, usage);
}
