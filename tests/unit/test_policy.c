/* test_policy.c — unit tests for the policy model (src/lib/policy/policy.c), the
 * error helpers (src/lib/core/error.c) and plan building (src/lib/core/plan.c).
 * plan_build only reads the host (HOME, the passwd database, stat, glob,
 * realpath), so it is exercised against a scratch tree under /tmp with
 * HOME pointed into it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"

#define assert_contains(haystack, needle)                                                         \
        do {                                                                                      \
                const char *h_ = (haystack), *n_ = (needle);                                      \
                if (!h_ || !strstr(h_, n_))                                                       \
                        fail_msg("expected \"%s\" to contain \"%s\"", h_ ? h_ : "(null)", n_);    \
        } while (0)

/* ---- brig_parse_size ----------------------------------------------------- */

static void check_size(const char *text, uint64_t want)
{
        uint64_t got = 0xdeadbeef;
        brig_error *err = NULL;
        int r = brig_parse_size(text, &got, &err);
        if (r != 0)
                fail_msg("brig_parse_size(\"%s\") = %d (%s), expected %llu", text, r, err ? err->msg : "-",
                         (unsigned long long)want);
        assert_null(err);
        if (got != want)
                fail_msg("brig_parse_size(\"%s\") = %llu, expected %llu", text, (unsigned long long)got,
                         (unsigned long long)want);
}

static void check_size_fails(const char *text)
{
        uint64_t got = 4242;
        brig_error *err = NULL;
        int r = brig_parse_size(text, &got, &err);
        if (r >= 0)
                fail_msg("brig_parse_size(\"%s\") succeeded with %llu, expected an error", text,
                         (unsigned long long)got);
        assert_int_equal(got, 4242);  /* output untouched on error */
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_true(err->errnum > 0);
        assert_int_equal(r, -err->errnum);
        char quoted[256];
        snprintf(quoted, sizeof quoted, "'%s'", text);
        assert_contains(err->msg, quoted);
        brig_error_free(&err);
        assert_null(err);
        /* without an error object it still fails, and does not crash */
        assert_true(brig_parse_size(text, &got, NULL) < 0);
}

static void test_size_units(void **state)
{
        (void)state;
        check_size("100", 100);
        check_size("0", 0);
        check_size("10K", 10ULL << 10);
        check_size("512M", 512ULL << 20);
        check_size("2G", 2ULL << 30);
        check_size("1T", 1ULL << 40);
        check_size("1.5G", (3ULL << 30) / 2);
        check_size("0.5K", 512);
}

static void test_size_suffix_spellings(void **state)
{
        (void)state;
        check_size("512MB", 512ULL << 20);
        check_size("64MiB", 64ULL << 20);
        check_size("512m", 512ULL << 20);
        check_size("2g", 2ULL << 30);
        check_size("10k", 10ULL << 10);
        check_size("4KiB", 4096);
        check_size("100B", 100);
}

static void test_size_errors(void **state)
{
        (void)state;
        check_size_fails("");
        check_size_fails("M");
        check_size_fails("-1");
        check_size_fails("-1M");
        check_size_fails("12X");
        check_size_fails("1.5.5G");
        check_size_fails("abc");
        check_size_fails("12Q");
        check_size_fails(" 1G");
        check_size_fails("1G ");
        check_size_fails("1 G");
        check_size_fails("1GG");
        check_size_fails("1MBx");
        check_size_fails(".5G");
}

static void test_size_too_large(void **state)
{
        (void)state;
        check_size_fails("99999999999T");
        check_size_fails("18446744073709551616");
        check_size_fails("16777216T");  /* exactly 2^64 */
        check_size("16777215T", 16777215ULL << 40);  /* just below */
}

static void test_size_empty_message(void **state)
{
        (void)state;
        uint64_t got;
        brig_error *err = NULL;
        assert_int_equal(brig_parse_size("", &got, &err), -EINVAL);
        assert_non_null(err);
        assert_contains(err->msg, "size ''");
        brig_error_free(&err);
        assert_int_equal(brig_parse_size(NULL, &got, &err), -EINVAL);
        assert_non_null(err);
        brig_error_free(&err);
}

/* ---- policy defaults ----------------------------------------------------- */

static void test_policy_defaults(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        const char *const *def = brig_default_deny_list();
        assert_non_null(def);
        size_t n = 0;
        while (def[n]) {
                assert_string_equal(p->deny.items[n], def[n]);
                n++;
        }
        assert_int_equal(p->deny.n, n);
        assert_true(n > 10);
        /* the obvious secrets are on it */
        struct strv d = { .items = (char **)def, .n = n };
        assert_true(strv_contains(&d, "~/.ssh"));
        assert_true(strv_contains(&d, "~/.aws"));
        assert_true(strv_contains(&d, "~/.gnupg"));
        assert_true(strv_contains(&d, "/etc/shadow"));
        assert_int_equal(p->unsafe_allowed.n, 0);
        assert_null(p->workspace);
        assert_int_equal(p->n_mounts, 0);
        assert_int_equal(p->n_env, 0);
        assert_int_equal(p->n_pass_fds, 0);
        assert_null(p->hostname);
        assert_null(p->report_path);
        assert_false(p->mount_sys);
        assert_int_equal(p->tty, BRIG_TTY_AUTO);
        assert_int_equal(p->tmp_size, 512ULL << 20);
        assert_int_equal(p->home_size, 256ULL << 20);
        brig_policy_free(p);
        brig_policy_free(NULL);
}

static void test_default_deny_entries_are_valid(void **state)
{
        (void)state;
        /* Every built-in entry must itself pass the checks a user entry gets. */
        brig_policy *p = brig_policy_new();
        const char *const *def = brig_default_deny_list();
        for (size_t i = 0; def[i]; i++) {
                brig_error *err = NULL;
                if (brig_policy_add_deny(p, def[i], &err) != 0)
                        fail_msg("built-in deny entry '%s' rejected: %s", def[i], err ? err->msg : "-");
        }
        size_t n = 0;
        while (def[n])
                n++;
        assert_int_equal(p->deny.n, n);  /* re-adding is a no-op */
        brig_policy_free(p);
}

/* ---- deny list ----------------------------------------------------------- */

static void check_deny_rejected(brig_policy *p, const char *pattern)
{
        size_t before = p->deny.n;
        brig_error *err = NULL;
        int r = brig_policy_add_deny(p, pattern, &err);
        if (r != -EINVAL)
                fail_msg("brig_policy_add_deny(\"%s\") = %d, expected -EINVAL", pattern, r);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        char quoted[256];
        snprintf(quoted, sizeof quoted, "'%s'", pattern);
        assert_contains(err->msg, quoted);
        brig_error_free(&err);
        assert_int_equal(p->deny.n, before);
}

static void test_deny_add(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        size_t n0 = p->deny.n;
        brig_error *err = NULL;
        assert_int_equal(brig_policy_add_deny(p, "/srv/secret", &err), 0);
        assert_int_equal(brig_policy_add_deny(p, "~/.config/tokens", &err), 0);
        assert_int_equal(brig_policy_add_deny(p, "/var/keys/*.pem", &err), 0);
        assert_int_equal(brig_policy_add_deny(p, "~/.hidden-thing", &err), 0);
        assert_null(err);
        assert_int_equal(p->deny.n, n0 + 4);
        assert_true(strv_contains(&p->deny, "/srv/secret"));
        assert_true(strv_contains(&p->deny, "~/.config/tokens"));
        /* duplicates are not stored twice */
        assert_int_equal(brig_policy_add_deny(p, "/srv/secret", &err), 0);
        assert_int_equal(brig_policy_add_deny(p, "~/.ssh", &err), 0);
        assert_int_equal(p->deny.n, n0 + 4);
        brig_policy_free(p);
}

