/* replay.c — brig replay MANIFEST: run again what `brig run --manifest`
 * recorded, on a workspace that must be the one it started from, and say
 * what came out differently (docs/audit.md#replay). The run is libbrig's
 * (brig_run with the manifest's policy, argv and environment); this file
 * checks, runs and compares. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char replay_usage[] =
        "usage: brig replay MANIFEST [--workspace DIR] [--allow-changed-workspace] [--json]\n"
        "\n"
        "  MANIFEST                   what brig run --manifest FILE wrote\n"
        "  --workspace DIR            run on DIR (default: the manifest's workspace), which must hold\n"
        "                             what the workspace held when the recorded run started\n"
        "  --allow-changed-workspace  run even when it does not (said, and the result marked)\n"
        "  --json                     the comparison as one JSON object\n";

/* The policy's outputs are the recorded run's, not this one's. */
static const char *const not_replayed[] = { "audit", "report", "manifest", NULL };

/* The strings of `in` that `other` lacks, each as SIGN + it, onto d. */
static void only_in(json_t *in, json_t *other, char sign, json_t *d)
{
        size_t i, j;
        json_t *v, *w;
        json_array_foreach(in, i, v) {
                bool found = false;
                json_array_foreach(other, j, w)
                        found |= json_equal(v, w);
                char *s = NULL;
                if (!found && json_is_string(v) && asprintf(&s, "%c%s", sign, json_string_value(v)) >= 0)
                        json_array_append_new(d, json_string(s) ?: json_string("?"));
                free(s);
        }
}

/* Differences of two string arrays: "+x" only now, "-x" only then. */
static json_t *set_diff(json_t *was, json_t *now)
{
        json_t *d = json_array();
        only_in(now, was, '+', d);
        only_in(was, now, '-', d);
        return d;
}

static json_t *files_diff(json_t *was, json_t *now)
{
        json_t *d = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(now, k, v)
                if (!json_equal(v, json_object_get(was, k)))
                        json_object_set_new(d, k, json_pack("{s:O, s:O}", "was", json_object_get(was, k) ?: json_null(),
                                                            "now", v));
        json_object_foreach(was, k, v)
                if (!json_object_get(now, k))
                        json_object_set_new(d, k, json_pack("{s:O, s:n}", "was", v, "now"));
        return d;
}

static json_t *compare(json_t *was, json_t *now)
{
        json_t *d = json_object();
        if (!json_equal(json_object_get(was, "exit_code"), json_object_get(now, "exit_code")) ||
            !json_equal(json_object_get(was, "signal"), json_object_get(now, "signal")))
                json_object_set_new(d, "exit", json_pack("{s:O, s:O}", "was", json_object_get(was, "exit_code"),
                                                         "now", json_object_get(now, "exit_code")));
        json_t *p = set_diff(json_object_get(was, "programs"), json_object_get(now, "programs"));
        if (json_array_size(p))
                json_object_set_new(d, "programs", p);
        else
                json_decref(p);
        json_t *n = set_diff(json_object_get(was, "net"), json_object_get(now, "net"));
        if (json_array_size(n))
                json_object_set_new(d, "net", n);
        else
                json_decref(n);
        json_t *f = files_diff(json_object_get(was, "files"), json_object_get(now, "files"));
        if (json_object_size(f))
                json_object_set_new(d, "files", f);
        else
                json_decref(f);
        return d;
}

static int load_policy(json_t *m, const char *manifest, brig_policy **ret)
{
        json_t *pol = json_deep_copy(json_object_get(m, "policy"));
        if (!json_is_object(pol)) {
                json_decref(pol);
                cli_say("brig replay: %s: no policy in it (not a manifest of brig run --manifest)\n", manifest);
                return -1;
        }
        for (const char *const *k = not_replayed; *k; k++)
                json_object_del(pol, *k);
        char *text = json_dumps(pol, JSON_COMPACT);
        json_decref(pol);
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        int r = text && p ? brig_policy_load_string(p, manifest, text, &err) : -ENOMEM;
        free(text);
        /* the same environment: --env wins over what brig passes (docs/usage.md) */
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(m, "env"), i, e) {
                const char *kv = json_string_value(e), *eq = kv ? strchr(kv, '=') : NULL;
                if (r == 0 && eq) {
                        char *name = strndup(kv, (size_t)(eq - kv));
                        r = name ? brig_policy_set_env(p, name, eq + 1, &err) : -ENOMEM;
                        free(name);
                }
        }
        if (r < 0) {
                cli_say("brig replay: %s: its policy: %s\n", manifest, err && err->msg ? err->msg : strerror(-r));
                brig_error_free(&err);
                brig_policy_free(p);
                return -1;
        }
        *ret = p;
        return 0;
}

