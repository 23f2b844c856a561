/* policy_json.c — policy files (docs/policy.md, schema in
 * docs/policy.schema.json): loading with located errors, built-in
 * profiles, and the dump that loads back to the same policy.
 *
 * A file is applied twice: first to a scratch policy, where every value is
 * checked by the same setters the flags use, then — only if all of it was
 * good — to the real one. So a bad file never leaves a policy half applied.
 * jansson parses; errors in the content are located by scanning the text
 * for the offending key or value (jansson keeps no positions). */
#define _GNU_SOURCE
#include "core/model.h"
#include "policy/settings.h"
#include "net/intercept.h"
#include "controls/seccomp_filter.h"
#include "tools/tools.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ---- built-in profiles ---------------------------------------------------- */

static const struct profile {
        const char *name;
        const char *json;
} profiles[] = {
        /* brig's defaults: workspace read-write, no network, 4G/1024 pids */
        { "default", "{}" },
        /* untrusted code that should only read: read-only workspace, tight limits */
        { "strict",
          "{\"filesystem\": {\"workspace_readonly\": true, \"tmp_size\": \"128M\", \"home_size\": \"64M\"},"
          " \"limits\": {\"memory\": \"1G\", \"pids\": 256, \"cpus\": 1, \"nofile\": 1024, \"timeout\": \"10m\","
          " \"fsize\": \"256M\"}}" },
        /* compilers and package managers: room to build */
        { "build",
          "{\"filesystem\": {\"tmp_size\": \"8G\", \"home_size\": \"4G\"},"
          " \"limits\": {\"memory\": \"8G\", \"pids\": 4096, \"nofile\": 65536}}" },
        /* headless Chromium: a large /dev/shm, many threads, memory */
        { "browser",
          "{\"filesystem\": {\"shm_size\": \"1G\", \"home_size\": \"1G\", \"tmp_size\": \"1G\"},"
          " \"limits\": {\"memory\": \"4G\", \"pids\": 4096, \"nofile\": 16384}}" },
};

const char *const *brig_profile_names(void)
{
        static const char *names[ARRAY_SIZE(profiles) + 1];
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++)
                names[i] = profiles[i].name;
        return names;
}

/* ---- locating a path in the text ------------------------------------------ */

/* Where in `text` the value (or, want_key, the key) at JSON-pointer-like
 * `target` ("/limits/memory", "/filesystem/binds/0/source") begins. The
 * text is valid JSON (jansson parsed it first), so a plain scan suffices. */
static bool locate(const char *text, size_t len, const char *target, bool want_key, int *line, int *col)
{
        struct frame {
                bool object;
                bool expect_key;
                int index;
                char key[128];
        } stack[64];
        int depth = 0, ln = 1, cl = 1;
        char path[1024];

#define PATH_NOW()                                                                               \
        do {                                                                                     \
                size_t o = 0;                                                                    \
                path[0] = '\0';                                                                  \
                for (int fi = 0; fi < depth && o < sizeof path; fi++)                            \
                        o += (size_t)(stack[fi].object                                           \
                                              ? snprintf(path + o, sizeof path - o, "/%s", stack[fi].key) \
                                              : snprintf(path + o, sizeof path - o, "/%d", stack[fi].index)); \
        } while (0)
#define VALUE_HERE()                                                         \
        do {                                                                 \
                PATH_NOW();                                                  \
                if (!want_key && strcmp(path, target) == 0) {                \
                        *line = ln;                                          \
                        *col = cl;                                           \
                        return true;                                         \
                }                                                            \
        } while (0)

        for (size_t i = 0; i < len;) {
                char c = text[i];
                if (c == '\n') {
                        ln++, cl = 1, i++;
                        continue;
                }
                if (c == ' ' || c == '\t' || c == '\r' || c == ':') {
                        cl++, i++;
                        continue;
                }
                if (c == ',') {
                        if (depth && stack[depth - 1].object)
                                stack[depth - 1].expect_key = true;
                        else if (depth)
                                stack[depth - 1].index++;
                        cl++, i++;
                        continue;
                }
                if (c == '{' || c == '[') {
                        VALUE_HERE();
                        if (depth == (int)ARRAY_SIZE(stack))
                                return false;
                        stack[depth++] = (struct frame){ .object = c == '{', .expect_key = c == '{' };
                        cl++, i++;
                        continue;
                }
                if (c == '}' || c == ']') {
                        depth--;
                        cl++, i++;
                        continue;
                }
                bool is_key = c == '"' && depth && stack[depth - 1].object && stack[depth - 1].expect_key;
                if (!is_key)
                        VALUE_HERE();
                int start_ln = ln, start_cl = cl;
                size_t start = i;
                if (c == '"') {
                        for (i++, cl++; i < len && text[i] != '"'; i++, cl++)
                                if (text[i] == '\\' && i + 1 < len)
                                        i++, cl++;
                        i++, cl++;
                } else {
                        while (i < len && !strchr(",}] \t\r\n", text[i]))
                                i++, cl++;
                }
                if (is_key) {
                        struct frame *f = &stack[depth - 1];
                        size_t n = i - start >= 2 ? i - start - 2 : 0;
                        snprintf(f->key, sizeof f->key, "%.*s", (int)n, text + start + 1);
                        f->expect_key = false;
                        PATH_NOW();
                        if (want_key && strcmp(path, target) == 0) {
                                *line = start_ln;
                                *col = start_cl;
                                return true;
                        }
                }
        }
        return false;
#undef PATH_NOW
#undef VALUE_HERE
}