static void test_deny_rejects(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        check_deny_rejected(p, "relative");
        check_deny_rejected(p, "relative/path");
        check_deny_rejected(p, ".ssh");
        check_deny_rejected(p, "");
        check_deny_rejected(p, "~");
        check_deny_rejected(p, "~foo/.ssh");
        check_deny_rejected(p, "/a/../b");
        check_deny_rejected(p, "/a/..");
        check_deny_rejected(p, "/..");
        check_deny_rejected(p, "~/../etc");
        check_deny_rejected(p, "~/..");
        check_deny_rejected(p, "/a/./b");
        brig_error *err = NULL;
        assert_int_equal(brig_policy_add_deny(p, NULL, &err), -EINVAL);
        brig_error_free(&err);
        brig_policy_free(p);
}

static void test_unsafe_allow_secret(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        size_t n0 = p->deny.n;
        brig_error *err = NULL;
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "~/.ssh", &err), 0);
        assert_null(err);
        assert_false(strv_contains(&p->deny, "~/.ssh"));
        assert_true(strv_contains(&p->unsafe_allowed, "~/.ssh"));
        assert_int_equal(p->deny.n, n0 - 1);
        /* the rest of the list stays */
        assert_true(strv_contains(&p->deny, "~/.aws"));
        assert_true(strv_contains(&p->deny, "/etc/shadow"));

        /* twice: no longer on the list */
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "~/.ssh", &err), -ENOENT);
        assert_non_null(err);
        assert_contains(err->msg, "'~/.ssh'");
        brig_error_free(&err);

        /* unknown entries */
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "/not/builtin", &err), -ENOENT);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(err->errnum, ENOENT);
        assert_contains(err->msg, "'/not/builtin'");
        brig_error_free(&err);
        assert_int_equal(p->deny.n, n0 - 1);

        /* a user's own entry is not a built-in and cannot be "unsafely allowed" */
        assert_int_equal(brig_policy_add_deny(p, "/srv/mine", &err), 0);
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "/srv/mine", &err), -ENOENT);
        brig_error_free(&err);
        assert_true(strv_contains(&p->deny, "/srv/mine"));

        /* a host secret can be removed too */
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "/etc/shadow", &err), 0);
        assert_false(strv_contains(&p->deny, "/etc/shadow"));
        assert_int_equal(p->unsafe_allowed.n, 2);
        brig_policy_free(p);
}

static void test_unsafe_allow_leaves_default_list(void **state)
{
        (void)state;
        /* brig_default_deny_list() is static storage: one policy's removal
         * must not leak into a new policy. */
        brig_policy *p = brig_policy_new();
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "~/.aws", NULL), 0);
        brig_policy *q = brig_policy_new();
        assert_true(strv_contains(&q->deny, "~/.aws"));
        const char *const *def = brig_default_deny_list();
        bool found = false;
        for (size_t i = 0; def[i]; i++)
                found |= strcmp(def[i], "~/.aws") == 0;
        assert_true(found);
        brig_policy_free(p);
        brig_policy_free(q);
}

/* ---- binds and tmpfs ------------------------------------------------------ */

static void check_bind_rejected(const char *src, const char *dst, const char *mention)
{
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        int r = brig_policy_add_bind(p, src, dst, 0, &err);
        if (r != -EINVAL)
                fail_msg("add_bind(\"%s\", \"%s\") = %d, expected -EINVAL", src ? src : "(null)",
                         dst ? dst : "(null)", r);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_contains(err->msg, mention);
        assert_int_equal(p->n_mounts, 0);
        brig_error_free(&err);
        brig_policy_free(p);
}

static void test_bind_ok(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_add_bind(p, "/srv/data", NULL, BRIG_BIND_READONLY, &err), 0);
        assert_int_equal(brig_policy_add_bind(p, "/srv//other/./x/", "/mnt/x/", 0, &err), 0);
        assert_int_equal(brig_policy_add_bind(p, "/opt/t", "/procfs", 0, &err), 0);  /* not /proc */
        assert_int_equal(brig_policy_add_bind(p, "/opt/t", "/device", 0, &err), 0);  /* not /dev */
        assert_null(err);
        assert_int_equal(p->n_mounts, 4);
        assert_int_equal(p->mounts[0].kind, MOUNT_BIND);
        assert_string_equal(p->mounts[0].src, "/srv/data");
        assert_string_equal(p->mounts[0].dst, "/srv/data");
        assert_true(p->mounts[0].readonly);
        assert_true(p->mounts[0].from_user);
        assert_string_equal(p->mounts[1].src, "/srv/other/x");
        assert_string_equal(p->mounts[1].dst, "/mnt/x");
        assert_false(p->mounts[1].readonly);
        brig_policy_free(p);
}

static void test_bind_rejects(void **state)
{
        (void)state;
        check_bind_rejected("relative", NULL, "'relative'");
        check_bind_rejected("./x", NULL, "'./x'");
        check_bind_rejected("", NULL, "bind source");
        check_bind_rejected("/srv/x", "relative", "'relative'");
        check_bind_rejected("/srv/../etc", NULL, "/srv/../etc");
        check_bind_rejected("/srv/x", "/mnt/../etc", "/mnt/../etc");
        check_bind_rejected("/srv/x", "/", "'/'");
        check_bind_rejected("/srv/x", "//", "'/'");
        check_bind_rejected("/srv/x", "/.", "'/'");
        check_bind_rejected("/srv/x", "/proc", "/proc");
        check_bind_rejected("/srv/x", "/proc/x", "/proc/x");
        check_bind_rejected("/srv/x", "/proc/1/root", "/proc/1/root");
        check_bind_rejected("/srv/x", "//proc//x/", "/proc/x");
        check_bind_rejected("/srv/x", "/dev", "/dev");
        check_bind_rejected("/srv/x", "/dev/x", "/dev/x");
        check_bind_rejected("/srv/x", "/dev/shm", "/dev/shm");
        check_bind_rejected("/srv/x", "/./dev/./pts", "/dev/pts");
        check_bind_rejected("/proc/self", NULL, "/proc/self");  /* dst defaults to src */
        check_bind_rejected("/", NULL, "'/'");
}

static void test_tmpfs(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_add_tmpfs(p, "/scratch", 0, &err), 0);
        assert_int_equal(brig_policy_add_tmpfs(p, "/big/", 1ULL << 30, &err), 0);
        assert_null(err);
        assert_int_equal(p->n_mounts, 2);
        assert_int_equal(p->mounts[0].kind, MOUNT_TMPFS);
        assert_string_equal(p->mounts[0].dst, "/scratch");
        assert_int_equal(p->mounts[0].size, 64ULL << 20);
        assert_int_equal(p->mounts[0].mode, 01777);
        assert_null(p->mounts[0].src);
        assert_string_equal(p->mounts[1].dst, "/big");
        assert_int_equal(p->mounts[1].size, 1ULL << 30);
        assert_int_equal(brig_policy_add_tmpfs(p, "rel", 0, &err), -EINVAL);
        assert_contains(err->msg, "'rel'");
        brig_error_free(&err);
        assert_int_equal(brig_policy_add_tmpfs(p, "/", 0, &err), -EINVAL);
        brig_error_free(&err);
        assert_int_equal(brig_policy_add_tmpfs(p, "/dev/shm", 0, &err), -EINVAL);
        assert_contains(err->msg, "/dev/shm");
        brig_error_free(&err);
        assert_int_equal(brig_policy_add_tmpfs(p, "/proc/sys", 0, &err), -EINVAL);
        brig_error_free(&err);
        assert_int_equal(p->n_mounts, 2);
        brig_policy_free(p);
}

