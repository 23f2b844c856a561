/* run.c — `brig run [options] -- CMD [ARG...]`: flags become policy
 * calls; the library does the rest. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <unistd.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char run_usage[] =
        "usage: brig run [OPTIONS] -- COMMAND [ARG...]\n"
        "\n"
        "Policy (applied first, in order; every other flag wins over them):\n"
        "  --profile NAME           a built-in profile: default, strict, build, browser\n"
        "  --policy FILE            a JSON policy file (repeatable; later files win; also $BRIG_POLICY)\n"
        "Filesystem:\n"
        "  --workspace DIR          read-write workspace (default: current directory)\n"
        "  --read-only-workspace    mount the workspace read-only\n"
        "  --cwd DIR                start the command in DIR inside (default: the workspace)\n"
        "  --shm-size SIZE          size of /dev/shm (default 64M)\n"
        "  --ro-bind SRC[:DST]      bind a host path read-only\n"
        "  --bind SRC[:DST]         bind a host path read-write\n"
        "  --tmpfs DST[:SIZE]       an empty tmpfs (default size 64M)\n"
        "  --tmp-size SIZE          size of /tmp (default 512M)\n"
        "  --home-size SIZE         size of the empty $HOME (default 256M)\n"
        "  --sys                    mount a read-only /sys\n"
        "  --deny PATH              add a path to the secret deny list (~/ = every home)\n"
        "  --unsafe-allow-secret PATH  remove a built-in entry from the deny list\n"
        "Tools (docs/tools.md):\n"
        "  --copy-in SRC:DST        copy a host file in at start for the sandbox user (mode 0400; DST in\n"
        "                           $HOME (~/...), /tmp or a --tmpfs; never saved by a snapshot)\n"
        "  --copy-in-secret SRC:DST the same for a file on the secret deny list (a deploy key in ~/.ssh)\n"
        "  --ssh-agent              relay the host's $SSH_AUTH_SOCK: list keys and sign only\n"
        "  --git-identity           a ~/.gitconfig with the host's user.name and user.email\n"
        "  --carry-config npm|pip   the host's ~/.npmrc or pip.conf, keys on an allow list only (no tokens)\n"
        "Process:\n"
        "  --env NAME=VALUE         set a variable inside\n"
        "  --keep-env NAME          pass the caller's value of NAME\n"
        "  --pass-fd N              keep inherited fd N open inside\n"
        "  --hostname NAME          hostname inside (default brig)\n"
        "  --tty / --no-tty         force or forbid a pseudo-terminal (default: when stdin and stdout are terminals)\n"
        "  --terminal-passthrough   let the command's escape sequences reach the terminal unfiltered\n"
        "                           (clipboard OSC 52, titles, queries; dropped by default)\n"
        "Network (default none: only the sandbox's own loopback):\n"
        "  --net none|proxy|filtered|host\n"
        "                           proxy: brig's logging proxy reaches only what is allowed;\n"
        "                           filtered: the proxy, and every other TCP connection and DNS query\n"
        "                           sent to brig by the kernel (the default with allow rules; proxy\n"
        "                           where the host can't, unless asked for explicitly);\n"
        "                           host: the host's network, no control (loud warning)\n"
        "  --allow-host PATTERN     allow pypi.org, *.pythonhosted.org, host:port (turns on filtered)\n"
        "  --allow-private-host PATTERN  allow it as --allow-host does, and let its names resolve to\n"
        "                           private addresses (LAN, fc00::/7, 100.64/10; never loopback or metadata)\n"
        "  --deny-host PATTERN      deny (wins over allow)\n"
        "  --allow-cidr CIDR[:PORT] allow addresses the classification refuses (private, loopback...)\n"
        "  --resolve HOST:ADDR      resolve HOST to ADDR without DNS\n"
        "  --allow-unix PATH        let the sandbox reach this unix socket of the host, on a read-only\n"
        "                           grant (its own sockets always work; every other one is refused)\n"
        "  --upstream-proxy http://HOST:PORT  reach allowed hosts through this HTTP proxy (CONNECT)\n"
        "Limits (sizes take K/M/G/T, times take ms/s/m/h, e.g. 1h30m; 0 removes a limit):\n"
        "  --memory SIZE            memory, no swap (default 4G; cgroup)\n"
        "  --pids N                 processes and threads (default 1024; cgroup)\n"
        "  --cpus N                 CPU share in cores, e.g. 1.5 (cgroup)\n"
        "  --io-weight N            IO weight 1-10000 (cgroup, where present)\n"
        "  --timeout TIME           wall clock: SIGTERM to everything, exit 124\n"
        "  --kill-after TIME        SIGKILL this long after the timeout's SIGTERM (default 5s)\n"
        "  --cpu-time TIME          CPU time per process (RLIMIT_CPU)\n"
        "  --nofile N               open files per process (default 4096)\n"
        "  --nproc N  --fsize SIZE  --stack SIZE   more rlimits\n"
        "  --require-limits         refuse to run when cgroups cannot enforce the limits\n"
        "Syscalls and degradation:\n"
        "  --seccomp-allow NAME     allow a syscall or @group the default profile refuses\n"
        "  --seccomp-deny NAME[:ERRNO]  refuse a syscall or @group (default errno EPERM)\n"
        "  --seccomp-rule NAME[(COND,...)]=ACTION  ACTION: allow, kill, log, deny-log or errno:N;\n"
        "                           NAME: syscall or @group; COND: aN==V, !=, <, <=, >, >=, aN&MASK==V\n"
        "  --allow-degraded CONTROL run even if the host lacks landlock or seccomp (the report says so)\n"
        "Reporting:\n"
        "  --json-report FILE       write a JSON report of the run\n"
        "  --json-report-fd N       ... to descriptor N, open in brig for writing (a pipe; never the sandbox's)\n"
        "  --audit FILE             write every refused (or logged) syscall as JSON lines\n"
        "  --audit-fd N             ... to descriptor N (as --json-report-fd)\n"
        "  --quiet                  no end-of-run lines about what brig refused (the report keeps them)\n"
        "Warm pool:\n"
        "  --pooled                 run in a ready sandbox of brig pool (same options and workspace), if any\n";

enum {
        OPT_WORKSPACE = 256, OPT_RO_BIND, OPT_BIND, OPT_TMPFS, OPT_TMP_SIZE, OPT_HOME_SIZE, OPT_SYS,
        OPT_DENY, OPT_UNSAFE_ALLOW_SECRET, OPT_ENV, OPT_KEEP_ENV, OPT_PASS_FD, OPT_HOSTNAME, OPT_TTY,
        OPT_NO_TTY, OPT_TERMINAL_PASSTHROUGH, OPT_JSON_REPORT, OPT_SECCOMP_ALLOW, OPT_SECCOMP_DENY, OPT_ALLOW_DEGRADED,
        OPT_MEMORY, OPT_PIDS, OPT_CPUS, OPT_IO_WEIGHT, OPT_TIMEOUT, OPT_KILL_AFTER, OPT_CPU_TIME, OPT_NOFILE,
        OPT_NPROC, OPT_FSIZE, OPT_STACK, OPT_REQUIRE_LIMITS, OPT_AUDIT, OPT_SECCOMP_RULE,
        OPT_NET, OPT_ALLOW_HOST, OPT_DENY_HOST, OPT_ALLOW_CIDR, OPT_RESOLVE, OPT_UPSTREAM_PROXY, OPT_POLICY, OPT_PROFILE,
        OPT_WORKSPACE_READONLY, OPT_CWD, OPT_SHM_SIZE, OPT_ALLOW_UNIX, OPT_JSON_REPORT_FD, OPT_AUDIT_FD,
        OPT_ALLOW_PRIVATE_HOST, OPT_COPY_IN, OPT_COPY_IN_SECRET,
        OPT_SSH_AGENT, OPT_GIT_IDENTITY, OPT_CARRY_CONFIG,
};

static const struct option options[] = {
        { "workspace", required_argument, NULL, OPT_WORKSPACE },
        { "ro-bind", required_argument, NULL, OPT_RO_BIND },
        { "bind", required_argument, NULL, OPT_BIND },
        { "tmpfs", required_argument, NULL, OPT_TMPFS },
        { "tmp-size", required_argument, NULL, OPT_TMP_SIZE },
        { "home-size", required_argument, NULL, OPT_HOME_SIZE },
        { "sys", no_argument, NULL, OPT_SYS },
        { "deny", required_argument, NULL, OPT_DENY },
        { "unsafe-allow-secret", required_argument, NULL, OPT_UNSAFE_ALLOW_SECRET },
        { "env", required_argument, NULL, OPT_ENV },
        { "keep-env", required_argument, NULL, OPT_KEEP_ENV },
        { "pass-fd", required_argument, NULL, OPT_PASS_FD },
        { "hostname", required_argument, NULL, OPT_HOSTNAME },
        { "tty", no_argument, NULL, OPT_TTY },
        { "no-tty", no_argument, NULL, OPT_NO_TTY },
        { "terminal-passthrough", no_argument, NULL, OPT_TERMINAL_PASSTHROUGH },
        { "json-report", required_argument, NULL, OPT_JSON_REPORT },
        { "json-report-fd", required_argument, NULL, OPT_JSON_REPORT_FD },
        { "audit-fd", required_argument, NULL, OPT_AUDIT_FD },
        { "seccomp-allow", required_argument, NULL, OPT_SECCOMP_ALLOW },
        { "seccomp-deny", required_argument, NULL, OPT_SECCOMP_DENY },
        { "allow-degraded", required_argument, NULL, OPT_ALLOW_DEGRADED },
        { "memory", required_argument, NULL, OPT_MEMORY },
        { "pids", required_argument, NULL, OPT_PIDS },
        { "cpus", required_argument, NULL, OPT_CPUS },
        { "io-weight", required_argument, NULL, OPT_IO_WEIGHT },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "kill-after", required_argument, NULL, OPT_KILL_AFTER },
        { "cpu-time", required_argument, NULL, OPT_CPU_TIME },
        { "nofile", required_argument, NULL, OPT_NOFILE },
        { "nproc", required_argument, NULL, OPT_NPROC },
        { "fsize", required_argument, NULL, OPT_FSIZE },
        { "stack", required_argument, NULL, OPT_STACK },
        { "require-limits", no_argument, NULL, OPT_REQUIRE_LIMITS },
        { "audit", required_argument, NULL, OPT_AUDIT },
        { "seccomp-rule", required_argument, NULL, OPT_SECCOMP_RULE },
        { "net", required_argument, NULL, OPT_NET },
        { "allow-host", required_argument, NULL, OPT_ALLOW_HOST },
        { "allow-private-host", required_argument, NULL, OPT_ALLOW_PRIVATE_HOST },
        { "deny-host", required_argument, NULL, OPT_DENY_HOST },
        { "allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR },
        { "allow-unix", required_argument, NULL, OPT_ALLOW_UNIX },
        { "resolve", required_argument, NULL, OPT_RESOLVE },
        { "upstream-proxy", required_argument, NULL, OPT_UPSTREAM_PROXY },
        { "policy", required_argument, NULL, OPT_POLICY },
        { "profile", required_argument, NULL, OPT_PROFILE },
        { "read-only-workspace", no_argument, NULL, OPT_WORKSPACE_READONLY },
        { "cwd", required_argument, NULL, OPT_CWD },
        { "shm-size", required_argument, NULL, OPT_SHM_SIZE },
        { "copy-in", required_argument, NULL, OPT_COPY_IN },
        { "copy-in-secret", required_argument, NULL, OPT_COPY_IN_SECRET },
        { "ssh-agent", no_argument, NULL, OPT_SSH_AGENT },
        { "git-identity", no_argument, NULL, OPT_GIT_IDENTITY },
        { "carry-config", required_argument, NULL, OPT_CARRY_CONFIG },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
};

/* Relative paths on the command line are relative to the caller's cwd. */
static char *absolute(const char *path)
{
        if (path[0] == '/')
                return strdup(path);
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
                return NULL;
        char *out = NULL;
        if (asprintf(&out, "%s/%s", cwd, path) < 0)
                return NULL;
        return out;
}

