/* run.c — `brig run [options] -- CMD [ARG...]`: flags become policy
 * calls; the library does the rest. */
#define _GNU_SOURCE
#include "cli.h"
#include "persist/pool_claim.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options of brig run are libbrig's table of settings
 * (brig_policy_option_info): getopt's table and --help are made from it,
 * and each flag is applied by brig_policy_set_option. Only --pooled and
 * --quiet are brig run's own (take_flag below). */
struct run_options {
        struct option *getopt;   /* ends with --help and a zero entry */
        brig_option_info *info;  /* getopt[i].val - 256 indexes this */
        size_t n;
};

static const char usage_head[] = "usage: brig run [OPTIONS] -- COMMAND [ARG...]\n\n";
static const char usage_tail[] =
        "End of the run and the warm pool (brig run's own):\n"
        "  --quiet                  no end-of-run lines about what brig refused (the report keeps them)\n"
        "  --pooled                 run in a ready sandbox of brig pool (same options and workspace), if any\n"
        "  --pool NAME              first, alone: run in a ready sandbox of the pool named NAME as that pool\n"
        "                           made it (no policy options; after it, brig exec's: --cwd, --env ...)\n";

/* "  --tty / --no-tty         force or forbid ...": the flag column is 25
 * wide, its text continues at column 27. */
static void put_option_help(FILE *out, const brig_option_info *info, size_t n, size_t i)
{
        char left[128];
        int len = snprintf(left, sizeof left, "--%s%s%s", info[i].name, info[i].arg ? " " : "",
                           info[i].arg ? info[i].arg : "");
        for (size_t j = i + 1; j < n && !info[j].help && len < (int)sizeof left; j++)
                len += snprintf(left + len, sizeof left - (size_t)len, " / --%s%s%s", info[j].name,
                                info[j].arg ? " " : "", info[j].arg ? info[j].arg : "");
        fprintf(out, "  %-*s", len <= 23 ? 25 : len + 2, left);
        for (const char *c = info[i].help; *c; c++) {
                fputc(*c, out);
                if (*c == '\n')
                        fprintf(out, "%27s", "");
        }
        fputc('\n', out);
}

