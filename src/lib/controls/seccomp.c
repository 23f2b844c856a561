/* seccomp.c — the syscall filter, built with libseccomp and loaded last,
 * just before execve.
 *
 * The default profile is an allowlist in the spirit of Docker's, tightened
 * for agents: a syscall it does not name fails with ENOSYS, so a call added
 * to a future kernel is refused and software falls back gracefully (glibc's
 * clone3 → clone). Calls refused on purpose fail with EPERM, each with its
 * reason next to it. A few calls are allowed only for some arguments
 * (clone, socket, ioctl, personality).
 *
 * The user's rules (--seccomp-allow/--seccomp-deny, policy files) replace
 * the default decision for the syscalls they name; a later rule wins.
 *
 * Refusals are "deny-log" and user rules may say "log". Refusals become
 * seccomp user notifications that the supervisor records and answers with
 * the errno, so the run's summary can name every refused call and the
 * flag that allows it (refusals.c) — all but the two whose ENOSYS is a
 * routine fallback (clone3, openat2: glibc and Node try clone3 for every
 * thread), which notify only with an audit stream (--audit FILE). With a
 * stream "log" notifies too ("continue"), so every refused or logged call
 * shows up without the kernel's audit subsystem; without one it is the
 * kernel's log. A refused call costs a round trip to the supervisor, not
 * a program that works.
 *
 * connect(2), and sendto(2) with a destination, always notify (whatever
 * would let them through: allow or log): the supervisor's unix socket
 * guard judges and makes them (unixguard.c). So every filter has a
 * listener, handed to the supervisor right after it is loaded. */
#define _GNU_SOURCE
#include "core/fsutil.h"
#include "core/model.h"
#include "core/sync.h"
#include "controls/seccomp_filter.h"
#include "core/reaper.h"
#include "persist/state.h"

#include <dirent.h>
#include <elf.h>
#include <jansson.h>
#include <link.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <fcntl.h>
#include "controls/scmp.h"
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)  /* Linux 5.19 */
#endif

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#define MAX_ERRNO 4095

/* ---- the default profile ------------------------------------------------ */

/* Allowed unconditionally. Names libseccomp or this architecture does not
 * know are skipped (they stay ENOSYS). */
static const char *const allowed[] = {
        /* processes and threads */
        "exit", "exit_group", "fork", "vfork", "execve", "execveat", "wait4", "waitid",
        "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "restart_syscall",
        "futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue", "arch_prctl",
        "prctl", "set_thread_area", "get_thread_area", "membarrier", "getcpu", "uname", "umask",
        "pidfd_open", "pidfd_send_signal", "sysinfo",
        /* scheduling and limits */
        "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam", "sched_setparam",
        "sched_getscheduler", "sched_setscheduler", "sched_get_priority_max",
        "sched_get_priority_min", "sched_rr_get_interval", "sched_getattr", "sched_setattr",
        "getpriority", "setpriority", "ioprio_get", "ioprio_set", "getrlimit", "setrlimit",
        "getrusage", "times",  /* prlimit64 is guarded below */
        /* further restriction only: a program may sandbox itself */
        "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
        "capget", "capset",
        /* identity (changes need capabilities the sandbox does not have) */
        "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
        "getresgid", "getgroups", "getpgid", "getpgrp", "getsid", "setsid", "setpgid", "setuid",
        "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
        "setgroups",
        /* signals (the pid namespace and Landlock keep them inside) */
        "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending", "rt_sigsuspend",
        "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "kill", "tkill",
        "tgkill", "pause", "alarm", "getitimer", "setitimer", "signalfd", "signalfd4",
        /* time (reading it; the setters are denied below) */
        "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
        "timer_create", "timer_delete", "timer_settime", "timer_gettime", "timer_getoverrun",
        "timerfd_create", "timerfd_settime", "timerfd_gettime",
        /* memory */
        "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock",
        "mlock2", "munlock", "mlockall", "munlockall", "memfd_create", "pkey_alloc", "pkey_free",
        "pkey_mprotect", "get_mempolicy", "set_mempolicy", "mbind", "remap_file_pages",
        "map_shadow_stack",
        /* files and directories */
        "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
        "pwritev2", "open", "openat", "creat", "close", "close_range", "lseek", "dup",
        "dup2", "dup3", "fcntl", "flock", "fsync", "fdatasync", "sync", "syncfs",
        "sync_file_range", "ftruncate", "truncate", "fallocate", "fadvise64", "readahead",
        "sendfile", "splice", "tee", "vmsplice", "copy_file_range", "stat", "fstat", "lstat",
        "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "getcwd",
        "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "link",
        "linkat", "unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat", "chmod",
        "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
        "utimes", "utimensat", "futimesat", "mknod", "mknodat", "getdents", "getdents64",
        "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr",
        "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "cachestat",
        "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
        /* waiting for events */
        "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
        "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
        /* legacy asynchronous I/O (databases use it; unlike io_uring it is small and old) */
        "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
        /* System V and POSIX IPC, in the sandbox's own IPC namespace */
        "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
        "shmget", "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
        "mq_timedreceive", "mq_notify", "mq_getsetattr",
        /* sockets (which families may be created is decided in guard_socket) */
        "connect", "bind", "listen", "accept", "accept4", "getsockname", "getpeername",
        "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
        "recvmmsg", "shutdown",
        /* randomness */
        "getrandom",
};

/* Refused with EPERM: the reason is on the line above each group. */
static const char *const denied[] = {
        /* keyrings are not namespaced: keys of other users and containers */
        "keyctl", "add_key", "request_key",
        /* eBPF programs run in the kernel: a large, often exploited surface */
        "bpf",
        /* perf events read kernel and other processes' state; exploit surface */
        "perf_event_open",
        /* userfaultfd stalls kernel page faults at will: a classic race widener */
        "userfaultfd",
        /* io_uring bypasses this filter (its operations are not syscalls) and is a top CVE source */
        "io_uring_setup", "io_uring_enter", "io_uring_register",
        /* inspecting or changing other processes' memory and files */
        "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
        /* the filesystem is fixed by brig; remounting could undo read-only grants */
        "mount", "umount", "umount2", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
        "fspick", "mount_setattr", "pivot_root", "chroot",
        /* new namespaces are how most container escapes begin (clone is guarded below) */
        "unshare", "setns",
        /* file handles open any inode of a filesystem, ignoring the mounts (the "shocker" escape) */
        "open_by_handle_at", "name_to_handle_at",
        /* the host kernel itself: replace, extend, stop */
        "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
        /* host-wide resources: swap, process accounting, disk quotas */
        "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
        /* the clock is the host's: setting it affects everything */
        "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
        /* fanotify watches whole filesystems, mounts included */
        "fanotify_init",
        /* the hostname is policy (--hostname), not the command's to change */
        "sethostname", "setdomainname",
        /* direct hardware port access and the kernel log */
        "iopl", "ioperm", "syslog",
};

/* Refused with ENOSYS although the default would do that anyway: named so a
 * reader sees the decision. */
static const char *const not_implemented[] = {
        /* clone3's flags live in memory that seccomp cannot read, so namespace
         * flags could not be refused; glibc falls back to clone on ENOSYS */
        "clone3",
        /* openat2's mode lives in memory too, so a setuid bit could not be
         * refused (see guard_mode); programs fall back to openat */
        "openat2",
};

/* Calls that set a file mode, which argument holds it, and for open and
 * openat the flags argument: there the mode means something only with
 * O_CREAT or O_TMPFILE, and callers may leave junk in it otherwise. */
#define NO_FLAGS 99
static const struct {
        const char *name;
        unsigned arg;
        unsigned flags_arg;
} mode_args[] = {
        { "chmod", 1, NO_FLAGS }, { "fchmod", 1, NO_FLAGS }, { "fchmodat", 2, NO_FLAGS },
        { "fchmodat2", 2, NO_FLAGS }, { "creat", 1, NO_FLAGS }, { "mknod", 1, NO_FLAGS },
        { "mknodat", 2, NO_FLAGS }, { "open", 2, 1 }, { "openat", 3, 2 },
};

/* ---- groups ------------------------------------------------------------- */

struct group {
        const char *name;
        const char *const *members;  /* syscall names or other groups, NULL-terminated */
};

#define MEMBERS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct group groups[] = {
        { "@clock", MEMBERS("settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime") },
        { "@debug", MEMBERS("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
                            "perf_event_open", "lookup_dcookie") },
        { "@io-uring", MEMBERS("io_uring_setup", "io_uring_enter", "io_uring_register") },
        { "@keyring", MEMBERS("keyctl", "add_key", "request_key") },
        { "@module", MEMBERS("init_module", "finit_module", "delete_module") },
        { "@mount", MEMBERS("mount", "umount", "umount2", "open_tree", "move_mount", "fsopen", "fsconfig",
                            "fsmount", "fspick", "mount_setattr", "pivot_root", "chroot") },
        /* clone's namespace flags stay guarded unless "clone" itself is named */
        { "@namespaces", MEMBERS("unshare", "setns") },
        { "@network", MEMBERS("socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
                              "getsockname", "getpeername", "getsockopt", "setsockopt", "sendto",
                              "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown") },
        { "@obsolete", MEMBERS("_sysctl", "afs_syscall", "bdflush", "break", "create_module", "ftime",
                               "get_kernel_syms", "getpmsg", "gtty", "idle", "lock", "mpx", "prof",
                               "profil", "putpmsg", "query_module", "security", "sgetmask", "ssetmask",
                               "stty", "sysfs", "tuxcall", "ulimit", "uselib", "ustat", "vserver",
                               "lookup_dcookie", "nfsservctl", "vm86", "vm86old") },
        { "@raw-io", MEMBERS("iopl", "ioperm", "pciconfig_iobase", "pciconfig_read", "pciconfig_write") },
        { "@reboot", MEMBERS("reboot", "kexec_load", "kexec_file_load") },
        { "@swap", MEMBERS("swapon", "swapoff") },
        /* what needs a capability in the host's namespaces to do anything */
        { "@privileged", MEMBERS("@clock", "@module", "@mount", "@raw-io", "@reboot", "@swap", "acct",
                                 "bpf", "fanotify_init", "open_by_handle_at", "quotactl", "quotactl_fd",
                                 "sethostname", "setdomainname", "syslog", "vhangup") },
};

