/* policy.c — `brig policy show|check|explain`. */
#define _GNU_SOURCE
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char policy_usage[] =
        "usage: brig policy show [--profile P] [--policy FILE]... [run options]\n"
        "         the effective policy as JSON (loads back to the same policy)\n"
        "       brig policy check FILE...\n"
        "         validate policy files (errors name file:line:column)\n"
        "       brig policy explain [--profile P] [--policy FILE]... [run options]\n"
        "         what a run can and cannot do, in plain words\n";

static int show_or_explain(int argc, char **argv, bool explain)
{
        brig_policy *p;
        const char *cmd = explain ? "brig policy explain" : "brig policy show";
        int rest, code = cli_policy_from_args(cmd, argc, argv, &p, &rest);
        if (code)
                return code == 1 ? 0 : code;
        if (rest < argc) {
                cli_say("brig policy %s: unexpected argument '%s'\n", explain ? "explain" : "show", argv[rest]);
                brig_policy_free(p);
                return BRIG_EXIT_SETUP;
        }
        brig_error *err = NULL;
        char *text = explain ? brig_policy_explain(p, &err) : brig_policy_to_json(p, &err);
        brig_policy_free(p);
        if (!text)
                return cli_fail(err);
        fputs(text, stdout);
        if (!explain)
                fputc('\n', stdout);
        free(text);
        return 0;
}

static int check(int argc, char **argv)
{
        if (argc < 2) {
                fputs(policy_usage, stderr);
                return BRIG_EXIT_SETUP;
        }
        int bad = 0;
        for (int i = 1; i < argc; i++) {
                brig_policy *p = brig_policy_new();
                brig_error *err = NULL;
                if (!p || brig_policy_load_file(p, argv[i], &err) < 0) {
                        cli_say("brig: %s\n", err && err->msg ? err->msg : "out of memory");
                        bad++;
                } else {
                        printf("%s: ok\n", argv[i]);
                }
                brig_error_free(&err);
                brig_policy_free(p);
        }
        return bad ? BRIG_EXIT_SETUP : 0;
}

int cmd_policy(int argc, char **argv)
{
        if (argc < 2) {
                fputs(policy_usage, stderr);
                return BRIG_EXIT_SETUP;
        }
        const char *sub = argv[1];
        if (strcmp(sub, "show") == 0)
                return show_or_explain(argc - 1, argv + 1, false);
        if (strcmp(sub, "explain") == 0)
                return show_or_explain(argc - 1, argv + 1, true);
        if (strcmp(sub, "check") == 0)
                return check(argc - 1, argv + 1);
        if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
                fputs(policy_usage, stdout);
                return 0;
        }
        cli_say("brig policy: unknown subcommand '%s'\n%s", sub, policy_usage);
        return BRIG_EXIT_SETUP;
}
