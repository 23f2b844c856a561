/* policy.c — the policy model: defaults, setters, the secret deny list. */
#define _GNU_SOURCE
#include "core/model.h"
#include "core/hostfs.h"
#include "controls/seccomp_filter.h"
#include "net/intercept.h"
#include "tools/tools.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* Secrets that must never be visible inside, even when a parent directory
 * is granted. "~/" means "in every home directory" (the caller's $HOME and
 * every home in the passwd database). Documented in docs/filesystem.md. */
static const char *const default_deny[] = {
        /* keys and credential stores */
        "~/.ssh", "~/.gnupg", "~/.password-store", "~/.local/share/keyrings",
        "~/.netrc", "~/.git-credentials", "~/.config/git/credentials",
        /* cloud and cluster credentials */
        "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube", "~/.docker",
        "~/.oci", "~/.config/doctl", "~/.s3cfg", "~/.boto", "~/.terraform.d",
        "~/.vault-token", "~/.config/rclone",
        /* package registry tokens */
        "~/.npmrc", "~/.pypirc", "~/.cargo/credentials", "~/.cargo/credentials.toml",
        "~/.gem/credentials", "~/.config/gh", "~/.config/hub", "~/.m2/settings.xml",
        /* database passwords */
        "~/.pgpass", "~/.my.cnf",
        /* AI agent and provider credentials */
        "~/.claude.json", "~/.claude/.credentials.json", "~/.codex/auth.json",
        "~/.config/openai",
        /* browser profiles: cookies, saved passwords */
        "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium",
        "~/.config/BraveSoftware", "~/.config/microsoft-edge", "~/.thunderbird",
        /* shell histories often hold pasted tokens */
        "~/.bash_history", "~/.zsh_history", "~/.python_history", "~/.psql_history",
        "~/.mysql_history",
        /* host secrets */
        "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
        "/etc/ssh/*key*", "/etc/ssl/private", "/etc/security/opasswd",
        "/etc/krb5.keytab", "/etc/sudoers", "/etc/sudoers.d",
        NULL,
};

const char *const *brig_default_deny_list(void)
{
        return default_deny;
}

brig_policy *brig_policy_new(void)
{
        brig_policy *p = calloc(1, sizeof *p);
        if (!p)
                return NULL;
        p->tmp_size = BRIG_DEFAULT_TMP_SIZE;
        p->home_size = BRIG_DEFAULT_HOME_SIZE;
        p->shm_size = BRIG_DEV_SHM_SIZE;
        p->limits.memory = BRIG_DEFAULT_MEMORY;
        p->limits.pids = BRIG_DEFAULT_PIDS;
        p->limits.nofile = BRIG_DEFAULT_NOFILE;
        p->limits.kill_after_ms = BRIG_DEFAULT_KILL_AFTER_MS;
        p->limits.changes_max = BRIG_DEFAULT_CHANGES_MAX;
        for (size_t i = 0; default_deny[i]; i++) {
                if (strv_push(&p->deny, default_deny[i]) < 0) {
                        brig_policy_free(p);
                        return NULL;
                }
        }
        return p;
}

void brig_policy_free(brig_policy *p)
{
        if (!p)
                return;
        free(p->workspace);
        free(p->cwd);
        for (size_t i = 0; i < p->n_mounts; i++) {
                free(p->mounts[i].src);
                free(p->mounts[i].dst);
        }
        free(p->mounts);
        strv_free(&p->deny);
        strv_free(&p->unsafe_allowed);
        for (size_t i = 0; i < p->n_env; i++) {
                free(p->env[i].name);
                free(p->env[i].value);
        }
        free(p->env);
        strv_free(&p->keep_env);
        strv_free(&p->allow_unix);
        free(p->pass_fds);
        free(p->hostname);
        free(p->user);
        free(p->umask);
        strv_free(&p->uid_map);
        strv_free(&p->gid_map);
        free(p->clock_start);
        free(p->rootfs);
        free(p->report_path);
        free(p->manifest_path);
        free(p->audit_path);
        seccomp_policy_free(p->seccomp);
        egress_policy_free(p->egress);
        tools_policy_free(p->tools);
        free(p);
}

static int absolute_path(const char *what, const char *path, char **out, brig_error **err)
{
        if (!path || path[0] != '/')
                return brig_err(err, EINVAL, "%s '%s': expected an absolute path", what,
                                path ? path : "");
        char *n = path_normalize(path);
        if (!n)
                return brig_err(err, errno, "%s '%s'", what, path);
        *out = n;
        return 0;
}

int brig_policy_set_workspace(brig_policy *p, const char *dir, brig_error **err)
{
        char *n = NULL;
        int r = absolute_path("workspace", dir, &n, err);
        if (r < 0)
                return r;
        free(p->workspace);
        p->workspace = n;
        return 0;
}