static const struct group *find_group(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                if (strcmp(groups[i].name, name) == 0)
                        return &groups[i];
        return NULL;
}

/* Unnamed calls: ENOSYS (recorded with an audit stream), so new kernel
 * calls fall back gracefully. */
#define DEFAULT_ACTION_VALUE SCMP_ACT_TRACE(0x8000 | ENOSYS)

/* ---- brig's own actions --------------------------------------------------
 *
 * Resolved when the filter is compiled (resolve()): with an audit stream
 * they become SCMP_ACT_NOTIFY, without one a plain errno or the kernel's
 * log. Encoded in SCMP_ACT_TRACE's data, an action brig never uses. */
#define ACT_LOG SCMP_ACT_TRACE(0x4000)
#define ACT_DENY_LOG(e) SCMP_ACT_TRACE(0x8000 | (e))
/* A refusal that is a routine fallback: notified only for an audit stream. */
#define ACT_DENY_QUIET(e) SCMP_ACT_TRACE(0x8000 | 0x1000 | (e))

static bool is_deny_log(uint32_t a)
{
        return (a & 0xffff0000U) == SCMP_ACT_TRACE(0) && (a & 0x8000);
}

/* Set while one filter is compiled (per thread: brig_run may run in many). */
static _Thread_local bool compiling_for_audit, compiling_for_refusals;
/* ... with exec events (audit.c): execve and execveat notify. */
static _Thread_local bool compiling_exec_events;
/* ... or the supervisor's answers (build_replies): a "log" of connect or
 * sendto stays SCMP_ACT_LOG there, so the answer tells it from an allow. */
static _Thread_local bool compiling_for_replies;

static uint32_t resolve(uint32_t action)
{
        if (action == ACT_LOG)
                return compiling_for_audit ? SCMP_ACT_NOTIFY : SCMP_ACT_LOG;
        bool quiet = action & 0x1000;
        if (is_deny_log(action))
                return compiling_for_audit || (compiling_for_refusals && !quiet) ? SCMP_ACT_NOTIFY
                                                                                 : SCMP_ACT_ERRNO(action & 0xfff);
        return action;
}

/* ---- the user's rules --------------------------------------------------- */

/* One argument condition: a0..a5 compared with a value, e.g. "a0==16",
 * "a2>=4", "a1&0x3==0x1" (masked equality). */
struct cond {
        unsigned arg;
        enum scmp_compare op;
        uint64_t mask;  /* SCMP_CMP_MASKED_EQ */
        uint64_t value;
};
#define MAX_CONDS 6

struct seccomp_rule {
        char *name;       /* a syscall or an @group, as written (conditions included) */
        char *target;     /* the syscall or @group alone */
        char *action_text;  /* as written, for `brig policy show` */
        uint32_t action;  /* SCMP_ACT_* or brig's own (ACT_LOG, ACT_DENY_LOG) */
        struct cond conds[MAX_CONDS];
        unsigned n_conds; /* all must hold */
};

struct seccomp_policy {
        struct seccomp_rule *rules;
        size_t n;
};

static int parse_errno(const char *text, int *out)
{
        char *end;
        errno = 0;
        long n = strtol(text, &end, 10);
        if (*text && *end == '\0' && errno == 0) {
                if (n < 1 || n > MAX_ERRNO)
                        return -ERANGE;
                *out = (int)n;
                return 0;
        }
        for (int e = 1; e <= MAX_ERRNO; e++) {
                const char *name = strerrorname_np(e);
                if (name && strcmp(name, text) == 0) {
                        *out = e;
                        return 0;
                }
        }
        return -EINVAL;
}

static int parse_action(const char *rule, const char *text, uint32_t *out, brig_error **err)
{
        if (strcmp(text, "allow") == 0)
                *out = SCMP_ACT_ALLOW;
        else if (strcmp(text, "kill") == 0)
                *out = SCMP_ACT_KILL_PROCESS;
        else if (strcmp(text, "log") == 0)
                *out = ACT_LOG;
        else if (strcmp(text, "deny-log") == 0)
                *out = ACT_DENY_LOG(EPERM);
        else if (strncmp(text, "errno:", 6) == 0) {
                int e;
                if (parse_errno(text + 6, &e) < 0)
                        return brig_err(err, EINVAL,
                                        "syscall rule '%s': '%s' is not an errno (a number 1-%d or a name like EPERM)",
                                        rule, text + 6, MAX_ERRNO);
                *out = SCMP_ACT_ERRNO(e);
        } else
                return brig_err(err, EINVAL,
                                "syscall rule '%s': unknown action '%s' (expected allow, kill, log, deny-log or errno:N)",
                                rule, text);
        return 0;
}

static int parse_value(const char *text, uint64_t *out)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 0);
        if (errno || end == text || *end || text[0] == '-')
                return -EINVAL;
        *out = v;
        return 0;
}

/* "a0==16", "a1!=0", "a2<5", "a2<=5", "a2>5", "a2>=5", "a1&0x3==0x1" */
static int parse_cond(const char *rule, const char *text, struct cond *c, brig_error **err)
{
        static const struct { const char *op; enum scmp_compare cmp; } ops[] = {
                { "==", SCMP_CMP_EQ }, { "!=", SCMP_CMP_NE }, { "<=", SCMP_CMP_LE },
                { ">=", SCMP_CMP_GE }, { "<", SCMP_CMP_LT }, { ">", SCMP_CMP_GT },
        };
        if (text[0] != 'a' || text[1] < '0' || text[1] > '5')
                goto bad;
        *c = (struct cond){ .arg = (unsigned)(text[1] - '0'), .mask = ~0ULL };
        const char *p = text + 2;
        if (*p == '&') {  /* masked equality: aN&MASK==VALUE */
                const char *eq = strstr(p, "==");
                _cleanup_free_ char *mask = eq ? strndup(p + 1, (size_t)(eq - p - 1)) : NULL;
                if (!mask || parse_value(mask, &c->mask) < 0 || parse_value(eq + 2, &c->value) < 0)
                        goto bad;
                c->op = SCMP_CMP_MASKED_EQ;
                c->value &= c->mask;
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
                size_t n = strlen(ops[i].op);
                if (strncmp(p, ops[i].op, n) == 0) {
                        c->op = ops[i].cmp;
                        if (parse_value(p + n, &c->value) < 0)
                                goto bad;
                        return 0;
                }
        }
bad:
        return brig_err(err, EINVAL,
                        "syscall rule '%s': condition '%s' is not aN OP VALUE (N 0-5; OP ==, !=, <, <=, >, >=; "
                        "or aN&MASK==VALUE)", rule, text);
}

/* "name" or "name(cond,cond,...)" */
static int parse_target(const char *rule, char **target, struct cond *conds, unsigned *n, brig_error **err)
{
        const char *open = strchr(rule, '(');
        *n = 0;
        *target = open ? strndup(rule, (size_t)(open - rule)) : strdup(rule);
        if (!*target)
                return brig_err(err, ENOMEM, "syscall rule");
        if (!open)
                return 0;
        size_t len = strlen(open);
        if (len < 2 || open[len - 1] != ')')
                return brig_err(err, EINVAL, "syscall rule '%s': expected NAME(aN OP VALUE,...)", rule);
        _cleanup_free_ char *list = strndup(open + 1, len - 2);
        if (!list)
                return brig_err(err, ENOMEM, "syscall rule");
        char *save = NULL;
        for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
                if (*n == MAX_CONDS)
                        return brig_err(err, EINVAL, "syscall rule '%s': at most %d conditions", rule, MAX_CONDS);
                int r = parse_cond(rule, c, &conds[(*n)++], err);
                if (r < 0)
                        return r;
        }
        if (*n == 0)
                return brig_err(err, EINVAL, "syscall rule '%s': empty condition list", rule);
        return 0;
}

static bool guarded(const char *name);