/* ---- the loader ------------------------------------------------------------- */

struct loader {
        const char *file;   /* for messages */
        const char *text;
        size_t len;
        brig_error **err;
        int depth;          /* "extends" nesting */
};

static int fail_at(const struct loader *L, const char *path, bool at_key, const char *fmt, ...) BRIG_PRINTF(4, 5);
static int fail_at(const struct loader *L, const char *path, bool at_key, const char *fmt, ...)
{
        int line = 1, col = 1;
        if (!locate(L->text, L->len, path, at_key, &line, &col))
                locate(L->text, L->len, path, !at_key, &line, &col);
        char *msg = NULL;
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        int r = brig_err(L->err, 0, "%s:%d:%d: %s", L->file, line, col, msg ? msg : "invalid policy");
        if (L->err && *L->err)
                (*L->err)->errnum = EINVAL;
        free(msg);
        return r < 0 ? -EINVAL : r;
}

/* Turn a setter's error into a located one. */
static int setter(const struct loader *L, const char *path, int r, brig_error **e)
{
        if (r >= 0)
                return 0;
        r = fail_at(L, path, false, "%s", *e && (*e)->msg ? (*e)->msg : "invalid value");
        brig_error_free(e);
        return r;
}

static size_t edit_distance(const char *a, const char *b)
{
        size_t n = strlen(b), prev[64], cur[64];
        if (n >= 63 || strlen(a) >= 63)
                return 99;
        for (size_t j = 0; j <= n; j++)
                prev[j] = j;
        for (size_t i = 1; a[i - 1]; i++) {
                cur[0] = i;
                for (size_t j = 1; j <= n; j++) {
                        size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
                        size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
                        cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
                }
                memcpy(prev, cur, (n + 1) * sizeof *prev);
        }
        return prev[n];
}

/* "/filesystem/binds/0" -> "in filesystem.binds[0]"; "" -> "at the top level". */
static void place_name(const char *path, char *buf, size_t n)
{
        snprintf(buf, n, "%s", *path ? "in " : "at the top level");
        for (const char *seg = path; *seg == '/';) {
                const char *end = strchrnul(seg + 1, '/');
                int len = (int)(end - seg - 1);
                size_t used = strlen(buf);
                bool index = len > 0 && strspn(seg + 1, "0123456789") == (size_t)len;
                if (index)
                        snprintf(buf + used, n - used, "[%.*s]", len, seg + 1);
                else
                        snprintf(buf + used, n - used, "%s%.*s", seg == path ? "" : ".", len, seg + 1);
                seg = end;
        }
}

/* Refuse keys not in `allowed`, suggesting the nearest when it is close. */
static int check_keys(const struct loader *L, const char *path, json_t *obj, const char *const *allowed)
{
        const char *key;
        json_t *v;
        json_object_foreach(obj, key, v) {
                bool known = false;
                const char *best = NULL;
                size_t best_d = 3;
                for (const char *const *a = allowed; *a; a++) {
                        if (strcmp(*a, key) == 0)
                                known = true;
                        size_t d = edit_distance(key, *a);
                        if (d < best_d) {
                                best_d = d;
                                best = *a;
                        }
                }
                if (known)
                        continue;
                char where[512];
                snprintf(where, sizeof where, "%s/%s", path, key);
                if (best)
                        return fail_at(L, where, true, "unknown key '%s', did you mean '%s'?", key, best);
                /* Nothing close: name every key valid at this place, from
                 * the same table the check uses (no second copy to drift). */
                char list[512] = "";
                for (const char *const *a = allowed; *a; a++) {
                        size_t used = strlen(list);
                        snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *a);
                }
                char place[256];
                place_name(path, place, sizeof place);
                return fail_at(L, where, true, "unknown key '%s' %s (expected one of: %s)", key, place, list);
        }
        return 0;
}

static const char *type_name(json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT: return "an object";
        case JSON_ARRAY: return "an array";
        case JSON_STRING: return "a string";
        case JSON_INTEGER: return "an integer";
        case JSON_REAL: return "a number";
        case JSON_TRUE: case JSON_FALSE: return "a boolean";
        default: return "null";
        }
}

static int want(const struct loader *L, const char *path, json_t *v, json_type t, const char *what)
{
        if (json_typeof(v) == t || (t == JSON_TRUE && json_is_boolean(v)))
                return 0;
        return fail_at(L, path, false, "expected %s, found %s", what, type_name(v));
}

/* A size: "512M" or a number of bytes. */
static int get_size(const struct loader *L, const char *path, json_t *v, uint64_t *out)
{
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                *out = (uint64_t)json_integer_value(v);
                return 0;
        }
        if (!json_is_string(v))
                return fail_at(L, path, false, "expected a size such as \"512M\" or a number of bytes, found %s",
                               type_name(v));
        brig_error *e = NULL;
        return setter(L, path, brig_parse_size(json_string_value(v), out, &e), &e);
}

/* A duration: "90s", "1h30m" or a number of seconds. */
static int get_duration(const struct loader *L, const char *path, json_t *v, uint64_t *ms)
{
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                if (json_integer_value(v) > 1000000000000LL)  /* ~31,000 years: surely a mistake */
                        return fail_at(L, path, false, "duration %lld s is too long", (long long)json_integer_value(v));
                *ms = (uint64_t)json_integer_value(v) * 1000;
                return 0;
        }
        if (!json_is_string(v))
                return fail_at(L, path, false, "expected a duration such as \"90s\" or a number of seconds, found %s",
                               type_name(v));
        brig_error *e = NULL;
        return setter(L, path, brig_parse_duration(json_string_value(v), ms, &e), &e);
}

