/* manifest.c — `--manifest FILE`: what runs the same thing again
 * (docs/audit.md#replay). Written when the run ends: the effective policy,
 * argv, the command's environment, cwd, brig's version, the workspace
 * tree's hash at start (taken before anything of the sandbox runs), the
 * versions of the system directories, and the outcome `brig replay`
 * compares: exit status, the programs run, the files changed (by content
 * hash) and the network decisions, from the run's audit stream (one to
 * /dev/null when the run has none). */
#define _GNU_SOURCE
#include "core/manifest.h"
#include "core/audit.h"
#include "core/hostfs.h"
#include "core/model.h"
#include "persist/runchanges.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

struct manifest {
        int fd;
        int64_t wall_ms;  /* when the run started */
        char tree[65];
        uint64_t entries;
        char tree_error[512];
};

int manifest_begin(const struct run_plan *plan, const brig_policy *p, struct manifest **ret, brig_error **err)
{
        struct manifest *m = calloc(1, sizeof *m);
        if (!m)
                return brig_err(err, ENOMEM, "--manifest");
        m->fd = output_open(p->manifest_path, "--manifest", false, err);
        if (m->fd < 0) {
                int r = m->fd;
                free(m);
                return r;
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        m->wall_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        brig_error *e = NULL;
        if (plan->workspace && runchanges_tree_hash(plan->workspace, plan->limits.changes_max, m->tree, &m->entries,
                                                    &e) < 0)
                snprintf(m->tree_error, sizeof m->tree_error, "%s", e && e->msg ? e->msg : "?");
        brig_error_free(&e);
        *ret = m;
        return 0;
}

/* The SHA-256 of a host file, or null (dpkg's status: the package list). */
static json_t *file_sha256(const char *path)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char hex[SHA256_HEX];
        return fd >= 0 && sha256_fd(fd, UINT64_MAX, hex) == 0 ? json_string(hex) : json_null();
}

static json_t *os_release(void)
{
        FILE *f = fopen("/etc/os-release", "re");
        char line[512];
        json_t *v = json_null();
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
                        line[strcspn(line, "\n")] = '\0';
                        char *s = line + 12;
                        size_t n = strlen(s);
                        if (n >= 2 && s[0] == '"' && s[n - 1] == '"')
                                s[n - 1] = '\0', s++;
                        json_decref(v);
                        v = json_string(s) ?: json_null();
                }
        if (f)
                fclose(f);
        return v;
}

/* The files event's changes as replay compares them: path (relative to
 * the workspace as "./rel") -> content hash, or the type for what has
 * none, or "deleted". */
static json_t *file_outcome(const struct run_plan *plan, json_t *files)
{
        json_t *out = json_object();
        size_t i;
        json_t *c;
        size_t wl = plan->workspace ? strlen(plan->workspace) : 0;
        json_array_foreach(json_object_get(files, "changes"), i, c) {
                const char *path = json_string_value(json_object_get(c, "path"));
                if (!path)
                        continue;
                char *key = wl && strncmp(path, plan->workspace, wl) == 0 && path[wl] == '/'
                            ? brig_strdup_printf(".%s", path + wl) : strdup(path);
                const char *change = json_string_value(json_object_get(c, "change"));
                json_t *h = json_object_get(c, "sha256");
                json_t *v = change && strcmp(change, "deleted") == 0 ? json_string("deleted")
                            : json_is_string(h) ? json_incref(h)
                            : json_incref(json_object_get(c, "type") ?: json_null());
                if (key)
                        json_object_set_new(out, key, v);
                else
                        json_decref(v);
                free(key);
        }
        return out;
}

/* The clocks the command read (docs/audit.md#replay): with --clock-start
 * the time namespace's offsets and the reading they gave as it started
 * (replay gives the same reading: the same policy), the wall clock at the
 * start (the host's: no namespace moves it) and SOURCE_DATE_EPOCH, which
 * a build that embeds a date reads instead of it. */
