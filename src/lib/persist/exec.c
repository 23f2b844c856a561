/* exec.c — `brig exec`, the client: send the command with our stdio (or
 * ask for a pty) to the sandbox's supervisor, forward the signals we get,
 * relay the terminal, until the status that comes back (exec_outcome.c
 * makes it a result with brig run's exit codes). */
#define _GNU_SOURCE
#include "core/report.h"
#include "controls/terminal.h"
#include "persist/control.h"
#include "persist/sandbox.h"

#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t exec_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

void exec_timings_add(brig_result *res, const char *step, uint64_t ns)
{
        size_t len = strnlen(res->timings, sizeof res->timings);
        if (len < sizeof res->timings)
                snprintf(res->timings + len, sizeof res->timings - len, "  %-30s %9.3f ms\n", step, (double)ns / 1e6);
}

int exec_check_opts(const brig_exec_opts *o, brig_error **err)
{
        if (!o || !o->argv || !o->argv[0] || !*o->argv[0])
                return brig_err(err, EINVAL, "no command given");
        if (o->cwd && o->cwd[0] != '/')
                return brig_err(err, EINVAL, "--cwd '%s': give an absolute path inside the sandbox", o->cwd);
        if (o->detach && o->tty == BRIG_TTY_ALWAYS)
                return brig_err(err, EINVAL, "--detach runs the command without a terminal: drop --tty");
        for (size_t i = 0; o->env && o->env[i]; i++)
                if (!strchr(o->env[i], '=') || o->env[i][0] == '=')
                        return brig_err(err, EINVAL, "--env '%s': expected NAME=VALUE", o->env[i]);
        return 0;
}

struct exec_loop {
        int fd, sfd;
        struct terminal *term;
        const char *name;
        json_t *refusals;  /* {"refusals": [...], "refusals_dropped": N} of the status, or NULL */
        bool spoke;        /* anything sent after the request, or anything answered */
};

/* Returns 1 when the status (or an error) arrived, 0 to go on. */
static int on_message(struct exec_loop *l, brig_result *res, brig_error **err)
{
        /* a status carries the summary's lines of what was refused, and
         * the same for the report (control.h) */
        _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
        if (!buf)
                return brig_err(err, ENOMEM, "exec");
        int fds[CTL_MAX_FDS], nfds;
        ssize_t n = ctl_recv(l->fd, buf, CTL_MAX_MSG, fds, &nfds);
        /* reset with nothing sent since the request and nothing answered:
         * the request was never read (a pool member whose daemon died,
         * stopping). One that was read, then lost, ends plainly instead
         * and stays "went away". */
        if (n == -ECONNRESET && !l->spoke)
                return exec_not_taken(err, l->name);
        l->spoke = true;
        if (n > 0 && ((struct ctl_hdr *)buf)->type == CTL_PTY && nfds == 1 && terminal_is_pty(l->term)) {
                terminal_attach(l->term, fds[0]);  /* it owns the master now */
                return 0;
        }
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        return exec_outcome_take(l->name, buf, n, res, &l->refusals, err);
}

static void on_signal(struct exec_loop *l)
{
        struct signalfd_siginfo si;
        while (read(l->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if ((int)si.ssi_signo == SIGWINCH && terminal_is_pty(l->term)) {
                        terminal_on_winch(l->term);  /* the kernel signals the pty's group */
                        continue;
                }
                struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_SIGNAL, .arg = (int32_t)si.ssi_signo };
                (void)ctl_send(l->fd, &h, NULL, 0, NULL, 0);
                l->spoke = true;  /* unread, it alone would reset the connection */
        }
}

