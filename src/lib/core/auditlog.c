/* auditlog.c — reading an audit stream back (brig log): checking its hash
 * chain, a line of the timeline in words, the summary a model can take as
 * context. Schema in docs/audit.md and docs/audit.schema.json.
 *
 * Every byte here is untrusted: the file may have been edited, and the
 * strings in it (argv, paths, host names) are what the sandbox chose. So
 * nothing is assumed of a line's shape (a field of the wrong type is
 * "?"), and every string reaches the text with its control characters
 * shown as \xNN — a program named ESC]52;... in argv must not become an
 * escape sequence on the terminal of the person reading the log.
 * tests/fuzz/fuzz_auditlog.c holds it to that. */
#define _GNU_SOURCE
#include "core/util.h"
#include "core/error.h"
#include "core/audit.h"
#include "core/ossl_fns.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the hash chain ------------------------------------------------------ */

struct line_info {
        const char *start;
        size_t len;
        json_int_t seq;   /* -1: none */
        json_t *doc;
};

static void verdict(brig_audit_verdict *v, uint64_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verdict(brig_audit_verdict *v, uint64_t line, const char *fmt, ...)
{
        if (v->bad_line)
                return;  /* the first place it was altered */
        v->bad_line = line;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(v->what, sizeof v->what, fmt, ap);
        va_end(ap);
}

/* The line (from 1) holding seq `want` in this stream, at or after index
 * `from`, or 0. */
static uint64_t line_of_seq(const struct line_info *l, size_t n, size_t from, json_int_t want)
{
        for (size_t i = from; i < n && l[i].seq != 1; i++)  /* seq 1: the next run's stream */
                if (l[i].seq == want)
                        return i + 1;
        return 0;
}

static void check_line(const struct line_info *l, size_t n, size_t i, size_t base, const char *prev,
                       EVP_MD_CTX *stream, bool *ended, brig_audit_verdict *v)
{
        uint64_t no = i + 1;
        json_t *doc = l[i].doc;
        if (!json_is_object(doc)) {
                verdict(v, no, "line %llu is not a JSON object: it was altered (or is not brig's)",
                        (unsigned long long)no);
                return;
        }
        const char *p = json_string_value(json_object_get(doc, "prev"));
        if (l[i].seq < 0 || !p) {
                verdict(v, no, "line %llu has no seq and prev: not part of a hash chain (altered, or written by a "
                        "brig before audit schema 1)", (unsigned long long)no);
                return;
        }
        if (*ended) {
                verdict(v, no, "line %llu comes after the end event: lines were added", (unsigned long long)no);
                return;
        }
        json_int_t want = (json_int_t)(no - base);
        if (l[i].seq != want) {
                uint64_t at = line_of_seq(l, n, i + 1, want);  /* (in this run's stream) */
                if (l[i].seq > want && at)
                        verdict(v, no, "line %llu holds seq %lld, but seq %lld is at line %llu: lines were "
                                "reordered", (unsigned long long)no, (long long)l[i].seq, (long long)want,
                                (unsigned long long)at);
                else if (l[i].seq == want + 1)
                        verdict(v, no, "seq %lld of this stream is missing before line %llu: a line was removed",
                                (long long)want, (unsigned long long)no);
                else if (l[i].seq > want)
                        verdict(v, no, "seq %lld to %lld of this stream are missing before line %llu: lines were "
                                "removed", (long long)want, (long long)(l[i].seq - 1), (unsigned long long)no);
                else
                        verdict(v, no, "line %llu holds seq %lld again: lines were reordered or repeated",
                                (unsigned long long)no, (long long)l[i].seq);
                return;
        }
        if (strcmp(p, prev) != 0) {
                if (no == base + 1)
                        verdict(v, no, "line %llu does not start a chain (prev is not zero): lines before it were "
                                "removed", (unsigned long long)no);
                else
                        verdict(v, no - 1, "line %llu was altered: line %llu records another hash for it",
                                (unsigned long long)(no - 1), (unsigned long long)no);
                return;
        }
        const char *ev = json_string_value(json_object_get(doc, "event"));
        if (ev && strcmp(ev, "end") == 0) {
                *ended = true;
                unsigned char md[EVP_MAX_MD_SIZE];
                unsigned mdlen = 0;
                char hex[AUDIT_HASH_HEX] = "";
                EVP_MD_CTX *copy = EVP_MD_CTX_new();
                if (copy && EVP_MD_CTX_copy_ex(copy, stream) && EVP_DigestFinal_ex(copy, md, &mdlen))
                        for (unsigned k = 0; k < mdlen && 2 * k + 2 < AUDIT_HASH_HEX; k++)
                                snprintf(hex + 2 * k, 3, "%02x", md[k]);
                EVP_MD_CTX_free(copy);
                const char *s = json_string_value(json_object_get(doc, "stream"));
                if (!s || strcmp(s, hex) != 0)
                        verdict(v, no, "line %llu (the end event) records another hash for the stream before it: "
                                "the stream was altered", (unsigned long long)no);
        }
}

int brig_audit_verify(const char *buf, size_t len, brig_audit_verdict *v)
{
        if (!v || v->size < sizeof *v || (!buf && len))
                return -EINVAL;
        memset((char *)v + sizeof v->size, 0, sizeof *v - sizeof v->size);
        size_t n = 0, cap = 0;
        struct line_info *l = NULL;
        int r = 0;
        for (size_t off = 0; off < len;) {
                const char *nl = memchr(buf + off, '\n', len - off);
                size_t ll = nl ? (size_t)(nl - (buf + off)) : len - off;
                if (n == cap) {
                        cap = cap ? cap * 2 : 64;
                        struct line_info *grown = realloc(l, cap * sizeof *l);
                        if (!grown) {
                                r = -ENOMEM;
                                goto out;
                        }
                        l = grown;
                }
                json_t *doc = json_loadb(buf + off, ll, JSON_REJECT_DUPLICATES, NULL);
                json_t *seq = json_object_get(doc, "seq");
                l[n++] = (struct line_info){ .start = buf + off, .len = ll, .doc = doc,
                                             .seq = json_is_integer(seq) ? json_integer_value(seq) : -1 };
                if (!nl) {
                        verdict(v, n, "line %zu is cut short (no newline at its end): the stream was truncated", n);
                        break;
                }
                off += ll + 1;
        }
        v->lines = n;
        EVP_MD_CTX *stream = EVP_MD_CTX_new();
        if (!stream || !EVP_DigestInit_ex(stream, EVP_sha256(), NULL)) {
                EVP_MD_CTX_free(stream);
                r = -ENOMEM;
                goto out;
        }
        /* --audit FILE appends: a file holds one stream per run, each
         * from seq 1; v->sha256 is the last one's (the last report's) */
        char prev[AUDIT_HASH_HEX];
        bool ended = false;
        size_t base = 0;
        for (size_t i = 0; i < n && !v->bad_line; i++) {
                if (i == 0 || (ended && l[i].seq == 1)) {
                        EVP_DigestInit_ex(stream, EVP_sha256(), NULL);
                        memset(prev, '0', AUDIT_HASH_HEX - 1);
                        prev[AUDIT_HASH_HEX - 1] = '\0';
                        ended = false;
                        base = i;
                        v->streams++;
                }
                check_line(l, n, i, base, prev, stream, &ended, v);
                sha256_text(l[i].start, l[i].len, prev);
                EVP_DigestUpdate(stream, l[i].start, l[i].len);
                EVP_DigestUpdate(stream, "\n", 1);
        }
        if (ended) {
                unsigned char md[EVP_MAX_MD_SIZE];
                unsigned mdlen = 0;
                if (EVP_DigestFinal_ex(stream, md, &mdlen))
                        for (unsigned k = 0; k < mdlen && 2 * k + 2 < AUDIT_HASH_HEX; k++)
                                snprintf(v->sha256 + 2 * k, 3, "%02x", md[k]);
        }
        EVP_MD_CTX_free(stream);
        v->ended = ended;
        if (!v->bad_line && !n)
                verdict(v, 1, "the stream is empty");
        else if (!v->bad_line && !ended)
                verdict(v, n + 1, "the stream ends after line %zu without an end event: truncated (or the run is "
                        "still going)", n);
        r = v->bad_line ? -EBADMSG : 0;
out:
        for (size_t i = 0; i < n; i++)
                json_decref(l[i].doc);
        free(l);
        return r;
}

/* ---- the timeline -------------------------------------------------------- */

struct brig_audit_reader {
        unsigned flags;
        unsigned only;       /* categories shown; 0: all */
        json_t *programs;    /* distinct program paths run, for the summary */
        uint64_t execs, exec_suppressed;
        uint64_t net_allowed, net_denied, syscalls_refused, unix_refused;
        json_t *denied;      /* "host:port (reason)" of refused connections, first few */
        json_t *refused_calls;
        json_t *end;
        json_t *files;
        uint64_t lines;
};

enum {
        CAT_START = 1 << 0, CAT_EXEC = 1 << 1, CAT_NET = 1 << 2, CAT_SYSCALL = 1 << 3, CAT_FILES = 1 << 4,
        CAT_LIMIT = 1 << 5, CAT_APPROVAL = 1 << 6, CAT_END = 1 << 7,
};

static const struct {
        const char *name;
        unsigned cat;
} categories[] = {
        { "start", CAT_START }, { "exec", CAT_EXEC }, { "net", CAT_NET }, { "syscall", CAT_SYSCALL },
        { "files", CAT_FILES }, { "limit", CAT_LIMIT }, { "approval", CAT_APPROVAL }, { "end", CAT_END },
};

#define SUMMARY_NAMES 5

int brig_audit_reader_new(unsigned flags, const char *only, brig_audit_reader **ret, brig_error **err)
{
        unsigned mask = 0;
        for (const char *p = only; p && *p;) {
                size_t n = strcspn(p, ",");
                unsigned found = 0;
                for (size_t i = 0; i < ARRAY_SIZE(categories); i++)
                        if (strlen(categories[i].name) == n && strncmp(categories[i].name, p, n) == 0)
                                found = categories[i].cat;
                if (!found) {
                        brig_err(err, 0, "--only: '%.*s' is not a kind of event (expected a list of start, exec, "
                                 "net, syscall, files, limit, approval, end)", (int)n, p);
                        return -EINVAL;
                }
                mask |= found;
                p += n + (p[n] == ',');
        }
        brig_audit_reader *r = calloc(1, sizeof *r);
        if (!r || !(r->programs = json_object()) || !(r->denied = json_array()) ||
            !(r->refused_calls = json_object())) {
                brig_audit_reader_free(r);
                return brig_err(err, ENOMEM, "brig log");
        }
        r->flags = flags;
        r->only = mask;
        *ret = r;
        return 0;
}

void brig_audit_reader_free(brig_audit_reader *r)
{
        if (!r)
                return;
        json_decref(r->programs);
        json_decref(r->denied);
        json_decref(r->refused_calls);
        json_decref(r->end);
        json_decref(r->files);
        free(r);
}

/* The text being made: control characters of the stream's strings as
 * \xNN (text_control_len: C0, DEL, C1 in UTF-8, bidi controls). */
struct out {
        char *buf;
        size_t len;
        FILE *f;
};

static void put_safe(FILE *f, const char *s)
{
        for (const char *c = s; *c;) {
                size_t k = text_control_len(c);
                if (!k)
                        fputc(*c++, f);
                for (; k; k--)
                        fprintf(f, "\\x%02x", (unsigned char)*c++);
        }
}

/* put_safe, then spaces up to WIDTH: printf's "%-8s" for a field of the
 * file's (no field the file holds goes out through printf's %s) */
static void put_padded(FILE *f, const char *s, int width)
{
        put_safe(f, s);
        for (int n = (int)strlen(s); n < width; n++)
                fputc(' ', f);
}

static const char *str(const json_t *o, const char *key)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : "?";
}

