/* rlimit.c — per-process resource limits, set in the command's process
 * before execve. They back up the cgroup limits (and stand in for them,
 * degraded, where no cgroup can be made). */
#define _GNU_SOURCE
#include "controls/rlimit.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>

static int set_limit(int resource, const char *name, uint64_t soft, uint64_t hard, brig_error **err)
{
        struct rlimit rl = { .rlim_cur = soft, .rlim_max = hard };
        struct rlimit cur;
        /* Never raise a hard limit the caller already lowered. */
        if (getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
                if (rl.rlim_max > cur.rlim_max)
                        rl.rlim_max = cur.rlim_max;
                if (rl.rlim_cur > rl.rlim_max)
                        rl.rlim_cur = rl.rlim_max;
        }
        if (setrlimit(resource, &rl) < 0)
                return brig_err(err, errno, "setrlimit %s", name);
        return 0;
}

/* A hard limit the caller already has cannot be raised from inside the
 * sandbox (no CAP_SYS_RESOURCE there): lower the request to it, so the
 * report tells what really applies. */
static void clamp(int resource, uint64_t *value)
{
        struct rlimit cur;
        if (*value && getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY && *value > cur.rlim_max)
                *value = cur.rlim_max;
}

void rlimits_clamp(struct limits *l)
{
        clamp(RLIMIT_NOFILE, &l->nofile);
        clamp(RLIMIT_FSIZE, &l->fsize);
        clamp(RLIMIT_STACK, &l->stack);
        clamp(RLIMIT_NPROC, &l->nproc);
        if (l->cpu_time_s) {
                uint64_t hard = l->cpu_time_s + 1;
                clamp(RLIMIT_CPU, &hard);
                if (hard <= l->cpu_time_s)
                        l->cpu_time_s = hard > 1 ? hard - 1 : 1;
        }
}

int rlimits_apply(const struct run_plan *plan, brig_error **err)
{
        const struct limits *l = &plan->limits;
        int r = 0;
        /* No core dumps: a dump of a process that read secrets is a leak.
         * One byte rather than zero: no core file either way (a file needs
         * at least a page), but the kernel ignores the limit when the host
         * pipes cores to a helper (systemd-coredump, apport) — except for
         * 1, its "never pipe this one" value. */
        r = set_limit(RLIMIT_CORE, "core", 1, 1, err);
        if (r == 0 && l->nofile)
                r = set_limit(RLIMIT_NOFILE, "nofile", l->nofile, l->nofile, err);
        if (r == 0 && l->fsize)
                r = set_limit(RLIMIT_FSIZE, "fsize", l->fsize, l->fsize, err);
        if (r == 0 && l->stack)
                r = set_limit(RLIMIT_STACK, "stack", l->stack, l->stack, err);
        if (r == 0 && l->cpu_time_s)  /* SIGXCPU at the soft limit, SIGKILL a second later */
                r = set_limit(RLIMIT_CPU, "cpu", l->cpu_time_s, l->cpu_time_s + 1, err);
        if (r == 0 && l->nproc)
                r = set_limit(RLIMIT_NPROC, "nproc", l->nproc, l->nproc, err);
        /* Stand-in for the pids cgroup: the process count of the sandbox
         * user, counted within the sandbox's own user namespace. */
        if (r == 0 && plan->cgroup_degraded && l->pids && !l->nproc)
                r = set_limit(RLIMIT_NPROC, "nproc (pids fallback)", l->pids, l->pids, err);
        return r;
}

int rlimits_apply_memory_fallback(const struct run_plan *plan, uint64_t inherited, brig_error **err)
{
        /* Stand-in for the memory cgroup: RLIMIT_DATA, the private
         * writable memory of each process (heap and anonymous mappings).
         * Not RLIMIT_AS: browsers, JITs and Go reserve far more address
         * space than they ever touch (PROT_NONE), which DATA does not
         * count. Coarser than a cgroup: per process, not for the sandbox.
         * Set as the very last step before execve, because it binds brig's
         * own code too. A file operation runs brig's code without an
         * execve, in a fork of pid 1 that keeps pid 1's mappings
         * (`inherited`; in a sanitizer build terabytes of shadow): it may
         * map --memory more than those, and lowers the limit to --memory
         * itself before it execs anything (rlimits_lower_memory_fallback). */
        const struct limits *l = &plan->limits;
        if (!plan->memory_unbounded)
                return 0;
        uint64_t limit = l->memory > UINT64_MAX - inherited ? UINT64_MAX : l->memory + inherited;
        return set_limit(RLIMIT_DATA, "data (memory fallback)", limit, limit, err);
}

