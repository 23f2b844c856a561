/* sandbox.c — persistent sandboxes, the caller's side: brig create starts a
 * detached supervisor that runs the normal run sequence (spawn_run) with
 * a control socket; exec, stop, pause, resume talk to that socket; ls
 * reads the state files; rm stops what lives and removes what is left.
 *
 * Why exec goes through the supervisor and the sandbox's own pid 1 rather
 * than pidfd + setns from the host: the new process is forked by pid 1,
 * which already sits in every namespace, the cgroup and the final mount
 * tree as the unprivileged sandbox user, and then takes the very path of
 * `brig run`'s command (command_exec). Nothing has to re-enter namespaces
 * from outside or drop privileges a second time, and a process that joined
 * from the host could not be pid 1's child (it would escape its reaping
 * and the kill when the sandbox ends). */
#define _GNU_SOURCE
#include "core/hostfs.h"
#include "core/syscalls.h"
#include "core/model.h"
#include "controls/cgroup.h"
#include "persist/control.h"
#include "core/reaper.h"
#include "persist/pool_claim.h"
#include "persist/state.h"
#include "engine/supervisor_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/close_range.h>

/* ---- the detached supervisor -------------------------------------------- */

/* The life of brig-supervisor (src/supervisor/main.c) once it has read
 * its configuration; stdio is already /dev/null and the log. */
_Noreturn void sandbox_supervise(const char *dir, const char *name, const brig_policy *p,
                                 const struct sandbox_create_opts *opts, int ready_fd)
{
        signal(SIGPIPE, SIG_IGN);
        brig_error *err = NULL;
        struct control *ctl = NULL;
        int r = control_new(dir, name, opts, ready_fd, &ctl, &err);
        if (r == 0)
                r = control_save_initial(ctl, &err);
        test_pause("supervisor-started");
        if (r == 0) {
                char *argv[] = { "brig-sandbox", NULL };
                brig_result res;
                r = spawn_run(p, argv, ctl, &res, &err);
        }
        if (r < 0) {
                fprintf(stderr, "brig supervisor: %s\n", err && err->msg ? err->msg : "failed");
                if (ctl)
                        control_failed(ctl, err);
                else if (ready_fd >= 0)
                        control_tell_ready(ready_fd, err, NULL);  /* no control yet: the same word */
        }
        /* An owned sandbox ends for good only when its owner has gone: a
         * stop (a restore's) keeps it for the start that follows. */
        bool owner_gone = opts->owned && control_orphaned(ctl);
        control_finish(ctl);
        control_free(ctl);
        brig_error_free(&err);
        /* An ephemeral sandbox, or an owned one whose owner is gone, leaves
         * nothing: its state goes with it (a failed create's state is
         * removed by the creator, which waits for us to end). */
        if ((opts->ephemeral || owner_gone) && r == 0)
                (void)state_remove_tree(dir, NULL);
        fflush(stderr);
        exit(r < 0 ? BRIG_EXIT_SETUP : 0);
}

static void remove_dead_cgroups(json_t *st);

static int refuse_for_create(const brig_policy *p, brig_error **err)
{
        if (p->n_pass_fds)
                return brig_err(err, EINVAL, "--pass-fd cannot be used with brig create (the caller's "
                                             "descriptors do not outlive it)");
        if (p->audit_path || p->audit_fd)
                return brig_err(err, EOPNOTSUPP, "--audit is not supported for persistent sandboxes yet");
        if (p->manifest_path)
                return brig_err(err, EINVAL, "--manifest cannot be used with brig create (it records one brig run; "
                                             "a persistent sandbox's runs have brig diff)");
        if (p->timings)
                return brig_err(err, EINVAL, "--timings times the start of brig run alone (brig run --timings "
                                             "-- CMD; docs/benchmarks.md)");
        if (p->report_fd)
                return brig_err(err, EINVAL, "--json-report-fd cannot be used with brig create (the caller's "
                                             "descriptors do not outlive it; brig exec --json-report FILE reports "
                                             "each command)");
        return 0;
}

