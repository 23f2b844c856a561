/* tools.c — brig mcp's tools (docs/mcp.md), each a call or a few into
 * libbrig's handle API: commands through brig_exec_start, files through
 * brig_sandbox_file (inside the sandbox's mount namespace, as the sandbox
 * user), state through brig_sandbox_snapshot/restore/diff/reset.
 *
 * One table describes each tool's arguments: the input JSON Schema that
 * tools/list gives out is made from it, and every call is checked against
 * the same table before anything runs (unknown argument, wrong type,
 * missing one: the tool's error, nothing run). No argument reaches the
 * policy: the sandbox is the one the command line made. */
#define _GNU_SOURCE
#include "mcp/mcp.h"
#include "mcp/jsonrpc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum arg_type { A_STRING, A_INT, A_BOOL, A_STRV, A_ENV, A_CMD };

struct arg {
        const char *name;
        enum arg_type type;
        bool required;
        const char *desc;
        json_int_t min, max;  /* A_INT */
};

struct tool {
        const char *name, *title, *desc;
        struct arg args[8];
        const char *output_schema;  /* JSON text */
        bool read_only, destructive, idempotent;
        json_t *(*run)(struct mcp *m, json_t *args, brig_error **err);
};

/* ---- helpers ------------------------------------------------------------- */

static const char *arg_str(json_t *a, const char *k)
{
        return json_string_value(json_object_get(a, k));
}

static json_int_t arg_int(json_t *a, const char *k, json_int_t dflt)
{
        json_t *v = json_object_get(a, k);
        return v ? json_integer_value(v) : dflt;
}

static bool arg_bool(json_t *a, const char *k)
{
        return json_is_true(json_object_get(a, k));
}

static int tool_fail(brig_error **err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tool_fail(brig_error **err, int errnum, const char *fmt, ...)
{
        brig_error *e = calloc(1, sizeof *e);
        if (e) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(&e->msg, fmt, ap) < 0)
                        e->msg = NULL;
                va_end(ap);
                e->errnum = errnum;
                e->exit_code = 1;
        }
        if (err && !*err)
                *err = e;
        else
                brig_error_free(&e);
        return -errnum;
}

/* A path inside: absolute as it is, relative to the workspace. */
static char *inside_path(struct mcp *m, const char *path)
{
        char *out = NULL;
        if (!path || !*path)
                return strdup(m->workspace);
        if (path[0] == '/')
                return strdup(path);
        if (asprintf(&out, "%s/%s", m->workspace, path) < 0)
                return NULL;
        return out;
}

static int new_memfd(brig_error **err)
{
        int fd = memfd_create("brig-mcp", MFD_CLOEXEC);
        if (fd < 0)
                tool_fail(err, errno, "memfd_create: %s", strerror(errno));
        return fd;
}

