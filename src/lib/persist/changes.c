/* changes.c — what a bind-mode persistent sandbox changed since it was
 * created: brig diff NAME (on demand), and the files event of its audit
 * stream when it stops. Overlay mode has its layer for the workspace
 * (overlay_diff.c) and this for its writable binds. In bind mode the
 * sandbox writes the workspace itself, so its supervisor records every
 * entry of the writable trees (the workspace and writable binds,
 * runchanges.c's walk; overlay mode: the binds) before anything of the
 * sandbox first runs, and keeps the record in the state directory
 * (changes.json, 0600). A diff walks the trees again the same way —
 * lstat, no symlink followed, no mount crossed, hashes opened beneath
 * the root — and compares. The record is read back as untrusted bytes
 * (changes_file.c). A start after a stop keeps the record: "since
 * create". */
#define _GNU_SOURCE
#include "persist/overlay.h"
#include "persist/runchanges.h"
#include "persist/state.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHANGES_FILE "changes.json"
/* A record of 100000 entries (--changes-max's default) is about 10 MB. */
#define CHANGES_FILE_MAX ((off_t)256 << 20)

bool changes_kept(const char *dir)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/" CHANGES_FILE, dir);
        struct stat st;
        return path && lstat(path, &st) == 0;
}

int changes_keep(const char *dir, const struct runchanges *c, brig_error **err)
{
        json_t *doc = runchanges_save(c);
        int r = doc ? state_write_file(dir, CHANGES_FILE, doc, JSON_COMPACT, err)
                    : brig_err(err, ENOMEM, "the record of the workspace");
        json_decref(doc);
        return r;
}

json_t *changes_since(const char *dir, bool list_all, brig_error **err)
{
        if (!changes_kept(dir)) {
                state_fail(err, ENOENT, "no record of the workspace since create in '%s': an ephemeral sandbox "
                                        "or a pool's keeps none, nor one made by an older brig (brig rm it and "
                                        "create it again)", dir);
                return NULL;
        }
        _cleanup_free_ char *text = state_read_file_max(dir, CHANGES_FILE, CHANGES_FILE_MAX, err);
        if (!text)
                return NULL;
        json_t *saved = NULL;
        char why[256];
        struct runchanges *c = NULL;
        if (runchanges_parse(text, strlen(text), &saved, why, sizeof why) < 0) {
                state_fail(err, EBADMSG, "the record of the workspace '%s/" CHANGES_FILE "': %s", dir, why);
                return NULL;
        }
        int r = runchanges_from(saved, list_all, &c);
        json_decref(saved);
        if (r < 0) {
                brig_err(err, -r, "the record of the workspace");
                return NULL;
        }
        json_t *files = runchanges_end(c);
        runchanges_free(c);
        if (!files)
                brig_err(err, ENOMEM, "what changed");
        return files;
}

json_t *changes_event(const char *dir)
{
        brig_error *e = NULL;
        json_t *files = changes_since(dir, false, &e);
        if (!files)  /* said in the event: a stop never fails for it */
                files = json_pack("{s:i, s:i, s:i, s:[], s:b, s:[s]}", "added", 0, "modified", 0, "deleted", 0,
                                  "changes", "complete", false, "errors", e && e->msg ? e->msg : "?");
        brig_error_free(&e);
        return files;
}

/* runchanges' type names as brig diff's */
static const char *diff_type(const char *t)
{
        return !t ? "special" : !strcmp(t, "directory") ? "dir" : !strcmp(t, "other") ? "special" : t;
}

static int by_path(const void *a, const void *b)
{
        return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "path")),
                      json_string_value(json_object_get(*(json_t *const *)b, "path")));
}

/* The files event's changes as brig diff lists them: a path in the
 * workspace relative to it (the filter's PATHs and --exclude select among
 * them), one in a writable bind absolute (listed when no PATH is given,
 * --exclude matching its components); with size and, for a regular file,
 * sha256. */
static json_t *as_diff(json_t *files, const char *workspace, const struct filter *f)
{
        size_t wl = strlen(workspace), i;
        json_t *c, *picked = json_array();
        json_array_foreach(json_object_get(files, "changes"), i, c) {
                const char *path = json_string_value(json_object_get(c, "path"));
                if (!path || !picked)
                        continue;
                bool in_ws = strncmp(path, workspace, wl) == 0 && path[wl] == '/';
                const char *rel = in_ws ? path + wl + 1 : path + 1;
                if (in_ws ? !filter_selects(f, rel) : f->paths.n || !filter_selects(f, rel))
                        continue;
                json_t *o = json_pack("{s:s, s:O, s:s, s:O, s:O}", "path", in_ws ? rel : path, "change",
                                      json_object_get(c, "change"), "type",
                                      diff_type(json_string_value(json_object_get(c, "type"))), "mode",
                                      json_object_get(c, "mode") ?: json_null(), "size",
                                      json_object_get(c, "size") ?: json_null());
                if (o && json_object_get(c, "sha256"))
                        json_object_set(o, "sha256", json_object_get(c, "sha256"));
                json_array_append_new(picked, o);
        }
        size_t n = json_array_size(picked);
        json_t **v = calloc(n ? n : 1, sizeof *v);
        for (i = 0; v && i < n; i++)
                v[i] = json_incref(json_array_get(picked, i));
        if (v)
                qsort(v, n, sizeof *v, by_path);
        json_t *sorted = v ? json_array() : NULL;
        for (i = 0; sorted && i < n; i++)
                json_array_append_new(sorted, v[i]);
        free(v);
        json_decref(picked);
        return sorted;
}

json_t *changes_diff_list(const char *name, const char *dir, json_t *state, const brig_change_filter *filter,
                          brig_error **err)
{
        const char *workspace = json_string_value(json_object_get(state, "workspace"));
        struct filter f = { 0 };
        if (!workspace) {
                state_fail(err, EBADMSG, "sandbox '%s': its state names no workspace", name);
                return NULL;
        }
        if (filter_prepare(workspace, filter, &f, err) < 0) {
                brig_err_prefix(err, "diff '%s'", name);
                filter_free(&f);
                return NULL;
        }
        json_t *files = changes_since(dir, true, err), *list = NULL;
        if (!files) {
                brig_err_prefix(err, "diff '%s'", name);
        } else if (!json_is_true(json_object_get(files, "complete"))) {
                /* fail closed, as the overlay's diff of a tree it cannot
                 * walk whole: no list that leaves out what it missed */
                char *why = json_dumps(json_object_get(files, "errors") ?: json_string("more changed than listed"),
                                       JSON_COMPACT | JSON_ENCODE_ANY);
                state_fail(err, E2BIG, "diff '%s': what changed could not be found whole: %s%s", name, why ? why : "?",
                           json_object_get(files, "stopped_at")
                                   ? " (the sandbox's --changes-max is the most entries its walks record: create "
                                     "it with a larger one, or 0 for no cap)"
                                   : "");
                free(why);
        } else if (!(list = as_diff(files, workspace, &f))) {
                brig_err(err, ENOMEM, "diff");
        }
        json_decref(files);
        filter_free(&f);
        return list;
}

char *changes_diff_json(const char *name, const char *dir, json_t *state, const brig_change_filter *filter,
                        brig_error **err)
{
        json_t *list = changes_diff_list(name, dir, state, filter, err);
        char *text = list ? json_dumps(list, JSON_INDENT(2)) : NULL;
        if (list && !text)
                brig_err(err, ENOMEM, "diff");
        json_decref(list);
        return text;
}
