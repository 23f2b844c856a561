/* brig.c — the brig command's front end: the first process of every brig
 * command. It runs the common `brig exec NAME -- COMMAND` itself and hands
 * everything else to brig's engine (brig-engine: the CLI with libbrig,
 * src/cli/), by execve, with the command line and environment it was
 * given.
 *
 * Why a program of its own: `brig exec` is what an agent runs for each
 * tool call in a live sandbox, and most of its time is two program
 * starts, brig's and the command's. glibc's start asks the CPU for its
 * features and caches with about 80 cpuid instructions, which a virtual
 * machine traps to its hypervisor: about half a millisecond of a 0.7 ms
 * /bin/true on the machine brig is measured on (docs/benchmarks.md). This
 * program is linked statically against musl where the build has it
 * (meson.build; against the build's own C library otherwise, as in the
 * sanitized build) and needs no more than the few libc-only files it
 * shares with libbrig; the engine's start is paid by the commands that
 * need it, with one execve more.
 *
 * What it runs itself: `brig exec NAME [--] COMMAND [ARG...]` and `brig
 * run --pool NAME [--] COMMAND [ARG...]` (a ready member of a named pool,
 * claimed as persist/pool_claim.c does for the engine, and its one run),
 * with no option but --cwd and --env, while none of stdin, stdout and
 * stderr is a terminal (a terminal means a pty or a guarded relay: the
 * engine's work). It finds
 * the sandbox through the same checks as the engine (persist/state_root.c),
 * sends the same request (persist/control_msg.c), forwards the same
 * signals, and exits with the command's status when the command exited
 * and the status has nothing to say. Any other end (a signal, a timeout,
 * refusals, an error, the sandbox gone) goes to the engine whole: the
 * supervisor's last message on a socket, which the engine prints as its
 * own client would (brig_sandbox_exec_outcome), so what the user reads
 * has one implementation. Before the request is sent, anything else (no
 * such sandbox, a check that fails) hands the whole command line to the
 * engine, which says what is wrong; once it is sent, the command is
 * never sent again. */
#define _GNU_SOURCE
#include "core/caller_context.h"
#include "core/program.h"
#include "persist/control.h"
#include "persist/pool_claim.h"
#include "persist/state_root.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>


#define ENGINE "brig-engine"

extern char **environ;

/* The signals brig exec forwards to the command (persist/exec.c). */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };

/* One line on stderr in one write, as the engine's cli_say: musl's printf
 * writes an unbuffered stream 80 bytes at a time. A longer line is cut. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
        char line[2048];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof line)
                memcpy(line + sizeof line - 5, "...\n", 5);
        if (n >= 0)
                fputs(line, stderr);
}

/* brig-engine, opened as libbrig opens brig-supervisor
 * (engine/supervisor_exec.c): beside this program (a build tree), where
 * the install puts it relative to this program (libexec/brig), or where
 * the build was configured to install it; never through PATH, and run
 * through the descriptor that was checked. */
static int engine_open(brig_error **err)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        char *slash = n > 0 ? memrchr(self, '/', (size_t)n) : NULL;
        char rel[PATH_MAX + sizeof BRIG_LIBEXEC_FROM_BINDIR];
        const char *dirs[3] = { NULL, NULL, BRIG_LIBEXECDIR };
        if (slash) {
                *slash = '\0';
                dirs[0] = self[0] ? self : "/";
                snprintf(rel, sizeof rel, "%s/%s", self, BRIG_LIBEXEC_FROM_BINDIR);
                dirs[1] = rel;
        }
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                if (!dirs[i])
                        continue;
                int fd = program_open_in(dirs[i], ENGINE, err);
                if (fd != -ENOENT)
                        return fd;
        }
        return brig_err_code(err, BRIG_EXIT_SETUP, ENOENT, "%s not found beside brig ('%s'), in '%s' nor in '%s'; "
                             "is brig installed completely?", ENGINE, dirs[0] ? dirs[0] : "?",
                             dirs[1] ? dirs[1] : "?", BRIG_LIBEXECDIR);
}

/* BRIG_EXEC_OUTCOME_ENV=..., which only we may set (run_engine) */
static bool is_outcome_var(const char *entry)
{
        return strncmp(entry, BRIG_EXEC_OUTCOME_ENV "=", sizeof BRIG_EXEC_OUTCOME_ENV) == 0;
}

