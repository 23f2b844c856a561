/* plan_dump.c — what plan_build decided, as one canonical JSON text (sorted
 * keys, one line), and the test hook that writes it: with meson
 * -Dtest_hooks=true, BRIG_TEST_PLAN=FILE makes a run write its plan to
 * FILE. A faster way to the same plan is checked against it: two builds,
 * or the short cuts and the long way (BRIG_TEST_PLAN_LONG_WAY, plan.c),
 * must write the same text for the same inputs (tests/integration/
 * test_plan.py, docs/benchmarks.md). */
#define _GNU_SOURCE
#include "core/model.h"
#include "tools/tools.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef BRIG_TEST_HOOKS
static json_t *strv_json(const struct strv *v)
{
        json_t *a = json_array();
        for (size_t i = 0; i < v->n; i++)
                json_array_append_new(a, json_string(v->items[i]));
        return a;
}

static json_t *mounts_json(const struct run_plan *plan)
{
        json_t *a = json_array();
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                json_array_append_new(
                        a, json_pack("{s:s, s:s?, s:s, s:b, s:I, s:i, s:b, s:b}", "kind",
                                     m->kind == MOUNT_BIND ? "bind" : "tmpfs", "src", m->src, "dst", m->dst,
                                     "readonly", m->readonly, "size", (json_int_t)m->size, "mode", (int)m->mode,
                                     "user_owned", m->user_owned, "from_user", m->from_user));
        }
        return a;
}

static json_t *limits_json(const struct limits *l)
{
        return json_pack("{s:I, s:I, s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "memory",
                         (json_int_t)l->memory, "pids", (json_int_t)l->pids, "cpus_millis", (json_int_t)l->cpus_millis,
                         "io_weight", (int)l->io_weight, "timeout_ms", (json_int_t)l->timeout_ms, "kill_after_ms",
                         (json_int_t)l->kill_after_ms, "cpu_time_s", (json_int_t)l->cpu_time_s, "nofile",
                         (json_int_t)l->nofile, "nproc", (json_int_t)l->nproc, "fsize", (json_int_t)l->fsize,
                         "stack", (json_int_t)l->stack, "changes_max", (json_int_t)l->changes_max, "required",
                         l->required, "want_freezer", l->want_freezer);
}

static json_t *tools_json(const struct tools_plan *t)
{
        if (!t)
                return json_null();
        json_t *files = json_array();
        for (size_t i = 0; i < t->n_files; i++) {
                char hex[SHA256_HEX];
                sha256_text(t->files[i].data, t->files[i].len, hex);
                json_array_append_new(files, json_pack("{s:s, s:s, s:i, s:b, s:s}", "path", t->files[i].path,
                                                       "sha256", hex, "mode", (int)t->files[i].mode, "copied",
                                                       t->files[i].copied, "origin", t->files[i].origin));
        }
        return json_pack("{s:o, s:s?, s:b, s:s?, s:b}", "files", files, "passwd", t->passwd, "runtime_dir",
                         t->runtime_dir, "agent_upstream", t->agent_upstream, "ca", t->ca_pem != NULL);
}

static char *plan_dump(const struct run_plan *plan)
{
        json_t *env = json_array(), *groups = json_array();
        for (char **e = plan->envp; e && *e; e++)
                json_array_append_new(env, json_string(*e));
        for (size_t i = 0; i < plan->n_groups; i++)
                json_array_append_new(groups, json_pack("[i,i]", (int)plan->sandbox_groups[i], (int)plan->host_groups[i]));
        json_t *o = json_pack(
                "{s:s, s:s?, s:I, s:b, s:s, s:b, s:b, s:s, s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:i, s:i, s:o, "
                "s:i, s:b, s:b, s:b, s:i, s:b, s:b, s:I, s:o, s:i, s:o}",
                "hostname", plan->hostname, "cwd", plan->cwd, "shm_size", (json_int_t)plan->shm_size, "mount_sys",
                plan->mount_sys, "workspace", plan->workspace, "rootfs", plan->rootfs, "rootfs_readonly",
                plan->rootfs_readonly, "home", plan->home, "mounts", mounts_json(plan), "masks",
                strv_json(&plan->masks), "pins", strv_json(&plan->pins), "symlinks", strv_json(&plan->symlinks), "env",
                env, "host_uid", (int)plan->host_uid, "sandbox_uid", (int)plan->sandbox_uid, "host_gid",
                (int)plan->host_gid, "sandbox_gid", (int)plan->sandbox_gid, "groups", groups, "umask",
                (int)plan->umask, "rootful", plan->rootful, "map_root_for_setup", plan->map_root_for_setup,
                "idmap_workspace", plan->idmap_workspace, "net_mode", (int)plan->net_mode, "net_filtered_required",
                plan->net_filtered_required, "clock_pinned", plan->clock_pinned, "clock_start_ns",
                (json_int_t)plan->clock_start_ns, "limits", limits_json(&plan->limits), "wall", (int)plan->wall,
                "tools", tools_json(plan->tools));
        char *text = o ? json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        json_decref(o);
        return text;
}

void plan_test_dump(const struct run_plan *plan)
{
        const char *path = getenv("BRIG_TEST_PLAN");
        if (!path || !*path)
                return;
        _cleanup_free_ char *text = plan_dump(plan);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || !text || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
                fprintf(stderr, "brig-test: BRIG_TEST_PLAN: could not write '%s'\n", path);
        if (fd >= 0)
                close(fd);
}
#else
void plan_test_dump(const struct run_plan *plan)
{
        (void)plan;
}
#endif
