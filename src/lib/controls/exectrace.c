/* exectrace.c — exec events: every execve(2) and execveat(2) the policy
 * lets run stops in the kernel for the supervisor (the filter notifies
 * them when the run has an audit stream, seccomp.c), which reads what the
 * call names, records it and answers "continue"; then it watches the
 * process through a pidfd and records its exit status and how long the
 * program ran.
 *
 * The kernel makes the notification: no process inside can skip it (the
 * filter cannot be removed, and a new one only adds), and nothing it
 * writes (stdout, files, a line shaped like an event) reaches the stream,
 * which only the supervisor writes.
 *
 * "Continue" is safe here because nothing is decided: seccomp_unotify(2)
 * warns that after the supervisor's look another thread of the target may
 * rewrite the memory the call's pointers name, so the kernel may exec
 * other bytes than the supervisor read. For a judgement that would be a
 * hole (the unix socket guard never continues, unixguard.c); for a record
 * it means the argv is what the process showed at the time of the call —
 * docs/audit.md says so. A process that does this has a second thread
 * racing its own exec: the event still shows that an exec happened, when,
 * in which process, and what it claimed; `file` (what a /proc/self/exe or
 * a descriptor named) and the exit that follows are the kernel's. */
#define _GNU_SOURCE
#include "controls/exectrace.h"
#include "core/audit.h"

#include <fcntl.h>
#include <jansson.h>
#include <linux/seccomp.h>
#include "controls/scmp.h"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What an event copies of argv: past it, argv_truncated. */
#define ARGV_MAX_ARGS 256
#define ARGV_MAX_BYTES 8192
#define PATH_MAX_BYTES 4096
/* Processes watched for their exit at once; more exec without one. */
#define TRACKED_MAX 4096

/* Linux 6.15: a pidfd tells how its process ended, also once it is reaped
 * (PIDFD_GET_INFO with PIDFD_INFO_EXIT); Debian 12's headers lack it. */
struct brig_pidfd_info {
        uint64_t mask;
        uint64_t cgroupid;
        uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
        int32_t exit_code;
        uint32_t coredump_mask;
        uint32_t spare1;
};
#define BRIG_PIDFD_INFO_EXIT (1ULL << 3)
#define BRIG_PIDFD_GET_INFO _IOWR(0xFF, 11, struct brig_pidfd_info)

struct tracked {
        int pidfd;          /* -1: free */
        pid_t host_pid;
        long pid;           /* inside */
        uint64_t since_ms;  /* the last exec */
        char *path;         /* what it executed last */
};

struct exectrace {
        struct audit *audit;
        int epfd;               /* the guard's: pidfds wait there beside the listeners */
        struct tracked *t;      /* indexed by pidfd */
        size_t n;
        size_t tracked;
        uint64_t untracked;     /* execs whose exit could not be watched */
};

struct exectrace *exectrace_new(struct audit *audit, int epfd)
{
        struct exectrace *x = calloc(1, sizeof *x);
        if (x) {
                x->audit = audit;
                x->epfd = epfd;
        }
        return x;
}

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A string of the target's, up to max bytes: 1 read, 0 cut at max (still
 * terminated), -1 unreadable. Read a page at a time: a string may end just
 * before an unmapped page. */
static int read_string(pid_t pid, uint64_t addr, char *buf, size_t max)
{
        size_t got = 0;
        while (got + 1 < max) {
                size_t page = 4096 - ((addr + got) & 4095), want = max - 1 - got;
                if (want > page)
                        want = page;
                struct iovec local = { buf + got, want }, remote = { (void *)(uintptr_t)(addr + got), want };
                ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
                if (n <= 0) {
                        buf[got] = '\0';
                        return got ? 1 : -1;
                }
                char *nul = memchr(buf + got, '\0', (size_t)n);
                if (nul)
                        return 1;
                got += (size_t)n;
        }
        buf[max - 1] = '\0';
        return 0;
}

/* argv as the target's memory holds it now (the TOCTOU above). */
static json_t *read_argv(pid_t pid, uint64_t addr, bool *truncated)
{
        json_t *argv = json_array();
        size_t bytes = 0;
        char *buf = malloc(ARGV_MAX_BYTES);
        for (unsigned i = 0; buf && addr; i++) {
                uint64_t p = 0;
                struct iovec local = { &p, sizeof p }, remote = { (void *)(uintptr_t)(addr + i * sizeof p), sizeof p };
                if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof p || !p)
                        break;
                if (i == ARGV_MAX_ARGS || bytes >= ARGV_MAX_BYTES) {
                        *truncated = true;
                        break;
                }
                int r = read_string(pid, p, buf, ARGV_MAX_BYTES - bytes);
                if (r < 0)
                        break;
                bytes += strlen(buf) + 1;
                /* the bytes are the process's: not UTF-8, JSON cannot hold them */
                json_t *s = json_string(buf);
                json_array_append_new(argv, s ? s : json_stringn("\xef\xbf\xbd", 3));
                if (r == 0) {
                        *truncated = true;
                        break;
                }
        }
        free(buf);
        return argv;
}

