/* cgroup.c — the sandbox's control group: memory, pids, CPU and IO limits,
 * the peak figures for the report, and removal afterwards.
 *
 * cgroup v2 comes first (one hierarchy; the child is born inside it with
 * CLONE_INTO_CGROUP, so not one instruction runs unlimited). Where a
 * controller lives on a v1 hierarchy (hybrid hosts), brig makes a group in
 * that hierarchy too, and the child joins it itself, before its mounts and
 * before anything of the command exists (see cgroup_join_open for why the
 * child and not the supervisor). Where nothing else needs them first, the
 * v1 groups are made after clone3, while the child sets up its network
 * (cgroup_make_deferred).
 *
 * Each sandbox gets "brig-PID-START-PIDNS-SEQ" (its supervisor: pid, start
 * time, pid namespace; a counter) under the caller's own cgroup or the
 * nearest ancestor that delegates the controllers, listed in a run record
 * in the state root before it is made (reaper.c); a later brig removes
 * groups whose supervisor is gone (it was SIGKILLed) — its own only. */
#define _GNU_SOURCE
#include "core/syscalls.h"
#include "controls/cgroup.h"
#include "core/reaper.h"
#include "core/sync.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>

static const char *const controller_names[] = {
        [CG_MEMORY] = "memory", [CG_PIDS] = "pids", [CG_CPU] = "cpu", [CG_IO] = "io",
};

struct cgroup {
        char *v2_dir;               /* our group in the v2 hierarchy, or NULL */
        int v2_fd;                  /* its directory fd, for CLONE_INTO_CGROUP */
        char *v1_dir[CG_COUNT];     /* our group per v1 controller, or NULL */
        int v1_tasks[CG_COUNT];     /* its `tasks` file while the child joins (cgroup_join_open), or -1 */
        bool on_v2[CG_COUNT];       /* which hierarchy enforces each controller */
        bool on_v1[CG_COUNT];
        bool v1_deferred;           /* v1_dir planned, made by cgroup_make_deferred */
        bool join_taken;            /* the child has taken cgroup_join_send's message off its socket */
        char *record;               /* the run record naming the groups (reaper.c) */
        struct strv stale_parents;  /* where a dead brig's groups may be, for cgroup_sweep */
        bool swept;
        struct hierarchies *where;  /* what cgroup_create found, kept for cgroup_inherited_memory */
        int stat_fd[4];             /* cgroup_stats' files, opened ahead (cgroup_stats_open), or -1 */
};

/* cgroup_stats' four files, in stat_fd's order */
enum { ST_MEMORY_PEAK, ST_OOM, ST_PIDS_PEAK, ST_PIDS_EVENTS };

/* ---- small file helpers ---------------------------------------------------- */

static int write_at(const char *dir, const char *file, const char *value)
{
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
#ifdef BRIG_TEST_HOOKS
        /* BRIG_TEST_CGROUP_WRITE_ERRNO=N: a controller's file in one of
         * brig's groups refuses writes with errno N (a full or read-only
         * cgroup filesystem, a controller that went away). */
        const char *fail = getenv("BRIG_TEST_CGROUP_WRITE_ERRNO");
        const char *base = strrchr(dir, '/');
        if (fail && atoi(fail) > 0 && base && strncmp(base + 1, "brig-", 5) == 0 && strncmp(file, "cgroup.", 7) != 0)
                return -atoi(fail);
#endif
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        int e = n < 0 ? errno : 0;
        close(fd);
        return n < 0 ? -e : 0;
}

static char *read_at(const char *dir, const char *file)
{
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char *buf = NULL;
        size_t len = 0;
        ssize_t n = getdelim(&buf, &len, '\0', f);
        fclose(f);
        if (n < 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* "key value" lines (memory.events, pids.events, oom_control). */
static long long keyed_value(const char *dir, const char *file, const char *key)
{
        _cleanup_free_ char *text = read_at(dir, file);
        if (!text)
                return -1;
        size_t n = strlen(key);
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, n) == 0 && line[n] == ' ')
                        return atoll(line + n + 1);
        return -1;
}

static long long single_value(const char *dir, const char *file)
{
        _cleanup_free_ char *text = read_at(dir, file);
        if (!text || strncmp(text, "max", 3) == 0)
                return -1;
        return atoll(text);
}

static bool has_word(const char *text, const char *word)
{
        size_t n = strlen(word);
        for (const char *p = text; p && (p = strstr(p, word)); p += n)
                if ((p == text || p[-1] == ' ' || p[-1] == ',') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == ','))
                        return true;
        return false;
}

/* ---- where the hierarchies are ----------------------------------------------- */

struct hierarchies {
        char *v2_mount;
        char *v1_mount[CG_COUNT];
        char *v2_own;               /* our path inside v2 ("/..."), or NULL */
        char *v1_own[CG_COUNT];
};

static void hierarchies_free(struct hierarchies *h)
{
        free(h->v2_mount);
        free(h->v2_own);
        for (int c = 0; c < CG_COUNT; c++) {
                free(h->v1_mount[c]);
                free(h->v1_own[c]);
        }
}

static const char *v1_name(int c)
{
        return c == CG_IO ? "blkio" : controller_names[c];
}

/* ---- hierarchies hidden from our mount table --------------------------------- *
 *
 * `ip netns exec` (and a container without /sys/fs/cgroup) gives brig a
 * mount namespace whose fresh sysfs has no cgroup mounts, while the
 * process still lives in real groups (/proc/self/cgroup lists them). As
 * root the hierarchy can be had again without touching any mount table:
 * fsopen + fsmount make a detached mount of it (v1: the same controller
 * set names the existing hierarchy), reached through /proc/self/fd/N. The
 * fds are kept for the life of the process (one per hierarchy, close on
 * exec), like the host probe; brig's own state records such groups under
 * no /sys/fs/cgroup path, so only a later run's stale sweep removes what a
 * SIGKILLed brig left in them. */

static pthread_mutex_t hidden_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { char ctrls[64]; int fd; } hidden[8];

