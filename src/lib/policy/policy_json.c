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
#include "core/internal.h"
#include "net/egress.h"
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

static int load_tmpfs(const struct loader *L, const char *at, json_t *t, brig_policy *p)
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

static int unsafe_allow(brig_policy *p, const char *pattern, brig_error **err)
{
        if (strv_contains(&p->unsafe_allowed, pattern))
                return 0;  /* removed already (an earlier file, or the scratch pass) */
        return brig_policy_unsafe_allow_secret(p, pattern, err);
}

static int load_filesystem(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "workspace", "workspace_readonly", "binds", "tmpfs", "tmp_size",
                                            "home_size", "shm_size", "sys", "deny", "unsafe_allow_secrets", NULL };
        const char *base = "/filesystem";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        json_t *v;
        brig_error *e = NULL;
        uint64_t size;
        if (r == 0 && (v = json_object_get(o, "workspace"))) {
                r = want(L, SUB(at, base, "workspace"), v, JSON_STRING, "a path");
                r = r ?: setter(L, at, brig_policy_set_workspace(p, json_string_value(v), &e), &e);
        }
        if (r == 0 && (v = json_object_get(o, "workspace_readonly"))) {
                r = want(L, SUB(at, base, "workspace_readonly"), v, JSON_TRUE, "true or false");
                if (r == 0)
                        brig_policy_set_workspace_readonly(p, json_is_true(v));
        }
        static const struct { const char *key; int (*set)(brig_policy *, uint64_t, brig_error **); } sizes[] = {
                { "tmp_size", brig_policy_set_tmp_size }, { "home_size", brig_policy_set_home_size },
                { "shm_size", brig_policy_set_shm_size },
        };
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(sizes); i++)
                if ((v = json_object_get(o, sizes[i].key))) {
                        r = get_size(L, SUB(at, base, sizes[i].key), v, &size);
                        r = r ?: setter(L, at, sizes[i].set(p, size, &e), &e);
                }
        if (r == 0 && (v = json_object_get(o, "sys"))) {
                r = want(L, SUB(at, base, "sys"), v, JSON_TRUE, "true or false");
                if (r == 0)
                        brig_policy_set_mount_sys(p, json_is_true(v));
        }
        static const char *const bind_keys[] = { "source", "destination", "readonly", NULL };
        static const char *const tmpfs_keys[] = { "destination", "size", NULL };
        if (r == 0 && (v = json_object_get(o, "binds")))
                r = load_objects(L, SUB(at, base, "binds"), v, "an array of binds", bind_keys, p, load_bind);
        if (r == 0 && (v = json_object_get(o, "tmpfs")))
                r = load_objects(L, SUB(at, base, "tmpfs"), v, "an array of tmpfs mounts", tmpfs_keys, p, load_tmpfs);
        /* Removals first, so a "deny" of the same entry in the same file
         * puts it back (the deny list never loses by accident). */
        if (r == 0 && (v = json_object_get(o, "unsafe_allow_secrets")))
                r = load_strings(L, SUB(at, base, "unsafe_allow_secrets"), v, p, unsafe_allow);
        if (r == 0 && (v = json_object_get(o, "deny")))
                r = load_strings(L, SUB(at, base, "deny"), v, p, brig_policy_add_deny);
        return r;
}