static char *fd_contents(int fd, size_t *len)
{
        off_t end = lseek(fd, 0, SEEK_END);
        if (end < 0 || lseek(fd, 0, SEEK_SET) < 0)
                return NULL;
        char *buf = malloc((size_t)end + 1);
        size_t n = 0;
        while (buf && n < (size_t)end) {
                ssize_t r = read(fd, buf + n, (size_t)end - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        if (buf)
                buf[n] = '\0';
        *len = n;
        return buf;
}

static int write_all_fd(int fd, const char *p, size_t n)
{
        while (n) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* One file operation with its data in a memfd (in: what WRITE stores). */
/* brig_sandbox_file's cap with max_bytes 0 (brig.h): what one read or
 * write of a file moves */
#define FILE_CAP ((size_t)64 << 20)

static int file_op(struct mcp *m, enum brig_file_op op, const char *path, const char *in, size_t in_len,
                   uint32_t mode, char **out, size_t *out_len, brig_error **err)
{
        int r = mcp_sandbox(m, err);
        if (r < 0)
                return r;
        int fd = -1;
        if (op != BRIG_FILE_MKDIR && op != BRIG_FILE_REMOVE) {
                fd = new_memfd(err);
                if (fd < 0)
                        return -EIO;
                if (in && (r = write_all_fd(fd, in, in_len)) < 0) {
                        close(fd);
                        return tool_fail(err, -r, "stage the content: %s", strerror(-r));
                }
                lseek(fd, 0, SEEK_SET);
        }
        brig_file_spec f = { .size = sizeof f, .op = op, .path = path, .fd = fd, .mode = mode };
        brig_error *ferr = NULL;
        r = brig_sandbox_file(m->sb, &f, &ferr);
        if (r < 0 && op == BRIG_FILE_READ && ferr && ferr->errnum == EFBIG) {
                /* the library's advice is brig cp's option, which brig mcp has not */
                brig_error_free(&ferr);
                r = tool_fail(err, EFBIG, "'%s' is larger than the %zu MiB brig mcp reads of one file: read a part "
                                          "of it with run_command (head -c N, tail -c N, sed -n 'A,Bp')",
                              path, FILE_CAP >> 20);
        }
        if (ferr && err && !*err) {
                *err = ferr;
                ferr = NULL;
        }
        brig_error_free(&ferr);
        if (r == 0 && out) {
                *out = fd_contents(fd, out_len);
                if (!*out)
                        r = tool_fail(err, ENOMEM, "out of memory");
        }
        if (fd >= 0)
                close(fd);
        return r;
}

/* ---- run_command --------------------------------------------------------- */

/* What a stream keeps of a command's output: its first half-limit bytes
 * and its last, with the number of bytes between them that were cut. */
struct capture {
        char *head, *tail;
        size_t head_len, half;
        size_t tail_len, tail_pos;  /* a ring of `half` bytes */
        uint64_t total;
};

static int capture_init(struct capture *c, size_t limit)
{
        *c = (struct capture){ .half = limit / 2 ? limit / 2 : 1 };
        c->head = malloc(c->half);
        c->tail = malloc(c->half);
        return c->head && c->tail ? 0 : -ENOMEM;
}

static void capture_add(struct capture *c, const char *p, size_t n)
{
        c->total += n;
        size_t h = c->half - c->head_len < n ? c->half - c->head_len : n;
        memcpy(c->head + c->head_len, p, h);
        c->head_len += h;
        p += h;
        n -= h;
        if (n >= c->half) {  /* only the last `half` bytes can stay */
                p += n - c->half;
                n = c->half;
        }
        for (size_t i = 0; i < n; i++) {
                c->tail[c->tail_pos] = p[i];
                c->tail_pos = (c->tail_pos + 1) % c->half;
        }
        c->tail_len = c->tail_len + n > c->half ? c->half : c->tail_len + n;
}

static uint64_t capture_cut(const struct capture *c)
{
        return c->total - c->head_len - c->tail_len;
}

static json_t *capture_json(const struct capture *c, const char *stream)
{
        size_t size = c->head_len + c->tail_len + 256;
        char *s = malloc(size);
        if (!s)
                return json_string("");
        memcpy(s, c->head, c->head_len);
        size_t n = c->head_len;
        uint64_t cut = capture_cut(c);
        if (cut)
                n += (size_t)snprintf(s + n, size - n,
                                      "\n[brig: %llu bytes of %s cut here (%llu in all; the first and last %zu "
                                      "kept); send it to a file and read that with read_file]\n",
                                      (unsigned long long)cut, stream, (unsigned long long)c->total, c->half);
        size_t start = c->tail_len < c->half ? 0 : c->tail_pos;
        for (size_t i = 0; i < c->tail_len; i++)
                s[n++] = c->tail[(start + i) % c->half];
        json_t *j = rpc_string_lossy(s, n);
        free(s);
        return j;
}

static void capture_free(struct capture *c)
{
        free(c->head);
        free(c->tail);
}

static bool drain(int fd, struct capture *c)
{
        char buf[65536];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n > 0) {
                        capture_add(c, buf, (size_t)n);
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);  /* true: closed */
        }
}

struct ran {
        brig_result res;
        int r;                 /* brig_exec_wait's */
        brig_error *err;       /* the exec's failure */
        json_t *report;        /* brig_exec_report_json, or NULL */
        struct capture out, errs;
        bool interrupted;      /* the session ended meanwhile */
};

/* Run argv in the sandbox with pipes and wait, keeping limit bytes of each
 * stream. The session's signals end the wait (the command is killed). */
static int run_captured(struct mcp *m, char *const *argv, char *const *env, const char *cwd, uint64_t timeout_ms,
                        size_t limit, struct ran *ran, brig_error **err)
{
        *ran = (struct ran){ 0 };
        if (capture_init(&ran->out, limit) < 0 || capture_init(&ran->errs, limit) < 0)
                return tool_fail(err, ENOMEM, "out of memory");
        int r = mcp_sandbox(m, err);
        if (r < 0)
                return r;
        brig_exec_spec spec = { .size = sizeof spec, .stdio = BRIG_STDIO_PIPES, .argv = argv, .env = env,
                                .cwd = cwd, .timeout_ms = timeout_ms };
        brig_exec *x = NULL;
        r = brig_exec_start(m->sb, &spec, &x, err);
        if (r < 0)
                return r;
        brig_error *e = NULL;
        (void)brig_exec_close_stdin(x, &e);
        brig_error_free(&e);
        bool open1 = true, open2 = true;
        for (;;) {
                struct pollfd p[6] = {
                        { .fd = brig_exec_fd(x), .events = POLLIN },
                        { .fd = open1 ? brig_exec_stdio_fd(x, 1) : -1, .events = POLLIN },
                        { .fd = open2 ? brig_exec_stdio_fd(x, 2) : -1, .events = POLLIN },
                        { .fd = m->sig_fd, .events = POLLIN },
                        /* the client: a cancellation of this request (what else
                         * it sends waits, up to MCP_PENDING_MAX: then it waits
                         * in the pipe) */
                        { .fd = m->eof || m->pending_bytes > MCP_PENDING_MAX ? -1 : 0, .events = POLLIN },
                        /* the client's end of our stdout: closed (POLLERR on a
                         * pipe, POLLHUP on a socket), nobody will read the
                         * answer, and the session ends now rather than when
                         * the command does (up to a day later) */
                        { .fd = 1, .events = 0 },
                };
                if (poll(p, 6, -1) < 0 && errno != EINTR)
                        break;
                if (p[5].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                        ran->interrupted = true;
                        m->stop = true;
                        break;
                }
                if (p[1].revents)
                        open1 = !drain(p[1].fd, &ran->out);
                if (p[2].revents)
                        open2 = !drain(p[2].fd, &ran->errs);
                if (p[4].revents)
                        mcp_read_input(m);
                /* The end of stdin lets the command finish (what was sent
                 * before it is still answered); a signal ends the session. */
                if (p[3].revents || m->cancelled) {
                        /* brig_exec_close below kills the command */
                        ran->interrupted = true;
                        m->stop |= !m->cancelled;
                        break;
                }
                if (p[0].revents) {
                        /* Ended: what it wrote is in the pipes now; a child
                         * it left running may hold them open, so read what
                         * is there and stop. */
                        if (open1)
                                drain(brig_exec_stdio_fd(x, 1), &ran->out);
                        if (open2)
                                drain(brig_exec_stdio_fd(x, 2), &ran->errs);
                        break;
                }
        }
        if (!ran->interrupted) {
                ran->r = brig_exec_wait(x, BRIG_WAIT_NOHANG, &ran->res, &ran->err);
                char *rep = brig_exec_report_json(x, &e);
                brig_error_free(&e);
                ran->report = rep ? json_loads(rep, 0, NULL) : NULL;
                free(rep);
        }
        brig_exec_close(x);
        if (ran->interrupted)
                return tool_fail(err, EINTR, m->cancelled ? "cancelled by the client: the command was killed"
                                                          : "the session ended while the command ran: it was killed");
        return 0;
}

static void ran_free(struct ran *ran)
{
        capture_free(&ran->out);
        capture_free(&ran->errs);
        brig_error_free(&ran->err);
        json_decref(ran->report);
}

static char *allowed_hosts(struct mcp *m)
{
        json_t *hosts = json_object_get(json_object_get(m->policy_json, "network"), "allow_hosts");
        char *s = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&s, &n);
        size_t i;
        json_t *h;
        json_array_foreach(hosts, i, h)
                fprintf(f, "%s%s", i ? ", " : "", json_string_value(h));
        if (!json_array_size(hosts))
                fputs("none", f);
        fclose(f);
        return s;
}

/* The report's refusals as lines a model can act on, each also kept for
 * network_status and said as a warning. */
