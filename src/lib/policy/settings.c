/* settings.c — the table of policy settings (settings.h), what the
 * command line does with each flag, and the schema of policy files.
 *
 * The order of the table is the order of a policy file: the loader walks
 * it (and says "expected one of: ..." in it), the dump writes it. --help
 * lists the flags by section, each section where the table first names
 * it, in table order within each. */
#define _GNU_SOURCE
#include "core/model.h"
#include "policy/settings.h"
#include "tools/tools.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

_Static_assert(sizeof(enum brig_tty_mode) == sizeof(int), "SK_ENUM reads an enum as an int");


/* The --help headings. */
#define S_POLICY "Policy (applied first, in order; every other flag wins over them):"
#define S_FS "Filesystem:"
#define S_TOOLS "Tools (docs/tools.md):"
#define S_PROCESS "Process:"
#define S_NET "Network (default none: only the sandbox's own loopback):"
#define S_LIMITS "Limits (sizes take K/M/G/T, times take ms/s/m/h, e.g. 1h30m; 0 removes a limit):"
#define S_SYSCALLS "Syscalls and degradation:"
#define S_REPORT "Reporting:"

const struct setting_object setting_objects[] = {
        { "/filesystem", "an object", NULL },
        { "/process", "an object", NULL },
        { "/limits", "an object", NULL },
        { "/syscalls", "an object", NULL },
        { "/network", "an object",
          "Egress controls. Any allow rule turns egress on: filtered mode where the host supports it (else proxy, "
          "reported); \"filtered\" given explicitly is required." },
        { "/audit", "an object {\"file\": PATH, \"no_exec\": BOOL}", NULL },
        { "/report", "an object {\"file\": PATH, \"timings\": BOOL}", NULL },
        { "/manifest", "an object {\"file\": PATH}", NULL },
        { "/tools", "an object", "What the tools agents use are handed at start (docs/tools.md)." },
        { NULL, NULL, NULL },
};

/* ---- what the flags take ---------------------------------------------------- */

/* Relative paths on the command line are relative to the caller's cwd. */
static char *absolute(const char *path)
{
        if (path[0] == '/')
                return strdup(path);
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
                return NULL;
        return brig_strdup_printf("%s/%s", cwd, path);
}

/* --secret, --secret-host, --secret-header (f->param 0, 1, 2). */
static int cli_secret(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                      brig_error **err)
{
        (void)s;
        return f->param == 0 ? brig_policy_add_secret(p, arg, err)
               : f->param == 1 ? brig_policy_secret_host(p, arg, err)
                               : brig_policy_secret_header(p, arg, err);
}

static int split_last_colon(const char *spec, char **left, char **right)
{
        const char *colon = strrchr(spec, ':');
        *right = colon ? strdup(colon + 1) : NULL;
        *left = colon ? strndup(spec, (size_t)(colon - spec)) : strdup(spec);
        return *left && (!colon || *right) ? 0 : -1;
}

/* A command-line mistake: "--env 'x': expected NAME=VALUE" (brig prints
 * "brig: " in front and exits 125). */
static int flag_err(brig_error **err, const char *fmt, ...) BRIG_PRINTF(2, 3);
static int flag_err(brig_error **err, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        brig_err(err, 0, "%s", msg ? msg : "invalid option");
        free(msg);
        return -EINVAL;
}

/* Put the flag in front of a library message: "--tmp-size: size '10Q': ...". */
static int with_flag(const char *flag, brig_error **err, int r)
{
        if (r < 0 && err && *err && strncmp((*err)->msg, flag, strlen(flag)) != 0) {
                char *m = brig_strdup_printf("%s: %s", flag, (*err)->msg);
                if (m) {
                        free((*err)->msg);
                        (*err)->msg = m;
                }
        }
        return r;
}

static int parse_count(const char *flag, const char *arg, uint64_t *out, brig_error **err)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-')
                return flag_err(err, "%s '%s': expected a whole number", flag, arg);
        *out = v;
        return 0;
}

static int parse_fd(const char *flag, const char *arg, int *fd, brig_error **err)
{
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < 0 || v > INT_MAX)
                return flag_err(err, "%s '%s': expected a file descriptor number", flag, arg);
        *fd = (int)v;
        return 0;
}

/* "1.5" cores → 1500 thousandths */
static int parse_cpus(const char *arg, uint64_t *millis, brig_error **err)
{
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !(v >= 0) || v > 4096 || strpbrk(arg, "xXeEnN"))
                return flag_err(err, "--cpus '%s': expected a number of cores such as 0.5 or 2", arg);
        *millis = (uint64_t)(v * 1000 + 0.5);
        return 0;
}

/* ---- the flags with structure -------------------------------------------------- */

/* --bind/--ro-bind SRC[:DST], --copy-in(-secret) SRC:DST: SRC relative to
 * the caller's directory (for a copy-in, unless it starts with ~/). */
static int cli_src_dst(brig_policy *p, const char *flag, const char *spec, unsigned flags, bool copy_in,
                       brig_error **err)
{
        _cleanup_free_ char *src = NULL, *dst = NULL;
        if (split_last_colon(spec, &src, &dst) < 0)
                return brig_err(err, ENOMEM, "%s", flag);
        if (!*src || (dst ? !*dst : copy_in))
                return flag_err(err, "%s '%s': expected %s", flag, spec,
                                copy_in ? "SRC:DST (DST in the sandbox, e.g. ~/.ssh/id_ed25519)" : "SRC[:DST]");
        _cleanup_free_ char *abs_src = copy_in && src[0] == '~' ? strdup(src) : absolute(src);
        int r = !abs_src  ? brig_err(err, ENOMEM, "%s", flag)
                : copy_in ? brig_policy_add_copy_in(p, abs_src, dst, flags, err)
                          : brig_policy_add_bind(p, abs_src, dst, flags, err);
        /* "--bind SPEC: " in front of the library's message */
        char *m = NULL;
        if (r < 0 && err && *err && (m = brig_strdup_printf("%s %s: %s", flag, spec, (*err)->msg))) {
                free((*err)->msg);
                (*err)->msg = m;
        }
        return r;
}

static int cli_bind(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                    brig_error **err)
{
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", f->name);
        return cli_src_dst(p, flag, arg, (unsigned)f->param, false, err);
}

static int cli_copy_in(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                       brig_error **err)
{
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", f->name);
        return cli_src_dst(p, flag, arg, (unsigned)f->param, true, err);
}

static int cli_tmpfs(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *spec,
                     brig_error **err)
{
        _cleanup_free_ char *dst = NULL, *size_s = NULL;
        uint64_t size = 0;
        if (split_last_colon(spec, &dst, &size_s) < 0)
                return brig_err(err, ENOMEM, "--tmpfs");
        if (!*dst)
                return flag_err(err, "--tmpfs '%s': expected DST[:SIZE]", spec);
        if (size_s && brig_parse_size(size_s, &size, err) < 0)
                return -EINVAL;
        if (size_s && size == 0)
                return flag_err(err, "--tmpfs '%s': size must be larger than 0", spec);
        return brig_policy_add_tmpfs(p, dst, size, err);
}

static int cli_unsafe_allow(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                            brig_error **err)
{
        int r = brig_policy_unsafe_allow_secret(p, arg, err);
        if (r == 0 && p->notice) {
                _cleanup_free_ char *line = brig_strdup_printf("'%s' removed from the secret deny list on request",
                                                               arg);
                p->notice(line ? line : "an entry was removed from the secret deny list on request",
                          p->notice_data);
        }
        return r;
}