static int load_process(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "env", "keep_env", "cwd", "hostname", "tty", "terminal_passthrough", NULL };
        const char *base = "/process";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        json_t *v;
        brig_error *e = NULL;
        if (r == 0 && (v = json_object_get(o, "env"))) {
                r = want(L, SUB(at, base, "env"), v, JSON_OBJECT, "an object of NAME: value");
                const char *name;
                json_t *val;
                json_object_foreach(v, name, val) {
                        if (r < 0)
                                break;
                        char ep[512];
                        snprintf(ep, sizeof ep, "%s/env/%s", base, name);
                        r = want(L, ep, val, JSON_STRING, "a string");
                        r = r ?: setter(L, ep, brig_policy_set_env(p, name, json_string_value(val), &e), &e);
                }
        }
        if (r == 0 && (v = json_object_get(o, "keep_env")))
                r = load_strings(L, SUB(at, base, "keep_env"), v, p, brig_policy_keep_env);
        if (r == 0 && (v = json_object_get(o, "cwd"))) {
                r = want(L, SUB(at, base, "cwd"), v, JSON_STRING, "a path");
                r = r ?: setter(L, at, brig_policy_set_cwd(p, json_string_value(v), &e), &e);
        }
        if (r == 0 && (v = json_object_get(o, "hostname"))) {
                r = want(L, SUB(at, base, "hostname"), v, JSON_STRING, "a string");
                r = r ?: setter(L, at, brig_policy_set_hostname(p, json_string_value(v), &e), &e);
        }
        if (r == 0 && (v = json_object_get(o, "tty"))) {
                r = want(L, SUB(at, base, "tty"), v, JSON_STRING, "\"auto\", \"always\" or \"never\"");
                const char *t = r == 0 ? json_string_value(v) : "";
                if (r == 0 && strcmp(t, "auto") == 0)
                        brig_policy_set_tty(p, BRIG_TTY_AUTO);
                else if (r == 0 && strcmp(t, "always") == 0)
                        brig_policy_set_tty(p, BRIG_TTY_ALWAYS);
                else if (r == 0 && strcmp(t, "never") == 0)
                        brig_policy_set_tty(p, BRIG_TTY_NEVER);
                else if (r == 0)
                        r = fail_at(L, at, false, "tty '%s': expected \"auto\", \"always\" or \"never\"", t);
        }
        if (r == 0 && (v = json_object_get(o, "terminal_passthrough"))) {
                r = want(L, SUB(at, base, "terminal_passthrough"), v, JSON_TRUE, "true or false");
                if (r == 0)
                        brig_policy_set_terminal_passthrough(p, json_is_true(v));
        }
        return r;
}

static const struct limit_key {
        const char *key;
        enum brig_limit which;
        enum { K_SIZE, K_COUNT, K_DURATION, K_SECONDS, K_CPUS } kind;
} limit_keys[] = {
        { "memory", BRIG_LIMIT_MEMORY, K_SIZE }, { "pids", BRIG_LIMIT_PIDS, K_COUNT },
        { "cpus", BRIG_LIMIT_CPUS_MILLI, K_CPUS }, { "io_weight", BRIG_LIMIT_IO_WEIGHT, K_COUNT },
        { "timeout", BRIG_LIMIT_TIMEOUT_MS, K_DURATION }, { "kill_after", BRIG_LIMIT_KILL_AFTER_MS, K_DURATION },
        { "cpu_time", BRIG_LIMIT_CPU_TIME_S, K_SECONDS }, { "nofile", BRIG_LIMIT_NOFILE, K_COUNT },
        { "nproc", BRIG_LIMIT_NPROC, K_COUNT }, { "fsize", BRIG_LIMIT_FSIZE, K_SIZE },
        { "stack", BRIG_LIMIT_STACK, K_SIZE },
};

static int load_limits(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "memory", "pids", "cpus", "io_weight", "timeout", "kill_after",
                                            "cpu_time", "nofile", "nproc", "fsize", "stack", "required", NULL };
        const char *base = "/limits";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        brig_error *e = NULL;
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(limit_keys); i++) {
                json_t *v = json_object_get(o, limit_keys[i].key);
                if (!v)
                        continue;
                SUB(at, base, limit_keys[i].key);
                uint64_t value = 0;
                switch (limit_keys[i].kind) {
                case K_SIZE: r = get_size(L, at, v, &value); break;
                case K_COUNT: r = get_count(L, at, v, &value); break;
                case K_DURATION: r = get_duration(L, at, v, &value); break;
                case K_SECONDS:
                        r = get_duration(L, at, v, &value);
                        value = (value + 999) / 1000;
                        break;
                case K_CPUS:
                        if (!json_is_number(v))
                                r = fail_at(L, at, false, "expected a number of cores such as 1.5, found %s",
                                            type_name(v));
                        else if (!(json_number_value(v) >= 0 && json_number_value(v) <= 4096))
                                r = fail_at(L, at, false, "cpus %g: expected 0 to 4096 cores", json_number_value(v));
                        else
                                value = (uint64_t)(json_number_value(v) * 1000 + 0.5);
                        break;
                }
                r = r ?: setter(L, at, brig_policy_set_limit(p, limit_keys[i].which, value, &e), &e);
        }
        json_t *v = json_object_get(o, "required");
        if (r == 0 && v) {
                r = want(L, SUB(at, base, "required"), v, JSON_TRUE, "true or false");
                if (r == 0)
                        brig_policy_require_limits(p, json_is_true(v));
        }
        return r;
}

