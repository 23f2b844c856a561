/* main.c — brig serve: options, the listening sockets, the daemons, and
 * the end (SIGTERM drains: no new requests, those in flight finish,
 * sandboxes stay; --remove-on-exit removes those this server created). */
#define _GNU_SOURCE
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

struct serve_config serve_cfg;
atomic_bool serve_draining;
extern atomic_uint serve_inflight;
struct MHD_Daemon *http_start(int listen_fd, bool ipv6);

static const char usage[] =
        "usage: brig serve [options]\n"
        "\n"
        "The sandbox API over HTTP/1.1 + JSON (docs/serve.md, docs/api/openapi.json).\n"
        "\n"
        "  --socket PATH            the unix socket (default $XDG_RUNTIME_DIR/brig-serve/serve.sock,\n"
        "                           root: /run/brig-serve/serve.sock)\n"
        "  --socket-mode MODE       its permission bits (default 0600; 0666 lets every user of a\n"
        "                           root server connect: each sees only its own sandboxes)\n"
        "  --state DIR              the server's own directory: who owns which sandbox, the workspaces\n"
        "                           it made (default: the default socket's directory); a restarted\n"
        "                           server given the same one knows its sandboxes' owners\n"
        "  --listen ADDR:PORT       also TCP, on a loopback address only (127.0.0.1:8080, [::1]:8080);\n"
        "                           needs --token-file\n"
        "  --token-file FILE        the bearer token TCP requests must carry (a file only you can read)\n"
        "  --policy FILE            applied to every sandbox before the request's own policy (repeatable)\n"
        "  --max-sandboxes N        sandboxes per user (default 16)\n"
        "  --max-execs N            commands running at once (default 64)\n"
        "  --max-body SIZE          the largest request body (default 64M)\n"
        "  --max-output SIZE        output kept per command (default 16M; past it: counted, not kept)\n"
        "  --idle-timeout DURATION  stop a sandbox no request touched for this long (default: never)\n"
        "  --client-timeout DURATION  drop a connection idle this long (default 30s)\n"
        "  --remove-on-exit         remove the sandboxes this server created when it ends\n";

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("brig serve: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return BRIG_EXIT_SETUP;
}

static int parse_count(const char *flag, const char *s, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (!*s || *end || errno || v == 0 || v > 100000 || s[0] == '-')
                return fail("%s '%s': a number from 1 to 100000", flag, s);
        *out = (unsigned)v;
        return 0;
}

static int parse_bytes(const char *flag, const char *s, uint64_t *out)
{
        brig_error *e = NULL;
        if (brig_parse_size(s, out, &e) < 0 || *out == 0) {
                int r = fail("%s '%s': %s", flag, s, e && e->msg ? e->msg : "a size above 0 (512K, 64M, 1G)");
                brig_error_free(&e);
                return r;
        }
        return 0;
}

static int parse_ms(const char *flag, const char *s, uint64_t *out)
{
        brig_error *e = NULL;
        if (brig_parse_duration(s, out, &e) < 0 || *out == 0) {
                int r = fail("%s '%s': %s", flag, s, e && e->msg ? e->msg : "a duration above 0 (90s, 10m)");
                brig_error_free(&e);
                return r;
        }
        return 0;
}

/* The server's own directory: made here, or one of ours that exists. A
 * directory someone else made in /tmp is refused, never used. */
static int own_dir(const char *path, mode_t mode)
{
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return fail("cannot make %s: %s", path, strerror(errno));
        struct stat st;
        if (lstat(path, &st) < 0)
                return fail("%s: %s", path, strerror(errno));
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
                return fail("%s is not a directory of uid %u that only it may write: remove it, or give --socket",
                            path, geteuid());
        return 0;
}