static int cli_env(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                   brig_error **err)
{
        const char *eq = strchr(arg, '=');
        if (!eq)
                return flag_err(err, "--env '%s': expected NAME=VALUE", arg);
        _cleanup_free_ char *name = strndup(arg, (size_t)(eq - arg));
        return name ? brig_policy_set_env(p, name, eq + 1, err) : brig_err(err, ENOMEM, "--env");
}

/* --pass-fd, --json-report-fd, --audit-fd: a descriptor of the caller's */
static int cli_fd(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                  brig_error **err)
{
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", f->name);
        int fd = -1;
        if (parse_fd(flag, arg, &fd, err) < 0)
                return -EINVAL;
        int (*set)(brig_policy *, int, brig_error **) = f->param == 0   ? brig_policy_pass_fd
                                                        : f->param == 1 ? brig_policy_set_report_fd
                                                                        : brig_policy_set_audit_fd;
        return set(p, fd, err);
}

static int cli_seccomp_allow(brig_policy *p, const struct setting *s, const struct setting_flag *f,
                             const char *arg, brig_error **err)
{
        return brig_policy_add_syscall_rule(p, arg, "allow", err);
}

/* NAME[:ERRNO]; ERRNO a number or a name such as EPERM */
static int cli_seccomp_deny(brig_policy *p, const struct setting *s, const struct setting_flag *f,
                            const char *arg, brig_error **err)
{
        const char *colon = strchr(arg, ':');
        _cleanup_free_ char *name = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
        _cleanup_free_ char *action = brig_strdup_printf("errno:%s", colon ? colon + 1 : "EPERM");
        if (!name || !action)
                return brig_err(err, ENOMEM, "--seccomp-deny");
        return brig_policy_add_syscall_rule(p, name, action, err);
}

/* NAME[(CONDITIONS)]=ACTION: the '=' after the conditions */
static int cli_seccomp_rule(brig_policy *p, const struct setting *s, const struct setting_flag *f,
                            const char *arg, brig_error **err)
{
        const char *close = strrchr(arg, ')');
        const char *eq = strchr(close ? close : arg, '=');
        if (!eq)
                return flag_err(err, "--seccomp-rule '%s': expected NAME=ACTION", arg);
        _cleanup_free_ char *name = strndup(arg, (size_t)(eq - arg));
        return name ? brig_policy_add_syscall_rule(p, name, eq + 1, err) : brig_err(err, ENOMEM, "--seccomp-rule");
}

static int cli_policy_file(brig_policy *p, const struct setting *s, const struct setting_flag *f,
                           const char *arg, brig_error **err)
{
        return brig_policy_load_file(p, arg, err);
}

static int cli_profile(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                       brig_error **err)
{
        return brig_policy_apply_profile(p, arg, err);
}

/* ---- setters the table needs in its own shape ---------------------------------- */

static void set_tty(brig_policy *p, int v)
{
        brig_policy_set_tty(p, (enum brig_tty_mode)v);
}

static void set_net(brig_policy *p, int v)
{
        brig_policy_set_net_mode(p, (enum brig_net_mode)v);
}

static void set_wall(brig_policy *p, int v)
{
        brig_policy_set_wall(p, (enum brig_wall)v);
}

static int cli_net(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                   brig_error **err);

static const struct setting_choice tty_choices[] = {
        { "auto", BRIG_TTY_AUTO }, { "always", BRIG_TTY_ALWAYS }, { "never", BRIG_TTY_NEVER }, { NULL, 0 },
};
static const struct setting_choice wall_choices[] = {
        { "namespaces", BRIG_WALL_NAMESPACES }, { "gvisor", BRIG_WALL_GVISOR }, { NULL, 0 },
};
static const struct setting_choice net_choices[] = {
        { "none", BRIG_NET_NONE }, { "proxy", BRIG_NET_PROXY }, { "filtered", BRIG_NET_FILTERED },
        { "host", BRIG_NET_HOST }, { NULL, 0 },
};

#define OFF(field) offsetof(struct brig_policy, field)
#define LIMIT(k, flag_, arg_, help_, which, unit_)                                                    \
        { .key = "/limits/" k, .section = S_LIMITS, .kind = SK_LIMIT, .limit = (which), .unit = (unit_), \
          .cli = { { .name = (flag_), .arg = (arg_), .help = (help_), .prefix = true } } }

/* ---- the table ----------------------------------------------------------------- */

