/* plan.c — turn a policy into the concrete plan of one run: the mount
 * layout sorted parents first, the secrets to hide, the sandbox user and
 * the environment. Everything here happens on the host before clone, so
 * the child only carries out decisions already made and checked. */
#define _GNU_SOURCE
#include "core/caller_context.h"
#include "core/dircache.h"
#include "core/model.h"
#include "core/wall.h"
#include "controls/mountinfo.h"
#include "controls/rlimit.h"
#include "net/intercept.h"
#include "persist/state.h"
#include "tools/tools.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/stat.h>

/* Read-only system directories; a symlink (merged /usr) is recreated as the
 * same symlink inside. */
static const char *const system_dirs[] = {
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", NULL,
};

static int push_mount(struct run_plan *plan, struct mount_entry m)
{
        struct mount_entry *n = realloc(plan->mounts, (plan->n_mounts + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        plan->mounts = n;
        m.src = m.src ? strdup(m.src) : NULL;
        m.dst = strdup(m.dst);
        plan->mounts[plan->n_mounts++] = m;
        return 0;
}

static int by_depth(const void *a, const void *b)
{
        const struct mount_entry *x = a, *y = b;
        int d = path_depth(x->dst) - path_depth(y->dst);
        if (d)
                return d;
        /* qsort is not stable: keep the given order so a later entry for
         * the same destination is mounted on top and wins. */
        return x < y ? -1 : (x > y);
}

static int caller_home(char **out, brig_error **err)
{
        const char *home = getenv("HOME");
        struct passwd *pw = NULL;
        if (!home || home[0] != '/') {
                pw = getpwuid(getuid());
                home = pw ? pw->pw_dir : NULL;
        }
        if (!home || home[0] != '/')
                return brig_err(err, ENOENT, "cannot tell the caller's home directory (set HOME)");
        *out = path_normalize(home);
        if (!*out)
                return brig_err(err, errno, "home directory '%s'", home);
        return 0;
}

/* The symlinks `path` goes through, resolved as realpath does but one link
 * at a time, each noted in LINKS (host paths). A secret named through a
 * symlink in a writable grant (~/.config -> dotfiles/config holding
 * ~/.config/gcloud) is masked where it really lives; were the link itself
 * left movable, a run could replace it and the next run's deny list would
 * find nothing there to hide, while the secret stayed visible at its real
 * path. The links get pinned too (plan_masks). */
static int note_symlinks(const char *path, struct strv *links)
{
        _cleanup_free_ char *prefix = strdup(""), *pending = strdup(path);
        for (int hops = 0; prefix && pending && *pending;) {
                char *c = pending + strspn(pending, "/");
                size_t n = strcspn(c, "/");
                char *rest = c + n;
                if (n == 0 || (n == 1 && c[0] == '.')) {
                        memmove(pending, rest, strlen(rest) + 1);
                        continue;
                }
                if (n == 2 && c[0] == '.' && c[1] == '.') {
                        char *slash = strrchr(prefix, '/');
                        if (slash)
                                *slash = '\0';
                        memmove(pending, rest, strlen(rest) + 1);
                        continue;
                }
                char *cand = brig_strdup_printf("%s/%.*s", prefix, (int)n, c);
                struct stat st;
                if (!cand)
                        return -ENOMEM;
                if (lstat(cand, &st) < 0 || (S_ISLNK(st.st_mode) && ++hops > 40)) {
                        free(cand);
                        return 0;  /* nothing there: nothing to hide below */
                }
                if (!S_ISLNK(st.st_mode)) {
                        free(prefix);
                        prefix = cand;
                        memmove(pending, rest, strlen(rest) + 1);
                        continue;
                }
                char target[PATH_MAX];
                ssize_t len = readlink(cand, target, sizeof target - 1);
                int r = len > 0 && !strv_contains(links, cand) ? strv_push(links, cand) : 0;
                free(cand);
                if (len <= 0 || r < 0)
                        return r;
                target[len] = '\0';
                char *next = brig_strdup_printf("%s/%s", target, rest);
                if (!next)
                        return -ENOMEM;
                free(pending);
                pending = next;
                if (target[0] == '/')
                        prefix[0] = '\0';
        }
        return prefix && pending ? 0 : -ENOMEM;
}

/* ---- one directory under two names ----------------------------------------
 *
 * The deny list is matched by path, but a host can show one directory under
 * two names (a bind mount of /home at /srv/home, a filesystem mounted
 * twice): a grant of /srv/home must hide the keys in /home too, and
 * `--deny /srv/home/u/key` must hide it in a grant of /home. The mount
 * table says which names a bind source's directories have (mountinfo.c);
 * the tests below run on each of them as on the source itself. */
struct grant_names {
        struct path_alias *v;   /* v[0]: the source itself (rel "") */
        size_t n;
};

static void grant_names_free(struct grant_names *g, size_t n_mounts)
{
        for (size_t m = 0; g && m < n_mounts; m++)
                path_aliases_free(g[m].v, g[m].n);
        free(g);
}

static int grant_names_init(const struct run_plan *plan, const struct mountinfo *mi, struct grant_names **out)
{
        struct grant_names *g = calloc(plan->n_mounts ? plan->n_mounts : 1, sizeof *g);
        int r = g ? 0 : -ENOMEM;
        for (size_t m = 0; r == 0 && m < plan->n_mounts; m++) {
                if (plan->mounts[m].kind != MOUNT_BIND)
                        continue;
                struct path_alias *alias = NULL;
                size_t n = 0;
                r = mountinfo_aliases(mi, plan->mounts[m].src, &alias, &n);
                struct path_alias *v = r == 0 ? calloc(n + 1, sizeof *v) : NULL;
                char *self = v ? strdup(plan->mounts[m].src) : NULL, *empty = self ? strdup("") : NULL;
                if (!empty) {
                        free(self);
                        free(v);
                        path_aliases_free(alias, n);
                        r = r ?: -ENOMEM;
                        break;
                }
                v[0] = (struct path_alias){ .host = self, .rel = empty };
                if (n)
                        memcpy(v + 1, alias, n * sizeof *alias);
                free(alias);
                g[m] = (struct grant_names){ .v = v, .n = n + 1 };
        }
        if (r < 0) {
                grant_names_free(g, plan->n_mounts);
                return r;
        }
        *out = g;
        return 0;
}

/* Can anything below `path` be visible inside? Only through a bind whose
 * source (by any of its names) contains it or lies inside it. */
static bool reachable_by_bind(const struct run_plan *plan, const struct grant_names *g, const char *path)
{
        for (size_t m = 0; m < plan->n_mounts; m++)
                for (size_t k = 0; k < g[m].n; k++)
                        if (path_is_under(path, g[m].v[k].host) || path_is_under(g[m].v[k].host, path))
                                return true;
        return false;
}

/* Where host PATH shows inside through bind M: a new string, or NULL
 * (*oom set when out of memory). */
static char *inside_grant(const struct run_plan *plan, const struct grant_names *g, size_t m, const char *path,
                          bool *oom)
{
        const char *dst = plan->mounts[m].dst;
        for (size_t k = 0; k < g[m].n; k++) {
                const char *rel = g[m].v[k].rel;
                const char *below = path_below(path, g[m].v[k].host);
                if (!below && *rel && path_is_under(g[m].v[k].host, path))
                        below = "";  /* the part of the source at REL lies inside PATH */
                if (!below || (!*below && !*rel))
                        continue;
                char *s = brig_strdup_printf("%s%s%s%s%s", strcmp(dst, "/") == 0 ? "" : dst, *rel ? "/" : "", rel,
                                             *below ? "/" : "", below);
                if (!s)
                        *oom = true;
                return s;
        }
        return NULL;
}

/* Is bind M's source (by a name that is all of it) inside one of DENIED? */
static const char *grant_in_secret(const struct grant_names *g, size_t m, const struct strv *denied)
{
        for (size_t k = 0; k < g[m].n; k++)
                for (size_t d = 0; !*g[m].v[k].rel && d < denied->n; d++)
                        if (path_is_under(g[m].v[k].host, denied->items[d]))
                                return denied->items[d];
        return NULL;
}

/* The literal part of a pattern, before its first glob character. */
static char *literal_prefix(const char *pattern)
{
        size_t n = strcspn(pattern, "*?[");
        char *s = strndup(pattern, n);
        if (s && n < strlen(pattern)) {
                char *slash = strrchr(s, '/');
                if (slash)
                        slash[slash == s ? 1 : 0] = '\0';
        }
        return s;
}

/* A literal path made safe to glob: home directories may hold '[' or '*'. */
static char *glob_escape(const char *s)
{
        char *out = malloc(2 * strlen(s) + 1), *o = out;
        if (!out)
                return NULL;
        for (; *s; s++) {
                if (strchr("*?[]\\", *s))
                        *o++ = '\\';
                *o++ = *s;
        }
        *o = '\0';
        return out;
}

/* The long way, for the test that holds the short cuts below to it
 * (test_plan.py): BRIG_TEST_PLAN_LONG_WAY=1 in a test-hooks build. */
static bool long_way(void)
{
        return plan_long_way();
}

/* How recent a directory's change may be for the cache to keep what was
 * missing from it: BRIG_TEST_DIRCACHE_MARGIN_MS in a test-hooks build
 * (the tests' homes are made a moment before the run). */
static int64_t dircache_margin(void)
{
#ifdef BRIG_TEST_HOOKS
        const char *v = getenv("BRIG_TEST_DIRCACHE_MARGIN_MS");
        if (v && *v)
                return (int64_t)strtoll(v, NULL, 10) * 1000000;
#endif
        return DIRCACHE_MARGIN_NS;
}

/* realpath(3) of many entries of few directories: each directory's real
 * path asked once (realpath reads the link of every component, again for
 * each entry), the entry's own name after it when lstat says the entry
 * is no symlink — what realpath would find. */
struct real_dirs {
        struct strv dirs;  /* as named */
        char **real;       /* real[i]: dirs.items[i]'s real path, or NULL (none) */
        /* deny list hits whose lstat the expansion had (their own real
         * path): directories, and the rest (add_link_targets asks no
         * lstat of them again) */
        struct strv hit_dirs, hit_others;
};

static void real_dirs_free(struct real_dirs *rd)
{
        for (size_t i = 0; i < rd->dirs.n; i++)
                free(rd->real[i]);
        free(rd->real);
        strv_free(&rd->dirs);
        strv_free(&rd->hit_dirs);
        strv_free(&rd->hit_others);
}

static char *real_path(struct real_dirs *rd, const char *path, const struct stat *st);

/* realpath(DIR) through the same memo: DIR's parent's real path and its
 * name when lstat says it is a directory and no symlink (realpath reads
 * the link of every component of every directory: /etc four times for
 * /etc, /etc/ssh, /etc/ssl and /etc/security). */
static char *real_dir(struct real_dirs *rd, const char *dir)
{
        struct stat st;
        if (strcmp(dir, "/") == 0 || strstr(dir, "/./") || strstr(dir, "/../") || lstat(dir, &st) < 0 ||
            !S_ISDIR(st.st_mode))
                return realpath(dir, NULL);
        return real_path(rd, dir, &st);
}

/* realpath(PATH) (NULL: none, or out of memory), PATH an entry lstat
 * found (ST), or NULL: not looked at yet. */
static char *real_path(struct real_dirs *rd, const char *path, const struct stat *st)
{
        struct stat own;
        if (!st) {
                if (lstat(path, &own) < 0)
                        return NULL;  /* realpath would not find it either */
                st = &own;
        }
        const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : "";
        if (long_way() || S_ISLNK(st->st_mode) || !slash || !*name || strcmp(name, ".") == 0 ||
            strcmp(name, "..") == 0 || (slash > path && slash[-1] == '/'))
                return realpath(path, NULL);
        _cleanup_free_ char *dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir)
                return NULL;
        size_t i = 0;
        while (i < rd->dirs.n && strcmp(rd->dirs.items[i], dir) != 0)
                i++;
        if (i == rd->dirs.n) {
                /* first: the directories above it join the memo */
                char *real = real_dir(rd, dir);
                char **grown = realloc(rd->real, (rd->dirs.n + 1) * sizeof *grown);
                if (!grown || strv_push(&rd->dirs, dir) < 0) {
                        rd->real = grown ?: rd->real;
                        free(real);
                        return realpath(path, NULL);
                }
                rd->real = grown;
                i = rd->dirs.n - 1;
                rd->real[i] = real;
        }
        if (!rd->real[i])
                return realpath(path, NULL);  /* it went meanwhile: realpath says */
        return brig_strdup_printf("%s/%s", strcmp(rd->real[i], "/") == 0 ? "" : rd->real[i], name);
}

static int add_found(struct real_dirs *rd, struct strv *out, struct strv *links, const char *path,
                     const struct stat *st)
{
        /* The canonical location is what a bind source (always
         * symlink-free) can contain; a symlinked secret is hidden where it
         * really lives. */
        struct stat own;
        if (!st) {
                if (lstat(path, &own) < 0)
                        return 0;  /* gone since glob(3) found it: realpath would not find it either */
                st = &own;
        }
        char *real = real_path(rd, path, st);
        if (!real)
                return 0;
        if (strcmp(real, path) != 0 && note_symlinks(path, links) < 0) {
                free(real);
                return -ENOMEM;
        }
        /* not kept (out of memory): add_link_targets looks again */
        if (st && strcmp(real, path) == 0 && !long_way())
                (void)strv_push(S_ISDIR(st->st_mode) ? &rd->hit_dirs : &rd->hit_others, real);
        if (strv_contains(out, real)) {
                free(real);
                return 0;
        }
        return strv_push_take(out, real) < 0 ? -ENOMEM : 0;
}

/* glob(PATTERN, GLOB_NOSORT) where only its last name has a glob character
 * (/etc/ssh/ with *key*): what glob_in_dir does, without glob's copies and its
 * 32 KiB directory buffer (45 us of the policy step for /etc/ssh): the
 * directory read once, each entry matched by fnmatch with FNM_PERIOD,
 * named after the directory as written, in the directory's order, each
 * handed to add_found with no stat (as glob's are). -EAGAIN for any other
 * pattern (a glob character or backslash before the last "/", a
 * backslash in the last name, a final "/", "//", "/" itself), which
 * glob(3) takes. */
static int glob_last_name(struct real_dirs *rd, struct strv *out, struct strv *links, const char *pattern)
{
        const char *slash = strrchr(pattern, '/'), *name = slash ? slash + 1 : NULL;
        if (long_way() || pattern[0] != '/' || !slash || slash == pattern || !*name || strchr(name, '\\') ||
            strstr(pattern, "//") || strcspn(pattern, "*?[\\") < (size_t)(slash - pattern))
                return -EAGAIN;
        size_t dlen = (size_t)(slash - pattern);
        char dir[PATH_MAX];
        if (dlen >= sizeof dir)
                return -EAGAIN;
        memcpy(dir, pattern, dlen);
        dir[dlen] = '\0';
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return 0;  /* glob: no match */
        char buf[8192] __attribute__((aligned(8)));
        int r = 0;
        ssize_t n;
        while (r == 0 && (n = getdents64(fd, buf, sizeof buf)) > 0)
                for (ssize_t at = 0; r == 0 && at < n;) {
                        const struct dirent64 *e = (const struct dirent64 *)(const void *)(buf + at);
                        at += e->d_reclen;
                        if (fnmatch(name, e->d_name, FNM_PERIOD) != 0)
                                continue;
                        char path[PATH_MAX];
                        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
                                return -EAGAIN;  /* glob's own answer, then */
                        r = add_found(rd, out, links, path, NULL);
                }
        return r;
}

static int add_expanded(struct real_dirs *rd, struct strv *out, struct strv *links, const char *pattern)
{
        /* A pattern without a glob character (nor a "//" or a final "/",
         * which glob(3) treats apart) is one path: glob would lstat it and
         * give it back, so lstat it here (no glob_t, no copies: most of
         * the deny list is such paths, and most are not there). */
        struct stat st;
        size_t n = strlen(pattern);
        if (!strpbrk(pattern, "*?[\\") && !strstr(pattern, "//") && n > 1 && pattern[n - 1] != '/' && !long_way())
                return lstat(pattern, &st) == 0 ? add_found(rd, out, links, pattern, &st) : 0;
        int r = glob_last_name(rd, out, links, pattern);
        if (r != -EAGAIN)
                return r;
        glob_t g;
        r = glob(pattern, GLOB_NOSORT, NULL, &g);
        if (r == GLOB_NOMATCH)
                return 0;
        if (r != 0)
                return -ENOMEM;
        for (size_t i = 0; r == 0 && i < g.gl_pathc; i++)
                r = add_found(rd, out, links, g.gl_pathv[i], NULL);
        globfree(&g);
        return r;
}

static int expand_one(const struct run_plan *plan, const struct grant_names *g, struct real_dirs *rd,
                      const char *pattern, struct strv *out, struct strv *links)
{
        _cleanup_free_ char *prefix = literal_prefix(pattern);
        if (!prefix)
                return -ENOMEM;
        /* Cheap test first: most secrets are nowhere near a grant. Homes
         * are listed under their canonical names too, and the grants under
         * all of theirs, so a textual test suffices here. */
        if (!reachable_by_bind(plan, g, prefix))
                return 0;
        return add_expanded(rd, out, links, pattern);
}

/* /etc/passwd, read once per plan — itself, not NSS: enumerating every
 * user through nss-systemd and friends costs more than the rest of the
 * start — and parsed from memory: fgetpwent on the file itself asks the
 * kernel where it is (lseek) for every line. What the plan takes from
 * it: every home (the deny list's "~/"), the name of the sandbox user
 * (USER and LOGNAME), and the text the sandbox's own is made from
 * (tools.c). */
struct passwd_db {
        char *text;  /* "" when there is none */
        size_t len;
        struct strv homes;
        char *name;  /* of the uid asked for, or NULL */
};

static int passwd_db_read(struct passwd_db *db, const struct run_plan *plan, brig_error **err)
{
        *db = (struct passwd_db){ 0 };
        int r = tools_read_host_file("passwd", "/etc/passwd", false, 64u << 20, &db->text, &db->len, err);
        /* none, or (with a rootfs, whose own stays) none that can be read:
         * no homes in it, no name */
        if (r == -ENOENT || (r < 0 && plan->rootfs)) {
                brig_error_free(err);
                db->text = strdup("");
                db->len = 0;
                r = db->text ? 0 : brig_err(err, ENOMEM, "passwd");
        }
        if (r < 0)
                return r;
        FILE *m = db->len ? fmemopen(db->text, db->len, "r") : NULL;
        struct passwd *pw;
        r = db->len && !m ? -ENOMEM : 0;
        while (r == 0 && m && (pw = fgetpwent(m))) {
                if (pw->pw_dir && pw->pw_dir[0] == '/' && strcmp(pw->pw_dir, "/") != 0 &&
                    !strv_contains(&db->homes, pw->pw_dir))
                        r = strv_push(&db->homes, pw->pw_dir);
                if (r == 0 && !db->name && pw->pw_uid == plan->host_uid && !(db->name = strdup(pw->pw_name)))
                        r = -ENOMEM;
        }
        if (m)
                fclose(m);
        return r < 0 ? brig_err(err, -r, "read /etc/passwd") : 0;
}

static void passwd_db_free(struct passwd_db *db)
{
        free(db->text);
        strv_free(&db->homes);
        free(db->name);
}

/* Every home directory: the caller's, each in the passwd database, and
 * the real name of each reached through a symlink (where it really
 * lives), for the deny list's "~/" entries (here and tools.c). */
static int plan_homes(struct run_plan *plan, const struct passwd_db *db, struct real_dirs *rd)
{
        struct strv *homes = &plan->homes;
        int r = strv_push(homes, plan->home);
        for (size_t i = 0; r == 0 && i < db->homes.n; i++)
                if (!strv_contains(homes, db->homes.items[i]))
                        r = strv_push(homes, db->homes.items[i]);
        /* A home reached through a symlink lives where it really is; one
         * lstat cannot find is not there for realpath(3) either. */
        for (size_t h = 0, n = homes->n; r == 0 && h < n; h++) {
                struct stat st;
                if (!long_way() && lstat(homes->items[h], &st) < 0)
                        continue;
                char *real = long_way() ? realpath(homes->items[h], NULL) : real_path(rd, homes->items[h], &st);
                if (real && !strv_contains(homes, real))
                        r = strv_push_take(homes, real);
                else
                        free(real);
        }
        return r;
}

/* Where the deny list's "~/" entries are looked up in one home: the home
 * is opened once and each entry looked up from there (a lookup of one or
 * two names, not of the whole path again), a home that cannot be opened
 * has none of them (each lookup would fail at the same name), and the
 * entries' first directories are looked at once: an entry below one that
 * is not there is not there either, and ten of the built-in entries lie
 * below ~/.config alone. A home with a glob character in its name, or a
 * "//" or a final "/", is looked up the long way. A name the directory
 * cache (dircache.c) knows missing from the home, or from a first
 * directory, unchanged since, is not looked up at all; one found missing
 * is learned for the next run. */
struct first_dir {
        char name[NAME_MAX + 1];
        struct stat st;  /* its lstat */
};
struct dir_learned {
        char *dir;        /* the first directory, or NULL: the home */
        struct stat before;
        struct strv names;
};
struct home_look {
        const char *home;
        int fd;                       /* O_PATH of the home; -1: none; -2: not opened yet */
        struct strv absent;           /* first directories, by name */
        struct first_dir *present;
        size_t n_present;
        struct dircache *dc;          /* NULL: none (the long way, or no cache) */
        bool known;                   /* st is the home's, for the cache */
        struct stat st;
        struct dir_learned *learned;
        size_t n_learned;
};

/* NAME was missing from DIR (the home when DIR is NULL) as BEFORE shows
 * it; not kept when out of memory (a cache is an optimisation). */
static void look_learn(struct home_look *l, const char *dir, const struct stat *before, const char *name)
{
        struct dir_learned *d = NULL;
        for (size_t i = 0; i < l->n_learned && !d; i++)
                if (dir ? l->learned[i].dir && strcmp(l->learned[i].dir, dir) == 0 : !l->learned[i].dir)
                        d = &l->learned[i];
        if (!d) {
                struct dir_learned *grown = realloc(l->learned, (l->n_learned + 1) * sizeof *grown);
                char *copy = dir ? strdup(dir) : NULL;
                if (!grown || (dir && !copy)) {
                        l->learned = grown ?: l->learned;
                        free(copy);
                        return;
                }
                l->learned = grown;
                d = &l->learned[l->n_learned++];
                *d = (struct dir_learned){ .dir = copy, .before = *before };
        }
        (void)strv_push(&d->names, name);
}

/* What the cache may keep of this home: each directory looked at again,
 * as it is now (dircache_learn keeps it only unchanged). */
static void look_end(struct home_look *l)
{
        for (size_t i = 0; i < l->n_learned; i++) {
                struct dir_learned *d = &l->learned[i];
                struct stat after;
                if (l->fd >= 0 && (d->dir ? fstatat(l->fd, d->dir, &after, AT_SYMLINK_NOFOLLOW) : fstat(l->fd, &after)) == 0)
                        (void)dircache_learn(l->dc, l->fd, &d->before, &after, &d->names);
                free(d->dir);
                strv_free(&d->names);
        }
        free(l->learned);
        if (l->fd >= 0)
                close(l->fd);
        strv_free(&l->absent);
        free(l->present);
        *l = (struct home_look){ .fd = -1 };
}

static void home_looks_free(struct home_look *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++)
                look_end(&v[i]);
        free(v);
}