int rlimits_lower_memory_fallback(const struct run_plan *plan, brig_error **err)
{
        if (!plan->memory_unbounded)
                return 0;
        return set_limit(RLIMIT_DATA, "data (memory fallback)", plan->limits.memory, plan->limits.memory, err);
}

/* The private writable memory this process maps now, as RLIMIT_DATA
 * counts it (statm's data: data and stack, in pages); 0 if unknown, which
 * gives the plain limit. */
uint64_t rlimits_data_in_use(void)
{
        FILE *f = fopen("/proc/self/statm", "re");
        unsigned long long pages[6] = { 0 };
        bool ok = f && fscanf(f, "%llu %llu %llu %llu %llu %llu", &pages[0], &pages[1], &pages[2], &pages[3],
                              &pages[4], &pages[5]) == 6;
        if (f)
                fclose(f);
        long page = sysconf(_SC_PAGESIZE);
        return ok && page > 0 ? (uint64_t)pages[5] * (uint64_t)page : 0;
}

/* RLIMIT_DATA counts a process's private writable mappings, and nothing
 * else. Without a memory cgroup these go uncounted (docs/limits.md):
 * shared memory is charged to no one, so one process can fill a memfd or
 * a MAP_SHARED region far past the limit (tests/escape/probe_memory.c
 * under --memory 64M), and each of the sandbox's processes has a limit of its
 * own. A cgroup charges all of them to the sandbox. */
const char *const rlimits_memory_unbounded[] = {
        "memfd",            /* memfd_create + write(): no mapping at all */
        "shared_mappings",  /* MAP_SHARED, anonymous or of a memfd */
        "sysv_shm",         /* shmget + shmat (rootless: shmmax/shmall cannot be set) */
        "sysv_msg",
        "pipe_buffers",
        "socket_buffers",
        "kernel_memory",
        "sandbox_total",    /* the limit is per process, not for all of them */
        NULL,
};

/* Said after every run it concerns, so it names each way out: how to get
 * a bound, how to accept this and silence it, how to refuse such runs. */
void rlimits_memory_text(const struct run_plan *plan, char *buf, size_t n)
{
        char size[32];
        size_text(size, sizeof size, plan->limits.memory);
        snprintf(buf, n,
                 "memory: --memory %s%s bounds each process's private memory only (RLIMIT_DATA); memfd, "
                 "MAP_SHARED and System V memory, pipe and socket buffers, kernel memory and the sandbox's "
                 "total are not bounded (no memory cgroup here). To bound them, run brig as root, in a cgroup "
                 "v2 subtree delegated to you, or under a memory limit (systemd-run -p MemoryMax=SIZE; "
                 "docs/limits.md); to accept this and drop the warning: --allow-degraded memory; to refuse "
                 "such runs: --require-limits",
                 size, plan->limits.memory == BRIG_DEFAULT_MEMORY ? " (the default)" : "");
}

int rlimits_oom_first(const struct run_plan *plan, brig_error **err)
{
        /* Within the sandbox's own memory cgroup only its processes are
         * candidates anyway. But a limit above it (one brig runs under:
         * systemd-run -p MemoryMax=, a container) or the host running out
         * counts brig's supervisor and the host's processes too, and the
         * kernel picks the largest: the sandbox's memfd or shared pages are
         * in no one's RSS, so that could be brig — the run would end with
         * no report and its cgroup left behind. Raising one's own
         * oom_score_adj needs no privilege; the sandbox cannot write /proc
         * (Landlock), and could never go below 0 (no CAP_SYS_RESOURCE). */
        _cleanup_close_ int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "1000", 4) != 4)
                return brig_err(err, errno, "oom_score_adj");
        return 0;
}
