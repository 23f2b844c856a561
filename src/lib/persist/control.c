/* control.c — the supervisor of a persistent sandbox serves its control
 * socket: `brig exec` (forwarded to the sandbox's pid 1, persist_init.c),
 * stop, pause and resume. It runs inside the supervisor's event loop
 * (supervise()), one more descriptor there, so the egress proxy and the
 * audit stream of the sandbox keep running between and during execs.
 *
 * The socket lives in the sandbox's state directory (0700, the socket
 * itself 0600) and every peer is checked with SO_PEERCRED: only the user
 * who created the sandbox may drive it. */
#define _GNU_SOURCE
#include "core/plan.h"
#include "core/supervisor.h"
#include "core/syscalls.h"
#include "core/model.h"
#include "controls/rlimit.h"
#include "controls/cgroup.h"
#include "core/audit.h"
#include "net/egress.h"
#include "persist/control.h"
#include "controls/unixguard.h"
#include "core/refusals.h"
#include "core/reaper.h"
#include "persist/state.h"
#include "persist/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>

enum watch_kind { W_LISTEN, W_CLIENT, W_EXEC, W_TIMER, W_OWNER };

struct watch {
        enum watch_kind kind;
        struct conn *conn;
};

struct conn {
        struct watch client_w, exec_w;
        int fd;                  /* the client */
        int exec_fd;             /* our end of the exec's socket to pid 1, or -1 */
        struct sync_msg failure; /* the exec's first failure, type 0 if none */
        uint64_t notify_id;      /* its filter's listener in the unix socket guard, 0 if none */
        struct sync_msg started; /* a detached exec's pid and log (SYNC_STARTED), type 0 until then */
        struct refusals_mark mark; /* the sandbox's refusals when the exec began */
        long long oom_kills;     /* the cgroup's OOM kills then */
        bool last;               /* a pool member's one run: the member stops after it */
        struct conn *next;
};

struct control {
        char *dir, *name;
        struct sandbox_create_opts opts;
        char *upper, *work;      /* overlay layer (opts.overlay) */
        int listen_fd, epfd, timer_fd, ready_fd;
        int owner_fd;            /* pidfd of the pool daemon that owns us, or -1 */
        bool orphaned;           /* that owner is gone: stop once no exec runs */
        struct watch listen_w, timer_w, owner_w;
        struct run_plan *plan;
        struct cgroup *cg;
        int pidfd, sync_fd;
        int spare_fd;            /* our end of the next exec's socket, handed to pid 1 ahead (SYNC_SPARE), or -1 */
        bool ready, paused, stopping, kill_sent;
        bool served;             /* a pool member: its one run has begun */
        char *context;           /* a pool member: plan_caller_context of its plan (may hold secrets) */
        char *sources;           /* a pool member: plan_sources_identity when it was made */
        struct conn *conns;
        struct conn *closed[16];  /* freed during this dispatch round (never dereferenced) */
        int n_closed;
        long long created;
        json_t *summary;         /* policy figures for the state file, kept past the run */
        struct unixguard *guard; /* answers each exec's seccomp listener */
        struct refusals *refusals; /* what the sandbox was refused, for each exec's summary */
        struct egress *egress;   /* its proxy: CTL_NET_RULE changes what it allows */
        struct audit *audit;     /* records each such change */
};

/* A pool member (owned by its daemon) serves one brig run --pooled and
 * nothing else. (An ephemeral or BRIG_SANDBOX_OWNED sandbox has an owner
 * too, its creator: not a member.) */
static bool is_member(const struct control *c)
{
        return c->opts.owner_pid > 0 && !c->opts.ephemeral && !c->opts.owned;
}

bool control_orphaned(const struct control *c)
{
        return c && c->orphaned;
}

const char *control_dir(const struct control *c)
{
        return c->dir;
}

/* A sandbox someone may ask brig diff of later: bind mode (overlay has
 * its layer), and neither ephemeral (an OCI container, brig run over the
 * handles) nor a pool's member — those would pay a walk of the workspace
 * at every start for a diff nobody asks. */
bool control_keeps_changes(const struct control *c)
{
        /* overlay mode too: its layer has the workspace's changes, the
         * record those of its writable binds */
        return !c->opts.ephemeral && (!c->opts.owner_pid || c->opts.owned);
}

static int epoll_watch(struct control *c, int fd, struct watch *w)
{
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };
        return epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int control_new(const char *dir, const char *name, const struct sandbox_create_opts *opts, int ready_fd,
                struct control **ret, brig_error **err)
{
        struct control *c = calloc(1, sizeof *c);
        if (!c)
                return brig_err(err, ENOMEM, "control");
        c->listen_fd = c->epfd = c->timer_fd = c->pidfd = c->sync_fd = c->owner_fd = c->spare_fd = -1;
        c->ready_fd = ready_fd;
        c->dir = strdup(dir);
        c->name = strdup(name);
        c->opts = *opts;
        c->created = (long long)time(NULL);
        c->listen_w.kind = W_LISTEN;
        c->timer_w.kind = W_TIMER;
        c->owner_w.kind = W_OWNER;
        *ret = c;
        if (!c->dir || !c->name)
                return brig_err(err, ENOMEM, "control");
        if (opts->overlay) {
                c->upper = brig_strdup_printf("%s/upper", dir);
                c->work = brig_strdup_printf("%s/work", dir);
                if (!c->upper || !c->work)
                        return brig_err(err, ENOMEM, "control");
        }
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/ctl", dir) >= sizeof addr.sun_path)
                return brig_err(err, ENAMETOOLONG, "control socket path '%s/ctl'", dir);
        c->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->listen_fd < 0)
                return brig_err(err, errno, "control socket");
        unlink(addr.sun_path);
        /* 0600 from the start (umask), not chmod after bind: no window in
         * which another user could connect. */
        mode_t old = umask(0177);
        int r = bind(c->listen_fd, (struct sockaddr *)&addr, sizeof addr);
        umask(old);
        if (r < 0 || listen(c->listen_fd, 64) < 0)
                return brig_err(err, errno, "control socket '%s'", addr.sun_path);
        c->epfd = epoll_create1(EPOLL_CLOEXEC);
        c->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (c->epfd < 0 || c->timer_fd < 0)
                return brig_err(err, errno, "control event loop");
        if ((r = epoll_watch(c, c->listen_fd, &c->listen_w)) < 0 || (r = epoll_watch(c, c->timer_fd, &c->timer_w)) < 0)
                return brig_err(err, -r, "epoll");
        if (opts->owner_pid > 0) {
                /* The pidfd turns readable when the owner exits, SIGKILL
                 * included; one whose start time differs is gone already. */
                c->owner_fd = (int)syscall(SYS_pidfd_open, opts->owner_pid, 0);
                c->orphaned = c->owner_fd < 0 || state_process_start(opts->owner_pid) != opts->owner_start;
                if (c->owner_fd >= 0 && (r = epoll_watch(c, c->owner_fd, &c->owner_w)) < 0)
                        return brig_err(err, -r, "epoll");
                if (c->owner_fd >= 0)
                        fcntl(c->owner_fd, F_SETFD, FD_CLOEXEC);
        }
        return 0;
}

