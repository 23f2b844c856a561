/* sandboxes.c — the routes on sandboxes themselves: list, create, get,
 * remove, stop/start/pause/resume, the overlay (diff, commit, reset),
 * snapshots and forks, and the server's own (health, version, doctor).
 * Each is one libbrig call; what is here is who may, and the answer. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- sandboxes this server created (--remove-on-exit), idle times ------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *created;         /* names */
static json_t *touched;         /* name -> last request, monotonic ms */

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void serve_created_add(const char *name)
{
        pthread_mutex_lock(&lock);
        if (!created)
                created = json_object();
        json_object_set_new(created, name, json_true());
        pthread_mutex_unlock(&lock);
}

static void created_forget(const char *name)
{
        pthread_mutex_lock(&lock);
        json_object_del(created, name);
        json_object_del(touched, name);
        pthread_mutex_unlock(&lock);
}

static void remove_sandbox(const char *name, brig_error **err, int *rc);

void serve_created_remove_all(void)
{
        pthread_mutex_lock(&lock);
        json_t *names = json_deep_copy(created);
        pthread_mutex_unlock(&lock);
        const char *name;
        json_t *v;
        json_object_foreach(names, name, v) {
                brig_error *e = NULL;
                int rc = 0;
                remove_sandbox(name, &e, &rc);
                if (rc < 0 && rc != -ENOENT)
                        fprintf(stderr, "brig serve: --remove-on-exit: %s: %s\n", name, e && e->msg ? e->msg : "");
                brig_error_free(&e);
        }
        json_decref(names);
}

void sandbox_touch(const char *name)
{
        pthread_mutex_lock(&lock);
        if (!touched)
                touched = json_object();
        json_object_set_new(touched, name, json_integer((json_int_t)mono_ms()));
        pthread_mutex_unlock(&lock);
}

/* --idle-timeout: a running sandbox no request touched for that long is
 * stopped (its state stays; start it again). One the server has not
 * seen since it started counts from its start. */
void idle_sweep(void)
{
        if (!serve_cfg.idle_timeout_ms)
                return;
        brig_error *e = NULL;
        _serve_free_ char *list = brig_sandbox_list_json(&e);
        brig_error_free(&e);
        _serve_json_ json_t *arr = list ? json_loads(list, 0, NULL) : NULL;
        size_t i;
        json_t *row;
        uint64_t now = mono_ms();
        json_array_foreach(arr, i, row) {
                const char *name = json_string_value(json_object_get(row, "name"));
                const char *status = json_string_value(json_object_get(row, "status"));
                if (!name || !status || strcmp(status, "running") != 0)
                        continue;
                if (json_object_get(row, "pool"))
                        continue;  /* a warm pool's, waiting for its one run: its daemon's, not idle */
                if (exec_running(name)) {
                        /* a command of ours runs in it: not idle */
                        sandbox_touch(name);
                        continue;
                }
                pthread_mutex_lock(&lock);
                if (!touched)
                        touched = json_object();
                json_t *t = json_object_get(touched, name);
                if (!t)
                        json_object_set_new(touched, name, json_integer((json_int_t)now));
                uint64_t last = t ? (uint64_t)json_integer_value(t) : now;
                pthread_mutex_unlock(&lock);
                if (now - last < serve_cfg.idle_timeout_ms)
                        continue;
                if (brig_sandbox_stop(name, &e) == 0)
                        fprintf(stderr, "brig serve: %s: stopped after --idle-timeout without a request\n", name);
                brig_error_free(&e);
                sandbox_touch(name);
        }
}

/* ---- the sandbox as an answer ------------------------------------------ */

static json_t *list_rows(void)
{
        brig_error *e = NULL;
        _serve_free_ char *list = brig_sandbox_list_json(&e);
        brig_error_free(&e);
        json_t *arr = list ? json_loads(list, 0, NULL) : NULL;
        return json_is_array(arr) ? arr : (json_decref(arr), json_array());
}

static json_t *sandbox_row(const char *name, bool with_policy)
{
        _serve_json_ json_t *rows = list_rows();
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
                if (strcmp(json_string_value(json_object_get(row, "name")) ?: "", name) != 0)
                        continue;
                json_t *out = json_deep_copy(row);
                _serve_json_ json_t *rec = owner_read(name);
                json_object_set_new(out, "owner_uid", json_integer(owner_of(name)));
                json_object_set_new(out, "usage", json_pack("{s:i}", "execs_running", (int)exec_running(name)));
                if (with_policy)
                        json_object_set(out, "policy", rec && json_object_get(rec, "policy")
                                                               ? json_object_get(rec, "policy") : json_null());
                return out;
        }
        return NULL;
}