static json_t *refusal_lines(struct mcp *m, json_t *report, const char *fallback)
{
        json_t *lines = json_array();
        json_t *list = json_object_get(report, "refusals");
        char *allowed = allowed_hosts(m);
        size_t i;
        json_t *f;
        json_array_foreach(list, i, f) {
                const char *kind = json_string_value(json_object_get(f, "kind")) ?: "";
                const char *what = json_string_value(json_object_get(f, "what")) ?: "";
                const char *why = json_string_value(json_object_get(f, "why")) ?: "";
                const char *allow = json_string_value(json_object_get(f, "allow_with"));
                json_int_t count = json_integer_value(json_object_get(f, "count"));
                bool net = strcmp(kind, "connection") == 0 || strcmp(kind, "dns") == 0;
                char times[32] = "";
                if (count > 1)
                        snprintf(times, sizeof times, " (%lld times)", (long long)count);
                /* "connection to evil.example:443 refused: host not in the
                 * allow list (allowed: pypi.org); the user can allow it
                 * with --allow-host evil.example" */
                char *line = NULL;
                if (asprintf(&line, "%s%s%s refused%s: %s%s%s%s%s%s", net ? (kind[0] == 'd' ? "DNS lookup of " :
                                                                             "connection to ") : kind,
                             net ? "" : " ", what, times, why, net ? " (allowed: " : "", net ? allowed : "",
                             net ? ")" : "", allow ? "; the user can allow it with " : "", allow ? allow : "") < 0)
                        continue;
                json_array_append_new(lines, rpc_string_lossy(line, strlen(line)));
                mcp_log(m, "warning", "%s", line);
                free(line);
                /* the session's record, for network_status */
                bool merged = false;
                size_t j;
                json_t *g;
                json_array_foreach(m->refusals, j, g)
                        if (json_equal(json_object_get(g, "kind"), json_object_get(f, "kind")) &&
                            json_equal(json_object_get(g, "what"), json_object_get(f, "what")) &&
                            json_equal(json_object_get(g, "why"), json_object_get(f, "why"))) {
                                json_object_set_new(g, "count", json_integer(json_integer_value(
                                                                         json_object_get(g, "count")) + count));
                                merged = true;
                        }
                if (!merged && json_array_size(m->refusals) < 200)
                        json_array_append_new(m->refusals, json_deep_copy(f));
        }
        if (!json_array_size(list) && fallback && *fallback)
                json_array_append_new(lines, rpc_string_lossy(fallback, strlen(fallback)));
        free(allowed);
        return lines;
}

static const char *ended_words(const struct ran *ran, uint64_t timeout_ms, char *buf, size_t size)
{
        const brig_result *res = &ran->res;
        if (ran->r < 0) {
                snprintf(buf, size, "%s", ran->err && ran->err->msg ? ran->err->msg : "the command did not run");
                return buf;
        }
        switch (res->reason) {
        case BRIG_REASON_EXITED:
                snprintf(buf, size, "exited with status %d", res->exit_code);
                break;
        case BRIG_REASON_SIGNALED:
                snprintf(buf, size, "killed by signal %d (%s)", res->signal, strsignal(res->signal));
                break;
        case BRIG_REASON_TIMEOUT:
                snprintf(buf, size, "timed out after %llu s: the command and everything it started were stopped "
                                    "(exit 124); give it a larger timeout_seconds, or run it with background=true",
                         (unsigned long long)(timeout_ms / 1000));
                break;
        case BRIG_REASON_OOM:
                snprintf(buf, size, "%s: the command was killed; the limit is the user's (brig --memory): use less "
                                    "memory (fewer parallel jobs, smaller inputs)",
                         res->summary[0] ? res->summary : "the sandbox's memory limit was reached");
                break;
        case BRIG_REASON_PIDS:
                snprintf(buf, size, "%s: start fewer processes or threads (the limit is the user's, brig --pids)",
                         res->summary[0] ? res->summary : "the process limit was reached");
                break;
        case BRIG_REASON_SECCOMP:
                snprintf(buf, size, "%s", res->summary[0] ? res->summary : "killed for a refused system call");
                break;
        default:
                snprintf(buf, size, "%s", res->summary[0] ? res->summary : brig_reason_name(res->reason));
        }
        return buf;
}

