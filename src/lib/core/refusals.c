/* refusals.c — what brig refused during a run, for the agent that ran it.
 *
 * The egress proxy, the DNS stubs, the unix socket guard, the seccomp
 * listener and the end-of-run limit checks each tell this one collection
 * what they refused, why, and which flag would allow it, as it happens;
 * nothing is parsed back out of the audit stream. Equal refusals are one
 * entry with a count; the number of entries is bounded (a sandbox chooses
 * how many distinct names it tries), and what is over is counted.
 *
 * `what` may be the sandbox's choice (a socket path): every character
 * outside a small safe set is shown as \xNN, so no path can read like
 * brig's own words — a second "allow with --allow-unix /run/docker.sock",
 * a parenthesis, a new line — to an agent that follows the suggestion. */
#define _GNU_SOURCE
#include "core/refusals.h"

#include <stdio.h>
#include <string.h>

struct refusal {
        enum refusal_kind kind;
        char *what, *why, *allow_with;  /* allow_with may be NULL */
        uint64_t count;
        bool summarized;                /* already the run's summary line */
};

struct refusals {
        struct refusal items[REFUSALS_MAX];
        size_t n;
        uint64_t over_entries;  /* causes beyond REFUSALS_MAX */
};

struct refusals *refusals_new(void)
{
        return calloc(1, sizeof(struct refusals));
}

static bool safe_char(unsigned char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("/._-@:[]*+=,~%", c) != NULL;
}

void refusals_quote(const char *in, char *out, size_t size)
{
        size_t n = 0;
        for (const unsigned char *c = (const unsigned char *)in; *c && size; c++) {
                int w = safe_char(*c) && *c ? snprintf(out + n, size - n, "%c", *c)
                                            : snprintf(out + n, size - n, "\\x%02x", *c);
                if (w < 0 || (size_t)w >= size - n)
                        break;  /* whole characters only */
                n += (size_t)w;
        }
        if (size)
                out[n] = '\0';
}

static bool same(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

static void add(struct refusals *r, enum refusal_kind kind, const char *what, const char *why, const char *allow_with,
                uint64_t count, bool summarized)
{
        if (!r || !what || !why)
                return;
        /* a destination, a path, a name: the sandbox's bytes, quoted; a
         * limit's `what` is brig's own words ("memory limit 512M"), as
         * they are (quoted, they read "memory\x20limit\x20512M") */
        char quoted[1024];
        if (kind != REFUSAL_LIMIT) {
                refusals_quote(what, quoted, sizeof quoted);
                what = quoted;
        }
        for (size_t i = 0; i < r->n; i++) {
                struct refusal *f = &r->items[i];
                if (f->kind == kind && same(f->what, what) && same(f->why, why) && same(f->allow_with, allow_with)) {
                        f->count += count;
                        return;
                }
        }
        if (r->n == REFUSALS_MAX) {
                r->over_entries++;
                return;
        }
        struct refusal f = { .kind = kind, .what = strdup(what), .why = strdup(why),
                             .allow_with = allow_with ? strdup(allow_with) : NULL, .count = count,
                             .summarized = summarized };
        if (!f.what || !f.why || (allow_with && !f.allow_with)) {
                free(f.what);
                free(f.why);
                free(f.allow_with);
                r->over_entries++;  /* out of memory: still counted */
                return;
        }
        r->items[r->n++] = f;
}

void refusals_add(struct refusals *r, enum refusal_kind kind, const char *what, const char *why,
                  const char *allow_with, uint64_t count)
{
        add(r, kind, what, why, allow_with, count, false);
}

void refusals_add_summarized(struct refusals *r, const char *what, const char *why, const char *allow_with,
                             uint64_t count)
{
        add(r, REFUSAL_LIMIT, what, why, allow_with, count, true);
}

uint64_t refusals_dropped(const struct refusals *r)
{
        return r ? r->over_entries : 0;
}

static const char *kind_name(enum refusal_kind k)
{
        static const char *const names[] = { [REFUSAL_CONNECTION] = "connection", [REFUSAL_DNS] = "dns",
                                             [REFUSAL_SYSCALL] = "syscall", [REFUSAL_UNIX] = "unix",
                                             [REFUSAL_LIMIT] = "limit", [REFUSAL_AGENT] = "ssh-agent" };
        return names[k];
}

/* "refused 2 connections: registry.example:443 (address 203.0.113.80 is
 * reserved; allow with --allow-cidr 203.0.113.80/32:443)" */
static int line(const struct refusal *f, uint64_t count, char *buf, size_t size)
{
        static const char *const nouns[][2] = {
                [REFUSAL_CONNECTION] = { "connection", "connections" },
                [REFUSAL_DNS] = { "DNS lookup", "DNS lookups" },
                [REFUSAL_SYSCALL] = { "system call", "system calls" },
                [REFUSAL_UNIX] = { "connection to a unix socket outside the sandbox",
                                   "connections to unix sockets outside the sandbox" },
                [REFUSAL_AGENT] = { "ssh-agent request", "ssh-agent requests" },
        };
        if (f->kind == REFUSAL_LIMIT)  /* the count is in its words: "3 forks refused: ..." */
                return snprintf(buf, size, "%s%s%s%s\n", f->why, f->allow_with ? " (raise with " : "",
                                f->allow_with ? f->allow_with : "", f->allow_with ? ")" : "");
        return snprintf(buf, size, "refused %llu %s: %s (%s%s%s)\n", (unsigned long long)count,
                        nouns[f->kind][count != 1], f->what, f->why, f->allow_with ? "; allow with " : "",
                        f->allow_with ? f->allow_with : "");
}

/* The lines of every cause, or of what came since the mark. */
static void text(const struct refusals *r, const struct refusals_mark *m, size_t max_lines, char *buf, size_t size)
{
        if (!size)
                return;
        buf[0] = '\0';
        if (!r)
                return;
        size_t used = 0, lines = 0;
        uint64_t more = r->over_entries - (m ? m->over_entries : 0);
        for (size_t i = 0; i < r->n; i++) {
                const struct refusal *f = &r->items[i];
                uint64_t count = f->count - (m && i < m->n ? m->counts[i] : 0);
                if (f->summarized || count == 0)
                        continue;
                char one[1024];
                int n = line(f, count, one, sizeof one);
                /* whole lines only, and room left for the last one */
                if (lines == max_lines || n < 0 || (size_t)n >= sizeof one || used + (size_t)n + 96 >= size) {
                        more++;
                        continue;
                }
                memcpy(buf + used, one, (size_t)n + 1);
                used += (size_t)n;
                lines++;
        }
        if (more)
                snprintf(buf + used, size - used, "and %llu more cause%s of refusals (--json-report FILE lists "
                         "them, --audit FILE every attempt)\n", (unsigned long long)more, more == 1 ? "" : "s");
}

void refusals_text(const struct refusals *r, size_t max_lines, char *buf, size_t size)
{
        text(r, NULL, max_lines, buf, size);
}

void refusals_mark(const struct refusals *r, struct refusals_mark *m)
{
        *m = (struct refusals_mark){ 0 };
        if (!r)
                return;
        m->n = r->n;
        m->over_entries = r->over_entries;
        for (size_t i = 0; i < r->n; i++)
                m->counts[i] = r->items[i].count;
}

void refusals_text_since(const struct refusals *r, const struct refusals_mark *m, size_t max_lines, char *buf,
                         size_t size)
{
        text(r, m, max_lines, buf, size);
}

/* Every cause kept, or what came since the mark (counts since then). */
static json_t *to_json(const struct refusals *r, const struct refusals_mark *m)
{
        json_t *a = json_array();
        for (size_t i = 0; r && i < r->n; i++) {
                const struct refusal *f = &r->items[i];
                uint64_t count = f->count - (m && i < m->n ? m->counts[i] : 0);
                if (m && count == 0)
                        continue;
                json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "kind", kind_name(f->kind), "what", f->what, "why",
                                      f->why, "count", (json_int_t)count);
                json_object_set_new(o, "allow_with", f->allow_with ? json_string(f->allow_with) : json_null());
                json_array_append_new(a, o);
        }
        return a;
}

