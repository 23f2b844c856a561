/* report.c — the JSON run report (--json-report FILE), schema in
 * docs/report.md. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/model.h"
#include "core/report.h"
#include "controls/rlimit.h"
#include "tools/tools.h"
#include "core/audit.h"
#include "net/egress.h"
#include "core/refusals.h"
#include "core/timings.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void pids_text(const struct run_plan *plan, char *buf, size_t n)
{
        snprintf(buf, n,
                 "pids: --pids %llu%s is held by RLIMIT_NPROC (the sandbox user's processes), not by a pids "
                 "cgroup: no writable one here (run brig as root or in a cgroup v2 subtree delegated to you, "
                 "docs/limits.md); to accept this and drop the warning: --allow-degraded pids; to refuse such "
                 "runs: --require-limits",
                 (unsigned long long)plan->limits.pids, plan->limits.pids == BRIG_DEFAULT_PIDS ? " (the default)" : "");
}

static void cpus_text(const struct run_plan *plan, char *buf, size_t n)
{
        snprintf(buf, n,
                 "cpus: --cpus %.2f is not enforced: no writable cpu cgroup here (run brig as root or in a cgroup "
                 "v2 subtree delegated to you, docs/limits.md); to accept this and drop the warning: "
                 "--allow-degraded cpus; to refuse such runs: --require-limits",
                 (double)plan->limits.cpus_millis / 1000.0);
}

static void io_text(const struct run_plan *plan, char *buf, size_t n)
{
        snprintf(buf, n,
                 "io: --io-weight %u is not enforced: no writable io (v2) or blkio (v1) cgroup here (run brig as "
                 "root or in a cgroup v2 subtree delegated to you with the io controller, docs/limits.md); to accept "
                 "this and drop the warning: --allow-degraded io; to refuse such runs: --require-limits",
                 plan->limits.io_weight);
}

/* Each line names what is weaker, why, and the flag or step that fixes
 * it; the CLI prints them before the command starts (no silent downgrade:
 * docs/usage.md "System calls and degradation"). */
int degraded_warnings(const struct run_plan *plan, struct strv *out)
{
        char text[600];
        unsigned accepted = plan->policy ? plan->policy->allow_degraded : 0;
        int r = 0;
        if (plan->landlock_abi == 0)
                r = r ?: strv_push(out, "Landlock: not available on this host (a kernel without it, or 'landlock' "
                                        "missing from the lsm= boot list): the sandbox's file access rests on its "
                                        "mounts alone (accepted by --allow-degraded landlock)");
        if (plan->seccomp_degraded)
                r = r ?: strv_push(out, "seccomp: not available on this host: the sandbox runs without a syscall "
                                        "filter, and unix sockets outside it are not guarded (accepted by "
                                        "--allow-degraded seccomp)");
        if (plan->memory_unbounded && !(accepted & DEGRADE_MEMORY)) {
                rlimits_memory_text(plan, text, sizeof text);
                r = r ?: strv_push(out, text);
        }
        if (plan->pids_by_rlimit && !(accepted & DEGRADE_PIDS)) {
                pids_text(plan, text, sizeof text);
                r = r ?: strv_push(out, text);
        }
        if (plan->cpus_unenforced && !(accepted & DEGRADE_CPUS)) {
                cpus_text(plan, text, sizeof text);
                r = r ?: strv_push(out, text);
        }
        if (plan->io_unenforced && !(accepted & DEGRADE_IO)) {
                io_text(plan, text, sizeof text);
                r = r ?: strv_push(out, text);
        }
        return r < 0 ? r : 0;
}

/* What was handed in at start (tools.c): paths inside and the flag that
 * asked for each, never contents. */
static json_t *tools_json(const struct run_plan *plan)
{
        json_t *copied = json_array(), *generated = json_array();
        const struct tools_plan *t = plan->tools;
        for (size_t i = 0; t && i < t->n_files; i++) {
                json_t *o = json_pack("{s:s, s:s, s:I}", "path", t->files[i].path, "flag", t->files[i].origin, "bytes",
                                      (json_int_t)t->files[i].len);
                json_array_append_new(t->files[i].copied ? copied : generated, o);
        }
        return json_pack("{s:o, s:o, s:b}", "copied_in", copied, "generated", generated, "ssh_agent",
                         t && t->agent_upstream);
}