static int detached_hierarchy(const char *ctrls)
{
        bool v2 = *ctrls == '\0';
        pthread_mutex_lock(&hidden_lock);
        int fd = -1;
        size_t i = 0;
        for (; i < ARRAY_SIZE(hidden) && hidden[i].ctrls[0]; i++)
                if (strcmp(hidden[i].ctrls, v2 ? "-" : ctrls) == 0)
                        fd = hidden[i].fd;
        if (fd < 0 && i < ARRAY_SIZE(hidden) && strlen(ctrls) < sizeof hidden[i].ctrls) {
                _cleanup_close_ int fs = sys_fsopen(v2 ? "cgroup2" : "cgroup", FSOPEN_CLOEXEC);
                _cleanup_free_ char *list = strdup(ctrls);
                bool ok = fs >= 0 && list;
                for (char *save = NULL, *c = list ? strtok_r(list, ",", &save) : NULL; ok && c;
                     c = strtok_r(NULL, ",", &save))
                        ok = strncmp(c, "name=", 5) == 0 ? sys_fsconfig(fs, FSCONFIG_SET_STRING, "name", c + 5, 0) == 0
                                                        : sys_fsconfig(fs, FSCONFIG_SET_FLAG, c, NULL, 0) == 0;
                if (ok && sys_fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
                        fd = sys_fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
                /* remembered when it failed too: the next run need not ask */
                snprintf(hidden[i].ctrls, sizeof hidden[i].ctrls, "%s", v2 ? "-" : ctrls);
                hidden[i].fd = fd;
        }
        pthread_mutex_unlock(&hidden_lock);
        return fd;
}

static char *hidden_mount(const char *ctrls)
{
        int fd = detached_hierarchy(ctrls);
        return fd < 0 ? NULL : brig_strdup_printf("/proc/self/fd/%d", fd);
}

/* A line of /proc/self/cgroup, "ID:CONTROLLERS:PATH", split in place:
 * `line` keeps the ID. */
static bool cgroup_line(char *line, const char **ctrls, const char **path)
{
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
                return false;
        *c1 = *c2 = '\0';
        *ctrls = c1 + 1;
        *path = c2 + 1;
        return true;
}

/* The usual layouts, without the mount table: /proc/self/mountinfo is
 * printed afresh at each read (90 µs for 25 mounts here, more on a host
 * with containers), while the groups we live in are named in
 * /proc/self/cgroup (9 µs) and each hierarchy has its customary place.
 * v2: /sys/fs/cgroup itself (pure v2) or /sys/fs/cgroup/unified (hybrid),
 * taken when statfs says cgroup2 (there is only one v2 hierarchy). v1: a
 * directory /sys/fs/cgroup/CONTROLLERS, named as /proc/self/cgroup lists
 * the hierarchy's controllers ("cpu,cpuacct"), taken only when it is a
 * mount of a v1 cgroup filesystem whose options name the controller — the
 * test the mount table's reading makes (Linux 6.11's statmount; before
 * it, the mount table). Any hierarchy we live in that is not where
 * expected, and every other layout (no mounts at all: see above), is
 * looked up in the mount table, as always. */
static bool usual_hierarchies(struct hierarchies *h)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        char *line = NULL;
        size_t len = 0;
        bool ok = f != NULL;
        while (ok && getline(&line, &len, f) > 0) {
                const char *ctrls, *path;
                if (!cgroup_line(line, &ctrls, &path))
                        continue;
                struct statfs sf;
                if (strcmp(line, "0") == 0 && *ctrls == '\0') {
                        free(h->v2_own);
                        h->v2_own = strdup(path);
                        bool pure = statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
                        bool hybrid = !pure && statfs("/sys/fs/cgroup/unified", &sf) == 0 &&
                                      sf.f_type == CGROUP2_SUPER_MAGIC;
                        ok = h->v2_own && (pure || hybrid) &&
                             (h->v2_mount = strdup(pure ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified"));
                        continue;
                }
                bool wanted = false;
                for (int c = 0; c < CG_COUNT; c++)
                        wanted |= has_word(ctrls, v1_name(c)) && !h->v1_own[c];
                if (!wanted)
                        continue;
                char mnt[512], opts[1024];
                unsigned long magic = 0;
                ok = snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/%s", ctrls) < (int)sizeof mnt && !strchr(ctrls, '/') &&
                     sys_mount_options(mnt, &magic, opts, sizeof opts) == 0 && magic == CGROUP_SUPER_MAGIC;
                for (int c = 0; ok && c < CG_COUNT; c++) {
                        if (!has_word(ctrls, v1_name(c)) || h->v1_own[c])
                                continue;
                        ok = has_word(opts, v1_name(c)) && (h->v1_own[c] = strdup(path)) && (h->v1_mount[c] = strdup(mnt));
                }
        }
        free(line);
        if (f)
                fclose(f);
        if (!ok) {
                hierarchies_free(h);
                memset(h, 0, sizeof *h);
        }
        return ok;
}

static void find_hierarchies(struct hierarchies *h)
{
#ifdef BRIG_TEST_HOOKS
        /* BRIG_TEST_CGROUP_MOUNT_TABLE=1: the mount table's answer alone,
         * for the test that the usual places name the same groups
         * (test_cgroup_join.py) */
        if (!getenv("BRIG_TEST_CGROUP_MOUNT_TABLE"))
#endif
        if (usual_hierarchies(h))
                return;
#ifdef BRIG_TEST_HOOKS
        /* BRIG_TEST_CGROUP_USUAL_ONLY=1: no fallback, so that the test
         * knows the usual places answered (else: no groups at all) */
        if (getenv("BRIG_TEST_CGROUP_USUAL_ONLY"))
                return;
#endif
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char *line = NULL;
        size_t len = 0;
        bool any_mounted = false;
        while (f && getline(&line, &len, f) > 0) {
                char *sep = strstr(line, " - ");
                if (!sep)
                        continue;
                char mnt[4096], fstype[64], source[256], opts[1024];
                if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
                    sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) != 3)
                        continue;
                any_mounted |= strcmp(fstype, "cgroup2") == 0 || strcmp(fstype, "cgroup") == 0;
                if (strcmp(fstype, "cgroup2") == 0 && !h->v2_mount)
                        h->v2_mount = strdup(mnt);
                else if (strcmp(fstype, "cgroup") == 0)
                        for (int c = 0; c < CG_COUNT; c++)
                                if (!h->v1_mount[c] && has_word(opts, v1_name(c)))
                                        h->v1_mount[c] = strdup(mnt);
        }
        free(line);
        if (f)
                fclose(f);
        f = fopen("/proc/self/cgroup", "re");
        line = NULL;
        while (f && getline(&line, &len, f) > 0) {
                const char *ctrls, *path;
                if (!cgroup_line(line, &ctrls, &path))
                        continue;
                /* No cgroup mount at all, yet groups we live in: hidden
                 * (see above), not absent. */
                if (strcmp(line, "0") == 0 && *ctrls == '\0') {
                        free(h->v2_own);
                        h->v2_own = strdup(path);
                        if (!any_mounted && !h->v2_mount)
                                h->v2_mount = hidden_mount("");
                        continue;
                }
                for (int c = 0; c < CG_COUNT; c++)
                        if (has_word(ctrls, v1_name(c)) && !h->v1_own[c]) {
                                h->v1_own[c] = strdup(path);
                                if (!any_mounted && !h->v1_mount[c])
                                        h->v1_mount[c] = hidden_mount(ctrls);
                        }
        }
        free(line);
        if (f)
                fclose(f);
}

/* ---- a limit the caller already lives under ------------------------------------ */

static bool host_has_swap(void)
{
        FILE *f = fopen("/proc/meminfo", "re");
        char line[256];
        long long kb = -1;
        while (f && kb < 0 && fgets(line, sizeof line, f))
                if (sscanf(line, "SwapTotal: %lld kB", &kb) != 1)
                        kb = -1;
        if (f)
                fclose(f);
        return kb != 0;  /* unreadable: assume swap */
}

/* Walk from the caller's group up to the hierarchy's root, keeping the
 * tightest memory limit that swap cannot stretch. The root counts too: in
 * a cgroup namespace (a container) it is the container's own group, limit
 * and all; the host's real root has no memory.max (v1: "no limit"). */
