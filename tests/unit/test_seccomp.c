/* test_seccomp.c — unit tests for the syscall filter (src/lib/controls/seccomp.c):
 * rule validation, and the built filter itself, loaded in a forked child
 * that then makes real calls and reports what happened through its exit
 * status. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/audit.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pthread.h>
#include <seccomp.h>
#include <stdlib.h>

#include "core/internal.h"
#include "controls/seccomp_filter.h"

#define assert_contains(haystack, needle)                                                         \
        do {                                                                                      \
                const char *h_ = (haystack), *n_ = (needle);                                      \
                if (!h_ || !strstr(h_, n_))                                                       \
                        fail_msg("expected \"%s\" to contain \"%s\"", h_ ? h_ : "(null)", n_);    \
        } while (0)

/* ---- rule validation ---------------------------------------------------- */

static void add_ok(struct seccomp_policy **sp, const char *name, const char *action)
{
        brig_error *err = NULL;
        int r = seccomp_policy_add(sp, name, action, &err);
        if (r != 0)
                fail_msg("rule %s %s: %s", name, action, err ? err->msg : "?");
        assert_null(err);
}

static void add_fails(const char *name, const char *action, const char *needle)
{
        struct seccomp_policy *sp = NULL;
        brig_error *err = NULL;
        int r = seccomp_policy_add(&sp, name, action, &err);
        assert_true(r < 0);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_contains(err->msg, needle);
        assert_null(sp);  /* nothing recorded */
        brig_error_free(&err);
}

static void test_rules_accepted(void **state)
{
        (void)state;
        struct seccomp_policy *sp = NULL;
        add_ok(&sp, "mount", "allow");
        add_ok(&sp, "ptrace", "kill");
        add_ok(&sp, "uname", "log");
        add_ok(&sp, "uname", "deny-log");
        add_ok(&sp, "mkdir", "errno:EACCES");
        add_ok(&sp, "mkdir", "errno:13");
        add_ok(&sp, "mkdir", "errno:4095");
        static const char *const groups[] = { "@mount", "@privileged", "@network", "@debug", "@keyring",
                                              "@module", "@reboot", "@swap", "@clock", "@obsolete",
                                              "@namespaces", "@io-uring", "@raw-io" };
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                add_ok(&sp, groups[i], "errno:EPERM");
        seccomp_policy_free(sp);
        seccomp_policy_free(NULL);
}

static void test_rules_refused(void **state)
{
        (void)state;
        add_fails("no_such_syscall", "allow", "'no_such_syscall'");
        add_fails("@nope", "allow", "'@nope'");
        add_fails("", "allow", "empty");
        add_fails("socketcall", "allow", "'socketcall'");  /* not a call on this architecture */
        add_fails("mount", "permit", "'permit'");
        add_fails("mount", "", "''");
        add_fails("mount", "errno:", "''");
        add_fails("mount", "errno:0", "'0'");
        add_fails("mount", "errno:4096", "'4096'");
        add_fails("mount", "errno:-1", "'-1'");
        add_fails("mount", "errno:ENOTANERRNO", "'ENOTANERRNO'");
        add_fails("mount", "errno:13x", "'13x'");
}

/* ---- the filter, live --------------------------------------------------- */

enum probe {
        P_GETPPID, P_MOUNT, P_CLONE3, P_X32, P_TIOCSTI_HIGH, P_SOCKET_PACKET, P_SOCKET_UNIX, P_UNAME_RULE,
        P_UNLISTED, P_PERSONALITY_ASLR, P_MOUNT_ALLOWED, P_CONNECT, P_SEND_NOADDR, P_SENDTO_ADDR,
};

/* The supervisor's part, in a thread the filter does not cover: take the
 * filter's listener from the sync socket and answer every refusal with the
 * errno of the replies table (docs/report.md: refusals notify, so the
 * run's summary can name them). Calls for the unix socket guard (connect,
 * an addressed sendto) are left waiting: no guard here. */
struct answerer {
        int sync_fd;
        const struct run_plan *plan;
};

static void *answer(void *arg)
{
        const struct answerer *a = arg;
        struct sync_msg m;
        int listener = -1;
        if (sync_recv(a->sync_fd, &m, &listener) <= 0 || listener < 0)
                return NULL;
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        struct seccomp_replies *made = NULL;  /* as the supervisor makes them (unixguard.c) */
        const struct seccomp_replies *replies = a->plan->seccomp_replies;
        if (!replies && seccomp_replies_build(a->plan, &made) == 0)
                replies = made;
        if (!replies || seccomp_notify_alloc(&req, &resp) < 0)
                return NULL;
        for (;;) {
                memset(req, 0, sizeof *req);
                if (seccomp_notify_receive(listener, req) < 0)
                        break;
                int reply = seccomp_reply_for(replies, &req->data);
                if (reply == SECCOMP_REPLY_GUARD)
                        continue;
                memset(resp, 0, sizeof *resp);
                resp->id = req->id;
                resp->error = -reply;
                if (reply == 0)
                        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
                (void)seccomp_notify_respond(listener, resp);
        }
        return NULL;
}

