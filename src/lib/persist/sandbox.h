/* sandbox.h — persistent sandboxes inside libbrig (sandbox.c, control.c). */
#ifndef BRIG_SANDBOX_H
#define BRIG_SANDBOX_H

#include "core/sequence.h"

#include <jansson.h>

struct sandbox_create_opts {
        bool overlay;   /* --workspace-mode overlay */
        /* A pool member: the pool daemon (pid, start time). When it is
         * gone, the member serves nobody: it stops once no exec runs. */
        pid_t owner_pid;
        unsigned long long owner_start;
        bool pool_member;  /* the daemon's own: the one maker of names beginning "pool-" */
        bool ephemeral; /* removed when its owner closes it or ends (brig_sandbox_new) */
        /* BRIG_SANDBOX_OWNED: removed when its owner (owner_pid) ends;
         * stopped and started again (a restore) it stays, and watches the
         * same owner. Not a pool member. Kept in state.json. */
        bool owned;
        bool audit;     /* the audit stream to the state directory's audit.jsonl */
        /* An ephemeral sandbox's hold (sandbox_new_dir): flocked by its
         * creator, then by its supervisor for its whole life, so that the
         * reaper can tell a state directory nobody will ever finish or
         * remove (its creator killed before the supervisor started). */
        bool has_hold;
        int hold_fd;
};

/* control.c: the supervisor's side */
BRIG_INTERNAL int control_new(const char *dir, const char *name, const struct sandbox_create_opts *opts,
                              int ready_fd, struct control **ret, brig_error **err);
BRIG_INTERNAL int control_save_initial(struct control *c, brig_error **err);
/* Setup failed before the sandbox was ready: tell `brig create`. */
BRIG_INTERNAL void control_failed(struct control *c, const brig_error *err);
/* The sandbox has ended: remove the socket, record "stopped". */
BRIG_INTERNAL void control_finish(struct control *c);
BRIG_INTERNAL void control_free(struct control *c);
/* Its owner (a pool's daemon, an ephemeral or owned sandbox's creator) is gone. */
BRIG_INTERNAL bool control_orphaned(const struct control *c);
/* `brig create`'s side: wait for the supervisor's word (ready or error). */
BRIG_INTERNAL int control_wait_ready(int fd, brig_error **err);
/* The supervisor's side of that pipe: ready (err NULL) or the error, in
 * its wire form (error.h), located at `where` (NULL: none). */
BRIG_INTERNAL void control_tell_ready(int fd, const brig_error *err, const char *where);

/* sandbox.c: shared with snapshot.c */
BRIG_INTERNAL int sandbox_launch(const char *dir, const char *name, const brig_policy *p,
                                 const struct sandbox_create_opts *opts, int lock, brig_error **err);
/* A connection to a running sandbox's control socket, or why not. */
BRIG_INTERNAL int sandbox_connect(const char *name, brig_error **err);
/* Run argv inside with these stdio descriptors; *exit_code gets its status. */
BRIG_INTERNAL int sandbox_run_in(const char *name, char *const argv[], const int *stdio, int *exit_code,
                                 brig_error **err);
BRIG_INTERNAL int sandbox_new_dir(const char *name, char **dir_out, int *lock_out, brig_error **err);
/* The same for an ephemeral sandbox: *hold_out gets the flocked hold
 * file SANDBOX_HOLD inside it (reaper.c); hold_out NULL: sandbox_new_dir. */
BRIG_INTERNAL int sandbox_new_dir_held(const char *name, char **dir_out, int *lock_out, int *hold_out,
                                       brig_error **err);
#define SANDBOX_HOLD "hold"
/* ".eph-OWNER-NAME": an ephemeral sandbox's directory until it has its hold */
#define SANDBOX_NEW_PREFIX ".eph-"
/* brig_sandbox_create with the internal options (a pool's owner). */
/* A name only a pool's daemon gives (POOL_MEMBER_PREFIX: pool_member_of, the sweep
 * of a dead pool removes what is so named): -EINVAL (said) for another. */
BRIG_INTERNAL int sandbox_name_not_a_pools(const char *name, brig_error **err);
BRIG_INTERNAL int sandbox_create(const char *name, const brig_policy *p, const struct sandbox_create_opts *opts,
                                 brig_error **err);
BRIG_INTERNAL int sandbox_load_policy(const char *dir, json_t *st, brig_policy **ret,
                                      struct sandbox_create_opts *opts, brig_error **err);

/* exec.c: the client of one exec over a connected control socket. */
BRIG_INTERNAL int exec_check_opts(const brig_exec_opts *o, brig_error **err);
/* stdio: the command's stdin, stdout, stderr (NULL: ours). */
/* *refusals (NULL: not wanted) gets {"refusals": [...], "refusals_dropped": N}
 * of what was refused while it ran (refusals_json_parse), or NULL. */
/* brig exec --timings: CLOCK_MONOTONIC, and one step's line into
 * res->timings. */
BRIG_INTERNAL uint64_t exec_now_ns(void);
BRIG_INTERNAL void exec_timings_add(brig_result *res, const char *step, uint64_t ns);
BRIG_INTERNAL int exec_over(int fd, const char *name, const brig_exec_opts *o, const int *stdio, brig_result *res,
                            json_t **refusals, brig_error **err);
/* brig_sandbox_exec without the report: *refusals as exec_over's. */
BRIG_INTERNAL int sandbox_exec(const char *name, const brig_exec_opts *o, brig_result *res, json_t **refusals,
                               brig_error **err);
