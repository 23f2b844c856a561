/* wall_gvisor.c — the gVisor wall: the command runs under runsc, gVisor's
 * user-space kernel, inside the sandbox brig builds for the namespace wall.
 *
 * brig's own sequence runs as always up to the built root (user, mount,
 * pid, network, ipc, uts and cgroup namespaces; the root with its
 * read-only system dirs, workspace, masks; the network namespace whose
 * only peers are brig's listeners; brig's cgroup). Instead of dropping to
 * the sandbox user and executing the command, pid 1's child writes an OCI
 * bundle of the same plan and executes runsc on it, as root of brig's
 * user namespace (no capability on the host). The command's syscalls go
 * to gVisor's Sentry, never to the host kernel; the Sentry's own calls
 * (runsc's seccomp filters) reach the host inside brig's namespaces:
 * --network=host is the network namespace brig made (docs/walls.md says
 * why that is airtight), its files are brig's root through the gofer. */
#define _GNU_SOURCE
#include "core/wall.h"
#include "core/plan.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

static int add_mount(json_t *mounts, const char *dst, const char *type, const char *src, json_t *options)
{
        json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src, "options",
                              options ? options : json_array());
        return m && json_array_append_new(mounts, m) == 0 ? 0 : -ENOMEM;
}

/* The same path of brig's root, seen as its own mount inside gVisor: the
 * gofer serves it from there, with the masks brig mounted below it. */
static int add_bind(json_t *mounts, const char *path, bool readonly)
{
        return add_mount(mounts, path, "bind", path, json_pack("[s, s]", "rbind", readonly ? "ro" : "rw"));
}

static int add_tmpfs(json_t *mounts, const char *dst, uint64_t size, unsigned mode)
{
        char sz[48], md[32];
        snprintf(sz, sizeof sz, "size=%llu", (unsigned long long)size);
        snprintf(md, sizeof md, "mode=%o", mode ? mode : 01777);
        json_t *opts = size ? json_pack("[s, s, s, s]", "nosuid", "nodev", md, sz)
                            : json_pack("[s, s, s]", "nosuid", "nodev", md);
        return add_mount(mounts, dst, "tmpfs", "tmpfs", opts);
}

static json_t *rlimit(const char *type, uint64_t v)
{
        return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t)v, "soft", (json_int_t)v);
}

static json_t *bundle_config(const struct run_plan *plan)
{
        json_t *args = json_array(), *env = json_array(), *mounts = json_array(), *rl = json_array();
        json_t *cfg = NULL;
        if (!args || !env || !mounts || !rl)
                goto fail;
        for (char *const *a = plan->argv; *a; a++)
                if (json_array_append_new(args, json_string(*a)) < 0)
                        goto fail;
        for (char **e = plan->envp; e && *e; e++)
                if (json_array_append_new(env, json_string(*e)) < 0)
                        goto fail;
        int r = add_mount(mounts, "/proc", "proc", "proc", NULL);  /* gVisor's own */
        if (r == 0)
                r = add_mount(mounts, "/dev", "tmpfs", "tmpfs", NULL);  /* gVisor makes the devices */
        if (r == 0)
                r = add_mount(mounts, "/dev/pts", "devpts", "devpts", NULL);
        if (r == 0)
                r = add_tmpfs(mounts, "/dev/shm", plan->shm_size, 01777);
        if (r == 0 && plan->mount_sys)
                r = add_mount(mounts, "/sys", "sysfs", "sysfs", json_pack("[s]", "ro"));
        /* The plan's layout, parents first, each the mount brig made at
         * that path: binds, and brig's tmpfs with the size, owner and what
         * tools copied in. /tmp alone is gVisor's own tmpfs, of the same
         * size: brig's /tmp holds the bundle and runsc's state. */
        for (size_t i = 0; r == 0 && i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                if (m->kind == MOUNT_TMPFS && strcmp(m->dst, "/tmp") == 0)
                        r = add_tmpfs(mounts, m->dst, m->size, m->mode);
                else
                        r = add_bind(mounts, m->dst, m->kind == MOUNT_BIND && m->readonly);
        }
        /* Each pin is a mount in brig's root already; naming it here makes
         * it a mount inside gVisor too, which its VFS refuses to rename (as
         * the host kernel does below the gofer). The masks are not named:
         * each is brig's mount over the path (an unlinked empty file, an
         * empty directory), which the gofer walks into as the host shows
         * it, and runsc refuses to bind an unlinked file. */
        for (size_t i = 0; r == 0 && i < plan->pins.n; i++)
                r = add_bind(mounts, plan->pins.items[i], false);
        if (r < 0)
                goto fail;
        const struct limits *l = &plan->limits;
        if ((l->nofile && json_array_append_new(rl, rlimit("RLIMIT_NOFILE", l->nofile)) < 0) ||
            (l->nproc && json_array_append_new(rl, rlimit("RLIMIT_NPROC", l->nproc)) < 0) ||
            (l->fsize && json_array_append_new(rl, rlimit("RLIMIT_FSIZE", l->fsize)) < 0) ||
            (l->stack && json_array_append_new(rl, rlimit("RLIMIT_STACK", l->stack)) < 0) ||
            (l->cpu_time_s && json_array_append_new(rl, rlimit("RLIMIT_CPU", l->cpu_time_s)) < 0))
                goto fail;
        cfg = json_pack("{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b, s:{s:[], s:[], s:[], s:[], s:[]}},"
                        " s:{s:s, s:b}, s:s, s:o,"
                        " s:{s:[{s:s}, {s:s}, {s:s}, {s:s}]}}",
                        "ociVersion", "1.0.2",
                        "process", "terminal", 0, "user", "uid", (int)plan->sandbox_uid, "gid", (int)plan->sandbox_gid,
                        "args", args, "env", env, "cwd", plan->cwd ? plan->cwd : plan->workspace, "rlimits", rl,
                        "noNewPrivileges", 1, "capabilities", "bounding", "effective", "inheritable", "permitted",
                        "ambient",
                        "root", "path", "/", "readonly", 1,
                        "hostname", plan->hostname, "mounts", mounts,
                        "linux", "namespaces", "type", "pid", "type", "mount", "type", "ipc", "type", "uts");
        if (cfg)
                return cfg;
        args = env = mounts = rl = NULL;  /* json_pack took them, and freed them on failure */
fail:
        json_decref(args);
        json_decref(env);
        json_decref(mounts);
        json_decref(rl);
        return NULL;
}

