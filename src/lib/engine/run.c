/* run.c — brig_run over the handles (docs/api.md): an ephemeral sandbox
 * and one exec in it with the caller's fds 0, 1, 2, so that a library
 * call runs a command without touching its process: no signal mask or
 * disposition, no rlimit, no fork of the caller (the sandbox's supervisor
 * is brig-supervisor, started by posix_spawn). What needs the supervisor in
 * the caller's process (--pass-fd, a pty, forwarded signals, the full run
 * report) is brig_run_in_process (core/spawn.c), which `brig run` uses. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "controls/terminal.h"
#include "persist/state.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

/* The outputs are opened before anything runs, as brig run's are: nothing
 * inside can redirect them. 0 with *out -1 when there is none. */
static int open_output(int fd, const char *path, const char *fd_flag, const char *path_flag, bool append, int *out,
                       brig_error **err)
{
        *out = -EBADF;
        if (!fd && !path)
                return 0;
        int r = fd ? output_fd(fd, fd_flag, err) : output_open(path, path_flag, append, err);
        if (r < 0)
                return r;
        *out = r;
        return 0;
}

/* What the supervisor said runs weaker than asked, for the caller's
 * notice callback, as brig_run_in_process says it at its start. */
static void tell_warnings(const brig_policy *p, const char *name)
{
        if (!p->notice)
                return;
        _cleanup_free_ char *dir = NULL;
        brig_error *e = NULL;
        json_t *st = state_dir(name, false, &dir, &e) == 0 ? state_read(dir, &e) : NULL;
        brig_error_free(&e);
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(st, "warnings"), i, w)
                if (json_is_string(w))
                        p->notice(json_string_value(w), p->notice_data);
        json_decref(st);
}

/* The sandbox's audit stream, whole, to the caller's output: read from
 * a descriptor opened before the sandbox was removed, so its end event,
 * written as it stops, is there too. */
static int copy_audit(int in, int out, brig_error **err)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(in, buf, sizeof buf);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return brig_err(err, errno, "--audit: read the sandbox's audit stream");
                if (n == 0)
                        return 0;
                int r = output_write(out, buf, (size_t)n);
                if (r < 0)
                        return brig_err(err, -r, "--audit: write the audit stream");
        }
}

/* The command's end, relaying a terminal among 0, 1, 2 meanwhile. */
static int run_wait(brig_exec *x, struct terminal *term, brig_result *res, brig_error **err)
{
        for (;;) {
                struct pollfd p[1 + TERMINAL_POLL_MAX] = { { .fd = brig_exec_fd(x), .events = POLLIN } };
                int nterm = terminal_poll_fds(term, &p[1]);
                if (poll(p, (nfds_t)(1 + nterm), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return brig_err(err, errno, "brig_run: poll");
                }
                if (nterm)
                        terminal_dispatch(term, &p[1], nterm);
                if (p[0].revents) {
                        int r = brig_exec_wait(x, 0, res, err);
                        terminal_drain(term);  /* the last output still on its way */
                        return r;
                }
        }
}

int brig_run(const brig_policy *p, char *const argv[], brig_result *result, brig_error **err)
{
        if (!result)
                return brig_err(err, EINVAL, "brig_run: result is NULL");
        memset(result, 0, sizeof *result);
        result->exit_code = BRIG_EXIT_SETUP;
        result->memory_peak_bytes = result->pids_peak = -1;
        if (!p || !argv || !argv[0] || !*argv[0])
                return brig_err(err, EINVAL, "brig_run: %s", !p ? "no policy" : "no command given");
        if (p->n_pass_fds)
                return brig_err(err, EINVAL, "brig_run: --pass-fd needs the supervisor in this process "
                                             "(brig_run_in_process, as brig run uses)");
        if (p->manifest_path)
                return brig_err(err, EINVAL, "brig_run: --manifest needs the supervisor in this process "
                                             "(brig_run_in_process, as brig run uses)");
        if (p->timings)
                return brig_err(err, EINVAL, "brig_run: --timings stamps the steps of the supervisor in this process "
                                             "(brig_run_in_process, as brig run uses)");
        if (p->tty == BRIG_TTY_ALWAYS)
                return brig_err(err, EINVAL, "brig_run: a pty needs the supervisor in this process "
                                             "(brig_run_in_process, as brig run uses)");
        char what[4096 + 32];
        report_what(p, what, sizeof what);
        _cleanup_close_ int report = -EBADF, audit = -EBADF;
        int r = open_output(p->report_fd, p->report_path, "--json-report-fd", "--json-report", false, &report, err);
        if (r == 0)
                r = open_output(p->audit_fd, p->audit_path, "--audit-fd", "--audit", true, &audit, err);
        if (r < 0)
                return r;
        /* The sandbox's own policy: the outputs are ours to write. */
        brig_policy copy = *p;  /* shallow: only read */
        copy.report_path = copy.audit_path = NULL;
        copy.report_fd = copy.audit_fd = 0;
        brig_sandbox_opts o = { .size = sizeof o,
                                .flags = BRIG_SANDBOX_EPHEMERAL | (audit >= 0 ? BRIG_SANDBOX_AUDIT : 0) };
        brig_sandbox *sb = NULL;
        if ((r = brig_sandbox_new(&copy, &o, &sb, err)) < 0)
                return r;
        tell_warnings(p, brig_sandbox_name(sb));
        struct terminal *term = NULL;
        brig_exec *x = NULL;
        r = terminal_prepare(BRIG_TTY_NEVER, p->terminal_passthrough, NULL, &term, err);
        if (r == 0) {
                brig_exec_spec s = { .size = sizeof s, .stdio = BRIG_STDIO_FDS, .argv = argv, .fds = { 0, 1, 2 } };
                terminal_stdio(term, s.fds);
                r = brig_exec_start(sb, &s, &x, err);
                terminal_handed_over(term);
        }
        if (r == 0)
                r = run_wait(x, term, result, err);
        terminal_close(term);
        if (x && report >= 0) {
                brig_error *rerr = NULL;
                int rr = report_text_write(report, brig_exec_report_json(x, &rerr), what, r < 0 ? &rerr : err);
                if (rr < 0 && r == 0)
                        r = rr;
                brig_error_free(&rerr);
        }
        brig_exec_close(x);
        brig_error *aerr = NULL;
        _cleanup_close_ int audit_in = audit >= 0 ? brig_sandbox_audit_fd(sb, r < 0 ? &aerr : err) : -EBADF;
        if (audit >= 0 && audit_in < 0 && r == 0)
                r = audit_in;
        brig_error *cerr = NULL;
        int cr = brig_sandbox_close(sb, r < 0 ? &cerr : err);
        if (cr < 0 && r == 0)
                r = cr;
        brig_error_free(&cerr);
        if (audit_in >= 0) {
                int ar = copy_audit(audit_in, audit, r < 0 ? &aerr : err);
                if (ar < 0 && r == 0)
                        r = ar;
        }
        brig_error_free(&aerr);
        if (r < 0 && err && *err && result->exit_code == 0)
                result->exit_code = (*err)->exit_code;
        return r;
}
