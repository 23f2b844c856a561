/* engine.c — the handle API (docs/api.md): sandbox handles over persistent
 * sandboxes, exec handles over one control-socket connection each, for a
 * front end that drives many of them from one poll loop.
 *
 * What this file must never do, since its caller is a long-running
 * program of someone else's: change process-wide state (no signal mask or
 * disposition, rlimit, cwd, umask or stdio change; exec_over in exec.c
 * blocks signals, so it is not used here), fork the caller (sandboxes are
 * started through brig-supervisor, supervisor_exec.c), or trust a handle
 * pointer it did not hand out: every call looks the pointer up in the
 * table of live handles before it touches it, and holds it (users) while
 * it does: a close from another thread meanwhile frees it only once that
 * call is done with it. */
#define _GNU_SOURCE
#include "persist/control.h"
#include "persist/pool.h"
#include "persist/pool_claim.h"
#include "persist/sandbox.h"
#include "persist/state.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#define OPTS_MAX 4096

struct brig_sandbox {
        struct brig_sandbox *next;
        uintptr_t token;        /* what the caller holds as its brig_sandbox * */
        char name[72];
        char *dir;
        bool ephemeral;
        unsigned n_execs;       /* exec handles on it, each holding it; under handles_lock */
        unsigned users;         /* calls using it now (sandbox_get); under handles_lock */
};

enum exec_state { EXEC_RUNNING, EXEC_WAITED };

struct brig_exec {
        struct brig_exec *next;
        uintptr_t token;        /* what the caller holds as its brig_exec * */
        struct brig_sandbox *sb;
        int fd;                 /* the connection: CTL_STATUS / CTL_ERROR arrive here */
        int stdio[3];           /* ours (pipes, pty master), or -1 */
        enum brig_stdio mode;
        enum exec_state state;
        uint64_t start_ms;
        struct strv argv;       /* for the report */
        brig_result res;
        brig_error *error;      /* the exec's failure, for the report */
        json_t *refusals;       /* what it was refused, for the report (control.h), or NULL */
        unsigned users;         /* calls using it now (exec_get); under handles_lock */
        bool closing;           /* brig_exec_close took it out of the table; the last user frees it */
        /* brig_file_start: a file operation, its outcome by brig_file_wait */
        bool fileop;
        uint32_t file_op;
        uint64_t file_timeout_ms;
        int file_errfd;         /* what tar said (a memfd), or -1 */
        /* brig_pool_exec_start: the member's claim in its pool's directory,
         * released (to done/, whose members the pool's daemon removes)
         * once the handle goes: the claiming process may live on (brig
         * serve), and a claim lasts while its process does */
        char *pool_dir, *pool_member;
};

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct brig_sandbox *sandboxes;
static struct brig_exec *execs;
static unsigned long name_counter;
/* Handles are tokens, not the structs' addresses: a number given out once
 * (under handles_lock), so a handle used after its close is never taken
 * for a newer one whose struct was given the same memory by malloc. */
static uintptr_t last_token;

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Is this handle one we handed out and have not closed? Compared as a
 * token only: a caller's handle is never dereferenced. The handle found is
 * held until the matching _put: a brig_sandbox_close meanwhile is refused
 * (EBUSY), a brig_exec_close meanwhile wakes a wait blocked on the
 * connection and leaves the free to the last user. Without that, a close
 * from another thread freed the handle under a blocked brig_exec_wait
 * (which then wrote its result into freed memory) and, since a blocked
 * recvmsg keeps the socket open, did not even end the command. */
static struct brig_sandbox *sandbox_get(const brig_sandbox *sb)
{
        pthread_mutex_lock(&handles_lock);
        struct brig_sandbox *s = sandboxes;
        while (s && s->token != (uintptr_t)sb)
                s = s->next;
        if (s)
                s->users++;
        pthread_mutex_unlock(&handles_lock);
        return s;
}

static void sandbox_put(struct brig_sandbox *sb)
{
        pthread_mutex_lock(&handles_lock);
        sb->users--;
        pthread_mutex_unlock(&handles_lock);
}

static struct brig_exec *exec_get(const brig_exec *x)
{
        pthread_mutex_lock(&handles_lock);
        struct brig_exec *e = execs;
        while (e && e->token != (uintptr_t)x)
                e = e->next;
        if (e)
                e->users++;
        pthread_mutex_unlock(&handles_lock);
        return e;
}

static void exec_free(struct brig_exec *x);

/* The last user of a closed exec frees it, and lets go of its sandbox. */
static void exec_put(struct brig_exec *x)
{
        pthread_mutex_lock(&handles_lock);
        bool last = --x->users == 0 && x->closing;
        if (last)
                x->sb->n_execs--;
        pthread_mutex_unlock(&handles_lock);
        if (last)
                exec_free(x);
}

static bool exec_closing(struct brig_exec *x)
{
        pthread_mutex_lock(&handles_lock);
        bool closing = x->closing;
        pthread_mutex_unlock(&handles_lock);
        return closing;
}

static int dead_handle(brig_error **err, const char *what)
{
        return brig_err(err, EBADF, "%s: not a live handle (NULL, closed, or never made by this library)", what);
}