static long long num(const json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

static void colour(const brig_audit_reader *r, FILE *f, const char *sgr)
{
        if (r->flags & BRIG_AUDIT_COLOUR)
                fprintf(f, "\033[%sm", sgr);
}

static void put_argv(FILE *f, const json_t *argv)
{
        size_t i;
        json_t *a;
        json_array_foreach(argv, i, a) {
                const char *s = json_string_value(a);
                if (i)
                        fputc(' ', f);
                bool quote = !s || !s[0] || strpbrk(s, " \t'\"\\$`");
                if (quote)
                        fputc('\'', f);
                put_safe(f, s ? s : "?");
                if (quote)
                        fputc('\'', f);
                if (i >= 64) {
                        fputs(" ...", f);
                        break;
                }
        }
}

static bool denied(const char *ev, const json_t *o)
{
        if (strcmp(ev, "net") == 0 || strcmp(ev, "dns") == 0)
                return strcmp(str(o, "decision"), "deny") == 0;
        if (strcmp(ev, "unix") == 0)
                return strcmp(str(o, "action"), "refused") == 0;
        if (strcmp(ev, "syscall") == 0)
                return strcmp(str(o, "action"), "deny-log") == 0;
        if (strcmp(ev, "approval") == 0)
                return strcmp(str(o, "decision"), "deny") == 0;
        return false;
}

static unsigned category(const char *ev)
{
        if (strcmp(ev, "exec") == 0 || strcmp(ev, "exit") == 0)
                return CAT_EXEC;
        if (strcmp(ev, "net") == 0 || strcmp(ev, "dns") == 0 || strcmp(ev, "unix") == 0 || strcmp(ev, "net_rule") == 0)
                return CAT_NET;
        if (strcmp(ev, "syscall") == 0)
                return CAT_SYSCALL;
        if (strcmp(ev, "files") == 0)
                return CAT_FILES;
        if (strcmp(ev, "limit") == 0 || strcmp(ev, "suppressed") == 0 || strcmp(ev, "limit_change") == 0)
                return CAT_LIMIT;
        if (strcmp(ev, "approval") == 0)
                return CAT_APPROVAL;
        if (strcmp(ev, "start") == 0)
                return CAT_START;
        if (strcmp(ev, "end") == 0)
                return CAT_END;
        return 0;
}

static void count(brig_audit_reader *r, const char *ev, json_t *o)
{
        if (strcmp(ev, "exec") == 0) {
                r->execs++;
                const char *prog = json_string_value(json_object_get(o, "file"));
                if (!prog)
                        prog = json_string_value(json_object_get(o, "path"));
                if (prog && json_object_size(r->programs) < 10000)
                        json_object_set_new(r->programs, prog, json_true());
        } else if (strcmp(ev, "net") == 0 && strcmp(str(o, "phase"), "connect") == 0) {
                if (!denied(ev, o)) {
                        r->net_allowed++;
                        return;
                }
                r->net_denied++;
                if (json_array_size(r->denied) < SUMMARY_NAMES) {
                        json_t *host = json_object_get(o, "host");
                        char *d = NULL;
                        if (asprintf(&d, "%s:%lld (%s)", json_is_string(host) ? json_string_value(host)
                                                                               : str(o, "address"),
                                     num(o, "port"), str(o, "reason")) >= 0)
                                json_array_append_new(r->denied, json_string(d) ?: json_string("?"));
                        free(d);
                }
        } else if (strcmp(ev, "unix") == 0 && denied(ev, o)) {
                r->unix_refused++;
        } else if (strcmp(ev, "syscall") == 0 && denied(ev, o)) {
                r->syscalls_refused++;
                const char *name = str(o, "syscall");
                if (json_object_size(r->refused_calls) < 1000) {
                        json_t *c = json_object_get(r->refused_calls, name);
                        json_object_set_new(r->refused_calls, name, json_integer(json_integer_value(c) + 1));
                }
        } else if (strcmp(ev, "suppressed") == 0 && json_is_string(json_object_get(o, "exec"))) {
                r->exec_suppressed += num(o, "count") > 0 ? (uint64_t)num(o, "count") : 0;
        } else if (strcmp(ev, "end") == 0) {
                json_decref(r->end);
                r->end = json_incref(o);
        } else if (strcmp(ev, "files") == 0) {
                json_decref(r->files);
                r->files = json_incref(o);
        }
}

static void describe(const brig_audit_reader *r, FILE *f, const char *ev, const json_t *o)
{
        bool bad = denied(ev, o);
        if (strcmp(ev, "start") == 0) {
                fputs("start    ", f);
                put_argv(f, json_object_get(o, "command"));
                fputs("  (brig ", f);
                put_safe(f, str(o, "brig_version"));
                fputs(", network ", f);
                put_safe(f, str(o, "net"));
                fputs(", policy ", f);
                char hash[13];
                snprintf(hash, sizeof hash, "%s", str(o, "policy_sha256"));
                put_safe(f, hash);
                fputs(")", f);
        } else if (strcmp(ev, "exec") == 0) {
                colour(r, f, "36");
                fprintf(f, "exec     pid %lld", num(o, "pid"));
                if (num(o, "ppid") > 0)
                        fprintf(f, " (of %lld)", num(o, "ppid"));
                fputs(": ", f);
                put_argv(f, json_object_get(o, "argv"));
                colour(r, f, "0");
                const char *file = json_string_value(json_object_get(o, "file"));
                fputs("  [", f);
                put_safe(f, file ? file : str(o, "path"));
                fputs("]", f);
        } else if (strcmp(ev, "exit") == 0) {
                fprintf(f, "exit     pid %lld ", num(o, "pid"));
                put_safe(f, str(o, "path"));
                if (num(o, "signal") > 0)
                        fprintf(f, ": killed by signal %lld", num(o, "signal"));
                else if (num(o, "exit_code") >= 0)
                        fprintf(f, ": exit %lld", num(o, "exit_code"));
                else
                        fputs(": ended", f);
                fprintf(f, " after %lld ms", num(o, "duration_ms"));
        } else if (strcmp(ev, "net") == 0 || strcmp(ev, "dns") == 0) {
                json_t *host = json_object_get(o, "host");
                if (strcmp(ev, "dns") == 0)
                        host = json_object_get(o, "name");
                if (bad)
                        colour(r, f, "31");
                else if (strcmp(str(o, "phase"), "close") != 0)
                        colour(r, f, "32");
                fprintf(f, "%-8s ", ev);  /* net or dns */
                put_padded(f, strcmp(str(o, "phase"), "close") == 0 ? "close" : str(o, "decision"), 6);
                fputc(' ', f);
                put_safe(f, json_is_string(host) ? json_string_value(host) : str(o, "address"));
                if (strcmp(ev, "net") == 0)
                        fprintf(f, ":%lld", num(o, "port"));
                else {
                        fputc(' ', f);
                        put_safe(f, str(o, "type"));
                }
                colour(r, f, "0");
                if (strcmp(str(o, "phase"), "close") == 0) {
                        fprintf(f, "  %lld bytes up, %lld down, %lld ms", num(o, "bytes_up"), num(o, "bytes_down"),
                                num(o, "duration_ms"));
                } else {
                        fputs("  (", f);
                        put_safe(f, str(o, "reason"));
                        fputs(")", f);
                }
        } else if (strcmp(ev, "unix") == 0) {
                if (bad)
                        colour(r, f, "31");
                fputs("unix     ", f);
                put_padded(f, str(o, "action"), 6);
                fputc(' ', f);
                put_safe(f, str(o, "call"));
                fputc(' ', f);
                put_safe(f, str(o, "path"));
                colour(r, f, "0");
                fputs("  (", f);
                put_safe(f, str(o, "reason"));
                fputs(")", f);
        } else if (strcmp(ev, "syscall") == 0) {
                if (bad)
                        colour(r, f, "31");
                fputs("syscall  ", f);
                fprintf(f, "%-6s ", bad ? "deny" : "log");
                put_safe(f, str(o, "syscall"));
                colour(r, f, "0");
                fprintf(f, "  pid %lld", num(o, "pid"));
                if (json_is_string(json_object_get(o, "errno"))) {
                        fputs(", ", f);
                        put_safe(f, str(o, "errno"));
                }
        } else if (strcmp(ev, "suppressed") == 0) {
                colour(r, f, "33");
                fprintf(f, "suppressed %lld ", num(o, "count"));
                const char *what = json_is_string(json_object_get(o, "exec")) ? "exec and exit events"
                                   : json_is_string(json_object_get(o, "net")) ? "network events"
                                                                             : NULL;
                if (what)
                        fputs(what, f);
                else {
                        put_safe(f, str(o, "syscall"));
                        fputs(" calls", f);
                }
                fputs(" (over the rate limit)", f);
                colour(r, f, "0");
        } else if (strcmp(ev, "limit") == 0) {
                colour(r, f, "33");
                fputs("limit    ", f);
                put_safe(f, str(o, "limit"));
                colour(r, f, "0");
                fputs("  ", f);
                put_safe(f, str(o, "detail"));
        } else if (strcmp(ev, "limit_change") == 0) {
                fputs("limit    ", f);
                put_safe(f, str(o, "limit"));
                fprintf(f, " set to %lld (live)", num(o, "value"));
        } else if (strcmp(ev, "net_rule") == 0) {
                fputs("net_rule ", f);
                put_safe(f, str(o, "change"));
                fputc(' ', f);
                put_safe(f, str(o, "action"));
                fputc(' ', f);
                put_safe(f, str(o, "host"));
        } else if (strcmp(ev, "files") == 0) {
                fprintf(f, "files    %lld added, %lld modified, %lld deleted", num(o, "added"), num(o, "modified"),
                        num(o, "deleted"));
                size_t i;
                json_t *c;
                json_array_foreach(json_object_get(o, "changes"), i, c) {
                        if (i == 20) {
                                fputs("\n         ...", f);
                                break;
                        }
                        fputs("\n         ", f);
                        put_padded(f, str(c, "change"), 8);
                        fputc(' ', f);
                        put_safe(f, str(c, "path"));
                        if (strcmp(str(c, "type"), "file") != 0) {
                                fputs(" [", f);
                                put_safe(f, str(c, "type"));
                                fputs("]", f);
                        }
                        if (num(c, "size") >= 0)
                                fprintf(f, " (%lld bytes)", num(c, "size"));
                }
        } else if (strcmp(ev, "end") == 0) {
                fputs("end      ", f);
                put_safe(f, str(o, "reason"));
                if (num(o, "signal") > 0)
                        fprintf(f, ", signal %lld", num(o, "signal"));
                else
                        fprintf(f, ", exit %lld", num(o, "exit_code"));
                fprintf(f, " after %lld ms", num(o, "duration_ms"));
                if (num(o, "lost") > 0)
                        fprintf(f, "; %lld lines lost (the reader did not keep up)", num(o, "lost"));
        } else {
                fputs("event    ", f);
                put_safe(f, ev);
        }
}

int brig_audit_reader_line(brig_audit_reader *r, const char *line, size_t len, char **text)
{
        *text = NULL;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
                len--;
        if (!len)
                return 0;
        r->lines++;
        json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        const char *ev = json_string_value(json_object_get(o, "event"));
        if (!json_is_object(o) || !ev) {
                json_decref(o);
                return -EBADMSG;
        }
        count(r, ev, o);
        unsigned cat = category(ev);
        bool show = (!r->only || (r->only & cat)) && (!(r->flags & BRIG_AUDIT_DENIED) || denied(ev, o));
        if (show) {
                struct out out = { 0 };
                out.f = open_memstream(&out.buf, &out.len);
                if (!out.f) {
                        json_decref(o);
                        return -ENOMEM;
                }
                const char *t = json_string_value(json_object_get(o, "time"));
                /* the time of day: a timeline reads by it; the date is in start */
                colour(r, out.f, "2");
                put_safe(out.f, t && strlen(t) >= 23 ? t + 11 : t ? t : "?");
                colour(r, out.f, "0");
                fputc(' ', out.f);
                describe(r, out.f, ev, o);
                if (fclose(out.f) != 0) {
                        free(out.buf);
                        json_decref(o);
                        return -ENOMEM;
                }
                *text = out.buf;
        }
        json_decref(o);
        return 0;
}

char *brig_audit_reader_summary(const brig_audit_reader *r)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return NULL;
        size_t distinct = json_object_size(r->programs);
        fprintf(f, "ran %llu program%s", (unsigned long long)r->execs, r->execs == 1 ? "" : "s");
        if (distinct) {
                fprintf(f, " (%zu distinct: ", distinct);
                size_t i = 0;
                const char *k;
                json_t *v;
                json_object_foreach(r->programs, k, v) {
                        if (i == SUMMARY_NAMES) {
                                fputs(", ...", f);
                                break;
                        }
                        const char *base = strrchr(k, '/');
                        fputs(i++ ? ", " : "", f);
                        put_safe(f, base && base[1] ? base + 1 : k);
                }
                fputs(")", f);
        }
        if (r->exec_suppressed)
                fprintf(f, " and %llu more not recorded (rate limit)", (unsigned long long)r->exec_suppressed);
        fprintf(f, "; %llu connection%s allowed", (unsigned long long)r->net_allowed, r->net_allowed == 1 ? "" : "s");
        fprintf(f, "; %llu connection%s refused", (unsigned long long)r->net_denied, r->net_denied == 1 ? "" : "s");
        size_t i;
        json_t *d;
        json_array_foreach(r->denied, i, d) {
                fputs(i ? ", " : ": ", f);
                put_safe(f, json_string_value(d));
        }
        if (r->unix_refused)
                fprintf(f, "; %llu unix socket connection%s refused", (unsigned long long)r->unix_refused,
                        r->unix_refused == 1 ? "" : "s");
        if (r->syscalls_refused) {
                fprintf(f, "; %llu system call%s refused", (unsigned long long)r->syscalls_refused,
                        r->syscalls_refused == 1 ? "" : "s");
                const char *k;
                json_t *v;
                size_t n = 0;
                json_object_foreach(r->refused_calls, k, v) {
                        if (n == SUMMARY_NAMES) {
                                fputs(", ...", f);
                                break;
                        }
                        fputs(n++ ? ", " : ": ", f);
                        put_safe(f, k);
                }
        }
        if (r->files)
                fprintf(f, "; files: %lld added, %lld modified, %lld deleted", num(r->files, "added"),
                        num(r->files, "modified"), num(r->files, "deleted"));
        if (r->end) {
                fputs("; ended: ", f);
                put_safe(f, str(r->end, "reason"));
                if (num(r->end, "signal") > 0)
                        fprintf(f, " (signal %lld)", num(r->end, "signal"));
                else
                        fprintf(f, " (exit %lld)", num(r->end, "exit_code"));
                fprintf(f, " after %lld ms", num(r->end, "duration_ms"));
        } else {
                fputs("; no end event (still running, or cut short)", f);
        }
        if (fclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
