/* log.c — brig log: an audit stream as a timeline, and brig log verify.
 * The reading is libbrig's (brig_audit_reader_*, brig_audit_verify); this
 * file opens the stream, follows it and prints. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static const char log_usage[] =
        "usage: brig log FILE|NAME [--follow] [--only KINDS] [--denied] [--json] [--summary] [--no-color]\n"
        "       brig log verify FILE [--sha256 HEX]\n"
        "\n"
        "  FILE|NAME       an audit stream (--audit FILE), or a persistent sandbox's (brig create --audit)\n"
        "  --follow        keep reading as the stream grows, until its end event\n"
        "  --only KINDS    show only these kinds: start,exec,net,syscall,files,limit,approval,end\n"
        "  --denied        show only what was refused\n"
        "  --json          the events shown as the stream has them (JSON lines)\n"
        "  --summary       only the summary line\n"
        "  --no-color      no colours on a terminal\n"
        "  verify          check the stream's hash chain: where a line was altered, removed, reordered\n"
        "  --sha256 HEX    also hold the whole stream to this hash (the run report's audit.sha256)\n";

/* The stream: a file of the caller's, or the audit stream of a sandbox.
 * -1 once the reason is on stderr. */
static int open_stream(const char *cmd, const char *what)
{
        int fd = open(what, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
                return fd;
        _cleanup_free_ char *safe = text_escaped(what, false);
        if (strchr(what, '/') || errno != ENOENT) {
                cli_say("brig %s: %s: %s\n", cmd, safe ? safe : "?", strerror(errno));
                return -1;
        }
        brig_error *err = NULL;
        fd = brig_sandbox_audit_fd_named(what, &err);  /* running or stopped */
        if (fd >= 0)
                return fd;
        cli_say("brig %s: %s is no file here, and as a sandbox: %s\n", cmd, safe ? safe : "?",
                err && err->msg ? err->msg : "?");
        brig_error_free(&err);
        return -1;
}

static int read_all(int fd, char **buf, size_t *len)
{
        size_t cap = 65536;
        *len = 0;
        *buf = malloc(cap);
        while (*buf) {
                if (*len == cap) {
                        char *grown = realloc(*buf, cap *= 2);
                        if (!grown)
                                break;
                        *buf = grown;
                }
                ssize_t n = read(fd, *buf + *len, cap - *len);
                if (n == 0)
                        return 0;
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0)
                        *len += (size_t)n;
        }
        free(*buf);
        *buf = NULL;
        return -ENOMEM;
}

static int cmd_verify(int argc, char **argv)
{
        static const struct option opts[] = { { "sha256", required_argument, NULL, 's' },
                                              { "help", no_argument, NULL, 'h' }, { 0 } };
        const char *want = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (c == 's')
                        want = optarg;
                else if (c == 'h') {
                        fputs(log_usage, stdout);
                        return 0;
                } else {
                        fputs(log_usage, stderr);
                        return BRIG_EXIT_SETUP;
                }
        }
        if (optind + 1 != argc) {
                cli_say("brig log verify: name one file\n%s", log_usage);
                return BRIG_EXIT_SETUP;
        }
        if (want && (strlen(want) != 64 || want[strspn(want, "0123456789abcdef")])) {
                cli_say("brig log verify: --sha256: '%s' is not a SHA-256 in lower-case hex (the report's "
                        "audit.sha256)\n", want);
                return BRIG_EXIT_SETUP;
        }
        const char *file = argv[optind];
        int fd = open_stream("log verify", file);
        if (fd < 0)
                return BRIG_EXIT_SETUP;
        char *buf = NULL;
        size_t len = 0;
        int r = read_all(fd, &buf, &len);
        close(fd);
        if (r < 0) {
                cli_say("brig log verify: %s: %s\n", file, strerror(-r));
                return BRIG_EXIT_SETUP;
        }
        brig_audit_verdict v = { .size = sizeof v };
        r = brig_audit_verify(buf, len, &v);
        free(buf);
        if (r == -EBADMSG) {
                _cleanup_free_ char *safe = text_escaped(v.what, false);
                cli_say("brig log verify: %s:%llu: %s\n", file, (unsigned long long)v.bad_line,
                        safe ? safe : "(out of memory)");
                return 1;
        }
        if (r < 0) {
                cli_say("brig log verify: %s: %s\n", file, strerror(-r));
                return BRIG_EXIT_SETUP;
        }
        if (want && strcmp(want, v.sha256) != 0) {
                cli_say("brig log verify: %s:%llu: the chain holds, but the stream's SHA-256 is %s where "
                        "--sha256 says %s: its end event (line %llu) was altered, or this is another run's "
                        "stream\n", file, (unsigned long long)v.lines, v.sha256, want,
                        (unsigned long long)v.lines);
                return 1;
        }
        printf("%s: intact: %llu lines in %llu stream%s, hash chains and end events agree; the last stream's "
               "sha256 %s%s\n", file, (unsigned long long)v.lines, (unsigned long long)v.streams,
               v.streams == 1 ? "" : "s", v.sha256, want ? " (as --sha256 says)" : "");
        return 0;
}