/* In a child: load the filter, make one call, exit with its errno (0 for
 * success). Returns the exit status, or 1000 + signal when killed. */
static int filtered(enum probe what, const char *rule_name, const char *rule_action)
{
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                brig_policy *p = brig_policy_new();
                if (rule_name && brig_policy_add_syscall_rule(p, rule_name, rule_action, NULL) < 0)
                        _exit(200);
                struct run_plan plan = RUN_PLAN_INIT;
                plan.policy = p;
                /* the filter hands its listener over this socket, to the
                 * answering thread below */
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                        _exit(203);
                plan.sync_fd = sv[1];
                if (seccomp_prepare(&plan, NULL) < 0)
                        _exit(202);
                struct answerer a = { .sync_fd = sv[0], .plan = &plan };
                pthread_t t;
                if (pthread_create(&t, NULL, answer, &a) != 0)
                        _exit(204);
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_apply(&plan, NULL) < 0)
                        _exit(201);
                long r = 0;
                char c = 'x';
                errno = 0;
                switch (what) {
                case P_GETPPID: r = syscall(SYS_getppid); break;
                case P_MOUNT: r = syscall(SYS_mount, 1L, 1L, 1L, 0, 0); break;
                case P_MOUNT_ALLOWED: r = syscall(SYS_mount, 1L, 1L, 1L, 0, 0); break;
                case P_CLONE3: r = syscall(SYS_clone3, 1L, 64); break;
                case P_X32: r = syscall(0x40000000 | SYS_getppid); break;
                case P_TIOCSTI_HIGH: r = syscall(SYS_ioctl, 0, 0xdead00000000UL | TIOCSTI, &c); break;
                case P_SOCKET_PACKET: r = socket(AF_PACKET, SOCK_RAW, 0); break;
                case P_SOCKET_UNIX: r = socket(AF_UNIX, SOCK_STREAM, 0); break;
                /* Nobody answers the unix socket guard's notifications here:
                 * a call that notifies waits until the alarm. */
                case P_CONNECT:
                case P_SEND_NOADDR:
                case P_SENDTO_ADDR: {
                        struct sockaddr_in in = { .sin_family = AF_INET };
                        alarm(2);
                        if (what == P_CONNECT)
                                r = connect(sv[0], (struct sockaddr *)&in, sizeof in);
                        else
                                r = sendto(sv[0], &c, 1, 0, what == P_SENDTO_ADDR ? (struct sockaddr *)&in : NULL,
                                           what == P_SENDTO_ADDR ? sizeof in : 0);
                        break;
                }
                case P_UNAME_RULE: r = syscall(SYS_uname, 1L); break;
                case P_UNLISTED: r = syscall(SYS_lookup_dcookie, 0, 1L, 0); break;
                case P_PERSONALITY_ASLR: r = syscall(SYS_personality, 0x0040000UL); break;
                }
                _exit(r >= 0 ? 0 : errno);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFSIGNALED(st) ? 1000 + WTERMSIG(st) : WEXITSTATUS(st);
}

static void test_default_profile(void **state)
{
        (void)state;
        assert_int_equal(filtered(P_GETPPID, NULL, NULL), 0);
        assert_int_equal(filtered(P_MOUNT, NULL, NULL), EPERM);
        assert_int_equal(filtered(P_CLONE3, NULL, NULL), ENOSYS);
        assert_int_equal(filtered(P_UNLISTED, NULL, NULL), ENOSYS);
        assert_int_equal(filtered(P_X32, NULL, NULL), 1000 + SIGSYS);
        assert_int_equal(filtered(P_TIOCSTI_HIGH, NULL, NULL), EPERM);
        assert_int_equal(filtered(P_SOCKET_PACKET, NULL, NULL), EAFNOSUPPORT);
        assert_int_equal(filtered(P_SOCKET_UNIX, NULL, NULL), 0);
        assert_int_equal(filtered(P_PERSONALITY_ASLR, NULL, NULL), EPERM);
        assert_int_equal(filtered(P_UNAME_RULE, NULL, NULL), EFAULT);  /* reached the kernel */
        /* connect and an addressed sendto wait for the supervisor; send() does not */
        assert_int_equal(filtered(P_CONNECT, NULL, NULL), 1000 + SIGALRM);
        assert_int_equal(filtered(P_SENDTO_ADDR, NULL, NULL), 1000 + SIGALRM);
        assert_int_equal(filtered(P_SEND_NOADDR, NULL, NULL), 0);
        /* refused outright by a rule: nothing to wait for */
        assert_int_equal(filtered(P_CONNECT, "connect", "errno:EACCES"), EACCES);
}

