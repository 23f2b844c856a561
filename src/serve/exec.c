/* exec.c — commands in sandboxes: each a brig_exec handle (docs/api.md)
 * with pipes (or a pty), a pump thread that keeps its output as events
 * (up to --max-output; what is past it is counted, never held in the
 * command), and readers that stream those events as chunked NDJSON from
 * any offset, so a client that reconnects loses nothing. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { EV_STDOUT = 1, EV_STDERR = 2 };

struct ev {
        int type;
        size_t len;
        char *data;
};

struct sexec {
        struct sexec *next;
        char id[24];
        char sandbox[72];
        brig_sandbox *sb;
        brig_exec *x;
        json_t *argv;
        bool tty, has_stdin;
        /* a pool member's one run: a call of its client's, which ends with
         * the client when it asked for the end (wait, stream) */
        bool in_pool;
        time_t started;
        pthread_mutex_t mu;     /* the handle's calls, the events, done */
        pthread_cond_t cond;    /* a new event, or done */
        struct ev *evs;
        size_t n_evs, cap_evs;
        uint64_t kept, dropped;
        bool done;
        json_t *result;
        bool stdin_closed;
        unsigned refs;          /* the table, the pump, each reader; under execs_lock */
        bool forgotten;
};

static pthread_mutex_t execs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t execs_freed = PTHREAD_COND_INITIALIZER;
static struct sexec *execs;
static unsigned long exec_counter;
static unsigned execs_live;     /* made and not yet freed (a pump may run on); under execs_lock */

static struct sexec *exec_find(const char *sandbox, const char *id)
{
        pthread_mutex_lock(&execs_lock);
        struct sexec *e = execs;
        while (e && (strcmp(e->id, id) != 0 || strcmp(e->sandbox, sandbox) != 0))
                e = e->next;
        if (e)
                e->refs++;
        pthread_mutex_unlock(&execs_lock);
        return e;
}

static void exec_unref(struct sexec *e)
{
        pthread_mutex_lock(&execs_lock);
        bool last = --e->refs == 0;
        pthread_mutex_unlock(&execs_lock);
        if (!last)
                return;
        pthread_mutex_lock(&execs_lock);
        execs_live--;
        pthread_cond_broadcast(&execs_freed);
        pthread_mutex_unlock(&execs_lock);
        brig_exec_close(e->x);
        brig_error *err = NULL;
        if (brig_sandbox_close(e->sb, &err) < 0)
                fprintf(stderr, "brig serve: exec %s: %s\n", e->id, err && err->msg ? err->msg : "");
        brig_error_free(&err);
        for (size_t i = 0; i < e->n_evs; i++)
                free(e->evs[i].data);
        free(e->evs);
        json_decref(e->argv);
        json_decref(e->result);
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cond);
        free(e);
}

/* Out of the table: no request finds it again; a command still running is
 * killed (the pump then takes its result and lets go). */
static void exec_forget(struct sexec *e)
{
        pthread_mutex_lock(&execs_lock);
        struct sexec **pp = &execs;
        while (*pp && *pp != e)
                pp = &(*pp)->next;
        bool found = *pp == e;
        if (found) {
                *pp = e->next;
                e->forgotten = true;
        }
        pthread_mutex_unlock(&execs_lock);
        if (!found)
                return;
        pthread_mutex_lock(&e->mu);
        if (!e->done)
                brig_exec_kill(e->x, SIGKILL, NULL);
        pthread_mutex_unlock(&e->mu);
        exec_unref(e);  /* the table's */
}

/* The pool runs the table holds, running or not: each holds a claimed
 * member until it is forgotten. */
static unsigned pool_runs_held(void)
{
        unsigned n = 0;
        pthread_mutex_lock(&execs_lock);
        for (struct sexec *e = execs; e; e = e->next)
                n += e->in_pool;
        pthread_mutex_unlock(&execs_lock);
        return n;
}

unsigned exec_running(const char *name)
{
        unsigned n = 0;
        pthread_mutex_lock(&execs_lock);
        for (struct sexec *e = execs; e; e = e->next) {
                if (name && strcmp(e->sandbox, name) != 0)
                        continue;
                pthread_mutex_lock(&e->mu);
                n += !e->done;
                pthread_mutex_unlock(&e->mu);
        }
        pthread_mutex_unlock(&execs_lock);
        return n;
}

