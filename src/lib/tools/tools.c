/* tools.c — what the tools agents use are handed at start (docs/tools.md).
 *
 * The sandbox user cannot read what root (or another user) owns, and a
 * tool asks the passwd database, not $HOME, where its home is. So:
 *
 *   --copy-in SRC:DST   the supervisor reads SRC on the host, with brig's
 *                       privileges, before any sandboxed code runs: a
 *                       regular file, no symlink anywhere in its path, at
 *                       most COPY_IN_MAX_BYTES. Inside, the bytes land in
 *                       brig's own tmpfs (/run/brig/copy-in, mode 0400,
 *                       owned by the sandbox user, read-only once set up),
 *                       and DST, which must lie in one of the sandbox's
 *                       tmpfs mounts ($HOME, /tmp, --tmpfs), becomes a
 *                       symlink to it: a snapshot saves the link, never
 *                       the bytes; nothing is written through a bind.
 *   --git-identity,     generated files in $HOME: user.name and user.email
 *   --carry-config      from the host's git config; the keys of ~/.npmrc
 *                       and pip.conf on an allow list (registries, TLS,
 *                       timeouts), never a token or a password (the texts
 *                       are made in toolconf.c).
 *   passwd              /etc/passwd inside says the sandbox user's home is
 *                       the sandbox's $HOME (OpenSSH reads ~ from there).
 *
 * Everything written inside is written below the root of a tmpfs brig made,
 * with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV: no path a
 * policy or a sandbox can spell leads the writes anywhere else. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "core/model.h"
#include "core/sync.h"
#include "controls/mountinfo.h"
#include "tools/tools.h"
#include "net/intercept.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

/* ---- the policy ----------------------------------------------------------- */

struct tools_policy *tools_policy_get(brig_policy *p)
{
        if (!p->tools)
                p->tools = calloc(1, sizeof *p->tools);
        return p->tools;
}

void tools_policy_free(struct tools_policy *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_copy_ins; i++) {
                free(t->copy_ins[i].src);
                free(t->copy_ins[i].dst);
        }
        free(t->copy_ins);
        free(t);
}

/* An absolute path or "~/PATH", normalized; "~" alone is refused (the
 * home itself is a directory, not a file). */
static int tilde_path(const char *what, const char *path, char **out, brig_error **err)
{
        bool tilde = path && path[0] == '~' && path[1] == '/';
        if (!path || (path[0] != '/' && !tilde))
                return brig_err(err, EINVAL, "%s '%s': expected an absolute path or ~/PATH", what, path ? path : "");
        _cleanup_free_ char *n = path_normalize(tilde ? path + 1 : path);
        if (!n)
                return brig_err(err, errno == ENOMEM ? ENOMEM : EINVAL, "%s '%s': '.' and '..' are not allowed",
                                what, path);
        if (strcmp(n, "/") == 0)
                return brig_err(err, EINVAL, "%s '%s': names a directory, not a file", what, path);
        *out = tilde ? brig_strdup_printf("~%s", n) : TAKE_PTR(n);
        return *out ? 0 : brig_err(err, ENOMEM, "%s", what);
}

int brig_policy_add_copy_in(brig_policy *p, const char *src, const char *dst, unsigned flags, brig_error **err)
{
        _cleanup_free_ char *s = NULL, *d = NULL;
        int r = tilde_path("copy-in source", src, &s, err);
        if (r < 0)
                return r;
        r = tilde_path("copy-in destination", dst, &d, err);
        if (r < 0)
                return r;
        if (d[0] == '/' && (path_is_under(d, BRIG_RUNTIME_DIR) || path_is_under(d, "/proc") ||
                            path_is_under(d, "/dev")))
                return brig_err(err, EINVAL, "copy-in destination '%s': %s is brig's own; choose a path in $HOME "
                                "(~/...) or /tmp", dst, path_is_under(d, BRIG_RUNTIME_DIR) ? BRIG_RUNTIME_DIR
                                : path_is_under(d, "/proc") ? "/proc" : "/dev");
        struct tools_policy *t = tools_policy_get(p);
        if (!t)
                return brig_err(err, ENOMEM, "copy-in");
        for (size_t i = 0; i < t->n_copy_ins; i++)
                if (strcmp(t->copy_ins[i].dst, d) == 0) {
                        if (strcmp(t->copy_ins[i].src, s) != 0)
                                return brig_err(err, EEXIST, "copy-in destination '%s' is given twice ('%s' and '%s')",
                                                d, t->copy_ins[i].src, s);
                        t->copy_ins[i].secret |= flags & BRIG_COPY_IN_SECRET;
                        return 0;  /* the same file again (a policy file loaded twice) */
                }
        if (t->n_copy_ins >= COPY_IN_MAX_FILES)
                return brig_err(err, E2BIG, "more than %d files copied in", COPY_IN_MAX_FILES);
        struct copy_in *n = realloc(t->copy_ins, (t->n_copy_ins + 1) * sizeof *n);
        if (!n)
                return brig_err(err, ENOMEM, "copy-in");
        t->copy_ins = n;
        t->copy_ins[t->n_copy_ins++] = (struct copy_in){ .src = TAKE_PTR(s), .dst = TAKE_PTR(d),
                                                         .secret = flags & BRIG_COPY_IN_SECRET };
        return 0;
}

