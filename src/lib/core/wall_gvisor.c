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
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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

/* The OCI process of the plan: the command of brig run and of each
 * brig exec (argv), and the placeholder pid 1 of brig create's container.
 * The rlimits hold for an exec too: runsc exec ignores a process's own
 * and gives it its container's, which are the plan's. */
static json_t *process_config(const struct run_plan *plan, char *const *argv)
{
        json_t *args = json_array(), *env = json_array(), *rl = json_array();
        if (!args || !env || !rl)
                goto fail;
        for (char *const *a = argv; *a; a++)
                if (json_array_append_new(args, json_string(*a)) < 0)
                        goto fail;
        for (char **e = plan->envp; e && *e; e++)
                if (json_array_append_new(env, json_string(*e)) < 0)
                        goto fail;
        const struct limits *l = &plan->limits;
        /* RLIMIT_CORE 1, hard, as rlimit.c sets it behind the namespace
         * wall: no core file, and never a pipe to a core helper */
        if (json_array_append_new(rl, rlimit("RLIMIT_CORE", 1)) < 0 ||
            (l->nofile && json_array_append_new(rl, rlimit("RLIMIT_NOFILE", l->nofile)) < 0) ||
            (l->nproc && json_array_append_new(rl, rlimit("RLIMIT_NPROC", l->nproc)) < 0) ||
            (l->fsize && json_array_append_new(rl, rlimit("RLIMIT_FSIZE", l->fsize)) < 0) ||
            (l->stack && json_array_append_new(rl, rlimit("RLIMIT_STACK", l->stack)) < 0) ||
            (l->cpu_time_s && json_array_append_new(rl, rlimit("RLIMIT_CPU", l->cpu_time_s)) < 0))
                goto fail;
        /* terminal: runsc makes the command's terminal of the pty on its
         * stdin (brig run -t) or of one it sends to --console-socket
         * (brig exec -t): gVisor's own tty over the sandbox's pty. */
        json_t *proc = json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:b, s:{s:[], s:[], s:[], s:[], s:[]}}",
                                 "terminal", plan->tty,
                                 "user", "uid", (int)plan->sandbox_uid, "gid", (int)plan->sandbox_gid,
                                 "args", args, "env", env, "cwd", plan->cwd ? plan->cwd : plan->workspace,
                                 "rlimits", rl, "noNewPrivileges", 1, "capabilities", "bounding", "effective",
                                 "inheritable", "permitted", "ambient");
        if (proc)
                return proc;
        args = env = rl = NULL;  /* json_pack took them, and freed them on failure */
fail:
        json_decref(args);
        json_decref(env);
        json_decref(rl);
        return NULL;
}

static json_t *bundle_config(const struct run_plan *plan, char *const *argv)
{
        json_t *mounts = json_array(), *proc = process_config(plan, argv);
        json_t *cfg = NULL;
        if (!mounts || !proc)
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
        cfg = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}, {s:s}]}}",
                        "ociVersion", "1.0.2", "process", proc,
                        "root", "path", "/", "readonly", 1,
                        "hostname", plan->hostname, "mounts", mounts,
                        "linux", "namespaces", "type", "pid", "type", "mount", "type", "ipc", "type", "uts");
        if (cfg)
                return cfg;
        proc = mounts = NULL;  /* json_pack took them, and freed them on failure */
fail:
        json_decref(proc);
        json_decref(mounts);
        return NULL;
}

/* In brig's /tmp, which gVisor covers with a tmpfs of its own: the
 * command never sees the bundle nor runsc's state. */
#define BUNDLE_DIR "/tmp/.brig-gvisor"
#define CONTAINER "brig"

/* runsc's flags of every call on the one container: its state root and
 * the sandbox's configuration (exec, kill and ps must name the same).
 * --network=host: gVisor's sockets are host sockets in brig's network
 * namespace, whose only way out is brig's listeners. --ignore-cgroups:
 * brig's cgroup already holds runsc and all it starts. Returns the
 * number of entries filled; `log` holds a --debug-log flag. */