static int load_syscalls(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "rules", "allow_degraded", NULL };
        const char *base = "/syscalls";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        json_t *v;
        static const char *const rule_keys[] = { "name", "action", NULL };
        if (r == 0 && (v = json_object_get(o, "rules")))
                r = load_objects(L, SUB(at, base, "rules"), v, "an array of rules", rule_keys, p, load_rule);
        if (r == 0 && (v = json_object_get(o, "allow_degraded")))
                r = load_strings(L, SUB(at, base, "allow_degraded"), v, p, brig_policy_allow_degraded);
        return r;
}

static int add_resolve_pair(brig_policy *p, const char *host, const char *addr, brig_error **err)
{
        char *spec = brig_strdup_printf("%s:%s", host, addr);
        int r = spec ? brig_policy_add_resolve(p, spec, err) : brig_err(err, ENOMEM, "resolve");
        free(spec);
        return r;
}

static int load_network(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "mode", "allow_hosts", "allow_private_hosts", "deny_hosts", "allow_cidrs",
                                            "resolve", "upstream_proxy", "allow_unix", NULL };
        const char *base = "/network";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        json_t *v;
        brig_error *e = NULL;
        if (r == 0 && (v = json_object_get(o, "mode"))) {
                r = want(L, SUB(at, base, "mode"), v, JSON_STRING, "\"none\", \"proxy\", \"filtered\" or \"host\"");
                const char *m = r == 0 ? json_string_value(v) : "";
                if (r == 0 && strcmp(m, "none") == 0)
                        brig_policy_set_net_mode(p, BRIG_NET_NONE);
                else if (r == 0 && strcmp(m, "proxy") == 0)
                        brig_policy_set_net_mode(p, BRIG_NET_PROXY);
                else if (r == 0 && strcmp(m, "filtered") == 0)
                        brig_policy_set_net_mode(p, BRIG_NET_FILTERED);
                else if (r == 0 && strcmp(m, "host") == 0)
                        brig_policy_set_net_mode(p, BRIG_NET_HOST);
                else if (r == 0)
                        r = fail_at(L, at, false,
                                    "network mode '%s': expected \"none\", \"proxy\", \"filtered\" or \"host\"", m);
        }
        if (r == 0 && (v = json_object_get(o, "allow_hosts")))
                r = load_strings(L, SUB(at, base, "allow_hosts"), v, p, brig_policy_allow_host);
        if (r == 0 && (v = json_object_get(o, "allow_private_hosts")))
                r = load_strings(L, SUB(at, base, "allow_private_hosts"), v, p, brig_policy_allow_private_host);
        if (r == 0 && (v = json_object_get(o, "deny_hosts")))
                r = load_strings(L, SUB(at, base, "deny_hosts"), v, p, brig_policy_deny_host);
        if (r == 0 && (v = json_object_get(o, "allow_cidrs")))
                r = load_strings(L, SUB(at, base, "allow_cidrs"), v, p, brig_policy_allow_cidr);
        if (r == 0 && (v = json_object_get(o, "allow_unix")))
                r = load_strings(L, SUB(at, base, "allow_unix"), v, p, brig_policy_allow_unix);
        /* "resolve": ["HOST:ADDR", ...] as on the command line, or {"HOST": "ADDR"} */
        if (r == 0 && (v = json_object_get(o, "resolve")) && json_is_array(v)) {
                r = load_strings(L, SUB(at, base, "resolve"), v, p, brig_policy_add_resolve);
        } else if (r == 0 && v) {
                r = want(L, SUB(at, base, "resolve"), v, JSON_OBJECT, "[\"HOST:ADDR\", ...] or {\"HOST\": \"ADDR\"}");
                const char *host;
                json_t *addr;
                json_object_foreach(v, host, addr) {
                        if (r < 0)
                                break;
                        char rp[512];
                        snprintf(rp, sizeof rp, "%s/resolve/%s", base, host);
                        r = want(L, rp, addr, JSON_STRING, "an address");
                        r = r ?: setter(L, rp, add_resolve_pair(p, host, json_string_value(addr), &e), &e);
                }
        }
        if (r == 0 && (v = json_object_get(o, "upstream_proxy"))) {
                r = want(L, SUB(at, base, "upstream_proxy"), v, JSON_STRING, "\"http://HOST:PORT\"");
                r = r ?: setter(L, at, brig_policy_set_upstream_proxy(p, json_string_value(v), &e), &e);
        }
        return r;
}