static int split_last_colon(const char *spec, char **left, char **right)
{
        const char *colon = strrchr(spec, ':');
        *right = colon ? strdup(colon + 1) : NULL;
        *left = colon ? strndup(spec, (size_t)(colon - spec)) : strdup(spec);
        return *left && (!colon || *right) ? 0 : -1;
}

/* "--bind SPEC: " in front of a library message. */
static void flag_spec_prefix(const char *flag, const char *spec, brig_error **err, int r)
{
        char *m = NULL;
        if (r < 0 && err && *err && asprintf(&m, "%s %s: %s", flag, spec, (*err)->msg) >= 0) {
                free((*err)->msg);
                (*err)->msg = m;
        }
}

/* --bind/--ro-bind SRC[:DST], --copy-in(-secret) SRC:DST: SRC relative to
 * the caller's directory (for a copy-in, unless it starts with ~/). */
static int add_src_dst(brig_policy *p, const char *flag, const char *spec, unsigned flags, bool copy_in,
                       brig_error **err)
{
        char *src = NULL, *dst = NULL;
        int r = -1;
        if (split_last_colon(spec, &src, &dst) < 0 || !*src || (dst ? !*dst : copy_in)) {
                fprintf(stderr, "brig: %s '%s': expected %s\n", flag, spec,
                        copy_in ? "SRC:DST (DST in the sandbox, e.g. ~/.ssh/id_ed25519)" : "SRC[:DST]");
                goto out;
        }
        char *abs_src = copy_in && src[0] == '~' ? strdup(src) : absolute(src);
        r = !abs_src  ? -1
            : copy_in ? brig_policy_add_copy_in(p, abs_src, dst, flags, err)
                      : brig_policy_add_bind(p, abs_src, dst, flags, err);
        free(abs_src);
        flag_spec_prefix(flag, spec, err, r);
out:
        free(src);
        free(dst);
        return r;
}

