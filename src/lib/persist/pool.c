/* pool.c — a warm pool: ready persistent sandboxes for one policy and
 * workspace, so that `brig run --pooled` skips building namespaces, mounts
 * and the cgroup and only forks its command in one (exec), and a fresh
 * one takes its place in the background.
 *
 * Each pooled sandbox serves exactly one run, then is removed: nothing a
 * run leaves behind ($HOME, /tmp, processes) reaches the next one. A run
 * whose policy or workspace differs from the pool's (or that finds no
 * ready sandbox) runs as a plain brig run.
 *
 * State: ROOT/pools/KEY/ (KEY: a hash of the policy as JSON and the
 * workspace) with the pool daemon's pid and start time in pool.json and
 * one empty file per member in ready/, claimed/ and done/. A run claims a
 * member by rename(ready/M, claimed/M.PID-START-PIDNS): atomic, so two runs
 * never share one, and the claimed name says which run holds it. The
 * daemon (brig-supervisor with a pool's configuration: pool_supervise,
 * started by brig_pool_start through supervisor_start) removes the
 * members of claims whose run has exited (the run leaves its claim as it
 * is: nothing on its path but the one rename) and those in done/ (whose
 * supervisor died before a run), and creates new ones. A pool whose daemon
 * is gone (SIGKILL) is removed by the next brig (pool_sweep): its ready
 * and done members, those claimed by a run that is gone too, the pool's
 * directory. */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "core/model.h"
#include "core/plan.h"
#include "core/report.h"
#include "persist/control.h"
#include "persist/overlay.h"
#include "persist/pool.h"
#include "persist/pool_claim.h"
#include "persist/sandbox.h"
#include "core/reaper.h"
#include "persist/state.h"
#include "core/fsutil.h"
#include "net/egress.h"
#include "net/intercept.h"
#include "engine/supervisor_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

static const char *const subdirs[] = { "ready", "claimed", "done" };

/* How often the daemon looks at its pool (claims of runs killed before
 * their exec, members it could not watch), when no member's end wakes it
 * first. */
#define POOL_TICK_MS 500
/* How long runs holding members may hold the refill back (wait_for_runs). */
#define POOL_CLAIM_GRACE_MS 200
/* A member is made only once the pool has been quiet this long (no run
 * holding a member, no member ending): a run that follows another
 * within it finds the cores free, not shared with a member being made.
 * Runs that never pause hold the refill back POOL_REFILL_MAX_MS at most. */
#define POOL_QUIET_MS 25
#define POOL_REFILL_MAX_MS 250

/* The policy a pool is for: what a run asks beside it (the report it
 * writes, an exec's) does not choose another pool. */
static char *pool_policy_json(const brig_policy *p, brig_error **err)
{
        brig_policy view = *p;  /* shallow: only read */
        view.report_path = NULL;
        view.report_fd = 0;
        return brig_policy_to_json(&view, err);
}