static json_t *mounts_json(const struct run_plan *plan)
{
        json_t *a = json_array();
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                json_t *o = json_object();
                json_object_set_new(o, "destination", json_string(m->dst));
                if (m->kind == MOUNT_TMPFS && strcmp(m->dst, BRIG_RUNTIME_DIR) == 0) {
                        json_object_set_new(o, "type", json_string("brig"));  /* read-only once set up */
                        json_array_append_new(a, o);
                        continue;
                }
                if (m->kind == MOUNT_TMPFS) {
                        json_object_set_new(o, "type", json_string("tmpfs"));
                        json_object_set_new(o, "size_bytes", json_integer((json_int_t)m->size));
                } else {
                        bool idmapped = plan->idmapped_workspace_fd >= 0 && m->src && plan->workspace &&
                                        strcmp(m->src, plan->workspace) == 0 && !m->readonly;
                        json_object_set_new(o, "type", json_string("bind"));
                        json_object_set_new(o, "source", json_string(m->src));
                        if (idmapped)
                                json_object_set_new(o, "idmapped", json_true());
                }
                json_object_set_new(o, "readonly", json_boolean(m->readonly));
                json_array_append_new(a, o);
        }
        static const char *const own[] = { "/dev", "/dev/pts", "/dev/shm", "/proc" };
        for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
                json_t *o = json_object();
                json_object_set_new(o, "destination", json_string(own[i]));
                json_object_set_new(o, "type", json_string("brig"));
                json_array_append_new(a, o);
        }
        if (plan->policy->mount_sys) {
                json_t *o = json_pack("{s:s, s:s, s:b}", "destination", "/sys", "type", "sysfs", "readonly", 1);
                json_array_append_new(a, o);
        }
        return a;
}

static json_t *strings_json(char *const *items, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; items && i < n; i++)
                json_array_append_new(a, json_string(items[i]));
        return a;
}

static json_t *limit_or_null(uint64_t v)
{
        return v ? json_integer((json_int_t)v) : json_null();
}

/* The limits applied, and how: "cgroup" (with the hierarchy per
 * controller) or "rlimit" when cgroups were unavailable (degraded). */
static json_t *limits_json(const struct run_plan *plan)
{
        const struct limits *l = &plan->limits;
        json_t *o = json_object();
        json_object_set_new(o, "memory_bytes", limit_or_null(l->memory));
        json_object_set_new(o, "pids", limit_or_null(l->pids));
        json_object_set_new(o, "cpus", l->cpus_millis ? json_real((double)l->cpus_millis / 1000.0) : json_null());
        json_object_set_new(o, "io_weight", limit_or_null(l->io_weight));
        json_object_set_new(o, "timeout_ms", limit_or_null(l->timeout_ms));
        json_object_set_new(o, "kill_after_ms", limit_or_null(l->kill_after_ms));
        json_object_set_new(o, "cpu_time_s", limit_or_null(l->cpu_time_s));
        json_object_set_new(o, "nofile", limit_or_null(l->nofile));
        json_object_set_new(o, "nproc", limit_or_null(l->nproc));
        json_object_set_new(o, "fsize_bytes", limit_or_null(l->fsize));
        json_object_set_new(o, "stack_bytes", limit_or_null(l->stack));
        json_object_set_new(o, "core_bytes", json_integer(0));
        json_object_set_new(o, "enforced_by", json_string(plan->cgroup_degraded ? "rlimit" : "cgroup"));
        /* The memory limit on its own: "rlimit" bounds private memory per
         * process, and the kinds it leaves open are listed. */
        json_object_set_new(o, "memory_enforced_by",
                            !l->memory                ? json_null()
                            : plan->memory_unbounded  ? json_string(plan->wall == BRIG_WALL_GVISOR ? "none" : "rlimit")
                            : plan->memory_inherited  ? json_string("inherited cgroup")
                                                      : json_string("cgroup"));
        json_object_set_new(o, "memory_inherited",
                            plan->memory_inherited ? json_pack("{s:I, s:s}", "bytes", (json_int_t)plan->memory_inherited,
                                                               "cgroup", plan->memory_inherited_dir)
                                                   : json_null());
        json_t *open_kinds = json_array();
        for (size_t i = 0; plan->memory_unbounded && rlimits_memory_unbounded[i]; i++)
                json_array_append_new(open_kinds, json_string(rlimits_memory_unbounded[i]));
        json_object_set_new(o, "memory_not_bounded", open_kinds);
        json_object_set_new(o, "sysv_ipc_bytes", ipc_limits_settable(plan) ? json_integer((json_int_t)l->memory)
                                                                           : json_null());
        json_object_set_new(o, "cgroup", json_string(plan->cgroup_desc));
        return o;
}