static void test_user_rules_replace_the_default(void **state)
{
        (void)state;
        assert_int_equal(filtered(P_UNAME_RULE, "uname", "errno:EIO"), EIO);
        assert_int_equal(filtered(P_UNAME_RULE, "uname", "kill"), 1000 + SIGSYS);
        assert_int_equal(filtered(P_UNAME_RULE, "uname", "deny-log"), EPERM);
        /* allowed: the kernel's answer to the bad pointer, not the filter's */
        assert_int_equal(filtered(P_MOUNT_ALLOWED, "mount", "allow"), EFAULT);
        assert_int_equal(filtered(P_MOUNT_ALLOWED, "@mount", "allow"), EFAULT);
        assert_int_equal(filtered(P_SOCKET_UNIX, "@network", "errno:EACCES"), EACCES);
        assert_int_equal(filtered(P_GETPPID, "getppid", "errno:ENOTRECOVERABLE"), ENOTRECOVERABLE);
}

static void test_degraded_loads_nothing(void **state)
{
        (void)state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                brig_policy *p = brig_policy_new();
                struct run_plan plan = RUN_PLAN_INIT;
                plan.policy = p;
                plan.seccomp_degraded = true;
                if (seccomp_prepare(&plan, NULL) < 0 || seccomp_apply(&plan, NULL) < 0)
                        _exit(201);
                _exit(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0 ? 0 : 1);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the cache file's reader (seccomp_cache.c) ---------------------------- */

#define KEY "brig-seccomp-test key;"
#define ARCH_X86_64 0xc000003eU

static const struct seccomp_probe probes[] = { { ARCH_X86_64, 250 }, { ARCH_X86_64, 101 }, { 0x40000003U, 1 } };

/* A cache file: KEY, then the program. */
static size_t cache_file(uint8_t *buf, const char *key, const struct sock_filter *prog, size_t n)
{
        uint32_t klen = (uint32_t)strlen(key);
        memcpy(buf, &klen, 4);
        memcpy(buf + 4, key, klen);
        memcpy(buf + 4 + klen, prog, n * sizeof *prog);
        return 4 + klen + n * sizeof *prog;
}

static int parse(const struct sock_filter *prog, size_t n, bool notifies)
{
        uint8_t buf[4096];
        size_t len = cache_file(buf, KEY, prog, n);
        struct sock_filter *out = NULL;
        size_t count = 0;
        int r = seccomp_cache_parse(buf, len, KEY, strlen(KEY), probes, 3, notifies, &out, &count);
        if (r == 0) {
                assert_int_equal(count, n);
                assert_memory_equal(out, prog, n * sizeof *prog);
        } else {
                assert_null(out);
        }
        free(out);
        return r;
}

static void test_cache_program_is_run_before_it_is_trusted(void **state)
{
        (void)state;
        /* arch != x86_64 -> kill; keyctl, ptrace -> EPERM; else allow */
        const struct sock_filter good[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_X86_64, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 250, 2, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 101, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        };
        assert_int_equal(parse(good, 8, false), 0);
        /* the same, answering ptrace with a notification: only where the
         * program's refusals notify (the supervisor answers them) */
        struct sock_filter notify[8];
        memcpy(notify, good, sizeof good);
        notify[7] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
        assert_int_equal(parse(notify, 8, true), 0);
        assert_int_equal(parse(notify, 8, false), -EPERM);
        /* allows everything, or logs keyctl, or lets i386 through */
        const struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
        assert_int_equal(parse(allow, 1, true), -EPERM);
        struct sock_filter log[8];
        memcpy(log, good, sizeof good);
        log[7] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_LOG);
        assert_int_equal(parse(log, 8, true), -EPERM);
        struct sock_filter i386[8];
        memcpy(i386, good, sizeof good);
        i386[2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        assert_int_equal(parse(i386, 8, false), -EPERM);
}

static void test_cache_bytes_the_kernel_would_refuse(void **state)
{
        (void)state;
        /* a jump past the end, a load past seccomp_data, an unaligned load,
         * an unknown instruction, falling off the end */
        const struct sock_filter past[] = { BPF_JUMP(BPF_JMP | BPF_JA, 5, 0, 0),
                                            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
        assert_int_equal(parse(past, 2, false), -EBADMSG);
        const struct sock_filter far[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 64),
                                           BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
        assert_int_equal(parse(far, 2, false), -EBADMSG);
        const struct sock_filter odd[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2),
                                           BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
        assert_int_equal(parse(odd, 2, false), -EBADMSG);
        const struct sock_filter unknown[] = { { 0xffff, 0, 0, 0 } };
        assert_int_equal(parse(unknown, 1, false), -EBADMSG);
        const struct sock_filter no_ret[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0) };
        assert_int_equal(parse(no_ret, 1, false), -EBADMSG);
        /* another key; a key length past the file; a torn instruction; nothing */
        const struct sock_filter kill[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS) };
        uint8_t buf[256];
        struct sock_filter *out = NULL;
        size_t n = 0;
        size_t len = cache_file(buf, "brig-seccomp-other key;", kill, 1);
        assert_int_equal(seccomp_cache_parse(buf, len, KEY, strlen(KEY), probes, 3, false, &out, &n), -EBADMSG);
        len = cache_file(buf, KEY, kill, 1);
        assert_int_equal(seccomp_cache_parse(buf, len, KEY, strlen(KEY), probes, 3, false, &out, &n), 0);
        free(out);
        assert_int_equal(seccomp_cache_parse(buf, len - 1, KEY, strlen(KEY), probes, 3, false, &out, &n), -EBADMSG);
        assert_int_equal(seccomp_cache_parse(buf, 4 + strlen(KEY), KEY, strlen(KEY), probes, 3, false, &out, &n),
                         -EBADMSG);
        uint32_t huge = 0xffffffffU;
        memcpy(buf, &huge, 4);
        assert_int_equal(seccomp_cache_parse(buf, len, KEY, strlen(KEY), probes, 3, false, &out, &n), -EBADMSG);
        assert_int_equal(seccomp_cache_parse(buf, 2, KEY, strlen(KEY), probes, 3, false, &out, &n), -EBADMSG);
        assert_null(out);
}