static size_t runsc_argv(const struct run_plan *plan, char **argv, char *log, size_t log_len)
{
        size_t n = 0;
        argv[n++] = (char *)plan->runsc;
        argv[n++] = "--root=" BUNDLE_DIR "/state";
        argv[n++] = "--network=host";
        argv[n++] = "--ignore-cgroups";
        argv[n++] = "--platform=ptrace";
        /* BRIG_GVISOR_DEBUG=DIR/ (a directory the sandbox shows, e.g. in
         * the workspace): runsc's own logs, for a runsc that will not start */
        const char *debug = getenv("BRIG_GVISOR_DEBUG");
        if (debug && *debug) {
                snprintf(log, log_len, "--debug-log=%s", debug);
                argv[n++] = "--debug";
                argv[n++] = log;
        }
        return n;
}

static char *const runsc_envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

static int write_json(json_t *doc, const char *path, brig_error **err)
{
        if (!doc)
                return brig_err(err, ENOMEM, "gvisor: %s", path);
        int r = json_dump_file(doc, path, JSON_COMPACT);
        json_decref(doc);
        return r < 0 ? brig_err(err, EIO, "gvisor: write %s", path) : 0;
}

static int write_bundle(const struct run_plan *plan, char *const *argv, brig_error **err)
{
        /* Host root's supplementary groups would still grant group access
         * to runsc's processes (rootless, setgroups is denied and the
         * caller's own stay, granting nothing the caller lacks). */
        if (plan->rootful && setgroups(0, NULL) < 0)
                return brig_err(err, errno, "gvisor: setgroups");
        if (mkdir(BUNDLE_DIR, 0700) < 0 || mkdir(BUNDLE_DIR "/state", 0700) < 0)
                return brig_err(err, errno, "gvisor: make the bundle directory " BUNDLE_DIR);
        return write_json(bundle_config(plan, argv), BUNDLE_DIR "/config.json", err);
}

int wall_gvisor_check_layout(const struct run_plan *plan, brig_error **err)
{
        if (plan->wall != BRIG_WALL_GVISOR)
                return 0;
        /* BUNDLE_DIR is made in whatever is at /tmp when the root is built:
         * an image's /tmp (brig oci) or a host directory bound there
         * would get runsc's bundle (the command's environment) and its
         * state on the host, left after the run, and the image's /tmp
         * is the container's own: the command could rewrite the state
         * runsc reads outside gVisor for every exec and kill. */
        if (plan->rootfs)
                return brig_err(err, ENOTSUP, "--wall gvisor: not with a container image as the root (brig oci): "
                                "runsc's bundle and state would be written into the image's /tmp, which the "
                                "container sees; use --wall namespaces (docs/walls.md)");
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                bool tmp = strcmp(m->dst, "/tmp") == 0 && m->kind != MOUNT_TMPFS;
                if (!tmp && !path_is_under(m->dst, BUNDLE_DIR))
                        continue;
                return brig_err(err, ENOTSUP, "--wall gvisor: %s is mounted at %s, where brig keeps runsc's "
                                "bundle and state (its own /tmp, which gVisor covers with a tmpfs of its own): "
                                "they would be written to the host's %s and the command would not see it; mount "
                                "it elsewhere (a --bind DST other than /tmp), or use --wall namespaces",
                                m->src ? m->src : "a tmpfs", m->dst, m->src ? m->src : m->dst);
        }
        return 0;
}

/* Where a brig exec's process spec and gVisor pid live, by the host pid
 * of its runsc exec (pid 1's child). */
static void exec_file(char *buf, size_t n, pid_t pid, const char *what)
{
        snprintf(buf, n, BUNDLE_DIR "/exec-%d.%s", (int)pid, what);
}

