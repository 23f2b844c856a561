/* plan.h — the resolved plan of one run (src/lib/core/plan.c): everything
 * the child needs, decided by the supervisor before clone, and the value
 * types it shares with the policy model (mount entries, limits). The
 * child's side includes this, never core/model.h: it executes the plan
 * and does not read the policy. */
#ifndef BRIG_CORE_PLAN_H
#define BRIG_CORE_PLAN_H

#include "core/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

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
        uint64_t changes_max;     /* entries brig's walks for file changes record (0: no cap) */
        bool required;            /* refuse to run when cgroups cannot enforce them */
        bool want_freezer;        /* persistent sandboxes: a v2 group for cgroup.freeze even without controllers */
};

#define BRIG_DEFAULT_MEMORY (4ULL << 30)
#define BRIG_DEFAULT_PIDS 1024
#define BRIG_DEFAULT_NOFILE 4096
#define BRIG_DEFAULT_KILL_AFTER_MS 5000
#define BRIG_DEFAULT_CHANGES_MAX 100000

#define BRIG_NOBODY_UID 65534
/* Supplementary groups of /process/user, at most. */
#define BRIG_MAX_GROUPS 32

struct terminal;
struct sock_filter;
struct seccomp_replies;
struct tools_plan;
struct intercept;
struct intercept_policy;
struct cgroup;

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
        char *workspace;         /* absolute, normalized; with a rootfs, the rootfs */
        bool rootfs;             /* the workspace is "/" inside, in place of brig's layout of the host's
                                  * system directories (an OCI bundle's root: mounts.c) */
        bool rootfs_readonly;    /* ... mounted read-only (workspace_readonly) */
        char *home;              /* the caller's $HOME path (an empty tmpfs inside) */
        struct strv homes;       /* the supervisor's: $HOME, every home in /etc/passwd, and the real
                                  * names of those reached through symlinks (the deny list's "~/") */
        struct mount_entry *mounts;  /* full layout, sorted parents first */
        size_t n_mounts;
        struct strv masks;       /* paths inside to hide (deny list hits) */
        struct strv pins;        /* their ancestors inside writable grants, parents first:
                                  * each made a mountpoint so it cannot be moved (mounts.c) */
        struct strv symlinks;    /* "path\0target" pairs for merged-/usr links */
        char **envp;             /* the command's environment */
        uid_t host_uid, sandbox_uid;   /* the sandbox user, outside and inside */
        gid_t host_gid, sandbox_gid;
        gid_t sandbox_groups[BRIG_MAX_GROUPS], host_groups[BRIG_MAX_GROUPS];  /* /process/user's, as root */
        size_t n_groups;
        mode_t umask;            /* set before each command: /process/umask, else the caller's */
        bool rootful;            /* brig runs as host root */
        bool map_root_for_setup; /* root: inside 0 = host 0 until the drop */
        bool idmap_workspace;    /* root-owned workspace seen through an idmap */
        int idmapped_workspace_fd;   /* detached idmapped mount, or -1 */
        int pty_slave_fd;        /* inside: the command's terminal, -1 without a pty */
        bool tty;                /* the command runs on a pty of its own */
        struct terminal *term;   /* the supervisor's; the child takes its stdio ends */
        bool new_time_ns;
        /* --clock-start: the monotonic and boot-time clocks inside read
         * clock_start_ns as the sandbox starts; the offsets are taken just
         * before clone3 (controls/timens.c) */
        bool clock_pinned;
        uint64_t clock_start_ns;
        int64_t clock_offset_mono_ns, clock_offset_boot_ns;
        enum brig_net_mode net_mode;  /* effective */
        bool net_filtered_required;   /* FILTERED asked for: no fallback to PROXY */
        char net_fallback[256];  /* why FILTERED fell back to PROXY, or "" */
        int landlock_abi;        /* the ABI to use; 0: Landlock degraded (allowed) */
        int landlock_ruleset_fd; /* pid 1 of a persistent sandbox: the ruleset made once, or -1 */
        int cache_dir_fd;        /* <root>/cache as the policy step opened it, for the filter cache; closed
                                  * by seccomp_prepare (before clone3), or -1 */
        bool seccomp_degraded;   /* no seccomp here, and the policy allowed it */
        struct sock_filter *seccomp_prog;  /* compiled in the supervisor */
        size_t seccomp_len;
        struct seccomp_replies *seccomp_replies;  /* answers per syscall to notified refusals (and audit's logs) */
        int audit_fd;            /* the audit stream (supervisor's), or -1 */
        bool audit_exec;         /* exec events: execve/execveat notify the supervisor (audit_fd, not --audit-no-exec) */
        struct limits limits;    /* the policy's, with rlimits clamped to what the caller may set */
        bool cgroup_degraded;    /* limits fell back to rlimits */
        bool memory_unbounded;   /* --memory set but no memory cgroup: per-process RLIMIT_DATA only */
        bool pids_by_rlimit;     /* --pids held by RLIMIT_NPROC: no pids cgroup */
        bool cpus_unenforced;    /* --cpus set but no cpu cgroup */
        bool io_unenforced;      /* --io-weight set but no io (v2) or blkio (v1) cgroup */
        uint64_t memory_inherited;      /* no group of ours, but brig already runs under this limit */
        char memory_inherited_dir[512]; /* ... set on this cgroup (v2 or v1) */
        char cgroup_desc[128];   /* which hierarchy enforces each controller */
        struct cgroup *cgroup;   /* the supervisor's groups; the child joins the v1 ones (controls/cgroup.h) */
        int sync_fd;             /* child end of the sync socket */
        int report_fd;           /* the supervisor's; the child closes it */
        enum brig_wall wall;     /* namespaces, or gvisor: the command runs under runsc (core/wall.h) */
        char *runsc;             /* gvisor: the runsc found on the host (inside at the same path) */
        bool persistent;         /* brig create: pid 1 serves exec requests instead of one command */
        bool fileop;             /* this exec is a file operation: fileop_main instead of execve */
        const char *overlay_upper;  /* --workspace-mode overlay: the layer's directories in the state dir (the control owns them), or NULL */
        const char *overlay_work;
        struct tools_plan *tools;    /* files made inside at start, passwd, agent (tools.h) */
        struct intercept *intercept; /* secrets and http rules: values, placeholders, CA (net/intercept.h) */
        const struct intercept_policy *intercept_policy;  /* the env:VAR secrets the child scrubs from its environ */
        struct timings *timings;     /* --timings: the shared page of stamps, else NULL (core/timings.h) */
};

