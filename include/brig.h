/* brig.h — public API of libbrig, a Linux sandbox for AI agents.
 *
 * Conventions:
 *   - Functions return 0 (or a non-negative value) on success and a negative
 *     errno on failure; on failure they fill *err when err is not NULL.
 *     A caller owns the error and frees it with brig_error_free().
 *   - Handles are opaque; strings passed in are copied.
 *   - The library never prints and never exits the calling process.
 */
#ifndef BRIG_H
#define BRIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRIG_PUBLIC __attribute__((visibility("default")))

/* Exit statuses shared by the library and the CLI (DESIGN.md §4). */
enum {
        BRIG_EXIT_TIMEOUT = 124,
        BRIG_EXIT_SETUP = 125,        /* brig's own failure: bad policy, setup error */
        BRIG_EXIT_NOT_EXECUTABLE = 126,
        BRIG_EXIT_NOT_FOUND = 127,
};

/* An error with context. `exit_code` is the status a CLI should exit with
 * (125 for brig's own failures, 126/127 when the command could not be
 * executed); `errnum` is the errno of the failing step (0 if none). */
typedef struct brig_error {
        int exit_code;
        int errnum;
        char *msg;
} brig_error;

BRIG_PUBLIC void brig_error_free(brig_error **err);

/* ---- Policy ------------------------------------------------------------ */

typedef struct brig_policy brig_policy;

/* A new policy holding brig's defaults: workspace = current directory,
 * read-write; system directories read-only; /tmp and $HOME empty tmpfs;
 * no network; the built-in secret deny list. */
BRIG_PUBLIC brig_policy *brig_policy_new(void);
BRIG_PUBLIC void brig_policy_free(brig_policy *p);

BRIG_PUBLIC int brig_policy_set_workspace(brig_policy *p, const char *dir, brig_error **err);

enum brig_bind_flags {
        BRIG_BIND_READONLY = 1 << 0,
};
/* Bind host path `src` at `dst` inside (dst NULL: same path). */
BRIG_PUBLIC int brig_policy_add_bind(brig_policy *p, const char *src, const char *dst, unsigned flags,
                                     brig_error **err);
/* A root filesystem (an OCI bundle's, an unpacked image) that is "/"
 * inside instead of brig's layout of the host's system directories; the
 * workspace is then this directory (workspace_readonly makes it read-only)
 * and $HOME is not mounted. Symlinks in the path are refused at the run. */
BRIG_PUBLIC int brig_policy_set_rootfs(brig_policy *p, const char *dir, brig_error **err);
/* Who the commands are inside the sandbox's user namespace (an OCI
 * config's process.user): "UID:GID" or "UID:GID:GROUP,GROUP,..." with
 * supplementary groups (at most 32). Each id's host id comes from the
 * maps below, else it is brig's sandbox user's (rootless: the caller; as
 * root: the workspace's owner or nobody). Inside 0 is brig's own: uid 0
 * runs as brig's sandbox user, gid 0 as its group, group 0 is left out.
 * Refused: an id no range of a given map holds, a host id 0, rootless a
 * host id not the caller's and any supplementary group (docs/api.md). */
BRIG_PUBLIC int brig_policy_set_user(brig_policy *p, const char *spec, brig_error **err);
/* The commands' umask, octal ("0022"); unset: the caller's. */
BRIG_PUBLIC int brig_policy_set_umask(brig_policy *p, const char *octal, brig_error **err);
/* "INSIDE:HOST:COUNT": ids inside that are these host ids (an OCI
 * config's linux.uidMappings / gidMappings). brig maps only the ids of
 * brig_policy_set_user's user, never a whole range. */
BRIG_PUBLIC int brig_policy_add_uid_map(brig_policy *p, const char *range, brig_error **err);
BRIG_PUBLIC int brig_policy_add_gid_map(brig_policy *p, const char *range, brig_error **err);
/* Mount the workspace read-only (the "strict" profile). */
BRIG_PUBLIC void brig_policy_set_workspace_readonly(brig_policy *p, bool readonly);
/* Start the command in this directory inside (default: the workspace). */
BRIG_PUBLIC int brig_policy_set_cwd(brig_policy *p, const char *dir, brig_error **err);
/* Size of /dev/shm (default 64M; browsers want more). */
BRIG_PUBLIC int brig_policy_set_shm_size(brig_policy *p, uint64_t size_bytes, brig_error **err);
/* A tmpfs at `dst`; size_bytes 0 means brig's default tmpfs size. */
BRIG_PUBLIC int brig_policy_add_tmpfs(brig_policy *p, const char *dst, uint64_t size_bytes, brig_error **err);
BRIG_PUBLIC int brig_policy_set_tmp_size(brig_policy *p, uint64_t size_bytes, brig_error **err);
BRIG_PUBLIC int brig_policy_set_home_size(brig_policy *p, uint64_t size_bytes, brig_error **err);
/* Expose /sys (read-only, a fresh sysfs for the sandbox's network namespace). */
BRIG_PUBLIC void brig_policy_set_mount_sys(brig_policy *p, bool on);

/* Secret deny list. Entries are absolute paths, or "~/..." meaning that path
 * in every home directory; shell globs are allowed in the last component. */
BRIG_PUBLIC int brig_policy_add_deny(brig_policy *p, const char *pattern, brig_error **err);
/* Remove a built-in entry on purpose. Returns -ENOENT if no such entry. */
BRIG_PUBLIC int brig_policy_unsafe_allow_secret(brig_policy *p, const char *pattern, brig_error **err);
/* The built-in deny list, NULL-terminated (static storage). */
BRIG_PUBLIC const char *const *brig_default_deny_list(void);

/* Environment: cleared, then a minimal safe set, then these. */
BRIG_PUBLIC int brig_policy_set_env(brig_policy *p, const char *name, const char *value, brig_error **err);
BRIG_PUBLIC int brig_policy_keep_env(brig_policy *p, const char *name, brig_error **err);
/* Keep an inherited fd open inside the sandbox on purpose. */
BRIG_PUBLIC int brig_policy_pass_fd(brig_policy *p, int fd, brig_error **err);
BRIG_PUBLIC int brig_policy_set_hostname(brig_policy *p, const char *name, brig_error **err);
/* The sandbox's monotonic and boot-time clocks (CLOCK_MONOTONIC,
 * CLOCK_BOOTTIME, /proc/uptime) read this duration when it starts ("0",
 * "100000", "27h"): a time namespace's offsets, taken when it starts. They
 * run on at the host's rate (not frozen); the wall clock stays the host's,
 * which no namespace moves (docs/audit.md#replay). NULL: the host's clocks. */
BRIG_PUBLIC int brig_policy_set_clock_start(brig_policy *p, const char *duration, brig_error **err);

