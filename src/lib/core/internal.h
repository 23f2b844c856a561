/* internal.h — shared declarations inside libbrig. Not installed. */
#ifndef BRIG_INTERNAL_H
#define BRIG_INTERNAL_H

#include "brig.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define BRIG_INTERNAL __attribute__((visibility("hidden")))
#define BRIG_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- cleanup helpers (systemd/crun style) ------------------------------ */

static inline void freep(void *p) { free(*(void **)p); }
/* The variable is left -EBADF: a second closep (a cleanup at the end of
 * the scope, a free of the struct holding it) must not close whatever
 * descriptor the number was given to meanwhile — in a front end's other
 * thread, or the supervisor's own next connection. */
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
                *fd = -EBADF;
        }
}
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
/* Moves ownership of an fd out of a _cleanup_close_ variable. */
#define TAKE_FD(fd) ({ int _t = (fd); (fd) = -EBADF; _t; })
#define TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ------------------------------------------------------------ */

/* Fill *err (if err and *err is empty) and return -errnum, or -EIO when
 * errnum is 0, so the result is always negative. The message gets
 * ": strerror" appended when errnum is non-zero. */
BRIG_INTERNAL int brig_err(brig_error **err, int errnum, const char *fmt, ...) BRIG_PRINTF(3, 4);
/* Same, with an explicit exit code (126/127 for exec failures). */
BRIG_INTERNAL int brig_err_code(brig_error **err, int exit_code, int errnum, const char *fmt, ...)
        BRIG_PRINTF(4, 5);
/* Put "context: " in front of an existing message; returns -errnum. */
BRIG_INTERNAL int brig_err_prefix(brig_error **err, const char *fmt, ...) BRIG_PRINTF(2, 3);
BRIG_INTERNAL char *brig_strdup_printf(const char *fmt, ...) BRIG_PRINTF(1, 2);

/* ---- string lists ------------------------------------------------------ */

struct strv {
        char **items;
        size_t n;
};
BRIG_INTERNAL int strv_push(struct strv *v, const char *s);
BRIG_INTERNAL int strv_push_take(struct strv *v, char *s);
BRIG_INTERNAL void strv_free(struct strv *v);
BRIG_INTERNAL bool strv_contains(const struct strv *v, const char *s);
BRIG_INTERNAL int strv_remove(struct strv *v, const char *s);

/* ---- host paths a sandbox can reach (hostfs.c) ------------------------- */

/* Open a file brig writes during or after the run (report, audit stream),
 * following no symlink in any component of `path`; `what` names the
 * option in messages. A fd, or -errno with *err filled. */
BRIG_INTERNAL int output_open(const char *path, const char *what, bool append, brig_error **err);
/* A descriptor the caller gave for an output (--json-report-fd N): is it
 * open for writing? 0, or -errno with *err naming `what` and the fix. */
BRIG_INTERNAL int output_fd_check(int fd, const char *what, brig_error **err);
/* Is `fd` the same pipe, socket or regular file as `other` (another
 * number for it: 3>&1)? Its kind ("pipe", ...), or NULL (not the same, or
 * a terminal or /dev/null, which no one parses). */
BRIG_INTERNAL const char *output_same_stream(int fd, int other);
/* The supervisor's own close-on-exec copy of it (fd, or -errno). */
BRIG_INTERNAL int output_fd(int fd, const char *what, brig_error **err);
/* Write all of buf to such an output: 0 or -errno (EPIPE, never SIGPIPE). */
/* SIGPIPE held in this thread around writes to a caller's descriptor, and
 * the one they raised taken back: EPIPE instead of brig killed mid-cleanup. */
BRIG_INTERNAL void sigpipe_hold(sigset_t *saved);
BRIG_INTERNAL void sigpipe_release(const sigset_t *saved);
BRIG_INTERNAL int output_write(int fd, const void *buf, size_t len);
/* One write of at most PIPE_BUF bytes that does not block once poll said
 * POLLOUT (a pipe takes it whole; a socket MSG_DONTWAIT): the count, or
 * -errno (-EAGAIN). No SIGPIPE from a socket; a pipe's is the caller's. */