static void forget_where(const char *name)
{
        for (;;) {
                pthread_mutex_lock(&execs_lock);
                struct sexec *e = execs;
                while (e && name && strcmp(e->sandbox, name) != 0)
                        e = e->next;
                if (e)
                        e->refs++;
                pthread_mutex_unlock(&execs_lock);
                if (!e)
                        return;
                exec_forget(e);
                exec_unref(e);
        }
}

void exec_close_sandbox(const char *name) { forget_where(name); }

void exec_close_all(void)
{
        forget_where(NULL);
        /* their commands are killed: the pumps take the results and let
         * go; the process does not end under them (bounded: 5 s) */
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 5;
        pthread_mutex_lock(&execs_lock);
        while (execs_live && pthread_cond_timedwait(&execs_freed, &execs_lock, &deadline) == 0)
                ;
        pthread_mutex_unlock(&execs_lock);
}

/* ---- the result --------------------------------------------------------- */

static json_t *refusal_lines(const char *text)
{
        json_t *arr = json_array();
        for (const char *line = text; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t n = end ? (size_t)(end - line) : strlen(line);
                if (n)
                        json_array_append_new(arr, json_text_of_bytes(line, n));
                line += n + (end != NULL);
        }
        return arr;
}

static json_t *result_json(struct sexec *e, int rc, const brig_result *res, brig_error *err)
{
        json_t *report = NULL;
        char *text = brig_exec_report_json(e->x, NULL);
        if (text)
                report = json_loads(text, 0, NULL);
        free(text);
        json_t *doc = json_pack("{s:i, s:i, s:s, s:o, s:I, s:o, s:o, s:o, s:o}",
                                "exit_code", res->exit_code, "signal", res->signal,
                                "reason", rc < 0 ? "error" : brig_reason_name(res->reason),
                                "summary", json_text_of_bytes(res->summary, strnlen(res->summary, sizeof res->summary)),
                                "duration_ms", (json_int_t)res->duration_ms,
                                "refusals", refusal_lines(res->refusals),
                                "warning", json_text_of_bytes(res->warning, strnlen(res->warning, sizeof res->warning)),
                                "error", rc < 0 && err && err->msg ? json_text_of_bytes(err->msg, strlen(err->msg))
                                                                   : json_null(),
                                "report", report ? report : json_null());
        return doc;
}

/* ---- the pump ----------------------------------------------------------- */

static void add_event(struct sexec *e, int type, const char *buf, size_t n)
{
        pthread_mutex_lock(&e->mu);
        if (e->n_evs == e->cap_evs) {
                size_t cap = e->cap_evs * 2 + 16;
                struct ev *grown = realloc(e->evs, cap * sizeof *grown);
                if (grown)
                        e->evs = grown, e->cap_evs = cap;
        }
        char *copy = e->kept + n <= serve_cfg.max_output && e->n_evs < e->cap_evs ? malloc(n) : NULL;
        if (copy) {
                memcpy(copy, buf, n);
                e->evs[e->n_evs++] = (struct ev){ type, n, copy };
                e->kept += n;
        } else {
                e->dropped += n;  /* past --max-output (or out of memory): counted, not kept */
        }
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->mu);
}

/* Read what fd has now; false at its end. */
static bool pump_read(struct sexec *e, int fd, int type)
{
        char buf[64 * 1024];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
                add_event(e, type, buf, (size_t)n);
                return true;
        }
        return n < 0 && (errno == EAGAIN || errno == EINTR);
}

static void *pump(void *arg)
{
        struct sexec *e = arg;
        int xfd = brig_exec_fd(e->x);
        int out = brig_exec_stdio_fd(e->x, 1), errfd = e->tty ? -1 : brig_exec_stdio_fd(e->x, 2);
        for (;;) {
                struct pollfd pf[3] = { { xfd, POLLIN, 0 }, { out, POLLIN, 0 }, { errfd, POLLIN, 0 } };
                int n = poll(pf, 3, -1);
                if (n < 0 && errno != EINTR)
                        break;
                if (pf[1].revents && !pump_read(e, out, EV_STDOUT))
                        out = -1;
                if (pf[2].revents && !pump_read(e, errfd, EV_STDERR))
                        errfd = -1;
                if (pf[0].revents)
                        break;
        }
        /* the command has ended: what its pipes hold now is its output (a
         * process it left behind may keep them open: not waited for) */
        while (out >= 0 && pump_read(e, out, EV_STDOUT)) {
                struct pollfd p = { out, POLLIN, 0 };
                if (poll(&p, 1, 0) <= 0)
                        break;
        }
        while (errfd >= 0 && pump_read(e, errfd, EV_STDERR)) {
                struct pollfd p = { errfd, POLLIN, 0 };
                if (poll(&p, 1, 0) <= 0)
                        break;
        }
        brig_result res;
        brig_error *err = NULL;
        pthread_mutex_lock(&e->mu);
        int rc = brig_exec_wait(e->x, BRIG_WAIT_NOHANG, &res, &err);
        if (rc == -EAGAIN)
                rc = brig_exec_wait(e->x, 0, &res, &err);
        e->result = result_json(e, rc, &res, err);
        e->done = true;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->mu);
        brig_error_free(&err);
        exec_unref(e);
        return NULL;
}

