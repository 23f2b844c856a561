/* engine-demo — libbrig embedded in a front end (docs/api.md).
 *
 * One process, one poll loop: 3 ephemeral sandboxes with their audit
 * streams, 20 commands across them at once (pipes brig makes, one with
 * the caller's own pipe, one on a pty that is resized), their output
 * streamed as it comes, one of them killed, every result and report
 * read. Then the bad inputs a front end may pass by mistake, and a check
 * that the library left this process as it found it: signal mask and
 * dispositions, rlimits, cwd, umask.
 *
 * Run it in the directory to use as the workspace. Prints one line per
 * command and "engine-demo: ok" at the end; exit 1 on the first failure. */
#define _GNU_SOURCE
#include <brig.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define N_SANDBOXES 3
#define N_EXECS 20
#define KILLED 7      /* sleeps until it is killed */
#define OWN_FDS 18    /* stdout and stderr: a pipe of ours (BRIG_STDIO_FDS) */
#define ON_PTY 19     /* BRIG_STDIO_PTY, resized */

static int failures;

#define CHECK(cond, ...)                                                               \
        do {                                                                           \
                if (!(cond)) {                                                         \
                        fprintf(stderr, "engine-demo: FAILED %s:%d: ", __FILE__, __LINE__); \
                        fprintf(stderr, __VA_ARGS__);                                  \
                        fputc('\n', stderr);                                           \
                        failures++;                                                    \
                }                                                                      \
        } while (0)

static void die_on(int r, brig_error **err, const char *what)
{
        if (r >= 0)
                return;
        fprintf(stderr, "engine-demo: %s: %s\n", what, err && *err && (*err)->msg ? (*err)->msg : strerror(-r));
        exit(1);
}

/* What the library must not change. */
struct process_state {
        sigset_t mask;
        struct sigaction act[NSIG];
        struct rlimit lim[RLIM_NLIMITS];
        char cwd[4096];
        mode_t umask;
};

static void snapshot(struct process_state *s)
{
        memset(s, 0, sizeof *s);
        sigprocmask(SIG_SETMASK, NULL, &s->mask);
        for (int i = 1; i < NSIG; i++)
                sigaction(i, NULL, &s->act[i]);
        for (int i = 0; i < RLIM_NLIMITS; i++)
                getrlimit(i, &s->lim[i]);
        if (!getcwd(s->cwd, sizeof s->cwd))
                s->cwd[0] = '\0';
        s->umask = umask(022);
        umask(s->umask);
}

static void compare(const struct process_state *a, const struct process_state *b)
{
        for (int i = 1; i < NSIG; i++) {
                CHECK(sigismember(&a->mask, i) == sigismember(&b->mask, i), "signal mask changed for %d", i);
                CHECK(a->act[i].sa_handler == b->act[i].sa_handler && a->act[i].sa_flags == b->act[i].sa_flags,
                      "disposition of signal %d changed", i);
        }
        for (int i = 0; i < RLIM_NLIMITS; i++)
                CHECK(a->lim[i].rlim_cur == b->lim[i].rlim_cur && a->lim[i].rlim_max == b->lim[i].rlim_max,
                      "rlimit %d changed", i);
        CHECK(strcmp(a->cwd, b->cwd) == 0, "cwd changed");
        CHECK(a->umask == b->umask, "umask changed");
}

struct job {
        brig_exec *x;
        int out[2];          /* the fds we read: stdout, stderr (-1 once at end of file) */
        char text[2][512];
        size_t len[2];
        bool done;
        brig_result res;
        int rc;
};

static void on_readable(struct job *j, int k)
{
        char buf[256];
        ssize_t n = read(j->out[k], buf, sizeof buf);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                j->out[k] = -1;  /* end of file (the handle closes its own; ours below) */
                return;
        }
        size_t room = sizeof j->text[k] - 1 - j->len[k];
        memcpy(j->text[k] + j->len[k], buf, (size_t)n < room ? (size_t)n : room);
        j->len[k] += (size_t)n < room ? (size_t)n : room;
}

/* engine-demo hold NAME [ephemeral]: make a sandbox, say "ready", wait to
 * be killed (tests/integration/test_engine.py kills it with SIGKILL). */