BRIG_INTERNAL ssize_t output_write_some(int fd, const void *buf, size_t len);
/* output_write for what brig writes after the run (the report): it gives
 * up with -ETIMEDOUT when the reader takes nothing for idle_ms, so a
 * caller that never reads its pipe does not keep brig from ending. */
BRIG_INTERNAL int output_write_bounded(int fd, const void *buf, size_t len, int idle_ms);
/* Its fallback where openat2 is missing: fd or -errno (-ELOOP: a symlink). */
BRIG_INTERNAL int output_open_walk(const char *path, int flags, mode_t mode);
/* Remove `name` below `parent` and everything under it, however deep or
 * wide, following no symlink and entering no other mount: 0 or -errno
 * (-EXDEV a mount below, -ESTALE the tree moved during the walk). */
BRIG_INTERNAL int tree_remove_at(int parent, const char *name);

/* ---- paths (pure functions, unit-tested) ------------------------------- */

/* Collapse "//", "/./", trailing "/" of an absolute path; refuse "..".
 * Returns a new string or NULL (errno EINVAL for relative or "..", ENOMEM). */
BRIG_INTERNAL char *path_normalize(const char *path);
/* True when `path` is `dir` or lies below it (both normalized). */
BRIG_INTERNAL bool path_is_under(const char *path, const char *dir);
/* The part of `path` below `dir` ("" when equal); NULL when not under. */
BRIG_INTERNAL const char *path_below(const char *path, const char *dir);
/* "512 MiB", "4 GiB" ("N bytes" below 1 MiB): a size for messages and brig policy explain. */
BRIG_INTERNAL void size_text(char *buf, size_t n, uint64_t bytes);
/* mountinfo.c: the mount table, and the other names a directory has in
 * it (a bind mount of /home at /srv/home, a filesystem mounted twice). */
struct mountinfo_entry {
        unsigned long id;  /* the mount's, as statx's STATX_MNT_ID gives it */
        dev_t dev;
        char *root;      /* the mounted directory, inside its filesystem */
        char *mnt;       /* where it is mounted */
};
struct mountinfo {
        struct mountinfo_entry *v;
        size_t n;
};
/* Host paths below HOST also show at REL ("" or a relative path) below
 * the directory they are another name of. */
struct path_alias {
        char *host;
        char *rel;
};
BRIG_INTERNAL int mountinfo_parse_line(const char *line, size_t len, struct mountinfo_entry *e);
BRIG_INTERNAL int mountinfo_add_line(struct mountinfo *mi, const char *line, size_t len);
BRIG_INTERNAL int mountinfo_load(struct mountinfo *mi);
BRIG_INTERNAL void mountinfo_clear(struct mountinfo *mi);
BRIG_INTERNAL int mountinfo_aliases(const struct mountinfo *mi, const char *path, struct path_alias **out,
                                    size_t *n);
BRIG_INTERNAL void path_aliases_free(struct path_alias *v, size_t n);
/* Number of components: "/" is 0, "/a/b" is 2. */
BRIG_INTERNAL int path_depth(const char *path);

/* ---- the policy model -------------------------------------------------- */

enum mount_kind {
        MOUNT_BIND,      /* bind of a host path */
        MOUNT_TMPFS,     /* fresh tmpfs */
};

struct mount_entry {
        enum mount_kind kind;
        char *src;       /* host path (binds) */
        char *dst;       /* path inside */
        bool readonly;
        uint64_t size;   /* tmpfs */
        unsigned mode;   /* tmpfs root mode */
        bool user_owned; /* tmpfs root owned by the sandbox user ($HOME) */
        bool from_user;  /* asked for by the user (vs. the built-in layout) */
};

struct env_setting {
        char *name;
        char *value;
};