int brig_policy_set_ssh_agent(brig_policy *p, bool on, brig_error **err)
{
        struct tools_policy *t = tools_policy_get(p);
        if (!t)
                return brig_err(err, ENOMEM, "ssh agent");
        t->ssh_agent = on;
        return 0;
}

int brig_policy_set_git_identity(brig_policy *p, bool on, brig_error **err)
{
        struct tools_policy *t = tools_policy_get(p);
        if (!t)
                return brig_err(err, ENOMEM, "git identity");
        t->git_identity = on;
        return 0;
}

int brig_policy_carry_config(brig_policy *p, const char *tool, brig_error **err)
{
        unsigned bit = !tool ? 0 : strcmp(tool, "npm") == 0 ? CARRY_NPM : strcmp(tool, "pip") == 0 ? CARRY_PIP : 0;
        if (!bit)
                return brig_err(err, EINVAL, "carry-config '%s': expected npm or pip", tool ? tool : "");
        struct tools_policy *t = tools_policy_get(p);
        if (!t)
                return brig_err(err, ENOMEM, "carry-config");
        t->carry |= bit;
        return 0;
}

/* ---- the host side, before clone -------------------------------------------- */

/* Read a host file brig hands in: a regular file (never a FIFO, device or
 * socket: O_NONBLOCK so opening one cannot hang), at most CAP bytes. With
 * no_symlinks, no component of PATH may be a symlink (a copy-in's source
 * named through a link the sandbox could have planted in a grant). */
int tools_read_host_file(const char *what, const char *path, bool no_symlinks, size_t cap, char **out,
                         size_t *out_len, brig_error **err)
{
        struct open_how how = {
                .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                .resolve = no_symlinks ? RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS : 0,
        };
        if (!no_symlinks)
                how.flags &= ~(uint64_t)O_NOFOLLOW;
        _cleanup_close_ int fd = sys_openat2(AT_FDCWD, path, &how);
        if (fd < 0 && errno == ENOSYS) {
                /* no openat2 (valgrind): the same, one component at a time */
                int flags = (int)(how.flags & ~(uint64_t)O_NOFOLLOW);
                fd = no_symlinks ? output_open_walk(path, flags, 0) : open(path, flags);
                if (no_symlinks && fd < 0) {
                        errno = -fd;
                        fd = -1;
                }
        }
        if (fd < 0 && errno == ELOOP)
                return brig_err(err, ELOOP, "%s '%s' is or goes through a symlink; give the resolved path", what, path);
        if (fd < 0 && errno == ENXIO)
                return brig_err(err, ENXIO, "%s '%s' is not a regular file (a FIFO or a socket)", what, path);
        if (fd < 0)
                return brig_err(err, errno, "%s '%s'", what, path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return brig_err(err, errno, "%s '%s'", what, path);
        if (!S_ISREG(st.st_mode))
                return brig_err(err, EINVAL, "%s '%s' is not a regular file (%s)", what, path,
                                S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO"
                                : S_ISSOCK(st.st_mode) ? "a socket" : "a device");
        if ((uint64_t)st.st_size > cap)
                return brig_err(err, EFBIG, "%s '%s' is larger than %zu KiB", what, path, cap >> 10);
        /* Another name of the file may be one a sandbox made in a grant
         * (where fs.protected_hardlinks is off, even to a file it cannot
         * read): what is copied in has one name, the one given. */
        if (no_symlinks && st.st_nlink > 1)
                return brig_err(err, EMLINK, "%s '%s' has %ju hard links; copy in a file with one name (cp it first)",
                                what, path, (uintmax_t)st.st_nlink);
        /* Room for the size it has and a page more, grown if it grows
         * while we read (a buffer of the cap cost a mapping of megabytes
         * for a file of one page); a smaller one is wiped before it is
         * let go, as a secret's bytes are on failure. */
        size_t size = (size_t)st.st_size + 4096 < cap + 1 ? (size_t)st.st_size + 4096 : cap + 1;
        char *data = malloc(size);
        size_t n = 0;
        ssize_t got = 0;
        if (!data)
                return brig_err(err, ENOMEM, "%s", what);
        /* The size may change while we read: read to the end, up to the
         * cap (n < size after each read or growth: room for the NUL). */
        while (n <= cap && (got = read(fd, data + n, size - n)) > 0) {
                n += (size_t)got;
                if (n < size || size == cap + 1)
                        continue;
                size_t bigger = size < (cap + 1) / 2 ? 2 * size : cap + 1;
                char *grown = malloc(bigger);
                if (!grown) {
                        explicit_bzero(data, n);
                        free(data);
                        return brig_err(err, ENOMEM, "%s", what);
                }
                memcpy(grown, data, n);
                explicit_bzero(data, n);
                free(data);
                data = grown;
                size = bigger;
        }
        if (got < 0 || n > cap) {
                int e = got < 0 ? errno : EFBIG;
                explicit_bzero(data, n);
                free(data);
                return e == EFBIG ? brig_err(err, EFBIG, "%s '%s' is larger than %zu KiB", what, path, cap >> 10)
                                  : brig_err(err, e, "read %s '%s'", what, path);
        }
        data[n] = '\0';
        *out = data;
        *out_len = n;
        return 0;
}

/* "~/x" against a home directory; NULL when out of memory. */
static char *expand_tilde(const char *path, const char *home)
{
        if (path[0] != '~')
                return strdup(path);
        return brig_strdup_printf("%s%s", strcmp(home, "/") == 0 ? "" : home, path + 1);
}

/* Does the deny entry PATTERN ("~/..." for HOMES, or absolute; a glob in
 * its last component) cover PATH or a directory above it? */
static bool pattern_covers(const char *pattern, const char *path)
{
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return true;  /* fail closed */
        for (;;) {
                if (fnmatch(pattern, p, FNM_PATHNAME) == 0)
                        return true;
                char *slash = strrchr(p, '/');
                if (!slash || slash == p)
                        return false;
                *slash = '\0';
        }
}

static bool under_pattern(const char *pattern, const char *path, const struct strv *homes)
{
        if (pattern[0] != '~')
                return pattern_covers(pattern, path);
        for (size_t h = 0; h < homes->n; h++) {
                const char *below = path_below(path, homes->items[h]);
                if (!below || !*below)
                        continue;
                _cleanup_free_ char *rel = brig_strdup_printf("/%s", below);
                if (!rel || pattern_covers(pattern + 1, rel))
                        return true;
        }
        return false;
}

/* The deny entry that covers host PATH, or NULL: "~/" entries in the
 * caller's home and every home in /etc/passwd, under their real names too
 * (plan->homes, plan.c). */
static const char *secret_covering(const struct run_plan *plan, const char *path)
{
        const struct strv *deny = &plan->policy->deny;
        for (size_t i = 0; i < deny->n; i++)
                if (under_pattern(deny->items[i], path, &plan->homes))
                        return deny->items[i];
        return NULL;
}

/* The deny entry that covers host file PATH under any of its names — PATH
 * itself, or a name the mount table gives the whole of it (a bind mount
 * of ~/.ssh or of the key itself elsewhere, a filesystem mounted twice:
 * mountinfo.c, as the grants' deny list does) — or NULL; *oom when the
 * names could not be listed (the caller fails closed). */
static const char *secret_by_any_name(const struct run_plan *plan, const struct mountinfo *mi, const char *path,
                                      char **name, bool *oom)
{
        const char *hit = secret_covering(plan, path);
        struct path_alias *alias = NULL;
        size_t n = 0;
        if (!hit && mountinfo_aliases(mi, path, &alias, &n) < 0)
                *oom = true;
        for (size_t i = 0; !hit && i < n; i++)
                if (!*alias[i].rel && (hit = secret_covering(plan, alias[i].host)))
                        *name = TAKE_PTR(alias[i].host);
        path_aliases_free(alias, n);
        return hit;
}

/* The mount of the layout a path inside lies on: the deepest whose
 * destination contains it (the later of equals: it is mounted on top). */
static const struct mount_entry *mount_holding(const struct run_plan *plan, const char *path)
{
        const struct mount_entry *best = NULL;
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                if (path_is_under(path, m->dst) && (!best || path_depth(m->dst) >= path_depth(best->dst)))
                        best = m;
        }
        return best;
}

