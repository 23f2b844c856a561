/* exec_outcome.c — how an exec ended, from the supervisor's last message:
 * the status (exit, signal, timeout, the memory limit's kill, what was
 * refused while it ran, its CPU and memory) or the error, into a result
 * as brig run's. Apart from exec.c (the client's loop: signals, the
 * terminal) so that the fuzz target of what it reads links it alone
 * (tests/fuzz/fuzz_exec_outcome.c). */
#define _GNU_SOURCE
#include "core/refusals.h"
#include "persist/control.h"
#include "persist/sandbox.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void fill_result(brig_result *res, const struct ctl_hdr *h)
{
        int status = h->arg;
        if (h->exit_code == BRIG_EXIT_TIMEOUT) {
                res->exit_code = BRIG_EXIT_TIMEOUT;
                res->reason = BRIG_REASON_TIMEOUT;
                snprintf(res->summary, sizeof res->summary, "killed: wall-clock timeout reached (raise with --timeout)");
        } else if (WIFSIGNALED(status)) {
                res->signal = WTERMSIG(status);
                res->exit_code = 128 + res->signal;
                res->reason = res->signal == SIGSYS ? BRIG_REASON_SECCOMP : BRIG_REASON_SIGNALED;
                if (res->signal == SIGSYS)
                        snprintf(res->summary, sizeof res->summary,
                                 "killed: a system call the policy forbids (seccomp kill, SIGSYS)");
                else
                        snprintf(res->summary, sizeof res->summary, "command killed by signal %d (%s)", res->signal,
                                 sigabbrev_np(res->signal) ? sigabbrev_np(res->signal) : "?");
        } else {
                res->exit_code = WEXITSTATUS(status);
                res->reason = BRIG_REASON_EXITED;
        }
        /* connections the unix socket guard refused this command (control.h) */
        if (h->errnum > 0) {
                res->unix_refused = (uint64_t)h->errnum;
                snprintf(res->unix_refused_path, sizeof res->unix_refused_path, "%.*s",
                         (int)sizeof res->unix_refused_path - 1, h->text);
        }
}

/* What the supervisor or pid 1 said went wrong, as our error. */
static int error_reply(const struct ctl_hdr *h, brig_result *res, brig_error **err)
{
        return ctl_error(h, &res->exit_code, err);
}

/* A status's payload (control.h): the summary's lines into the result,
 * and the same causes for the report into *refusals (NULL: not wanted). */
static void status_take(brig_result *res, const char *payload, size_t n, json_t **refusals)
{
        size_t nl = strnlen(payload, n);
        snprintf(res->refusals, sizeof res->refusals, "%.*s", (int)nl, payload);
        if (nl + 1 >= n)
                return;
        size_t jl = strnlen(payload + nl + 1, n - nl - 1);
        json_t *list = refusals_json_parse(payload + nl + 1, jl);
        /* A SIGKILL the supervisor put down to the memory limit (control.c
         * oom_check): the reason and words brig run would give. */
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(list, "refusals"), i, f)
                if (res->reason == BRIG_REASON_SIGNALED && res->signal == SIGKILL &&
                    strcmp(json_string_value(json_object_get(f, "kind")), "limit") == 0 &&
                    strcmp(json_string_value(json_object_get(f, "allow_with")) ?: "", "--memory") == 0 &&
                    json_is_string(json_object_get(f, "why"))) {
                        res->reason = BRIG_REASON_OOM;
                        snprintf(res->summary, sizeof res->summary, "%s", json_string_value(json_object_get(f, "why")));
                }
        if (refusals) {
                json_decref(*refusals);
                *refusals = list;
        } else {
                json_decref(list);
        }
        /* the exec's own figures (a supervisor of before them sends none:
         * they stay unknown, -1 and 0) */
        size_t at = nl + 1 + jl + 1;
        struct exec_usage u;
        if (at < n && exec_usage_parse(payload + at, strnlen(payload + at, n - at), &u) == 0) {
                res->cpu_user_ms = u.cpu_user_ms;
                res->cpu_system_ms = u.cpu_system_ms;
                res->memory_peak_bytes = u.memory_peak_bytes;
        }
}

int exec_outcome_take(const char *name, const char *msg, ssize_t n, brig_result *res, json_t **refusals,
                      brig_error **err)
{
        if (n <= 0)
                return exec_gone(err, name, n < 0 ? (int)-n : EPIPE);
        struct ctl_hdr h;
        memcpy(&h, msg, sizeof h);
        if (h.type == CTL_STATUS) {
                fill_result(res, &h);
                status_take(res, msg + sizeof h, (size_t)n - sizeof h, refusals);
                return 1;
        }
        if (h.type == CTL_ERROR)
                return error_reply(&h, res, err);
        return 0;
}

void exec_result_fill(brig_result *res, const struct ctl_hdr *h, const char *payload, size_t n, json_t **refusals)
{
        fill_result(res, h);
        status_take(res, payload, n, refusals);
}

int exec_outcome_read(int fd, const char *name, brig_result *res, brig_error **err)
{
        _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
        if (!buf)
                return brig_err(err, ENOMEM, "exec");
        /* one message, checked as the one off the supervisor's socket was */
        int fds[CTL_MAX_FDS], nfds;
        ssize_t n = ctl_recv(fd, buf, CTL_MAX_MSG, fds, &nfds);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        int r = exec_outcome_take(name, buf, n, res, NULL, err);
        if (r == 0)
                return brig_err(err, EBADMSG, "the end of the exec in sandbox '%s': neither a status nor an error",
                                name);
        return r < 0 ? r : 0;
}
