/* wall.c — the supervisor's side of the walls (core/wall.h): which wall
 * this host has (brig doctor), and what a gvisor plan needs before clone:
 * runsc found, the user it runs as, and a refusal for each setting the
 * gVisor wall cannot hold (fail closed, never a silent namespace run). The
 * inside is wall_gvisor.c. */
#define _GNU_SOURCE
#include "core/wall.h"
#include "core/model.h"
#include "core/plan.h"
#include "tools/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where runsc is looked for: Debian's package, then the caller's PATH
 * entries under /usr (what the sandbox's read-only /usr shows too). */
static int find_runsc(char *path, size_t n)
{
        /* BRIG_RUNSC: another runsc (gVisor's own releases), an absolute
         * path the sandbox's system directories show too */
        const char *chosen = getenv("BRIG_RUNSC");
        if (chosen && *chosen) {
                if (chosen[0] != '/' || snprintf(path, n, "%s", chosen) >= (int)n)
                        return -EINVAL;
                return access(path, X_OK) == 0 ? 0 : -errno;
        }
        if (access("/usr/bin/runsc", X_OK) == 0) {
                snprintf(path, n, "/usr/bin/runsc");
                return 0;
        }
        const char *env = getenv("PATH");
        for (const char *dir = env ? env : ""; *dir;) {
                const char *end = strchrnul(dir, ':');
                if (end - dir > 5 && strncmp(dir, "/usr/", 5) == 0 &&
                    snprintf(path, n, "%.*s/runsc", (int)(end - dir), dir) < (int)n && access(path, X_OK) == 0)
                        return 0;
                dir = *end ? end + 1 : end;
        }
        return -ENOENT;
}

int wall_gvisor_probe(char *path, size_t path_len, char *why, size_t why_len)
{
        int r = find_runsc(path, path_len);
        if (r < 0) {
                const char *chosen = getenv("BRIG_RUNSC");
                if (chosen && *chosen)
                        snprintf(why, why_len, "BRIG_RUNSC=%s: %s", chosen,
                                 r == -EINVAL ? "not an absolute path" : "not an executable file");
                else
                        snprintf(why, why_len, "runsc is not installed (apt-get install runsc)");
                path[0] = '\0';
                return r;
        }
        /* runsc's ptrace platform traces its own stubs: Yama's mode 3
         * forbids every ptrace. */
        char mode = '0';
        int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                if (read(fd, &mode, 1) != 1)
                        mode = '0';
                close(fd);
        }
        if (mode == '3') {
                snprintf(why, why_len, "kernel.yama.ptrace_scope is 3: runsc's ptrace platform cannot trace its stubs");
                return -EPERM;
        }
        return 0;
}

int wall_plan(struct run_plan *plan, brig_error **err)
{
        if (plan->wall != BRIG_WALL_GVISOR)
                return 0;
        char path[4096], why[256];
        if (wall_gvisor_probe(path, sizeof path, why, sizeof why) < 0)
                return brig_err(err, ENOENT, "--wall gvisor: %s; brig does not fall back to the namespace wall "
                                "(--wall namespaces runs without gVisor)", why);
        /* What runsc cannot carry: refused by name rather than dropped. */
        const brig_policy *p = plan->policy;
        static const char *const how = "; use --wall namespaces for it (docs/walls.md)";
        if (p->allow_unix.n)
                return brig_err(err, ENOTSUP, "--wall gvisor --allow-unix: runsc reaches no host unix socket%s", how);
        if (p->seccomp)
                return brig_err(err, ENOTSUP, "--wall gvisor: --seccomp-allow/--seccomp-deny/--seccomp-rule shape "
                                "brig's filter on the host kernel, and gVisor's Sentry answers the command's "
                                "syscalls instead%s", how);
        if (p->n_pass_fds)
                return brig_err(err, ENOTSUP, "--wall gvisor --pass-fd: runsc hands the command only stdio%s", how);
        if (p->tools && p->tools->ssh_agent)
                return brig_err(err, ENOTSUP, "--wall gvisor --ssh-agent: the agent's socket is a host unix socket, "
                                "which runsc does not reach%s", how);
        plan->runsc = strdup(path);
        if (!plan->runsc)
                return brig_err(err, ENOMEM, "--wall gvisor");
        /* Rootless, brig's user namespace maps only the caller: runsc needs
         * to be root there, so the caller is mapped to 0 (userns.c). Inside
         * gVisor the command then runs as gVisor's root, who owns the
         * workspace as the caller does outside; no host privilege comes
         * with it. As root, brig's namespace already has 0 (the setup's). */
        if (!plan->rootful)
                plan->sandbox_uid = plan->sandbox_gid = 0;
        /* As root with root's workspace: runsc's gofer writes it as the
         * namespace's 0 (host root, confined to brig's root), which an
         * idmap to nobody cannot represent; the command is gVisor's root
         * there, so files it makes are root's as the workspace is. */
        if (plan->rootful && plan->idmap_workspace) {
                plan->idmap_workspace = false;
                plan->sandbox_uid = plan->sandbox_gid = 0;
                plan->host_uid = plan->host_gid = 0;
        }
        return 0;
}