struct follow {
        brig_audit_reader *r;
        bool json, summary_only;
        bool ended;
        int bad;
};

static void one_line(struct follow *fw, const char *line, size_t n)
{
        char *text = NULL;
        int r = brig_audit_reader_line(fw->r, line, n, &text);
        if (r == -EBADMSG) {
                fw->bad++;
        } else if (text && !fw->summary_only) {
                if (fw->json)
                        fwrite(line, 1, n, stdout), fputc('\n', stdout);
                else
                        puts(text);
        }
        /* the end event: --follow stops there */
        if (r == 0 && memmem(line, n, "\"event\":\"end\"", 13))
                fw->ended = true;
        free(text);
}

/* Lines of buf[0..*len): each whole one read, the rest moved to the front. */
static void take_lines(struct follow *fw, char *buf, size_t *len)
{
        size_t off = 0;
        for (;;) {
                char *nl = memchr(buf + off, '\n', *len - off);
                if (!nl)
                        break;
                one_line(fw, buf + off, (size_t)(nl - (buf + off)));
                off = (size_t)(nl - buf) + 1;
        }
        memmove(buf, buf + off, *len - off);
        *len -= off;
}

int cmd_log(int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "verify") == 0)
                return cmd_verify(argc - 1, argv + 1);
        static const struct option opts[] = {
                { "follow", no_argument, NULL, 'f' }, { "only", required_argument, NULL, 'o' },
                { "denied", no_argument, NULL, 'd' }, { "json", no_argument, NULL, 'j' },
                { "summary", no_argument, NULL, 's' }, { "no-color", no_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' }, { 0 },
        };
        bool follow = false, colour = isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
        const char *only = NULL;
        unsigned flags = 0;
        struct follow fw = { 0 };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
                switch (c) {
                case 'f': follow = true; break;
                case 'o': only = optarg; break;
                case 'd': flags |= BRIG_AUDIT_DENIED; break;
                case 'j': fw.json = true; break;
                case 's': fw.summary_only = true; break;
                case 'n': colour = false; break;
                case 'h': fputs(log_usage, stdout); return 0;
                default: fputs(log_usage, stderr); return BRIG_EXIT_SETUP;
                }
        }
        if (optind + 1 != argc) {
                cli_say("brig log: name one audit stream (a file or a sandbox)\n%s", log_usage);
                return BRIG_EXIT_SETUP;
        }
        if (colour && !fw.json)
                flags |= BRIG_AUDIT_COLOUR;
        brig_error *err = NULL;
        if (brig_audit_reader_new(flags, only, &fw.r, &err) < 0)
                return cli_fail(err);
        int fd = open_stream("log", argv[optind]);
        if (fd < 0) {
                brig_audit_reader_free(fw.r);
                return BRIG_EXIT_SETUP;
        }
        /* --follow: woken when the file grows (inotify through the fd's
         * link, so a sandbox's stream works the same), else at EOF stop */
        int ino = -1;
        if (follow) {
                char link[64];
                snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
                ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                if (ino >= 0 && inotify_add_watch(ino, link, IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF) < 0) {
                        close(ino);
                        ino = -1;
                }
        }
        size_t cap = 1 << 20, len = 0;
        char *buf = malloc(cap);
        int rc = 0;
        while (buf) {
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        cli_say("brig log: %s: %s\n", argv[optind], strerror(errno));
                        rc = BRIG_EXIT_SETUP;
                        break;
                }
                if (n > 0) {
                        len += (size_t)n;
                        take_lines(&fw, buf, &len);
                        if (len == cap) {  /* one line longer than the buffer: not brig's */
                                one_line(&fw, buf, len);
                                len = 0;
                        }
                        fflush(stdout);
                        continue;
                }
                if (!follow || fw.ended)
                        break;
                struct pollfd p = { .fd = ino, .events = POLLIN };
                /* without inotify: look again every half second */
                if (poll(&p, ino >= 0 ? 1 : 0, ino >= 0 ? -1 : 500) > 0) {
                        char ev[4096];
                        while (read(ino, ev, sizeof ev) > 0) {
                        }
                }
        }
        if (len)
                one_line(&fw, buf, len);  /* a last line without its newline */
        free(buf);
        if (ino >= 0)
                close(ino);
        close(fd);
        if (!fw.json) {
                char *s = brig_audit_reader_summary(fw.r);
                if (s)
                        printf("%s%s\n", fw.summary_only ? "" : "summary: ", s);
                free(s);
        }
        if (fw.bad)
                cli_say("brig log: %s: %d line%s not an audit event (altered? brig log verify %s)\n",
                        argv[optind], fw.bad, fw.bad == 1 ? " is" : "s are", argv[optind]);
        brig_audit_reader_free(fw.r);
        return rc;
}