bool sandbox_visible(struct req *r)
{
        const char *name = r->p.name;
        json_t *row = owner_visible(r, name) ? sandbox_row(name, false) : NULL;
        if (!row) {
                /* another user's sandbox is not found either: its name says nothing */
                reply_error(r, 404, "not_found", json_pack("{s:s}", "sandbox", name), "no sandbox '%s'", name);
                return false;
        }
        json_decref(row);
        sandbox_touch(name);
        return true;
}

int sandbox_open_running(struct req *r, brig_sandbox **sb)
{
        brig_error *e = NULL;
        int rc = brig_sandbox_open(r->p.name, sb, &e);
        if (rc < 0) {
                /* visible (sandbox_visible said so) but not running */
                reply_error(r, 409, "not_running", json_pack("{s:s}", "sandbox", r->p.name),
                            "sandbox '%s' is not running (POST .../start): %s", r->p.name,
                            e && e->msg ? e->msg : strerror(-rc));
                brig_error_free(&e);
        }
        return rc;
}

static int reply_sandbox(struct req *r, unsigned status, const char *name)
{
        json_t *row = sandbox_row(name, true);
        if (!row)
                return reply_error(r, 404, "not_found", json_pack("{s:s}", "sandbox", name), "no sandbox '%s'", name);
        return reply_json(r, status, row);
}

static int list_sandboxes(struct req *r)
{
        json_t *rows = list_rows(), *out = json_array();
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
                const char *name = json_string_value(json_object_get(row, "name"));
                if (!name || !owner_visible(r, name))
                        continue;
                json_object_set_new(row, "owner_uid", json_integer(owner_of(name)));
                json_array_append(out, row);
        }
        json_decref(rows);
        return reply_json(r, 200, json_pack("{s:o}", "sandboxes", out));
}

/* ---- create ------------------------------------------------------------- */

static int new_name(char *buf, size_t size)
{
        unsigned char rnd[6];
        if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd)
                return -EIO;
        snprintf(buf, size, "sb-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
        return 0;
}

static void workspace_hand_on(const char *name, json_t *rec);

/* Does a live sandbox's record name the server's workspace of NAME (a fork's)? */
static bool workspace_used(const char *name)
{
        char ws[PATH_MAX + 96];
        if ((size_t)snprintf(ws, sizeof ws, "%s/workspaces/%.72s", serve_cfg.dir, name) >= sizeof ws)
                return true;  /* cannot be ours: refuse the name */
        _serve_json_ json_t *rows = list_rows();
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
                _serve_json_ json_t *rec = owner_read(json_string_value(json_object_get(row, "name")) ?: "");
                const char *used = json_string_value(json_object_get(rec, "workspace"));
                if (used && strcmp(used, ws) == 0)
                        return true;
        }
        return false;
}


static const struct field create_fields[] = {
        { "name", F_STRING, false }, { "profile", F_STRING, false }, { "policy", F_OBJECT, false },
        { "workspace", F_STRING, false }, { "workspace_mode", F_STRING, false }, { "audit", F_BOOL, false },
        { NULL, 0, false },
};

static int limit_hit(struct req *r)
{
        return reply_error(r, 429, "limit_reached",
                           json_pack("{s:s, s:i}", "limit", "max_sandboxes", "value", (int)serve_cfg.max_sandboxes),
                           "uid %u has %u sandboxes, the most brig serve --max-sandboxes allows: remove one first",
                           r->uid, serve_cfg.max_sandboxes);
}