/* The engine (its descriptor, or -1: opened here), with our command line
 * and environment; with `outcome` >= 0 it prints the end of the exec we
 * began (the socket holding it). Never returns. */
static _Noreturn void run_engine(int engine, char **argv, int outcome)
{
        brig_error *err = NULL;
        int fd = engine >= 0 ? engine : engine_open(&err);
        if (fd >= 0) {
                /* the variable only ever names our socket: one the caller
                 * set is dropped, never passed on. Our environment as it
                 * is when there is nothing to drop or add (a cold run's
                 * hop makes no copy). */
                size_t n = 0;
                bool named_by_caller = false;
                for (; environ[n]; n++)
                        named_by_caller |= is_outcome_var(environ[n]);
                char **env = environ;
                char named[64];
                if (named_by_caller || outcome >= 0) {
                        env = calloc(n + 2, sizeof *env);
                        size_t k = 0;
                        for (size_t i = 0; env && i < n; i++)
                                if (!is_outcome_var(environ[i]))
                                        env[k++] = environ[i];
                        if (env && outcome >= 0) {
                                snprintf(named, sizeof named, "%s=%d", BRIG_EXEC_OUTCOME_ENV, outcome);
                                env[k++] = named;
                        }
                }
                if (env)
                        fexecve(fd, argv, env);
                brig_err_code(&err, BRIG_EXIT_SETUP, env ? errno : ENOMEM, "cannot start %s", ENGINE);
        }
        say("brig: %s\n", err && err->msg ? err->msg : "cannot start " ENGINE);
        _exit(BRIG_EXIT_SETUP);
}

/* One of the two options a plain exec may carry, as getopt_long reads
 * the engine's (src/cli/sandbox.c): "--cwd DIR" or "--cwd=DIR", the same
 * for --env. *value and *at (the argument it ended on) when it is; any
 * other spelling (an abbreviation, another option) is the engine's. */
static bool plain_option(int argc, char **argv, int *at, const char *opt, const char **value)
{
        size_t n = strlen(opt);
        if (strncmp(argv[*at], opt, n) != 0)
                return false;
        if (argv[*at][n] == '=') {
                *value = argv[*at] + n + 1;
                return true;
        }
        if (argv[*at][n] != '\0' || *at + 1 >= argc)
                return false;
        *value = argv[++*at];
        return true;
}

/* `brig exec NAME [--cwd DIR] [--env NAME=VALUE]... [--] COMMAND...` and
 * `brig run --pool NAME ...` with the same options, as the engine reads
 * them, with no other option, values the engine takes (exec_check_opts)
 * and no terminal: into *o, pointing into argv (o->env allocated), *pool
 * true for the second. Anything else is the engine's to run, or to refuse. */
static bool fast_exec(int argc, char **argv, const char **name, bool *pool, brig_exec_opts *o)
{
        const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        if (argc < 4 || strcmp(base, "brig-oci") == 0)
                return false;
        int at = 3;
        *pool = strcmp(argv[1], "run") == 0;
        if (*pool && strncmp(argv[2], "--pool=", 7) == 0) {
                *name = argv[2] + 7;
        } else if (*pool && strcmp(argv[2], "--pool") == 0) {
                *name = argv[3];
                at = 4;
        } else if (strcmp(argv[1], "exec") == 0) {
                *name = argv[2];
        } else {
                return false;
        }
        if (at >= argc || (*name)[0] == '-' || (*name)[0] == '\0')
                return false;
        const char *policy = getenv("BRIG_POLICY");
        if (*pool && policy && policy[0])
                return false;  /* the engine refuses it (run.c) */
        for (int fd = 0; fd <= 2; fd++)
                if (isatty(fd))
                        return false;
        char **env = calloc((size_t)argc, sizeof *env);
        size_t nenv = 0;
        const char *cwd = NULL, *value;
        bool plain = env != NULL;
        while (plain && at < argc && argv[at][0] == '-') {
                if (strcmp(argv[at], "--") == 0) {
                        at++;
                        break;
                }
                if (plain_option(argc, argv, &at, "--cwd", &value)) {
                        plain = value[0] == '/';
                        cwd = value;
                } else if (plain_option(argc, argv, &at, "--env", &value)) {
                        plain = value[0] != '=' && strchr(value, '=');
                        env[nenv++] = (char *)value;
                } else {
                        plain = false;
                }
                at++;
        }
        if (!plain || at >= argc || argv[at][0] == '\0') {
                free(env);
                return false;
        }
        *o = (brig_exec_opts){ .argv = argv + at, .env = env, .cwd = cwd, .tty = BRIG_TTY_NEVER };
        return true;
}