static void tightest_limit(const char *mount, const char *own, bool v2, bool swap, struct cgroup_inherited *best)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s%s", mount, strcmp(own, "/") ? own : "");
        while (path) {
                long long lim = single_value(path, v2 ? "memory.max" : "memory.limit_in_bytes");
                bool swap_shut = !swap || (v2 ? single_value(path, "memory.swap.max") == 0
                                              : single_value(path, "memory.memsw.limit_in_bytes") == lim);
                /* v1 writes "no limit" as PAGE_COUNTER_MAX pages (~2^63) */
                if (lim > 0 && lim < (1LL << 62) && swap_shut && (!best->bytes || (uint64_t)lim < best->bytes) &&
                    strlen(path) < sizeof best->dir) {
                        best->bytes = (uint64_t)lim;
                        best->v2 = v2;
                        snprintf(best->dir, sizeof best->dir, "%s", path);
                }
                if (strlen(path) <= strlen(mount))
                        break;
                *strrchr(path, '/') = '\0';
        }
}

bool cgroup_inherited_memory(const struct cgroup *cg, struct cgroup_inherited *out)
{
        memset(out, 0, sizeof *out);
        /* The run's own look at the mount table and /proc/self/cgroup, a
         * moment ago, when it has one: reading them again cost a rootless
         * start 0.05-0.1 ms (mountinfo is printed afresh at each read). */
        struct hierarchies found = { 0 };
        const struct hierarchies *h = cg && cg->where ? cg->where : &found;
        if (h == &found)
                find_hierarchies(&found);
        bool swap = host_has_swap();
        if (h->v2_mount && h->v2_own)
                tightest_limit(h->v2_mount, h->v2_own, true, swap, out);
        if (h->v1_mount[CG_MEMORY] && h->v1_own[CG_MEMORY])
                tightest_limit(h->v1_mount[CG_MEMORY], h->v1_own[CG_MEMORY], false, swap, out);
        hierarchies_free(&found);
        out->oom_kills_before = cgroup_inherited_oom_kills(out);
        return out->bytes != 0;
}

long long cgroup_inherited_oom_kills(const struct cgroup_inherited *in)
{
        if (!in->bytes)
                return 0;
        long long n = in->v2 ? keyed_value(in->dir, "memory.events", "oom_kill")
                             : keyed_value(in->dir, "memory.oom_control", "oom_kill");
        return n < 0 ? 0 : n;
}

const char *cgroup_memory_outlook(char *detail, size_t n)
{
        /* What brig run would find, read-only: cgroup_create() without
         * its writes (v2_parent may enable a controller to find out). */
        struct hierarchies h = { 0 };
        find_hierarchies(&h);
        const char *kind = NULL;
        detail[0] = '\0';
        if (h.v1_mount[CG_MEMORY] && h.v1_own[CG_MEMORY]) {
                _cleanup_free_ char *dir = brig_strdup_printf("%s%s", h.v1_mount[CG_MEMORY],
                                                             strcmp(h.v1_own[CG_MEMORY], "/") ? h.v1_own[CG_MEMORY] : "");
                if (dir && access(dir, W_OK) == 0) {
                        kind = "cgroup";
                        if (strncmp(dir, "/proc/self/fd/", 14) == 0)
                                snprintf(detail, n, "a v1 group below %s, in a hierarchy not mounted here (ip netns "
                                                    "exec?): brig mounts it detached", h.v1_own[CG_MEMORY]);
                        else
                                snprintf(detail, n, "a v1 group below %s", dir);
                }
        }
        if (!kind && h.v2_mount && h.v2_own) {
                _cleanup_free_ char *path = brig_strdup_printf("%s%s", h.v2_mount, strcmp(h.v2_own, "/") ? h.v2_own : "");
                while (path && !kind) {
                        _cleanup_free_ char *avail = read_at(path, "cgroup.controllers");
                        _cleanup_free_ char *sub = read_at(path, "cgroup.subtree_control");
                        _cleanup_free_ char *procs = read_at(path, "cgroup.procs");
                        /* v2 hands a controller to children only from a group
                         * without processes of its own */
                        if (access(path, W_OK) == 0 && avail && has_word(avail, "memory") &&
                            ((sub && has_word(sub, "memory")) || (procs && !*procs))) {
                                kind = "cgroup";
                                if (strncmp(path, "/proc/self/fd/", 14) == 0)
                                        snprintf(detail, n, "a v2 group in a hierarchy not mounted here (ip netns "
                                                            "exec?): brig mounts it detached");
                                else
                                        snprintf(detail, n, "a v2 group below %s", path);
                        }
                        if (strlen(path) <= strlen(h.v2_mount))
                                break;
                        *strrchr(path, '/') = '\0';
                }
        }
        hierarchies_free(&h);
        struct cgroup_inherited in;
        if (!kind && cgroup_inherited_memory(NULL, &in)) {
                kind = "inherited cgroup";
                snprintf(detail, n, "brig runs under %llu MiB (%s): bounds any --memory of at least that",
                         (unsigned long long)(in.bytes >> 20), in.dir);
        }
        if (!kind) {
                kind = "rlimit";
                snprintf(detail, n, "per process only: no writable memory cgroup (memfd, shared memory not bounded; "
                                    "docs/limits.md)");
        }
        return kind;
}

/* ---- stale groups -------------------------------------------------------------- */

static void kill_and_remove(const char *dir)
{
        /* Empty (a run whose pid 1 was reaped: everything inside died with
         * it): removed at once, nothing to kill. A group with a process or
         * a group of its own in it is EBUSY. */
        if (rmdir(dir) == 0 || errno != EBUSY)
                return;
        /* v2 has cgroup.kill (5.14+); otherwise kill what cgroup.procs lists. */
        if (write_at(dir, "cgroup.kill", "1") < 0) {
                for (int round = 0; round < 3; round++) {
                        _cleanup_free_ char *procs = read_at(dir, "cgroup.procs");
                        if (!procs || !*procs)
                                break;
                        for (char *l = procs; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                                kill(atoi(l), SIGKILL);
                }
        }
        /* Exiting tasks leave the group a moment after they are reaped:
         * retry briefly, a little longer each time (about 1 s in all). */
        for (int i = 1; i <= 60 && rmdir(dir) < 0 && errno == EBUSY; i++)
                usleep((useconds_t)(i * 500));
}

/* A group brig made is named by the path it was made at: in a hierarchy's
 * mount, or below one of this process's descriptors (/proc/self/fd/N: a
 * hierarchy this mount namespace does not show, mounted detached), whose
 * magic link is the only one taken (one of an earlier process's names
 * another descriptor now: left to the stale sweep). Any other symlink on
 * the way (a record forged to aim elsewhere) and it is not brig's. */
static bool no_symlink_on_the_way(const char *dir)
{
        int base = AT_FDCWD;
        const char *rel = dir;
        if (strncmp(dir, "/proc/self/fd/", 14) == 0) {
                char *end;
                long n = strtol(dir + 14, &end, 10);
                if (end == dir + 14 || *end != '/' || n < 0 || n > INT_MAX)
                        return false;
                base = (int)n;
                rel = end + 1;
        }
        struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_NO_SYMLINKS };
        int fd = sys_openat2(base, rel, &how);
        if (fd >= 0) {
                close(fd);
                return true;
        }
        if (errno != ENOSYS)
                return false;
        /* before openat2 (5.6): the real path is the path itself */
        char real[PATH_MAX];
        return base != AT_FDCWD || (realpath(dir, real) && strcmp(real, dir) == 0);
}