static void test_sizes(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_set_tmp_size(p, 1ULL << 30, &err), 0);
        assert_int_equal(p->tmp_size, 1ULL << 30);
        assert_int_equal(brig_policy_set_home_size(p, 4096, &err), 0);
        assert_int_equal(p->home_size, 4096);
        assert_int_equal(brig_policy_set_tmp_size(p, 100, &err), -EINVAL);
        assert_contains(err->msg, "100");
        brig_error_free(&err);
        assert_int_equal(brig_policy_set_home_size(p, 0, &err), -EINVAL);
        brig_error_free(&err);
        assert_int_equal(p->tmp_size, 1ULL << 30);
        assert_int_equal(p->home_size, 4096);
        brig_policy_free(p);
}

static void test_workspace(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_set_workspace(p, "/home//u/proj/", &err), 0);
        assert_string_equal(p->workspace, "/home/u/proj");
        assert_int_equal(brig_policy_set_workspace(p, "proj", &err), -EINVAL);
        assert_contains(err->msg, "'proj'");
        brig_error_free(&err);
        assert_int_equal(brig_policy_set_workspace(p, "/home/u/../v", &err), -EINVAL);
        brig_error_free(&err);
        assert_string_equal(p->workspace, "/home/u/proj");  /* unchanged */
        brig_policy_free(p);
}

/* ---- environment, fds, hostname ------------------------------------------- */

static void check_env_rejected(const char *name)
{
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_set_env(p, name, "v", &err), -EINVAL);
        assert_non_null(err);
        char quoted[128];
        snprintf(quoted, sizeof quoted, "'%s'", name);
        assert_contains(err->msg, quoted);
        assert_int_equal(p->n_env, 0);
        brig_error_free(&err);
        assert_int_equal(brig_policy_keep_env(p, name, &err), -EINVAL);
        brig_error_free(&err);
        assert_int_equal(p->keep_env.n, 0);
        brig_policy_free(p);
}

static void test_env(void **state)
{
        (void)state;
        check_env_rejected("1A");
        check_env_rejected("A-B");
        check_env_rejected("");
        check_env_rejected("A B");
        check_env_rejected("A=B");
        check_env_rejected("A.B");

        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_set_env(p, "FOO", "one", &err), 0);
        assert_int_equal(brig_policy_set_env(p, "_x1", "", &err), 0);
        assert_int_equal(brig_policy_set_env(p, "FOO", "two", &err), 0);  /* later wins */
        assert_int_equal(brig_policy_set_env(p, "BAR", "a=b=c", &err), 0);
        assert_null(err);
        assert_int_equal(p->n_env, 3);
        assert_string_equal(p->env[0].name, "FOO");
        assert_string_equal(p->env[0].value, "two");
        assert_string_equal(p->env[1].name, "_x1");
        assert_string_equal(p->env[1].value, "");
        assert_string_equal(p->env[2].value, "a=b=c");

        assert_int_equal(brig_policy_keep_env(p, "TERM", &err), 0);
        assert_int_equal(brig_policy_keep_env(p, "TERM", &err), 0);
        assert_int_equal(p->keep_env.n, 1);
        brig_policy_free(p);
}

static void test_pass_fd(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        for (int fd = -1; fd <= 2; fd++) {
                assert_int_equal(brig_policy_pass_fd(p, fd, &err), -EINVAL);
                assert_non_null(err);
                char want[32];
                snprintf(want, sizeof want, "--pass-fd %d", fd);
                assert_contains(err->msg, want);
                brig_error_free(&err);
        }
        assert_int_equal(p->n_pass_fds, 0);
        assert_int_equal(brig_policy_pass_fd(p, 3, &err), 0);
        assert_int_equal(brig_policy_pass_fd(p, 200, &err), 0);
        assert_int_equal(p->n_pass_fds, 2);
        assert_int_equal(p->pass_fds[0], 3);
        assert_int_equal(p->pass_fds[1], 200);
        brig_policy_free(p);
}

static void test_hostname(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        char name64[65], name65[66];
        memset(name64, 'a', 64);
        name64[64] = '\0';
        memset(name65, 'b', 65);
        name65[65] = '\0';

        assert_int_equal(brig_policy_set_hostname(p, "my-host.local", &err), 0);
        assert_string_equal(p->hostname, "my-host.local");
        assert_int_equal(brig_policy_set_hostname(p, name64, &err), 0);
        assert_string_equal(p->hostname, name64);
        assert_null(err);

        const char *bad[] = { "", "a b", name65, "a/b", "a_b", "x\n", NULL };
        for (size_t i = 0; bad[i]; i++) {
                if (brig_policy_set_hostname(p, bad[i], &err) != -EINVAL)
                        fail_msg("hostname \"%s\" accepted", bad[i]);
                assert_non_null(err);
                assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
                if (bad[i][0] && strlen(bad[i]) <= 64 && !strchr(bad[i], '\n')) {
                        char quoted[128];
                        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
                        assert_contains(err->msg, quoted);
                }
                brig_error_free(&err);
        }
        assert_int_equal(brig_policy_set_hostname(p, NULL, &err), -EINVAL);
        brig_error_free(&err);
        assert_string_equal(p->hostname, name64);  /* unchanged by failures */
        brig_policy_free(p);
}

static void test_report_path_and_tty(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        assert_int_equal(brig_policy_set_report_path(p, "", &err), -EINVAL);
        brig_error_free(&err);
        assert_int_equal(brig_policy_set_report_path(p, NULL, &err), -EINVAL);
        brig_error_free(&err);
        assert_null(p->report_path);
        assert_int_equal(brig_policy_set_report_path(p, "/tmp/r.json", &err), 0);
        assert_string_equal(p->report_path, "/tmp/r.json");
        brig_policy_set_tty(p, BRIG_TTY_NEVER);
        assert_int_equal(p->tty, BRIG_TTY_NEVER);
        brig_policy_set_mount_sys(p, true);
        assert_true(p->mount_sys);
        brig_policy_free(p);
}

/* ---- brig_error ------------------------------------------------------------ */

static void test_err_basic(void **state)
{
        (void)state;
        brig_error *err = NULL;
        assert_int_equal(brig_err(&err, ENOENT, "open '%s'", "/x"), -ENOENT);
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(err->errnum, ENOENT);
        assert_string_equal(err->msg, "open '/x': No such file or directory");
        brig_error_free(&err);
        assert_null(err);
        brig_error_free(&err);  /* NULL is fine */
        brig_error_free(NULL);
}

static void test_err_no_errno(void **state)
{
        (void)state;
        brig_error *err = NULL;
        /* errnum 0 still yields a negative result */
        assert_int_equal(brig_err(&err, 0, "plain %d", 7), -EIO);
        assert_non_null(err);
        assert_int_equal(err->errnum, 0);
        assert_string_equal(err->msg, "plain 7");
        brig_error_free(&err);
        /* no error object: only the return value */
        assert_int_equal(brig_err(NULL, EPERM, "x"), -EPERM);
}

static void test_err_keeps_first(void **state)
{
        (void)state;
        brig_error *err = NULL;
        assert_int_equal(brig_err(&err, EACCES, "first"), -EACCES);
        brig_error *first = err;
        assert_int_equal(brig_err(&err, ENOENT, "second"), -ENOENT);
        assert_ptr_equal(err, first);
        assert_int_equal(err->errnum, EACCES);
        assert_contains(err->msg, "first");
        assert_null(strstr(err->msg, "second"));
        assert_int_equal(brig_err_code(&err, 127, ENOENT, "third"), -ENOENT);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        brig_error_free(&err);
}

