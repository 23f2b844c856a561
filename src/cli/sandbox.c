/* sandbox.c — persistent sandboxes on the command line: create, exec, ls,
 * stop, rm, pause, resume (docs/persistent.md). */
#define _GNU_SOURCE
#include "cli.h"
#include "persist/pool_claim.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char create_usage[] =
        "usage: brig create NAME [--workspace-mode bind|overlay] [RUN OPTIONS]\n"
        "\n"
        "Start a sandbox that lives on; run commands in it with brig exec. Every\n"
        "option of brig run applies (see brig run --help) except --pass-fd,\n"
        "--audit, --manifest and --timings; --timeout applies to each exec.\n"
        "  --workspace-mode bind     the workspace itself, read-write (default)\n"
        "  --workspace-mode overlay  a copy-on-write layer over it: brig diff, commit, reset\n";

static const char exec_usage[] =
        "usage: brig exec NAME [OPTIONS] -- COMMAND [ARG...]\n"
        "\n"
        "  --env NAME=VALUE   set a variable for this command (repeatable)\n"
        "  --cwd DIR          start in DIR inside (default: the sandbox's)\n"
        "  --tty / --no-tty   force or forbid a pseudo-terminal\n"
        "  --terminal-passthrough  the command's escape sequences reach the terminal unfiltered\n"
        "  --timeout TIME     wall clock for this command (default: the sandbox's --timeout)\n"
        "  --json-report FILE how this command ended, as JSON\n"
        "  --detach           start it in the background and return: prints its pid and the log\n"
        "                     inside that gets its output (/tmp/brig-exec-PID.log)\n"
        "  --quiet            no end-of-command lines about what brig refused\n"
        "  --timings          print where the exec's time went (stderr)\n";

static const char run_pool_usage[] =
        "usage: brig run --pool NAME [OPTIONS] -- COMMAND [ARG...]\n"
        "\n"
        "Run COMMAND in a ready sandbox of the pool `brig pool --name NAME` keeps:\n"
        "its policy, workspace and environment, used for this run only. The\n"
        "options are brig exec's (but --detach); --env and --cwd add to the pool's.\n";

static bool wants_help(int argc, char **argv)
{
        return argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
}

static const char *name_arg(int argc, char **argv, const char *cmd, const char *usage)
{
        if (argc < 2 || argv[1][0] == '-') {
                cli_say("brig %s: no sandbox name given\n%s", cmd, usage);
                return NULL;
        }
        return argv[1];
}

json_t *cli_sandbox_row(const char *name)
{
        brig_error *err = NULL;
        char *text = brig_sandbox_list_json(&err);
        brig_error_free(&err);
        json_t *list = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        size_t i;
        json_t *row, *found = NULL;
        json_array_foreach(list, i, row) {
                if (strcmp(json_string_value(json_object_get(row, "name")) ?: "", name) == 0) {
                        found = json_incref(row);
                        break;
                }
        }
        json_decref(list);
        return found;
}

/* The warnings brig run prints at its start (a control weaker than asked:
 * memory not bounded without a cgroup, ...), said once the sandbox runs:
 * its supervisor, detached, cannot. */
static void put_memory_warning(const char *verb, const char *name)
{
        json_t *row = cli_sandbox_row(name);
        json_t *all = json_object_get(row, "warnings");
        size_t j;
        json_t *w;
        json_array_foreach(all, j, w)
                cli_say("brig: WARNING: %s '%s': %s\n", verb, name, json_string_value(w));
        const char *mem = json_string_value(json_object_get(row, "memory_warning"));
        if (!all && mem)  /* state written by an older brig */
                cli_say("brig: WARNING: %s '%s': %s\n", verb, name, mem);
        json_decref(row);
}

/* brig restore stops a running sandbox to swap its layer: said before it
 * happens, so nobody is surprised that a server or a shell inside is gone. */