bool cgroup_remove_dead(const char *dir, const char *name)
{
        /* Only what brig made: a directory of that very name, in a cgroup
         * filesystem, owned by us (the kernel makes a group its creator's);
         * never another user's. */
        const char *base = strrchr(dir, '/');
        struct stat st;
        struct statfs sf;
        if (!base || strcmp(base + 1, name) != 0 || strstr(dir, "/../"))
                return false;
        if (lstat(dir, &st) < 0)
                return errno == ENOENT;
        if (!no_symlink_on_the_way(dir))
                return false;
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || statfs(dir, &sf) < 0 ||
            (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC))
                return false;
        kill_and_remove(dir);
        return access(dir, F_OK) < 0 && errno == ENOENT;
}

/* How many of this run's own groups are directly in `parent`. */
static nlink_t own_in(const struct cgroup *cg, const char *parent)
{
        size_t n = strlen(parent);
        nlink_t own = 0;
        for (int c = -1; c < CG_COUNT; c++) {
                const char *dir = c < 0 ? cg->v2_dir : cg->v1_dir[c];
                bool again = false;
                for (int o = 0; c >= 0 && o < c; o++)
                        again |= cg->v1_dir[o] && dir && strcmp(cg->v1_dir[o], dir) == 0;
                if (dir && !again && strncmp(dir, parent, n) == 0 && dir[n] == '/' && !strchr(dir + n + 1, '/'))
                        own++;
        }
        return own;
}

/* Groups in `parent` whose brig is provably gone, whether or not a run
 * record names them (a record in another state root: XDG_RUNTIME_DIR
 * changed). A cgroup directory's link count is 2 and one per group in it
 * (kernfs keeps it so): a parent that holds none but this run's own has
 * nothing to remove, and one we may not write to has nothing we could
 * remove (rmdir needs that) — each told by one system call, where reading
 * the directory (kernfs makes its listing afresh) took five and 10-40 µs
 * in all, for each of the five hierarchies a hybrid host has. */
static void remove_stale(const struct cgroup *cg, const char *parent)
{
        struct stat st;
        if (stat(parent, &st) < 0 || (st.st_nlink >= 2 && st.st_nlink - 2 <= own_in(cg, parent)) ||
            access(parent, W_OK) < 0)
                return;
        DIR *d = opendir(parent);
        if (!d)
                return;
        struct dirent *e;
        while ((e = readdir(d))) {
                struct owner o;
                if (strncmp(e->d_name, "brig-", 5) != 0 || !owner_parse(e->d_name + 5, &o, NULL) ||
                    owner_alive(&o) != 0)
                        continue;  /* not brig's, its brig is alive, or another pid namespace's */
                char dir[4096];
                snprintf(dir, sizeof dir, "%s/%s", parent, e->d_name);
                (void)cgroup_remove_dead(dir, e->d_name);
        }
        closedir(d);
}

static int stale_parent(struct cgroup *cg, const char *parent)
{
        return strv_contains(&cg->stale_parents, parent) ? 0 : strv_push(&cg->stale_parents, parent);
}

/* Off the start path: the supervisor sweeps while the child builds the
 * sandbox (on another CPU, where one is free), rather than before the
 * first mkdir — the names it removes were never in this run's way (each
 * group's name is its own brig's), and a sweep reads whole directories
 * (0.2-0.3 ms here). Once per run: the groups a dead brig left in any
 * hierarchy this one could have used, and what the run records and
 * ephemeral state of the dead name wherever it is (reaper.c). */
void cgroup_sweep(struct cgroup *cg)
{
        if (cg && cg->swept)
                return;
        reaper_sweep();
        for (size_t i = 0; cg && i < cg->stale_parents.n; i++)
                remove_stale(cg, cg->stale_parents.items[i]);
        if (cg)
                cg->swept = true;
}

/* ---- creating ------------------------------------------------------------------ */

static char *group_name(void)
{
        static unsigned seq;  /* a library caller may run several sandboxes */
        struct owner o;
        char id[96];
        owner_self(&o);
        if (owner_format(&o, id, sizeof id) < 0)
                return NULL;
        return brig_strdup_printf("brig-%s-%u", id, __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
}

/* The v2 parent: our own cgroup or the nearest ancestor that offers the
 * controllers to its children (or can be made to, when it has no
 * processes of its own) and lets us create a directory. */
static char *v2_parent(const struct hierarchies *h, const bool *want)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s%s", h->v2_mount, strcmp(h->v2_own, "/") ? h->v2_own : "");
        while (path) {
                bool ok = access(path, W_OK) == 0;
                _cleanup_free_ char *sub = read_at(path, "cgroup.subtree_control");
                _cleanup_free_ char *avail = read_at(path, "cgroup.controllers");
                for (int c = 0; ok && c < CG_COUNT; c++) {
                        if (!want[c] || (sub && has_word(sub, controller_names[c])))
                                continue;
                        char add[16];
                        snprintf(add, sizeof add, "+%s", controller_names[c]);
                        ok = avail && has_word(avail, controller_names[c]) &&
                             write_at(path, "cgroup.subtree_control", add) == 0;
                }
                if (ok)
                        return TAKE_PTR(path);
                if (strlen(path) <= strlen(h->v2_mount))
                        return NULL;
                *strrchr(path, '/') = '\0';
        }
        return NULL;
}

static int set_limits_v2(struct cgroup *cg, const struct limits *l, brig_error **err)
{
        char v[64];
        int r = 0;
        if (cg->on_v2[CG_MEMORY] && l->memory) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory);
                r = write_at(cg->v2_dir, "memory.max", v);
                if (r == 0 && write_at(cg->v2_dir, "memory.swap.max", "0") < 0 && errno != ENOENT)
                        r = -errno;
                if (r < 0)
                        return brig_err(err, -r, "--memory: write %s/memory.max", cg->v2_dir);
        }
        if (cg->on_v2[CG_PIDS] && l->pids) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->pids);
                if ((r = write_at(cg->v2_dir, "pids.max", v)) < 0)
                        return brig_err(err, -r, "--pids: write %s/pids.max", cg->v2_dir);
        }
        if (cg->on_v2[CG_CPU] && l->cpus_millis) {
                snprintf(v, sizeof v, "%llu 100000", (unsigned long long)l->cpus_millis * 100);
                if ((r = write_at(cg->v2_dir, "cpu.max", v)) < 0)
                        return brig_err(err, -r, "--cpus: write %s/cpu.max", cg->v2_dir);
        }
        if (cg->on_v2[CG_IO] && l->io_weight) {
                snprintf(v, sizeof v, "default %u", l->io_weight);
                if ((r = write_at(cg->v2_dir, "io.weight", v)) < 0)
                        return brig_err(err, -r, "--io-weight: write %s/io.weight", cg->v2_dir);
        }
        return 0;
}

