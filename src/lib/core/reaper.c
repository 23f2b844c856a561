/* reaper.c — nothing left behind, whatever is killed when.
 *
 * What survives SIGKILL of each process brig runs: the kernel takes the
 * sandbox's processes (pid 1 has a parent-death signal, and everything
 * inside dies with pid 1), its namespaces, its mounts (they live in its
 * own mount namespace) and every descriptor. What it does not take are
 * names in filesystems: cgroup directories, files in the state root. So
 * each is made only after a proof of who made it is on disk, and the next
 * brig of the same user removes what it can prove is its own and dead:
 *
 *   cgroups     brig-PID-START-PIDNS-SEQ, listed in <root>/runs/ before
 *               the first mkdir (owner checked again on the directory)
 *   pools/KEY/  pool.json names the daemon; a pool whose daemon is gone
 *               has its members removed
 *   .eph-OWNER-NAME, NAME/hold
 *               an ephemeral sandbox's state directory while its creator
 *               makes it, then its hold: flocked by the creator, and from
 *               its start by the supervisor, for life (sandbox.c). One
 *               nobody holds has nobody left to remove it. An owned
 *               sandbox (BRIG_SANDBOX_OWNED) has one too, and goes once
 *               its owner is gone as well (stopped for a restore, it
 *               waits for its owner to start it again).
 *
 * Persistent sandboxes are the user's: one whose supervisor died stays,
 * shown as dead by brig ls, until brig rm removes every trace. */
#define _GNU_SOURCE
#include "core/reaper.h"
#include "controls/cgroup.h"
#include "persist/sandbox.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

/* This process's own name, read once per process: its start time and its
 * pid namespace (/proc/self/ns/pid, never pid_for_children) do not change
 * while it runs, and a fork is another process — its pid says so. A run
 * names itself (its groups, its record) and a sweep compares each record
 * and group against it: each look was a read of /proc (about 20 reads a
 * run). A read that failed is not kept. */
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static struct owner self_known;

void owner_self(struct owner *o)
{
        pid_t pid = getpid();
        pthread_mutex_lock(&self_lock);
        if (self_known.pid != pid || !self_known.start || !self_known.pidns) {
                struct stat st;
                self_known.pid = pid;
                self_known.start = state_process_start(pid);
                self_known.pidns = stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
        }
        *o = self_known;
        pthread_mutex_unlock(&self_lock);
}

/* Made by this very process (pid, start and pid namespace): alive, and
 * of this boot. */
static bool owner_is_self(const struct owner *o)
{
        struct owner me;
        owner_self(&me);
        return me.start && o->pid == me.pid && o->start == me.start && o->pidns == me.pidns;
}

int owner_alive(const struct owner *o)
{
        struct owner me;
        owner_self(&me);
        if (o->pidns != me.pidns)
                return -1;
        if (o->pid == me.pid && me.start)
                return o->start == me.start;
        return state_process_start(o->pid) == o->start;
}

int owner_format(const struct owner *o, char *buf, size_t n)
{
        int len = snprintf(buf, n, "%d-%llu-%llu", o->pid, o->start, o->pidns);
        return len > 0 && (size_t)len < n ? 0 : -ENAMETOOLONG;
}

bool owner_parse(const char *s, struct owner *o, const char **rest)
{
        int pid, used = 0;
        unsigned long long start, ns;
        if (sscanf(s, "%d-%llu-%llu%n", &pid, &start, &ns, &used) != 3 || pid <= 0 || start == 0 ||
            (s[used] != '\0' && s[used] != '-' && s[used] != '.'))
                return false;
        *o = (struct owner){ pid, start, ns };
        if (rest)
                *rest = s + used;
        return true;
}

/* The boot a record was written in: after a reboot every pid names
 * another process (a root in /tmp outlives one). */
static char *boot_id(void)
{
        /* the same for the whole life of the process: read once */
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static char known[64];
        pthread_mutex_lock(&lock);
        if (!known[0]) {
                char buf[64] = "";
                int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
                if (fd >= 0)
                        close(fd);
                buf[n > 0 ? n : 0] = '\0';
                buf[strcspn(buf, "\n")] = '\0';
                memcpy(known, buf, sizeof known);
        }
        char *id = strdup(known);
        pthread_mutex_unlock(&lock);
        return id;
}