int control_prepare(struct control *c, struct run_plan *plan, brig_error **err)
{
        plan->persistent = true;
        plan->limits.want_freezer = true;
        if (c->opts.overlay) {
                plan->overlay_upper = c->upper;
                plan->overlay_work = c->work;
        }
        return 0;
}

static json_t *state_doc(struct control *c, const char *status)
{
        json_t *doc = json_object();
        json_object_set_new(doc, "name", json_string(c->name));
        json_object_set_new(doc, "status", json_string(status));
        json_object_set_new(doc, "supervisor_pid", json_integer(getpid()));
        json_object_set_new(doc, "supervisor_start", json_integer((json_int_t)state_process_start(getpid())));
        json_object_set_new(doc, "created", json_integer(c->created));
        json_object_set_new(doc, "workspace_mode", json_string(c->opts.overlay ? "overlay" : "bind"));
        /* kept across a start, restore or fork (sandbox_load_policy) */
        json_object_set_new(doc, "audit", json_boolean(c->opts.audit));
        /* A client asks for CTL_EXEC_ACK only where this says it is
         * answered: a supervisor of an older brig (a pool started before
         * an upgrade) would say nothing until the command ended. */
        json_object_set_new(doc, "exec_ack", json_true());
        if (c->opts.owned) {
                /* a start or restore watches the same owner (sandbox_load_policy),
                 * and the reaper removes it once neither lives (reaper.c) */
                json_object_set_new(doc, "owner_pid", json_integer(c->opts.owner_pid));
                json_object_set_new(doc, "owner_start", json_integer((json_int_t)c->opts.owner_start));
        }
        if (c->summary)
                json_object_update(doc, c->summary);
        json_t *cgs = json_array();
        struct strv paths = { 0 };
        if (cgroup_paths(c->cg, &paths) == 0)
                for (size_t i = 0; i < paths.n; i++)
                        json_array_append_new(cgs, json_string(paths.items[i]));
        strv_free(&paths);
        json_object_set_new(doc, "cgroups", cgs);
        return doc;
}

/* Record where we are; the log keeps a failure (nobody else would see it). */
static void save_state(struct control *c, const char *status)
{
        json_t *doc = state_doc(c, status);
        brig_error *err = NULL;
        if (!doc || state_write(c->dir, doc, &err) < 0)
                fprintf(stderr, "brig supervisor: %s\n", err ? err->msg : "state: out of memory");
        brig_error_free(&err);
        json_decref(doc);
}

int control_save_initial(struct control *c, brig_error **err)
{
        json_t *doc = state_doc(c, "creating");
        int r = doc ? state_write(c->dir, doc, err) : brig_err(err, ENOMEM, "state");
        json_decref(doc);
        return r;
}

void control_set_unixguard(struct control *c, struct unixguard *g)
{
        c->guard = g;
}

void control_set_refusals(struct control *c, struct refusals *r)
{
        c->refusals = r;
}

void control_set_egress(struct control *c, struct egress *e, struct audit *a)
{
        c->egress = e;
        c->audit = a;
}

int control_attach(struct control *c, struct run_plan *plan, struct cgroup *cg, int pidfd, int sync_fd,
                   brig_error **err)
{
        c->plan = plan;
        c->cg = cg;
        c->pidfd = pidfd;
        c->sync_fd = sync_fd;
        static const char *const nets[] = { [BRIG_NET_NONE] = "none", [BRIG_NET_PROXY] = "proxy",
                                            [BRIG_NET_HOST] = "host", [BRIG_NET_FILTERED] = "filtered" };
        /* how --memory holds: "rlimit" is each process's private memory only (docs/limits.md) */
        const char *mem = !plan->limits.memory      ? "none"
                          : plan->memory_unbounded  ? "rlimit"
                          : plan->memory_inherited  ? "inherited cgroup"
                                                    : "cgroup";
        c->summary = json_pack("{s:s, s:s, s:I, s:s, s:I, s:I, s:I}", "workspace", plan->workspace,
                               "net", nets[plan->net_mode], "memory", (json_int_t)plan->limits.memory,
                               "memory_enforced_by", mem, "pids", (json_int_t)plan->limits.pids, "timeout_ms",
                               (json_int_t)plan->limits.timeout_ms, "uid", (json_int_t)plan->sandbox_uid);
        /* What brig run prints after the run, kept for brig create and
         * start to print (the supervisor runs detached from them). */
        if (c->summary && plan->memory_unbounded && !(plan->policy->allow_degraded & DEGRADE_MEMORY)) {
                char text[512];
                rlimits_memory_text(plan, text, sizeof text);
                json_object_set_new(c->summary, "memory_warning", json_string(text));
        }
        struct strv lines = { 0 };
        json_t *warnings = json_array();
        if (c->summary && warnings && degraded_warnings(plan, &lines) == 0)
                for (size_t i = 0; i < lines.n; i++)
                        json_array_append_new(warnings, json_string(lines.items[i]));
        strv_free(&lines);
        if (c->summary)
                json_object_set_new(c->summary, "warnings", warnings);
        else
                json_decref(warnings);
        /* A pool member: its policy as its policy.json has it (the pool's,
         * which the member was made from), its workspace, and what of its
         * environment (ours, the pool daemon's) the plan read, which its
         * run's caller must share: compared here, so the caller reads
         * none of the member's files to claim it (pool.c) */
        if (is_member(c)) {
                _cleanup_free_ char *policy = state_read_file(c->dir, "policy.json", err);
                char *context = policy ? plan_caller_context(plan->policy) : NULL;
                char *sources = context ? plan_sources_identity(plan->policy, plan->workspace) : NULL;
                c->context = sources ? pool_identity(policy, plan->workspace, sources, context) : NULL;
                c->sources = sources;  /* a run as made compares them alone (start_exec) */
                if (context)
                        explicit_bzero(context, strlen(context));
                free(context);
                if (!c->context)
                        return policy ? brig_err(err, ENOMEM, "state") : -EIO;
        }
        return c->summary ? 0 : brig_err(err, ENOMEM, "state");
}