static int set_limits_v1(struct cgroup *cg, const struct limits *l, brig_error **err)
{
        char v[64];
        int r;
        if (cg->on_v1[CG_MEMORY] && l->memory) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory);
                if ((r = write_at(cg->v1_dir[CG_MEMORY], "memory.limit_in_bytes", v)) < 0)
                        return brig_err(err, -r, "--memory: write %s/memory.limit_in_bytes", cg->v1_dir[CG_MEMORY]);
                /* memory+swap equal to memory: no swap (absent without swap accounting) */
                r = write_at(cg->v1_dir[CG_MEMORY], "memory.memsw.limit_in_bytes", v);
                if (r < 0 && r != -ENOENT)
                        return brig_err(err, -r, "--memory: write %s/memory.memsw.limit_in_bytes", cg->v1_dir[CG_MEMORY]);
                /* v1 keeps TCP buffers out of memory.limit_in_bytes, in a
                 * counter of their own that is unlimited by default (v2
                 * charges them to memory.max). Absent on kernels without
                 * kmem accounting. */
                r = write_at(cg->v1_dir[CG_MEMORY], "memory.kmem.tcp.limit_in_bytes", v);
                if (r < 0 && r != -ENOENT && r != -EOPNOTSUPP)
                        return brig_err(err, -r, "--memory: write %s/memory.kmem.tcp.limit_in_bytes", cg->v1_dir[CG_MEMORY]);
        }
        if (cg->on_v1[CG_PIDS] && l->pids) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->pids);
                if ((r = write_at(cg->v1_dir[CG_PIDS], "pids.max", v)) < 0)
                        return brig_err(err, -r, "--pids: write %s/pids.max", cg->v1_dir[CG_PIDS]);
        }
        if (cg->on_v1[CG_CPU] && l->cpus_millis) {
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->cpus_millis * 100);
                if ((r = write_at(cg->v1_dir[CG_CPU], "cpu.cfs_period_us", "100000")) < 0 ||
                    (r = write_at(cg->v1_dir[CG_CPU], "cpu.cfs_quota_us", v)) < 0)
                        return brig_err(err, -r, "--cpus: write %s/cpu.cfs_quota_us", cg->v1_dir[CG_CPU]);
        }
        if (cg->on_v1[CG_IO] && l->io_weight) {
                unsigned w = l->io_weight < 10 ? 10 : l->io_weight > 1000 ? 1000 : l->io_weight;
                snprintf(v, sizeof v, "%u", w);
                /* blkio.weight was CFQ's (gone since Linux 5.0); BFQ has
                 * its own file. Neither there: the group weighs nothing,
                 * and the run says so (io_unenforced) instead of counting
                 * it as enforced. */
                if (write_at(cg->v1_dir[CG_IO], "blkio.weight", v) < 0 &&
                    write_at(cg->v1_dir[CG_IO], "blkio.bfq.weight", v) < 0)
                        cg->on_v1[CG_IO] = false;
        }
        return 0;
}

int cgroup_update(struct cgroup *cg, const struct limits *l, brig_error **err)
{
        static const struct { int ctl; const char *flag; } need[] = {
                { CG_MEMORY, "--memory" }, { CG_PIDS, "--pids" }, { CG_CPU, "--cpus" } };
        const uint64_t asked[] = { l->memory, l->pids, l->cpus_millis };
        for (size_t i = 0; i < 3; i++)
                if (asked[i] && (!cg || !cgroup_enforces(cg, need[i].ctl)))
                        return brig_err(err, EOPNOTSUPP, "%s: no %s cgroup of this sandbox's enforces it (it runs "
                                        "on rlimits or without): the limit cannot change while it runs",
                                        need[i].flag, controller_names[need[i].ctl]);
        /* v1 keeps memory.limit_in_bytes at or below memsw's: a raise
         * writes memsw first (set_limits_v1 writes it after), a cut
         * fails that first write and goes through in order */
        if (l->memory && cg->on_v1[CG_MEMORY]) {
                char v[32];
                snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory);
                (void)write_at(cg->v1_dir[CG_MEMORY], "memory.memsw.limit_in_bytes", v);
        }
        int r = set_limits_v2(cg, l, err);
        return r < 0 ? r : set_limits_v1(cg, l, err);
}

/* A directory we could make a group in. */
static bool writable(const char *dir)
{
        return dir && access(dir, W_OK) == 0;
}