void pool_remember_plain(const brig_policy *p)
{
        /* what the front end takes for granted of such a policy: no bind
         * (plan_sources_identity then names the workspace alone), no
         * further variable in the caller's context, the workspace the
         * current directory */
        const struct intercept_policy *ip = egress_policy_intercept_of(p->egress);
        if (p->n_mounts || p->keep_env.n || (ip && ip->n_secrets) || p->workspace || p->rootfs || p->cwd)
                return;
        _cleanup_close_ int exe = open("/proc/self/exe", O_PATH | O_CLOEXEC);
        char name[POOL_PLAIN_NAME_LEN];
        _cleanup_close_ int cache = exe >= 0 && pool_plain_name(exe, name) == 0 ? state_cache_dir_open(NULL) : -1;
        if (cache < 0)
                return;
        brig_policy untimed = *p;  /* shallow: only read */
        untimed.timings = false;
        _cleanup_free_ char *json = pool_policy_json(&untimed, NULL);
        _cleanup_free_ char *text = json ? brig_strdup_printf("%s\numask=%d fixed=%u\n%s", POOL_PLAIN_MAGIC,
                                                              p->umask ? 0 : 1, plan_fixed_rlimits(p), json)
                                         : NULL;
        if (!text)
                return;
        size_t len = strlen(text);
        /* there already, as the front end trusts it and as we would write
         * it: nothing to do; anything else is replaced */
        _cleanup_close_ int old = openat(cache, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        _cleanup_free_ char *was = old >= 0 && fstat(old, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                                                   st.st_nlink == 1 && !(st.st_mode & 022) && (size_t)st.st_size == len
                                           ? calloc(1, len + 1)
                                           : NULL;
        if (was && read(old, was, len) == (ssize_t)len && memcmp(was, text, len) == 0)
                return;
        _cleanup_close_ int fd = openat(cache, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0 && write(fd, text, len) == (ssize_t)len)
                (void)tmpfile_link_over(fd, cache, name);
}

static void context_free(char **context)
{
        if (*context)
                explicit_bzero(*context, strlen(*context));
        free(*context);
}

/* The pool for a policy, a workspace and what the plan reads from the
 * caller's environment (plan_caller_context: a member made from another
 * environment would give the run another $HOME, TERM or --keep-env value
 * than a cold brig run of its caller). The member compares the text
 * itself (control.c); the key only names the pool. */
struct pool {
        char *key, *dir;
        char *json, *ws, *context;  /* what names it: the policy, the workspace, the caller's environment */
        char owner[96];             /* PID-START-PIDNS of this run, once claimed_path made it */
};

static char *pool_key(struct pool *pl, const brig_policy *p, brig_error **err)
{
        pl->json = pool_policy_json(p, err);
        _cleanup_free_ char *ws = p->workspace ? strdup(p->workspace) : getcwd(NULL, 0);
        pl->ws = ws ? path_normalize(ws) : NULL;
        pl->context = plan_caller_context(p);
        if (!pl->json || !pl->ws || !pl->context) {
                brig_err(err, errno ? errno : ENOMEM, "pool key");
                return NULL;
        }
        char *key = malloc(POOL_KEY_LEN + 1);
        if (key)
                pool_key_text(pl->json, pl->ws, pl->context, key);
        return key;
}

static void pool_free(struct pool *pl)
{
        free(pl->key);
        free(pl->dir);
        free(pl->json);
        free(pl->ws);
        context_free(&pl->context);
}

static int pool_open(const brig_policy *p, bool create, struct pool *pl, brig_error **err)
{
        memset(pl, 0, sizeof *pl);
        _cleanup_free_ char *root = NULL;
        int r = state_root(create, &root, err);
        if (r < 0)
                return r;
        pl->key = pool_key(pl, p, err);
        if (!pl->key)
                return -ENOMEM;
        _cleanup_free_ char *pools = brig_strdup_printf("%s/pools", root);
        pl->dir = brig_strdup_printf("%s/pools/%s", root, pl->key);
        if (!pools || !pl->dir)
                return brig_err(err, ENOMEM, "pool");
        if (!create)
                return 0;
        if ((mkdir(pools, 0700) < 0 && errno != EEXIST) || (mkdir(pl->dir, 0700) < 0 && errno != EEXIST))
                return brig_err(err, errno, "create the pool directory '%s'", pl->dir);
        for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
                _cleanup_free_ char *d = brig_strdup_printf("%s/%s", pl->dir, subdirs[i]);
                if (!d || (mkdir(d, 0700) < 0 && errno != EEXIST))
                        return brig_err(err, d ? errno : ENOMEM, "create '%s/%s'", pl->dir, subdirs[i]);
        }
        return 0;
}

static char *member_path(const struct pool *pl, const char *sub, const char *name)
{
        return brig_strdup_printf("%s/%s/%s", pl->dir, sub, name);
}

static int touch(const char *path)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

static size_t count_in(const struct pool *pl, const char *sub)
{
        _cleanup_free_ char *d = brig_strdup_printf("%s/%s", pl->dir, sub);
        DIR *dir = d ? opendir(d) : NULL;
        size_t n = 0;
        struct dirent *e;
        while (dir && (e = readdir(dir)))
                n += state_name_valid(e->d_name);
        if (dir)
                closedir(dir);
        return n;
}

/* Remove every member listed in `sub` (done/, or all of them at the end). */
static void remove_members(const struct pool *pl, const char *sub)
{
        _cleanup_free_ char *d = brig_strdup_printf("%s/%s", pl->dir, sub);
        DIR *dir = d ? opendir(d) : NULL;
        struct dirent *e;
        while (dir && (e = readdir(dir))) {
                if (!state_name_valid(e->d_name))
                        continue;
                brig_error *err = NULL;
                if (brig_sandbox_remove(e->d_name, &err) < 0 && err && err->errnum != ENOENT)
                        fprintf(stderr, "brig pool: %s\n", err->msg);
                brig_error_free(&err);
                _cleanup_free_ char *m = member_path(pl, sub, e->d_name);
                if (m)
                        unlink(m);
        }
        if (dir)
                closedir(dir);
}

static json_t *pool_state(const struct pool *pl);

/* pool.json names the process that answers for the pool: brig pool while
 * it starts the daemon, then the daemon. Written whole (a rename). */
/* pool.json: who answers for the pool, and, while the daemon's last
 * attempt to make a member failed, why (a run waiting for a member says
 * it rather than waiting out its time). */
static int pool_state_write(const struct pool *pl, unsigned size, const char *failing)
{
        json_t *st = json_pack("{s:I, s:I, s:I}", "supervisor_pid", (json_int_t)getpid(), "supervisor_start",
                               (json_int_t)state_process_start(getpid()), "size", (json_int_t)size);
        if (st && pl->ws)  /* for brig pool --list */
                json_object_set_new(st, "workspace", json_string(pl->ws));
        if (st && failing)
                json_object_set_new(st, "failing", json_string(failing));
        _cleanup_free_ char *tmp = brig_strdup_printf("%s/.pool.json.tmp", pl->dir);
        _cleanup_free_ char *path = brig_strdup_printf("%s/pool.json", pl->dir);
        int r = st && tmp && path && json_dump_file(st, tmp, 0) == 0 && rename(tmp, path) == 0 ? 0 : -EIO;
        int e = errno;
        json_decref(st);
        if (r < 0 && tmp)
                unlink(tmp);
        errno = r < 0 ? e : errno;  /* the failure's, for the message */
        return r;
}

/* Still the daemon pool.json names? A sweep that found the pool dead
 * (its starter killed just before we wrote) took it away: end. */
static bool still_ours(const struct pool *pl)
{
        json_t *st = pool_state(pl);
        bool ours = st && json_integer_value(json_object_get(st, "supervisor_pid")) == getpid();
        json_decref(st);
        return ours;
}

enum pool_wake { WAKE_TICK, WAKE_STOP, WAKE_ENDED };

/* What wakes the daemon: a stop (pf[0], its signalfd) and the end of a
 * member's supervisor (a pidfd each, of every member it made): a used
 * member's once its run is over and its end done, or one that died.
 * Nothing on a run's path wakes it: neither the claim (a rename no one
 * watches) nor the run's exit, so none of the daemon's work runs beside a
 * run it serves. The run's claim names the run; once that has exited,
 * release_gone_claims removes the member. */
struct pool_watch {
        struct pollfd *pf;
        size_t n, cap;
};

static int watch_init(struct pool_watch *w, int sfd)
{
        w->cap = 8;
        w->pf = calloc(w->cap, sizeof *w->pf);
        if (!w->pf)
                return -ENOMEM;
        w->pf[0] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        w->n = 1;
        return 0;
}

static void watch_free(struct pool_watch *w)
{
        for (size_t i = 1; i < w->n; i++)
                closep(&w->pf[i].fd);
        free(w->pf);
}

/* The supervisor of the member just made (state.json names it, with its
 * start time: a pid taken by another process since is not watched). One
 * that cannot be watched is found by the tick's scan instead. */
static void watch_member(struct pool_watch *w, const char *name)
{
        _cleanup_free_ char *sd = NULL;
        brig_error *err = NULL;
        json_t *st = state_dir(name, false, &sd, &err) == 0 ? state_read(sd, &err) : NULL;
        brig_error_free(&err);
        pid_t pid = st ? (pid_t)json_integer_value(json_object_get(st, "supervisor_pid")) : 0;
        json_t *started = st ? json_object_get(st, "supervisor_start") : NULL;
        unsigned long long start = (unsigned long long)json_integer_value(started);
        json_decref(st);
        int fd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
        if (fd >= 0 && state_process_start(pid) != start)
                closep(&fd);
        if (fd >= 0 && w->n == w->cap) {
                struct pollfd *more = realloc(w->pf, 2 * w->cap * sizeof *w->pf);
                if (more) {
                        w->pf = more;
                        w->cap *= 2;
                }
        }
        if (fd >= 0 && w->n < w->cap)
                w->pf[w->n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
        else if (fd >= 0)
                close(fd);
}

/* Wait for a stop, a member's end, or the timeout (the tick: what no
 * pidfd tells, a run killed before its exec, is found by the scans). */
static enum pool_wake pool_wait(struct pool_watch *w, int timeout_ms)
{
        if (poll(w->pf, w->n, timeout_ms) <= 0)
                return WAKE_TICK;
        struct signalfd_siginfo si;
        if (w->pf[0].revents && read(w->pf[0].fd, &si, sizeof si) == (ssize_t)sizeof si)
                return WAKE_STOP;
        enum pool_wake r = WAKE_TICK;
        for (size_t i = w->n - 1; i >= 1; i--) {
                if (!w->pf[i].revents)
                        continue;
                close(w->pf[i].fd);
                w->pf[i] = w->pf[--w->n];
                r = WAKE_ENDED;
        }
        return r;
}

static uint64_t now_ms(void)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
}

/* pidfds of the runs holding members now (claimed/NAME.PID-START-PIDNS
 * of this pid namespace, the process still the one that claimed), into
 * pf[1..max-1]; their count. */
static nfds_t claim_pidfds(const struct pool *pl, struct pollfd *pf, nfds_t max)
{
        nfds_t n = 1;
        struct owner self, o;
        owner_self(&self);
        _cleanup_free_ char *cd = brig_strdup_printf("%s/claimed", pl->dir);
        DIR *dir = cd ? opendir(cd) : NULL;
        struct dirent *e;
        while (dir && n < max && (e = readdir(dir))) {
                const char *dot = strchr(e->d_name, '.');
                if (!dot || e->d_name[0] == '.' || !owner_parse(dot + 1, &o, NULL) || o.pidns != self.pidns)
                        continue;
                int fd = (int)syscall(SYS_pidfd_open, o.pid, 0);
                if (fd >= 0 && state_process_start(o.pid) == o.start)
                        pf[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
                else if (fd >= 0)
                        close(fd);  /* another process by now: that run is gone */
        }
        if (dir)
                closedir(dir);
        return n - 1;
}

static bool runs_holding(const struct pool *pl)
{
        struct pollfd pf[2];
        nfds_t n = claim_pidfds(pl, pf, ARRAY_SIZE(pf));
        if (n)
                close(pf[1].fd);
        return n > 0;
}

/* The refill is off the path of the runs the pool serves: what it does
 * (a supervisor spawned, namespaces, mounts) competes with them for this
 * host's cores. So it first waits until the runs holding members have
 * ended, their pidfds readable, or POOL_CLAIM_GRACE_MS passed. *held:
 * there were such runs. True: a stop came meanwhile. */
static bool wait_for_runs(const struct pool *pl, int sfd, bool *held)
{
        struct pollfd pf[1 + 16] = { { .fd = sfd, .events = POLLIN } };
        nfds_t n = 1 + claim_pidfds(pl, pf, ARRAY_SIZE(pf));
        *held = n > 1;
        uint64_t t0 = now_ms(), elapsed = 0;
        bool stop = false, waiting = n > 1;
        while (!stop && waiting && elapsed < POOL_CLAIM_GRACE_MS) {
                if (poll(pf, n, (int)(POOL_CLAIM_GRACE_MS - elapsed)) > 0) {
                        struct signalfd_siginfo si;
                        stop = pf[0].revents && read(sfd, &si, sizeof si) == (ssize_t)sizeof si;
                        waiting = false;
                        for (nfds_t i = 1; i < n; i++) {
                                if (pf[i].fd >= 0 && pf[i].revents)
                                        closep(&pf[i].fd);  /* that run ended; poll skips -1 */
                                waiting |= pf[i].fd >= 0;
                        }
                }
                elapsed = now_ms() - t0;
        }
        for (nfds_t i = 1; i < n; i++)
                closep(&pf[i].fd);
        return stop;
}

/* Before each member the refill makes (but the first fill's): wait until
 * no run holds a member and none ended for POOL_QUIET_MS, or POOL_REFILL_MAX_MS went by. Making a member (a
 * supervisor spawned, namespaces, 41 mounts, a filter) costs several
 * times a pooled run's CPU; a caller that runs one command after another
 * would otherwise share this host's cores with it on every run. True: a
 * stop came meanwhile. */
static bool wait_quiet(const struct pool *pl, struct pool_watch *w)
{
        uint64_t t0 = now_ms();
        for (uint64_t spent = 0; spent < POOL_REFILL_MAX_MS; spent = now_ms() - t0) {
                bool held = false;
                if (wait_for_runs(pl, w->pf[0].fd, &held))
                        return true;
                if (held)
                        continue;  /* a run went on: the quiet starts after it */
                spent = now_ms() - t0;
                uint64_t left = POOL_REFILL_MAX_MS - (spent < POOL_REFILL_MAX_MS ? spent : POOL_REFILL_MAX_MS);
                enum pool_wake r = pool_wait(w, (int)(left < POOL_QUIET_MS ? left : POOL_QUIET_MS));
                if (r == WAKE_STOP)
                        return true;
                /* quiet: no member ended for POOL_QUIET_MS; and a run
                 * claimed meanwhile (nothing tells of a claim) holds it on */
                if (r == WAKE_TICK && !runs_holding(pl))
                        return false;
        }
        return false;
}

static bool release_gone_claims(const struct pool *pl);
static bool pool_alive(const struct pool *pl);

/* ---- names: brig pool --name NAME, for brig run --pool NAME ------------ */

/* ROOT/pools, where the pool's dir (ROOT/pools/KEY) is */
static char *pools_of(const struct pool *pl)
{
        char *pools = strdup(pl->dir);
        char *slash = pools ? strrchr(pools, '/') : NULL;
        if (slash)
                *slash = '\0';
        return pools;
}

/* The pool a name gives, or NULL (none, or not a key). */
static char *name_target(int dfd, const char *name)
{
        char key[POOL_KEY_LEN + 2];
        ssize_t n = readlinkat(dfd, name, key, sizeof key);
        if (n != POOL_KEY_LEN)
                return NULL;
        key[n] = '\0';
        return strdup(key);
}

/* ROOT/pools/names, open and flocked: who gives a name, and the sweep
 * that takes the names of dead pools, look and change under the lock, so
 * that neither acts on what the other has just changed. -errno. */
static int names_locked(const char *dir, bool create)
{
        for (int tries = 0; tries < 3; tries++) {
                if (create && mkdir(dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        return -errno;
                struct stat st;
                if (flock(dfd, LOCK_EX) == 0 && fstat(dfd, &st) == 0 && st.st_nlink > 0)
                        return dfd;
                close(dfd);  /* removed by a sweep meanwhile (it was empty): again */
                if (!create)
                        return -ENOENT;
        }
        return -EAGAIN;
}

/* Give this pool NAME: a symlink to its key, made beside and renamed
 * over a name whose pool is gone, never over a live pool's. */
static int name_give(const struct pool *pl, const char *name, brig_error **err)
{
        _cleanup_free_ char *pools = pools_of(pl);
        _cleanup_free_ char *dir = pools ? brig_strdup_printf("%s/names", pools) : NULL;
        if (!dir)
                return brig_err(err, ENOMEM, "pool name");
        _cleanup_close_ int dfd = names_locked(dir, true);
        if (dfd < 0)
                return brig_err(err, -dfd, "the pool names in '%s'", dir);
        _cleanup_free_ char *held = name_target(dfd, name);
        if (held && strcmp(held, pl->key) != 0) {
                struct pool other = { .key = held, .dir = brig_strdup_printf("%s/%s", pools, held) };
                bool alive = other.dir && pool_alive(&other);
                free(other.dir);
                if (alive)
                        return state_fail(err, EEXIST, "a pool named '%s' already runs (another policy or workspace: "
                                                       "brig pool --stop --name %s ends it)", name, name);
        }
        char tmp[96];
        snprintf(tmp, sizeof tmp, ".%s.%d", name, getpid());
        (void)unlinkat(dfd, tmp, 0);
        if (symlinkat(pl->key, dfd, tmp) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
                int e = errno;
                (void)unlinkat(dfd, tmp, 0);
                return brig_err(err, e, "name the pool '%s' in '%s'", name, dir);
        }
        return 0;
}

/* In ROOT/pools (POOLS), the names that give the pool KEY go; with KEY
 * NULL, those whose pool is gone. */
static void names_forget(const char *pools, const char *key)
{
        _cleanup_free_ char *dir = brig_strdup_printf("%s/names", pools);
        int dfd = dir ? names_locked(dir, false) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (dfd >= 0 && !d)
                close(dfd);
        struct dirent *e;
        while (d && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *target = name_target(dirfd(d), e->d_name);
#ifdef BRIG_TEST_HOOKS
                /* BRIG_TEST_PAUSE_NAME=NAME: pause at pool-name-sweep for that
                 * name only, read and not yet judged (a new name waits for the lock) */
                const char *only = getenv("BRIG_TEST_PAUSE_NAME");
                if (!only || strcmp(only, e->d_name) == 0)
                        test_pause("pool-name-sweep");
#endif
                bool gone = !target;
                if (target && !key) {
                        struct pool named = { .key = target, .dir = brig_strdup_printf("%s/%s", pools, target) };
                        gone = named.dir && !pool_alive(&named);
                        free(named.dir);
                }
                if (gone || (key && strcmp(target, key) == 0))
                        (void)unlinkat(dirfd(d), e->d_name, 0);
        }
        if (d) {
                (void)rmdir(dir);  /* only when no name is left; still locked (names_locked) */
                closedir(d);
        }
}

/* Which brig-supervisor the members are made with, as a file: an
 * upgrade or a rebuild replaces it while the daemon lives on, and the
 * ready members made before run the old program. They are remade with
 * the new one, so that a fix reaches the next run, not only the runs
 * after the pool's restart. */
struct program_id {
        dev_t dev;
        ino_t ino;
        struct timespec mtime;
        bool known;
};

/* True once the program found now is another file than the one found
 * last time (none found: not a change; the next member's making says
 * why it cannot be made). */
static bool supervisor_replaced(struct program_id *id)
{
        brig_error *err = NULL;
        _cleanup_close_ int fd = supervisor_exe_open(NULL, &err);
        brig_error_free(&err);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return false;
        bool replaced = id->known && (st.st_dev != id->dev || st.st_ino != id->ino ||
                                      st.st_mtim.tv_sec != id->mtime.tv_sec ||
                                      st.st_mtim.tv_nsec != id->mtime.tv_nsec);
        *id = (struct program_id){ .dev = st.st_dev, .ino = st.st_ino, .mtime = st.st_mtim, .known = true };
        return replaced;
}

static _Noreturn void pool_daemon(struct pool *pl, const brig_policy *p, unsigned size, int ready_fd)
{
        /* Its own work (looking at the pool, removing used members) is
         * never a run's: it yields to the runs, whose sessions are
         * others. A member it makes is a session of its own (posix_spawn
         * with POSIX_SPAWN_SETSID), at the priority runs have. */
        session_yield(MEMBER_END_NICE);
        signal(SIGPIPE, SIG_IGN);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC);
        struct pool_watch w = { 0 };
        if (sfd >= 0 && watch_init(&w, sfd) < 0)
                closep(&sfd);
        unsigned long counter = 0;
        bool told = false, failing = false;
        /* Where our own program is now, for every member to come; what
         * is found there, for the first of them. */
        supervisor_dir_pin();
        struct program_id made_with = { 0 };
        (void)supervisor_replaced(&made_with);
        while (sfd >= 0 && still_ours(pl)) {
                bool replaced = supervisor_replaced(&made_with);
                if (replaced)
                        fprintf(stderr, "brig pool: brig-supervisor was replaced (an upgrade or a rebuild): "
                                        "the ready members are made again with the new one\n");
                /* Members whose supervisor died cannot serve, nor those
                 * of a replaced program: replace them. */
                _cleanup_free_ char *rd = brig_strdup_printf("%s/ready", pl->dir);
                DIR *dir = rd ? opendir(rd) : NULL;
                struct dirent *e;
                while (dir && (e = readdir(dir))) {
                        if (!state_name_valid(e->d_name))
                                continue;
                        _cleanup_free_ char *sd = NULL;
                        brig_error *err = NULL;
                        json_t *st = state_dir(e->d_name, false, &sd, &err) == 0 ? state_read(sd, &err) : NULL;
                        brig_error_free(&err);
                        if (replaced || !st || !state_supervisor_alive(st)) {
                                _cleanup_free_ char *from = member_path(pl, "ready", e->d_name);
                                _cleanup_free_ char *to = member_path(pl, "done", e->d_name);
                                if (from && to)
                                        (void)rename(from, to);
                        }
                        json_decref(st);
                }
                if (dir)
                        closedir(dir);
                /* Runs that have exited: their members go first (each
                 * woke us by its end), before the refill waits for quiet. */
                remove_members(pl, "done");
                (void)release_gone_claims(pl);
                bool failed = false;
                bool stop = false;
                while (count_in(pl, "ready") < size && !failed && !(stop = told && wait_quiet(pl, &w))) {
                        char name[64];
                        snprintf(name, sizeof name, POOL_MEMBER_PREFIX "%.8s-%d-%lu", pl->key, getpid(), ++counter);
                        brig_error *err = NULL;
                        /* members stop when we are gone, however we went (control.c) */
                        struct sandbox_create_opts opts = { .owner_pid = getpid(),
                                                            .owner_start = state_process_start(getpid()),
                                                            .pool_member = true };
                        /* A workspace the policy does not name is our cwd: the
                         * directory at the pool's path now, not the one we
                         * started in, which a harness may have moved away
                         * (a member holding it would serve the old checkout).
                         * Reached through no symlink: the path was a real one
                         * when the pool started (getcwd), and whoever may
                         * replace a directory on it (the workspace's owner,
                         * for a root pool) must not point the next member at
                         * a directory of someone else's. */
                        if (!p->workspace) {
                                _cleanup_close_ int ws = open_dir_nofollow(pl->ws);
                                if (ws < 0 && errno == ENOSYS) {  /* before openat2 (5.6): a part at a time */
                                        ws = output_open_walk(pl->ws, O_RDONLY | O_DIRECTORY, 0);
                                        errno = ws < 0 ? -ws : 0;
                                }
                                bool moved = ws < 0 && (errno == ELOOP || errno == ENOTDIR);
                                if (ws < 0 || fchdir(ws) < 0)
                                        brig_err(&err, moved ? ENOTDIR : errno,
                                                 moved ? "the pool's workspace '%s' is no directory reached "
                                                         "through no symlink now (it was replaced since the "
                                                         "pool started): no member is made there"
                                                       : "the pool's workspace '%s'",
                                                 pl->ws);
                        }
                        if (err || sandbox_create(name, p, &opts, &err) < 0) {
                                fprintf(stderr, "brig pool: %s\n", err && err->msg ? err->msg : "create failed");
                                if (!told && ready_fd >= 0) {
                                        /* the first one failed: say why, and end */
                                        (void)!write(ready_fd, err && err->msg ? err->msg : "create failed",
                                                     strlen(err && err->msg ? err->msg : "create failed"));
                                        brig_error_free(&err);
                                        goto out;
                                }
                                failed = true;
                                if (!failing) {
                                        (void)pool_state_write(pl, size, err && err->msg ? err->msg : "create failed");
                                        failing = true;
                                }
                        } else {
                                if (failing && pool_state_write(pl, size, NULL) == 0)
                                        failing = false;
                                test_pause("pool-member-made");
                                _cleanup_free_ char *m = member_path(pl, "ready", name);
                                watch_member(&w, name);
                                if (!m || touch(m) < 0) {
                                        brig_error *rerr = NULL;
                                        (void)brig_sandbox_remove(name, &rerr);
                                        brig_error_free(&rerr);
                                        failed = true;
                                }
                        }
                        brig_error_free(&err);
                }
                if (!told && ready_fd >= 0) {
                        (void)!write(ready_fd, "", 1);  /* all ready */
                        closep(&ready_fd);
                        told = true;
                }
                /* After the refill: a used member has stopped by itself
                 * (control.c), only its state is left to remove, once
                 * the run that claimed it has exited. */
                remove_members(pl, "done");
                (void)release_gone_claims(pl);
                if (stop)
                        break;
                if (pool_wait(&w, failed ? 1000 : POOL_TICK_MS) == WAKE_STOP)
                        break;
        }
out:
        watch_free(&w);
        char *pools = pools_of(pl);
        if (pools)
                names_forget(pools, pl->key);  /* no run finds a pool by a name once it ends */
        remove_members(pl, "ready");
        remove_members(pl, "done");
        (void)release_gone_claims(pl);  /* runs that ended; a live one's member is the next brig's */
        if (count_in(pl, "claimed") == 0) {
                state_remove_tree(pl->dir, NULL);
                if (pools)
                        (void)rmdir(pools);  /* only when no other pool (nor name) is there */
        }
        free(pools);
        pool_free(pl);
        exit(0);
}

/* What brig-supervisor needs to be the pool's daemon: the pool, its
 * size and the policy, as a sandbox's supervisor gets it (a workspace it
 * does not name is the cwd, which the program keeps). */
static char *pool_config(const struct pool *pl, const brig_policy *p, unsigned size, brig_error **err)
{
        _cleanup_free_ char *policy = pool_policy_json(p, err);
        json_t *pol = policy ? json_loads(policy, 0, NULL) : NULL;
        json_t *doc = pol ? json_pack("{s:{s:s, s:s, s:s, s:I}, s:o}", "pool", "dir", pl->dir, "key", pl->key,
                                      "workspace", pl->ws, "size", (json_int_t)size, "policy", pol)
                          : NULL;  /* pol is the document's (or released with it) */
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!text)
                brig_err(err, ENOMEM, "the pool daemon's configuration");
        return text;
}

_Noreturn void pool_supervise(const char *dir, const char *key, const char *workspace, const brig_policy *p,
                              unsigned size, int ready_fd)
{
        struct pool pl = { .key = strdup(key), .dir = strdup(dir), .ws = strdup(workspace) };
        if (!pl.key || !pl.dir || !pl.ws || pool_state_write(&pl, size, NULL) < 0) {
                const char *why = "the pool daemon could not record itself in pool.json";
                (void)!write(ready_fd, why, strlen(why));
                exit(BRIG_EXIT_SETUP);
        }
        pool_daemon(&pl, p, size, ready_fd);
}

static json_t *pool_state(const struct pool *pl)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/pool.json", pl->dir);
        return path ? json_load_file(path, 0, NULL) : NULL;
}

static bool pool_alive(const struct pool *pl)
{
        json_t *st = pool_state(pl);
        bool alive = st && state_supervisor_alive(st);
        json_decref(st);
        return alive;
}

int brig_pool_start(const brig_policy *p, unsigned size, brig_error **err)
{
        /* before the pool's directories are made: a refused pool leaves nothing */
        if (p->n_pass_fds || p->audit_path || p->report_path || p->audit_fd || p->report_fd || p->manifest_path ||
            p->timings)
                return brig_err(err, EINVAL, "a pool takes no --pass-fd, --audit(-fd), --manifest, --timings or "
                                             "--json-report(-fd) (give --json-report to brig run --pooled)");
        /* A member's time namespace takes its offsets as the member starts:
         * a run taken from it later would read clocks long past the value
         * --clock-start promises (and its manifest records). */
        if (p->clock_start)
                return brig_err(err, EINVAL, "a pool takes no --clock-start: a member's clocks start when it is "
                                             "made, not when a run takes it (brig run --clock-start runs in a new "
                                             "sandbox)");
        struct pool pl;
        pool_sweep();
        int r = pool_open(p, true, &pl, err);
        if (r == 0 && pool_alive(&pl))
                r = state_fail(err, EEXIST, "a pool for this policy and workspace already runs (brig pool --stop)");
        if (r == 0 && size == 0)
                r = brig_err(err, EINVAL, "pool size 0");
        int pipefd[2] = { -1, -1 };
        if (r == 0 && pipe2(pipefd, O_CLOEXEC) < 0)
                r = brig_err(err, errno, "pipe");
        if (r < 0) {
                pool_free(&pl);
                return r;
        }
        /* Ours from the start: a sweep finds the pool dead only once no
         * process of ours answers for it. */
        bool recorded = pool_state_write(&pl, size, NULL) == 0;
        int e = errno;
        /* The daemon is brig-supervisor, started by posix_spawn (never a
         * fork of a caller that may be a threaded server holding locks);
         * it records itself in pool.json and forks once, nobody's child. */
        _cleanup_free_ char *log = brig_strdup_printf("%s/log", pl.dir);
        _cleanup_free_ char *config = recorded && log ? pool_config(&pl, p, size, err) : NULL;
        bool started = config && supervisor_start(config, log, "pool", pipefd[1], -1, err) == 0;
        close(pipefd[1]);
        /* Wait until the pool is full (one NUL byte) or the reason it is not. */
        char msg[1024] = "";
        ssize_t n = started ? read(pipefd[0], msg, sizeof msg - 1) : -1;
        close(pipefd[0]);
        if (!recorded)
                r = brig_err(err, e ? e : EIO, "write the pool's state '%s/pool.json'", pl.dir);
        else if (!started)
                r = brig_err_prefix(err, "start the pool daemon");
        else if (n <= 0)
                r = brig_err(err, EPROTO, "the pool daemon ended (see %s/log)", pl.dir);
        if (r < 0)
                pool_sweep();  /* a daemon that ended leaves its pool to remove */
        else if (msg[0]) {
                msg[n] = '\0';
                r = state_fail(err, EIO, "pool: %s", msg);
        }
        pool_free(&pl);
        return r;
}

/* SIGTERM to the pool's daemon, and its end waited for. */
static int pool_stop(struct pool *pl, const char *what, brig_error **err)
{
        json_t *st = pool_state(pl);
        int r = 0;
        if (!st || !state_supervisor_alive(st))
                r = state_fail(err, ESRCH, "no pool runs for %s", what);
        if (r == 0) {
                pid_t pid = (pid_t)json_integer_value(json_object_get(st, "supervisor_pid"));
                int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
                if (pidfd >= 0 && state_supervisor_alive(st)) {
                        (void)sys_pidfd_send_signal(pidfd, SIGTERM);
                        struct pollfd pf = { .fd = pidfd, .events = POLLIN };
                        if (poll(&pf, 1, 60000) <= 0)
                                r = state_fail(err, ETIMEDOUT, "the pool daemon did not end");
                }
                if (pidfd >= 0)
                        close(pidfd);
        }
        json_decref(st);
        return r;
}

int brig_pool_stop(const brig_policy *p, brig_error **err)
{
        struct pool pl;
        int r = pool_open(p, false, &pl, err);
        if (r == 0)
                r = pool_stop(&pl, "this policy and workspace", err);
        pool_free(&pl);
        return r;
}

int brig_pool_start_named(const brig_policy *p, unsigned size, const char *name, brig_error **err)
{
        if (!name)
                return brig_pool_start(p, size, err);
        /* a name that is none, or that a live pool has, is refused before
         * anything starts */
        _cleanup_free_ char *dir = NULL;
        char key[POOL_KEY_LEN + 1];
        brig_error *lerr = NULL;
        int found = pool_named(name, &dir, key, NULL, &lerr);
        if (found == -EINVAL) {
                if (err && !*err)
                        *err = TAKE_PTR(lerr);
                brig_error_free(&lerr);
                return found;
        }
        if (found == 0) {
                struct pool other = { .key = key, .dir = dir };
                if (pool_alive(&other)) {
                        brig_error_free(&lerr);
                        return state_fail(err, EEXIST, "a pool named '%s' already runs (brig pool --stop --name %s "
                                                       "ends it)", name, name);
                }
        }
        brig_error_free(&lerr);
        /* One of this policy that runs already (an unnamed one, or one
         * whose brig pool --name was killed before it named it) is named. */
        brig_error *serr = NULL;
        int r = brig_pool_start(p, size, &serr);
        bool started = r == 0;
        if (r == -EEXIST) {
                brig_error_free(&serr);
                r = 0;
        } else if (r < 0) {
                if (err && !*err)
                        *err = TAKE_PTR(serr);
                brig_error_free(&serr);
                return r;
        }
        struct pool pl;
        r = pool_open(p, false, &pl, err);
        if (r == 0)
                r = name_give(&pl, name, err);
        if (r < 0 && started && pl.dir) {
                (void)pool_stop(&pl, "this policy and workspace", &serr);  /* nothing we started stays unnamed */
                brig_error_free(&serr);
        }
        pool_free(&pl);
        return r;
}

/* If a name other than NAME gives the pool KEY too, NAME alone goes
 * (under the names' lock): true. */
static bool name_drop_if_shared(const char *pools, const char *key, const char *name)
{
        _cleanup_free_ char *dir = brig_strdup_printf("%s/names", pools);
        int dfd = dir ? names_locked(dir, false) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (dfd >= 0 && !d)
                close(dfd);
        bool shared = false;
        struct dirent *e;
        while (d && !shared && (e = readdir(d))) {
                if (e->d_name[0] == '.' || strcmp(e->d_name, name) == 0)
                        continue;
                _cleanup_free_ char *target = name_target(dirfd(d), e->d_name);
                shared = target && strcmp(target, key) == 0;
        }
        if (shared)
                (void)unlinkat(dirfd(d), name, 0);
        if (d)
                closedir(d);
        return shared;
}

int brig_pool_stop_named(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        char key[POOL_KEY_LEN + 1];
        int r = pool_named(name, &dir, key, NULL, err);
        if (r < 0)
                return r;
        struct pool pl = { .key = key, .dir = dir };
        /* Two callers that named one pool (the same policy and workspace)
         * each stop their name: the pool ends with the last. */
        _cleanup_free_ char *shared_in = pools_of(&pl);
        if (shared_in && pool_alive(&pl) && name_drop_if_shared(shared_in, key, name))
                return 1;
        _cleanup_free_ char *what = brig_strdup_printf("the name '%s'", name);
        r = pool_stop(&pl, what ? what : name, err);
        _cleanup_free_ char *pools = pools_of(&pl);
        if (pools)
                names_forget(pools, r == 0 ? key : NULL);  /* a name of a pool that was gone too */
        return r;
}

/* Is `name` really a member of this pool? (Whether it runs this very
 * policy in this workspace, and was made from an environment that gives
 * the caller's plan, the member itself checks: CTL_EXEC_LAST.) A pooled
 * run execs into the member and then removes it, so a wrong name would
 * run the command under another policy and delete someone else's
 * sandbox. */
static bool member_named(const struct pool *pl, const char *name)
{
        return pool_member_of(pl->key, name);
}

/* claimed/NAME.PID-START-PIDNS: the member and the run that holds it. */
static char *claimed_path(struct pool *pl, const char *name)
{
        /* read once a run (its /proc/self/stat, its pid namespace), as the claim named it */
        if (!pl->owner[0] && pool_claim_owner(pl->owner, sizeof pl->owner) < 0)
                pl->owner[0] = '\0';
        return pl->owner[0] ? brig_strdup_printf("%s/claimed/%s.%s", pl->dir, name, pl->owner) : NULL;
}

/* Is the member NAME's supervisor alive (made, or serving its run)? */
static bool member_running(const char *name)
{
        _cleanup_free_ char *dir = NULL;
        brig_error *err = NULL;
        json_t *st = state_dir(name, false, &dir, &err) == 0 ? state_read(dir, &err) : NULL;
        brig_error_free(&err);
        bool alive = st && state_supervisor_alive(st);
        json_decref(st);
        return alive;
}

static void remove_member(const char *name)
{
        brig_error *err = NULL;
        if (brig_sandbox_remove(name, &err) < 0 && err && err->errnum != ENOENT)
                fprintf(stderr, "brig: removing the pool member '%s': %s\n", name, err->msg);
        brig_error_free(&err);
}

/* The members claimed by a run that is gone (it exited, or was
 * SIGKILLed, say, by a harness's timeout) go, with their entry: a run
 * leaves its claim as it is, and a member kept for a run that no
 * longer exists would hold its processes and cgroup until the pool stops.
 * The daemon looks on each of its rounds, the sweep of a dead pool once.
 * true when a live run still holds one. */
static bool release_gone_claims(const struct pool *pl)
{
        _cleanup_free_ char *cd = brig_strdup_printf("%s/claimed", pl->dir);
        DIR *dir = cd ? opendir(cd) : NULL;
        struct dirent *e;
        bool held = false;
        while (dir && (e = readdir(dir))) {
                char *dot = strchr(e->d_name, '.');
                struct owner o;
                if (!dot || e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *name = strndup(e->d_name, (size_t)(dot - e->d_name));
                int alive = owner_parse(dot + 1, &o, NULL) ? owner_alive(&o) : 0;
                /* A run in another pid namespace (-1): its pid names nothing
                 * here, but the member it holds tells: it serves one run and
                 * stops after it, or as soon as the run's connection goes. */
                if (alive < 0)
                        alive = name && member_running(name);
                if (alive) {
                        held = true;  /* its run goes on */
                        continue;
                }
                test_pause("pool-run-gone");
                if (name && member_named(pl, name))
                        remove_member(name);
                unlinkat(dirfd(dir), e->d_name, 0);
        }
        if (dir)
                closedir(dir);
        return held;
}

/* One pool whose daemon is gone: what no live run holds goes. */
static void sweep_one(const struct pool *pl)
{
        remove_members(pl, "ready");
        remove_members(pl, "done");
        bool held = release_gone_claims(pl);
        struct dirent *e;
        /* Members no list names: the one the daemon was making when it
         * died. Still alive (stopping: its daemon is gone), they keep the
         * pool for a later sweep; dead, they go now. */
        _cleanup_free_ char *root = NULL;
        brig_error *rerr = NULL;
        DIR *sd = state_root(false, &root, &rerr) == 0 ? opendir(root) : NULL;
        brig_error_free(&rerr);
        while (sd && (e = readdir(sd))) {
                if (!member_named(pl, e->d_name))
                        continue;
                _cleanup_free_ char *mdir = brig_strdup_printf("%s/%s", root, e->d_name);
                json_t *st = mdir ? state_read(mdir, &rerr) : NULL;
                brig_error_free(&rerr);
                if (st && state_supervisor_alive(st))
                        held = true;
                else
                        remove_member(e->d_name);
                json_decref(st);
        }
        if (sd)
                closedir(sd);
        if (!held)
                state_remove_tree(pl->dir, NULL);
}

/* An entry of ROOT/pools (`pools`) that is a pool's directory: 1, *pl
 * made for it (pool_free). 0 for the rest (names/, dot files); -ENOMEM. */
static int pool_entry(const char *pools, const struct dirent *de, struct pool *pl)
{
        if (de->d_name[0] == '.' || strlen(de->d_name) != POOL_KEY_LEN)
                return 0;
        *pl = (struct pool){ .key = strdup(de->d_name), .dir = brig_strdup_printf("%s/%s", pools, de->d_name) };
        if (pl->key && pl->dir)
                return 1;
        pool_free(pl);
        *pl = (struct pool){ 0 };  /* freed again by the caller's pool_free */
        return -ENOMEM;
}

void pool_sweep(void)
{
        brig_error *e = NULL;
        _cleanup_free_ char *root = NULL;
        if (state_root(false, &root, &e) < 0) {
                brig_error_free(&e);
                return;
        }
        _cleanup_free_ char *pools = brig_strdup_printf("%s/pools", root);
        DIR *d = pools ? opendir(pools) : NULL;
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct pool pl;
                if (pool_entry(pools, de, &pl) <= 0)
                        continue;
                json_t *st = pool_state(&pl);
                /* no pool.json: brig pool was killed before it wrote one */
                if (!st || !state_supervisor_alive(st)) {
                        names_forget(pools, pl.key);  /* no run finds it by a name any more */
                        sweep_one(&pl);
                }
                json_decref(st);
                pool_free(&pl);
        }
        if (!d)
                return;  /* none there: nothing to remove either (a lookup every run spared) */
        closedir(d);
        (void)rmdir(pools);  /* only when no pool is left */
}

const char *pool_member_state(const char *root, const char *name, char key_out[POOL_KEY_LEN + 1])
{
        if (strncmp(name, POOL_MEMBER_PREFIX, strlen(POOL_MEMBER_PREFIX)) != 0)
                return NULL;
        _cleanup_free_ char *pools = brig_strdup_printf("%s/pools", root);
        DIR *d = pools ? opendir(pools) : NULL;
        const char *state = NULL;
        struct dirent *de;
        while (!state && d && (de = readdir(d))) {
                if (strlen(de->d_name) != POOL_KEY_LEN || !pool_member_of(de->d_name, name))
                        continue;
                struct pool pl = { .dir = brig_strdup_printf("%s/%s", pools, de->d_name) };
                _cleanup_free_ char *ready = pl.dir ? member_path(&pl, "ready", name) : NULL;
                _cleanup_free_ char *claimed = pl.dir ? brig_strdup_printf("%s/claimed", pl.dir) : NULL;
                struct stat st;
                if (ready && lstat(ready, &st) == 0) {
                        state = "ready";
                } else {
                        DIR *c = claimed ? opendir(claimed) : NULL;
                        struct dirent *ce;
                        size_t n = strlen(name);
                        while (c && !state && (ce = readdir(c)))
                                if (strncmp(ce->d_name, name, n) == 0 && ce->d_name[n] == '.')
                                        state = "in use";
                        if (c)
                                closedir(c);
                }
                state = state ? state : "starting or ending";
                memcpy(key_out, de->d_name, POOL_KEY_LEN);  /* its length, checked above */
                key_out[POOL_KEY_LEN] = '\0';
                free(pl.dir);
        }
        if (d)
                closedir(d);
        return state;
}

/* The names that give the pool KEY (read without the lock: what a
 * listing shows, not a decision). */
static json_t *names_of(const char *pools, const char *key)
{
        json_t *names = json_array();
        _cleanup_free_ char *dir = brig_strdup_printf("%s/names", pools);
        DIR *d = dir ? opendir(dir) : NULL;
        struct dirent *e;
        while (names && d && (e = readdir(d))) {
                if (e->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *target = name_target(dirfd(d), e->d_name);
                if (target && strcmp(target, key) == 0)
                        json_array_append_new(names, json_string(e->d_name));
        }
        if (d)
                closedir(d);
        return names;
}

/* ROOT/pools (*pools, free()), opened once what dead pools left is swept:
 * a listing or a stop sees live pools only. NULL: there are none. */
static DIR *pools_open(char **pools)
{
        pool_sweep();
        brig_error *e = NULL;
        _cleanup_free_ char *root = NULL;
        *pools = state_root(false, &root, &e) == 0 ? brig_strdup_printf("%s/pools", root) : NULL;
        brig_error_free(&e);  /* no state directory: no pools */
        return *pools ? opendir(*pools) : NULL;
}

char *brig_pool_list_json(brig_error **err)
{
        json_t *out = json_array();
        if (!out) {
                brig_err(err, ENOMEM, "pool list");
                return NULL;
        }
        _cleanup_free_ char *pools = NULL;
        DIR *d = pools_open(&pools);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct pool pl;
                if (pool_entry(pools, de, &pl) <= 0)
                        continue;
                json_t *st = pool_state(&pl);
                if (st && state_supervisor_alive(st)) {
                        json_t *ws = json_object_get(st, "workspace"), *failing = json_object_get(st, "failing");
                        json_t *row = json_pack("{s:s, s:o, s:O, s:I, s:I, s:O, s:O, s:O}", "key", pl.key, "names",
                                                names_of(pools, pl.key), "size", json_object_get(st, "size"),
                                                "ready", (json_int_t)count_in(&pl, "ready"), "in_use",
                                                (json_int_t)count_in(&pl, "claimed"), "daemon_pid",
                                                json_object_get(st, "supervisor_pid"), "workspace",
                                                ws ? ws : json_null(), "failing", failing ? failing : json_null());
                        if (row)
                                json_array_append_new(out, row);
                }
                json_decref(st);
                pool_free(&pl);
        }
        if (d)
                closedir(d);
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(out);
        if (!text)
                brig_err(err, ENOMEM, "pool list");
        return text;
}

int brig_pool_stop_all(unsigned *stopped, brig_error **err)
{
        *stopped = 0;
        _cleanup_free_ char *pools = NULL;
        DIR *d = pools_open(&pools);
        struct dirent *de;
        int r = 0;
        while (d && (de = readdir(d))) {
                struct pool pl;
                brig_error *one = NULL;
                int s = pool_entry(pools, de, &pl);
                if (s == 0)
                        continue;
                s = s < 0 ? brig_err(&one, ENOMEM, "pool") : pool_stop(&pl, pl.key, &one);
                if (s == 0) {
                        (*stopped)++;
                        names_forget(pools, pl.key);
                } else if (s != -ESRCH && r == 0) {  /* ended meanwhile: not an error */
                        r = s;
                        if (err && !*err)
                                *err = TAKE_PTR(one);
                }
                brig_error_free(&one);
                pool_free(&pl);
        }
        if (d)
                closedir(d);
        return r;
}

/* Not served by the pool: a fresh sandbox, whose report says why. */
static int run_fresh(const brig_policy *p, char *const argv[], brig_result *res, const char *why, char *out,
                     size_t out_size, brig_error **err)
{
        if (out)
                snprintf(out, out_size, "%s", why);
        brig_policy copy = *p;  /* shallow: the run only reads it */
        copy.pool_note = why;
        /* as brig run (the CLI) would run it: in this process */
        return brig_run_in_process(&copy, argv, res, err);
}

/* --timings of a run the pool serves: its own steps, stamped here
 * (CLOCK_MONOTONIC), as brig run --timings prints and reports a cold
 * run's (core/timings.c); what happens in the member is one step, the
 * exec's round trip. */
enum pool_mark { PT_START, PT_LOOKUP, PT_CLAIM, PT_EXEC, PT_COUNT };

static const struct {
        const char *name, *key;
} pool_steps[PT_COUNT] = {
        [PT_LOOKUP] = { "pool lookup (policy, key)", "pool_lookup" },
        [PT_CLAIM] = { "claim and member check", "claim" },
        [PT_EXEC] = { "exec in the member", "exec" },
};

struct pool_timings {
        bool on;
        uint64_t ns[PT_COUNT];
};

static void pool_mark(struct pool_timings *t, enum pool_mark m)
{
        struct timespec ts;
        if (t->on && clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
                t->ns[m] = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Into the result's text (the CLI prints it) and, for the report, as
 * timings_json has a cold run's: t0_ns, unit, steps in microseconds. */
static json_t *pool_timings_take(const struct pool_timings *t, brig_result *res)
{
        json_t *steps = json_object();
        size_t len = 0, n = sizeof res->timings;
        res->timings[0] = '\0';
        for (int m = PT_LOOKUP; m < PT_COUNT; m++) {
                uint64_t ns = t->ns[m] - t->ns[m - 1];
                json_object_set_new(steps, pool_steps[m].key, json_integer((json_int_t)(ns / 1000)));
                if (len < n)
                        len += (size_t)snprintf(res->timings + len, n - len, "  %-30s %9.3f ms\n", pool_steps[m].name,
                                                (double)ns / 1e6);
        }
        if (len < n)
                snprintf(res->timings + len, n - len, "  %-30s %9.3f ms\n", "total",
                         (double)(t->ns[PT_COUNT - 1] - t->ns[PT_START]) / 1e6);
        return json_pack("{s:I, s:s, s:o}", "t0_ns", (json_int_t)t->ns[PT_START], "unit", "us", "steps", steps);
}

int brig_run_pooled(const brig_policy *p, char *const argv[], brig_result *res, bool *pooled, brig_error **err)
{
        return brig_run_pooled_why(p, argv, res, pooled, NULL, 0, err);
}

int brig_run_pooled_why(const brig_policy *p, char *const argv[], brig_result *res, bool *pooled, char *why,
                        size_t why_size, brig_error **err)
{
        struct pool pl;
        struct pool_timings tm = { .on = p->timings };
        pool_mark(&tm, PT_START);
        *pooled = false;
        if (why && why_size)
                why[0] = '\0';
        /* What a pool member cannot give (brig pool refuses these): the
         * audit stream and passed descriptors belong to a supervisor
         * started with them. The report it can: the exec's. */
        if (p->audit_path || p->audit_fd || p->n_pass_fds || p->manifest_path || p->clock_start)
                return run_fresh(p, argv, res,
                                 p->n_pass_fds ? "--pass-fd needs a new sandbox (a pool member's "
                                                 "supervisor was started without the descriptor)"
                                 : p->clock_start ? "--clock-start needs a new sandbox (a pool member's clocks "
                                                    "started when it was made)"
                                                  : "--audit and --manifest need a new sandbox (a pool "
                                                    "member's supervisor was started without the audit stream)",
                                 why, why_size, err);
        /* Opened before a member is claimed, as brig run would (no member
         * is used up by a bad path). */
        _cleanup_close_ int report_fd = -EBADF;
        if (p->report_path || p->report_fd) {
                report_fd = p->report_fd ? output_fd(p->report_fd, "--json-report-fd", err)
                                         : output_open(p->report_path, "--json-report", false, err);
                if (report_fd < 0)
                        return report_fd;
        }
        brig_error *perr = NULL;
        /* --timings is part of the policy's JSON: the pool is the one made
         * without it (a start it would time happened before the run) */
        brig_policy untimed = *p;  /* shallow: only read */
        untimed.timings = false;
        int r = pool_open(&untimed, false, &pl, &perr);
        pool_mark(&tm, PT_LOOKUP);
        char name[256] = "", reason[512] = "";
        if (r < 0)
                snprintf(reason, sizeof reason, "the pool could not be looked up: %s",
                         perr && perr->msg ? perr->msg : "?");
        brig_error_free(&perr);
        if (r == 0) {
                /* Claim the first ready member: the rename succeeds for one
                 * run only. Whether it was made for this policy, workspace
                 * and environment its supervisor says (ESTALE, below):
                 * nothing of it is read here. */
                bool no_pool = pool_claim_ready(pl.dir, pl.key, name, sizeof name) == -ENOENT;
                /* why not, when not: off the path of a run the pool serves */
                if (no_pool)
                        snprintf(reason, sizeof reason, "no pool runs for this policy and workspace from this "
                                                        "environment (brig pool --size N with the same options and "
                                                        "the same HOME, SHELL, TERM, LANG, LC_*, TZ, --keep-env "
                                                        "values, umask, ulimits, cgroup and namespaces starts one)");
                else if (!name[0] && !pool_alive(&pl))
                        snprintf(reason, sizeof reason, "the pool for this policy and workspace is not running "
                                                        "(brig pool --size N starts it again)");
                else if (!name[0])
                        snprintf(reason, sizeof reason, "no member of the pool was ready (all in use or still "
                                                        "starting; a larger brig pool --size keeps more ready)");
        }
        if (!name[0]) {
                pool_free(&pl);
                return run_fresh(p, argv, res, reason, why, why_size, err);  /* no pool, or none ready */
        }
        pool_mark(&tm, PT_CLAIM);
        brig_exec_opts o = { .argv = argv, .tty = p->tty, .cwd = p->cwd, .terminal_passthrough = p->terminal_passthrough,
                             .timings = p->timings };
        brig_error *xerr = NULL;
        /* A member whose daemon is gone stops by itself, and refuses the
         * run when it comes (its pidfd of the daemon, control.c): one
         * claimed just then, or found stopping, has not run the command
         * (ESHUTDOWN): a new sandbox runs it. */
        json_t *refusals = NULL;
        _cleanup_free_ char *sources = plan_sources_identity(p, pl.ws);
        char *identity = sources ? pool_identity(pl.json, pl.ws, sources, pl.context) : NULL;
        r = identity ? sandbox_exec_last(name, &o, identity, res, report_fd >= 0 ? &refusals : NULL, &xerr)
                     : brig_err(&xerr, ENOMEM, "pool");
        context_free(&identity);
        /* A member made from another environment refuses before anything
         * runs (ESTALE, control.c): its key matched by chance, or the pool
         * was started again from another environment. */
        bool other_env = r < 0 && xerr && xerr->errnum == ESTALE;
        /* A command line past what one control message holds (E2BIG,
         * before anything was sent): a new sandbox takes it whole. */
        bool too_long = r < 0 && xerr && xerr->errnum == E2BIG;
        if (r < 0 && (!xerr || other_env || too_long || xerr->errnum == ESHUTDOWN || xerr->errnum == ESRCH)) {
                brig_error_free(&xerr);
                json_decref(refusals);
                _cleanup_free_ char *claim = claimed_path(&pl, name);
                remove_member(name);
                if (claim)
                        unlink(claim);
                pool_free(&pl);
                return run_fresh(p, argv, res,
                                 too_long ? "the command and its environment are longer than a pool member's "
                                            "request holds"
                                 : other_env ? "the pool's member was made for another policy or workspace (or "
                                             "another directory then stood at the workspace's or a bind's "
                                             "path), or from another environment (HOME, SHELL, TERM, LANG, "
                                             "LC_*, TZ, --keep-env values, umask, ulimits, cgroup or "
                                             "namespaces differ)"
                                           : "the pool's daemon is gone (its members stop by themselves)",
                                 why, why_size, err);
        }
        pool_mark(&tm, PT_EXEC);
        if (xerr && err && !*err)
                *err = TAKE_PTR(xerr);
        brig_error_free(&xerr);
        *pooled = true;
        /* Used once, and nothing more to do here: the claim names this
         * run, and once it has exited the daemon removes the member (its
         * supervisor's end wakes it), or, the daemon gone, the next brig's
         * sweep does. No rename and no wake-up of the daemon on the run's
         * path, no removal waited for. */
        json_t *served = json_pack("{s:s}", "member", name);
        if (tm.on && served) {
                /* the exec's own steps (exec_named), after the run's */
                char exec_steps[sizeof res->timings];
                memcpy(exec_steps, res->timings, sizeof exec_steps);
                json_object_set_new(served, "timings", pool_timings_take(&tm, res));
                static const char head[] = "  of the exec in the member:\n";
                size_t len = strnlen(res->timings, sizeof res->timings);
                if (exec_steps[0] && len + sizeof head < sizeof res->timings) {
                        memcpy(res->timings + len, head, sizeof head);
                        len += sizeof head - 1;
                        size_t n = strnlen(exec_steps, sizeof exec_steps);
                        n = n < sizeof res->timings - 1 - len ? n : sizeof res->timings - 1 - len;
                        memcpy(res->timings + len, exec_steps, n);
                        res->timings[len + n] = '\0';
                }
        }
        if (report_fd >= 0) {
                char what[PATH_MAX + 32];
                report_what(p, what, sizeof what);
                r = served ? sandbox_exec_report(report_fd, what, name, &o, res, served, refusals, r, err)
                           : brig_err(err, ENOMEM, "report");
        }
        json_decref(served);
        json_decref(refusals);
        pool_free(&pl);
        return r;
}

/* How long brig run --pool waits for a member when none is ready (the
 * daemon makes one in tens of milliseconds once the pool is quiet). */
#define POOL_NAMED_WAIT_MS 30000
/* ... and how long once its daemon says it cannot make one (a failure
 * that passes, its next attempt a second later, may still serve it) */
#define POOL_FAILING_GRACE_MS 2500

/* The pool named NAME (KEY) has ended while a run waited for its member.
 * Stopped (brig pool --stop), it lost its name before its daemon ended;
 * a daemon that was killed leaves the name until the next sweep. */
static int pool_gone(const char *name, const char *key, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        char now[POOL_KEY_LEN + 1];
        if (pool_named(name, &dir, now, NULL, NULL) < 0 || strcmp(now, key) != 0)
                return state_fail(err, ESRCH, "the pool '%s' was stopped while this run waited for a member (brig "
                                              "pool --name %s --size N [RUN OPTIONS] starts it again)", name, name);
        return state_fail(err, ESRCH, "the pool '%s' is not running (its daemon is gone; brig pool --name %s "
                                      "--size N [RUN OPTIONS] starts it again)", name, name);
}

/* Claim a ready member and hand it to use(); -EAGAIN when none is ready,
 * *member (n bytes) the one claimed. A member that turns out to be
 * stopping, dead, not ready after all, or holding a workspace that was
 * moved away (use()'s error ESHUTDOWN, ESRCH, EAGAIN or ESTALE: its
 * refusal, so nothing ran in it) is dropped and the next one taken; its
 * EAGAIN is not this function's "none ready". */
static int use_member(const char *dir, const char *key, pool_use_fn *use, void *arg, char *member, size_t n,
                      brig_error **err)
{
        for (;;) {
                int r = pool_claim_ready(dir, key, member, n);
                if (r < 0)
                        return r;
                brig_error *xerr = NULL;
                r = use(dir, member, arg, &xerr);
                if (r < 0 && xerr && (xerr->errnum == ESHUTDOWN || xerr->errnum == ESRCH || xerr->errnum == EAGAIN ||
                                      xerr->errnum == ESTALE)) {
                        brig_error_free(&xerr);
                        pool_claim_drop(dir, member);
                        continue;
                }
                if (xerr && err && !*err)
                        *err = TAKE_PTR(xerr);
                brig_error_free(&xerr);
                return r;
        }
}

/* Has the caller's caller gone (cancel_fd hung up, or closed under us:
 * POLLNVAL, which would otherwise end every poll of the wait at once)? */
static bool cancelled(int cancel_fd)
{
        struct pollfd pf = { .fd = cancel_fd, .events = POLLRDHUP };
        return cancel_fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

int pool_named_claim(const char *name, int cancel_fd, pool_use_fn *use, void *arg, char *member, size_t n,
                     brig_error **err)
{
        member[0] = '\0';
        _cleanup_free_ char *dir = NULL;
        char key[POOL_KEY_LEN + 1] = "";
        int r = pool_named(name, &dir, key, NULL, err);
        if (r < 0)
                return r;
        struct pool pl = { .key = key, .dir = dir };
        _cleanup_close_ int ifd = -EBADF;
        uint64_t began = now_ms(), until = began + POOL_NAMED_WAIT_MS;
        for (;;) {
                if (cancelled(cancel_fd)) {
                        r = -ECANCELED;
                        break;
                }
                if ((r = use_member(dir, key, use, arg, member, n, err)) != -EAGAIN)
                        break;
                /* none ready: wait for the daemon's next (a rename into ready/) */
                json_t *st = pool_state(&pl);
                bool alive = st && state_supervisor_alive(st);
                const char *failing = json_string_value(json_object_get(st, "failing"));
                if (alive && failing && now_ms() >= began + POOL_FAILING_GRACE_MS) {
                        r = state_fail(err, EIO, "the pool '%s' cannot make a member now: %s (its log: %s/log)", name,
                                       failing, dir);
                        json_decref(st);
                        return r;
                }
                json_decref(st);
                if (!alive)
                        return pool_gone(name, key, err);
                if (now_ms() >= until)
                        return state_fail(err, ETIMEDOUT, "no member of the pool '%s' was ready within %d s (all in "
                                                          "use or still starting; a larger brig pool --size keeps "
                                                          "more ready)",
                                          name, POOL_NAMED_WAIT_MS / 1000);
                if (ifd == -EBADF) {  /* once: -1 after, where inotify cannot watch */
                        _cleanup_free_ char *ready = brig_strdup_printf("%s/ready", dir);
                        ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
                        if (ifd >= 0 && (!ready || inotify_add_watch(ifd, ready, IN_MOVED_TO | IN_CREATE) < 0))
                                closep(&ifd);
                        ifd = ifd >= 0 ? ifd : -1;
                        continue;  /* one look more: a member may have come meanwhile */
                }
                /* without a watch, a look every 20 ms (poll skips fd -1);
                 * the caller's hang-up ends the wait at once */
                struct pollfd pf[2] = { { .fd = ifd, .events = POLLIN }, { .fd = cancel_fd, .events = POLLRDHUP } };
                if (poll(pf, 2, ifd >= 0 ? 100 : 20) > 0 && pf[0].revents) {
                        char buf[4096];
                        while (read(ifd, buf, sizeof buf) > 0)
                                ;
                }
        }
        if (r == -ECANCELED)
                return brig_err(err, ECANCELED, "the wait for a member of the pool '%s' was cancelled: its caller "
                                                "went away", name);
        if (r == -ENOENT)
                r = pool_gone(name, key, err);  /* its directory went with it */
        else if (r < 0 && err && !*err)
                r = brig_err(err, -r, "claim a member of the pool '%s'", name);
        return r;
}

/* The --json-report of a brig run --pool NAME (report_fd, if asked for),
 * served by `member` or, if empty, by none: then it says why. */
static int named_report(int report_fd, const char *name, const char *member, const brig_exec_opts *o,
                        const brig_result *res, json_t *refusals, int r, brig_error **err)
{
        if (report_fd >= 0) {
                json_t *served = member[0] ? json_pack("{s:s, s:s}", "member", member, "name", name)
                                           : json_pack("{s:s}", "name", name);
                _cleanup_free_ char *what = brig_strdup_printf("--json-report %s", o->report_path);
                r = served ? sandbox_exec_report(report_fd, what ? what : "--json-report", member[0] ? member : NULL,
                                                 o, res, served, refusals, r, err)
                           : brig_err(err, ENOMEM, "report");
                json_decref(served);
        }
        json_decref(refusals);
        return r;
}

/* brig_run_in_pool's use of the member it claimed: the run, as the pool
 * made the member. */
struct run_as_made {
        const brig_exec_opts *o;
        brig_result *res;
        json_t **refusals;  /* NULL: no report wants them */
};

static int run_as_made(const char *dir, const char *member, void *arg, brig_error **err)
{
        struct run_as_made *a = arg;
        if (a->refusals) {  /* a member dropped before this one said nothing that counts */
                json_decref(*a->refusals);
                *a->refusals = NULL;
        }
        return sandbox_exec_as_made(member, a->o, a->res, a->refusals, err);
}

int brig_run_in_pool(const char *name, const brig_exec_opts *o, brig_result *res, brig_error **err)
{
        memset(res, 0, sizeof *res);
        res->exit_code = BRIG_EXIT_SETUP;
        res->memory_peak_bytes = res->pids_peak = -1;
        if (!name || !o)
                return brig_err(err, EINVAL, "brig_run_in_pool: no %s", name ? "options" : "pool name");
        if (o->detach)
                return brig_err(err, EINVAL, "a pool's member serves one run to its end: brig run --pool takes no "
                                             "--detach (brig create and brig exec --detach do)");
        /* opened before a member is claimed (no member is used up by a bad
         * path), and before the name is looked up: the report says why
         * whatever fails */
        _cleanup_close_ int report_fd = o->report_path ? output_open(o->report_path, "--json-report", false, err)
                                                       : -EBADF;
        if (o->report_path && report_fd < 0)
                return report_fd;
        json_t *refusals = NULL;
        char member[256];
        struct run_as_made a = { .o = o, .res = res, .refusals = report_fd >= 0 ? &refusals : NULL };
        int r = pool_named_claim(name, -1, run_as_made, &a, member, sizeof member, err);
        return named_report(report_fd, name, member, o, res, refusals, r, err);
}