/* open_how's rule: the caller's struct may be newer than ours as long as
 * what we do not know of it is zero. */
static int check_size(const void *o, uint32_t size, size_t first, size_t known, const char *what, brig_error **err)
{
        if (size < first)
                return brig_err(err, EINVAL, "%s.size is %u, smaller than the first version's %zu (set it to sizeof)",
                                what, size, first);
        if (size > OPTS_MAX)
                return brig_err(err, E2BIG, "%s.size is %u, larger than any version could be (set it to sizeof)",
                                what, size);
        for (size_t i = known; i < size; i++)
                if (((const unsigned char *)o)[i])
                        return brig_err(err, E2BIG, "%s has fields this libbrig does not know (size %u, known %zu): "
                                                    "built against a newer libbrig?",
                                        what, size, known);
        return 0;
}

static void exec_free(struct brig_exec *x)
{
        closep(&x->fd);
        closep(&x->file_errfd);
        for (int i = 0; i < 3; i++)
                closep(&x->stdio[i]);
        strv_free(&x->argv);
        brig_error_free(&x->error);
        json_decref(x->refusals);
        if (x->pool_dir)  /* after the connection's close: the member stops as its run ends */
                pool_claim_drop(x->pool_dir, x->pool_member);
        free(x->pool_dir);
        free(x->pool_member);
        free(x);
}

/* ---- sandboxes ------------------------------------------------------------- */

static int sandbox_handle(const char *name, bool ephemeral, brig_sandbox **ret, brig_error **err)
{
        struct brig_sandbox *sb = calloc(1, sizeof *sb);
        if (!sb)
                return brig_err(err, ENOMEM, "sandbox handle");
        snprintf(sb->name, sizeof sb->name, "%s", name);
        sb->ephemeral = ephemeral;
        int r = state_dir(name, false, &sb->dir, err);
        if (r < 0) {
                free(sb);
                return r;
        }
        pthread_mutex_lock(&handles_lock);
        sb->token = ++last_token;
        sb->next = sandboxes;
        sandboxes = sb;
        pthread_mutex_unlock(&handles_lock);
        *ret = (brig_sandbox *)sb->token;
        return 0;
}

int brig_sandbox_new(const brig_policy *p, const brig_sandbox_opts *o, brig_sandbox **ret, brig_error **err)
{
        if (!ret)
                return brig_err(err, EINVAL, "brig_sandbox_new: ret is NULL");
        *ret = NULL;
        if (!p)
                return brig_err(err, EINVAL, "brig_sandbox_new: no policy");
        brig_sandbox_opts opts = { .size = sizeof opts };
        if (o) {
                int r = check_size(o, o->size, offsetof(brig_sandbox_opts, workspace_mode) + sizeof o->workspace_mode,
                                   sizeof opts, "brig_sandbox_opts", err);
                if (r < 0)
                        return r;
                memcpy(&opts, o, o->size < sizeof opts ? o->size : sizeof opts);
        }
        if (opts.flags & ~(uint32_t)(BRIG_SANDBOX_EPHEMERAL | BRIG_SANDBOX_AUDIT | BRIG_SANDBOX_OWNED))
                return brig_err(err, EINVAL, "brig_sandbox_opts.flags: unknown flags 0x%x", opts.flags);
        char name[72];
        if (opts.name)
                snprintf(name, sizeof name, "%s", opts.name);
        else {
                pthread_mutex_lock(&handles_lock);
                unsigned long n = ++name_counter;
                pthread_mutex_unlock(&handles_lock);
                snprintf(name, sizeof name, "sb-%d-%lu", getpid(), n);
        }
        if (!state_name_valid(name))
                return state_fail(err, EINVAL, "sandbox name '%s': use letters, digits, _ . - (up to 64, not "
                                               "starting with _ . -)", name);
        /* An ephemeral sandbox's supervisor watches this process (a pidfd
         * it opens from pid and start time, control.c): when we end,
         * however, so does the sandbox, and its state goes with it. */
        struct sandbox_create_opts co = {
                .overlay = opts.workspace_mode == BRIG_WORKSPACE_OVERLAY,
                .ephemeral = opts.flags & BRIG_SANDBOX_EPHEMERAL,
                .audit = opts.flags & BRIG_SANDBOX_AUDIT,
                .owned = opts.flags & BRIG_SANDBOX_OWNED,
        };
        if (co.ephemeral && co.owned)
                return brig_err(err, EINVAL, "brig_sandbox_opts.flags: BRIG_SANDBOX_EPHEMERAL and BRIG_SANDBOX_OWNED "
                                             "exclude each other (an ephemeral sandbox is removed at any end)");
        if (co.ephemeral || co.owned) {
                co.owner_pid = getpid();
                co.owner_start = state_process_start(co.owner_pid);
        }
        int r = sandbox_create(name, p, &co, err);
        if (r < 0)
                return r;
        r = sandbox_handle(name, co.ephemeral, ret, err);
        if (r < 0 && co.ephemeral) {
                brig_error *e = NULL;
                (void)brig_sandbox_remove(name, &e);
                brig_error_free(&e);
        }
        return r;
}