int report_write(int fd, const struct run_report *r, brig_error **err)
{
        const struct run_plan *plan = r->plan;
        json_t *ns = json_pack("[s,s,s,s,s,s,s]", "user", "mount", "pid", "network", "ipc", "uts", "cgroup");
        if (plan->new_time_ns)
                json_array_append_new(ns, json_string("time"));
        json_t *user = json_pack("{s:i, s:i, s:i, s:i, s:b, s:b}",
                                 "uid", (int)plan->sandbox_uid, "gid", (int)plan->sandbox_gid,
                                 "host_uid", (int)plan->host_uid, "host_gid", (int)plan->host_gid,
                                 "rootless", !plan->rootful, "idmapped_workspace",
                                 plan->idmapped_workspace_fd >= 0);
        size_t argc = 0;
        while (plan->argv && plan->argv[argc])
                argc++;
        json_t *doc = json_object();
        json_object_set_new(doc, "brig_version", json_string(brig_version()));
        json_object_set_new(doc, "command", strings_json(plan->argv, argc));
        json_object_set_new(doc, "exit_code", json_integer(r->result->exit_code));
        json_object_set_new(doc, "signal", r->result->signal ? json_integer(r->result->signal) : json_null());
        json_object_set_new(doc, "reason", r->error ? json_string("error") : json_string(brig_reason_name(r->result->reason)));
        const brig_result *res = r->result;
        json_object_set_new(doc, "duration_ms", json_integer((json_int_t)res->duration_ms));
        json_object_set_new(doc, "cpu_user_ms", json_integer((json_int_t)res->cpu_user_ms));
        json_object_set_new(doc, "cpu_system_ms", json_integer((json_int_t)res->cpu_system_ms));
        json_object_set_new(doc, "memory_peak_bytes",
                            res->memory_peak_bytes >= 0 ? json_integer(res->memory_peak_bytes) : json_null());
        json_object_set_new(doc, "pids_peak", res->pids_peak >= 0 ? json_integer(res->pids_peak) : json_null());
        if (res->summary[0])
                json_object_set_new(doc, "summary", json_string(res->summary));
        json_object_set_new(doc, "limits", limits_json(plan));
        if (r->error)
                json_object_set_new(doc, "error", json_string(r->error->msg));
        json_t *controls = json_object();
        json_object_set_new(controls, "wall", json_string(plan->wall == BRIG_WALL_GVISOR ? "gvisor" : "namespaces"));
        json_object_set_new(controls, "namespaces", ns);
        json_object_set_new(controls, "user", user);
        json_object_set_new(controls, "workspace", plan->workspace ? json_string(plan->workspace) : json_null());
        json_object_set_new(controls, "mounts", mounts_json(plan));
        json_object_set_new(controls, "hidden", strings_json(plan->masks.items, plan->masks.n));
        static const char *const modes[] = { [BRIG_NET_NONE] = "none", [BRIG_NET_PROXY] = "proxy",
                                             [BRIG_NET_HOST] = "host", [BRIG_NET_FILTERED] = "filtered" };
        json_object_set_new(controls, "network", json_string(modes[plan->net_mode]));
        if (plan->net_fallback[0])
                json_object_set_new(controls, "network_fallback", json_string(plan->net_fallback));
        if (plan->net_mode == BRIG_NET_PROXY || plan->net_mode == BRIG_NET_FILTERED) {
                json_t *egress = egress_policy_json(plan->policy->egress);
                if (r->egress)
                        json_object_update_new(egress, egress_summary_json(r->egress));
                json_object_set_new(controls, "egress", egress);
        }
        /* The unix socket guard needs seccomp; its counts are this run's. */
        json_t *unix_allowed = strings_json(plan->policy->allow_unix.items, plan->policy->allow_unix.n);
        /* Behind the gVisor wall brig's filter and Landlock are not what
         * the command meets: gVisor's Sentry answers its calls, and runsc
         * reaches no host unix socket (docs/walls.md). */
        bool gvisor = plan->wall == BRIG_WALL_GVISOR;
        json_object_set_new(controls, "unix_sockets",
                            json_pack("{s:s, s:o, s:I}", "guard",
                                      gvisor ? "gvisor" : plan->seccomp_degraded ? "off" : "on", "allowed",
                                      unix_allowed, "refused", (json_int_t)res->unix_refused));
        json_object_set_new(controls, "capabilities", json_array());
        json_object_set_new(controls, "no_new_privs", json_true());
        json_object_set_new(controls, "landlock_abi", gvisor ? json_null() : json_integer(plan->landlock_abi));
        json_object_set_new(controls, "seccomp",
                            json_string(gvisor ? "gvisor" : plan->seccomp_degraded ? "degraded" : "default"));
        json_t *degraded = json_array();
        if (plan->policy && plan->landlock_abi == 0 && (plan->policy->allow_degraded & DEGRADE_LANDLOCK))
                json_array_append_new(degraded, json_string("landlock"));
        if (plan->seccomp_degraded) {
                json_array_append_new(degraded, json_string("seccomp"));
                json_array_append_new(degraded, json_string("unix sockets: not guarded (no seccomp): a socket file "
                                                            "in a grant reaches the host's server behind it"));
        }
        if (plan->cgroup_degraded)
                json_array_append_new(degraded, json_string("cgroup limits"));
        char line[600];
        if (plan->memory_unbounded) {
                rlimits_memory_text(plan, line, sizeof line);
                json_array_append_new(degraded, json_string(line));
        }
        if (plan->pids_by_rlimit) {
                pids_text(plan, line, sizeof line);
                json_array_append_new(degraded, json_string(line));
        }
        if (plan->cpus_unenforced) {
                cpus_text(plan, line, sizeof line);
                json_array_append_new(degraded, json_string(line));
        }
        if (plan->io_unenforced) {
                io_text(plan, line, sizeof line);
                json_array_append_new(degraded, json_string(line));
        }
        if (plan->net_fallback[0]) {
                char text[400];
                snprintf(text, sizeof text, "network: filtered mode unavailable (%s); proxy mode used",
                         plan->net_fallback);
                json_array_append_new(degraded, json_string(text));
        }
        if (plan->net_mode == BRIG_NET_HOST)  /* asked for, but say it loudly */
                json_array_append_new(degraded, json_string("network: host (no egress control)"));
        json_object_set_new(doc, "degraded", degraded);
        json_object_set_new(doc, "refusals", refusals_json(r->refusals));
        if (refusals_dropped(r->refusals))  /* a sandbox chooses how many names it tries */
                json_object_set_new(doc, "refusals_dropped", json_integer((json_int_t)refusals_dropped(r->refusals)));
        json_object_set_new(controls, "tools", tools_json(plan));
        json_object_set_new(controls, "tty", json_boolean(plan->tty));
        json_object_set_new(controls, "terminal_filter", json_boolean(!plan->policy->terminal_passthrough));
        json_object_set_new(doc, "controls", controls);
        if (plan->timings)
                json_object_set_new(doc, "timings", timings_json(plan->timings));
        if (plan->policy->audit_path || plan->policy->audit_fd)
                json_object_set_new(doc, "audit",
                                    json_pack("{s:o, s:o, s:I, s:I, s:I, s:o}", "path",
                                              plan->policy->audit_path ? json_string(plan->policy->audit_path)
                                                                       : json_null(),
                                              "fd", plan->policy->audit_fd ? json_integer(plan->policy->audit_fd)
                                                                           : json_null(),
                                              "syscall_events", (json_int_t)audit_events(r->audit),
                                              "suppressed", (json_int_t)audit_suppressed(r->audit),
                                              "lost", (json_int_t)audit_lost(r->audit), "stopped",
                                              audit_stopped(r->audit) ? json_string(audit_stopped(r->audit))
                                                                      : json_null()));
        /* the stream's hash, kept apart from it: `brig log verify --sha256`
         * then also holds its end line to what was written */
        if (json_object_get(doc, "audit") && audit_sha256(r->audit))
                json_object_set_new(json_object_get(doc, "audit"), "sha256", json_string(audit_sha256(r->audit)));
        if (plan->policy->pool_note)  /* brig run --pooled, not served by the pool */
                json_object_set_new(doc, "pool", json_pack("{s:b, s:n, s:s}", "served", 0, "member", "reason",
                                                           plan->policy->pool_note));
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(doc);
        char what[PATH_MAX + 32];
        report_what(plan->policy, what, sizeof what);
        return report_text_write(fd, text, what, err);
}