int brig_policy_set_rootfs(brig_policy *p, const char *dir, brig_error **err)
{
        char *n = NULL;
        int r = absolute_path("rootfs", dir, &n, err);
        if (r < 0)
                return r;
        if (strcmp(n, "/") == 0) {
                free(n);
                return brig_err(err, EINVAL, "rootfs '/': the host's own root cannot be the sandbox's");
        }
        free(p->rootfs);
        p->rootfs = n;
        return 0;
}

void brig_policy_set_workspace_readonly(brig_policy *p, bool readonly)
{
        p->workspace_readonly = readonly;
}

int brig_policy_set_cwd(brig_policy *p, const char *dir, brig_error **err)
{
        char *n = NULL;
        int r = absolute_path("cwd", dir, &n, err);
        if (r < 0)
                return r;
        free(p->cwd);
        p->cwd = n;
        return 0;
}

int brig_policy_set_shm_size(brig_policy *p, uint64_t size_bytes, brig_error **err)
{
        if (size_bytes < 4096)
                return brig_err(err, EINVAL, "shm size %llu is below one page", (unsigned long long)size_bytes);
        p->shm_size = size_bytes;
        return 0;
}

static int add_mount(brig_policy *p, struct mount_entry m)
{
        struct mount_entry *n = realloc(p->mounts, (p->n_mounts + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        p->mounts = n;
        p->mounts[p->n_mounts++] = m;
        return 0;
}

static int check_destination(const char *dst, brig_error **err)
{
        if (strcmp(dst, "/") == 0)
                return brig_err(err, EINVAL, "cannot mount over '/': the sandbox root is brig's own");
        if (path_is_under(dst, "/proc") || path_is_under(dst, "/dev"))
                return brig_err(err, EINVAL, "cannot mount over '%s': /proc and /dev are brig's own", dst);
        return 0;
}

int brig_policy_add_bind(brig_policy *p, const char *src, const char *dst, unsigned flags, brig_error **err)
{
        _cleanup_free_ char *s = NULL;
        _cleanup_free_ char *d = NULL;
        int r = absolute_path("bind source", src, &s, err);
        if (r < 0)
                return r;
        r = absolute_path("bind destination", dst ? dst : src, &d, err);
        if (r < 0)
                return r;
        r = check_destination(d, err);
        if (r < 0)
                return r;
        struct mount_entry m = {
                .kind = MOUNT_BIND, .src = s, .dst = d,
                .readonly = flags & BRIG_BIND_READONLY, .from_user = true,
        };
        if (add_mount(p, m) < 0)
                return brig_err(err, ENOMEM, "bind");
        s = d = NULL;
        return 0;
}

int brig_policy_add_tmpfs(brig_policy *p, const char *dst, uint64_t size_bytes, brig_error **err)
{
        _cleanup_free_ char *d = NULL;
        int r = absolute_path("tmpfs destination", dst, &d, err);
        if (r < 0)
                return r;
        r = check_destination(d, err);
        if (r < 0)
                return r;
        if (size_bytes != 0 && size_bytes < 4096)
                return brig_err(err, EINVAL, "tmpfs '%s': size %llu is below one page", d,
                                (unsigned long long)size_bytes);
        struct mount_entry m = {
                .kind = MOUNT_TMPFS, .dst = d, .mode = 01777, .from_user = true,
                .size = size_bytes ? size_bytes : BRIG_DEFAULT_TMPFS_SIZE,
        };
        if (add_mount(p, m) < 0)
                return brig_err(err, ENOMEM, "tmpfs");
        d = NULL;
        return 0;
}

int brig_policy_set_tmp_size(brig_policy *p, uint64_t size_bytes, brig_error **err)
{
        if (size_bytes < 4096)
                return brig_err(err, EINVAL, "tmp size %llu is below one page", (unsigned long long)size_bytes);
        p->tmp_size = size_bytes;
        return 0;
}

int brig_policy_set_home_size(brig_policy *p, uint64_t size_bytes, brig_error **err)
{
        if (size_bytes < 4096)
                return brig_err(err, EINVAL, "home size %llu is below one page", (unsigned long long)size_bytes);
        p->home_size = size_bytes;
        return 0;
}

void brig_policy_set_timings(brig_policy *p, bool on)
{
        p->timings = on;
}

void brig_policy_set_exit_after_run(brig_policy *p, bool on)
{
        p->exit_after_run = on;
}

void brig_policy_set_audit_no_exec(brig_policy *p, bool on)
{
        p->audit_no_exec = on;
}

void brig_policy_set_mount_sys(brig_policy *p, bool on)
{
        p->mount_sys = on;
}

static int check_deny_pattern(const char *pattern, brig_error **err)
{
        if (!pattern || !(pattern[0] == '/' || (pattern[0] == '~' && pattern[1] == '/')))
                return brig_err(err, EINVAL, "secret path '%s': expected an absolute path or ~/PATH",
                                pattern ? pattern : "");
        if (strstr(pattern, "/../") || strstr(pattern, "/./") ||
            (strlen(pattern) >= 3 && strcmp(pattern + strlen(pattern) - 3, "/..") == 0))
                return brig_err(err, EINVAL, "secret path '%s': '.' and '..' are not allowed", pattern);
        return 0;
}

int brig_policy_add_deny(brig_policy *p, const char *pattern, brig_error **err)
{
        int r = check_deny_pattern(pattern, err);
        if (r < 0)
                return r;
        /* Denying a built-in entry that was removed on purpose puts it
         * back: the later word wins, and no removal stays behind. */
        (void)strv_remove(&p->unsafe_allowed, pattern);
        if (strv_contains(&p->deny, pattern))
                return 0;
        if (strv_push(&p->deny, pattern) < 0)
                return brig_err(err, ENOMEM, "deny");
        return 0;
}

int brig_policy_unsafe_allow_secret(brig_policy *p, const char *pattern, brig_error **err)
{
        bool builtin = false;
        for (size_t i = 0; default_deny[i]; i++)
                if (strcmp(default_deny[i], pattern) == 0)
                        builtin = true;
        if (!builtin || strv_remove(&p->deny, pattern) < 0)
                return brig_err(err, ENOENT, "'%s' is not on the built-in secret list", pattern);
        if (strv_push(&p->unsafe_allowed, pattern) < 0)
                return brig_err(err, ENOMEM, "unsafe-allow-secret");
        return 0;
}

static bool valid_env_name(const char *name)
{
        if (!name || !*name || isdigit((unsigned char)name[0]))
                return false;
        for (const char *c = name; *c; c++)
                if (!(isalnum((unsigned char)*c) || *c == '_'))
                        return false;
        return true;
}

int brig_policy_set_env(brig_policy *p, const char *name, const char *value, brig_error **err)
{
        if (!valid_env_name(name))
                return brig_err(err, EINVAL, "environment name '%s': expected letters, digits and '_'",
                                name ? name : "");
        for (size_t i = 0; i < p->n_env; i++) {
                if (strcmp(p->env[i].name, name) == 0) {
                        char *v = strdup(value);
                        if (!v)
                                return brig_err(err, ENOMEM, "env");
                        free(p->env[i].value);
                        p->env[i].value = v;
                        return 0;
                }
        }
        struct env_setting *n = realloc(p->env, (p->n_env + 1) * sizeof *n);
        if (!n)
                return brig_err(err, ENOMEM, "env");
        p->env = n;
        p->env[p->n_env].name = strdup(name);
        p->env[p->n_env].value = strdup(value);
        if (!p->env[p->n_env].name || !p->env[p->n_env].value) {
                free(p->env[p->n_env].name);
                free(p->env[p->n_env].value);
                return brig_err(err, ENOMEM, "env");
        }
        p->n_env++;
        return 0;
}

int brig_policy_keep_env(brig_policy *p, const char *name, brig_error **err)
{
        if (!valid_env_name(name))
                return brig_err(err, EINVAL, "environment name '%s': expected letters, digits and '_'",
                                name ? name : "");
        if (!strv_contains(&p->keep_env, name) && strv_push(&p->keep_env, name) < 0)
                return brig_err(err, ENOMEM, "keep-env");
        return 0;
}

int brig_policy_pass_fd(brig_policy *p, int fd, brig_error **err)
{
        if (fd < 3)
                return brig_err(err, EINVAL, "--pass-fd %d: 0, 1 and 2 are always passed", fd);
        if (fd == p->report_fd || fd == p->audit_fd)
                return brig_err(err, EINVAL, "--pass-fd %d: the descriptor is brig's %s; the sandbox never gets "
                                             "brig's outputs", fd, fd == p->report_fd ? "--json-report-fd" : "--audit-fd");
        int *n = realloc(p->pass_fds, (p->n_pass_fds + 1) * sizeof *n);
        if (!n)
                return brig_err(err, ENOMEM, "pass-fd");
        p->pass_fds = n;
        p->pass_fds[p->n_pass_fds++] = fd;
        return 0;
}

int brig_policy_set_hostname(brig_policy *p, const char *name, brig_error **err)
{
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > 64)
                return brig_err(err, EINVAL, "hostname '%s': expected 1 to 64 characters", name ? name : "");
        for (const char *c = name; *c; c++)
                if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '.'))
                        return brig_err(err, EINVAL, "hostname '%s': unexpected character '%c'", name, *c);
        char *d = strdup(name);
        if (!d)
                return brig_err(err, ENOMEM, "hostname");
        free(p->hostname);
        p->hostname = d;
        return 0;
}