/* DIR/ctl connected (DIR a sandbox's, in the checked state root); -1 for
 * anything the engine should say instead. */
static int ctl_connect(const char *dir)
{
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        bool fits = (size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/ctl", dir) < sizeof addr.sun_path;
        int fd = fits ? socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0) : -1;
        if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
                close(fd);
                fd = -1;
        }
        return fd;
}

/* The sandbox's control socket, connected after the state root's checks. */
static int sandbox_connect(const char *name)
{
        brig_error *err = NULL;
        char *dir = NULL;
        int r = state_dir(name, false, &dir, &err);
        brig_error_free(&err);
        int fd = r == 0 ? ctl_connect(dir) : -1;
        free(dir);
        return fd;
}

/* A status the engine would print nothing for: the command exited (not
 * a signal, not the timeout), nothing was refused. */
static bool status_says_nothing(const struct ctl_hdr *h, const char *payload, size_t n)
{
        return h->type == CTL_STATUS && h->exit_code != BRIG_EXIT_TIMEOUT && WIFEXITED(h->arg) && h->errnum <= 0 &&
               (n == 0 || payload[0] == '\0');
}

/* A pool member's answer that nothing ran, as the engine's claim reads
 * it (pool.c): it is stopping (ESHUTDOWN), or it holds a workspace that
 * was moved away (ESTALE). */
static bool refused_unrun(const struct ctl_hdr *h)
{
        brig_error *err = NULL;
        int r = h->type == CTL_ERROR ? ctl_error(h, NULL, &err) : 0;
        bool unrun = r == -ESHUTDOWN || r == -ESTALE;
        brig_error_free(&err);
        return unrun;
}

/* The exec's end to the engine, which prints it: the supervisor's last
 * message (n bytes; 0: the connection ended; -errno: it broke, said as
 * the engine's client says it) as the one message on a socket of its
 * own. A socket, not a file: a caller's RLIMIT_FSIZE bounds a file (a
 * signal's end would kill us with SIGXFSZ), never a socket's buffer. Our
 * signals unblocked first: one that comes now ends us as it would have
 * ended the engine's own client. */
static _Noreturn void hand_over(int engine, char **argv, const sigset_t *saved, const char *name, const char *msg,
                                ssize_t n)
{
        int pair[2];
        int r = socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) < 0 ? -errno : 0;
        if (r == 0 && n > 0) {
                const struct ctl_hdr *h = (const struct ctl_hdr *)msg;
                r = ctl_send(pair[0], h, msg + sizeof *h, (size_t)n - sizeof *h, NULL, 0);
        } else if (r == 0 && n < 0) {
                brig_error *gone = NULL;
                struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_ERROR };
                if (n == -ESHUTDOWN)  /* (exec_in's word for a request never read) */
                        exec_not_taken(&gone, name);
                else
                        exec_gone(&gone, name, (int)-n);
                wire_error_encode(&h.error, gone, NULL);
                brig_error_free(&gone);
                r = ctl_send(pair[0], &h, NULL, 0, NULL, 0);
        }
        if (r < 0) {
                say("brig: exec: keep the command's end for brig's engine: %s\n", strerror(-r));
                _exit(BRIG_EXIT_SETUP);
        }
        close(pair[0]);
        sigprocmask(SIG_SETMASK, saved, NULL);
        run_engine(engine, argv, pair[1]);
}

/* A pool's member claimed for this run (brig run --pool): its pool's
 * directory, its name, and the command line that hands its end to the
 * engine (brig exec MEMBER -- COMMAND: the end is the member's exec's). */
struct claimed {
        const char *dir, *member;
        char **ended_argv;
        char *identity;  /* a plain --pooled run's (pool_identity), compared by the member; NULL: as made */
};

/* Send the command (our stdio with it), forward our signals until its
 * end comes back, and exit with its status or hand the end over. In a
 * claimed member (c), the exec is its one run: as the pool made it, or,
 * with c->identity, if the member's is the same. sock -1: the sandbox
 * `name`'s socket, connected once the request is ready to leave (one
 * wakeup of the supervisor, not one for the connection and another for
 * the request). */