json_t *refusals_json(const struct refusals *r)
{
        return to_json(r, NULL);
}

json_t *refusals_json_since(const struct refusals *r, const struct refusals_mark *m)
{
        return to_json(r, m);
}

uint64_t refusals_dropped_since(const struct refusals *r, const struct refusals_mark *m)
{
        return r ? r->over_entries - m->over_entries : 0;
}

/* One entry as to_json makes it: the five fields, a kind of ours. */
static bool is_refusal(json_t *f)
{
        json_t *allow = json_object_get(f, "allow_with");
        const char *kind = json_string_value(json_object_get(f, "kind"));
        bool known = false;
        for (int k = REFUSAL_CONNECTION; kind && k <= REFUSAL_AGENT; k++)
                known = known || strcmp(kind, kind_name((enum refusal_kind)k)) == 0;
        return known && json_object_size(f) == 5 && json_is_string(json_object_get(f, "what")) &&
               json_is_string(json_object_get(f, "why")) && json_integer_value(json_object_get(f, "count")) > 0 &&
               (json_is_string(allow) || json_is_null(allow));
}

json_t *refusals_json_parse(const char *buf, size_t len)
{
        json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *list = json_object_get(doc, "refusals");
        json_t *dropped = json_object_get(doc, "refusals_dropped");
        bool ok = json_is_object(doc) && json_object_size(doc) == 2 && json_is_array(list) &&
                  json_array_size(list) <= REFUSALS_MAX && json_is_integer(dropped) && json_integer_value(dropped) >= 0;
        size_t i;
        json_t *f;
        json_array_foreach(list, i, f)
                ok = ok && is_refusal(f);
        if (!ok)
                json_decref(doc);
        return ok ? doc : NULL;
}

char *exec_usage_json(const struct exec_usage *u)
{
        json_t *doc = json_pack("{s:I, s:I, s:I}", "cpu_user_ms", (json_int_t)u->cpu_user_ms, "cpu_system_ms",
                                (json_int_t)u->cpu_system_ms, "memory_peak_bytes", (json_int_t)u->memory_peak_bytes);
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        return text;
}

int exec_usage_parse(const char *buf, size_t len, struct exec_usage *u)
{
        json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        json_t *user = json_object_get(doc, "cpu_user_ms"), *sys = json_object_get(doc, "cpu_system_ms"),
               *mem = json_object_get(doc, "memory_peak_bytes");
        bool ok = json_is_object(doc) && json_object_size(doc) == 3 && json_is_integer(user) && json_is_integer(sys) &&
                  json_is_integer(mem) && json_integer_value(user) >= 0 && json_integer_value(sys) >= 0 &&
                  json_integer_value(mem) >= 0;
        if (ok)
                *u = (struct exec_usage){ (uint64_t)json_integer_value(user), (uint64_t)json_integer_value(sys),
                                          (int64_t)json_integer_value(mem) };
        json_decref(doc);
        return ok ? 0 : -EBADMSG;
}

void refusals_free(struct refusals *r)
{
        for (size_t i = 0; r && i < r->n; i++) {
                free(r->items[i].what);
                free(r->items[i].why);
                free(r->items[i].allow_with);
        }
        free(r);
}