/* ---- the user inside ---------------------------------------------------- */

/* A decimal id below 2^32 - 1 (the kernel's "no id"), ended by one of
 * `ends` or, when may_end, by the end of the text. */
static bool parse_id(const char **s, const char *ends, bool may_end, uint32_t *out)
{
        const char *c = *s;
        uint64_t v = 0;
        if (!isdigit((unsigned char)*c))
                return false;
        for (; isdigit((unsigned char)*c); c++)
                if ((v = v * 10 + (uint64_t)(*c - '0')) >= UINT32_MAX)
                        return false;
        if (*c ? !strchr(ends, *c) : !may_end)
                return false;
        *s = c;
        *out = (uint32_t)v;
        return true;
}

static bool parse_range(const char *text, uint32_t *inside, uint32_t *host, uint32_t *count)
{
        const char *s = text;
        return parse_id(&s, ":", false, inside) && (s++, parse_id(&s, ":", false, host)) &&
               (s++, parse_id(&s, "", true, count)) &&
               *count > 0 && (uint64_t)*inside + *count <= UINT32_MAX && (uint64_t)*host + *count <= UINT32_MAX;
}

int policy_map_id(const struct strv *map, uint32_t inside, uint32_t *host)
{
        if (map->n == 0)
                return -ENOENT;
        for (size_t i = 0; i < map->n; i++) {
                uint32_t in, out, n;
                if (parse_range(map->items[i], &in, &out, &n) && inside >= in && inside - in < n) {
                        *host = out + (inside - in);
                        return 0;
                }
        }
        return -ERANGE;
}