int control_poll_fd(const struct control *c)
{
        return c->epfd;
}

/* What the supervisor says on its ready pipe, once: ready, or why not. One
 * write well below PIPE_BUF: the reader gets it whole or not at all. */
struct ready_msg {
        uint32_t failed;
        struct wire_error error;
};

void control_tell_ready(int fd, const brig_error *err, const char *where)
{
        struct ready_msg m = { .failed = err != NULL };
        if (err)
                wire_error_encode(&m.error, err, where);
        (void)!write(fd, &m, sizeof m);
}

static void tell_creator(struct control *c, const brig_error *err)
{
        if (c->ready_fd < 0)
                return;
        control_tell_ready(c->ready_fd, err, NULL);
        /* On failure the pipe stays open until we exit: brig create waits
         * for that end of file before it removes the state directory, so
         * our last state write cannot race its removal. */
        if (!err)
                closep(&c->ready_fd);
}

int control_wait_ready(int fd, brig_error **err)
{
        struct ready_msg m;
        ssize_t n;
        do
                n = read(fd, &m, sizeof m);
        while (n < 0 && errno == EINTR);
        if (n != (ssize_t)sizeof m)
                return brig_err(err, EPROTO, "the sandbox's supervisor ended during setup (see its log)");
        if (!m.failed)
                return 0;
        return wire_error_decode(&m.error, sizeof m.error, NULL, err);
}

static void begin_stop(struct control *c);

/* The next exec's socket, to pid 1 ahead of the exec, so that pid 1 forks
 * and confines its child before the request comes (persist_init.c): the
 * request then costs one message and an execve. A pool member gets it
 * when it is ready (its one run is the point of it), any other sandbox
 * after each exec (so an idle one that never ran anything carries no
 * second process). Not behind the gVisor wall (each exec is runsc's). */
static void offer_spare(struct control *c)
{
        if (c->spare_fd >= 0 || !c->ready || c->stopping || !c->plan || c->plan->wall == BRIG_WALL_GVISOR ||
            c->served)
                return;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return;  /* the next exec makes its own */
        struct sync_msg m = { .type = SYNC_SPARE };
        if (sync_send_fd(c->sync_fd, &m, sv[1]) == 0)
                c->spare_fd = sv[0];
        else
                close(sv[0]);
        close(sv[1]);
}

void control_ready(struct control *c)
{
        c->ready = true;
        save_state(c, "running");
        tell_creator(c, NULL);
        if (is_member(c))
                offer_spare(c);
        if (c->orphaned && !c->conns)
                begin_stop(c);  /* its pool daemon died while it was being made */
}

void control_failed(struct control *c, const brig_error *err)
{
        tell_creator(c, err);
}

static void conn_close(struct control *c, struct conn *k)
{
        closep(&k->fd);     /* close() also drops it from the epoll set */
        closep(&k->exec_fd);  /* pid 1 sees the hangup and kills the command */
        for (struct conn **pp = &c->conns; *pp; pp = &(*pp)->next)
                if (*pp == k) {
                        *pp = k->next;
                        break;
                }
        if (c->n_closed < (int)ARRAY_SIZE(c->closed))
                c->closed[c->n_closed++] = k;
        free(k);
}

static void reply_error(int fd, int errnum, const char *fmt, ...) BRIG_PRINTF(3, 4);
static void reply_error(int fd, int errnum, const char *fmt, ...)
{
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_ERROR };
        char text[WIRE_ERROR_TEXT];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        brig_error e = { .exit_code = BRIG_EXIT_SETUP, .errnum = errnum, .msg = text };
        wire_error_encode(&h.error, &e, NULL);
        (void)ctl_send(fd, &h, NULL, 0, NULL, 0);
}

/* SIGTERM to every process inside, SIGKILL to pid 1 after the grace. */
static void begin_stop(struct control *c)
{
        if (c->stopping || c->pidfd < 0)
                return;
        c->stopping = true;
        closep(&c->spare_fd);
        save_state(c, "stopping");
        if (c->paused) {
                /* Frozen processes cannot act on SIGTERM: thaw first. */
                brig_error *e = NULL;
                (void)cgroup_freeze(c->cg, false, &e);
                brig_error_free(&e);
                c->paused = false;
        }
        siginfo_t info = { .si_signo = SIGTERM, .si_code = SI_QUEUE };
        info.si_int = BRIG_SIGNAL_EVERYONE;
        info.si_pid = getpid();
        info.si_uid = getuid();
        if (sys_pidfd_send_siginfo(c->pidfd, SIGTERM, &info) < 0) {
                (void)sys_pidfd_send_signal(c->pidfd, SIGKILL);
                c->kill_sent = true;
                return;
        }
        uint64_t ms = c->plan && c->plan->limits.kill_after_ms ? c->plan->limits.kill_after_ms : 5000;
        struct itimerspec it = { .it_value = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000 } };
        timerfd_settime(c->timer_fd, 0, &it, NULL);
}

