/* audit.c — the audit stream: one JSON object per line, made by the
 * supervisor as events happen (`--audit FILE`, `--audit-fd N`). The schema is documented
 * in docs/audit.md and stable: fields are added, never renamed.
 *
 * A sandbox in a tight loop of refused calls must not flood the disk:
 * each syscall gets RATE_BURST events per second, the rest are counted
 * and reported in one "suppressed" event. Per syscall is not enough on its
 * own: a loop over more numbers than there are slots (unnamed numbers are
 * endless) gets a fresh burst for each, so all syscall and suppressed
 * events together also share RATE_TOTAL lines per second; what is over
 * goes into one "suppressed" event for "*". Network events (one per
 * connection attempt, made as fast as the sandbox can connect to the
 * proxy) get their own RATE_NET lines per second, the rest counted in a
 * "suppressed" event for "net"; the run report's egress counts stay exact.
 *
 * The supervisor never writes the stream itself. The descriptor may be a
 * caller's pipe (--audit-fd) whose reader stops reading, or closes it: a
 * blocking write in the supervisor would hold up everything it enforces
 * (the sandbox's own refused calls would fill the pipe and wedge its
 * timeout, its kill and every seccomp answer), and EPIPE would raise
 * SIGPIPE. So events go into a bounded queue, and a writer thread, started
 * once the sandbox is cloned (audit_run: no thread exists at clone3, which
 * runs no fork handlers), writes it out. A full queue drops lines, counted
 * (the end event's and the report's "lost"); a write error stops the
 * stream; each is said once on stderr (the policy's notice) when the run
 * is over, and in the report's audit.stopped. At the end the writer gets
 * DRAIN_IDLE_MS without progress to write what is left, then gives up: a
 * reader that never reads does not keep brig (and its cleanup) from
 * ending. The writer never blocks in a write (write_out), so giving up
 * needs no cancellation. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/host.h"
#include "core/audit.h"
#include "controls/seccomp_filter.h"
#include "core/ossl_fns.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>

#define RATE_BURST 10
#define RATE_WINDOW_MS 1000
#define RATE_SLOTS 64
#define RATE_TOTAL 100
#define RATE_NET 100
#define RATE_EXEC 100
#define QUEUE_MAX (1024 * 1024)  /* bytes not yet written; more are dropped */
#define DRAIN_IDLE_MS 5000

struct rate_slot {
        int nr;             /* -1: free */
        uint64_t window_start;
        unsigned in_window;
        uint64_t suppressed;
};

struct audit {
        int fd;
        char *what;  /* the flag, for messages: "--audit-fd 5", "--audit PATH" */
        brig_notice_fn notice;
        void *notice_data;
        char stopped[512];  /* why lines were lost, for the report ("": none) */
        char notes[4][512]; /* the same for stderr: not keeping up, a write error, given up */
        size_t n_notes;
        bool warned_full, warned_error;
        /* the queue; `lock` guards everything below */
        pthread_mutex_t lock;
        pthread_cond_t more, progress;
        pthread_t writer;
        int wake;       /* eventfd: audit_flush gives the reader up */
        bool started, closing, done;
        char *pending;  /* appended by the supervisor */
        size_t pending_len, pending_cap;
        char *writing;  /* the writer's alone while it writes */
        size_t writing_len, writing_off, writing_cap;
        uint64_t written;  /* bytes written, all told: the writer's progress */
        int error;      /* the writer's errno: the stream stopped */
        uint64_t lost;  /* lines dropped: queue full, or after a stop */
        uint64_t events, suppressed;
        struct rate_slot slots[RATE_SLOTS];
        uint64_t total_start;   /* the window of RATE_TOTAL */
        unsigned total_lines;
        uint64_t total_dropped; /* calls over RATE_TOTAL, for the "*" event */
        uint64_t net_start;     /* the window of RATE_NET */
        unsigned net_lines;
        uint64_t net_dropped, net_suppressed;
        uint64_t exec_start;    /* the window of RATE_EXEC: exec and exit events */
        unsigned exec_lines;
        uint64_t exec_dropped, exec_suppressed, execs;
        json_t *programs, *reached;  /* sets, for a manifest's outcome (audit_outcome) */
        /* the hash chain (docs/audit.md#tamper-evidence): `chain` orders
         * emit() — any thread that records — with the queue, so the seq
         * and prev of each line are those of the line queued before it */
        pthread_mutex_t chain;
        uint64_t seq;           /* lines queued so far */
        char prev[AUDIT_HASH_HEX];   /* the hash of the last one queued */
        EVP_MD_CTX *stream;     /* every line queued, for end's "stream" and the report */
        char stream_hex[AUDIT_HASH_HEX];  /* the whole stream's, once the end is queued */
};

