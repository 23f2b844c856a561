/* config.c — an OCI runtime spec 1.x config.json mapped onto a brig
 * policy (docs/oci.md "What config.json can ask"). The file is the
 * engine's, but what it holds comes from an image and a user: every field
 * is checked, an unknown one is refused (a field brig skipped could be a
 * restriction the container then runs without), and what would make the
 * container weaker than brig's floor — hooks on the host, joined
 * namespaces, mounts over /proc, /dev or /sys — is an error naming the
 * field. brig's own controls (its seccomp floor, no capabilities, Landlock,
 * no_new_privs, its /dev and /proc) hold whatever the file says. */
#define _GNU_SOURCE
#include "oci/oci.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cfg {
        brig_policy *p;
        const char *name;
        char **msg;
};

/* The message quotes what the file holds: its control bytes as \xNN, so
 * one error stays one line on the engine's terminal and in its log. */
static void escape_controls(char **msg)
{
        if (!*msg)
                return;
        size_t n = 0;
        for (const unsigned char *s = (const unsigned char *)*msg; *s; s++)
                n += *s < 0x20 || *s == 0x7f ? 4 : 1;
        char *out = malloc(n + 1), *w = out;
        if (!out) {
                free(*msg);
                *msg = NULL;
                return;
        }
        for (const unsigned char *s = (const unsigned char *)*msg; *s; s++)
                w += *s < 0x20 || *s == 0x7f ? sprintf(w, "\\x%02x", *s) : (*w = (char)*s, 1);
        *w = '\0';
        free(*msg);
        *msg = out;
}

__attribute__((format(printf, 3, 4))) static int fail(struct cfg *c, const char *where, const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        free(*c->msg);
        *c->msg = NULL;
        if (n < 0 || asprintf(c->msg, "%s: %s: %s", c->name, where, text) < 0)
                *c->msg = NULL;
        free(text);
        escape_controls(c->msg);
        return -EINVAL;
}

/* A brig setter's error, located at the field. */
static int failed(struct cfg *c, const char *where, int r, brig_error **e)
{
        fail(c, where, "%s", *e && (*e)->msg ? (*e)->msg : strerror(-r));
        brig_error_free(e);
        return -EINVAL;
}

/* Every key of object `o` must be one of `known` (NULL-terminated). */
static int only_keys(struct cfg *c, const char *where, json_t *o, const char *const *known)
{
        if (!json_is_object(o))
                return fail(c, where, "expected an object");
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                size_t i = 0;
                while (known[i] && strcmp(known[i], key) != 0)
                        i++;
                if (!known[i])
                        return fail(c, where, "unknown field '%s' (brig refuses what it would not honour)", key);
        }
        return 0;
}

/* Each entry of the array `a` at `where` — an object holding only `keys` —
 * to fn with its own place ("/mounts/3"). */