/* PATH is to be made inside by brig: it must lie in a tmpfs of the
 * sandbox's (never in a bind, where making it would write on the host). */
static int check_in_tmpfs(const struct run_plan *plan, const char *what, const char *path, brig_error **err)
{
        const struct mount_entry *m = mount_holding(plan, path);
        if (!m || m->kind == MOUNT_TMPFS)
                return m && strcmp(m->dst, path) == 0
                       ? brig_err(err, EINVAL, "%s '%s' is a mount point; name a file below it", what, path)
                       : m ? 0 : brig_err(err, EINVAL, "%s '%s' is not in one of the sandbox's tmpfs mounts "
                                          "($HOME, /tmp or a --tmpfs)", what, path);
        return brig_err(err, EINVAL,
                        "%s '%s' lies in the %s of '%s' at '%s': brig makes it only in the sandbox's own tmpfs "
                        "($HOME, /tmp or a --tmpfs), never on the host through a bind; choose a path there",
                        what, path, m->from_user ? (m->readonly ? "--ro-bind" : "--bind") : "bind", m->src, m->dst);
}

static int add_file(struct tools_plan *t, char *path, char *data, size_t len, mode_t mode, bool copied,
                    const char *origin, brig_error **err)
{
        for (size_t i = 0; i < t->n_files; i++)
                if (strcmp(t->files[i].path, path) == 0) {
                        brig_err(err, EEXIST, "%s: '%s' is also made by %s", origin, path, t->files[i].origin);
                        free(path);
                        free(data);
                        return -EEXIST;
                }
        struct inside_file *n = realloc(t->files, (t->n_files + 1) * sizeof *n);
        if (!n) {
                free(path);
                free(data);
                return brig_err(err, ENOMEM, "%s", origin);
        }
        t->files = n;
        struct inside_file *f = &t->files[t->n_files++];
        *f = (struct inside_file){ .path = path, .data = data, .len = len, .mode = mode, .copied = copied };
        snprintf(f->origin, sizeof f->origin, "%s", origin);
        return 0;
}

/* One --copy-in: SRC read now, its bytes for DST. A source on the deny
 * list (by any of its names) needs --copy-in-secret. */