enum brig_tty_mode {
        BRIG_TTY_AUTO = 0,  /* a pseudo-terminal when stdin and stdout are terminals */
        BRIG_TTY_ALWAYS,
        BRIG_TTY_NEVER,
};
BRIG_PUBLIC void brig_policy_set_tty(brig_policy *p, enum brig_tty_mode mode);
/* The wall between the command and the host kernel (docs/walls.md):
 * NAMESPACES is brig's own run sequence (the host kernel answers every
 * syscall the filter allows); GVISOR runs the command under gVisor's runsc,
 * a user-space kernel, from the same plan — egress, audit, limits and the
 * report stay brig's. No runsc on the host: the run is refused. */
enum brig_wall {
        BRIG_WALL_NAMESPACES = 0,
        BRIG_WALL_GVISOR,
};
BRIG_PUBLIC void brig_policy_set_wall(brig_policy *p, enum brig_wall wall);
/* What the command writes reaches the caller's terminal through a filter
 * that drops sequences acting beyond the screen (clipboard, title,
 * queries; docs/security.md). true: relay it unfiltered, and without a
 * pty hand the caller's terminals in as they are. */
BRIG_PUBLIC void brig_policy_set_terminal_passthrough(brig_policy *p, bool on);

/* Syscall rules on top of the default seccomp profile. `name` is a syscall
 * or a @group (@mount, @privileged, @network, @debug, ...); `action` is one
 * of "allow", "kill", "log" (allow and record), "deny-log" (refuse and
 * record) or "errno:N". An unknown name is an error that names it. */
BRIG_PUBLIC int brig_policy_add_syscall_rule(brig_policy *p, const char *name, const char *action,
                                             brig_error **err);
/* Let a control run degraded when the host lacks it ("landlock", "seccomp");
 * the run report then says it degraded. Without this brig refuses to run. */
BRIG_PUBLIC int brig_policy_allow_degraded(brig_policy *p, const char *control, brig_error **err);

/* Resource limits. Sizes in bytes, times in milliseconds; 0 removes a
 * limit. Defaults: memory 4 GiB (no swap), 1024 pids, 4096 open files,
 * no CPU, time or file size limit. */
enum brig_limit {
        BRIG_LIMIT_MEMORY,      /* bytes, cgroup */
        BRIG_LIMIT_PIDS,        /* processes + threads, cgroup */
        BRIG_LIMIT_CPUS_MILLI,  /* 1500 = 1.5 cores, cgroup */
        BRIG_LIMIT_IO_WEIGHT,   /* 1..10000, cgroup where present */
        BRIG_LIMIT_TIMEOUT_MS,  /* wall clock: SIGTERM, then SIGKILL */
        BRIG_LIMIT_KILL_AFTER_MS, /* grace between the timeout's SIGTERM and SIGKILL (default 5 s) */
        BRIG_LIMIT_CPU_TIME_S,  /* RLIMIT_CPU per process */
        BRIG_LIMIT_NOFILE,      /* RLIMIT_NOFILE */
        BRIG_LIMIT_NPROC,       /* RLIMIT_NPROC */
        BRIG_LIMIT_FSIZE,       /* RLIMIT_FSIZE, bytes */
        BRIG_LIMIT_STACK,       /* RLIMIT_STACK, bytes */
        /* Not the sandbox's: the most entries brig's own walks for file
         * changes record (the audit's files event, --manifest, brig diff of a
         * bind-mode sandbox); past it a walk stops and says so. Default
         * 100000; 0: no cap. */
        BRIG_LIMIT_CHANGES_MAX,
};
BRIG_PUBLIC int brig_policy_set_limit(brig_policy *p, enum brig_limit which, uint64_t value, brig_error **err);
/* Refuse to run when cgroup limits cannot be enforced (instead of falling
 * back to rlimits and saying "degraded" in the report). */
BRIG_PUBLIC void brig_policy_require_limits(brig_policy *p, bool required);

/* Parse "90s", "10m", "1h30m", "500ms" (bare numbers are seconds). */
BRIG_PUBLIC int brig_parse_duration(const char *text, uint64_t *ms, brig_error **err);

/* Network. NONE (the default without allow rules): only the sandbox's own
 * loopback. PROXY: still only loopback inside, plus brig's logging
 * HTTP/SOCKS5 proxy there (HTTP_PROXY and friends set), which reaches just
 * what the rules allow. FILTERED (the default with allow rules): PROXY,
 * and the kernel also sends every other outbound TCP connection and every
 * DNS query to brig, which judges them by the same rules — for programs
 * that ignore proxy settings; where the host can't, an unset mode falls
 * back to PROXY (the report says so) and an explicit FILTERED refuses to
 * run. HOST: the host's network, no egress control (the report warns). */
enum brig_net_mode { BRIG_NET_NONE = 0, BRIG_NET_PROXY, BRIG_NET_HOST, BRIG_NET_FILTERED };
BRIG_PUBLIC void brig_policy_set_net_mode(brig_policy *p, enum brig_net_mode mode);
/* Host patterns: "pypi.org", "*.pythonhosted.org", optional ":PORT"
 * (default ports 80 and 443). Deny wins over allow. */
BRIG_PUBLIC int brig_policy_allow_host(brig_policy *p, const char *pattern, brig_error **err);
/* The same allow rule, and the names it allows may resolve to private
 * addresses (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, CGNAT
 * 100.64/10) — for these names only; loopback, link-local and cloud
 * metadata stay refused whatever they resolve to. */
BRIG_PUBLIC int brig_policy_allow_private_host(brig_policy *p, const char *pattern, brig_error **err);
BRIG_PUBLIC int brig_policy_deny_host(brig_policy *p, const char *pattern, brig_error **err);
/* "10.1.0.0/16" or "10.1.2.3/32:5432": addresses the classification would
 * refuse (private, loopback, link-local...) that this policy allows. */
BRIG_PUBLIC int brig_policy_allow_cidr(brig_policy *p, const char *cidr_port, brig_error **err);
/* A pathname unix socket outside the sandbox (absolute path as seen
 * inside, no symlinks, no "..") that the sandbox may connect or send to;
 * every other socket whose listener is not the sandbox's own is refused. */
BRIG_PUBLIC int brig_policy_allow_unix(brig_policy *p, const char *path, brig_error **err);
/* "HOST:ADDR": resolve HOST to ADDR without DNS (like curl --resolve). */
BRIG_PUBLIC int brig_policy_add_resolve(brig_policy *p, const char *host_addr, brig_error **err);
/* "http://HOST:PORT": reach allowed destinations through this HTTP proxy
 * (CONNECT tunnels) instead of directly; brig still judges every request.
 * No credentials in the URL. Setting it again replaces it. */