/* ---- run records ----------------------------------------------------------- */

static int runs_dir_at(int rfd, const char *root, bool create, char **path, brig_error **err)
{
        if (create && mkdirat(rfd, "runs", 0700) < 0 && errno != EEXIST)
                return brig_err(err, errno, "create '%s/runs'", root);
        int fd = openat(rfd, "runs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return brig_err(err, errno, "open '%s/runs'", root);
        if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
                close(fd);
                return state_fail(err, EPERM, "'%s/runs' is not brig's (not yours, or open to others)", root);
        }
        if (path)
                *path = brig_strdup_printf("%s/runs", root);
        return fd;
}

static int runs_dir_open(bool create, char **path, brig_error **err)
{
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int rfd = state_root_open(create, &root, err);
        return rfd < 0 ? rfd : runs_dir_at(rfd, root, create, path, err);
}

/* The spare, renamed to FILE and opened for writing, or -1 (none, or not
 * a plain file of ours with no other name: then removed where it can be).
 * The rename first: a spare goes to one run only, whatever ran beside. */
static int take_spare(int dfd, const char *file)
{
        struct stat st;
        if (fstatat(dfd, RUN_RECORD_SPARE, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        if (!S_ISREG(st.st_mode) || renameat2(dfd, RUN_RECORD_SPARE, dfd, file, RENAME_NOREPLACE) < 0) {
                unlinkat(dfd, RUN_RECORD_SPARE, 0);  /* a directory stays: the runs make their records afresh */
                return -1;
        }
        /* O_NONBLOCK: a FIFO swapped in since must not stall the run */
        int fd = openat(dfd, file, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 &&
            !(st.st_mode & 077) && (st.st_size == 0 || ftruncate(fd, 0) == 0))
                return fd;
        if (fd >= 0)
                close(fd);
        unlinkat(dfd, file, 0);
        return -1;
}

/* The bytes of the UTF-8 sequence at S (1 to 4), or 0 where S holds
 * none: a stray or missing continuation byte, an overlong form, a
 * surrogate or a code point past U+10FFFF — what JSON cannot carry. */
static size_t utf8_sequence(const unsigned char *s)
{
        unsigned c = s[0];
        size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        unsigned cp = n > 1 ? c & (0x7f >> n) : c;  /* the lead byte's bits */
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;  /* a NUL ends it here too */
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
                return 0;
        if (n == 4 && (cp < 0x10000 || cp > 0x10ffff))
                return 0;
        return n;
}

/* S as a JSON string, as the sweep reads it back (json_loadb); false
 * when S is not UTF-8. */
static bool put_json_string(FILE *out, const char *s)
{
        fputc('"', out);
        for (const unsigned char *c = (const unsigned char *)s; *c;) {
                size_t n = utf8_sequence(c);
                if (!n)
                        return false;
                if (*c == '"' || *c == '\\')
                        fprintf(out, "\\%c", *c);
                else if (*c < 0x20)
                        fprintf(out, "\\u%04x", *c);
                else
                        fwrite(c, 1, n, out);
                c += n;
        }
        fputc('"', out);
        return true;
}

/* {"boot":…,"name":…,"cgroups":[…]}, written here rather than built with
 * jansson: a run uses jansson for nothing else, and its first object
 * seeds jansson's hash function from /dev/urandom and faults its code in
 * (25 us of the supervisor's work while the child waits for its groups).
 * -EILSEQ for a path that is not UTF-8: a group whose record would not
 * hold its name is not made. */
static int run_record_text(const char *boot, const char *name, const struct strv *cgroups, char **text)
{
        size_t len = 0;
        FILE *out = open_memstream(text, &len);
        if (!out)
                return -ENOMEM;
        fputs("{\"boot\":", out);
        bool utf8 = put_json_string(out, boot);
        fputs(",\"name\":", out);
        utf8 = utf8 && put_json_string(out, name);
        fputs(",\"cgroups\":[", out);
        for (size_t i = 0; utf8 && i < cgroups->n; i++) {
                if (i)
                        fputc(',', out);
                utf8 = put_json_string(out, cgroups->items[i]);
        }
        fputs("]}", out);
        int r = fclose(out) != 0 ? -ENOMEM : utf8 ? 0 : -EILSEQ;
        if (r < 0) {
                free(*text);
                *text = NULL;
        }
        return r;
}

int run_record_write(const char *name, const struct strv *cgroups, char **path, brig_error **err)
{
        *path = NULL;
        _cleanup_free_ char *dir = NULL, *boot = boot_id();
        _cleanup_close_ int dfd = runs_dir_open(true, &dir, err);
        if (dfd < 0)
                return brig_err_prefix(err, "cannot record this run's cgroups (brig makes them only once they are "
                                            "recorded, so that the next brig can remove them if this one is killed)");
        const char *file = name + strlen("brig-");
        _cleanup_free_ char *text = NULL;
        int r = run_record_text(boot ? boot : "", name, cgroups, &text);
        if (r == -EILSEQ)
                return brig_err(err, EILSEQ, "cannot record this run's cgroups: a path of them is not UTF-8");
        _cleanup_free_ char *full = brig_strdup_printf("%s/%s", dir, file);
        if (r < 0 || !full)
                return brig_err(err, ENOMEM, "run record");
        _cleanup_close_ int fd = take_spare(dfd, file);
        if (fd < 0)
                fd = openat(dfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(text);
        if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
                int e = errno ? errno : EIO;
                if (fd >= 0)
                        unlinkat(dfd, file, 0);
                /* Said with the way out: without the record a SIGKILLed
                 * brig's cgroups could not be proven its own. */
                return state_fail(err, e, "cannot record this run's cgroups in '%s': %s (brig makes the cgroups for "
                                          "--memory, --pids and --cpus only once they are recorded, so that the next "
                                          "brig can remove them if this one is killed); free space there, or set "
                                          "XDG_RUNTIME_DIR to another directory", dir, strerror(e));
        }
        *path = TAKE_PTR(full);
        return 0;
}

void run_record_remove(const char *path)
{
        if (!path)
                return;
        /* emptied, then the next run's spare, unless one is there already */
        _cleanup_free_ char *spare = brig_strdup_printf("%.*s/" RUN_RECORD_SPARE, (int)(strrchr(path, '/') - path),
                                                        path);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (!spare || fd < 0 || ftruncate(fd, 0) < 0 ||
            renameat2(AT_FDCWD, path, AT_FDCWD, spare, RENAME_NOREPLACE) < 0)
                (void)unlink(path);
}

/* One record of a dead run: remove its groups, then the record (kept
 * while a group stays busy: the next sweep tries again). */
static void reap_record(int dfd, const char *file)
{
        _cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        char buf[16384];
        ssize_t n = -1;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1)
                n = read(fd, buf, sizeof buf - 1);
        json_t *doc = n >= 0 ? json_loadb(buf, (size_t)n, 0, NULL) : NULL;
        /* A record cut short by the SIGKILL was being written: no group
         * exists yet (the first mkdir waits for the whole record). */
        bool all_gone = true;
        char name[128];
        snprintf(name, sizeof name, "brig-%s", file);
        size_t i;
        json_t *v;
        /* A path through a detached hierarchy (/proc/self/fd/N, cgroup.c)
         * means another descriptor here: the name, owner and filesystem
         * checks still hold, and a miss leaves it to the stale sweep. */
        json_array_foreach(json_object_get(doc, "cgroups"), i, v) {
                const char *path = json_string_value(v);
                if (path && !cgroup_remove_dead(path, name))
                        all_gone = false;
        }
        json_decref(doc);
        if (all_gone)
                unlinkat(dfd, file, 0);
}

/* The boot a live owner's record was written in, against this one: read
 * as run_record_text begins it, {"boot":"ID", without a JSON parser, so
 * that a sweep past live runs (as most are) opens no jansson (the engine
 * opens it on first use: src/cli/jansson_lazy.c). A record that does not
 * begin so, or an unknown boot now, counts as this boot's: it is kept. */
static bool same_boot(int dfd, const char *file)
{
        static const char head[] = "{\"boot\":\"";
        _cleanup_close_ int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        char buf[128];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        _cleanup_free_ char *now = boot_id();
        if (n <= 0 || !now || !now[0])
                return true;
        buf[n] = '\0';
        if (strncmp(buf, head, sizeof head - 1) != 0)
                return true;
        const char *then = buf + sizeof head - 1;
        size_t len = strcspn(then, "\"");
        return then[len] != '"' || (len == strlen(now) && memcmp(then, now, len) == 0);
}

static void sweep_runs(int rfd, const char *root)
{
        brig_error *e = NULL;
        _cleanup_close_ int dfd = runs_dir_at(rfd, root, false, NULL, &e);
        brig_error_free(&e);  /* no runs yet: nothing recorded */
        if (dfd < 0)
                return;
        DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3));
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct owner o;
                const char *rest;
                if (!owner_parse(de->d_name, &o, &rest) || owner_is_self(&o))
                        continue;
                /* alive: its brig removes it; another pid namespace: not ours to judge */
                if (owner_alive(&o) != 0 && same_boot(dfd, de->d_name))
                        continue;
                reap_record(dfd, de->d_name);
        }
        if (d)
                closedir(d);
}