static void put_restore_stops(const char *name, const char *tag)
{
        json_t *row = cli_sandbox_row(name);
        const char *status = json_string_value(json_object_get(row, "status"));
        brig_error *err = NULL;
        char *text = brig_sandbox_snapshots_json(name, &err);
        brig_error_free(&err);  /* restore itself says what is wrong */
        json_t *snaps = text ? json_loads(text, 0, NULL) : NULL, *snap;
        free(text);
        size_t i;
        bool found = false;
        json_array_foreach(snaps, i, snap)
                found |= strcmp(json_string_value(json_object_get(snap, "tag")) ?: "", tag) == 0;
        json_decref(snaps);
        if (found && status && (strcmp(status, "running") == 0 || strcmp(status, "paused") == 0))
                cli_say("brig: restore '%s': stopping sandbox '%s' first: every process running in it "
                        "ends (SIGTERM, then SIGKILL after the grace) and is not brought back; the files "
                        "of '%s' are restored and the sandbox starts again with no processes\n",
                        tag, name, tag);
        json_decref(row);
}

int cmd_create(int argc, char **argv)
{
        if (wants_help(argc, argv)) {
                fputs(create_usage, stdout);
                return 0;
        }
        const char *name = name_arg(argc, argv, "create", create_usage);
        if (!name)
                return BRIG_EXIT_SETUP;
        /* --workspace-mode is ours; the rest is brig run's. argv[1] (the
         * name) stands in for the program name getopt skips. */
        brig_create_opts opts = { .workspace_mode = BRIG_WORKSPACE_BIND };
        char **rest = calloc((size_t)argc + 1, sizeof *rest);
        if (!rest)
                return BRIG_EXIT_SETUP;
        int n = 0;
        rest[n++] = argv[1];
        for (int i = 2; i < argc; i++) {
                const char *mode = NULL;
                if (strcmp(argv[i], "--") == 0) {
                        cli_say("brig create: no command: a sandbox waits for brig exec\n");
                        free(rest);
                        return BRIG_EXIT_SETUP;
                }
                if (strcmp(argv[i], "--workspace-mode") == 0 && i + 1 < argc)
                        mode = argv[++i];
                else if (strncmp(argv[i], "--workspace-mode=", 17) == 0)
                        mode = argv[i] + 17;
                else if (strcmp(argv[i], "--workspace-mode") == 0)
                        mode = "";
                if (!mode) {
                        rest[n++] = argv[i];
                        continue;
                }
                if (strcmp(mode, "bind") == 0) {
                        opts.workspace_mode = BRIG_WORKSPACE_BIND;
                } else if (strcmp(mode, "overlay") == 0) {
                        opts.workspace_mode = BRIG_WORKSPACE_OVERLAY;
                } else {
                        cli_say("brig create: --workspace-mode '%s': expected bind or overlay\n", mode);
                        free(rest);
                        return BRIG_EXIT_SETUP;
                }
        }
        brig_policy *p;
        int first, code = cli_policy_from_args("brig create", n, rest, &p, &first);
        if (code) {
                free(rest);
                return code == 1 ? 0 : code;
        }
        if (first < n) {
                cli_say("brig create: unexpected argument '%s' (a sandbox takes no command; use brig exec)\n",
                        rest[first]);
                brig_policy_free(p);
                free(rest);
                return BRIG_EXIT_SETUP;
        }
        free(rest);
        brig_error *err = NULL;
        code = brig_sandbox_create(name, p, &opts, &err) < 0 ? cli_fail(err) : 0;
        if (code == 0)
                put_memory_warning("create", name);
        brig_policy_free(p);
        return code;
}

/* brig exec NAME, and brig run --pool POOL (cli_run_in_pool): the same
 * options and the same end, in a live sandbox or in a pool's member. */
