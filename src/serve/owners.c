/* owners.c — who owns which sandbox, recorded in the server's own
 * directory so a restarted server knows (the sandboxes live on under
 * their supervisors), and what a caller's policy may name.
 *
 * A root server creating a sandbox for uid 1000 is a deputy with more
 * rights than its caller: a policy that binds /etc or /root, a workspace
 * in someone else's home, keep_env of the server's environment, copy-ins
 * of the server's files, the server's ssh-agent, a report written as root
 * anywhere — each would hand the caller what it could not reach itself.
 * So the host paths a caller names are opened AS THE CALLER (a child that
 * has dropped to its uid and groups), and what names the server's own
 * resources is refused for anyone but the server's user and root. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

static int owners_dir(char *buf, size_t size)
{
        int n = snprintf(buf, size, "%s/owners", serve_cfg.dir);
        return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

json_t *owner_read(const char *name)
{
        char dir[PATH_MAX], path[PATH_MAX + 80];
        if (!serve_name_valid(name) || owners_dir(dir, sizeof dir) < 0)
                return NULL;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        json_error_t je;
        json_t *rec = json_load_file(path, 0, &je);
        if (rec && !json_is_object(rec)) {
                json_decref(rec);
                rec = NULL;
        }
        return rec;
}

uid_t owner_of(const char *name)
{
        _serve_json_ json_t *rec = owner_read(name);
        json_t *u = rec ? json_object_get(rec, "uid") : NULL;
        return json_is_integer(u) ? (uid_t)json_integer_value(u) : serve_cfg.uid;
}

int owner_update(const char *name, json_t *rec)
{
        char dir[PATH_MAX], path[PATH_MAX + 80], tmp[PATH_MAX + 100];
        if (!serve_name_valid(name) || owners_dir(dir, sizeof dir) < 0)
                return -EINVAL;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, gettid());
        /* whole or not at all: a server killed mid-write leaves the old record */
        if (json_dump_file(rec, tmp, JSON_COMPACT) < 0)
                return -EIO;
        if (rename(tmp, path) < 0) {
                int e = errno;
                unlink(tmp);
                return -e;
        }
        return 0;
}

int owner_record(const char *name, uid_t uid, bool workspace_ours, const char *policy_json, brig_error **err)
{
        json_t *pol = policy_json ? json_loads(policy_json, 0, NULL) : NULL;
        _serve_json_ json_t *rec = json_pack("{s:i, s:b, s:o, s:[]}", "uid", (int)uid, "workspace_ours",
                                             workspace_ours, "policy", pol ? pol : json_null(), "live_rules");
        int r = rec ? owner_update(name, rec) : -ENOMEM;
        if (r < 0)
                serve_err(err, -r, "record the owner of '%s' in %s/owners (brig serve --state): %s", name,
                          serve_cfg.dir, strerror(-r));
        return r;
}

void owner_forget(const char *name)
{
        char dir[PATH_MAX], path[PATH_MAX + 80];
        if (!serve_name_valid(name) || owners_dir(dir, sizeof dir) < 0)
                return;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        unlink(path);
}

bool owner_visible(const struct req *r, const char *name)
{
        return r->uid == 0 || owner_of(name) == r->uid;
}

unsigned owner_count(uid_t uid)
{
        brig_error *e = NULL;
        _serve_free_ char *list = brig_sandbox_list_json(&e);
        brig_error_free(&e);
        _serve_json_ json_t *arr = list ? json_loads(list, 0, NULL) : NULL;
        unsigned n = 0;
        size_t i;
        json_t *row;
        json_array_foreach(arr, i, row) {
                /* what a server created for them (a record); the server's
                 * user's own `brig create`s are not the server's to count */
                const char *name = json_string_value(json_object_get(row, "name"));
                _serve_json_ json_t *rec = name ? owner_read(name) : NULL;
                json_t *u = rec ? json_object_get(rec, "uid") : NULL;
                if (json_is_integer(u) && (uid_t)json_integer_value(u) == uid)
                        n++;
        }
        return n;
}

/* ---- the deputy check --------------------------------------------------- */

struct path_check {
        const char *path;
        const char *field;
        bool write;
};