static int setup_dirs(const char *state)
{
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        int n;
        if (state)
                n = snprintf(serve_cfg.dir, sizeof serve_cfg.dir, "%s", state);
        else if (geteuid() == 0)
                n = snprintf(serve_cfg.dir, sizeof serve_cfg.dir, "/run/brig-serve");
        else if (xdg && xdg[0] == '/')
                n = snprintf(serve_cfg.dir, sizeof serve_cfg.dir, "%s/brig-serve", xdg);
        else
                n = snprintf(serve_cfg.dir, sizeof serve_cfg.dir, "/tmp/brig-serve-%u", geteuid());
        if (n < 0 || (size_t)n >= sizeof serve_cfg.dir - 64)
                return fail("the server's directory: path too long");
        /* 0711: a socket inside may be reached by others (--socket-mode), the names are not listed */
        if (own_dir(serve_cfg.dir, 0711) || chmod(serve_cfg.dir, 0711) < 0)
                return BRIG_EXIT_SETUP;
        char sub[PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/owners", serve_cfg.dir);
        if (own_dir(sub, 0700))
                return BRIG_EXIT_SETUP;
        snprintf(sub, sizeof sub, "%s/workspaces", serve_cfg.dir);
        return own_dir(sub, 0700);
}

static int unix_listen(const char *path, mode_t mode)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof sa.sun_path)
                return fail("--socket %s: longer than %zu bytes", path, sizeof sa.sun_path - 1), -1;
        strcpy(sa.sun_path, path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return fail("socket: %s", strerror(errno)), -1;
        struct stat st;
        if (lstat(path, &st) == 0) {
                /* a stale socket of ours is replaced; a live server is not */
                if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid()) {
                        close(fd);
                        return fail("--socket %s exists and is not a socket of uid %u", path, geteuid()), -1;
                }
                if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
                        close(fd);
                        return fail("another brig serve listens on %s (stop it, or give --socket)", path), -1;
                }
                unlink(path);
        }
        /* born with the final mode: no moment where others could connect */
        mode_t old = umask(0777 & ~mode);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (r < 0 || chmod(path, mode) < 0 || listen(fd, 128) < 0) {
                int e = errno;
                close(fd);
                return fail("--socket %s: %s", path, strerror(e)), -1;
        }
        return fd;
}

/* Loopback only: 127.0.0.0/8 or ::1, spelled as an address. */
static int tcp_listen(const char *spec, bool *ipv6)
{
        char host[64];
        const char *port;
        if (spec[0] == '[') {
                const char *close = strchr(spec, ']');
                if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host)
                        return fail("--listen %s: [ADDR]:PORT", spec), -1;
                memcpy(host, spec + 1, (size_t)(close - spec - 1));
                host[close - spec - 1] = '\0';
                port = close + 2;
        } else {
                const char *colon = strrchr(spec, ':');
                if (!colon || (size_t)(colon - spec) >= sizeof host)
                        return fail("--listen %s: ADDR:PORT (127.0.0.1:8080)", spec), -1;
                memcpy(host, spec, (size_t)(colon - spec));
                host[colon - spec] = '\0';
                port = colon + 1;
        }
        char *end;
        unsigned long p = strtoul(port, &end, 10);
        if (!*port || *end || p == 0 || p > 65535)
                return fail("--listen %s: port '%s' is not 1-65535", spec, port), -1;
        struct sockaddr_storage ss = { 0 };
        socklen_t len;
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
                if ((ntohl(s4->sin_addr.s_addr) >> 24) != 127)
                        return fail("--listen %s: only a loopback address (127.0.0.1, [::1]); TCP beyond this host "
                                    "is not served", spec), -1;
                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t)p);
                len = sizeof *s4;
                *ipv6 = false;
        } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
                if (!IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
                        return fail("--listen %s: only a loopback address (127.0.0.1, [::1]); TCP beyond this host "
                                    "is not served", spec), -1;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)p);
                len = sizeof *s6;
                *ipv6 = true;
        } else {
                return fail("--listen %s: '%s' is not an address (a name could resolve beyond loopback)", spec, host),
                       -1;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
            bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
                int e = errno;
                if (fd >= 0)
                        close(fd);
                return fail("--listen %s: %s", spec, strerror(e)), -1;
        }
        return fd;
}

static int read_token(const char *path)
{
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return fail("--token-file %s: %s", path, strerror(errno));
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) || st.st_uid != geteuid()) {
                close(fd);
                return fail("--token-file %s: a regular file of uid %u that group and others cannot read "
                            "(chmod 600)", path, geteuid());
        }
        ssize_t n = read(fd, serve_cfg.token, sizeof serve_cfg.token - 1);
        close(fd);
        if (n < 0)
                return fail("--token-file %s: %s", path, strerror(errno));
        while (n > 0 && (serve_cfg.token[n - 1] == '\n' || serve_cfg.token[n - 1] == '\r'))
                n--;
        serve_cfg.token[n] = '\0';
        serve_cfg.token_len = (size_t)n;
        if (n < 16 || memchr(serve_cfg.token, '\n', (size_t)n) || (size_t)n >= sizeof serve_cfg.token - 2)
                return fail("--token-file %s: the token must be one line of 16 to 500 bytes", path);
        return 0;
}