static _Noreturn void exec_in(int engine, int sock, const char *name, brig_exec_opts *o, char **argv,
                              const struct claimed *c)
{
        brig_error *err = NULL;
        size_t len;
        uint32_t flags = c ? CTL_EXEC_LAST | (c->identity ? 0 : CTL_EXEC_AS_MADE) : 0;
        char *req = exec_request_build(o, false, flags, c ? (c->identity ? c->identity : "") : NULL, &len, &err);
        if (c && c->identity)  /* may hold a caller's values: in the request now, and wiped with it */
                explicit_bzero(c->identity, strlen(c->identity));
        free((void *)o->env);
        /* The answer's room is static (only the answer's bytes are ever
         * touched) and the request, once sent, is wiped and left to our
         * exit: nothing is given back to the kernel on the exec's way, where
         * an munmap's TLB shootdown interrupts the other CPU, on which the
         * supervisor serves this very exec (arena.c: musl's malloc did
         * that for each of these blocks). */
        static char buf[CTL_MAX_MSG];
        /* connected now, with the request ready to leave, so the supervisor
         * finds it there when it accepts; before our signals are blocked, as
         * a connect may wait (a full backlog), and a ^C then ends us with
         * nothing sent */
        if (req && sock < 0)
                sock = sandbox_connect(name);
        if (!req || sock < 0) {
                brig_error_free(&err);
                if (req)
                        explicit_bzero(req, len);
                free(req);
                if (sock >= 0)
                        close(sock);
                if (c)
                        pool_claim_drop(c->dir, c->member);
                run_engine(engine, argv, -1);  /* nothing sent: it says why */
        }
        /* blocked before the request leaves, so no signal meant for the
         * command is lost or ends us in between (as exec.c does) */
        sigset_t set, saved;
        sigemptyset(&set);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
                sigaddset(&set, forwarded[i]);
        sigprocmask(SIG_BLOCK, &set, &saved);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        static const int stdio[3] = { 0, 1, 2 };
        const struct ctl_hdr *h = (const struct ctl_hdr *)req;
        if (sfd < 0 || ctl_send(sock, h, req + sizeof *h, len - sizeof *h, stdio, 3) < 0) {
                /* a SOCK_SEQPACKET message goes whole or not at all: the
                 * supervisor has nothing, and the engine starts over */
                if (sfd >= 0)
                        close(sfd);
                close(sock);
                explicit_bzero(req, len);
                free(req);
                sigprocmask(SIG_SETMASK, &saved, NULL);
                if (c)
                        pool_claim_drop(c->dir, c->member);
                run_engine(engine, argv, -1);
        }
        explicit_bzero(req, len);
        char **asked = argv;
        if (c)
                argv = c->ended_argv;  /* from here on, the end is the member's exec's */
        bool spoke = false;  /* anything sent since the request, or answered */
        for (;;) {
                struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0 && errno == EINTR)
                        continue;  /* every signal we forward is blocked: nothing else can be lost */
                if (p[0].revents == 0 && p[1].revents == 0)
                        hand_over(engine, argv, &saved, name, NULL, -errno);  /* poll failed: the exec is lost */
                struct signalfd_siginfo si;
                while (p[1].revents && read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                        struct ctl_hdr s = { .magic = CTL_MAGIC, .type = CTL_SIGNAL, .arg = (int32_t)si.ssi_signo };
                        (void)ctl_send(sock, &s, NULL, 0, NULL, 0);
                        spoke = true;
                }
                if (!p[0].revents)
                        continue;
                int fds[CTL_MAX_FDS], nfds;
                ssize_t n = ctl_recv(sock, buf, CTL_MAX_MSG, fds, &nfds);
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                const struct ctl_hdr *m = (const struct ctl_hdr *)buf;
                if (n > 0 && m->type != CTL_STATUS && m->type != CTL_ERROR) {
                        spoke = true;
                        continue;  /* as the engine's client: not the end */
                }
                /* reset, the request unread (exec_not_taken): nothing ran */
                bool unread = n == -ECONNRESET && !spoke;
                if (unread)
                        n = -ESHUTDOWN;
                if (c && (unread || (n > 0 && refused_unrun(m)))) {
                        /* a member stopping (its daemon just ended): nothing
                         * ran, and the engine takes another, or says why none */
                        close(sock);
                        close(sfd);
                        pool_claim_drop(c->dir, c->member);
                        sigprocmask(SIG_SETMASK, &saved, NULL);
                        run_engine(engine, asked, -1);
                }
                if (n > 0 && status_says_nothing(m, buf + sizeof *m, (size_t)n - sizeof *m)) {
                        exit(WEXITSTATUS(m->arg));
                }
                hand_over(engine, argv, &saved, name, buf, n);
        }
}