/* Names an environment variable may have inside. */
static bool env_name_ok(const char *s)
{
        if (!*s || (*s >= '0' && *s <= '9'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
                        return false;
        return true;
}


static void strv_free_all(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

#define DEFAULT_TIMEOUT_S 120
#define DEFAULT_OUTPUT 30000

static json_t *tool_run_command(struct mcp *m, json_t *a, brig_error **err)
{
        json_t *cmd = json_object_get(a, "command");
        char **argv = NULL, **env = NULL;
        json_t *out = NULL;
        _autofree_ char *cwd = json_object_get(a, "cwd") ? inside_path(m, arg_str(a, "cwd")) : NULL;
        if (json_is_string(cmd)) {
                if (!*json_string_value(cmd) || rpc_has_nul(cmd)) {
                        tool_fail(err, EINVAL, "command: an empty string or one holding a NUL character");
                        return NULL;
                }
                argv = calloc(4, sizeof *argv);
                if (argv) {
                        argv[0] = strdup("/bin/sh");
                        argv[1] = strdup("-c");
                        argv[2] = strdup(json_string_value(cmd));
                }
        } else {
                size_t n = json_array_size(cmd), i;
                json_t *s;
                if (!n) {
                        tool_fail(err, EINVAL, "command: an empty argv");
                        return NULL;
                }
                argv = calloc(n + 1, sizeof *argv);
                json_array_foreach(cmd, i, s) {
                        if (rpc_has_nul(s)) {
                                strv_free_all(argv);
                                tool_fail(err, EINVAL, "command[%zu] holds a NUL character", i);
                                return NULL;
                        }
                        if (argv)
                                argv[i] = strdup(json_string_value(s));
                }
        }
        json_t *envo = json_object_get(a, "env");
        size_t ne = 0;
        const char *k;
        json_t *v;
        env = calloc(json_object_size(envo) + 1, sizeof *env);
        json_object_foreach(envo, k, v) {
                if (!env_name_ok(k) || rpc_has_nul(v)) {
                        tool_fail(err, EINVAL, "env: '%.60s' is not a variable name (letters, digits, _) or its "
                                               "value holds a NUL", k);
                        goto out;
                }
                if (env && asprintf(&env[ne++], "%s=%s", k, json_string_value(v)) < 0)
                        env[--ne] = NULL;
        }
        if (!argv || !env) {
                tool_fail(err, ENOMEM, "out of memory");
                goto out;
        }
        if (arg_bool(a, "background")) {
                int r = mcp_sandbox(m, err);
                if (r < 0)
                        goto out;
                brig_exec_opts o = { .argv = argv, .env = env, .cwd = cwd, .tty = BRIG_TTY_NEVER, .detach = true };
                brig_result res;
                if (brig_sandbox_exec(m->name, &o, &res, err) < 0)
                        goto out;
                out = json_pack("{s:b, s:i, s:s, s:s}", "background", 1, "pid", res.detached_pid, "log",
                                res.detached_log, "ended", "started in the background");
                char note[300];
                snprintf(note, sizeof note, "running as pid %d; its output goes to %s inside (read_file it); stop "
                                            "it with run_command \"kill %d\"; it ends with the session",
                         res.detached_pid, res.detached_log, res.detached_pid);
                json_object_set_new(out, "note", json_string(note));
                goto out;
        }
        uint64_t timeout_ms = (uint64_t)arg_int(a, "timeout_seconds", DEFAULT_TIMEOUT_S) * 1000;
        bool capped = m->timeout_cap_ms && timeout_ms > m->timeout_cap_ms;
        if (capped)
                timeout_ms = m->timeout_cap_ms;  /* the user's --timeout: the model cannot run longer */
        size_t limit = (size_t)arg_int(a, "max_output_bytes", DEFAULT_OUTPUT);
        struct ran ran;
        int r = run_captured(m, argv, env, cwd, timeout_ms, limit, &ran, err);
        if (r == 0) {
                char words[1024];
                out = json_object();
                json_object_set_new(out, "exit_code", json_integer(ran.r < 0 && !ran.res.exit_code ? 125 : ran.res.exit_code));
                json_object_set_new(out, "reason", json_string(ran.r < 0 ? "not-run" : brig_reason_name(ran.res.reason)));
                ended_words(&ran, timeout_ms, words, sizeof words);
                json_object_set_new(out, "ended", rpc_string_lossy(words, strlen(words)));
                json_object_set_new(out, "stdout", capture_json(&ran.out, "stdout"));
                json_object_set_new(out, "stderr", capture_json(&ran.errs, "stderr"));
                json_object_set_new(out, "stdout_cut_bytes", json_integer((json_int_t)capture_cut(&ran.out)));
                json_object_set_new(out, "stderr_cut_bytes", json_integer((json_int_t)capture_cut(&ran.errs)));
                json_object_set_new(out, "duration_ms", json_integer((json_int_t)ran.res.duration_ms));
                json_object_set_new(out, "refusals", refusal_lines(m, ran.report, ran.res.refusals));
                if (capped)
                        json_object_set_new(out, "timeout_note",
                                            json_string("timeout_seconds was lowered to the user's --timeout"));
                /* the run report, as a resource */
                unsigned n = ++m->runs;
                json_t *rep = ran.report ? json_incref(ran.report) : json_object();
                json_object_set_new(out, "report", json_sprintf("brig://reports/%u", n));
                json_t *cmdtext = rpc_string_lossy(argv[argv[1] && strcmp(argv[0], "/bin/sh") == 0 ? 2 : 0],
                                                   strlen(argv[argv[1] && strcmp(argv[0], "/bin/sh") == 0 ? 2 : 0]));
                json_array_append_new(m->reports, json_pack("{s:i, s:o, s:o}", "n", n, "command", cmdtext, "report", rep));
                while (json_array_size(m->reports) > MCP_REPORTS_KEPT)
                        json_array_remove(m->reports, 0);
                if (m->initialized)
                        mcp_send(m, rpc_notification("notifications/resources/list_changed", NULL));
        }
        ran_free(&ran);
out:
        strv_free_all(argv);
        strv_free_all(env);
        return out;
}

/* ---- files --------------------------------------------------------------- */

#define SHOWN_MAX (256u << 10)  /* what read_file returns at most in one call */
#define EDIT_MAX FILE_CAP  /* edit_file's result is written whole */

static json_t *tool_read_file(struct mcp *m, json_t *a, brig_error **err)
{
        _autofree_ char *path = inside_path(m, arg_str(a, "path"));
        bool bytes = json_object_get(a, "offset") || json_object_get(a, "length");
        bool lines = json_object_get(a, "start_line") || json_object_get(a, "end_line");
        if (bytes && lines) {
                tool_fail(err, EINVAL, "give a byte range (offset, length) or a line range "
                                       "(start_line, end_line), not both");
                return NULL;
        }
        char *data = NULL;
        size_t n = 0;
        if (file_op(m, BRIG_FILE_READ, path, NULL, 0, 0, &data, &n, err) < 0)
                return NULL;
        size_t from = 0, to = n;
        json_t *out = json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)n);
        if (bytes) {
                size_t off = (size_t)arg_int(a, "offset", 0), len = (size_t)arg_int(a, "length", (json_int_t)n);
                from = off < n ? off : n;
                to = len < n - from ? from + len : n;
                json_object_set_new(out, "offset", json_integer((json_int_t)from));
        } else if (lines) {
                size_t first = (size_t)arg_int(a, "start_line", 1), last = (size_t)arg_int(a, "end_line", 0);
                size_t line = 1, i = 0;
                for (; i < n && line < first; i++)
                        if (data[i] == '\n')
                                line++;
                from = i;
                for (; i < n && (!last || line <= last); i++)
                        if (data[i] == '\n' && ++line > last && last) {
                                i++;
                                break;
                        }
                to = i;
                json_object_set_new(out, "start_line", json_integer((json_int_t)first));
        }
        size_t shown = to - from > SHOWN_MAX ? SHOWN_MAX : to - from;
        json_object_set_new(out, "content", rpc_string_lossy(data + from, shown));
        json_object_set_new(out, "binary", json_boolean(memchr(data, '\0', n < 8192 ? n : 8192) != NULL));
        if (shown < to - from) {
                char note[200];
                snprintf(note, sizeof note, "%zu bytes not shown past offset %zu (at most %u at once): read on with "
                                            "offset and length", to - from - shown, from + shown, SHOWN_MAX);
                json_object_set_new(out, "note", json_string(note));
        }
        free(data);
        return out;
}

static int make_parents(struct mcp *m, const char *path, brig_error **err)
{
        _autofree_ char *p = strdup(path);
        if (!p)
                return tool_fail(err, ENOMEM, "out of memory");
        for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
                *s = '\0';
                brig_error *e = NULL;
                int r = file_op(m, BRIG_FILE_MKDIR, p, NULL, 0, 0, NULL, NULL, &e);
                if (r < 0 && r != -EEXIST) {
                        if (err && !*err)
                                *err = e;
                        else
                                brig_error_free(&e);
                        return r;
                }
                brig_error_free(&e);
                *s = '/';
        }
        return 0;
}

static json_t *tool_write_file(struct mcp *m, json_t *a, brig_error **err)
{
        _autofree_ char *path = inside_path(m, arg_str(a, "path"));
        json_t *content = json_object_get(a, "content");
        if (arg_bool(a, "create_directories") && make_parents(m, path, err) < 0)
                return NULL;
        if (file_op(m, BRIG_FILE_WRITE, path, json_string_value(content), json_string_length(content),
                    (uint32_t)arg_int(a, "mode", 0), NULL, NULL, err) < 0)
                return NULL;
        return json_pack("{s:s, s:I}", "path", path, "bytes_written", (json_int_t)json_string_length(content));
}

