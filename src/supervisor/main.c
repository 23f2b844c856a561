/* brig-supervisor — the supervisor of one sandbox that outlives the call
 * that made it (brig create, brig start, pool members, the handle API).
 * libbrig starts it with posix_spawn (src/lib/engine/supervisor_exec.c) and
 * hands it, on fixed descriptors (supervisor_exec.h), a pipe to report
 * ready on and a sealed memfd holding its configuration: the state directory,
 * the name, the workspace mode and the policy as brig_policy_to_json
 * writes it. It then runs the sandbox as `brig run` would, serving the
 * control socket, until the sandbox stops. It is not meant to be run by
 * hand. */
#define _GNU_SOURCE
#include "persist/state.h"
#include "engine/supervisor_exec.h"

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

/* The configuration, whole: the memfd's size is sealed, so what fstat
 * says is all there is (read from 0: the offset is the writer's). */
static char *read_config(int fd)
{
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > CONFIG_MAX)
                return NULL;
        size_t len = (size_t)st.st_size, off = 0;
        char *buf = malloc(len + 1);
        while (buf && off < len) {
                ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        free(buf);
                        return NULL;
                }
                off += (size_t)n;
        }
        if (buf)
                buf[len] = '\0';
        return buf;
}

/* A pool's daemon (brig_pool_start, pool.c): its errors go to the ready
 * pipe as text, as the daemon's own do. */
static _Noreturn void pool_main(json_t *pool, char *pol_text)
{
        const char *dir = json_string_value(json_object_get(pool, "dir"));
        const char *key = json_string_value(json_object_get(pool, "key"));
        const char *ws = json_string_value(json_object_get(pool, "workspace"));
        json_int_t size = json_integer_value(json_object_get(pool, "size"));
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        int r = !dir || !key || !ws || size <= 0 || size > UINT32_MAX || !pol_text || !p
                        ? brig_err(&err, EBADMSG, "malformed pool configuration from libbrig")
                        : brig_policy_load_string(p, "policy", pol_text, &err);
        /* A workspace the policy does not name is the caller's cwd, ours
         * too (posix_spawn keeps it; the daemon goes back to its path for
         * each member): set here, it would change the policy's JSON,
         * which names the pool and its members. */
        free(pol_text);
        if (r < 0) {
                char text[1024];
                snprintf(text, sizeof text, "brig-supervisor: %s", err && err->msg ? err->msg : "failed");
                fprintf(stderr, "%s\n", text);
                (void)!write(SUPERVISOR_FD_READY, text, strlen(text));
                exit(BRIG_EXIT_SETUP);
        }
        /* The strings live in the configuration, which lives as long as we do. */
        pool_supervise(dir, key, ws, p, (unsigned)size, SUPERVISOR_FD_READY);
}

int main(int argc, char **argv)
{
        (void)argc;
        (void)argv;
        /* Our own program file, and anything else past our descriptors. */
        syscall(SYS_close_range, SUPERVISOR_FD_EXE, ~0U, 0);
        /* Executed as /proc/self/fd/N: say who we are in ps. */
        prctl(PR_SET_NAME, "brig-supervisor");
        /* What libbrig hands over: a pipe to report on and a memfd sealed
         * against writes with the configuration; a shell's inherited
         * descriptors or files are not that. */
        struct stat ready_st;
        int seals = fcntl(SUPERVISOR_FD_CONFIG, F_GET_SEALS);
        const int sealed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        if (fstat(SUPERVISOR_FD_READY, &ready_st) < 0 || !S_ISFIFO(ready_st.st_mode) || seals < 0 ||
            (seals & sealed) != sealed) {
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
        /* SUPERVISOR_FD_HOLD stays open as long as we live: its lock says
         * so to the reaper (an ephemeral sandbox's state is ours to remove). */
        for (int fd = SUPERVISOR_FD_READY; fd <= SUPERVISOR_FD_HOLD; fd++)
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
        json_t *pool = json_object_get(doc, "pool");
        if (json_is_object(pool))
                pool_main(pool, pol_text);
        struct sandbox_create_opts opts = {
                .overlay = json_is_true(json_object_get(doc, "overlay")),
                .ephemeral = json_is_true(json_object_get(doc, "ephemeral")),
                .owned = json_is_true(json_object_get(doc, "owned")),
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
                /* the log says who already; the creator hears it located */
                fprintf(stderr, "brig-supervisor: %s\n", err && err->msg ? err->msg : "failed");
                control_tell_ready(SUPERVISOR_FD_READY, err, "brig-supervisor");
                return BRIG_EXIT_SETUP;
        }
        /* The strings live in doc, which lives as long as we do. */
        sandbox_supervise(dir, name, p, &opts, SUPERVISOR_FD_READY);
}