int cgroup_create(const struct limits *l, struct cgroup **ret, bool *degraded, brig_error **err)
{
        *ret = NULL;
        *degraded = false;
        bool want[CG_COUNT] = {
                [CG_MEMORY] = l->memory != 0, [CG_PIDS] = l->pids != 0,
                [CG_CPU] = l->cpus_millis != 0, [CG_IO] = l->io_weight != 0,
        };
        struct hierarchies h = { 0 };
        find_hierarchies(&h);
        struct cgroup *cg = calloc(1, sizeof *cg);
        _cleanup_free_ char *name = group_name();
        _cleanup_free_ char *v2_dir = NULL;
        char *v1_dir[CG_COUNT] = { 0 };
        struct strv planned = { 0 };
        bool v2_wanted[CG_COUNT] = { 0 };
        int r = 0;
        if (!cg || !name) {
                free(cg);
                hierarchies_free(&h);
                return brig_err(err, ENOMEM, "cgroup");
        }
        cg->v2_fd = -1;
        for (int i = 0; i < 4; i++)
                cg->stat_fd[i] = -1;
        for (int c = 0; c < CG_COUNT; c++)
                cg->v1_tasks[c] = -1;

        /* Groups of a brig that died (SIGKILL) go in any hierarchy we could
         * have used, whatever this run needs (cgroup_sweep, later). */
        for (int c = 0; c < CG_COUNT; c++) {
                if (!h.v1_mount[c] || !h.v1_own[c])
                        continue;
                _cleanup_free_ char *parent = brig_strdup_printf("%s%s", h.v1_mount[c],
                                                                 strcmp(h.v1_own[c], "/") ? h.v1_own[c] : "");
                r = parent ? stale_parent(cg, parent) : -ENOMEM;
                if (r < 0)
                        goto fail;
        }

        /* First where the groups go: v2 for every controller it offers,
         * v1 for the rest (hybrid hosts). */
        if (h.v2_mount && h.v2_own) {
                _cleanup_free_ char *root_ctrls = read_at(h.v2_mount, "cgroup.controllers");
                _cleanup_free_ char *own = brig_strdup_printf("%s%s", h.v2_mount, strcmp(h.v2_own, "/") ? h.v2_own : "");
                bool any = false;
                for (int c = 0; c < CG_COUNT; c++) {
                        v2_wanted[c] = want[c] && root_ctrls && has_word(root_ctrls, controller_names[c]);
                        any |= v2_wanted[c];
                }
                if (own && (r = stale_parent(cg, own)) < 0)
                        goto fail;
                /* cgroup.freeze is part of every v2 group, no controller needed. */
                any |= l->want_freezer;
                /* A v2 group only where it enforces something (on hybrid
                 * hosts the v2 tree often has none of our controllers). */
                _cleanup_free_ char *parent = any ? v2_parent(&h, v2_wanted) : NULL;
                if (parent) {
                        if ((r = stale_parent(cg, parent)) < 0)
                                goto fail;
                        v2_dir = brig_strdup_printf("%s/%s", parent, name);
                        if (v2_dir && (r = strv_push(&planned, v2_dir)) < 0)
                                goto fail;
                }
        }
        for (int c = 0; c < CG_COUNT; c++) {
                if (!want[c] || (v2_dir && v2_wanted[c]) || !h.v1_mount[c] || !h.v1_own[c])
                        continue;
                _cleanup_free_ char *parent = brig_strdup_printf("%s%s", h.v1_mount[c],
                                                                 strcmp(h.v1_own[c], "/") ? h.v1_own[c] : "");
                if (!writable(parent))
                        continue;
                v1_dir[c] = brig_strdup_printf("%s/%s", parent, name);
                /* controllers may share one hierarchy (cpu,cpuacct) */
                if (v1_dir[c] && !strv_contains(&planned, v1_dir[c]) && (r = strv_push(&planned, v1_dir[c])) < 0)
                        goto fail;
        }
        /* v1 groups alone: made after clone3 (cgroup_make_deferred) and
         * counted as enforcing now, so that any failure to make them then
         * fails the run. Not so beside a v2 group (it comes first: the
         * child is born in it, and one record names them all), nor for
         * --io-weight, whose enforcement depends on a file of the group
         * that the plan must know of before. */
        cg->v1_deferred = planned.n && !v2_dir && !(want[CG_IO] && v1_dir[CG_IO]);
        if (cg->v1_deferred) {
                for (int c = 0; c < CG_COUNT; c++) {
                        cg->on_v1[c] = v1_dir[c] != NULL;
                        cg->v1_dir[c] = TAKE_PTR(v1_dir[c]);
                }
                goto made;
        }
        /* The proof that they are ours, on disk before the first mkdir. */
        if (planned.n && (r = run_record_write(name, &planned, &cg->record, err)) < 0)
                goto fail;
        test_pause("cgroup-recorded");
        if (v2_dir && mkdir(v2_dir, 0755) == 0) {
                cg->v2_dir = TAKE_PTR(v2_dir);
                /* the only way in (CLONE_INTO_CGROUP): without it the
                 * group would enforce nothing on the sandbox */
                cg->v2_fd = open(cg->v2_dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
#ifdef BRIG_TEST_HOOKS
                /* BRIG_TEST_CGROUP_V2_OPEN_ERRNO=N: that open fails with
                 * errno N (EMFILE: a front end at its descriptor limit) */
                const char *fail = getenv("BRIG_TEST_CGROUP_V2_OPEN_ERRNO");
                if (fail && atoi(fail) > 0) {
                        closep(&cg->v2_fd);
                        errno = atoi(fail);
                }
#endif
                if (cg->v2_fd < 0) {
                        r = brig_err(err, errno, "cgroup: open %s, the sandbox's only way into its v2 group "
                                                 "(CLONE_INTO_CGROUP)", cg->v2_dir);
                        goto fail;
                }
                for (int c = 0; c < CG_COUNT; c++)
                        cg->on_v2[c] = v2_wanted[c];
        }
        for (int c = 0; c < CG_COUNT; c++) {
                if (!v1_dir[c])
                        continue;
                bool shared = false;
                for (int o = 0; o < c; o++)
                        shared |= cg->v1_dir[o] && strcmp(cg->v1_dir[o], v1_dir[c]) == 0;
                if (shared || mkdir(v1_dir[c], 0755) == 0) {
                        cg->v1_dir[c] = TAKE_PTR(v1_dir[c]);
                        cg->on_v1[c] = true;
                }
        }
        test_pause("cgroup-made");
        r = set_limits_v2(cg, l, err);
        if (r == 0)
                r = set_limits_v1(cg, l, err);
        if (r < 0)
                goto fail;
made:
        for (int c = 0; c < CG_COUNT; c++)
                if (want[c] && !cg->on_v2[c] && !cg->on_v1[c] && c != CG_IO)
                        *degraded = true;
        cg->where = malloc(sizeof h);
        if (cg->where)
                *cg->where = h;  /* the strings move with it */
        else
                hierarchies_free(&h);
        strv_free(&planned);
        *ret = cg;
        return 0;
fail:
        if (r == -ENOMEM && err && !*err)
                brig_err(err, ENOMEM, "cgroup");
        for (int c = 0; c < CG_COUNT; c++)
                free(v1_dir[c]);
        hierarchies_free(&h);
        strv_free(&planned);
        cgroup_destroy(cg);
        return r;
}

bool cgroup_enforces(const struct cgroup *cg, int controller)
{
        return cg && (cg->on_v2[controller] || cg->on_v1[controller]);
}

void cgroup_missing(const struct cgroup *cg, const struct limits *l, bool memory_elsewhere, char *buf, size_t n)
{
        const bool want[CG_COUNT] = {
                [CG_MEMORY] = l->memory != 0 && !memory_elsewhere, [CG_PIDS] = l->pids != 0, [CG_CPU] = l->cpus_millis != 0,
                [CG_IO] = l->io_weight != 0,
        };
        buf[0] = '\0';
        for (int c = 0; c < CG_COUNT; c++) {
                if (!want[c] || cgroup_enforces(cg, c))
                        continue;
                size_t used = strlen(buf);
                snprintf(buf + used, n - used, "%s%s", used ? ", " : "", controller_names[c]);
        }
}

int cgroup_clone_fd(const struct cgroup *cg)
{
        return cg ? cg->v2_fd : -1;
}

/* ---- joining the v1 groups -------------------------------------------------- *
 *
 * A v1 hierarchy has no CLONE_INTO_CGROUP. The supervisor writing the
 * child's pid to cgroup.procs costs 6-10 ms on a quiet host: moving a
 * whole thread group takes cgroup_threadgroup_rwsem for writing, and
 * percpu_down_write waits for an RCU grace period unless another writer
 * came just before (kernel/cgroup/cgroup.c cgroup_procs_write_start).
 * One thread moving itself — pid 0 written to the v1 `tasks` file — takes
 * no such lock: 0.05 ms. So the supervisor opens each group's `tasks` and
 * sends them to the child after the go (the groups may be made only then:
 * cgroup_make_deferred), and the child, still single-threaded (clone3
 * makes one thread) and before its mounts and anything of the command,
 * writes "0" to each. v1 checks the permission with the opener's
 * credentials (of->file->f_cred, __cgroup1_procs_write), so the
 * supervisor's fd works from inside the child's user namespace; the child
 * closes them at once, and none is ever open in the command (close_range
 * before its exec in any case). */

/* The flag that made brig use the hierarchy, for the message. */
static const char *const controller_flags[] = {
        [CG_MEMORY] = "--memory", [CG_PIDS] = "--pids", [CG_CPU] = "--cpus", [CG_IO] = "--io-weight",
};

/* The first controller whose group is this one (cpu,cpuacct share one). */
static bool first_of_dir(const struct cgroup *cg, int c)
{
        for (int o = 0; o < c; o++)
                if (cg->v1_dir[o] && strcmp(cg->v1_dir[o], cg->v1_dir[c]) == 0)
                        return false;
        return true;
}

int cgroup_join_open(struct cgroup *cg, brig_error **err)
{
        for (int c = 0; cg && c < CG_COUNT; c++) {
                if (!cg->v1_dir[c] || !first_of_dir(cg, c) || cg->v1_tasks[c] >= 0)
                        continue;
                char path[4096];
                snprintf(path, sizeof path, "%s/tasks", cg->v1_dir[c]);
                cg->v1_tasks[c] = open(path, O_WRONLY | O_CLOEXEC);
                if (cg->v1_tasks[c] < 0)
                        return brig_err(err, errno, "%s: open %s (the cgroup v1 %s hierarchy) for the sandbox to join",
                                        controller_flags[c], path, v1_name(c));
        }
        return 0;
}

void cgroup_join_close(struct cgroup *cg)
{
        for (int c = 0; cg && c < CG_COUNT; c++)
                closep(&cg->v1_tasks[c]);
}

bool cgroup_join_pending(const struct cgroup *cg)
{
        for (int c = 0; cg && c < CG_COUNT; c++)
                if (cg->v1_dir[c])
                        return true;
        return false;
}

int cgroup_join_send(struct cgroup *cg, int sync_fd)
{
        struct sync_msg m = { .type = SYNC_CGROUP };
        int fds[CG_COUNT];
        size_t n = 0;
        for (int c = 0; c < CG_COUNT; c++)
                if (cg->v1_tasks[c] >= 0) {
                        m.kinds[n] = c;
                        fds[n++] = cg->v1_tasks[c];
                }
        m.status = (int)n;
        int r = sync_send_fds(sync_fd, &m, fds, n);
        cgroup_join_close(cg);  /* the child's copies are its own */
        return r;
}

/* The supervisor's descriptors, one for each group this copy of cg names
 * (the child's: made at clone3, it knows what to expect). */
static int join_receive(struct cgroup *cg, int sync_fd, brig_error **err)
{
        struct sync_msg m;
        int fds[CG_COUNT];
        size_t n = 0;
        int r = sync_recv_fds(sync_fd, &m, fds, CG_COUNT, &n);
        cg->join_taken = true;
        if (r <= 0 || m.type != SYNC_CGROUP || m.status != (int)n) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                return brig_err(err, r < 0 ? -r : EPROTO, "cgroup: the supervisor's groups to join");
        }
        for (size_t i = 0; i < n; i++) {
                int c = m.kinds[i];
                if (c >= 0 && c < CG_COUNT && cg->v1_dir[c] && cg->v1_tasks[c] < 0) {
                        cg->v1_tasks[c] = fds[i];
                        continue;
                }
                close(fds[i]);
                r = -EPROTO;
        }
        for (int c = 0; r > 0 && c < CG_COUNT; c++)
                if (cg->v1_dir[c] && first_of_dir(cg, c) && cg->v1_tasks[c] < 0)
                        r = -EPROTO;
        if (r < 0) {
                cgroup_join_close(cg);
                return brig_err(err, -r, "cgroup: the supervisor's groups to join");
        }
        return 0;
}