/* ---- as an answer ------------------------------------------------------- */

static json_t *exec_json(struct sexec *e)
{
        pthread_mutex_lock(&e->mu);
        json_t *doc = json_pack("{s:s, s:s, s:O, s:s, s:b, s:b, s:I, s:O, s:I}", "id", e->id, "sandbox", e->sandbox,
                                "argv", e->argv, "state", e->done ? "exited" : "running", "tty", e->tty, "stdin",
                                e->has_stdin, "started", (json_int_t)e->started, "result",
                                e->result ? e->result : json_null(), "output_dropped", (json_int_t)e->dropped);
        pthread_mutex_unlock(&e->mu);
        return doc;
}

static json_t *output_event(const struct ev *ev)
{
        char *b64 = b64_encode(ev->data, ev->len);
        json_t *doc = json_pack("{s:s, s:o, s:s}", "type", ev->type == EV_STDOUT ? "stdout" : "stderr", "data",
                                json_text_of_bytes(ev->data, ev->len), "data_b64", b64 ? b64 : "");
        free(b64);
        return doc;
}

/* ExecDone: the exec and its whole output */
static json_t *exec_done_json(struct sexec *e)
{
        json_t *doc = exec_json(e);
        pthread_mutex_lock(&e->mu);
        size_t len[3] = { 0 };
        for (size_t i = 0; i < e->n_evs; i++)
                len[e->evs[i].type] += e->evs[i].len;
        char *buf[3] = { NULL, malloc(len[1] + 1), malloc(len[2] + 1) };
        size_t off[3] = { 0 };
        for (size_t i = 0; buf[1] && buf[2] && i < e->n_evs; i++) {
                memcpy(buf[e->evs[i].type] + off[e->evs[i].type], e->evs[i].data, e->evs[i].len);
                off[e->evs[i].type] += e->evs[i].len;
        }
        pthread_mutex_unlock(&e->mu);
        for (int t = 1; t <= 2 && buf[1] && buf[2]; t++) {
                const char *key = t == 1 ? "stdout" : "stderr";
                char k64[16];
                snprintf(k64, sizeof k64, "%s_b64", key);
                char *b64 = b64_encode(buf[t], len[t]);
                json_object_set_new(doc, key, json_text_of_bytes(buf[t], len[t]));
                json_object_set_new(doc, k64, json_string(b64 ? b64 : ""));
                free(b64);
        }
        free(buf[1]);
        free(buf[2]);
        return doc;
}

/* ---- the output stream -------------------------------------------------- */

struct reader {
        struct sexec *e;
        size_t next;
        bool follow, start_pending, exit_sent, forget_at_end;
        int conn_fd;
        char *line;
        size_t line_len, line_off;
};

static void reader_set_line(struct reader *rd, json_t *doc)
{
        free(rd->line);
        rd->line = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        rd->line_off = 0;
        rd->line_len = rd->line ? strlen(rd->line) : 0;
        if (rd->line) {
                /* room for the newline: json_dumps leaves none */
                char *l = realloc(rd->line, rd->line_len + 2);
                if (l) {
                        rd->line = l;
                        rd->line[rd->line_len++] = '\n';
                        rd->line[rd->line_len] = '\0';
                }
        }
}