static void test_err_code(void **state)
{
        (void)state;
        brig_error *err = NULL;
        assert_int_equal(brig_err_code(&err, BRIG_EXIT_NOT_FOUND, ENOENT, "exec '%s'", "nosuch"), -ENOENT);
        assert_int_equal(err->exit_code, 127);
        assert_int_equal(err->errnum, ENOENT);
        assert_string_equal(err->msg, "exec 'nosuch': No such file or directory");
        brig_error_free(&err);
}

static void test_err_prefix(void **state)
{
        (void)state;
        brig_error *err = NULL;
        brig_err(&err, ENOTDIR, "stat '%s'", "/w");
        assert_int_equal(brig_err_prefix(&err, "workspace %d", 1), -ENOTDIR);
        assert_string_equal(err->msg, "workspace 1: stat '/w': Not a directory");
        assert_int_equal(err->errnum, ENOTDIR);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(brig_err_prefix(&err, "outer"), -ENOTDIR);
        assert_string_equal(err->msg, "outer: workspace 1: stat '/w': Not a directory");
        brig_error_free(&err);

        /* exit code is kept as well */
        brig_err_code(&err, 126, EACCES, "exec");
        brig_err_prefix(&err, "ctx");
        assert_int_equal(err->exit_code, 126);
        assert_string_equal(err->msg, "ctx: exec: Permission denied");
        brig_error_free(&err);

        /* errnum 0 → -EIO */
        brig_err(&err, 0, "m");
        assert_int_equal(brig_err_prefix(&err, "c"), -EIO);
        assert_string_equal(err->msg, "c: m");
        brig_error_free(&err);

        /* nothing to prefix */
        assert_int_equal(brig_err_prefix(&err, "c"), -EIO);
        assert_null(err);
        assert_int_equal(brig_err_prefix(NULL, "c"), -EIO);
}

static void test_strdup_printf(void **state)
{
        (void)state;
        char *s = brig_strdup_printf("%s-%d", "a", 42);
        assert_string_equal(s, "a-42");
        free(s);
}

/* ---- reasons, version ----------------------------------------------------- */

static void test_reason_names(void **state)
{
        (void)state;
        assert_string_equal(brig_reason_name(BRIG_REASON_EXITED), "exited");
        assert_string_equal(brig_reason_name(BRIG_REASON_SIGNALED), "signaled");
        assert_string_equal(brig_reason_name(BRIG_REASON_TIMEOUT), "timeout");
        assert_string_equal(brig_reason_name(BRIG_REASON_OOM), "oom");
        assert_string_equal(brig_reason_name(BRIG_REASON_PIDS), "pids");
        assert_string_equal(brig_reason_name(BRIG_REASON_SECCOMP), "seccomp");
        assert_string_equal(brig_reason_name(BRIG_REASON_DETACHED), "detached");
        assert_string_equal(brig_reason_name((enum brig_reason)(BRIG_REASON_DETACHED + 1)), "unknown");
        assert_string_equal(brig_reason_name((enum brig_reason)99), "unknown");
        assert_string_equal(brig_reason_name((enum brig_reason)-1), "unknown");
}

static void test_version(void **state)
{
        (void)state;
        assert_non_null(brig_version());
        assert_string_equal(brig_version(), BRIG_VERSION);
        assert_true(strlen(brig_version()) > 0);
}

/* ---- plan_build ------------------------------------------------------------ */

struct fixture {
        char base[4096];   /* canonical scratch root */
        char home[4200];
        char ws[4200];
        char ssh[4200];
        char *saved_home;
};

static void xmkdir(const char *a, const char *b)
{
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", a, b);
        if (mkdir(p, 0755) < 0)
                fail_msg("mkdir %s: %s", p, strerror(errno));
}

static void xtouch(const char *a, const char *b)
{
        char p[8400];
        snprintf(p, sizeof p, "%s/%s", a, b);
        int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0)
                fail_msg("create %s: %s", p, strerror(errno));
        close(fd);
}

static int setup_tree(void **state)
{
        struct fixture *f = calloc(1, sizeof *f);
        char tmpl[] = "/tmp/brig-unit-XXXXXX";
        if (!f || !mkdtemp(tmpl))
                return -1;
        if (!realpath(tmpl, f->base))  /* plan paths are canonical */
                return -1;
        snprintf(f->home, sizeof f->home, "%s/home", f->base);
        snprintf(f->ws, sizeof f->ws, "%s/ws", f->base);
        snprintf(f->ssh, sizeof f->ssh, "%s/home/.ssh", f->base);
        xmkdir(f->base, "home");
        xmkdir(f->base, "ws");
        xmkdir(f->base, "home/.ssh");
        xmkdir(f->base, "home/.ssh/sub");
        xtouch(f->base, "home/.ssh/id_ed25519");
        xmkdir(f->base, "home/.aws");
        xmkdir(f->base, "home/project");
        xmkdir(f->base, "data");
        xtouch(f->base, "data/a.key");
        xtouch(f->base, "data/b.txt");
        xtouch(f->base, "data/netrc-real");
        xtouch(f->base, "ws/file");
        char link[8400];
        snprintf(link, sizeof link, "%s/home/.netrc", f->base);
        if (symlink("../data/netrc-real", link) < 0)
                return -1;
        const char *h = getenv("HOME");
        f->saved_home = h ? strdup(h) : NULL;
        setenv("HOME", f->home, 1);
        *state = f;
        return 0;
}

static int teardown_tree(void **state)
{
        struct fixture *f = *state;
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->base);
        int rc = system(cmd);
        (void)rc;
        if (f->saved_home)
                setenv("HOME", f->saved_home, 1);
        else
                unsetenv("HOME");
        free(f->saved_home);
        free(f);
        return 0;
}

static char *const true_argv[] = { "true", NULL };

static char *join(const char *a, const char *b)
{
        char *s = brig_strdup_printf("%s/%s", a, b);
        assert_non_null(s);
        return s;
}

static const struct mount_entry *find_mount(const struct run_plan *plan, const char *dst)
{
        const struct mount_entry *found = NULL;
        for (size_t i = 0; i < plan->n_mounts; i++)
                if (strcmp(plan->mounts[i].dst, dst) == 0)
                        found = &plan->mounts[i];  /* the last one wins */
        return found;
}

static bool env_has(const struct run_plan *plan, const char *entry)
{
        for (char **e = plan->envp; e && *e; e++)
                if (strcmp(*e, entry) == 0)
                        return true;
        return false;
}

static bool env_has_name(const struct run_plan *plan, const char *name)
{
        size_t n = strlen(name);
        for (char **e = plan->envp; e && *e; e++)
                if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                        return true;
        return false;
}

static brig_policy *policy_for(struct fixture *f)
{
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        assert_int_equal(brig_policy_set_workspace(p, f->ws, NULL), 0);
        return p;
}