static void start_exec(struct control *c, struct conn *k, char *buf, size_t len, int *fds, int nfds)
{
        struct exec_request req;
        if (k->exec_fd >= 0)
                return reply_error(k->fd, EBUSY, "one exec per connection");
        if (c->stopping)
                return reply_error(k->fd, ESHUTDOWN, "sandbox '%s' is stopping", c->name);
        if (!c->ready)
                return reply_error(k->fd, EAGAIN, "sandbox '%s' is still being created", c->name);
        if (c->paused)
                return reply_error(k->fd, EAGAIN, "sandbox '%s' is paused (brig resume %s)", c->name, c->name);
        if (exec_request_parse(buf, len, &req) < 0)
                return reply_error(k->fd, EBADMSG, "malformed exec request");
        bool tty = req.flags & CTL_EXEC_TTY, detach = req.flags & CTL_EXEC_DETACH;
        bool last = req.flags & CTL_EXEC_LAST, ack = req.flags & CTL_EXEC_ACK;
        /* A pooled run gets what a cold run of its caller would: the
         * environment this member's plan read must be the caller's. Told
         * apart (ESTALE) from a refusal: nothing ran, a cold run goes on.
         * A run that named its pool (CTL_EXEC_AS_MADE) asked for the pool's
         * own: nothing to compare. */
        bool as_made = last && (req.flags & CTL_EXEC_AS_MADE);
        bool other_env = last && !as_made && c->context && strcmp(req.context, c->context) != 0;
        /* ... but the directories it holds must still be those at the
         * workspace's and binds' paths: a harness that moved the last
         * task's checkout away and made a fresh one there would send the
         * run into the old one (the pool's daemon makes the next member
         * from the path) */
        _cleanup_free_ char *sources_now = as_made && c->sources && c->plan
                                                   ? plan_sources_identity(c->plan->policy, c->plan->workspace)
                                                   : NULL;
        bool moved = as_made && c->sources && (!sources_now || strcmp(sources_now, c->sources) != 0);
        /* The context is what the caller's plan read, --keep-env values
         * and env: secrets' real values among it: for this comparison
         * only. pid 1 is inside the sandbox, so the request goes on with
         * an empty one (the context ends the message), and it is wiped. */
        if (last && req.context) {
                size_t off = (size_t)(req.context - buf);
                explicit_bzero(buf + off, len - off);
                len = off + 1;
        }
        /* what pid 1's spare can serve (persist_init.c) */
        bool plain = !(req.flags & (CTL_EXEC_TTY | CTL_EXEC_DETACH | CTL_EXEC_FILEOP));
        exec_request_free(&req);
        /* An owner (a member's daemon, an owned sandbox's creator) that has
         * just ended, before this loop saw its pidfd: the pidfd says so the
         * moment it exits, so the run asks nobody else (pool.c reads no
         * pool.json before the exec). */
        struct pollfd owner = { .fd = c->owner_fd, .events = POLLIN };
        if (c->owner_fd >= 0 && poll(&owner, 1, 0) > 0)
                c->orphaned = true;
        if (last && c->orphaned)
                return reply_error(k->fd, ESHUTDOWN, "sandbox '%s' is stopping: its pool's daemon is gone", c->name);
        /* An owned sandbox whose owner is gone (brig mcp ended) goes once
         * the execs running now end: none is started meanwhile, or it
         * would live on as long as new ones overlapped. */
        if (c->orphaned && !is_member(c))
                return reply_error(k->fd, ESHUTDOWN, "sandbox '%s' is being removed: the process that owned it "
                                                     "(brig mcp, or a brig_sandbox_create with BRIG_SANDBOX_OWNED) "
                                                     "has ended", c->name);
        if (other_env)
                return reply_error(k->fd, ESTALE, "sandbox '%s' was made from another environment than the caller's",
                                   c->name);
        if (moved)
                return reply_error(k->fd, ESTALE, "sandbox '%s' holds a directory that no longer stands at its "
                                                  "workspace's or a bind's path", c->name);
        /* A pool member serves one brig run --pooled and nothing else: a
         * brig exec or file operation into it before the run would leave
         * what the run then finds. */
        bool member = is_member(c);
        if (member && (!last || c->served))
                return reply_error(k->fd, EPERM, "sandbox '%s' is a member of a warm pool: it serves %s", c->name,
                                   c->served ? "one run, which it has served"
                                             : "one brig run --pooled or --pool and nothing else");
        if (last && !member)
                return reply_error(k->fd, EINVAL, "sandbox '%s' is not a pool member: a run of its own is brig exec",
                                   c->name);
        if (tty && detach)
                return reply_error(k->fd, EINVAL, "a detached exec has no terminal");
        if (detach && nfds != 0)
                return reply_error(k->fd, EBADMSG, "a detached exec takes no stdio (its output goes to a log)");
        tty |= detach;  /* no stdio of the client's to check or pass */
        if (!tty && nfds != 3)
                return reply_error(k->fd, EBADMSG, "exec request without stdin, stdout and stderr");
        /* A directory (or O_PATH) descriptor as stdio would hand the
         * command a handle on a host directory to openat() from, the
         * CVE-2024-21626 pattern: stdio must be something to read or write. */
        for (int i = 0; !tty && i < nfds; i++) {
                struct stat st;
                int fl = fcntl(fds[i], F_GETFL);
                if (fstat(fds[i], &st) < 0 || S_ISDIR(st.st_mode) || fl < 0 || (fl & O_PATH))
                        return reply_error(k->fd, EBADF, "exec: %s is a directory or a path-only descriptor",
                                           i == 0 ? "stdin" : i == 1 ? "stdout" : "stderr");
        }
        /* What the exec's end is measured from, taken before it can
         * start: read after the request, an OOM kill of a command that
         * ran into --memory at once was in the count it is compared with,
         * and its first refusals were before its mark (and pid 1, woken by
         * the request, on this CPU as a rule, waited behind the read). */
        refusals_mark(c->refusals, &k->mark);
        k->oom_kills = cgroup_oom_kills(c->cg);
        /* The request goes on verbatim; pid 1 checks it again. On the
         * spare's socket it is the one message pid 1 gets for this exec. */
        const struct ctl_hdr *h = (const struct ctl_hdr *)buf;
        int r;
        if (plain && c->spare_fd >= 0) {
                if (ctl_send(c->spare_fd, h, buf + sizeof *h, len - sizeof *h, fds, nfds) == 0)
                        k->exec_fd = TAKE_FD(c->spare_fd);
                else
                        closep(&c->spare_fd);  /* pid 1 let it go: a socket of its own, as before */
        }
        int sv[2];
        if (k->exec_fd < 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return reply_error(k->fd, errno, "socketpair: %s", strerror(errno));
        if (k->exec_fd < 0) {
                /* queued on the socket before pid 1 receives the socket itself */
                r = ctl_send(sv[0], h, buf + sizeof *h, len - sizeof *h, fds, tty ? 0 : nfds);
                struct sync_msg m = { .type = SYNC_EXEC };
                if (r == 0)
                        r = sync_send_fd(c->sync_fd, &m, sv[1]);
                close(sv[1]);
                if (r < 0) {
                        close(sv[0]);
                        return reply_error(k->fd, -r, "hand the command to the sandbox: %s", strerror(-r));
                }
                k->exec_fd = sv[0];
        }
        test_pause("exec-sent");  /* the command may be running from here on */
        k->last = last;
        c->served |= last;
        /* before anything pid 1 says of it (a pty, a failure) */
        if (ack && ctl_reply(k->fd, CTL_OK, 0, NULL) < 0) {
                conn_close(c, k);  /* the client is gone: its command goes with it */
                return;
        }
        k->exec_w = (struct watch){ .kind = W_EXEC, .conn = k };
        if ((r = epoll_watch(c, k->exec_fd, &k->exec_w)) < 0) {
                reply_error(k->fd, -r, "epoll");
                conn_close(c, k);
        }
}

static json_t *net_rules_json(struct control *c)
{
        static const char *const nets[] = { [BRIG_NET_NONE] = "none", [BRIG_NET_PROXY] = "proxy",
                                            [BRIG_NET_HOST] = "host", [BRIG_NET_FILTERED] = "filtered" };
        json_t *doc = egress_policy_json(c->plan ? c->plan->policy->egress : NULL);
        if (doc && c->plan)
                json_object_set_new(doc, "mode", json_string(nets[c->plan->net_mode]));
        return doc;
}

/* A live rule change (brig_sandbox_net_rule). The rules are the policy's
 * own, which the proxy and the DNS stub judge by on every new connection
 * and query; this process is single-threaded, so the change lands
 * between two judgements. The policy is this supervisor's copy (read
 * from its configuration), never anyone else's: writable here though the
 * plan holds it const for the run sequence. */
/* Before its run a pool member is as the pool made it: the run gets the
 * pool's policy, which its owner's change of a ready member's rules,
 * limits or state (brig_sandbox_net_rule, brig pause) would not be, and
 * a paused member would refuse the run it was claimed for. Once its run
 * has taken it, that run's own. */
static bool refuse_unclaimed(struct control *c, struct conn *k, const char *why)
{
        if (!is_member(c) || c->served)
                return false;
        reply_error(k->fd, EPERM, "sandbox '%s' is a ready member of a warm pool, kept as the pool made it until a "
                                  "run takes it: %s", c->name, why);
        return true;
}

static void net_rule(struct control *c, struct conn *k, const struct ctl_hdr *h)
{
        int what = h->arg & 0xff;
        bool remove = h->arg & CTL_NET_REMOVE;
        char pattern[sizeof h->text];
        memcpy(pattern, h->text, sizeof pattern);
        pattern[sizeof pattern - 1] = '\0';
        if ((what != CTL_NET_ALLOW && what != CTL_NET_DENY) || (h->arg & ~(0xff | CTL_NET_REMOVE))) {
                reply_error(k->fd, EINVAL, "unknown network rule %d", h->arg);
                return;
        }
        if (!c->plan || !c->egress || (c->plan->net_mode != BRIG_NET_PROXY && c->plan->net_mode != BRIG_NET_FILTERED)) {
                reply_error(k->fd, EOPNOTSUPP, "sandbox '%s' has no egress proxy to judge by rules (its network is "
                                               "'%s'): create it with network mode proxy or filtered",
                            c->name, !c->plan ? "not ready" : c->plan->net_mode == BRIG_NET_HOST ? "host" : "none");
                return;
        }
        brig_policy *pol = (brig_policy *)c->plan->policy;
        brig_error *err = NULL;
        int r = remove ? egress_policy_remove_host(pol->egress, pattern, what == CTL_NET_DENY, &err)
                : what == CTL_NET_DENY ? egress_policy_deny_host(&pol->egress, pattern, &err)
                                       : egress_policy_allow_host(&pol->egress, pattern, &err);
        if (r < 0) {
                brig_err_prefix(&err, "sandbox '%s'", c->name);
                ctl_reply(k->fd, CTL_ERROR, 0, err);
                brig_error_free(&err);
                return;
        }
        /* a policy that had no rules at all has its first one now */
        egress_set_policy(c->egress, pol->egress);
        if (c->audit)
                audit_net(c->audit, json_pack("{s:s, s:s, s:s, s:s}", "event", "net_rule", "change",
                                              remove ? "remove" : "add", "action", what == CTL_NET_DENY ? "deny" : "allow",
                                              "host", pattern));
        ctl_reply(k->fd, CTL_OK, 0, NULL);
}

/* A live limit change (brig_sandbox_set_limit): the policy's setter
 * checks the value, the cgroup takes it, the report and the audit stream
 * say so. As net_rule, on this supervisor's own copy of the policy. */
static void set_limit(struct control *c, struct conn *k, const struct ctl_hdr *h)
{
        static const char *const names[] = { [BRIG_LIMIT_MEMORY] = "memory", [BRIG_LIMIT_PIDS] = "pids",
                                             [BRIG_LIMIT_CPUS_MILLI] = "cpus" };
        char text[sizeof h->text], *end = NULL;
        memcpy(text, h->text, sizeof text);
        text[sizeof text - 1] = '\0';
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (h->arg != BRIG_LIMIT_MEMORY && h->arg != BRIG_LIMIT_PIDS && h->arg != BRIG_LIMIT_CPUS_MILLI) {
                reply_error(k->fd, EINVAL, "limit %d: only memory, pids and cpus change while a sandbox runs",
                            h->arg);
                return;
        }
        if (!*text || *end || errno || v == 0) {
                reply_error(k->fd, EINVAL, "%s limit '%s': expected a number above 0", names[h->arg], text);
                return;
        }
        if (!c->plan || c->stopping) {
                reply_error(k->fd, ESHUTDOWN, "sandbox '%s' is %s", c->name, c->stopping ? "stopping" : "not ready");
                return;
        }
        brig_policy *pol = (brig_policy *)c->plan->policy;
        struct limits l = { 0 };
        brig_error *err = NULL;
        int r = brig_policy_set_limit(pol, (enum brig_limit)h->arg, v, &err);
        if (r == 0) {
                l.memory = h->arg == BRIG_LIMIT_MEMORY ? v : 0;
                l.pids = h->arg == BRIG_LIMIT_PIDS ? v : 0;
                l.cpus_millis = h->arg == BRIG_LIMIT_CPUS_MILLI ? v : 0;
                r = cgroup_update(c->cg, &l, &err);
        }
        if (r < 0) {
                brig_err_prefix(&err, "sandbox '%s'", c->name);
                ctl_reply(k->fd, CTL_ERROR, 0, err);
                brig_error_free(&err);
                return;
        }
        /* the figures the next report and oom_check give */
        c->plan->limits.memory = l.memory ? l.memory : c->plan->limits.memory;
        c->plan->limits.pids = l.pids ? l.pids : c->plan->limits.pids;
        c->plan->limits.cpus_millis = l.cpus_millis ? l.cpus_millis : c->plan->limits.cpus_millis;
        audit_change(c->audit, "limit_change", json_pack("{s:s, s:I}", "limit", names[h->arg], "value",
                                                          (json_int_t)v));
        ctl_reply(k->fd, CTL_OK, 0, NULL);
}

static void net_rules(struct control *c, struct conn *k)
{
        json_t *doc = net_rules_json(c);
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text) {
                reply_error(k->fd, ENOMEM, "network rules");
                return;
        }
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_OK };
        size_t len = strlen(text) + 1;
        if (len > CTL_MAX_MSG - sizeof h) {
                reply_error(k->fd, E2BIG, "network rules: more than fits one message");
                return;
        }
        (void)ctl_send(k->fd, &h, text, len, NULL, 0);
}

