/* files.c — brig cp and brig files: file operations on a running sandbox,
 * as the sandbox sees them (brig_sandbox_file, docs/persistent.md). */
#define _GNU_SOURCE
#include "cli.h"
#include "core/hostfs.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char cp_usage[] =
        "usage: brig cp [--max-size SIZE] [--mode MODE] [--timeout DURATION] SRC DST\n"
        "\n"
        "Copy one file into or out of a running sandbox, as the sandbox sees it: the\n"
        "path is resolved inside, by the sandbox user, with the sandbox's own rights.\n"
        "One of SRC and DST is NAME:PATH (PATH absolute inside); the other is a host\n"
        "file or '-' (stdin or stdout). Writing inside is atomic (a new file renamed\n"
        "over the name); reading takes a regular file only.\n"
        "\n"
        "  --max-size SIZE      refuse a file larger than SIZE (default 64M)\n"
        "  --mode MODE          permission bits of a file written inside (default 0644)\n"
        "  --timeout DURATION   give up after DURATION (default 60s)\n";

static const char files_usage[] =
        "usage: brig files NAME OP PATH [--max-size SIZE] [--mode MODE] [--timeout DURATION]\n"
        "\n"
        "File operations inside a running sandbox, as the sandbox sees them:\n"
        "  list PATH      a directory's entries, as a JSON array\n"
        "  stat PATH      the path itself (a link is not followed), as JSON\n"
        "  mkdir PATH     one directory (--mode, default 0755)\n"
        "  rm PATH        a file, a link or an empty directory\n"
        "  tar-out DIR    DIR as a tar stream on stdout (made by the sandbox's tar)\n"
        "  tar-in DIR     unpack the tar stream on stdin into DIR (the sandbox's tar)\n"
        "\n"
        "  --max-size SIZE      tar-out, tar-in: cut the stream off past SIZE and fail (default 1G)\n"
        "  --mode MODE          permission bits of a directory made (default 0755)\n"
        "  --timeout DURATION   give up after DURATION (default 60s)\n";

struct file_flags {
        uint64_t max_bytes, timeout_ms;
        uint32_t mode;
};

/* The options both commands take; returns optind's first operand or -1. */
static int parse_flags(int argc, char **argv, const char *cmd, const char *usage, struct file_flags *f)
{
        static const struct option options[] = {
                { "max-size", required_argument, NULL, 'm' }, { "mode", required_argument, NULL, 'M' },
                { "timeout", required_argument, NULL, 'o' },  { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        brig_error *err = NULL;
        int opt;
        opterr = 0;
        optind = 1;
        while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
                char *end;
                switch (opt) {
                case 'm':
                        if (brig_parse_size(optarg, &f->max_bytes, &err) < 0 || f->max_bytes == 0) {
                                brig_error_free(&err);
                                cli_say("brig %s: --max-size '%s': expected a size like 1M\n", cmd, optarg);
                                return -1;
                        }
                        break;
                case 'M':
                        errno = 0;
                        unsigned long m = strtoul(optarg, &end, 8);
                        if (errno || !*optarg || *end || m > 07777) {
                                cli_say("brig %s: --mode '%s': expected octal permission bits like 0644\n",
                                        cmd, optarg);
                                return -1;
                        }
                        f->mode = (uint32_t)m;
                        break;
                case 'o':
                        if (brig_parse_duration(optarg, &f->timeout_ms, &err) < 0) {
                                cli_fail(err);
                                return -1;
                        }
                        break;
                case 'h':
                        fputs(usage, stdout);
                        exit(0);
                default:
                        cli_say("brig %s: bad option '%s' (see brig %s --help)\n", cmd, argv[optind - 1],
                                cmd);
                        return -1;
                }
        }
        return optind;
}

/* One operation on sandbox NAME; the exit code. */
static int run_op(const char *name, brig_file_spec *s)
{
        brig_sandbox *sb = NULL;
        brig_error *err = NULL;
        if (brig_sandbox_open(name, &sb, &err) < 0)
                return cli_fail(err);
        int r = brig_sandbox_file(sb, s, &err);
        brig_error *cerr = NULL;
        brig_sandbox_close(sb, &cerr);
        brig_error_free(&cerr);
        return r < 0 ? cli_fail(err) : 0;
}

/* "NAME:/PATH" → name (in buf) and path; false for a host path. A host
 * path that looks like one is given as ./NAME:/PATH. */
static bool sandbox_ref(const char *arg, char *buf, size_t n, const char **path)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon == arg || colon[1] != '/' || (size_t)(colon - arg) >= n)
                return false;
        for (const char *c = arg; c < colon; c++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *c))
                        return false;
        snprintf(buf, n, "%.*s", (int)(colon - arg), arg);
        *path = colon + 1;
        return true;
}