/* Creates (and forks) one at a time: the name's check, its owner's record
 * and the create are one step, so two callers asking for one name never
 * both pass the check, and a taken name is never re-assigned — neither
 * its record nor its workspace is touched by a create that fails. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static bool name_taken(const char *name)
{
        json_t *row = sandbox_row(name, false);
        json_decref(row);
        return row != NULL;
}

static int create_locked(struct req *r, const char *name, brig_policy *p, const brig_sandbox_opts *o,
                         const char *workspace, json_t *checked, brig_error **e)
{
        if (name_taken(name))
                return -EEXIST;
        /* no sandbox has the name: a workspace of that name is a dead
         * one's (a server killed at the wrong moment) — unless a fork of a
         * removed sandbox of that name still runs on it */
        if (workspace_used(name))
                return serve_err(e, EEXIST, "the workspace of a removed sandbox named '%s' is still its fork's: "
                                               "choose another name", name);
        owner_workspace_remove(name);
        _serve_free_ char *own_ws = NULL;
        if (!workspace) {
                own_ws = owner_workspace_make(name, e);
                if (!own_ws)
                        return -EIO;
                int rc = brig_policy_set_workspace(p, own_ws, e);
                if (rc < 0) {
                        owner_workspace_remove(name);
                        return rc;
                }
        }
        /* the record first: a server killed during the create leaves a
         * sandbox whose owner the next server still knows */
        _serve_free_ char *effective = brig_policy_to_json(p, NULL);
        int rc = owner_record(name, r->uid, own_ws != NULL, effective, e);
        if (rc == 0) {
                _serve_json_ json_t *rec = owner_read(name);
                json_object_set_new(rec, "workspace", json_string(own_ws ? own_ws : workspace));
                /* what the deputy check took, checked again at each restart (owner_recheck) */
                json_object_set(rec, "checked", checked);
                rc = owner_update(name, rec);
        }
        brig_sandbox *sb = NULL;
        if (rc == 0)
                rc = brig_sandbox_new(p, o, &sb, e);
        if (rc < 0) {
                /* EEXIST too: one made meanwhile by someone else keeps its owner */
                owner_forget(name);
                if (own_ws)
                        owner_workspace_remove(name);
                return rc;
        }
        brig_sandbox_close(sb, NULL);
        return 0;
}

static int create_sandbox(struct req *r)
{
        _serve_json_ json_t *body = req_json(r, true, create_fields);
        if (!body)
                return MHD_YES;
        if (owner_count(r->uid) >= serve_cfg.max_sandboxes)
                return limit_hit(r);
        char name[72];
        const char *given = json_string_value(json_object_get(body, "name"));
        if (given && !serve_name_valid(given))
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "name"),
                                   "name '%.80s': letters, digits, _ . - (up to 64, not starting with _ . -)", given);
        if (given)
                snprintf(name, sizeof name, "%s", given);
        else if (new_name(name, sizeof name) < 0)
                return reply_error(r, 500, "internal", NULL, "no random name");
        const char *mode = json_string_value(json_object_get(body, "workspace_mode"));
        if (mode && strcmp(mode, "bind") != 0 && strcmp(mode, "overlay") != 0)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "workspace_mode"),
                                   "workspace_mode '%.40s': bind or overlay", mode);
        json_t *pol = json_object_get(body, "policy");
        const char *profile = json_string_value(json_object_get(body, "profile"));
        json_t *fs = json_object_get(pol, "filesystem");
        const char *workspace = json_string_value(json_object_get(body, "workspace"));
        if (!workspace)
                workspace = json_string_value(json_object_get(fs, "workspace"));
        bool ws_ro = json_is_true(json_object_get(fs, "workspace_readonly")) ||
                     (profile && strcmp(profile, "strict") == 0);
        if (workspace && workspace[0] != '/')
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "workspace"),
                                   "workspace '%.200s': an absolute host path", workspace);
        const char *field = NULL;
        char msg[768];
        if (owner_check_policy(r, pol, workspace, ws_ro, &field, msg, sizeof msg) < 0)
                return reply_error(r, 403, "forbidden", json_pack("{s:s}", "field", field), "%s", msg);

        brig_error *e = NULL;
        brig_policy *p = brig_policy_new();
        if (!p)
                return reply_error(r, 500, "internal", NULL, "out of memory");
        int rc = 0;
        const char *what = "policy";
        for (size_t i = 0; rc == 0 && i < serve_cfg.n_policy_files; i++)
                rc = brig_policy_load_file(p, serve_cfg.policy_files[i], &e), what = "brig serve --policy";
        if (rc == 0 && profile)
                rc = brig_policy_apply_profile(p, profile, &e), what = "profile";
        if (rc == 0 && pol) {
                _serve_free_ char *text = json_dumps(pol, JSON_COMPACT);
                rc = text ? brig_policy_load_string(p, "policy", text, &e) : -ENOMEM;
                what = "policy";
        }
        if (rc == 0 && workspace)
                rc = brig_policy_set_workspace(p, workspace, &e), what = "workspace";
        if (rc < 0) {
                brig_policy_free(p);
                unsigned status = strcmp(what, "brig serve --policy") == 0 ? 500 : 400;
                int ret = reply_error(r, status, status == 500 ? "internal" : "bad_field",
                                      json_pack("{s:s}", "field", what), "%s: %s", what,
                                      e && e->msg ? e->msg : strerror(-rc));
                brig_error_free(&e);
                return ret;
        }
        brig_sandbox_opts o = { .size = sizeof o, .name = name,
                                .flags = json_is_false(json_object_get(body, "audit")) ? 0 : BRIG_SANDBOX_AUDIT,
                                .workspace_mode = mode && strcmp(mode, "overlay") == 0 ? BRIG_WORKSPACE_OVERLAY
                                                                                        : BRIG_WORKSPACE_BIND };
        pthread_mutex_lock(&create_lock);
        _serve_json_ json_t *checked = json_pack("{s:O?, s:s?, s:b}", "policy", pol, "workspace", workspace,
                                                 "workspace_readonly", ws_ro);
        rc = create_locked(r, name, p, &o, workspace, checked, &e);
        pthread_mutex_unlock(&create_lock);
        brig_policy_free(p);
        if (rc == -EEXIST && !e)
                return reply_error(r, 409, "conflict", json_pack("{s:s}", "field", "name"),
                                   "a sandbox named '%s' exists: choose another name", name);
        if (rc < 0)
                return reply_brig(r, rc, e, "create");
        serve_created_add(name);
        sandbox_touch(name);
        return reply_sandbox(r, 201, name);
}