struct seccomp_policy;  /* seccomp_filter.h */
struct tools_policy;    /* tools.h */
struct tools_plan;
struct egress_policy;   /* net/egress.h */
struct sock_filter;

/* Resource limits; 0 means "no limit" unless noted. */
struct limits {
        uint64_t memory;          /* bytes (cgroup); swap is off */
        uint64_t pids;            /* processes and threads (cgroup) */
        uint64_t cpus_millis;     /* 1500 = 1.5 cores (cgroup) */
        unsigned io_weight;       /* 1..10000 (cgroup, where present) */
        uint64_t timeout_ms;      /* wall clock */
        uint64_t kill_after_ms;   /* SIGKILL this long after the timeout's SIGTERM */
        uint64_t cpu_time_s;      /* RLIMIT_CPU per process */
        uint64_t nofile;          /* RLIMIT_NOFILE */
        uint64_t nproc;           /* RLIMIT_NPROC (0: untouched) */
        uint64_t fsize;           /* RLIMIT_FSIZE (0: untouched) */
        uint64_t stack;           /* RLIMIT_STACK (0: untouched) */
        bool required;            /* refuse to run when cgroups cannot enforce them */
        bool want_freezer;        /* persistent sandboxes: a v2 group for cgroup.freeze even without controllers */
};

#define BRIG_DEFAULT_MEMORY (4ULL << 30)
#define BRIG_DEFAULT_PIDS 1024
#define BRIG_DEFAULT_NOFILE 4096
#define BRIG_DEFAULT_KILL_AFTER_MS 5000

enum degradable {
        DEGRADE_LANDLOCK = 1 << 0,
        DEGRADE_SECCOMP = 1 << 1,
        DEGRADE_MEMORY = 1 << 2,  /* no memory cgroup: say so in the report only, not on stderr */
        DEGRADE_PIDS = 1 << 3,    /* no pids cgroup (RLIMIT_NPROC holds): the same */
        DEGRADE_CPUS = 1 << 4,    /* no cpu cgroup (--cpus not enforced): the same */
        DEGRADE_IO = 1 << 5,      /* no io/blkio cgroup (--io-weight not enforced): the same */
};

struct brig_policy {
        char *workspace;             /* NULL: current directory at run time */
        bool workspace_readonly;
        char *cwd;                   /* NULL: the workspace */
        uint64_t shm_size;
        struct mount_entry *mounts;  /* user binds and tmpfs, in order given */
        size_t n_mounts;
        uint64_t tmp_size;
        uint64_t home_size;
        bool mount_sys;
        struct strv deny;            /* secret deny patterns */
        struct strv unsafe_allowed;  /* built-in entries removed on purpose */
        struct env_setting *env;
        size_t n_env;
        struct strv keep_env;
        int *pass_fds;
        size_t n_pass_fds;
        char *hostname;
        enum brig_tty_mode tty;
        bool terminal_passthrough;   /* the output filter off */
        char *report_path;
        char *audit_path;
        int report_fd;               /* --json-report-fd: the caller's descriptor (3 and up), 0: none */
        int audit_fd;                /* --audit-fd, the same */
        const char *pool_note;       /* brig run --pooled ran a new sandbox: why (the report's pool.reason) */
        struct seccomp_policy *seccomp;  /* user syscall rules, NULL: none */
        struct strv allow_unix;          /* pathname unix sockets outside the sandbox it may reach */
        struct egress_policy *egress;    /* network rules, NULL: none */
        enum brig_net_mode net_mode;
        bool net_mode_set;               /* else: proxy when any allow rule exists */
        struct limits limits;
        unsigned allow_degraded;         /* enum degradable */
        brig_notice_fn notice;           /* brig_policy_set_notice: the caller's, never copied */
        void *notice_data;
        struct tools_policy *tools;      /* copy-ins, ssh agent, carried config (tools.h); NULL: none */
};