struct audit *audit_new(int fd, const char *what, brig_notice_fn notice, void *notice_data)
{
        struct audit *a = calloc(1, sizeof *a);
        if (!a || !(a->what = strdup(what))) {
                free(a);
                return NULL;
        }
        a->fd = fd;
        a->wake = -1;
        a->notice = notice;
        a->notice_data = notice_data;
        a->programs = json_object();
        a->reached = json_object();
        a->stream = EVP_MD_CTX_new();
        if (!a->stream || !EVP_DigestInit_ex(a->stream, EVP_sha256(), NULL)) {
                EVP_MD_CTX_free(a->stream);
                free(a->what);
                free(a);
                return NULL;
        }
        memset(a->prev, '0', AUDIT_HASH_HEX - 1);  /* the first line follows nothing */
        pthread_mutex_init(&a->chain, NULL);
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->more, NULL);
        pthread_cond_init(&a->progress, NULL);
        for (int i = 0; i < RATE_SLOTS; i++)
                a->slots[i].nr = -1;
        return a;
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Kept for the report and said once the run is over (audit_flush): the
 * notice writes to brig's stderr, a pipe the sandbox may have filled
 * itself, and the supervisor must not wait on it while the sandbox runs. */
static char *note_v(struct audit *a, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static char *note_v(struct audit *a, const char *fmt, va_list ap)
{
        if (a->n_notes == ARRAY_SIZE(a->notes))
                return NULL;
        char *line = a->notes[a->n_notes++];
        vsnprintf(line, sizeof a->notes[0], fmt, ap);
        return line;
}

/* The same, about the stream itself: also the report's audit.stopped. */
static void say(struct audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct audit *a, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *line = note_v(a, fmt, ap);
        va_end(ap);
        if (line)
                snprintf(a->stopped, sizeof a->stopped, "%s", line);  /* the last word */
}

/* A note about what the stream records, not about the stream. */
static void note(struct audit *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct audit *a, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        note_v(a, fmt, ap);
        va_end(ap);
}

static void say_error(struct audit *a, int e)
{
        if (a->warned_error)
                return;
        a->warned_error = true;
        if (e == EPIPE)
                say(a, "%s: the reader closed it (EPIPE): the audit stream stopped here, the run goes on (the "
                       "report's audit.stopped and audit.lost); keep the reader open until brig exits", a->what);
        else
                say(a, "%s: write: %s: the audit stream stopped here, the run goes on (the report's audit.stopped "
                       "and audit.lost)", a->what, strerror(e));
}

/* Append one line for the writer; never waits on the descriptor. `end`
 * (the last line) is kept even over QUEUE_MAX: it is one line. */
static bool queue(struct audit *a, const char *line, size_t len, bool end)
{
        int stopped;
        bool full = false, queued = false;
        pthread_mutex_lock(&a->lock);
        if (!(stopped = a->error) && (a->pending_len + len <= QUEUE_MAX || end)) {
                if (a->pending_len + len > a->pending_cap) {
                        size_t cap = a->pending_cap ? a->pending_cap * 2 : 16384;
                        while (cap < a->pending_len + len)
                                cap *= 2;
                        char *grown = realloc(a->pending, cap);
                        if (grown) {
                                a->pending = grown;
                                a->pending_cap = cap;
                        }
                }
                if (a->pending_len + len <= a->pending_cap) {
                        memcpy(a->pending + a->pending_len, line, len);
                        a->pending_len += len;
                        queued = true;
                        pthread_cond_signal(&a->more);
                } else {
                        a->lost++;
                }
        } else {
                full = !stopped;
                a->lost++;
        }
        pthread_mutex_unlock(&a->lock);
        if (stopped)
                say_error(a, stopped);
        if (full && !a->warned_full) {
                a->warned_full = true;
                say(a, "%s: the reader is not keeping up (%d KiB unread): events are dropped and counted (the "
                       "end event's and the report's audit.lost); read it while brig runs", a->what, QUEUE_MAX / 1024);
        }
        return queued;
}

/* Write it all: 0, or the errno; *gave_up when audit_flush gave up. Never a
 * write that can wait on the reader: only once poll says there is room,
 * and at most PIPE_BUF bytes, which a pipe with room takes whole (one
 * free page) — so a reader left behind also sees whole lines — and a
 * socket with room takes too (a MSG_DONTWAIT send). A caller's descriptor
 * may be non-blocking: EAGAIN only waits again. The wait also watches
 * `wake`, which audit_flush signals when it gives the reader up. */
static int write_out(struct audit *a, bool *gave_up)
{
        while (a->writing_off < a->writing_len) {
                struct pollfd fds[2] = { { .fd = a->fd, .events = POLLOUT }, { .fd = a->wake, .events = POLLIN } };
                if (poll(fds, 2, -1) < 0 && errno != EINTR)
                        return errno;
                if (fds[1].revents) {
                        *gave_up = true;
                        return 0;
                }
                if (!fds[0].revents)
                        continue;
                ssize_t n = output_write_some(a->fd, a->writing + a->writing_off, a->writing_len - a->writing_off);
                if (n == -EINTR || n == -EAGAIN)
                        continue;
                if (n <= 0)
                        return n < 0 ? (int)-n : EIO;
                pthread_mutex_lock(&a->lock);
                a->writing_off += (size_t)n;
                a->written += (uint64_t)n;
                pthread_cond_broadcast(&a->progress);
                pthread_mutex_unlock(&a->lock);
        }
        return 0;
}

/* Every signal is blocked here (audit_run): the SIGPIPE an EPIPE raises
 * stays pending in this thread and goes with it. */
static void *writer(void *arg)
{
        struct audit *a = arg;
        bool gave_up = false;
        pthread_mutex_lock(&a->lock);
        for (;;) {
                while (!a->pending_len && !a->closing)
                        pthread_cond_wait(&a->more, &a->lock);
                if (!a->pending_len)
                        break;
                char *buf = a->writing;
                size_t cap = a->writing_cap;
                a->writing = a->pending;
                a->writing_cap = a->pending_cap;
                a->writing_len = a->pending_len;
                a->writing_off = 0;
                a->pending = buf;
                a->pending_cap = cap;
                a->pending_len = 0;
                pthread_mutex_unlock(&a->lock);
                int e = write_out(a, &gave_up);
                pthread_mutex_lock(&a->lock);
                if (e)
                        a->error = e;
                if (e || gave_up)
                        break;
        }
        a->done = true;
        pthread_cond_broadcast(&a->progress);
        pthread_mutex_unlock(&a->lock);
        return NULL;
}

void audit_run(struct audit *a)
{
        if (a->started)
                return;
        a->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (a->wake < 0) {
                a->error = errno;  /* queue() counts every line as lost and says why */
                return;
        }
        sigset_t all, saved;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        int r = pthread_create(&a->writer, NULL, writer, a);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r) {
                a->error = r;
                closep(&a->wake);
                return;
        }
        a->started = true;
}