/* A pool member's one run as the pool made it (brig run --pool NAME:
 * CTL_EXEC_LAST | CTL_EXEC_AS_MADE, no context compared). */
BRIG_INTERNAL int sandbox_exec_as_made(const char *name, const brig_exec_opts *o, brig_result *res, json_t **refusals,
                                       brig_error **err);
/* A pool member's one run (CTL_EXEC_LAST), with the caller's
 * plan_caller_context for the member to compare with its own. */
BRIG_INTERNAL int sandbox_exec_last(const char *name, const brig_exec_opts *o, const char *context, brig_result *res,
                                    json_t **refusals, brig_error **err);
/* Its report to report_fd (`what`: the flag that gave it), after an exec
 * that returned r: r, or the report's failure when r was 0 (then in *err). */
BRIG_INTERNAL int sandbox_exec_report(int report_fd, const char *what, const char *name, const brig_exec_opts *o,
                                      const brig_result *res, const json_t *pooled, json_t *refusals, int r,
                                      brig_error **err);

/* The same with more CTL_EXEC_* flags in the request (CTL_EXEC_FILEOP). */
BRIG_INTERNAL int exec_over_flags(int fd, const char *name, const brig_exec_opts *o, const int *stdio,
                                  uint32_t flags, brig_result *res, json_t **refusals, brig_error **err);
/* ... and with CTL_EXEC_LAST's context (the request's last string). */
BRIG_INTERNAL int exec_over_context(int fd, const char *name, const brig_exec_opts *o, const int *stdio,
                                    uint32_t flags, const char *context, brig_result *res, json_t **refusals,
                                    brig_error **err);
/* fileops.c: the client of one file operation on sandbox NAME. */
BRIG_INTERNAL int fileop_check(const brig_file_spec *s, brig_error **err);
/* One operation as an exec request: argv, options and the command's
 * stdio (the caller's fd, /dev/null, and a memfd for tar's stderr). */
struct fileop_call {
        int null, errfd;
        int stdio[3];
        char max[32], mode[16];
        char *argv[6];
        brig_exec_opts opts;
};
BRIG_INTERNAL int fileop_prepare(const brig_file_spec *s, struct fileop_call *c, brig_error **err);
BRIG_INTERNAL void fileop_call_free(struct fileop_call *c);
/* What the exec that ran it (returned r, filled *res) means for the
 * operation: 0, or -errno with *err naming the path and why. */
BRIG_INTERNAL int fileop_outcome(const char *name, uint32_t op, const char *path, uint64_t timeout_ms, int errfd,
                                 int r, const brig_result *res, brig_error **err);
BRIG_INTERNAL const char *fileop_name(uint32_t op);

struct ctl_hdr;
/* A CTL_STATUS message as a result: its header, and the n bytes after it
 * (the summary's lines of what was refused, then the same for the report:
 * into *refusals as exec_over's; NULL: not wanted). */
BRIG_INTERNAL void exec_result_fill(brig_result *res, const struct ctl_hdr *h, const char *payload, size_t n,
                                    json_t **refusals);
/* What one message of the supervisor's (n bytes at msg as ctl_recv took
 * them; 0 or -errno: the connection ended first) means for an exec: 1
 * with *res filled for the command's status (its refusals for the report
 * into *refusals; NULL: not wanted), -errno with *err for an error or the
 * connection's end, 0 for any other message (the exec goes on). */
BRIG_INTERNAL int exec_outcome_take(const char *name, const char *msg, ssize_t n, brig_result *res,
                                    json_t **refusals, brig_error **err);
/* The end of an exec another process began and handed over (the brig
 * command's front end, src/front/brig.c): the supervisor's last message
 * as the one message on the SOCK_SEQPACKET socket fd (none: the
 * connection ended first; a CTL_ERROR of exec_gone's: it broke), into
 * *res and *err as the exec's own client would have taken it. */
BRIG_INTERNAL int exec_outcome_read(int fd, const char *name, brig_result *res, brig_error **err);
/* The JSON report of one exec (free()). pooled: brig run --pooled served
 * by a member, {"member": NAME} and, with --timings, "timings" (pool.c);
 * NULL for any other exec. */
BRIG_INTERNAL char *exec_report_json(const char *name, const brig_exec_opts *o, const brig_result *res,
                                     const brig_error *error, const json_t *pooled, json_t *refusals,
                                     brig_error **err);
/* The JSON report of one exec: the run report's outcome fields, and the
 * refusals exec_over gave (or NULL: none known). */
BRIG_INTERNAL int exec_report_write(int fd, const char *what, const char *name, const brig_exec_opts *o,
                                    const brig_result *res, const brig_error *error, const json_t *pooled,
                                    json_t *refusals, brig_error **err);

/* overlay*.c: --workspace-mode overlay */
/* At create, on the host: the layer's directories and the record of the
 * workspace's files that commit checks for conflicts. */
BRIG_INTERNAL int overlay_prepare(const brig_policy *p, const char *dir, brig_error **err);
/* The temporary names a killed brig commit left in the workspace of the
 * sandbox in `dir` (state `st`), removed (overlay_commit.c). */
BRIG_INTERNAL void overlay_sweep_commits(const char *dir, json_t *st);
/* A copy of a layer (or any tree) that keeps modes, owners (as root),
 * whiteouts and user.* xattrs; reflinks where the filesystem can
 * (overlay_copy.c). */
BRIG_INTERNAL int overlay_copy_tree(const char *src, const char *dst, brig_error **err);

#endif