const struct setting settings[] = {
        /* the command line's policy files, applied before every other flag */
        { .section = S_POLICY, .kind = SK_CUSTOM, .flags = BRIG_OPTION_FIRST,
          .cli = { { .name = "profile", .arg = "NAME", .help = "a built-in profile: default, strict, build, browser",
                     .cli = cli_profile } } },
        { .section = S_POLICY, .kind = SK_CUSTOM, .flags = BRIG_OPTION_FIRST,
          .cli = { { .name = "policy", .arg = "FILE",
                     .help = "a JSON policy file (repeatable; later files win; also $BRIG_POLICY)",
                     .cli = cli_policy_file } } },

        { .key = "/$schema", .kind = SK_IGNORED,
          .schema = "{\"description\": \"Ignored by brig; lets editors find this schema.\", \"type\": \"string\"}" },
        { .key = "/extends", .kind = SK_CUSTOM, .load = load_extends,
          .schema = "{\"description\": \"A built-in profile applied before the rest of this file.\"}" },

        /* filesystem */
        { .key = "/filesystem/workspace", .section = S_FS, .kind = SK_PATH, .set_str = brig_policy_set_workspace,
          .offset = OFF(workspace), .what = "a path",
          .cli = { { .name = "workspace", .arg = "DIR", .help = "read-write workspace (default: current directory)" } },
          .schema = "{\"$ref\": \"#/$defs/absolute_path\", \"description\": \"The read-write (or read-only) "
                    "workspace; default: the current directory at run time.\"}" },
        /* no flag: brig oci sets it from an OCI bundle (docs/oci.md) */
        { .key = "/filesystem/rootfs", .section = S_FS, .kind = SK_PATH, .set_str = brig_policy_set_rootfs,
          .offset = OFF(rootfs), .what = "a path",
          .schema = "{\"$ref\": \"#/$defs/absolute_path\", \"description\": \"A root filesystem that is / "
                    "inside instead of the host's system directories (an OCI bundle's); it is then the "
                    "workspace, and $HOME is not mounted.\"}" },
        { .key = "/filesystem/workspace_readonly", .section = S_FS, .kind = SK_BOOL,
          .set_flag = brig_policy_set_workspace_readonly, .offset = OFF(workspace_readonly),
          .cli = { { .name = "read-only-workspace", .arg = NULL, .help = "mount the workspace read-only" } } },
        { .key = "/filesystem/binds", .section = S_FS, .kind = SK_CUSTOM, .load = load_binds, .dump = dump_binds,
          .cli = { { .name = "ro-bind", .arg = "SRC[:DST]", .help = "bind a host path read-only",
                     .param = BRIG_BIND_READONLY, .cli = cli_bind },
                   { .name = "bind", .arg = "SRC[:DST]", .help = "bind a host path read-write", .cli = cli_bind } },
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false,"
                    " \"required\": [\"source\"], \"properties\": {"
                    "\"source\": {\"$ref\": \"#/$defs/absolute_path\"},"
                    " \"destination\": {\"$ref\": \"#/$defs/mount_destination\", \"description\": \"Default: the "
                    "same path as source.\"},"
                    " \"readonly\": {\"type\": \"boolean\", \"default\": false}},"
                    " \"if\": {\"not\": {\"required\": [\"destination\"]}},"
                    " \"then\": {\"properties\": {\"source\": {\"$ref\": \"#/$defs/mount_destination\"}}}}}" },
        { .key = "/filesystem/tmpfs", .section = S_FS, .kind = SK_CUSTOM, .load = load_tmpfs, .dump = dump_tmpfs,
          .cli = { { .name = "tmpfs", .arg = "DST[:SIZE]", .help = "an empty tmpfs (default size 64M)",
                     .cli = cli_tmpfs, .prefix = true } },
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false,"
                    " \"required\": [\"destination\"], \"properties\": {"
                    "\"destination\": {\"$ref\": \"#/$defs/mount_destination\"},"
                    " \"size\": {\"$ref\": \"#/$defs/size\", \"description\": \"0 or absent: brig's default tmpfs "
                    "size (64M).\"}}}}" },
        { .key = "/filesystem/tmp_size", .section = S_FS, .kind = SK_SIZE, .set_u64 = brig_policy_set_tmp_size,
          .offset = OFF(tmp_size), .cli = { { .name = "tmp-size", .arg = "SIZE", .help = "size of /tmp (default 512M)",
                                              .prefix = true } } },
        { .key = "/filesystem/home_size", .section = S_FS, .kind = SK_SIZE, .set_u64 = brig_policy_set_home_size,
          .offset = OFF(home_size),
          .cli = { { .name = "home-size", .arg = "SIZE", .help = "size of the empty $HOME (default 256M)",
                     .prefix = true } } },
        { .key = "/filesystem/shm_size", .section = S_FS, .kind = SK_SIZE, .set_u64 = brig_policy_set_shm_size,
          .offset = OFF(shm_size), .cli = { { .name = "shm-size", .arg = "SIZE",
                                              .help = "size of /dev/shm (default 64M)", .prefix = true } } },
        { .key = "/filesystem/sys", .section = S_FS, .kind = SK_BOOL, .set_flag = brig_policy_set_mount_sys,
          .offset = OFF(mount_sys), .cli = { { .name = "sys", .arg = NULL, .help = "mount a read-only /sys" } } },
        { .key = "/filesystem/deny", .section = S_FS, .kind = SK_LIST, .set_str = brig_policy_add_deny,
          .dump = dump_deny, .offset = OFF(deny), .noun = "pattern", .cli = { { .name = "deny", .arg = "PATH",
                                        .help = "add a path to the secret deny list (~/ = every home)" } },
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": \"^(/|~/)\"}}" },
        /* Removals first, so a "deny" of the same entry in the same file
         * puts it back (the deny list never loses by accident). */
        { .key = "/filesystem/unsafe_allow_secrets", .section = S_FS, .kind = SK_LIST, .flags = SETTING_EARLY,
          .set_str = load_unsafe_allow, .offset = OFF(unsafe_allowed), .noun = "pattern",
          .cli = { { .name = "unsafe-allow-secret", .arg = "PATH", .help = "remove a built-in entry from the deny list",
                     .cli = cli_unsafe_allow } } },

        /* process */
        { .key = "/process/env", .section = S_PROCESS, .kind = SK_CUSTOM, .load = load_env, .dump = dump_env,
          .cli = { { .name = "env", .arg = "NAME=VALUE", .help = "set a variable inside", .cli = cli_env } },
          .schema = "{\"type\": \"object\", \"propertyNames\": {\"$ref\": \"#/$defs/env_name\"},"
                    " \"additionalProperties\": {\"type\": \"string\"}}" },
        { .key = "/process/keep_env", .section = S_PROCESS, .kind = SK_LIST, .set_str = brig_policy_keep_env,
          .offset = OFF(keep_env), .noun = "name",
          .cli = { { .name = "keep-env", .arg = "NAME", .help = "pass the caller's value of NAME" } },
          .schema = "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/env_name\"}}" },
        { .key = "/process/cwd", .section = S_FS, .kind = SK_STRING, .set_str = brig_policy_set_cwd,
          .offset = OFF(cwd), .what = "a path",
          .cli = { { .name = "cwd", .arg = "DIR", .help = "start the command in DIR inside (default: the workspace)",
                     .prefix = true } },
          .schema = "{\"$ref\": \"#/$defs/absolute_path\"}" },
        /* no flags: brig oci sets them from a config.json (docs/oci.md);
         * the maps before the user, whose ids they must hold */
        { .key = "/process/uid_map", .section = S_PROCESS, .kind = SK_LIST, .set_str = brig_policy_add_uid_map,
          .offset = OFF(uid_map), .omit_empty = true, .noun = "range",
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": "
                    "\"^[0-9]+:[0-9]+:[0-9]+$\"}, \"description\": \"INSIDE:HOST:COUNT ranges the user's ids "
                    "are looked up in (an OCI config's linux.uidMappings).\"}" },
        { .key = "/process/gid_map", .section = S_PROCESS, .kind = SK_LIST, .set_str = brig_policy_add_gid_map,
          .offset = OFF(gid_map), .omit_empty = true, .noun = "range",
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": "
                    "\"^[0-9]+:[0-9]+:[0-9]+$\"}, \"description\": \"The same for groups.\"}" },
        { .key = "/process/user", .section = S_PROCESS, .kind = SK_STRING, .set_str = brig_policy_set_user,
          .offset = OFF(user), .what = "UID:GID[:GROUP,...]",
          .schema = "{\"type\": \"string\", \"pattern\": \"^[0-9]+:[0-9]+(:[0-9]+(,[0-9]+)*)?$\", "
                    "\"description\": \"The ids the commands run as inside; 0 is brig's sandbox user.\"}" },
        { .key = "/process/umask", .section = S_PROCESS, .kind = SK_STRING, .set_str = brig_policy_set_umask,
          .offset = OFF(umask), .what = "an octal umask",
          .schema = "{\"type\": \"string\", \"pattern\": \"^0?[0-7]{1,3}$\"}" },
        { .key = "/process/hostname", .section = S_PROCESS, .kind = SK_STRING, .set_str = brig_policy_set_hostname,
          .offset = OFF(hostname), .what = "a string",
          .cli = { { .name = "hostname", .arg = "NAME", .help = "hostname inside (default brig)" } },
          .schema = "{\"type\": \"string\", \"pattern\": \"^[A-Za-z0-9.-]{1,64}$\", \"default\": \"brig\"}" },
        { .key = "/process/clock_start", .section = S_PROCESS, .kind = SK_STRING,
          .set_str = brig_policy_set_clock_start, .offset = OFF(clock_start), .what = "a duration",
          .cli = { { .name = "clock-start", .arg = "TIME",
                     .help = "the monotonic and boot-time clocks inside start at TIME (a time\n"
                     "namespace offset; they run on; the wall clock stays the host's)", .prefix = true } },
          .schema = "{\"description\": \"The sandbox's CLOCK_MONOTONIC and CLOCK_BOOTTIME (/proc/uptime) read this "
                    "when it starts, a duration (100000 seconds, 27h): time namespace offsets. They run on "
                    "at the host's rate; the wall clock is the host's (--clock-start; docs/audit.md#replay).\", "
                    "\"type\": \"string\", \"minLength\": 1}" },
        { .key = "/process/tty", .section = S_PROCESS, .kind = SK_ENUM, .set_enum = set_tty, .choices = tty_choices,
          .offset = OFF(tty), .label = "tty",
          .cli = { { .name = "tty", .arg = NULL,
                     .help = "force or forbid a pseudo-terminal (default: when stdin and stdout are terminals)",
                     .param = BRIG_TTY_ALWAYS },
                   { .name = "no-tty", .arg = NULL, .help = NULL, .param = BRIG_TTY_NEVER } } },
        { .key = "/process/terminal_passthrough", .section = S_PROCESS, .kind = SK_BOOL,
          .set_flag = brig_policy_set_terminal_passthrough, .offset = OFF(terminal_passthrough),
          .cli = { { .name = "terminal-passthrough", .arg = NULL,
                     .help = "let the command's escape sequences reach the terminal unfiltered\n"
                     "(clipboard OSC 52, titles, queries; dropped by default)" } } },
        { .section = S_PROCESS, .kind = SK_CUSTOM, .flags = BRIG_OPTION_RUN_ONLY,
          .cli = { { .name = "pass-fd", .arg = "N", .help = "keep inherited fd N open inside", .cli = cli_fd } } },

        /* limits */
        LIMIT("memory", "memory", "SIZE", "memory, no swap (default 4G; cgroup)", BRIG_LIMIT_MEMORY, SU_SIZE),
        LIMIT("pids", "pids", "N", "processes and threads (default 1024; cgroup)", BRIG_LIMIT_PIDS, SU_COUNT),
        LIMIT("cpus", "cpus", "N", "CPU share in cores, e.g. 1.5 (cgroup)", BRIG_LIMIT_CPUS_MILLI, SU_CPUS),
        { .key = "/limits/io_weight", .section = S_LIMITS, .kind = SK_LIMIT, .limit = BRIG_LIMIT_IO_WEIGHT,
          .unit = SU_COUNT, .cli = { { .name = "io-weight", .arg = "N",
                                       .help = "IO weight 1-10000 (cgroup, where present)", .prefix = true } },
          .schema = "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 10000}" },
        LIMIT("timeout", "timeout", "TIME", "wall clock: SIGTERM to everything, exit 124", BRIG_LIMIT_TIMEOUT_MS,
              SU_DURATION),
        LIMIT("kill_after", "kill-after", "TIME", "SIGKILL this long after the timeout's SIGTERM (default 5s)",
              BRIG_LIMIT_KILL_AFTER_MS, SU_DURATION),
        LIMIT("cpu_time", "cpu-time", "TIME", "CPU time per process (RLIMIT_CPU)", BRIG_LIMIT_CPU_TIME_S, SU_SECONDS),
        LIMIT("nofile", "nofile", "N", "open files per process (default 4096)", BRIG_LIMIT_NOFILE, SU_COUNT),
        LIMIT("nproc", "nproc", "N", "processes per user inside (RLIMIT_NPROC)", BRIG_LIMIT_NPROC, SU_COUNT),
        LIMIT("fsize", "fsize", "SIZE", "largest file a process may write (RLIMIT_FSIZE)", BRIG_LIMIT_FSIZE, SU_SIZE),
        LIMIT("stack", "stack", "SIZE", "stack size per process (RLIMIT_STACK)", BRIG_LIMIT_STACK, SU_SIZE),
        { .key = "/limits/required", .section = S_LIMITS, .kind = SK_BOOL, .set_flag = brig_policy_require_limits,
          .offset = OFF(limits.required),
          .cli = { { .name = "require-limits", .arg = NULL,
                     .help = "refuse to run when cgroups cannot enforce the limits" } } },

        /* syscalls */
        { .key = "/syscalls/rules", .section = S_SYSCALLS, .kind = SK_CUSTOM, .load = load_rules, .dump = dump_rules,
          .cli = { { .name = "seccomp-allow", .arg = "NAME",
                     .help = "allow a syscall or @group the default profile refuses", .cli = cli_seccomp_allow },
                   { .name = "seccomp-deny", .arg = "NAME[:ERRNO]",
                     .help = "refuse a syscall or @group (default errno EPERM)",
                     .cli = cli_seccomp_deny },
                   { .name = "seccomp-rule", .arg = "NAME[(COND,...)]=ACTION",
                     .help = "ACTION: allow, kill, log, deny-log or errno:N;\n"
                     "NAME: syscall or @group; COND: aN==V, !=, <, <=, >, >=, aN&MASK==V",
                     .cli = cli_seccomp_rule, .prefix = true } },
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false,"
                    " \"required\": [\"name\", \"action\"], \"properties\": {"
                    "\"name\": {\"description\": \"A syscall, a @group, or a syscall with argument conditions: "
                    "\\\"getpriority(a0==0)\\\", \\\"kcmp(a2&0x3==0x1)\\\".\", \"type\": \"string\","
                    " \"pattern\": \"^@?[a-z0-9_]+(\\\\(.*\\\\))?$\"},"
                    " \"action\": {\"type\": \"string\","
                    " \"pattern\": \"^(allow|kill|log|deny-log|errno:[A-Za-z0-9]+)$\"}}}}" },
        { .key = "/syscalls/wall", .section = S_SYSCALLS, .kind = SK_ENUM, .set_enum = set_wall,
          .choices = wall_choices, .offset = OFF(wall), .label = "wall",
          .cli = { { .name = "wall", .arg = "namespaces|gvisor",
                     .help = "what stands between the command and the host kernel (docs/walls.md):\n"
                     "namespaces: brig's own (default); gvisor: gVisor's runsc, a user-space\n"
                     "kernel, under the same policy (refused where runsc cannot run)" } } },
        { .key = "/syscalls/allow_degraded", .section = S_SYSCALLS, .kind = SK_LIST,
          .set_str = brig_policy_allow_degraded, .dump = dump_degraded,
          .cli = { { .name = "allow-degraded", .arg = "CONTROL",
                     .help = "run even if the host lacks landlock or seccomp (the report says so)" } },
          .schema = "{\"type\": \"array\", \"items\": {\"enum\": [\"landlock\", \"seccomp\", \"memory\", \"pids\","
                    " \"cpus\", \"io\"]}}" },

        /* network */
        { .key = "/network/mode", .section = S_NET, .kind = SK_ENUM, .flags = SETTING_DUMP_LATE, .set_enum = set_net,
          .choices = net_choices,
          .dump = dump_net_mode, .label = "network mode",
          .cli = { { .name = "net", .arg = "none|proxy|filtered|host",
                     .help = "proxy: brig's logging proxy reaches only what is allowed;\n"
                     "filtered: the proxy, and every other TCP connection and DNS query\n"
                     "sent to brig by the kernel (the default with allow rules; proxy\n"
                     "where the host can't, unless asked for explicitly);\n"
                     "host: the host's network, no control (loud warning)",
                     .cli = cli_net } },
          .schema = "{\"default\": \"none\"}" },
        { .key = "/network/allow_hosts", .section = S_NET, .kind = SK_LIST, .set_str = brig_policy_allow_host,
          .dump = dump_egress,
          .cli = { { .name = "allow-host", .arg = "PATTERN",
                     .help = "allow pypi.org, *.pythonhosted.org, host:port (turns on filtered)",
                     .prefix = true } },
          .schema = "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/host_pattern\"}}" },
        { .key = "/network/allow_private_hosts", .section = S_NET, .kind = SK_LIST,
          .set_str = brig_policy_allow_private_host, .dump = dump_egress,
          .cli = { { .name = "allow-private-host", .arg = "PATTERN",
                     .help = "allow it as --allow-host does, and let its names resolve to\n"
                     "private addresses (LAN, fc00::/7, 100.64/10; never loopback or metadata)",
                     .prefix = true } },
          .schema = "{\"description\": \"Allowed like allow_hosts, and these names may resolve to private "
                    "addresses (10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 100.64/10) \\u2014 for these names "
                    "only; loopback, link-local and cloud metadata stay refused (--allow-private-host).\","
                    " \"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/host_pattern\"}}" },
        { .key = "/network/deny_hosts", .section = S_NET, .kind = SK_LIST, .set_str = brig_policy_deny_host,
          .dump = dump_egress, .cli = { { .name = "deny-host", .arg = "PATTERN", .help = "deny (wins over allow)",
                                          .prefix = true } },
          .schema = "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/host_pattern\"}}" },
        { .key = "/network/allow_cidrs", .section = S_NET, .kind = SK_LIST, .set_str = brig_policy_allow_cidr,
          .dump = dump_egress,
          .cli = { { .name = "allow-cidr", .arg = "CIDR[:PORT]",
                     .help = "allow addresses the classification refuses (private, loopback...)",
                     .prefix = true } },
          .schema = "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"minLength\": 1}}" },
        { .key = "/network/resolve", .section = S_NET, .kind = SK_CUSTOM, .set_str = brig_policy_add_resolve,
          .load = load_resolve, .dump = dump_egress,
          .cli = { { .name = "resolve", .arg = "HOST:ADDR", .help = "resolve HOST to ADDR without DNS",
                     .prefix = true } },
          .schema = "{\"description\": \"Names answered without DNS (like curl --resolve): [\\\"HOST:ADDR\\\", ...] "
                    "or {\\\"HOST\\\": \\\"ADDR\\\"}.\", \"oneOf\": [{\"type\": \"array\", \"items\": {\"type\": "
                    "\"string\", \"minLength\": 3}}, {\"type\": \"object\", \"additionalProperties\": {\"type\": "
                    "\"string\", \"minLength\": 1}}]}" },
        { .key = "/network/upstream_proxy", .section = S_NET, .kind = SK_STRING,
          .set_str = brig_policy_set_upstream_proxy, .dump = dump_egress, .what = "\"http://HOST:PORT\"",
          .cli = { { .name = "upstream-proxy", .arg = "http://HOST:PORT",
                     .help = "reach allowed hosts through this HTTP proxy (CONNECT)",
                     .prefix = true } },
          .schema = "{\"description\": \"Reach allowed destinations through this HTTP proxy with CONNECT "
                    "(--upstream-proxy): \\\"http://HOST:PORT\\\", HOST a name, an IPv4 address or a bracketed IPv6 "
                    "address; no credentials, no path.\", \"type\": \"string\","
                    " \"pattern\": \"^[Hh][Tt][Tt][Pp]://[^@/?#]+:[0-9]+/?$\"}" },
        /* scoped credentials and request rules (net/intercept.h, docs/secrets.md) */
        { .key = "/network/secrets", .section = S_NET, .kind = SK_CUSTOM, .load = load_secrets, .dump = dump_egress,
          .cli = { { "secret", "NAME=@FILE|NAME=env:VAR",
                     "a credential the sandbox never sees: $NAME holds a placeholder\n"
                     "the proxy swaps for the value toward bound hosts only", .cli = cli_secret, .prefix = true },
                   { "secret-host", "NAME=PATTERN", "a host the secret may go to, over TLS the proxy verified",
                     .param = 1, .cli = cli_secret, .prefix = true },
                   { "secret-header", "NAME=HEADER", "the header it goes in (default Authorization; Basic decoded)",
                     .param = 2, .cli = cli_secret, .prefix = true } },
          .schema = "{\"description\": \"Scoped credentials (--secret, --secret-host, --secret-header; "
                    "docs/secrets.md): inside, $NAME holds a placeholder that the proxy swaps for the value only "
                    "in the header named, toward the hosts named, over TLS whose certificate it verified.\", "
                    "\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false, "
                    "\"required\": [\"name\", \"source\", \"hosts\"], \"properties\": {"
                    "\"name\": {\"type\": \"string\", \"pattern\": \"^[A-Za-z_][A-Za-z0-9_]{0,63}$\"}, "
                    "\"source\": {\"description\": \"Read when the run starts, never stored in the policy.\", "
                    "\"type\": \"string\", \"pattern\": \"^(@/.*|env:[A-Za-z_][A-Za-z0-9_]*)$\"}, "
                    "\"hosts\": {\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"string\"}}, "
                    "\"header\": {\"type\": \"string\", \"pattern\": \"^[A-Za-z0-9-]{1,64}$\"}}}}" },
        { .key = "/network/http_rules", .section = S_NET, .kind = SK_CUSTOM, .load = load_http_rules,
          .dump = dump_egress, .set_str = brig_policy_add_http_rule,
          .cli = { { "http-rule", "'HOST METHODS [PATHS]'",
                     "the only requests HOST takes, e.g.\n"
                     "'api.example.com POST /v1/messages,/v1/models/*' (METHODS '*': any)", .prefix = true } },
          .schema = "{\"description\": \"Request-level rules (--http-rule): a host named here takes only requests "
                    "some rule for it allows ('*' within one path segment, a trailing '/**' everything below).\", "
                    "\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false, "
                    "\"required\": [\"host\"], \"properties\": {\"host\": {\"type\": \"string\"}, "
                    "\"methods\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"pattern\": "
                    "\"^[A-Z-]{1,15}$\"}}, \"paths\": {\"type\": \"array\", \"items\": {\"type\": \"string\", "
                    "\"pattern\": \"^/\"}}}}}" },
        { .key = "/network/upstream_ca", .section = S_NET, .kind = SK_LIST, .set_str = brig_policy_add_upstream_ca,
          .dump = dump_egress,
          .cli = { { "upstream-ca", "FILE", "trust these CAs (PEM) for intercepted upstreams, besides the host's",
                     .prefix = true } },
          .schema = "{\"description\": \"PEM files of CAs trusted for intercepted upstreams, besides the host's "
                    "store (--upstream-ca).\", \"type\": \"array\", \"items\": {\"type\": \"string\", "
                    "\"pattern\": \"^/\"}}" },
        { .key = "/network/allow_unix", .section = S_NET, .kind = SK_LIST, .flags = SETTING_DUMP_LATE,
          .set_str = brig_policy_allow_unix, .offset = OFF(allow_unix), .omit_empty = true, .noun = "path",
          .cli = { { .name = "allow-unix", .arg = "PATH",
                     .help = "let the sandbox reach this unix socket of the host, on a read-only\n"
                     "grant (its own sockets always work; every other one is refused)",
                     .prefix = true } },
          .schema = "{\"description\": \"Pathname unix sockets whose listener is outside the sandbox that it may "
                    "connect or send to (--allow-unix): absolute paths as seen inside, without symlinks or '..'. The "
                    "sandbox's own sockets always work; every other socket is refused.\", \"type\": \"array\","
                    " \"items\": {\"type\": \"string\", \"pattern\": \"^/\", \"maxLength\": 107}}" },

        /* the run's outputs */
        { .key = "/audit/file", .section = S_REPORT, .kind = SK_PATH, .flags = BRIG_OPTION_RUN_ONLY,
          .set_str = brig_policy_set_audit_path, .offset = OFF(audit_path), .what = "a path",
          .cli = { { .name = "audit", .arg = "FILE",
                     .help = "write every refused (or logged) syscall as JSON lines" } },
          .schema = "{\"type\": \"string\", \"minLength\": 1}" },
        { .key = "/audit/no_exec", .section = S_REPORT, .kind = SK_BOOL, .set_flag = brig_policy_set_audit_no_exec,
          .offset = OFF(audit_no_exec),
          .cli = { { .name = "audit-no-exec", .arg = NULL,
                     .help = "leave exec and exit events out of the audit stream (each exec then\n"
                     "costs no round trip to brig)" } },
          .schema = "{\"description\": \"Leave exec and exit events out of the audit stream (--audit-no-exec; "
                    "docs/audit.md#exec-events).\", \"type\": \"boolean\"}" },
        { .key = "/audit/changes_max", .section = S_REPORT, .kind = SK_LIMIT, .limit = BRIG_LIMIT_CHANGES_MAX,
          .unit = SU_COUNT,
          .cli = { { .name = "changes-max", .arg = "N",
                     .help = "the most entries brig walks for file changes (the audit's files\n"
                     "event, --manifest, brig diff in bind mode; default 100000, 0: no cap)",
                     .prefix = true } },
          .schema = "{\"description\": \"The most entries brig's walks for file changes record: the audit "
                    "stream's files event, --manifest's workspace hash, brig diff of a bind-mode sandbox "
                    "(--changes-max; docs/audit.md#the-walks-limits). Past it the walk stops and says so. 0: no "
                    "cap.\", \"type\": \"integer\", \"minimum\": 0}" },
        { .section = S_REPORT, .kind = SK_CUSTOM, .flags = BRIG_OPTION_RUN_ONLY,
          .cli = { { .name = "audit-fd", .arg = "N", .help = "the audit stream to descriptor N (as --json-report-fd)",
                     .param = 2, .cli = cli_fd } } },
        { .key = "/manifest/file", .section = S_REPORT, .kind = SK_PATH, .flags = BRIG_OPTION_RUN_ONLY,
          .set_str = brig_policy_set_manifest_path, .offset = OFF(manifest_path), .what = "a path",
          .cli = { { .name = "manifest", .arg = "FILE",
                     .help = "write what replays this run (brig replay FILE): policy, argv, env,\n"
                     "the workspace's hash, what it ran, changed and reached" } },
          .schema = "{\"description\": \"Write what replays this run (--manifest; docs/audit.md#replay).\", "
                    "\"type\": \"string\", \"minLength\": 1}" },
        { .key = "/report/timings", .section = S_REPORT, .kind = SK_BOOL, .flags = BRIG_OPTION_RUN_ONLY,
          .set_flag = brig_policy_set_timings,
          .offset = OFF(timings),
          .cli = { { .name = "timings", .arg = NULL,
                     .help = "print how long each step of the start took, to stderr (and the\n"
                     "report's \"timings\"; docs/benchmarks.md)" } },
          .schema = "{\"description\": \"Stamp each step of the run (--timings): the report's timings, in "
                    "microseconds (docs/benchmarks.md#where-the-time-goes).\", \"type\": \"boolean\"}" },
        { .key = "/report/file", .section = S_REPORT, .kind = SK_PATH,
          .set_str = brig_policy_set_report_path, .offset = OFF(report_path), .what = "a path",
          .cli = { { .name = "json-report", .arg = "FILE", .help = "write a JSON report of the run" } },
          .schema = "{\"type\": \"string\", \"minLength\": 1}" },
        { .section = S_REPORT, .kind = SK_CUSTOM, .flags = BRIG_OPTION_RUN_ONLY,
          .cli = { { .name = "json-report-fd", .arg = "N",
                     .help = "the report to descriptor N, open in brig for writing (a pipe; never the sandbox's)",
                     .param = 1, .cli = cli_fd } } },

        /* tools */
        { .key = "/tools/copy_in", .section = S_TOOLS, .kind = SK_CUSTOM, .load = load_copy_ins,
          .dump = dump_copy_ins,
          .cli = { { .name = "copy-in", .arg = "SRC:DST",
                     .help = "copy a host file in at start for the sandbox user (mode 0400; DST in\n"
                     "$HOME (~/...), /tmp or a --tmpfs; never saved by a snapshot)", .cli = cli_copy_in },
                   { .name = "copy-in-secret", .arg = "SRC:DST",
                     .help = "the same for a file on the secret deny list (a deploy key in ~/.ssh)",
                     .param = BRIG_COPY_IN_SECRET, .cli = cli_copy_in } },
          .schema = "{\"description\": \"Host files copied in at start for the sandbox user (--copy-in, "
                    "--copy-in-secret): mode 0400 in brig's tmpfs, a symlink at the destination, which must lie in "
                    "$HOME, /tmp or a --tmpfs.\", \"type\": \"array\", \"items\": {\"type\": \"object\","
                    " \"additionalProperties\": false, \"required\": [\"source\", \"destination\"], \"properties\": {"
                    "\"source\": {\"description\": \"A regular file on the host, no symlink in its path; absolute or "
                    "~/ (the caller's home).\", \"$ref\": \"#/$defs/tilde_path\"},"
                    " \"destination\": {\"description\": \"Where it shows inside; absolute or ~/ (the sandbox's "
                    "$HOME).\", \"$ref\": \"#/$defs/tilde_path\"},"
                    " \"secret\": {\"description\": \"The source is on the secret deny list and is copied in on "
                    "purpose (--copy-in-secret).\", \"type\": \"boolean\"}}}}" },
        { .key = "/tools/ssh_agent", .section = S_TOOLS, .kind = SK_BOOL, .set_bool = brig_policy_set_ssh_agent,
          .dump = dump_tool_bool, .offset = offsetof(struct tools_policy, ssh_agent),
          .cli = { { .name = "ssh-agent", .arg = NULL,
                     .help = "relay the host's $SSH_AUTH_SOCK: list keys and sign only" } },
          .schema = "{\"description\": \"Relay the host's $SSH_AUTH_SOCK (--ssh-agent): listing keys and signing "
                    "only.\"}" },
        { .key = "/tools/git_identity", .section = S_TOOLS, .kind = SK_BOOL,
          .set_bool = brig_policy_set_git_identity, .dump = dump_tool_bool,
          .offset = offsetof(struct tools_policy, git_identity),
          .cli = { { .name = "git-identity", .arg = NULL,
                     .help = "a ~/.gitconfig with the host's user.name and user.email" } },
          .schema = "{\"description\": \"A ~/.gitconfig with the host's user.name and user.email "
                    "(--git-identity).\"}" },
        { .key = "/tools/carry_config", .section = S_TOOLS, .kind = SK_LIST, .set_str = brig_policy_carry_config,
          .dump = dump_carry,
          .cli = { { .name = "carry-config", .arg = "npm|pip",
                     .help = "the host's ~/.npmrc or pip.conf, keys on an allow list only (no tokens)",
                     .prefix = true } },
          .schema = "{\"description\": \"Host config files carried in with keys on an allow list only, never "
                    "credentials (--carry-config).\", \"type\": \"array\", \"items\": {\"enum\": [\"npm\", "
                    "\"pip\"]}}" },
};
const size_t n_settings = ARRAY_SIZE(settings);

