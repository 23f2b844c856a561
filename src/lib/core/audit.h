/* audit.h — the JSON-lines audit stream (audit.c); schema in docs/audit.md. */
#ifndef BRIG_AUDIT_H
#define BRIG_AUDIT_H

#include "core/plan.h"

#include <jansson.h>

struct audit;

/* The schema's version, in every line's "v" (docs/audit.schema.json). */
#define AUDIT_SCHEMA_VERSION 1
/* A SHA-256 in hex, with its NUL. */
#define AUDIT_HASH_HEX 65

/* `what` names the flag in messages ("--audit-fd 5"); `notice` says on
 * the caller's stderr when lines are lost (may be NULL). */
BRIG_INTERNAL struct audit *audit_new(int fd, const char *what, brig_notice_fn notice, void *notice_data);
/* The sandbox exists: start the thread that writes the queued events (any
 * thread at clone3 could hold a lock the child then needs). */
BRIG_INTERNAL void audit_run(struct audit *a);
BRIG_INTERNAL void audit_start(struct audit *a, const struct run_plan *plan);
/* One refused or logged syscall; rate-limited per syscall. */
BRIG_INTERNAL void audit_syscall(struct audit *a, pid_t host_pid, int nr, const uint64_t args[6], int reply);
/* A network attempt from the proxy (egress_log_fn); takes the object. */
BRIG_INTERNAL void audit_net(void *audit, json_t *event);
/* A change the operator made to the running sandbox ("limit_change"):
 * never held back by a rate limit. Takes the object; a may be NULL. */
BRIG_INTERNAL void audit_change(struct audit *a, const char *kind, json_t *event);
/* An exec event (exectrace.c; takes the object): adds the pids as the
 * sandbox sees them and returns the process's inside pid, or
 * AUDIT_NOT_RECORDED when the rate limit held it back (counted). */
#define AUDIT_NOT_RECORDED (-2L)
BRIG_INTERNAL long audit_exec(struct audit *a, pid_t host_pid, json_t *event);
/* The end of a process an exec event named (takes the object). */
BRIG_INTERNAL void audit_exit(struct audit *a, json_t *event);
/* The thread group (process) of a host thread id. */
BRIG_INTERNAL pid_t audit_thread_group(pid_t tid);
/* What the run changed (runchanges_end's object; takes it): a files
 * event, never rate-limited (one per run). */
BRIG_INTERNAL void audit_files(struct audit *a, json_t *event);
/* What the run ran and reached, sorted ({"programs": [...], "net":
 * [...]}: a manifest's outcome, core/manifest.c). */
BRIG_INTERNAL json_t *audit_outcome(const struct audit *a);
/* The end event; then writes out what is queued (audit_flush). */
BRIG_INTERNAL void audit_end(struct audit *a, const brig_result *res);
/* Lines not written (queue full, the stream stopped) and why ("" none). */
BRIG_INTERNAL uint64_t audit_lost(const struct audit *a);
BRIG_INTERNAL const char *audit_stopped(const struct audit *a);
/* The SHA-256 of the whole stream queued, end line included, once the end
 * event is queued (the report's audit.sha256), else NULL. */
BRIG_INTERNAL const char *audit_sha256(const struct audit *a);
BRIG_INTERNAL uint64_t audit_events(const struct audit *a);
BRIG_INTERNAL uint64_t audit_suppressed(const struct audit *a);
/* Does not close the fd (the plan owns it). */
BRIG_INTERNAL void audit_free(struct audit *a);

#endif