/* Lines queued or being written, not yet out. */
static size_t unwritten(const struct audit *a)
{
        size_t lines = 0;
        for (size_t i = a->writing_off; i < a->writing_len; i++)
                lines += a->writing[i] == '\n';
        for (size_t i = 0; i < a->pending_len; i++)
                lines += a->pending[i] == '\n';
        return lines;
}

/* Let the writer finish what is queued while it makes progress, then end it. */
static void drain(struct audit *a)
{
        pthread_mutex_lock(&a->lock);
        a->closing = true;
        pthread_cond_signal(&a->more);
        bool idle = false;
        while (!a->done && !idle) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += DRAIN_IDLE_MS / 1000;
                uint64_t seen = a->written;
                idle = pthread_cond_timedwait(&a->progress, &a->lock, &until) == ETIMEDOUT &&
                       a->written == seen && !a->done;
        }
        pthread_mutex_unlock(&a->lock);
        if (idle)
                (void)!write(a->wake, &(uint64_t){ 1 }, sizeof(uint64_t));
        pthread_join(a->writer, NULL);
        closep(&a->wake);
        a->started = false;
        a->closing = false;
        size_t left = unwritten(a);
        a->lost += left;
        a->writing_len = a->writing_off = 0;
        if (idle) {
                say(a, "%s: nothing was read for %d s after the run ended: the last %zu lines were not written",
                    a->what, DRAIN_IDLE_MS / 1000, left);
        } else if (a->error) {
                say_error(a, a->error);
        }
        a->pending_len = 0;
}