int wall_gvisor_exec(const struct run_plan *plan, brig_error **err)
{
        char *argv[24], log[4200], spec[64], pidfile[64];
        size_t n = runsc_argv(plan, argv, log, sizeof log);
        if (plan->persistent) {
                /* brig exec: runsc exec into the container brig create
                 * started, with the same user, rlimits and no privilege;
                 * argv, environment and cwd are the request's. */
                exec_file(spec, sizeof spec, getpid(), "json");
                exec_file(pidfile, sizeof pidfile, getpid(), "pid");
                int r = write_json(process_config(plan, plan->argv), spec, err);
                if (r < 0)
                        return r;
                argv[n++] = "exec";
                argv[n++] = "--process";
                argv[n++] = spec;
                argv[n++] = "--internal-pid-file";
                argv[n++] = pidfile;
        } else {
                int r = write_bundle(plan, plan->argv, err);
                if (r < 0)
                        return r;
                argv[n++] = "run";
                argv[n++] = "--bundle";
                argv[n++] = BUNDLE_DIR;
        }
        argv[n++] = CONTAINER;
        argv[n] = NULL;
        execve(plan->runsc, argv, runsc_envp);
        return brig_err(err, errno, "gvisor: execute %s (is it inside the sandbox's system directories?)",
                        plan->runsc);
}

/* Run one runsc command to its end; its output (stdout and stderr) in
 * `out`. A memfd, not a pipe: runsc run --detach leaves the sandbox
 * holding its stdio. Returns its wait status or -errno. */
static int runsc_call(const struct run_plan *plan, char *const *sub, char *out, size_t out_len)
{
        char *argv[24], log[4200];
        size_t n = runsc_argv(plan, argv, log, sizeof log);
        for (; *sub && n < ARRAY_SIZE(argv) - 1; sub++)
                argv[n++] = *sub;
        argv[n] = NULL;
        _cleanup_close_ int mem = memfd_create("runsc-output", MFD_CLOEXEC);
        if (mem < 0)
                return -errno;
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                /* pid 1's blocked signals and its descriptors (the sync
                 * socket to the supervisor) are not runsc's to keep: the
                 * sandbox it leaves running would hold them. */
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (null < 0 || dup2(null, 0) < 0 || dup2(mem, 1) < 0 || dup2(mem, 2) < 0)
                        _exit(127);
                syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
                execve(plan->runsc, argv, runsc_envp);
                _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        ssize_t got = pread(mem, out, out_len - 1, 0);
        out[got > 0 ? got : 0] = '\0';
        return status;
}

/* runsc's last line of output: what it says went wrong. */
static const char *last_line(char *out)
{
        size_t len = strlen(out);
        while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
                out[--len] = '\0';
        char *nl = strrchr(out, '\n');
        return nl ? nl + 1 : out;
}

int wall_gvisor_start(const struct run_plan *plan, pid_t *sandbox_pid, brig_error **err)
{
        /* brig create: the container once, whose pid 1 only holds it
         * open; each brig exec is a runsc exec into it. */
        static char *const hold[] = { "/bin/sh", "-c", "while :; do sleep 1000000 & wait; done", NULL };
        int r = write_bundle(plan, hold, err);
        if (r < 0)
                return r;
        char *const sub[] = { "run", "--detach", "--pid-file", BUNDLE_DIR "/sandbox.pid", "--bundle", BUNDLE_DIR,
                              CONTAINER, NULL };
        char out[2048];
        int status = runsc_call(plan, sub, out, sizeof out);
        if (status < 0)
                return brig_err(err, -status, "gvisor: start runsc run --detach");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return brig_err(err, EIO, "gvisor: the persistent sandbox's container did not start (runsc run "
                                "--detach: %s)", *out ? last_line(out) : "no output");
        *sandbox_pid = 0;
        FILE *f = fopen(BUNDLE_DIR "/sandbox.pid", "re");
        int pid = 0;
        if (!f || fscanf(f, "%d", &pid) != 1 || pid <= 0) {
                if (f)
                        fclose(f);
                return brig_err(err, EIO, "gvisor: runsc wrote no sandbox pid");
        }
        fclose(f);
        *sandbox_pid = pid;
        return 0;
}

#ifdef BRIG_TEST_HOOKS
/* Test builds only: BRIG_TEST_GVISOR_PID_LATE_MS=N sees an exec's pid
 * file only once it is N ms old, as on a loaded host, where runsc exec
 * writes it well after the command has started and printed. */
