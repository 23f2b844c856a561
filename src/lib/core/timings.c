/* timings.c — the stamps of brig run --timings (timings.h). */
#define _GNU_SOURCE
#include "core/timings.h"

#include <jansson.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

/* What the step ending at each stamp did, and its key in the report
 * (TM_START has none: it is t0). */
static const struct {
        const char *name, *key;
} steps[TM_COUNT] = {
        [TM_PLAN] = { "policy", "policy" },
        [TM_PROBE] = { "host probe", "host_probe" },
        [TM_CGROUP] = { "cgroup create", "cgroup_create" },
        [TM_SECCOMP] = { "seccomp compile", "seccomp_compile" },
        [TM_EGRESS] = { "unix guard, egress", "egress" },
        [TM_IDMAP] = { "idmapped workspace", "idmapped_workspace" },
        [TM_PREPARED] = { "terminal, socketpair", "prepare" },
        [TM_CLONED] = { "clone3", "clone3" },
        [TM_MAPPED] = { "uid map", "uid_map" },
        [TM_CHILD_GO] = { "child wakes", "child_wakes" },
        [TM_NET] = { "network (loopback, nftables)", "network" },
        [TM_SYSCTLS] = { "sysctls (userns, IPC limits)", "sysctls" },
        [TM_ATTACHED] = { "cgroup attach (child)", "cgroup_attach" },
        [TM_MOUNTS] = { "mounts", "mounts" },
        [TM_PRIVS] = { "tools, caps, user", "privileges" },
        [TM_FORKED] = { "fork of the command", "fork_command" },
        [TM_LANDLOCK] = { "landlock", "landlock" },
        [TM_SECCOMP_LOAD] = { "seccomp load", "seccomp_load" },
        [TM_EXEC] = { "fds, rlimits, checks", "command_setup" },
        [TM_REAPED] = { "exec and run of the command", "command" },
        [TM_STATUS] = { "status to the supervisor", "status" },
        [TM_EXITED] = { "pid 1 ends (waited for)", "init_exit" },
        [TM_TEARDOWN] = { "teardown", "teardown" },
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
                x->len += (size_t)snprintf(x->buf + x->len, x->n - x->len, "  %-30s %9.3f ms\n", steps[m].name,
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
        json_object_set_new(data, steps[m].key, json_integer((json_int_t)(ns / 1000)));
}

/* Microseconds per step, and t0: the CLOCK_MONOTONIC nanosecond at which
 * the run began (a caller that stamps the same clock before it execs brig
 * finds what exec, loading and the CLI's parsing cost). */
json_t *timings_json(const struct timings *t)
{
        json_t *per_step = json_object();
        json_t *o = json_pack("{s:I, s:s, s:o}", "t0_ns", (json_int_t)t->ns[TM_START], "unit", "us", "steps",
                              per_step);
        each_step(t, json_step, per_step);
        return o;
}