/* Open each path as the caller, in a child: uid, gid and supplementary
 * groups dropped to theirs first (fs permissions are what decide), so
 * what they could not open themselves is refused. The child does nothing
 * but syscalls: the server has threads, and their locks are not the
 * child's. Returns the index of the first refused path, or -1. */
static int check_as_caller(const struct req *r, const struct path_check *checks, size_t n, int *errnum)
{
        gid_t groups[64];
        int ngroups = 64;
        char buf[4096];
        struct passwd pw, *pwp = NULL;
        if (getpwuid_r(r->uid, &pw, buf, sizeof buf, &pwp) != 0 || !pwp ||
            getgrouplist(pw.pw_name, r->gid, groups, &ngroups) < 0) {
                /* no passwd entry (or too many groups): the primary gid alone */
                groups[0] = r->gid;
                ngroups = 1;
        }
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                *errnum = errno;
                return 0;
        }
        pid_t pid = fork();
        if (pid < 0) {
                *errnum = errno;
                close(pfd[0]);
                close(pfd[1]);
                return 0;
        }
        if (pid == 0) {
                int out[2] = { -1, 0 };
                if (setgroups((size_t)ngroups, groups) < 0 || setresgid(r->gid, r->gid, r->gid) < 0 ||
                    setresuid(r->uid, r->uid, r->uid) < 0) {
                        out[0] = 0, out[1] = errno;
                } else {
                        for (size_t i = 0; i < n; i++) {
                                int fd = open(checks[i].path, (checks[i].write ? O_RDWR : O_RDONLY) | O_NOFOLLOW |
                                                                      O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
                                if (fd < 0 && errno == EISDIR)
                                        fd = open(checks[i].path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                                if (fd >= 0 && checks[i].write) {
                                        /* a directory: may they write into it? */
                                        struct stat st;
                                        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
                                            faccessat(fd, ".", W_OK | X_OK, 0) < 0) {
                                                close(fd);
                                                fd = -1;
                                        }
                                }
                                if (fd < 0) {
                                        out[0] = (int)i, out[1] = errno;
                                        break;
                                }
                                close(fd);
                        }
                }
                (void)!write(pfd[1], out, sizeof out);
                _exit(0);
        }
        close(pfd[1]);
        int out[2] = { 0, EIO };
        ssize_t got = read(pfd[0], out, sizeof out);
        close(pfd[0]);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (got != sizeof out) {
                *errnum = EIO;
                return 0;
        }
        *errnum = out[1];
        return out[0];
}