/* ---- the command line ------------------------------------------------------------ */

/* "none, proxy, filtered or host", or quoted for a file's messages. */
static void choices_text(const struct setting_choice *c, bool quoted, char *buf, size_t n)
{
        size_t count = 0, used = 0;
        while (c[count].name)
                count++;
        buf[0] = '\0';
        for (size_t i = 0; i < count && used < n; i++)
                used += (size_t)snprintf(buf + used, n - used, "%s%s%s%s", i == 0 ? "" : i + 1 == count ? " or " : ", ",
                                         quoted ? "\"" : "", c[i].name, quoted ? "\"" : "");
}

const char *setting_choices_what(const struct setting *s, char *buf, size_t n)
{
        choices_text(s->choices, true, buf, n);
        return buf;
}

static int cli_enum(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                    brig_error **err)
{
        for (const struct setting_choice *c = s->choices; c->name; c++) {
                if (strcmp(c->name, arg) == 0) {
                        s->set_enum(p, c->value);
                        return 0;
                }
        }
        char names[256];
        choices_text(s->choices, false, names, sizeof names);
        return flag_err(err, "--%s '%s': expected %s", f->name, arg, names);
}

static int cli_net(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                   brig_error **err)
{
        int r = cli_enum(p, s, f, arg, err);
        if (r == 0 && strcmp(arg, "host") == 0 && p->notice)
                p->notice("--net host: the sandbox shares the host's network; nothing controls where it connects",
                          p->notice_data);
        return r;
}

