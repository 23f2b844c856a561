/* control.h — the messages of a persistent sandbox: `brig exec` and the
 * other clients talk to the supervisor over its control socket, and the
 * supervisor talks to the sandbox's pid 1 over one socket per exec. Every
 * socket is AF_UNIX SOCK_SEQPACKET: a message arrives whole or not at all,
 * with the descriptors it carries (SCM_RIGHTS). */
#ifndef BRIG_CONTROL_H
#define BRIG_CONTROL_H

#include "core/error.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>

#define CTL_MAGIC 0x62726732u      /* "brg2": refuse a stray peer's bytes early (brg1: before the
                                     * errors' wire form) */
#define CTL_MAX_MSG (128 * 1024)    /* argv + environment of one exec */
#define CTL_MAX_FDS 4              /* stdio; pid 1 to its pre-forked exec child adds the cwd */
/* The nice value a pool member's supervisor and pid 1 take once its one
 * run is served: their end (state, cgroups, mounts, namespaces) then
 * yields to the next run instead of sharing the cores with it. */
#define MEMBER_END_NICE 10

/* Take MEMBER_END_NICE, unless already nicer (a pool started under
 * nice 15 stays at 15: as root, setpriority would raise it), and the
 * idle class: a process of any other class woken on this core (the run's
 * client, as its status reaches it) takes the core at once. Entering
 * SCHED_IDLE needs no privilege (leaving it would, and nothing here
 * does); it still runs, as any process the host has work for. */
static inline void member_end_yield(void)
{
        errno = 0;
        int now = getpriority(PRIO_PROCESS, 0);
        if (errno == 0 && now < MEMBER_END_NICE)
                (void)setpriority(PRIO_PROCESS, 0, MEMBER_END_NICE);
        struct sched_param none = { 0 };
        (void)sched_setscheduler(0, SCHED_IDLE, &none);
}

/* The same for this session's scheduling group (the kernel's autogroup:
 * each session's processes are weighed as one group against every other
 * session's, so a nice value only counts among the processes of its own
 * session). A pool member's supervisor and pid 1 are a session of their
 * own, as is its daemon: without this their nice 10 changed nothing for
 * a run, whose processes are other sessions. Only ever raised. Best
 * effort: there is no autogroup without CONFIG_SCHED_AUTOGROUP, and an
 * unprivileged process may change one only every tenth of a second
 * (EAGAIN). */
BRIG_INTERNAL void session_yield(int nice);

enum ctl_type {
        /* client → supervisor (and exec requests on to pid 1) */
        CTL_EXEC = 1,     /* hdr + cwd\0 argv...\0 env...\0 (+ context\0 with CTL_EXEC_LAST); fds:
                           * stdin, stdout, stderr (none with a tty or detached) */
        CTL_SIGNAL,       /* arg = signal number, for the running exec */
        CTL_STOP,
        CTL_PAUSE,
        CTL_RESUME,
        CTL_NET_RULE,     /* arg = CTL_NET_* | CTL_NET_REMOVE; text = the host pattern (brig_sandbox_net_rule) */
        CTL_NET_RULES,    /* answered with CTL_OK and the rules in force as JSON after the header */
        CTL_SET_LIMIT,    /* arg = enum brig_limit (memory, pids, cpus); text = the value, decimal
                           * (brig_sandbox_set_limit) */
        /* supervisor → client */
        CTL_OK = 100,
        CTL_ERROR,        /* error (wire_error, error.h) */
        CTL_STATUS,       /* arg = the command's wait status; errnum, text: connections the unix
                           * socket guard refused it, and the first one's path;
                           * payload: the summary's lines of what was refused while
                           * it ran, '\0', {"refusals": [...], "refusals_dropped": N}
                           * for its report, '\0', the exec's CPU and memory as
                           * exec_usage_json writes them, '\0' (control.c, exec.c) */
        CTL_PTY,          /* carries the master of the exec's pty */
        CTL_STARTED,      /* a detached exec runs: arg = its pid, text = its log inside */
};

enum ctl_flags {
        CTL_EXEC_TTY = 1 << 0,
        CTL_EXEC_DETACH = 1 << 1,  /* no stdio: output to a log inside, CTL_STARTED once it runs */
        CTL_EXEC_FILEOP = 1 << 2,  /* argv is a file operation (fileops.c) run by the confined child
                                    * instead of execve; never with a tty or detached */
        CTL_EXEC_LAST = 1 << 3,    /* a pool member's one run (brig run --pooled): when the command
                                    * ends, pid 1 kills and reaps whatever it left before the status
                                    * goes back, and the member takes no other exec; never detached
                                    * nor a file operation (pool.c, persist_init.c) */
        CTL_EXEC_AS_MADE = 1 << 4, /* with CTL_EXEC_LAST only: the run named its pool (brig run --pool
                                    * NAME) and takes the member as the pool made it, its environment
                                    * the pool's: no context to compare (control.c) */
        CTL_EXEC_ACK = 1 << 5,     /* answer CTL_OK once the supervisor has passed the exec on to
                                    * pid 1: a refusal (a member stopping, its workspace moved) is
                                    * then the start's answer, not the wait's, and the caller that
                                    * returns before the command ends (brig_pool_exec_start) takes
                                    * the next member instead (engine.c); asked of a supervisor
                                    * whose state.json says "exec_ack": true */
};