static json_t *tool_edit_file(struct mcp *m, json_t *a, brig_error **err)
{
        _autofree_ char *path = inside_path(m, arg_str(a, "path"));
        json_t *olds = json_object_get(a, "old_string"), *news = json_object_get(a, "new_string");
        const char *old = json_string_value(olds), *new = json_string_value(news);
        size_t old_len = json_string_length(olds), new_len = json_string_length(news);
        if (!old_len) {
                tool_fail(err, EINVAL, "old_string is empty");
                return NULL;
        }
        char *data = NULL, *st = NULL;
        size_t n = 0, st_len = 0;
        /* The file's mode, kept; and not a symbolic link: the read would
         * follow it and the write replace it, a link turned into a copy of
         * what it named, with the link's mode (0777). */
        uint32_t mode = 0;
        if (file_op(m, BRIG_FILE_STAT, path, NULL, 0, 0, &st, &st_len, NULL) == 0) {
                json_t *sj = json_loadb(st, st_len, 0, NULL);
                mode = (uint32_t)json_integer_value(json_object_get(sj, "mode")) & 0777;
                bool link = strcmp(json_string_value(json_object_get(sj, "type")) ?: "", "symlink") == 0;
                json_decref(sj);
                free(st);
                st = NULL;
                if (link) {
                        tool_fail(err, ELOOP, "%s is a symbolic link: edit the file it names (list_directory shows "
                                              "its target)", path);
                        return NULL;
                }
        }
        if (file_op(m, BRIG_FILE_READ, path, NULL, 0, 0, &data, &n, err) < 0)
                return NULL;
        json_t *out = NULL;
        size_t count = 0;
        for (const char *p = data; (p = memmem(p, (size_t)(data + n - p), old, old_len)); p += old_len)
                count++;
        if (count == 0 || (count > 1 && !arg_bool(a, "replace_all"))) {
                if (count)
                        tool_fail(err, EEXIST, "%s: old_string occurs %zu times; give more context to make it "
                                               "unique, or replace_all=true", path, count);
                else
                        tool_fail(err, ENOENT, "%s: old_string not found (it must match exactly, whitespace "
                                               "included)", path);
                goto out;
        }
        /* the result's size before any of it is made: past the write's cap
         * (64 MiB) it is refused, not built (a 512 KiB file of "a", each
         * replaced by 2 KiB, took a gigabyte before the write refused it) */
        size_t kept = n - count * old_len, cap = EDIT_MAX;
        if (new_len && count > (cap - (kept < cap ? kept : cap)) / new_len) {
                tool_fail(err, EFBIG, "%s: the edit would make the file larger than %zu bytes, the most a write "
                                      "takes: replace fewer occurrences at once", path, cap);
                goto out;
        }
        size_t size = kept + count * new_len;
        char *buf = malloc(size + 1), *w = buf;
        const char *p = data;
        for (const char *q; buf && (q = memmem(p, (size_t)(data + n - p), old, old_len)); p = q + old_len) {
                memcpy(w, p, (size_t)(q - p));
                w += q - p;
                memcpy(w, new, new_len);
                w += new_len;
        }
        if (buf)
                memcpy(w, p, (size_t)(data + n - p));
        if (buf && file_op(m, BRIG_FILE_WRITE, path, buf, size, mode, NULL, NULL, err) == 0)
                out = json_pack("{s:s, s:I}", "path", path, "replacements", (json_int_t)count);
        else if (!buf)
                tool_fail(err, ENOMEM, "out of memory");
        free(buf);
out:
        free(data);
        free(st);
        return out;
}

static json_t *tool_list_directory(struct mcp *m, json_t *a, brig_error **err)
{
        _autofree_ char *path = inside_path(m, arg_str(a, "path"));
        char *data = NULL;
        size_t n = 0;
        if (file_op(m, BRIG_FILE_LIST, path, NULL, 0, 0, &data, &n, err) < 0)
                return NULL;
        json_t *entries = json_loadb(data, n, 0, NULL);
        free(data);
        if (!json_is_array(entries)) {
                json_decref(entries);
                tool_fail(err, EBADMSG, "list_directory %s: an answer that is not a list", path);
                return NULL;
        }
        return json_pack("{s:s, s:o}", "path", path, "entries", entries);
}

#define SEARCH_TIMEOUT_MS 60000

static json_t *tool_search_files(struct mcp *m, json_t *a, brig_error **err)
{
        const char *glob = arg_str(a, "glob"), *regex = arg_str(a, "regex");
        if (!glob && !regex) {
                tool_fail(err, EINVAL, "give glob (file names), regex (file contents), or both");
                return NULL;
        }
        _autofree_ char *path = inside_path(m, arg_str(a, "path"));
        size_t max = (size_t)arg_int(a, "max_results", 200);
        _autofree_ char *include = NULL, *where = NULL;
        /* The sandbox's own find and grep, each word an argument of its own:
         * the pattern is never an option (-e, -name) nor shell text. */
        char *find_argv[] = { "find", path, strchr(glob ? glob : "", '/') ? "-path" : "-name", NULL, "-print0", NULL };
        char *grep_argv[] = { "grep", "-rnIZ", "--color=never", "-E", "-e", (char *)regex, NULL, "--", path, NULL };
        if (glob && strchr(glob, '/') && glob[0] != '/' && asprintf(&where, "%s/%s", path, glob) < 0)
                where = NULL;
        find_argv[3] = where ? where : (char *)glob;
        if (regex && glob && asprintf(&include, "--include=%s", glob) >= 0) {
                grep_argv[6] = include;
        } else {
                grep_argv[6] = "--";
                grep_argv[7] = path;
                grep_argv[8] = NULL;
        }
        /* A regex the model picks can take grep minutes (backreferences):
         * never longer than the user's --timeout, as run_command. */
        uint64_t timeout_ms = SEARCH_TIMEOUT_MS;
        if (m->timeout_cap_ms && m->timeout_cap_ms < timeout_ms)
                timeout_ms = m->timeout_cap_ms;
        struct ran ran;
        if (run_captured(m, regex ? grep_argv : find_argv, NULL, NULL, timeout_ms, 8u << 20, &ran, err) < 0) {
                ran_free(&ran);
                return NULL;
        }
        json_t *out = NULL;
        int code = ran.res.exit_code;
        if (ran.r == 0 && ran.res.reason == BRIG_REASON_TIMEOUT) {
                tool_fail(err, ETIMEDOUT, "%s was stopped after %llu ms (%s); narrow the path or "
                          "simplify the regex (backreferences are slow)", regex ? "grep" : "find",
                          (unsigned long long)timeout_ms,
                          timeout_ms < SEARCH_TIMEOUT_MS ? "the user's --timeout" : "the search's own limit");
                ran_free(&ran);
                return NULL;
        }
        if (ran.r < 0 || (code != 0 && !(regex && code == 1))) {
                json_t *e = capture_json(&ran.errs, "stderr");
                tool_fail(err, EIO, "%s exited %d: %s", regex ? "grep" : "find", code,
                          json_string_value(e));
                json_decref(e);
                ran_free(&ran);
                return NULL;
        }
        json_t *matches = json_array();
        const char *p = ran.out.head, *end = ran.out.head + ran.out.head_len;
        while (p < end && json_array_size(matches) < max) {
                const char *z = memchr(p, '\0', (size_t)(end - p));
                if (!z)
                        break;
                json_t *o = json_object();
                json_object_set_new(o, "path", rpc_string_lossy(p, (size_t)(z - p)));
                p = z + 1;
                if (regex) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        if (!nl) {
                                json_decref(o);
                                break;
                        }
                        char *colon = memchr(p, ':', (size_t)(nl - p));
                        json_object_set_new(o, "line", json_integer(strtoll(p, NULL, 10)));
                        const char *text = colon ? colon + 1 : p;
                        size_t tl = (size_t)(nl - text) > 500 ? 500 : (size_t)(nl - text);
                        json_object_set_new(o, "text", rpc_string_lossy(text, tl));
                        p = nl + 1;
                }
                json_array_append_new(matches, o);
        }
        bool truncated = p < end || capture_cut(&ran.out) || ran.out.tail_len;
        out = json_pack("{s:s, s:o, s:b}", "path", path, "matches", matches, "truncated", truncated);
        ran_free(&ran);
        return out;
}