/* The writer's end (what is queued written, or given up), then what was
 * lost said on stderr. */
static void audit_flush(struct audit *a)
{
        audit_run(a);
        if (a->started) {
                drain(a);
        } else {
                a->lost += unwritten(a);
                a->pending_len = 0;
                say_error(a, a->error);
        }
        sigset_t saved;
        sigpipe_hold(&saved);  /* brig's stderr, its reader perhaps gone: brig still cleans up */
        for (size_t i = 0; a->notice && i < a->n_notes; i++)
                a->notice(a->notes[i], a->notice_data);
        sigpipe_release(&saved);
        a->n_notes = 0;
}

static void hex_of(const unsigned char *md, unsigned n, char out[AUDIT_HASH_HEX])
{
        for (unsigned i = 0; i < n && 2 * i + 2 < AUDIT_HASH_HEX; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Write one event, stamped with the wall-clock time (UTC, milliseconds),
 * the schema's version and its place in the hash chain: `seq` (its line,
 * from 1) and `prev` (the SHA-256 of the line before it, as written, its
 * newline left out). The end event also carries `stream`, the hash of
 * every line before it. A line the queue drops (a reader left behind) is
 * not in the chain: the next one follows the last one written, and `lost`
 * counts it — the stream stays verifiable, and says it is not complete. */
static void emit(struct audit *a, const char *event, json_t *o)
{
        struct timespec ts;
        struct tm tm;
        char stamp[40];
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(stamp + n, sizeof stamp - n, ".%03ldZ", ts.tv_nsec / 1000000);
        json_object_set_new(o, "time", json_string(stamp));
        json_object_set_new(o, "event", json_string(event));
        json_object_set_new(o, "v", json_integer(AUDIT_SCHEMA_VERSION));
        bool end = strcmp(event, "end") == 0;
        pthread_mutex_lock(&a->chain);
        json_object_set_new(o, "seq", json_integer((json_int_t)(a->seq + 1)));
        json_object_set_new(o, "prev", json_string(a->prev));
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned mdlen = 0;
        if (end) {
                EVP_MD_CTX *copy = EVP_MD_CTX_new();
                char hex[AUDIT_HASH_HEX] = "";
                if (copy && EVP_MD_CTX_copy_ex(copy, a->stream) && EVP_DigestFinal_ex(copy, md, &mdlen))
                        hex_of(md, mdlen, hex);
                EVP_MD_CTX_free(copy);
                json_object_set_new(o, "stream", json_string(hex));
        }
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        if (text) {
                size_t len = strlen(text);
                text[len] = '\n';  /* a whole line queued or none */
                if (queue(a, text, len + 1, end)) {
                        a->seq++;
                        sha256_text(text, len, a->prev);
                        EVP_DigestUpdate(a->stream, text, len + 1);
                        if (end) {
                                EVP_MD_CTX *copy = EVP_MD_CTX_new();
                                if (copy && EVP_MD_CTX_copy_ex(copy, a->stream) &&
                                    EVP_DigestFinal_ex(copy, md, &mdlen))
                                        hex_of(md, mdlen, a->stream_hex);
                                EVP_MD_CTX_free(copy);
                        }
                }
                free(text);
        }
        pthread_mutex_unlock(&a->chain);
}

/* The policy as brig_policy_to_json writes it, hashed: two runs with the
 * same digest ran under the same effective policy. */
static json_t *policy_digest(const brig_policy *p)
{
        char *text = p ? brig_policy_to_json(p, NULL) : NULL;
        char hex[SHA256_HEX] = "";
        if (text)
                sha256_text(text, strlen(text), hex);
        free(text);
        return hex[0] ? json_string(hex) : json_null();
}

void audit_start(struct audit *a, const struct run_plan *plan)
{
        json_t *cmd = json_array();
        for (char *const *p = plan->argv; p && *p; p++)
                json_array_append_new(cmd, json_string(*p));
        const struct host_features *h = host_probe();
        static const char *const modes[] = { [BRIG_NET_NONE] = "none", [BRIG_NET_PROXY] = "proxy",
                                             [BRIG_NET_HOST] = "host", [BRIG_NET_FILTERED] = "filtered" };
        struct utsname u;
        /* what decides what this stream can show: a control that degraded
         * records nothing, exec events need user notification */
        json_t *host = json_pack("{s:b, s:i, s:b, s:b, s:b, s:b, s:s}", "seccomp",
                                 !plan->seccomp_degraded && plan->wall != BRIG_WALL_GVISOR,
                                 "landlock_abi", plan->wall == BRIG_WALL_GVISOR ? 0 : plan->landlock_abi,
                                 "cgroup", !plan->cgroup_degraded,
                                 "ns_time", h && h->ns_time, "userns", h && h->userns, "exec_events",
                                 plan->audit_exec, "kernel", uname(&u) == 0 ? u.release : "?");
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        emit(a, "start", json_pack("{s:o, s:s, s:i, s:s, s:o, s:s, s:o, s:I, s:o}", "command", cmd, "workspace",
                                   plan->workspace, "uid", (int)plan->sandbox_uid, "brig_version", brig_version(),
                                   "policy_sha256", policy_digest(plan->policy), "net",
                                   (unsigned)plan->net_mode < ARRAY_SIZE(modes) ? modes[plan->net_mode] : "?", "host", host, "wall_ms",
                                   (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, "cwd",
                                   plan->cwd ? json_string(plan->cwd) : json_null()));
}

/* A field of /proc/PID/status: its last number ("NSpid:" ends with the
 * pid in the innermost namespace). */
static long status_field(pid_t host_pid, const char *field)
{
        char path[64], line[256];
        size_t n = strlen(field);
        snprintf(path, sizeof path, "/proc/%d/status", host_pid);
        FILE *f = fopen(path, "re");
        long v = -1;
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, field, n) == 0) {
                        char *last = strrchr(line, '\t');
                        v = last ? strtol(last + 1, NULL, 10) : -1;
                }
        if (f)
                fclose(f);
        return v;
}

