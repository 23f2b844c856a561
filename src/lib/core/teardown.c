/* teardown.c — the last of a brig run, after the caller has its status.
 *
 * When pid 1 says it is alone in the sandbox (init.c: every other
 * process killed and reaped), the command's status, the report and the
 * audit stream's end are final. What remains is the kernel's teardown of
 * pid 1 and the namespaces (its address space, 41 mounts, the network
 * namespace: 0.4-0.6 ms here) and, after it, the removal of the cgroups
 * (which stay busy until pid 1 has left them). `brig run` gives its caller
 * the status first and leaves those to a helper: a clone sharing brig's
 * memory (CLONE_VM: no page tables copied, and brig's own exit then frees
 * nothing), on a stack of its own, with every signal blocked, that holds
 * no descriptor but pid 1's pidfd. It waits for pid 1's end, removes the
 * groups, leaves the run record to the next run (emptied, as its spare:
 * reaper.h) or removes it, and exits. It touches no libc state: raw
 * system calls that set no errno (brig's thread may still run beside it),
 * no allocation. Should it die first (SIGKILL), the record stays, and the
 * next brig's sweep removes the groups (reaper.c), as for a SIGKILLed
 * brig run. */
#define _GNU_SOURCE
#include "core/teardown.h"
#include "core/reaper.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>

#define CLEANER_MAP (64 * 1024)
#define CLEANER_STACK (16 * 1024)

struct cleaner {
        int pidfd;
        int ndirs;       /* then the record and its spare's name, if any */
        bool record;
        bool pause;      /* BRIG_TEST_PAUSE_AT=teardown-helper */
        char paths[];    /* NUL-separated */
};

#if defined(__x86_64__)
/* A system call that returns -errno and writes nothing else: errno is
 * brig's thread's (the same TLS), which still runs beside us. */
__attribute__((no_sanitize("address", "undefined"))) static long raw3(long n, long a, long b, long c)
{
        long ret;
        __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
        return ret;
}

__attribute__((no_sanitize("address", "undefined"))) static int cleaner_main(void *arg)
{
        struct cleaner *c = arg;
        /* nothing of the caller's kept open: a pipe of its stdout would
         * keep its reader waiting for us */
        if (c->pidfd > 0)
                raw3(SYS_close_range, 0, c->pidfd - 1, 0);
        raw3(SYS_close_range, c->pidfd + 1, ~0U, 0);
        if (c->pause)
                raw3(SYS_kill, raw3(SYS_getpid, 0, 0, 0), SIGSTOP, 0);
        struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
        while (raw3(SYS_poll, (long)&p, 1, -1) < 0)
                ;
        const char *s = c->paths;
        bool gone = true;
        for (int i = 0; i < c->ndirs; i++) {
                /* an exiting task leaves its groups a moment after it is
                 * reaped: about a second of retries, as cgroup_destroy */
                long r = raw3(SYS_rmdir, (long)s, 0, 0);
                for (int t = 1; t <= 60 && r == -EBUSY; t++) {
                        struct timespec ts = { 0, t * 500000L };
                        raw3(SYS_nanosleep, (long)&ts, 0, 0);
                        r = raw3(SYS_rmdir, (long)s, 0, 0);
                }
                gone &= r == 0 || r == -ENOENT;
                while (*s)
                        s++;
                s++;
        }
        if (c->record && gone) {
                const char *spare = s;
                while (*spare)
                        spare++;
                spare++;
                long fd = raw3(SYS_open, (long)s, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
                bool kept = fd >= 0 && raw3(SYS_ftruncate, fd, 0, 0) == 0;
                if (fd >= 0)
                        raw3(SYS_close, fd, 0, 0);
                if (!kept || raw3(SYS_rename, (long)s, (long)spare, 0) < 0)
                        raw3(SYS_unlink, (long)s, 0, 0);
        }
        raw3(SYS_exit, 0, 0, 0);
        return 0;
}
#endif

int teardown_after_exit(int pidfd, const struct strv *dirs, const char *record)
{
#if defined(__x86_64__)
        size_t need = sizeof(struct cleaner) + (record ? 2 * strlen(record) + sizeof RUN_RECORD_SPARE + 1 : 0);
        for (size_t i = 0; i < dirs->n; i++) {
                /* A group in a hierarchy brig mounted detached (cgroup.c,
                 * under `ip netns exec`) is named through a descriptor of
                 * ours the helper closes: the caller removes it itself. */
                if (strncmp(dirs->items[i], "/proc/self/fd/", strlen("/proc/self/fd/")) == 0)
                        return -EXDEV;
                need += strlen(dirs->items[i]) + 1;
        }
        if (need > CLEANER_MAP - CLEANER_STACK)
                return -ENAMETOOLONG;
        /* the block at the bottom, the stack growing down from the top; a
         * mapping of its own, never unmapped: the helper may run after
         * this process is gone, and the mapping goes with the last of us */
        void *map = mmap(NULL, CLEANER_MAP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (map == MAP_FAILED)
                return -errno;
        struct cleaner *c = map;
        c->pidfd = pidfd;
        c->ndirs = (int)dirs->n;
        c->record = record != NULL;
#ifdef BRIG_TEST_HOOKS
        const char *at = getenv("BRIG_TEST_PAUSE_AT");
        c->pause = at && strstr(at, "teardown-helper");
#endif
        char *s = c->paths;
        for (size_t i = 0; i < dirs->n; i++)
                s = stpcpy(s, dirs->items[i]) + 1;
        if (record) {
                s = stpcpy(s, record) + 1;
                s = mempcpy(s, record, (size_t)(strrchr(record, '/') - record));
                strcpy(s, "/" RUN_RECORD_SPARE);
        }
        sigset_t all, saved;
        sigfillset(&all);
        /* it inherits this mask: no handler of the caller's runs on its
         * stack, no ^C of the caller's terminal ends it */
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        /* exit signal 0: a caller's SIGCHLD handler never sees it; once
         * brig has exited, init reaps it */
        pid_t pid = clone(cleaner_main, (char *)map + CLEANER_MAP, CLONE_VM, c);
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (pid < 0) {
                munmap(map, CLEANER_MAP);
                return -e;
        }
        return 0;
#else
        (void)pidfd;
        (void)dirs;
        (void)record;
        return -ENOSYS;
#endif
}