static void on_client(struct control *c, struct conn *k)
{
        _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
        int fds[CTL_MAX_FDS], nfds = 0;
        ssize_t n = buf ? ctl_recv(k->fd, buf, CTL_MAX_MSG, fds, &nfds) : -ENOMEM;
        if (n == -EAGAIN)
                return;
        if (n <= 0) {
                /* The client left: so does its command. A pool member's
                 * run then is over as if it had ended: the member serves
                 * nobody else, so it stops now (else it lived on, served,
                 * until the pool stopped). */
                bool last = k->last;
                conn_close(c, k);
                if (last)
                        begin_stop(c);
                return;
        }
        const struct ctl_hdr *h = (const struct ctl_hdr *)buf;
        brig_error *err = NULL;
        switch (h->type) {
        case CTL_EXEC:
                start_exec(c, k, buf, (size_t)n, fds, nfds);
                break;
        case CTL_SIGNAL:
                if (k->exec_fd >= 0)
                        (void)ctl_send(k->exec_fd, h, NULL, 0, NULL, 0);
                break;
        case CTL_NET_RULE:
                if (!refuse_unclaimed(c, k, "its network rules are the pool's (start the pool with the --allow-host "
                                              "its runs need)"))
                        net_rule(c, k, h);
                break;
        case CTL_NET_RULES:
                net_rules(c, k);
                break;
        case CTL_SET_LIMIT:
                if (!refuse_unclaimed(c, k, "its limits are the pool's (start the pool with the --memory, --pids "
                                              "or --cpus its runs should have)"))
                        set_limit(c, k, h);
                break;
        case CTL_STOP:
                begin_stop(c);
                ctl_reply(k->fd, CTL_OK, 0, NULL);
                break;
        case CTL_PAUSE:
        case CTL_RESUME: {
                bool freeze = h->type == CTL_PAUSE;
                if (refuse_unclaimed(c, k, "it is not paused or resumed, or the run claimed "
                                                  "for it would be refused (brig pool --stop ends the pool)"))
                        break;
                if (c->stopping) {
                        reply_error(k->fd, ESHUTDOWN, "sandbox '%s' is stopping", c->name);
                        break;
                }
                if (cgroup_freeze(c->cg, freeze, &err) < 0) {
                        brig_err_prefix(&err, "%s '%s'", freeze ? "pause" : "resume", c->name);
                        ctl_reply(k->fd, CTL_ERROR, 0, err);
                        brig_error_free(&err);
                        break;
                }
                c->paused = freeze;
                save_state(c, freeze ? "paused" : "running");
                ctl_reply(k->fd, CTL_OK, 0, NULL);
                break;
        }
        default:
                reply_error(k->fd, EBADMSG, "unknown request %u", h->type);
                break;
        }
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
}