/* The host id of one id of the user: the map's, else brig's own. */
static int host_id(const struct strv *map, bool uid, const char *what, uint32_t inside, uint32_t dflt,
                   uint32_t *host, brig_error **err)
{
        const char *kind = uid ? "uid" : "gid";
        int r = policy_map_id(map, inside, host);
        if (r == -ERANGE)
                return brig_err(err, EINVAL, "user: %s %u is not in the %s map (no range holds it)", what, inside,
                                kind);
        if (r == -ENOENT)
                *host = dflt;
        uint32_t me = uid ? (uint32_t)geteuid() : (uint32_t)getegid();
        if (geteuid() == 0 && *host == 0)
                return brig_err(err, EPERM, "user: %s %u would be host root's (%s 0): brig never runs a command "
                                "as host root; map it to another host id", what, inside, kind);
        if (geteuid() != 0 && *host != me)
                return brig_err(err, EPERM, "user: %s %u maps to host %s %u: a rootless brig can map only your "
                                "own (%u); map it there, or run brig as root", what, inside, kind, *host, me);
        return 0;
}

int policy_resolve_user(const brig_policy *p, uint32_t dflt_uid, uint32_t dflt_gid, struct user_ids *out,
                        brig_error **err)
{
        memset(out, 0, sizeof *out);
        if (!p->user)
                return 0;
        uint32_t h;
        /* A map that does not hold the ids asked for is a mistake of the
         * caller's, whatever brig then does with 0. */
        if (policy_map_id(&p->uid_map, p->user_uid, &h) == -ERANGE)
                return brig_err(err, EINVAL, "user: uid %u is not in the uid map (no range holds it)", p->user_uid);
        if (policy_map_id(&p->gid_map, p->user_gid, &h) == -ERANGE)
                return brig_err(err, EINVAL, "user: gid %u is not in the gid map (no range holds it)", p->user_gid);
        /* Inside 0 is brig's: as root, its setup's (0 there is host root
         * until the drop, userns.c). A command asking to be root runs as
         * brig's sandbox user, with no supplementary group. */
        if (p->user_uid == 0)
                return 0;
        out->set = true;
        out->uid = p->user_uid;
        int r = host_id(&p->uid_map, true, "uid", out->uid, dflt_uid, &out->host_uid, err);
        if (r < 0)
                return r;
        /* gid 0 the same: brig's sandbox group */
        out->gid = p->user_gid ? p->user_gid : dflt_gid;
        r = p->user_gid ? host_id(&p->gid_map, false, "gid", out->gid, dflt_gid, &out->host_gid, err)
                        : (out->host_gid = dflt_gid, 0);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_user_groups; i++) {
                uint32_t g = p->user_groups[i];
                if (g == 0 || g == out->gid)
                        continue;  /* brig's, or the primary group */
                if (geteuid() != 0)
                        return brig_err(err, EPERM, "user: supplementary group %u: a rootless brig cannot set "
                                        "supplementary groups (setgroups is denied in its user namespace); "
                                        "leave them out, or run brig as root", g);
                if (p->gid_map.n == 0)
                        return brig_err(err, EINVAL, "user: supplementary group %u has no host gid: give a gid "
                                        "map (brig maps no group of the host's by itself)", g);
                r = host_id(&p->gid_map, false, "supplementary group", g, 0, &h, err);
                if (r < 0)
                        return r;
                bool dup = h == out->host_gid;
                for (size_t k = 0; k < out->n_groups; k++)
                        dup |= out->groups[k] == g || out->host_groups[k] == h;
                if (dup)
                        continue;
                out->groups[out->n_groups] = g;
                out->host_groups[out->n_groups++] = h;
        }
        return 0;
}