int brig_sandbox_open(const char *name, brig_sandbox **ret, brig_error **err)
{
        if (!ret)
                return brig_err(err, EINVAL, "brig_sandbox_open: ret is NULL");
        *ret = NULL;
        if (!name)
                return brig_err(err, EINVAL, "brig_sandbox_open: no name");
        /* Running and ours: its control socket answers (else: why not). */
        int fd = sandbox_connect(name, err);
        if (fd < 0)
                return fd;
        close(fd);
        return sandbox_handle(name, false, ret, err);
}

const char *brig_sandbox_name(const brig_sandbox *sb)
{
        struct brig_sandbox *s = sandbox_get(sb);
        if (s)
                sandbox_put(s);
        return s ? s->name : NULL;
}

static int audit_fd_in(const char *dir, const char *name, brig_error **err);

int brig_sandbox_audit_fd(brig_sandbox *handle, brig_error **err)
{
        struct brig_sandbox *sb = sandbox_get(handle);
        if (!sb)
                return dead_handle(err, "brig_sandbox_audit_fd");
        int r = audit_fd_in(sb->dir, sb->name, err);
        sandbox_put(sb);
        return r;
}

int brig_sandbox_audit_fd_named(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        int r = state_dir(name, false, &dir, err);
        struct stat st;
        if (r == 0 && lstat(dir, &st) < 0)
                r = state_fail(err, ENOENT, "no sandbox named '%s'", name);
        return r < 0 ? r : audit_fd_in(dir, name, err);
}

static int audit_fd_in(const char *dir, const char *name, brig_error **err)
{
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int fd = dfd >= 0 ? openat(dfd, "audit.jsonl", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -1;
        if (fd < 0)
                return errno == ENOENT ? state_fail(err, ENOENT, "sandbox '%s' keeps no audit stream (create it with "
                                                                 "BRIG_SANDBOX_AUDIT)", name)
                                       : brig_err(err, errno, "open the audit stream of '%s'", name);
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
                close(fd);
                return state_fail(err, EPERM, "the audit stream of '%s' is not the file brig writes", name);
        }
        /* O_NONBLOCK only for the open (a FIFO in its place must not hang it) */
        fcntl(fd, F_SETFL, 0);
        return fd;
}

int brig_sandbox_close(brig_sandbox *handle, brig_error **err)
{
        pthread_mutex_lock(&handles_lock);
        struct brig_sandbox **pp = &sandboxes;
        while (*pp && (*pp)->token != (uintptr_t)handle)
                pp = &(*pp)->next;
        struct brig_sandbox *sb = *pp;
        bool found = sb != NULL;
        unsigned n_execs = found ? sb->n_execs : 0, users = found ? sb->users : 0;
        if (found && !n_execs && !users)
                *pp = sb->next;
        pthread_mutex_unlock(&handles_lock);
        if (!found)
                return dead_handle(err, "brig_sandbox_close");
        if (n_execs)
                return brig_err(err, EBUSY, "brig_sandbox_close '%s': %u exec handle%s still open (brig_exec_close "
                                            "them first)", sb->name, n_execs, n_execs == 1 ? "" : "s");
        if (users)
                return brig_err(err, EBUSY, "brig_sandbox_close '%s': another thread is using the handle", sb->name);
        int r = 0;
        if (sb->ephemeral) {
                /* One that stopped has removed itself already. */
                brig_error *e = NULL;
                r = brig_sandbox_remove(sb->name, &e);
                if (r == -ENOENT)
                        r = 0;
                else if (r < 0 && err && !*err)
                        *err = TAKE_PTR(e);
                brig_error_free(&e);
        }
        free(sb->dir);
        free(sb);
        return r;
}

/* ---- execs ----------------------------------------------------------------- */

static bool same_file(const struct stat *st, int fd)
{
        struct stat o;
        return fd >= 0 && fstat(fd, &o) == 0 && o.st_dev == st->st_dev && o.st_ino == st->st_ino;
}

/* Is fd (or a dup of it: compared by file) one the library owns: an
 * exec's connection to its sandbox's supervisor, or its end of the
 * command's pipes or pty? */
static bool fd_is_ours(int fd)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return false;
        pthread_mutex_lock(&handles_lock);
        bool ours = false;
        for (const struct brig_exec *e = execs; e && !ours; e = e->next)
                ours = same_file(&st, e->fd) || same_file(&st, e->stdio[0]) || same_file(&st, e->stdio[1]) ||
                       same_file(&st, e->stdio[2]);
        pthread_mutex_unlock(&handles_lock);
        return ours;
}

static int check_fds(const brig_exec_spec *s, brig_error **err)
{
        static const char *const names[] = { "stdin", "stdout", "stderr" };
        for (int i = 0; i < 3; i++) {
                if (s->fds[i] < 0 || fcntl(s->fds[i], F_GETFD) < 0)
                        return brig_err(err, EBADF, "brig_exec_spec.fds[%d] (%s) = %d is not an open descriptor", i,
                                        names[i], s->fds[i]);
                /* A connection to the supervisor given to the command would
                 * let it speak the control protocol for another exec (its
                 * signals, its result); another command's pipe end or pty
                 * master would let it read or type into that one. */
                if (fd_is_ours(s->fds[i]))
                        return brig_err(err, EBADF, "brig_exec_spec.fds[%d] (%s) = %d is a descriptor of another "
                                                    "brig_exec handle (brig_exec_fd, brig_exec_stdio_fd), not the "
                                                    "caller's", i, names[i], s->fds[i]);
        }
        return 0;
}