/* lines '\0' {"refusals": [...], "refusals_dropped": N} '\0' usage '\0':
 * what was refused since the exec began, for its report as brig run's has
 * it, and the exec's CPU and memory (exec_usage_json). The
 * causes that do not fit one message are counted as dropped. NULL: out of
 * memory (the lines go alone, the report then lists nothing). */
static char *status_payload(struct control *c, struct conn *k, const char *lines, const struct sync_msg *m,
                            size_t *len)
{
        json_t *list = refusals_json_since(c->refusals, &k->mark);
        uint64_t dropped = refusals_dropped_since(c->refusals, &k->mark);
        struct exec_usage u = { m->cpu_user_us / 1000, m->cpu_system_us / 1000,
                                m->maxrss_kb > 0 ? m->maxrss_kb * 1024 : 0 };
        _cleanup_free_ char *usage = exec_usage_json(&u);
        if (!usage)
                return NULL;
        size_t room = CTL_MAX_MSG - sizeof(struct ctl_hdr) - strlen(lines) - strlen(usage) - 3;
        char *json = NULL;
        for (;;) {
                json_t *doc = json_pack("{s:O, s:I}", "refusals", list, "refusals_dropped", (json_int_t)dropped);
                json = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
                json_decref(doc);
                size_t n = json_array_size(list);
                if (!json || strlen(json) < room || n == 0)
                        break;
                free(json);
                json = NULL;
                json_array_remove(list, n - 1);
                dropped++;
        }
        json_decref(list);
        char *out = NULL;
        /* the exec's usage third: a client of before it reads two parts */
        int n = json && strlen(json) < room ? asprintf(&out, "%s%c%s%c%s", lines, '\0', json, '\0', usage) : -1;
        free(json);
        if (n < 0)
                return NULL;
        *len = (size_t)n + 1;
        return out;
}