BRIG_PUBLIC int brig_policy_set_upstream_proxy(brig_policy *p, const char *url, brig_error **err);
/* Scoped credentials (docs/secrets.md): "NAME=@FILE" or "NAME=env:VAR",
 * read when the run starts; inside, $NAME holds a placeholder that the
 * proxy swaps for the value only in requests to a bound host over TLS it
 * verified. */
BRIG_PUBLIC int brig_policy_add_secret(brig_policy *p, const char *spec, brig_error **err);
/* "NAME=PATTERN": a host the secret may go to (patterns as in allow rules). */
BRIG_PUBLIC int brig_policy_secret_host(brig_policy *p, const char *spec, brig_error **err);
/* "NAME=HEADER": the header it goes in (Authorization by default). */
BRIG_PUBLIC int brig_policy_secret_header(brig_policy *p, const char *spec, brig_error **err);
/* A PEM file of CAs trusted for upstreams besides the host's store. */
BRIG_PUBLIC int brig_policy_add_upstream_ca(brig_policy *p, const char *path, brig_error **err);
/* "HOST METHOD[,METHOD] [PATH[,PATH]]": the only requests HOST takes. */
BRIG_PUBLIC int brig_policy_add_http_rule(brig_policy *p, const char *rule, brig_error **err);

/* The tools agents use (docs/tools.md). A host file copied in at start
 * for the sandbox user: read by brig (a regular file, no symlink in the
 * path, at most 1 MiB), mode 0400 in brig's own tmpfs inside, with a
 * symlink to it at DST, which must lie in one of the sandbox's tmpfs
 * mounts ($HOME, /tmp, --tmpfs). Both may start with "~/" (SRC: the
 * caller's home; DST: the sandbox's $HOME). A SRC on the secret deny
 * list needs BRIG_COPY_IN_SECRET. */
enum brig_copy_in_flags {
        BRIG_COPY_IN_SECRET = 1 << 0,
};
BRIG_PUBLIC int brig_policy_add_copy_in(brig_policy *p, const char *src, const char *dst, unsigned flags,
                                        brig_error **err);
/* Relay the host's ssh-agent ($SSH_AUTH_SOCK) to the sandbox: listing
 * keys and signing only; adding, removing, locking and extensions are
 * answered with failure by brig. */
BRIG_PUBLIC int brig_policy_set_ssh_agent(brig_policy *p, bool on, brig_error **err);
/* A ~/.gitconfig inside with user.name and user.email of the host's. */
BRIG_PUBLIC int brig_policy_set_git_identity(brig_policy *p, bool on, brig_error **err);
/* "npm" or "pip": the host's ~/.npmrc or pip.conf inside, keys on an
 * allow list only (registries, TLS, timeouts; never tokens or passwords). */
BRIG_PUBLIC int brig_policy_carry_config(brig_policy *p, const char *tool, brig_error **err);

/* Policy files (docs/policy.md): apply FILE on top of p. On any error,
 * which names file:line:column, p is left exactly as it was. */
BRIG_PUBLIC int brig_policy_load_file(brig_policy *p, const char *path, brig_error **err);
/* The same from a string; `name` is used in messages. */
BRIG_PUBLIC int brig_policy_load_string(brig_policy *p, const char *name, const char *json, brig_error **err);
/* Apply a built-in profile: default, strict, build, browser. */
BRIG_PUBLIC int brig_policy_apply_profile(brig_policy *p, const char *profile, brig_error **err);
/* NULL-terminated names of the built-in profiles (static storage). */
BRIG_PUBLIC const char *const *brig_profile_names(void);
/* The effective policy as JSON that loads back to the same policy (free()). */
BRIG_PUBLIC char *brig_policy_to_json(const brig_policy *p, brig_error **err);
/* In plain words: what a run with this policy can and cannot do (free()). */
BRIG_PUBLIC char *brig_policy_explain(const brig_policy *p, brig_error **err);

/* Write the audit stream (JSON lines: start, every refused or logged
 * syscall, end; docs/audit.md) to this file during the run. */
BRIG_PUBLIC int brig_policy_set_audit_path(brig_policy *p, const char *path, brig_error **err);
/* Write what replays this run to PATH when it ends (docs/audit.md#replay):
 * the effective policy, argv, env, cwd, the workspace tree's hash at start,
 * the system's versions, and the outcome brig replay compares. */
BRIG_PUBLIC int brig_policy_set_manifest_path(brig_policy *p, const char *path, brig_error **err);
/* The SHA-256 of a directory tree as brig replay compares it (files'
 * content, modes, symlinks' targets, directories; nothing followed), and
 * its number of entries. */
BRIG_PUBLIC int brig_tree_hash(const char *dir, char sha256[65], uint64_t *entries, brig_error **err);
/* No exec and exit events in the audit stream (docs/audit.md#exec-events). */
BRIG_PUBLIC void brig_policy_set_audit_no_exec(brig_policy *p, bool on);
/* Stamp each step of the run (brig run --timings): brig_result.timings
 * and the report's "timings" say where the start-up time went. */
BRIG_PUBLIC void brig_policy_set_timings(brig_policy *p, bool on);
/* The caller exits as soon as brig_run_in_process returns (brig run):
 * the run returns once the command's status, report and audit stream are
 * final, every process of the sandbox but its pid 1 killed and reaped,
 * and leaves pid 1's end and the cgroups' removal to a helper that
 * outlives the caller (docs/api.md). A caller that lives on must not set
 * it: pid 1 and the helper stay its unreaped children. */
BRIG_PUBLIC void brig_policy_set_exit_after_run(brig_policy *p, bool on);

/* Called at the start of a run, once per control that runs weaker than the
 * policy asks (cgroup limits on rlimits, Landlock or seccomp missing under
 * --allow-degraded), with one line that names the fix; a CLI prints each
 * on stderr. Also once the run is over, for audit lines that were lost
 * (--audit-fd: a reader that closed, or did not keep up). The report's "degraded" says the same. Not kept by a
 * persistent sandbox (brig_sandbox_list_json has them as "warnings"). */
typedef void (*brig_notice_fn)(const char *line, void *data);
BRIG_PUBLIC void brig_policy_set_notice(brig_policy *p, brig_notice_fn fn, void *data);

/* Write a JSON run report to this file when the run ends. */
BRIG_PUBLIC int brig_policy_set_report_path(brig_policy *p, const char *path, brig_error **err);

/* The same two outputs written to a descriptor the caller holds open for
 * writing (a pipe a harness reads, 3 and up), instead of a file. brig's
 * supervisor writes through its own copy; the sandbox never sees it (it is
 * closed before the command runs, like every descriptor not passed with
 * --pass-fd). Each replaces a path set for the same output, and back. */
BRIG_PUBLIC int brig_policy_set_report_fd(brig_policy *p, int fd, brig_error **err);
BRIG_PUBLIC int brig_policy_set_audit_fd(brig_policy *p, int fd, brig_error **err);

