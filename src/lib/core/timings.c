/* timings.c — the stamps of brig run --timings (timings.h). */
#define _GNU_SOURCE
#include "core/timings.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

/* What the step ending at each stamp did (TM_START has none: it is t0). */
static const char *const step_names[TM_COUNT] = {
        [TM_PLAN] = "policy",
        [TM_PROBE] = "host probe",
        [TM_CGROUP] = "cgroup create",
        [TM_SECCOMP] = "seccomp compile",
        [TM_EGRESS] = "unix guard, egress",
        [TM_IDMAP] = "idmapped workspace",
        [TM_PREPARED] = "terminal, socketpair",
        [TM_CLONED] = "clone3",
        [TM_ATTACHED] = "cgroup attach",
        [TM_MAPPED] = "uid map",
        [TM_CHILD_GO] = "child wakes",
        [TM_NET] = "network (loopback, nftables)",
        [TM_MOUNTS] = "mounts",
        [TM_PRIVS] = "tools, caps, user",
        [TM_FORKED] = "fork of the command",
        [TM_LANDLOCK] = "landlock",
        [TM_SECCOMP_LOAD] = "seccomp load",
        [TM_EXEC] = "fds, rlimits, checks",
        [TM_EXITED] = "exec and run of the command",
        [TM_TEARDOWN] = "teardown",
};

/* The JSON keys: the names without spaces or punctuation. */
static const char *const step_keys[TM_COUNT] = {
        [TM_PLAN] = "policy",
        [TM_PROBE] = "host_probe",
        [TM_CGROUP] = "cgroup_create",
        [TM_SECCOMP] = "seccomp_compile",
        [TM_EGRESS] = "egress",
        [TM_IDMAP] = "idmapped_workspace",
        [TM_PREPARED] = "prepare",
        [TM_CLONED] = "clone3",
        [TM_ATTACHED] = "cgroup_attach",
        [TM_MAPPED] = "uid_map",
        [TM_CHILD_GO] = "child_wakes",
        [TM_NET] = "network",
        [TM_MOUNTS] = "mounts",
        [TM_PRIVS] = "privileges",
        [TM_FORKED] = "fork_command",
        [TM_LANDLOCK] = "landlock",
        [TM_SECCOMP_LOAD] = "seccomp_load",
        [TM_EXEC] = "command_setup",
        [TM_EXITED] = "command",
        [TM_TEARDOWN] = "teardown",
};

struct timings *timings_new(void)
{
        void *p = mmap(NULL, sizeof(struct timings), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

void timings_free(struct timings *t)
{
        if (t)
                munmap(t, sizeof *t);
}

/* CLOCK_MONOTONIC is the same clock inside: brig sets no offset in the
 * time namespace. */
void timings_mark(struct timings *t, enum timing_mark m)
{
        if (!t)
                return;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t->ns[m] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Calls fn for each step with a stamp after the last one kept: the
 * sandbox's side writes the page too, and what it wrote is only shown. */
static void each_step(const struct timings *t, void (*fn)(void *data, enum timing_mark m, uint64_t ns), void *data)
{
        uint64_t last = t->ns[TM_START];
        if (!last)
                return;
        for (int m = TM_START + 1; m < TM_COUNT; m++) {
                if (t->ns[m] < last)
                        continue;
                fn(data, (enum timing_mark)m, t->ns[m] - last);
                last = t->ns[m];
        }
}

struct text {
        char *buf;
        size_t n, len;
        uint64_t total;
};

static void text_step(void *data, enum timing_mark m, uint64_t ns)
{
        struct text *x = data;
        x->total += ns;
        if (x->len < x->n)
                x->len += (size_t)snprintf(x->buf + x->len, x->n - x->len, "  %-30s %9.3f ms\n", step_names[m],
                                           (double)ns / 1e6);
}

void timings_text(const struct timings *t, char *buf, size_t n)
{
        struct text x = { .buf = buf, .n = n };
        if (n)
                buf[0] = '\0';
        each_step(t, text_step, &x);
        if (x.len < n)
                snprintf(buf + x.len, n - x.len, "  %-30s %9.3f ms\n", "total", (double)x.total / 1e6);
}

static void json_step(void *data, enum timing_mark m, uint64_t ns)
{
        json_object_set_new(data, step_keys[m], json_integer((json_int_t)(ns / 1000)));
}

/* Microseconds per step, and t0: the CLOCK_MONOTONIC nanosecond at which
 * the run began (bench/floor takes its own stamp before exec'ing brig to
 * find what exec and dynamic loading cost). */
json_t *timings_json(const struct timings *t)
{
        json_t *steps = json_object();
        json_t *o = json_pack("{s:I, s:s, s:o}", "t0_ns", (json_int_t)t->ns[TM_START], "unit", "us", "steps", steps);
        each_step(t, json_step, steps);
        return o;
}