int seccomp_policy_add(struct seccomp_policy **sp, const char *name, const char *action, brig_error **err)
{
        if (!name || !*name)
                return brig_err(err, EINVAL, "syscall rule: empty syscall name");
        struct cond conds[MAX_CONDS];
        unsigned n_conds = 0;
        _cleanup_free_ char *target = NULL;
        int r = parse_target(name, &target, conds, &n_conds, err);
        if (r < 0)
                return r;
        if (target[0] == '@') {
                if (!find_group(target))
                        return brig_err(err, EINVAL, "syscall rule: unknown syscall group '%s'", target);
                if (n_conds)
                        return brig_err(err, EINVAL, "syscall rule '%s': conditions need one syscall, not a group",
                                        name);
        } else if ((r = scmp_load(err)) < 0) {
                return r;  /* libseccomp names the calls: without it, say why rather than abort */
        } else if (seccomp_syscall_resolve_name(target) < 0) {
                /* Also refuses calls that exist only on other architectures
                 * (negative pseudo numbers such as socketcall on x86_64). */
                return brig_err(err, EINVAL, "syscall rule: unknown syscall '%s'", target);
        }
        if (n_conds && guarded(target))
                return brig_err(err, EINVAL,
                                "syscall rule '%s': '%s' already has argument checks of its own; "
                                "give it an unconditional rule instead", name, target);
        uint32_t act = 0;
        r = parse_action(name, action ? action : "", &act, err);
        if (r < 0)
                return r;

        struct seccomp_policy *p = *sp;
        if (!p) {
                p = calloc(1, sizeof *p);
                if (!p)
                        return brig_err(err, ENOMEM, "syscall rule");
                *sp = p;
        }
        struct seccomp_rule *n = realloc(p->rules, (p->n + 1) * sizeof *n);
        if (!n)
                return brig_err(err, ENOMEM, "syscall rule");
        p->rules = n;
        char *copy = strdup(name);
        if (!copy)
                return brig_err(err, ENOMEM, "syscall rule");
        struct seccomp_rule *rule = &p->rules[p->n++];
        *rule = (struct seccomp_rule){ .name = copy, .target = TAKE_PTR(target), .action = act, .n_conds = n_conds,
                                       .action_text = strdup(action) };
        if (!rule->action_text)
                return brig_err(err, ENOMEM, "syscall rule");
        memcpy(rule->conds, conds, n_conds * sizeof *conds);
        return 0;
}

void seccomp_policy_free(struct seccomp_policy *sp)
{
        if (!sp)
                return;
        for (size_t i = 0; i < sp->n; i++) {
                free(sp->rules[i].name);
                free(sp->rules[i].target);
                free(sp->rules[i].action_text);
        }
        free(sp->rules);
        free(sp);
}

/* ---- decisions: one per syscall, then turned into rules ----------------- */

enum guard {
        GUARD_NONE,         /* `action`, whatever the arguments */
        GUARD_CLONE,        /* no namespace flags */
        GUARD_SOCKET,       /* only some address families */
        GUARD_IOCTL,        /* no terminal injection */
        GUARD_PERSONALITY,  /* only harmless personas */
        GUARD_PRLIMIT,      /* no other process's limits changed */
        GUARD_MODE,         /* no setuid/setgid bits in a file mode */
        GUARD_USER,         /* a user rule with conditions; `fallback` otherwise */
};

struct decision {
        int nr;
        uint32_t action;  /* GUARD_NONE, GUARD_USER */
        enum guard guard;
        const struct seccomp_rule *rule;  /* GUARD_USER */
        uint32_t fallback;                /* GUARD_USER: when the conditions do not hold */
};

static const char *const guarded_names[] = { "clone", "socket", "socketpair", "ioctl", "personality", "prlimit64" };

static bool guarded(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(guarded_names); i++)
                if (strcmp(guarded_names[i], name) == 0)
                        return true;
        for (size_t i = 0; i < ARRAY_SIZE(mode_args); i++)
                if (strcmp(mode_args[i].name, name) == 0)
                        return true;
        return false;
}

struct table {
        struct decision *d;
        size_t n;
};