/* ---- The settings, as a table ------------------------------------------ */

/* Every policy setting has one descriptor in libbrig, which the command
 * line, policy files, their schema and `brig policy explain` all follow
 * (docs/policy.md, "Adding a setting"). A front end lists the flags with
 * brig_policy_option_info and applies one as the command line does with
 * brig_policy_set_option: the same parsing and the same messages. */
enum brig_option_flags {
        BRIG_OPTION_FIRST = 1 << 0,     /* --policy, --profile: applied before every other flag, in order */
        BRIG_OPTION_RUN_ONLY = 1 << 1,  /* brig run's alone (the caller's descriptors, the audit stream):
                                         * brig create and brig pool refuse it */
};
typedef struct brig_option_info {
        uint32_t size;        /* sizeof(brig_option_info), set by the caller (fields are only ever added) */
        const char *name;     /* "memory": the flag --memory */
        const char *arg;      /* "SIZE" in --help; NULL: the flag takes no value */
        const char *help;     /* its --help text ('\n' continues it); NULL: listed on the line of the flag before */
        const char *section;  /* the --help heading it is listed under */
        const char *key;      /* where a policy file holds it, a JSON pointer: "/limits/memory"; NULL: the
                               * command line only */
        unsigned flags;       /* enum brig_option_flags */
} brig_option_info;
/* Fill *info with the I-th flag (from 0): 0, or -ENOENT after the last;
 * -EINVAL for a size smaller than the first release's struct, -E2BIG for
 * one over 4096. A larger struct (a newer caller's) gets its tail zeroed. */
BRIG_PUBLIC int brig_policy_option_info(size_t i, brig_option_info *info);
/* Apply flag NAME ("memory", without the dashes) with VALUE (NULL for a
 * flag without one) as brig run does: the error names the flag. A flag
 * that weakens the sandbox (--net host, --unsafe-allow-secret) says so
 * through the policy's notice (brig_policy_set_notice) when set. */
BRIG_PUBLIC int brig_policy_set_option(brig_policy *p, const char *name, const char *value, brig_error **err);
/* The JSON schema of policy files (docs/policy.schema.json), from the
 * same table (free()); NULL when out of memory. */
BRIG_PUBLIC char *brig_policy_schema(void);

/* ---- Running ----------------------------------------------------------- */

enum brig_reason {
        BRIG_REASON_EXITED = 0,
        BRIG_REASON_SIGNALED,
        BRIG_REASON_TIMEOUT,
        BRIG_REASON_OOM,
        BRIG_REASON_PIDS,
        BRIG_REASON_SECCOMP,
        BRIG_REASON_DETACHED,   /* brig exec --detach: started, not waited for */
};
BRIG_PUBLIC const char *brig_reason_name(enum brig_reason r);

typedef struct brig_result {
        int exit_code;          /* what a CLI should exit with (DESIGN.md §4) */
        int signal;             /* the signal that killed the command, or 0 */
        enum brig_reason reason;
        uint64_t duration_ms;
        uint64_t cpu_user_ms, cpu_system_ms;
        int64_t memory_peak_bytes;  /* -1 when unknown */
        int64_t pids_peak;          /* -1 when unknown */
        /* One human sentence when reason is not "exited" ("memory limit
         * 512 MiB reached"), else empty. */
        char summary[160];
        /* What ran weaker than the policy asked, in words that name the
         * fix ("memory: ... not bounded — no memory cgroup here ..."), or
         * empty; the report's "degraded" has it too. A CLI prints it. */
        char warning[512];
        /* Connections to pathname unix sockets outside the sandbox that
         * were refused (docs/security.md), and the first one's path. */
        uint64_t unix_refused;
        char unix_refused_path[112];
        /* What brig refused during the run — connections, DNS names,
         * system calls, unix sockets, limits — one line per distinct cause
         * naming what, why and the flag that would allow it, each ending
         * in '\n', capped (a last line says how many more); empty when
         * nothing was refused. The text may hold names the sandbox chose:
         * print it as text. The report's "refusals" has the same. */
        char refusals[2048];
        /* brig exec --detach: the command's pid inside the sandbox and the
         * file inside that holds its output (reason BRIG_REASON_DETACHED). */
        int detached_pid;
        char detached_log[64];
        /* brig_policy_set_timings: one line per step of the run, "  name
         * N.NNN ms", and a total; empty otherwise. */
        char timings[2048];
} brig_result;

/* Run argv[0] (looked up in the sandbox's PATH) inside a new sandbox built
 * from the policy, wait for it, and fill *result. Returns 0 when the
 * command ran (whatever its status), a negative errno when brig could not
 * set the sandbox up or the command could not be executed; then *err says
 * which step failed and err->exit_code is 125, 126 or 127. */
BRIG_PUBLIC int brig_run(const brig_policy *p, char *const argv[], brig_result *result, brig_error **err);
/* brig_run is an ephemeral sandbox and one exec through the handles
 * below (docs/api.md): it changes nothing process-wide, forks nothing of
 * the caller's, and its sandbox is gone when it returns or the caller
 * dies. The command gets fds 0, 1, 2 as they are (a terminal among them
 * behind brig's output filter), never a pty; signals to the caller are
 * not forwarded (the caller's death ends the command); the report
 * (--json-report) is the exec's, the audit stream is copied out at the
 * end. --pass-fd and BRIG_TTY_ALWAYS are refused (-EINVAL).
 *
 * brig_run_in_process is the run sequence with its supervisor in this
 * process, as `brig run` runs it (faster: no supervisor program, no
 * control socket; bench/startup): everything above, and pass-fd, a pty,
 * signals forwarded, the full run report. While it runs it blocks the
 * signals it forwards (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2,
 * SIGWINCH, SIGCHLD) and raises RLIMIT_NOFILE to its hard limit for the
 * proxy, and restores both: for a program that runs one command, not for
 * a front end. */
BRIG_PUBLIC int brig_run_in_process(const brig_policy *p, char *const argv[], brig_result *result,
                                    brig_error **err);

/* ---- Persistent sandboxes (docs/persistent.md) ------------------------- */

/* Names: [A-Za-z0-9][A-Za-z0-9_.-]{0,63}. State lives in
 * $XDG_RUNTIME_DIR/brig/NAME (root: /run/brig/NAME; a user without
 * XDG_RUNTIME_DIR: /tmp/brig-UID/NAME). Every function returns 0 or a
 * negative errno with *err filled (exit_code 125 for brig's own errors). */

enum brig_workspace_mode {
        BRIG_WORKSPACE_BIND = 0,   /* the workspace itself, read-write */
        BRIG_WORKSPACE_OVERLAY,    /* a copy-on-write layer over it: diff, commit, reset */
};