static int add_tmpfs(brig_policy *p, const char *spec, brig_error **err)
{
        char *dst = NULL, *size_s = NULL;
        uint64_t size = 0;
        int r = -1;
        if (split_last_colon(spec, &dst, &size_s) < 0 || !*dst) {
                fprintf(stderr, "brig: --tmpfs '%s': expected DST[:SIZE]\n", spec);
                goto out;
        }
        if (size_s && brig_parse_size(size_s, &size, err) < 0)
                goto out;
        if (size_s && size == 0) {
                fprintf(stderr, "brig: --tmpfs '%s': size must be larger than 0\n", spec);
                goto out;
        }
        r = brig_policy_add_tmpfs(p, dst, size, err);
out:
        free(dst);
        free(size_s);
        return r;
}

/* Put the flag in front of a library message: "--tmp-size: size '10Q': ...". */
static int with_flag(const char *flag, brig_error **err, int r)
{
        if (r < 0 && err && *err && strncmp((*err)->msg, flag, strlen(flag)) != 0) {
                char *m = NULL;
                if (asprintf(&m, "%s: %s", flag, (*err)->msg) >= 0) {
                        free((*err)->msg);
                        (*err)->msg = m;
                }
        }
        return r;
}

static int parse_count(const char *flag, const char *arg, uint64_t *out)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-') {
                fprintf(stderr, "brig: %s '%s': expected a whole number\n", flag, arg);
                return -1;
        }
        *out = v;
        return 0;
}