static int exec_command(int argc, char **argv, const char *pool)
{
        const char *cmd = pool ? "brig run --pool" : "brig exec";
        const char *usage = pool ? run_pool_usage : exec_usage;
        if (wants_help(argc, argv)) {
                fputs(usage, stdout);
                return 0;
        }
        const char *name = pool ? pool : name_arg(argc, argv, "exec", exec_usage);
        if (!name)
                return BRIG_EXIT_SETUP;
        static const struct option options[] = {
                { "env", required_argument, NULL, 'e' }, { "cwd", required_argument, NULL, 'C' },
                { "tty", no_argument, NULL, 't' },       { "no-tty", no_argument, NULL, 'T' },
                { "timeout", required_argument, NULL, 'o' }, { "help", no_argument, NULL, 'h' },
                { "json-report", required_argument, NULL, 'r' },
                { "terminal-passthrough", no_argument, NULL, 'P' },
                { "detach", no_argument, NULL, 'd' },
                { "quiet", no_argument, NULL, 'q' },
                { "timings", no_argument, NULL, 'm' },
                { NULL, 0, NULL, 0 },
        };
        brig_exec_opts o = { .tty = BRIG_TTY_AUTO };
        bool quiet = false;
        char **env = calloc((size_t)argc + 1, sizeof *env);
        size_t nenv = 0;
        brig_error *err = NULL;
        int opt, code = 0;
        if (!env)
                return BRIG_EXIT_SETUP;
        opterr = 0;
        optind = 0;
        while ((opt = getopt_long(argc - 1, argv + 1, "+h", options, NULL)) != -1) {
                switch (opt) {
                case 'e':
                        env[nenv++] = optarg;
                        break;
                case 'C':
                        o.cwd = optarg;
                        break;
                case 't':
                        o.tty = BRIG_TTY_ALWAYS;
                        break;
                case 'T':
                        o.tty = BRIG_TTY_NEVER;
                        break;
                case 'P':
                        o.terminal_passthrough = true;
                        break;
                case 'd':
                        o.detach = true;
                        break;
                case 'o':
                        if (brig_parse_duration(optarg, &o.timeout_ms, &err) < 0) {
                                free(env);
                                return cli_fail(err);
                        }
                        break;
                case 'r':
                        o.report_path = optarg;
                        break;
                case 'q':
                        quiet = true;
                        break;
                case 'm':
                        o.timings = true;
                        break;
                case 'h':
                        fputs(usage, stdout);
                        free(env);
                        return 0;
                default:
                        cli_say("%s: bad option '%s' (see %s --help)\n", cmd, argv[optind], cmd);
                        free(env);
                        return BRIG_EXIT_SETUP;
                }
        }
        int first = optind + 1;
        if (first >= argc) {
                cli_say("%s: no command given\n%s", cmd, usage);
                free(env);
                return BRIG_EXIT_SETUP;
        }
        o.argv = argv + first;
        o.env = env;
        brig_result res;
        int r;
        const char *outcome = getenv(BRIG_EXEC_OUTCOME_ENV);
        if (outcome) {
                /* The front end (src/front/brig.c) ran this exec and hands
                 * its end over: printed here as any other exec's. */
                char *end;
                errno = 0;
                long fd = strtol(outcome, &end, 10);
                if (errno || end == outcome || *end || fd < 3 || fd > INT_MAX) {
                        cli_say("%s: %s='%s' is not a descriptor\n", cmd, BRIG_EXEC_OUTCOME_ENV, outcome);
                        free(env);
                        return BRIG_EXIT_SETUP;
                }
                r = brig_sandbox_exec_outcome(name, (int)fd, &res, &err);
                close((int)fd);
        } else {
                r = pool ? brig_run_in_pool(pool, &o, &res, &err) : brig_sandbox_exec(name, &o, &res, &err);
        }
        if (res.timings[0])  /* --timings, whether the command ran or not */
                cli_say("brig: timings:\n%s", res.timings);
        if (r < 0) {
                code = cli_fail(err);
        } else if (res.reason == BRIG_REASON_DETACHED) {
                /* stdout, for a script: pid=$(brig exec --detach ... | awk '{print $2}') */
                printf("pid %d log %s\n", res.detached_pid, res.detached_log);
                fflush(stdout);
                cli_say("brig: started in the background in '%s'; its output: brig exec %s -- cat %s\n",
                        name, name, res.detached_log);
                code = 0;
        } else {
                code = res.exit_code;
                if (res.summary[0])
                        cli_say("brig: %s\n", res.summary);
                cli_put_refusals(&res, quiet);
        }
        free(env);
        return code;
}

int cmd_exec(int argc, char **argv)
{
        return exec_command(argc, argv, NULL);
}

int cli_run_in_pool(int argc, char **argv, const char *pool)
{
        return exec_command(argc, argv, pool);
}