int cmd_cp(int argc, char **argv)
{
        struct file_flags f = { 0 };
        int first = parse_flags(argc, argv, "cp", cp_usage, &f);
        if (first < 0)
                return BRIG_EXIT_SETUP;
        if (argc - first != 2) {
                cli_say("brig cp: give SRC and DST\n%s", cp_usage);
                return BRIG_EXIT_SETUP;
        }
        const char *src = argv[first], *dst = argv[first + 1], *path;
        char name[128];
        bool in = sandbox_ref(dst, name, sizeof name, &path);
        if (in == sandbox_ref(src, name, sizeof name, &path)) {
                cli_say("brig cp: exactly one of SRC and DST must be NAME:/PATH inside a sandbox\n%s",
                        cp_usage);
                return BRIG_EXIT_SETUP;
        }
        if (in)
                sandbox_ref(dst, name, sizeof name, &path);
        const char *host = in ? src : dst;
        int fd = in ? 0 : 1;
        if (strcmp(host, "-") != 0) {
                /* The host path may lie in the sandbox's workspace, which
                 * the sandbox arranges: opened as brig opens its reports,
                 * through no symlink and never in brig's state root. */
                brig_error *err = NULL;
                fd = in ? input_open(host, "brig cp: SRC", &err) : output_open(host, "brig cp: DST", false, &err);
                if (fd < 0)
                        return cli_fail(err);
        }
        brig_file_spec s = { .size = sizeof s, .op = in ? BRIG_FILE_WRITE : BRIG_FILE_READ, .path = path, .fd = fd,
                             .mode = f.mode, .max_bytes = f.max_bytes, .timeout_ms = f.timeout_ms };
        int code = run_op(name, &s);
        if (fd > 2)
                close(fd);
        return code;
}

int cmd_files(int argc, char **argv)
{
        struct file_flags f = { 0 };
        int first = parse_flags(argc, argv, "files", files_usage, &f);
        if (first < 0)
                return BRIG_EXIT_SETUP;
        if (argc - first != 3) {
                cli_say("brig files: give NAME, an operation and a path\n%s", files_usage);
                return BRIG_EXIT_SETUP;
        }
        static const struct {
                const char *word;
                enum brig_file_op op;
                int fd;
        } ops[] = {
                { "list", BRIG_FILE_LIST, 1 },       { "stat", BRIG_FILE_STAT, 1 },
                { "mkdir", BRIG_FILE_MKDIR, -1 },    { "rm", BRIG_FILE_REMOVE, -1 },
                { "tar-out", BRIG_FILE_TAR_OUT, 1 }, { "tar-in", BRIG_FILE_TAR_IN, 0 },
        };
        const char *word = argv[first + 1];
        for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
                if (strcmp(word, ops[i].word) == 0) {
                        bool tar = ops[i].op == BRIG_FILE_TAR_OUT || ops[i].op == BRIG_FILE_TAR_IN;
                        if (f.max_bytes && !tar) {
                                cli_say("brig files: --max-size bounds tar-out and tar-in (brig cp takes it "
                                        "for one file)\n");
                                return BRIG_EXIT_SETUP;
                        }
                        brig_file_spec s = { .size = sizeof s, .op = ops[i].op, .path = argv[first + 2],
                                             .fd = ops[i].fd, .mode = f.mode, .max_bytes = f.max_bytes,
                                             .timeout_ms = f.timeout_ms };
                        return run_op(argv[first], &s);
                }
        cli_say("brig files: unknown operation '%s'\n%s", word, files_usage);
        return BRIG_EXIT_SETUP;
}