static int parse_fd(const char *flag, const char *arg, int *fd)
{
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < 0 || v > INT_MAX) {
                fprintf(stderr, "brig: %s '%s': expected a file descriptor number\n", flag, arg);
                return -1;
        }
        *fd = (int)v;
        return 0;
}

/* "1.5" cores → 1500 thousandths */
static int parse_cpus(const char *arg, uint64_t *millis)
{
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !(v >= 0) || v > 4096 || strpbrk(arg, "xXeEnN")) {
                fprintf(stderr, "brig: --cpus '%s': expected a number of cores such as 0.5 or 2\n", arg);
                return -1;
        }
        *millis = (uint64_t)(v * 1000 + 0.5);
        return 0;
}

static int set_limit_arg(brig_policy *p, int opt, const char *flag, const char *arg, brig_error **err)
{
        uint64_t v = 0;
        int r;
        enum brig_limit which;
        switch (opt) {
        case OPT_MEMORY: which = BRIG_LIMIT_MEMORY; r = brig_parse_size(arg, &v, err); break;
        case OPT_FSIZE: which = BRIG_LIMIT_FSIZE; r = brig_parse_size(arg, &v, err); break;
        case OPT_STACK: which = BRIG_LIMIT_STACK; r = brig_parse_size(arg, &v, err); break;
        case OPT_PIDS: which = BRIG_LIMIT_PIDS; r = parse_count(flag, arg, &v); break;
        case OPT_NOFILE: which = BRIG_LIMIT_NOFILE; r = parse_count(flag, arg, &v); break;
        case OPT_NPROC: which = BRIG_LIMIT_NPROC; r = parse_count(flag, arg, &v); break;
        case OPT_IO_WEIGHT: which = BRIG_LIMIT_IO_WEIGHT; r = parse_count(flag, arg, &v); break;
        case OPT_CPUS: which = BRIG_LIMIT_CPUS_MILLI; r = parse_cpus(arg, &v); break;
        case OPT_TIMEOUT: which = BRIG_LIMIT_TIMEOUT_MS; r = brig_parse_duration(arg, &v, err); break;
        case OPT_KILL_AFTER: which = BRIG_LIMIT_KILL_AFTER_MS; r = brig_parse_duration(arg, &v, err); break;
        case OPT_CPU_TIME:
                which = BRIG_LIMIT_CPU_TIME_S;
                r = brig_parse_duration(arg, &v, err);
                v = (v + 999) / 1000;
                break;
        default: return -1;
        }
        if (r == 0)
                r = brig_policy_set_limit(p, which, v, err);
        return with_flag(flag, err, r);
}

