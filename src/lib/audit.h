/* audit.h — the JSON-lines audit stream (audit.c); schema in docs/audit.md. */
#ifndef BRIG_AUDIT_H
#define BRIG_AUDIT_H

#include "internal.h"

#include <jansson.h>

struct audit;

BRIG_INTERNAL struct audit *audit_new(int fd);
BRIG_INTERNAL void audit_start(struct audit *a, const struct run_plan *plan);
/* One refused or logged syscall; rate-limited per syscall. */
BRIG_INTERNAL void audit_syscall(struct audit *a, pid_t host_pid, int nr, const uint64_t args[6], int reply);
/* A network attempt from the proxy (egress_log_fn); takes the object. */
BRIG_INTERNAL void audit_net(void *audit, json_t *event);
BRIG_INTERNAL void audit_end(struct audit *a, const brig_result *res);
BRIG_INTERNAL uint64_t audit_events(const struct audit *a);
BRIG_INTERNAL uint64_t audit_suppressed(const struct audit *a);
/* Flushes suppression counts; does not close the fd (the plan owns it). */
BRIG_INTERNAL void audit_free(struct audit *a);

#endif