/* The pid as the sandbox sees it: the last NSpid of the host pid. */
static long inside_pid(pid_t host_pid)
{
        return status_field(host_pid, "NSpid:");
}

pid_t audit_thread_group(pid_t tid)
{
        long tgid = status_field(tid, "Tgid:");
        return tgid > 0 ? (pid_t)tgid : tid;
}

static void emit_dropped(struct audit *a)
{
        if (!a->total_dropped)
                return;
        emit(a, "suppressed", json_pack("{s:s, s:I}", "syscall", "*", "count", (json_int_t)a->total_dropped));
        a->total_dropped = 0;
}

/* May one more syscall or suppressed line be written in this window? */
static bool total_budget(struct audit *a)
{
        uint64_t now = now_ms();
        if (now - a->total_start >= RATE_WINDOW_MS) {
                emit_dropped(a);
                a->total_start = now;
                a->total_lines = 0;
        }
        return a->total_lines++ < RATE_TOTAL;
}

static void emit_suppressed_line(struct audit *a, struct rate_slot *s)
{
        char *name = seccomp_syscall_name(s->nr);
        emit(a, "suppressed", json_pack("{s:s, s:I}", "syscall", name ? name : "?", "count", (json_int_t)s->suppressed));
        free(name);
        s->suppressed = 0;
}