static ssize_t reader_fill(void *cls, char *buf, size_t max)
{
        struct reader *rd = cls;
        struct sexec *e = rd->e;
        for (;;) {
                if (rd->line_off < rd->line_len) {
                        size_t n = rd->line_len - rd->line_off;
                        if (n > max)
                                n = max;
                        memcpy(buf, rd->line + rd->line_off, n);
                        rd->line_off += n;
                        return (ssize_t)n;
                }
                if (rd->start_pending) {
                        rd->start_pending = false;
                        reader_set_line(rd, json_pack("{s:s, s:o}", "type", "start", "exec", exec_json(e)));
                        continue;
                }
                pthread_mutex_lock(&e->mu);
                if (rd->next < e->n_evs) {
                        struct ev ev = e->evs[rd->next++];
                        json_t *doc = output_event(&ev);  /* ev.data stays: events are freed with the exec */
                        pthread_mutex_unlock(&e->mu);
                        reader_set_line(rd, doc);
                        continue;
                }
                if (e->done) {
                        pthread_mutex_unlock(&e->mu);
                        if (rd->exit_sent)
                                return 0;
                        rd->exit_sent = true;
                        json_t *doc = exec_json(e);
                        json_t *result = json_incref(json_object_get(doc, "result"));
                        json_decref(doc);
                        reader_set_line(rd, json_pack("{s:s, s:o}", "type", "exit", "result", result));
                        continue;
                }
                if (!rd->follow || serve_draining) {
                        pthread_mutex_unlock(&e->mu);
                        if (!rd->follow || rd->exit_sent)
                                return 0;
                        rd->exit_sent = true;
                        reader_set_line(rd, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
                                                      "unavailable", "message",
                                                      "brig serve is shutting down: the stream ends here"));
                        continue;
                }
                /* wait for more; a client that went away ends it (the
                 * command goes on) */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 250 * 1000000L;
                if (ts.tv_nsec >= 1000000000L)
                        ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&e->cond, &e->mu, &ts);
                pthread_mutex_unlock(&e->mu);
                if (conn_hung_up(rd->conn_fd))
                        return -1;
        }
}

static void reader_done(void *cls)
{
        struct reader *rd = cls;
        /* a pool run streamed to a client that left before its end goes
         * with it: the command is killed and the member let go */
        if (rd->forget_at_end && (rd->exit_sent || rd->e->in_pool))
                exec_forget(rd->e);
        exec_unref(rd->e);
        free(rd->line);
        free(rd);
}

static int stream_output(struct req *r, struct sexec *e, size_t offset, bool follow, bool start, bool forget)
{
        struct reader *rd = calloc(1, sizeof *rd);
        if (!rd) {
                exec_unref(e);
                return reply_error(r, 500, "internal", NULL, "out of memory");
        }
        *rd = (struct reader){ .e = e, .next = offset, .follow = follow, .start_pending = start,
                               .forget_at_end = forget, .conn_fd = r->conn_fd };
        return reply_stream(r, "application/x-ndjson", reader_fill, reader_done, rd);
}

/* ---- start -------------------------------------------------------------- */

static const struct field start_fields[] = {
        { "argv", F_ARRAY_STRINGS, false }, { "cmd", F_STRING, false }, { "env", F_OBJECT_STRINGS, false },
        { "cwd", F_STRING, false }, { "timeout_ms", F_INT, false }, { "tty", F_BOOL, false },
        { "rows", F_INT, false }, { "cols", F_INT, false }, { "stdin", F_BOOL, false },
        { "input", F_STRING, false }, { "input_b64", F_STRING, false }, { "wait", F_BOOL, false },
        { "stream", F_BOOL, false }, { NULL, 0, false },
};

static int write_all(int fd, const char *data, size_t len, int timeout_ms, size_t *written)
{
        *written = 0;
        while (*written < len) {
                ssize_t n = write(fd, data + *written, len - *written);
                if (n > 0) {
                        *written += (size_t)n;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno != EAGAIN)
                        return -errno;
                struct pollfd pf = { .fd = fd, .events = POLLOUT };
                int p = poll(&pf, 1, timeout_ms);
                if (p == 0)
                        return -ETIMEDOUT;
                if (p < 0 && errno != EINTR)
                        return -errno;
        }
        return 0;
}

static bool bad_field(struct req *r, const char *field, const char *msg)
{
        reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", field), "%s", msg);
        return false;
}

static bool input_of(struct req *r, json_t *body, const char *text_key, const char *b64_key, char **data,
                     size_t *len)
{
        const char *text = json_string_value(json_object_get(body, text_key));
        const char *b64 = json_string_value(json_object_get(body, b64_key));
        *data = NULL;
        *len = 0;
        if (text && b64)
                return bad_field(r, b64_key, "give the bytes as text or as base64, not both");
        if (text) {
                *len = strlen(text);
                *data = strdup(text);
                return *data != NULL;
        }
        if (b64) {
                ssize_t n = b64_decode(b64, strlen(b64), data);
                if (n < 0)
                        return bad_field(r, b64_key, "not base64");
                *len = (size_t)n;
        }
        return true;
}