static json_t *text(const char *s)
{
        json_t *j = s ? json_string(s) : NULL;
        return j ? j : s ? json_string("\xef\xbf\xbd") : json_null();
}

/* What a magic link of the target names: /proc/TID/LINK read from here. */
static json_t *link_of(pid_t tid, const char *link)
{
        char path[96], target[PATH_MAX_BYTES];
        snprintf(path, sizeof path, "/proc/%d/%s", tid, link);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n < 0)
                return json_null();
        target[n] = '\0';
        return text(target);
}

/* The file a path or descriptor of the call names when the path itself
 * says nothing: execveat(fd, "", AT_EMPTY_PATH) (fexecve, a memfd) and
 * /proc/self/exe, /proc/self/fd/N. Read before the exec, from the
 * kernel's links: the program as the kernel knows it, not as argv says. */
static json_t *named_file(pid_t tid, int nr, const uint64_t *a, const char *path)
{
        char link[64];
        if (nr == __NR_execveat && !path[0]) {
                snprintf(link, sizeof link, "fd/%d", (int)a[0]);
                return link_of(tid, link);
        }
        const char *rest = NULL;
        if (strncmp(path, "/proc/self/", 11) == 0)
                rest = path + 11;
        else if (strncmp(path, "/proc/thread-self/", 18) == 0)
                rest = path + 18;
        if (rest && (strcmp(rest, "exe") == 0 || (strncmp(rest, "fd/", 3) == 0 && strlen(rest) < 16)))
                return link_of(tid, rest);
        return json_null();
}

static void untrack(struct exectrace *x, struct tracked *t)
{
        epoll_ctl(x->epfd, EPOLL_CTL_DEL, t->pidfd, NULL);
        close(t->pidfd);
        free(t->path);
        *t = (struct tracked){ .pidfd = -1 };
        x->tracked--;
}

static struct tracked *find(struct exectrace *x, pid_t host_pid)
{
        for (size_t i = 0; i < x->n; i++)
                if (x->t[i].pidfd >= 0 && x->t[i].host_pid == host_pid)
                        return &x->t[i];
        return NULL;
}

/* Watch host_pid for its exit; NULL when it cannot be (counted). */
static struct tracked *track(struct exectrace *x, pid_t host_pid)
{
        struct tracked *t = find(x, host_pid);
        if (t)
                return t;  /* exec again: the same process, a new program */
        int fd = x->tracked < TRACKED_MAX ? (int)syscall(SYS_pidfd_open, host_pid, 0) : -1;
        if (fd < 0)
                return NULL;
        if ((size_t)fd >= x->n) {
                size_t n = (size_t)fd + 64;
                struct tracked *grown = realloc(x->t, n * sizeof *grown);
                if (!grown) {
                        close(fd);
                        return NULL;
                }
                for (size_t i = x->n; i < n; i++)
                        grown[i] = (struct tracked){ .pidfd = -1 };
                x->t = grown;
                x->n = n;
        }
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
        if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                close(fd);
                return NULL;
        }
        x->tracked++;
        x->t[fd] = (struct tracked){ .pidfd = fd, .host_pid = host_pid };
        return &x->t[fd];
}