void report_what(const brig_policy *p, char *buf, size_t size)
{
        if (p->report_fd)
                snprintf(buf, size, "--json-report-fd %d", p->report_fd);
        else
                snprintf(buf, size, "--json-report %s", p->report_path);
}

int report_text_write(int fd, char *text, const char *what, brig_error **err)
{
        if (!text)
                return brig_err(err, ENOMEM, "report");
        size_t len = strlen(text);
        text[len] = '\n';  /* replaces the terminator: written by length */
        int e = -output_write_bounded(fd, text, len + 1, REPORT_IDLE_MS);
        free(text);
        /* A file the sandbox could write meanwhile (one in the workspace)
         * ends where the report does: what it put past that length stays
         * otherwise, a second document after brig's. Not a file appended
         * to (a log of reports, --json-report-fd N>>FILE). */
        struct stat st;
        int fl = fcntl(fd, F_GETFL);
        off_t end = e == 0 && fl >= 0 && !(fl & O_APPEND) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                            ? lseek(fd, 0, SEEK_CUR)
                            : -1;
        if (end >= 0 && st.st_size > end && ftruncate(fd, end) < 0)
                e = errno;
        if (e == ETIMEDOUT)
                return brig_err(err, e, "%s: nothing was read for %d s after the run ended: the report was not "
                                "written (read the pipe while brig runs, or give --json-report FILE)", what,
                                REPORT_IDLE_MS / 1000);
        return e ? brig_err(err, e, "%s: write the report", what) : 0;
}