/* An existing directory: say what it is. */
static int explain_taken(const char *dir, const char *name, brig_error **err)
{
        brig_error *e = NULL;
        json_t *st = state_read(dir, &e);
        brig_error_free(&e);
        const char *status = st ? json_string_value(json_object_get(st, "status")) : NULL;
        bool alive = st && state_supervisor_alive(st);
        int r = state_fail(err, EEXIST, "sandbox '%s' already exists%s%s%s", name,
                         alive ? "" : " (", alive ? "" : status && strcmp(status, "stopped") == 0 ? "stopped" : "dead",
                         alive ? "" : "; remove it with brig rm first)");
        json_decref(st);
        return r;
}

/* Start the supervisor on an existing state directory and wait until the
 * sandbox is ready (or failed; then the supervisor has ended). The caller
 * holds the state lock. */
int sandbox_launch(const char *dir, const char *name, const brig_policy *p, const struct sandbox_create_opts *opts,
                  int lock, brig_error **err)
{
        (void)lock;  /* never inherited: the program starts with none of our descriptors */
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return brig_err(err, errno, "pipe");
        int r = supervisor_spawn(dir, name, p, opts, pipefd[1], err);
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                return r;
        }
        r = control_wait_ready(pipefd[0], err);
        if (r < 0) {
                /* Wait for the supervisor to finish its cleanup (its end of
                 * the pipe closes when it exits). */
                struct pollfd pf = { .fd = pipefd[0], .events = POLLIN };
                char c;
                while (poll(&pf, 1, 10000) > 0 && read(pipefd[0], &c, 1) > 0)
                        ;
        }
        close(pipefd[0]);
        return r;
}

/* An ephemeral sandbox's directory comes to its name with its hold
 * already flocked inside: made as .eph-OWNER-NAME (the owner in the name:
 * the reaper removes one whose owner is gone), the hold made and locked
 * in it, then renamed to NAME (never over one that exists). So whenever
 * the creator is killed, what is left can be told from a sandbox that
 * lives: a .eph- directory of a dead owner, or a NAME whose hold nobody
 * holds (neither the creator nor, once started, the supervisor). */