/* In brig's /tmp, which gVisor covers with a tmpfs of its own: the
 * command never sees the bundle nor runsc's state. */
#define BUNDLE_DIR "/tmp/.brig-gvisor"

int wall_gvisor_exec(const struct run_plan *plan, brig_error **err)
{
        /* Host root's supplementary groups would still grant group access
         * to runsc's processes (rootless, setgroups is denied and the
         * caller's own stay, granting nothing the caller lacks). */
        if (plan->rootful && setgroups(0, NULL) < 0)
                return brig_err(err, errno, "gvisor: setgroups");
        if (mkdir(BUNDLE_DIR, 0700) < 0 || mkdir(BUNDLE_DIR "/state", 0700) < 0)
                return brig_err(err, errno, "gvisor: make the bundle directory " BUNDLE_DIR);
        json_t *cfg = bundle_config(plan);
        if (!cfg)
                return brig_err(err, ENOMEM, "gvisor: the bundle's config.json");
        int r = json_dump_file(cfg, BUNDLE_DIR "/config.json", JSON_COMPACT);
        json_decref(cfg);
        if (r < 0)
                return brig_err(err, EIO, "gvisor: write " BUNDLE_DIR "/config.json");
        /* --network=host: gVisor's sockets are host sockets in brig's
         * network namespace, whose only way out is brig's listeners.
         * --ignore-cgroups: brig's cgroup already holds runsc and all it
         * starts. */
        char *argv[16] = {
                (char *)plan->runsc, "--root=" BUNDLE_DIR "/state", "--network=host", "--ignore-cgroups",
                "--platform=ptrace",
        };
        size_t n = 5;
        /* BRIG_GVISOR_DEBUG=DIR/ (a directory the sandbox shows, e.g. in
         * the workspace): runsc's own logs, for a runsc that will not start */
        const char *debug = getenv("BRIG_GVISOR_DEBUG");
        char log[4200];
        if (debug && *debug) {
                snprintf(log, sizeof log, "--debug-log=%s", debug);
                argv[n++] = "--debug";
                argv[n++] = log;
        }
        argv[n++] = "run";
        argv[n++] = "--bundle";
        argv[n++] = BUNDLE_DIR;
        argv[n++] = "brig";
        char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(plan->runsc, argv, envp);
        return brig_err(err, errno, "gvisor: execute %s (is it inside the sandbox's system directories?)",
                        plan->runsc);
}