static int get_count(const struct loader *L, const char *path, json_t *v, uint64_t *out)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return fail_at(L, path, false, "expected a whole number, found %s", type_name(v));
        *out = (uint64_t)json_integer_value(v);
        return 0;
}

/* "base/key" into buf (paths are short; a long one is cut, never overrun). */
static char *join_path(char *buf, size_t n, const char *base, const char *key)
{
        size_t b = strlen(base);
        if (b >= n)
                b = n - 1;
        memcpy(buf, base, b);
        buf[b] = '\0';
        if (b + 1 < n) {
                buf[b] = '/';
                buf[b + 1] = '\0';
                strncat(buf, key, n - b - 2);
        }
        return buf;
}
#define SUB(buf, base, key) join_path((buf), sizeof(buf), (base), (key))

static int load_strings(const struct loader *L, const char *path, json_t *arr, brig_policy *p,
                        int (*apply)(brig_policy *, const char *, brig_error **))
{
        int r = want(L, path, arr, JSON_ARRAY, "an array of strings");
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v) {
                if (r < 0)
                        break;
                char at[512];
                snprintf(at, sizeof at, "%s/%zu", path, i);
                r = want(L, at, v, JSON_STRING, "a string");
                brig_error *e = NULL;
                if (r == 0)
                        r = setter(L, at, apply(p, json_string_value(v), &e), &e);
        }
        return r;
}

/* An array of objects with known keys, each handed to `item`. */
static int load_objects(const struct loader *L, const char *path, json_t *arr, const char *what,
                        const char *const *keys, brig_policy *p,
                        int (*item)(const struct loader *, const char *, json_t *, brig_policy *))
{
        int r = want(L, path, arr, JSON_ARRAY, what);
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) {
                if (r < 0)
                        break;
                char at[512];
                snprintf(at, sizeof at, "%s/%zu", path, i);
                r = want(L, at, o, JSON_OBJECT, "an object");
                r = r ?: check_keys(L, at, o, keys);
                r = r ?: item(L, at, o, p);
        }
        return r;
}

static int load_bind(const struct loader *L, const char *at, json_t *b, brig_policy *p)
{
        json_t *src = json_object_get(b, "source"), *dst = json_object_get(b, "destination");
        json_t *ro = json_object_get(b, "readonly");
        char fp[512];
        brig_error *e = NULL;
        int r = src ? 0 : fail_at(L, at, false, "a bind needs a \"source\"");
        r = r ?: want(L, SUB(fp, at, "source"), src, JSON_STRING, "a path");
        if (r == 0 && dst)
                r = want(L, SUB(fp, at, "destination"), dst, JSON_STRING, "a path");
        if (r == 0 && ro)
                r = want(L, SUB(fp, at, "readonly"), ro, JSON_TRUE, "true or false");
        unsigned flags = ro && json_is_true(ro) ? BRIG_BIND_READONLY : 0;
        return r ?: setter(L, at, brig_policy_add_bind(p, json_string_value(src), dst ? json_string_value(dst) : NULL,
                                                       flags, &e), &e);
}

int load_binds(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const bind_keys[] = { "source", "destination", "readonly", NULL };
        return load_objects(L, at, v, "an array of binds", bind_keys, p, load_bind);
}

static int load_one_tmpfs(const struct loader *L, const char *at, json_t *t, brig_policy *p)
{
        json_t *dst = json_object_get(t, "destination"), *sz = json_object_get(t, "size");
        char fp[512];
        brig_error *e = NULL;
        uint64_t size = 0;
        int r = dst ? 0 : fail_at(L, at, false, "a tmpfs needs a \"destination\"");
        r = r ?: want(L, SUB(fp, at, "destination"), dst, JSON_STRING, "a path");
        if (r == 0 && sz)
                r = get_size(L, SUB(fp, at, "size"), sz, &size);
        return r ?: setter(L, at, brig_policy_add_tmpfs(p, json_string_value(dst), size, &e), &e);
}

int load_tmpfs(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const tmpfs_keys[] = { "destination", "size", NULL };
        return load_objects(L, at, v, "an array of tmpfs mounts", tmpfs_keys, p, load_one_tmpfs);
}

static int load_rule(const struct loader *L, const char *at, json_t *rule, brig_policy *p)
{
        json_t *name = json_object_get(rule, "name"), *action = json_object_get(rule, "action");
        char fp[512];
        brig_error *e = NULL;
        int r = name && action ? 0 : fail_at(L, at, false, "a rule needs \"name\" and \"action\"");
        r = r ?: want(L, SUB(fp, at, "name"), name, JSON_STRING, "a syscall or @group");
        r = r ?: want(L, SUB(fp, at, "action"), action, JSON_STRING, "an action");
        return r ?: setter(L, at, brig_policy_add_syscall_rule(p, json_string_value(name), json_string_value(action), &e),
                           &e);
}

int load_rules(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const rule_keys[] = { "name", "action", NULL };
        return load_objects(L, at, v, "an array of rules", rule_keys, p, load_rule);
}

int load_unsafe_allow(brig_policy *p, const char *pattern, brig_error **err)
{
        if (strv_contains(&p->unsafe_allowed, pattern))
                return 0;  /* removed already (an earlier file, or the scratch pass) */
        return brig_policy_unsafe_allow_secret(p, pattern, err);
}