static void test_plan_masks_secrets_in_bound_parent(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        /* --ro-bind of HOME's parent: ~/.ssh lies inside and must be hidden */
        assert_int_equal(brig_policy_add_bind(p, f->base, NULL, BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        int r = plan_build(&plan, p, true_argv, &err);
        if (r < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_true(strv_contains(&plan.masks, f->ssh));
        char *aws = join(f->home, ".aws");
        assert_true(strv_contains(&plan.masks, aws));
        free(aws);
        /* a symlinked secret is hidden where it really lives */
        char *netrc = join(f->base, "data/netrc-real");
        assert_true(strv_contains(&plan.masks, netrc));
        free(netrc);
        /* only secrets: the home itself, the project and the workspace stay */
        assert_false(strv_contains(&plan.masks, f->home));
        char *proj = join(f->home, "project");
        assert_false(strv_contains(&plan.masks, proj));
        free(proj);
        assert_false(strv_contains(&plan.masks, f->ws));
        /* nothing below the ssh dir is listed separately: the dir is enough */
        char *key = join(f->ssh, "id_ed25519");
        assert_false(strv_contains(&plan.masks, key));
        free(key);
        /* every mask lies inside some bind destination */
        for (size_t i = 0; i < plan.masks.n; i++) {
                bool inside = false;
                for (size_t m = 0; m < plan.n_mounts; m++)
                        if (plan.mounts[m].kind == MOUNT_BIND && path_is_under(plan.masks.items[i], plan.mounts[m].dst))
                                inside = true;
                if (!inside)
                        fail_msg("mask '%s' is outside every bind", plan.masks.items[i]);
        }
        /* the system /etc is bound, so a present /etc/shadow is hidden */
        struct stat st;
        if (lstat("/etc/shadow", &st) == 0 && lstat("/etc", &st) == 0 && S_ISDIR(st.st_mode))
                assert_true(strv_contains(&plan.masks, "/etc/shadow"));
        plan_free(&plan);
        assert_null(plan.masks.items);
        assert_null(plan.mounts);
        brig_policy_free(p);
}

static void test_plan_masks_follow_destination(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/host", BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_true(strv_contains(&plan.masks, "/mnt/host/home/.ssh"));
        assert_true(strv_contains(&plan.masks, "/mnt/host/home/.aws"));
        assert_true(strv_contains(&plan.masks, "/mnt/host/data/netrc-real"));
        /* the host path is not bound at its own place, so not masked there */
        assert_false(strv_contains(&plan.masks, f->ssh));
        plan_free(&plan);
        brig_policy_free(p);
}

/* The directories between each mask and the root of a writable grant are
 * pinned (made mountpoints, mounts.c), parents first; read-only grants and
 * the grant roots themselves need none. */
static void test_plan_pins_ancestors_in_writable_grants(void **state)
{
        struct fixture *f = *state;
        char *key = join(f->base, "data/a.key");
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        assert_int_equal(brig_policy_set_workspace(p, f->base, NULL), 0);
        assert_int_equal(brig_policy_add_deny(p, key, NULL), 0);
        char *sub = join(f->ssh, "sub");  /* inside the masked ~/.ssh: nothing to pin there */
        assert_int_equal(brig_policy_add_deny(p, sub, NULL), 0);
        free(sub);
        assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/rw", 0, NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/ro", BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        char *data = join(f->base, "data");
        /* not the workspace's home: $HOME there is brig's tmpfs, a mountpoint already */
        assert_false(strv_contains(&plan.pins, f->home));
        const char *want[] = { data, "/mnt/rw/data", "/mnt/rw/home" };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                if (!strv_contains(&plan.pins, want[i]))
                        fail_msg("'%s' is not pinned", want[i]);
        assert_true(strv_contains(&plan.masks, "/mnt/ro/data/a.key"));
        assert_true(strv_contains(&plan.masks, "/mnt/rw/home/.ssh/sub"));
        assert_false(strv_contains(&plan.pins, "/mnt/rw/home/.ssh"));
        for (size_t i = 0; i < plan.pins.n; i++) {
                const char *pin = plan.pins.items[i];
                if (strcmp(pin, f->base) == 0 || strcmp(pin, "/mnt/rw") == 0 || path_is_under(pin, "/mnt/ro") ||
                    path_is_under(pin, "/etc") || strcmp(pin, "/mnt") == 0)
                        fail_msg("'%s' is pinned: a grant root, read-only, or outside the grant", pin);
                if (i > 0 && path_depth(plan.pins.items[i - 1]) > path_depth(pin))
                        fail_msg("pins not sorted parents first: '%s' before '%s'", plan.pins.items[i - 1], pin);
        }
        plan_free(&plan);
        assert_null(plan.pins.items);
        /* A read-only workspace needs no pins either. */
        brig_policy_set_workspace_readonly(p, true);
        plan = (struct run_plan)RUN_PLAN_INIT;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_false(strv_contains(&plan.pins, data));
        assert_true(strv_contains(&plan.pins, "/mnt/rw/data"));
        plan_free(&plan);
        /* ... but a writable grant nested in it at the same place does,
         * though the read-only workspace already masks the same path. */
        xmkdir(f->base, "data/d");
        xtouch(f->base, "data/d/deep.key");
        char *deep = join(f->base, "data/d/deep.key");
        char *dd = join(f->base, "data/d");
        assert_int_equal(brig_policy_add_deny(p, deep, NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, data, NULL, 0, NULL), 0);
        plan = (struct run_plan)RUN_PLAN_INIT;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_true(strv_contains(&plan.masks, deep));
        assert_true(strv_contains(&plan.pins, dd));
        plan_free(&plan);
        free(dd);
        free(deep);
        brig_policy_free(p);
        free(data);
        free(key);
}

/* A denied path named through symlinks in a writable grant (two hops:
 * l2 -> lnk -> real): masked where it lives, and each symlink on the way
 * is pinned as well, with the directories above it; not in a read-only
 * grant. */
static void test_plan_pins_symlinks_a_secret_is_named_through(void **state)
{
        struct fixture *f = *state;
        xmkdir(f->base, "data/real");
        xtouch(f->base, "data/real/k.key");
        char *lnk = join(f->base, "data/lnk"), *l2 = join(f->base, "data/l2");
        assert_int_equal(symlink("real", lnk), 0);
        assert_int_equal(symlink(lnk, l2), 0);  /* absolute */
        char *named = join(f->base, "data/l2/k.key"), *real = join(f->base, "data/real/k.key");
        char *data = join(f->base, "data");
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        assert_int_equal(brig_policy_set_workspace(p, f->base, NULL), 0);
        assert_int_equal(brig_policy_add_deny(p, named, NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/ro", BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_true(strv_contains(&plan.masks, real));
        assert_true(strv_contains(&plan.masks, "/mnt/ro/data/real/k.key"));
        const char *want[] = { lnk, l2, data };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                if (!strv_contains(&plan.pins, want[i]))
                        fail_msg("'%s' is not pinned", want[i]);
        assert_false(strv_contains(&plan.pins, "/mnt/ro/data/lnk"));
        assert_false(strv_contains(&plan.pins, "/mnt/ro/data/l2"));
        plan_free(&plan);
        brig_policy_free(p);
        free(data);
        free(real);
        free(named);
        free(l2);
        free(lnk);
}

/* A symlink directly in a denied directory: its target is hidden where a
 * grant shows it, also when the denied directory itself is not granted. */
static void test_plan_masks_symlink_targets_in_denied_dirs(void **state)
{
        struct fixture *f = *state;
        char *link = join(f->home, ".aws/credentials");
        if (symlink("../../data/b.txt", link) < 0)
                fail_msg("symlink: %s", strerror(errno));
        char *data = join(f->base, "data");
        brig_policy *p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, data, "/mnt/d", BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_true(strv_contains(&plan.masks, "/mnt/d/b.txt"));
        assert_false(strv_contains(&plan.masks, "/mnt/d/a.key"));
        plan_free(&plan);
        brig_policy_free(p);
        free(data);
        free(link);
}

/* A denied file with a second name (or a file directly in a denied
 * directory with one) in a writable grant would show through it: refused. */
static void test_plan_refuses_denied_hard_links(void **state)
{
        struct fixture *f = *state;
        const char *cases[][2] = { { "data/a.key", "data/a.key" }, { "home/.ssh/id_ed25519", "home/.ssh/id_ed25519" } };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *target = join(f->base, cases[i][0]);
                char *other = join(f->base, "data/other-name");
                if (link(target, other) < 0)
                        fail_msg("link: %s", strerror(errno));
                brig_policy *p = policy_for(f);
                assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/host", BRIG_BIND_READONLY, NULL), 0);
                char *key = join(f->base, "data/a.key");
                assert_int_equal(brig_policy_add_deny(p, key, NULL), 0);
                struct run_plan plan = RUN_PLAN_INIT;
                brig_error *err = NULL;
                /* read-only grants only: the host's own links, not a planted one */
                if (plan_build(&plan, p, true_argv, &err) < 0)
                        fail_msg("plan_build: %s", err ? err->msg : "?");
                plan_free(&plan);
                plan = (struct run_plan)RUN_PLAN_INIT;
                assert_int_equal(brig_policy_add_bind(p, f->base, "/mnt/rw", 0, NULL), 0);
                int r = plan_build(&plan, p, true_argv, &err);
                if (r != -EMLINK)
                        fail_msg("plan_build = %d (%s), expected -EMLINK", r, err ? err->msg : "no error");
                assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
                assert_contains(err->msg, cases[i][1]);
                assert_contains(err->msg, "2 hard links");
                brig_error_free(&err);
                plan_free(&plan);
                /* the other name gone: the run goes ahead */
                assert_int_equal(unlink(other), 0);
                plan = (struct run_plan)RUN_PLAN_INIT;
                if (plan_build(&plan, p, true_argv, &err) < 0)
                        fail_msg("plan_build: %s", err ? err->msg : "?");
                plan_free(&plan);
                brig_policy_free(p);
                free(key);
                free(other);
                free(target);
        }
}

static void check_plan_eacces(struct fixture *f, brig_policy *p, const char *mention)
{
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        int r = plan_build(&plan, p, true_argv, &err);
        if (r != -EACCES)
                fail_msg("plan_build = %d (%s), expected -EACCES", r, err ? err->msg : "no error");
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(err->errnum, EACCES);
        assert_contains(err->msg, mention);
        assert_contains(err->msg, f->ssh);
        assert_contains(err->msg, "--unsafe-allow-secret");
        brig_error_free(&err);
        plan_free(&plan);
}

static void test_plan_refuses_bind_inside_secret(void **state)
{
        struct fixture *f = *state;
        char *sub = join(f->ssh, "sub");
        char *key = join(f->ssh, "id_ed25519");

        brig_policy *p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, sub, "/mnt/s", BRIG_BIND_READONLY, NULL), 0);
        check_plan_eacces(f, p, sub);
        brig_policy_free(p);

        /* the secret directory itself */
        p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, f->ssh, NULL, 0, NULL), 0);
        check_plan_eacces(f, p, f->ssh);
        brig_policy_free(p);

        /* a single file inside it */
        p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, key, "/k", BRIG_BIND_READONLY, NULL), 0);
        check_plan_eacces(f, p, key);
        brig_policy_free(p);

        /* the workspace is a bind too */
        p = brig_policy_new();
        assert_int_equal(brig_policy_set_workspace(p, sub, NULL), 0);
        check_plan_eacces(f, p, sub);
        brig_policy_free(p);

        free(sub);
        free(key);
}