/* Record a decision for nr; a later one replaces an earlier one. */
static int decide(struct table *t, int nr, uint32_t action, enum guard guard)
{
        for (size_t i = 0; i < t->n; i++)
                if (t->d[i].nr == nr) {
                        t->d[i] = (struct decision){ .nr = nr, .action = action, .guard = guard };
                        return 0;
                }
        struct decision *n = realloc(t->d, (t->n + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        t->d = n;
        t->d[t->n++] = (struct decision){ .nr = nr, .action = action, .guard = guard };
        return 0;
}

/* A conditional user rule: its action where the conditions hold, the
 * decision it replaces (or the default) elsewhere. */
static int decide_conditional(struct table *t, const struct seccomp_rule *rule)
{
        int nr = seccomp_syscall_resolve_name(rule->target);
        if (nr < 0)
                return 0;
        uint32_t fallback = DEFAULT_ACTION_VALUE;
        for (size_t i = 0; i < t->n; i++)
                if (t->d[i].nr == nr)
                        fallback = t->d[i].guard == GUARD_USER ? t->d[i].fallback : t->d[i].action;
        int r = decide(t, nr, rule->action, GUARD_USER);
        for (size_t i = 0; r == 0 && i < t->n; i++)
                if (t->d[i].nr == nr) {
                        t->d[i].rule = rule;
                        t->d[i].fallback = fallback;
                }
        return r;
}

/* Names unknown here (newer than libseccomp, or of another architecture)
 * are skipped: they stay at the default, ENOSYS. */
static int decide_name(struct table *t, const char *name, uint32_t action, enum guard guard)
{
        int nr = seccomp_syscall_resolve_name(name);
        return nr < 0 ? 0 : decide(t, nr, action, guard);
}

static int decide_list(struct table *t, const char *const *names, size_t n, uint32_t action)
{
        for (size_t i = 0; i < n; i++) {
                int r = decide_name(t, names[i], action, GUARD_NONE);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int default_profile(struct table *t)
{
        int r = decide_list(t, allowed, ARRAY_SIZE(allowed), SCMP_ACT_ALLOW);
        if (r == 0)
                r = decide_list(t, denied, ARRAY_SIZE(denied), ACT_DENY_LOG(EPERM));
        if (r == 0)
                r = decide_list(t, not_implemented, ARRAY_SIZE(not_implemented), ACT_DENY_QUIET(ENOSYS));
        if (r == 0)
                r = decide_name(t, "clone", 0, GUARD_CLONE);
        if (r == 0)
                r = decide_name(t, "socket", 0, GUARD_SOCKET);
        if (r == 0)
                r = decide_name(t, "socketpair", 0, GUARD_SOCKET);
        if (r == 0)
                r = decide_name(t, "ioctl", 0, GUARD_IOCTL);
        if (r == 0)
                r = decide_name(t, "personality", 0, GUARD_PERSONALITY);
        if (r == 0)
                r = decide_name(t, "prlimit64", 0, GUARD_PRLIMIT);
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(mode_args); i++)
                r = decide_name(t, mode_args[i].name, 0, GUARD_MODE);
        return r;
}

static int decide_group_or_name(struct table *t, const char *name, uint32_t action, int depth)
{
        if (name[0] != '@')
                return decide_name(t, name, action, GUARD_NONE);
        const struct group *g = find_group(name);
        if (!g || depth > 4)
                return -EINVAL;  /* validated when the rule was added */
        for (const char *const *m = g->members; *m; m++) {
                int r = decide_group_or_name(t, *m, action, depth + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- argument guards ---------------------------------------------------- */

/* The arguments these guards look at are 32-bit in the kernel (int family,
 * unsigned int cmd and persona, the low half of clone's flags), so they
 * compare only the low 32 bits: a value with high bits set (the
 * CVE-2019-10063 trick) is judged as the kernel will read it. */
#define LOW32 0xffffffffULL

/* Unnamed calls: ENOSYS, so new kernel calls fall back gracefully. */
#define DEFAULT_ACTION ACT_DENY_LOG(ENOSYS)
_Static_assert(DEFAULT_ACTION == DEFAULT_ACTION_VALUE, "one default");

/* The default of the program being compiled (compile_scmp). */
static _Thread_local uint32_t compiling_default;

/* A rule whose action is the program's default is left out: libseccomp
 * refuses one (EACCES), and in a program of argument checks whose default
 * is what a call decides otherwise (compile) it is the complement of that
 * call's other rules, which the default decides alike. */
static int add_exact(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned n, const struct scmp_arg_cmp *cmp)
{
        if (action == compiling_default)
                return 0;
        int r = seccomp_rule_add_exact_array(ctx, action, nr, n, cmp);
        return r == -EEXIST ? 0 : r;  /* the same rule twice is fine */
}

/* connect(2), and sendto(2) with a destination, are never simply allowed
 * (or only logged by the kernel): they notify the supervisor, whose unix
 * socket guard decides and makes the call itself (unixguard.c). sendto
 * without a destination (send(2)) stays a plain allow: argument 4 is a
 * register, the kernel reads no address when it is NULL.
 *
 * The action a rule for nr gets; *dest: a passing sendto, whose rule is
 * two, on whether argument 4 is NULL (add_rule). */
static uint32_t final_action(uint32_t action, int nr, bool *dest)
{
        action = resolve(action);
        bool passes = action == SCMP_ACT_ALLOW || (action == SCMP_ACT_LOG && !compiling_for_replies);
        *dest = false;
        /* An exec the policy lets run stops for the supervisor, which
         * records it and lets it go on (unixguard.c, exec_observe): the
         * kernel reports it, so nothing inside can skip or fake the event. */
        if (passes && compiling_exec_events && (nr == SCMP_SYS(execve) || nr == SCMP_SYS(execveat)))
                return SCMP_ACT_NOTIFY;
        if (passes && nr == SCMP_SYS(connect))
                return SCMP_ACT_NOTIFY;
        *dest = passes && nr == SCMP_SYS(sendto);
        return action;
}

static int add_rule(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned n, const struct scmp_arg_cmp *cmp)
{
        bool dest;
        action = final_action(action, nr, &dest);
        if (!dest)
                return add_exact(ctx, action, nr, n, cmp);
        struct scmp_arg_cmp with[MAX_CONDS + 1];
        if (n)
                memcpy(with, cmp, n * sizeof *cmp);
        with[n] = (struct scmp_arg_cmp)SCMP_A4(SCMP_CMP_NE, 0);
        int r = add_exact(ctx, SCMP_ACT_NOTIFY, nr, n + 1, with);
        with[n] = (struct scmp_arg_cmp)SCMP_A4(SCMP_CMP_EQ, 0);
        return r ?: add_exact(ctx, action, nr, n + 1, with);
}

/* `action` when the low 32 bits of argument `arg` are one of `set`, plus the
 * optional `also` comparison on another argument. */
static int add_inside(scmp_filter_ctx ctx, uint32_t action, int nr, const struct scmp_arg_cmp *also,
                      unsigned arg, const uint32_t *set, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                struct scmp_arg_cmp cmp[2] = { { arg, SCMP_CMP_MASKED_EQ, LOW32, set[i] } };
                if (also)
                        cmp[1] = *also;
                int r = add_rule(ctx, action, nr, also ? 2 : 1, cmp);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* `action` when the low 32 bits of argument `arg` are NOT in `set`.
 *
 * libseccomp cannot say "not in" (an unconditional rule swallows the
 * conditional ones, and one rule cannot compare an argument twice), so the
 * complement is spelled out as disjoint masked compares: walk the bits from
 * the top; wherever no member of the set continues the prefix, every value
 * with that prefix is outside. At most 32 rules per member. */
static int add_outside(scmp_filter_ctx ctx, uint32_t action, int nr, const struct scmp_arg_cmp *also,
                       unsigned arg, const uint32_t *set, size_t n, int bit, uint32_t prefix)
{
        uint64_t mask = bit == 31 ? 0 : (LOW32 << (bit + 1)) & LOW32;
        bool any = false;
        for (size_t i = 0; i < n; i++)
                any |= (set[i] & mask) == prefix;
        if (!any) {
                struct scmp_arg_cmp cmp[2] = { { arg, SCMP_CMP_MASKED_EQ, mask, prefix } };
                if (also)
                        cmp[1] = *also;
                return add_rule(ctx, action, nr, also ? 2 : 1, cmp);
        }
        if (bit < 0)
                return 0;  /* a member itself: not ours to decide */
        int r = add_outside(ctx, action, nr, also, arg, set, n, bit - 1, prefix);
        if (r == 0)
                r = add_outside(ctx, action, nr, also, arg, set, n, bit - 1, prefix | (1U << bit));
        return r;
}

static int guard_clone(scmp_filter_ctx ctx, int nr)
{
        /* CLONE_NEWTIME (0x80) is not here: for clone() that bit is part of
         * the exit signal; time namespaces need unshare or clone3. */
        static const uint64_t ns_flags[] = { CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET };
        uint64_t all = 0;
        for (size_t i = 0; i < ARRAY_SIZE(ns_flags); i++) {
                all |= ns_flags[i];
                /* A new namespace is how most container escapes begin. */
                struct scmp_arg_cmp with = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]);
                int r = add_rule(ctx, ACT_DENY_LOG(EPERM), nr, 1, &with);
                if (r < 0)
                        return r;
        }
        struct scmp_arg_cmp without = SCMP_A0(SCMP_CMP_MASKED_EQ, all, 0);
        return add_rule(ctx, SCMP_ACT_ALLOW, nr, 1, &without);
}

/* Address families: AF_UNIX, AF_INET, AF_INET6, and netlink route. Every
 * other family is refused with EAFNOSUPPORT: AF_PACKET and raw sockets
 * reach the link layer, AF_ALG, AF_VSOCK, AF_TIPC, AF_RDS and the like are
 * rarely used kernel code (often loaded on demand) with a long CVE record.
 *
 * NETLINK_ROUTE is allowed because glibc asks it for the local addresses
 * (getaddrinfo with AI_ADDRCONFIG, getifaddrs: Node, Go, `ip addr`). It is
 * read-only here: it sees the sandbox's own network namespace, and changing
 * anything needs CAP_NET_ADMIN, which the sandbox does not have. Other
 * netlink protocols (audit, uevent, netfilter, xfrm, generic) are refused. */
static int guard_socket(scmp_filter_ctx ctx, int nr)
{
        static const uint32_t families[] = { AF_UNIX, AF_INET, AF_INET6 };
        static const uint32_t with_netlink[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
        static const uint32_t route[] = { 0 /* NETLINK_ROUTE */ };
        const uint32_t refuse = ACT_DENY_LOG(EAFNOSUPPORT);
        int r = add_inside(ctx, SCMP_ACT_ALLOW, nr, NULL, 0, families, ARRAY_SIZE(families));
        if (r == 0)
                r = add_outside(ctx, refuse, nr, NULL, 0, with_netlink, ARRAY_SIZE(with_netlink), 31, 0);
        struct scmp_arg_cmp netlink = SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK);
        if (r == 0)
                r = add_inside(ctx, SCMP_ACT_ALLOW, nr, &netlink, 2, route, 1);
        if (r == 0)
                r = add_outside(ctx, refuse, nr, &netlink, 2, route, 1, 31, 0);
        return r;
}

/* TIOCSTI pushes bytes into a terminal's input and TIOCLINUX can paste the
 * console selection: both type commands into the caller's shell if a
 * terminal of theirs is ever reachable. */
static int guard_ioctl(scmp_filter_ctx ctx, int nr)
{
        static const uint32_t injecting[] = { TIOCSTI, TIOCLINUX };
        int r = add_inside(ctx, ACT_DENY_LOG(EPERM), nr, NULL, 1, injecting, ARRAY_SIZE(injecting));
        if (r == 0)
                r = add_outside(ctx, SCMP_ACT_ALLOW, nr, NULL, 1, injecting, ARRAY_SIZE(injecting), 31, 0);
        return r;
}

/* Docker's harmless personas: Linux, 32-bit uname (`linux32` in build
 * scripts; the i386 ABI itself is still killed), 2.6-style uname, and the
 * query. Refused: ADDR_NO_RANDOMIZE (turns off ASLR for what runs next),
 * READ_IMPLIES_EXEC, MMAP_PAGE_ZERO and the other exploit helpers. */
static int guard_personality(scmp_filter_ctx ctx, int nr)
{
        static const uint32_t harmless[] = { PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32, 0xffffffff };
        int r = add_inside(ctx, SCMP_ACT_ALLOW, nr, NULL, 0, harmless, ARRAY_SIZE(harmless));
        if (r == 0)
                r = add_outside(ctx, ACT_DENY_LOG(EPERM), nr, NULL, 0, harmless, ARRAY_SIZE(harmless), 31, 0);
        return r;
}

/* A process's own limits, read or set (glibc's getrlimit and setrlimit
 * are prlimit64(0, ...)), and anyone's read (no new limit): never another
 * process's changed. Everything inside runs as one user, whose processes
 * the kernel lets change each other's limits: a command would lower the
 * open-file limit of pid 1 (whose poll then fails: every later exec
 * hangs) or of the spare waiting for the next exec (which then dies
 * before it runs, or runs under the limit). */
static int guard_prlimit(scmp_filter_ctx ctx, int nr)
{
        /* Four rules on the same two arguments: beside rules on one of
         * them, libseccomp's whole program (where a decision's sub-program
         * runs out, compile()) answered other processes' sets with its
         * default (test_seccomp_decisions.py). A pid whose high bits are
         * set but not its low ones is the caller's own to the kernel: not
         * 0 here, so refused if it sets, which costs no real caller. */
        const struct scmp_arg_cmp own_reads[2] = { SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0) };
        const struct scmp_arg_cmp own_sets[2] = { SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_NE, 0) };
        const struct scmp_arg_cmp others_reads[2] = { SCMP_A0(SCMP_CMP_NE, 0), SCMP_A2(SCMP_CMP_EQ, 0) };
        const struct scmp_arg_cmp others_sets[2] = { SCMP_A0(SCMP_CMP_NE, 0), SCMP_A2(SCMP_CMP_NE, 0) };
        int r = add_rule(ctx, SCMP_ACT_ALLOW, nr, 2, own_reads);
        if (r == 0)
                r = add_rule(ctx, SCMP_ACT_ALLOW, nr, 2, own_sets);
        if (r == 0)
                r = add_rule(ctx, SCMP_ACT_ALLOW, nr, 2, others_reads);
        if (r == 0)
                r = add_rule(ctx, ACT_DENY_LOG(EPERM), nr, 2, others_sets);
        return r;
}

/* No setuid or setgid bits, ever: every mount inside is nosuid, so they
 * mean nothing to the sandbox, but a file left in the workspace keeps them
 * on the host. As root with a root-owned workspace the sandbox's files are
 * root's on disk (idmapped mount), and a setuid bit there would hand any
 * local user root. openat2 (mode in memory, unreadable here) is ENOSYS. */
static int guard_mode(scmp_filter_ctx ctx, int nr)
{
        unsigned arg = 0, flags_arg = NO_FLAGS;
        for (size_t i = 0; i < ARRAY_SIZE(mode_args); i++)
                if (seccomp_syscall_resolve_name(mode_args[i].name) == nr) {
                        arg = mode_args[i].arg;
                        flags_arg = mode_args[i].flags_arg;
                }
        /* The flags that make open() create a file with the given mode.
         * O_TMPFILE is two bits, __O_TMPFILE's own and O_DIRECTORY's: its
         * own alone, so that open(O_DIRECTORY) with junk in its mode is not
         * creating (and the kernel refuses the own bit without the other). */
        static const uint64_t creating[] = { O_CREAT, __O_TMPFILE & ~O_DIRECTORY };
        static const uint64_t bits[] = { S_ISUID, S_ISGID };
        int r = 0;
        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(bits); i++) {
                struct scmp_arg_cmp with[2] = { { arg, SCMP_CMP_MASKED_EQ, bits[i], bits[i] } };
                if (flags_arg == NO_FLAGS) {
                        r = add_rule(ctx, ACT_DENY_LOG(EPERM), nr, 1, with);
                        continue;
                }
                for (size_t c = 0; r == 0 && c < ARRAY_SIZE(creating); c++) {
                        with[1] = (struct scmp_arg_cmp){ flags_arg, SCMP_CMP_MASKED_EQ, creating[c], creating[c] };
                        r = add_rule(ctx, ACT_DENY_LOG(EPERM), nr, 2, with);
                }
        }
        struct scmp_arg_cmp clean = { arg, SCMP_CMP_MASKED_EQ, S_ISUID | S_ISGID, 0 };
        if (r == 0)
                r = add_rule(ctx, SCMP_ACT_ALLOW, nr, 1, &clean);
        if (r == 0 && flags_arg != NO_FLAGS) {
                /* not creating anything: the mode argument is ignored */
                struct scmp_arg_cmp opening = { flags_arg, SCMP_CMP_MASKED_EQ, creating[0] | creating[1], 0 };
                r = add_rule(ctx, SCMP_ACT_ALLOW, nr, 1, &opening);
        }
        return r;
}

static struct scmp_arg_cmp to_cmp(const struct cond *c, enum scmp_compare op)
{
        struct scmp_arg_cmp cmp = { .arg = c->arg, .op = op, .datum_a = c->value };
        if (op == SCMP_CMP_MASKED_EQ) {
                cmp.datum_a = c->mask;
                cmp.datum_b = c->value;
        }
        return cmp;
}

/* The rule's action where all its conditions hold; the fallback where any
 * fails. libseccomp has no "otherwise", so each failing condition is
 * spelled out: ==/!=, </>=, <=/> negate each other; a masked equality
 * fails where any bit under the mask differs (one rule per bit). */
static int guard_user(scmp_filter_ctx ctx, const struct decision *d)
{
        const struct seccomp_rule *rule = d->rule;
        struct scmp_arg_cmp all[MAX_CONDS];
        for (unsigned i = 0; i < rule->n_conds; i++)
                all[i] = to_cmp(&rule->conds[i], rule->conds[i].op);
        int r = add_rule(ctx, d->action, d->nr, rule->n_conds, all);
        for (unsigned i = 0; r == 0 && i < rule->n_conds; i++) {
                const struct cond *c = &rule->conds[i];
                static const enum scmp_compare negated[] = {
                        [SCMP_CMP_EQ] = SCMP_CMP_NE, [SCMP_CMP_NE] = SCMP_CMP_EQ, [SCMP_CMP_LT] = SCMP_CMP_GE,
                        [SCMP_CMP_GE] = SCMP_CMP_LT, [SCMP_CMP_LE] = SCMP_CMP_GT, [SCMP_CMP_GT] = SCMP_CMP_LE,
                };
                if (c->op != SCMP_CMP_MASKED_EQ) {
                        struct scmp_arg_cmp cmp = to_cmp(c, negated[c->op]);
                        r = add_rule(ctx, d->fallback, d->nr, 1, &cmp);
                        continue;
                }
                for (int bit = 0; r == 0 && bit < 64; bit++) {
                        uint64_t b = 1ULL << bit;
                        if (!(c->mask & b))
                                continue;
                        struct scmp_arg_cmp cmp = { c->arg, SCMP_CMP_MASKED_EQ, b, ~c->value & b };
                        r = add_rule(ctx, d->fallback, d->nr, 1, &cmp);
                }
        }
        return r;
}

static int add_decision(scmp_filter_ctx ctx, const struct decision *d)
{
        switch (d->guard) {
        case GUARD_CLONE: return guard_clone(ctx, d->nr);
        case GUARD_SOCKET: return guard_socket(ctx, d->nr);
        case GUARD_IOCTL: return guard_ioctl(ctx, d->nr);
        case GUARD_PERSONALITY: return guard_personality(ctx, d->nr);
        case GUARD_PRLIMIT: return guard_prlimit(ctx, d->nr);
        case GUARD_MODE: return guard_mode(ctx, d->nr);
        case GUARD_USER: return guard_user(ctx, d);
        case GUARD_NONE: break;
        }
        return add_rule(ctx, d->action, d->nr, 0, NULL);
}

/* ---- building and loading ----------------------------------------------- */

static int build_table(const struct run_plan *plan, struct table *t, brig_error **err)
{
        int r = default_profile(t);
        if (r < 0)
                return brig_err(err, -r, "seccomp: default profile");
        const struct seccomp_policy *p = plan->policy ? plan->policy->seccomp : NULL;
        for (size_t i = 0; p && i < p->n; i++) {
                r = p->rules[i].n_conds ? decide_conditional(t, &p->rules[i])
                                        : decide_group_or_name(t, p->rules[i].target, p->rules[i].action, 0);
                if (r < 0)
                        return brig_err(err, -r, "seccomp: rule '%s'", p->rules[i].name);
        }
        return 0;
}

static int set_attr(scmp_filter_ctx ctx, enum scmp_filter_attr attr, uint32_t value, const char *what,
                    brig_error **err)
{
        int r = seccomp_attr_set(ctx, attr, value);
        if (r < 0)  /* libseccomp returns -errno */
                return brig_err(err, -r, "seccomp: set %s", what);
        return 0;
}

/* The numbers the dispatch decides without the arguments: true, with the
 * return value, for an unconditional decision (all but a passing sendto). */
static bool plain_decision(const struct decision *d, uint32_t *ret)
{
        bool dest;
        *ret = final_action(d->action, d->nr, &dest);
        return d->guard == GUARD_NONE && !dest;
}

/* What a decision that reads its arguments decides where none of its
 * rules but those of the complement holds (its "otherwise"): false when
 * that is no one action (a conditional rule's fallback that is a passing
 * sendto reads argument 4 itself). A passing sendto alone decides
 * `action` where argument 4 is NULL (add_rule). */
static bool otherwise(const struct decision *d, uint32_t *ret)
{
        bool dest = false;
        switch (d->guard) {
        case GUARD_CLONE:
        case GUARD_IOCTL: *ret = final_action(SCMP_ACT_ALLOW, d->nr, &dest); break;
        /* a mode with a setuid bit where the call creates nothing */
        case GUARD_MODE: *ret = final_action(SCMP_ACT_ALLOW, d->nr, &dest); break;
        case GUARD_SOCKET: *ret = final_action(ACT_DENY_LOG(EAFNOSUPPORT), d->nr, &dest); break;
        case GUARD_PERSONALITY: *ret = final_action(ACT_DENY_LOG(EPERM), d->nr, &dest); break;
        /* another process's limits set: refused; everything else allowed */
        case GUARD_PRLIMIT: *ret = final_action(SCMP_ACT_ALLOW, d->nr, &dest); break;
        case GUARD_USER: *ret = final_action(d->fallback, d->nr, &dest); break;
        case GUARD_NONE: *ret = final_action(d->action, d->nr, &dest); return true;
        }
        return !dest;
}

/* libseccomp's part: the decisions `take` says (all where it is NULL). */
static int build_filter(scmp_filter_ctx ctx, const struct table *t, const bool *take, brig_error **err)
{
        /* Only the native architecture is in the filter: a call through the
         * i386 entry (int 0x80) does not match it and kills the process.
         * x32 shares x86_64's audit arch; libseccomp's x86_64 filter sends
         * numbers with the x32 bit (0x40000000) to this action too, as long
         * as SCMP_ARCH_X32 is not added (tested by the escape tests). */
        int r = set_attr(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "bad-arch action", err);
        /* Report the kernel's own errno from seccomp_load. */
        if (r == 0)
                r = set_attr(ctx, SCMP_FLTATR_API_SYSRAWRC, 1, "raw return codes", err);
        /* A binary search over syscall numbers instead of a linear chain.
         * (Unconditional allows skip the filter anyway: the kernel caches
         * them per syscall number since 5.11.) */
        if (r == 0)
                r = set_attr(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2, "binary tree", err);
        for (size_t i = 0; r == 0 && i < t->n; i++) {
                if (take && !take[i])
                        continue;
                r = add_decision(ctx, &t->d[i]);
                if (r < 0) {
                        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, t->d[i].nr);
                        r = brig_err(err, -r, "seccomp: rule for '%s'", name ? name : "?");
                        free(name);
                }
        }
        return r;
}

/* ---- the compiled program, cached ----------------------------------------
 *
 * libseccomp takes several milliseconds to compile a profile this size,
 * which would be most of brig's start-up. The program depends only on the
 * decision table, libseccomp's version and the architecture, so the
 * supervisor compiles it once and keeps it in the cache directory of the
 * state root (<root>/cache, 0700, checked ours), keyed by all of those
 * inputs, compared byte for byte. The file is not signed: what makes it
 * trustworthy is that nothing but brig's own processes can write there —
 * the root is private to the user and plan_guard_state refuses every
 * grant that equals, contains or lies inside it (an earlier brig kept the
 * cache in ~/.cache/brig, inside any sandbox given $HOME or ~/.cache;
 * that place is never read). */

#define CACHE_MAGIC "brig-seccomp-7"  /* bump when the default profile changes */

struct build_id_search {
        uintptr_t addr;  /* a function of this file: the object holding it is ours */
        char hex[2 * 64 + 1];
};

static int find_build_id(struct dl_phdr_info *info, size_t size, void *data)
{
        (void)size;
        struct build_id_search *s = data;
        bool ours = false;
        for (int i = 0; i < info->dlpi_phnum && !ours; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                uintptr_t start = info->dlpi_addr + ph->p_vaddr;
                ours = ph->p_type == PT_LOAD && s->addr >= start && s->addr < start + ph->p_memsz;
        }
        for (int i = 0; ours && i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_NOTE)
                        continue;
                const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
                while (p + sizeof(ElfW(Nhdr)) <= end) {
                        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
                        const char *name = p + sizeof *nh;
                        const unsigned char *desc = (const unsigned char *)name + ((nh->n_namesz + 3) & ~3U);
                        if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
                            nh->n_descsz <= 64 && (const char *)desc + nh->n_descsz <= end) {
                                for (unsigned j = 0; j < nh->n_descsz; j++)
                                        snprintf(s->hex + 2 * j, 3, "%02x", desc[j]);
                                return 1;
                        }
                        p = (const char *)desc + ((nh->n_descsz + 3) & ~3U);
                }
        }
        return ours;
}