/* Three pipes: theirs[] go to the command, ours[] stay in the handle. */
static int make_pipes(int theirs[3], int ours[3], brig_error **err)
{
        for (int i = 0; i < 3; i++) {
                int p[2];
                if (pipe2(p, O_CLOEXEC) < 0)
                        return brig_err(err, errno, "pipe");
                /* stdin: the command reads p[0]; stdout, stderr: it writes p[1] */
                theirs[i] = i == 0 ? p[0] : p[1];
                ours[i] = i == 0 ? p[1] : p[0];
                fcntl(ours[i], F_SETFL, O_NONBLOCK);
        }
        return 0;
}

/* With a pty, pid 1 sends the master first (before it forks the command). */
static int receive_pty(struct brig_exec *x, const brig_exec_spec *s, brig_error **err)
{
        struct ctl_hdr h;
        int fds[CTL_MAX_FDS], nfds = 0;
        ssize_t n = ctl_recv(x->fd, &h, sizeof h, fds, &nfds);
        if (n > 0 && h.type == CTL_PTY && nfds == 1) {
                x->stdio[0] = fds[0];
                x->stdio[1] = fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
                struct winsize ws = { .ws_row = s->rows ? s->rows : 24, .ws_col = s->cols ? s->cols : 80 };
                if (x->stdio[1] < 0 || ioctl(x->stdio[0], TIOCSWINSZ, &ws) < 0)
                        return brig_err(err, errno, "exec: the pty");
                fcntl(x->stdio[0], F_SETFL, O_NONBLOCK);
                return 0;
        }
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        if (n > 0 && h.type == CTL_ERROR)
                return ctl_error(&h, NULL, err);
        return brig_err(err, n < 0 ? (int)-n : EPIPE, "exec: no pty from sandbox '%s'", x->sb->name);
}

/* How long a start waits for CTL_EXEC_ACK's answer: the supervisor of a
 * ready member answers as soon as it has handed the command to pid 1 (a
 * few system calls); one that has not answered by then is stopped or
 * stuck. */
#define EXEC_ACK_WAIT_MS 10000

/* CTL_EXEC_ACK's answer: the supervisor passed the exec on, or why it
 * did not (nothing ran then). Only a refusal it states is one the caller
 * may take to another member: a supervisor that ended or went quiet
 * after reading the request may have handed the command on first, and a
 * command must never run twice. The wait ends with the caller's hang-up
 * (cancel_fd, BRIG_EXEC_CANCEL_FD): closing the connection then makes
 * the supervisor drop the command with it (start_exec). */
