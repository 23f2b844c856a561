/* test_persist.c — unit tests for the pure parts of persistent sandboxes:
 * sandbox names (they become directory names under the state root) and
 * the exec request parser (pid 1 and the supervisor parse what a client
 * sends). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "brig.h"
#include "persist/control.h"
#include "persist/sandbox.h"
#include "core/reaper.h"
#include "persist/state.h"

static void test_names(void **state)
{
        (void)state;
        static const char *const good[] = { "a", "A9", "web-1", "x.y_z", "0", NULL };
        static const char *const bad[] = { "", ".", "..", ".x", "-x", "_x", "a/b", "a b", "a\nb", "pools", "cache", "runs", "é", NULL };
        for (size_t i = 0; good[i]; i++)
                if (!state_name_valid(good[i]))
                        fail_msg("'%s' should be a valid name", good[i]);
        for (size_t i = 0; bad[i]; i++)
                if (state_name_valid(bad[i]))
                        fail_msg("'%s' should be refused", bad[i]);
        char longest[65], too_long[66];
        memset(longest, 'a', 64);
        longest[64] = '\0';
        memset(too_long, 'a', 65);
        too_long[65] = '\0';
        assert_true(state_name_valid(longest));
        assert_false(state_name_valid(too_long));
        assert_false(state_name_valid(NULL));
}

/* The names that prove who made a cgroup or a run record (reaper.c):
 * what owner_format writes, owner_parse reads back, and nothing else. */
static void test_owner_names(void **state)
{
        (void)state;
        struct owner o = { 4711, 123456789ULL, 4026531836ULL }, back;
        char buf[96];
        const char *rest;
        assert_int_equal(owner_format(&o, buf, sizeof buf), 0);
        assert_string_equal(buf, "4711-123456789-4026531836");
        assert_true(owner_parse(buf, &back, &rest));
        assert_true(back.pid == o.pid && back.start == o.start && back.pidns == o.pidns && *rest == '\0');
        assert_true(owner_parse("4711-123456789-4026531836-3", &back, &rest));
        assert_string_equal(rest, "-3");  /* a cgroup's counter */
        assert_true(owner_parse("4711-123456789-4026531836.tmp", &back, &rest));
        assert_string_equal(rest, ".tmp");  /* a cache temporary */
        static const char *const bad[] = { "", "4711", "4711-5", "4711-5-", "x-1-2", "0-1-2", "-1-2-3", "4711-0-2",
                                           "4711-5-6x", "4711 5 6", NULL };
        for (size_t i = 0; bad[i]; i++)
                if (owner_parse(bad[i], &back, NULL))
                        fail_msg("'%s' should not name an owner", bad[i]);
        assert_int_equal(owner_format(&o, buf, 8), -ENAMETOOLONG);
        /* we are alive, in our own pid namespace */
        owner_self(&o);
        assert_int_equal(owner_alive(&o), 1);
        o.start++;
        assert_int_equal(owner_alive(&o), 0);  /* the pid names another process now */
        o.start--;
        o.pidns++;
        assert_int_equal(owner_alive(&o), -1);  /* cannot be told from here */
}

/* hdr + cwd\0 + argv + env, as exec.c builds it */
static size_t build(char *buf, const char *cwd, const char *const *argv, const char *const *env)
{
        struct ctl_hdr *h = (struct ctl_hdr *)buf;
        memset(h, 0, sizeof *h);
        h->magic = CTL_MAGIC;
        h->type = CTL_EXEC;
        char *p = buf + sizeof *h;
        p = stpcpy(p, cwd) + 1;
        for (; argv && *argv; argv++, h->argc++)
                p = stpcpy(p, *argv) + 1;
        for (; env && *env; env++, h->envc++)
                p = stpcpy(p, *env) + 1;
        return (size_t)(p - buf);
}

static void test_exec_request(void **state)
{
        (void)state;
        static char buf[4096];
        const char *argv[] = { "sh", "-c", "echo hi", NULL };
        const char *env[] = { "A=1", "B=", NULL };
        struct exec_request req;
        size_t n = build(buf, "/tmp", argv, env);
        assert_int_equal(exec_request_parse(buf, n, &req), 0);
        assert_string_equal(req.cwd, "/tmp");
        assert_string_equal(req.argv[2], "echo hi");
        assert_null(req.argv[3]);
        assert_string_equal(req.env[1], "B=");
        assert_null(req.env[2]);
        exec_request_free(&req);

        n = build(buf, "", argv, NULL);
        assert_int_equal(exec_request_parse(buf, n, &req), 0);
        assert_null(req.cwd);
        exec_request_free(&req);

        /* every shorter message is malformed: no string may run past the end */
        n = build(buf, "/tmp", argv, env);
        for (size_t cut = 0; cut < n; cut++)
                assert_int_equal(exec_request_parse(buf, cut, &req), -EBADMSG);
        /* trailing bytes, a count larger than the strings */
        assert_int_equal(exec_request_parse(buf, n + 1, &req), -EBADMSG);
        ((struct ctl_hdr *)buf)->argc = 4;
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        ((struct ctl_hdr *)buf)->argc = 0x7fffffff;
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);

        const char *rel[] = { "true", NULL };
        n = build(buf, "relative", rel, NULL);
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        const char *empty[] = { "", NULL };
        n = build(buf, "", empty, NULL);
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        n = build(buf, "", NULL, NULL);
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        const char *badenv[] = { "NOEQUALS", NULL };
        n = build(buf, "", rel, badenv);
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        const char *noname[] = { "=x", NULL };
        n = build(buf, "", rel, noname);
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
        /* a pool member's one run: the caller's context last, never
         * detached, never a file operation */
        n = build(buf, "", rel, NULL);
        ((struct ctl_hdr *)buf)->flags = CTL_EXEC_LAST;
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);  /* no context */
        memcpy(buf + n, "HOME=/h\n", 9);
        assert_int_equal(exec_request_parse(buf, n + 9, &req), 0);
        assert_true(req.flags & CTL_EXEC_LAST);
        assert_string_equal(req.context, "HOME=/h\n");
        exec_request_free(&req);
        assert_int_equal(exec_request_parse(buf, n + 8, &req), -EBADMSG);  /* unterminated */
        ((struct ctl_hdr *)buf)->flags = CTL_EXEC_LAST | CTL_EXEC_DETACH;
        assert_int_equal(exec_request_parse(buf, n + 9, &req), -EBADMSG);
        n = build(buf, "", rel, NULL);
        ((struct ctl_hdr *)buf)->type = CTL_STOP;
        assert_int_equal(exec_request_parse(buf, n, &req), -EBADMSG);
}