static int exec_loop(struct exec_loop *l, brig_result *res, brig_error **err)
{
        enum { P_SOCK, P_SIG, P_TERM, P_N = P_TERM + TERMINAL_POLL_MAX };
        for (;;) {
                struct pollfd p[P_N] = {
                        [P_SOCK] = { .fd = l->fd, .events = POLLIN },
                        [P_SIG] = { .fd = l->sfd, .events = POLLIN },
                };
                int nterm = terminal_poll_fds(l->term, &p[P_TERM]);
                if (poll(p, (nfds_t)(P_TERM + nterm), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return brig_err(err, errno, "poll");
                }
                if (p[P_SIG].revents)
                        on_signal(l);
                if (nterm)
                        terminal_dispatch(l->term, &p[P_TERM], nterm);
                if (p[P_SOCK].revents) {
                        int r = on_message(l, res, err);
                        if (r != 0) {
                                if (r > 0)
                                        terminal_drain(l->term);  /* the last output still on its way */
                                return r < 0 ? r : 0;
                        }
                }
        }
}

/* brig exec --detach: the request without stdio, then one answer — the
 * command runs (its pid; the log is named by it), or why it could not.
 * Nothing of ours is handed in, so nothing (a pipe to `| cat`) is held
 * open by what the command leaves running. */
static int detach_over(int fd, const char *name, const brig_exec_opts *o, brig_result *res, brig_error **err)
{
        size_t len;
        _cleanup_free_ char *req = exec_request_build(o, false, 0, NULL, &len, err);
        if (!req)
                return -ENOMEM;
        const struct ctl_hdr *h = (const struct ctl_hdr *)req;
        int r = ctl_send(fd, h, req + sizeof *h, len - sizeof *h, NULL, 0);
        if (r < 0)
                return brig_err(err, -r, "send the command to sandbox '%s'", name);
        for (;;) {
                struct ctl_hdr a;
                int fds[CTL_MAX_FDS], nfds;
                ssize_t n = ctl_recv(fd, &a, sizeof a, fds, &nfds);
                for (int i = 0; i < nfds; i++)
                        close(fds[i]);
                if (n == -EINTR || n == -EAGAIN)
                        continue;
                if (n > 0 && a.type == CTL_STARTED && a.arg > 1) {
                        res->exit_code = 0;
                        res->reason = BRIG_REASON_DETACHED;
                        res->detached_pid = a.arg;
                        /* named from the pid here, not copied from the answer */
                        snprintf(res->detached_log, sizeof res->detached_log, CTL_DETACH_LOG, (int)a.arg);
                        return 0;
                }
                if (n > 0 && a.type == CTL_ERROR)
                        return ctl_error(&a, &res->exit_code, err);
                if (n <= 0)
                        return brig_err(err, n < 0 ? (int)-n : EPIPE, "sandbox '%s' went away while starting the command",
                                        name);
        }
}

int exec_over(int fd, const char *name, const brig_exec_opts *o, const int *stdio, brig_result *res, json_t **refusals,
              brig_error **err)
{
        return exec_over_flags(fd, name, o, stdio, 0, res, refusals, err);
}

int exec_over_flags(int fd, const char *name, const brig_exec_opts *o, const int *stdio, uint32_t flags,
                    brig_result *res, json_t **refusals, brig_error **err)
{
        return exec_over_context(fd, name, o, stdio, flags, NULL, res, refusals, err);
}

int exec_over_context(int fd, const char *name, const brig_exec_opts *o, const int *stdio, uint32_t flags,
                      const char *context, brig_result *res, json_t **refusals, brig_error **err)
{
        if (o->detach) {
                uint64_t start = now_ms();
                int r = detach_over(fd, name, o, res, err);
                res->duration_ms = now_ms() - start;
                return r;
        }
        struct exec_loop l = { .fd = fd, .sfd = -1, .name = name };
        uint64_t start = now_ms();
        static const int std_fds[] = { 0, 1, 2 };
        if (!stdio)
                stdio = std_fds;
        /* A caller whose stdin, stdout or stderr was closed got the
         * control socket in its place: sent as the command's stdio, it
         * would hand the command this connection to the supervisor, which
         * takes any request on it (network rules, limits, stop). */
        for (int i = 0; i < 3; i++)
                if (stdio[i] == fd)
                        return brig_err(err, EBADF, "exec: %s is closed (give the command /dev/null instead)",
                                        (const char *[]){ "stdin", "stdout", "stderr" }[i]);
        int r = terminal_prepare(o->tty, o->terminal_passthrough, stdio, &l.term, err);
        if (r < 0)
                return r;
        bool pty = terminal_is_pty(l.term);
        size_t len;
        _cleanup_free_ char *req = exec_request_build(o, pty, flags, context, &len, err);
        if (!req) {
                terminal_close(l.term);
                return -ENOMEM;
        }
        /* Blocked before the request leaves, so no signal meant for the
         * command is lost or kills us in between. */
        sigset_t set, saved;
        sigemptyset(&set);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
                sigaddset(&set, forwarded[i]);
        sigprocmask(SIG_BLOCK, &set, &saved);
        l.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (l.sfd < 0) {
                r = brig_err(err, errno, "signalfd");
                goto out;
        }
        /* A terminal among them goes in as our pipe or socket instead. */
        int fds[3] = { stdio[0], stdio[1], stdio[2] };
        terminal_stdio(l.term, fds);
        const struct ctl_hdr *h = (const struct ctl_hdr *)req;
        uint64_t t_ready = exec_now_ns();
        r = ctl_send(fd, h, req + sizeof *h, len - sizeof *h, fds, pty ? 0 : 3);
        terminal_handed_over(l.term);
        if (r == -EPIPE || r == -ECONNRESET) {
                /* its end closed before the request left: nothing ran */
                r = exec_not_taken(err, name);
                goto out;
        }
        if (r < 0) {
                r = brig_err(err, -r, "send the command to sandbox '%s'", name);
                goto out;
        }
        uint64_t t_sent = exec_now_ns();
        r = exec_loop(&l, res, err);
        if (o->timings) {  /* (brig exec --timings: exec_named adds the lookup before and the total) */
                exec_timings_add(res, "request sent", t_sent - t_ready);
                exec_timings_add(res, "the command, in the sandbox", exec_now_ns() - t_sent);
        }
        if (refusals)
                *refusals = TAKE_PTR(l.refusals);
        json_decref(l.refusals);
out:
        closep(&l.sfd);
        terminal_close(l.term);
        sigprocmask(SIG_SETMASK, &saved, NULL);
        res->duration_ms = now_ms() - start;
        return r;
}

char *exec_report_json(const char *name, const brig_exec_opts *o, const brig_result *res, const brig_error *error,
                       const json_t *pooled, json_t *refusals, brig_error **err)
{
        json_t *cmd = json_array();
        for (size_t i = 0; o->argv[i]; i++)
                json_array_append_new(cmd, json_string(o->argv[i]));
        json_t *doc = json_object();
        json_object_set_new(doc, "brig_version", json_string(brig_version()));
        json_object_set_new(doc, "sandbox", name ? json_string(name) : json_null());  /* none claimed */
        json_object_set_new(doc, "command", cmd);
        json_object_set_new(doc, "exit_code", json_integer(res->exit_code));
        json_object_set_new(doc, "signal", res->signal ? json_integer(res->signal) : json_null());
        json_object_set_new(doc, "reason", json_string(error ? "error" : brig_reason_name(res->reason)));
        json_object_set_new(doc, "duration_ms", json_integer((json_int_t)res->duration_ms));
        /* this exec's own, as pid 1 reaped it (docs/api.md): not the sandbox's */
        json_object_set_new(doc, "cpu_user_ms", json_integer((json_int_t)res->cpu_user_ms));
        json_object_set_new(doc, "cpu_system_ms", json_integer((json_int_t)res->cpu_system_ms));
        json_object_set_new(doc, "memory_peak_bytes",
                            res->memory_peak_bytes >= 0 ? json_integer(res->memory_peak_bytes) : json_null());
        if (res->summary[0])
                json_object_set_new(doc, "summary", json_string(res->summary));
        if (res->detached_pid > 0)
                json_object_set_new(doc, "detached", json_pack("{s:i, s:s}", "pid", res->detached_pid, "log",
                                                               res->detached_log));
        if (error)
                json_object_set_new(doc, "error", json_string(error->msg ? error->msg : "unknown error"));
        /* what was refused while it ran, as brig run's report has it */
        json_t *list = json_object_get(refusals, "refusals");
        json_int_t dropped = json_integer_value(json_object_get(refusals, "refusals_dropped"));
        json_object_set_new(doc, "refusals", list ? json_incref(list) : json_array());
        if (dropped)
                json_object_set_new(doc, "refusals_dropped", json_integer(dropped));
        const char *member = json_string_value(json_object_get(pooled, "member"));
        if (member) {  /* brig run --pooled or --pool NAME, served by this member */
                json_t *pool = json_pack("{s:b, s:s, s:n}", "served", 1, "member", member, "reason");
                json_t *named = json_object_get(pooled, "name");
                if (pool && named)  /* brig run --pool NAME */
                        json_object_set(pool, "name", named);
                json_object_set_new(doc, "pool", pool);
        } else if (json_object_get(pooled, "name")) {  /* brig run --pool NAME that got no member */
                json_object_set_new(doc, "pool", json_pack("{s:b, s:n, s:O}", "served", 0, "member", "name",
                                                           json_object_get(pooled, "name")));
        }
        json_t *timings = json_object_get(pooled, "timings");
        if (timings)  /* --timings of a pooled run: its own steps (pool.c) */
                json_object_set(doc, "timings", timings);
        char *text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(doc);
        if (!text)
                brig_err(err, ENOMEM, "report");
        return text;
}

int exec_report_write(int fd, const char *what, const char *name, const brig_exec_opts *o, const brig_result *res,
                      const brig_error *error, const json_t *pooled, json_t *refusals, brig_error **err)
{
        return report_text_write(fd, exec_report_json(name, o, res, error, pooled, refusals, err), what, err);
}