static struct home_look *home_looks_new(const struct strv *homes, struct dircache *dc)
{
        struct home_look *v = calloc(homes->n ? homes->n : 1, sizeof *v);
        for (size_t i = 0; v && i < homes->n; i++)
                v[i] = (struct home_look){ .home = homes->items[i], .fd = -2, .dc = dc };
        return v;
}

/* The entry's part below the home, when it can be looked up from the
 * home's descriptor; else NULL. */
static const char *home_relative(const struct home_look *l, const char *pat)
{
        size_t n = strlen(l->home);
        const char *rel = pat + 2;
        if (long_way() || pat[0] != '~' || pat[1] != '/' || !*rel || rel[0] == '/' || strstr(rel, "//") ||
            rel[strlen(rel) - 1] == '/' || strpbrk(l->home, "*?[]\\") || strstr(l->home, "//") || !n ||
            l->home[n - 1] == '/')
                return NULL;
        return rel;
}

/* lstat of REL from the home, NAME being REL's last name and DIR (the
 * directory holding it: the home, or the first directory FIRST) as this
 * run saw it, or NULL (no cache for it). */
static int look_up(struct home_look *l, const struct stat *dir, const char *first, const char *name, const char *rel,
                   struct stat *st)
{
        if (dir && dircache_absent(l->dc, dir, name)) {
                errno = ENOENT;
                return -1;
        }
        int r = fstatat(l->fd, rel, st, AT_SYMLINK_NOFOLLOW);
        if (r < 0 && errno == ENOENT && dir) {
                look_learn(l, first, dir, name);
                errno = ENOENT;
        }
        return r;
}