typedef struct brig_create_opts {
        enum brig_workspace_mode workspace_mode;
} brig_create_opts;

/* Start a sandbox that lives on (its supervisor detaches from the caller)
 * and wait until it is ready for execs. The policy's command-independent
 * parts apply: filesystem, network, limits (--timeout applies to each
 * exec). -EEXIST when the name is taken. This forks. */
BRIG_PUBLIC int brig_sandbox_create(const char *name, const brig_policy *p, const brig_create_opts *opts,
                                    brig_error **err);

typedef struct brig_exec_opts {
        char *const *argv;         /* the command, looked up in the sandbox's PATH */
        char *const *env;          /* NAME=VALUE on top of the sandbox's environment; NULL-terminated, or NULL */
        const char *cwd;           /* absolute path inside; NULL: the sandbox's default */
        enum brig_tty_mode tty;
        bool terminal_passthrough; /* see brig_policy_set_terminal_passthrough */
        uint64_t timeout_ms;       /* 0: the sandbox's --timeout (none by default) */
        const char *report_path;   /* a JSON report of this exec (docs/persistent.md), or NULL */
        /* Start it and return once it runs: no stdio of the caller's, its
         * output in a log inside the sandbox (result: detached_pid,
         * detached_log); it lives until it exits or the sandbox stops. */
        bool detach;
        /* Stamp the exec's steps (brig exec --timings): result.timings, one
         * "  step  N ms" line each. */
        bool timings;
} brig_exec_opts;

/* Run a command in a live sandbox with the caller's stdio (or a pty) and
 * fill *result as brig_run does (exit code, signal, timeout 124). */
BRIG_PUBLIC int brig_sandbox_exec(const char *name, const brig_exec_opts *opts, brig_result *result,
                                  brig_error **err);
/* The end of a brig_sandbox_exec that another process began: the brig
 * command's front end (docs/benchmarks.md) runs the common `brig exec
 * NAME -- COMMAND` itself, and hands the rare end it does not print
 * itself (a signal, a timeout, refusals, an error) to brig's engine as
 * the supervisor's last message, the one message on the SOCK_SEQPACKET
 * socket fd (none: the connection ended first). Fills *result and *err as
 * brig_sandbox_exec would have; runs nothing. */
BRIG_PUBLIC int brig_sandbox_exec_outcome(const char *name, int fd, brig_result *result, brig_error **err);
/* The variable the front end names that descriptor in, as it starts the
 * engine's `brig exec` with the command line it was given. */
#define BRIG_EXEC_OUTCOME_ENV "BRIG_EXEC_OUTCOME_FD"
/* SIGTERM everything inside, SIGKILL after the grace; the state (overlay
 * layer included) stays until brig_sandbox_remove. */
BRIG_PUBLIC int brig_sandbox_stop(const char *name, brig_error **err);
/* Start a stopped (or dead) sandbox again with the policy it was created
 * with; its overlay layer is kept, $HOME and /tmp start empty. */
BRIG_PUBLIC int brig_sandbox_start(const char *name, brig_error **err);
/* The same, and *described (free it) gets what policy the start runs, in
 * two lines for a person: network mode and rules, workspace and its mode,
 * limits. Set once the stored policy is read, also when the launch fails. */
BRIG_PUBLIC int brig_sandbox_start_described(const char *name, char **described, brig_error **err);
/* The same two lines for a sandbox's stored policy, without starting it
 * (restore and fork run it again); NULL on error. Free it. */
BRIG_PUBLIC char *brig_sandbox_describe(const char *name, brig_error **err);
/* Stop if needed, then remove every trace: processes, cgroups, state. */
BRIG_PUBLIC int brig_sandbox_remove(const char *name, brig_error **err);
/* Freeze / thaw every process inside (cgroup v2 freezer). */
BRIG_PUBLIC int brig_sandbox_pause(const char *name, brig_error **err);
BRIG_PUBLIC int brig_sandbox_resume(const char *name, brig_error **err);
/* What the sandbox changed, as a JSON array (free()) of {path, change:
 * added|modified|deleted, type: file|dir|symlink|special, mode}. Overlay
 * mode: what the layer changes. Bind mode: what changed in the workspace
 * and writable binds since create (paths in a bind absolute), each entry
 * with size and a regular file's sha256; -E2BIG when the walk could not
 * be made whole (--changes-max, docs/audit.md#the-walks-limits). */
BRIG_PUBLIC char *brig_sandbox_diff_json(const char *name, brig_error **err);
/* Apply the layer's changes to the real workspace, each file atomically
 * (temporary file + rename in its directory). A path also changed on the
 * host since create is a conflict: then nothing is applied, -EBUSY, and
 * *err lists every conflict. *applied_json (may be NULL) gets what was
 * applied. The layer stays (the sandbox's view does not change). */
BRIG_PUBLIC int brig_sandbox_commit(const char *name, char **applied_json, brig_error **err);
/* Which of the layer's changes diff and commit take. paths: files or
 * directories in the workspace (relative to it, or absolute below it; no
 * '..'), NULL-terminated, or NULL for all; a directory selects everything
 * below it. excludes: patterns (fnmatch) a change must not match — one
 * without '/' matches any path component ("node_modules", "*.log"), one
 * with '/' (or a leading '/') the path from the workspace down
 * ("/build", "src/gen"); a match excludes everything below it too. Commit
 * also applies the directories a selected change needs that the sandbox
 * created, and checks the conflicts of exactly what it applies. */
typedef struct brig_change_filter {
        const char *const *paths;
        const char *const *excludes;
} brig_change_filter;
BRIG_PUBLIC char *brig_sandbox_diff_filtered_json(const char *name, const brig_change_filter *filter,
                                                  brig_error **err);
BRIG_PUBLIC int brig_sandbox_commit_filtered(const char *name, const brig_change_filter *filter, char **applied_json,
                                             brig_error **err);
/* Throw the layer away (the sandbox must be stopped). */
BRIG_PUBLIC int brig_sandbox_reset(const char *name, brig_error **err);
/* Save the writable state under TAG (letters, digits, _ . -): the overlay
 * layer, and $HOME and /tmp of a running sandbox. Whole or nothing. */
BRIG_PUBLIC int brig_sandbox_snapshot(const char *name, const char *tag, brig_error **err);
/* Return to TAG: the sandbox is stopped, its layer replaced, started again
 * and $HOME and /tmp put back; processes of the moment are not. */
