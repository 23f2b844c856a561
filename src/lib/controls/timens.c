/* timens.c — --clock-start: the sandbox's CLOCK_MONOTONIC and
 * CLOCK_BOOTTIME (and /proc/uptime) start at a chosen reading, so that a
 * run and its replay read the same clocks (docs/audit.md#replay).
 *
 * A time namespace shifts those two clocks by offsets written to
 * /proc/PID/timens_offsets, and only while no process is in it: the
 * kernel freezes them when the first one enters. clone3(CLONE_NEWTIME)
 * puts the child in at once, so with --clock-start the child is cloned in
 * the host's time namespace and unshares one for its children instead,
 * writes the offsets, and everything pid 1 forks (the command, every
 * exec) is born inside. The offsets are taken by the supervisor just
 * before clone3, so the clocks read the chosen value as the sandbox
 * starts, and then run at the host's rate: pinned means this offset, not
 * a frozen clock. CLOCK_REALTIME (the wall clock, `date`) has no offset in
 * a time namespace: it stays the host's. */
#define _GNU_SOURCE
#include "controls/timens.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static int64_t clock_ns(clockid_t id)
{
        struct timespec ts;
        clock_gettime(id, &ts);
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void timens_offsets_now(struct run_plan *plan)
{
        plan->clock_offset_mono_ns = (int64_t)plan->clock_start_ns - clock_ns(CLOCK_MONOTONIC);
        plan->clock_offset_boot_ns = (int64_t)plan->clock_start_ns - clock_ns(CLOCK_BOOTTIME);
}

/* "SECS NSECS" with 0 <= NSECS < 1e9, as the kernel reads an offset */
static void split(int64_t ns, long long *sec, long *nsec)
{
        *sec = ns / 1000000000;
        *nsec = (long)(ns % 1000000000);
        if (*nsec < 0) {
                *nsec += 1000000000;
                (*sec)--;
        }
}

int timens_apply(const struct run_plan *plan, brig_error **err)
{
        if (unshare(CLONE_NEWTIME) < 0)
                return brig_err(err, errno, "a time namespace for the command");
        long long ms, bs;
        long mn, bn;
        split(plan->clock_offset_mono_ns, &ms, &mn);
        split(plan->clock_offset_boot_ns, &bs, &bn);
        char text[128];
        int len = snprintf(text, sizeof text, "monotonic %lld %ld\nboottime %lld %ld\n", ms, mn, bs, bn);
        /* A non-dumpable process's /proc files are root's, which a
         * rootless user namespace does not map: dumpable for this one
         * write (nothing of the sandbox runs yet), then not again. */
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_DUMPABLE");
        int fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? write(fd, text, (size_t)len) : -1;
        int e = errno;
        if (fd >= 0)
                close(fd);
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return brig_err(err, errno, "PR_SET_DUMPABLE");
        if (n != len)
                return brig_err(err, n < 0 ? e : EIO, "write the time namespace's offsets");
        return 0;
}