static void print_table(json_t *list)
{
        printf("%-20s %-8s %-8s %-8s %-20s %s\n", "NAME", "STATUS", "PID", "MODE", "CREATED", "WORKSPACE");
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row) {
                char when[32] = "-";
                time_t t = (time_t)json_integer_value(json_object_get(row, "created"));
                struct tm tm;
                if (t && localtime_r(&t, &tm))
                        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
                const char *ws = json_string_value(json_object_get(row, "workspace"));
                const char *mode = json_string_value(json_object_get(row, "workspace_mode"));
                printf("%-20s %-8s %-8lld %-8s %-20s %s\n", json_string_value(json_object_get(row, "name")),
                       json_string_value(json_object_get(row, "status")),
                       (long long)json_integer_value(json_object_get(row, "supervisor_pid")), mode ? mode : "-", when,
                       ws ? ws : "-");
                const char *reason = json_string_value(json_object_get(row, "reason"));
                if (reason)
                        printf("%-20s   %s; brig rm removes it\n", "", reason);
                json_t *pool = json_object_get(row, "pool");
                if (pool)  /* brig pool --list has the pool */
                        printf("%-20s   of the warm pool %s: %s\n", "", json_string_value(json_object_get(pool, "key")),
                               json_string_value(json_object_get(pool, "state")));
        }
}

int cmd_ls(int argc, char **argv)
{
        bool json = false;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0) {
                        json = true;
                } else {
                        cli_say("brig ls: unknown option '%s' (expected --json)\n", argv[i]);
                        return BRIG_EXIT_SETUP;
                }
        }
        brig_error *err = NULL;
        char *text = brig_sandbox_list_json(&err);
        if (!text)
                return cli_fail(err);
        if (json) {
                printf("%s\n", text);
        } else {
                json_t *list = json_loads(text, 0, NULL);
                print_table(list);
                json_decref(list);
        }
        free(text);
        return 0;
}

/* A restart runs what was stored at create: say what that is, one line
 * per part, before any error. Takes `described`. */
static void put_described(const char *verb, const char *name, char *described)
{
        for (char *line = described, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                _cleanup_free_ char *safe = text_escaped(line, false);
                cli_say("brig: %s '%s': %s\n", verb, name, safe ? safe : "(out of memory)");
        }
        free(described);
}

/* stop, rm, pause, resume, start: NAME... */
int cmd_simple(int argc, char **argv)
{
        int (*fn)(const char *, brig_error **) = NULL;
        const char *cmd = argv[0];
        if (strcmp(cmd, "stop") == 0)
                fn = brig_sandbox_stop;
        else if (strcmp(cmd, "rm") == 0)
                fn = brig_sandbox_remove;
        else if (strcmp(cmd, "pause") == 0)
                fn = brig_sandbox_pause;
        else if (strcmp(cmd, "resume") == 0)
                fn = brig_sandbox_resume;
        else if (strcmp(cmd, "start") == 0)
                fn = brig_sandbox_start;
        if (!fn || argc < 2) {
                fputs(cli_usage(cmd) ?: "", stderr);
                return BRIG_EXIT_SETUP;
        }
        int code = 0;
        for (int i = 1; i < argc; i++) {
                brig_error *err = NULL;
                char *described = NULL;
                int r = fn == brig_sandbox_start ? brig_sandbox_start_described(argv[i], &described, &err)
                                                 : fn(argv[i], &err);
                put_described("start", argv[i], described);
                if (r < 0)
                        code = cli_fail(err);
                else if (fn == brig_sandbox_start)
                        put_memory_warning("start", argv[i]);
        }
        return code;
}

/* NAME [PATH...] [--exclude PATTERN]... [--json], for diff and commit:
 * argv's strings, pointed to from two NULL-terminated lists. */
struct change_args {
        const char *name;
        bool json;
        const char **paths, **excludes;
        brig_change_filter filter;
};

static int change_args(int argc, char **argv, struct change_args *a)
{
        const char *usage = cli_usage(argv[0]);
        *a = (struct change_args){ 0 };
        a->paths = calloc((size_t)argc + 1, sizeof *a->paths);
        a->excludes = calloc((size_t)argc + 1, sizeof *a->excludes);
        if (!a->paths || !a->excludes)
                return BRIG_EXIT_SETUP;
        size_t np = 0, ne = 0;
        bool options = true;
        for (int i = 1; i < argc; i++) {
                const char *v = argv[i];
                if (options && strcmp(v, "--") == 0) {
                        options = false;
                } else if (options && strcmp(v, "--json") == 0) {
                        a->json = true;
                } else if (options && strcmp(v, "--exclude") == 0 && i + 1 < argc) {
                        a->excludes[ne++] = argv[++i];
                } else if (options && strncmp(v, "--exclude=", 10) == 0) {
                        a->excludes[ne++] = v + 10;
                } else if (options && v[0] == '-') {
                        cli_say("brig %s: unknown option '%s'\n%s", argv[0], v, usage);
                        return BRIG_EXIT_SETUP;
                } else if (!a->name) {
                        a->name = v;
                } else {
                        a->paths[np++] = v;
                }
        }
        if (!a->name) {
                fputs(usage, stderr);
                return BRIG_EXIT_SETUP;
        }
        a->filter = (brig_change_filter){ .paths = np ? a->paths : NULL, .excludes = ne ? a->excludes : NULL };
        return 0;
}