static int each_entry(struct cfg *c, const char *where, json_t *a, const char *const *keys,
                      int (*fn)(struct cfg *c, const char *at, json_t *o))
{
        if (!json_is_array(a))
                return fail(c, where, "expected an array");
        size_t i;
        json_t *o;
        json_array_foreach(a, i, o) {
                char at[96];
                snprintf(at, sizeof at, "%s/%zu", where, i);
                int r = only_keys(c, at, o, keys);
                if (r == 0)
                        r = fn(c, at, o);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int string_array(struct cfg *c, const char *where, json_t *a, bool nonempty, char ***out)
{
        if (!json_is_array(a))
                return fail(c, where, "expected an array of strings");
        size_t n = json_array_size(a);
        if (nonempty && n == 0)
                return fail(c, where, "must not be empty");
        if (n > 65536)
                return fail(c, where, "%zu entries: at most 65536", n);
        char **v = calloc(n + 1, sizeof *v);
        if (!v)
                return fail(c, where, "out of memory");
        for (size_t i = 0; i < n; i++) {
                json_t *s = json_array_get(a, i);
                if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
                        for (size_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return fail(c, where, "entry %zu: expected a string without NUL bytes", i);
                }
                v[i] = strdup(json_string_value(s));
        }
        *out = v;
        return 0;
}

static void strv_free_all(char **v)
{
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

void oci_process_clear(struct oci_process *proc)
{
        strv_free_all(proc->argv);
        strv_free_all(proc->env);
        free(proc->cwd);
        free(proc->user);
        free(proc->umask);
        memset(proc, 0, sizeof *proc);
}

/* A non-negative integer no larger than max. */
static int number(struct cfg *c, const char *where, json_t *v, json_int_t max, json_int_t *out)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
                return fail(c, where, "expected an integer from 0 to %lld", (long long)max);
        *out = json_integer_value(v);
        return 0;
}

static int set_limit(struct cfg *c, const char *where, enum brig_limit which, uint64_t value)
{
        brig_error *e = NULL;
        int r = brig_policy_set_limit(c->p, which, value, &e);
        return r < 0 ? failed(c, where, r, &e) : 0;
}

static int load_rlimit(struct cfg *c, const char *where, json_t *rl)
{
        static const struct { const char *name; int which; } map[] = {
                { "RLIMIT_NOFILE", BRIG_LIMIT_NOFILE }, { "RLIMIT_NPROC", BRIG_LIMIT_NPROC },
                { "RLIMIT_FSIZE", BRIG_LIMIT_FSIZE },   { "RLIMIT_STACK", BRIG_LIMIT_STACK },
                { "RLIMIT_CPU", BRIG_LIMIT_CPU_TIME_S },
                /* brig sets these itself (or leaves them): accepted, not raised */
                { "RLIMIT_CORE", -1 }, { "RLIMIT_MEMLOCK", -1 }, { "RLIMIT_AS", -1 }, { "RLIMIT_DATA", -1 },
                { "RLIMIT_RSS", -1 }, { "RLIMIT_LOCKS", -1 }, { "RLIMIT_SIGPENDING", -1 },
                { "RLIMIT_MSGQUEUE", -1 }, { "RLIMIT_NICE", -1 }, { "RLIMIT_RTPRIO", -1 }, { "RLIMIT_RTTIME", -1 },
        };
        const char *type = json_string_value(json_object_get(rl, "type"));
        json_int_t hard, soft;
        int r;
        if (!type)
                return fail(c, where, "'type' is missing");
        if ((r = number(c, where, json_object_get(rl, "hard"), INT64_MAX, &hard)) < 0 ||
            (r = number(c, where, json_object_get(rl, "soft"), INT64_MAX, &soft)) < 0)
                return r;
        if (soft > hard)
                return fail(c, where, "soft %lld is above hard %lld", (long long)soft, (long long)hard);
        size_t k = 0;
        while (k < sizeof map / sizeof *map && strcmp(map[k].name, type) != 0)
                k++;
        if (k == sizeof map / sizeof *map)
                return fail(c, where, "unknown rlimit '%s'", type);
        return map[k].which >= 0 && soft > 0 ? set_limit(c, where, map[k].which, (uint64_t)soft) : 0;
}

/* process.user as brig's "UID:GID[:G,...]" and its umask; applied once
 * the maps are (oci_config_apply), checked against them there. */
static int load_user(struct cfg *c, json_t *v, struct oci_process *proc)
{
        static const char *const user_keys[] = { "uid", "gid", "umask", "additionalGids", "username", NULL };
        json_int_t uid, gid, mask;
        int r;
        if ((r = only_keys(c, "/process/user", v, user_keys)) < 0 ||
            (r = number(c, "/process/user/uid", json_object_get(v, "uid"), UINT32_MAX - 1, &uid)) < 0 ||
            (r = number(c, "/process/user/gid", json_object_get(v, "gid"), UINT32_MAX - 1, &gid)) < 0)
                return r;
        if (json_object_get(v, "username"))
                return fail(c, "/process/user/username", "Windows only");
        char *spec = NULL;
        if (asprintf(&spec, "%lld:%lld", (long long)uid, (long long)gid) < 0)
                return fail(c, "/process/user", "out of memory");
        json_t *groups = json_object_get(v, "additionalGids");
        if (groups && (!json_is_array(groups) || json_array_size(groups) > 32)) {
                free(spec);
                return fail(c, "/process/user/additionalGids", "expected an array of at most 32 gids");
        }
        size_t i;
        json_t *g;
        json_array_foreach(groups, i, g) {
                char at[64];
                json_int_t id;
                snprintf(at, sizeof at, "/process/user/additionalGids/%zu", i);
                char *more = NULL;
                if ((r = number(c, at, g, UINT32_MAX - 1, &id)) < 0 ||
                    asprintf(&more, "%s%c%lld", spec, i ? ',' : ':', (long long)id) < 0) {
                        free(spec);
                        return r < 0 ? r : fail(c, at, "out of memory");
                }
                free(spec);
                spec = more;
        }
        free(proc->user);
        proc->user = spec;
        if (json_object_get(v, "umask")) {
                if ((r = number(c, "/process/user/umask", json_object_get(v, "umask"), 0777, &mask)) < 0)
                        return r;
                free(proc->umask);
                if (asprintf(&proc->umask, "%04llo", (unsigned long long)mask) < 0)
                        proc->umask = NULL;
        }
        return 0;
}

static int load_process(struct cfg *c, json_t *o, struct oci_process *proc, bool apply)
{
        static const char *const keys[] = { "terminal", "consoleSize", "cwd", "env", "args", "commandLine",
                                            "rlimits", "apparmorProfile", "capabilities", "noNewPrivileges",
                                            "oomScoreAdj", "selinuxLabel", "user", "scheduler", "ioPriority",
                                            "execCPUAffinity", NULL };
        int r = only_keys(c, "/process", o, keys);
        if (r < 0)
                return r;
        json_t *v;
        if ((v = json_object_get(o, "commandLine")))
                return fail(c, "/process/commandLine", "Windows only");
        if ((r = string_array(c, "/process/args", json_object_get(o, "args"), true, &proc->argv)) < 0)
                return r;
        if ((v = json_object_get(o, "env")) && (r = string_array(c, "/process/env", v, false, &proc->env)) < 0)
                return r;
        for (size_t i = 0; proc->env && proc->env[i]; i++)
                if (!strchr(proc->env[i], '=') || proc->env[i][0] == '=')
                        return fail(c, "/process/env", "entry %zu: expected NAME=VALUE", i);
        v = json_object_get(o, "cwd");
        if (!json_is_string(v) || json_string_value(v)[0] != '/')
                return fail(c, "/process/cwd", "expected an absolute path");
        proc->cwd = strdup(json_string_value(v));
        if ((v = json_object_get(o, "terminal")) && !json_is_boolean(v))
                return fail(c, "/process/terminal", "expected true or false");
        proc->terminal = json_is_true(v);
        if ((v = json_object_get(o, "consoleSize"))) {
                static const char *const size_keys[] = { "height", "width", NULL };
                json_int_t h = 0, w = 0;
                if ((r = only_keys(c, "/process/consoleSize", v, size_keys)) < 0 ||
                    (r = number(c, "/process/consoleSize/height", json_object_get(v, "height"), 65535, &h)) < 0 ||
                    (r = number(c, "/process/consoleSize/width", json_object_get(v, "width"), 65535, &w)) < 0)
                        return r;
                proc->rows = (unsigned)h;
                proc->cols = (unsigned)w;
        }
        if ((v = json_object_get(o, "user")) && (r = load_user(c, v, proc)) < 0)
                return r;
        if ((v = json_object_get(o, "noNewPrivileges")) && !json_is_boolean(v))
                return fail(c, "/process/noNewPrivileges", "expected true or false");
        /* capabilities: brig grants none, whatever is listed (never more
         * than the spec asks); apparmor, SELinux, oomScoreAdj: brig's
         * confinement stands in their place (docs/oci.md). */
        if ((v = json_object_get(o, "capabilities")) && !json_is_object(v))
                return fail(c, "/process/capabilities", "expected an object");
        static const char *const rlimit_keys[] = { "type", "hard", "soft", NULL };
        if (apply && (v = json_object_get(o, "rlimits")) &&
            (r = each_entry(c, "/process/rlimits", v, rlimit_keys, load_rlimit)) < 0)
                return r;
        return 0;
}

/* ---- mounts ----------------------------------------------------------- */

static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool dotdot(const char *path)
{
        for (const char *s = path; (s = strstr(s, "..")); s += 2)
                if (s[-1] == '/' && (s[2] == '/' || s[2] == '\0'))
                        return true;
        return false;
}

static bool has_option(json_t *opts, const char *name)
{
        size_t i;
        json_t *o;
        json_array_foreach(opts, i, o)
                if (json_is_string(o) && strcmp(json_string_value(o), name) == 0)
                        return true;
        return false;
}

static const char *const mount_keys[] = { "destination", "type", "source", "options", "uidMappings",
                                          "gidMappings", NULL };

static int load_mount(struct cfg *c, const char *where, json_t *m)
{
        int r;
        const char *dst = json_string_value(json_object_get(m, "destination"));
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *src = json_string_value(json_object_get(m, "source"));
        json_t *opts = json_object_get(m, "options");
        if (!dst || dst[0] != '/' || dotdot(dst))
                return fail(c, where, "destination: expected an absolute path without '..'");
        if (opts && !json_is_array(opts))
                return fail(c, where, "options: expected an array of strings");
        if (json_object_get(m, "uidMappings") || json_object_get(m, "gidMappings"))
                return fail(c, where, "idmapped mounts are not supported");
        bool bind = (type && strcmp(type, "bind") == 0) || has_option(opts, "bind") || has_option(opts, "rbind");
        /* What brig mounts itself, its own way: a fresh /proc with masked
         * and read-only paths, a minimal /dev with its own devpts and shm,
         * /sys read-only for the container's network namespace. */
        static const char *const own[][2] = {
                { "/proc", "proc" }, { "/dev", "tmpfs" }, { "/dev/pts", "devpts" }, { "/dev/shm", "tmpfs" },
                { "/dev/mqueue", "mqueue" }, { "/sys", "sysfs" }, { "/sys/fs/cgroup", "cgroup" },
                { "/sys/fs/cgroup", "cgroup2" },
        };
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
                if (strcmp(dst, own[k][0]) == 0 && ((type && strcmp(type, own[k][1]) == 0) ||
                                                   (bind && strcmp(dst, "/dev/shm") == 0))) {
                        if (strcmp(own[k][1], "sysfs") == 0)
                                brig_policy_set_mount_sys(c->p, true);
                        return 0;
                }
        if (under(dst, "/proc") || under(dst, "/dev") || under(dst, "/sys"))
                return fail(c, where, "destination '%s': brig mounts /proc, /dev and /sys itself; nothing "
                            "else may be mounted there", dst);
        if (strcmp(dst, "/") == 0)
                return fail(c, where, "destination '/': the root is root.path");
        brig_error *e = NULL;
        if (bind) {
                if (!src || src[0] != '/')
                        return fail(c, where, "source: a bind needs an absolute host path");
                r = brig_policy_add_bind(c->p, src, dst, has_option(opts, "ro") ? BRIG_BIND_READONLY : 0, &e);
                return r < 0 ? failed(c, where, r, &e) : 0;
        }
        if (type && strcmp(type, "tmpfs") == 0) {
                uint64_t size = 0;
                size_t k;
                json_t *o;
                json_array_foreach(opts, k, o) {
                        const char *s = json_string_value(o);
                        if (s && strncmp(s, "size=", 5) == 0 && brig_parse_size(s + 5, &size, &e) < 0)
                                return failed(c, where, -EINVAL, &e);
                }
                r = brig_policy_add_tmpfs(c->p, dst, size, &e);
                return r < 0 ? failed(c, where, r, &e) : 0;
        }
        return fail(c, where, "type '%s' at '%s': brig mounts binds and tmpfs only", type ? type : "(none)", dst);
}

/* ---- linux ------------------------------------------------------------ */

static int load_namespace(struct cfg *c, const char *where, json_t *ns)
{
        static const char *const types[] = { "pid", "network", "mount", "ipc", "uts", "user", "cgroup", "time",
                                             NULL };
        const char *type = json_string_value(json_object_get(ns, "type"));
        size_t k = 0;
        while (type && types[k] && strcmp(types[k], type) != 0)
                k++;
        if (!type || !types[k])
                return fail(c, where, "unknown namespace type '%s'", type ? type : "(none)");
        /* brig makes every namespace itself, new: the network one is
         * where its egress proxy sits (the engine's stays unused,
         * docs/oci.md); joining another's is refused. */
        if (json_object_get(ns, "path") && strcmp(type, "network") != 0)
                return fail(c, where, "joining the %s namespace at '%s' is not supported: brig makes a new one",
                            type, json_string_value(json_object_get(ns, "path")) ?: "?");
        return 0;
}

static int load_resources(struct cfg *c, json_t *o)
{
        static const char *const keys[] = { "devices", "memory", "cpu", "pids", "blockIO", "hugepageLimits",
                                            "network", "rdma", "unified", NULL };
        static const char *const mem_keys[] = { "limit", "reservation", "swap", "kernel", "kernelTCP",
                                                "swappiness", "disableOOMKiller", "useHierarchy",
                                                "checkBeforeUpdate", NULL };
        static const char *const cpu_keys[] = { "shares", "quota", "burst", "period", "realtimeRuntime",
                                                "realtimePeriod", "cpus", "mems", "idle", NULL };
        static const char *const pids_keys[] = { "limit", NULL };
        int r = only_keys(c, "/linux/resources", o, keys);
        if (r < 0)
                return r;
        json_t *v, *x;
        json_int_t n;
        if ((v = json_object_get(o, "memory"))) {
                if ((r = only_keys(c, "/linux/resources/memory", v, mem_keys)) < 0)
                        return r;
                if ((x = json_object_get(v, "disableOOMKiller")) && json_is_true(x))
                        return fail(c, "/linux/resources/memory/disableOOMKiller", "not supported: brig's "
                                    "memory limit kills");
                x = json_object_get(v, "limit");
                if (x && !(json_is_integer(x) && json_integer_value(x) == -1)) {
                        if ((r = number(c, "/linux/resources/memory/limit", x, INT64_MAX, &n)) < 0)
                                return r;
                        if (n < (1 << 20))
                                return fail(c, "/linux/resources/memory/limit", "%lld bytes: at least 1 MiB",
                                            (long long)n);
                        if ((r = set_limit(c, "/linux/resources/memory/limit", BRIG_LIMIT_MEMORY, (uint64_t)n)) < 0)
                                return r;
                }
        }
        if ((v = json_object_get(o, "pids"))) {
                if ((r = only_keys(c, "/linux/resources/pids", v, pids_keys)) < 0)
                        return r;
                x = json_object_get(v, "limit");
                if (x && json_integer_value(x) > 0) {
                        if ((r = number(c, "/linux/resources/pids/limit", x, 1 << 22, &n)) < 0 ||
                            (r = set_limit(c, "/linux/resources/pids/limit", BRIG_LIMIT_PIDS, (uint64_t)n)) < 0)
                                return r;
                } else if (x && !json_is_integer(x)) {
                        return fail(c, "/linux/resources/pids/limit", "expected an integer");
                }
        }
        if ((v = json_object_get(o, "cpu"))) {
                if ((r = only_keys(c, "/linux/resources/cpu", v, cpu_keys)) < 0)
                        return r;
                json_t *q = json_object_get(v, "quota"), *per = json_object_get(v, "period");
                if (q && json_integer_value(q) > 0) {
                        json_int_t quota, period = 100000;
                        if ((r = number(c, "/linux/resources/cpu/quota", q, INT64_MAX / 1000, &quota)) < 0 ||
                            (per && (r = number(c, "/linux/resources/cpu/period", per, 1000000, &period)) < 0))
                                return r;
                        if (period < 1000)
                                return fail(c, "/linux/resources/cpu/period", "%lld: at least 1000 us",
                                            (long long)period);
                        uint64_t milli = (uint64_t)quota * 1000 / (uint64_t)period;
                        if ((r = set_limit(c, "/linux/resources/cpu/quota", BRIG_LIMIT_CPUS_MILLI,
                                           milli ? milli : 1)) < 0)
                                return r;
                }
        }
        /* devices: brig's /dev holds only null zero full random urandom
         * tty and its own pts, whatever the list allows. */
        return 0;
}

/* One rule of the spec's seccomp profile: a refusal by name becomes a brig
 * rule on top of its floor; an allow cannot widen the floor. */
static int load_seccomp_rule(struct cfg *c, const char *where, json_t *rule)
{
        const char *action = json_string_value(json_object_get(rule, "action"));
        if (!action)
                return fail(c, where, "'action' is missing");
        char brig_action[32];
        if (strcmp(action, "SCMP_ACT_ERRNO") == 0) {
                json_t *ret = json_object_get(rule, "errnoRet");
                json_int_t e = ret ? json_integer_value(ret) : EPERM;
                if (e <= 0 || e > 4095)
                        return fail(c, where, "errnoRet: expected 1 to 4095");
                snprintf(brig_action, sizeof brig_action, "errno:%lld", (long long)e);
        } else if (strncmp(action, "SCMP_ACT_KILL", 13) == 0 || strcmp(action, "SCMP_ACT_TRAP") == 0) {
                snprintf(brig_action, sizeof brig_action, "kill");
        } else {
                return 0;  /* allow, log, notify, trace: the floor decides */
        }
        /* A refusal with argument conditions cannot be told apart here:
         * brig's floor applies to that call unchanged. */
        json_t *args = json_object_get(rule, "args");
        if (args && json_array_size(args))
                return 0;
        json_t *names = json_object_get(rule, "names");
        if (!json_is_array(names))
                return fail(c, where, "names: expected an array of syscall names");
        size_t k;
        json_t *nm;
        json_array_foreach(names, k, nm) {
                if (!json_is_string(nm))
                        return fail(c, where, "names: expected strings");
                brig_error *e = NULL;
                /* a name brig does not know is a call its floor does not
                 * allow either */
                if (brig_policy_add_syscall_rule(c->p, json_string_value(nm), brig_action, &e) < 0)
                        brig_error_free(&e);
        }
        return 0;
}

/* The spec's seccomp profile, merged: the stricter wins (docs/oci.md). */
static int load_seccomp(struct cfg *c, json_t *o)
{
        static const char *const keys[] = { "defaultAction", "defaultErrnoRet", "architectures", "flags",
                                            "listenerPath", "listenerMetadata", "syscalls", NULL };
        static const char *const rule_keys[] = { "names", "action", "errnoRet", "args", "comment", "includes",
                                                 "excludes", NULL };
        int r = only_keys(c, "/linux/seccomp", o, keys);
        if (r < 0)
                return r;
        if (json_object_get(o, "listenerPath"))
                return fail(c, "/linux/seccomp/listenerPath", "a seccomp agent on the host is not supported");
        json_t *a = json_object_get(o, "syscalls");
        return a ? each_entry(c, "/linux/seccomp/syscalls", a, rule_keys, load_seccomp_rule) : 0;
}

/* One range of linux.uidMappings or gidMappings: where the user's ids
 * are looked up (brig maps those ids only, policy.c). */
static int load_map(struct cfg *c, const char *where, json_t *m, bool uid)
{
        json_int_t in, host, n;
        int r;
        if ((r = number(c, where, json_object_get(m, "containerID"), UINT32_MAX - 1, &in)) < 0 ||
            (r = number(c, where, json_object_get(m, "hostID"), UINT32_MAX - 1, &host)) < 0 ||
            (r = number(c, where, json_object_get(m, "size"), UINT32_MAX - 1, &n)) < 0)
                return r;
        char range[64];
        snprintf(range, sizeof range, "%lld:%lld:%lld", (long long)in, (long long)host, (long long)n);
        brig_error *e = NULL;
        r = uid ? brig_policy_add_uid_map(c->p, range, &e) : brig_policy_add_gid_map(c->p, range, &e);
        return r < 0 ? failed(c, where, r, &e) : 0;
}

static int load_uid_map(struct cfg *c, const char *where, json_t *m)
{
        return load_map(c, where, m, true);
}

static int load_gid_map(struct cfg *c, const char *where, json_t *m)
{
        return load_map(c, where, m, false);
}

static int load_linux(struct cfg *c, json_t *o)
{
        static const char *const keys[] = { "namespaces", "uidMappings", "gidMappings", "timeOffsets", "devices",
                                            "cgroupsPath", "rootfsPropagation", "seccomp", "sysctl",
                                            "resources", "intelRdt", "personality", "maskedPaths",
                                            "readonlyPaths", "mountLabel", "memoryPolicy", NULL };
        int r = only_keys(c, "/linux", o, keys);
        if (r < 0)
                return r;
        json_t *v;
        static const char *const ns_keys[] = { "type", "path", NULL };
        if ((v = json_object_get(o, "namespaces")) &&
            (r = each_entry(c, "/linux/namespaces", v, ns_keys, load_namespace)) < 0)
                return r;
        static const char *const map_keys[] = { "containerID", "hostID", "size", NULL };
        if ((v = json_object_get(o, "uidMappings")) &&
            (r = each_entry(c, "/linux/uidMappings", v, map_keys, load_uid_map)) < 0)
                return r;
        if ((v = json_object_get(o, "gidMappings")) &&
            (r = each_entry(c, "/linux/gidMappings", v, map_keys, load_gid_map)) < 0)
                return r;
        if ((v = json_object_get(o, "resources")) && (r = load_resources(c, v)) < 0)
                return r;
        if ((v = json_object_get(o, "seccomp")) && (r = load_seccomp(c, v)) < 0)
                return r;
        if ((v = json_object_get(o, "devices")) && json_array_size(v))
                return fail(c, "/linux/devices", "device nodes are not supported: brig's /dev is its own");
        if ((v = json_object_get(o, "personality")))
                return fail(c, "/linux/personality", "not supported (brig allows the native ABI only)");
        if ((v = json_object_get(o, "intelRdt")))
                return fail(c, "/linux/intelRdt", "not supported");
        /* sysctl: the network namespace's are brig's (its egress), the
         * rest are refused inside by the floor; maskedPaths and
         * readonlyPaths: brig's /proc already masks Docker's list and
         * more. Named, so the choice is visible in docs/oci.md. */
        return 0;
}

static int load_hooks(struct cfg *c, json_t *o)
{
        if (!json_is_object(o))
                return fail(c, "/hooks", "expected an object");
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v)
                if (json_array_size(v))
                        return fail(c, "/hooks", "'%s' hooks would run on the host, outside the container: "
                                    "brig runs none", key);
        return 0;
}

static int load_annotations(struct cfg *c, json_t *o)
{
        if (!json_is_object(o))
                return fail(c, "/annotations", "expected an object of strings");
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v)
                if (!json_is_string(v))
                        return fail(c, "/annotations", "'%s': expected a string", key);
        brig_error *e = NULL;
        const char *pol = json_string_value(json_object_get(o, OCI_ANNOTATION_POLICY));
        int r = 0;
        if (pol && pol[0] == '{')
                r = brig_policy_load_string(c->p, OCI_ANNOTATION_POLICY, pol, &e);
        else if (pol)
                r = brig_policy_apply_profile(c->p, pol, &e);
        if (r < 0)
                return failed(c, "/annotations/" OCI_ANNOTATION_POLICY, r, &e);
        const char *hosts = json_string_value(json_object_get(o, OCI_ANNOTATION_ALLOW_HOSTS));
        if (hosts) {
                char *copy = strdup(hosts), *save = NULL;
                for (char *h = strtok_r(copy, ", ", &save); copy && h && r == 0; h = strtok_r(NULL, ", ", &save))
                        r = brig_policy_allow_host(c->p, h, &e);
                free(copy);
                if (r < 0)
                        return failed(c, "/annotations/" OCI_ANNOTATION_ALLOW_HOSTS, r, &e);
        }
        return 0;
}