/* A command SIGKILLed while the cgroup's OOM kill count rose was ended by
 * the memory limit, as brig run's explain() says: one summarized refusal
 * (control.h's payload carries it; the client makes the reason "oom" of
 * it, exec.c), so the exec's result names --memory instead of "signal 9". */
static void oom_check(struct control *c, struct conn *k, int status)
{
        /* only a SIGKILL can be the OOM killer's: no cgroup files read
         * between an ordinary exit and its status */
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL || !c->plan)
                return;
        long long now = cgroup_oom_kills(c->cg);
        if (now <= k->oom_kills)
                return;
        long long n = now - k->oom_kills;
        char v[64], what[96], why[160];
        size_text(v, sizeof v, c->plan->limits.memory);
        snprintf(what, sizeof what, "memory limit %s", v);
        snprintf(why, sizeof why, "killed: memory limit %s reached (%lld process%s killed; raise with --memory)", v,
                 n, n == 1 ? "" : "es");
        refusals_add_summarized(c->refusals, what, why, "--memory", 1);
}

/* What pid 1 says about one exec goes to its client. */
static void on_exec(struct control *c, struct conn *k)
{
        struct sync_msg m;
        int passed = -1;
        int r = sync_recv(k->exec_fd, &m, &passed);
        if (r < 0 && r != -EBADMSG && r != -ECONNRESET)
                return;
        if (r > 0 && m.type == SYNC_PTY && passed >= 0) {
                struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_PTY };
                (void)ctl_send(k->fd, &h, NULL, 0, &passed, 1);
                close(passed);
                return;
        }
        if (r > 0 && m.type == SYNC_NOTIFY_FD && passed >= 0 && c->guard) {
                k->notify_id = unixguard_add_listener(c->guard, passed);  /* the command's filter asks us */
                return;
        }
        closep(&passed);
        if (r > 0 && m.type == SYNC_STARTED) {
                k->started = m;  /* it runs once the socket closes (execve) without a failure */
                return;
        }
        if (r > 0 && (m.type == SYNC_ERROR || m.type == SYNC_EXEC_FAILED)) {
                if (k->failure.type == 0)
                        k->failure = m;
                return;
        }
        if (r > 0 && m.type != SYNC_STATUS)
                return;
        struct ctl_hdr h = { .magic = CTL_MAGIC };
        char lines[sizeof ((brig_result *)0)->refusals] = "";
        /* Behind the gVisor wall an OOM kill during the exec is the
         * Sentry's, which holds every exec's memory: runsc exec may give
         * its own status (128, "WaitPID failed: EOF") before pid 1 has
         * seen the sandbox end, and that status would hide why. One read
         * of the cgroup's counter, for gVisor's execs only. */
        bool sentry_oom = r > 0 && c->plan && c->plan->wall == BRIG_WALL_GVISOR &&
                          cgroup_oom_kills(c->cg) > k->oom_kills;
        if (k->failure.type) {
                /* checked here, where it crosses from the sandbox's side,
                 * and passed on in the same form */
                brig_error *e = NULL;
                h.type = CTL_ERROR;
                (void)sync_failure(&k->failure, NULL, &e);
                wire_error_encode(&h.error, e, NULL);
                brig_error_free(&e);
        } else if (r == 0 && k->started.type) {
                h.type = CTL_STARTED;
                h.arg = k->started.status;
                snprintf(h.text, sizeof h.text, "%s", k->started.text);
        } else if (r > 0 && !sentry_oom) {
                h.type = CTL_STATUS;
                h.arg = m.status;
                h.exit_code = m.exit_code;  /* 124: its timeout ran out */
                /* what the unix socket guard refused this command, for the client to say */
                uint64_t refused = unixguard_take_refused(c->guard, k->notify_id, h.text, sizeof h.text);
                h.errnum = refused > INT32_MAX ? INT32_MAX : (int32_t)refused;
                oom_check(c, k, m.status);
                /* and every refusal since it began, as the summary's lines */
                refusals_text_since(c->refusals, &k->mark, REFUSALS_LINES, lines, sizeof lines);
        } else {
                h.type = CTL_ERROR;
                brig_error *e = NULL;
                /* the OOM killer may have ended the sandbox's pid 1 or, behind
                 * the gVisor wall, the Sentry that holds every exec's memory */
                char v[64] = "";
                if (c->plan && cgroup_oom_kills(c->cg) > k->oom_kills)
                        size_text(v, sizeof v, c->plan->limits.memory);
                if (*v)
                        brig_err(&e, 0, "sandbox '%s' ended while the command ran: its memory limit %s was reached and "
                                 "the kernel's out-of-memory killer ended %s (raise with --memory)", c->name, v,
                                 c->plan->wall == BRIG_WALL_GVISOR ? "gVisor's Sentry, which holds the memory of "
                                                                     "every exec" : "the sandbox");
                else
                        brig_err(&e, 0, "sandbox '%s' ended while the command ran", c->name);
                wire_error_encode(&h.error, e, NULL);
                brig_error_free(&e);
        }
        size_t len = lines[0] ? strlen(lines) + 1 : 0;
        _cleanup_free_ char *payload = h.type == CTL_STATUS ? status_payload(c, k, lines, &m, &len) : NULL;
        /* A served member's end (below) yields to its client from the
         * moment the client wakes, and then to the next run
         * (persist_init.c's end_served): on equal terms, it kept the core
         * the client was woken on for a fifth of a millisecond before the
         * client could exit. */
        if (k->last) {
                member_end_yield();
                session_yield(MEMBER_END_NICE);
        }
        (void)ctl_send(k->fd, &h, payload ? payload : lines, len, NULL, 0);
        bool last = k->last;
        conn_close(c, k);
        if (last) {
                /* served: pid 1 killed what the run left; the rest goes now */
                test_pause("pool-member-end");
                begin_stop(c);
        }
        else if (!is_member(c))
                offer_spare(c);  /* for the next exec (a pool member's came when it was ready) */
}