/* Everything the program is made from: brig's version and the build id of
 * the code that holds the default profile (any change to it, even one
 * nobody remembered to bump CACHE_MAGIC for, is another key: a filter
 * compiled by another build is never reused), libseccomp's version, the
 * architecture, the user's rules and whether refusals notify. A hit
 * skips even building the decision table. */
static int cache_key(const struct run_plan *plan, bool refusals, char **key, size_t *len)
{
        /* libseccomp's file, not its answer to seccomp_version(): a hit
         * loads no libseccomp (scmp.h); an upgrade is another file */
        char lib[96];
        scmp_identity(lib, sizeof lib);
        const struct seccomp_policy *p = plan->policy ? plan->policy->seccomp : NULL;
        static struct build_id_search build = { .hex = "" };
        if (!build.addr) {
                build.addr = (uintptr_t)&find_build_id;
                dl_iterate_phdr(find_build_id, &build);
        }
        FILE *f = open_memstream(key, len);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%s %s build-%s libseccomp-%d.%d.%d-%s arch-%u audit-%d exec-%d refusals-%d;", CACHE_MAGIC,
                BRIG_VERSION, build.hex[0] ? build.hex : "unknown", SCMP_VER_MAJOR, SCMP_VER_MINOR, SCMP_VER_MICRO,
                lib, SCMP_ARCH_NATIVE,
                plan->audit_fd >= 0, plan->audit_exec, refusals);
        for (size_t i = 0; p && i < p->n; i++)
                fprintf(f, "%s=%u;", p->rules[i].name, p->rules[i].action);
        return fclose(f) == 0 ? 0 : -ENOMEM;
}