static int load_root(struct cfg *c, json_t *o, const char *bundle)
{
        static const char *const keys[] = { "path", "readonly", NULL };
        int r = only_keys(c, "/root", o, keys);
        if (r < 0)
                return r;
        const char *path = json_string_value(json_object_get(o, "path"));
        if (!path || !*path)
                return fail(c, "/root/path", "expected a path");
        json_t *ro = json_object_get(o, "readonly");
        if (ro && !json_is_boolean(ro))
                return fail(c, "/root/readonly", "expected true or false");
        /* The engine's bundle directory may sit behind a symlink; the
         * rootfs below it may not be one, nor hold one on the way: the
         * path, joined and cleaned, must be its own real path. */
        char *base = path[0] == '/' ? strdup("") : realpath(bundle, NULL);
        char *abs = NULL;
        if (!base)
                return fail(c, "/root/path", "bundle '%s': %s", bundle, strerror(errno));
        if (asprintf(&abs, "%s/%s", strcmp(base, "/") == 0 ? "" : base, path) < 0)
                abs = NULL;
        free(base);
        if (!abs)
                return fail(c, "/root/path", "out of memory");
        char *w = abs;
        for (const char *rd = abs; *rd;) {  /* "//" and "/./" to "/", a trailing "/" dropped */
                if (rd[0] == '/' && (rd[1] == '/' || (rd[1] == '.' && (rd[2] == '/' || rd[2] == '\0')))) {
                        rd += rd[1] == '/' ? 1 : 2;
                        continue;
                }
                *w++ = *rd++;
        }
        *w = '\0';
        if (w > abs + 1 && w[-1] == '/')
                w[-1] = '\0';
        if (dotdot(abs)) {
                r = fail(c, "/root/path", "'%s': '..' is not allowed", path);
                free(abs);
                return r;
        }
        char *real = realpath(abs, NULL);
        if (!real) {
                r = fail(c, "/root/path", "'%s': %s", abs, strerror(errno));
                free(abs);
                return r;
        }
        brig_error *e = NULL;
        r = strcmp(real, abs) != 0
                    ? fail(c, "/root/path", "'%s' is (or goes through) a symlink, to '%s': give the real directory",
                           abs, real)
                    : brig_policy_set_rootfs(c->p, real, &e) < 0 ? failed(c, "/root/path", -EINVAL, &e) : 0;
        free(real);
        free(abs);
        if (r == 0)
                brig_policy_set_workspace_readonly(c->p, json_is_true(ro));
        return r;
}