/* An object of NAME: "value" pairs, each handed to SET. */
static int load_pairs(const struct loader *L, const char *at, json_t *v, brig_policy *p, const char *what,
                      const char *value_what, int (*set)(brig_policy *, const char *, const char *, brig_error **))
{
        int r = want(L, at, v, JSON_OBJECT, what);
        const char *name;
        json_t *val;
        brig_error *e = NULL;
        json_object_foreach(v, name, val) {
                if (r < 0)
                        break;
                char ep[512];
                snprintf(ep, sizeof ep, "%s/%s", at, name);
                r = want(L, ep, val, JSON_STRING, value_what);
                r = r ?: setter(L, ep, set(p, name, json_string_value(val), &e), &e);
        }
        return r;
}

int load_env(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        return load_pairs(L, at, v, p, "an object of NAME: value", "a string", brig_policy_set_env);
}

int load_cpus(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        brig_error *e = NULL;
        if (!json_is_number(v))
                return fail_at(L, at, false, "expected a number of cores such as 1.5, found %s", type_name(v));
        if (!(json_number_value(v) >= 0 && json_number_value(v) <= 4096))
                return fail_at(L, at, false, "cpus %g: expected 0 to 4096 cores", json_number_value(v));
        uint64_t value = (uint64_t)(json_number_value(v) * 1000 + 0.5);
        return setter(L, at, brig_policy_set_limit(p, s->limit, value, &e), &e);
}

static int add_resolve_pair(brig_policy *p, const char *host, const char *addr, brig_error **err)
{
        char *spec = brig_strdup_printf("%s:%s", host, addr);
        int r = spec ? brig_policy_add_resolve(p, spec, err) : brig_err(err, ENOMEM, "resolve");
        free(spec);
        return r;
}

/* "resolve": ["HOST:ADDR", ...] as on the command line, or {"HOST": "ADDR"} */
int load_resolve(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        if (json_is_array(v))
                return load_strings(L, at, v, p, brig_policy_add_resolve);
        return load_pairs(L, at, v, p, "[\"HOST:ADDR\", ...] or {\"HOST\": \"ADDR\"}", "an address",
                          add_resolve_pair);
}

/* "NAME=TEXT" through a NAME=... setter (a secret's hosts and header). */
static int named(const struct loader *L, const char *at, brig_policy *p, const char *name, const char *text,
                 int (*set)(brig_policy *, const char *, brig_error **))
{
        brig_error *e = NULL;
        _cleanup_free_ char *spec = brig_strdup_printf("%s=%s", name, text);
        return setter(L, at, spec ? set(p, spec, &e) : brig_err(&e, ENOMEM, "secret"), &e);
}

/* {"name": N, "source": "@FILE" | "env:VAR", "hosts": [...], "header": H} */
static int load_secret(const struct loader *L, const char *at, json_t *o, brig_policy *p)
{
        json_t *name = json_object_get(o, "name"), *src = json_object_get(o, "source");
        json_t *hosts = json_object_get(o, "hosts"), *header = json_object_get(o, "header");
        char fp[560];
        int r = name && src && hosts ? 0 : fail_at(L, at, false, "a secret needs a \"name\", a \"source\" and \"hosts\"");
        r = r ?: want(L, SUB(fp, at, "name"), name, JSON_STRING, "a variable name");
        r = r ?: want(L, SUB(fp, at, "source"), src, JSON_STRING, "\"@FILE\" or \"env:VAR\"");
        r = r ?: want(L, SUB(fp, at, "hosts"), hosts, JSON_ARRAY, "an array of host patterns");
        if (r == 0 && header)
                r = want(L, SUB(fp, at, "header"), header, JSON_STRING, "a header name");
        const char *n = r ? NULL : json_string_value(name);
        r = r ?: named(L, at, p, n, json_string_value(src), brig_policy_add_secret);
        size_t i;
        json_t *h;
        json_array_foreach(hosts, i, h) {
                if (r < 0)
                        break;
                snprintf(fp, sizeof fp, "%s/hosts/%zu", at, i);
                r = want(L, fp, h, JSON_STRING, "a host pattern");
                r = r ?: named(L, fp, p, n, json_string_value(h), brig_policy_secret_host);
        }
        if (r == 0 && header)
                r = named(L, SUB(fp, at, "header"), p, n, json_string_value(header), brig_policy_secret_header);
        return r;
}

int load_secrets(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const keys[] = { "name", "source", "hosts", "header", NULL };
        return load_objects(L, at, v, "an array of secrets", keys, p, load_secret);
}

/* JSON strings into v[0..max) (pointers into the JSON). */
static int string_list(const struct loader *L, const char *at, json_t *a, char **v, size_t max, size_t *n)
{
        *n = 0;
        if (!a)
                return 0;
        int r = want(L, at, a, JSON_ARRAY, "an array of strings");
        size_t i;
        json_t *s;
        json_array_foreach(a, i, s) {
                char fp[560];
                snprintf(fp, sizeof fp, "%s/%zu", at, i);
                r = r ?: want(L, fp, s, JSON_STRING, "a string");
                if (r == 0 && *n == max)
                        r = fail_at(L, fp, false, "at most %zu entries", max);
                if (r < 0)
                        return r;
                v[(*n)++] = (char *)json_string_value(s);
        }
        return r;
}