/* lstat of HOME/REL (REL from home_relative, without a glob character
 * in its first directory): -1 with errno when it is not there. */
static int home_lstat(struct home_look *l, const char *rel, struct stat *st)
{
        if (l->fd == -2) {
                l->fd = open(l->home, O_PATH | O_DIRECTORY | O_CLOEXEC);
                l->known = l->dc && l->fd >= 0 && fstat(l->fd, &l->st) == 0;
        }
        if (l->fd < 0) {
                errno = ENOENT;
                return -1;
        }
        const struct stat *home = l->known ? &l->st : NULL;
        const char *slash = strchr(rel, '/');
        if (!slash)
                return look_up(l, home, NULL, rel, rel, st);
        size_t n = (size_t)(slash - rel);
        if (n > NAME_MAX)
                return fstatat(l->fd, rel, st, AT_SYMLINK_NOFOLLOW);
        char dir[NAME_MAX + 1];
        memcpy(dir, rel, n);
        dir[n] = '\0';
        if (strv_contains(&l->absent, dir)) {
                errno = ENOENT;
                return -1;
        }
        const struct first_dir *f = NULL;
        for (size_t i = 0; i < l->n_present && !f; i++)
                if (strcmp(l->present[i].name, dir) == 0)
                        f = &l->present[i];
        if (!f) {
                struct stat dst;
                if (look_up(l, home, NULL, dir, dir, &dst) < 0) {
                        int e = errno;
                        /* not kept (out of memory): looked at again */
                        (void)strv_push(&l->absent, dir);
                        errno = e;
                        return -1;
                }
                struct first_dir *grown = realloc(l->present, (l->n_present + 1) * sizeof *grown);
                if (grown) {
                        l->present = grown;
                        f = &grown[l->n_present++];
                        memcpy(l->present[l->n_present - 1].name, dir, n + 1);
                        l->present[l->n_present - 1].st = dst;
                }
                if (!f)
                        return fstatat(l->fd, rel, st, AT_SYMLINK_NOFOLLOW);
        }
        /* one name below a first directory that is one (no symlink): the
         * cache may know it */
        const char *rest = slash + 1;
        bool cached = l->dc && S_ISDIR(f->st.st_mode) && !strchr(rest, '/');
        struct stat fst = f->st;
        return look_up(l, cached ? &fst : NULL, dir, rest, rel, st);
}