static uint64_t fnv1a(const char *s, size_t n)
{
        uint64_t h = 14695981039346656037ULL;
        for (size_t i = 0; i < n; i++)
                h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
        return h;
}

static char *cache_name(const char *key, size_t len)
{
        return brig_strdup_printf("seccomp-%016llx.bpf", (unsigned long long)fnv1a(key, len));
}

static bool user_allows(const struct run_plan *plan, const char *call)
{
        const struct seccomp_policy *p = plan->policy ? plan->policy->seccomp : NULL;
        for (size_t i = 0; p && i < p->n; i++) {
                uint32_t act = p->rules[i].action;
                if ((act == SCMP_ACT_ALLOW || act == ACT_LOG) &&
                    (p->rules[i].target[0] == '@' || strcmp(p->rules[i].target, call) == 0))
                        return true;
        }
        return false;
}

/* The calls a cached program is run on before it is trusted (see
 * seccomp_cache_parse): the keyring, bpf, ptrace, modules and kexec —
 * unless the user's own rules let one through (named, or any @group
 * allowed) — and another architecture's ABI. */
static size_t cache_probes(const struct run_plan *plan, struct seccomp_probe *out, size_t cap)
{
        /* the native numbers, known to the build: a cache hit loads no
         * libseccomp (scmp.h) */
        static const struct { const char *name; int nr; } refused[] = {
                { "keyctl", SCMP_SYS(keyctl) }, { "add_key", SCMP_SYS(add_key) },
                { "request_key", SCMP_SYS(request_key) }, { "bpf", SCMP_SYS(bpf) }, { "ptrace", SCMP_SYS(ptrace) },
                { "init_module", SCMP_SYS(init_module) }, { "finit_module", SCMP_SYS(finit_module) },
                { "kexec_load", SCMP_SYS(kexec_load) },
        };
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(refused) && n < cap; i++)
                if (refused[i].nr >= 0 && !user_allows(plan, refused[i].name))
                        out[n++] = (struct seccomp_probe){ .arch = scmp_arch_native(), .nr = refused[i].nr };
        if (n < cap)
                out[n++] = (struct seccomp_probe){ .arch = SCMP_ARCH_X86, .nr = 1 };  /* exit, allowed by all */
        return n;
}

/* The file: key length (u32), key, then the BPF instructions. Only a file
 * of ours that nobody else may write is trusted. */
static bool cache_load(const struct run_plan *plan, bool notifies, int dir, const char *name, const char *key,
                       size_t len, struct sock_filter **prog, size_t *n)
{
        _cleanup_close_ int fd = dir >= 0 ? openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -EBADF;
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1 ||
            (st.st_mode & 022) || st.st_size < 4 || st.st_size > (off_t)(len + 4 + BPF_MAXINSNS * sizeof(struct sock_filter)))
                return false;
        _cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
        if (!buf || read(fd, buf, (size_t)st.st_size) != st.st_size)
                return false;
        struct seccomp_probe probes[16];
        size_t n_probes = cache_probes(plan, probes, ARRAY_SIZE(probes));
        if (seccomp_cache_parse(buf, (size_t)st.st_size, key, len, probes, n_probes, notifies, prog, n) < 0)
                return false;
        (void)futimens(fd, NULL);  /* used now: the last a prune removes (cache_prune) */
        return true;
}

/* The cache keeps at most CACHE_MAX programs. Every build of brig and every
 * rule set a user ever ran is another key, so without a bound it would
 * only grow — in a tmpfs, in memory. A run that has just compiled one (a
 * miss, which has spent milliseconds already; a hit never reads the
 * directory) removes the least recently used, by the time a load marks,
 * down to CACHE_KEEP. Only names of the cache's own form are touched. */
#define CACHE_MAX 256
#define CACHE_KEEP 192

struct cache_entry {
        struct timespec used;
        char name[40];
};

static int by_use(const void *a, const void *b)
{
        const struct timespec *x = &((const struct cache_entry *)a)->used, *y = &((const struct cache_entry *)b)->used;
        return x->tv_sec != y->tv_sec ? (x->tv_sec < y->tv_sec ? -1 : 1)
                                      : (x->tv_nsec > y->tv_nsec) - (x->tv_nsec < y->tv_nsec);
}

static void cache_prune(int dir)
{
        int dfd = dir >= 0 ? openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                return;
        }
        struct cache_entry *v = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                unsigned long long h;
                int end = 0;
                struct stat st;
                if (sscanf(de->d_name, "seccomp-%16llx.bpf%n", &h, &end) != 1 || end != (int)strlen(de->d_name) ||
                    strlen(de->d_name) >= sizeof v->name ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (n == cap) {
                        struct cache_entry *nv = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof *v);
                        if (!nv)
                                break;
                        v = nv;
                }
                v[n].used = st.st_mtim;
                memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1);  /* its length checked above */
                n++;
        }
        if (n > CACHE_MAX) {
                qsort(v, n, sizeof *v, by_use);
                for (size_t i = 0; i < n - CACHE_KEEP; i++)
                        (void)unlinkat(dfd, v[i].name, 0);
        }
        free(v);
        closedir(d);
}

static void cache_store(int dir, const char *name, const char *key, size_t len, const struct sock_filter *prog,
                        size_t n)
{
        /* Written nameless (O_TMPFILE) and linked in whole: a brig killed
         * before the link leaves nothing (the kernel frees the inode), so
         * no run has to sweep the cache for temporary names. */
        if (dir < 0)
                return;
        _cleanup_close_ int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0)
                return;  /* a cache is an optimisation: no cache, no harm */
        uint32_t klen = (uint32_t)len;
        bool ok = write(fd, &klen, sizeof klen) == sizeof klen && write(fd, key, len) == (ssize_t)len &&
                  write(fd, prog, n * sizeof *prog) == (ssize_t)(n * sizeof *prog);
        /* a file that failed cache_load (foreign, cut short) makes way */
        if (ok)
                (void)tmpfile_link_over(fd, dir, name);
}