/* ---- state --------------------------------------------------------------- */

static json_t *parsed(char *text)
{
        json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        return j ? j : json_null();
}

static json_t *tool_snapshot(struct mcp *m, json_t *a, brig_error **err)
{
        char tag[80];
        if (arg_str(a, "tag"))
                snprintf(tag, sizeof tag, "%s", arg_str(a, "tag"));
        else
                snprintf(tag, sizeof tag, "snap-%ld", (long)time(NULL));
        if (mcp_sandbox(m, err) < 0 || brig_sandbox_snapshot(m->name, tag, err) < 0)
                return NULL;
        brig_error *e = NULL;
        json_t *list = parsed(brig_sandbox_snapshots_json(m->name, &e));
        brig_error_free(&e);
        return json_pack("{s:s, s:o}", "tag", tag, "snapshots", list);
}

static json_t *tool_restore(struct mcp *m, json_t *a, brig_error **err)
{
        const char *tag = arg_str(a, "tag");
        if (mcp_sandbox(m, err) < 0 || brig_sandbox_restore(m->name, tag, err) < 0)
                return NULL;
        return json_pack("{s:s, s:s}", "tag", tag, "note",
                         "the files are as they were at the snapshot; processes running before (background "
                         "commands) were stopped and are not brought back");
}

static const char *const *strv_arg(json_t *a, const char *k, const char **buf, size_t max)
{
        json_t *v = json_object_get(a, k), *s;
        size_t i;
        if (!v)
                return NULL;
        json_array_foreach(v, i, s)
                if (i + 1 < max)
                        buf[i] = json_string_value(s);
        buf[json_array_size(v) < max ? json_array_size(v) : max - 1] = NULL;
        return buf;
}

static int need_overlay(struct mcp *m, const char *tool, brig_error **err)
{
        if (m->overlay)
                return 0;
        return tool_fail(err, EOPNOTSUPP, "%s: this session writes the workspace directly; the user starts brig mcp "
                                          "with --overlay for a layer that %s can work on", tool, tool);
}

static json_t *tool_diff(struct mcp *m, json_t *a, brig_error **err)
{
        /* bind mode too: what changed since the session's sandbox was made */
        if (mcp_sandbox(m, err) < 0)
                return NULL;
        const char *pb[65], *eb[65];
        brig_change_filter f = { .paths = strv_arg(a, "paths", pb, 65), .excludes = strv_arg(a, "exclude", eb, 65) };
        char *text = brig_sandbox_diff_filtered_json(m->name, &f, err);
        if (!text)
                return NULL;
        return json_pack("{s:o}", "changes", parsed(text));
}

static json_t *tool_reset(struct mcp *m, json_t *a, brig_error **err)
{
        if (need_overlay(m, "reset", err) < 0 || mcp_sandbox(m, err) < 0)
                return NULL;
        /* The layer cannot change under a mounted overlay: stop, empty it, start. */
        if (brig_sandbox_stop(m->name, err) < 0 || brig_sandbox_reset(m->name, err) < 0 ||
            brig_sandbox_start(m->name, err) < 0)
                return NULL;
        return json_pack("{s:b, s:s}", "reset", 1, "note",
                         "the workspace is as it is on the host again; $HOME and /tmp start empty; processes that "
                         "ran were stopped");
}

static json_t *tool_network_status(struct mcp *m, json_t *a, brig_error **err)
{
        json_t *net = json_object_get(m->policy_json, "network");
        json_t *out = json_object();
        brig_error *e = NULL;
        char *described = m->sb ? brig_sandbox_describe(m->name, &e) : NULL;
        brig_error_free(&e);
        if (!described)
                described = brig_policy_explain(m->policy, NULL);
        json_object_set_new(out, "policy", described ? rpc_string_lossy(described, strlen(described)) : json_string(""));
        free(described);
        const char *keys[] = { "allow_hosts", "deny_hosts", "allow_cidrs", "resolve", NULL };
        for (int i = 0; keys[i]; i++) {
                json_t *v = json_object_get(net, keys[i]);
                json_object_set_new(out, keys[i], json_is_array(v) ? json_deep_copy(v) : json_array());
        }
        json_object_set_new(out, "refusals", json_deep_copy(m->refusals));
        json_object_set_new(out, "note", json_string("only the user can allow more: each refusal's allow_with is "
                                                     "the brig flag they would add to brig mcp's command line"));
        return out;
}

/* ---- the table ----------------------------------------------------------- */

#define OBJ(props) "{\"type\":\"object\",\"properties\":{" props "}}"
#define STR "{\"type\":\"string\"}"
#define INT "{\"type\":\"integer\"}"
#define BOOL "{\"type\":\"boolean\"}"
#define ARR "{\"type\":\"array\"}"

