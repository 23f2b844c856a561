/* spawn.c — the run sequence, supervisor side (DESIGN.md §3). Read
 * spawn_run() top to bottom: it is the whole story on the host.
 * brig_run_in_process runs it in the caller's process (the CLI's brig
 * run); brig_run is the handle API's (engine/run.c). */
#define _GNU_SOURCE
#include "core/model.h"
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "core/host.h"
#include "core/sequence.h"
#include "core/supervisor.h"
#include "core/report.h"
#include "controls/userns.h"
#include "controls/timens.h"
#include "controls/rlimit.h"
#include "controls/terminal.h"
#include "core/audit.h"
#include "persist/runchanges.h"
#include "core/manifest.h"
#include "controls/cgroup.h"
#include "controls/landlock.h"
#include "core/reaper.h"
#include "controls/seccomp_filter.h"
#include "controls/unixguard.h"
#include "tools/tools.h"
#include "net/egress.h"
#include "core/refusals.h"
#include "core/timings.h"
#include "core/teardown.h"
#include "core/ossl.h"
#include "core/libload.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

static const int supervised_signals[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2 };

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Fail closed: the controls every run relies on must exist here. */
static int check_host(struct run_plan *plan, brig_error **err)
{
        const struct host_features *f = host_probe();
        /* A restriction brig knows by name is said with its fix: the
         * sysctls and Ubuntu's AppArmor rule are read, not tried. */
        struct userns_restriction why;
        if (restrict_userns(restrict_fake_userns_errno(), &why) ||
            (!f->clone3 && restrict_userns(ENOSYS, &why) && strcmp(why.id, "container") == 0))
                return brig_err(err, EPERM, "user namespaces: %s; to fix: %s", why.what, why.fix);
        if (!f->userns)
                return brig_err(err, EOPNOTSUPP, "user namespaces are not available on this host (see brig doctor)");
        if (!f->mount_api || !f->openat2 || !f->clone3)
                return brig_err(err, EOPNOTSUPP,
                                "this kernel lacks the new mount API, openat2 or clone3 (Linux 5.15+ needed; see brig doctor)");
        if (!restrict_fake_seccomp(f->seccomp)) {
                if (!(plan->policy->allow_degraded & DEGRADE_SECCOMP))
                        return brig_err(err, EOPNOTSUPP, "seccomp filtering is not available on this host "
                                                         "(run with --allow-degraded seccomp to accept that)");
                plan->seccomp_degraded = true;
        }
        plan->landlock_abi = restrict_fake_landlock_abi(landlock_abi_version());
        if (plan->landlock_abi == 0 && !(plan->policy->allow_degraded & DEGRADE_LANDLOCK))
                return brig_err(err, EOPNOTSUPP, "Landlock is not available on this host "
                                                 "(run with --allow-degraded landlock to accept that)");
        for (size_t i = 0; i < plan->policy->n_pass_fds; i++) {
                int fd = plan->policy->pass_fds[i];
                if (fcntl(fd, F_GETFD) < 0)
                        return brig_err(err, errno, "--pass-fd %d", fd);
                /* A terminal would take the command's bytes unfiltered
                 * (clipboard, title, queries: docs/security.md). */
                if (isatty(fd) && !plan->policy->terminal_passthrough)
                        return brig_err(err, EPERM, "--pass-fd %d is a terminal: the command could write escape "
                                        "sequences to it unfiltered (add --terminal-passthrough to allow that)", fd);
        }
        return 0;
}

static uint64_t namespace_flags(const struct run_plan *plan)
{
        uint64_t flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                         CLONE_NEWCGROUP;
        /* Its own network namespace unless the policy shares the host's. */
        if (plan->net_mode != BRIG_NET_HOST)
                flags |= CLONE_NEWNET;
        /* --clock-start: the child makes it for its children instead,
         * its offsets written before any process is in it (timens.c) */
        if (plan->new_time_ns && !plan->clock_pinned)
                flags |= CLONE_NEWTIME;
        return flags;
}