enum ctl_net_rule {
        CTL_NET_ALLOW = 1,
        CTL_NET_DENY = 2,
        CTL_NET_REMOVE = 1 << 8,
};

/* Where a detached exec's output goes, inside the sandbox: its own /tmp,
 * named by the command's pid there (pid 1 and the command agree on it). */
#define CTL_DETACH_LOG "/tmp/brig-exec-%d.log"

struct ctl_hdr {
        uint32_t magic;
        uint32_t type;
        uint32_t flags;
        uint32_t argc;
        uint32_t envc;
        int32_t arg;          /* signal, wait status */
        int32_t exit_code;
        int32_t errnum;
        uint64_t timeout_ms;  /* exec: 0 for none */
        char text[1024];      /* CTL_STATUS, CTL_STARTED */
        struct wire_error error;  /* CTL_ERROR: checked by ctl_error */
};

/* Send one message (hdr followed by `len` payload bytes) with up to
 * CTL_MAX_FDS descriptors. Returns 0 or -errno. */
BRIG_INTERNAL int ctl_send(int fd, const struct ctl_hdr *h, const void *payload, size_t len, const int *fds,
                           int nfds);
/* Receive one message into buf (at least sizeof(struct ctl_hdr)); *nfds
 * descriptors land in fds (CLOEXEC). Returns the message length, 0 at end
 * of stream, or -errno (-EBADMSG for anything malformed). */
BRIG_INTERNAL ssize_t ctl_recv(int fd, void *buf, size_t cap, int *fds, int *nfds);
BRIG_INTERNAL int ctl_reply(int fd, enum ctl_type type, int arg, const brig_error *err);
/* A CTL_ERROR's error, checked (wire_error_decode): into *err, its exit
 * code into *exit_code (may be NULL). Returns -errno. */
BRIG_INTERNAL int ctl_error(const struct ctl_hdr *h, int *exit_code, brig_error **err);

/* What names a pool member and what its one run must bring (CTL_EXEC_LAST
 * carries it, the member's supervisor compares it): the policy as JSON, as
 * the member's policy.json has it, the workspace, what stands at the
 * workspace's and binds' paths (plan_sources_identity), and
 * plan_caller_context.
 * NULL when out of memory; free with explicit_bzero (the context may hold
 * secrets' values). */
BRIG_INTERNAL char *pool_identity(const char *policy_json, const char *workspace, const char *sources,
                                  const char *context);

/* The error of an exec whose connection to the supervisor ended before
 * its status came (errnum: EPIPE for an end, else what broke it); the
 * engine's client and the front end say it in the same words. */
BRIG_INTERNAL int exec_gone(brig_error **err, const char *name, int errnum);

/* The error of an exec whose request the supervisor never read: its end
 * closed first, or reset the connection with the request unread (the
 * kernel's af_unix does so, for an unread message or a connection never
 * accepted), nothing having been sent or answered since. Nothing ran:
 * ESHUTDOWN, as a supervisor that refuses an exec while it stops says,
 * so a pool's run takes the next member or a new sandbox (pool.c). */
BRIG_INTERNAL int exec_not_taken(brig_error **err, const char *name);
/* The exec request message (hdr + payload, *len bytes; free()): o's
 * command, environment, cwd, timeout and detach, a tty when `tty`, and,
 * with CTL_EXEC_LAST in flags, the pool member's `context`. */
BRIG_INTERNAL char *exec_request_build(const brig_exec_opts *o, bool tty, uint32_t flags, const char *context,
                                       size_t *len, brig_error **err);
/* A parsed exec request; the strings point into the message buffer. */
struct exec_request {
        uint32_t flags;
        uint64_t timeout_ms;
        const char *cwd;      /* NULL: the sandbox's default */
        char **argv;          /* NULL-terminated (allocated) */
        char **env;           /* NAME=VALUE, NULL-terminated (allocated) */
        const char *context;  /* CTL_EXEC_LAST: the caller's plan_caller_context, else NULL */
};
/* Check and split an exec message; -EBADMSG when malformed. */
BRIG_INTERNAL int exec_request_parse(const void *msg, size_t len, struct exec_request *req);
BRIG_INTERNAL void exec_request_free(struct exec_request *req);

#endif