static const struct tool tools[] = {
        { "run_command", "Run a command",
          "Run a command inside the sandbox (a shell string run by /bin/sh -c, or an argv array) and wait for it. "
          "Returns stdout, stderr (each cut past max_output_bytes, with a note saying how much), the exit code and "
          "why it ended in words (timeout, memory limit, process limit, refused system call), and every connection "
          "or other access brig refused while it ran, with what the user could allow. background=true starts it and "
          "returns its pid and log file at once.",
          { { "command", A_CMD, true, "a shell command line, or an argv array (no shell)", 0, 0 },
            { "timeout_seconds", A_INT, false, "wall clock before it is stopped (default 120; never above the "
                                                "user's --timeout)", 1, 86400 },
            { "cwd", A_STRING, false, "directory inside to start in (relative: to the workspace)", 0, 0 },
            { "env", A_ENV, false, "variables to set for it, {NAME: VALUE}", 0, 0 },
            { "background", A_BOOL, false, "start it and return at once: its output goes to a log file inside", 0, 0 },
            { "max_output_bytes", A_INT, false, "bytes of stdout and of stderr returned (default 30000: the first "
                                                 "and last half)", 2, 1 << 20 } },
          OBJ("\"exit_code\":" INT ",\"reason\":" STR ",\"ended\":" STR ",\"stdout\":" STR ",\"stderr\":" STR
              ",\"stdout_cut_bytes\":" INT ",\"stderr_cut_bytes\":" INT ",\"duration_ms\":" INT ",\"refusals\":" ARR
              ",\"report\":" STR ",\"background\":" BOOL ",\"pid\":" INT ",\"log\":" STR ",\"note\":" STR),
          false, true, false, tool_run_command },
        { "read_file", "Read a file",
          "Read a file as the sandbox sees it, whole or a byte range (offset, length) or a line range (start_line, "
          "end_line, 1-based, inclusive). At most 256 KiB per call.",
          { { "path", A_STRING, true, "absolute inside, or relative to the workspace", 0, 0 },
            { "offset", A_INT, false, "first byte", 0, INT64_MAX },
            { "length", A_INT, false, "bytes from offset", 0, INT64_MAX },
            { "start_line", A_INT, false, "first line (1-based)", 1, INT64_MAX },
            { "end_line", A_INT, false, "last line (inclusive)", 1, INT64_MAX } },
          OBJ("\"path\":" STR ",\"size\":" INT ",\"content\":" STR ",\"binary\":" BOOL ",\"offset\":" INT
              ",\"start_line\":" INT ",\"note\":" STR),
          true, false, true, tool_read_file },
        { "write_file", "Write a file",
          "Write a file inside the sandbox (replaced whole and atomically).",
          { { "path", A_STRING, true, "absolute inside, or relative to the workspace", 0, 0 },
            { "content", A_STRING, true, "the file's new content", 0, 0 },
            { "mode", A_INT, false, "permission bits, e.g. 493 for 0755 (default 0644)", 0, 07777 },
            { "create_directories", A_BOOL, false, "make missing parent directories", 0, 0 } },
          OBJ("\"path\":" STR ",\"bytes_written\":" INT), false, true, true, tool_write_file },
        { "edit_file", "Edit a file",
          "Replace an exact string in a file: old_string must occur exactly once (or replace_all=true).",
          { { "path", A_STRING, true, "absolute inside, or relative to the workspace", 0, 0 },
            { "old_string", A_STRING, true, "the text to replace, exactly as in the file", 0, 0 },
            { "new_string", A_STRING, true, "what replaces it", 0, 0 },
            { "replace_all", A_BOOL, false, "replace every occurrence", 0, 0 } },
          OBJ("\"path\":" STR ",\"replacements\":" INT), false, true, false, tool_edit_file },
        { "list_directory", "List a directory",
          "The entries of a directory inside: name, type, size, mode, mtime (a link's target).",
          { { "path", A_STRING, false, "absolute inside, or relative to the workspace (default: the workspace)", 0, 0 } },
          OBJ("\"path\":" STR ",\"entries\":" ARR), true, false, true, tool_list_directory },
        { "search_files", "Search files",
          "Find files by name (glob, e.g. *.py or src/*.c) or by content (regex, extended, grep -E), or both (regex "
          "in files whose name matches glob), under the workspace or path.",
          { { "glob", A_STRING, false, "file name pattern", 0, 0 },
            { "regex", A_STRING, false, "extended regular expression searched in file contents", 0, 0 },
            { "path", A_STRING, false, "directory to search (default: the workspace)", 0, 0 },
            { "max_results", A_INT, false, "at most this many matches (default 200)", 1, 10000 } },
          OBJ("\"path\":" STR ",\"matches\":" ARR ",\"truncated\":" BOOL), true, false, true, tool_search_files },
        { "snapshot", "Snapshot the sandbox",
          "Save the sandbox's writable state (the overlay layer, $HOME, /tmp) under a tag, to restore later.",
          { { "tag", A_STRING, false, "letters, digits, _ . - (default: snap-TIME)", 0, 0 } },
          OBJ("\"tag\":" STR ",\"snapshots\":" ARR), false, false, false, tool_snapshot },
        { "restore", "Restore a snapshot",
          "Go back to a snapshot: the files return to what they were; running processes are stopped.",
          { { "tag", A_STRING, true, "a tag snapshot made", 0, 0 } },
          OBJ("\"tag\":" STR ",\"note\":" STR), false, true, false, tool_restore },
        { "diff", "What changed",
          "What the session changed in the workspace: added, modified, deleted paths. With brig mcp --overlay "
          "the real workspace changes only when the user commits; without it, the session wrote them there.",
          { { "paths", A_STRV, false, "only under these paths (relative to the workspace)", 0, 0 },
            { "exclude", A_STRV, false, "leave out paths matching these patterns (node_modules, *.log)", 0, 0 } },
          OBJ("\"changes\":" ARR), true, false, true, tool_diff },
        { "reset", "Discard the changes",
          "Throw away every change the session made to the workspace (brig mcp --overlay); $HOME and /tmp start "
          "empty and running processes are stopped.",
          { { NULL, A_STRING, false, NULL, 0, 0 } },
          OBJ("\"reset\":" BOOL ",\"note\":" STR), false, true, true, tool_reset },
        { "network_status", "Network policy and refusals",
          "What the user's policy lets the sandbox reach, and the connections and lookups brig refused in this "
          "session, each with the rule that refused it and the flag the user would add to allow it.",
          { { NULL, A_STRING, false, NULL, 0, 0 } },
          OBJ("\"policy\":" STR ",\"allow_hosts\":" ARR ",\"deny_hosts\":" ARR ",\"allow_cidrs\":" ARR
              ",\"resolve\":" ARR ",\"refusals\":" ARR ",\"note\":" STR),
          true, false, true, tool_network_status },
};