void session_yield(int nice)
{
        char now[96] = "";
        _cleanup_close_ int in = open("/proc/self/autogroup", O_RDONLY | O_CLOEXEC);
        ssize_t n = in >= 0 ? read(in, now, sizeof now - 1) : -1;
        const char *at = n > 0 ? strstr(now, " nice ") : NULL;  /* "/autogroup-N nice V\n" */
        if (!at || strtol(at + strlen(" nice "), NULL, 10) >= nice)
                return;
        char text[16];
        int len = snprintf(text, sizeof text, "%d", nice);
        _cleanup_close_ int out = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
        if (out >= 0)
                (void)!write(out, text, (size_t)len);
}

static void on_accept(struct control *c)
{
        int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return;
        /* The directory is already 0700; check the peer anyway: a socket
         * passed around must not let another user run commands in here. */
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
                close(fd);
                return;
        }
        struct conn *k = calloc(1, sizeof *k);
        if (!k) {
                close(fd);
                return;
        }
        k->fd = fd;
        k->exec_fd = -1;
        k->client_w = (struct watch){ .kind = W_CLIENT, .conn = k };
        k->next = c->conns;
        c->conns = k;
        if (epoll_watch(c, fd, &k->client_w) < 0) {
                conn_close(c, k);
                return;
        }
        /* The front end's plain exec connects with its request ready and
         * sends it at once: read now when it is there, instead of after
         * another turn of the supervisor's loop (a poll of every descriptor,
         * then this epoll set) on every such exec's way. A client that
         * connects first and sends later (libbrig's) costs this one poll. */
        struct pollfd q = { .fd = fd, .events = POLLIN };
        if (poll(&q, 1, 0) > 0)
                on_client(c, k);
}

void control_dispatch(struct control *c)
{
        struct epoll_event evs[ARRAY_SIZE(c->closed)];
        int n = epoll_wait(c->epfd, evs, ARRAY_SIZE(evs), 0);
        c->n_closed = 0;
        /* One event may free a connection that a later event of this batch
         * points into: skip those by address, without reading them (the
         * connection's other descriptor is closed too, so nothing is lost;
         * level-triggered epoll reports anything still pending again). */
        for (int i = 0; i < n; i++) {
                struct watch *w = evs[i].data.ptr;
                bool gone = false;
                for (int j = 0; j < c->n_closed && !gone; j++)
                        gone = w == &c->closed[j]->client_w || w == &c->closed[j]->exec_w;
                if (gone)
                        continue;
                switch (w->kind) {
                case W_LISTEN:
                        on_accept(c);
                        break;
                case W_CLIENT:
                        on_client(c, w->conn);
                        break;
                case W_EXEC:
                        on_exec(c, w->conn);
                        break;
                case W_TIMER: {
                        uint64_t t;
                        (void)!read(c->timer_fd, &t, sizeof t);
                        if (c->pidfd >= 0 && !c->kill_sent) {
                                (void)sys_pidfd_send_signal(c->pidfd, SIGKILL);
                                c->kill_sent = true;
                        }
                        break;
                }
                case W_OWNER:
                        closep(&c->owner_fd);  /* leaves the epoll set */
                        c->orphaned = true;
                        break;
                }
        }
        /* A pool member whose daemon is gone serves nobody: it stops once
         * the exec it may be serving (a claimed member) has ended. Its
         * state goes with the next brig's sweep of the dead pool. */
        if (c->orphaned && c->ready && !c->conns)
                begin_stop(c);
}

bool control_on_signal(struct control *c, int sig)
{
        if (sig == SIGCHLD)
                return false;
        /* The supervisor is asked to end: stop the sandbox properly. */
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
                begin_stop(c);
        return true;  /* nothing else concerns a sandbox without a command */
}

void control_finish(struct control *c)
{
        if (!c)
                return;
        _cleanup_free_ char *sock = brig_strdup_printf("%s/ctl", c->dir);
        if (sock)
                unlink(sock);
        c->plan = NULL;  /* gone with spawn_run */
        c->cg = NULL;
        save_state(c, "stopped");  /* also when a start failed: nothing runs */
}

void control_free(struct control *c)
{
        if (!c)
                return;
        while (c->conns)
                conn_close(c, c->conns);
        closep(&c->listen_fd);
        closep(&c->epfd);
        closep(&c->timer_fd);
        closep(&c->ready_fd);
        closep(&c->owner_fd);
        closep(&c->spare_fd);
        free(c->dir);
        free(c->name);
        free(c->upper);
        free(c->work);
        if (c->context)
                explicit_bzero(c->context, strlen(c->context));
        free(c->context);
        free(c->sources);
        json_decref(c->summary);
        free(c);
}
