/* ipc.c — the limits of the sandbox's own IPC namespace, from its memory
 * limit. System V shared memory and message queues are per IPC namespace,
 * and so are their sysctls: the kernel defaults allow a segment of 16 EiB
 * and 500 MiB of queued messages. With a memory cgroup the pages are
 * charged anyway; these limits add a clean refusal (shmget EINVAL/ENOSPC,
 * msgget ENOSPC) instead of the OOM killer, and bound what a cgroup does
 * not see.
 *
 * Who may write them: the kernel grants the ipc sysctls to uid 0 of the
 * namespace's owning user namespace (ipc/ipc_sysctl.c, ipc_permissions),
 * not to a capability. That is brig's pid 1 as root (inside 0 is host 0
 * until the drop); rootless, the sandbox's only uid is the caller's and 0
 * is unmapped, so the files are read-only to it — the report then lists
 * System V memory as unbounded where no memory cgroup charges it. */
#define _GNU_SOURCE
#include "controls/rlimit.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

static int write_sysctl(int proc, const char *name, unsigned long long value, brig_error **err)
{
        char path[64], text[32];
        snprintf(path, sizeof path, "sys/kernel/%s", name);
        int len = snprintf(text, sizeof text, "%llu", value);
        _cleanup_close_ int fd = openat(proc, path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, text, (size_t)len) != len)
                return brig_err(err, errno, "set kernel.%s = %s in the sandbox's IPC namespace", name, text);
        return 0;
}

bool ipc_limits_settable(const struct run_plan *plan)
{
        return plan->map_root_for_setup && plan->limits.memory;
}

int ipc_limits_apply(const struct run_plan *plan, int proc, brig_error **err)
{
        if (!ipc_limits_settable(plan))
                return 0;
        /* /proc/sys resolves ipc entries in the writer's IPC namespace:
         * this process's, new since clone, whichever proc it goes through. */
        uint64_t m = plan->limits.memory;
        long page = sysconf(_SC_PAGESIZE);
        /* Messages: at most msgmnb bytes queued per queue (16 KiB, the
         * namespace's own default, left as it is), so the number of queues
         * bounds the total. */
        const unsigned long long msgmnb = 16384, msgmni_default = 32000;
        unsigned long long msgmni = m / msgmnb;
        if (msgmni > msgmni_default)
                msgmni = msgmni_default;
        if (msgmni < 1)
                msgmni = 1;
        int r = write_sysctl(proc, "shmmax", m, err);  /* one segment */
        r = r ?: write_sysctl(proc, "shmall", m / (uint64_t)page, err);  /* all segments, in pages */
        /* A new IPC namespace starts from the kernel's constants, not its
         * parent's values (msg_init_ns: MSGMNB 16384, MSGMNI 32000): a
         * value equal to one is already there. Each file's first open in
         * the new namespace costs 7-10 us (the default --memory leaves
         * both as they are). */
        if (r == 0 && msgmni != msgmni_default)
                r = write_sysctl(proc, "msgmni", msgmni, err);
        return r;
}