/* Every plan starts like this: no descriptors held. */
#define RUN_PLAN_INIT \
        { .idmapped_workspace_fd = -1, .pty_slave_fd = -1, .sync_fd = -1, .report_fd = -1, .audit_fd = -1, \
          .landlock_ruleset_fd = -1, .cache_dir_fd = -1 }

BRIG_INTERNAL int plan_build(struct run_plan *plan, const brig_policy *p, char *const argv[], brig_error **err);
BRIG_INTERNAL void plan_free(struct run_plan *plan);
/* Test hook (meson -Dtest_hooks=true): BRIG_TEST_PLAN=FILE gets the plan
 * as canonical JSON (plan_dump.c). A no-op in other builds. */
BRIG_INTERNAL void plan_test_dump(const struct run_plan *plan);
/* What plan_build reads from this process's environment besides the
 * policy (HOME, SHELL, TERM and the passed-through variables, LC_*,
 * --keep-env values, env:VAR secrets, SSH_AUTH_SOCK, XDG_CONFIG_HOME) and
 * its uid and gid, as text (NAME=VALUE lines; NULL: out of memory): two
 * processes with equal texts and policies get the same plan. A warm
 * pool's members are made from its daemon's environment, so a pooled run
 * is served only by a member whose text is the caller's (pool.c,
 * control.c). It may hold secrets: explicit_bzero it, never write it. */
BRIG_INTERNAL char *plan_caller_context(const brig_policy *p);
/* The limits the policy sets, 1 << RLIMIT_x each (caller_context_spec). */
BRIG_INTERNAL unsigned plan_fixed_rlimits(const brig_policy *p);
/* The workspace's and each bind source's identity (device and inode, as
 * the paths stand now), one a line: what a pool member was built from,
 * compared with what a cold run would bind (pool_identity). NULL when out
 * of memory. */
BRIG_INTERNAL char *plan_sources_identity(const brig_policy *p, const char *workspace);

#endif
