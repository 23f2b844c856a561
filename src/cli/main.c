/* main.c — brig's entry point: dispatch to a subcommand. */
#define _GNU_SOURCE
#include "cli.h"
#include "core/program.h"
#include "oci/oci.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern char **environ;

static const char usage[] =
        "usage: brig COMMAND [OPTIONS]\n"
        "\n"
        "  run [options] -- CMD [ARG...]   run CMD in a new sandbox (brig run --help)\n"
        "  create NAME [options]           start a sandbox that lives on (brig create --help)\n"
        "  exec NAME [options] -- CMD...   run CMD in it (brig exec --help)\n"
        "  cp SRC DST                      copy a file into or out of a sandbox: NAME:/PATH (brig cp --help)\n"
        "  files NAME OP PATH              list, stat, mkdir, rm, tar-out, tar-in inside (brig files --help)\n"
        "  ls [--json]                     list your sandboxes\n"
        "  stop|start|rm NAME...           stop it (state kept), start it again, remove it\n"
        "  pause|resume NAME...            freeze or thaw every process in it\n"
        "  diff NAME [PATH...] [--exclude PATTERN]... [--json]\n"
        "                                  what an overlay sandbox changed in the workspace (under PATH)\n"
        "  commit NAME [PATH...] [--exclude PATTERN]... / reset NAME\n"
        "                                  apply those changes to the workspace / discard them\n"
        "  snapshot|restore NAME TAG       save the writable state as TAG / go back to it\n"
        "  fork NAME TAG NEW_NAME          start a second sandbox from a snapshot\n"
        "  pool --size N|--stop [options]  keep sandboxes ready for brig run --pooled\n"
        "                                  (--name NAME: for brig run --pool NAME)\n"
        "  mcp [--overlay] [--keep NAME] [options]\n"
        "                                  serve one sandbox to an agent over MCP on stdio (brig mcp --help)\n"
        "  policy show|check|explain       effective policy as JSON, validate files, explain in words\n"
        "  log FILE|NAME [options]         an audit stream as a timeline; log verify FILE (brig log --help)\n"
        "  replay MANIFEST [options]       run again what run --manifest recorded; say what differs\n"
        "  doctor [--json]                 which controls this host supports\n"
        "  serve [options]                 the sandbox API over HTTP (brig serve --help)\n"
        "  oci COMMAND ...                 the runc command line for container engines (brig oci --help)\n"
        "  version                         print the version\n";

/* The commands without an option parser of their own: what `brig CMD
 * --help` prints (and their usage errors). docs/man/ documents each option
 * listed here; tests/integration/test_install.py holds the two to each
 * other. */
static const struct {
        const char *cmd, *usage;
} command_usage[] = {
        { "ls", "usage: brig ls [--json]\n"
                "\n"
                "  --json   one JSON array of your sandboxes instead of the table\n" },
        { "stop", "usage: brig stop NAME...\n" },
        { "start", "usage: brig start NAME...\n" },
        { "rm", "usage: brig rm NAME...\n" },
        { "pause", "usage: brig pause NAME...\n" },
        { "resume", "usage: brig resume NAME...\n" },
        { "diff", "usage: brig diff NAME [PATH...] [--exclude PATTERN]... [--json]\n"
                  "\n"
                  "  --exclude PATTERN  leave out paths matching PATTERN (repeatable)\n"
                  "  --json             the changes as a JSON array\n" },
        { "commit", "usage: brig commit NAME [PATH...] [--exclude PATTERN]... [--json]\n"
                    "\n"
                    "  --exclude PATTERN  leave out paths matching PATTERN (repeatable)\n"
                    "  --json             the committed changes as a JSON array\n" },
        { "reset", "usage: brig reset NAME\n" },
        { "snapshot", "usage: brig snapshot NAME TAG\n"
                      "       brig snapshot --list NAME\n"
                      "       brig snapshot --rm NAME TAG\n" },
        { "restore", "usage: brig restore NAME TAG\n" },
        { "fork", "usage: brig fork NAME TAG NEW_NAME\n" },
        { "doctor", "usage: brig doctor [--json]\n"
                    "\n"
                    "  --json   the same as JSON\n" },
        { "version", "usage: brig version\n" },
};