static void emit_suppressed(struct audit *a, struct rate_slot *s)
{
        if (!s->suppressed)
                return;
        if (!total_budget(a)) {
                a->total_dropped += s->suppressed;
                s->suppressed = 0;
                return;
        }
        emit_suppressed_line(a, s);
}

static struct rate_slot *slot_for(struct audit *a, int nr)
{
        struct rate_slot *free_slot = NULL, *oldest = &a->slots[0];
        for (int i = 0; i < RATE_SLOTS; i++) {
                struct rate_slot *s = &a->slots[i];
                if (s->nr == nr)
                        return s;
                if (s->nr < 0 && !free_slot)
                        free_slot = s;
                if (s->window_start < oldest->window_start)
                        oldest = s;
        }
        struct rate_slot *s = free_slot ? free_slot : oldest;
        if (s->nr >= 0)
                emit_suppressed(a, s);
        *s = (struct rate_slot){ .nr = nr };
        return s;
}

void audit_syscall(struct audit *a, pid_t host_pid, int nr, const uint64_t args[6], int reply)
{
        struct rate_slot *s = slot_for(a, nr);
        uint64_t now = now_ms();
        if (now - s->window_start >= RATE_WINDOW_MS) {
                emit_suppressed(a, s);
                s->window_start = now;
                s->in_window = 0;
        }
        if (++s->in_window > RATE_BURST) {
                s->suppressed++;
                a->suppressed++;
                return;
        }
        if (!total_budget(a)) {
                a->total_dropped++;
                a->suppressed++;
                return;
        }
        a->events++;
        char *name = seccomp_syscall_name(nr);
        json_t *argv = json_array();
        for (int i = 0; i < 6; i++) {
                char hex[24];
                snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)args[i]);
                json_array_append_new(argv, json_string(hex));
        }
        json_t *o = json_pack("{s:s, s:i, s:o, s:I, s:i, s:s}", "syscall", name ? name : "?", "nr", nr, "args",
                              argv, "pid", (json_int_t)inside_pid(host_pid), "host_pid", (int)host_pid, "action",
                              reply == 0 ? "log" : "deny-log");
        if (reply > 0) {
                const char *e = strerrorname_np(reply);
                json_object_set_new(o, "errno", json_string(e ? e : "?"));
        }
        emit(a, "syscall", o);
        free(name);
}

static void emit_net_dropped(struct audit *a)
{
        if (!a->net_dropped)
                return;
        emit(a, "suppressed", json_pack("{s:s, s:I}", "net", "*", "count", (json_int_t)a->net_dropped));
        a->net_dropped = 0;
}

/* A network decision, as a manifest's outcome lists it: "allow
 * pypi.org:443", "deny dns evil.example", "refused unix /run/x.sock". */
static void note_reached(struct audit *a, const char *kind, json_t *e)
{
        char *key = NULL;
        const char *host = json_string_value(json_object_get(e, "host"));
        if (!host)
                host = json_string_value(json_object_get(e, "address"));
        if (kind && strcmp(kind, "dns") == 0)
                key = brig_strdup_printf("%s dns %s", json_string_value(json_object_get(e, "decision")) ?: "?",
                                         json_string_value(json_object_get(e, "name")) ?: "?");
        else if (kind && strcmp(kind, "unix") == 0)
                key = brig_strdup_printf("%s unix %s", json_string_value(json_object_get(e, "action")) ?: "?",
                                         json_string_value(json_object_get(e, "path")) ?: "?");
        else if (!json_string_value(json_object_get(e, "phase")) ||
                 strcmp(json_string_value(json_object_get(e, "phase")), "connect") == 0)
                key = brig_strdup_printf("%s %s:%lld", json_string_value(json_object_get(e, "decision")) ?: "?",
                                         host ? host : "?",
                                         (long long)json_integer_value(json_object_get(e, "port")));
        if (key && json_object_size(a->reached) < 100000)
                json_object_set_new(a->reached, key, json_true());
        free(key);
}