static void test_plan_unsafe_allow_lifts_refusal(void **state)
{
        struct fixture *f = *state;
        char *sub = join(f->ssh, "sub");
        brig_policy *p = policy_for(f);
        assert_int_equal(brig_policy_add_bind(p, sub, "/mnt/s", BRIG_BIND_READONLY, NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, f->base, NULL, BRIG_BIND_READONLY, NULL), 0);
        assert_int_equal(brig_policy_unsafe_allow_secret(p, "~/.ssh", NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_false(strv_contains(&plan.masks, f->ssh));
        char *aws = join(f->home, ".aws");
        assert_true(strv_contains(&plan.masks, aws));  /* the others stay hidden */
        free(aws);
        plan_free(&plan);
        brig_policy_free(p);
        free(sub);
}

static void test_plan_user_deny_patterns(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        char *glob = join(f->base, "data/*.key");
        assert_int_equal(brig_policy_add_deny(p, glob, NULL), 0);
        assert_int_equal(brig_policy_add_deny(p, "~/project", NULL), 0);
        assert_int_equal(brig_policy_add_deny(p, "~/does-not-exist", NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, f->base, NULL, BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        char *akey = join(f->base, "data/a.key");
        char *btxt = join(f->base, "data/b.txt");
        char *proj = join(f->home, "project");
        char *none = join(f->home, "does-not-exist");
        assert_true(strv_contains(&plan.masks, akey));
        assert_false(strv_contains(&plan.masks, btxt));
        assert_true(strv_contains(&plan.masks, proj));
        assert_false(strv_contains(&plan.masks, none));
        plan_free(&plan);
        brig_policy_free(p);
        free(glob);
        free(akey);
        free(btxt);
        free(proj);
        free(none);
}

static void test_plan_layout(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        char *data = join(f->base, "data");
        assert_int_equal(brig_policy_add_bind(p, data, "/mnt/a/b", BRIG_BIND_READONLY, NULL), 0);
        assert_int_equal(brig_policy_add_tmpfs(p, "/mnt", 0, NULL), 0);
        assert_int_equal(brig_policy_set_tmp_size(p, 1ULL << 20, NULL), 0);
        assert_int_equal(brig_policy_set_home_size(p, 2ULL << 20, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        assert_string_equal(plan.workspace, f->ws);
        assert_string_equal(plan.home, f->home);
        assert_ptr_equal(plan.argv, true_argv);
        assert_ptr_equal(plan.policy, p);
        assert_int_equal(plan.idmapped_workspace_fd, -1);
        assert_int_equal(plan.pty_slave_fd, -1);
        assert_int_equal(plan.sync_fd, -1);

        /* parents first */
        for (size_t i = 1; i < plan.n_mounts; i++)
                if (path_depth(plan.mounts[i - 1].dst) > path_depth(plan.mounts[i].dst))
                        fail_msg("mount %zu '%s' comes after the deeper '%s'", i, plan.mounts[i].dst,
                                 plan.mounts[i - 1].dst);

        const struct mount_entry *m = find_mount(&plan, "/tmp");
        assert_non_null(m);
        assert_int_equal(m->kind, MOUNT_TMPFS);
        assert_int_equal(m->size, 1ULL << 20);
        assert_int_equal(m->mode, 01777);

        m = find_mount(&plan, f->home);
        assert_non_null(m);
        assert_int_equal(m->kind, MOUNT_TMPFS);
        assert_int_equal(m->size, 2ULL << 20);
        assert_int_equal(m->mode, 0700);
        assert_true(m->user_owned);

        m = find_mount(&plan, f->ws);
        assert_non_null(m);
        assert_int_equal(m->kind, MOUNT_BIND);
        assert_string_equal(m->src, f->ws);
        assert_false(m->readonly);

        struct stat st;
        const char *sys[] = { "/usr", "/etc", "/bin", "/lib", NULL };
        for (size_t i = 0; sys[i]; i++) {
                if (lstat(sys[i], &st) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        m = find_mount(&plan, sys[i]);
                        if (!m)
                                fail_msg("system dir %s missing from the layout", sys[i]);
                        assert_int_equal(m->kind, MOUNT_BIND);
                        assert_string_equal(m->src, sys[i]);
                        assert_true(m->readonly);
                        assert_false(m->from_user);
                } else if (S_ISLNK(st.st_mode)) {
                        assert_null(find_mount(&plan, sys[i]));
                        assert_true(strv_contains(&plan.symlinks, sys[i]));
                }
        }
        assert_int_equal(plan.symlinks.n % 2, 0);  /* path, target pairs */

        m = find_mount(&plan, "/mnt/a/b");
        assert_non_null(m);
        assert_string_equal(m->src, data);
        assert_true(m->readonly);
        assert_true(m->from_user);
        m = find_mount(&plan, "/mnt");
        assert_non_null(m);
        assert_int_equal(m->kind, MOUNT_TMPFS);
        assert_int_equal(m->size, 64ULL << 20);
        /* the tmpfs given later but shallower still comes first */
        size_t i_mnt = 0, i_ab = 0;
        for (size_t i = 0; i < plan.n_mounts; i++) {
                if (strcmp(plan.mounts[i].dst, "/mnt") == 0)
                        i_mnt = i;
                if (strcmp(plan.mounts[i].dst, "/mnt/a/b") == 0)
                        i_ab = i;
        }
        assert_true(i_mnt < i_ab);
        plan_free(&plan);
        brig_policy_free(p);
        free(data);
}

static void test_plan_same_depth_keeps_order(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        /* Many entries at one depth, some for the same destination: the
         * later of two for one path must stay later (it is mounted on top). */
        char dst[64];
        for (int i = 0; i < 40; i++) {
                snprintf(dst, sizeof dst, "/m%02d", i % 13);
                assert_int_equal(brig_policy_add_tmpfs(p, dst, (uint64_t)(i + 1) << 20, NULL), 0);
                snprintf(dst, sizeof dst, "/deep/x/y%02d", i);
                assert_int_equal(brig_policy_add_tmpfs(p, dst, 0, NULL), 0);
        }
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        for (int k = 0; k < 13; k++) {
                snprintf(dst, sizeof dst, "/m%02d", k);
                uint64_t last = 0;
                for (size_t i = 0; i < plan.n_mounts; i++) {
                        if (strcmp(plan.mounts[i].dst, dst) != 0)
                                continue;
                        if (plan.mounts[i].size <= last)
                                fail_msg("%s: the entry given later (size %llu MiB) sorted before an earlier one",
                                         dst, (unsigned long long)(last >> 20));
                        last = plan.mounts[i].size;
                }
                assert_true(last > 0);
        }
        /* and the y entries keep their order too */
        int prev = -1;
        for (size_t i = 0; i < plan.n_mounts; i++) {
                int y;
                if (sscanf(plan.mounts[i].dst, "/deep/x/y%d", &y) == 1) {
                        assert_true(y > prev);
                        prev = y;
                }
        }
        assert_int_equal(prev, 39);
        plan_free(&plan);
        brig_policy_free(p);
}

static void test_plan_env(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        setenv("BRIG_UNIT_SECRET", "leak", 1);
        setenv("BRIG_UNIT_KEPT", "kept", 1);
        setenv("TERM", "xterm-unit", 1);
        assert_int_equal(brig_policy_set_env(p, "FOO", "bar", NULL), 0);
        assert_int_equal(brig_policy_set_env(p, "PATH", "/custom", NULL), 0);
        assert_int_equal(brig_policy_keep_env(p, "BRIG_UNIT_KEPT", NULL), 0);
        assert_int_equal(brig_policy_keep_env(p, "BRIG_UNIT_UNSET_VAR", NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        if (plan_build(&plan, p, true_argv, &err) < 0)
                fail_msg("plan_build: %s", err ? err->msg : "?");
        char *home = brig_strdup_printf("HOME=%s", f->home);
        assert_true(env_has(&plan, home));
        free(home);
        assert_true(env_has(&plan, "FOO=bar"));
        assert_true(env_has(&plan, "PATH=/custom"));  /* --env wins over the default */
        assert_true(env_has(&plan, "BRIG_UNIT_KEPT=kept"));
        assert_true(env_has(&plan, "TERM=xterm-unit"));
        assert_false(env_has_name(&plan, "BRIG_UNIT_SECRET"));  /* cleared */
        assert_false(env_has_name(&plan, "BRIG_UNIT_UNSET_VAR"));
        assert_true(env_has_name(&plan, "USER"));
        assert_true(env_has_name(&plan, "SHELL"));
        /* one entry per name */
        size_t n_path = 0;
        for (char **e = plan.envp; *e; e++)
                n_path += strncmp(*e, "PATH=", 5) == 0;
        assert_int_equal(n_path, 1);
        plan_free(&plan);
        brig_policy_free(p);
        unsetenv("BRIG_UNIT_SECRET");
        unsetenv("BRIG_UNIT_KEPT");
}

static void test_plan_default_path(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        struct run_plan plan = RUN_PLAN_INIT;
        assert_int_equal(plan_build(&plan, p, true_argv, NULL), 0);
        assert_true(env_has(&plan, "PATH=" BRIG_DEFAULT_PATH));
        plan_free(&plan);
        brig_policy_free(p);
}

static void test_plan_workspace_errors(void **state)
{
        struct fixture *f = *state;
        brig_error *err = NULL;
        struct run_plan plan = RUN_PLAN_INIT;

        brig_policy *p = brig_policy_new();
        char *missing = join(f->base, "missing");
        assert_int_equal(brig_policy_set_workspace(p, missing, NULL), 0);
        assert_int_equal(plan_build(&plan, p, true_argv, &err), -ENOENT);
        assert_contains(err->msg, missing);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        brig_error_free(&err);
        plan_free(&plan);
        brig_policy_free(p);
        free(missing);

        p = brig_policy_new();
        char *file = join(f->ws, "file");
        assert_int_equal(brig_policy_set_workspace(p, file, NULL), 0);
        assert_int_equal(plan_build(&plan, p, true_argv, &err), -ENOTDIR);
        assert_contains(err->msg, file);
        brig_error_free(&err);
        plan_free(&plan);
        brig_policy_free(p);
        free(file);

        p = brig_policy_new();
        assert_int_equal(brig_policy_set_workspace(p, "/", NULL), 0);
        assert_int_equal(plan_build(&plan, p, true_argv, &err), -EINVAL);
        assert_contains(err->msg, "'/'");
        brig_error_free(&err);
        plan_free(&plan);
        brig_policy_free(p);
}

static void test_plan_no_command(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        brig_error *err = NULL;
        struct run_plan plan = RUN_PLAN_INIT;
        char *const empty[] = { NULL };
        char *const blank[] = { "", NULL };
        assert_int_equal(plan_build(&plan, p, empty, &err), -EINVAL);
        assert_contains(err->msg, "no command");
        brig_error_free(&err);
        plan_free(&plan);
        assert_int_equal(plan_build(&plan, p, blank, &err), -EINVAL);
        brig_error_free(&err);
        plan_free(&plan);
        assert_int_equal(plan_build(&plan, p, NULL, &err), -EINVAL);
        brig_error_free(&err);
        plan_free(&plan);
        brig_policy_free(p);
}

static void test_plan_default_workspace_is_cwd(void **state)
{
        struct fixture *f = *state;
        char *old = getcwd(NULL, 0);
        assert_non_null(old);
        assert_int_equal(chdir(f->ws), 0);
        brig_policy *p = brig_policy_new();
        struct run_plan plan = RUN_PLAN_INIT;
        int r = plan_build(&plan, p, true_argv, NULL);
        assert_int_equal(chdir(old), 0);
        free(old);
        assert_int_equal(r, 0);
        assert_string_equal(plan.workspace, f->ws);
        plan_free(&plan);
        brig_policy_free(p);
}

/* plan_build refuses every grant that is, contains or lies inside the state
 * root, by identity: through a symlinked spelling, before the root exists,
 * and for a file inside it; a sibling of the root is fine. */
static void expect_state_refusal(struct fixture *f, const char *ws, const char *bind, const char *how)
{
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        assert_int_equal(brig_policy_set_workspace(p, ws, NULL), 0);
        if (bind)
                assert_int_equal(brig_policy_add_bind(p, bind, "/x", BRIG_BIND_READONLY, NULL), 0);
        struct run_plan plan = RUN_PLAN_INIT;
        brig_error *err = NULL;
        int r = plan_build(&plan, p, true_argv, &err);
        if (!how) {
                if (r < 0)
                        fail_msg("plan_build refused %s / %s: %s", ws, bind ? bind : "-", err ? err->msg : "?");
        } else {
                assert_true(r < 0);
                assert_non_null(err);
                assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
                assert_contains(err->msg, how);
                assert_contains(err->msg, "brig's state directory");
                assert_contains(err->msg, f->base);
        }
        brig_error_free(&err);
        plan_free(&plan);
        brig_policy_free(p);
}

static void test_plan_refuses_grants_exposing_the_state_root(void **state)
{
        struct fixture *f = *state;
        const char *old = getenv("XDG_RUNTIME_DIR");
        char *saved = old ? strdup(old) : NULL;
        char *run = join(f->base, "run"), *lnk = join(f->base, "lnk"), *lnk_run = join(lnk, "run");
        char *root = join(run, "brig"), *cache = join(root, "cache"), *file = join(cache, "f");
        xmkdir(f->base, "run");
        assert_int_equal(symlink(f->base, lnk), 0);
        setenv("XDG_RUNTIME_DIR", run, 1);
        expect_state_refusal(f, f->base, NULL, "contains");        /* before the root exists */
        assert_int_equal(mkdir(root, 0700), 0);
        assert_int_equal(mkdir(cache, 0700), 0);
        xtouch(cache, "f");
        expect_state_refusal(f, f->base, NULL, "contains");
        expect_state_refusal(f, lnk, NULL, "contains");             /* symlinked spelling */
        expect_state_refusal(f, f->ws, lnk_run, "contains");
        expect_state_refusal(f, f->ws, root, "is");
        expect_state_refusal(f, f->ws, cache, "lies inside");
        expect_state_refusal(f, f->ws, file, "lies inside");       /* a file */
        expect_state_refusal(f, f->ws, "/", "contains");
        expect_state_refusal(f, f->ws, f->home, NULL);              /* a sibling */
        setenv("XDG_RUNTIME_DIR", lnk_run, 1);                      /* the root through a symlink */
        expect_state_refusal(f, f->base, NULL, "contains");
        if (saved)
                setenv("XDG_RUNTIME_DIR", saved, 1);
        else
                unsetenv("XDG_RUNTIME_DIR");
        free(saved);
        free(run);
        free(lnk);
        free(lnk_run);
        free(root);
        free(cache);
        free(file);
}

static void test_policy_summary(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        assert_non_null(p);
        assert_int_equal(brig_policy_set_workspace(p, "/srv/proj", NULL), 0);
        char *s = policy_summary(p, false);
        assert_non_null(s);
        assert_string_equal(s, "network none (nothing outside is reachable)\n"
                               "workspace /srv/proj read-write; 0 binds; memory 4 GiB, 1024 processes; "
                               "syscalls: the default profile");
        free(s);
        assert_int_equal(brig_policy_allow_host(p, "pypi.org", NULL), 0);
        assert_int_equal(brig_policy_add_bind(p, "/usr/share", "/share", BRIG_BIND_READONLY, NULL), 0);
        s = policy_summary(p, true);
        assert_non_null(s);
        assert_contains(s, "network filtered; allowed hosts pypi.org\n");
        assert_contains(s, "workspace /srv/proj as an overlay (changes kept apart until brig commit); 1 bind;");
        free(s);
        brig_policy_free(p);
}

static void test_plan_user(void **state)
{
        struct fixture *f = *state;
        brig_policy *p = policy_for(f);
        struct run_plan plan = RUN_PLAN_INIT;
        if (geteuid() != 0) {
                assert_int_equal(plan_build(&plan, p, true_argv, NULL), 0);
                assert_false(plan.rootful);
                assert_int_equal(plan.sandbox_uid, geteuid());
                assert_int_equal(plan.host_uid, geteuid());
                plan_free(&plan);
                brig_policy_free(p);
                return;
        }
        /* as root, a root-owned workspace: nobody, through an idmap */
        assert_int_equal(chown(f->ws, 0, 0), 0);
        assert_int_equal(plan_build(&plan, p, true_argv, NULL), 0);
        assert_true(plan.rootful);
        assert_true(plan.map_root_for_setup);
        assert_true(plan.idmap_workspace);
        assert_int_equal(plan.sandbox_uid, BRIG_NOBODY_UID);
        assert_int_equal(plan.sandbox_gid, BRIG_NOBODY_UID);
        plan_free(&plan);
        /* as root, a user's workspace: that user */
        assert_int_equal(chown(f->ws, 1234, 2345), 0);
        assert_int_equal(plan_build(&plan, p, true_argv, NULL), 0);
        assert_false(plan.idmap_workspace);
        assert_int_equal(plan.sandbox_uid, 1234);
        assert_int_equal(plan.host_uid, 1234);
        assert_int_equal(plan.sandbox_gid, 2345);
        assert_true(plan.sandbox_uid != 0);
        plan_free(&plan);
        assert_int_equal(chown(f->ws, 0, 0), 0);
        brig_policy_free(p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_size_units),
                cmocka_unit_test(test_size_suffix_spellings),
                cmocka_unit_test(test_size_errors),
                cmocka_unit_test(test_size_too_large),
                cmocka_unit_test(test_size_empty_message),
                cmocka_unit_test(test_policy_defaults),
                cmocka_unit_test(test_default_deny_entries_are_valid),
                cmocka_unit_test(test_deny_add),
                cmocka_unit_test(test_deny_rejects),
                cmocka_unit_test(test_unsafe_allow_secret),
                cmocka_unit_test(test_unsafe_allow_leaves_default_list),
                cmocka_unit_test(test_bind_ok),
                cmocka_unit_test(test_bind_rejects),
                cmocka_unit_test(test_tmpfs),
                cmocka_unit_test(test_sizes),
                cmocka_unit_test(test_workspace),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_pass_fd),
                cmocka_unit_test(test_hostname),
                cmocka_unit_test(test_report_path_and_tty),
                cmocka_unit_test(test_err_basic),
                cmocka_unit_test(test_err_no_errno),
                cmocka_unit_test(test_err_keeps_first),
                cmocka_unit_test(test_err_code),
                cmocka_unit_test(test_err_prefix),
                cmocka_unit_test(test_strdup_printf),
                cmocka_unit_test(test_reason_names),
                cmocka_unit_test(test_version),
                cmocka_unit_test_setup_teardown(test_plan_masks_secrets_in_bound_parent, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_masks_follow_destination, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_pins_ancestors_in_writable_grants, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_pins_symlinks_a_secret_is_named_through, setup_tree,
                                                teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_refuses_denied_hard_links, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_masks_symlink_targets_in_denied_dirs, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_refuses_bind_inside_secret, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_unsafe_allow_lifts_refusal, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_user_deny_patterns, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_layout, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_same_depth_keeps_order, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_env, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_default_path, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_workspace_errors, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_no_command, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_default_workspace_is_cwd, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_user, setup_tree, teardown_tree),
                cmocka_unit_test_setup_teardown(test_plan_refuses_grants_exposing_the_state_root, setup_tree,
                                                teardown_tree),
                cmocka_unit_test(test_policy_summary),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