/* ---- remove ------------------------------------------------------------- */

static void remove_sandbox(const char *name, brig_error **err, int *rc)
{
        exec_close_sandbox(name);
        *rc = brig_sandbox_remove(name, err);
        if (*rc < 0 && *rc != -ENOENT)
                return;
        _serve_json_ json_t *rec = owner_read(name);
        if (rec && json_is_true(json_object_get(rec, "workspace_ours")))
                workspace_hand_on(name, rec);
        owner_forget(name);
        created_forget(name);
}

static void workspace_hand_on(const char *name, json_t *rec)
{
        /* A fork runs on the same workspace: the last one of them removes it. */
        const char *ws = json_string_value(json_object_get(rec, "workspace"));
        _serve_json_ json_t *rows = list_rows();
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
                const char *other = json_string_value(json_object_get(row, "name"));
                if (!other || strcmp(other, name) == 0)
                        continue;
                _serve_json_ json_t *orec = owner_read(other);
                const char *ows = json_string_value(json_object_get(orec, "workspace"));
                if (ws && ows && strcmp(ws, ows) == 0) {
                        json_object_set_new(orec, "workspace_ours", json_true());
                        json_object_set_new(orec, "workspace_of", json_string(name));
                        owner_update(other, orec);
                        return;
                }
        }
        const char *of = json_string_value(json_object_get(rec, "workspace_of"));
        owner_workspace_remove(of ? of : name);
}

static int delete_sandbox(struct req *r)
{
        brig_error *e = NULL;
        int rc = 0;
        remove_sandbox(r->p.name, &e, &rc);
        if (rc < 0)
                return reply_brig(r, rc, e, "remove");
        brig_error_free(&e);
        return reply_json(r, 200, json_pack("{s:s}", "removed", r->p.name));
}

static int lifecycle(struct req *r)
{
        brig_error *e = NULL;
        const char *name = r->p.name;
        int rc;
        const char *what;
        switch (r->route) {
        case R_SANDBOX_STOP:
                /* its commands are killed with it: their results say so */
                rc = brig_sandbox_stop(name, &e), what = "stop";
                break;
        case R_SANDBOX_START:
                rc = brig_sandbox_start(name, &e), what = "start";
                break;
        case R_SANDBOX_PAUSE:
                rc = brig_sandbox_pause(name, &e), what = "pause";
                break;
        case R_SANDBOX_RESUME:
                rc = brig_sandbox_resume(name, &e), what = "resume";
                break;
        case R_RESET:
                rc = brig_sandbox_reset(name, &e), what = "reset";
                break;
        default:
                return reply_error(r, 500, "internal", NULL, "lifecycle: route %d", r->route);
        }
        if (rc < 0)
                return reply_brig(r, rc, e, what);
        return reply_sandbox(r, 200, name);
}

/* ---- overlay ------------------------------------------------------------ */

static json_t *changes_of(char *text)
{
        json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        return json_pack("{s:o}", "changes", arr ? arr : json_array());
}