static int receive_ack(struct brig_exec *x, int cancel_fd, brig_error **err)
{
        struct pollfd pf[2] = { { .fd = x->fd, .events = POLLIN }, { .fd = cancel_fd, .events = POLLRDHUP } };
        uint64_t until = now_ms() + EXEC_ACK_WAIT_MS;
        for (;;) {
                uint64_t now = now_ms();
                int p = now < until ? poll(pf, 2, (int)(until - now)) : 0;
                if (p < 0 && errno == EINTR)
                        continue;
                if (p < 0)
                        return brig_err(err, errno, "exec: wait for sandbox '%s' to start the command", x->sb->name);
                if (p == 0)
                        return brig_err(err, ETIMEDOUT, "exec: sandbox '%s' did not say within %d s whether it started "
                                        "the command (its supervisor is stopped or stuck); not run elsewhere, "
                                        "as it may have started", x->sb->name, EXEC_ACK_WAIT_MS / 1000);
                if (pf[0].revents)
                        break;
                if (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
                        return brig_err(err, ECANCELED, "exec: the caller went away before sandbox '%s' started "
                                        "the command: not run", x->sb->name);
        }
        struct ctl_hdr h;
        int fds[CTL_MAX_FDS], nfds = 0;
        ssize_t n = ctl_recv(x->fd, &h, sizeof h, fds, &nfds);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        if (n > 0 && h.type == CTL_OK)
                return 0;
        if (n > 0 && h.type == CTL_ERROR)
                return ctl_error(&h, NULL, err);
        if (n == 0 || n == -ECONNRESET)
                return brig_err(err, EPIPE, "exec: sandbox '%s' ended before it said whether it started the command; "
                                "not run elsewhere, as it may have started", x->sb->name);
        return brig_err(err, n < 0 ? (int)-n : EBADMSG, "exec: no answer from sandbox '%s'", x->sb->name);
}

static int exec_start(struct brig_sandbox *sb, const brig_exec_spec *spec, brig_exec **ret, brig_error **err);

/* brig_exec_start and brig_file_start: the sandbox handle held for the
 * start, which `start` makes from the caller's spec. */
typedef int start_fn(struct brig_sandbox *sb, const void *spec, brig_exec **ret, brig_error **err);

static int start_on(brig_sandbox *handle, const void *spec, brig_exec **ret, start_fn *start, const char *what,
                    brig_error **err)
{
        if (!ret)
                return brig_err(err, EINVAL, "%s: ret is NULL", what);
        *ret = NULL;
        struct brig_sandbox *sb = sandbox_get(handle);
        if (!sb)
                return dead_handle(err, what);
        int r = start(sb, spec, ret, err);
        sandbox_put(sb);
        return r;
}

static int exec_start_any(struct brig_sandbox *sb, const void *spec, brig_exec **ret, brig_error **err)
{
        return exec_start(sb, spec, ret, err);
}

int brig_exec_start(brig_sandbox *handle, const brig_exec_spec *spec, brig_exec **ret, brig_error **err)
{
        return start_on(handle, spec, ret, exec_start_any, "brig_exec_start", err);
}

static void exec_register(struct brig_sandbox *sb, struct brig_exec *x, brig_exec **ret)
{
        pthread_mutex_lock(&handles_lock);
        x->token = ++last_token;
        x->next = execs;
        execs = x;
        sb->n_execs++;
        pthread_mutex_unlock(&handles_lock);
        *ret = (brig_exec *)x->token;
}

/* The request on a new connection: o checked, s a checked copy (its fds
 * for BRIG_STDIO_FDS), flags CTL_EXEC_*; the handle is not registered yet. */
static int exec_launch(struct brig_sandbox *sb, const brig_exec_opts *o, const brig_exec_spec *s, uint32_t flags,
                       struct brig_exec **out, brig_error **err)
{
        bool pty = s->stdio == BRIG_STDIO_PTY;
        struct brig_exec *x = calloc(1, sizeof *x);
        if (!x)
                return brig_err(err, ENOMEM, "exec handle");
        x->fd = x->stdio[0] = x->stdio[1] = x->stdio[2] = x->file_errfd = -1;
        x->sb = sb;
        x->mode = (enum brig_stdio)s->stdio;
        x->res.memory_peak_bytes = x->res.pids_peak = -1;
        int r = 0;
        for (size_t i = 0; o->argv[i] && r == 0; i++)
                r = strv_push(&x->argv, o->argv[i]);
        int theirs[3] = { -1, -1, -1 };
        if (r < 0)
                r = brig_err(err, ENOMEM, "exec handle");
        if (r == 0 && s->stdio == BRIG_STDIO_PIPES)
                r = make_pipes(theirs, x->stdio, err);
        size_t len = 0;
        /* the context a pool member compares (CTL_EXEC_LAST): none for a
         * run that takes the member as it was made (CTL_EXEC_AS_MADE) */
        _cleanup_free_ char *req = r == 0 ? exec_request_build(o, pty, flags, "", &len, err) : NULL;
        if (r == 0 && !req)
                r = -ENOMEM;
        if (r == 0 && (x->fd = sandbox_connect(sb->name, err)) < 0)
                r = x->fd;
        if (r == 0) {
                const int *fds = s->stdio == BRIG_STDIO_FDS ? s->fds : theirs;
                const struct ctl_hdr *h = (const struct ctl_hdr *)req;
                r = ctl_send(x->fd, h, req + sizeof *h, len - sizeof *h, fds, pty ? 0 : 3);
                if (r == -EPIPE || r == -ECONNRESET)
                        r = exec_not_taken(err, sb->name);  /* its end closed first: nothing ran (ESHUTDOWN) */
                else if (r < 0)
                        r = brig_err(err, -r, "send the command to sandbox '%s'", sb->name);
        }
        for (int i = 0; i < 3; i++)
                closep(&theirs[i]);  /* the command has its copies */
        x->start_ms = now_ms();
        if (r == 0 && (flags & CTL_EXEC_ACK))
                r = receive_ack(x, (s->flags & BRIG_EXEC_CANCEL_FD) ? s->cancel_fd : -1, err);
        if (r == 0 && pty)
                r = receive_pty(x, s, err);
        if (r < 0) {
                exec_free(x);
                return r;
        }
        *out = x;
        return 0;
}

/* The caller's spec checked, into our own copy (fields a caller's older
 * struct lacks stay zero) and the options it gives. */
static int exec_spec_take(const brig_exec_spec *spec, const char *what, brig_exec_spec *copy, brig_exec_opts *o,
                          brig_error **err)
{
        if (!spec)
                return brig_err(err, EINVAL, "%s: no brig_exec_spec", what);
        int r = check_size(spec, spec->size, offsetof(brig_exec_spec, cols) + sizeof spec->cols, sizeof *spec,
                           "brig_exec_spec", err);
        if (r < 0)
                return r;
        *copy = (brig_exec_spec){ 0 };
        memcpy(copy, spec, spec->size < sizeof *copy ? spec->size : sizeof *copy);
        if (copy->stdio > BRIG_STDIO_PTY)
                return brig_err(err, EINVAL, "brig_exec_spec.stdio = %u: one of BRIG_STDIO_FDS, _PIPES, _PTY",
                                copy->stdio);
        if (copy->flags & ~(uint32_t)BRIG_EXEC_CANCEL_FD)
                return brig_err(err, EINVAL, "brig_exec_spec.flags: unknown flags 0x%x (this libbrig knows "
                                "BRIG_EXEC_CANCEL_FD; leave the others 0)", copy->flags);
        if ((copy->flags & BRIG_EXEC_CANCEL_FD) && (copy->cancel_fd < 0 || fcntl(copy->cancel_fd, F_GETFD) < 0))
                return brig_err(err, copy->cancel_fd < 0 ? EINVAL : EBADF,
                                "brig_exec_spec.cancel_fd = %d with BRIG_EXEC_CANCEL_FD: give an open descriptor "
                                "(the caller's connection) or clear the flag", copy->cancel_fd);
        bool pty = copy->stdio == BRIG_STDIO_PTY;
        *o = (brig_exec_opts){ .argv = copy->argv, .env = copy->env, .cwd = copy->cwd, .timeout_ms = copy->timeout_ms,
                               .tty = pty ? BRIG_TTY_ALWAYS : BRIG_TTY_NEVER };
        if ((r = exec_check_opts(o, err)) < 0 || (copy->stdio == BRIG_STDIO_FDS && (r = check_fds(copy, err)) < 0))
                return r;
        return 0;
}

static int exec_start(struct brig_sandbox *sb, const brig_exec_spec *spec, brig_exec **ret, brig_error **err)
{
        brig_exec_spec s;
        brig_exec_opts o;
        int r = exec_spec_take(spec, "brig_exec_start", &s, &o, err);
        if (r < 0)
                return r;
        struct brig_exec *x = NULL;
        r = exec_launch(sb, &o, &s, 0, &x, err);
        if (r == 0)
                exec_register(sb, x, ret);
        return r;
}

/* brig_pool_exec_start's use of the member it claimed: a handle on it,
 * and the exec as its one run, the member as the pool made it. */
struct pool_exec {
        const brig_exec_spec *s;
        const brig_exec_opts *o;
        brig_sandbox *sb;
        brig_exec *x;
};

/* Does the member's supervisor answer CTL_EXEC_ACK (its state.json)? */
static bool supervisor_acks(const struct brig_sandbox *sb)
{
        brig_error *e = NULL;
        json_t *st = state_read(sb->dir, &e);
        bool acks = json_is_true(json_object_get(st, "exec_ack"));
        json_decref(st);
        brig_error_free(&e);  /* no state: the exec's own connect says why */
        return acks;
}

static int pool_exec_in(const char *dir, const char *member, void *arg, brig_error **err)
{
        struct pool_exec *a = arg;
        brig_sandbox *handle = NULL;
        int r = sandbox_handle(member, false, &handle, err);
        struct brig_sandbox *sb = r == 0 ? sandbox_get(handle) : NULL;
        if (r == 0 && !sb)
                r = dead_handle(err, "brig_pool_exec_start");
        struct brig_exec *x = NULL;
        /* The start's answer, where the supervisor gives one: a member
         * that refuses the run (stopping, its workspace moved away) is
         * then use_member's to drop for the next, as for brig run --pool,
         * not a failed run found by the wait. */
        if (r == 0)
                r = exec_launch(sb, a->o, a->s,
                                CTL_EXEC_LAST | CTL_EXEC_AS_MADE | (supervisor_acks(sb) ? CTL_EXEC_ACK : 0), &x, err);
        if (r == 0 && (!(x->pool_dir = strdup(dir)) || !(x->pool_member = strdup(member)))) {
                free(TAKE_PTR(x->pool_dir));  /* the claim goes below */
                exec_free(x);  /* the connection's close: the member stops, unused */
                r = brig_err(err, ENOMEM, "exec handle");
        }
        if (r == 0)
                exec_register(sb, x, &a->x);
        if (sb)
                sandbox_put(sb);
        if (r < 0) {
                if (handle)
                        brig_sandbox_close(handle, NULL);
                /* used or not, no other run takes it: to done/ (the pool
                 * sees this process alive, and would keep its claim) */
                pool_claim_drop(dir, member);
                return r;
        }
        a->sb = handle;
        return 0;
}

int brig_pool_exec_start(const char *name, const brig_exec_spec *spec, brig_sandbox **sb_ret, brig_exec **ret,
                         brig_error **err)
{
        if (!sb_ret || !ret)
                return brig_err(err, EINVAL, "brig_pool_exec_start: %s is NULL", sb_ret ? "ret" : "sb");
        *sb_ret = NULL;
        *ret = NULL;
        if (!name)
                return brig_err(err, EINVAL, "brig_pool_exec_start: no pool name");
        brig_exec_spec s;
        brig_exec_opts o;
        int r = exec_spec_take(spec, "brig_pool_exec_start", &s, &o, err);
        if (r < 0)
                return r;
        struct pool_exec a = { .s = &s, .o = &o };
        char member[256];
        int cancel_fd = s.flags & BRIG_EXEC_CANCEL_FD ? s.cancel_fd : -1;
        r = pool_named_claim(name, cancel_fd, pool_exec_in, &a, member, sizeof member, err);
        if (r == 0) {
                *sb_ret = a.sb;
                *ret = a.x;
        }
        return r;
}

/* ---- file operations --------------------------------------------------------- */

static int file_start(struct brig_sandbox *sb, const brig_file_spec *spec, brig_exec **ret, brig_error **err)
{
        int r = spec ? check_size(spec, spec->size, offsetof(brig_file_spec, timeout_ms) + sizeof spec->timeout_ms,
                                  sizeof *spec, "brig_file_spec", err)
                     : brig_err(err, EINVAL, "brig_file_start: no spec");
        if (r < 0)
                return r;
        brig_file_spec copy = { 0 };
        memcpy(&copy, spec, spec->size < sizeof copy ? spec->size : sizeof copy);
        struct fileop_call c;
        if ((r = fileop_prepare(&copy, &c, err)) < 0)
                return r;
        /* the data descriptor is the caller's, checked as an exec's are:
         * never one of the library's own (a read written into an exec's
         * connection would speak its control protocol) */
        brig_exec_spec es = { .size = sizeof es, .stdio = BRIG_STDIO_FDS,
                              .fds = { c.stdio[0], c.stdio[1], c.stdio[2] } };
        struct brig_exec *x = NULL;
        r = check_fds(&es, err);
        if (r == 0)
                r = exec_launch(sb, &c.opts, &es, CTL_EXEC_FILEOP, &x, err);
        if (r == 0) {
                x->fileop = true;
                x->file_op = copy.op;
                x->file_timeout_ms = copy.timeout_ms;
                x->file_errfd = TAKE_FD(c.errfd);
                exec_register(sb, x, ret);
        }
        fileop_call_free(&c);
        return r;
}

static int file_start_any(struct brig_sandbox *sb, const void *spec, brig_exec **ret, brig_error **err)
{
        return file_start(sb, spec, ret, err);
}

int brig_file_start(brig_sandbox *handle, const brig_file_spec *spec, brig_exec **ret, brig_error **err)
{
        return start_on(handle, spec, ret, file_start_any, "brig_file_start", err);
}

static int wait_exec(struct brig_exec *x, unsigned flags, brig_result *res, brig_error **err);

int brig_file_wait(brig_exec *handle, unsigned flags, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return dead_handle(err, "brig_file_wait");
        int r;
        if (!x->fileop)
                r = brig_err(err, EINVAL, "brig_file_wait: not a file operation (brig_exec_wait takes a command's)");
        else {
                brig_result res;
                r = wait_exec(x, flags, &res, err);
                if (r != -EAGAIN && r != -ECHILD)
                        r = fileop_outcome(x->sb->name, x->file_op, x->argv.n > 2 ? x->argv.items[2] : "",
                                           x->file_timeout_ms, x->file_errfd, r, &res, err);
        }
        exec_put(x);
        return r;
}

int brig_sandbox_file(brig_sandbox *handle, const brig_file_spec *spec, brig_error **err)
{
        /* brig_file_start and a blocking wait: nothing of the process's
         * (its signal mask) is touched while it runs */
        brig_exec *x = NULL;
        int r = brig_file_start(handle, spec, &x, err);
        if (r < 0)
                return r;
        r = brig_file_wait(x, 0, err);
        brig_exec_close(x);
        return r;
}

int brig_exec_fd(const brig_exec *handle)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return -EBADF;
        int fd = x->fd;
        exec_put(x);
        return fd;
}