static json_t *clock_record(const struct manifest *m, const struct run_plan *plan)
{
        const char *sde = NULL;
        for (char **e = plan->envp; e && *e && !sde; e++)
                if (strncmp(*e, "SOURCE_DATE_EPOCH=", 18) == 0)
                        sde = *e + 18;
        json_t *o = json_pack("{s:b, s:b, s:I, s:o}", "time_namespace", plan->new_time_ns, "pinned",
                              plan->clock_pinned, "wall_start_ms", (json_int_t)m->wall_ms, "source_date_epoch",
                              sde ? json_string(sde) : json_null());
        if (o && plan->clock_pinned) {
                json_object_set_new(o, "start_ns", json_integer((json_int_t)plan->clock_start_ns));
                json_object_set_new(o, "monotonic_offset_ns", json_integer(plan->clock_offset_mono_ns));
                json_object_set_new(o, "boottime_offset_ns", json_integer(plan->clock_offset_boot_ns));
        }
        return o;
}

int manifest_end(struct manifest *m, const struct run_plan *plan, const brig_result *res, struct audit *audit,
                 json_t *files, brig_error **err)
{
        char *policy_text = brig_policy_to_json(plan->policy, NULL);
        json_t *policy = policy_text ? json_loads(policy_text, 0, NULL) : NULL;
        free(policy_text);
        json_t *argv = json_array(), *env = json_array();
        for (char *const *a = plan->argv; a && *a; a++)
                json_array_append_new(argv, json_string(*a) ?: json_string("?"));
        for (char **e = plan->envp; e && *e; e++) {
                /* A variable kept from the caller's environment (--keep-env:
                 * tokens, often) is written by name only: the replay keeps it
                 * from its own caller's (the policy says so), and its value
                 * never lands in a file. */
                const char *eq = strchr(*e, '=');
                size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
                bool kept = false;
                for (size_t i = 0; plan->policy && i < plan->policy->keep_env.n && !kept; i++)
                        kept = strlen(plan->policy->keep_env.items[i]) == len &&
                               strncmp(plan->policy->keep_env.items[i], *e, len) == 0;
                json_t *v = kept ? json_stringn(*e, len) : json_string(*e);
                json_array_append_new(env, v ?: json_string("?"));
        }
        struct utsname u;
        json_t *outcome = audit ? audit_outcome(audit) : json_object();
        json_object_set_new(outcome, "exit_code", json_integer(res->exit_code));
        json_object_set_new(outcome, "signal", res->signal ? json_integer(res->signal) : json_null());
        json_object_set_new(outcome, "reason", json_string(brig_reason_name(res->reason)));
        json_object_set_new(outcome, "files", file_outcome(plan, files));
        /* A file listed without its hash (the byte caps) is only "file"
         * in the outcome: two runs that wrote it differently would
         * compare the same, so the comparison is in part only. */
        json_object_set_new(outcome, "files_complete", json_boolean(json_is_true(json_object_get(files, "complete")) &&
                                                                    !json_object_get(files, "unhashed")));
        json_t *clock = clock_record(m, plan);
        json_t *doc = json_pack(
                "{s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:I, s:o}, s:{s:o, s:o, s:s}, s:o}", "brig_manifest", 1,
                "brig_version", brig_version(), "policy", policy ? policy : json_null(), "argv", argv, "env", env,
                "cwd", plan->cwd ? json_string(plan->cwd) : json_null(), "workspace",
                plan->workspace ? json_string(plan->workspace) : json_null(), "workspace_tree", "sha256",
                m->tree[0] ? json_string(m->tree) : json_null(), "entries", (json_int_t)m->entries, "error",
                m->tree_error[0] ? json_string(m->tree_error) : json_null(), "system", "dpkg_status_sha256",
                file_sha256("/var/lib/dpkg/status"), "os_release", os_release(), "kernel",
                uname(&u) == 0 ? u.release : "?", "outcome", outcome);
        if (doc && clock)
                json_object_set_new(doc, "clock", clock);
        else
                json_decref(clock);
        char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        json_decref(doc);
        int r = 0;
        if (!text)
                r = brig_err(err, ENOMEM, "--manifest");
        else if ((r = output_write(m->fd, text, strlen(text))) < 0 || (r = output_write(m->fd, "\n", 1)) < 0)
                r = brig_err(err, -r, "--manifest: write");
        free(text);
        return r;
}

void manifest_free(struct manifest *m)
{
        if (!m)
                return;
        closep(&m->fd);
        free(m);
}
