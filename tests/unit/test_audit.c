/* test_audit.c — unit tests for src/lib/core/audit.c: the writer thread that
 * keeps a caller's reader from holding up the supervisor. A reader that
 * falls a whole queue behind loses lines, counted and said; one that takes
 * nothing after the run is given up; one that closes stops the stream with
 * EPIPE and no SIGPIPE. (test_harness_attacks.py attacks the same through
 * brig run; the queue's bound is out of its reach under the rate limits.) */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/audit.h"

struct said {
        char text[4096];
};

static void collect(const char *line, void *data)
{
        struct said *s = data;
        size_t used = strlen(s->text);
        snprintf(s->text + used, sizeof s->text - used, "%s\n", line);
}

/* One network event of about `size` bytes (audit_net takes it). */
static void big_event(struct audit *a, size_t size)
{
        char *pad = malloc(size + 1);
        assert_non_null(pad);
        memset(pad, 'x', size);
        pad[size] = '\0';
        audit_net(a, json_pack("{s:s, s:s}", "event", "net", "pad", pad));
        free(pad);
}

static void test_full_queue_drops_counts_and_gives_up(void **state)
{
        (void)state;
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        fcntl(p[1], F_SETPIPE_SZ, 4096);
        struct said s = { "" };
        struct audit *a = audit_new(p[1], "--audit-fd 9", collect, &s);
        assert_non_null(a);
        audit_run(a);
        /* Under the network rate limit, ~3.4 MiB: more than the queue and
         * the writer's batch (one queue's worth, taken whenever the writer
         * thread gets to run) can hold together, however the two threads
         * are scheduled — 1.8 MiB left the queue short of full when the
         * writer ran late and took the first 52 events at once. */
        for (int i = 0; i < 90; i++)
                big_event(a, 40000);
        assert_string_equal(s.text, "");  /* nothing said while the run goes on */
        brig_result res = { 0 };
        audit_end(a, &res);  /* nobody reads: given up after DRAIN_IDLE_MS */
        assert_true(audit_lost(a) > 30);
        assert_non_null(strstr(s.text, "--audit-fd 9: the reader is not keeping up (1024 KiB unread)"));
        assert_non_null(strstr(s.text, "--audit-fd 9: nothing was read for 5 s after the run ended"));
        assert_non_null(audit_stopped(a));
        audit_free(a);
        close(p[0]);
        close(p[1]);
}

static void test_closed_reader_is_epipe_not_sigpipe(void **state)
{
        (void)state;
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        close(p[0]);
        struct said s = { "" };
        struct audit *a = audit_new(p[1], "--audit-fd 9", collect, &s);
        assert_non_null(a);
        audit_run(a);
        for (int i = 0; i < 5; i++)
                big_event(a, 100);
        brig_result res = { 0 };
        audit_end(a, &res);  /* SIGPIPE's default would end this test here */
        assert_int_equal(audit_lost(a), 6);  /* five events and the end */
        assert_non_null(strstr(s.text, "--audit-fd 9: the reader closed it (EPIPE)"));
        assert_null(strstr(strstr(s.text, "(EPIPE)") + 1, "(EPIPE)"));  /* said once */
        audit_free(a);
        close(p[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full_queue_drops_counts_and_gives_up),
                cmocka_unit_test(test_closed_reader_is_epipe_not_sigpipe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