static _Noreturn void hold(const char *name, bool ephemeral)
{
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        brig_sandbox_opts o = { .size = sizeof o, .name = name, .flags = ephemeral ? BRIG_SANDBOX_EPHEMERAL : 0 };
        brig_sandbox *sb = NULL;
        die_on(brig_sandbox_new(p, &o, &sb, &err), &err, "brig_sandbox_new");
        printf("ready %s\n", brig_sandbox_name(sb));
        fflush(stdout);
        for (;;)
                pause();
}

static double now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* engine-demo bench NAME N: /bin/true N times in sandbox NAME through the
 * handles, one after the other (bench/engine sets it beside brig exec). */
static int bench(const char *name, int n)
{
        brig_error *err = NULL;
        brig_sandbox *sb = NULL;
        die_on(brig_sandbox_open(name, &sb, &err), &err, "brig_sandbox_open");
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        double *t = calloc((size_t)n, sizeof *t), sum = 0;
        char *argv[] = { "/bin/true", NULL };
        for (int i = 0; i < n && t; i++) {
                brig_exec_spec s = { .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = argv, .fds = { null, null, null } };
                brig_exec *x = NULL;
                brig_result res;
                double t0 = now_ms();
                die_on(brig_exec_start(sb, &s, &x, &err), &err, "brig_exec_start");
                die_on(brig_exec_wait(x, 0, &res, &err), &err, "brig_exec_wait");
                t[i] = now_ms() - t0;
                sum += t[i];
                brig_exec_close(x);
        }
        if (!t)
                return 1;
        qsort(t, (size_t)n, sizeof *t, cmp_double);
        printf("handle API exec of /bin/true: median %.2f ms, mean %.2f ms over %d\n", t[n / 2], sum / n, n);
        free(t);
        close(null);
        brig_sandbox_close(sb, NULL);
        return 0;
}

/* engine-demo closewait NAME CMD...: CMD in sandbox NAME, a thread
 * blocked in brig_exec_wait on it, and brig_exec_close from this one
 * meanwhile: the wait returns, the command is killed (test_engine.py
 * looks on the host), nothing is used after its free (ASan). */
struct waiter {
        brig_exec *x;
        int rc;
        char msg[256];
};

static void *wait_in_thread(void *arg)
{
        struct waiter *w = arg;
        brig_result res;
        brig_error *err = NULL;
        w->rc = brig_exec_wait(w->x, 0, &res, &err);
        snprintf(w->msg, sizeof w->msg, "%s", err && err->msg ? err->msg : "");
        brig_error_free(&err);
        return NULL;
}

