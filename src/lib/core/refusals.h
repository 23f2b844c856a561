/* refusals.h — what brig refused during a run, gathered in one place for
 * the end-of-run summary on stderr and the report's refusals[]
 * (refusals.c; docs/report.md). */
#ifndef BRIG_REFUSALS_H
#define BRIG_REFUSALS_H

#include "core/util.h"

#include <jansson.h>

enum refusal_kind {
        REFUSAL_CONNECTION,  /* the egress proxy or filtered mode refused a destination */
        REFUSAL_DNS,         /* a name brig's DNS stub would not resolve */
        REFUSAL_SYSCALL,     /* the seccomp filter refused a call */
        REFUSAL_UNIX,        /* the unix socket guard refused a socket outside the sandbox */
        REFUSAL_LIMIT,       /* a resource limit was reached */
        REFUSAL_AGENT,       /* brig's ssh-agent relay answered a request itself (tools.h) */
};

struct refusals;

#define REFUSALS_MAX 64  /* causes kept; what is over is counted */
#define REFUSALS_LINES 8 /* lines of the end-of-run summary; the report has every cause kept */

/* Where the counts stood, for what one brig exec was refused since. */
struct refusals_mark {
        uint64_t counts[REFUSALS_MAX];
        size_t n;
        uint64_t over_entries;
};

BRIG_INTERNAL struct refusals *refusals_new(void);
/* One more refusal. `what` names the thing refused (a destination, a name,
 * a syscall, shown as refusals_quote does; or, REFUSAL_LIMIT, a limit in
 * brig's own words, as it is), `why` the rule or class that refused it,
 * `allow_with` the flag that would allow it, or NULL when none would (a
 * --deny-host of the user's, a malformed request). Equal refusals are one
 * entry with a count. Safe with r NULL. */
BRIG_INTERNAL void refusals_add(struct refusals *r, enum refusal_kind kind, const char *what, const char *why,
                                const char *allow_with, uint64_t count);
/* The same for a limit whose line is already the run's summary (the
 * reason it ended): in refusals[], not printed twice. */
BRIG_INTERNAL void refusals_add_summarized(struct refusals *r, const char *what, const char *why,
                                           const char *allow_with, uint64_t count);
/* Refusals of causes beyond REFUSALS_MAX: counted, not kept. */
BRIG_INTERNAL uint64_t refusals_dropped(const struct refusals *r);
/* `in` with every character outside [A-Za-z0-9/._-@:[]*+=,~%] as \xNN,
 * whole characters only, into out[size]: how refusals_add shows `what`,
 * for a flag built from it (--allow-unix PATH). */
BRIG_INTERNAL void refusals_quote(const char *in, char *out, size_t size);
/* The lines for stderr, each ending in '\n', at most `max_lines` and a
 * last one that says how many more causes there were. */
BRIG_INTERNAL void refusals_text(const struct refusals *r, size_t max_lines, char *buf, size_t size);
BRIG_INTERNAL void refusals_mark(const struct refusals *r, struct refusals_mark *m);
/* refusals_text for what came since the mark (counts since then; a
 * persistent sandbox's execs at the same time share what they did). */
BRIG_INTERNAL void refusals_text_since(const struct refusals *r, const struct refusals_mark *m, size_t max_lines,
                                       char *buf, size_t size);
/* [{kind, what, why, allow_with, count}, ...] */
BRIG_INTERNAL json_t *refusals_json(const struct refusals *r);
/* The same and refusals_dropped for what came since the mark: one brig
 * exec's, for its report (control.c sends them with its status). */
BRIG_INTERNAL json_t *refusals_json_since(const struct refusals *r, const struct refusals_mark *m);
BRIG_INTERNAL uint64_t refusals_dropped_since(const struct refusals *r, const struct refusals_mark *m);
/* {"refusals": [...], "refusals_dropped": N} out of the bytes of a
 * supervisor's status message (exec.c), checked field by field: NULL when
 * it is not exactly that (fuzz_refusals). */
BRIG_INTERNAL json_t *refusals_json_parse(const char *buf, size_t len);
BRIG_INTERNAL void refusals_free(struct refusals *r);

/* One exec's own CPU time and memory, as pid 1 saw them when it reaped
 * the command (wait4: the command and the descendants it waited for), the
 * third part of a status message (control.c):
 * {"cpu_user_ms": N, "cpu_system_ms": N, "memory_peak_bytes": N}. */
struct exec_usage {
        uint64_t cpu_user_ms, cpu_system_ms;
        int64_t memory_peak_bytes;  /* the largest resident set of one of its processes (ru_maxrss) */
};
BRIG_INTERNAL char *exec_usage_json(const struct exec_usage *u);
/* 0 with *u filled when the bytes are exactly that object (three
 * non-negative integers, nothing else: fuzz_refusals), else -EBADMSG. */
BRIG_INTERNAL int exec_usage_parse(const char *buf, size_t len, struct exec_usage *u);

#endif