static int parse_option(brig_policy *p, int opt, const char *arg, brig_error **err)
{
        uint64_t size;
        switch (opt) {
        case OPT_WORKSPACE: {
                char *abs = absolute(arg);
                int r = abs ? brig_policy_set_workspace(p, abs, err) : -1;
                free(abs);
                return r;
        }
        case OPT_RO_BIND: return add_src_dst(p, "--ro-bind", arg, BRIG_BIND_READONLY, false, err);
        case OPT_BIND: return add_src_dst(p, "--bind", arg, 0, false, err);
        case OPT_TMPFS: return with_flag("--tmpfs", err, add_tmpfs(p, arg, err));
        case OPT_TMP_SIZE:
                return with_flag("--tmp-size", err, brig_parse_size(arg, &size, err) < 0 ? -1
                                                   : brig_policy_set_tmp_size(p, size, err));
        case OPT_HOME_SIZE:
                return with_flag("--home-size", err, brig_parse_size(arg, &size, err) < 0 ? -1
                                                     : brig_policy_set_home_size(p, size, err));
        case OPT_SYS: brig_policy_set_mount_sys(p, true); return 0;
        case OPT_DENY: return brig_policy_add_deny(p, arg, err);
        case OPT_UNSAFE_ALLOW_SECRET: {
                int r = brig_policy_unsafe_allow_secret(p, arg, err);
                if (r == 0)
                        fprintf(stderr, "brig: WARNING: '%s' removed from the secret deny list on request\n", arg);
                return r;
        }
        case OPT_ENV: {
                const char *eq = strchr(arg, '=');
                if (!eq) {
                        fprintf(stderr, "brig: --env '%s': expected NAME=VALUE\n", arg);
                        return -1;
                }
                char *name = strndup(arg, (size_t)(eq - arg));
                int r = name ? brig_policy_set_env(p, name, eq + 1, err) : -1;
                free(name);
                return r;
        }
        case OPT_KEEP_ENV: return brig_policy_keep_env(p, arg, err);
        case OPT_PASS_FD: {
                int fd;
                return parse_fd("--pass-fd", arg, &fd) < 0 ? -1 : brig_policy_pass_fd(p, fd, err);
        }
        case OPT_JSON_REPORT_FD: case OPT_AUDIT_FD: {
                int fd;
                if (parse_fd(opt == OPT_AUDIT_FD ? "--audit-fd" : "--json-report-fd", arg, &fd) < 0)
                        return -1;
                return opt == OPT_AUDIT_FD ? brig_policy_set_audit_fd(p, fd, err) : brig_policy_set_report_fd(p, fd, err);
        }
        case OPT_HOSTNAME: return brig_policy_set_hostname(p, arg, err);
        case OPT_TTY: brig_policy_set_tty(p, BRIG_TTY_ALWAYS); return 0;
        case OPT_NO_TTY: brig_policy_set_tty(p, BRIG_TTY_NEVER); return 0;
        case OPT_TERMINAL_PASSTHROUGH: brig_policy_set_terminal_passthrough(p, true); return 0;
        case OPT_JSON_REPORT: {
                char *abs = absolute(arg);
                int r = abs ? brig_policy_set_report_path(p, abs, err) : -1;
                free(abs);
                return r;
        }
        case OPT_SECCOMP_ALLOW: return brig_policy_add_syscall_rule(p, arg, "allow", err);
        case OPT_SECCOMP_DENY: {
                /* NAME[:ERRNO]; ERRNO a number or a name such as EPERM */
                const char *colon = strchr(arg, ':');
                char *name = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
                char *action = NULL;
                int r = -1;
                if (name && asprintf(&action, "errno:%s", colon ? colon + 1 : "EPERM") >= 0)
                        r = brig_policy_add_syscall_rule(p, name, action, err);
                free(name);
                free(action);
                return r;
        }
        case OPT_SECCOMP_RULE: {
                /* NAME[(CONDITIONS)]=ACTION: the '=' after the conditions */
                const char *close = strrchr(arg, ')');
                const char *eq = strchr(close ? close : arg, '=');
                if (!eq) {
                        fprintf(stderr, "brig: --seccomp-rule '%s': expected NAME=ACTION\n", arg);
                        return -1;
                }
                char *name = strndup(arg, (size_t)(eq - arg));
                int r = name ? brig_policy_add_syscall_rule(p, name, eq + 1, err) : -1;
                free(name);
                return with_flag("--seccomp-rule", err, r);
        }
        case OPT_ALLOW_DEGRADED: return brig_policy_allow_degraded(p, arg, err);
        case OPT_WORKSPACE_READONLY: brig_policy_set_workspace_readonly(p, true); return 0;
        case OPT_CWD: return with_flag("--cwd", err, brig_policy_set_cwd(p, arg, err));
        case OPT_SHM_SIZE:
                return with_flag("--shm-size", err, brig_parse_size(arg, &size, err) < 0 ? -1
                                                    : brig_policy_set_shm_size(p, size, err));
        case OPT_NET:
                if (strcmp(arg, "none") == 0) {
                        brig_policy_set_net_mode(p, BRIG_NET_NONE);
                } else if (strcmp(arg, "proxy") == 0) {
                        brig_policy_set_net_mode(p, BRIG_NET_PROXY);
                } else if (strcmp(arg, "filtered") == 0) {
                        brig_policy_set_net_mode(p, BRIG_NET_FILTERED);
                } else if (strcmp(arg, "host") == 0) {
                        fprintf(stderr, "brig: WARNING: --net host: the sandbox shares the host's network; "
                                        "nothing controls where it connects\n");
                        brig_policy_set_net_mode(p, BRIG_NET_HOST);
                } else {
                        fprintf(stderr, "brig: --net '%s': expected none, proxy, filtered or host\n", arg);
                        return -1;
                }
                return 0;
        case OPT_ALLOW_HOST: return with_flag("--allow-host", err, brig_policy_allow_host(p, arg, err));
        case OPT_ALLOW_PRIVATE_HOST:
                return with_flag("--allow-private-host", err, brig_policy_allow_private_host(p, arg, err));
        case OPT_DENY_HOST: return with_flag("--deny-host", err, brig_policy_deny_host(p, arg, err));
        case OPT_ALLOW_CIDR: return with_flag("--allow-cidr", err, brig_policy_allow_cidr(p, arg, err));
        case OPT_ALLOW_UNIX: return with_flag("--allow-unix", err, brig_policy_allow_unix(p, arg, err));
        case OPT_RESOLVE: return with_flag("--resolve", err, brig_policy_add_resolve(p, arg, err));
        case OPT_UPSTREAM_PROXY:
                return with_flag("--upstream-proxy", err, brig_policy_set_upstream_proxy(p, arg, err));
        case OPT_REQUIRE_LIMITS: brig_policy_require_limits(p, true); return 0;
        case OPT_COPY_IN: return add_src_dst(p, "--copy-in", arg, 0, true, err);
        case OPT_COPY_IN_SECRET: return add_src_dst(p, "--copy-in-secret", arg, BRIG_COPY_IN_SECRET, true, err);
        case OPT_SSH_AGENT: return brig_policy_set_ssh_agent(p, true, err);
        case OPT_GIT_IDENTITY: return brig_policy_set_git_identity(p, true, err);
        case OPT_CARRY_CONFIG: return with_flag("--carry-config", err, brig_policy_carry_config(p, arg, err));
        case OPT_AUDIT: {
                char *abs = absolute(arg);
                int r = abs ? brig_policy_set_audit_path(p, abs, err) : -1;
                free(abs);
                return r;
        }
        case OPT_MEMORY: case OPT_PIDS: case OPT_CPUS: case OPT_IO_WEIGHT: case OPT_TIMEOUT:
        case OPT_KILL_AFTER: case OPT_CPU_TIME: case OPT_NOFILE: case OPT_NPROC: case OPT_FSIZE:
        case OPT_STACK: {
                const char *flag = "--?";
                for (const struct option *o = options; o->name; o++)
                        if (o->val == opt)
                                flag = o->name;
                char dashed[64];
                snprintf(dashed, sizeof dashed, "--%s", flag);
                return set_limit_arg(p, opt, dashed, arg, err);
        }
        default: return -1;
        }
}