static void change_args_free(struct change_args *a)
{
        free(a->paths);
        free(a->excludes);
}

/* diff NAME [PATH...] [--exclude PATTERN]... [--json] */
int cmd_diff(int argc, char **argv)
{
        struct change_args a;
        int code = change_args(argc, argv, &a);
        brig_error *err = NULL;
        char *text = code ? NULL : brig_sandbox_diff_filtered_json(a.name, &a.filter, &err);
        bool json = a.json;
        change_args_free(&a);
        if (code)
                return code;
        if (!text)
                return cli_fail(err);
        if (json) {
                printf("%s\n", text);
        } else {
                json_t *list = json_loads(text, 0, NULL);
                size_t i;
                json_t *row;
                json_array_foreach(list, i, row) {
                        const char *change = json_string_value(json_object_get(row, "change"));
                        const char *type = json_string_value(json_object_get(row, "type"));
                        const char *path = json_string_value(json_object_get(row, "path"));
                        printf("%c ", change ? (char)(change[0] - 'a' + 'A') : '?');
                        cli_put_safe(stdout, path ? path : "?", false);  /* the sandbox named it */
                        printf("%s\n", type && strcmp(type, "dir") == 0 ? "/" : "");
                }
                json_decref(list);
        }
        free(text);
        return 0;
}

/* commit NAME [PATH...] [--exclude PATTERN]... [--json] */
int cmd_commit(int argc, char **argv)
{
        struct change_args a;
        int code = change_args(argc, argv, &a);
        brig_error *err = NULL;
        char *applied = NULL;
        int r = code ? 0 : brig_sandbox_commit_filtered(a.name, &a.filter, &applied, &err);
        bool json = a.json;
        change_args_free(&a);
        if (code)
                return code;
        if (r < 0)
                return cli_fail(err);
        json_t *list = json_loads(applied ? applied : "[]", 0, NULL);
        if (json)
                printf("%s\n", applied ? applied : "[]");
        else
                cli_say("brig: committed %zu change%s to the workspace\n", json_array_size(list),
                        json_array_size(list) == 1 ? "" : "s");
        json_decref(list);
        free(applied);
        return 0;
}

/* reset NAME */
int cmd_reset(int argc, char **argv)
{
        if (argc != 2 || argv[1][0] == '-') {
                fputs(cli_usage("reset"), stderr);
                return BRIG_EXIT_SETUP;
        }
        brig_error *err = NULL;
        return brig_sandbox_reset(argv[1], &err) < 0 ? cli_fail(err) : 0;
}