#define BRIG_DEFAULT_TMP_SIZE (512ULL << 20)
#define BRIG_DEFAULT_HOME_SIZE (256ULL << 20)
#define BRIG_DEFAULT_TMPFS_SIZE (64ULL << 20)
#define BRIG_DEV_SHM_SIZE (64ULL << 20)
#define BRIG_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#define BRIG_DEFAULT_HOSTNAME "brig"
#define BRIG_NOBODY_UID 65534

/* ---- the resolved plan of one run --------------------------------------- */

/* Everything the child needs, computed by the parent before clone so the
 * child only executes decisions: the child's side (child.c, init.c,
 * persist_init.c, the controls it applies) reads the plan, never the
 * policy — they do not include core/model.h. */
struct run_plan {
        const brig_policy *policy;   /* the supervisor's side only (report, warnings, the control) */
        char *const *argv;
        const char *hostname;    /* the sandbox's: the policy's, or BRIG_DEFAULT_HOSTNAME */
        const char *cwd;         /* where the command starts; NULL: the workspace */
        const int *pass_fds;     /* --pass-fd: kept open across execve */
        size_t n_pass_fds;
        uint64_t shm_size;       /* /dev/shm's tmpfs */
        bool mount_sys;          /* --mount-sys: a read-only /sys */
        char *workspace;         /* absolute, normalized */
        char *home;              /* the caller's $HOME path (an empty tmpfs inside) */
        struct mount_entry *mounts;  /* full layout, sorted parents first */
        size_t n_mounts;
        struct strv masks;       /* paths inside to hide (deny list hits) */
        struct strv pins;        /* their ancestors inside writable grants, parents first:
                                  * each made a mountpoint so it cannot be moved (mounts.c) */
        struct strv symlinks;    /* "path\0target" pairs for merged-/usr links */
        char **envp;             /* the command's environment */
        uid_t host_uid, sandbox_uid;   /* the sandbox user, outside and inside */
        gid_t host_gid, sandbox_gid;
        bool rootful;            /* brig runs as host root */
        bool map_root_for_setup; /* root: inside 0 = host 0 until the drop */
        bool idmap_workspace;    /* root-owned workspace seen through an idmap */
        int idmapped_workspace_fd;   /* detached idmapped mount, or -1 */
        int pty_slave_fd;        /* inside: the command's terminal, -1 without a pty */
        bool tty;                /* the command runs on a pty of its own */
        struct terminal *term;   /* the supervisor's; the child takes its stdio ends */
        bool new_time_ns;
        enum brig_net_mode net_mode;  /* effective */
        bool net_filtered_required;   /* FILTERED asked for: no fallback to PROXY */
        char net_fallback[256];  /* why FILTERED fell back to PROXY, or "" */
        int landlock_abi;        /* the ABI to use; 0: Landlock degraded (allowed) */
        bool seccomp_degraded;   /* no seccomp here, and the policy allowed it */
        struct sock_filter *seccomp_prog;  /* compiled in the supervisor */
        size_t seccomp_len;
        struct seccomp_replies *seccomp_replies;  /* answers per syscall to notified refusals (and audit's logs) */
        int audit_fd;            /* the audit stream (supervisor's), or -1 */
        struct limits limits;    /* the policy's, with rlimits clamped to what the caller may set */
        bool cgroup_degraded;    /* limits fell back to rlimits */
        bool memory_unbounded;   /* --memory set but no memory cgroup: per-process RLIMIT_DATA only */
        bool pids_by_rlimit;     /* --pids held by RLIMIT_NPROC: no pids cgroup */
        bool cpus_unenforced;    /* --cpus set but no cpu cgroup */
        bool io_unenforced;      /* --io-weight set but no io (v2) or blkio (v1) cgroup */
        uint64_t memory_inherited;      /* no group of ours, but brig already runs under this limit */
        char memory_inherited_dir[512]; /* ... set on this cgroup (v2 or v1) */
        char cgroup_desc[128];   /* which hierarchy enforces each controller */
        int sync_fd;             /* child end of the sync socket */
        int report_fd;           /* the supervisor's; the child closes it */
        bool persistent;         /* brig create: pid 1 serves exec requests instead of one command */
        bool fileop;             /* this exec is a file operation: fileop_main instead of execve */
        const char *overlay_upper;  /* --workspace-mode overlay: the layer's directories in the state dir (the control owns them), or NULL */
        const char *overlay_work;
        struct tools_plan *tools;    /* files made inside at start, passwd, agent (tools.h) */
        struct intercept *intercept; /* secrets and http rules: values, placeholders, CA (net/intercept.h) */
};