static json_t *parse(struct cfg *c, const char *text, size_t len)
{
        json_error_t je;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc) {
                free(*c->msg);
                if (asprintf(c->msg, "%s:%d:%d: %s", c->name, je.line, je.column, je.text) < 0)
                        *c->msg = NULL;
                escape_controls(c->msg);
                return NULL;
        }
        if (!json_is_object(doc)) {
                json_decref(doc);
                fail(c, "/", "expected an object");
                return NULL;
        }
        return doc;
}

int oci_user_apply(brig_policy *p, const struct oci_process *proc, const char *name, char **msg)
{
        struct cfg c = { .p = p, .name = name, .msg = msg };
        brig_error *e = NULL;
        if (proc->umask && brig_policy_set_umask(p, proc->umask, &e) < 0)
                return failed(&c, "/process/user/umask", -EINVAL, &e);
        if (!proc->user || brig_policy_set_user(p, proc->user, &e) == 0)
                return 0;
        /* the field the engine's message names ("user: gid 7 ...") */
        const char *m = e && e->msg ? e->msg : "";
        return failed(&c, strncmp(m, "user: uid", 9) == 0           ? "/process/user/uid"
                          : strncmp(m, "user: gid", 9) == 0          ? "/process/user/gid"
                          : strncmp(m, "user: supplementary", 19) == 0 ? "/process/user/additionalGids"
                                                                       : "/process/user",
                      -EINVAL, &e);
}