static int parse_args(int argc, char **argv)
{
        enum { O_SOCKET = 256, O_SOCKET_MODE, O_STATE, O_LISTEN, O_TOKEN, O_POLICY, O_MAX_SB, O_MAX_EXECS, O_MAX_BODY,
               O_MAX_OUTPUT, O_IDLE, O_CLIENT_TIMEOUT, O_REMOVE, O_HELP };
        static const struct option opts[] = {
                { "socket", required_argument, NULL, O_SOCKET },
                { "socket-mode", required_argument, NULL, O_SOCKET_MODE },
                { "state", required_argument, NULL, O_STATE },
                { "listen", required_argument, NULL, O_LISTEN },
                { "token-file", required_argument, NULL, O_TOKEN },
                { "policy", required_argument, NULL, O_POLICY },
                { "max-sandboxes", required_argument, NULL, O_MAX_SB },
                { "max-execs", required_argument, NULL, O_MAX_EXECS },
                { "max-body", required_argument, NULL, O_MAX_BODY },
                { "max-output", required_argument, NULL, O_MAX_OUTPUT },
                { "idle-timeout", required_argument, NULL, O_IDLE },
                { "client-timeout", required_argument, NULL, O_CLIENT_TIMEOUT },
                { "remove-on-exit", no_argument, NULL, O_REMOVE },
                { "help", no_argument, NULL, O_HELP },
                { NULL, 0, NULL, 0 },
        };
        serve_cfg.socket_mode = 0600;
        serve_cfg.max_sandboxes = 16;
        serve_cfg.max_execs = 64;
        serve_cfg.max_body = 64ull << 20;
        serve_cfg.max_output = 16ull << 20;
        serve_cfg.client_timeout_s = 30;
        opterr = 0;
        optind = 1;
        int c, r = 0;
        uint64_t ms;
        while (r == 0 && (c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
                switch (c) {
                case O_SOCKET:
                        if (optarg[0] != '/')
                                return fail("--socket %s: an absolute path", optarg);
                        serve_cfg.socket_path = optarg;
                        break;
                case O_STATE:
                        if (optarg[0] != '/')
                                return fail("--state %s: an absolute path", optarg);
                        serve_cfg.state_dir = optarg;
                        break;
                case O_SOCKET_MODE: {
                        int m = mode_parse(optarg);
                        if (m < 0 || (m & ~0777))
                                return fail("--socket-mode %s: octal permission bits (0600, 0660, 0666)", optarg);
                        serve_cfg.socket_mode = (mode_t)m;
                        break;
                }
                case O_LISTEN:
                        serve_cfg.listen = optarg;
                        break;
                case O_TOKEN:
                        serve_cfg.token_file = optarg;
                        break;
                case O_POLICY: {
                        char **v = realloc(serve_cfg.policy_files, (serve_cfg.n_policy_files + 1) * sizeof *v);
                        if (!v)
                                return fail("out of memory");
                        serve_cfg.policy_files = v;
                        v[serve_cfg.n_policy_files++] = optarg;
                        break;
                }
                case O_MAX_SB:
                        r = parse_count("--max-sandboxes", optarg, &serve_cfg.max_sandboxes);
                        break;
                case O_MAX_EXECS:
                        r = parse_count("--max-execs", optarg, &serve_cfg.max_execs);
                        break;
                case O_MAX_BODY:
                        r = parse_bytes("--max-body", optarg, &serve_cfg.max_body);
                        break;
                case O_MAX_OUTPUT:
                        r = parse_bytes("--max-output", optarg, &serve_cfg.max_output);
                        break;
                case O_IDLE:
                        r = parse_ms("--idle-timeout", optarg, &serve_cfg.idle_timeout_ms);
                        break;
                case O_CLIENT_TIMEOUT:
                        if ((r = parse_ms("--client-timeout", optarg, &ms)) == 0)
                                serve_cfg.client_timeout_s = ms < 1000 ? 1 : (unsigned)(ms / 1000);
                        break;
                case O_REMOVE:
                        serve_cfg.remove_on_exit = true;
                        break;
                case O_HELP:
                case 'h':
                        fputs(usage, stdout);
                        exit(0);
                default:
                        return fail("unknown option '%s'\n%s", argv[optind - 1], usage);
                }
        }
        if (r)
                return r;
        if (optind < argc)
                return fail("unexpected argument '%s'\n%s", argv[optind], usage);
        if (serve_cfg.listen && !serve_cfg.token_file)
                return fail("--listen %s needs --token-file FILE: TCP is never served without a token",
                            serve_cfg.listen);
        if (serve_cfg.token_file && !serve_cfg.listen)
                return fail("--token-file is for --listen (the unix socket tells callers apart by their uid)");
        /* the operator's policy files: wrong ones are refused now, not at the first create */
        for (size_t i = 0; i < serve_cfg.n_policy_files; i++) {
                brig_policy *p = brig_policy_new();
                brig_error *e = NULL;
                int rc = p ? brig_policy_load_file(p, serve_cfg.policy_files[i], &e) : -ENOMEM;
                brig_policy_free(p);
                if (rc < 0) {
                        r = fail("--policy %s: %s", serve_cfg.policy_files[i], e && e->msg ? e->msg : strerror(-rc));
                        brig_error_free(&e);
                        return r;
                }
        }
        return 0;
}

static unsigned open_connections(struct MHD_Daemon *ud, struct MHD_Daemon *td)
{
        const union MHD_DaemonInfo *ui = MHD_get_daemon_info(ud, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        const union MHD_DaemonInfo *ti = td ? MHD_get_daemon_info(td, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
        return (ui ? ui->num_connections : 0) + (ti ? ti->num_connections : 0);
}

static int cmd_serve(int argc, char **argv)
{
        int r = parse_args(argc, argv);
        if (r)
                return r;
        serve_cfg.uid = geteuid();
        if (setup_dirs(serve_cfg.state_dir))
                return BRIG_EXIT_SETUP;
        char default_sock[PATH_MAX + 32];
        snprintf(default_sock, sizeof default_sock, "%s/serve.sock", serve_cfg.dir);
        const char *sock_path = serve_cfg.socket_path ? serve_cfg.socket_path : default_sock;
        /* the address first: a name or 0.0.0.0 is refused as such, whatever the token */
        bool v6 = false;
        int tfd = serve_cfg.listen ? tcp_listen(serve_cfg.listen, &v6) : -1;
        if (serve_cfg.listen && (tfd < 0 || read_token(serve_cfg.token_file))) {
                if (tfd >= 0)
                        close(tfd);
                return BRIG_EXIT_SETUP;
        }
        int ufd = unix_listen(sock_path, serve_cfg.socket_mode);
        if (ufd < 0) {
                if (tfd >= 0)
                        close(tfd);
                return BRIG_EXIT_SETUP;
        }
        /* SIGTERM and SIGINT are taken by this thread alone (sigtimedwait):
         * blocked before any thread starts, so every thread inherits it */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        struct MHD_Daemon *ud = http_start(ufd, false), *td = tfd >= 0 ? http_start(tfd, v6) : NULL;
        if (!ud || (tfd >= 0 && !td)) {
                fail("the HTTP server did not start (libmicrohttpd)");
                if (ud)
                        MHD_stop_daemon(ud);
                close(ufd);
                if (tfd >= 0)
                        close(tfd);
                unlink(sock_path);
                return BRIG_EXIT_SETUP;
        }
        fprintf(stderr, "brig serve: listening on %s%s%s\n", sock_path, serve_cfg.listen ? " and " : "",
                serve_cfg.listen ? serve_cfg.listen : "");
        int sig;
        for (;;) {
                struct timespec ts = { .tv_sec = 1 };
                sig = sigtimedwait(&set, NULL, &ts);
                if (sig == SIGTERM || sig == SIGINT)
                        break;
                idle_sweep();
        }
        /* drain: no new connection; what is in flight finishes (streams
         * that follow end with an "unavailable" event) */
        serve_draining = true;
        unsigned conns = open_connections(ud, td);
        fprintf(stderr, "brig serve: %s: finishing what %u connection%s asked\n", strsignal(sig), conns,
                conns == 1 ? "" : "s");
        int q = MHD_quiesce_daemon(ud);
        if (q >= 0)
                close(q);
        unlink(sock_path);
        if (td && (q = MHD_quiesce_daemon(td)) >= 0)
                close(q);
        /* a connection accepted whose request is not parsed yet is in
         * flight too: it has a second to become a request (a keep-alive
         * connection with nothing more to ask is closed after it) */
        for (int i = 0; i < 200; i++) {
                if (!serve_inflight && (!open_connections(ud, td) || i >= 20))
                        break;
                struct timespec ts = { .tv_nsec = 50 * 1000000L };
                nanosleep(&ts, NULL);
        }
        MHD_stop_daemon(ud);
        if (td)
                MHD_stop_daemon(td);
        exec_close_all();
        if (serve_cfg.remove_on_exit)
                serve_created_remove_all();
        free(serve_cfg.policy_files);
        return 0;
}

/* brig-serve: `brig serve` execs it (src/cli/main.c), so libmicrohttpd
 * and the GnuTLS it brings load only here. argv[0] is the program. */
int main(int argc, char **argv)
{
        /* as the CLI does for its own writes: a peer gone is EPIPE, not
         * death (the CLI's exec hands this mask on; set again when started
         * by hand) */
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigprocmask(SIG_BLOCK, &pipe_set, NULL);
        return cmd_serve(argc, argv);
}