static int mkdir_held(int lock, const char *root, const char *dir, const char *name, int *hold_out,
                      brig_error **err)
{
        if (faccessat(lock, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                return explain_taken(dir, name, err);
        struct owner me;
        char own[96], tmp[200];
        owner_self(&me);
        if (owner_format(&me, own, sizeof own) < 0)
                return brig_err(err, ENAMETOOLONG, "ephemeral sandbox '%s'", name);
        snprintf(tmp, sizeof tmp, SANDBOX_NEW_PREFIX "%s-%s", own, name);
        if (mkdirat(lock, tmp, 0700) < 0)
                return brig_err(err, errno, "create the state directory '%s/%s'", root, tmp);
        _cleanup_close_ int tfd = openat(lock, tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int hold = tfd >= 0 ? openat(tfd, SANDBOX_HOLD, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
                            : -1;
        int r = 0;
        if (hold < 0 || flock(hold, LOCK_EX) < 0)
                r = brig_err(err, errno, "the hold of the ephemeral sandbox '%s' in '%s/%s'", name, root, tmp);
        if (r == 0)
                test_pause("ephemeral-dir-new");
        if (r == 0 && renameat2(lock, tmp, lock, name, RENAME_NOREPLACE) < 0)
                r = errno == EEXIST ? explain_taken(dir, name, err)
                                    : brig_err(err, errno, "create the state directory '%s'", dir);
        if (r < 0) {
                if (tfd >= 0)
                        (void)unlinkat(tfd, SANDBOX_HOLD, 0);
                (void)unlinkat(lock, tmp, AT_REMOVEDIR);
                if (hold >= 0)
                        close(hold);
                return r;
        }
        test_pause("ephemeral-dir-made");
        *hold_out = hold;
        return 0;
}

int sandbox_new_dir_held(const char *name, char **dir_out, int *lock_out, int *hold_out, brig_error **err)
{
        _cleanup_free_ char *dir = NULL, *root = NULL;
        /* One create or rm at a time: the name check and the mkdir below,
         * and the supervisor's start, happen under the lock. */
        _cleanup_close_ int lock = state_dir_locked(name, true, &dir, &root, err);
        if (lock < 0)
                return lock;
        int r = 0;
        /* In the locked, checked root itself (its descriptor), never by
         * walking the path again. */
        if (hold_out)
                r = mkdir_held(lock, root, dir, name, hold_out, err);
        else if (mkdirat(lock, name, 0700) < 0)
                r = errno == EEXIST ? explain_taken(dir, name, err)
                                    : brig_err(err, errno, "create the state directory '%s'", dir);
        if (r < 0)
                return r;
        *dir_out = TAKE_PTR(dir);
        *lock_out = TAKE_FD(lock);
        return 0;
}

/* The state directory of a new sandbox, under the lock; *lock holds it. */
int sandbox_new_dir(const char *name, char **dir_out, int *lock_out, brig_error **err)
{
        return sandbox_new_dir_held(name, dir_out, lock_out, NULL, err);
}

static void save_policy(const brig_policy *p, const char *dir)
{
        _cleanup_free_ char *policy = brig_policy_to_json(p, NULL);
        _cleanup_free_ char *path = brig_strdup_printf("%s/policy.json", dir);
        if (!policy || !path)
                return;
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0)
                (void)!write(fd, policy, strlen(policy));
}

int brig_sandbox_create(const char *name, const brig_policy *p, const brig_create_opts *o, brig_error **err)
{
        struct sandbox_create_opts opts = { .overlay = o && o->workspace_mode == BRIG_WORKSPACE_OVERLAY };
        return sandbox_create(name, p, &opts, err);
}

int sandbox_name_not_a_pools(const char *name, brig_error **err)
{
        if (name && strncmp(name, POOL_MEMBER_PREFIX, strlen(POOL_MEMBER_PREFIX)) == 0)
                return state_fail(err, EINVAL, "sandbox name '%s': names beginning with " POOL_MEMBER_PREFIX
                                               " are the warm pools' members' (brig ls shows them), and what a "
                                               "dead pool leaves is removed by them: choose another", name);
        return 0;
}

int sandbox_create(const char *name, const brig_policy *p, const struct sandbox_create_opts *o, brig_error **err)
{
        struct sandbox_create_opts opts = *o;
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int lock = -EBADF, hold = -EBADF;
        int r = opts.pool_member ? 0 : sandbox_name_not_a_pools(name, err);
        if (r == 0)
                r = refuse_for_create(p, err);
        /* an owned one too: the reaper removes it once its supervisor
         * and its owner are both gone (SIGKILLed together) */
        if (r == 0 && (opts.ephemeral || opts.owned))
                r = sandbox_new_dir_held(name, &dir, &lock, &hold, err);
        else if (r == 0)
                r = sandbox_new_dir(name, &dir, &lock, err);
        if (r < 0)
                return r;
        opts.has_hold = hold >= 0;
        opts.hold_fd = hold;
        save_policy(p, dir);
        if (opts.overlay)
                r = overlay_prepare(p, dir, err);
        if (r == 0)
                r = sandbox_launch(dir, name, p, &opts, lock, err);
        if (r == 0)
                return 0;
        if (err && *err)
                brig_err_prefix(err, "create '%s'", name);
        state_remove_tree(dir, NULL);
        /* The state directory's filesystem refused: say where, and the way out. */
        int e = err && *err ? (*err)->errnum : 0;
        char *more = (e == ENOSPC || e == EDQUOT || e == EROFS) && (*err)->msg
                             ? brig_strdup_printf("%s (the state directory '%s' is on a full or read-only "
                                                  "filesystem: free space there, or set XDG_RUNTIME_DIR to another "
                                                  "directory)", (*err)->msg, dir)
                             : NULL;
        if (more) {
                free((*err)->msg);
                (*err)->msg = more;
        }
        return r;
}

/* The policy a sandbox was created with, for start and fork. */
int sandbox_load_policy(const char *dir, json_t *st, brig_policy **ret, struct sandbox_create_opts *opts,
                        brig_error **err)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/policy.json", dir);
        /* Read through the same checks as state.json: the file brig wrote
         * (0600, ours, one link), never one put in its place. */
        _cleanup_free_ char *text = state_read_file(dir, "policy.json", err);
        brig_policy *p = text ? brig_policy_new() : NULL;
        const char *ws = json_string_value(json_object_get(st, "workspace"));
        const char *mode = json_string_value(json_object_get(st, "workspace_mode"));
        int r = !text ? -EPERM
                : p && path ? brig_policy_load_string(p, path, text, err) : brig_err(err, ENOMEM, "policy");
        if (r == 0 && !ws)
                r = state_fail(err, EBADMSG, "the state in '%s' names no workspace", dir);
        if (r == 0)
                r = brig_policy_set_workspace(p, ws, err);
        if (r < 0) {
                brig_policy_free(p);
                return r;
        }
        opts->overlay = mode && strcmp(mode, "overlay") == 0;
        /* a sandbox made with BRIG_SANDBOX_AUDIT keeps its stream when it
         * runs again (was: a start or restore ran it without one) */
        opts->audit = json_is_true(json_object_get(st, "audit"));
        /* an owned sandbox started again watches the same owner (a start
         * after it is gone stops at once, and removes it) */
        json_t *owner = json_object_get(st, "owner_pid");
        if (json_is_integer(owner) && json_integer_value(owner) > 0) {
                opts->owned = true;
                opts->owner_pid = (pid_t)json_integer_value(owner);
                opts->owner_start = (unsigned long long)json_integer_value(json_object_get(st, "owner_start"));
        }
        *ret = p;
        return 0;
}

int brig_sandbox_start(const char *name, brig_error **err)
{
        return brig_sandbox_start_described(name, NULL, err);
}

int brig_sandbox_start_described(const char *name, char **described, brig_error **err)
{
        if (described)
                *described = NULL;
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int lock = state_dir_locked(name, false, &dir, NULL, err);
        if (lock < 0)
                return lock;
        int r;
        struct stat sb;
        if (lstat(dir, &sb) < 0)
                return state_fail(err, ENOENT, "no sandbox named '%s'", name);
        json_t *st = state_read(dir, err);
        if (!st)
                return -EBADMSG;
        if (state_supervisor_alive(st)) {
                json_decref(st);
                return state_fail(err, EBUSY, "sandbox '%s' is already running", name);
        }
        remove_dead_cgroups(st);  /* a dead one's, if any */
        brig_policy *p = NULL;
        struct sandbox_create_opts opts = { 0 };
        r = sandbox_load_policy(dir, st, &p, &opts, err);
        json_decref(st);
        /* An owned sandbox goes with its owner: started after that, its
         * supervisor would remove it at once, after saying it started. */
        if (r == 0 && opts.owned && state_process_start(opts.owner_pid) != opts.owner_start)
                r = state_fail(err, ESRCH, "sandbox '%s' belonged to process %d (brig mcp, or a program that made it "
                                           "with BRIG_SANDBOX_OWNED), which has ended: it is not started again "
                                           "(brig rm %s removes it)", name, (int)opts.owner_pid, name);
        /* Said before the launch, so that even a start that fails has told
         * the user what it was about to run. */
        if (r == 0 && described && !(*described = policy_summary(p, opts.overlay)))
                r = brig_err(err, ENOMEM, "start");
        /* An owned sandbox's supervisor holds its hold for life, as at
         * create: the reaper then passes it by without reading its state
         * (a sweep that has it just now lets go at once: its owner lives,
         * or this start would be nobody's). */
        _cleanup_close_ int hold = -EBADF;
        if (r == 0 && opts.owned) {
                _cleanup_free_ char *path = brig_strdup_printf("%s/" SANDBOX_HOLD, dir);
                hold = path ? open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -ENOMEM;
                if (hold >= 0 && flock(hold, LOCK_EX) < 0)
                        closep(&hold);
                opts.has_hold = hold >= 0;
                opts.hold_fd = hold;
        }
        if (r == 0)
                r = sandbox_launch(dir, name, p, &opts, lock, err);
        if (r < 0 && err && *err)
                brig_err_prefix(err, "start '%s'", name);
        brig_policy_free(p);
        return r;
}

char *brig_sandbox_describe(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        if (state_dir(name, false, &dir, err) < 0)
                return NULL;
        json_t *st = state_read(dir, err);
        brig_policy *p = NULL;
        struct sandbox_create_opts opts = { 0 };
        char *text = NULL;
        if (st && sandbox_load_policy(dir, st, &p, &opts, err) == 0 && !(text = policy_summary(p, opts.overlay)))
                brig_err(err, ENOMEM, "describe");
        json_decref(st);
        brig_policy_free(p);
        return text;
}

/* ---- talking to a supervisor ------------------------------------------- */

/* Why a sandbox cannot be reached: absent, stopped or dead. */
static int not_running(const char *dir, const char *name, brig_error **err)
{
        struct stat st;
        if (lstat(dir, &st) < 0)
                return state_fail(err, ENOENT, "no sandbox named '%s'", name);
        brig_error *e = NULL;
        json_t *doc = state_read(dir, &e);
        brig_error_free(&e);
        const char *status = doc ? json_string_value(json_object_get(doc, "status")) : NULL;
        int r;
        if (status && strcmp(status, "stopped") == 0)
                r = state_fail(err, ESRCH, "sandbox '%s' is stopped", name);
        else if (status && strcmp(status, "stopping") == 0 && doc && state_supervisor_alive(doc))
                /* as its supervisor answers an exec then: a pooled run
                 * that finds its member so runs in a new sandbox */
                r = state_fail(err, ESHUTDOWN, "sandbox '%s' is not ready (stopping)", name);
        else if (doc && state_supervisor_alive(doc))
                r = state_fail(err, EAGAIN, "sandbox '%s' is not ready (%s)", name, status ? status : "?");
        else
                r = state_fail(err, ESRCH, "sandbox '%s' is dead (its supervisor is gone); remove it with brig rm %s",
                             name, name);
        json_decref(doc);
        return r;
}

static int connect_to(const char *name, char **dir_out, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        int r = state_dir(name, false, &dir, err);
        if (r < 0)
                return r;
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        if ((size_t)snprintf(addr.sun_path, sizeof addr.sun_path, "%s/ctl", dir) >= sizeof addr.sun_path)
                return brig_err(err, ENAMETOOLONG, "control socket path");
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return brig_err(err, errno, "socket");
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
                close(fd);
                return not_running(dir, name, err);
        }
        if (dir_out)
                *dir_out = TAKE_PTR(dir);
        return fd;
}

/* One request, one reply (stop, pause, resume). */
static int simple_request(const char *name, enum ctl_type type, brig_error **err)
{
        _cleanup_close_ int fd = connect_to(name, NULL, err);
        if (fd < 0)
                return fd;
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = type };
        int r = ctl_send(fd, &h, NULL, 0, NULL, 0);
        if (r < 0)
                return brig_err(err, -r, "talk to sandbox '%s'", name);
        int fds[CTL_MAX_FDS], nfds;
        ssize_t n = ctl_recv(fd, &h, sizeof h, fds, &nfds);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        if (n <= 0)
                return brig_err(err, n < 0 ? (int)-n : EPIPE, "no answer from sandbox '%s'", name);
        if (h.type == CTL_ERROR)
                return ctl_error(&h, NULL, err);
        return 0;
}