/* Every plan starts like this: no descriptors held. */
#define RUN_PLAN_INIT \
        { .idmapped_workspace_fd = -1, .pty_slave_fd = -1, .sync_fd = -1, .report_fd = -1, .audit_fd = -1 }

/* Two lines saying what a policy runs with (explain.c): network mode and
 * rules; workspace and its mode, binds, limits, syscall rules. */
BRIG_INTERNAL char *policy_summary(const brig_policy *p, bool overlay);
BRIG_INTERNAL int plan_build(struct run_plan *plan, const brig_policy *p, char *const argv[], brig_error **err);
BRIG_INTERNAL void plan_free(struct run_plan *plan);

/* ---- host probe --------------------------------------------------------- */

struct host_features {
        bool userns;
        bool ns_time;
        bool ns_cgroup;
        bool mount_api;        /* open_tree/move_mount/mount_setattr/fsopen */
        bool openat2;
        bool clone3;
        bool seccomp;          /* seccomp filters (SECCOMP_SET_MODE_FILTER) */
};
BRIG_INTERNAL const struct host_features *host_probe(void);

/* restrict.c: which restriction keeps user namespaces from brig here. */
struct userns_restriction {
        const char *id;        /* max_user_namespaces, unprivileged_userns_clone, apparmor, container, unknown */
        char what[320];        /* the restriction met, in words */
        char fix[320];         /* what to change */
};
/* probe_errno: how unshare(CLONE_NEWUSER) or clone3 ended (0: it worked). */
BRIG_INTERNAL bool restrict_userns(int probe_errno, struct userns_restriction *out);
/* "Docker", "Podman", ... when this looks like a container, with why. */
BRIG_INTERNAL const char *restrict_container(char *detail, size_t n);
/* The path to read for a host file: the host's, or under
 * $BRIG_TEST_PROBE_ROOT in a test build. */
BRIG_INTERNAL const char *restrict_path(const char *path, char *buf, size_t n);
/* Test builds: a faked probe errno / Landlock ABI / seccomp (else 0 / real). */
BRIG_INTERNAL int restrict_fake_userns_errno(void);
BRIG_INTERNAL int restrict_fake_landlock_abi(int real);
BRIG_INTERNAL bool restrict_fake_seccomp(bool real);

/* ---- syscall wrappers (glibc 2.36 lacks some) --------------------------- */

struct clone_args;
struct open_how;
struct mount_attr;
BRIG_INTERNAL long sys_clone3(struct clone_args *args);
BRIG_INTERNAL int sys_openat2(int dirfd, const char *path, struct open_how *how);
BRIG_INTERNAL int sys_open_tree(int dirfd, const char *path, unsigned flags);
BRIG_INTERNAL int sys_move_mount(int from_dirfd, const char *from, int to_dirfd, const char *to, unsigned flags);
BRIG_INTERNAL int sys_mount_setattr(int dirfd, const char *path, unsigned flags, struct mount_attr *attr);
BRIG_INTERNAL int sys_fsopen(const char *fsname, unsigned flags);
BRIG_INTERNAL int sys_fsconfig(int fd, unsigned cmd, const char *key, const void *value, int aux);
BRIG_INTERNAL int sys_fsmount(int fd, unsigned flags, unsigned attr_flags);
BRIG_INTERNAL int sys_pivot_root(const char *new_root, const char *put_old);
BRIG_INTERNAL int sys_pidfd_send_signal(int pidfd, int sig);
#include <signal.h>
BRIG_INTERNAL int sys_pidfd_send_siginfo(int pidfd, int sig, siginfo_t *info);