static int cli_limit(brig_policy *p, const struct setting *s, const char *flag, const char *arg, brig_error **err)
{
        uint64_t v = 0;
        int r;
        switch (s->unit) {
        case SU_SIZE: r = brig_parse_size(arg, &v, err); break;
        case SU_COUNT: r = parse_count(flag, arg, &v, err); break;
        case SU_CPUS: r = parse_cpus(arg, &v, err); break;
        case SU_DURATION: r = brig_parse_duration(arg, &v, err); break;
        case SU_SECONDS:
                r = brig_parse_duration(arg, &v, err);
                v = (v + 999) / 1000;
                break;
        default: r = -EINVAL; break;
        }
        return r < 0 ? r : brig_policy_set_limit(p, s->limit, v, err);
}

/* The flag's value, parsed by the setting's kind. */
static int cli_by_kind(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *flag,
                       const char *arg, brig_error **err)
{
        uint64_t size;
        switch (s->kind) {
        case SK_BOOL:
                if (s->set_flag) {
                        s->set_flag(p, true);
                        return 0;
                }
                return s->set_bool(p, true, err);
        case SK_SIZE:
                return brig_parse_size(arg, &size, err) < 0 ? -EINVAL : s->set_u64(p, size, err);
        case SK_LIMIT:
                return cli_limit(p, s, flag, arg, err);
        case SK_PATH: {
                _cleanup_free_ char *abs = absolute(arg);
                return abs ? s->set_str(p, abs, err) : brig_err(err, ENOMEM, "%s", flag);
        }
        case SK_ENUM:
                if (!f->arg) {  /* --tty, --no-tty: the flag is the value */
                        s->set_enum(p, f->param);
                        return 0;
                }
                return cli_enum(p, s, f, arg, err);
        default:
                if (s->set_str)
                        return s->set_str(p, arg, err);
                return brig_err(err, EINVAL, "%s: not a setting of the command line", flag);
        }
}