/* Compile through libseccomp and read the program back from a memfd. */
static int compile_scmp(const struct table *t, const bool *take, uint32_t dflt, struct sock_filter **prog,
                        size_t *n, brig_error **err)
{
        scmp_filter_ctx ctx = seccomp_init(dflt);
        if (!ctx)
                return brig_err(err, ENOMEM, "seccomp: init");
        compiling_default = dflt;
        int r = build_filter(ctx, t, take, err);
        _cleanup_close_ int fd = -EBADF;
        if (r == 0) {
                fd = memfd_create("brig-seccomp", MFD_CLOEXEC);
                if (fd < 0)
                        r = brig_err(err, errno, "seccomp: memfd");
        }
        if (r == 0) {
                r = seccomp_export_bpf(ctx, fd);
                if (r < 0)
                        r = brig_err(err, -r, "seccomp: export the filter");
        }
        seccomp_release(ctx);
        if (r < 0)
                return r;
        off_t size = lseek(fd, 0, SEEK_END);
        if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0)
                return brig_err(err, EPROTO, "seccomp: exported filter has %lld bytes", (long long)size);
        *prog = malloc((size_t)size);
        if (!*prog)
                return brig_err(err, ENOMEM, "seccomp");
        if (pread(fd, *prog, (size_t)size, 0) != size) {
                free(*prog);
                *prog = NULL;
                return brig_err(err, errno ? errno : EIO, "seccomp: read the filter back");
        }
        *n = (size_t)size / sizeof(struct sock_filter);
        return 0;
}

static int by_nr(const void *a, const void *b)
{
        uint32_t x = ((const struct seccomp_number *)a)->nr, y = ((const struct seccomp_number *)b)->nr;
        return (x > y) - (x < y);
}

/* The program: brig's number dispatch over ranges of one decision
 * (seccomp_dispatch.c: the kernel's load is linear in the length), in
 * front of libseccomp's programs for the calls whose decision reads their
 * arguments, one per "otherwise" (what such a call decides where its
 * rules do not: allow for ioctl and clone, the refusal for socket and
 * personality), made the default of its program:
 * libseccomp has no "not in", and the complement of a guard's rules
 * spelled as masked compares (add_outside) was most of the program and
 * of an ioctl's path through it. A decision without one otherwise goes to
 * a program of the profile's default, rules and complements whole. The
 * dispatch's preamble (arch, x32) is written for x86_64, the one
 * architecture it is tested on; elsewhere libseccomp compiles all of it. */
#define MAX_SUBS 8
static int compile(const struct table *t, struct sock_filter **prog, size_t *n, brig_error **err)
{
        const uint32_t dflt = resolve(DEFAULT_ACTION);
#if defined(__x86_64__)
#ifdef BRIG_TEST_HOOKS
        /* libseccomp's program alone, for test_seccomp_decisions.py to
         * compare the dispatch with on any rule set */
        if (getenv("BRIG_TEST_SECCOMP_WHOLE"))
                return compile_scmp(t, NULL, dflt, prog, n, err);
#endif
        _cleanup_free_ struct seccomp_number *v = calloc(t->n ? t->n : 1, sizeof *v);
        _cleanup_free_ bool *take = calloc(t->n ? t->n : 1, sizeof *take);
        if (!v || !take)
                return brig_err(err, ENOMEM, "seccomp");
        /* the programs' defaults: [0] the profile's, for the whole ones */
        uint32_t defaults[MAX_SUBS] = { dflt };
        size_t n_defaults = 1;
        for (size_t i = 0; i < t->n; i++) {
                v[i].nr = (uint32_t)t->d[i].nr;
                v[i].sub = -1;
                if (plain_decision(&t->d[i], &v[i].ret))
                        continue;
                uint32_t other = dflt;
                size_t k = 0;
                if (otherwise(&t->d[i], &other))
                        while (k < n_defaults && defaults[k] != other)
                                k++;
                if (k == n_defaults && n_defaults < MAX_SUBS)
                        defaults[n_defaults++] = other;
                v[i].sub = k < n_defaults ? (int)k : 0;
        }
        struct sock_filter *subs_prog[MAX_SUBS] = { 0 };
        struct seccomp_subprog subs[MAX_SUBS] = { 0 };
        int r = 0;
        for (size_t k = 0; r == 0 && k < n_defaults; k++) {
                for (size_t i = 0; i < t->n; i++)
                        take[i] = v[i].sub == (int)k;
                r = compile_scmp(t, take, defaults[k], &subs_prog[k], &subs[k].len, err);
                subs[k].prog = subs_prog[k];
        }
        compiling_default = dflt;
        qsort(v, t->n, sizeof *v, by_nr);
        if (r == 0) {
                r = seccomp_dispatch_emit(AUDIT_ARCH_X86_64, SCMP_ACT_KILL_PROCESS, v, t->n, dflt, subs, n_defaults,
                                          prog, n);
                if (r < 0)
                        r = brig_err(err, -r, "seccomp: the number dispatch of %zu decisions", t->n);
        }
        for (size_t k = 0; k < n_defaults; k++)
                free(subs_prog[k]);
        return r;
#else
        return compile_scmp(t, NULL, dflt, prog, n, err);
#endif
}

/* The supervisor's answers to notifications: the same table compiled
 * once more with every refusal a plain errno (as a filter without a
 * listener refuses), run on each notified call's seccomp_data. A table per
 * syscall number could not tell a conditional rule's errno from its
 * fallback's ('uselib(a0==1)=deny-log' is EPERM there, ENOSYS elsewhere);
 * the program answers exactly what the kernel would have. */
static int build_replies(const struct table *t, struct seccomp_replies **ret)
{
        bool audit = compiling_for_audit, refusals = compiling_for_refusals;
        compiling_for_audit = compiling_for_refusals = false;
        compiling_for_replies = true;
        _cleanup_free_ struct sock_filter *prog = NULL;
        size_t n = 0;
        int r = compile(t, &prog, &n, NULL);
        compiling_for_replies = false;
        compiling_for_audit = audit;
        compiling_for_refusals = refusals;
        if (r < 0)
                return r;
        struct seccomp_replies *rep = malloc(sizeof *rep + n * sizeof *prog);
        if (!rep)
                return -ENOMEM;
        rep->len = n;
        memcpy(rep->prog, prog, n * sizeof *prog);
        *ret = rep;
        return 0;
}

static const struct decision *decision_for(const struct table *t, int nr)
{
        for (size_t i = 0; i < t->n; i++)
                if (t->d[i].nr == nr)
                        return &t->d[i];
        return NULL;
}

/* The filter hands its listener to the supervisor with sendmsg(2), after
 * it is loaded: a policy that refuses sendmsg (or, with an audit stream,
 * only logs it: that would wait for the listener it carries) while the
 * filter can notify would start a command that cannot report anything.
 * Said before the run. A cached program passed this when it was made. */
static bool sendmsg_passes(const struct table *t, bool audit)
{
        const struct decision *d = decision_for(t, SCMP_SYS(sendmsg));
        return d && d->guard == GUARD_NONE && (d->action == SCMP_ACT_ALLOW || (!audit && d->action == ACT_LOG));
}

static int check_handoff(const struct table *t, bool audit, brig_error **err)
{
        const struct decision *d = decision_for(t, SCMP_SYS(sendmsg));
        if (sendmsg_passes(t, audit))
                return 0;
        bool notifies = audit;
        static const char *const guarded_calls[] = { "connect", "sendto" };
        for (size_t i = 0; i < ARRAY_SIZE(guarded_calls); i++) {
                const struct decision *g = decision_for(t, seccomp_syscall_resolve_name(guarded_calls[i]));
                notifies |= g && (g->guard == GUARD_USER || g->action == SCMP_ACT_ALLOW || g->action == ACT_LOG);
        }
        if (!notifies)
                return 0;
        const char *how = audit && d && d->action == ACT_LOG ? "only logged" : "refused";
        if (audit)
                return brig_err(err, EINVAL,
                                "syscall rules: sendmsg is %s, but with --audit the filter's listener reaches "
                                "brig's supervisor through sendmsg; let sendmsg through (or run without --audit)",
                                how);
        return brig_err(err, EINVAL,
                        "syscall rules: sendmsg is %s, but the filter's listener (for the unix socket guard) "
                        "reaches brig's supervisor through sendmsg; let sendmsg through, or refuse connect and "
                        "sendto too (--seccomp-deny @network)", how);
}

/* The program cached for these rules, compiled with refusals notifying or
 * not, into plan->seccomp_prog; false when there is none (or it fails the
 * checks of cache_load). key and len are left for cache_store. */
static bool from_cache(struct run_plan *plan, int dir, bool refusals, char **key, size_t *len)
{
        free(*key);
        *key = NULL;
        if (cache_key(plan, refusals, key, len) < 0)
                return false;
        _cleanup_free_ char *name = cache_name(*key, *len);
        return name && cache_load(plan, plan->audit_fd >= 0 || refusals, dir, name, *key, *len, &plan->seccomp_prog,
                                  &plan->seccomp_len);
}