const char *cli_usage(const char *cmd)
{
        for (size_t i = 0; i < sizeof command_usage / sizeof command_usage[0]; i++)
                if (strcmp(command_usage[i].cmd, cmd) == 0)
                        return command_usage[i].usage;
        return NULL;
}

void cli_put_safe(FILE *f, const char *s, bool multiline)
{
        _cleanup_free_ char *text = text_escaped(s, multiline);
        fputs(text ? text : "(out of memory)", f);
}

void cli_say(const char *fmt, ...)
{
        char *line = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&line, fmt, ap);
        va_end(ap);
        /* fputs hands an unbuffered stream the whole block (glibc, musl) */
        fputs(n >= 0 ? line : "brig: out of memory while writing a message\n", stderr);
        if (n >= 0)
                free(line);
}

/* "brig: TEXT\n", TEXT as cli_put_safe shows it. */
static void put_line(const char *s, bool multiline)
{
        _cleanup_free_ char *text = text_escaped(s, multiline);
        cli_say("brig: %s\n", text ? text : "(out of memory)");
}

void cli_put_unix_refused(const brig_result *res)
{
        if (!res->unix_refused)
                return;
        /* the sandbox's choice: shown as text */
        _cleanup_free_ char *first = text_escaped(res->unix_refused_path, false);
        /* An abstract name (shown as @name) has no path to allow: only a
         * socket file can be named with --allow-unix. */
        cli_say("brig: refused %llu connection%s to unix sockets outside the sandbox (first: %s); %s\n",
                (unsigned long long)res->unix_refused, res->unix_refused == 1 ? "" : "s",
                first ? first : "(out of memory)",
                res->unix_refused_path[0] == '@'
                        ? "abstract sockets reach only the sandbox's own listeners; for a socket file, --allow-unix "
                          "PATH lets one through"
                        : "--allow-unix PATH lets one through, from a read-only grant (--ro-bind DIR)");
}

void cli_put_refusals(const brig_result *res, bool quiet)
{
        if (quiet)
                return;
        if (!res->refusals[0]) {
                cli_put_unix_refused(res);  /* brig exec: the unix socket guard's count alone */
                return;
        }
        /* one "brig: " per line; names the sandbox chose shown as text */
        for (const char *line = res->refusals; *line;) {
                const char *end = strchr(line, '\n');
                size_t n = end ? (size_t)(end - line) : strlen(line);
                char one[1024];
                snprintf(one, sizeof one, "%.*s", (int)n, line);
                put_line(one, false);
                line += n + (end != NULL);
        }
}

int cli_fail(brig_error *err)
{
        int code = err ? err->exit_code : BRIG_EXIT_SETUP;
        /* Messages can carry names the sandbox chose (a file in a commit
         * conflict): as text only. */
        put_line(err && err->msg ? err->msg : "unknown error", true);
        brig_error_free(&err);
        return code ? code : BRIG_EXIT_SETUP;
}

/* brig serve is a program of its own, brig-serve (src/serve/): the
 * libmicrohttpd it links pulls in GnuTLS, nettle, p11-kit and six more
 * libraries, which every other command would otherwise load and relocate
 * at start. Found as libbrig finds brig-supervisor (never through PATH:
 * a user's PATH, or a cwd with a planted brig-serve, is not looked at)
 * and executed through the descriptor that was checked. */