/* Expand the deny patterns into existing canonical host paths that some
 * bind could expose. "~/x" is expanded for the caller's home and for every
 * home in the passwd database, so granting /home hides everyone's keys. */
static int expand_deny(const struct run_plan *plan, const struct grant_names *g, struct real_dirs *rd,
                       struct dircache *dc, const brig_policy *p, struct strv *out, struct strv *links)
{
        const struct strv *homes = &plan->homes;
        /* Home by home first: a home no bind reaches (most of the passwd
         * database: /nonexistent, /var/spool/...) has no "~/" entry a
         * bind reaches either — each is the home with "/..." after it, and
         * what contains or lies inside such a path contains or lies inside
         * the home — so its entries are not looked at one by one. Homes
         * with a glob character (escaped, their entries' literal part
         * stops earlier) take the long way. */
        _cleanup_free_ bool *near = calloc(homes->n ? homes->n : 1, sizeof *near);
        struct home_look *look = home_looks_new(homes, dc);
        if (!near || !look) {
                home_looks_free(look, homes->n);
                return -ENOMEM;
        }
        /* A home inside a grant (by any of its names: /usr/games with /usr
         * bound) has every entry inside it too: none is tested again. */
        _cleanup_free_ bool *inside = calloc(homes->n ? homes->n : 1, sizeof *inside);
        if (!inside) {
                home_looks_free(look, homes->n);
                return -ENOMEM;
        }
        for (size_t h = 0; h < homes->n; h++) {
                near[h] = long_way() || strpbrk(homes->items[h], "*?[]\\") ||
                          reachable_by_bind(plan, g, homes->items[h]);
                for (size_t m = 0; near[h] && !long_way() && m < plan->n_mounts && !inside[h]; m++)
                        for (size_t k = 0; k < g[m].n && !inside[h]; k++)
                                inside[h] = path_is_under(homes->items[h], g[m].v[k].host);
        }
        int r = 0;
        for (size_t i = 0; r == 0 && i < p->deny.n; i++) {
                const char *pat = p->deny.items[i];
                if (pat[0] != '~') {
                        r = expand_one(plan, g, rd, pat, out, links);
                        continue;
                }
                for (size_t h = 0; r == 0 && h < homes->n; h++) {
                        if (!near[h])
                                continue;
                        /* a plain entry of a plain home: HOME/REL, which is
                         * what escaping the home and putting the entry
                         * after it makes (no allocation for each) */
                        const char *rel = home_relative(&look[h], pat);
                        char path[PATH_MAX];
                        struct stat st;
                        if (rel && !strpbrk(rel, "*?[\\") &&
                            snprintf(path, sizeof path, "%s/%s", homes->items[h], rel) < (int)sizeof path) {
                                if ((inside[h] || reachable_by_bind(plan, g, path)) &&
                                    home_lstat(&look[h], rel, &st) == 0)
                                        r = add_found(rd, out, links, path, &st);  /* what glob(3) gives back */
                                continue;
                        }
                        _cleanup_free_ char *home = glob_escape(homes->items[h]);
                        char *full = home ? brig_strdup_printf("%s%s", home, pat + 1) : NULL;
                        r = full ? expand_one(plan, g, rd, full, out, links) : -ENOMEM;  /* a glob: glob(3) */
                        free(full);
                }
        }
        home_looks_free(look, homes->n);
        return r;
}

static const char *deny_hit_containing(const struct strv *denied, const char *path)
{
        for (size_t i = 0; i < denied->n; i++)
                if (path_is_under(path, denied->items[i]))
                        return denied->items[i];
        return NULL;
}

/* A symlink directly inside a denied directory sends the secret's bytes
 * elsewhere: a run that made ~/.aws (absent when it started) can plant
 * ~/.aws/credentials -> ~/notes, and what `aws configure` writes later
 * lands in ~/notes. What such a link points to is hidden too, where it
 * really lives, as a symlinked denied path is. Checked in the denied
 * directories a grant shows and, since dotfiles often link out of them,
 * in the caller's own home's (deeper links are not followed). */