/* ---- the number dispatch (seccomp_dispatch.c) --------------------------- */

/* what the stand-in argument checks return: programs 0 and 1 */
#define SUB_MARK(k) (0x00050000U | (99 + (k)))

/* What a table decides for nr, by looking it up. */
static uint32_t lookup(const struct seccomp_number *v, size_t n, uint32_t nr, uint32_t dflt)
{
        for (size_t i = 0; i < n; i++)
                if (v[i].nr == nr)
                        return v[i].sub >= 0 ? SUB_MARK(v[i].sub) : v[i].ret;
        return dflt;
}

static struct sock_fprog loading;
static int load_result;

static void *load_thread(void *arg)
{
        (void)arg;
        int r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &loading) == 0 ? 0 : (errno ? errno : 1);
        __atomic_store_n(&load_result, r, __ATOMIC_SEQ_CST);
        for (;;)
                ;  /* no call is sure to be allowed now; the child's exit ends it */
        return NULL;
}

static void check_dispatch(const struct seccomp_number *v, size_t n)
{
        const uint32_t dflt = SECCOMP_RET_ERRNO | ENOSYS, kill = SECCOMP_RET_KILL_PROCESS;
        /* argument checks of their own, as libseccomp's start: the arch again */
        const struct sock_filter sub0[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
                                            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
                                            BPF_STMT(BPF_RET | BPF_K, kill),
                                            BPF_STMT(BPF_RET | BPF_K, SUB_MARK(0)) };
        const struct sock_filter sub1[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
                                            BPF_STMT(BPF_RET | BPF_K, SUB_MARK(1)) };
        const struct seccomp_subprog subs[] = { { sub0, ARRAY_SIZE(sub0) }, { sub1, ARRAY_SIZE(sub1) } };
        struct sock_filter *prog = NULL;
        size_t len = 0;
        assert_int_equal(seccomp_dispatch_emit(AUDIT_ARCH_X86_64, kill, v, n, dflt, subs, 2, &prog, &len), 0);
        assert_true(len <= BPF_MAXINSNS);
        /* every number named, its neighbours, the far ends, x32, i386 */
        uint32_t probe[] = { 0, 1, 2, 1023, 1024, 0x3fffffffU, 0x40000000U, 0x40000001U, 0x7fffffffU,
                             0x80000000U, 0xfffffffeU, 0xffffffffU };
        for (size_t i = 0; i < n + ARRAY_SIZE(probe); i++)
                for (int d = -1; d <= 1; d++) {
                        uint32_t nr = (i < n ? v[i].nr : probe[i - n]) + (uint32_t)d;
                        uint32_t want = nr >= 0x40000000U && nr != 0xffffffffU ? kill : lookup(v, n, nr, dflt), ret;
                        struct seccomp_data sd = { .nr = (int)nr, .arch = AUDIT_ARCH_X86_64 };
                        assert_true(seccomp_bpf_eval(prog, len, &sd, &ret));
                        if (ret != want)
                                fail_msg("table of %zu: nr %#x gets %#x, not %#x", n, nr, ret, want);
                        sd.arch = AUDIT_ARCH_I386;
                        assert_true(seccomp_bpf_eval(prog, len, &sd, &ret));
                        assert_int_equal(ret, kill);
                }
        /* and the kernel takes it: loaded by a thread of a child (a filter
         * is the thread's own), which cannot make a call after it, while
         * the child's other thread reports and exits */
        loading = (struct sock_fprog){ .len = (unsigned short)len, .filter = prog };
        pid_t pid = fork();
        if (pid == 0) {
                pthread_t t;
                load_result = -1;
                if (pthread_create(&t, NULL, load_thread, NULL) != 0)
                        _exit(99);
                for (int i = 0; i < 5000 && __atomic_load_n(&load_result, __ATOMIC_SEQ_CST) < 0; i++)
                        usleep(1000);
                _exit(__atomic_load_n(&load_result, __ATOMIC_SEQ_CST) == 0 ? 0 : 98);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fail_msg("table of %zu: the kernel refused its %zu instructions (status %#x)", n, len, status);
        free(prog);
}

static void test_dispatch_decides_as_its_table(void **state)
{
        (void)state;
        check_dispatch(NULL, 0);
        const struct seccomp_number edges[] = { { 0, SECCOMP_RET_ALLOW, -1 }, { 1, 0, 0 }, { 2, 0, 1 },
                                                { 7, SECCOMP_RET_ERRNO | ENOSYS, -1 },
                                                { 0x3fffffffU, SECCOMP_RET_ALLOW, -1 },
                                                { 0xffffffffU, SECCOMP_RET_ERRNO | 1, -1 } };
        check_dispatch(edges, ARRAY_SIZE(edges));
        /* random tables of up to 900 numbers: past what shared returns
         * reach (255 instructions), past what a jump over the lower half
         * reaches, runs of one decision, several routed to the checks */
        static const uint32_t rets[] = { SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | 1, SECCOMP_RET_USER_NOTIF,
                                         SECCOMP_RET_LOG, SECCOMP_RET_ERRNO | ENOSYS };
        static struct seccomp_number v[900];
        srandom(19);
        static const size_t sizes[] = { 3, 40, 130, 300, 700, 900 };
        for (size_t s = 0; s < ARRAY_SIZE(sizes); s++)
                for (int round = 0; round < 4; round++) {
                        uint32_t nr = (uint32_t)(random() % 3);
                        for (size_t i = 0; i < sizes[s]; i++) {
                                v[i].nr = nr;
                                v[i].sub = random() % 9 == 0 ? (int)(random() % 2) : -1;
                                v[i].ret = rets[random() % ARRAY_SIZE(rets)];
                                nr += 1 + (uint32_t)(random() % (round + 1));
                        }
                        check_dispatch(v, sizes[s]);
                }
        /* a table out of order is refused */
        const struct seccomp_number unsorted[] = { { 5, SECCOMP_RET_ALLOW, -1 }, { 5, 0, -1 } };
        struct sock_filter *prog = NULL;
        size_t len = 0;
        assert_int_equal(seccomp_dispatch_emit(AUDIT_ARCH_X86_64, 0, unsorted, 2, 0, NULL, 0, &prog, &len), -EINVAL);
        assert_null(prog);
        /* ... and so is a number routed to a program that is not there */
        const struct seccomp_number nowhere[] = { { 5, 0, 0 } };
        assert_int_equal(seccomp_dispatch_emit(AUDIT_ARCH_X86_64, 0, nowhere, 1, 0, NULL, 0, &prog, &len), -EINVAL);
        assert_null(prog);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rules_accepted),
                cmocka_unit_test(test_rules_refused),
                cmocka_unit_test(test_default_profile),
                cmocka_unit_test(test_user_rules_replace_the_default),
                cmocka_unit_test(test_degraded_loads_nothing),
                cmocka_unit_test(test_cache_program_is_run_before_it_is_trusted),
                cmocka_unit_test(test_cache_bytes_the_kernel_would_refuse),
                cmocka_unit_test(test_dispatch_decides_as_its_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