static void strv_free(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* POST /v1/sandboxes/{name}/execs, and POST /v1/pools/{name}/execs
 * (in_pool): the one run of a member of the server's pool of that name,
 * which then answers as any sandbox's exec does, under the member's
 * name. */
static int start_exec(struct req *r, bool in_pool)
{
        _serve_json_ json_t *body = req_json(r, false, start_fields);
        if (!body)
                return MHD_YES;
        json_t *jargv = json_object_get(body, "argv");
        const char *cmd = json_string_value(json_object_get(body, "cmd"));
        if ((jargv && cmd) || (!jargv && !cmd))
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "argv"),
                                   "give the command as argv (an array) or as cmd (a shell line), one of them");
        if (jargv && json_array_size(jargv) == 0)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "argv"), "argv is empty");
        const char *cwd = json_string_value(json_object_get(body, "cwd"));
        if (cwd && cwd[0] != '/')
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "cwd"),
                                   "cwd '%.200s': an absolute path inside", cwd);
        bool tty = json_is_true(json_object_get(body, "tty"));
        json_int_t rows = json_integer_value(json_object_get(body, "rows")),
                   cols = json_integer_value(json_object_get(body, "cols"));
        if (rows > 1000 || cols > 1000)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", rows > 1000 ? "rows" : "cols"),
                                   "rows and cols: 1 to 1000");
        char *input = NULL;
        size_t input_len = 0;
        if (!input_of(r, body, "input", "input_b64", &input, &input_len))
                return MHD_YES;
        _serve_free_ char *input_owned = input;
        json_t *env = json_object_get(body, "env");
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
                if (!*k || strchr(k, '='))
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "env"),
                                           "env name '%.64s': not empty, no '='", k);
        if (exec_running(NULL) >= serve_cfg.max_execs)
                return reply_error(r, 429, "limit_reached",
                                   json_pack("{s:s, s:i}", "limit", "max_execs", "value", (int)serve_cfg.max_execs),
                                   "%u commands run now, the most brig serve --max-execs allows: wait for one",
                                   serve_cfg.max_execs);
        /* a finished pool run not yet forgotten still holds its member */
        if (in_pool && pool_runs_held() >= serve_cfg.max_execs)
                return reply_error(r, 429, "limit_reached",
                                   json_pack("{s:s, s:i}", "limit", "max_execs", "value", (int)serve_cfg.max_execs),
                                   "%u pool runs are held (each holds its member until it is forgotten: "
                                   "DELETE .../execs/ID, or ask with wait or stream), the most brig serve "
                                   "--max-execs allows", serve_cfg.max_execs);
        /* argv and env as the handle API takes them */
        json_t *argv = jargv ? json_incref(jargv) : json_pack("[s,s,s]", "/bin/sh", "-c", cmd);
        size_t argc = json_array_size(argv);
        char **av = calloc(argc + 1, sizeof *av), **ev = calloc(json_object_size(env) + 1, sizeof *ev);
        bool oom = !av || !ev;
        for (size_t i = 0; !oom && i < argc; i++)
                oom = !(av[i] = strdup(json_string_value(json_array_get(argv, i))));
        size_t ne = 0;
        json_object_foreach(env, k, v)
                if (!oom && asprintf(&ev[ne++], "%s=%s", k, json_string_value(v)) < 0)
                        ev[--ne] = NULL, oom = true;
        brig_sandbox *sb = NULL;
        brig_error *e = NULL;
        if (oom || (!in_pool && sandbox_open_running(r, &sb) < 0)) {
                strv_free(av);
                strv_free(ev);
                json_decref(argv);
                return oom ? reply_error(r, 500, "internal", NULL, "out of memory") : MHD_YES;
        }
        int rc;
        brig_exec_spec spec = { .size = sizeof spec, .stdio = tty ? BRIG_STDIO_PTY : BRIG_STDIO_PIPES, .argv = av,
                                .env = ne ? ev : NULL, .cwd = cwd,
                                .timeout_ms = (uint64_t)json_integer_value(json_object_get(body, "timeout_ms")),
                                .rows = (uint16_t)rows, .cols = (uint16_t)cols };
        /* a client that leaves while its pool run waits for a member takes
         * no member and starts nothing */
        if (in_pool && r->conn_fd >= 0)
                spec.flags = BRIG_EXEC_CANCEL_FD, spec.cancel_fd = r->conn_fd;
        brig_exec *x = NULL;
        rc = in_pool ? brig_pool_exec_start(r->p.name, &spec, &sb, &x, &e) : brig_exec_start(sb, &spec, &x, &e);
        strv_free(av);
        strv_free(ev);
        if (rc < 0) {
                if (sb)
                        brig_sandbox_close(sb, NULL);
                json_decref(argv);
                if (in_pool && rc == -ECANCELED) {
                        brig_error_free(&e);
                        return MHD_NO;  /* no one to answer */
                }
                if (in_pool && (rc == -ENOENT || rc == -EIO)) {
                        /* no pool has the name; or its daemon lives but cannot
                         * make members now (the message says why) */
                        bool none = rc == -ENOENT;
                        int ret = reply_error(r, none ? 404 : 409, none ? "not_found" : "unavailable",
                                              json_pack("{s:s}", "pool", r->p.name), "exec: %s",
                                              e && e->msg ? e->msg : strerror(-rc));
                        brig_error_free(&e);
                        return ret;
                }
                return reply_brig(r, rc, e, "exec");
        }
        /* The client left between the claim and the start: it has no one
         * to answer; its command goes at once, the member with it. */
        if (in_pool && req_client_gone(r)) {
                brig_exec_close(x);
                brig_sandbox_close(sb, NULL);
                json_decref(argv);
                return MHD_NO;
        }
        struct sexec *se = calloc(1, sizeof *se);
        if (!se) {
                brig_exec_close(x);
                brig_sandbox_close(sb, NULL);
                json_decref(argv);
                return reply_error(r, 500, "internal", NULL, "out of memory");
        }
        se->sb = sb, se->x = x, se->argv = argv, se->tty = tty, se->in_pool = in_pool, se->started = time(NULL);
        se->has_stdin = tty || json_is_true(json_object_get(body, "stdin"));
        snprintf(se->sandbox, sizeof se->sandbox, "%s", in_pool ? brig_sandbox_name(sb) : r->p.name);
        pthread_mutex_init(&se->mu, NULL);
        pthread_cond_init(&se->cond, NULL);
        se->refs = 2;  /* the table's, the pump's */
        pthread_mutex_lock(&execs_lock);
        snprintf(se->id, sizeof se->id, "x%lu", ++exec_counter);
        execs_live++;
        se->next = execs;
        execs = se;
        pthread_mutex_unlock(&execs_lock);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&t, &attr, pump, se) != 0) {
                pthread_attr_destroy(&attr);
                exec_unref(se);  /* the pump's */
                exec_forget(se);
                return reply_error(r, 500, "internal", NULL, "no thread for the exec");
        }
        pthread_attr_destroy(&attr);
        size_t written = 0;
        int stdin_fd = brig_exec_stdio_fd(x, 0);
        if (input_len && stdin_fd >= 0)
                (void)write_all(stdin_fd, input, input_len, (int)serve_cfg.client_timeout_s * 1000, &written);
        if (!se->has_stdin) {
                pthread_mutex_lock(&se->mu);
                brig_exec_close_stdin(x, NULL);
                se->stdin_closed = true;
                pthread_mutex_unlock(&se->mu);
        }
        pthread_mutex_lock(&execs_lock);
        se->refs++;  /* ours, for the answer */
        pthread_mutex_unlock(&execs_lock);
        if (json_is_true(json_object_get(body, "stream")))
                return stream_output(r, se, 0, true, true, true);
        int ret;
        if (json_is_true(json_object_get(body, "wait"))) {
                pthread_mutex_lock(&se->mu);
                while (!se->done && !serve_draining && !req_client_gone(r)) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_sec += 1;
                        pthread_cond_timedwait(&se->cond, &se->mu, &ts);
                }
                bool done = se->done;
                pthread_mutex_unlock(&se->mu);
                ret = done ? reply_json(r, 200, exec_done_json(se)) : reply_json(r, 201, exec_json(se));
                /* done, or a pool run whose client left before its end:
                 * a call of that client's, which goes with it */
                if (done || (in_pool && req_client_gone(r)))
                        exec_forget(se);
        } else {
                ret = reply_json(r, 201, exec_json(se));
        }
        exec_unref(se);
        return ret;
}

