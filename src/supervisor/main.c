/* brig-supervisor — the supervisor of one sandbox that outlives the call
 * that made it (brig create, brig start, pool members, the handle API).
 * libbrig starts it with posix_spawn (src/lib/supervisor_exec.c) and
 * hands it, on fixed descriptors (supervisor_exec.h), a pipe to report
 * ready on and a socket carrying its configuration: the state directory,
 * the name, the workspace mode and the policy as brig_policy_to_json
 * writes it. It then runs the sandbox as `brig run` would, serving the
 * control socket, until the sandbox stops. It is not meant to be run by
 * hand. */
#define _GNU_SOURCE
#include "internal.h"
#include "sandbox.h"
#include "state.h"
#include "supervisor_exec.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/close_range.h>

#define CONFIG_MAX (2 * STATE_FILE_MAX)

static void say(const char *what)
{
        fprintf(stderr, "brig-supervisor: %s\n", what);
}

/* The configuration, whole, until end of file. */
static char *read_config(int fd)
{
        size_t cap = 65536, len = 0;
        char *buf = malloc(cap);
        while (buf) {
                if (len + 1 >= cap) {
                        char *n = cap < CONFIG_MAX ? realloc(buf, cap *= 2) : NULL;
                        if (!n) {
                                free(buf);
                                return NULL;
                        }
                        buf = n;
                }
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        free(buf);
                        return NULL;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (buf)
                buf[len] = '\0';
        return buf;
}

int main(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        /* Our own program file, and anything else past our descriptors. */
        syscall(SYS_close_range, SUPERVISOR_FD_EXE, ~0U, 0);
        /* Executed as /proc/self/fd/N: say who we are in ps. */
        prctl(PR_SET_NAME, "brig-supervisor");
        /* What libbrig hands over: a pipe to report on and a socket (a
         * socketpair's end) with the configuration; a shell's inherited
         * descriptors or files are not that. */
        struct stat ready_st, config_st;
        if (fstat(SUPERVISOR_FD_READY, &ready_st) < 0 || !S_ISFIFO(ready_st.st_mode) ||
            fstat(SUPERVISOR_FD_CONFIG, &config_st) < 0 || !S_ISSOCK(config_st.st_mode)) {
                say("not meant to be run by hand (libbrig starts it)");
                return BRIG_EXIT_SETUP;
        }
        /* Nobody's child: the caller waits for this first process only. */
        pid_t pid = fork();
        if (pid < 0) {
                say("fork failed");
                return BRIG_EXIT_SETUP;
        }
        if (pid > 0)
                _exit(0);
        for (int fd = SUPERVISOR_FD_READY; fd <= SUPERVISOR_FD_CONFIG; fd++)
                fcntl(fd, F_SETFD, FD_CLOEXEC);

        char *text = read_config(SUPERVISOR_FD_CONFIG);
        close(SUPERVISOR_FD_CONFIG);
        json_error_t jerr;
        json_t *doc = text ? json_loads(text, 0, &jerr) : NULL;
        free(text);
        const char *dir = json_string_value(json_object_get(doc, "dir"));
        const char *name = json_string_value(json_object_get(doc, "name"));
        const char *report = json_string_value(json_object_get(doc, "report_path"));
        json_t *pol = json_object_get(doc, "policy");
        char *pol_text = json_is_object(pol) ? json_dumps(pol, JSON_COMPACT) : NULL;
        struct sandbox_create_opts opts = {
                .overlay = json_is_true(json_object_get(doc, "overlay")),
                .ephemeral = json_is_true(json_object_get(doc, "ephemeral")),
                .audit = json_is_true(json_object_get(doc, "audit")),
                .owner_pid = (pid_t)json_integer_value(json_object_get(doc, "owner_pid")),
                .owner_start = (unsigned long long)json_integer_value(json_object_get(doc, "owner_start")),
        };
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        int r = !dir || !name || !pol_text || !p ? brig_err(&err, EBADMSG, "malformed configuration from libbrig")
                                                 : brig_policy_load_string(p, "policy", pol_text, &err);
        if (r == 0 && report)
                r = brig_policy_set_report_path(p, report, &err);
        _cleanup_free_ char *audit = r == 0 && opts.audit ? brig_strdup_printf("%s/audit.jsonl", dir) : NULL;
        if (r == 0 && opts.audit)
                r = audit ? brig_policy_set_audit_path(p, audit, &err) : brig_err(&err, ENOMEM, "audit");
        free(pol_text);
        if (r < 0) {
                /* As control_wait_ready reads it. */
                struct { int code, errnum; char text[1024]; } m = { BRIG_EXIT_SETUP, err ? err->errnum : 0, "" };
                snprintf(m.text, sizeof m.text, "brig-supervisor: %s", err && err->msg ? err->msg : "failed");
                say(m.text);
                (void)!write(SUPERVISOR_FD_READY, &m, sizeof m);
                return BRIG_EXIT_SETUP;
        }
        /* The strings live in doc, which lives as long as we do. */
        sandbox_supervise(dir, name, p, &opts, SUPERVISOR_FD_READY);
}