int brig_policy_set_user(brig_policy *p, const char *spec, brig_error **err)
{
        const char *s = spec ? spec : "";
        uint32_t uid, gid, groups[BRIG_MAX_GROUPS];
        size_t n = 0;
        if (!parse_id(&s, ":", false, &uid) || (s++, !parse_id(&s, ":", true, &gid)))
                return brig_err(err, EINVAL, "user '%s': expected UID:GID or UID:GID:GROUP,GROUP,...", spec ? spec : "");
        if (*s == ':') {
                do {
                        s++;
                        if (n == BRIG_MAX_GROUPS)
                                return brig_err(err, EINVAL, "user '%s': at most %d supplementary groups", spec,
                                                BRIG_MAX_GROUPS);
                        if (!parse_id(&s, ",", true, &groups[n++]))
                                return brig_err(err, EINVAL, "user '%s': expected GROUP,GROUP,... after the "
                                                "second ':'", spec);
                } while (*s == ',');
        }
        char *d = strdup(spec);
        if (!d)
                return brig_err(err, ENOMEM, "user");
        char *old = p->user;
        uint32_t ouid = p->user_uid, ogid = p->user_gid, ogroups[BRIG_MAX_GROUPS];
        size_t on = p->n_user_groups;
        memcpy(ogroups, p->user_groups, sizeof ogroups);
        p->user = d;
        p->user_uid = uid;
        p->user_gid = gid;
        memcpy(p->user_groups, groups, n * sizeof *groups);
        p->n_user_groups = n;
        /* against the maps given so far (the run checks again) */
        struct user_ids ids;
        int r = policy_resolve_user(p, geteuid() ? geteuid() : BRIG_NOBODY_UID,
                                    geteuid() ? getegid() : BRIG_NOBODY_UID, &ids, err);
        if (r < 0) {
                p->user = old;
                p->user_uid = ouid;
                p->user_gid = ogid;
                memcpy(p->user_groups, ogroups, sizeof ogroups);
                p->n_user_groups = on;
                free(d);
                return r;
        }
        free(old);
        return 0;
}

int brig_policy_set_umask(brig_policy *p, const char *octal, brig_error **err)
{
        char *end = NULL;
        long v = octal && *octal ? strtol(octal, &end, 8) : -1;
        if (v < 0 || v > 0777 || !end || *end)
                return brig_err(err, EINVAL, "umask '%s': expected an octal number from 0 to 0777",
                                octal ? octal : "");
        char *d = brig_strdup_printf("%04lo", v);
        if (!d)
                return brig_err(err, ENOMEM, "umask");
        free(p->umask);
        p->umask = d;
        return 0;
}

static int add_map(struct strv *map, const char *what, const char *range, brig_error **err)
{
        uint32_t in, host, n;
        if (!range || !parse_range(range, &in, &host, &n))
                return brig_err(err, EINVAL, "%s map '%s': expected INSIDE:HOST:COUNT (COUNT at least 1, "
                                "nothing past 2^32 - 2)", what, range ? range : "");
        for (size_t i = 0; i < map->n; i++) {
                uint32_t i2, h2, n2;
                if (parse_range(map->items[i], &i2, &h2, &n2) &&
                    ((in < i2 + n2 && i2 < in + n) || (host < h2 + n2 && h2 < host + n)))
                        return brig_err(err, EINVAL, "%s map '%s' overlaps '%s'", what, range, map->items[i]);
        }
        if (map->n >= 64)
                return brig_err(err, EINVAL, "%s map '%s': at most 64 ranges", what, range);
        return strv_push(map, range) < 0 ? brig_err(err, ENOMEM, "%s map", what) : 0;
}

int brig_policy_add_uid_map(brig_policy *p, const char *range, brig_error **err)
{
        return add_map(&p->uid_map, "uid", range, err);
}

int brig_policy_add_gid_map(brig_policy *p, const char *range, brig_error **err)
{
        return add_map(&p->gid_map, "gid", range, err);
}

int brig_policy_set_clock_start(brig_policy *p, const char *duration, brig_error **err)
{
        uint64_t ms;
        char *d = NULL;
        if (duration && brig_parse_duration(duration, &ms, err) < 0)
                return -EINVAL;
        if (duration && ms > (100ULL * 365 * 86400 * 1000))
                return brig_err(err, ERANGE, "'%s': at most 100 years", duration);
        if (duration && !(d = strdup(duration)))
                return brig_err(err, ENOMEM, "clock start");
        free(p->clock_start);
        p->clock_start = d;
        return 0;
}

void brig_policy_set_tty(brig_policy *p, enum brig_tty_mode mode)
{
        p->tty = mode;
}

void brig_policy_set_terminal_passthrough(brig_policy *p, bool on)
{
        p->terminal_passthrough = on;
}