/* ---- the exec's own routes ---------------------------------------------- */

static const struct field stdin_fields[] = {
        { "data", F_STRING, false }, { "data_b64", F_STRING, false }, { "eof", F_BOOL, false }, { NULL, 0, false },
};
static const struct field resize_fields[] = { { "rows", F_INT, true }, { "cols", F_INT, true }, { NULL, 0, false } };
static const struct field signal_fields[] = { { "signal", F_ANY, true }, { NULL, 0, false } };
static const struct field wait_fields[] = { { "timeout_ms", F_INT, false }, { NULL, 0, false } };

static int write_stdin(struct req *r, struct sexec *e)
{
        _serve_json_ json_t *body = req_json(r, false, stdin_fields);
        if (!body)
                return MHD_YES;
        char *data = NULL;
        size_t len = 0;
        if (!input_of(r, body, "data", "data_b64", &data, &len))
                return MHD_YES;
        _serve_free_ char *owned = data;
        bool eof = json_is_true(json_object_get(body, "eof"));
        pthread_mutex_lock(&e->mu);
        bool closed = e->stdin_closed, done = e->done;
        pthread_mutex_unlock(&e->mu);
        if (!e->has_stdin)
                return reply_error(r, 409, "conflict", NULL, "exec %s was started without stdin: true", e->id);
        if (done)
                return reply_error(r, 409, "not_running", NULL, "exec %s has ended", e->id);
        if (closed)
                return reply_error(r, 409, "conflict", NULL, "the stdin of exec %s is closed (eof was sent)", e->id);
        size_t written = 0;
        int rc = len ? write_all(brig_exec_stdio_fd(e->x, 0), data, len, (int)serve_cfg.client_timeout_s * 1000,
                                 &written)
                     : 0;
        if (rc < 0)
                return reply_error(r, rc == -ETIMEDOUT ? 504 : 409, rc == -ETIMEDOUT ? "timeout" : "not_running",
                                   json_pack("{s:I}", "written", (json_int_t)written),
                                   "exec %s: stdin took %zu of %zu bytes: %s", e->id, written, len, strerror(-rc));
        if (eof) {
                pthread_mutex_lock(&e->mu);
                brig_exec_close_stdin(e->x, NULL);
                e->stdin_closed = true;
                pthread_mutex_unlock(&e->mu);
        }
        return reply_json(r, 200, json_pack("{s:I, s:b}", "written", (json_int_t)written, "eof", eof));
}