static bool pid_file_too_new(FILE *f)
{
        const char *late = getenv("BRIG_TEST_GVISOR_PID_LATE_MS");
        struct stat st;
        struct timespec now;
        if (!late || fstat(fileno(f), &st) < 0 || clock_gettime(CLOCK_REALTIME, &now) < 0)
                return false;
        long long age_ms = (now.tv_sec - st.st_mtim.tv_sec) * 1000LL + (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000;
        return age_ms < atoll(late);
}
#else
static bool pid_file_too_new(FILE *f)
{
        (void)f;
        return false;
}
#endif

/* The gVisor pid of an exec (runsc exec wrote it), 0 if none yet. */
static int exec_internal_pid(pid_t exec_pid)
{
        char path[64];
        exec_file(path, sizeof path, exec_pid, "pid");
        FILE *f = fopen(path, "re");
        int pid = 0;
        if (f) {
                if (pid_file_too_new(f) || fscanf(f, "%d", &pid) != 1)
                        pid = 0;
                fclose(f);
        }
        return pid > 0 ? pid : 0;
}

/* An exec's command can be up and printing before its runsc exec has
 * written the pid file (runsc writes it when the Sentry's reply comes
 * back): a signal in that gap waits for the pid, up to `limit_ms`, while
 * runsc exec still runs (waitid with WNOWAIT looks without reaping what
 * pid 1's loop reaps). pid 1's loop waits with it: milliseconds, unless
 * the host starves runsc. 0 if runsc exec ended without one or the time
 * ran out. */
static int exec_internal_pid_wait(pid_t exec_pid, int limit_ms)
{
        for (int waited_ms = 0;; waited_ms += 2) {
                int pid = exec_internal_pid(exec_pid);
                if (pid)
                        return pid;
                siginfo_t si = { 0 };
                if (waitid(P_PID, exec_pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid != 0 ||
                    waited_ms >= limit_ms)
                        return 0;
                nanosleep(&(struct timespec){ .tv_nsec = 2000000 }, NULL);
        }
}

static void runsc_kill(const struct run_plan *plan, int pid, int sig)
{
        char flag[32], signame[16], out[256];
        snprintf(flag, sizeof flag, "--pid=%d", pid);
        snprintf(signame, sizeof signame, "%d", sig);
        char *const sub[] = { "kill", flag, CONTAINER, signame, NULL };
        (void)runsc_call(plan, sub, out, sizeof out);  /* gone already: nothing to do */
}

void wall_gvisor_signal(const struct run_plan *plan, pid_t exec_pid, int sig, bool descendants)
{
        /* runsc exec forwards no signal: the command is a task of
         * gVisor's kernel, which only runsc kill reaches (and killing
         * runsc exec would leave it running in the container). */
        int top = exec_internal_pid_wait(exec_pid, 5000);
        if (!top) {
                /* runsc exec ended without a command, or has been starting
                 * it for 5 s: the signal goes to runsc exec itself rather
                 * than nowhere (its death leaves a command it did start
                 * running on, hence the wait). */
                kill(exec_pid, sig);
                return;
        }
        int pids[256] = { top };
        size_t n = 1;
        if (descendants) {
                /* The exec's own tree as gVisor's ps shows it (UID PID
                 * PPID ...): what it started and waits for, as brig's pid
                 * 1 kills the command's process group (a process that
                 * left its parent stays, as one that left the group
                 * does behind the namespace wall, until brig stop). */
                char *const sub[] = { "ps", CONTAINER, NULL };
                _cleanup_free_ char *out = malloc(65536);
                if (out && runsc_call(plan, sub, out, 65536) == 0)
                        for (size_t done = 0; done < n; done++)
                                for (const char *line = out; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                                        int uid, pid, ppid;
                                        if (sscanf(line, "%d %d %d", &uid, &pid, &ppid) == 3 && ppid == pids[done] &&
                                            n < ARRAY_SIZE(pids))
                                                pids[n++] = pid;
                                }
        }
        for (size_t i = 0; i < n; i++)
                runsc_kill(plan, pids[i], sig);
}

void wall_gvisor_forget(pid_t exec_pid)
{
        char path[64];
        exec_file(path, sizeof path, exec_pid, "json");
        unlink(path);
        exec_file(path, sizeof path, exec_pid, "pid");
        unlink(path);
}