static int diff(struct req *r)
{
        _serve_free_ const char **paths = req_query_all(r, "path");
        _serve_free_ const char **excludes = req_query_all(r, "exclude");
        if (!paths || !excludes)
                return reply_error(r, 500, "internal", NULL, "out of memory");
        brig_change_filter f = { .paths = paths[0] ? paths : NULL, .excludes = excludes[0] ? excludes : NULL };
        brig_error *e = NULL;
        char *text = brig_sandbox_diff_filtered_json(r->p.name, &f, &e);
        if (!text)
                return reply_brig(r, e && e->errnum ? -e->errnum : -EINVAL, e, "diff");
        return reply_json(r, 200, changes_of(text));
}

static const char **strv_of(json_t *arr)
{
        const char **v = calloc(json_array_size(arr) + 1, sizeof *v);
        size_t i;
        json_t *s;
        json_array_foreach(arr, i, s)
                v[i] = json_string_value(s);
        return v;
}

static const struct field commit_fields[] = {
        { "paths", F_ARRAY_STRINGS, false }, { "excludes", F_ARRAY_STRINGS, false }, { NULL, 0, false },
};

static int commit(struct req *r)
{
        _serve_json_ json_t *body = req_json(r, true, commit_fields);
        if (!body)
                return MHD_YES;
        json_t *jp = json_object_get(body, "paths"), *jx = json_object_get(body, "excludes");
        _serve_free_ const char **paths = json_array_size(jp) ? strv_of(jp) : NULL;
        _serve_free_ const char **excludes = json_array_size(jx) ? strv_of(jx) : NULL;
        brig_change_filter f = { .paths = paths, .excludes = excludes };
        brig_error *e = NULL;
        char *applied = NULL;
        int rc = brig_sandbox_commit_filtered(r->p.name, &f, &applied, &e);
        if (rc < 0) {
                free(applied);
                return reply_brig(r, rc, e, "commit");
        }
        return reply_json(r, 200, changes_of(applied));
}

/* ---- snapshots ---------------------------------------------------------- */

static const struct field snapshot_fields[] = { { "tag", F_STRING, true }, { NULL, 0, false } };
static const struct field fork_fields[] = { { "name", F_STRING, true }, { NULL, 0, false } };

static json_t *snapshot_list(const char *name, brig_error **e)
{
        char *text = brig_sandbox_snapshots_json(name, e);
        json_t *arr = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        return arr;
}

static int fork_locked(struct req *r, const char *name, const char *new_name, brig_error **e);

static int snapshots(struct req *r)
{
        brig_error *e = NULL;
        const char *name = r->p.name;
        int rc;
        switch (r->route) {
        case R_SNAPSHOTS_LIST: {
                json_t *arr = snapshot_list(name, &e);
                if (!arr)
                        return reply_brig(r, e && e->errnum ? -e->errnum : -EIO, e, "snapshots");
                return reply_json(r, 200, json_pack("{s:o}", "snapshots", arr));
        }
        case R_SNAPSHOT_CREATE: {
                _serve_json_ json_t *body = req_json(r, false, snapshot_fields);
                if (!body)
                        return MHD_YES;
                const char *tag = json_string_value(json_object_get(body, "tag"));
                if (!serve_tag_valid(tag))
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "tag"),
                                           "tag '%.80s': letters, digits, _ . - (up to 64)", tag);
                if ((rc = brig_sandbox_snapshot(name, tag, &e)) < 0)
                        return reply_brig(r, rc, e, "snapshot");
                _serve_json_ json_t *arr = snapshot_list(name, &e);
                brig_error_free(&e);
                size_t i;
                json_t *s;
                json_array_foreach(arr, i, s)
                        if (strcmp(json_string_value(json_object_get(s, "tag")) ?: "", tag) == 0)
                                return reply_json(r, 201, json_incref(s));
                return reply_json(r, 201, json_pack("{s:s}", "tag", tag));
        }
        case R_SNAPSHOT_DELETE:
                if ((rc = brig_sandbox_snapshot_remove(name, r->p.tag, &e)) < 0)
                        return reply_brig(r, rc, e, "remove the snapshot");
                return reply_json(r, 200, json_pack("{s:s}", "removed", r->p.tag));
        case R_SNAPSHOT_RESTORE:
                if ((rc = brig_sandbox_restore(name, r->p.tag, &e)) < 0)
                        return reply_brig(r, rc, e, "restore");
                return reply_sandbox(r, 200, name);
        case R_SNAPSHOT_FORK: {
                _serve_json_ json_t *body = req_json(r, false, fork_fields);
                if (!body)
                        return MHD_YES;
                const char *new_name = json_string_value(json_object_get(body, "name"));
                if (!serve_name_valid(new_name))
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "name"),
                                           "name '%.80s': letters, digits, _ . - (up to 64, not starting with _ . -)",
                                           new_name);
                if (owner_count(r->uid) >= serve_cfg.max_sandboxes)
                        return limit_hit(r);
                pthread_mutex_lock(&create_lock);
                rc = fork_locked(r, name, new_name, &e);
                pthread_mutex_unlock(&create_lock);
                if (rc == -EEXIST && !e)
                        return reply_error(r, 409, "conflict", json_pack("{s:s}", "field", "name"),
                                           "a sandbox named '%s' exists: choose another name", new_name);
                if (rc < 0)
                        return reply_brig(r, rc, e, "fork");
                serve_created_add(new_name);
                sandbox_touch(new_name);
                return reply_sandbox(r, 201, new_name);
        }
        default:
                return reply_error(r, 500, "internal", NULL, "snapshots: route %d", r->route);
        }
}