static int add_link_targets(const struct run_plan *plan, const struct grant_names *g, const struct real_dirs *rd,
                            struct dircache *dc, const brig_policy *p, struct strv *denied)
{
        struct strv dirs = {0};
        int r = 0;
        for (size_t i = 0; r == 0 && i < denied->n; i++) {
                struct stat st;
                const char *hit = denied->items[i];
                if (strv_contains(&rd->hit_dirs, hit) ||
                    (!strv_contains(&rd->hit_others, hit) && lstat(hit, &st) == 0 && S_ISDIR(st.st_mode)))
                        r = strv_push(&dirs, hit);
        }
        struct home_look mine = { .home = plan->home, .fd = -2, .dc = dc };
        for (size_t i = 0; r == 0 && i < p->deny.n; i++) {
                const char *pat = p->deny.items[i];
                struct stat st;
                if (pat[0] != '~' || strpbrk(pat, "*?["))
                        continue;
                _cleanup_free_ char *dir = brig_strdup_printf("%s%s", plan->home, pat + 1);
                const char *rel = home_relative(&mine, pat);
                if (!dir)
                        r = -ENOMEM;
                else if ((rel ? home_lstat(&mine, rel, &st) : lstat(dir, &st)) == 0 && S_ISDIR(st.st_mode) &&
                         !strv_contains(&dirs, dir))
                        r = strv_push(&dirs, dir);
        }
        look_end(&mine);
        for (size_t i = 0; r == 0 && i < dirs.n; i++) {
                DIR *d = opendir(dirs.items[i]);
                struct dirent *e;
                while (r == 0 && d && (e = readdir(d))) {
                        struct stat st;
                        if ((e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) ||
                            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
                                continue;
                        _cleanup_free_ char *link = brig_strdup_printf("%s/%s", dirs.items[i], e->d_name);
                        _cleanup_free_ char *real = link ? realpath(link, NULL) : NULL;
                        if (!link)
                                r = -ENOMEM;
                        else if (real && !deny_hit_containing(denied, real) && reachable_by_bind(plan, g, real))
                                r = strv_push(denied, real);
                }
                if (d)
                        closedir(d);
        }
        strv_free(&dirs);
        return r;
}

/* A mask hides a name, not the file: another hard link to a denied file
 * shows its bytes under a name that is not denied. A run can plant one
 * before the secret exists (`ln ~/notes ~/.netrc`), and the token the
 * user writes into ~/.netrc later (in place: an editor keeps the link, so
 * does `>>`) is then readable as ~/notes. Refuse a denied file with more
 * than one name, and one directly inside a denied directory (where keys
 * and credential files live), when it lies in a writable grant — where a
 * sandbox could have planted the link; a link the host made itself is the
 * host's (docs say so, and that deeper files are not checked). */
static int check_link_count(const char *path, const struct stat *st, brig_error **err)
{
        if (!S_ISREG(st->st_mode) || st->st_nlink <= 1)
                return 0;
        return brig_err(err, EMLINK,
                        "'%s' is hidden as a secret (deny list) but has %ju hard links: its other names would "
                        "show it; remove them (find / -xdev -samefile '%s') or the file",
                        path, (uintmax_t)st->st_nlink, path);
}

static bool in_writable_grant(const struct run_plan *plan, const struct grant_names *g, const char *path)
{
        for (size_t m = 0; m < plan->n_mounts; m++) {
                if (plan->mounts[m].readonly)
                        continue;
                for (size_t k = 0; k < g[m].n; k++)
                        if (path_is_under(path, g[m].v[k].host))
                                return true;
        }
        return false;
}

/* How many of the names of `st` are entries of directory `dir` itself. */
static nlink_t names_in_dir(int dir, const struct stat *st)
{
        int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *e;
        nlink_t n = 0;
        while (d && (e = readdir(d))) {
                struct stat est;
                if (e->d_ino == st->st_ino && fstatat(dirfd(d), e->d_name, &est, AT_SYMLINK_NOFOLLOW) == 0 &&
                    est.st_dev == st->st_dev && est.st_ino == st->st_ino)
                        n++;
        }
        if (d)
                closedir(d);
        else if (fd >= 0)
                close(fd);
        return n;
}

static int check_denied_links(const struct run_plan *plan, const struct grant_names *g, const struct strv *denied,
                              brig_error **err)
{
        for (size_t i = 0; i < denied->n; i++) {
                const char *path = denied->items[i];
                struct stat st;
                if (!in_writable_grant(plan, g, path) || lstat(path, &st) < 0)
                        continue;  /* no link planted there, or gone meanwhile */
                int r = check_link_count(path, &st, err);
                if (r < 0)
                        return r;
                if (!S_ISDIR(st.st_mode))
                        continue;
                DIR *d = opendir(path);
                struct dirent *e;
                while (r == 0 && d && (e = readdir(d))) {
                        struct stat est;
                        if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
                                continue;
                        if (fstatat(dirfd(d), e->d_name, &est, AT_SYMLINK_NOFOLLOW) < 0)
                                continue;
                        /* Every name in this directory, hidden with it, shows
                         * nothing: GnuPG's lock (pubring.kbx.lock, a link to
                         * its .#lk0x... file) while a gpg runs or after one
                         * was killed holding it. */
                        if (S_ISREG(est.st_mode) && est.st_nlink > 1 && names_in_dir(dirfd(d), &est) >= est.st_nlink)
                                continue;
                        _cleanup_free_ char *full = brig_strdup_printf("%s/%s", path, e->d_name);
                        r = full ? check_link_count(full, &est, err) : brig_err(err, ENOMEM, "deny list");
                }
                if (d)
                        closedir(d);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A mask hides a path, not a file: were the directory holding it renamed
 * from inside, the next run would mask whatever took its name and show the
 * secret at the new one. Every ancestor of a mask below the root of a
 * writable grant is therefore made a mountpoint too (mounts.c), and the
 * kernel refuses to rename, remove or replace a mountpoint (EBUSY) — by
 * dentry, so through every other grant of the same tree as well. */
static int plan_pins(struct run_plan *plan, const char *grant, const char *mask)
{
        _cleanup_free_ char *dir = strdup(mask);
        if (!dir)
                return -ENOMEM;
        for (char *slash = strrchr(dir, '/'); slash && slash > dir; slash = strrchr(dir, '/')) {
                *slash = '\0';
                if (!path_is_under(dir, grant) || strcmp(dir, grant) == 0)
                        break;
                bool mountpoint = false;  /* another grant's destination already is one */
                for (size_t i = 0; i < plan->n_mounts && !mountpoint; i++)
                        mountpoint = strcmp(plan->mounts[i].dst, dir) == 0;
                if (!mountpoint && !strv_contains(&plan->pins, dir) && strv_push(&plan->pins, dir) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int by_path_depth(const void *a, const void *b)
{
        const char *x = *(const char *const *)a, *y = *(const char *const *)b;
        int d = path_depth(x) - path_depth(y);
        return d ? d : strcmp(x, y);
}

/* Hide every denied path that lies inside a bind; refuse a bind whose
 * source is itself inside a secret. */
/* A symlink a denied path was named through (note_symlinks), inside a
 * writable grant: made a mountpoint itself, bound onto itself (mounts.c),
 * so it can be neither removed nor replaced, and so are the directories
 * above it up to the grant's root. */
static int plan_link_pins(struct run_plan *plan, const struct grant_names *g, const struct strv *links)
{
        for (size_t m = 0; m < plan->n_mounts; m++) {
                const struct mount_entry *e = &plan->mounts[m];
                if (e->kind != MOUNT_BIND || e->readonly)
                        continue;
                for (size_t l = 0; l < links->n; l++) {
                        bool oom = false;
                        _cleanup_free_ char *inside = inside_grant(plan, g, m, links->items[l], &oom);
                        if (oom)
                                return -ENOMEM;
                        bool mountpoint = false;
                        for (size_t i = 0; inside && i < plan->n_mounts && !mountpoint; i++)
                                mountpoint = strcmp(plan->mounts[i].dst, inside) == 0;
                        if (!inside || mountpoint)
                                continue;
                        if (!strv_contains(&plan->pins, inside) && strv_push(&plan->pins, inside) < 0)
                                return -ENOMEM;
                        if (plan_pins(plan, e->dst, inside) < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

static int plan_masks(struct run_plan *plan, const struct grant_names *g, const struct strv *denied,
                      const struct strv *links, brig_error **err)
{
        for (size_t m = 0; m < plan->n_mounts; m++) {
                const struct mount_entry *e = &plan->mounts[m];
                if (e->kind != MOUNT_BIND)
                        continue;
                const char *hit = grant_in_secret(g, m, denied);
                if (hit)
                        return brig_err(err, EACCES,
                                        "bind '%s' is inside '%s', which is on the secret deny list "
                                        "(remove the entry on purpose with --unsafe-allow-secret)",
                                        e->src, hit);
                for (size_t d = 0; d < denied->n; d++) {
                        bool oom = false;
                        char *inside = inside_grant(plan, g, m, denied->items[d], &oom);
                        if (oom)
                                return brig_err(err, ENOMEM, "mask");
                        if (!inside)
                                continue;
                        /* Pinned even when an earlier grant masks the same
                         * path: a writable grant nested in a read-only one
                         * can move what the read-only one could not. */
                        int r = e->readonly ? 0 : plan_pins(plan, e->dst, inside);
                        if (r == 0 && !strv_contains(&plan->masks, inside)) {
                                r = strv_push_take(&plan->masks, inside);
                                inside = NULL;
                        }
                        free(inside);
                        if (r < 0)
                                return brig_err(err, ENOMEM, "mask");
                }
        }
        /* A grant asked for inside a hidden secret would be made there on
         * the host (its mount point) and then hidden by the mask. */
        for (size_t m = 0; m < plan->n_mounts; m++) {
                const struct mount_entry *e = &plan->mounts[m];
                const char *hit = e->from_user ? deny_hit_containing(&plan->masks, e->dst) : NULL;
                if (hit)
                        return brig_err(err, EACCES,
                                        "%s destination '%s' is inside '%s', which is hidden (secret deny list): "
                                        "choose a destination outside it",
                                        e->kind == MOUNT_TMPFS ? "--tmpfs" : e->readonly ? "--ro-bind" : "--bind",
                                        e->dst, hit);
        }
        if (plan_link_pins(plan, g, links) < 0)
                return brig_err(err, ENOMEM, "mask");
        /* A masked directory is a mountpoint itself, and what lies below
         * it is out of reach: no pin needed there. */
        for (size_t i = plan->pins.n; i-- > 0;)
                if (deny_hit_containing(&plan->masks, plan->pins.items[i]))
                        strv_remove(&plan->pins, plan->pins.items[i]);
        if (plan->pins.n)  /* items is NULL then, and qsort's argument must not be (UBSan) */
                qsort(plan->pins.items, plan->pins.n, sizeof *plan->pins.items, by_path_depth);
        return 0;
}

static int plan_layout(struct run_plan *plan, const brig_policy *p, brig_error **err)
{
        /* A rootfs is the root itself (mounts.c): none of the host's
         * directories, no $HOME, no workspace bind; /tmp is the image's. */
        for (size_t i = 0; !plan->rootfs && system_dirs[i]; i++) {
                struct stat st;
                if (lstat(system_dirs[i], &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        char target[4096];
                        ssize_t n = readlink(system_dirs[i], target, sizeof target - 1);
                        if (n < 0)
                                return brig_err(err, errno, "readlink '%s'", system_dirs[i]);
                        target[n] = '\0';
                        if (strv_push(&plan->symlinks, system_dirs[i]) < 0 ||
                            strv_push(&plan->symlinks, target) < 0)
                                return brig_err(err, ENOMEM, "layout");
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                struct mount_entry m = { .kind = MOUNT_BIND, .src = (char *)system_dirs[i],
                                         .dst = (char *)system_dirs[i], .readonly = true };
                if (push_mount(plan, m) < 0)
                        return brig_err(err, ENOMEM, "layout");
        }
        struct mount_entry tmp = { .kind = MOUNT_TMPFS, .dst = "/tmp", .size = p->tmp_size, .mode = 01777 };
        struct mount_entry home = { .kind = MOUNT_TMPFS, .dst = plan->home, .size = p->home_size,
                                    .mode = 0700, .user_owned = true };
        struct mount_entry ws = { .kind = MOUNT_BIND, .src = plan->workspace, .dst = plan->workspace,
                                  .readonly = p->workspace_readonly };
        /* brig's own: the passwd entry, copied-in files, the agent socket (tools.c) */
        struct mount_entry run = { .kind = MOUNT_TMPFS, .dst = BRIG_RUNTIME_DIR, .size = BRIG_RUNTIME_SIZE,
                                   .mode = 0755 };
        if (plan->rootfs ? push_mount(plan, run) < 0
                         : push_mount(plan, tmp) < 0 || push_mount(plan, home) < 0 || push_mount(plan, ws) < 0 ||
                                   push_mount(plan, run) < 0)
                return brig_err(err, ENOMEM, "layout");
        for (size_t i = 0; i < p->n_mounts; i++)
                if (push_mount(plan, p->mounts[i]) < 0)
                        return brig_err(err, ENOMEM, "layout");
        for (size_t i = 0; i < plan->n_mounts; i++)
                if (!plan->mounts[i].dst || (plan->mounts[i].src == NULL && plan->mounts[i].kind == MOUNT_BIND))
                        return brig_err(err, ENOMEM, "layout");
        qsort(plan->mounts, plan->n_mounts, sizeof *plan->mounts, by_depth);
        return 0;
}

/* What a grant is called on the command line, for the refusal. */
static void grant_name(const struct run_plan *plan, const struct mount_entry *m, char *buf, size_t n)
{
        if (m->from_user)
                snprintf(buf, n, "%s %s", m->readonly ? "--ro-bind" : "--bind", m->src);
        else if (strcmp(m->src, plan->workspace) == 0 && strcmp(m->dst, plan->workspace) == 0)
                snprintf(buf, n, "the workspace %s%s", m->src, plan->policy->workspace ? "" : " (the current directory)");
        else
                snprintf(buf, n, "the system directory %s (always bound read-only)", m->src);
}

/* No grant of any kind may equal, contain or lie inside brig's state root
 * (the one in use, or a default one a later run without XDG_RUNTIME_DIR
 * would use):
 * it holds every sandbox's control socket (a same-uid peer passes its
 * check), the stored policies `brig start` runs again, the warm pools and
 * the compiled syscall filter cache. A read-only grant is refused too: a
 * socket connects through a read-only mount. Compared by identity, so no
 * spelling (symlink, "..", another mount of it) gets through. */
static int plan_guard_state(const struct run_plan *plan, const struct mountinfo *mi, brig_error **err)
{
        struct state_guard g;
        int r = state_guard_init(&g, plan->host_uid, err);
        if (r == 0)
                r = state_guard_mounts(&g, mi, err);
        for (size_t i = 0; r == 0 && i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                if (m->kind != MOUNT_BIND)
                        continue;
                const char *root = NULL, *via = m->src;
                const char *how = state_guard_test(&g, m->src, &root);
                /* A bind takes the mounts below its source along: another
                 * mount of the root's directory (a bind of /run or /tmp
                 * elsewhere) is compared as if granted itself. */
                for (size_t k = 0; !how && k < mi->n; k++)
                        if (strcmp(mi->v[k].mnt, m->src) != 0 && path_is_under(mi->v[k].mnt, m->src))
                                how = state_guard_test(&g, via = mi->v[k].mnt, &root);
                if (!how)
                        continue;
                char name[PATH_MAX + 64];
                grant_name(plan, m, name, sizeof name);
                char below[PATH_MAX + 64] = "";
                if (via != m->src)
                        snprintf(below, sizeof below, " (the mount at '%s' below it)", via);
                bool inside = strcmp(how, "lies inside") == 0;
                bool current = root == g.roots[0].path;
                uid_t owner = geteuid();
                for (size_t k = 0; k < g.n_roots; k++)
                        owner = g.roots[k].path == root ? g.roots[k].uid : owner;
                char whose[160] = "";
                bool other = owner != geteuid();
                if (other)
                        snprintf(whose, sizeof whose, " (uid %u's default: this sandbox runs as uid %u, and "
                                 "that user's brig would trust what it made there)", owner, owner);
                else if (!current)
                        snprintf(whose, sizeof whose, " (brig's when XDG_RUNTIME_DIR is not set)");
                r = state_fail(err, EACCES,
                               "%s: '%s'%s %s brig's state directory '%s'%s, with the control sockets and stored "
                               "policies of %s sandboxes and brig's syscall filter cache, which a sandbox could "
                               "use to take over %s sandboxes; %s",
                               name, m->src, below, how, root, whose, other ? "that user's" : "your",
                               other ? "that user's" : "your other",
                               inside ? "grant a directory outside it"
                               : current ? "grant a directory that does not contain it, or run brig with "
                                           "XDG_RUNTIME_DIR set to a private directory outside every grant"
                                         : "grant a directory that does not contain it");
        }
        state_guard_free(&g);
        return r;
}

/* This process's umask. A process with one thread reads it by setting it
 * and setting it back (signals blocked: no handler of the caller's makes
 * a file in between); with more, it is read (/proc/self/status, which
 * costs the kernel tens of microseconds to write out) rather than set and
 * set back: a file another thread made meanwhile would get the wrong one.
 * 077 when it cannot be read: the most private. */
static mode_t caller_umask(void)
{
        if (__libc_single_threaded && !long_way()) {
                sigset_t all, saved;
                sigfillset(&all);
                if (pthread_sigmask(SIG_SETMASK, &all, &saved) == 0) {
                        mode_t mask = umask(077);
                        umask(mask);
                        pthread_sigmask(SIG_SETMASK, &saved, NULL);
                        return mask & 0777;
                }
        }
        FILE *f = fopen("/proc/self/status", "re");
        char line[128];
        unsigned mask = 077;
        while (f && fgets(line, sizeof line, f) && sscanf(line, "Umask: %o", &mask) != 1)
                ;
        if (f)
                fclose(f);
        return (mode_t)(mask & 0777);
}

/* /process/user on top of brig's choice: those ids inside, each mapped to
 * the host id its map gives (policy.c), or to brig's. The commands' umask:
 * the policy's, else the caller's, kept in the plan (the child sets its
 * own while it builds the sandbox: command_exec). */
static int plan_user_asked(struct run_plan *plan, const brig_policy *p, brig_error **err)
{
        plan->umask = p->umask ? (mode_t)strtol(p->umask, NULL, 8) : caller_umask();
        struct user_ids ids;
        int r = policy_resolve_user(p, plan->host_uid, plan->host_gid, &ids, err);
        if (r < 0 || !ids.set)
                return r;
        plan->sandbox_uid = ids.uid;
        plan->host_uid = ids.host_uid;
        plan->sandbox_gid = ids.gid;
        plan->host_gid = ids.host_gid;
        plan->n_groups = ids.n_groups;
        for (size_t i = 0; i < ids.n_groups; i++) {
                plan->sandbox_groups[i] = ids.groups[i];
                plan->host_groups[i] = ids.host_groups[i];
        }
        return 0;
}

/* Who the command runs as. Rootless: the caller, mapped to itself. As root:
 * the workspace's owner, so files it creates belong to that user; when the
 * workspace is root's, an unprivileged uid with an idmapped workspace. */
static int plan_user(struct run_plan *plan, const brig_policy *p, brig_error **err)
{
        plan->rootful = geteuid() == 0;
        if (!plan->rootful) {
                plan->host_uid = plan->sandbox_uid = geteuid();
                plan->host_gid = plan->sandbox_gid = getegid();
                return plan_user_asked(plan, p, err);
        }
        struct stat st;
        if (stat(plan->workspace, &st) < 0)
                return brig_err(err, errno, "workspace '%s'", plan->workspace);
        plan->map_root_for_setup = true;
        if (st.st_uid != 0) {
                plan->host_uid = plan->sandbox_uid = st.st_uid;
                plan->host_gid = plan->sandbox_gid = st.st_gid != 0 ? st.st_gid : st.st_uid;
        } else {
                plan->host_uid = plan->sandbox_uid = BRIG_NOBODY_UID;
                plan->host_gid = plan->sandbox_gid = BRIG_NOBODY_UID;
                /* a root-owned rootfs stays root's: the sandbox user reads it */
                plan->idmap_workspace = !plan->rootfs;
        }
        return plan_user_asked(plan, p, err);
}

static int envp_push(struct strv *env, const char *name, const char *value)
{
        for (size_t i = 0; i < env->n; i++) {
                size_t n = strlen(name);
                if (strncmp(env->items[i], name, n) == 0 && env->items[i][n] == '=') {
                        char *s = brig_strdup_printf("%s=%s", name, value);
                        if (!s)
                                return -ENOMEM;
                        free(env->items[i]);
                        env->items[i] = s;
                        return 0;
                }
        }
        return strv_push_take(env, brig_strdup_printf("%s=%s", name, value));
}

/* USER: the sandbox user's name in /etc/passwd (what the sandbox sees),
 * or "sandbox". */
static int plan_env(struct run_plan *plan, const brig_policy *p, const char *user, brig_error **err)
{
        struct strv env = {0};
        const char *shell = getenv("SHELL");
        int r = envp_push(&env, "PATH", BRIG_DEFAULT_PATH);
        r = r ?: envp_push(&env, "HOME", plan->home);
        r = r ?: envp_push(&env, "USER", user);
        r = r ?: envp_push(&env, "LOGNAME", user);
        r = r ?: envp_push(&env, "SHELL", shell && access(shell, X_OK) == 0 ? shell : "/bin/sh");
        for (size_t i = 0; r == 0 && caller_passthrough_env[i]; i++) {
                const char *v = getenv(caller_passthrough_env[i]);
                if (v)
                        r = envp_push(&env, caller_passthrough_env[i], v);
        }
        extern char **environ;
        for (char **e = environ; r == 0 && e && *e; e++)
                if (strncmp(*e, "LC_", 3) == 0 && strchr(*e, '='))
                        r = strv_push(&env, *e);
        /* Network off: retrying cannot help, and package managers take a
         * failed lookup for a passing one (npm retried for 70 s, pip 8 s).
         * Before --keep-env and --env, which win. */
        static const char *const no_retries[] = { "npm_config_fetch_retries", "PIP_RETRIES", "CARGO_NET_RETRY" };
        for (size_t i = 0; r == 0 && plan->net_mode == BRIG_NET_NONE && i < ARRAY_SIZE(no_retries); i++)
                r = envp_push(&env, no_retries[i], "0");
        for (size_t i = 0; r == 0 && i < p->keep_env.n; i++) {
                const char *v = getenv(p->keep_env.items[i]);
                if (v)
                        r = envp_push(&env, p->keep_env.items[i], v);
        }
        if (plan->net_mode == BRIG_NET_PROXY || plan->net_mode == BRIG_NET_FILTERED) {
                /* Filtered mode keeps them: clients that honour them get the
                 * proxy's answers (403 with a reason) instead of resets.
                 * Set before the user's --env, which may override them. The
                 * names in both cases: curl reads lowercase http_proxy only. */
                char http[64], socks[64];
                snprintf(http, sizeof http, "http://127.0.0.1:%d", BRIG_HTTP_PROXY_PORT);
                snprintf(socks, sizeof socks, "socks5h://127.0.0.1:%d", BRIG_SOCKS_PROXY_PORT);
                static const char *const http_vars[] = { "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy" };
                for (size_t i = 0; r == 0 && i < ARRAY_SIZE(http_vars); i++)
                        r = envp_push(&env, http_vars[i], http);
                r = r ?: envp_push(&env, "ALL_PROXY", socks);
                r = r ?: envp_push(&env, "all_proxy", socks);
                r = r ?: envp_push(&env, "NO_PROXY", "localhost,127.0.0.1,::1");
                r = r ?: envp_push(&env, "no_proxy", "localhost,127.0.0.1,::1");
        }
        if (r == 0 && plan->tools && plan->tools->agent_upstream)
                r = envp_push(&env, "SSH_AUTH_SOCK", BRIG_AGENT_SOCKET);
        /* Secrets: placeholders only; and the sandbox's CA trusted by what
         * reads these rather than the system bundle (bound over too). */
        for (size_t i = 0; r == 0 && i < intercept_secret_count(plan->intercept); i++) {
                const struct secret *s = intercept_secret(plan->intercept, i);
                r = envp_push(&env, s->spec->name, s->placeholder);
        }
        static const char *const ca_vars[] = { "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                               "GIT_SSL_CAINFO", "PIP_CERT" };
        for (size_t i = 0; r == 0 && plan->intercept && i < ARRAY_SIZE(ca_vars); i++)
                r = envp_push(&env, ca_vars[i], BRIG_CA_BUNDLE);
        if (r == 0 && plan->intercept)
                r = envp_push(&env, "NODE_EXTRA_CA_CERTS", BRIG_CA_CERT);
        for (size_t i = 0; r == 0 && i < p->n_env; i++)
                r = envp_push(&env, p->env[i].name, p->env[i].value);
        if (r < 0) {
                strv_free(&env);
                return brig_err(err, -r, "environment");
        }
        if (!env.items && strv_push(&env, "PATH=" BRIG_DEFAULT_PATH) < 0)
                return brig_err(err, ENOMEM, "environment");
        plan->envp = env.items;
        return 0;
}

char *plan_sources_identity(const brig_policy *p, const char *workspace)
{
        /* what stands at the paths now: a pool member holds the directories
         * that stood there when it was made, a cold run binds what stands
         * there at its start (a harness that moved the last task's checkout
         * away and made a fresh one at the same path) */
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        char ws[CALLER_WORKSPACE_IDENTITY_LEN];
        caller_workspace_identity(workspace, ws, sizeof ws);
        fputs(ws, f);
        struct stat st;
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct mount_entry *m = &p->mounts[i];
                if (m->kind != MOUNT_BIND || !m->src)
                        continue;
                if (stat(m->src, &st) == 0)
                        fprintf(f, "bind=%llu:%llu\n", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
                else
                        fprintf(f, "bind=-\n");
        }
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

unsigned plan_fixed_rlimits(const brig_policy *p)
{
        const struct limits *l = &p->limits;
        return (l->nofile ? 1u << RLIMIT_NOFILE : 0) | (l->fsize ? 1u << RLIMIT_FSIZE : 0) |
               (l->stack ? 1u << RLIMIT_STACK : 0) | (l->cpu_time_s ? 1u << RLIMIT_CPU : 0) |
               (l->nproc ? 1u << RLIMIT_NPROC : 0);
}

char *plan_caller_context(const brig_policy *p)
{
        unsigned fixed = plan_fixed_rlimits(p);
        /* --keep-env's variables, then the secrets' env: sources */
        const struct intercept_policy *ip = egress_policy_intercept_of(p->egress);
        /* ... and behind the gVisor wall what picks its runsc and how it
         * runs (core/wall.c, wall_gvisor.c): another runsc is another run */
        static const char *const gvisor_vars[] = { "BRIG_RUNSC", "PATH", "BRIG_GVISOR_DEBUG" };
        bool gvisor = p->wall == BRIG_WALL_GVISOR;
        size_t n = p->keep_env.n + (ip ? ip->n_secrets : 0) + ARRAY_SIZE(gvisor_vars), k = 0;
        const char **vars = calloc(n + 1, sizeof *vars);
        if (!vars)
                return NULL;
        for (size_t i = 0; gvisor && i < ARRAY_SIZE(gvisor_vars); i++)
                vars[k++] = gvisor_vars[i];
        for (size_t i = 0; i < p->keep_env.n; i++)
                vars[k++] = p->keep_env.items[i];
        for (size_t i = 0; ip && i < ip->n_secrets; i++)
                if (strncmp(ip->secrets[i].source, "env:", 4) == 0)
                        vars[k++] = ip->secrets[i].source + 4;
        struct caller_context_spec spec = { .umask = p->umask ? -1 : (int)caller_umask(), .fixed_rlimits = fixed,
                                            .vars = vars, .n_vars = k };
        char *text = caller_context_text(&spec);
        free(vars);
        return text;
}

static int plan_workspace(struct run_plan *plan, const brig_policy *p, brig_error **err)
{
        char *ws = NULL;
        plan->rootfs = p->rootfs != NULL;
        plan->rootfs_readonly = p->rootfs && p->workspace_readonly;
        if (p->rootfs) {
                ws = strdup(p->rootfs);
        } else if (p->workspace) {
                ws = strdup(p->workspace);
        } else {
                ws = getcwd(NULL, 0);
                if (!ws)
                        return brig_err(err, errno, "current directory (the default workspace)");
        }
        if (!ws)
                return brig_err(err, ENOMEM, "workspace");
        plan->workspace = path_normalize(ws);
        free(ws);
        if (!plan->workspace)
                return brig_err(err, errno, "workspace");
        struct stat st;
        if (stat(plan->workspace, &st) < 0)
                return brig_err(err, errno, "workspace '%s'", plan->workspace);
        if (!S_ISDIR(st.st_mode))
                return brig_err(err, ENOTDIR, "workspace '%s'", plan->workspace);
        if (strcmp(plan->workspace, "/") == 0)
                return brig_err(err, EINVAL, "workspace '/': the whole host cannot be the workspace");
        if (plan->rootfs && !plan->cwd)
                plan->cwd = "/";
        return 0;
}

/* Secrets and http rules: the values read, the placeholders and the CA
 * made, before clone (the vault is not inherited: net/secrets.c). */
static int plan_intercept(struct run_plan *plan, const brig_policy *p, brig_error **err)
{
        const struct intercept_policy *ip = egress_policy_intercept_of(p->egress);
        if (!ip || (!ip->n_secrets && !ip->n_rules))
                return 0;
        if (plan->net_mode != BRIG_NET_PROXY && plan->net_mode != BRIG_NET_FILTERED)
                return brig_err(err, EINVAL, "%s: the network is %s, and only brig's proxy can %s; allow the hosts "
                                "with --allow-host (or choose --net proxy or --net filtered)",
                                ip->n_secrets ? "--secret" : "--http-rule",
                                plan->net_mode == BRIG_NET_HOST ? "the host's (--net host)" : "off",
                                ip->n_secrets ? "swap a placeholder for its value" : "enforce request rules");
        plan->intercept = intercept_new(ip, p->egress, err);
        return plan->intercept ? 0 : -EINVAL;
}

int plan_build(struct run_plan *plan, const brig_policy *p, char *const argv[], brig_error **err)
{
        plan->policy = p;
        plan->argv = argv;
        /* what the child applies of the policy as it is, beside what is
         * resolved below: the child reads only the plan */
        plan->hostname = p->hostname ? p->hostname : BRIG_DEFAULT_HOSTNAME;
        plan->cwd = p->cwd;
        plan->pass_fds = p->pass_fds;
        plan->n_pass_fds = p->n_pass_fds;
        plan->shm_size = p->shm_size;
        plan->mount_sys = p->mount_sys;
        plan->wall = p->wall;
        if (p->clock_start) {
                uint64_t ms;
                if (brig_parse_duration(p->clock_start, &ms, err) < 0)
                        return brig_err_prefix(err, "--clock-start");
                if (p->wall == BRIG_WALL_GVISOR)
                        return brig_err(err, EINVAL, "--clock-start: not behind --wall gvisor (gVisor keeps the "
                                                     "clocks of its own kernel); leave one of them out");
                plan->clock_pinned = true;
                plan->clock_start_ns = ms * 1000000;
        }
        plan->intercept_policy = egress_policy_intercept_of(p->egress);
        if (!argv || !argv[0] || !*argv[0])
                return brig_err(err, EINVAL, "no command given");
        int r = plan_workspace(plan, p, err);
        if (r < 0)
                return r;
        r = caller_home(&plan->home, err);
        if (r < 0)
                return r;
        /* Any allow rule turns egress on, filtered where the host can,
         * unless a mode was chosen. */
        plan->net_mode = p->net_mode_set ? p->net_mode
                         : egress_policy_has_allows(p->egress) ? BRIG_NET_FILTERED : BRIG_NET_NONE;
        plan->net_filtered_required = p->net_mode_set && p->net_mode == BRIG_NET_FILTERED;
        plan->limits = p->limits;
        rlimits_clamp(&plan->limits);
        r = plan_user(plan, p, err);
        if (r < 0)
                return r;
        r = wall_plan(plan, err);
        if (r < 0)
                return r;
        r = plan_layout(plan, p, err);
        if (r == 0)
                r = wall_gvisor_check_layout(plan, err);
        if (r < 0)
                return r;
        _cleanup_(passwd_db_free) struct passwd_db users = { 0 };
        r = passwd_db_read(&users, plan, err);
        if (r < 0)
                return r;
        /* The mount table, read once: the state guard compares the mounts
         * below each grant, the deny list the other names of its sources. */
        struct mountinfo mi = { 0 };
        r = mountinfo_load(&mi);
        if (r < 0)
                return brig_err(err, -r, "read /proc/self/mountinfo");
        r = plan_guard_state(plan, &mi, err);
        if (r < 0) {
                mountinfo_clear(&mi);
                return r;
        }
        struct strv denied = {0}, links = {0};
        struct grant_names *g = NULL;
        r = grant_names_init(plan, &mi, &g);
        mountinfo_clear(&mi);
        _cleanup_(real_dirs_free) struct real_dirs real = { 0 };
        if (r == 0)
                r = plan_homes(plan, &users, &real);
        /* What earlier runs found missing from the homes (dircache.c):
         * none on the long way, nor when brig has no private state root. */
        struct dircache dc = { .margin_ns = dircache_margin() };
        brig_error *no_cache = NULL;
        int cache = r == 0 && !long_way() ? state_cache_dir_open(&no_cache) : -1;
        if (no_cache && p->notice) {
                /* never silently slower: the reason names its fix */
                _cleanup_free_ char *line = brig_strdup_printf("no cache of brig's work for this run (a slower "
                                                               "start): %s", no_cache->msg);
                p->notice(line ? line : "no cache of brig's work for this run", p->notice_data);
        }
        brig_error_free(&no_cache);
        dircache_load(&dc, cache);
        if (r == 0)
                r = expand_deny(plan, g, &real, cache >= 0 ? &dc : NULL, p, &denied, &links);
        if (r == 0)
                r = add_link_targets(plan, g, &real, cache >= 0 ? &dc : NULL, p, &denied);
        if (r == 0)
                dircache_store(&dc, cache);
        dircache_free(&dc);
        /* the filter cache is in the same directory (seccomp_prepare) */
        closep(&plan->cache_dir_fd);
        plan->cache_dir_fd = cache;
        if (r < 0) {
                grant_names_free(g, plan->n_mounts);
                strv_free(&denied);
                strv_free(&links);
                return brig_err(err, -r, "expanding the secret deny list");
        }
        r = check_denied_links(plan, g, &denied, err);
        if (r == 0)
                r = plan_masks(plan, g, &denied, &links, err);
        grant_names_free(g, plan->n_mounts);
        strv_free(&denied);
        strv_free(&links);
        if (r < 0)
                return r;
        r = plan_intercept(plan, p, err);
        if (r < 0)
                return r;
        r = tools_plan_build(plan, users.text, users.len, err);
        if (r < 0)
                return r;
        r = plan_env(plan, p, users.name ? users.name : "sandbox", err);
        if (r == 0)
                plan_test_dump(plan);
        return r;
}

void plan_free(struct run_plan *plan)
{
        free(plan->workspace);
        free(plan->home);
        free(plan->runsc);
        for (size_t i = 0; i < plan->n_mounts; i++) {
                free(plan->mounts[i].src);
                free(plan->mounts[i].dst);
        }
        free(plan->mounts);
        strv_free(&plan->homes);
        strv_free(&plan->masks);
        strv_free(&plan->pins);
        strv_free(&plan->symlinks);
        if (plan->envp) {
                for (char **e = plan->envp; *e; e++)
                        free(*e);
                free(plan->envp);
        }
        closep(&plan->idmapped_workspace_fd);
        closep(&plan->cache_dir_fd);
        closep(&plan->report_fd);
        closep(&plan->audit_fd);
        free(plan->seccomp_prog);
        free(plan->seccomp_replies);
        closep(&plan->pty_slave_fd);
        tools_plan_free(plan->tools);
        intercept_free(plan->intercept);
        memset(plan, 0, sizeof *plan);
}