static int exec_op(struct req *r, struct sexec *e)
{
        brig_error *err = NULL;
        int rc = 0;
        switch (r->route) {
        case R_EXEC_GET:
                return reply_json(r, 200, exec_json(e));
        case R_EXEC_DELETE:
                exec_forget(e);
                return reply_json(r, 200, json_pack("{s:s}", "removed", e->id));
        case R_EXEC_OUTPUT: {
                const char *follow = req_query(r, "follow"), *offset = req_query(r, "offset");
                char *end = NULL;
                unsigned long long off = offset ? strtoull(offset, &end, 10) : 0;
                if (offset && (!*offset || *end || offset[0] == '-'))
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "offset"),
                                           "offset: a count of events (0 and up)");
                if (follow && strcmp(follow, "true") != 0 && strcmp(follow, "false") != 0)
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "follow"),
                                           "follow: true or false");
                pthread_mutex_lock(&execs_lock);
                e->refs++;  /* the reader's */
                pthread_mutex_unlock(&execs_lock);
                return stream_output(r, e, (size_t)off, !follow || strcmp(follow, "true") == 0, false, false);
        }
        case R_EXEC_STDIN:
                return write_stdin(r, e);
        case R_EXEC_RESIZE: {
                _serve_json_ json_t *body = req_json(r, false, resize_fields);
                if (!body)
                        return MHD_YES;
                json_int_t rows = json_integer_value(json_object_get(body, "rows")),
                           cols = json_integer_value(json_object_get(body, "cols"));
                if (rows < 1 || cols < 1 || rows > 1000 || cols > 1000)
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "rows"),
                                           "rows and cols: 1 to 1000");
                if (!e->tty)
                        return reply_error(r, 409, "conflict", NULL, "exec %s has no terminal (tty: true)", e->id);
                pthread_mutex_lock(&e->mu);
                rc = e->done ? -ESRCH : brig_exec_resize(e->x, (unsigned)rows, (unsigned)cols, &err);
                pthread_mutex_unlock(&e->mu);
                if (rc < 0)
                        return rc == -ESRCH ? reply_error(r, 409, "not_running", NULL, "exec %s has ended", e->id)
                                            : reply_brig(r, rc, err, "resize");
                return reply_json(r, 200, exec_json(e));
        }
        case R_EXEC_SIGNAL: {
                _serve_json_ json_t *body = req_json(r, false, signal_fields);
                if (!body)
                        return MHD_YES;
                int sig = signal_parse(json_object_get(body, "signal"));
                if (sig < 0)
                        return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "signal"),
                                           "signal: a number 1..64 or a name (TERM, KILL, INT, HUP ...)");
                pthread_mutex_lock(&e->mu);
                rc = e->done ? -ESRCH : brig_exec_kill(e->x, sig, &err);
                pthread_mutex_unlock(&e->mu);
                if (rc == -ESRCH) {
                        brig_error_free(&err);
                        return reply_error(r, 409, "not_running", NULL, "exec %s has ended", e->id);
                }
                if (rc < 0)
                        return reply_brig(r, rc, err, "signal");
                return reply_json(r, 200, exec_json(e));
        }
        case R_EXEC_WAIT: {
                _serve_json_ json_t *body = req_json(r, true, wait_fields);
                if (!body)
                        return MHD_YES;
                json_t *t = json_object_get(body, "timeout_ms");
                struct timespec deadline;
                clock_gettime(CLOCK_REALTIME, &deadline);
                if (t) {
                        json_int_t ms = json_integer_value(t);
                        deadline.tv_sec += ms / 1000;
                        deadline.tv_nsec += (ms % 1000) * 1000000L;
                        if (deadline.tv_nsec >= 1000000000L)
                                deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
                }
                pthread_mutex_lock(&e->mu);
                while (!e->done && !serve_draining && !req_client_gone(r)) {
                        struct timespec now, ts;
                        clock_gettime(CLOCK_REALTIME, &now);
                        if (t && (now.tv_sec > deadline.tv_sec ||
                                  (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)))
                                break;
                        ts = now;
                        ts.tv_nsec += 250 * 1000000L;
                        if (ts.tv_nsec >= 1000000000L)
                                ts.tv_sec++, ts.tv_nsec -= 1000000000L;
                        if (t && (ts.tv_sec > deadline.tv_sec ||
                                  (ts.tv_sec == deadline.tv_sec && ts.tv_nsec > deadline.tv_nsec)))
                                ts = deadline;
                        pthread_cond_timedwait(&e->cond, &e->mu, &ts);
                }
                pthread_mutex_unlock(&e->mu);
                return reply_json(r, 200, exec_json(e));
        }
        default:
                return reply_error(r, 500, "internal", NULL, "exec: route %d", r->route);
        }
}