static const struct setting_flag *find_flag(const char *name, const struct setting **owner)
{
        for (size_t i = 0; i < n_settings; i++)
                for (const struct setting_flag *f = settings[i].cli; f->name; f++)
                        if (strcmp(f->name, name) == 0) {
                                *owner = &settings[i];
                                return f;
                        }
        return NULL;
}

int brig_policy_set_option(brig_policy *p, const char *name, const char *value, brig_error **err)
{
        const struct setting *s = NULL;
        const struct setting_flag *f = name ? find_flag(name, &s) : NULL;
        if (!p || !f)
                return flag_err(err, "unknown option '--%s'", name ? name : "");
        if (!f->arg != !value)
                return flag_err(err, "option '--%s' %s", name, f->arg ? "needs a value" : "takes no value");
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", f->name);
        int r = f->cli ? f->cli(p, s, f, value, err) : cli_by_kind(p, s, f, flag, value, err);
        if (r < 0 && f->prefix)
                with_flag(flag, err, r);
        return r < 0 ? r : 0;
}

/* The public struct points into the table's strings (static storage). */
/* Every flag in the table's order, listed once per process: the CLI asks
 * for each index in turn (its getopt table, on every start), and walking
 * the settings from the top for each was quadratic. */
static struct {
        const struct setting *s;
        const struct setting_flag *f;
} flat[512];
static size_t n_flat;
static pthread_once_t flat_once = PTHREAD_ONCE_INIT;