int brig_sandbox_pause(const char *name, brig_error **err)
{
        return simple_request(name, CTL_PAUSE, err);
}

int brig_sandbox_resume(const char *name, brig_error **err)
{
        return simple_request(name, CTL_RESUME, err);
}

/* Wait until the recorded supervisor has exited; SIGKILL it after
 * `grace_ms` (it is ours: same pid and start time as recorded). */
static int wait_supervisor_gone(json_t *st, int grace_ms)
{
        pid_t pid = (pid_t)json_integer_value(json_object_get(st, "supervisor_pid"));
        unsigned long long start = (unsigned long long)json_integer_value(json_object_get(st, "supervisor_start"));
        if (pid <= 0)
                return 0;
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0)
                return 0;  /* already gone */
        if (state_process_start(pid) != start)
                return 0;  /* the pid names another process now */
        struct pollfd pf = { .fd = pidfd, .events = POLLIN };
        if (poll(&pf, 1, grace_ms) > 0)
                return 0;
        (void)sys_pidfd_send_signal(pidfd, SIGKILL);
        return poll(&pf, 1, 5000) > 0 ? 0 : -ETIMEDOUT;
}

static int grace_ms(json_t *st)
{
        (void)st;
        return BRIG_DEFAULT_KILL_AFTER_MS + 5000;
}