static int plan_copy_in(struct run_plan *plan, const struct mountinfo *mi, const struct copy_in *c,
                        brig_error **err)
{
        const char *flag = c->secret ? "--copy-in-secret" : "--copy-in";
        _cleanup_free_ char *src = expand_tilde(c->src, plan->home);
        char *dst = expand_tilde(c->dst, plan->home);
        if (!src || !dst) {
                free(dst);
                return brig_err(err, ENOMEM, "%s", flag);
        }
        int r = check_in_tmpfs(plan, "destination", dst, err);
        bool oom = false;
        _cleanup_free_ char *name = NULL;
        const char *secret = r == 0 && !c->secret ? secret_by_any_name(plan, mi, src, &name, &oom) : NULL;
        if (oom)
                r = brig_err(err, ENOMEM, "%s", flag);
        else if (secret)
                r = brig_err(err, EACCES,
                             "source '%s'%s%s%s is on the secret deny list ('%s'): copy it in on purpose with "
                             "--copy-in-secret %s:%s (in a policy file: \"secret\": true)",
                             src, name ? " (also '" : "", name ? name : "", name ? "' in the mount table)" : "",
                             secret, c->src, c->dst);
        char *data = NULL;
        size_t len = 0;
        if (r == 0)
                r = tools_read_host_file("source", src, true, COPY_IN_MAX_BYTES, &data, &len, err);
        if (r == 0)
                r = add_file(plan->tools, TAKE_PTR(dst), data, len, 0400, true, flag, err);
        free(dst);
        return r < 0 ? brig_err_prefix(err, "%s %s:%s", flag, c->src, c->dst) : 0;
}

static int plan_copy_ins(struct run_plan *plan, const struct tools_policy *tp, brig_error **err)
{
        if (!tp->n_copy_ins)
                return 0;
        /* The mount table, read once: the sources' other names. */
        struct mountinfo mi = { 0 };
        int r = mountinfo_load(&mi);
        if (r < 0)
                return brig_err(err, -r, "--copy-in: read /proc/self/mountinfo");
        for (size_t i = 0; r == 0 && i < tp->n_copy_ins; i++)
                r = plan_copy_in(plan, &mi, &tp->copy_ins[i], err);
        mountinfo_clear(&mi);
        return r;
}

/* `git config --global --includes --get KEY` on the host, as the caller,
 * from "/" (no repository's config: a workspace's .git/config is the
 * sandbox's to write). */
