/* seccomp_filter.h — the syscall filter (seccomp.c); not named seccomp.h,
 * which would shadow libseccomp's header on the include path. */
#ifndef BRIG_SECCOMP_H
#define BRIG_SECCOMP_H

#include "core/plan.h"

struct seccomp_policy;  /* the user's rules (seccomp.c), held by the policy */

/* Validate and record one user rule (see brig_policy_add_syscall_rule). */
BRIG_INTERNAL int seccomp_policy_add(struct seccomp_policy **sp, const char *name, const char *action,
                                     brig_error **err);
BRIG_INTERNAL void seccomp_policy_free(struct seccomp_policy *sp);
/* The user's rules as [{"name": ..., "action": ...}], as written. */
#include <jansson.h>
BRIG_INTERNAL json_t *seccomp_policy_json(const struct seccomp_policy *sp);

/* In the supervisor, before clone: the default profile plus the policy's
 * rules, compiled (or taken from the cache) into plan->seccomp_prog. */
BRIG_INTERNAL int seccomp_prepare(struct run_plan *plan, brig_error **err);

/* Load the prepared program. Called last in the command's process, just
 * before execve. */
BRIG_INTERNAL int seccomp_apply(const struct run_plan *plan, brig_error **err);

/* What the supervisor answers a notified call (an errno, 0 to let it
 * run: "log", or SECCOMP_REPLY_GUARD: an allowed connect or sendto, for
 * the unix socket guard, unixguard.c): what the filter compiled without a
 * listener returns for the same seccomp_data. */
#include <linux/filter.h>
#include <linux/seccomp.h>
#define SECCOMP_REPLY_GUARD (-2)
/* ... or an allowed call notified to be recorded (execve with exec events) */
#define SECCOMP_REPLY_ALLOW (-3)
struct seccomp_replies {
        size_t len;
        struct sock_filter prog[];  /* refusals as plain errnos */
};
BRIG_INTERNAL int seccomp_reply_for(const struct seccomp_replies *rep, const struct seccomp_data *sd);
/* The answers, made from the policy's decision table (never from a cached
 * file): for an audit stream before the run (seccomp_prepare), else by the
 * supervisor when a first refusal arrives. free() it. */
BRIG_INTERNAL int seccomp_replies_build(const struct run_plan *plan, struct seccomp_replies **ret);
/* For the run's summary: why the filter refused `name` with errno `reply`
 * (into why), and the flag that would allow it (into fix; "" when none
 * would: a rule of the user's refused it, or it makes a namespace, which
 * brig refuses below the filter too). */
BRIG_INTERNAL void seccomp_refusal_text(const struct seccomp_policy *sp, const char *name, int reply, char *why,
                                        size_t wsize, char *fix, size_t fsize);
/* The compiled-filter cache file's bytes (seccomp_cache.c, pure): a call
 * its program is run on before it is trusted. */
#include <stdbool.h>
struct seccomp_probe {
        uint32_t arch;  /* AUDIT_ARCH_* */
        int nr;
};
/* 0 and the program (malloc'd) when buf holds key and a program that
 * refuses every probe (kill, trap, errno; a notification too when the
 * program's refusals notify: the supervisor answers them);
 * -EBADMSG for another key or bytes the kernel would not run, -EPERM when
 * it allows a probe, -ENOMEM. */
BRIG_INTERNAL int seccomp_cache_parse(const void *buf, size_t size, const char *key, size_t len,
                                      const struct seccomp_probe *probes, size_t n_probes, bool notifies,
                                      struct sock_filter **prog, size_t *n);
/* One run of a classic BPF program (false: it would not load or run). */
BRIG_INTERNAL bool seccomp_bpf_eval(const struct sock_filter *prog, size_t n, const struct seccomp_data *sd,
                                    uint32_t *ret);

/* The number dispatch (seccomp_dispatch.c, pure): a binary search over
 * ranges of numbers of one decision. v: the named numbers, sorted, each
 * with its return value, or sub >= 0: routed to subs[sub] (a libseccomp
 * program for calls whose decision reads their arguments); every other
 * number gets dflt, another arch (and on x86_64 an x32 number) badarch.
 * 0 and a malloc'd program; -EINVAL (v unsorted, a sub out of range or
 * empty), -E2BIG, -ENOMEM. */
struct seccomp_number {
        uint32_t nr;
        uint32_t ret;
        int sub;
};
struct seccomp_subprog {
        const struct sock_filter *prog;
        size_t len;
};
BRIG_INTERNAL int seccomp_dispatch_emit(uint32_t arch, uint32_t badarch, const struct seccomp_number *v, size_t n,
                                        uint32_t dflt, const struct seccomp_subprog *subs, size_t n_subs,
                                        struct sock_filter **prog, size_t *len);

/* "mount", or "syscall_N" for numbers libseccomp does not know; free() it. */
BRIG_INTERNAL char *seccomp_syscall_name(int nr);

#endif