/* {"host": H, "methods": [...], "paths": [...]} */
static int load_http_rule(const struct loader *L, const char *at, json_t *o, brig_policy *p)
{
        json_t *host = json_object_get(o, "host");
        char fp[560], *mv[32], *pv[64];
        size_t nm = 0, np = 0;
        brig_error *e = NULL;
        int r = host ? 0 : fail_at(L, at, false, "an http rule needs a \"host\"");
        r = r ?: want(L, SUB(fp, at, "host"), host, JSON_STRING, "a host pattern");
        r = r ?: string_list(L, SUB(fp, at, "methods"), json_object_get(o, "methods"), mv, ARRAY_SIZE(mv), &nm);
        r = r ?: string_list(L, SUB(fp, at, "paths"), json_object_get(o, "paths"), pv, ARRAY_SIZE(pv), &np);
        if (r < 0)
                return r;
        struct intercept_policy **ip = egress_policy_intercept(&p->egress);
        return setter(L, at, ip ? intercept_policy_add_rule(ip, json_string_value(host), mv, nm, pv, np, &e)
                                : brig_err(&e, ENOMEM, "http rule"), &e);
}

int load_http_rules(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const keys[] = { "host", "methods", "paths", NULL };
        return load_objects(L, at, v, "an array of http rules", keys, p, load_http_rule);
}

static int load_copy_in(const struct loader *L, const char *at, json_t *c, brig_policy *p)
{
        json_t *src = json_object_get(c, "source"), *dst = json_object_get(c, "destination");
        json_t *secret = json_object_get(c, "secret");
        char fp[512];
        brig_error *e = NULL;
        int r = src && dst ? 0 : fail_at(L, at, false, "a copy-in needs a \"source\" and a \"destination\"");
        r = r ?: want(L, SUB(fp, at, "source"), src, JSON_STRING, "a host path (absolute or ~/...)");
        r = r ?: want(L, SUB(fp, at, "destination"), dst, JSON_STRING, "a path inside (absolute or ~/...)");
        if (r == 0 && secret)
                r = want(L, SUB(fp, at, "secret"), secret, JSON_TRUE, "true or false");
        unsigned flags = secret && json_is_true(secret) ? BRIG_COPY_IN_SECRET : 0;
        return r ?: setter(L, at, brig_policy_add_copy_in(p, json_string_value(src), json_string_value(dst), flags, &e),
                           &e);
}

int load_copy_ins(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        static const char *const copy_keys[] = { "source", "destination", "secret", NULL };
        return load_objects(L, at, v, "an array of copy-ins", copy_keys, p, load_copy_in);
}

static int apply_profile(brig_policy *p, const char *name, int depth, brig_error **err);

int load_extends(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        int r = want(L, at, v, JSON_STRING, "a profile name");
        brig_error *e = NULL;
        if (r == 0 && apply_profile(p, json_string_value(v), L->depth + 1, &e) < 0) {
                r = fail_at(L, at, false, "%s", e ? e->msg : "bad profile");
                brig_error_free(&e);
        }
        return r;
}

/* One setting's value from the file, by its kind. */
static int load_setting(const struct loader *L, const char *at, json_t *v, brig_policy *p, const struct setting *s)
{
        brig_error *e = NULL;
        uint64_t value = 0;
        int r;
        char what[128];
        switch (s->kind) {
        case SK_BOOL:
                r = want(L, at, v, JSON_TRUE, "true or false");
                if (r == 0 && s->set_flag)
                        s->set_flag(p, json_is_true(v));
                else if (r == 0)
                        r = setter(L, at, s->set_bool(p, json_is_true(v), &e), &e);
                return r;
        case SK_SIZE:
                r = get_size(L, at, v, &value);
                return r ?: setter(L, at, s->set_u64(p, value, &e), &e);
        case SK_LIMIT:
                switch (s->unit) {
                case SU_SIZE: r = get_size(L, at, v, &value); break;
                case SU_COUNT: r = get_count(L, at, v, &value); break;
                case SU_DURATION: r = get_duration(L, at, v, &value); break;
                case SU_SECONDS:
                        r = get_duration(L, at, v, &value);
                        value = (value + 999) / 1000;
                        break;
                default: return load_cpus(L, at, v, p, s);
                }
                return r ?: setter(L, at, brig_policy_set_limit(p, s->limit, value, &e), &e);
        case SK_STRING:
        case SK_PATH:
                r = want(L, at, v, JSON_STRING, s->what);
                return r ?: setter(L, at, s->set_str(p, json_string_value(v), &e), &e);
        case SK_LIST:
                return load_strings(L, at, v, p, s->set_str);
        case SK_ENUM: {
                setting_choices_what(s, what, sizeof what);
                r = want(L, at, v, JSON_STRING, what);
                for (const struct setting_choice *c = s->choices; r == 0 && c->name; c++)
                        if (strcmp(c->name, json_string_value(v)) == 0) {
                                s->set_enum(p, c->value);
                                return 0;
                        }
                return r ?: fail_at(L, at, false, "%s '%s': expected %s", s->label, json_string_value(v), what);
        }
        case SK_CUSTOM:
                return s->load ? s->load(L, at, v, p, s) : 0;
        default:
                return 0;  /* "$schema" */
        }
}

/* "/limits/memory" -> "/limits" into buf */
static const char *parent_of(const char *key, char *buf, size_t n)
{
        const char *leaf = strrchr(key, '/');
        snprintf(buf, n, "%.*s", (int)(leaf - key), key);
        return buf;
}

/* The keys one level below PARENT ("" or "/filesystem"), in table order,
 * each once: what check_keys accepts there (and lists). */