static int closewait(const char *name, char **argv)
{
        brig_error *err = NULL;
        brig_sandbox *sb = NULL;
        die_on(brig_sandbox_open(name, &sb, &err), &err, "brig_sandbox_open");
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        brig_exec_spec s = { .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = argv, .fds = { null, null, null } };
        struct waiter w = { 0 };
        die_on(brig_exec_start(sb, &s, &w.x, &err), &err, "brig_exec_start");
        pthread_t th;
        if (pthread_create(&th, NULL, wait_in_thread, &w) != 0)
                return 1;
        struct timespec ts = { 0, 300 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        brig_exec_close(w.x);
        pthread_join(th, NULL);
        printf("wait: %d %s\n", w.rc, w.msg);
        close(null);
        CHECK(brig_sandbox_close(sb, &err) == 0, "brig_sandbox_close: %s", err && err->msg ? err->msg : "");
        brig_error_free(&err);
        return failures ? 1 : 0;
}

/* Distinct exec handles on one sandbox handle from distinct threads. */
static void *thread_execs(void *arg)
{
        brig_sandbox *sb = arg;
        long bad = 0;
        for (int i = 0; i < 3; i++) {
                char *argv[] = { "sh", "-c", "echo from-a-thread", NULL };
                brig_exec_spec s = { .size = sizeof s, .stdio = BRIG_STDIO_PIPES, .argv = argv };
                brig_exec *x = NULL;
                brig_result res;
                brig_error *err = NULL;
                char buf[64] = "";
                if (brig_exec_start(sb, &s, &x, &err) < 0 || brig_exec_wait(x, 0, &res, &err) < 0 ||
                    res.exit_code != 0 || read(brig_exec_stdio_fd(x, 1), buf, sizeof buf - 1) <= 0 ||
                    strcmp(buf, "from-a-thread\n") != 0)
                        bad++;
                brig_error_free(&err);
                brig_exec_close(x);
        }
        return (void *)bad;
}

/* engine-demo run [--report FILE] [--audit FILE] CMD...: brig_run, the one-call form
 * over the handles; the process must be as it was afterwards. Exits with
 * the command's status. */
static int run(int argc, char **argv)
{
        struct process_state before, after;
        snapshot(&before);
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        die_on(p ? 0 : -ENOMEM, NULL, "policy");
        int first = 0;
        for (; argc - first > 2 && argv[first][0] == '-'; first += 2)
                die_on(strcmp(argv[first], "--report") == 0  ? brig_policy_set_report_path(p, argv[first + 1], &err)
                       : strcmp(argv[first], "--audit") == 0 ? brig_policy_set_audit_path(p, argv[first + 1], &err)
                                                              : -EINVAL,
                       &err, argv[first]);
        brig_result res;
        int r = brig_run(p, argv + first, &res, &err);
        if (r < 0)
                fprintf(stderr, "engine-demo: brig_run: %s\n", err && err->msg ? err->msg : strerror(-r));
        brig_error_free(&err);
        brig_policy_free(p);
        snapshot(&after);
        compare(&before, &after);
        if (failures)
                return 1;
        fprintf(stderr, "engine-demo: run: exit %d, cpu %llu ms\n", res.exit_code,
                (unsigned long long)(res.cpu_user_ms + res.cpu_system_ms));
        return res.exit_code;
}

int main(int argc, char **argv)
{
        if (argc >= 3 && strcmp(argv[1], "hold") == 0)
                hold(argv[2], argc > 3 && strcmp(argv[3], "ephemeral") == 0);
        if (argc == 4 && strcmp(argv[1], "bench") == 0)
                return bench(argv[2], atoi(argv[3]) > 0 ? atoi(argv[3]) : 1);
        if (argc >= 4 && strcmp(argv[1], "closewait") == 0)
                return closewait(argv[2], argv + 3);
        if (argc >= 3 && strcmp(argv[1], "run") == 0)
                return run(argc - 2, argv + 2);
        struct process_state before, after;
        snapshot(&before);
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        die_on(p ? 0 : -ENOMEM, NULL, "policy");

        brig_sandbox *sb[N_SANDBOXES];
        char names[N_SANDBOXES][80];
        for (int i = 0; i < N_SANDBOXES; i++) {
                brig_sandbox_opts o = { .size = sizeof o, .flags = BRIG_SANDBOX_EPHEMERAL | BRIG_SANDBOX_AUDIT };
                die_on(brig_sandbox_new(p, &o, &sb[i], &err), &err, "brig_sandbox_new");
                snprintf(names[i], sizeof names[i], "%s", brig_sandbox_name(sb[i]));
        }

        /* 20 commands at once. Each says who it is on stdout and stderr,
         * echoes its stdin and exits i % 5; one waits to be killed. */
        struct job jobs[N_EXECS];
        int own_pipe[2] = { -1, -1 };
        for (int i = 0; i < N_EXECS; i++) {
                struct job *j = &jobs[i];
                memset(j, 0, sizeof *j);
                char script[256];
                if (i == KILLED)
                        snprintf(script, sizeof script, "echo out-%d; exec sleep 600", i);
                else if (i == ON_PTY)
                        snprintf(script, sizeof script, "read line; stty size; echo \"$line\"");
                else
                        snprintf(script, sizeof script, "echo out-%d; echo err-%d >&2; cat; exit %d", i, i, i % 5);
                char *cmd[] = { "sh", "-c", script, NULL };
                brig_exec_spec s = { .size = sizeof s, .stdio = BRIG_STDIO_PIPES, .argv = cmd };
                if (i == OWN_FDS) {
                        if (pipe2(own_pipe, O_CLOEXEC) < 0)
                                die_on(-errno, NULL, "pipe");
                        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                        s.stdio = BRIG_STDIO_FDS;
                        s.fds[0] = null;
                        s.fds[1] = s.fds[2] = own_pipe[1];
                        die_on(brig_exec_start(sb[i % N_SANDBOXES], &s, &j->x, &err), &err, "brig_exec_start");
                        close(null);
                        close(own_pipe[1]);  /* the command has its copy */
                        fcntl(own_pipe[0], F_SETFL, O_NONBLOCK);
                        j->out[0] = own_pipe[0];
                        j->out[1] = -1;
                        continue;
                }
                if (i == ON_PTY) {
                        s.stdio = BRIG_STDIO_PTY;
                        s.rows = 30;
                        s.cols = 100;
                }
                die_on(brig_exec_start(sb[i % N_SANDBOXES], &s, &j->x, &err), &err, "brig_exec_start");
                if (i == ON_PTY) {
                        die_on(brig_exec_resize(j->x, 40, 120, &err), &err, "brig_exec_resize");
                        int m = brig_exec_stdio_fd(j->x, 0);
                        CHECK(write(m, "typed\n", 6) == 6, "write to the pty");
                        j->out[0] = brig_exec_stdio_fd(j->x, 1);
                        j->out[1] = -1;
                        continue;
                }
                char line[32];
                int n = snprintf(line, sizeof line, "in-%d\n", i);
                CHECK(write(brig_exec_stdio_fd(j->x, 0), line, (size_t)n) == n, "write stdin of %d", i);
                die_on(brig_exec_close_stdin(j->x, &err), &err, "brig_exec_close_stdin");
                j->out[0] = brig_exec_stdio_fd(j->x, 1);
                j->out[1] = brig_exec_stdio_fd(j->x, 2);
        }

        /* One poll loop for all of it. */
        bool killed = false;
        for (;;) {
                struct pollfd pf[N_EXECS * 3];
                struct { int job, what; } who[N_EXECS * 3];
                nfds_t n = 0;
                for (int i = 0; i < N_EXECS; i++) {
                        for (int k = 0; k < 2; k++)
                                if (jobs[i].out[k] >= 0) {
                                        pf[n] = (struct pollfd){ .fd = jobs[i].out[k], .events = POLLIN };
                                        who[n].job = i, who[n++].what = k;
                                }
                        if (!jobs[i].done) {
                                pf[n] = (struct pollfd){ .fd = brig_exec_fd(jobs[i].x), .events = POLLIN };
                                who[n].job = i, who[n++].what = 2;
                        }
                }
                if (n == 0)
                        break;
                if (poll(pf, n, 30000) <= 0) {
                        CHECK(0, "nothing happened for 30 s");
                        break;
                }
                for (nfds_t k = 0; k < n; k++) {
                        if (!pf[k].revents)
                                continue;
                        struct job *j = &jobs[who[k].job];
                        if (who[k].what < 2) {
                                on_readable(j, who[k].what);
                                continue;
                        }
                        j->rc = brig_exec_wait(j->x, BRIG_WAIT_NOHANG, &j->res, &err);
                        if (j->rc == -EAGAIN)
                                continue;
                        j->done = true;
                        if (j->rc < 0) {
                                CHECK(0, "exec %d failed: %s", who[k].job, err && err->msg ? err->msg : "?");
                                brig_error_free(&err);
                        }
                        /* A pty's master reads EIO, not end of file, once the command is gone. */
                        if (who[k].job == ON_PTY) {
                                on_readable(j, 0);
                                j->out[0] = -1;
                        }
                }
                /* Kill the sleeper once it has said it runs. */
                if (!killed && strstr(jobs[KILLED].text[0], "out-")) {
                        die_on(brig_exec_kill(jobs[KILLED].x, SIGTERM, &err), &err, "brig_exec_kill");
                        killed = true;
                }
        }
        if (own_pipe[0] >= 0)
                close(own_pipe[0]);

        for (int i = 0; i < N_EXECS; i++) {
                struct job *j = &jobs[i];
                char want[64];
                if (i == KILLED) {
                        CHECK(j->res.signal == SIGTERM && j->res.exit_code == 128 + SIGTERM,
                              "exec %d: want SIGTERM, got exit %d signal %d", i, j->res.exit_code, j->res.signal);
                } else if (i == ON_PTY) {
                        CHECK(strstr(j->text[0], "40 120") && strstr(j->text[0], "typed"),
                              "exec %d: the pty said '%s'", i, j->text[0]);
                        CHECK(j->res.exit_code == 0, "exec %d: exit %d", i, j->res.exit_code);
                } else {
                        snprintf(want, sizeof want, "out-%d\n", i);
                        CHECK(strstr(j->text[0], want), "exec %d: stdout '%s'", i, j->text[0]);
                        snprintf(want, sizeof want, "err-%d\n", i);
                        CHECK(strstr(i == OWN_FDS ? j->text[0] : j->text[1], want), "exec %d: stderr '%s'", i,
                              j->text[1]);
                        snprintf(want, sizeof want, "in-%d\n", i);
                        CHECK(i == OWN_FDS || strstr(j->text[0], want), "exec %d: stdin not echoed: '%s'", i,
                              j->text[0]);
                        CHECK(j->res.exit_code == i % 5, "exec %d: exit %d, want %d", i, j->res.exit_code, i % 5);
                }
                /* the exec's own figures (pid 1's wait4 of it): a shell has some memory */
                CHECK(j->res.memory_peak_bytes > 0, "exec %d: no memory figure (%lld)", i,
                      (long long)j->res.memory_peak_bytes);
                char *rep = brig_exec_report_json(j->x, &err);
                CHECK(rep && strstr(rep, "\"exit_code\"") && strstr(rep, names[i % N_SANDBOXES]) &&
                              strstr(rep, "\"memory_peak_bytes\""),
                      "exec %d: report %s", i, rep ? rep : err && err->msg ? err->msg : "?");
                free(rep);
                brig_error_free(&err);
                printf("exec %2d in %s: exit %d%s\n", i, names[i % N_SANDBOXES], j->res.exit_code,
                       i == KILLED ? " (killed)" : i == ON_PTY ? " (pty)" : "");
        }

        /* Its stdin closed, an exec handle owns that number no more: the
         * number given to a descriptor of ours meanwhile survives the
         * handle's close (it was closed a second time). */
        {
                char *cat[] = { "cat", NULL };
                brig_exec_spec cs = { .size = sizeof cs, .stdio = BRIG_STDIO_PIPES, .argv = cat };
                brig_exec *cx = NULL;
                brig_result cres;
                die_on(brig_exec_start(sb[2], &cs, &cx, &err), &err, "brig_exec_start");
                int num = brig_exec_stdio_fd(cx, 0);
                die_on(brig_exec_close_stdin(cx, &err), &err, "brig_exec_close_stdin");
                CHECK(brig_exec_stdio_fd(cx, 0) == -1, "stdin still has a descriptor after close_stdin");
                int mine = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (mine != num && mine >= 0) {
                        dup3(mine, num, O_CLOEXEC);
                        close(mine);
                }
                die_on(brig_exec_wait(cx, 0, &cres, &err), &err, "brig_exec_wait");
                brig_exec_close(cx);
                CHECK(fcntl(num, F_GETFD) >= 0, "brig_exec_close closed descriptor %d, ours since close_stdin", num);
                close(num);
        }

        /* What the sandbox refused is in the result, as brig exec says it. */
        {
                char *refused[] = { "sh", "-c", "unshare -U true 2>/dev/null", NULL };
                brig_exec_spec rs = { .size = sizeof rs, .stdio = BRIG_STDIO_PIPES, .argv = refused };
                brig_exec *rx = NULL;
                brig_result rres;
                die_on(brig_exec_start(sb[2], &rs, &rx, &err), &err, "brig_exec_start");
                int wr = brig_exec_wait(rx, 0, &rres, &err);
                CHECK(wr == 0 && strstr(rres.refusals, "unshare"), "the refused unshare is not in the result: %d "
                      "'%s' %s", wr, rres.refusals, err && err->msg ? err->msg : "");
                brig_error_free(&err);
                brig_exec_close(rx);
        }

        /* A file operation from the poll loop: a write fed from our pipe,
         * then the file read back into another, each polled on its exec fd. */
        {
                int in[2], back[2];
                die_on(pipe2(in, O_CLOEXEC) == 0 && pipe2(back, O_CLOEXEC) == 0 ? 0 : -errno, NULL, "pipe");
                brig_file_spec ws = { .size = sizeof ws, .op = BRIG_FILE_WRITE, .path = "/tmp/polled.txt",
                                      .fd = in[0] };
                brig_exec *fx = NULL;
                die_on(brig_file_start(sb[0], &ws, &fx, &err), &err, "brig_file_start");
                close(in[0]);
                CHECK(brig_file_wait(fx, BRIG_WAIT_NOHANG, &err) == -EAGAIN, "a write still fed is done");
                brig_result wrong;
                CHECK(brig_exec_wait(fx, 0, &wrong, &err) == -EINVAL, "brig_exec_wait took a file operation");
                brig_error_free(&err);
                CHECK(write(in[1], "polled\n", 7) == 7, "write");
                close(in[1]);
                struct pollfd pf = { .fd = brig_exec_fd(fx), .events = POLLIN };
                CHECK(poll(&pf, 1, 30000) == 1, "the write's exec fd never became readable");
                int fr = brig_file_wait(fx, BRIG_WAIT_NOHANG, &err);
                CHECK(fr == 0, "the write: %d %s", fr, err && err->msg ? err->msg : "");
                brig_error_free(&err);
                CHECK(brig_file_wait(fx, 0, &err) == -ECHILD, "a second brig_file_wait");
                brig_error_free(&err);
                brig_exec_close(fx);
                brig_file_spec rs = { .size = sizeof rs, .op = BRIG_FILE_READ, .path = "/tmp/polled.txt",
                                      .fd = back[1] };
                die_on(brig_file_start(sb[0], &rs, &fx, &err), &err, "brig_file_start");
                close(back[1]);
                char got[32] = "";
                ssize_t n = 0, k;
                while ((k = read(back[0], got + n, sizeof got - 1 - (size_t)n)) > 0)
                        n += k;
                close(back[0]);
                fr = brig_file_wait(fx, 0, &err);
                CHECK(fr == 0 && strcmp(got, "polled\n") == 0, "read back: %d '%s' %s", fr, got,
                      err && err->msg ? err->msg : "");
                brig_error_free(&err);
                brig_exec_close(fx);
                /* a command's handle is not a file operation's */
                char *tr[] = { "true", NULL };
                brig_exec_spec ts = { .size = sizeof ts, .stdio = BRIG_STDIO_PIPES, .argv = tr };
                die_on(brig_exec_start(sb[0], &ts, &fx, &err), &err, "brig_exec_start");
                CHECK(brig_file_wait(fx, 0, &err) == -EINVAL, "brig_file_wait took a command");
                brig_error_free(&err);
                brig_exec_close(fx);
        }

        /* A closed handle stays dead when a new one takes its memory. */
        {
                char *tr[] = { "true", NULL };
                brig_exec_spec ts = { .size = sizeof ts, .stdio = BRIG_STDIO_PIPES, .argv = tr };
                brig_exec *old = NULL, *fresh = NULL;
                brig_result tres;
                die_on(brig_exec_start(sb[2], &ts, &old, &err), &err, "brig_exec_start");
                die_on(brig_exec_wait(old, 0, &tres, &err), &err, "brig_exec_wait");
                brig_exec_close(old);
                die_on(brig_exec_start(sb[2], &ts, &fresh, &err), &err, "brig_exec_start");
                CHECK(fresh != old && brig_exec_wait(old, 0, &tres, &err) == -EBADF,
                      "a closed exec handle was taken for the one made after it");
                brig_error_free(&err);
                CHECK(brig_exec_wait(fresh, 0, &tres, &err) == 0, "the new exec: %s", err ? err->msg : "");
                brig_error_free(&err);
                brig_exec_close(fresh);
        }

        /* Four threads, three execs each, on one sandbox handle. */
        pthread_t th[4];
        for (int i = 0; i < 4; i++)
                CHECK(pthread_create(&th[i], NULL, thread_execs, sb[1]) == 0, "pthread_create");
        for (int i = 0; i < 4; i++) {
                void *bad = NULL;
                pthread_join(th[i], &bad);
                CHECK(bad == NULL, "thread %d: %ld execs failed", i, (long)bad);
        }

        /* Bad input: errors, never crashes. */
        brig_result res;
        int rc;
        CHECK(brig_exec_wait(jobs[0].x, 0, &res, &err) == -ECHILD, "wait twice");
        brig_error_free(&err);
        CHECK(brig_exec_kill(jobs[0].x, 0, &err) == -EINVAL, "signal 0");
        brig_error_free(&err);
        char *t[] = { "true", NULL };
        brig_exec_spec s = { .size = 3, .argv = t };
        brig_exec *x = NULL;
        CHECK(brig_exec_start(sb[0], &s, &x, &err) == -EINVAL && !x, "too small a spec");
        brig_error_free(&err);
        struct { brig_exec_spec spec; char more[64]; } big = { .spec = { .size = sizeof big, .argv = t } };
        big.more[10] = 1;
        CHECK(brig_exec_start(sb[0], &big.spec, &x, &err) == -E2BIG && !x, "unknown fields set");
        brig_error_free(&err);
        s = (brig_exec_spec){ .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = t, .fds = { 0, 987, 2 } };
        CHECK(brig_exec_start(sb[0], &s, &x, &err) == -EBADF && !x, "a closed descriptor");
        brig_error_free(&err);
        CHECK(brig_exec_start(sb[0], NULL, &x, &err) == -EINVAL, "no spec");
        brig_error_free(&err);
        /* Another exec's connection to the supervisor, or its pipe, as
         * this command's stdin: the library's own, refused. */
        int theirs[] = { brig_exec_fd(jobs[1].x), brig_exec_stdio_fd(jobs[2].x, 1),
                         fcntl(brig_exec_fd(jobs[3].x), F_DUPFD_CLOEXEC, 3) };
        for (int i = 0; i < 3; i++) {
                s = (brig_exec_spec){ .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = t, .fds = { theirs[i], 1, 2 } };
                rc = brig_exec_start(sb[0], &s, &x, &err);
                if (rc == 0)
                        brig_exec_close(x);
                CHECK(rc == -EBADF && err && strstr(err->msg, "another brig_exec handle"),
                      "another exec's descriptor %d as stdin: %d", theirs[i], rc);
                brig_error_free(&err);
        }
        close(theirs[2]);
        /* A directory as stdio would hand the command a host directory to
         * openat() from (CVE-2024-21626): the supervisor refuses it. */
        int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        s = (brig_exec_spec){ .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = t, .fds = { 0, dir, 2 } };
        rc = brig_exec_start(sb[0], &s, &x, &err);
        if (rc == 0) {
                rc = brig_exec_wait(x, 0, &res, &err);
                brig_exec_close(x);
        }
        CHECK(rc == -EBADF, "a directory as stdout: %d %s", rc, err && err->msg ? err->msg : "");
        brig_error_free(&err);
        close(dir);
        /* File operations through the handle: a write and a read back
         * (memfds of ours), the sandbox's own errno, and bad specs. */
        int in = memfd_create("demo-in", MFD_CLOEXEC), out = memfd_create("demo-out", MFD_CLOEXEC);
        CHECK(in >= 0 && out >= 0 && write(in, "file-op\n", 8) == 8 && lseek(in, 0, SEEK_SET) == 0, "memfds");
        brig_file_spec f = { .size = sizeof f, .op = BRIG_FILE_WRITE, .path = "/tmp/demo-file", .fd = in };
        rc = brig_sandbox_file(sb[1], &f, &err);
        CHECK(rc == 0, "file write: %d %s", rc, err && err->msg ? err->msg : "");
        brig_error_free(&err);
        f = (brig_file_spec){ .size = sizeof f, .op = BRIG_FILE_READ, .path = "/tmp/demo-file", .fd = out };
        rc = brig_sandbox_file(sb[1], &f, &err);
        char got[16] = "";
        CHECK(rc == 0 && pread(out, got, sizeof got - 1, 0) == 8 && strcmp(got, "file-op\n") == 0,
              "file read back: %d '%s' %s", rc, got, err && err->msg ? err->msg : "");
        brig_error_free(&err);
        f.path = "/tmp/no-such-file";
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -ENOENT && err && err->exit_code == 1, "file read: ENOENT");
        brig_error_free(&err);
        f.path = "/tmp";
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -EISDIR, "file read of a directory: EISDIR");
        brig_error_free(&err);
        f.path = "tmp/relative";
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -EINVAL && err->exit_code == 125, "file: a relative path");
        brig_error_free(&err);
        f = (brig_file_spec){ .size = sizeof f, .op = BRIG_FILE_READ, .path = "/tmp/demo-file", .fd = 987 };
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -EBADF, "file: a closed descriptor");
        brig_error_free(&err);
        f = (brig_file_spec){ .size = sizeof f, .op = 99, .path = "/tmp/demo-file", .fd = out };
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -EINVAL, "file: an unknown operation");
        brig_error_free(&err);
        f.size = 4;
        CHECK(brig_sandbox_file(sb[1], &f, &err) == -EINVAL, "file: too small a spec");
        brig_error_free(&err);
        CHECK(brig_sandbox_file(NULL, &f, &err) == -EBADF, "file: no handle");
        brig_error_free(&err);
        close(in);
        close(out);
        CHECK(brig_sandbox_close(sb[0], &err) == -EBUSY, "close with execs open");
        brig_error_free(&err);

        for (int i = 0; i < N_EXECS; i++)
                brig_exec_close(jobs[i].x);
        CHECK(brig_exec_fd(jobs[0].x) == -EBADF, "a closed exec handle");
        CHECK(brig_exec_wait(jobs[0].x, 0, &res, &err) == -EBADF, "wait on a closed handle");
        brig_error_free(&err);

        /* The audit streams: JSON lines, from the start event on. */
        for (int i = 0; i < N_SANDBOXES; i++) {
                int fd = brig_sandbox_audit_fd(sb[i], &err);
                CHECK(fd >= 0, "audit fd of %s: %s", names[i], err && err->msg ? err->msg : "?");
                brig_error_free(&err);
                char buf[4096] = "";
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
                CHECK(n > 0 && buf[0] == '{' && strstr(buf, "\"start\""), "audit stream of %s: '%.200s'", names[i],
                      n > 0 ? buf : "");
                if (fd >= 0)
                        close(fd);
        }

        /* A stopped sandbox takes no exec. */
        die_on(brig_sandbox_stop(names[0], &err), &err, "brig_sandbox_stop");
        s = (brig_exec_spec){ .size = sizeof s, .stdio = BRIG_STDIO_PIPES, .argv = t };
        /* Refused at start, or (while it is still stopping) by its wait. */
        rc = brig_exec_start(sb[0], &s, &x, &err);
        if (rc == 0) {
                rc = brig_exec_wait(x, 0, &res, &err);
                brig_exec_close(x);
        }
        CHECK(rc < 0 && err && err->msg, "exec on a stopped sandbox");
        brig_error_free(&err);

        for (int i = 0; i < N_SANDBOXES; i++) {
                die_on(brig_sandbox_close(sb[i], &err), &err, "brig_sandbox_close");
                brig_sandbox *again = NULL;
                CHECK(brig_sandbox_open(names[i], &again, &err) < 0 && !again, "ephemeral %s still there", names[i]);
                brig_error_free(&err);
        }
        CHECK(brig_sandbox_name(sb[0]) == NULL, "a closed sandbox handle");
        brig_policy_free(p);

        snapshot(&after);
        compare(&before, &after);
        if (failures) {
                fprintf(stderr, "engine-demo: %d checks failed\n", failures);
                return 1;
        }
        printf("engine-demo: ok (%d sandboxes, %d execs, one killed; process state unchanged)\n", N_SANDBOXES,
               N_EXECS);
        return 0;
}