int owner_check_policy(const struct req *r, json_t *policy, const char *workspace, bool workspace_readonly,
                       const char **field, char *msg, size_t msg_size)
{
        if (r->uid == 0 || r->uid == serve_cfg.uid)
                return 0;
        /* what names the server's own resources: nobody else may */
        static const struct {
                const char *section, *key;
        } refused[] = {
                { "process", "keep_env" }, { "tools", NULL }, { "network", "allow_unix" },
                { NULL, "audit" }, { NULL, "report" },
        };
        for (size_t i = 0; policy && i < sizeof refused / sizeof refused[0]; i++) {
                json_t *sec = refused[i].section ? json_object_get(policy, refused[i].section) : policy;
                json_t *v = refused[i].key ? json_object_get(sec, refused[i].key) : sec;
                bool set = v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0) &&
                           !(json_is_object(v) && json_object_size(v) == 0) && !json_is_false(v);
                if (!set)
                        continue;
                static __thread char name[64];
                snprintf(name, sizeof name, "policy.%s%s%s", refused[i].section ? refused[i].section : "",
                         refused[i].section && refused[i].key ? "." : "", refused[i].key ? refused[i].key : "");
                *field = name;
                snprintf(msg, msg_size, "%s names the server's own environment, files or sockets: only the "
                                        "server's user (uid %u) or root may use it", name, serve_cfg.uid);
                return -EACCES;
        }
        struct path_check checks[65];
        size_t n = 0;
        if (workspace)
                checks[n++] = (struct path_check){ workspace, "workspace", !workspace_readonly };
        json_t *binds = json_object_get(json_object_get(policy, "filesystem"), "binds");
        size_t i;
        json_t *b;
        json_array_foreach(binds, i, b) {
                const char *src = json_string_value(json_object_get(b, "source"));
                if (!src)
                        continue;
                if (n == 64) {
                        *field = "policy.filesystem.binds";
                        snprintf(msg, msg_size, "more than 63 binds");
                        return -EACCES;
                }
                checks[n++] = (struct path_check){ src, "policy.filesystem.binds", !json_is_true(json_object_get(b, "readonly")) };
        }
        /* A secret's value is read by the supervisor, as the server's user:
         * env:VAR is the server's own environment, and an @FILE checked here
         * as the caller is opened again by the supervisor later, with the
         * server's rights, following whatever the caller swapped in between
         * (a loop of swaps won that race once in ~80 creates). So no
         * caller but the server's user and root has scoped secrets here.
         * A CA file is checked like a bind (it is parsed, never shown). */
        json_t *net = json_object_get(policy, "network");
        json_t *secrets = json_object_get(net, "secrets"), *cas = json_object_get(net, "upstream_ca");
        json_t *s;
        json_array_foreach(secrets, i, s) {
                const char *src = json_string_value(json_object_get(s, "source"));
                if (!src)
                        continue;
                *field = "policy.network.secrets";
                if (src[0] != '@') {
                        snprintf(msg, msg_size, "policy.network.secrets '%.200s' names the server's own environment: "
                                                "only the server's user (uid %u) or root may use it", src, serve_cfg.uid);
                        return -EACCES;
                }
                snprintf(msg, msg_size, "policy.network.secrets '%.200s': this server (uid %u) would read the file "
                                        "with its own rights after any check made as uid %u, so a file swapped in "
                                        "between would be the server's; for scoped secrets run brig serve as uid %u",
                         src, serve_cfg.uid, r->uid, r->uid);
                return -EACCES;
        }
        json_array_foreach(cas, i, s) {
                if (!json_is_string(s))
                        continue;
                if (n == 64) {
                        *field = "policy.network.upstream_ca";
                        snprintf(msg, msg_size, "more than 63 host paths");
                        return -EACCES;
                }
                checks[n++] = (struct path_check){ json_string_value(s), "policy.network.upstream_ca", false };
        }
        if (!n)
                return 0;
        int errnum = 0;
        int bad = check_as_caller(r, checks, n, &errnum);
        if (bad < 0)
                return 0;
        *field = checks[bad].field;
        snprintf(msg, msg_size, "%s '%s': uid %u cannot %s it (%s): a sandbox reaches only what its caller could",
                 checks[bad].field, checks[bad].path, r->uid, checks[bad].write ? "write" : "read", strerror(errnum));
        return -EACCES;
}

int owner_recheck(const struct req *r, const char *name, const char **field, char *msg, size_t msg_size)
{
        if (r->uid == 0 || r->uid == serve_cfg.uid)
                return 0;
        _serve_json_ json_t *rec = owner_read(name);
        json_t *c = json_object_get(rec, "checked");
        if (!json_is_object(c))
                return 0;  /* no deputy check was made: not a caller's create (owner_visible decides who sees it) */
        return owner_check_policy(r, json_object_get(c, "policy"), json_string_value(json_object_get(c, "workspace")),
                                  json_is_true(json_object_get(c, "workspace_readonly")), field, msg, msg_size);
}

char *owner_workspace_make(const char *name, brig_error **err)
{
        char *dir = NULL;
        if (asprintf(&dir, "%s/workspaces/%s", serve_cfg.dir, name) < 0) {
                serve_err(err, ENOMEM, "the server's workspace for '%s'", name);
                return NULL;
        }
        /* a new one: what was there of a dead sandbox of that name is gone (create_locked) */
        if (mkdir(dir, 0700) < 0) {
                serve_err(err, errno, "make the workspace %s (brig serve --state): %s", dir, strerror(errno));
                free(dir);
                return NULL;
        }
        return dir;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        remove(path);
        return 0;
}

void owner_workspace_remove(const char *name)
{
        char dir[PATH_MAX + 80];
        if (!serve_name_valid(name))
                return;
        snprintf(dir, sizeof dir, "%s/workspaces/%s", serve_cfg.dir, name);
        /* FTW_PHYS: a symlink the sandbox planted is removed, never followed;
         * FTW_MOUNT: never into another filesystem */
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