static void flatten(void)
{
        size_t n = 0;
        for (size_t k = 0; k < n_settings; k++) {
                for (const struct setting_flag *f = settings[k].cli; f->name; f++, n++) {
                        if (n < ARRAY_SIZE(flat)) {
                                flat[n].s = &settings[k];
                                flat[n].f = f;
                        }
                }
        }
        n_flat = n <= ARRAY_SIZE(flat) ? n : 0;  /* a table past it: walked as before */
}

int brig_policy_option_info(size_t i, brig_option_info *info)
{
        if (!info || info->size < sizeof(brig_option_info))
                return -EINVAL;
        if (info->size > 4096)
                return -E2BIG;
        pthread_once(&flat_once, flatten);
        const struct setting *s = NULL;
        const struct setting_flag *f = NULL;
        if (n_flat) {
                if (i >= n_flat)
                        return -ENOENT;
                s = flat[i].s;
                f = flat[i].f;
        }
        for (size_t k = 0; !f && k < n_settings; k++) {
                for (const struct setting_flag *g = settings[k].cli; !f && g->name; g++) {
                        if (i-- == 0) {
                                s = &settings[k];
                                f = g;
                        }
                }
        }
        if (!f)
                return -ENOENT;
        uint32_t size = info->size;
        memset(info, 0, size);  /* a newer caller's fields too: zero, not garbage */
        info->size = size;
        info->name = f->name;
        info->arg = f->arg;
        info->help = f->help;
        info->section = s->section;
        info->key = s->key;
        info->flags = s->flags & (BRIG_OPTION_FIRST | BRIG_OPTION_RUN_ONLY);
        return 0;
}

/* ---- the schema of policy files (docs/policy.schema.json) ------------------------ */