/* A policy holding no memory, pids or cpu limit: what a file sets in it
 * is then told apart from brig's defaults. */
brig_policy *oci_policy_without_limits(void)
{
        brig_policy *p = brig_policy_new();
        for (int i = 0; p && i < OCI_N_LIMITS; i++)
                brig_policy_set_limit(p, oci_limits[i], 0, NULL);
        return p;
}

const enum brig_limit oci_limits[OCI_N_LIMITS] = { BRIG_LIMIT_MEMORY, BRIG_LIMIT_PIDS, BRIG_LIMIT_CPUS_MILLI };

int oci_resources_parse(const char *name, const char *text, size_t len, uint64_t out[OCI_N_LIMITS], char **msg)
{
        struct cfg c = { .p = oci_policy_without_limits(), .name = name, .msg = msg };
        if (!c.p)
                return fail(&c, "/", "out of memory");
        json_t *doc = parse(&c, text, len);
        int r = doc ? load_resources(&c, doc) : -EINVAL;
        for (int i = 0; r == 0 && i < OCI_N_LIMITS; i++)
                out[i] = brig_policy_get_limit(c.p, oci_limits[i]);
        json_decref(doc);
        brig_policy_free(c.p);
        return r;
}

int oci_process_parse(const char *name, const char *text, size_t len, struct oci_process *proc, char **msg)
{
        struct cfg c = { .name = name, .msg = msg };
        json_t *doc = parse(&c, text, len);
        if (!doc)
                return -EINVAL;
        int r = load_process(&c, doc, proc, false);
        json_decref(doc);
        if (r < 0)
                oci_process_clear(proc);
        return r;
}