/* ---- ephemeral sandboxes whose creator was killed before the start ------- */

/* NAME with a hold nobody holds: its creator died before the supervisor
 * took it over, or the supervisor died. Only a directory that has a hold
 * is ever looked at (a persistent sandbox, dead or not, is the user's),
 * and the lock taken here stays held while it is removed. */
static void sweep_unheld(int rfd, const char *root, const char *name)
{
        _cleanup_close_ int dfd = openat(rfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int hold = dfd >= 0 ? openat(dfd, SANDBOX_HOLD, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                                            : -EBADF;
        struct stat st;
        if (hold < 0 || fstat(hold, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            flock(hold, LOCK_EX | LOCK_NB) < 0)
                return;
        _cleanup_free_ char *dir = brig_strdup_printf("%s/%s", root, name);
        brig_error *e = NULL;
        json_t *state = dir ? state_read(dir, &e) : NULL;
        brig_error_free(&e);
        /* a supervisor of a brig before holds (none has a hold) or one
         * that lives on regardless: never removed under it; nor an owned
         * sandbox whose owner lives (stopped to be started again) */
        bool alive = state && state_supervisor_alive(state);
        json_t *owner = json_object_get(state, "owner_pid");
        if (json_is_integer(owner) && json_integer_value(owner) > 0 &&
            state_process_start((pid_t)json_integer_value(owner)) ==
                    (unsigned long long)json_integer_value(json_object_get(state, "owner_start")))
                alive = true;
        json_decref(state);
        if (dir && !alive)
                (void)state_remove_tree(dir, NULL);
}

static void sweep_ephemeral(int rfd, const char *root)
{
        /* the checked root is an O_PATH descriptor: read it through a new one */
        int lfd = rfd >= 0 ? openat(rfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
        if (lfd >= 0 && !d)
                close(lfd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct owner o;
                const char *rest;
                if (strncmp(de->d_name, SANDBOX_NEW_PREFIX, strlen(SANDBOX_NEW_PREFIX)) == 0) {
                        /* .eph-PID-START-PIDNS-NAME: gone with its maker */
                        if (owner_parse(de->d_name + strlen(SANDBOX_NEW_PREFIX), &o, &rest) && rest[0] == '-' &&
                            owner_alive(&o) == 0) {
                                _cleanup_free_ char *dir = brig_strdup_printf("%s/%s", root, de->d_name);
                                if (dir)
                                        (void)state_remove_tree(dir, NULL);
                        }
                } else if (state_name_valid(de->d_name) && de->d_type == DT_DIR)
                        sweep_unheld(rfd, root, de->d_name);
        }
        if (d)
                closedir(d);
}

void reaper_sweep(void)
{
        brig_error *e = NULL;
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int rfd = state_root_open(false, &root, &e);
        brig_error_free(&e);  /* no state root yet: nothing recorded */
        if (rfd < 0)
                return;
        sweep_runs(rfd, root);
        sweep_ephemeral(rfd, root);
}

void test_pause(const char *step)
{
#ifdef BRIG_TEST_HOOKS
        const char *want = getenv("BRIG_TEST_PAUSE_AT");
        size_t n = strlen(step);
        for (const char *p = want; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] == ',')) {
                if (strncmp(p, step, n) == 0 && (p[n] == ',' || p[n] == '\0')) {
                        /* the test SIGKILLs us here (or SIGCONTs) */
                        fprintf(stderr, "brig-test: paused at %s (pid %d)\n", step, getpid());
                        raise(SIGSTOP);
                        return;
                }
        }
#else
        (void)step;
#endif
}