static void keys_under(const char *parent, char names[][64], const char **list, size_t max)
{
        size_t n = 0, plen = strlen(parent);
        for (size_t i = 0; i < n_settings && n + 1 < max; i++) {
                const char *k = settings[i].key;
                if (!k || strncmp(k, parent, plen) != 0 || k[plen] != '/')
                        continue;
                int len = (int)strcspn(k + plen + 1, "/");
                bool seen = false;
                for (size_t j = 0; j < n; j++)
                        seen |= (int)strlen(list[j]) == len && strncmp(list[j], k + plen + 1, (size_t)len) == 0;
                if (seen)
                        continue;
                snprintf(names[n], 64, "%.*s", len, k + plen + 1);
                list[n] = names[n];
                n++;
        }
        list[n] = NULL;
}

/* The object at PARENT, checked as a whole (its type, its keys), then the
 * settings it holds in table order, SETTING_EARLY ones first. */
static int load_object(const struct loader *L, json_t *doc, const char *parent, brig_policy *p)
{
        json_t *o = *parent ? json_object_get(doc, parent + 1) : doc;
        if (!o)
                return 0;
        const char *what = "an object";
        for (const struct setting_object *so = setting_objects; so->path; so++)
                if (strcmp(so->path, parent) == 0)
                        what = so->what;
        char names[32][64];
        const char *keys[33];
        keys_under(parent, names, keys, ARRAY_SIZE(keys));
        int r = want(L, parent, o, JSON_OBJECT, what);
        r = r ?: check_keys(L, parent, o, keys);
        char buf[64];
        for (int pass = 0; pass < 2; pass++) {
                for (size_t i = 0; r == 0 && i < n_settings; i++) {
                        const struct setting *s = &settings[i];
                        if (!s->key || !!(s->flags & SETTING_EARLY) != (pass == 0) ||
                            strcmp(parent_of(s->key, buf, sizeof buf), parent) != 0)
                                continue;
                        json_t *v = json_object_get(o, strrchr(s->key, '/') + 1);
                        if (v)
                                r = load_setting(L, s->key, v, p, s);
                }
        }
        return r;
}

/* Apply one parsed document: each object that holds settings, in the
 * order the table first names it. */
static int apply(const struct loader *L, json_t *doc, brig_policy *p)
{
        char done[16][64];
        size_t n_done = 0;
        int r = 0;
        for (size_t i = 0; r == 0 && i < n_settings; i++) {
                if (!settings[i].key)
                        continue;
                char parent[64];
                parent_of(settings[i].key, parent, sizeof parent);
                bool seen = false;
                for (size_t j = 0; j < n_done; j++)
                        seen |= strcmp(done[j], parent) == 0;
                if (seen)
                        continue;
                if (n_done == ARRAY_SIZE(done))
                        return brig_err(L->err, EOVERFLOW, "policy: too many objects in the table of settings");
                snprintf(done[n_done++], sizeof done[0], "%s", parent);
                r = load_object(L, doc, parent, p);
        }
        return r;
}

static int load_text(brig_policy *p, const char *name, const char *text, size_t len, int depth, brig_error **err)
{
        if (depth > 8)
                return brig_err(err, ELOOP, "%s: \"extends\" nests too deep (a cycle?)", name);
        json_error_t je;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
                int r = brig_err(err, 0, "%s:%d:%d: %s", name, je.line, je.column, je.text);
                if (err && *err)
                        (*err)->errnum = EINVAL;
                return r < 0 ? -EINVAL : r;
        }
        struct loader L = { .file = name, .text = text, .len = len, .err = err, .depth = depth };
        /* First on a scratch policy, so a bad file changes nothing. */
        brig_policy *scratch = brig_policy_new();
        int r = scratch ? apply(&L, doc, scratch) : brig_err(err, ENOMEM, "policy");
        brig_policy_free(scratch);
        if (r == 0) {
                brig_error *e = NULL;
                L.err = &e;
                r = apply(&L, doc, p);
                if (r < 0 && err && !*err)
                        *err = TAKE_PTR(e);
                brig_error_free(&e);
        }
        json_decref(doc);
        return r;
}

static int apply_profile(brig_policy *p, const char *name, int depth, brig_error **err)
{
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
                if (strcmp(profiles[i].name, name) != 0)
                        continue;
                char label[64];
                snprintf(label, sizeof label, "profile '%s'", name);
                return load_text(p, label, profiles[i].json, strlen(profiles[i].json), depth, err);
        }
        char known[256] = "";
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", profiles[i].name);
        return brig_err(err, 0, "unknown profile '%s' (expected one of %s)", name, known) < 0 ? -EINVAL : 0;
}

int brig_policy_apply_profile(brig_policy *p, const char *profile, brig_error **err)
{
        return apply_profile(p, profile, 0, err);
}

int brig_policy_load_string(brig_policy *p, const char *name, const char *json, brig_error **err)
{
        return load_text(p, name, json, strlen(json), 0, err);
}

int brig_policy_load_file(brig_policy *p, const char *path, brig_error **err)
{
        FILE *f = fopen(path, "re");
        if (!f)
                return brig_err(err, errno, "policy file '%s'", path);
        char *text = NULL;
        size_t cap = 0, len = 0;
        char buf[8192];
        size_t n;
        int r = 0;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
                if (len + n > (4u << 20)) {
                        r = brig_err(err, EFBIG, "policy file '%s' is larger than 4 MiB", path);
                        break;
                }
                if (len + n + 1 > cap) {
                        cap = (len + n + 1) * 2;
                        char *t = realloc(text, cap);
                        if (!t) {
                                r = brig_err(err, ENOMEM, "policy file '%s'", path);
                                break;
                        }
                        text = t;
                }
                memcpy(text + len, buf, n);
                len += n;
        }
        fclose(f);
        if (r == 0)
                r = load_text(p, path, text ? text : "", len, 0, err);
        free(text);
        return r;
}