int oci_config_apply(brig_policy *p, const char *name, const char *text, size_t len, const char *bundle,
                     struct oci_process *proc, json_t **annotations, char **msg)
{
        static const char *const keys[] = { "ociVersion", "process", "root", "hostname", "domainname", "mounts",
                                            "hooks", "annotations", "linux", NULL };
        struct cfg c = { .p = p, .name = name, .msg = msg };
        json_t *doc = parse(&c, text, len);
        if (!doc)
                return -EINVAL;
        int r = only_keys(&c, "/", doc, keys);
        json_t *v;
        const char *ver = json_string_value(json_object_get(doc, "ociVersion"));
        if (r == 0 && (!ver || strncmp(ver, "1.", 2) != 0))
                r = fail(&c, "/ociVersion", "'%s': brig reads version 1 of the runtime spec", ver ? ver : "(none)");
        if (r == 0 && !json_object_get(doc, "linux"))
                r = fail(&c, "/linux", "missing: brig runs Linux containers");
        /* operator and annotations first: the spec's own limits and
         * layout apply on top of the policy they choose */
        if (r == 0 && (v = json_object_get(doc, "annotations")))
                r = load_annotations(&c, v);
        if (r == 0)
                r = (v = json_object_get(doc, "root")) ? load_root(&c, v, bundle) : fail(&c, "/root", "missing");
        if (r == 0)
                r = (v = json_object_get(doc, "process")) ? load_process(&c, v, proc, true)
                                                          : fail(&c, "/process", "missing");
        if (r == 0 && (v = json_object_get(doc, "hostname"))) {
                brig_error *e = NULL;
                if (!json_is_string(v))
                        r = fail(&c, "/hostname", "expected a string");
                else if (*json_string_value(v) && (r = brig_policy_set_hostname(p, json_string_value(v), &e)) < 0)
                        r = failed(&c, "/hostname", r, &e);
        }
        if (r == 0 && (v = json_object_get(doc, "domainname")) && !json_is_string(v))
                r = fail(&c, "/domainname", "expected a string");
        if (r == 0 && (v = json_object_get(doc, "hooks")))
                r = load_hooks(&c, v);
        if (r == 0 && (v = json_object_get(doc, "mounts")))
                r = each_entry(&c, "/mounts", v, mount_keys, load_mount);
        if (r == 0)
                r = load_linux(&c, json_object_get(doc, "linux"));
        if (r == 0)
                r = oci_user_apply(p, proc, name, msg);
        for (size_t i = 0; r == 0 && proc->env && proc->env[i]; i++) {
                char *eq = strchr(proc->env[i], '=');
                *eq = '\0';
                brig_error *e = NULL;
                r = brig_policy_set_env(p, proc->env[i], eq + 1, &e);
                *eq = '=';
                if (r < 0)
                        r = failed(&c, "/process/env", r, &e);
        }
        if (r == 0 && annotations) {
                *annotations = json_incref(json_object_get(doc, "annotations"));
                if (!*annotations)
                        *annotations = json_object();
        }
        json_decref(doc);
        if (r < 0)
                oci_process_clear(proc);
        return r;
}