int cmd_serve(int argc, char **argv)
{
        brig_error *err = NULL;
        char *path = NULL;
        int fd = brig_program_open("brig-serve", &path, &err);
        if (fd < 0)
                return cli_fail(err);
        argv[0] = "brig-serve";
        (void)argc;
        fexecve(fd, argv, environ);
        cli_say("brig serve: cannot run %s: %s\n", path, strerror(errno));
        free(path);
        close(fd);
        return BRIG_EXIT_SETUP;
}

int main(int argc, char **argv)
{
        if (program_start() < 0)  /* stdio and SIGPIPE (core/program.h) */
                return BRIG_EXIT_SETUP;
        /* An engine runs its runtime binary by a name of its own (brig-oci,
         * a symlink to brig): the runc command line then, as brig oci. */
        const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        /* This is brig's engine, started by the front end under the name
         * the user ran (src/front/brig.c): ps, /proc/PID/comm and the
         * sandbox's pid 1 show that name, not brig-engine's (or, where the
         * kernel names a program run through a descriptor by its number,
         * a digit). */
        prctl(PR_SET_NAME, base);
        if (strcmp(base, "brig-oci") == 0)
                return oci_main(argc, argv);
        if (argc < 2) {
                fputs(usage, stderr);
                return BRIG_EXIT_SETUP;
        }
        const char *cmd = argv[1];
        if (argc == 3 && cli_usage(cmd) && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
                fputs(cli_usage(cmd), stdout);
                return 0;
        }
        if (strcmp(cmd, "run") == 0)
                return cmd_run(argc - 1, argv + 1);
        if (strcmp(cmd, "policy") == 0)
                return cmd_policy(argc - 1, argv + 1);
        if (strcmp(cmd, "create") == 0)
                return cmd_create(argc - 1, argv + 1);
        if (strcmp(cmd, "exec") == 0)
                return cmd_exec(argc - 1, argv + 1);
        if (strcmp(cmd, "cp") == 0)
                return cmd_cp(argc - 1, argv + 1);
        if (strcmp(cmd, "files") == 0)
                return cmd_files(argc - 1, argv + 1);
        if (strcmp(cmd, "ls") == 0)
                return cmd_ls(argc - 1, argv + 1);
        if (strcmp(cmd, "stop") == 0 || strcmp(cmd, "rm") == 0 || strcmp(cmd, "pause") == 0 ||
            strcmp(cmd, "resume") == 0 || strcmp(cmd, "start") == 0)
                return cmd_simple(argc - 1, argv + 1);
        if (strcmp(cmd, "diff") == 0)
                return cmd_diff(argc - 1, argv + 1);
        if (strcmp(cmd, "commit") == 0)
                return cmd_commit(argc - 1, argv + 1);
        if (strcmp(cmd, "reset") == 0)
                return cmd_reset(argc - 1, argv + 1);
        if (strcmp(cmd, "pool") == 0)
                return cmd_pool(argc - 1, argv + 1);
        if (strcmp(cmd, "snapshot") == 0 || strcmp(cmd, "restore") == 0 || strcmp(cmd, "fork") == 0)
                return cmd_snapshot(argc - 1, argv + 1);
        if (strcmp(cmd, "mcp") == 0)
                return cmd_mcp(argc - 1, argv + 1);
        if (strcmp(cmd, "doctor") == 0)
                return cmd_doctor(argc - 1, argv + 1);
        if (strcmp(cmd, "log") == 0)
                return cmd_log(argc - 1, argv + 1);
        if (strcmp(cmd, "replay") == 0)
                return cmd_replay(argc - 1, argv + 1);
        if (strcmp(cmd, "serve") == 0)
                return cmd_serve(argc - 1, argv + 1);
        if (strcmp(cmd, "oci") == 0)
                return oci_main(argc - 1, argv + 1);
        if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
                printf("brig %s\n", brig_version());
                return 0;
        }
        if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
                fputs(usage, stdout);
                return 0;
        }
        cli_say("brig: unknown command '%s'\n%s", cmd, usage);
        return BRIG_EXIT_SETUP;
}