int cmd_replay(int argc, char **argv)
{
        static const struct option opts[] = {
                { "workspace", required_argument, NULL, 'w' }, { "allow-changed-workspace", no_argument, NULL, 'a' },
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, { 0 },
        };
        const char *ws = NULL;
        bool allow_changed = false, as_json = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'w': ws = optarg; break;
                case 'a': allow_changed = true; break;
                case 'j': as_json = true; break;
                case 'h': fputs(replay_usage, stdout); return 0;
                default: fputs(replay_usage, stderr); return BRIG_EXIT_SETUP;
                }
        }
        if (optind + 1 != argc) {
                cli_say("brig replay: name one manifest\n%s", replay_usage);
                return BRIG_EXIT_SETUP;
        }
        const char *manifest = argv[optind];
        json_error_t je;
        json_t *m = json_load_file(manifest, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(m) || json_integer_value(json_object_get(m, "brig_manifest")) != 1) {
                cli_say("brig replay: %s:%d: %s\n", manifest, je.line,
                        m ? "not a manifest of brig run --manifest (brig_manifest 1)" : je.text);
                json_decref(m);
                return BRIG_EXIT_SETUP;
        }
        if (!ws)
                ws = json_string_value(json_object_get(m, "workspace"));
        char *abs = ws ? realpath(ws, NULL) : NULL;
        char wsbuf[4096];
        if (abs && strlen(abs) < sizeof wsbuf) {
                snprintf(wsbuf, sizeof wsbuf, "%s", abs);
                ws = wsbuf;
        }
        free(abs);
        const char *want = json_string_value(json_object_get(json_object_get(m, "workspace_tree"), "sha256"));
        char now[65] = "";
        uint64_t entries = 0;
        brig_error *err = NULL;
        if (!ws || brig_tree_hash(ws, now, &entries, &err) < 0) {
                cli_say("brig replay: the workspace: %s\n",
                        err && err->msg ? err->msg : "none in the manifest (--workspace DIR)");
                brig_error_free(&err);
                json_decref(m);
                return BRIG_EXIT_SETUP;
        }
        bool changed = !want || strcmp(want, now) != 0;
        if (changed && !allow_changed) {
                _cleanup_free_ char *safe = text_escaped(ws ? ws : "?", false);
                cli_say("brig replay: the workspace %s is not the one the recorded run started from (tree sha256 %s, "
                        "the manifest's %s): give the workspace as it was (--workspace DIR), or "
                        "--allow-changed-workspace to run anyway\n", safe ? safe : "?", now, want ? want : "none");
                json_decref(m);
                return BRIG_EXIT_SETUP;
        }
        if (changed)
                cli_say("brig replay: WARNING: the workspace differs from the recorded run's start "
                        "(--allow-changed-workspace): differences may come from it\n");
        const char *was_version = json_string_value(json_object_get(m, "brig_version"));
        if (was_version && strcmp(was_version, brig_version()) != 0)
                cli_say("brig replay: WARNING: recorded with brig %s, replayed with brig %s\n", was_version,
                        brig_version());
        brig_policy *p = NULL;
        if (load_policy(m, manifest, &p) < 0) {
                json_decref(m);
                return BRIG_EXIT_SETUP;
        }
        char tmp[] = "/tmp/brig-replay-XXXXXX";
        int tfd = mkstemp(tmp);
        int r = tfd >= 0 ? 0 : -errno;
        if (tfd >= 0)
                close(tfd);
        if (r == 0 && (r = brig_policy_set_workspace(p, ws, &err)) == 0)
                r = brig_policy_set_manifest_path(p, tmp, &err);
        json_t *args = json_object_get(m, "argv");
        size_t n = json_array_size(args);
        char **cmd = calloc(n + 1, sizeof *cmd);
        for (size_t i = 0; cmd && i < n; i++)
                cmd[i] = (char *)json_string_value(json_array_get(args, i));
        brig_result res;
        if (r == 0 && (!cmd || !n || !cmd[0]))
                r = -EINVAL;
        if (r == 0)
                r = brig_run_in_process(p, cmd, &res, &err);  /* as brig run: the manifest is its writing */
        free(cmd);
        brig_policy_free(p);
        json_t *again = r == 0 ? json_load_file(tmp, 0, NULL) : NULL;
        if (tfd >= 0)
                unlink(tmp);
        if (r < 0 || !again) {
                json_decref(m);
                json_decref(again);
                if (err)
                        return cli_fail(err);
                cli_say("brig replay: %s: %s\n", manifest, r < 0 ? strerror(-r) : "the replay wrote no manifest");
                return BRIG_EXIT_SETUP;
        }
        json_t *d = compare(json_object_get(m, "outcome"), json_object_get(again, "outcome"));
        bool same = json_object_size(d) == 0;
        /* a walk that stopped (--changes-max, an unreadable directory)
         * or files listed without their hash: only part of the files
         * were compared, and "the same" would claim more */
        bool files_whole = json_is_true(json_object_get(json_object_get(m, "outcome"), "files_complete")) &&
                           json_is_true(json_object_get(json_object_get(again, "outcome"), "files_complete"));
        if (!files_whole)
                cli_say("brig replay: WARNING: the files were compared in part only: a walk of the "
                        "writable trees stopped (more entries than --changes-max, a tree deeper than 256, "
                        "a directory brig cannot read), or files were listed without their hash (past "
                        "64 MiB, or 512 MiB hashed in all: their contents were not compared); the audit "
                        "stream's files event says which (errors, unhashed)\n");
        if (as_json) {
                json_t *doc = json_pack("{s:b, s:b, s:b, s:O, s:O}", "same", same, "workspace_changed", changed,
                                        "files_complete", files_whole, "differences", d, "outcome",
                                        json_object_get(again, "outcome"));
                char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
                if (text)
                        puts(text);
                free(text);
                json_decref(doc);
        } else if (same) {
                cli_say("brig replay: the same: exit status, programs run, files changed (by content hash) "
                        "and network decisions\n");
        } else {
                const char *k;
                json_t *v;
                json_object_foreach(d, k, v) {
                        char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
                        char *safe = text_escaped(text ? text : "?", false);
                        cli_say("brig replay: differs: %s: %s\n", k, safe ? safe : "?");
                        free(safe);
                        free(text);
                }
        }
        json_decref(d);
        json_decref(again);
        json_decref(m);
        return same ? 0 : 1;
}