/* The first ready member of the pool in dir (key) claimed and its
 * control socket connected (root: the checked state root); -1 when none
 * is ready. */
static int claim_connect(const char *root, const char *dir, const char *key, char *member, size_t n)
{
        while (pool_claim_ready(dir, key, member, n) == 0) {
                _cleanup_free_ char *mdir = brig_strdup_printf("%s/%s", root, member);  /* a valid name: claimed */
                int sock = mdir ? ctl_connect(mdir) : -1;
                if (sock >= 0)
                        return sock;
                pool_claim_drop(dir, member);  /* stopping: its daemon removes it */
        }
        return -1;
}

/* `brig run --pooled [--] COMMAND [ARG...]` and nothing else (no option,
 * no BRIG_POLICY, no terminal): a run whose policy is the engine's
 * defaults alone. The command's argv, or NULL. */
static char **plain_pooled(int argc, char **argv)
{
        /* the engine under that name is the runc command line (fast_exec) */
        const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        if (argc < 4 || strcmp(base, "brig-oci") == 0 || strcmp(argv[1], "run") != 0 ||
            strcmp(argv[2], "--pooled") != 0)
                return NULL;
        int at = strcmp(argv[3], "--") == 0 ? 4 : 3;
        const char *policy = getenv("BRIG_POLICY");
        if (at >= argc || argv[at][0] == '\0' || (at == 3 && argv[3][0] == '-') || (policy && policy[0]))
                return NULL;
        for (int fd = 0; fd <= 2; fd++)
                if (isatty(fd))
                        return NULL;
        return argv + at;
}

/* ROOT/cache/NAME, read whole if it is a file of ours no one else may
 * write, with no second name (a link from where another could write it),
 * in a cache directory of ours alone (state.c's checks); NULL. */
static char *cache_read(const char *root, const char *name)
{
        char path[PATH_MAX];
        struct stat st;
        if ((size_t)snprintf(path, sizeof path, "%s/cache", root) >= sizeof path)
                return NULL;
        _cleanup_close_ int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0 || fstat(dir, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))
                return NULL;
        _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 ||
            (st.st_mode & 022) || st.st_size <= 0 || st.st_size > CTL_MAX_MSG)
                return NULL;
        char *text = malloc((size_t)st.st_size + 1);
        if (!text || read(fd, text, (size_t)st.st_size) != st.st_size) {
                free(text);
                return NULL;
        }
        text[st.st_size] = '\0';
        return text;
}

/* Our umask, read by setting it (one thread, no handler: nothing makes a
 * file in between). */
static mode_t our_umask(void)
{
        mode_t mask = umask(077);
        umask(mask);
        return mask & 0777;
}

/* A plain --pooled run's member: claimed in the pool the engine would
 * have chosen (the policy the engine wrote down for this build of it,
 * the workspace our directory, our context; pool.c's pool_key) and
 * connected, with what the member must find the same to run it
 * (*identity: pool_identity, as pool.c's brig_run_pooled_why sends it).
 * -1 when none: the engine then does it all, and says why not. */