int brig_sandbox_stop(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        int r = state_dir(name, false, &dir, err);
        if (r < 0)
                return r;
        brig_error *e = NULL;
        json_t *st = state_read(dir, &e);
        brig_error_free(&e);
        r = simple_request(name, CTL_STOP, err);
        if (r == 0 && st)
                r = wait_supervisor_gone(st, grace_ms(st));
        json_decref(st);
        if (r == -ETIMEDOUT)
                return state_fail(err, ETIMEDOUT, "sandbox '%s' did not stop", name);
        return r;
}

/* Groups a dead supervisor left behind: only those named after it
 * (brig-PID-START-...), checked again where they are (cgroup_remove_dead). */
static void remove_dead_cgroups(json_t *st)
{
        json_int_t pid = json_integer_value(json_object_get(st, "supervisor_pid"));
        json_int_t start = json_integer_value(json_object_get(st, "supervisor_start"));
        char want[64];
        snprintf(want, sizeof want, "brig-%lld-%lld-", (long long)pid, (long long)start);
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(st, "cgroups"), i, v) {
                const char *path = json_string_value(v);
                const char *base = path ? strrchr(path, '/') : NULL;
                if (base && strncmp(base + 1, want, strlen(want)) == 0)
                        (void)cgroup_remove_dead(path, base + 1);
        }
}