void cgroup_join_abandon(struct cgroup *cg, int sync_fd)
{
        if (!cgroup_join_pending(cg) || cg->join_taken)
                return;
        /* The supervisor sends it, or fails and kills us: this ends. */
        struct sync_msg m;
        int fds[CG_COUNT];
        size_t n = 0;
        (void)sync_recv_fds(sync_fd, &m, fds, CG_COUNT, &n);
        cg->join_taken = true;
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
}

int cgroup_join_self(struct cgroup *cg, int sync_fd, brig_error **err)
{
        if (!cgroup_join_pending(cg))
                return 0;
        int r = join_receive(cg, sync_fd, err);
        for (int c = 0; r == 0 && c < CG_COUNT; c++) {
                if (cg->v1_tasks[c] < 0)
                        continue;
                int e = write(cg->v1_tasks[c], "0", 1) == 1 ? 0 : errno;
#ifdef BRIG_TEST_HOOKS
                /* BRIG_TEST_CGROUP_JOIN_ERRNO=N: joining the v1 group of
                 * controller BRIG_TEST_CGROUP_JOIN (memory, pids, cpu or io;
                 * any when unset) fails with errno N. */
                const char *fail = getenv("BRIG_TEST_CGROUP_JOIN_ERRNO");
                const char *which = getenv("BRIG_TEST_CGROUP_JOIN");
                if (fail && atoi(fail) > 0 && (!which || strcmp(which, controller_names[c]) == 0))
                        e = atoi(fail);
#endif
                if (e)
                        r = brig_err(err, e, "%s: join the sandbox's cgroup %s (the cgroup v1 %s hierarchy)",
                                     controller_flags[c], cg->v1_dir[c], v1_name(c));
        }
        cgroup_join_close(cg);
        return r;
}

/* A directory of that name that brig did not make is not brig's to
 * remove (cgroup_destroy): MADE says which it did, by the first
 * controller of each directory. */
static void forget_unmade(struct cgroup *cg, const bool *made)
{
        for (int c = 0; c < CG_COUNT; c++) {
                bool kept = made[c];
                for (int o = 0; o < c && !kept; o++)
                        kept = made[o] && cg->v1_dir[c] && strcmp(cg->v1_dir[o], cg->v1_dir[c]) == 0;
                if (!kept) {
                        free(cg->v1_dir[c]);
                        cg->v1_dir[c] = NULL;
                        cg->on_v1[c] = false;
                }
        }
}

/* The groups cgroup_create planned and left for now: recorded, made and
 * limited while the child, released, sets up its network and sysctls,
 * which need neither
 * (nothing of the command exists before it joins, and it joins before
 * its mounts, whose memory the kernel charges to the group). */
int cgroup_make_deferred(struct cgroup *cg, const struct limits *l, brig_error **err)
{
        if (!cg || !cg->v1_deferred)
                return 0;
        cg->v1_deferred = false;
        struct strv planned = { 0 };
        int r = cgroup_paths(cg, &planned);
        if (r == 0)
                r = run_record_write(strrchr(planned.items[0], '/') + 1, &planned, &cg->record, err);
        strv_free(&planned);
        if (r == -ENOMEM && err && !*err)
                r = brig_err(err, ENOMEM, "cgroup");
        if (r < 0)
                return r;
        test_pause("cgroup-recorded");
        bool made[CG_COUNT] = { 0 };
        for (int c = 0; c < CG_COUNT; c++) {
                if (!cg->v1_dir[c] || !first_of_dir(cg, c))
                        continue;
                int e = 0;
#ifdef BRIG_TEST_HOOKS
                /* BRIG_TEST_CGROUP_MKDIR_ERRNO=N: the v1 group of controller
                 * BRIG_TEST_CGROUP_MKDIR (memory, pids, cpu or io) is not
                 * made: its mkdir fails with errno N */
                const char *fail = getenv("BRIG_TEST_CGROUP_MKDIR_ERRNO");
                const char *which = getenv("BRIG_TEST_CGROUP_MKDIR");
                if (fail && which && strcmp(which, controller_names[c]) == 0)
                        e = atoi(fail);
#endif
                if (!e && mkdir(cg->v1_dir[c], 0755) < 0)
                        e = errno;
                if (!e) {
                        made[c] = true;
                        continue;
                }
                r = brig_err(err, e, "%s: make the sandbox's cgroup %s (the cgroup v1 %s hierarchy)",
                             controller_flags[c], cg->v1_dir[c], v1_name(c));
                forget_unmade(cg, made);
                return r;
        }
        test_pause("cgroup-made");
        return set_limits_v1(cg, l, err);
}

/* Where each of cgroup_stats' files is: its group's directory and name,
 * or NULL where no hierarchy of ours has it. */