static int plain_member(int engine, char **dir, char *member, size_t n, char **identity)
{
        brig_error *err = NULL;
        _cleanup_free_ char *root = NULL;
        int r = state_root(false, &root, &err);  /* checked: the member's socket is in it too */
        brig_error_free(&err);
        char name[POOL_PLAIN_NAME_LEN];
        _cleanup_free_ char *plain = r == 0 && pool_plain_name(engine, name) == 0 ? cache_read(root, name) : NULL;
        size_t magic = strlen(POOL_PLAIN_MAGIC);
        int with_umask, used;
        unsigned fixed;
        if (!plain || strncmp(plain, POOL_PLAIN_MAGIC "\n", magic + 1) != 0 ||
            sscanf(plain + magic + 1, "umask=%d fixed=%u\n%n", &with_umask, &fixed, &used) != 2)
                return -1;
        const char *json = plain + magic + 1 + used;
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        _cleanup_free_ char *ws = cwd ? path_normalize(cwd) : NULL;
        struct caller_context_spec spec = { .umask = with_umask ? (int)our_umask() : -1, .fixed_rlimits = fixed };
        char *context = ws ? caller_context_text(&spec) : NULL;
        char sources[CALLER_WORKSPACE_IDENTITY_LEN] = "";  /* plan_sources_identity's: a plain policy binds nothing */
        if (ws)
                caller_workspace_identity(ws, sources, sizeof sources);
        char key[POOL_KEY_LEN + 1];
        if (context)
                pool_key_text(json, ws, context, key);
        *identity = context ? pool_identity(json, ws, sources, context) : NULL;
        if (context)
                explicit_bzero(context, strlen(context));
        free(context);
        *dir = *identity ? brig_strdup_printf("%s/pools/%s", root, key) : NULL;
        return *dir ? claim_connect(root, *dir, key, member, n) : -1;
}

/* brig run --pool NAME: a ready member of the pool of that name, claimed
 * and connected; -1 (nothing claimed) for the engine to do it (none
 * ready yet: it waits; no such pool: it says so). */
static int member_connect(const char *pool, char **dir, char *member, size_t n)
{
        char key[POOL_KEY_LEN + 1];
        brig_error *err = NULL;
        _cleanup_free_ char *root = NULL;  /* checked once: the member's socket is in it too */
        int r = pool_named(pool, dir, key, &root, &err);
        brig_error_free(&err);
        return r == 0 ? claim_connect(root, *dir, key, member, n) : -1;
}

/* The run in the member claimed and connected on sock (pool dir), its
 * end said as an exec's into it (`brig exec MEMBER -- COMMAND`); returns
 * only when it was never sent, the claim dropped. */
static void run_in_member(int engine, int sock, const char *dir, const char *member, brig_exec_opts *o,
                          char **argv, char *identity)
{
        size_t n = 0;
        while (o->argv[n])
                n++;
        char **ended = calloc(n + 5, sizeof *ended);
        if (ended) {
                ended[0] = argv[0];
                ended[1] = "exec";
                ended[2] = (char *)member;
                ended[3] = "--";
                memcpy(ended + 4, o->argv, n * sizeof *ended);
                struct claimed c = { .dir = dir, .member = member, .ended_argv = ended, .identity = identity };
                exec_in(engine, sock, member, o, argv, &c);
        }
        close(sock);
        pool_claim_drop(dir, member);
}

int main(int argc, char **argv)
{
        if (program_start() < 0)  /* as the engine does first */
                return BRIG_EXIT_SETUP;
        static char *unnamed[] = { "brig", NULL };
        if (argc < 1)  /* execve with no argv at all: the engine reads argv[0] */
                argv = unnamed;
        const char *name;
        bool pool;
        brig_exec_opts o;
        int engine = -1;
        if (argc > 0 && fast_exec(argc, argv, &name, &pool, &o)) {
                /* the engine found first: an exec we could not end is
                 * never sent (a caller that retries a setup failure would
                 * run the command twice) */
                brig_error *err = NULL;
                engine = engine_open(&err);
                brig_error_free(&err);
                if (engine >= 0 && pool) {
                        char *dir = NULL, member[256];
                        int sock = member_connect(name, &dir, member, sizeof member);
                        if (sock >= 0)
                                run_in_member(engine, sock, dir, member, &o, argv, NULL);
                        free(dir);
                } else if (engine >= 0) {
                        exec_in(engine, -1, name, &o, argv, NULL);  /* connects when its request is ready */
                }
                free((void *)o.env);
        }
        char **command = argc > 0 ? plain_pooled(argc, argv) : NULL;
        if (command) {
                brig_error *err = NULL;
                engine = engine >= 0 ? engine : engine_open(&err);
                brig_error_free(&err);
                char *dir = NULL, member[256], *identity = NULL;
                int sock = engine >= 0 ? plain_member(engine, &dir, member, sizeof member, &identity) : -1;
                brig_exec_opts plain = { .argv = command, .tty = BRIG_TTY_NEVER };
                if (sock >= 0)
                        run_in_member(engine, sock, dir, member, &plain, argv, identity);
                if (identity)
                        explicit_bzero(identity, strlen(identity));
                free(identity);
                free(dir);
        }
        run_engine(engine, argv, -1);
}