#define N_TOOLS (sizeof tools / sizeof tools[0])

static json_t *arg_schema(const struct arg *g)
{
        json_t *s;
        switch (g->type) {
        case A_STRING: s = json_pack("{s:s}", "type", "string"); break;
        case A_INT:
                s = json_pack("{s:s, s:I, s:I}", "type", "integer", "minimum", (json_int_t)g->min, "maximum",
                              (json_int_t)g->max);
                break;
        case A_BOOL: s = json_pack("{s:s}", "type", "boolean"); break;
        case A_STRV: s = json_pack("{s:s, s:{s:s}}", "type", "array", "items", "type", "string"); break;
        case A_ENV:
                s = json_pack("{s:s, s:{s:s}}", "type", "object", "additionalProperties", "type", "string");
                break;
        case A_CMD:
                s = json_pack("{s:[{s:s, s:i}, {s:s, s:{s:s}, s:i}]}", "oneOf", "type", "string", "minLength", 1,
                              "type", "array", "items", "type", "string", "minItems", 1);
                break;
        default: s = json_object();
        }
        json_object_set_new(s, "description", json_string(g->desc));
        return s;
}

json_t *mcp_tools_list(void)
{
        json_t *list = json_array();
        for (size_t i = 0; i < N_TOOLS; i++) {
                const struct tool *t = &tools[i];
                json_t *props = json_object(), *req = json_array();
                for (const struct arg *g = t->args; g->name; g++) {
                        json_object_set_new(props, g->name, arg_schema(g));
                        if (g->required)
                                json_array_append_new(req, json_string(g->name));
                }
                json_t *in = json_pack("{s:s, s:o, s:o, s:b}", "type", "object", "properties", props, "required", req,
                                       "additionalProperties", 0);
                json_t *outs = json_loads(t->output_schema, 0, NULL);
                json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name",
                                                      t->name, "title", t->title, "description", t->desc,
                                                      "inputSchema", in, "outputSchema", outs ? outs : json_object(),
                                                      "annotations", "title", t->title, "readOnlyHint", t->read_only,
                                                      "destructiveHint", t->destructive, "idempotentHint",
                                                      t->idempotent, "openWorldHint", 0));
        }
        return list;
}

static const char *type_words(enum arg_type t)
{
        static const char *const words[] = { [A_STRING] = "a string", [A_INT] = "an integer", [A_BOOL] = "true or false",
                                             [A_STRV] = "an array of strings", [A_ENV] = "an object of strings",
                                             [A_CMD] = "a string or an array of strings" };
        return words[t];
}

static bool all_strings(json_t *v, bool object)
{
        size_t i;
        const char *k;
        json_t *s;
        if (object) {
                json_object_foreach(v, k, s)
                        if (!json_is_string(s))
                                return false;
                return true;
        }
        json_array_foreach(v, i, s)
                if (!json_is_string(s))
                        return false;
        return true;
}

/* The same table as the schema: what it does not say is refused. */
static int check_args(const struct tool *t, json_t *args, char *why, size_t size)
{
        const char *k;
        json_t *v;
        json_object_foreach(args, k, v) {
                const struct arg *g = t->args;
                while (g->name && strcmp(g->name, k) != 0)
                        g++;
                if (!g->name) {
                        int n = snprintf(why, size, "%s: unknown argument '%.60s' (it takes:", t->name, k);
                        for (const struct arg *h = t->args; h->name && n > 0 && (size_t)n < size; h++)
                                n += snprintf(why + n, size - (size_t)n, " %s", h->name);
                        if (n > 0 && (size_t)n < size)
                                snprintf(why + n, size - (size_t)n, "%s)", t->args[0].name ? "" : " nothing");
                        return -1;
                }
                bool ok;
                switch (g->type) {
                case A_STRING: ok = json_is_string(v); break;
                case A_INT:
                        ok = json_is_integer(v) && json_integer_value(v) >= g->min && json_integer_value(v) <= g->max;
                        break;
                case A_BOOL: ok = json_is_boolean(v); break;
                case A_STRV: ok = json_is_array(v) && all_strings(v, false); break;
                case A_ENV: ok = json_is_object(v) && all_strings(v, true); break;
                case A_CMD: ok = json_is_string(v) || (json_is_array(v) && all_strings(v, false)); break;
                default: ok = false;
                }
                if (!ok) {
                        if (g->type == A_INT)
                                snprintf(why, size, "%s: '%s' must be an integer from %lld to %lld", t->name, k,
                                         (long long)g->min, (long long)g->max);
                        else
                                snprintf(why, size, "%s: '%s' must be %s", t->name, k, type_words(g->type));
                        return -1;
                }
        }
        for (const struct arg *g = t->args; g->name; g++)
                if (g->required && !json_object_get(args, g->name)) {
                        snprintf(why, size, "%s: '%s' is required (%s)", t->name, g->name, g->desc);
                        return -1;
                }
        return 0;
}

static json_t *tool_error(const char *text)
{
        return json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text",
                         rpc_string_lossy(text, strlen(text)), "isError", 1);
}

json_t *mcp_tools_call(struct mcp *m, const char *name, json_t *args, int *code, char *why, size_t why_size)
{
        const struct tool *t = NULL;
        for (size_t i = 0; i < N_TOOLS; i++)
                if (strcmp(tools[i].name, name) == 0)
                        t = &tools[i];
        if (!t) {
                *code = RPC_INVALID_PARAMS;
                snprintf(why, why_size, "unknown tool '%.80s' (tools/list names them)", name);
                return NULL;
        }
        json_t *empty = json_object();
        if (!args)
                args = empty;
        char bad[512];
        json_t *res;
        if (check_args(t, args, bad, sizeof bad) < 0) {
                /* 2025-11-25: a tool's input that fails its schema is the
                 * tool's error, for the model to correct. */
                res = tool_error(bad);
        } else {
                brig_error *err = NULL;
                json_t *out = t->run(m, args, &err);
                if (out) {
                        char *text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
                        res = json_pack("{s:[{s:s, s:s}], s:o}", "content", "type", "text", "text", text ? text : "",
                                        "structuredContent", out);
                        free(text);
                } else {
                        char msg[1200];
                        snprintf(msg, sizeof msg, "%s: %s", t->name, err && err->msg ? err->msg : "failed");
                        res = tool_error(msg);
                        mcp_log(m, "error", "%s", msg);
                }
                brig_error_free(&err);
        }
        json_decref(empty);
        return res;
}
