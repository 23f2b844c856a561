/* model.h — the policy model: struct brig_policy as the setters
 * (policy/policy.c), the JSON loader and dumper and explain fill and read
 * it, and its defaults. The supervisor's side only: the child reads the
 * plan (core/plan.h). */
#ifndef BRIG_CORE_MODEL_H
#define BRIG_CORE_MODEL_H

#include "core/plan.h"

struct env_setting {
        char *name;
        char *value;
};

struct seccomp_policy;  /* seccomp_filter.h */
struct tools_policy;    /* tools.h */
struct tools_plan;
struct egress_policy;   /* net/egress.h */
struct sock_filter;


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
        bool audit_no_exec;          /* --audit-no-exec: no exec events in the audit stream */
        bool timings;                /* --timings: stamps of each step of the run (core/timings.h) */
        bool exit_after_run;         /* brig_policy_set_exit_after_run: the caller exits at the return */
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
        /* /process/user: who the commands are inside (brig_policy_set_user) */
        char *user;                  /* "UID:GID[:G,...]" as set; NULL: brig's sandbox user */
        uint32_t user_uid, user_gid;
        uint32_t user_groups[BRIG_MAX_GROUPS];
        size_t n_user_groups;
        char *umask;                 /* octal, NULL: the caller's */
        struct strv uid_map, gid_map;    /* "INSIDE:HOST:COUNT" (brig_policy_add_uid_map) */
        char *clock_start;           /* --clock-start: a duration, as given (checked) */
        char *rootfs;                /* an OCI bundle's root filesystem: "/" inside, instead of the host's directories */
        enum brig_tty_mode tty;
        enum brig_wall wall;         /* namespaces (brig's own) or gvisor (runsc) */
        bool terminal_passthrough;   /* the output filter off */
        char *report_path;
        char *manifest_path;         /* --manifest: what replays this run (docs/audit.md#replay) */
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

/* The host id of `inside` in a uid or gid map of the policy (policy.c):
 * 0 with *host set; -ENOENT when the map is empty, -ERANGE when no range
 * holds it. */
BRIG_INTERNAL int policy_map_id(const struct strv *map, uint32_t inside, uint32_t *host);

/* /process/user resolved against the maps and the host ids brig would use
 * otherwise (dflt_*): who the commands are, inside and on the host. */
struct user_ids {
        bool set;                /* /process/user given and not brig's own 0 */
        uint32_t uid, gid, host_uid, host_gid;
        uint32_t groups[BRIG_MAX_GROUPS], host_groups[BRIG_MAX_GROUPS];
        size_t n_groups;
};
BRIG_INTERNAL int policy_resolve_user(const brig_policy *p, uint32_t dflt_uid, uint32_t dflt_gid,
                                      struct user_ids *out, brig_error **err);

#define BRIG_DEFAULT_TMP_SIZE (512ULL << 20)
#define BRIG_DEFAULT_HOME_SIZE (256ULL << 20)
#define BRIG_DEFAULT_TMPFS_SIZE (64ULL << 20)
#define BRIG_DEV_SHM_SIZE (64ULL << 20)
#define BRIG_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
#define BRIG_DEFAULT_HOSTNAME "brig"

/* Two lines saying what a policy runs with (explain.c): network mode and
 * rules; workspace and its mode, binds, limits, syscall rules. */
BRIG_INTERNAL char *policy_summary(const brig_policy *p, bool overlay);

#endif
