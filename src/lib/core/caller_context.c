/* caller_context.c — a caller's context as one text (caller_context.h). */
#define _GNU_SOURCE
#include "core/caller_context.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* Variables passed through from the caller when set: harmless, and what
 * programs need to behave (terminal type, language, time zone). */
const char *const caller_passthrough_env[] = { "TERM", "LANG", "LANGUAGE", "TZ", "COLORTERM", NULL };

/* The lines so far, each a malloc'd string. */
struct lines {
        char **items;
        size_t n, cap;
        bool failed;
};

static void add(struct lines *l, char *line)
{
        if (!line || l->failed) {
                free(line);
                l->failed = true;
                return;
        }
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 32;
                char **items = realloc(l->items, cap * sizeof *items);
                if (!items) {
                        free(line);
                        l->failed = true;
                        return;
                }
                l->items = items;
                l->cap = cap;
        }
        l->items[l->n++] = line;
}

/* Each input as NAME=VALUE or NAME (unset). */
static void add_var(struct lines *l, const char *name)
{
        const char *v = getenv(name);
        add(l, v ? brig_strdup_printf("%s=%s", name, v) : strdup(name));
}

/* What a cold run's command inherits from its caller's process beside
 * the environment: each resource limit (only the hard one where the
 * policy sets the soft: set_limit never raises a hard limit the caller
 * lowered; no core dumps whatever the caller's), and the caller's cgroups,
 * under which the sandbox's are made (a `systemd-run -p MemoryMax=` or a
 * harness's own group bounds the sandbox too), and its namespaces. A
 * member has its maker's: a caller with `ulimit -t`, in another group or
 * another mount namespace is not served by it. */
static void add_process(struct lines *l, unsigned fixed)
{
        for (int r = 0; r < RLIMIT_NLIMITS; r++) {
                struct rlimit rl;
                if (r == RLIMIT_CORE || getrlimit(r, &rl) < 0)
                        continue;
                add(l, fixed & (1u << r) ? brig_strdup_printf("rlimit%d=%llu", r, (unsigned long long)rl.rlim_max)
                                         : brig_strdup_printf("rlimit%d=%llu/%llu", r, (unsigned long long)rl.rlim_cur,
                                                              (unsigned long long)rl.rlim_max));
        }
        /* and its namespaces: binds and the workspace are paths in the
         * caller's mount namespace, --net host is the caller's network,
         * the proxy connects from it */
        static const char *const ns[] = { "mnt", "net", "user" };
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
                char path[32];
                struct stat st;
                snprintf(path, sizeof path, "/proc/self/ns/%s", ns[i]);
                add(l, stat(path, &st) == 0 ? brig_strdup_printf("ns.%s=%llu", ns[i], (unsigned long long)st.st_ino)
                                            : NULL);
        }
        FILE *f = fopen("/proc/self/cgroup", "re");
        char cg[4096];
        while (f && fgets(cg, sizeof cg, f)) {
                cg[strcspn(cg, "\n")] = '\0';
                add(l, brig_strdup_printf("cgroup=%s", cg));
        }
        if (!f)
                l->failed = true;
        else
                fclose(f);
}

static int by_string(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

char *caller_context_text(const struct caller_context_spec *spec)
{
        struct lines l = { 0 };
        /* the umask too, unless the policy sets one: a cold run's commands
         * inherit it (plan_user_asked), and a member's are the member's */
        if (spec->umask < 0)
                add(&l, brig_strdup_printf("uid=%u gid=%u", (unsigned)getuid(), (unsigned)getgid()));
        else
                add(&l, brig_strdup_printf("uid=%u gid=%u umask=%04o", (unsigned)getuid(), (unsigned)getgid(),
                                           (unsigned)spec->umask));
        static const char *const read_by_plan[] = { "HOME", "SHELL", "SSH_AUTH_SOCK", "XDG_CONFIG_HOME" };
        for (size_t i = 0; i < sizeof read_by_plan / sizeof *read_by_plan; i++)
                add_var(&l, read_by_plan[i]);
        for (size_t i = 0; caller_passthrough_env[i]; i++)
                add_var(&l, caller_passthrough_env[i]);
        for (size_t i = 0; i < spec->n_vars; i++)
                add_var(&l, spec->vars[i]);
        add_process(&l, spec->fixed_rlimits);
        /* LC_* in any order: plan_env keeps the environment's */
        size_t first_lc = l.n;
        for (char **e = environ; e && *e; e++)
                if (strncmp(*e, "LC_", 3) == 0 && strchr(*e, '='))
                        add(&l, strdup(*e));
        char *text = NULL;
        if (!l.failed) {
                qsort(l.items + first_lc, l.n - first_lc, sizeof *l.items, by_string);
                size_t len = 0;
                for (size_t i = 0; i < l.n; i++)
                        len += strlen(l.items[i]) + 1;
                char *at = text = malloc(len + 1);
                if (text) {
                        *at = '\0';
                        for (size_t i = 0; i < l.n; i++)
                                at = stpcpy(stpcpy(at, l.items[i]), "\n");
                }
        }
        for (size_t i = 0; i < l.n; i++) {
                explicit_bzero(l.items[i], strlen(l.items[i]));  /* a --keep-env value may be a token */
                free(l.items[i]);
        }
        free(l.items);
        return text;
}

void caller_workspace_identity(const char *workspace, char *out, size_t n)
{
        struct stat st;
        if (stat(workspace, &st) == 0)
                snprintf(out, n, "ws=%llu:%llu\n", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
        else
                snprintf(out, n, "ws=-\n");
}