static const char schema_defs[] =
        "{\"tilde_path\": {\"type\": \"string\", \"pattern\": \"^(/|~/)\"},"
        " \"absolute_path\": {\"type\": \"string\", \"pattern\": \"^/\"},"
        " \"mount_destination\": {\"type\": \"string\", \"pattern\": \"^/\", \"not\": {\"type\": \"string\","
        " \"pattern\": \"^/+((proc|dev)(/.*)?)?$\"}},"
        " \"env_name\": {\"type\": \"string\", \"pattern\": \"^[A-Za-z_][A-Za-z0-9_]*$\"},"
        " \"host_pattern\": {\"type\": \"string\", \"minLength\": 1},"
        " \"count\": {\"type\": \"integer\", \"minimum\": 0},"
        " \"size\": {\"description\": \"Bytes, or a string with a binary unit: \\\"512M\\\", \\\"1.5G\\\", "
        "\\\"64KiB\\\".\", \"oneOf\": [{\"type\": \"integer\", \"minimum\": 0}, {\"type\": \"string\", \"pattern\": "
        "\"^[0-9]+(\\\\.[0-9]+)?([KMGTkmgt][Ii]?[Bb]?|[Bb])?$\"}]},"
        " \"duration\": {\"description\": \"Seconds, or a string: \\\"90s\\\", \\\"10m\\\", \\\"1h30m\\\", "
        "\\\"500ms\\\", \\\"2d\\\".\", \"oneOf\": [{\"type\": \"integer\", \"minimum\": 0}, {\"type\": \"string\", "
        "\"pattern\": \"^([0-9]+(\\\\.[0-9]*)?(ms|s|m|h|d))+$|^[0-9]+(\\\\.[0-9]*)?$\"}]}}";

/* What the kind alone says of a value. */
static json_t *kind_schema(const struct setting *s)
{
        static const char *const units[] = { [SU_SIZE] = "#/$defs/size", [SU_COUNT] = "#/$defs/count",
                                             [SU_DURATION] = "#/$defs/duration", [SU_SECONDS] = "#/$defs/duration" };
        switch (s->kind) {
        case SK_BOOL: return json_pack("{s:s}", "type", "boolean");
        case SK_SIZE: return json_pack("{s:s}", "$ref", "#/$defs/size");
        case SK_LIMIT:
                if (s->unit == SU_CPUS)
                        return json_pack("{s:s, s:i, s:i}", "type", "number", "minimum", 0, "maximum", 4096);
                return json_pack("{s:s}", "$ref", units[s->unit]);
        case SK_STRING: return json_pack("{s:s}", "type", "string");
        case SK_PATH: return json_pack("{s:s}", "$ref", "#/$defs/absolute_path");
        case SK_LIST: return json_pack("{s:s, s:{s:s}}", "type", "array", "items", "type", "string");
        case SK_ENUM: {
                json_t *names = json_array();
                for (const struct setting_choice *c = s->choices; c->name; c++)
                        json_array_append_new(names, json_string(c->name));
                return json_pack("{s:o}", "enum", names);
        }
        default: return json_object();
        }
}

/* "size of /tmp (default 512M) (--tmp-size)": the --help text of each
 * flag in one line, "; " between flags. */
static json_t *help_description(const struct setting *s)
{
        if (!s->cli[0].name || !s->cli[0].help)
                return NULL;
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        if (!out)
                return NULL;
        for (const struct setting_flag *f = s->cli; f->name; f++) {
                if (!f->help)
                        continue;
                if (f != s->cli)
                        fputs("; ", out);
                for (const char *c = f->help; *c; c++)
                        fputc(*c == '\n' ? ' ' : *c, out);
                fprintf(out, " (--%s", f->name);
                for (const struct setting_flag *g = f + 1; g->name && !g->help; g++)
                        fprintf(out, ", --%s", g->name);
                fputc(')', out);
        }
        fclose(out);
        json_t *j = text ? json_string(text) : NULL;
        free(text);
        return j;
}

static json_t *setting_schema(const struct setting *s, const brig_policy *defaults)
{
        json_t *own = s->schema ? json_loads(s->schema, 0, NULL) : json_object();
        if (!own)
                return NULL;  /* an entry's schema text that is not JSON: test_settings says which */
        bool typed = json_object_get(own, "type") || json_object_get(own, "$ref") || json_object_get(own, "enum") ||
                     json_object_get(own, "oneOf");
        json_t *out = json_object();
        json_t *desc = json_incref(json_object_get(own, "description"));
        if (!desc)
                desc = help_description(s);
        if (desc)
                json_object_set_new(out, "description", desc);
        if (strcmp(s->key, "/extends") == 0) {  /* the built-in profiles' names */
                json_t *names = json_array();
                for (const char *const *n = brig_profile_names(); *n; n++)
                        json_array_append_new(names, json_string(*n));
                json_object_set_new(out, "enum", names);
        } else if (!typed) {
                json_t *kind = kind_schema(s);
                json_object_update(out, kind);
                json_decref(kind);
        }
        json_object_update(out, own);
        json_decref(own);
        /* a scalar's default: what a new policy's dump says */
        bool scalar = s->kind == SK_BOOL || s->kind == SK_SIZE || s->kind == SK_LIMIT || s->kind == SK_STRING ||
                      s->kind == SK_PATH || s->kind == SK_ENUM;
        json_t *dflt = scalar && !json_object_get(out, "default") ? setting_dump(defaults, s) : NULL;
        if (dflt)
                json_object_set_new(out, "default", dflt);
        return out;
}

/* The object at PATH ("/limits") in the schema, made on first use. */
static json_t *schema_object(json_t *root, const char *path)
{
        if (!*path)
                return root;
        json_t *props = json_object_get(root, "properties");
        const char *name = path + 1;
        json_t *o = json_object_get(props, name);
        if (o)
                return o;
        o = json_object();
        for (const struct setting_object *so = setting_objects; so->path; so++)
                if (strcmp(so->path, path) == 0 && so->description)
                        json_object_set_new(o, "description", json_string(so->description));
        json_object_set_new(o, "type", json_string("object"));
        json_object_set_new(o, "additionalProperties", json_false());
        json_object_set_new(o, "properties", json_object());
        json_object_set_new(props, name, o);
        return o;
}

char *brig_policy_schema(void)
{
        brig_policy *defaults = brig_policy_new();
        json_t *defs = json_loads(schema_defs, 0, NULL);
        json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:b, s:{}}", "$schema",
                                 "https://json-schema.org/draft/2020-12/schema", "title", "brig policy file",
                                 "description",
                                 "A brig policy (docs/policy.md), generated from the table of settings in "
                                 "src/lib/policy/settings.c that the loader follows: unknown keys are refused "
                                 "everywhere. Some checks only the loader makes (a path that exists in the syscall "
                                 "table, host pattern syntax, values below one page); `brig policy check FILE` is "
                                 "the authority.",
                                 "type", "object", "additionalProperties", 0, "properties");
        char *text = NULL;
        bool ok = defaults && defs && root;
        for (size_t i = 0; ok && i < n_settings; i++) {
                const struct setting *s = &settings[i];
                if (!s->key)
                        continue;
                const char *leaf = strrchr(s->key, '/');
                char parent[64];
                snprintf(parent, sizeof parent, "%.*s", (int)(leaf - s->key), s->key);
                json_t *v = setting_schema(s, defaults);
                ok = v && json_object_set_new(json_object_get(schema_object(root, parent), "properties"), leaf + 1,
                                              v) == 0;
        }
        if (ok && json_object_set(root, "$defs", defs) == 0)
                text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(defs);
        json_decref(root);
        brig_policy_free(defaults);
        return text;
}