static int load_files(const struct loader *L, json_t *o, const char *base, brig_policy *p,
                      int (*set)(brig_policy *, const char *, brig_error **))
{
        static const char *const keys[] = { "file", NULL };
        int r = want(L, base, o, JSON_OBJECT, "an object {\"file\": PATH}");
        r = r ?: check_keys(L, base, o, keys);
        json_t *v = json_object_get(o, "file");
        char at[512];
        brig_error *e = NULL;
        if (r == 0 && v) {
                r = want(L, SUB(at, base, "file"), v, JSON_STRING, "a path");
                r = r ?: setter(L, at, set(p, json_string_value(v), &e), &e);
        }
        return r;
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

static int load_tools(const struct loader *L, json_t *o, brig_policy *p)
{
        static const char *const keys[] = { "copy_in", "ssh_agent", "git_identity", "carry_config", NULL };
        static const char *const copy_keys[] = { "source", "destination", "secret", NULL };
        const char *base = "/tools";
        int r = want(L, base, o, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, base, o, keys);
        char at[512];
        json_t *v;
        brig_error *e = NULL;
        if (r == 0 && (v = json_object_get(o, "copy_in")))
                r = load_objects(L, SUB(at, base, "copy_in"), v, "an array of copy-ins", copy_keys, p, load_copy_in);
        if (r == 0 && (v = json_object_get(o, "ssh_agent"))) {
                r = want(L, SUB(at, base, "ssh_agent"), v, JSON_TRUE, "true or false");
                r = r ?: setter(L, at, brig_policy_set_ssh_agent(p, json_is_true(v), &e), &e);
        }
        if (r == 0 && (v = json_object_get(o, "git_identity"))) {
                r = want(L, SUB(at, base, "git_identity"), v, JSON_TRUE, "true or false");
                r = r ?: setter(L, at, brig_policy_set_git_identity(p, json_is_true(v), &e), &e);
        }
        if (r == 0 && (v = json_object_get(o, "carry_config")))
                r = load_strings(L, SUB(at, base, "carry_config"), v, p, brig_policy_carry_config);
        return r;
}

static int apply_profile(brig_policy *p, const char *name, int depth, brig_error **err);

/* Apply one parsed document. */
static int apply(const struct loader *L, json_t *doc, brig_policy *p)
{
        static const char *const keys[] = { "$schema", "extends", "filesystem", "process", "limits", "syscalls",
                                            "network", "audit", "report", "tools", NULL };
        int r = want(L, "", doc, JSON_OBJECT, "an object");
        r = r ?: check_keys(L, "", doc, keys);
        json_t *v;
        if (r == 0 && (v = json_object_get(doc, "extends"))) {
                r = want(L, "/extends", v, JSON_STRING, "a profile name");
                brig_error *e = NULL;
                if (r == 0 && apply_profile(p, json_string_value(v), L->depth + 1, &e) < 0) {
                        r = fail_at(L, "/extends", false, "%s", e ? e->msg : "bad profile");
                        brig_error_free(&e);
                }
        }
        if (r == 0 && (v = json_object_get(doc, "filesystem")))
                r = load_filesystem(L, v, p);
        if (r == 0 && (v = json_object_get(doc, "process")))
                r = load_process(L, v, p);
        if (r == 0 && (v = json_object_get(doc, "limits")))
                r = load_limits(L, v, p);
        if (r == 0 && (v = json_object_get(doc, "syscalls")))
                r = load_syscalls(L, v, p);
        if (r == 0 && (v = json_object_get(doc, "network")))
                r = load_network(L, v, p);
        if (r == 0 && (v = json_object_get(doc, "audit")))
                r = load_files(L, v, "/audit", p, brig_policy_set_audit_path);
        if (r == 0 && (v = json_object_get(doc, "report")))
                r = load_files(L, v, "/report", p, brig_policy_set_report_path);
        if (r == 0 && (v = json_object_get(doc, "tools")))
                r = load_tools(L, v, p);
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

static json_t *filesystem_json(const brig_policy *p)
{
        json_t *fs = json_object();
        if (p->workspace)
                json_object_set_new(fs, "workspace", json_string(p->workspace));
        json_object_set_new(fs, "workspace_readonly", json_boolean(p->workspace_readonly));
        json_t *binds = json_array(), *tmpfs = json_array();
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct mount_entry *m = &p->mounts[i];
                if (m->kind == MOUNT_BIND)
                        json_array_append_new(binds, json_pack("{s:s, s:s, s:b}", "source", m->src, "destination",
                                                               m->dst, "readonly", m->readonly));
                else
                        json_array_append_new(tmpfs, json_pack("{s:s, s:o}", "destination", m->dst, "size",
                                                               size_json(m->size)));
        }
        json_object_set_new(fs, "binds", binds);
        json_object_set_new(fs, "tmpfs", tmpfs);
        json_object_set_new(fs, "tmp_size", size_json(p->tmp_size));
        json_object_set_new(fs, "home_size", size_json(p->home_size));
        json_object_set_new(fs, "shm_size", size_json(p->shm_size));
        json_object_set_new(fs, "sys", json_boolean(p->mount_sys));
        json_t *deny = json_array();
        for (size_t i = 0; i < p->deny.n; i++)
                if (!is_default_deny(p->deny.items[i]))
                        json_array_append_new(deny, json_string(p->deny.items[i]));
        json_object_set_new(fs, "deny", deny);
        json_t *allowed = json_array();
        for (size_t i = 0; i < p->unsafe_allowed.n; i++)
                json_array_append_new(allowed, json_string(p->unsafe_allowed.items[i]));
        json_object_set_new(fs, "unsafe_allow_secrets", allowed);
        return fs;
}

static json_t *process_json(const brig_policy *p)
{
        json_t *proc = json_object(), *env = json_object(), *keep = json_array();
        for (size_t i = 0; i < p->n_env; i++)
                json_object_set_new(env, p->env[i].name, json_string(p->env[i].value));
        for (size_t i = 0; i < p->keep_env.n; i++)
                json_array_append_new(keep, json_string(p->keep_env.items[i]));
        json_object_set_new(proc, "env", env);
        json_object_set_new(proc, "keep_env", keep);
        if (p->cwd)
                json_object_set_new(proc, "cwd", json_string(p->cwd));
        if (p->hostname)
                json_object_set_new(proc, "hostname", json_string(p->hostname));
        static const char *const tty[] = { "auto", "always", "never" };
        json_object_set_new(proc, "tty", json_string(tty[p->tty]));
        json_object_set_new(proc, "terminal_passthrough", json_boolean(p->terminal_passthrough));
        return proc;
}

static json_t *limits_json(const brig_policy *p)
{
        const struct limits *l = &p->limits;
        json_t *o = json_object();
        const uint64_t values[] = {
                [BRIG_LIMIT_MEMORY] = l->memory, [BRIG_LIMIT_PIDS] = l->pids, [BRIG_LIMIT_CPUS_MILLI] = l->cpus_millis,
                [BRIG_LIMIT_IO_WEIGHT] = l->io_weight, [BRIG_LIMIT_TIMEOUT_MS] = l->timeout_ms,
                [BRIG_LIMIT_KILL_AFTER_MS] = l->kill_after_ms, [BRIG_LIMIT_CPU_TIME_S] = l->cpu_time_s,
                [BRIG_LIMIT_NOFILE] = l->nofile, [BRIG_LIMIT_NPROC] = l->nproc, [BRIG_LIMIT_FSIZE] = l->fsize,
                [BRIG_LIMIT_STACK] = l->stack,
        };
        for (size_t i = 0; i < ARRAY_SIZE(limit_keys); i++) {
                uint64_t v = values[limit_keys[i].which];
                json_t *j;
                switch (limit_keys[i].kind) {
                case K_SIZE: j = v ? size_json(v) : json_integer(0); break;
                case K_DURATION: j = duration_json(v); break;
                case K_SECONDS: j = json_sprintf("%llus", (unsigned long long)v); break;
                case K_CPUS: j = json_real((double)v / 1000.0); break;
                default: j = json_integer((json_int_t)v); break;
                }
                json_object_set_new(o, limit_keys[i].key, j);
        }
        json_object_set_new(o, "required", json_boolean(l->required));
        return o;
}

static json_t *tools_json(const struct tools_policy *t)
{
        json_t *o = json_object(), *copies = json_array(), *carry = json_array();
        for (size_t i = 0; i < t->n_copy_ins; i++)
                json_array_append_new(copies, json_pack("{s:s, s:s, s:b}", "source", t->copy_ins[i].src, "destination",
                                                        t->copy_ins[i].dst, "secret", t->copy_ins[i].secret));
        if (t->carry & CARRY_NPM)
                json_array_append_new(carry, json_string("npm"));
        if (t->carry & CARRY_PIP)
                json_array_append_new(carry, json_string("pip"));
        json_object_set_new(o, "copy_in", copies);
        json_object_set_new(o, "ssh_agent", json_boolean(t->ssh_agent));
        json_object_set_new(o, "git_identity", json_boolean(t->git_identity));
        json_object_set_new(o, "carry_config", carry);
        return o;
}

static json_t *policy_json(const brig_policy *p)
{
        json_t *doc = json_object();
        json_object_set_new(doc, "filesystem", filesystem_json(p));
        json_object_set_new(doc, "process", process_json(p));
        json_object_set_new(doc, "limits", limits_json(p));
        json_t *degraded = json_array();
        if (p->allow_degraded & DEGRADE_LANDLOCK)
                json_array_append_new(degraded, json_string("landlock"));
        if (p->allow_degraded & DEGRADE_SECCOMP)
                json_array_append_new(degraded, json_string("seccomp"));
        if (p->allow_degraded & DEGRADE_MEMORY)
                json_array_append_new(degraded, json_string("memory"));
        if (p->allow_degraded & DEGRADE_PIDS)
                json_array_append_new(degraded, json_string("pids"));
        if (p->allow_degraded & DEGRADE_CPUS)
                json_array_append_new(degraded, json_string("cpus"));
        if (p->allow_degraded & DEGRADE_IO)
                json_array_append_new(degraded, json_string("io"));
        json_object_set_new(doc, "syscalls", json_pack("{s:o, s:o}", "rules", seccomp_policy_json(p->seccomp),
                                                       "allow_degraded", degraded));
        json_t *net = egress_policy_json(p->egress);
        if (p->net_mode_set) {
                static const char *const modes[] = { "none", "proxy", "host", "filtered" };
                json_object_set_new(net, "mode", json_string(modes[p->net_mode]));
        }
        if (p->allow_unix.n) {
                json_t *unix_paths = json_array();
                for (size_t i = 0; i < p->allow_unix.n; i++)
                        json_array_append_new(unix_paths, json_string(p->allow_unix.items[i]));
                json_object_set_new(net, "allow_unix", unix_paths);
        }
        json_object_set_new(doc, "network", net);
        if (p->audit_path)
                json_object_set_new(doc, "audit", json_pack("{s:s}", "file", p->audit_path));
        if (p->report_path)
                json_object_set_new(doc, "report", json_pack("{s:s}", "file", p->report_path));
        if (p->tools)
                json_object_set_new(doc, "tools", tools_json(p->tools));
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

static int check_texts(const brig_policy *p, brig_error **err)
{
        int r = check_text("--workspace", p->workspace, err);
        if (r == 0)
                r = check_text("--cwd", p->cwd, err);
        if (r == 0)
                r = check_text("--hostname", p->hostname, err);
        if (r == 0)
                r = check_text("--json-report", p->report_path, err);
        if (r == 0)
                r = check_text("--audit", p->audit_path, err);
        for (size_t i = 0; r == 0 && i < p->n_mounts; i++)
                if ((r = check_text("the --bind or --ro-bind source", p->mounts[i].src, err)) == 0)
                        r = check_text("the --bind, --ro-bind or --tmpfs destination", p->mounts[i].dst, err);
        for (size_t i = 0; r == 0 && i < p->deny.n; i++)
                r = check_text("the --deny pattern", p->deny.items[i], err);
        for (size_t i = 0; r == 0 && i < p->unsafe_allowed.n; i++)
                r = check_text("the --unsafe-allow-secret pattern", p->unsafe_allowed.items[i], err);
        for (size_t i = 0; r == 0 && i < p->n_env; i++)
                if ((r = check_text("the --env name", p->env[i].name, err)) == 0)
                        r = check_text("the --env value", p->env[i].value, err);
        for (size_t i = 0; r == 0 && i < p->keep_env.n; i++)
                r = check_text("the --keep-env name", p->keep_env.items[i], err);
        for (size_t i = 0; r == 0 && i < p->allow_unix.n; i++)
                r = check_text("the --allow-unix path", p->allow_unix.items[i], err);
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