/* ---- the dump: loads back to the same policy -------------------------------- */

static json_t *size_json(uint64_t bytes)
{
        static const struct { uint64_t unit; const char *suffix; } units[] = {
                { 1ULL << 40, "T" }, { 1ULL << 30, "G" }, { 1ULL << 20, "M" }, { 1ULL << 10, "K" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (bytes && bytes % units[i].unit == 0)
                        return json_sprintf("%llu%s", (unsigned long long)(bytes / units[i].unit), units[i].suffix);
        return json_integer((json_int_t)bytes);
}

static json_t *duration_json(uint64_t ms)
{
        if (ms % 1000)
                return json_sprintf("%llums", (unsigned long long)ms);
        return json_sprintf("%llus", (unsigned long long)(ms / 1000));
}

static bool is_default_deny(const char *pattern)
{
        for (const char *const *d = brig_default_deny_list(); *d; d++)
                if (strcmp(*d, pattern) == 0)
                        return true;
        return false;
}

json_t *dump_binds(const brig_policy *p, const struct setting *s)
{
        json_t *binds = json_array();
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct mount_entry *m = &p->mounts[i];
                if (m->kind == MOUNT_BIND)
                        json_array_append_new(binds, json_pack("{s:s, s:s, s:b}", "source", m->src, "destination",
                                                               m->dst, "readonly", m->readonly));
        }
        return binds;
}

json_t *dump_tmpfs(const brig_policy *p, const struct setting *s)
{
        json_t *tmpfs = json_array();
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct mount_entry *m = &p->mounts[i];
                if (m->kind != MOUNT_BIND)
                        json_array_append_new(tmpfs, json_pack("{s:s, s:o}", "destination", m->dst, "size",
                                                               size_json(m->size)));
        }
        return tmpfs;
}

/* The entries added to the built-in list (a new policy holds those). */
json_t *dump_deny(const brig_policy *p, const struct setting *s)
{
        json_t *deny = json_array();
        for (size_t i = 0; i < p->deny.n; i++)
                if (!is_default_deny(p->deny.items[i]))
                        json_array_append_new(deny, json_string(p->deny.items[i]));
        return deny;
}

json_t *dump_env(const brig_policy *p, const struct setting *s)
{
        json_t *env = json_object();
        for (size_t i = 0; i < p->n_env; i++)
                json_object_set_new(env, p->env[i].name, json_string(p->env[i].value));
        return env;
}

json_t *dump_rules(const brig_policy *p, const struct setting *s)
{
        return seccomp_policy_json(p->seccomp);
}

json_t *dump_degraded(const brig_policy *p, const struct setting *s)
{
        static const struct { unsigned bit; const char *name; } names[] = {
                { DEGRADE_LANDLOCK, "landlock" }, { DEGRADE_SECCOMP, "seccomp" }, { DEGRADE_MEMORY, "memory" },
                { DEGRADE_PIDS, "pids" }, { DEGRADE_CPUS, "cpus" }, { DEGRADE_IO, "io" },
        };
        json_t *degraded = json_array();
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (p->allow_degraded & names[i].bit)
                        json_array_append_new(degraded, json_string(names[i].name));
        return degraded;
}

/* Only when set: unset, any allow rule turns egress on. */
json_t *dump_net_mode(const brig_policy *p, const struct setting *s)
{
        static const char *const modes[] = { "none", "proxy", "host", "filtered" };
        return p->net_mode_set ? json_string(modes[p->net_mode]) : NULL;
}

/* The egress rules' own dump (net/policy.c), the key of this setting. */
json_t *dump_egress(const brig_policy *p, const struct setting *s)
{
        json_t *rules = egress_policy_json(p->egress);
        json_t *v = json_incref(json_object_get(rules, strrchr(s->key, '/') + 1));
        json_decref(rules);
        return v;
}

json_t *dump_copy_ins(const brig_policy *p, const struct setting *s)
{
        const struct tools_policy *t = p->tools;
        if (!t)
                return NULL;
        json_t *copies = json_array();
        for (size_t i = 0; i < t->n_copy_ins; i++)
                json_array_append_new(copies, json_pack("{s:s, s:s, s:b}", "source", t->copy_ins[i].src, "destination",
                                                        t->copy_ins[i].dst, "secret", t->copy_ins[i].secret));
        return copies;
}

/* A bool of struct tools_policy at s->offset. */
json_t *dump_tool_bool(const brig_policy *p, const struct setting *s)
{
        if (!p->tools)
                return NULL;
        bool on;
        memcpy(&on, (const char *)p->tools + s->offset, sizeof on);
        return json_boolean(on);
}

json_t *dump_carry(const brig_policy *p, const struct setting *s)
{
        if (!p->tools)
                return NULL;
        json_t *carry = json_array();
        if (p->tools->carry & CARRY_NPM)
                json_array_append_new(carry, json_string("npm"));
        if (p->tools->carry & CARRY_PIP)
                json_array_append_new(carry, json_string("pip"));
        return carry;
}