static uint64_t timeval_ms(struct timeval tv)
{
        return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void human_ms(char *buf, size_t n, uint64_t ms)
{
        if (ms % 1000)
                snprintf(buf, n, "%llu ms", (unsigned long long)ms);
        else
                snprintf(buf, n, "%llu s", (unsigned long long)(ms / 1000));
}

/* A limit that ended the run: the summary's words, and the same in the
 * report's refusals[] (not printed twice). */
static void limit_hit(brig_result *res, struct refusals *rf, const char *what, const char *flag, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
static void limit_hit(brig_result *res, struct refusals *rf, const char *what, const char *flag, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(res->summary, sizeof res->summary, fmt, ap);
        va_end(ap);
        refusals_add_summarized(rf, what, res->summary, flag, 1);
}

/* Why the run ended, most specific first: brig's own timeout, then the
 * kernel's limits, then what the command did. Each limit names the flag
 * that raises it. */
static void explain(brig_result *res, const struct limits *l, const struct cgroup_stats *st, bool timed_out,
                    struct refusals *rf)
{
        char v[64], what[96];
        int sig = res->reason == BRIG_REASON_SIGNALED ? res->signal : 0;
        if (timed_out) {
                res->reason = BRIG_REASON_TIMEOUT;
                res->exit_code = BRIG_EXIT_TIMEOUT;
                human_ms(v, sizeof v, l->timeout_ms);
                snprintf(what, sizeof what, "wall-clock timeout %s", v);
                limit_hit(res, rf, what, "--timeout", "killed: wall-clock timeout %s reached (raise with --timeout)", v);
        } else if (st->oom_kills > 0) {
                res->reason = BRIG_REASON_OOM;
                size_text(v, sizeof v, l->memory);
                snprintf(what, sizeof what, "memory limit %s", v);
                limit_hit(res, rf, what, "--memory",
                          "killed: memory limit %s reached (%lld process%s killed; raise with --memory)", v,
                          st->oom_kills, st->oom_kills == 1 ? "" : "es");
        } else if (st->pids_max_hits > 0 && res->exit_code != 0) {
                res->reason = BRIG_REASON_PIDS;
                snprintf(what, sizeof what, "process limit %llu", (unsigned long long)l->pids);
                limit_hit(res, rf, what, "--pids", "process limit %llu reached (%lld forks refused; raise with --pids)",
                          (unsigned long long)l->pids, st->pids_max_hits);
        } else if (sig == SIGSYS) {
                /* the filter's kill action (or a bad architecture) */
                res->reason = BRIG_REASON_SECCOMP;
                snprintf(res->summary, sizeof res->summary,
                         "killed: a system call the policy forbids (seccomp kill, SIGSYS)");
        } else if (l->cpu_time_s && (sig == SIGXCPU || (sig == SIGKILL && res->cpu_user_ms + res->cpu_system_ms >=
                                                                                 l->cpu_time_s * 1000))) {
                /* RLIMIT_CPU: SIGXCPU at the limit, SIGKILL a second later
                 * for a process that caught it */
                snprintf(what, sizeof what, "CPU time limit %llu s", (unsigned long long)l->cpu_time_s);
                limit_hit(res, rf, what, "--cpu-time",
                          "killed: CPU time limit %llu s per process reached (SIG%s; raise with --cpu-time)",
                          (unsigned long long)l->cpu_time_s, sigabbrev_np(sig));
        } else if (l->fsize && sig == SIGXFSZ) {
                size_text(v, sizeof v, l->fsize);
                snprintf(what, sizeof what, "file size limit %s", v);
                limit_hit(res, rf, what, "--fsize", "killed: file size limit %s reached (SIGXFSZ; raise with --fsize)",
                          v);
        } else if (sig) {
                snprintf(res->summary, sizeof res->summary, "command killed by signal %d (%s)", res->signal,
                         sigabbrev_np(res->signal) ? sigabbrev_np(res->signal) : "?");
        }
        /* Forks refused are worth a line even when the command coped
         * (a fork bomb that ends with exit 0), or something else ended it. */
        if (st->pids_max_hits > 0 && res->reason != BRIG_REASON_PIDS) {
                char why[160];
                snprintf(what, sizeof what, "process limit %llu", (unsigned long long)l->pids);
                snprintf(why, sizeof why, "%lld fork%s refused: process limit %llu reached", st->pids_max_hits,
                         st->pids_max_hits == 1 ? "" : "s", (unsigned long long)l->pids);
                refusals_add(rf, REFUSAL_LIMIT, what, why, "--pids", (uint64_t)st->pids_max_hits);
        }
}

/* A caller's output descriptor that is the same pipe, socket or file as
 * one the sandbox is handed (--pass-fd 4 --audit-fd 3 3>&4): the number
 * differs, the stream does not, and the sandbox could write its own lines
 * into brig's. */
static int output_not_passed(const brig_policy *p, int fd, const char *flag, brig_error **err)
{
        const char *kind;
        for (size_t i = 0; fd && i < p->n_pass_fds; i++)
                if ((kind = output_same_stream(fd, p->pass_fds[i])))
                        return brig_err(err, EINVAL, "%s %d: the same %s as --pass-fd %d, which the sandbox holds: it "
                                                     "could write its own lines into brig's; give a descriptor of its "
                                                     "own", flag, fd, kind, p->pass_fds[i]);
        return 0;
}

/* Output files are opened before any sandboxed code runs, so nothing
 * inside can redirect them (output_open). */
static int open_outputs(struct run_plan *plan, const brig_policy *p, struct audit **audit, brig_error **err)
{
        int r = output_not_passed(p, p->report_fd, "--json-report-fd", err);
        if (r < 0 || (r = output_not_passed(p, p->audit_fd, "--audit-fd", err)) < 0)
                return r;
        if (p->report_path || p->report_fd) {
                plan->report_fd = p->report_fd ? output_fd(p->report_fd, "--json-report-fd", err)
                                               : output_open(p->report_path, "--json-report", false, err);
                if (plan->report_fd < 0)
                        return plan->report_fd;
        }
        /* the stream's hash chain: OpenSSL, loaded now (core/ossl.h) */
        if ((p->audit_path || p->audit_fd || p->manifest_path) && ossl_load(err) < 0)
                return brig_err_prefix(err, "%s", p->manifest_path && !p->audit_path && !p->audit_fd ? "--manifest" : "--audit");
        if (p->audit_path || p->audit_fd) {
                plan->audit_fd = p->audit_fd ? output_fd(p->audit_fd, "--audit-fd", err)
                                             : output_open(p->audit_path, "--audit", true, err);
                if (plan->audit_fd < 0)
                        return plan->audit_fd;
                char what[4096 + 32];
                if (p->audit_fd)
                        snprintf(what, sizeof what, "--audit-fd %d", p->audit_fd);
                else
                        snprintf(what, sizeof what, "--audit %s", p->audit_path);
                *audit = audit_new(plan->audit_fd, what, p->notice, p->notice_data);
                if (!*audit)
                        return brig_err(err, ENOMEM, "audit");
        } else if (p->manifest_path) {
                /* a manifest's outcome (what ran, reached, changed) comes
                 * from the events: a stream that nobody reads */
                plan->audit_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (plan->audit_fd < 0)
                        return brig_err(err, errno, "--manifest: /dev/null");
                *audit = audit_new(plan->audit_fd, "--manifest", p->notice, p->notice_data);
                if (!*audit)
                        return brig_err(err, ENOMEM, "audit");
        }
        return 0;
}

/* The child exists: write its maps, let it go (it joins its v1 cgroups
 * itself, before its mounts: cgroup_join_self). */
static int release_child(struct run_plan *plan, pid_t pid, int sync_fd, brig_error **err)
{
        int r = userns_write_maps(pid, plan, err);
        /* before the go: the child's next stamp must come after it */
        timings_mark(plan->timings, TM_MAPPED);
        struct sync_msg go = { .type = SYNC_GO };
        if (r == 0 && sync_send(sync_fd, &go) < 0)
                r = brig_err(err, errno, "start the sandbox");
        return r;
}

/* The sandbox's messages become the result, or the error. */
static int collect(const struct supervision *s, brig_result *res, brig_error **err)
{
        if (s->failure.type != 0) {
                int code;
                int r = sync_failure(&s->failure, &code, err);
                res->exit_code = code;
                return r;
        }
        int status = s->have_status ? s->wait_status : s->init_status;
        /* No word from pid 1 and no signal: it ended on its own before the
         * command's status was known — brig's failure, never the command's. */
        if (!s->have_status && WIFEXITED(status))
                return brig_err(err, EPROTO, "the sandbox's pid 1 ended unexpectedly (status %d)",
                                WEXITSTATUS(status));
        if (WIFSIGNALED(status)) {
                res->signal = WTERMSIG(status);
                res->exit_code = 128 + res->signal;
                res->reason = BRIG_REASON_SIGNALED;
        } else {
                res->exit_code = WEXITSTATUS(status);
                res->reason = BRIG_REASON_EXITED;
        }
        return 0;
}

int brig_run_in_process(const brig_policy *p, char *const argv[], brig_result *result, brig_error **err)
{
        pool_sweep();  /* what a SIGKILLed pool daemon left (spawn_run sweeps the rest) */
        return spawn_run(p, argv, NULL, result, err);
}

/* The writable trees of the run: the workspace and the user's writable
 * binds (tmpfs mounts go with the sandbox). */
static int record_writable(const struct run_plan *plan, struct runchanges **ret)
{
        const char **roots = calloc(plan->n_mounts + 1, sizeof *roots);
        if (!roots)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                struct stat st;
                /* an overlay workspace is not written through: its layer
                 * has what changed (overlay_diff.c) */
                bool workspace = m->src && plan->workspace && !plan->overlay_upper &&
                                 strcmp(m->src, plan->workspace) == 0;
                if (m->kind == MOUNT_BIND && !m->readonly && m->src && (m->from_user || workspace) &&
                    lstat(m->src, &st) == 0 && S_ISDIR(st.st_mode))
                        roots[n++] = m->src;
        }
        int r = runchanges_begin(roots, n, plan->limits.changes_max, ret);
        free(roots);
        return r;
}

/* The command's status and everything about it is final; pid 1, alone in
 * the sandbox, is on its way out. The caller exits next: a helper waits
 * for pid 1's end and removes the groups after it (teardown.c). Where no
 * helper can be made, as before: wait, remove. */
static void finish_after_status(int pidfd, struct cgroup *cg)
{
        struct strv dirs = { 0 };
        _cleanup_free_ char *record = NULL;
        test_pause("status-given");
        if (!cg)
                return;  /* nothing to remove: the caller's exit reparents pid 1 */
        cgroup_hand_over(cg, &dirs, &record);
        if (teardown_after_exit(pidfd, &dirs, record) == 0) {
                test_pause("teardown-handed-over");
        } else {
                waitid(P_PIDFD, (id_t)pidfd, &(siginfo_t){ 0 }, WEXITED);
                for (size_t i = 0; i < dirs.n; i++)
                        (void)cgroup_remove_dead(dirs.items[i], strrchr(dirs.items[i], '/') + 1);
                run_record_remove(record);
        }
        strv_free(&dirs);
}

/* ctl is NULL for brig run; for a persistent sandbox (sandbox.c) pid 1
 * serves execs through it instead of running one command. */
int spawn_run(const brig_policy *p, char *const argv[], struct control *ctl, brig_result *result, brig_error **err)
{
        struct run_plan plan = RUN_PLAN_INIT;
        struct userns_helper idmap_helper = USERNS_HELPER_INIT;  /* reaped once the child is released */
        struct terminal *term = NULL;
        struct supervision sup = { .pidfd = -1, .sync_fd = -1 };
        struct cgroup *cg = NULL;
        struct cgroup_inherited inherited = { 0 };
        struct egress *egress = NULL;
        struct unixguard *guard = NULL;
        struct refusals *refusals = refusals_new();
        struct sshagent *agent = NULL;
        struct rlimit nofile_saved;
        bool nofile_raised = false;
        struct rusage before, after;
        int sv[2] = { -1, -1 };
        int pidfd = -1;
        sigset_t blocked, saved;
        bool mask_saved = false;
        uint64_t start = now_ms();
        int r = 0;

        memset(result, 0, sizeof *result);
        result->exit_code = BRIG_EXIT_SETUP;
        result->memory_peak_bytes = result->pids_peak = -1;

        struct audit *audit = NULL;
        /* declared before the first goto out: the end frees them */
        struct runchanges *changes = NULL;
        struct manifest *manifest = NULL;
        r = refusals ? open_outputs(&plan, p, &audit, err) : brig_err(err, ENOMEM, "refusals");
        /* exec events come from brig's filter, which the gVisor wall does
         * not load: the stream's start says none will come */
        plan.audit_exec = plan.audit_fd >= 0 && !p->audit_no_exec && p->wall != BRIG_WALL_GVISOR;
        if (r < 0) {
                plan_free(&plan);
                refusals_free(refusals);
                return r;
        }
        /* --timings: a run's own stamps; a persistent sandbox's execs are
         * another sequence (persist/exec.c). */
        if (p->timings && !ctl && !(plan.timings = timings_new())) {
                r = brig_err(err, errno, "--timings: map the page of stamps");
                goto out;
        }
        timings_mark(plan.timings, TM_START);
        /* 1. The policy becomes a checked plan: paths resolved, layout
         *    sorted, secrets found, user and environment decided. */
        r = plan_build(&plan, p, argv, err);
        timings_mark(plan.timings, TM_PLAN);
        if (r == 0 && ctl)
                r = control_prepare(ctl, &plan, err);
        if (r < 0)
                goto out;
        /* 2. Fail closed when the host lacks a control. */
        r = check_host(&plan, err);
        if (r < 0)
                goto out;
        plan.new_time_ns = host_probe()->ns_time;
        if (plan.clock_pinned && !plan.new_time_ns) {
                r = brig_err(err, EOPNOTSUPP, "--clock-start: this kernel has no time namespaces (Linux 5.6 or "
                                              "later; brig doctor): run without --clock-start");
                goto out;
        }
        timings_mark(plan.timings, TM_PROBE);
        /* 3. The sandbox's cgroup, under our own (or a delegated) one;
         *    rlimits stand in, degraded, when none can be made. */
        r = cgroup_create(&plan.limits, &cg, &plan.cgroup_degraded, err);
        if (r < 0)
                goto out;
        timings_mark(plan.timings, TM_CGROUP);
        /* RLIMIT_DATA stands in for a memory cgroup, for private memory
         * only: say what it leaves open rather than claim a bound. But a
         * limit brig already runs under (systemd-run -p MemoryMax=, a
         * container's), as tight as --memory, bounds everything the
         * sandbox allocates, shared with brig: that is a real bound. */
        plan.memory_unbounded = plan.limits.memory && !cgroup_enforces(cg, CG_MEMORY);
        if (plan.memory_unbounded && cgroup_inherited_memory(cg, &inherited) && inherited.bytes <= plan.limits.memory) {
                plan.memory_unbounded = false;
                plan.memory_inherited = inherited.bytes;
                snprintf(plan.memory_inherited_dir, sizeof plan.memory_inherited_dir, "%s", inherited.dir);
        }
        char missing[64];
        cgroup_missing(cg, &plan.limits, plan.memory_inherited != 0, missing, sizeof missing);
        plan.cgroup_degraded = missing[0] != '\0';
        plan.pids_by_rlimit = plan.limits.pids && !plan.limits.nproc && !cgroup_enforces(cg, CG_PIDS);
        plan.cpus_unenforced = plan.limits.cpus_millis && !cgroup_enforces(cg, CG_CPU);
        plan.io_unenforced = plan.limits.io_weight && !cgroup_enforces(cg, CG_IO);
        /* Behind the gVisor wall no rlimit stands in for a missing cgroup:
         * the command's memory is the Sentry's (one shared mapping), its
         * processes are gVisor's tasks. Unbounded only when accepted. */
        if (plan.wall == BRIG_WALL_GVISOR) {
                bool mem = plan.memory_unbounded && !(p->allow_degraded & DEGRADE_MEMORY);
                bool pids = plan.pids_by_rlimit && !(p->allow_degraded & DEGRADE_PIDS);
                if (mem || pids) {
                        r = brig_err(err, EACCES,
                                     "--wall gvisor: no writable %s cgroup here, and under gVisor no rlimit stands in "
                                     "for one (the command's memory is the Sentry's, its processes are gVisor's "
                                     "tasks); run brig as root or from a cgroup v2 subtree delegated to you "
                                     "(docs/limits.md), or accept no bound with --allow-degraded %s",
                                     mem && pids ? "memory or pids" : mem ? "memory" : "pids",
                                     mem && pids ? "memory --allow-degraded pids" : mem ? "memory" : "pids");
                        goto out;
                }
        }
        if (plan.cgroup_degraded && plan.limits.required) {
                r = brig_err(err, EACCES,
                             "--require-limits: no writable cgroup enforces %s here%s; run brig as root, or from "
                             "a cgroup v2 subtree delegated to you (docs/limits.md; brig doctor shows the host's cgroups)",
                             missing,
                             plan.memory_unbounded ? " (without a memory cgroup, memfd, shared memory, pipe and socket "
                                                     "buffers, kernel memory and the sandbox's total are not bounded)"
                                                   : "");
                goto out;
        }
        if (plan.memory_unbounded && !(p->allow_degraded & DEGRADE_MEMORY))
                rlimits_memory_text(&plan, result->warning, sizeof result->warning);
        /* Said before anything runs, not only in the report afterwards. */
        if (p->notice) {
                struct strv lines = { 0 };
                r = degraded_warnings(&plan, &lines);
                for (size_t i = 0; i < lines.n; i++)
                        p->notice(lines.items[i], p->notice_data);
                strv_free(&lines);
                if (r < 0) {
                        r = brig_err(err, -r, "degraded controls");
                        goto out;
                }
        }
        cgroup_describe(cg, plan.cgroup_desc, sizeof plan.cgroup_desc);
        /* The syscall filter is compiled here, once, not in the child. */
        r = seccomp_prepare(&plan, err);
        if (r < 0)
                goto out;
        timings_mark(plan.timings, TM_SECCOMP);
        if (audit)
                audit_start(audit, &plan);
        /* What the run changes, for the stream's files event: recorded
         * now, before anything of the sandbox runs (runchanges.c). A
         * persistent sandbox's runs have brig diff instead. */
        if (audit && !ctl && (r = record_writable(&plan, &changes)) < 0) {
                r = brig_err(err, -r, "record the writable trees for the audit stream");
                goto out;
        }
        /* A persistent sandbox in bind mode writes its workspace itself:
         * the same record, once, before anything of it first runs, kept
         * in its state directory for brig diff and its stop (changes.c);
         * in overlay mode, of its writable binds only, for brig diff. A
         * start after a stop keeps it: "since create". */
        if (ctl && control_keeps_changes(ctl) && !changes_kept(control_dir(ctl))) {
                struct runchanges *kept = NULL;
                r = record_writable(&plan, &kept);
                r = r < 0 ? brig_err(err, -r, "record the writable trees for brig diff")
                          : changes_keep(control_dir(ctl), kept, err);
                runchanges_free(kept);
                if (r < 0)
                        goto out;
        }
        if (p->manifest_path && !ctl && (r = manifest_begin(&plan, p, &manifest, err)) < 0) {
                goto out;
        }
        /* Without seccomp (degraded on purpose) there is nothing to notify it. */
        if (!plan.seccomp_degraded && (r = unixguard_new(&plan, audit, plan.seccomp_replies, &guard, err)) < 0)
                goto out;
        /* The proxy holds a few descriptors per connection in this process,
         * and the unix socket guard a few per connect in flight (up to 256
         * of them): allow as many as the hard limit lets us for the run (the
         * sandbox sets its own --nofile; restored below). */
        if ((guard || plan.net_mode == BRIG_NET_PROXY || plan.net_mode == BRIG_NET_FILTERED) &&
            getrlimit(RLIMIT_NOFILE, &nofile_saved) == 0 && nofile_saved.rlim_cur < nofile_saved.rlim_max) {
                struct rlimit raised = { nofile_saved.rlim_max, nofile_saved.rlim_max };
                nofile_raised = setrlimit(RLIMIT_NOFILE, &raised) == 0;
        }
        if (plan.net_mode == BRIG_NET_PROXY || plan.net_mode == BRIG_NET_FILTERED) {
                egress = egress_new(p->egress, audit ? audit_net : NULL, audit, err);
                if (!egress) {
                        r = brig_err_prefix(err, "network proxy");
                        goto out;
                }
        } else if (plan.net_mode == BRIG_NET_NONE) {
                /* only the DNS stub that says "network is off" */
                egress = egress_new_offline(audit ? audit_net : NULL, audit, err);
                if (!egress) {
                        r = brig_err_prefix(err, "network off: DNS stub");
                        goto out;
                }
        }
        if (egress)
                egress_set_refusals(egress, refusals);
        if (egress && plan.intercept)
                egress_set_intercept(egress, plan.intercept);
        if (guard)
                unixguard_set_refusals(guard, refusals);
        if (plan.tools && plan.tools->agent_upstream && !(agent = sshagent_new(plan.tools->agent_upstream))) {
                r = brig_err(err, ENOMEM, "--ssh-agent");
                goto out;
        }
        timings_mark(plan.timings, TM_EGRESS);
        if (plan.idmap_workspace && !p->workspace_readonly) {
                r = userns_idmapped_workspace(&plan, &plan.idmapped_workspace_fd, &idmap_helper, err);
                if (r < 0)
                        goto out;
        }
        timings_mark(plan.timings, TM_IDMAP);
        /* an exec asks for its own pty */
        r = ctl ? 0 : terminal_prepare(p->tty, p->terminal_passthrough, NULL, &term, err);
        if (r < 0)
                goto out;
        plan.tty = terminal_is_pty(term);
        plan.term = term;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = brig_err(err, errno, "socketpair");
                goto out;
        }
        /* Block the signals we supervise before clone: the child inherits
         * the mask, so none reaches a default handler in between, and the
         * supervisor reads them from a signalfd. */
        sigemptyset(&blocked);
        for (size_t i = 0; i < ARRAY_SIZE(supervised_signals); i++)
                sigaddset(&blocked, supervised_signals[i]);
        sigprocmask(SIG_BLOCK, &blocked, &saved);
        mask_saved = true;

        /* 4. Every namespace at once; the pidfd names the child for good;
         *    on cgroup v2 the child is born inside its cgroup. */
        struct clone_args args = {
                .flags = namespace_flags(&plan) | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&pidfd,
                .exit_signal = SIGCHLD,
        };
        if (cgroup_clone_fd(cg) >= 0) {
                args.flags |= CLONE_INTO_CGROUP;
                args.cgroup = (uint64_t)cgroup_clone_fd(cg);
        }
        /* v1 has no CLONE_INTO_CGROUP: the child joins those groups itself,
         * through the descriptors it is sent after the go */
        plan.cgroup = cg;
        /* The gVisor wall's bundle is JSON the child writes, in the
         * sandbox's mounts: a program that opens jansson on first use
         * opens it here, where brig started (core/libload.h). */
        bool preload = plan.wall == BRIG_WALL_GVISOR && brig_json_preload;
#ifdef BRIG_TEST_HOOKS
        /* BRIG_TEST_NO_JSON_PRELOAD=1: not here, so that a test sees the
         * child's first use refused (test_gvisor.py) */
        preload = preload && !getenv("BRIG_TEST_NO_JSON_PRELOAD");
#endif
        if (preload)
                brig_json_preload();
        getrusage(RUSAGE_CHILDREN, &before);
        timings_mark(plan.timings, TM_PREPARED);
        if (plan.clock_pinned)
                timens_offsets_now(&plan);
        pid_t pid = (pid_t)sys_clone3(&args);
        if (pid < 0) {
                int e = errno;
                struct userns_restriction why;
                if (restrict_userns(e, &why))
                        r = brig_err(err, e, "clone3: creating the sandbox's namespaces: %s; to fix: %s", why.what,
                                     why.fix);
                else
                        r = brig_err(err, e, "clone3: creating the sandbox's namespaces (see brig doctor)");
                goto out;
        }
        if (pid == 0) {
                close(sv[0]);
                plan.sync_fd = sv[1];
                child_main(&plan);  /* never returns */
        }
        closep(&sv[1]);
        timings_mark(plan.timings, TM_CLONED);
        if (audit)
                audit_run(audit);
        terminal_handed_over(term);  /* the command's ends of the stdio pipes */
        test_pause("cloned");
        r = release_child(&plan, pid, sv[0], err);
        if (r < 0)
                goto out;
        test_pause("released");
        /* While the child sets up its network and sysctls (on another CPU,
         * where one is free): the v1 groups, made now unless a v2 group had
         * to come first, for it to join before its mounts. A child that
         * failed meanwhile has said why (supervise): its end is closed,
         * and the message is not its to read. */
        r = cgroup_make_deferred(cg, &plan.limits, err);
        if (r == 0 && cgroup_join_pending(cg) && (r = cgroup_join_open(cg, err)) == 0 &&
            (r = cgroup_join_send(cg, sv[0])) < 0)
                r = r == -EPIPE ? 0 : brig_err(err, -r, "cgroup: send the groups to join to the sandbox");
        if (r < 0)
                goto out;
        test_pause("cgroups-sent");
        /* What dead brigs left, while the child builds the sandbox. The
         * child was woken on this CPU, most often: let it run first, or it
         * waits for the sweep's 0.2-0.5 ms (measured with perf sched). */
        sched_yield();
        cgroup_sweep(cg);
        if (!ctl)
                cgroup_stats_open(cg);  /* read after the status: opened now */
        else
                cgroup_oom_open(cg);  /* read as each exec starts */
        userns_helper_reap(&idmap_helper);

        /* 5-6. Serve until pid 1 exits; everything inside dies with it. */
        sup.pidfd = pidfd;
        sup.sync_fd = sv[0];
        sup.term = term;
        sup.timeout_ms = ctl ? 0 : plan.limits.timeout_ms;  /* persistent: per exec (persist_init.c) */
        sup.kill_after_ms = plan.limits.kill_after_ms;
        sup.audit = audit;
        sup.guard = guard;
        if (guard && ctl)
                control_set_unixguard(ctl, guard);
        if (ctl) {
                control_set_refusals(ctl, refusals);
                control_set_egress(ctl, egress, audit);
        }
        sup.egress = egress;
        sup.control = ctl;
        sup.agent = agent;
        sup.timings = plan.timings;
        sup.end_at_status = p->exit_after_run && !ctl;
        if (ctl && (r = control_attach(ctl, &plan, cg, pidfd, sv[0], err)) < 0)
                goto out;
        r = supervise(&sup, err);
        timings_mark(plan.timings, TM_EXITED);
        if (sup.net_fallback[0]) {
                plan.net_mode = BRIG_NET_PROXY;
                snprintf(plan.net_fallback, sizeof plan.net_fallback, "%s", sup.net_fallback);
        }
        if (r < 0)
                goto out;
        if (sup.init_left) {
                /* pid 1 reaped every process: its figures are theirs */
                result->cpu_user_ms = sup.cpu_user_us / 1000;
                result->cpu_system_ms = sup.cpu_system_us / 1000;
                after.ru_maxrss = sup.maxrss_kb;
        } else {
                closep(&pidfd);  /* reaped by supervise() */
                getrusage(RUSAGE_CHILDREN, &after);
                result->cpu_user_ms = timeval_ms(after.ru_utime) - timeval_ms(before.ru_utime);
                result->cpu_system_ms = timeval_ms(after.ru_stime) - timeval_ms(before.ru_stime);
        }
        r = collect(&sup, result, err);
        if (r == 0) {
                struct cgroup_stats st;
                cgroup_stats(cg, &st);
                if (plan.memory_inherited)  /* the OOM killer acted in the group we run under */
                        st.oom_kills = cgroup_inherited_oom_kills(&inherited) - inherited.oom_kills_before;
                result->memory_peak_bytes = st.memory_peak >= 0 ? st.memory_peak : (int64_t)after.ru_maxrss * 1024;
                result->pids_peak = st.pids_peak;
                explain(result, &plan.limits, &st, sup.timed_out, refusals);
        }
out:
        userns_helper_reap(&idmap_helper);
        if (err && *err && result->exit_code == 0)
                result->exit_code = (*err)->exit_code;
        result->duration_ms = now_ms() - start;
        if (pidfd >= 0 && !sup.init_left) {
                /* Failed while the sandbox lives: take it down (its pid 1
                 * takes everything inside with it) and reap it. */
                sys_pidfd_send_signal(pidfd, SIGKILL);
                waitid(P_PIDFD, (id_t)pidfd, &(siginfo_t){ 0 }, WEXITED);
        }
        if (mask_saved)
                sigprocmask(SIG_SETMASK, &saved, NULL);
        test_pause("ended");
        terminal_close(term);
        if (!sup.init_left)
                cgroup_destroy(cg);  /* kills anything left, removes the groups */
        if (guard) {
                const char *first;
                result->unix_refused = unixguard_refused(guard, &first);
                snprintf(result->unix_refused_path, sizeof result->unix_refused_path, "%s", first);
        }
        unixguard_finish(guard);
        json_t *files = audit && changes ? runchanges_end(changes)
                        : audit && ctl && control_keeps_changes(ctl) && !plan.overlay_upper
                                ? changes_event(control_dir(ctl))
                                : NULL;
        if (manifest && manifest_end(manifest, &plan, result, audit, files, err) < 0 && r == 0)
                r = -EIO;
        manifest_free(manifest);
        if (files)
                audit_files(audit, files);
        runchanges_free(changes);
        if (audit)
                audit_end(audit, result);
        if (agent)
                sshagent_refusals(agent, refusals);
        timings_mark(plan.timings, TM_TEARDOWN);
        if (plan.timings)
                timings_text(plan.timings, result->timings, sizeof result->timings);
        refusals_text(refusals, REFUSALS_LINES, result->refusals, sizeof result->refusals);
        closep(&sv[0]);
        closep(&sv[1]);
        if (plan.report_fd >= 0 && plan.workspace) {
                struct run_report rep = { .plan = &plan, .result = result, .error = err ? *err : NULL,
                                          .audit = audit, .egress = egress, .refusals = refusals };
                brig_error *rerr = NULL;
                int rr = report_write(plan.report_fd, &rep, r < 0 ? &rerr : err);
                if (rr < 0 && r == 0)
                        r = rr;
                brig_error_free(&rerr);
        }
        if (sup.init_left)
                finish_after_status(pidfd, cg);
        closep(&pidfd);
        egress_free(egress);
        sshagent_free(agent);
        unixguard_free(guard);
        refusals_free(refusals);
        if (nofile_raised)
                (void)setrlimit(RLIMIT_NOFILE, &nofile_saved);
        audit_free(audit);
        timings_free(plan.timings);
        plan_free(&plan);
        return r;
}