int handle_exec(struct req *r)
{
        /* An exec of the server's is found by its id also once its sandbox
         * is gone (a pool's member, removed when the pool stopped): its
         * result can still be read, and it forgotten. */
        bool by_id = r->route != R_EXEC_START && r->route != R_EXECS_LIST;
        struct sexec *known = by_id ? exec_find(r->p.name, r->p.exec_id) : NULL;
        if (known && !owner_visible(r, r->p.name)) {
                exec_unref(known);
                known = NULL;
        }
        if (!known && !sandbox_visible(r))
                return MHD_YES;
        if (r->route == R_EXEC_START)
                return start_exec(r, false);
        if (r->route == R_EXECS_LIST) {
                json_t *arr = json_array();
                pthread_mutex_lock(&execs_lock);
                for (struct sexec *e = execs; e; e = e->next)
                        if (strcmp(e->sandbox, r->p.name) == 0)
                                json_array_append_new(arr, exec_json(e));
                pthread_mutex_unlock(&execs_lock);
                return reply_json(r, 200, json_pack("{s:o}", "execs", arr));
        }
        struct sexec *e = known ? known : exec_find(r->p.name, r->p.exec_id);
        if (!e)
                return reply_error(r, 404, "not_found", json_pack("{s:s}", "exec", r->p.exec_id),
                                   "no exec %s in sandbox '%s'", r->p.exec_id, r->p.name);
        int ret = exec_op(r, e);
        exec_unref(e);
        return ret;
}

int handle_pool_exec(struct req *r)
{
        return start_exec(r, true);
}