int brig_sandbox_remove(const char *name, brig_error **err)
{
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int lock = state_dir_locked(name, false, &dir, NULL, err);
        if (lock < 0)
                return lock;
        int r;
        struct stat sb;
        if (lstat(dir, &sb) < 0)
                return state_fail(err, ENOENT, "no sandbox named '%s'", name);
        brig_error *e = NULL;
        json_t *st = state_read(dir, &e);
        brig_error_free(&e);
        if (st && state_supervisor_alive(st)) {
                brig_error *stop_err = NULL;
                (void)simple_request(name, CTL_STOP, &stop_err);  /* no answer: killed below */
                brig_error_free(&stop_err);
                if (wait_supervisor_gone(st, grace_ms(st)) < 0) {
                        json_decref(st);
                        return brig_err(err, ETIMEDOUT, "sandbox '%s': its supervisor did not end", name);
                }
        }
        if (st) {
                remove_dead_cgroups(st);
                overlay_sweep_commits(dir, st);  /* before its journal goes with the directory */
        }
        json_decref(st);
        r = state_remove_tree(dir, err);
        reaper_sweep();  /* the dead supervisor's run record, with what it names */
        return r;
}

/* ---- listing ------------------------------------------------------------ */

/* Why a sandbox is dead, for brig ls: a supervisor that ends on its own
 * records "stopped", so a dead one was killed (or crashed), or never
 * got as far as writing its state. */