int brig_exec_stdio_fd(const brig_exec *handle, int which)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return -EBADF;
        int fd = which >= 0 && which < 3 ? x->stdio[which] : -1;
        exec_put(x);
        return fd >= 0 ? fd : -1;  /* none, or closed by brig_exec_close_stdin */
}

static int close_stdin(struct brig_exec *x, brig_error **err)
{
        if (x->mode == BRIG_STDIO_FDS)
                return brig_err(err, EINVAL, "brig_exec_close_stdin: stdin is the caller's descriptor (close yours)");
        if (x->mode == BRIG_STDIO_PTY) {
                /* the line discipline's end of file: ^D at the start of a line */
                if (write(x->stdio[0], "\x04", 1) != 1)
                        return brig_err(err, errno, "brig_exec_close_stdin: write to the pty");
                return 0;
        }
        closep(&x->stdio[0]);
        return 0;
}

int brig_exec_close_stdin(brig_exec *handle, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return dead_handle(err, "brig_exec_close_stdin");
        int r = close_stdin(x, err);
        exec_put(x);
        return r;
}

static int resize(struct brig_exec *x, unsigned rows, unsigned cols, brig_error **err)
{
        if (x->mode != BRIG_STDIO_PTY)
                return brig_err(err, ENOTTY, "brig_exec_resize: the exec was not started with BRIG_STDIO_PTY");
        if (!rows || !cols || rows > UINT16_MAX || cols > UINT16_MAX)
                return brig_err(err, EINVAL, "brig_exec_resize: %u x %u is not a terminal size", rows, cols);
        struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
        /* The kernel sends SIGWINCH to the pty's foreground group itself. */
        if (ioctl(x->stdio[0], TIOCSWINSZ, &ws) < 0)
                return brig_err(err, errno, "brig_exec_resize");
        return 0;
}