static int set_path(char **slot, const char *what, const char *path, brig_error **err)
{
        if (!path || !*path)
                return brig_err(err, EINVAL, "%s path is empty", what);
        char *d = strdup(path);
        if (!d)
                return brig_err(err, ENOMEM, "%s path", what);
        free(*slot);
        *slot = d;
        return 0;
}

int brig_policy_set_report_path(brig_policy *p, const char *path, brig_error **err)
{
        int r = set_path(&p->report_path, "report", path, err);
        if (r == 0)
                p->report_fd = 0;
        return r;
}

int brig_policy_set_manifest_path(brig_policy *p, const char *path, brig_error **err)
{
        return set_path(&p->manifest_path, "manifest", path, err);
}

int brig_policy_set_audit_path(brig_policy *p, const char *path, brig_error **err)
{
        int r = set_path(&p->audit_path, "audit", path, err);
        if (r == 0)
                p->audit_fd = 0;
        return r;
}

/* Checked here for the flag's error and again when a run opens it
 * (output_fd): the number names the caller's descriptor, which must be
 * open for writing, and is not one the command gets. */
static int set_output_fd(brig_policy *p, int *slot, char **path, const char *flag, int fd, brig_error **err)
{
        if (fd < 3)
                return brig_err(err, EINVAL, "%s %d: 0, 1 and 2 are the command's stdio; give a descriptor "
                                             "from 3 up that brig inherits (e.g. 3>report.json, or a pipe)", flag, fd);
        for (size_t i = 0; i < p->n_pass_fds; i++)
                if (p->pass_fds[i] == fd)
                        return brig_err(err, EINVAL, "%s %d: the descriptor is also given to --pass-fd; the "
                                                     "sandbox never gets brig's outputs", flag, fd);
        if ((slot == &p->report_fd ? p->audit_fd : p->report_fd) == fd)
                return brig_err(err, EINVAL, "%s %d: the same descriptor as the other output "
                                             "(--json-report-fd and --audit-fd need one each)", flag, fd);
        int r = output_fd_check(fd, flag, err);
        if (r < 0)
                return r;
        *slot = fd;
        free(*path);
        *path = NULL;
        return 0;
}

int brig_policy_set_report_fd(brig_policy *p, int fd, brig_error **err)
{
        return set_output_fd(p, &p->report_fd, &p->report_path, "--json-report-fd", fd, err);
}

int brig_policy_set_audit_fd(brig_policy *p, int fd, brig_error **err)
{
        return set_output_fd(p, &p->audit_fd, &p->audit_path, "--audit-fd", fd, err);
}

void brig_policy_set_wall(brig_policy *p, enum brig_wall wall)
{
        p->wall = wall;
}

void brig_policy_set_net_mode(brig_policy *p, enum brig_net_mode mode)
{
        p->net_mode = mode;
        p->net_mode_set = true;
}