static int fork_locked(struct req *r, const char *name, const char *new_name, brig_error **e)
{
        if (name_taken(new_name))
                return -EEXIST;
        /* the fork's record: the caller's, the same policy and workspace,
         * which stays the original's to remove */
        _serve_json_ json_t *rec = owner_read(name);
        json_t *nrec = rec ? json_deep_copy(rec) : json_object();
        json_object_set_new(nrec, "uid", json_integer(r->uid));
        json_object_set_new(nrec, "workspace_ours", json_false());
        owner_update(new_name, nrec);
        json_decref(nrec);
        int rc = brig_sandbox_fork(name, r->p.tag, new_name, e);
        if (rc < 0)
                owner_forget(new_name);
        return rc;
}

/* ---- dispatch ----------------------------------------------------------- */

int handle_sandboxes(struct req *r)
{
        switch (r->route) {
        case R_SANDBOXES_LIST:
                return list_sandboxes(r);
        case R_SANDBOX_CREATE:
                return create_sandbox(r);
        default:
                break;
        }
        if (!sandbox_visible(r))
                return MHD_YES;
        const char *field = NULL;
        char msg[768];
        switch (r->route) {
        case R_SANDBOX_START:
        case R_RESET:
        case R_SNAPSHOT_RESTORE:
        case R_SNAPSHOT_FORK:
                /* these start the sandbox again from its policy: its host paths are read again */
                if (owner_recheck(r, r->p.name, &field, msg, sizeof msg) < 0)
                        return reply_error(r, 403, "forbidden", json_pack("{s:s}", "field", field), "%s", msg);
                break;
        default:
                break;
        }
        switch (r->route) {
        case R_SANDBOX_GET:
                return reply_sandbox(r, 200, r->p.name);
        case R_SANDBOX_DELETE:
                return delete_sandbox(r);
        case R_SANDBOX_STOP:
        case R_SANDBOX_START:
        case R_SANDBOX_PAUSE:
        case R_SANDBOX_RESUME:
        case R_RESET:
                return lifecycle(r);
        case R_DIFF:
                return diff(r);
        case R_COMMIT:
                return commit(r);
        default:
                return snapshots(r);
        }
}

int handle_request(struct req *r)
{
        switch (r->route) {
        case R_HEALTH:
                return reply_json(r, 200, json_pack("{s:s}", "status", serve_draining ? "draining" : "ok"));
        case R_VERSION:
                return reply_json(r, 200, json_pack("{s:s, s:s}", "brig", brig_version(), "api", "1"));
        case R_DOCTOR: {
                bool ok = false;
                brig_error *e = NULL;
                char *text = brig_doctor_json(&ok, &e);
                json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
                free(text);
                if (!doc)
                        return reply_brig(r, e && e->errnum ? -e->errnum : -EIO, e, "doctor");
                return reply_json(r, 200, json_pack("{s:b, s:o}", "ok", ok, "doctor", doc));
        }
        case R_EXECS_LIST ... R_EXEC_WAIT:
                return handle_exec(r);
        case R_FILE_READ ... R_TAR_IN:
                return handle_files(r);
        case R_EVENTS:
                return handle_events(r);
        case R_NETWORK_GET ... R_NETWORK_REMOVE:
                return handle_network(r);
        case R_POOLS_LIST:
        case R_POOL_EXEC:
                return handle_pools(r);
        default:
                return handle_sandboxes(r);
        }
}