json_t *setting_dump(const brig_policy *p, const struct setting *s)
{
        if (s->dump)
                return s->dump(p, s);
        const char *at = (const char *)p + s->offset;
        switch (s->kind) {
        case SK_BOOL: {
                bool on;
                memcpy(&on, at, sizeof on);
                return json_boolean(on);
        }
        case SK_SIZE: {
                uint64_t v;
                memcpy(&v, at, sizeof v);
                return size_json(v);
        }
        case SK_LIMIT: {
                uint64_t v = brig_policy_get_limit(p, s->limit);
                switch (s->unit) {
                case SU_SIZE: return v ? size_json(v) : json_integer(0);
                case SU_DURATION: return duration_json(v);
                case SU_SECONDS: return json_sprintf("%llus", (unsigned long long)v);
                case SU_CPUS: return json_real((double)v / 1000.0);
                default: return json_integer((json_int_t)v);
                }
        }
        case SK_STRING:
        case SK_PATH: {
                const char *str;
                memcpy(&str, at, sizeof str);
                return str ? json_string(str) : NULL;
        }
        case SK_LIST: {
                const struct strv *v = (const struct strv *)at;
                if (s->omit_empty && v->n == 0)
                        return NULL;
                json_t *list = json_array();
                for (size_t i = 0; i < v->n; i++)
                        json_array_append_new(list, json_string(v->items[i]));
                return list;
        }
        case SK_ENUM: {
                int v;
                memcpy(&v, at, sizeof v);
                for (const struct setting_choice *c = s->choices; c->name; c++)
                        if (c->value == v)
                                return json_string(c->name);
                return NULL;
        }
        default:
                return NULL;
        }
}

/* Every setting the dump holds, at its key, in table order
 * (SETTING_DUMP_LATE ones after the rest). */
static json_t *policy_json(const brig_policy *p)
{
        json_t *doc = json_object();
        for (size_t k = 0; k < 2 * n_settings; k++) {
                const struct setting *s = &settings[k % n_settings];
                if (!!(s->flags & SETTING_DUMP_LATE) != (k >= n_settings))
                        continue;
                json_t *v = s->key ? setting_dump(p, s) : NULL;
                if (!v)
                        continue;
                const char *leaf = strrchr(s->key, '/');
                json_t *obj = doc;
                if (leaf != s->key) {
                        char name[64];
                        snprintf(name, sizeof name, "%.*s", (int)(leaf - s->key - 1), s->key + 1);
                        obj = json_object_get(doc, name);
                        if (!obj) {
                                obj = json_object();
                                json_object_set_new(doc, name, obj);
                        }
                }
                json_object_set_new(obj, leaf + 1, v);
        }
        return doc;
}

/* JSON holds text: a string that is not UTF-8 is one jansson refuses,
 * and the builders above would leave its entry out. A policy kept as JSON
 * (brig create hands it to brig-supervisor so; brig policy) would lose a
 * --deny pattern, a bind or the workspace without a word: refuse it
 * instead, naming what. */
static bool is_text(const char *s)
{
        json_t *j = s ? json_string(s) : NULL;
        json_decref(j);
        return !s || j;
}

static int check_text(const char *what, const char *s, brig_error **err)
{
        if (is_text(s))
                return 0;
        return brig_err(err, EILSEQ, "%s '%s' is not valid UTF-8: a policy kept as JSON (brig create, brig "
                                     "policy) cannot hold it; name the path or value in UTF-8",
                        what, s);
}

/* Every string a setting keeps where the table says (SK_STRING, SK_PATH,
 * an SK_LIST with its noun), then those of the settings with structure. */
static int check_texts(const brig_policy *p, brig_error **err)
{
        int r = 0;
        for (size_t i = 0; r == 0 && i < n_settings; i++) {
                const struct setting *s = &settings[i];
                const char *at = (const char *)p + s->offset;
                char what[96];
                if (s->key && (s->kind == SK_STRING || s->kind == SK_PATH) && !s->dump) {
                        const char *str;
                        memcpy(&str, at, sizeof str);
                        snprintf(what, sizeof what, "--%s", s->cli[0].name ? s->cli[0].name : s->key);
                        r = check_text(what, str, err);
                } else if (s->kind == SK_LIST && s->noun) {
                        const struct strv *v = (const struct strv *)at;
                        snprintf(what, sizeof what, "the --%s %s", s->cli[0].name, s->noun);
                        for (size_t k = 0; r == 0 && k < v->n; k++)
                                r = check_text(what, v->items[k], err);
                }
        }
        for (size_t i = 0; r == 0 && i < p->n_mounts; i++)
                if ((r = check_text("the --bind or --ro-bind source", p->mounts[i].src, err)) == 0)
                        r = check_text("the --bind, --ro-bind or --tmpfs destination", p->mounts[i].dst, err);
        for (size_t i = 0; r == 0 && i < p->n_env; i++)
                if ((r = check_text("the --env name", p->env[i].name, err)) == 0)
                        r = check_text("the --env value", p->env[i].value, err);
        for (size_t i = 0; r == 0 && p->tools && i < p->tools->n_copy_ins; i++)
                if ((r = check_text("the --copy-in source", p->tools->copy_ins[i].src, err)) == 0)
                        r = check_text("the --copy-in destination", p->tools->copy_ins[i].dst, err);
        return r;
}

char *brig_policy_to_json(const brig_policy *p, brig_error **err)
{
        if (check_texts(p, err) < 0)
                return NULL;
        json_t *doc = policy_json(p);
        char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(doc);
        if (!s)
                brig_err(err, ENOMEM, "policy");
        return s;
}