int brig_exec_resize(brig_exec *handle, unsigned rows, unsigned cols, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return dead_handle(err, "brig_exec_resize");
        int r = resize(x, rows, cols, err);
        exec_put(x);
        return r;
}

static int kill_exec(struct brig_exec *x, int sig, brig_error **err)
{
        if (sig <= 0 || sig >= NSIG)
                return brig_err(err, EINVAL, "brig_exec_kill: %d is not a signal (1..%d)", sig, NSIG - 1);
        if (x->state == EXEC_WAITED)
                return brig_err(err, ESRCH, "brig_exec_kill: the command has ended (its result was taken)");
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_SIGNAL, .arg = sig };
        int r = ctl_send(x->fd, &h, NULL, 0, NULL, 0);
        return r < 0 ? brig_err(err, -r, "brig_exec_kill: sandbox '%s'", x->sb->name) : 0;
}

int brig_exec_kill(brig_exec *handle, int sig, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return dead_handle(err, "brig_exec_kill");
        int r = kill_exec(x, sig, err);
        exec_put(x);
        return r;
}

static int take_message(struct brig_exec *x, brig_error **err)
{
        for (;;) {
                /* a status carries the summary's lines of what was refused
                 * after its header, and the same for the report (control.h):
                 * a shorter read would be cut off (EBADMSG) */
                _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
                if (!buf)
                        return brig_err(err, ENOMEM, "brig_exec_wait");
                struct ctl_hdr h;
                int fds[CTL_MAX_FDS], nfds = 0;
                ssize_t n = ctl_recv(x->fd, buf, CTL_MAX_MSG, fds, &nfds);
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                if (n == -EINTR)
                        continue;
                if (n > 0)
                        memcpy(&h, buf, sizeof h);
                x->state = EXEC_WAITED;
                x->res.duration_ms = now_ms() - x->start_ms;
                if (n > 0 && h.type == CTL_STATUS) {
                        exec_result_fill(&x->res, &h, buf + sizeof h, (size_t)n - sizeof h, &x->refusals);
                        return 0;
                }
                int r;
                if (n > 0 && h.type == CTL_ERROR) {
                        r = ctl_error(&h, &x->res.exit_code, &x->error);
                } else if (exec_closing(x)) {
                        /* brig_exec_close from another thread woke us */
                        x->res.exit_code = BRIG_EXIT_SETUP;
                        r = brig_err(&x->error, EBADF, "brig_exec_close was called during the wait: the command "
                                                       "in sandbox '%s' was killed", x->sb->name);
                } else {
                        x->res.exit_code = BRIG_EXIT_SETUP;
                        r = brig_err(&x->error, n < 0 ? (int)-n : EPIPE, "sandbox '%s' went away during the exec",
                                     x->sb->name);
                }
                if (err && x->error) {
                        /* the message says its errno already */
                        brig_err_code(err, x->error->exit_code, 0, "%s", x->error->msg);
                        if (*err)
                                (*err)->errnum = x->error->errnum;
                }
                return r;
        }
}

