/* audit.c — the audit stream: one JSON object per line, written by the
 * supervisor as events happen (`--audit FILE`). The schema is documented
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
 * "suppressed" event for "net"; the run report's egress counts stay exact. */
#define _GNU_SOURCE
#include "audit.h"
#include "seccomp_filter.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RATE_BURST 10
#define RATE_WINDOW_MS 1000
#define RATE_SLOTS 64
#define RATE_TOTAL 100
#define RATE_NET 100

struct rate_slot {
        int nr;             /* -1: free */
        uint64_t window_start;
        unsigned in_window;
        uint64_t suppressed;
};

struct audit {
        int fd;
        uint64_t events, suppressed;
        struct rate_slot slots[RATE_SLOTS];
        uint64_t total_start;   /* the window of RATE_TOTAL */
        unsigned total_lines;
        uint64_t total_dropped; /* calls over RATE_TOTAL, for the "*" event */
        uint64_t net_start;     /* the window of RATE_NET */
        unsigned net_lines;
        uint64_t net_dropped, net_suppressed;
};

struct audit *audit_new(int fd)
{
        struct audit *a = calloc(1, sizeof *a);
        if (!a)
                return NULL;
        a->fd = fd;
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

/* Write one event, stamped with the wall-clock time (UTC, milliseconds). */
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
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        if (!text)
                return;
        size_t len = strlen(text);
        text[len] = '\n';  /* one write per line: whole lines under O_APPEND */
        (void)!write(a->fd, text, len + 1);
        free(text);
}

void audit_start(struct audit *a, const struct run_plan *plan)
{
        json_t *cmd = json_array();
        for (char *const *p = plan->argv; p && *p; p++)
                json_array_append_new(cmd, json_string(*p));
        emit(a, "start", json_pack("{s:o, s:s, s:i, s:s}", "command", cmd, "workspace", plan->workspace,
                                   "uid", (int)plan->sandbox_uid, "brig_version", brig_version()));
}

/* The pid as the sandbox sees it: the last NSpid of the host pid. */
static long inside_pid(pid_t host_pid)
{
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/%d/status", host_pid);
        FILE *f = fopen(path, "re");
        long pid = -1;
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "NSpid:", 6) == 0) {
                        char *last = strrchr(line, '\t');
                        pid = last ? strtol(last + 1, NULL, 10) : -1;
                }
        if (f)
                fclose(f);
        return pid;
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

void audit_net(void *audit, json_t *event)
{
        struct audit *a = audit;
        if (!a) {
                json_decref(event);
                return;
        }
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
        const char *kind = json_string_value(json_object_get(event, "event"));
        emit(a, kind && strcmp(kind, "dns") == 0 ? "dns" : kind && strcmp(kind, "unix") == 0 ? "unix" : "net", event);
}

void audit_end(struct audit *a, const brig_result *res)
{
        for (int i = 0; i < RATE_SLOTS; i++)
                if (a->slots[i].nr >= 0 && a->slots[i].suppressed)
                        emit_suppressed_line(a, &a->slots[i]);  /* the last counts: at most RATE_SLOTS lines */
        emit_dropped(a);
        emit_net_dropped(a);
        emit(a, "end", json_pack("{s:i, s:o, s:s, s:I, s:I, s:I, s:I}", "exit_code", res->exit_code, "signal",
                                 res->signal ? json_integer(res->signal) : json_null(), "reason",
                                 brig_reason_name(res->reason), "duration_ms", (json_int_t)res->duration_ms,
                                 "syscall_events", (json_int_t)a->events, "suppressed", (json_int_t)a->suppressed,
                                 "net_suppressed", (json_int_t)a->net_suppressed));
}

uint64_t audit_events(const struct audit *a)
{
        return a ? a->events : 0;
}

uint64_t audit_suppressed(const struct audit *a)
{
        return a ? a->suppressed : 0;
}

void audit_free(struct audit *a)
{
        free(a);
}