void exectrace_seen(struct exectrace *x, int listener, const struct seccomp_notif *req)
{
        const uint64_t *a = (const uint64_t *)req->data.args;
        int nr = req->data.nr;
        pid_t tid = (pid_t)req->pid;
        char *path = malloc(PATH_MAX_BYTES);
        bool truncated = false;
        int pr = path ? read_string(tid, nr == __NR_execveat ? a[1] : a[0], path, PATH_MAX_BYTES) : -1;
        if (path && pr < 0)
                path[0] = '\0';
        json_t *argv = read_argv(tid, nr == __NR_execveat ? a[2] : a[1], &truncated);
        json_t *file = path ? named_file(tid, nr, a, path) : json_null();
        json_t *cwd = link_of(tid, "cwd");
        /* the reads were of the process that called only if the call is
         * still waiting now (its pid cannot have been reused meanwhile) */
        if (!path || seccomp_notify_id_valid(listener, req->id) < 0) {
                json_decref(argv);
                json_decref(file);
                json_decref(cwd);
                free(path);
                return;
        }
        json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:o}", "call", nr == __NR_execveat ? "execveat" : "execve",
                              "path", pr < 0 ? json_null() : text(path), "argv", argv, "file", file, "cwd", cwd);
        if (truncated)
                json_object_set_new(o, "argv_truncated", json_true());
        if (nr == __NR_execveat)
                json_object_set_new(o, "flags", json_integer((json_int_t)(int)a[4]));
        /* the process is the thread group: a thread's exec makes it the leader */
        pid_t host_pid = audit_thread_group(tid);
        long pid = audit_exec(x->audit, host_pid, o);
        if (pid == AUDIT_NOT_RECORDED) {
                free(path);
                return;  /* held back by the rate limit (counted): no exit either */
        }
        struct tracked *t = track(x, host_pid);
        if (!t) {
                x->untracked++;
                free(path);
                return;
        }
        free(t->path);
        t->path = path;
        t->pid = pid;
        t->since_ms = mono_ms();
}

bool exectrace_owns(const struct exectrace *x, int fd)
{
        return x && fd >= 0 && (size_t)fd < x->n && x->t[fd].pidfd == fd;
}

/* How the process ended: a wait status, or -1 when nobody can tell. Its
 * pidfd says so once it is reaped (6.15); a zombie not yet reaped has it
 * in /proc/PID/stat, which names that zombie only while the pidfd still
 * reaches it (its pid is not reused while it is a zombie). */
static int exit_status(const struct tracked *t)
{
        struct brig_pidfd_info info = { .mask = BRIG_PIDFD_INFO_EXIT };
        if (ioctl(t->pidfd, BRIG_PIDFD_GET_INFO, &info) == 0 && (info.mask & BRIG_PIDFD_INFO_EXIT))
                return info.exit_code;
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%d/stat", t->host_pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
                close(fd);
        int status = -1;
        if (n > 0) {
                buf[n] = '\0';
                /* after the comm's ')', the state, then field 52 (exit_code) is the 50th */
                char *p = strrchr(buf, ')');
                for (int field = 2; p && field < 52; field++)
                        p = strchr(p + 1, ' ');
                if (p && buf[0] && strrchr(buf, ')')[2] == 'Z')
                        status = (int)strtol(p + 1, NULL, 10);
        }
        if (status >= 0 && syscall(SYS_pidfd_send_signal, t->pidfd, 0, NULL, 0) == 0)
                return status;
        info = (struct brig_pidfd_info){ .mask = BRIG_PIDFD_INFO_EXIT };
        if (ioctl(t->pidfd, BRIG_PIDFD_GET_INFO, &info) == 0 && (info.mask & BRIG_PIDFD_INFO_EXIT))
                return info.exit_code;  /* reaped between our looks */
        return -1;
}

static void ended(struct exectrace *x, struct tracked *t)
{
        int status = exit_status(t);
        json_t *o = json_pack("{s:I, s:I, s:o, s:I}", "pid", (json_int_t)t->pid, "host_pid", (json_int_t)t->host_pid,
                              "path", text(t->path), "duration_ms", (json_int_t)(mono_ms() - t->since_ms));
        json_object_set_new(o, "exit_code",
                            status >= 0 && WIFEXITED(status) ? json_integer(WEXITSTATUS(status)) : json_null());
        json_object_set_new(o, "signal",
                            status >= 0 && WIFSIGNALED(status) ? json_integer(WTERMSIG(status)) : json_null());
        audit_exit(x->audit, o);
        untrack(x, t);
}

void exectrace_on_exit(struct exectrace *x, int fd)
{
        if (exectrace_owns(x, fd))
                ended(x, &x->t[fd]);
}

void exectrace_finish(struct exectrace *x)
{
        for (size_t i = 0; x && i < x->n; i++)
                if (x->t[i].pidfd >= 0)
                        ended(x, &x->t[i]);
}

uint64_t exectrace_untracked(const struct exectrace *x)
{
        return x ? x->untracked : 0;
}

void exectrace_free(struct exectrace *x)
{
        if (!x)
                return;
        for (size_t i = 0; i < x->n; i++)
                if (x->t[i].pidfd >= 0)
                        untrack(x, &x->t[i]);
        free(x->t);
        free(x);
}