/* getopt's '?' covers three mistakes; name the right one. */
static void explain_bad_option(const char *cmd, const char *arg)
{
        if (strncmp(arg, "--", 2) == 0) {
                size_t n = strcspn(arg + 2, "=");
                for (const struct option *o = options; o->name; o++) {
                        if (strlen(o->name) != n || strncmp(o->name, arg + 2, n) != 0)
                                continue;
                        if (o->has_arg == no_argument)
                                fprintf(stderr, "%s: option '--%s' takes no value\n", cmd, o->name);
                        else
                                fprintf(stderr, "%s: option '--%s' needs a value\n", cmd, o->name);
                        return;
                }
        }
        fprintf(stderr, "%s: unknown option '%s' (see %s --help)\n", cmd, arg, cmd);
}

/* The policy from BRIG_POLICY, --profile and --policy (in the order
 * given), then every other flag: flags win over files wherever they stand
 * on the command line. Returns 0 and the index of the first non-option,
 * 1 after --help, or an exit code (> 1) after printing the error, which
 * names `cmd` ("brig create": its run options are parsed here too). */
int cli_policy_from_args(const char *cmd, int argc, char **argv, brig_policy **ret, int *rest)
{
        brig_error *err = NULL;
        brig_policy *p = brig_policy_new();
        *ret = NULL;
        if (!p) {
                fprintf(stderr, "brig: out of memory\n");
                return BRIG_EXIT_SETUP;
        }
        const char *env = getenv("BRIG_POLICY");
        if (env && *env && brig_policy_load_file(p, env, &err) < 0) {
                brig_policy_free(p);
                return cli_fail(err);
        }
        int opt;
        opterr = 0;
        for (int pass = 1; pass <= 2; pass++) {
                optind = 0;  /* glibc: 0 restarts the scan from scratch */
                /* "+": stop at the first non-option so the command's own flags stay its own */
                while ((opt = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
                        if (opt == 'h') {
                                fputs(run_usage, stdout);
                                brig_policy_free(p);
                                return 1;
                        }
                        if (opt == '?') {
                                explain_bad_option(cmd, argv[optind - 1]);
                                brig_policy_free(p);
                                return BRIG_EXIT_SETUP;
                        }
                        bool file = opt == OPT_POLICY || opt == OPT_PROFILE;
                        if (file != (pass == 1))
                                continue;
                        int r = opt == OPT_POLICY    ? brig_policy_load_file(p, optarg, &err)
                                : opt == OPT_PROFILE ? brig_policy_apply_profile(p, optarg, &err)
                                                     : parse_option(p, opt, optarg, &err);
                        if (r < 0) {
                                brig_policy_free(p);
                                return err ? cli_fail(err) : BRIG_EXIT_SETUP;
                        }
                }
        }
        *rest = optind;
        *ret = p;
        return 0;
}

/* --pooled (docs/persistent.md) and --quiet are not policy options: take
 * them out before the policy options are read. */
static bool take_flag(int *argc, char **argv, const char *flag)
{
        bool found = false;
        int out = 1;
        bool in_options = true;
        for (int i = 1; i < *argc; i++) {
                if (in_options && strcmp(argv[i], "--") == 0)
                        in_options = false;
                if (in_options && strcmp(argv[i], flag) == 0) {
                        found = true;
                        continue;
                }
                argv[out++] = argv[i];
        }
        *argc = out;
        argv[out] = NULL;
        return found;
}

/* A control weaker than the policy asks, said before the command starts. */
static void put_notice(const char *line, void *data)
{
        fprintf(stderr, "brig: WARNING: %s\n", line);
        *(bool *)data = true;
}

int cmd_run(int argc, char **argv)
{
        brig_policy *p;
        bool pooled = take_flag(&argc, argv, "--pooled");
        bool quiet = take_flag(&argc, argv, "--quiet");
        int first, code = cli_policy_from_args("brig run", argc, argv, &p, &first);
        if (code)
                return code == 1 ? 0 : code;
        if (first >= argc) {
                fprintf(stderr, "brig run: no command given\n%s", run_usage);
                brig_policy_free(p);
                return BRIG_EXIT_SETUP;
        }
        brig_result res;
        brig_error *err = NULL;
        bool used_pool = false, warned = false;
        char why[512] = "";
        brig_policy_set_notice(p, put_notice, &warned);
        if ((pooled ? brig_run_pooled_why(p, argv + first, &res, &used_pool, why, sizeof why, &err)
                    : brig_run(p, argv + first, &res, &err)) < 0) {
                code = cli_fail(err);
        } else {
                code = res.exit_code;
                if (res.summary[0])  /* one human line when it did not simply exit */
                        fprintf(stderr, "brig: %s\n", res.summary);
                if (res.warning[0] && !warned)  /* a pooled run: its sandbox said nothing at start */
                        fprintf(stderr, "brig: WARNING: %s\n", res.warning);
                cli_put_refusals(&res, quiet);
        }
        if (pooled && !used_pool && why[0])  /* never silently: the caller asked for the pool */
                fprintf(stderr, "brig: --pooled: not served by the pool: %s; ran in a new sandbox\n", why);
        brig_policy_free(p);
        return code;
}