int seccomp_prepare(struct run_plan *plan, brig_error **err)
{
        /* the policy step's look at <root>/cache, taken here whatever
         * happens: never carried into the sandbox's clone */
        _cleanup_close_ int given = plan->cache_dir_fd;
        plan->cache_dir_fd = -1;
        if (plan->seccomp_degraded)
                return 0;  /* no seccomp here, and the policy accepted that */
        bool audit = plan->audit_fd >= 0;
        _cleanup_close_ int dir = given >= 0 ? TAKE_FD(given) : state_cache_dir_open(NULL);
        _cleanup_free_ char *key = NULL;
        size_t len = 0;
        /* Most runs: a program cached for these rules, with refusals
         * notifying. It passed check_handoff when it was made; the
         * supervisor makes its answers from the table when a first refusal
         * arrives (seccomp_replies_build), not here. */
        if (!audit && from_cache(plan, dir, true, &key, &len))
                return 0;
        /* A compile: libseccomp is opened now (scmp.h), or the run is
         * refused saying why. */
        int r = scmp_load(err);
        if (r < 0)
                return r;
        struct table t = { 0 };
        r = build_table(plan, &t, err);
        if (r == 0)
                r = check_handoff(&t, audit, err);
        /* Refusals notify (for the run's summary) whenever the listener can
         * reach the supervisor: a policy that refuses sendmsg (and connect
         * and sendto) gets plain errno returns, and no syscall lines. */
        bool refusals = r == 0 && sendmsg_passes(&t, audit);
        if (r == 0 && audit && build_replies(&t, &plan->seccomp_replies) < 0)
                r = brig_err(err, ENOMEM, "seccomp");
        if (r == 0 && !from_cache(plan, dir, refusals, &key, &len)) {
                compiling_for_audit = audit;
                compiling_for_refusals = refusals;
                compiling_exec_events = audit && plan->audit_exec;
                r = compile(&t, &plan->seccomp_prog, &plan->seccomp_len, err);
                compiling_for_audit = compiling_for_refusals = compiling_exec_events = false;
                _cleanup_free_ char *name = key ? cache_name(key, len) : NULL;
                if (r == 0 && name) {
                        cache_store(dir, name, key, len, plan->seccomp_prog, plan->seccomp_len);
                        cache_prune(dir);
                }
        }
        free(t.d);
        return r;
}

int seccomp_replies_build(const struct run_plan *plan, struct seccomp_replies **ret)
{
        struct table t = { 0 };
        int r = build_table(plan, &t, NULL);
        if (r == 0)
                r = build_replies(&t, ret);
        free(t.d);
        return r < 0 ? r : 0;
}

int seccomp_apply(const struct run_plan *plan, brig_error **err)
{
        if (plan->seccomp_degraded)
                return 0;
        if (!plan->seccomp_prog)
                return brig_err(err, EINVAL, "seccomp: no filter was prepared");
        struct sock_fprog fprog = { .len = (unsigned short)plan->seccomp_len, .filter = plan->seccomp_prog };
        /* A listener whenever the program can notify: connect and sendto
         * for the unix socket guard, refusals too in audit mode (rules
         * that refuse connect and sendto outright need none). */
        bool notifies = false;
        for (size_t i = 0; i < plan->seccomp_len; i++)
                notifies |= plan->seccomp_prog[i].code == (BPF_RET | BPF_K) &&
                            plan->seccomp_prog[i].k == SECCOMP_RET_USER_NOTIF;
        /* no_new_privs is already set (pid 1 set it before forking us).
         * Once the supervisor has a call (WAIT_KILLABLE_RECV, Linux 5.19),
         * only a signal that kills interrupts the caller's wait: a handled
         * one that made it return EINTR, or restart the call, while the
         * supervisor's worker still waited in its connect left that connect
         * to complete behind the caller's back (unixguard.c). Before 5.19
         * the load takes the filter without it (the watcher's 20 ms remain). */
        unsigned long flags = notifies ? SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV : 0;
        long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
        if (fd < 0 && errno == EINVAL && notifies)
                fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
        if (fd < 0)
                return brig_err(err, errno, "seccomp: load the filter");
        if (!notifies)
                return 0;
        /* The listener goes to the supervisor before anything can need an
         * answer from it (sendmsg and close are allowed calls, unless the
         * policy's own rules refuse sendmsg). */
        struct sync_msg m = { .type = SYNC_NOTIFY_FD };
        int r = sync_send_fd(plan->sync_fd, &m, (int)fd);
        close((int)fd);
        if (r < 0)
                return brig_err(err, -r, "seccomp: hand the filter's listener to the supervisor (a rule that "
                                         "refuses sendmsg must refuse connect and sendto too, and cannot go "
                                         "with --audit)");
        return 0;
}

int seccomp_reply_for(const struct seccomp_replies *rep, const struct seccomp_data *sd)
{
        uint32_t ret;
        if (!rep || !seccomp_bpf_eval(rep->prog, rep->len, sd, &ret))
                return EPERM;
        switch (ret & SECCOMP_RET_ACTION_FULL) {
        case SECCOMP_RET_ERRNO:
                return (ret & SECCOMP_RET_DATA) ? (int)(ret & SECCOMP_RET_DATA) : EPERM;
        case SECCOMP_RET_LOG:
                return 0;  /* "log": only recorded (a connect or sendto: recorded, and the guard's) */
        case SECCOMP_RET_USER_NOTIF:
                return SECCOMP_REPLY_GUARD;  /* allowed: notified for the unix socket guard */
        case SECCOMP_RET_ALLOW:
                return SECCOMP_REPLY_ALLOW;  /* allowed: notified only to be seen (an exec event) */
        default:
                return EPERM;  /* a call that should never notify: refuse */
        }
}

static bool group_names(const char *group, const char *name, int depth)
{
        const struct group *g = find_group(group);
        for (const char *const *m = g ? g->members : NULL; m && *m && depth < 5; m++)
                if ((*m)[0] == '@' ? group_names(*m, name, depth + 1) : strcmp(*m, name) == 0)
                        return true;
        return false;
}

void seccomp_refusal_text(const struct seccomp_policy *sp, const char *name, int reply, char *why, size_t wsize,
                          char *fix, size_t fsize)
{
        const char *e = strerrorname_np(reply);
        fix[0] = '\0';
        for (size_t i = sp ? sp->n : 0; i-- > 0;) {
                const struct seccomp_rule *r = &sp->rules[i];
                if (r->target[0] == '@' ? group_names(r->target, name, 0) : strcmp(r->target, name) == 0) {
                        snprintf(why, wsize, "refused by your rule %s=%s (%s)", r->name, r->action_text, e ? e : "?");
                        return;
                }
        }
        /* New namespaces are refused below the filter as well (no nested
         * user namespaces, userns.c): allowing the call would not help. */
        if (strcmp(name, "clone") == 0 || strcmp(name, "unshare") == 0 || strcmp(name, "setns") == 0) {
                snprintf(why, wsize, "new namespaces are refused inside a sandbox (%s)", e ? e : "?");
                return;
        }
        if (strcmp(name, "prlimit64") == 0) {
                snprintf(why, wsize, "another process's resource limits are not changed inside a sandbox (%s); a "
                         "process sets its own (prlimit64 with pid 0, setrlimit)", e ? e : "?");
                return;
        }
        /* and without a controlling terminal (setsid) TIOCSTI fails anyway */
        if (strcmp(name, "ioctl") == 0) {
                snprintf(why, wsize, "terminal input injection (TIOCSTI, TIOCLINUX) is refused inside a sandbox (%s)",
                         e ? e : "?");
                return;
        }
        /* The sandbox chooses what it calls, and an agent follows these
         * lines: no flag for what the profile refuses on purpose (bpf,
         * kexec_load, mount, ptrace, ...: the kernel's attack surface, other
         * processes, brig's mounts), for a call refused for its arguments
         * (--seccomp-allow chmod would let setuid bits onto the host's
         * files, socket AF_PACKET) or for a call of one of brig's groups
         * (@obsolete, @privileged). A call the profile does not know is
         * one a program may need: that one is suggested — if it has a
         * name --seccomp-allow takes (not "syscall_1000"). */
        bool on_purpose = guarded(name) || seccomp_syscall_resolve_name(name) < 0;
        for (size_t i = 0; i < ARRAY_SIZE(denied) && !on_purpose; i++)
                on_purpose = strcmp(denied[i], name) == 0;
        for (size_t i = 0; i < ARRAY_SIZE(groups) && !on_purpose; i++)
                on_purpose = group_names(groups[i].name, name, 0);
        snprintf(why, wsize, reply == ENOSYS ? "not in brig's default profile (%s)"
                             : guarded(name) ? "refused for these arguments by brig's default profile (%s)"
                                             : "refused on purpose by brig's default profile (%s)",
                 e ? e : "?");
        if (!on_purpose)
                snprintf(fix, fsize, "--seccomp-allow %s", name);
}

char *seccomp_syscall_name(int nr)
{
        /* a refusal's line names the call; without libseccomp its number */
        char *name = scmp_load(NULL) == 0 ? seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr) : NULL;
        return name ? name : brig_strdup_printf("syscall_%d", nr);
}

json_t *seccomp_policy_json(const struct seccomp_policy *sp)
{
        json_t *a = json_array();
        for (size_t i = 0; sp && i < sp->n; i++)
                json_array_append_new(a, json_pack("{s:s, s:s}", "name", sp->rules[i].name, "action",
                                                   sp->rules[i].action_text));
        return a;
}