BRIG_PUBLIC int brig_sandbox_restore(const char *name, const char *tag, brig_error **err);
/* NAME's snapshots as a JSON array (free()) of {tag, created, home, overlay, frozen}. */
BRIG_PUBLIC char *brig_sandbox_snapshots_json(const char *name, brig_error **err);
BRIG_PUBLIC int brig_sandbox_snapshot_remove(const char *name, const char *tag, brig_error **err);
/* Start NEW_NAME with NAME's policy and the state saved as TAG. */
BRIG_PUBLIC int brig_sandbox_fork(const char *name, const char *tag, const char *new_name, brig_error **err);
/* Warm pool: keep `size` sandboxes ready for this policy and workspace
 * (a detached daemon); returns once they are all ready. */
BRIG_PUBLIC int brig_pool_start(const brig_policy *p, unsigned size, brig_error **err);
BRIG_PUBLIC int brig_pool_stop(const brig_policy *p, brig_error **err);
/* The same with a name (letters, digits, _ . -) that brig_run_in_pool
 * finds it by; -EEXIST when a live pool has it. NULL: brig_pool_start.
 * A pool of this policy and workspace that runs already keeps its size
 * and gets the name too (brig_pool_list_json shows its names). */
BRIG_PUBLIC int brig_pool_start_named(const brig_policy *p, unsigned size, const char *name, brig_error **err);
/* End the pool NAME gives; 1 when another name gives it too: then only
 * NAME is removed, and the pool runs on until its last name is stopped. */
BRIG_PUBLIC int brig_pool_stop_named(const char *name, brig_error **err);
/* The caller's running pools as a JSON array (free()): key, names, size,
 * ready (members waiting for a run), in_use (claimed by a run now),
 * daemon_pid, workspace, failing (why its last member could not be
 * made, or null). */
BRIG_PUBLIC char *brig_pool_list_json(brig_error **err);
/* End every pool of the caller's (its daemon, its members, its names);
 * *stopped says how many. */
BRIG_PUBLIC int brig_pool_stop_all(unsigned *stopped, brig_error **err);
/* One run in a member of the pool named NAME, as the pool made it: its
 * policy, workspace and environment, with o's command, cwd, env, tty,
 * timeout and report (no detach), as brig_sandbox_exec runs it. No
 * policy is read: the caller chose the pool by its name. Waits up to 30 s
 * for a ready member; -ENOENT when no pool has the name, -ESRCH when its
 * daemon is gone. The member serves this run only, then goes. */
BRIG_PUBLIC int brig_run_in_pool(const char *name, const brig_exec_opts *o, brig_result *result, brig_error **err);
/* brig_run through a ready pooled sandbox of the same policy and workspace
 * (used once, then replaced); a plain brig_run when there is none.
 * *pooled says which. */
BRIG_PUBLIC int brig_run_pooled(const brig_policy *p, char *const argv[], brig_result *result, bool *pooled,
                                brig_error **err);
/* The same; `why` (why_size bytes; may be NULL) gets why the pool did not
 * serve it, or "". The report (--json-report, -fd) says the same in
 * "pool". */
BRIG_PUBLIC int brig_run_pooled_why(const brig_policy *p, char *const argv[], brig_result *result, bool *pooled,
                                    char *why, size_t why_size, brig_error **err);
/* The caller's sandboxes as a JSON array (free()): name, status
 * (creating, running, paused, stopping, stopped, dead), supervisor pid,
 * created, workspace, workspace_mode, net. */
BRIG_PUBLIC char *brig_sandbox_list_json(brig_error **err);

/* ---- Handles: libbrig as an engine (docs/api.md) ------------------------ */

/* For a front end that drives many sandboxes and commands from one poll
 * loop. None of these calls changes process-wide state (signal mask or
 * dispositions, rlimits, cwd, umask, stdio) or forks the caller; every
 * descriptor they open is O_CLOEXEC; distinct handles may be used from
 * distinct threads. A handle that is not live (closed, or never made) is
 * refused with -EBADF. Option structs begin with their size: set it to
 * sizeof the struct; a size below the first version is -EINVAL, one
 * larger than this library knows is taken when the unknown tail is zero,
 * else -E2BIG. */

typedef struct brig_sandbox brig_sandbox;
typedef struct brig_exec brig_exec;

enum brig_sandbox_flags {
        BRIG_SANDBOX_EPHEMERAL = 1 << 0,  /* removed by brig_sandbox_close, or when this process ends */
        BRIG_SANDBOX_AUDIT = 1 << 1,      /* keep its audit stream (brig_sandbox_audit_fd) */
        /* removed when this process ends, however it ends (its supervisor
         * watches it); unlike EPHEMERAL it outlives brig_sandbox_close and
         * brig_sandbox_stop, and a start or restore watches the same process */
        BRIG_SANDBOX_OWNED = 1 << 2,
};

typedef struct brig_sandbox_opts {
        uint32_t size;            /* sizeof(brig_sandbox_opts) */
        uint32_t flags;           /* enum brig_sandbox_flags */
        const char *name;         /* NULL: a new name ("brig-PID-N"); brig_sandbox_name says which */
        enum brig_workspace_mode workspace_mode;
} brig_sandbox_opts;

/* Create a sandbox (as brig_sandbox_create) and return its handle. */
BRIG_PUBLIC int brig_sandbox_new(const brig_policy *p, const brig_sandbox_opts *opts, brig_sandbox **ret,
                                 brig_error **err);
/* A handle on an existing, running sandbox (made by anyone, any process). */
BRIG_PUBLIC int brig_sandbox_open(const char *name, brig_sandbox **ret, brig_error **err);
/* Its name (storage of the handle); NULL for a dead handle. */
BRIG_PUBLIC const char *brig_sandbox_name(const brig_sandbox *sb);
/* A new read-only descriptor on its audit stream (JSON lines, docs/audit.md)
 * from the start; the caller closes it. -ENOENT without BRIG_SANDBOX_AUDIT. */
BRIG_PUBLIC int brig_sandbox_audit_fd(brig_sandbox *sb, brig_error **err);
/* The same by name, running or stopped (its stream stays in its state
 * directory until brig_sandbox_remove): brig log NAME. */
BRIG_PUBLIC int brig_sandbox_audit_fd_named(const char *name, brig_error **err);
/* Free the handle; an ephemeral sandbox is stopped and removed. Its execs
 * must be closed first (-EBUSY). */
BRIG_PUBLIC int brig_sandbox_close(brig_sandbox *sb, brig_error **err);

enum brig_stdio {
        BRIG_STDIO_FDS = 0,   /* the caller's descriptors fds[0..2], used by the command as they are */
        BRIG_STDIO_PIPES,     /* pipes brig makes; the caller's ends from brig_exec_stdio_fd */
        BRIG_STDIO_PTY,       /* a pty inside; its master from brig_exec_stdio_fd(x, 0) */
};