/* snapshot NAME TAG, restore NAME TAG, fork NAME TAG NEW */
int cmd_snapshot(int argc, char **argv)
{
        const char *cmd = argv[0];
        bool fork_cmd = strcmp(cmd, "fork") == 0;
        brig_error *err = NULL;
        if (strcmp(cmd, "snapshot") == 0 && argc == 3 && strcmp(argv[1], "--list") == 0) {
                char *text = brig_sandbox_snapshots_json(argv[2], &err);
                if (!text)
                        return cli_fail(err);
                printf("%s\n", text);
                free(text);
                return 0;
        }
        if (strcmp(cmd, "snapshot") == 0 && argc == 4 && strcmp(argv[1], "--rm") == 0)
                return brig_sandbox_snapshot_remove(argv[2], argv[3], &err) < 0 ? cli_fail(err) : 0;
        int want = fork_cmd ? 4 : 3;
        if (argc != want || argv[1][0] == '-' || argv[2][0] == '-' || (fork_cmd && argv[3][0] == '-')) {
                fputs(cli_usage(cmd), stderr);
                return BRIG_EXIT_SETUP;
        }
        if (strcmp(cmd, "restore") == 0)
                put_restore_stops(argv[1], argv[2]);
        if (strcmp(cmd, "snapshot") != 0) {
                brig_error *derr = NULL;
                put_described(cmd, fork_cmd ? argv[3] : argv[1], brig_sandbox_describe(argv[1], &derr));
                brig_error_free(&derr);  /* the command itself says what is wrong */
        }
        int r = strcmp(cmd, "snapshot") == 0 ? brig_sandbox_snapshot(argv[1], argv[2], &err)
                : strcmp(cmd, "restore") == 0 ? brig_sandbox_restore(argv[1], argv[2], &err)
                                              : brig_sandbox_fork(argv[1], argv[2], argv[3], &err);
        if (r == 0 && strcmp(cmd, "snapshot") != 0)
                put_memory_warning(cmd, fork_cmd ? argv[3] : argv[1]);
        return r < 0 ? cli_fail(err) : 0;
}

/* pool --size N [--name NAME] [RUN OPTIONS] | pool --stop [RUN OPTIONS] | pool --stop --name NAME */
/* brig pool --list [--json]: the running pools, a row each; a failing
 * pool's reason on a line of its own. */
static int pool_list(bool json)
{
        brig_error *err = NULL;
        char *text = brig_pool_list_json(&err);
        if (!text)
                return cli_fail(err);
        if (json) {
                printf("%s\n", text);
                free(text);
                return 0;
        }
        json_t *list = json_loads(text, 0, NULL);
        free(text);
        printf("%-20s %-16s %5s %5s %6s %-8s %s\n", "NAME", "KEY", "SIZE", "READY", "IN USE", "DAEMON", "WORKSPACE");
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row) {
                json_t *names = json_object_get(row, "names");
                const char *name = json_string_value(json_array_get(names, 0));
                const char *ws = json_string_value(json_object_get(row, "workspace"));
                printf("%-20s %-16s %5lld %5lld %6lld %-8lld ", name ? name : "-",
                       json_string_value(json_object_get(row, "key")),
                       (long long)json_integer_value(json_object_get(row, "size")),
                       (long long)json_integer_value(json_object_get(row, "ready")),
                       (long long)json_integer_value(json_object_get(row, "in_use")),
                       (long long)json_integer_value(json_object_get(row, "daemon_pid")));
                cli_put_safe(stdout, ws ? ws : "-", false);
                fputc('\n', stdout);
                for (size_t k = 1; k < json_array_size(names); k++)  /* a pool named again */
                        printf("%-20s (the same pool)\n", json_string_value(json_array_get(names, k)));
                const char *failing = json_string_value(json_object_get(row, "failing"));
                if (failing) {
                        printf("%-20s cannot make a member: ", "");
                        cli_put_safe(stdout, failing, false);
                        fputc('\n', stdout);
                }
        }
        json_decref(list);
        return 0;
}

/* brig pool --size N --name NAME found the pool of its policy and
 * workspace running already: say what it joined (another name's pool,
 * whose size stays), so that nobody takes it for a pool of its own. */
static void say_shared_pool(const char *name, unsigned size)
{
        brig_error *err = NULL;
        char *text = brig_pool_list_json(&err);
        brig_error_free(&err);
        json_t *list = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        size_t i, k;
        json_t *row, *n;
        json_array_foreach(list, i, row) {
                json_t *names = json_object_get(row, "names");
                bool ours = false;
                json_array_foreach(names, k, n) {
                        ours |= strcmp(json_string_value(n) ?: "", name) == 0;
                }
                json_int_t has = json_integer_value(json_object_get(row, "size"));
                if (!ours || (json_array_size(names) < 2 && has == (json_int_t)size))
                        continue;
                /* the other names first: the line leaves in one write */
                char *others = NULL;
                size_t len = 0;
                FILE *f = open_memstream(&others, &len);
                json_array_foreach(names, k, n) {
                        if (f && strcmp(json_string_value(n) ?: "", name) != 0)
                                fprintf(f, ", named %s", json_string_value(n));
                }
                if (f)
                        fclose(f);
                cli_say("brig pool: the pool of this policy and workspace ran already (size %lld%s): '%s' names it "
                        "too; brig pool --stop --name %s removes only this name while another gives it\n",
                        (long long)has, others ? others : "", name, name);
                free(others);
        }
        json_decref(list);
}