/* A supervisor that ends while a request waits (a pool member whose
 * daemon died, stopping): what the client can tell about whether the
 * command ran. The kernel resets a connection closed with its message
 * unread, or never accepted; one whose message was read ends plainly. */
struct exec_call {
        int fd, r, errnum;
        char msg[512];
};

static void *exec_call_run(void *arg)
{
        struct exec_call *c = arg;
        static char true_[] = "true";
        char *argv[] = { true_, NULL };
        brig_exec_opts o = { .argv = argv };
        brig_result res;
        brig_error *err = NULL;
        c->r = exec_over(c->fd, "m", &o, NULL, &res, NULL, &err);
        c->errnum = err ? err->errnum : 0;
        snprintf(c->msg, sizeof c->msg, "%s", err && err->msg ? err->msg : "");
        brig_error_free(&err);
        return NULL;
}

static void exec_call_start(struct exec_call *c, pthread_t *t, int fd)
{
        memset(c, 0, sizeof *c);
        c->fd = fd;
        assert_int_equal(pthread_create(t, NULL, exec_call_run, c), 0);
}

static void test_exec_supervisor_ends(void **state)
{
        (void)state;
        pthread_t t;
        struct exec_call c;
        int sv[2];
        /* closed before the request left */
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        close(sv[1]);
        exec_call_start(&c, &t, sv[0]);
        pthread_join(t, NULL);
        assert_true(c.r < 0);
        assert_int_equal(c.errnum, ESHUTDOWN);
        assert_non_null(strstr(c.msg, "nothing ran"));
        close(sv[0]);
        /* closed with the request unread: reset */
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        exec_call_start(&c, &t, sv[0]);
        struct pollfd pf = { .fd = sv[1], .events = POLLIN };
        assert_int_equal(poll(&pf, 1, 10000), 1);
        close(sv[1]);
        pthread_join(t, NULL);
        assert_int_equal(c.errnum, ESHUTDOWN);
        assert_non_null(strstr(c.msg, "nothing ran"));
        close(sv[0]);
        /* the request read, then the end: it may have run */
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        exec_call_start(&c, &t, sv[0]);
        assert_int_equal(poll(&pf, 1, 10000), 1);
        static char buf[CTL_MAX_MSG];
        int fds[CTL_MAX_FDS], nfds;
        assert_true(ctl_recv(sv[1], buf, sizeof buf, fds, &nfds) > 0);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        close(sv[1]);
        pthread_join(t, NULL);
        assert_int_equal(c.errnum, EPIPE);
        assert_non_null(strstr(c.msg, "went away during the exec"));
        assert_null(strstr(c.msg, "nothing ran"));
        close(sv[0]);
}

/* brig_exec_spec's flags are checked before any pool is looked at: an
 * unknown one, or BRIG_EXEC_CANCEL_FD without a descriptor, is EINVAL. */
static void test_pool_exec_spec_checked(void **state)
{
        (void)state;
        char *argv[] = { "true", NULL };
        /* a descriptor closed before the call: the wait's poll would
         * answer POLLNVAL at once, every time, for 30 s */
        int closed = dup(2);
        assert_true(closed >= 0);
        close(closed);
        struct {
                uint32_t flags;
                int cancel_fd;
                int errnum;
                const char *says;
        } bad[] = {
                { 1u << 7, 0, EINVAL, "unknown flags 0x80" },
                { BRIG_EXEC_CANCEL_FD, -1, EINVAL, "cancel_fd = -1" },
                { BRIG_EXEC_CANCEL_FD, closed, EBADF, "give an open descriptor" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                brig_exec_spec spec = { .size = sizeof spec, .stdio = BRIG_STDIO_PIPES, .argv = argv,
                                        .flags = bad[i].flags, .cancel_fd = bad[i].cancel_fd };
                brig_sandbox *sb = NULL;
                brig_exec *x = NULL;
                brig_error *e = NULL;
                assert_int_equal(brig_pool_exec_start("no-such-pool", &spec, &sb, &x, &e), -bad[i].errnum);
                assert_non_null(e);
                if (!strstr(e->msg, bad[i].says))
                        fail_msg("'%s' does not say '%s'", e->msg, bad[i].says);
                assert_null(sb);
                assert_null(x);
                brig_error_free(&e);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_owner_names),
                cmocka_unit_test(test_exec_request),
                cmocka_unit_test(test_exec_supervisor_ends),
                cmocka_unit_test(test_pool_exec_spec_checked),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