int brig_policy_allow_unix(brig_policy *p, const char *path, brig_error **err)
{
        if (!path || path[0] != '/')
                return brig_err(err, EINVAL, "unix socket '%s': expected an absolute path", path ? path : "");
        _cleanup_free_ char *norm = path_normalize(path);
        if (!norm)
                return brig_err(err, errno == ENOMEM ? ENOMEM : EINVAL, "unix socket '%s': '.' and '..' are not allowed",
                                path);
        if (strlen(norm) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return brig_err(err, ENAMETOOLONG, "unix socket '%s': longer than a socket address holds (107 bytes)",
                                path);
        if (strv_contains(&p->allow_unix, norm))
                return 0;
        return strv_push(&p->allow_unix, norm) < 0 ? brig_err(err, ENOMEM, "unix socket") : 0;
}

int brig_policy_allow_host(brig_policy *p, const char *pattern, brig_error **err)
{
        return egress_policy_allow_host(&p->egress, pattern, err);
}

int brig_policy_allow_private_host(brig_policy *p, const char *pattern, brig_error **err)
{
        return egress_policy_allow_private_host(&p->egress, pattern, err);
}

int brig_policy_deny_host(brig_policy *p, const char *pattern, brig_error **err)
{
        return egress_policy_deny_host(&p->egress, pattern, err);
}

int brig_policy_allow_cidr(brig_policy *p, const char *cidr_port, brig_error **err)
{
        return egress_policy_allow_cidr(&p->egress, cidr_port, err);
}

int brig_policy_add_resolve(brig_policy *p, const char *host_addr, brig_error **err)
{
        return egress_policy_add_resolve(&p->egress, host_addr, err);
}

int brig_policy_set_upstream_proxy(brig_policy *p, const char *url, brig_error **err)
{
        return egress_policy_set_upstream(&p->egress, url, err);
}

static struct intercept_policy **intercept_of(brig_policy *p, brig_error **err)
{
        struct intercept_policy **ip = egress_policy_intercept(&p->egress);
        if (!ip)
                brig_err(err, ENOMEM, "policy");
        return ip;
}

int brig_policy_add_secret(brig_policy *p, const char *spec, brig_error **err)
{
        struct intercept_policy **ip = intercept_of(p, err);
        return ip ? intercept_policy_add_secret(ip, spec, err) : -ENOMEM;
}

int brig_policy_secret_host(brig_policy *p, const char *spec, brig_error **err)
{
        struct intercept_policy **ip = intercept_of(p, err);
        return ip ? intercept_policy_secret_host(ip, spec, err) : -ENOMEM;
}

int brig_policy_secret_header(brig_policy *p, const char *spec, brig_error **err)
{
        struct intercept_policy **ip = intercept_of(p, err);
        return ip ? intercept_policy_secret_header(ip, spec, err) : -ENOMEM;
}

int brig_policy_add_upstream_ca(brig_policy *p, const char *path, brig_error **err)
{
        struct intercept_policy **ip = intercept_of(p, err);
        return ip ? intercept_policy_add_upstream_ca(ip, path, err) : -ENOMEM;
}

int brig_policy_add_http_rule(brig_policy *p, const char *rule, brig_error **err)
{
        struct intercept_policy **ip = intercept_of(p, err);
        return ip ? intercept_policy_add_rule_text(ip, rule, err) : -ENOMEM;
}

int brig_policy_add_syscall_rule(brig_policy *p, const char *name, const char *action, brig_error **err)
{
        return seccomp_policy_add(&p->seccomp, name, action, err);
}

int brig_policy_allow_degraded(brig_policy *p, const char *control, brig_error **err)
{
        if (control && strcmp(control, "landlock") == 0)
                p->allow_degraded |= DEGRADE_LANDLOCK;
        else if (control && strcmp(control, "seccomp") == 0)
                p->allow_degraded |= DEGRADE_SECCOMP;
        else if (control && strcmp(control, "memory") == 0)
                p->allow_degraded |= DEGRADE_MEMORY;
        else if (control && strcmp(control, "pids") == 0)
                p->allow_degraded |= DEGRADE_PIDS;
        else if (control && strcmp(control, "cpus") == 0)
                p->allow_degraded |= DEGRADE_CPUS;
        else if (control && strcmp(control, "io") == 0)
                p->allow_degraded |= DEGRADE_IO;
        else
                return brig_err(err, EINVAL,
                                "--allow-degraded '%s': expected landlock, seccomp, memory, pids, cpus or io",
                                control ? control : "");
        return 0;
}

void brig_policy_set_notice(brig_policy *p, brig_notice_fn fn, void *data)
{
        p->notice = fn;
        p->notice_data = data;
}

int brig_policy_set_limit(brig_policy *p, enum brig_limit which, uint64_t value, brig_error **err)
{
        struct limits *l = &p->limits;
        switch (which) {
        case BRIG_LIMIT_MEMORY:
                if (value && value < (1ULL << 20))
                        return brig_err(err, EINVAL, "memory limit %llu bytes: at least 1M", (unsigned long long)value);
                l->memory = value;
                return 0;
        case BRIG_LIMIT_PIDS: l->pids = value; return 0;
        case BRIG_LIMIT_CPUS_MILLI:
                if (value && (value < 10 || value > 4096000))
                        return brig_err(err, EINVAL, "cpu limit: between 0.01 and 4096 cores");
                l->cpus_millis = value;
                return 0;
        case BRIG_LIMIT_IO_WEIGHT:
                if (value > 10000)
                        return brig_err(err, EINVAL, "io weight %llu: expected 1 to 10000", (unsigned long long)value);
                l->io_weight = (unsigned)value;
                return 0;
        case BRIG_LIMIT_TIMEOUT_MS: l->timeout_ms = value; return 0;
        case BRIG_LIMIT_KILL_AFTER_MS: l->kill_after_ms = value; return 0;
        case BRIG_LIMIT_CPU_TIME_S: l->cpu_time_s = value; return 0;
        case BRIG_LIMIT_NOFILE:
                if (value && value < 16)
                        return brig_err(err, EINVAL, "nofile %llu: at least 16", (unsigned long long)value);
                l->nofile = value;
                return 0;
        case BRIG_LIMIT_NPROC: l->nproc = value; return 0;
        case BRIG_LIMIT_FSIZE: l->fsize = value; return 0;
        case BRIG_LIMIT_STACK:
                if (value && value < (64ULL << 10))
                        return brig_err(err, EINVAL, "stack limit: at least 64K");
                l->stack = value;
                return 0;
        case BRIG_LIMIT_CHANGES_MAX: l->changes_max = value; return 0;
        }
        return brig_err(err, EINVAL, "unknown limit %d", (int)which);
}

uint64_t brig_policy_get_limit(const brig_policy *p, enum brig_limit which)
{
        const struct limits *l = &p->limits;
        switch (which) {
        case BRIG_LIMIT_MEMORY: return l->memory;
        case BRIG_LIMIT_PIDS: return l->pids;
        case BRIG_LIMIT_CPUS_MILLI: return l->cpus_millis;
        case BRIG_LIMIT_IO_WEIGHT: return l->io_weight;
        case BRIG_LIMIT_TIMEOUT_MS: return l->timeout_ms;
        case BRIG_LIMIT_KILL_AFTER_MS: return l->kill_after_ms;
        case BRIG_LIMIT_CPU_TIME_S: return l->cpu_time_s;
        case BRIG_LIMIT_NOFILE: return l->nofile;
        case BRIG_LIMIT_NPROC: return l->nproc;
        case BRIG_LIMIT_FSIZE: return l->fsize;
        case BRIG_LIMIT_STACK: return l->stack;
        case BRIG_LIMIT_CHANGES_MAX: return l->changes_max;
        }
        return 0;
}

void brig_policy_require_limits(brig_policy *p, bool required)
{
        p->limits.required = required;
}

int brig_parse_duration(const char *text, uint64_t *ms, brig_error **err)
{
        /* "1h30m", "90s", "500ms", "1.5h"; a bare number is seconds */
        static const char expected[] = "expected a duration like 90s, 10m, 1h30m or 500ms";
        if (!text || !*text)
                return brig_err(err, EINVAL, "duration '': %s", expected);
        double total = 0;
        const char *p = text;
        while (*p) {
                size_t digits = strspn(p, "0123456789.");
                if (digits == 0 || strspn(p, "0123456789") == 0 || memchr(p, '.', digits) != memrchr(p, '.', digits))
                        return brig_err(err, EINVAL, "duration '%s': %s", text, expected);
                double v = strtod(p, NULL);
                p += digits;
                double unit;
                if (strncmp(p, "ms", 2) == 0) { unit = 1; p += 2; }
                else if (*p == 's') { unit = 1000; p++; }
                else if (*p == 'm') { unit = 60000; p++; }
                else if (*p == 'h') { unit = 3600000; p++; }
                else if (*p == 'd') { unit = 86400000; p++; }
                else if (*p == '\0' && p == text + digits) { unit = 1000; }
                else return brig_err(err, EINVAL, "duration '%s': %s", text, expected);
                total += v * unit;
        }
        if (total >= 1e15)
                return brig_err(err, ERANGE, "duration '%s' is too long", text);
        *ms = (uint64_t)total;
        return 0;
}

int brig_parse_size(const char *text, uint64_t *bytes, brig_error **err)
{
        if (!text || !*text)
                return brig_err(err, EINVAL, "size '': expected a number with an optional unit (K, M, G, T)");
        char *end = NULL;
        errno = 0;
        /* digits with at most one '.': strtod alone would take hex and exponents */
        size_t digits = strspn(text, "0123456789");
        if (digits == 0)
                goto bad;
        if (text[digits] == '.' && !isdigit((unsigned char)text[digits + 1]))
                goto bad;
        if (text[digits] == '.' && strspn(text + digits + 1, "0123456789") == 0)
                goto bad;
        if (strchr(text, 'x') || strchr(text, 'X') || strpbrk(text, "eEpP+-"))
                goto bad;
        double v = strtod(text, &end);
        if (errno || end == text || !isfinite(v) || v < 0)
                goto bad;
        uint64_t mult = 1;
        switch (toupper((unsigned char)*end)) {
        case '\0': break;
        case 'B': mult = 1; end++; goto tail;
        case 'K': mult = 1ULL << 10; end++; break;
        case 'M': mult = 1ULL << 20; end++; break;
        case 'G': mult = 1ULL << 30; end++; break;
        case 'T': mult = 1ULL << 40; end++; break;
        default: goto bad;
        }
        /* accept "512M", "512MB", "512MiB" */
        if (*end == 'i' || *end == 'I')
                end++;
        if (*end == 'B' || *end == 'b')
                end++;
tail:
        if (*end != '\0')
                goto bad;
        double total = v * (double)mult;
        if (total >= 18446744073709551615.0)
                return brig_err(err, ERANGE, "size '%s' is too large", text);
        *bytes = (uint64_t)total;
        return 0;
bad:
        return brig_err(err, EINVAL, "size '%s': expected a number with an optional unit (K, M, G, T)", text);
}

const char *brig_reason_name(enum brig_reason r)
{
        static const char *const names[] = {
                [BRIG_REASON_EXITED] = "exited", [BRIG_REASON_SIGNALED] = "signaled",
                [BRIG_REASON_TIMEOUT] = "timeout", [BRIG_REASON_OOM] = "oom",
                [BRIG_REASON_PIDS] = "pids", [BRIG_REASON_SECCOMP] = "seccomp",
                [BRIG_REASON_DETACHED] = "detached",
        };
        if ((unsigned)r < ARRAY_SIZE(names) && names[r])
                return names[r];
        return "unknown";
}

const char *brig_version(void)
{
        return BRIG_VERSION;
}