int cmd_pool(int argc, char **argv)
{
        static const char usage[] =
                "usage: brig pool --size N [RUN OPTIONS]   keep N sandboxes ready for brig run --pooled\n"
                "       brig pool --stop [RUN OPTIONS]     end that pool (same options: they name it)\n"
                "       brig pool --size N --name NAME [RUN OPTIONS]\n"
                "                                          the same, also for brig run --pool NAME\n"
                "       brig pool --stop --name NAME       end the pool of that name\n"
                "       brig pool --list [--json]          the running pools: names, sizes, members ready\n"
                "       brig pool --stop --all             end every pool\n";
        bool all = argc == 3 && ((strcmp(argv[1], "--stop") == 0 && strcmp(argv[2], "--all") == 0) ||
                                 (strcmp(argv[1], "--all") == 0 && strcmp(argv[2], "--stop") == 0));
        if (all) {
                brig_error *err = NULL;
                unsigned stopped = 0;
                if (brig_pool_stop_all(&stopped, &err) < 0)
                        return cli_fail(err);
                cli_say("brig pool: %u pool%s stopped\n", stopped, stopped == 1 ? "" : "s");
                return 0;
        }
        if (argc > 1 && strcmp(argv[1], "--list") == 0) {
                if (argc == 2 || (argc == 3 && strcmp(argv[2], "--json") == 0))
                        return pool_list(argc == 3);
                cli_say("brig pool --list: unexpected argument '%s' (expected --json)\n", argv[2]);
                return BRIG_EXIT_SETUP;
        }
        long size = -1;
        bool stop = false;
        const char *pool_name = NULL;
        char **rest = calloc((size_t)argc + 1, sizeof *rest);
        if (!rest)
                return BRIG_EXIT_SETUP;
        int n = 0;
        rest[n++] = argv[0];
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
                        char *end;
                        size = strtol(argv[++i], &end, 10);
                        if (*end || size < 1 || size > 64) {
                                cli_say("brig pool: --size '%s': expected 1 to 64\n", argv[i]);
                                free(rest);
                                return BRIG_EXIT_SETUP;
                        }
                } else if (strcmp(argv[i], "--stop") == 0) {
                        stop = true;
                } else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
                        pool_name = argv[++i];
                } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                        fputs(usage, stdout);
                        free(rest);
                        return 0;
                } else {
                        rest[n++] = argv[i];
                }
        }
        if (stop == (size > 0)) {
                fputs(usage, stderr);
                free(rest);
                return BRIG_EXIT_SETUP;
        }
        brig_error *err = NULL;
        if (stop && pool_name) {
                /* the name says which pool: its options are the pool's */
                if (n > 1) {
                        cli_say("brig pool --stop --name %s: unexpected argument '%s' (the name alone says "
                                "which pool)\n", pool_name, rest[1]);
                        free(rest);
                        return BRIG_EXIT_SETUP;
                }
                free(rest);
                int r = brig_pool_stop_named(pool_name, &err);
                if (r == 1)
                        cli_say("brig pool: '%s' no longer names its pool, which runs on under its other "
                                "name (brig pool --list shows it)\n", pool_name);
                return r < 0 ? cli_fail(err) : 0;
        }
        brig_policy *p;
        int first, code = cli_policy_from_args("brig pool", n, rest, &p, &first);
        if (code) {
                free(rest);
                return code == 1 ? 0 : code;
        }
        if (first < n) {
                cli_say("brig pool: unexpected argument '%s'\n", rest[first]);
                brig_policy_free(p);
                free(rest);
                return BRIG_EXIT_SETUP;
        }
        int r = stop ? brig_pool_stop(p, &err) : brig_pool_start_named(p, (unsigned)size, pool_name, &err);
        if (r == 0 && !stop && cli_plain_policy(n, rest, first))  /* for brig run --pooled (run.c) */
                pool_remember_plain(p);
        brig_policy_free(p);
        free(rest);
        if (r == 0 && pool_name)
                say_shared_pool(pool_name, (unsigned)size);
        return r < 0 ? cli_fail(err) : 0;
}