typedef struct brig_exec_spec {
        uint32_t size;            /* sizeof(brig_exec_spec) */
        uint32_t stdio;           /* enum brig_stdio */
        char *const *argv;        /* the command, looked up in the sandbox's PATH */
        char *const *env;         /* NAME=VALUE on top of the sandbox's environment, or NULL */
        const char *cwd;          /* absolute path inside; NULL: the sandbox's default */
        uint64_t timeout_ms;      /* 0: the sandbox's --timeout (none by default); then exit 124 */
        int fds[3];               /* BRIG_STDIO_FDS: stdin, stdout, stderr (the caller keeps its own) */
        uint16_t rows, cols;      /* BRIG_STDIO_PTY: the size at start (0: 24 x 80) */
        uint32_t flags;           /* enum brig_exec_flags; 0 for a libbrig older than them */
        int cancel_fd;            /* BRIG_EXEC_CANCEL_FD: see there; else leave it 0 (an older
                                   * libbrig refuses bytes past its own struct that are not 0) */
} brig_exec_spec;

enum brig_exec_flags {
        /* brig_pool_exec_start: while it waits for a ready member, a hang-up
         * of cancel_fd (POLLHUP or POLLRDHUP: the caller's client closed its
         * socket) ends the wait, -ECANCELED, with no member claimed and
         * nothing started; so does one while the member's supervisor has
         * not yet said it took the command (the connection's close makes
         * it drop the command). The caller keeps the descriptor, which
         * must be open (else -EBADF). */
        BRIG_EXEC_CANCEL_FD = 1 << 0,
};

/* Start a command; returns once it was handed to the sandbox. */
BRIG_PUBLIC int brig_exec_start(brig_sandbox *sb, const brig_exec_spec *spec, brig_exec **ret, brig_error **err);
/* Readable when the command has ended (or the exec failed): then
 * brig_exec_wait(x, BRIG_WAIT_NOHANG, ...) does not block. -EBADF for a
 * dead handle. Owned by the handle. */
BRIG_PUBLIC int brig_exec_fd(const brig_exec *x);
/* BRIG_STDIO_PIPES: 0 the command's stdin (write), 1 its stdout, 2 its
 * stderr (read), O_NONBLOCK; BRIG_STDIO_PTY: the master for 0 and 1.
 * Owned by the handle; -1 when there is none. */
BRIG_PUBLIC int brig_exec_stdio_fd(const brig_exec *x, int which);
/* Close the command's stdin (pipes or pty: end of file for it). */
BRIG_PUBLIC int brig_exec_close_stdin(brig_exec *x, brig_error **err);
BRIG_PUBLIC int brig_exec_resize(brig_exec *x, unsigned rows, unsigned cols, brig_error **err);
/* Send signal sig (1..64) to the command. -ESRCH once it has ended. */
BRIG_PUBLIC int brig_exec_kill(brig_exec *x, int sig, brig_error **err);
enum brig_wait_flags {
        BRIG_WAIT_NOHANG = 1 << 0,
};
/* The result, as brig_sandbox_exec gives it. 0 with *res filled;
 * -EAGAIN (NOHANG) while the command runs; -ECHILD after a result was
 * taken; another negative errno when the exec failed (*err says why,
 * res->exit_code 125/126/127). */
BRIG_PUBLIC int brig_exec_wait(brig_exec *x, unsigned flags, brig_result *res, brig_error **err);
/* The exec's JSON report (as brig exec --json-report writes it) once
 * waited for; free() it. */
BRIG_PUBLIC char *brig_exec_report_json(const brig_exec *x, brig_error **err);
/* Free the handle and its descriptors; a command still running is killed. */
BRIG_PUBLIC void brig_exec_close(brig_exec *x);
/* The one run of a member of the warm pool named NAME (brig pool --name
 * NAME, brig_pool_start_named), as a handle: a ready member is claimed as
 * brig_run_in_pool claims it (waiting up to 30 s for one; -ENOENT when no
 * pool has the name, -ESRCH when its daemon is gone, -ETIMEDOUT when none
 * became ready), and spec's command starts in it with the member as the
 * pool made it: the pool's policy and environment, spec's argv, env, cwd,
 * timeout and stdio. A member that refuses the run before it starts
 * (stopping, or its workspace moved away since it was made) is dropped
 * and the next taken. *sb is a handle on the member (brig_sandbox_close it
 * after brig_exec_close), *ret the exec's, as brig_exec_start gives it.
 * The member takes no other exec and stops once the command has ended;
 * its processes go with it. */
BRIG_PUBLIC int brig_pool_exec_start(const char *name, const brig_exec_spec *spec, brig_sandbox **sb,
                                     brig_exec **ret, brig_error **err);

/* File operations as the sandbox sees them (docs/api.md): each one runs
 * inside, forked by the sandbox's pid 1 as an exec is and as confined
 * (the sandbox user, its mounts, Landlock, seccomp, cgroup), so a path or
 * a symlink planted inside resolves in the sandbox's view only. */
enum brig_file_op {
        BRIG_FILE_READ = 1,   /* a regular file's bytes to fd (at most max_bytes) */
        BRIG_FILE_WRITE,      /* fd's bytes to the file: a new file renamed over the name */
        BRIG_FILE_LIST,       /* a directory's entries to fd, as a JSON array */
        BRIG_FILE_STAT,       /* the path itself (a link is not followed), JSON to fd */
        BRIG_FILE_MKDIR,      /* one directory (its parent must exist) */
        BRIG_FILE_REMOVE,     /* a file, a link, or an empty directory */
        BRIG_FILE_TAR_OUT,    /* a directory as a tar stream to fd (the sandbox's tar) */
        BRIG_FILE_TAR_IN,     /* a tar stream from fd unpacked into a directory (the sandbox's tar) */
};

typedef struct brig_file_spec {
        uint32_t size;            /* sizeof(brig_file_spec) */
        uint32_t op;              /* enum brig_file_op */
        const char *path;         /* absolute inside; no control characters */
        int fd;                   /* the data: read from (WRITE, TAR_IN) or written to (READ, TAR_OUT,
                                   * LIST, STAT); -1 for MKDIR and REMOVE */
        uint32_t mode;            /* WRITE, MKDIR: permission bits (0: 0644, 0755) */
        uint64_t max_bytes;       /* the cap, -EFBIG past it: READ, WRITE the file (0: 64 MiB);
                                   * TAR_OUT, TAR_IN the stream (0: 1 GiB) */
        uint64_t timeout_ms;      /* 0: 60 s; then -ETIMEDOUT */
} brig_file_spec;

/* Run one file operation. 0, or -errno with *err saying why: the errno the
 * sandbox got (-ENOENT, -EISDIR, -ELOOP, -EROFS, -EACCES ...), -EFBIG past
 * the cap, -EINVAL for a bad spec (exit code 125) or a FIFO, socket or
 * device where a regular file was asked for; a failed operation's error
 * has exit code 1. WRITE leaves nothing behind when it fails. */
