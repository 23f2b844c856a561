/* supervisor.h — the supervisor's event loop (supervisor.c) and the
 * control of a persistent sandbox it serves (persist/control.c). */
#ifndef BRIG_CORE_SUPERVISOR_H
#define BRIG_CORE_SUPERVISOR_H

#include "core/plan.h"
#include "core/sync.h"

/* control.c: a persistent sandbox's control socket (brig exec, stop,
 * pause); NULL for brig run. */
struct control;
struct cgroup;
/* Before clone: mark the plan persistent, add the overlay layer, ask for a freezer. */
BRIG_INTERNAL int control_prepare(struct control *c, struct run_plan *plan, brig_error **err);
/* The sandbox's state directory. */
BRIG_INTERNAL const char *control_dir(const struct control *c);
/* Does it keep a record since create for brig diff (changes.c)? */
BRIG_INTERNAL bool control_keeps_changes(const struct control *c);
BRIG_INTERNAL int control_attach(struct control *c, struct run_plan *plan, struct cgroup *cg, int pidfd,
                                 int sync_fd, brig_error **err);
struct unixguard;
/* Each exec's seccomp listener goes to the supervisor's guard (unixguard.c). */
BRIG_INTERNAL void control_set_unixguard(struct control *c, struct unixguard *g);
struct refusals;
BRIG_INTERNAL void control_set_refusals(struct control *c, struct refusals *r);
/* The proxy whose rules CTL_NET_RULE changes, and the audit stream that
 * records each change (either may be NULL). */
struct egress;
struct audit;
BRIG_INTERNAL void control_set_egress(struct control *c, struct egress *e, struct audit *a);
BRIG_INTERNAL int control_poll_fd(const struct control *c);
BRIG_INTERNAL void control_dispatch(struct control *c);
BRIG_INTERNAL void control_ready(struct control *c);
/* A signal the supervisor received; true when the control consumed it. */
BRIG_INTERNAL bool control_on_signal(struct control *c, int sig);

/* supervisor.c */
struct supervision {
        int pidfd;
        int sync_fd;
        struct terminal *term;
        uint64_t timeout_ms;     /* 0: none */
        uint64_t kill_after_ms;
        struct audit *audit;     /* NULL without --audit */
        struct unixguard *guard; /* answers the seccomp listeners (unixguard.c) */
        struct egress *egress;   /* proxy mode: serves the listeners the sandbox sends */
        struct control *control; /* persistent sandbox: serves brig exec and friends */
        struct sshagent *agent;  /* --ssh-agent: relays the sandbox's agent socket (sshagent.c) */
        struct timings *timings; /* --timings, else NULL */
        /* brig run whose caller exits at its return: the command's status
         * ends the loop once pid 1 says it is alone in the sandbox, before
         * pid 1 itself is gone (spawn.c finishes the rest after) */
        bool end_at_status;
        bool timed_out;          /* out */
        char net_fallback[256];  /* out: why filtered mode fell back (SYNC_NETWORK's text) */
        /* out */
        int wait_status;         /* of the command, as pid 1 reported it */
        bool have_status;
        bool init_left;          /* out: ended at the status, pid 1 not yet reaped */
        uint64_t cpu_user_us, cpu_system_us;  /* out, with init_left: pid 1's wait4 figures */
        int64_t maxrss_kb;
        struct sync_msg failure; /* SYNC_ERROR / SYNC_EXEC_FAILED, type 0 if none */
        int init_status;
};
BRIG_INTERNAL int supervise(struct supervision *s, brig_error **err);

#endif