/* si_int of a signal the supervisor queues to pid 1 meaning "to every
 * process of the sandbox", not only the command (the timeout's SIGTERM). */
#define BRIG_SIGNAL_EVERYONE 0x62726967

/* ---- controls: one file each -------------------------------------------- */

/* userns.c */
BRIG_INTERNAL int userns_write_maps(pid_t pid, const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int userns_become_sandbox_user(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int userns_forbid_nesting(brig_error **err);
BRIG_INTERNAL int userns_idmapped_workspace(const struct run_plan *plan, int *ret_fd, brig_error **err);

/* mounts.c */
BRIG_INTERNAL int mounts_build_root(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int mounts_enter_cwd(const char *cwd, brig_error **err);
BRIG_INTERNAL int mounts_check_stdio(brig_error **err);
/* overlay.c: the workspace entry becomes an overlay (persistent sandboxes
 * with --workspace-mode overlay); returns the detached mount. */
BRIG_INTERNAL bool overlay_is_workspace(const struct run_plan *plan, const struct mount_entry *m);
BRIG_INTERNAL int overlay_workspace_tree(const struct run_plan *plan, int src_fd, brig_error **err);

/* rlimit.c */
BRIG_INTERNAL void rlimits_clamp(struct limits *l);
BRIG_INTERNAL int rlimits_apply(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int rlimits_apply_memory_fallback(const struct run_plan *plan, brig_error **err);
/* What --memory leaves unbounded without a memory cgroup: stable names
 * for the report (NULL-terminated), and one sentence for people. */
BRIG_INTERNAL extern const char *const rlimits_memory_unbounded[];
BRIG_INTERNAL void rlimits_memory_text(const struct run_plan *plan, char *buf, size_t n);
/* One line per control that runs weaker than the policy asks and was not
 * accepted with --allow-degraded (memory, pids, cpus) or was accepted but
 * must still be said (landlock, seccomp): said at the start of a run. */
BRIG_INTERNAL int degraded_warnings(const struct run_plan *plan, struct strv *out);
/* The sandbox's IPC namespace limits (System V shm and messages) from the
 * memory limit; pid 1, while it is root in its user namespace (ipc.c). */
BRIG_INTERNAL int ipc_limits_apply(const struct run_plan *plan, brig_error **err);
BRIG_INTERNAL bool ipc_limits_settable(const struct run_plan *plan);
/* The sandbox's processes are the OOM killer's first choice, before brig
 * and the host's (oom_score_adj 1000; rlimit.c says why). */
BRIG_INTERNAL int rlimits_oom_first(const struct run_plan *plan, brig_error **err);

/* caps.c */
BRIG_INTERNAL int caps_drop_bounding(brig_error **err);
BRIG_INTERNAL int caps_drop_all(brig_error **err);
BRIG_INTERNAL int caps_verify_none(brig_error **err);

/* netns.c */
BRIG_INTERNAL int netns_loopback_up(brig_error **err);
/* Filtered mode: default routes through loopback; *ipv6 says whether the
 * IPv6 one could be made. */
BRIG_INTERNAL int netns_route_through_loopback(bool *ipv6, brig_error **err);
/* Filtered mode: the nftables redirect of every outbound TCP connection
 * and DNS query to brig, everything else rejected (netfilter.c). */
BRIG_INTERNAL int netfilter_redirect_egress(bool ipv6, brig_error **err);

/* terminal.c */
struct terminal;
struct pollfd;
#define TERMINAL_POLL_MAX 3
/* Decide how the command meets the caller's terminal: a pty, or the
 * caller's terminals among stdio (NULL: 0, 1, 2) behind pipes, both
 * relayed through the output filter unless passthrough; *ret stays NULL
 * when nothing stands in between. */
BRIG_INTERNAL int terminal_prepare(enum brig_tty_mode mode, bool passthrough, const int stdio[3],
                                   struct terminal **ret, brig_error **err);
BRIG_INTERNAL bool terminal_is_pty(const struct terminal *t);
/* Without a pty: replace the guarded ones among fds with the command's ends. */
BRIG_INTERNAL void terminal_stdio(const struct terminal *t, int fds[3]);
/* The command's ends were passed on: ours go. */
BRIG_INTERNAL void terminal_handed_over(struct terminal *t);
/* In the child: the command's ends become 0, 1, 2; the relay's ends go. */
BRIG_INTERNAL int terminal_child_stdio(struct terminal *t, brig_error **err);
/* Inside: a pty in the sandbox's own devpts; the master goes to the supervisor. */
BRIG_INTERNAL int terminal_create_inside(int *master, int *slave, brig_error **err);
/* Supervisor: start relaying through the master the sandbox sent. */
BRIG_INTERNAL void terminal_attach(struct terminal *t, int master);
BRIG_INTERNAL void terminal_on_winch(struct terminal *t);
/* The relay in a poll loop: fill up to TERMINAL_POLL_MAX entries, then
 * hand them back after poll(); drain writes out what is left when the
 * command is gone. */
BRIG_INTERNAL int terminal_poll_fds(struct terminal *t, struct pollfd *p);
BRIG_INTERNAL void terminal_dispatch(struct terminal *t, const struct pollfd *p, int n);
BRIG_INTERNAL void terminal_drain(struct terminal *t);
BRIG_INTERNAL void terminal_close(struct terminal *t);

/* sync.c: messages from the child side to the supervisor */
enum sync_type {
        SYNC_GO = 1,       /* parent → child: uid maps are written */
        SYNC_ERROR,        /* setup failed: step, errno, message */
        SYNC_EXEC_FAILED,  /* execve failed: errno, message, exit code */
        SYNC_STATUS,       /* the command's wait status, from pid 1 */
        SYNC_PTY,          /* carries the master of the sandbox's own pty */
        SYNC_NOTIFY_FD,    /* carries the seccomp listener (audit mode) */
        SYNC_LISTENER,     /* carries a proxy listening socket; status = its kind */
        SYNC_READY,        /* persistent sandbox: pid 1 is set up and waits for execs */
        SYNC_EXEC,         /* supervisor → pid 1: carries one exec's socket (persist_init.c) */
        SYNC_NET_FALLBACK, /* filtered mode unavailable, proxy mode instead: text = why */
        SYNC_UNIX_DIAG,    /* carries a NETLINK_SOCK_DIAG socket of the sandbox's network namespace */
        SYNC_AGENT,        /* carries the listening socket of the ssh-agent relay (--ssh-agent) */
        SYNC_STARTED,      /* pid 1: a detached exec was forked; status = its pid, text = its log */
};
struct sync_msg {
        int type;
        int errnum;
        int exit_code;
        int status;
        char text[1024];
};
BRIG_INTERNAL int sync_send(int fd, const struct sync_msg *m);
BRIG_INTERNAL int sync_send_fd(int fd, const struct sync_msg *m, int passed_fd);
BRIG_INTERNAL int sync_send_error(int fd, int type, const brig_error *err);
BRIG_INTERNAL int sync_recv(int fd, struct sync_msg *m, int *passed_fd);

/* child.c, init.c */
BRIG_INTERNAL _Noreturn void child_main(struct run_plan *plan);
BRIG_INTERNAL _Noreturn void init_main(struct run_plan *plan, pid_t command_pid);
/* The command's side of the run, after fork from pid 1: session, fds, cwd,
 * rlimits, Landlock, seccomp, execve. Also used for each `brig exec`. */
BRIG_INTERNAL _Noreturn void command_exec(const struct run_plan *plan);
/* fileops.c: a file operation (plan->argv) in the confined child, at the
 * point where command_exec would execve. */
BRIG_INTERNAL _Noreturn void fileop_main(const struct run_plan *plan);
BRIG_INTERNAL void init_hide_command_line(void);
BRIG_INTERNAL void init_detach_stdio(void);
/* persist_init.c: pid 1 of a persistent sandbox: forks one command per
 * exec request, through command_exec, and reports each one's status. */
BRIG_INTERNAL _Noreturn void persist_init_main(struct run_plan *plan);

/* control.c: a persistent sandbox's control socket (brig exec, stop,
 * pause); NULL for brig run. */
struct control;
struct cgroup;
/* Before clone: mark the plan persistent, add the overlay layer, ask for a freezer. */
BRIG_INTERNAL int control_prepare(struct control *c, struct run_plan *plan, brig_error **err);
BRIG_INTERNAL int control_attach(struct control *c, struct run_plan *plan, struct cgroup *cg, int pidfd,
                                 int sync_fd, brig_error **err);
struct unixguard;
/* Each exec's seccomp listener goes to the supervisor's guard (unixguard.c). */
BRIG_INTERNAL void control_set_unixguard(struct control *c, struct unixguard *g);
struct refusals;
BRIG_INTERNAL void control_set_refusals(struct control *c, struct refusals *r);
/* The proxy whose rules CTL_NET_RULE changes, and the audit stream that
 * records each change (either may be NULL). */
struct egress;
struct audit;
BRIG_INTERNAL void control_set_egress(struct control *c, struct egress *e, struct audit *a);
BRIG_INTERNAL int control_poll_fd(const struct control *c);
BRIG_INTERNAL void control_dispatch(struct control *c);
BRIG_INTERNAL void control_ready(struct control *c);
/* A signal the supervisor received; true when the control consumed it. */
BRIG_INTERNAL bool control_on_signal(struct control *c, int sig);

/* spawn.c: the run sequence; ctl non-NULL for a persistent sandbox. */
BRIG_INTERNAL int spawn_run(const brig_policy *p, char *const argv[], struct control *ctl, brig_result *result,
                            brig_error **err);

/* supervisor.c */
struct supervision {
        int pidfd;
        int sync_fd;
        struct terminal *term;
        uint64_t timeout_ms;     /* 0: none */
        uint64_t kill_after_ms;
        struct audit *audit;     /* NULL without --audit */
        struct unixguard *guard; /* answers the seccomp listeners (unixguard.c) */
        struct egress *egress;   /* proxy mode: serves the listeners the sandbox sends */
        struct control *control; /* persistent sandbox: serves brig exec and friends */
        struct sshagent *agent;  /* --ssh-agent: relays the sandbox's agent socket (sshagent.c) */
        bool timed_out;          /* out */
        char net_fallback[256];  /* out: SYNC_NET_FALLBACK's text */
        /* out */
        int wait_status;         /* of the command, as pid 1 reported it */
        bool have_status;
        struct sync_msg failure; /* SYNC_ERROR / SYNC_EXEC_FAILED, type 0 if none */
        int init_status;
};
BRIG_INTERNAL int supervise(struct supervision *s, brig_error **err);

/* report.c */
struct run_report {
        const struct run_plan *plan;
        const brig_result *result;
        const brig_error *error;
        const struct audit *audit;
        const struct egress *egress;
        const struct refusals *refusals;
};
BRIG_INTERNAL int report_write(int fd, const struct run_report *r, brig_error **err);
/* How long a report's reader may take nothing before brig gives up on it
 * (output_write_bounded; docs/report.md). */
#define REPORT_IDLE_MS 5000
/* A report's text (json_dumps; NULL: out of memory) and a new line to fd,
 * bounded, then freed; errors name `what` ("--json-report-fd 3"). */
BRIG_INTERNAL int report_text_write(int fd, char *text, const char *what, brig_error **err);
/* "--json-report-fd 3" or "--json-report PATH": the policy's report flag. */
BRIG_INTERNAL void report_what(const brig_policy *p, char *buf, size_t size);

#endif