static const char *stat_file(const struct cgroup *cg, int i, const char **name)
{
        bool v2 = cg->on_v2[i < ST_PIDS_PEAK ? CG_MEMORY : CG_PIDS];
        bool v1 = cg->on_v1[i < ST_PIDS_PEAK ? CG_MEMORY : CG_PIDS];
        static const char *const names[2][4] = {
                { "memory.max_usage_in_bytes", "memory.oom_control", "pids.peak", "pids.events" },
                { "memory.peak", "memory.events", "pids.peak", "pids.events" },
        };
        *name = names[v2][i];
        return v2 ? cg->v2_dir : v1 ? cg->v1_dir[i < ST_PIDS_PEAK ? CG_MEMORY : CG_PIDS] : NULL;
}

static void stat_open(struct cgroup *cg, int i)
{
        const char *name, *dir = stat_file(cg, i, &name);
        char path[4096];
        if (dir && cg->stat_fd[i] < 0 && snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path)
                cg->stat_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
}

void cgroup_stats_open(struct cgroup *cg)
{
        for (int i = 0; cg && i < 4; i++)
                stat_open(cg, i);
}

static void stats_close(struct cgroup *cg)
{
        for (int i = 0; i < 4; i++)
                closep(&cg->stat_fd[i]);
}

/* One of cgroup_stats' files: read again from its start through the
 * descriptor opened ahead (one system call), or opened by its path. */
static char *stat_text(const struct cgroup *cg, int i, char *buf, size_t n)
{
        const char *name, *dir = stat_file(cg, i, &name);
        if (!dir)
                return NULL;
        if (cg->stat_fd[i] >= 0) {
                ssize_t got = pread(cg->stat_fd[i], buf, n - 1, 0);
                if (got < 0)
                        return NULL;
                buf[got] = '\0';
                return buf;
        }
        char *text = read_at(dir, name);
        if (text)
                snprintf(buf, n, "%s", text);
        free(text);
        return text ? buf : NULL;
}

static long long stat_single(const struct cgroup *cg, int i)
{
        char buf[256];
        const char *text = stat_text(cg, i, buf, sizeof buf);
        return !text || strncmp(text, "max", 3) == 0 ? -1 : atoll(text);
}

static long long stat_keyed(const struct cgroup *cg, int i, const char *key)
{
        char buf[1024];
        const char *text = stat_text(cg, i, buf, sizeof buf);
        size_t n = strlen(key);
        for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, key, n) == 0 && line[n] == ' ')
                        return atoll(line + n + 1);
        return -1;
}

void cgroup_oom_open(struct cgroup *cg)
{
        if (cg)
                stat_open(cg, ST_OOM);
}

long long cgroup_oom_kills(const struct cgroup *cg)
{
        long long n = cg ? stat_keyed(cg, ST_OOM, "oom_kill") : -1;
        return n < 0 ? 0 : n;
}

void cgroup_stats(const struct cgroup *cg, struct cgroup_stats *s)
{
        memset(s, 0, sizeof *s);
        s->memory_peak = s->pids_peak = -1;
        if (!cg)
                return;
        s->memory_peak = stat_single(cg, ST_MEMORY_PEAK);
        s->oom_kills = stat_keyed(cg, ST_OOM, "oom_kill");
        s->pids_peak = stat_single(cg, ST_PIDS_PEAK);
        s->pids_max_hits = stat_keyed(cg, ST_PIDS_EVENTS, "max");
        if (s->oom_kills < 0)
                s->oom_kills = 0;
        if (s->pids_max_hits < 0)
                s->pids_max_hits = 0;
}

void cgroup_describe(const struct cgroup *cg, char *buf, size_t n)
{
        buf[0] = '\0';
        for (int c = 0; cg && c < CG_COUNT; c++) {
                if (!cg->on_v2[c] && !cg->on_v1[c])
                        continue;
                size_t used = strlen(buf);
                snprintf(buf + used, n - used, "%s%s:%s", used ? " " : "", controller_names[c],
                         cg->on_v2[c] ? "v2" : "v1");
        }
}

static void cgroup_free(struct cgroup *cg);

void cgroup_destroy(struct cgroup *cg)
{
        if (!cg)
                return;
        cgroup_sweep(cg);  /* a run that failed before its sweep */
        stats_close(cg);
        test_pause("cgroup-destroy");
        bool gone = true;
        if (cg->v2_dir) {
                kill_and_remove(cg->v2_dir);
                gone &= access(cg->v2_dir, F_OK) < 0;
        }
        for (int c = 0; c < CG_COUNT; c++) {
                if (cg->v1_dir[c] && first_of_dir(cg, c)) {
                        kill_and_remove(cg->v1_dir[c]);
                        gone &= access(cg->v1_dir[c], F_OK) < 0;
                }
        }
        /* A group still busy keeps its record: the next brig finishes. */
        if (gone)
                run_record_remove(cg->record);
        cgroup_free(cg);
}

void cgroup_hand_over(struct cgroup *cg, struct strv *dirs, char **record)
{
        *record = NULL;
        if (!cg)
                return;
        cgroup_sweep(cg);  /* a run that failed before its sweep */
        bool complete = !cg->v2_dir || strv_push(dirs, cg->v2_dir) == 0;
        for (int c = 0; c < CG_COUNT; c++)
                if (cg->v1_dir[c] && first_of_dir(cg, c))
                        complete &= strv_push(dirs, cg->v1_dir[c]) == 0;
        /* a list cut short keeps its record: the next brig finishes */
        if (complete)
                *record = TAKE_PTR(cg->record);
        cgroup_free(cg);
}

static void cgroup_free(struct cgroup *cg)
{
        free(cg->record);
        strv_free(&cg->stale_parents);
        if (cg->where) {
                hierarchies_free(cg->where);
                free(cg->where);
        }
        cgroup_join_close(cg);
        stats_close(cg);
        for (int c = 0; c < CG_COUNT; c++)
                free(cg->v1_dir[c]);
        closep(&cg->v2_fd);
        free(cg->v2_dir);
        free(cg);
}

int cgroup_paths(const struct cgroup *cg, struct strv *out)
{
        int r = 0;
        if (cg && cg->v2_dir)
                r = strv_push(out, cg->v2_dir);
        for (int c = 0; cg && r == 0 && c < CG_COUNT; c++)
                if (cg->v1_dir[c] && !strv_contains(out, cg->v1_dir[c]))
                        r = strv_push(out, cg->v1_dir[c]);
        return r;
}

int cgroup_freeze(struct cgroup *cg, bool frozen, brig_error **err)
{
        if (!cg || !cg->v2_dir)
                return brig_err(err, EOPNOTSUPP, "the cgroup freezer is not available: this sandbox has no "
                                                 "writable cgroup v2 group (rootless without a delegated cgroup?)");
        int r = write_at(cg->v2_dir, "cgroup.freeze", frozen ? "1" : "0");
        if (r < 0)
                return brig_err(err, -r, "write %s/cgroup.freeze", cg->v2_dir);
        /* The write only starts it: wait until cgroup.events says so. */
        for (int i = 1; i <= 100; i++) {
                long long v = keyed_value(cg->v2_dir, "cgroup.events", "frozen");
                if (v == (frozen ? 1 : 0))
                        return 0;
                usleep((useconds_t)(i * 200));
        }
        return brig_err(err, ETIMEDOUT, "%s the cgroup %s", frozen ? "freeze" : "thaw", cg->v2_dir);
}