static int wait_exec(struct brig_exec *x, unsigned flags, brig_result *res, brig_error **err)
{
        if (!res)
                return brig_err(err, EINVAL, "brig_exec_wait: res is NULL");
        if (flags & ~(unsigned)BRIG_WAIT_NOHANG)
                return brig_err(err, EINVAL, "brig_exec_wait: unknown flags 0x%x", flags);
        if (x->state == EXEC_WAITED)
                return brig_err(err, ECHILD, "brig_exec_wait: already waited for (brig_exec_report_json has the "
                                             "result)");
        if (flags & BRIG_WAIT_NOHANG) {
                struct pollfd pf = { .fd = x->fd, .events = POLLIN };
                if (poll(&pf, 1, 0) == 0)
                        return -EAGAIN;
        }
        int r = take_message(x, err);
        *res = x->res;
        return r;
}

int brig_exec_wait(brig_exec *handle, unsigned flags, brig_result *res, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x)
                return dead_handle(err, "brig_exec_wait");
        int r = x->fileop ? brig_err(err, EINVAL, "brig_exec_wait: a file operation (brig_file_wait takes its outcome)")
                          : wait_exec(x, flags, res, err);
        exec_put(x);
        return r;
}

char *brig_exec_report_json(const brig_exec *handle, brig_error **err)
{
        struct brig_exec *x = exec_get(handle);
        if (!x) {
                dead_handle(err, "brig_exec_report_json");
                return NULL;
        }
        char *json = NULL;
        if (x->state != EXEC_WAITED)
                brig_err(err, EAGAIN, "brig_exec_report_json: the command is still running (brig_exec_wait first)");
        else {
                brig_exec_opts o = { .argv = x->argv.items };
                json = exec_report_json(x->sb->name, &o, &x->res, x->error, NULL, x->refusals, err);
        }
        exec_put(x);
        return json;
}

void brig_exec_close(brig_exec *handle)
{
        pthread_mutex_lock(&handles_lock);
        struct brig_exec **pp = &execs;
        while (*pp && (*pp)->token != (uintptr_t)handle)
                pp = &(*pp)->next;
        struct brig_exec *x = *pp;
        bool found = x != NULL;
        if (found) {
                *pp = x->next;
                x->closing = true;
                x->users++;  /* ours, let go by the exec_put below */
        }
        pthread_mutex_unlock(&handles_lock);
        if (!found)
                return;
        /* The connection ends for the supervisor, so pid 1 kills a command
         * still running, and a wait blocked on it in another thread returns
         * (close alone does neither while a recvmsg holds the socket). */
        if (x->fd >= 0)
                shutdown(x->fd, SHUT_RDWR);
        exec_put(x);
}