static const char *dead_reason(json_t *st, const char *status, const brig_error *read_err)
{
        static _Thread_local char why[512];
        json_int_t pid = json_integer_value(json_object_get(st, "supervisor_pid"));
        if (!st && read_err && read_err->errnum == ENOENT)
                snprintf(why, sizeof why, "no state file: brig create (or brig rm) was killed half-way");
        else if (!st)
                snprintf(why, sizeof why, "its state file cannot be read (%s)", read_err && read_err->msg ? read_err->msg : "?");
        else if (status && strcmp(status, "creating") == 0)
                snprintf(why, sizeof why, "its supervisor (pid %lld) died while creating it", (long long)pid);
        else
                snprintf(why, sizeof why, "its supervisor (pid %lld) died without stopping it (killed or crashed)",
                         (long long)pid);
        return why;
}

char *brig_sandbox_list_json(brig_error **err)
{
        _cleanup_free_ char *root = NULL;
        json_t *out = json_array();
        if (!out) {
                brig_err(err, ENOMEM, "list");
                return NULL;
        }
        reaper_sweep();  /* what SIGKILLed brigs left, before we list */
        pool_sweep();
        brig_error *e = NULL;
        int r = state_root(false, &root, &e);
        if (r < 0 && r != -ENOENT) {
                /* one brig refuses (another user's, open to others): saying
                 * "no sandboxes" would hide what is wrong with it */
                json_decref(out);
                if (err && !*err)
                        *err = TAKE_PTR(e);
                brig_error_free(&e);
                return NULL;
        }
        DIR *d = r == 0 ? opendir(root) : NULL;
        brig_error_free(&e);  /* no state directory: no sandboxes */
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (!state_name_valid(de->d_name) || strcmp(de->d_name, "pools") == 0)
                        continue;
                _cleanup_free_ char *dir = brig_strdup_printf("%s/%s", root, de->d_name);
                json_t *st = dir ? state_read(dir, &e) : NULL;
                json_t *row = json_object();
                json_object_set_new(row, "name", json_string(de->d_name));
                const char *status = st ? json_string_value(json_object_get(st, "status")) : NULL;
                bool alive = st && state_supervisor_alive(st);
                if (!status || (strcmp(status, "stopped") != 0 && !alive)) {
                        json_object_set_new(row, "reason", json_string_nocheck(dead_reason(st, status, e)));
                        status = "dead";
                }
                json_object_set_new(row, "status", json_string(status));
                static const char *const copied[] = { "supervisor_pid", "created", "workspace", "workspace_mode",
                                                      "net", "memory", "memory_enforced_by", "memory_warning",
                                                      "warnings", "pids" };
                for (size_t i = 0; st && i < ARRAY_SIZE(copied); i++) {
                        json_t *v = json_object_get(st, copied[i]);
                        if (v)
                                json_object_set(row, copied[i], v);
                }
                char key[POOL_KEY_LEN + 1];
                const char *pooled = pool_member_state(root, de->d_name, key);
                if (pooled)  /* a warm pool's: it serves one brig run --pooled or --pool */
                        json_object_set_new(row, "pool", json_pack("{s:s, s:s}", "key", key, "state", pooled));
                brig_error_free(&e);
                json_array_append_new(out, row);
                json_decref(st);
        }
        if (d)
                closedir(d);
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(out);
        if (!text)
                brig_err(err, ENOMEM, "list");
        return text;
}

/* ---- exec --------------------------------------------------------------- */