static int git_config_get(const char *key, char **out, brig_error **err)
{
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return brig_err(err, errno, "pipe");
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addchdir_np(&fa, "/");
        char *argv[] = { "git", "config", "--global", "--includes", "--get", (char *)key, NULL };
        extern char **environ;
        pid_t pid;
        int r = posix_spawnp(&pid, "git", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(pipefd[1]);
        if (r != 0) {
                close(pipefd[0]);
                return brig_err(err, r, "run git on the host (is git installed?)");
        }
        char value[1024];
        size_t n = 0;
        bool longer = false;
        for (;;) {
                char chunk[4096];
                ssize_t got = read(pipefd[0], chunk, sizeof chunk);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got <= 0)
                        break;
                /* to the end, or git could wait on a full pipe */
                size_t take = (size_t)got < sizeof value - 1 - n ? (size_t)got : sizeof value - 1 - n;
                memcpy(value + n, chunk, take);
                n += take;
                longer = longer || take < (size_t)got;
        }
        close(pipefd[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        value[n] = '\0';
        while (n && value[n - 1] == '\n')
                value[--n] = '\0';
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n == 0)
                return brig_err(err, ENOENT, "the host's git config has no %s (git config --global %s ...)", key, key);
        if (longer)
                return brig_err(err, E2BIG, "the host's %s is longer than %zu bytes", key, sizeof value - 2);
        *out = strdup(value);
        return *out ? 0 : brig_err(err, ENOMEM, "git");
}

static int plan_git_identity(struct run_plan *plan, brig_error **err)
{
        _cleanup_free_ char *name = NULL, *email = NULL;
        int r = git_config_get("user.name", &name, err);
        r = r ?: git_config_get("user.email", &email, err);
        if (r < 0)
                return brig_err_prefix(err, "--git-identity");
        char *text = tools_gitconfig(name, email);
        if (!text)
                return brig_err(err, EINVAL, "--git-identity: the host's user.name or user.email holds a control "
                                "character");
        char *path = brig_strdup_printf("%s/.gitconfig", plan->home);
        return add_file(plan->tools, path, text, strlen(text), 0644, false, "--git-identity", err);
}

/* The host's config file for TOOL, filtered, as a file in $HOME. */
static int plan_carry(struct run_plan *plan, const char *tool, const char *const *candidates, const char *inside,
                      char *(*filter)(const char *, size_t), brig_error **err)
{
        char origin[64];
        snprintf(origin, sizeof origin, "--carry-config %s", tool);
        for (size_t i = 0; candidates[i]; i++) {
                _cleanup_free_ char *host = candidates[i][0] == '$'
                        ? (getenv("XDG_CONFIG_HOME") && getenv("XDG_CONFIG_HOME")[0] == '/'
                           ? brig_strdup_printf("%s%s", getenv("XDG_CONFIG_HOME"), candidates[i] + 1) : NULL)
                        : expand_tilde(candidates[i], plan->home);
                struct stat st;
                if (!host || lstat(host, &st) < 0)
                        continue;
                _cleanup_free_ char *raw = NULL;
                size_t len = 0;
                /* The host user's own dotfile: a symlink into a dotfiles
                 * repository is followed (the sandbox never wrote there). */
                int r = tools_read_host_file("config file", host, false, CONFIG_MAX_BYTES, &raw, &len, err);
                if (r < 0)
                        return brig_err_prefix(err, "%s", origin);
                char *text = filter(raw, len);
                explicit_bzero(raw, len);
                char *path = text ? brig_strdup_printf("%s/%s", plan->home, inside) : NULL;
                if (!path) {
                        free(text);
                        return brig_err(err, ENOMEM, "%s", origin);
                }
                return add_file(plan->tools, path, text, strlen(text), 0644, false, origin, err);
        }
        return brig_err(err, ENOENT, "%s: no %s on the host (looked for %s%s%s)", origin, tool, candidates[0],
                        candidates[1] ? " and " : "", candidates[1] ? candidates[1] : "");
}

/* The writable bind through which the sandbox reaches host PATH (by its
 * name or any other the mount table gives it), or NULL. */
static const struct mount_entry *writable_bind_holding(const struct run_plan *plan, const char *path, bool *oom)
{
        struct mountinfo mi = { 0 };
        struct path_alias *alias = NULL;
        size_t n = 0;
        if (mountinfo_load(&mi) < 0 || mountinfo_aliases(&mi, path, &alias, &n) < 0)
                *oom = true;  /* fail closed: the caller refuses */
        const struct mount_entry *hit = NULL;
        for (size_t i = 0; !hit && i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                if (m->kind != MOUNT_BIND || m->readonly)
                        continue;
                if (path_is_under(path, m->src))
                        hit = m;
                for (size_t k = 0; !hit && k < n; k++)
                        if (!*alias[k].rel && path_is_under(alias[k].host, m->src))
                                hit = m;
        }
        path_aliases_free(alias, n);
        mountinfo_clear(&mi);
        return hit;
}

/* The host's agent socket, by its real path: the supervisor connects to
 * it for every connection the sandbox makes, so no name on the way may be
 * one the sandbox can change — a socket or a symlink in the workspace or a
 * --bind would let it send brig (root, as root) to any socket on the host. */
static int plan_agent(struct run_plan *plan, brig_error **err)
{
        const char *sock = getenv("SSH_AUTH_SOCK");
        if (!sock || !*sock)
                return brig_err(err, ENOENT, "--ssh-agent: SSH_AUTH_SOCK is not set: start an agent and add the key "
                                "(eval $(ssh-agent); ssh-add KEY), or hand a key in with --copy-in-secret");
        struct stat st;
        if (sock[0] != '/' || strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return brig_err(err, EINVAL, "--ssh-agent: SSH_AUTH_SOCK '%s' is not an absolute socket path", sock);
        if (stat(sock, &st) < 0)
                return brig_err(err, errno, "--ssh-agent: SSH_AUTH_SOCK '%s'", sock);
        if (!S_ISSOCK(st.st_mode))
                return brig_err(err, ENOTSOCK, "--ssh-agent: SSH_AUTH_SOCK '%s' is not a socket", sock);
        _cleanup_free_ char *real = realpath(sock, NULL);
        if (!real)
                return brig_err(err, errno, "--ssh-agent: SSH_AUTH_SOCK '%s'", sock);
        if (strlen(real) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return brig_err(err, ENAMETOOLONG, "--ssh-agent: SSH_AUTH_SOCK '%s' is '%s', too long a socket path",
                                sock, real);
        bool oom = false;
        const char *names[] = { sock, real };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                const struct mount_entry *m = writable_bind_holding(plan, names[i], &oom);
                if (oom)
                        return brig_err(err, ENOMEM, "--ssh-agent: read /proc/self/mountinfo");
                if (m)
                        return brig_err(err, EACCES, "--ssh-agent: SSH_AUTH_SOCK '%s'%s%s%s lies in the writable "
                                        "%s '%s' (at '%s' inside), where the sandbox could put another socket or a "
                                        "symlink in its place; start the agent outside every grant (ssh-agent -a "
                                        "/run/user/$(id -u)/agent.sock) and point SSH_AUTH_SOCK there",
                                        sock, i ? " (really '" : "", i ? real : "", i ? "')" : "",
                                        m->from_user ? "--bind" : "workspace", m->src, m->dst);
        }
        plan->tools->agent_upstream = TAKE_PTR(real);
        return 0;
}

/* HOST: the host's /etc/passwd as plan.c read it ("" when there is none). */
static int plan_passwd(struct run_plan *plan, const char *host, size_t len, brig_error **err)
{
        /* A rootfs is an image with its own users: its /etc/passwd stays,
         * and none of the host's names and homes go in. */
        if (plan->rootfs)
                return 0;
        /* what goes into brig's tmpfs inside */
        if (len > TOOLS_PASSWD_MAX)
                return brig_err(err, EFBIG, "passwd '/etc/passwd' is larger than %zu KiB", (size_t)TOOLS_PASSWD_MAX >> 10);
        struct tools_plan *t = plan->tools;
        t->passwd = tools_passwd_for(host, len, plan->sandbox_uid, plan->sandbox_gid, "sandbox", plan->home);
        if (!t->passwd && strpbrk(plan->home, ":\n"))
                return brig_err(err, EINVAL, "home directory '%s' holds ':' or a newline, which a passwd entry "
                                "cannot; set HOME to another path", plan->home);
        if (!t->passwd)
                return brig_err(err, ENOMEM, "passwd");
        t->passwd_len = strlen(t->passwd);
        return 0;
}

/* The sandbox's CA, trusted inside: its own file, and the host's bundle
 * with it appended, bound over the system path (and named by the
 * environment: plan.c). */
static int plan_ca(struct run_plan *plan, brig_error **err)
{
        const char *ca = intercept_ca_pem(plan->intercept);
        if (!ca)
                return 0;
        _cleanup_free_ char *host = NULL;
        size_t len = 0;
        int r = tools_read_host_file("CA bundle", BRIG_SYSTEM_CA_BUNDLE, false, 8 << 20, &host, &len, err);
        if (r == -ENOENT) {
                brig_error_free(err);
                r = 0;
        }
        if (r < 0)
                return r;
        struct tools_plan *t = plan->tools;
        t->ca_pem = strdup(ca);
        t->ca_bundle = brig_strdup_printf("%.*s%s%s", (int)len, host ? host : "",
                                          len && host[len - 1] != '\n' ? "\n" : "", ca);
        return t->ca_pem && t->ca_bundle ? 0 : brig_err(err, ENOMEM, "CA bundle");
}

/* The plan without brig's tmpfs at BRIG_RUNTIME_DIR. */
static void drop_runtime_dir(struct run_plan *plan)
{
        for (size_t i = 0; i < plan->n_mounts; i++) {
                struct mount_entry *m = &plan->mounts[i];
                if (m->kind != MOUNT_TMPFS || m->from_user || strcmp(m->dst, BRIG_RUNTIME_DIR) != 0)
                        continue;
                free(m->src);
                free(m->dst);
                memmove(m, m + 1, (plan->n_mounts - i - 1) * sizeof *m);
                plan->n_mounts--;
                return;
        }
}

static int plan_tools(struct run_plan *plan, const char *passwd, size_t passwd_len, brig_error **err);

int tools_plan_build(struct run_plan *plan, const char *passwd, size_t passwd_len, brig_error **err)
{
        int r = plan_tools(plan, passwd, passwd_len, err);
        /* With a rootfs (its own passwd) brig's tmpfs holds something only
         * for a CA, copied-in files or the agent's socket. Without them it
         * is not mounted: a rootless brig could not make its mount point
         * in an image that is not its to write (docs/oci.md). */
        struct tools_plan *t = plan->tools;
        if (r == 0 && plan->rootfs && !t->ca_pem && !t->n_files && !t->agent_upstream)
                drop_runtime_dir(plan);
        else if (r == 0)
                t->runtime_dir = true;
        return r;
}

static int plan_tools(struct run_plan *plan, const char *passwd, size_t passwd_len, brig_error **err)
{
        plan->tools = calloc(1, sizeof *plan->tools);
        if (!plan->tools)
                return brig_err(err, ENOMEM, "tools");
        /* brig's tmpfs is made like any other mount point: inside a bind
         * it would be made on the host, and a mount at or below it would
         * cover what brig writes there (or take brig's writes itself). */
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                bool above = m->kind == MOUNT_BIND && path_is_under(BRIG_RUNTIME_DIR, m->dst);
                if (!m->from_user || !(above || path_is_under(m->dst, BRIG_RUNTIME_DIR)))
                        continue;
                return brig_err(err, EINVAL,
                                "%s %s%s%s: brig mounts its own tmpfs at %s (the sandbox user's passwd entry, "
                                "copied-in files, the ssh agent socket), which this would %s; %s",
                                m->kind == MOUNT_TMPFS ? "--tmpfs" : m->readonly ? "--ro-bind" : "--bind",
                                m->kind == MOUNT_TMPFS ? "" : m->src, m->kind == MOUNT_TMPFS ? "" : ":", m->dst,
                                BRIG_RUNTIME_DIR, above ? "make on the host" : "cover",
                                above ? "bind the parts of it you need (e.g. --ro-bind /run/postgresql)"
                                      : "choose another destination");
        }
        int r = plan_passwd(plan, passwd, passwd_len, err);
        r = r ?: plan_ca(plan, err);
        const struct tools_policy *tp = plan->policy->tools;
        if (r < 0 || !tp)
                return r;
        r = plan_copy_ins(plan, tp, err);
        if (r == 0 && tp->git_identity)
                r = plan_git_identity(plan, err);
        static const char *const npmrc[] = { "~/.npmrc", NULL };
        static const char *const pipconf[] = { "$/pip/pip.conf", "~/.config/pip/pip.conf", "~/.pip/pip.conf", NULL };
        if (r == 0 && (tp->carry & CARRY_NPM))
                r = plan_carry(plan, "npm", npmrc, ".npmrc", tools_filter_npmrc, err);
        if (r == 0 && (tp->carry & CARRY_PIP))
                r = plan_carry(plan, "pip", pipconf + (getenv("XDG_CONFIG_HOME") ? 0 : 1), ".config/pip/pip.conf",
                               tools_filter_pip_conf, err);
        for (size_t i = 0; r == 0 && i < plan->tools->n_files; i++)
                if (!plan->tools->files[i].copied)
                        r = check_in_tmpfs(plan, plan->tools->files[i].origin, plan->tools->files[i].path, err);
        if (r == 0 && tp->ssh_agent)
                r = plan_agent(plan, err);
        return r;
}


void tools_plan_free(struct tools_plan *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n_files; i++) {
                free(t->files[i].path);
                if (t->files[i].data)
                        explicit_bzero(t->files[i].data, t->files[i].len);
                free(t->files[i].data);
        }
        free(t->files);
        free(t->passwd);
        free(t->agent_upstream);
        free(t->ca_pem);
        free(t->ca_bundle);
        free(t);
}