BRIG_PUBLIC int brig_sandbox_file(brig_sandbox *sb, const brig_file_spec *spec, brig_error **err);
/* The same without blocking, for a poll loop: start the operation; its
 * handle is an exec handle whose brig_exec_fd becomes readable when the
 * operation is done; brig_file_wait (BRIG_WAIT_NOHANG: -EAGAIN while it
 * runs) returns what brig_sandbox_file would; brig_exec_kill stops it,
 * brig_exec_close frees it. brig_exec_wait is refused for it (-EINVAL),
 * and brig_file_wait for a command's handle. */
BRIG_PUBLIC int brig_file_start(brig_sandbox *sb, const brig_file_spec *spec, brig_exec **ret, brig_error **err);
BRIG_PUBLIC int brig_file_wait(brig_exec *x, unsigned flags, brig_error **err);

/* Egress rules of a running sandbox, changed live (docs/api.md): an allow
 * or deny host rule, as brig_policy_allow_host / _deny_host take it
 * ("pypi.org", "*.example.org:8443"), added — or with BRIG_NET_RULE_REMOVE
 * taken out again (-ENOENT when there is no such rule) — for every new
 * connection and DNS query from now on; connections already open stay.
 * Each change is an event in the sandbox's audit stream ("net_rule").
 * Only a sandbox whose network runs through brig's proxy (mode proxy or
 * filtered) has rules to change: -EOPNOTSUPP otherwise. The rules last
 * while the sandbox runs; a start (or restore) runs the stored policy. */
enum brig_net_rule {
        BRIG_NET_RULE_ALLOW_HOST = 1,
        BRIG_NET_RULE_DENY_HOST,
};
enum brig_net_rule_flags {
        BRIG_NET_RULE_REMOVE = 1 << 0,
};
BRIG_PUBLIC int brig_sandbox_net_rule(brig_sandbox *sb, unsigned rule, const char *pattern, unsigned flags,
                                      brig_error **err);
/* A cgroup limit of a running sandbox, changed live (docs/api.md):
 * BRIG_LIMIT_MEMORY (bytes, at least 1M), _PIDS or _CPUS_MILLI, a value
 * above 0, tighter or looser. The supervisor writes its cgroup; processes
 * over a new memory or pids limit meet it at their next allocation or
 * fork (a cut below what is in use: the kernel reclaims, then OOM-kills
 * on v2; v1 refuses the write, EBUSY). -EOPNOTSUPP where no cgroup of the
 * sandbox enforces that limit (rlimits stand in, or nothing). An event
 * in the audit stream ("limit_change"); the stored policy is unchanged. */
BRIG_PUBLIC int brig_sandbox_set_limit(brig_sandbox *sb, enum brig_limit which, uint64_t value, brig_error **err);
/* A limit as the policy holds it (0: none). */
BRIG_PUBLIC uint64_t brig_policy_get_limit(const brig_policy *p, enum brig_limit which);
/* The rules in force now as JSON (free()): {"mode", "allow_hosts",
 * "deny_hosts", "allow_cidrs", "resolve", ...} as the report has them. */
BRIG_PUBLIC char *brig_sandbox_net_json(brig_sandbox *sb, brig_error **err);

/* ---- Reading an audit stream (docs/audit.md) --------------------------- */

typedef struct brig_audit_verdict {
        uint32_t size;            /* sizeof(brig_audit_verdict), set by the caller */
        uint64_t lines;           /* lines read */
        uint64_t bad_line;        /* the first line where it was altered; 0: intact */
        bool ended;               /* an end event closes it */
        uint64_t streams;         /* runs in it (--audit FILE appends one stream per run) */
        char sha256[65];          /* the last stream's SHA-256, hex (that run's report's audit.sha256) */
        char what[512];           /* where and how it was altered, in words; "" intact */
} brig_audit_verdict;
/* Check the hash chain of a whole stream: 0 when intact, -EBADMSG when it
 * was altered (v says where: a line changed, removed, reordered, added
 * after the end, or the stream cut short), -EINVAL, -ENOMEM. The end line
 * itself is held only by its hash elsewhere: compare v->sha256 with the
 * run report's audit.sha256. */
BRIG_PUBLIC int brig_audit_verify(const char *buf, size_t len, brig_audit_verdict *v);

/* A reader making the timeline: each line in words, and a summary. */
typedef struct brig_audit_reader brig_audit_reader;
enum brig_audit_flags {
        BRIG_AUDIT_COLOUR = 1 << 0,   /* ANSI colours (a terminal) */
        BRIG_AUDIT_DENIED = 1 << 1,   /* only what was refused */
};
/* only: a comma list of kinds shown (start, exec, net, syscall, files,
 * limit, approval, end), NULL for all; -EINVAL names the bad one. */
BRIG_PUBLIC int brig_audit_reader_new(unsigned flags, const char *only, brig_audit_reader **ret, brig_error **err);
/* One line of the stream: *text (the caller frees; NULL when filtered
 * out) is the event in words, every string of the stream with its control
 * characters shown as \xNN. -EBADMSG: not an event (still counted). */
BRIG_PUBLIC int brig_audit_reader_line(brig_audit_reader *r, const char *line, size_t len, char **text);
/* What the lines read so far add up to, in one line a model can take as
 * context ("ran 14 programs (...); 2 connections refused: evil.example:443
 * (not allowed); ..."); the caller frees it. NULL: out of memory. */
BRIG_PUBLIC char *brig_audit_reader_summary(const brig_audit_reader *r);
BRIG_PUBLIC void brig_audit_reader_free(brig_audit_reader *r);

/* ---- Host probe -------------------------------------------------------- */

/* Probe the host and return a JSON document (caller frees with free()).
 * *ok is set to false when brig run's defaults cannot be honoured. */
BRIG_PUBLIC char *brig_doctor_json(bool *ok, brig_error **err);
/* The same as human-readable text. */
BRIG_PUBLIC char *brig_doctor_text(bool *ok, brig_error **err);

/* Parse "512M", "2G", "1.5G" (binary units, bytes when bare). */
BRIG_PUBLIC int brig_parse_size(const char *text, uint64_t *bytes, brig_error **err);

BRIG_PUBLIC const char *brig_version(void);

/* One of brig's own programs ("brig-supervisor", "brig-serve"), opened
 * O_PATH|O_CLOEXEC for fexecve: found where libbrig finds its supervisor
 * (beside the library or the program libbrig is linked into, then the
 * install's libexec/brig), never through PATH, and checked to be a
 * regular file owned by root or the caller in a directory nobody else may
 * write. *path (optional, free()) gets its path for messages. */
BRIG_PUBLIC int brig_program_open(const char *name, char **path, brig_error **err);

#ifdef __cplusplus
}
#endif
#endif