static int by_text(const void *x, const void *y)
{
        return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static json_t *sorted_keys(json_t *set)
{
        size_t n = json_object_size(set), i = 0;
        const char **keys = calloc(n + 1, sizeof *keys);
        json_t *out = json_array();
        const char *k;
        json_t *v;
        json_object_foreach(set, k, v)
                if (keys)
                        keys[i++] = k;
        if (keys)
                qsort(keys, i, sizeof *keys, by_text);
        for (size_t j = 0; keys && j < i; j++)
                json_array_append_new(out, json_string(keys[j]));
        free(keys);
        return out;
}

json_t *audit_outcome(const struct audit *a)
{
        return json_pack("{s:o, s:o}", "programs", sorted_keys(a->programs), "net", sorted_keys(a->reached));
}

void audit_change(struct audit *a, const char *kind, json_t *event)
{
        if (!a) {
                json_decref(event);
                return;
        }
        a->events++;
        emit(a, kind, event);
}

void audit_net(void *audit, json_t *event)
{
        struct audit *a = audit;
        if (!a) {
                json_decref(event);
                return;
        }
        const char *kind = json_string_value(json_object_get(event, "event"));
        if (kind && strcmp(kind, "net_rule") == 0) {
                /* a live rule change (control.c) is the operator's act, not
                 * the sandbox's: never lost to the rate limit its own
                 * attempts fill */
                a->events++;
                emit(a, "net_rule", event);
                return;
        }
        note_reached(a, kind, event);
        uint64_t now = now_ms();
        if (now - a->net_start >= RATE_WINDOW_MS) {
                emit_net_dropped(a);
                a->net_start = now;
                a->net_lines = 0;
        }
        if (a->net_lines++ >= RATE_NET) {
                a->net_dropped++;
                a->net_suppressed++;
                json_decref(event);
                return;
        }
        a->events++;
        /* "net" for connections, "dns" for the filtered mode's stub, "unix"
         * for the unix socket guard (unixguard.c) */
        emit(a, kind && strcmp(kind, "dns") == 0 ? "dns" : kind && strcmp(kind, "unix") == 0 ? "unix" : "net", event);
}

static void emit_exec_dropped(struct audit *a)
{
        if (!a->exec_dropped)
                return;
        emit(a, "suppressed", json_pack("{s:s, s:I}", "exec", "*", "count", (json_int_t)a->exec_dropped));
        a->exec_dropped = 0;
}

/* exec and exit events share RATE_EXEC lines a second: a fork-exec storm
 * is counted, not written line by line. */
static bool exec_budget(struct audit *a)
{
        uint64_t now = now_ms();
        if (now - a->exec_start >= RATE_WINDOW_MS) {
                emit_exec_dropped(a);
                a->exec_start = now;
                a->exec_lines = 0;
        }
        if (a->exec_lines++ < RATE_EXEC)
                return true;
        a->exec_dropped++;
        a->exec_suppressed++;
        return false;
}

long audit_exec(struct audit *a, pid_t host_pid, json_t *event)
{
        a->execs++;
        /* what ran, written or not (a manifest's outcome): the kernel's
         * file where it named one, else the path */
        const char *prog = json_string_value(json_object_get(event, "file"));
        if (!prog)
                prog = json_string_value(json_object_get(event, "path"));
        if (prog && json_object_size(a->programs) < 100000)
                json_object_set_new(a->programs, prog, json_true());
        if (!exec_budget(a)) {
                json_decref(event);
                return AUDIT_NOT_RECORDED;
        }
        long pid = inside_pid(host_pid);
        pid_t ppid = (pid_t)status_field(host_pid, "PPid:");
        json_object_set_new(event, "pid", json_integer(pid));
        json_object_set_new(event, "host_pid", json_integer(host_pid));
        /* the parent as the sandbox sees it; null for pid 1's (outside) */
        long inside_ppid = ppid > 0 ? inside_pid(ppid) : -1;
        json_object_set_new(event, "ppid", inside_ppid > 0 && pid != 1 ? json_integer(inside_ppid) : json_null());
        a->events++;
        emit(a, "exec", event);
        return pid;
}

void audit_exit(struct audit *a, json_t *event)
{
        if (!exec_budget(a)) {
                json_decref(event);
                return;
        }
        a->events++;
        emit(a, "exit", event);
}

void audit_files(struct audit *a, json_t *event)
{
        json_t *at = json_object_get(event, "stopped_at");
        if (at)
                note(a, "the audit stream's file changes are incomplete: the walk stopped at %lld entries "
                        "(--changes-max N raises the cap; 0 removes it)", (long long)json_integer_value(at));
        a->events++;
        emit(a, "files", event);
}

void audit_end(struct audit *a, const brig_result *res)
{
        for (int i = 0; i < RATE_SLOTS; i++)
                if (a->slots[i].nr >= 0 && a->slots[i].suppressed)
                        emit_suppressed_line(a, &a->slots[i]);  /* the last counts: at most RATE_SLOTS lines */
        emit_dropped(a);
        emit_net_dropped(a);
        emit_exec_dropped(a);
        /* a limit that ended the run, in its own event (--only limit) */
        static const struct {
                enum brig_reason reason;
                const char *limit, *detail;
        } limits[] = {
                { BRIG_REASON_TIMEOUT, "timeout", "the wall-clock limit ended the run (--timeout)" },
                { BRIG_REASON_OOM, "memory", "the memory limit ended the run (--memory)" },
                { BRIG_REASON_PIDS, "pids", "the process limit was reached (--pids)" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(limits); i++)
                if (res->reason == limits[i].reason)
                        emit(a, "limit", json_pack("{s:s, s:s}", "limit", limits[i].limit, "detail", limits[i].detail));
        pthread_mutex_lock(&a->lock);
        uint64_t lost = a->lost;
        pthread_mutex_unlock(&a->lock);
        json_t *end = json_pack("{s:i, s:o, s:s, s:I, s:I, s:I, s:I, s:I}", "exit_code", res->exit_code, "signal",
                                res->signal ? json_integer(res->signal) : json_null(), "reason",
                                brig_reason_name(res->reason), "duration_ms", (json_int_t)res->duration_ms,
                                "syscall_events", (json_int_t)a->events, "suppressed", (json_int_t)a->suppressed,
                                "net_suppressed", (json_int_t)a->net_suppressed, "lost", (json_int_t)lost);
        json_object_set_new(end, "execs", json_integer((json_int_t)a->execs));
        json_object_set_new(end, "exec_suppressed", json_integer((json_int_t)a->exec_suppressed));
        json_object_set_new(end, "usage", json_pack("{s:I, s:I, s:o, s:o}", "cpu_user_ms",
                                                    (json_int_t)res->cpu_user_ms, "cpu_system_ms",
                                                    (json_int_t)res->cpu_system_ms, "memory_peak_bytes",
                                                    res->memory_peak_bytes >= 0 ? json_integer(res->memory_peak_bytes)
                                                                                : json_null(),
                                                    "pids_peak", res->pids_peak >= 0 ? json_integer(res->pids_peak)
                                                                                     : json_null()));
        emit(a, "end", end);
        audit_flush(a);
}

uint64_t audit_events(const struct audit *a)
{
        return a ? a->events : 0;
}

uint64_t audit_suppressed(const struct audit *a)
{
        return a ? a->suppressed : 0;
}

uint64_t audit_lost(const struct audit *a)
{
        return a ? a->lost : 0;
}

const char *audit_sha256(const struct audit *a)
{
        return a && a->stream_hex[0] ? a->stream_hex : NULL;
}

const char *audit_stopped(const struct audit *a)
{
        return a && a->stopped[0] ? a->stopped : NULL;
}

void audit_free(struct audit *a)
{
        if (!a)
                return;
        if (a->started)
                audit_flush(a);
        EVP_MD_CTX_free(a->stream);
        json_decref(a->programs);
        json_decref(a->reached);
        pthread_mutex_destroy(&a->chain);
        pthread_cond_destroy(&a->more);
        pthread_cond_destroy(&a->progress);
        pthread_mutex_destroy(&a->lock);
        free(a->pending);
        free(a->writing);
        free(a->what);
        free(a);
}