/* ---- inside, while the tree is built ------------------------------------------ */

/* Below DIR only, through no symlink and onto no other mount. */
static int open_here(int dir, const char *name, uint64_t flags, mode_t mode)
{
        struct open_how how = {
                .flags = flags | O_CLOEXEC | O_NOFOLLOW,
                .mode = (flags & O_CREAT) ? mode : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        return sys_openat2(dir, name, &how);
}

static int write_all(int fd, const char *data, size_t len)
{
        while (len) {
                ssize_t w = write(fd, data, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return -1;
                data += w;
                len -= (size_t)w;
        }
        return 0;
}

/* A new file NAME in DIR, owned by the sandbox user, with exactly MODE. */
static int create_file(int dir, const char *name, const char *data, size_t len, mode_t mode,
                       const struct run_plan *plan, bool user_owned)
{
        _cleanup_close_ int fd = open_here(dir, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0)
                return -errno;
        if (write_all(fd, data, len) < 0 ||
            (user_owned && fchown(fd, plan->sandbox_uid, plan->sandbox_gid) < 0) || fchmod(fd, mode) < 0)
                return -errno;
        return 0;
}

/* The directory holding PATH (inside), made as needed below the root of
 * the tmpfs it lies on, owned by the sandbox user; *last points at the
 * final component of PATH. */
static int parent_in_tmpfs(int root_fd, const struct run_plan *plan, const char *path, char **copy,
                           const char **last, brig_error **err)
{
        const struct mount_entry *m = mount_holding(plan, path);
        if (!m || m->kind != MOUNT_TMPFS)
                return brig_err(err, EINVAL, "'%s' is not in a tmpfs", path);  /* the plan checked: never */
        _cleanup_close_ int dir = strcmp(m->dst, "/") == 0 ? fcntl(root_fd, F_DUPFD_CLOEXEC, 3)
                                                          : open_here(root_fd, m->dst + 1, O_PATH | O_DIRECTORY, 0);
        /* open_here refuses crossing mounts: the tmpfs's root is reached
         * from "/" across the mounts above it, so that one walk may. */
        if (dir < 0 && errno == EXDEV) {
                struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                dir = sys_openat2(root_fd, m->dst + 1, &how);
        }
        if (dir < 0)
                return brig_err(err, errno, "open '%s'", m->dst);
        *copy = strdup(path_below(path, m->dst));
        if (!*copy)
                return brig_err(err, ENOMEM, "'%s'", path);
        char *rest = *copy;
        for (char *slash; (slash = strchr(rest, '/'));) {
                *slash = '\0';
                if (mkdirat(dir, rest, 0700) == 0) {
                        if (fchownat(dir, rest, plan->sandbox_uid, plan->sandbox_gid, AT_SYMLINK_NOFOLLOW) < 0)
                                return brig_err(err, errno, "chown '%s'", rest);
                } else if (errno != EEXIST) {
                        return brig_err(err, errno, "create directory '%s' for '%s'", rest, path);
                }
                int next = open_here(dir, rest, O_PATH | O_DIRECTORY, 0);
                if (next < 0)
                        return brig_err(err, errno, "'%s' for '%s'", rest, path);
                close(dir);
                dir = next;
                rest = slash + 1;
        }
        *last = rest;
        return TAKE_FD(dir);
}

static int populate_file(int root_fd, int copy_dir, size_t index, const struct inside_file *f,
                         const struct run_plan *plan, brig_error **err)
{
        _cleanup_free_ char *copy = NULL;
        const char *last = NULL;
        _cleanup_close_ int dir = parent_in_tmpfs(root_fd, plan, f->path, &copy, &last, err);
        if (dir < 0)
                return dir;
        if (!f->copied) {
                int r = create_file(dir, last, f->data, f->len, f->mode, plan, true);
                return r < 0 ? brig_err(err, -r, "%s: write '%s'", f->origin, f->path) : 0;
        }
        char name[128];
        const char *base = strrchr(f->path, '/') + 1;
        snprintf(name, sizeof name, "%zu-%.80s", index, base);
        int r = create_file(copy_dir, name, f->data, f->len, f->mode, plan, true);
        if (r < 0)
                return brig_err(err, -r, "%s: write '%s/%s'", f->origin, BRIG_COPY_IN_DIR, name);
        char target[192];
        snprintf(target, sizeof target, "%s/%s", BRIG_COPY_IN_DIR, name);
        if (symlinkat(target, dir, last) < 0)
                return brig_err(err, errno, "%s: symlink '%s'", f->origin, f->path);
        if (fchownat(dir, last, plan->sandbox_uid, plan->sandbox_gid, AT_SYMLINK_NOFOLLOW) < 0)
                return brig_err(err, errno, "%s: chown '%s'", f->origin, f->path);
        return 0;
}

/* A file of brig's tmpfs, bound read-only over `path` inside (the
 * generated /etc/passwd, the CA bundle); nothing when the host has none. */
static int bind_over(int root_fd, int run_dir, const char *name, const char *path, brig_error **err)
{
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        _cleanup_close_ int target = sys_openat2(root_fd, path + 1, &how);
        if (target < 0 && errno == ENOENT)
                return 0;  /* not on this host: nothing to correct */
        if (target < 0)
                return brig_err(err, errno, "%s", path);
        _cleanup_close_ int tree = sys_open_tree(run_dir, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0)
                return brig_err(err, errno, "open_tree %s", name);
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                               MOUNT_ATTR_NOEXEC, .propagation = MS_PRIVATE };
        if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0)
                return brig_err(err, errno, "mount_setattr %s", name);
        if (sys_move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return brig_err(err, errno, "move_mount %s over %s", name, path);
        return 0;
}

int tools_populate(int root_fd, const struct run_plan *plan, brig_error **err)
{
        const struct tools_plan *t = plan->tools;
        if (!t || !t->runtime_dir)
                return 0;
        _cleanup_close_ int run_dir = open_here(root_fd, &BRIG_RUNTIME_DIR[1], O_PATH | O_DIRECTORY, 0);
        if (run_dir < 0 && errno == EXDEV) {
                struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                run_dir = sys_openat2(root_fd, &BRIG_RUNTIME_DIR[1], &how);
        }
        if (run_dir < 0)
                return brig_err(err, errno, "open %s", BRIG_RUNTIME_DIR);
        int r = t->passwd ? create_file(run_dir, "passwd", t->passwd, t->passwd_len, 0444, plan, false) : 0;
        if (r < 0)
                return brig_err(err, -r, "write %s/passwd", BRIG_RUNTIME_DIR);
        r = t->passwd ? bind_over(root_fd, run_dir, "passwd", "/etc/passwd", err) : 0;
        if (r < 0)
                return r;
        if (t->ca_pem) {
                r = create_file(run_dir, "brig-ca.pem", t->ca_pem, strlen(t->ca_pem), 0444, plan, false);
                r = r ?: create_file(run_dir, "ca-certificates.crt", t->ca_bundle, strlen(t->ca_bundle), 0444, plan,
                                     false);
                if (r < 0)
                        return brig_err(err, -r, "write %s", BRIG_CA_BUNDLE);
                r = bind_over(root_fd, run_dir, "ca-certificates.crt", BRIG_SYSTEM_CA_BUNDLE, err);
                if (r < 0)
                        return r;
        }
        if (mkdirat(run_dir, "copy-in", 0755) < 0)
                return brig_err(err, errno, "create %s", BRIG_COPY_IN_DIR);
        _cleanup_close_ int copy_dir = open_here(run_dir, "copy-in", O_PATH | O_DIRECTORY, 0);
        if (copy_dir < 0)
                return brig_err(err, errno, "open %s", BRIG_COPY_IN_DIR);
        for (size_t i = 0; i < t->n_files; i++) {
                r = populate_file(root_fd, copy_dir, i + 1, &t->files[i], plan, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- inside, after pivot_root ---------------------------------------------- */

/* --ssh-agent: the socket the sandbox's ssh connects to, made here so it
 * belongs to the sandbox's network namespace — the unix socket guard
 * counts it as the sandbox's own — and served from the supervisor. */
static int make_agent_socket(const struct run_plan *plan, brig_error **err)
{
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return brig_err(err, errno, "socket");
        struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = BRIG_AGENT_SOCKET };
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                return brig_err(err, errno, "bind %s", BRIG_AGENT_SOCKET);
        /* Only the sandbox user connects (every process inside is it). */
        if (chown(BRIG_AGENT_SOCKET, plan->sandbox_uid, plan->sandbox_gid) < 0 || chmod(BRIG_AGENT_SOCKET, 0600) < 0)
                return brig_err(err, errno, "chown %s", BRIG_AGENT_SOCKET);
        if (listen(fd, 16) < 0)
                return brig_err(err, errno, "listen %s", BRIG_AGENT_SOCKET);
        struct sync_msg m = { .type = SYNC_AGENT };
        if (sync_send_fd(plan->sync_fd, &m, fd) < 0)
                return brig_err(err, errno, "send the agent socket to the supervisor");
        return 0;
}

int tools_finish_inside(const struct run_plan *plan, brig_error **err)
{
        if (!plan->tools || !plan->tools->runtime_dir)
                return 0;
        if (plan->tools->agent_upstream) {
                int r = make_agent_socket(plan, err);
                if (r < 0)
                        return brig_err_prefix(err, "--ssh-agent");
        }
        /* Nothing in brig's tmpfs is the sandbox's to change. */
        _cleanup_close_ int run = open(BRIG_RUNTIME_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
        if (run < 0 || sys_mount_setattr(run, "", AT_EMPTY_PATH, &attr) < 0)
                return brig_err(err, errno, "make %s read-only", BRIG_RUNTIME_DIR);
        return 0;
}