static char *make_usage(const brig_option_info *info, size_t n)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out)
                return NULL;
        fputs(usage_head, out);
        /* the sections in the order the table first names them */
        const char *done[32];
        size_t n_done = 0;
        for (size_t i = 0; i < n; i++) {
                bool seen = false;
                for (size_t k = 0; k < n_done; k++)
                        seen |= strcmp(done[k], info[i].section) == 0;
                if (seen || !info[i].help || n_done == 32)
                        continue;
                done[n_done++] = info[i].section;
                fprintf(out, "%s\n", info[i].section);
                for (size_t j = i; j < n; j++)
                        if (info[j].help && strcmp(info[j].section, info[i].section) == 0)
                                put_option_help(out, info, n, j);
        }
        fputs(usage_tail, out);
        if (fclose(out) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static void run_options_free(struct run_options *o)
{
        free(o->getopt);
        free(o->info);
}

/* The --help text, made from the table when it is shown: formatting it
 * for every run cost more than a tenth of a millisecond of each start. */
static void put_usage(FILE *out, const struct run_options *o)
{
        char *usage = make_usage(o->info, o->n);
        fputs(usage ? usage : "brig: out of memory\n", out);
        free(usage);
}

static int run_options_get(struct run_options *o)
{
        *o = (struct run_options){ 0 };
        brig_option_info one = { .size = sizeof one };
        while (brig_policy_option_info(o->n, &one) == 0)
                o->n++;
        o->info = calloc(o->n ? o->n : 1, sizeof *o->info);
        o->getopt = calloc(o->n + 2, sizeof *o->getopt);
        for (size_t i = 0; o->info && o->getopt && i < o->n; i++) {
                o->info[i].size = sizeof o->info[i];
                brig_policy_option_info(i, &o->info[i]);
                o->getopt[i] = (struct option){ o->info[i].name, o->info[i].arg ? required_argument : no_argument,
                                                NULL, 256 + (int)i };
        }
        if (o->getopt)
                o->getopt[o->n] = (struct option){ "help", no_argument, NULL, 'h' };
        if (!o->getopt || !o->info) {
                run_options_free(o);
                *o = (struct run_options){ 0 };
                return -1;
        }
        return 0;
}

/* getopt's '?' covers three mistakes; name the right one. */
static void explain_bad_option(const struct option *options, const char *cmd, const char *arg)
{
        if (strncmp(arg, "--", 2) == 0) {
                size_t n = strcspn(arg + 2, "=");
                for (const struct option *o = options; o->name; o++) {
                        if (strlen(o->name) != n || strncmp(o->name, arg + 2, n) != 0)
                                continue;
                        if (o->has_arg == no_argument)
                                cli_say("%s: option '--%s' takes no value\n", cmd, o->name);
                        else
                                cli_say("%s: option '--%s' needs a value\n", cmd, o->name);
                        return;
                }
        }
        if (strcmp(cmd, "brig run") == 0 && (strcmp(arg, "--pool") == 0 || strncmp(arg, "--pool=", 7) == 0)) {
                cli_say("brig run: --pool NAME comes first: the pool's options are its own, the rest are "
                        "brig exec's (brig run --pool NAME [--cwd DIR] [--env N=V] -- COMMAND)\n");
                return;
        }
        cli_say("%s: unknown option '%s' (see %s --help)\n", cmd, arg, cmd);
}

/* A flag that weakens the sandbox (--net host) says so while it is read. */
static void put_flag_warning(const char *line, void *data)
{
        cli_say("brig: WARNING: %s\n", line);
}

/* The policy from BRIG_POLICY, --profile and --policy (in the order
 * given), then every other flag: flags win over files wherever they stand
 * on the command line. Returns 0 and the index of the first non-option,
 * 1 after --help, or an exit code (> 1) after printing the error, which
 * names `cmd` ("brig create": its run options are parsed here too). */
int cli_policy_from_args(const char *cmd, int argc, char **argv, brig_policy **ret, int *rest)
{
        brig_error *err = NULL;
        *ret = NULL;
        /* The flags' table only when there is a flag to read: before "--"
         * or a command getopt stops at once, without it (made, it cost
         * every `brig run -- CMD` 20 us: the settings walked, two arrays
         * filled). */
        static struct option no_options[] = { { 0 } };
        struct run_options o = { 0 };
        bool flags = argc > 1 && argv[1][0] == '-' && argv[1][1] && strcmp(argv[1], "--") != 0;
        if (flags && run_options_get(&o) < 0) {
                cli_say("brig: out of memory\n");
                return BRIG_EXIT_SETUP;
        }
        brig_policy *p = brig_policy_new();
        if (!p) {
                cli_say("brig: out of memory\n");
                run_options_free(&o);
                return BRIG_EXIT_SETUP;
        }
        int code = 0;
        const char *env = getenv("BRIG_POLICY");
        if (env && *env && brig_policy_load_file(p, env, &err) < 0) {
                code = cli_fail(err);
                goto out;
        }
        brig_policy_set_notice(p, put_flag_warning, NULL);
        int opt;
        opterr = 0;
        for (int pass = 1; pass <= 2 && !code; pass++) {
                optind = 0;  /* glibc: 0 restarts the scan from scratch */
                /* "+": stop at the first non-option so the command's own flags stay its own */
                while ((opt = getopt_long(argc, argv, "+h", o.getopt ? o.getopt : no_options, NULL)) != -1) {
                        if (opt == 'h') {
                                put_usage(stdout, &o);
                                code = 1;
                                break;
                        }
                        if (opt == '?') {
                                explain_bad_option(o.getopt, cmd, argv[optind - 1]);
                                code = BRIG_EXIT_SETUP;
                                break;
                        }
                        const brig_option_info *info = &o.info[opt - 256];
                        bool first = info->flags & BRIG_OPTION_FIRST;
                        if (first != (pass == 1))
                                continue;
                        if (brig_policy_set_option(p, info->name, info->arg ? optarg : NULL, &err) < 0) {
                                code = err ? cli_fail(err) : BRIG_EXIT_SETUP;
                                break;
                        }
                }
        }
out:
        run_options_free(&o);
        if (code) {
                brig_policy_free(p);
                return code;
        }
        brig_policy_set_notice(p, NULL, NULL);  /* the caller's own, if any */
        *rest = optind;
        *ret = p;
        return 0;
}

/* brig run --help and the usage line of its mistakes. */
static void put_run_usage(FILE *out)
{
        struct run_options o;
        if (run_options_get(&o) == 0)
                put_usage(out, &o);
        run_options_free(&o);
}

bool cli_plain_policy(int argc, char **argv, int first)
{
        const char *env = getenv("BRIG_POLICY");
        return (first == 1 || (first == 2 && strcmp(argv[1], "--") == 0)) && first <= argc && !(env && env[0]);
}

/* Does the policy option ARG (--NAME, without =VALUE) take its value
 * from the next argument? */
static bool option_takes_next(const char *arg)
{
        if (strncmp(arg, "--", 2) != 0 || strchr(arg, '='))
                return false;
        brig_option_info info = { .size = sizeof info };
        for (size_t i = 0; brig_policy_option_info(i, &info) == 0; i++)
                if (strcmp(info.name, arg + 2) == 0)
                        return info.arg != NULL;
        return false;
}

/* --pooled (docs/persistent.md) and --quiet are not policy options: take
 * them out of the options, which end at "--" or at the command (the first
 * argument that is neither an option nor an option's value), before the
 * policy options are read. What follows is the command's own: its
 * arguments stay as they are, --quiet and --pooled among them. */
static bool take_flag(int *argc, char **argv, const char *flag)
{
        bool found = false;
        int out = 1;
        bool in_options = true;
        for (int i = 1; i < *argc; i++) {
                if (in_options && (strcmp(argv[i], "--") == 0 || argv[i][0] != '-' || !argv[i][1]))
                        in_options = false;
                if (in_options && strcmp(argv[i], flag) == 0) {
                        found = true;
                        continue;
                }
                argv[out++] = argv[i];
                if (in_options && option_takes_next(argv[i]) && i + 1 < *argc)
                        argv[out++] = argv[++i];  /* its value, whatever it looks like */
        }
        *argc = out;
        argv[out] = NULL;
        return found;
}

/* A control weaker than the policy asks, said before the command starts. */
static void put_notice(const char *line, void *data)
{
        cli_say("brig: WARNING: %s\n", line);
        *(bool *)data = true;
}

/* brig run --pool NAME [EXEC OPTIONS] -- COMMAND: the pool's policy, so
 * no policy option, and --pool first (docs/persistent.md). */
static int run_in_pool(int argc, char **argv)
{
        const char *eq = strchr(argv[1], '=');
        const char *name = eq ? eq + 1 : argc > 2 ? argv[2] : NULL;
        if (!name || !name[0]) {
                cli_say("brig run: --pool needs the pool's name (brig pool --name NAME started it)\n");
                return BRIG_EXIT_SETUP;
        }
        /* a policy asked for by the environment is refused as --policy is:
         * the run would get the pool's, perhaps a weaker one, without a word */
        const char *asked = getenv("BRIG_POLICY");
        if (asked && asked[0]) {
                _cleanup_free_ char *safe = text_escaped(asked, false);
                cli_say("brig run: --pool NAME runs as the pool was made, so BRIG_POLICY (set: '%s') does not "
                        "apply: unset it for this run, or start the pool with it (brig pool --name NAME reads it)\n",
                        safe ? safe : "?");
                return BRIG_EXIT_SETUP;
        }
        /* as brig exec NAME reads its line: the name, then the options */
        int skip = eq ? 1 : 2;
        char **args = calloc((size_t)argc + 1, sizeof *args);
        if (!args)
                return BRIG_EXIT_SETUP;
        args[0] = argv[0];
        args[1] = (char *)name;
        for (int i = skip + 1; i < argc; i++)
                args[i - skip + 1] = argv[i];
        int code = cli_run_in_pool(argc - skip + 1, args, name);
        free(args);
        return code;
}

int cmd_run(int argc, char **argv)
{
        if (argc > 1 && (strcmp(argv[1], "--pool") == 0 || strncmp(argv[1], "--pool=", 7) == 0))
                return run_in_pool(argc, argv);
        brig_policy *p;
        bool pooled = take_flag(&argc, argv, "--pooled");
        bool quiet = take_flag(&argc, argv, "--quiet");
        int first, code = cli_policy_from_args("brig run", argc, argv, &p, &first);
        if (code)
                return code == 1 ? 0 : code;
        if (first >= argc) {
                cli_say("brig run: no command given\n");
                put_run_usage(stderr);
                brig_policy_free(p);
                return BRIG_EXIT_SETUP;
        }
        brig_result res = { 0 };
        brig_error *err = NULL;
        bool used_pool = false, warned = false;
        char why[512] = "";
        brig_policy_set_notice(p, put_notice, &warned);
        /* the status first: the kernel's teardown of the sandbox and the
         * cgroups' removal finish after brig has exited (core/teardown.c) */
        brig_policy_set_exit_after_run(p, true);
        if ((pooled ? brig_run_pooled_why(p, argv + first, &res, &used_pool, why, sizeof why, &err)
                    : brig_run_in_process(p, argv + first, &res, &err)) < 0) {
                code = cli_fail(err);
        } else {
                code = res.exit_code;
                if (res.summary[0])  /* one human line when it did not simply exit */
                        cli_say("brig: %s\n", res.summary);
                if (res.warning[0] && !warned)  /* a pooled run: its sandbox said nothing at start */
                        cli_say("brig: WARNING: %s\n", res.warning);
                cli_put_refusals(&res, quiet);
        }
        if (res.timings[0])  /* --timings, whether the run started or not */
                cli_say("brig: timings:\n%s", res.timings);
        if (pooled && !used_pool && why[0])  /* never silently: the caller asked for the pool */
                cli_say("brig: --pooled: not served by the pool: %s; ran in a new sandbox\n", why);
        /* the next such run the front end's (persist/pool_claim.h), once
         * the status is out */
        if (pooled && cli_plain_policy(argc, argv, first))
                pool_remember_plain(p);
        brig_policy_free(p);
        return code;
}