static int exec_named(const char *name, const brig_exec_opts *o, uint32_t flags, const char *context, brig_result *res,
                      json_t **refusals, brig_error **err)
{
        memset(res, 0, sizeof *res);
        res->exit_code = BRIG_EXIT_SETUP;
        res->memory_peak_bytes = res->pids_peak = -1;
        uint64_t t0 = exec_now_ns();
        int r = exec_check_opts(o, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = connect_to(name, NULL, err);
        if (o->timings)
                exec_timings_add(res, "state and control socket", exec_now_ns() - t0);
        r = fd < 0 ? fd : exec_over_context(fd, name, o, NULL, flags, context, res, refusals, err);
        if (r < 0 && err && *err)
                res->exit_code = (*err)->exit_code;
        if (o->timings)
                exec_timings_add(res, "total", exec_now_ns() - t0);
        return r;
}

int sandbox_exec(const char *name, const brig_exec_opts *o, brig_result *res, json_t **refusals, brig_error **err)
{
        return exec_named(name, o, 0, NULL, res, refusals, err);
}

int sandbox_exec_last(const char *name, const brig_exec_opts *o, const char *context, brig_result *res,
                      json_t **refusals, brig_error **err)
{
        return exec_named(name, o, CTL_EXEC_LAST, context, res, refusals, err);
}

int sandbox_exec_as_made(const char *name, const brig_exec_opts *o, brig_result *res, json_t **refusals,
                         brig_error **err)
{
        return exec_named(name, o, CTL_EXEC_LAST | CTL_EXEC_AS_MADE, "", res, refusals, err);
}

int sandbox_exec_report(int report_fd, const char *what, const char *name, const brig_exec_opts *o,
                        const brig_result *res, const json_t *pooled, json_t *refusals, int r, brig_error **err)
{
        brig_error *rerr = NULL;
        int rr = exec_report_write(report_fd, what, name, o, res, err ? *err : NULL, pooled, refusals,
                                   r < 0 ? &rerr : err);
        brig_error_free(&rerr);
        return r == 0 ? rr : r;
}

int brig_sandbox_exec(const char *name, const brig_exec_opts *o, brig_result *res, brig_error **err)
{
        memset(res, 0, sizeof *res);
        res->exit_code = BRIG_EXIT_SETUP;
        res->memory_peak_bytes = res->pids_peak = -1;
        /* Opened before the command runs, through no symlink anywhere in
         * the path (output_open): the running sandbox, whose workspace the
         * path may lie in, cannot redirect brig's write. */
        _cleanup_close_ int report_fd = o && o->report_path ? output_open(o->report_path, "--json-report", false, err)
                                                            : -EBADF;
        if (o && o->report_path && report_fd < 0)
                return report_fd;
        json_t *refusals = NULL;
        int r = sandbox_exec(name, o, res, report_fd >= 0 ? &refusals : NULL, err);
        if (report_fd >= 0) {
                _cleanup_free_ char *what = NULL;
                if (asprintf(&what, "--json-report %s", o->report_path) < 0)
                        what = NULL;
                r = sandbox_exec_report(report_fd, what ? what : "--json-report", name, o, res, NULL, refusals, r,
                                        err);
        }
        json_decref(refusals);
        return r;
}

int brig_sandbox_exec_outcome(const char *name, int fd, brig_result *res, brig_error **err)
{
        memset(res, 0, sizeof *res);
        res->exit_code = BRIG_EXIT_SETUP;
        res->memory_peak_bytes = res->pids_peak = -1;
        int r = exec_outcome_read(fd, name, res, err);
        if (r < 0 && err && *err)
                res->exit_code = (*err)->exit_code;
        return r;
}

int sandbox_run_in(const char *name, char *const argv[], const int *stdio, int *exit_code, brig_error **err)
{
        brig_exec_opts o = { .argv = argv, .tty = BRIG_TTY_NEVER };
        brig_result res;
        memset(&res, 0, sizeof res);
        _cleanup_close_ int fd = connect_to(name, NULL, err);
        if (fd < 0)
                return fd;
        int r = exec_over(fd, name, &o, stdio, &res, NULL, err);
        *exit_code = res.exit_code;
        return r;
}

int sandbox_connect(const char *name, brig_error **err)
{
        return connect_to(name, NULL, err);
}
