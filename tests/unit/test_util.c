/* test_util.c — unit tests for the pure helpers in src/lib/core/util.c:
 * path arithmetic (what the secret deny list and the mount layout rely on)
 * and string lists. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"

/* ---- path_normalize ------------------------------------------------------ */

static void check_norm(const char *in, const char *want)
{
        errno = 0;
        char *got = path_normalize(in);
        if (!got)
                fail_msg("path_normalize(\"%s\") returned NULL (errno %d), expected \"%s\"", in, errno, want);
        if (strcmp(got, want) != 0) {
                char buf[512];
                snprintf(buf, sizeof buf, "path_normalize(\"%s\") = \"%s\", expected \"%s\"", in, got, want);
                free(got);
                fail_msg("%s", buf);
        }
        free(got);
}

static void check_norm_fails(const char *in)
{
        errno = 0;
        char *got = path_normalize(in);
        if (got) {
                char buf[512];
                snprintf(buf, sizeof buf, "path_normalize(\"%s\") = \"%s\", expected NULL", in ? in : "(null)", got);
                free(got);
                fail_msg("%s", buf);
        }
        assert_int_equal(errno, EINVAL);
}

static void test_normalize_plain(void **state)
{
        (void)state;
        check_norm("/", "/");
        check_norm("/a", "/a");
        check_norm("/a/b/c", "/a/b/c");
        check_norm("/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu");
}

static void test_normalize_slashes(void **state)
{
        (void)state;
        check_norm("//", "/");
        check_norm("///", "/");
        check_norm("//a", "/a");
        check_norm("/a//b", "/a/b");
        check_norm("/a///b////c", "/a/b/c");
        check_norm("/a/", "/a");
        check_norm("/a/b//", "/a/b");
}

static void test_normalize_dot(void **state)
{
        (void)state;
        check_norm("/.", "/");
        check_norm("/./", "/");
        check_norm("/./a", "/a");
        check_norm("/a/./b", "/a/b");
        check_norm("/a/.", "/a");
        check_norm("/a/././b/./", "/a/b");
        check_norm("/.//./a/.//b", "/a/b");
}

static void test_normalize_dotted_names_kept(void **state)
{
        (void)state;
        /* Only "." and ".." are special; names that merely start with a dot
         * are ordinary components. */
        check_norm("/...", "/...");
        check_norm("/a/.../b", "/a/.../b");
        check_norm("/home/u/.hidden", "/home/u/.hidden");
        check_norm("/home/u/.ssh/", "/home/u/.ssh");
        check_norm("/a/..b", "/a/..b");
        check_norm("/a/b..", "/a/b..");
        check_norm("/a/.b./c", "/a/.b./c");
}

static void test_normalize_rejects_relative(void **state)
{
        (void)state;
        check_norm_fails("");
        check_norm_fails("a");
        check_norm_fails("a/b");
        check_norm_fails("./a");
        check_norm_fails(".");
        check_norm_fails("..");
        check_norm_fails("~/x");
        check_norm_fails(NULL);
}

static void test_normalize_rejects_dotdot(void **state)
{
        (void)state;
        check_norm_fails("/..");
        check_norm_fails("/../");
        check_norm_fails("/a/..");
        check_norm_fails("/a/../b");
        check_norm_fails("/a/b/../../c");
        check_norm_fails("//..//a");
        check_norm_fails("/a/./../b");
}

static void test_normalize_result_is_fresh(void **state)
{
        (void)state;
        const char *in = "/a/b";
        char *out = path_normalize(in);
        assert_non_null(out);
        assert_ptr_not_equal(out, in);
        assert_string_equal(out, "/a/b");
        free(out);
}

/* ---- path_is_under / path_below ----------------------------------------- */

static void test_under_basic(void **state)
{
        (void)state;
        assert_true(path_is_under("/a/b", "/a/b"));
        assert_true(path_is_under("/a/b/c", "/a/b"));
        assert_true(path_is_under("/a/b/c/d", "/a"));
        assert_false(path_is_under("/a", "/a/b"));
        assert_false(path_is_under("/x/b", "/a/b"));
        assert_false(path_is_under("/b", "/a"));
}

static void test_under_prefix_is_not_parent(void **state)
{
        (void)state;
        /* The classic bug: a string prefix is not a directory prefix. */
        assert_false(path_is_under("/a/bc", "/a/b"));
        assert_null(path_below("/a/bc", "/a/b"));
        assert_false(path_is_under("/home/alice2/.ssh", "/home/alice"));
        assert_false(path_is_under("/procfs", "/proc"));
        assert_false(path_is_under("/dev-x/y", "/dev"));
        assert_false(path_is_under("/ab", "/a"));
}

static void test_under_root_contains_everything(void **state)
{
        (void)state;
        assert_true(path_is_under("/", "/"));
        assert_true(path_is_under("/a", "/"));
        assert_true(path_is_under("/a/b/c", "/"));
        assert_string_equal(path_below("/", "/"), "");
        assert_string_equal(path_below("/a", "/"), "a");
        assert_string_equal(path_below("/a/b/c", "/"), "a/b/c");
}

static void test_below_values(void **state)
{
        (void)state;
        assert_string_equal(path_below("/a/b", "/a/b"), "");
        assert_string_equal(path_below("/a/b/c", "/a/b"), "c");
        assert_string_equal(path_below("/a/b/c/d", "/a"), "b/c/d");
        assert_string_equal(path_below("/home/u/.ssh/id_rsa", "/home/u"), ".ssh/id_rsa");
        assert_null(path_below("/a", "/a/b"));
        assert_null(path_below("/z", "/a"));
        /* The result points into the argument, it is not a copy. */
        const char *p = "/x/y/z";
        assert_ptr_equal(path_below(p, "/x"), p + 3);
        assert_ptr_equal(path_below(p, p), p + strlen(p));
}

/* ---- path_depth ------------------------------------------------------- */

static void test_depth(void **state)
{
        (void)state;
        assert_int_equal(path_depth("/"), 0);
        assert_int_equal(path_depth("/a"), 1);
        assert_int_equal(path_depth("/a/b"), 2);
        assert_int_equal(path_depth("/a/b/c"), 3);
        assert_int_equal(path_depth("/usr/lib/x86_64-linux-gnu"), 3);
        assert_int_equal(path_depth("/.hidden/..."), 2);
        /* a trailing slash is not a component */
        assert_int_equal(path_depth("/a/b/"), 2);
}

static void test_depth_orders_parents_first(void **state)
{
        (void)state;
        /* The mount layout sorts by depth so a parent is mounted before
         * what lies below it. */
        assert_true(path_depth("/home") < path_depth("/home/u"));
        assert_true(path_depth("/home/u") < path_depth("/home/u/.ssh"));
        assert_true(path_depth("/") < path_depth("/tmp"));
}

/* ---- strv ------------------------------------------------------------- */

static void test_strv_push_contains(void **state)
{
        (void)state;
        struct strv v = {0};
        assert_false(strv_contains(&v, "a"));
        assert_int_equal(strv_push(&v, "a"), 0);
        assert_int_equal(strv_push(&v, "b"), 0);
        assert_int_equal(strv_push(&v, "c"), 0);
        assert_int_equal(v.n, 3);
        assert_string_equal(v.items[0], "a");
        assert_string_equal(v.items[1], "b");
        assert_string_equal(v.items[2], "c");
        assert_null(v.items[3]);  /* NULL-terminated, usable as an argv */
        assert_true(strv_contains(&v, "a"));
        assert_true(strv_contains(&v, "c"));
        assert_false(strv_contains(&v, "d"));
        assert_false(strv_contains(&v, ""));
        assert_false(strv_contains(&v, "ab"));
        strv_free(&v);
        assert_null(v.items);
        assert_int_equal(v.n, 0);
}

static void test_strv_push_copies(void **state)
{
        (void)state;
        struct strv v = {0};
        char buf[] = "mutable";
        assert_int_equal(strv_push(&v, buf), 0);
        assert_ptr_not_equal(v.items[0], buf);
        buf[0] = 'X';
        assert_string_equal(v.items[0], "mutable");
        strv_free(&v);
}

static void test_strv_push_take(void **state)
{
        (void)state;
        struct strv v = {0};
        char *s = strdup("owned");
        assert_non_null(s);
        assert_int_equal(strv_push_take(&v, s), 0);
        assert_ptr_equal(v.items[0], s);
        /* NULL (a failed allocation upstream) is reported, not stored */
        assert_int_equal(strv_push_take(&v, NULL), -ENOMEM);
        assert_int_equal(v.n, 1);
        assert_null(v.items[1]);
        strv_free(&v);
}

static void test_strv_remove(void **state)
{
        (void)state;
        struct strv v = {0};
        const char *in[] = { "a", "b", "c", "d" };
        for (size_t i = 0; i < 4; i++)
                assert_int_equal(strv_push(&v, in[i]), 0);

        assert_int_equal(strv_remove(&v, "b"), 0);  /* middle */
        assert_int_equal(v.n, 3);
        assert_string_equal(v.items[0], "a");
        assert_string_equal(v.items[1], "c");
        assert_string_equal(v.items[2], "d");
        assert_null(v.items[3]);
        assert_false(strv_contains(&v, "b"));

        assert_int_equal(strv_remove(&v, "d"), 0);  /* last */
        assert_int_equal(v.n, 2);
        assert_null(v.items[2]);

        assert_int_equal(strv_remove(&v, "a"), 0);  /* first */
        assert_int_equal(v.n, 1);
        assert_string_equal(v.items[0], "c");
        assert_null(v.items[1]);

        assert_int_equal(strv_remove(&v, "zzz"), -ENOENT);
        assert_int_equal(strv_remove(&v, "b"), -ENOENT);  /* already gone */
        assert_int_equal(v.n, 1);

        assert_int_equal(strv_remove(&v, "c"), 0);
        assert_int_equal(v.n, 0);
        assert_null(v.items[0]);
        assert_int_equal(strv_remove(&v, "c"), -ENOENT);

        /* still usable after being emptied */
        assert_int_equal(strv_push(&v, "e"), 0);
        assert_int_equal(v.n, 1);
        assert_string_equal(v.items[0], "e");
        strv_free(&v);
}

static void test_strv_remove_first_duplicate_only(void **state)
{
        (void)state;
        struct strv v = {0};
        assert_int_equal(strv_push(&v, "x"), 0);
        assert_int_equal(strv_push(&v, "x"), 0);
        assert_int_equal(strv_remove(&v, "x"), 0);
        assert_int_equal(v.n, 1);
        assert_true(strv_contains(&v, "x"));
        strv_free(&v);
}

static void test_strv_remove_empty(void **state)
{
        (void)state;
        struct strv v = {0};
        assert_int_equal(strv_remove(&v, "a"), -ENOENT);
        strv_free(&v);  /* freeing an empty list is fine */
        strv_free(&v);  /* and idempotent */
        assert_int_equal(v.n, 0);
}

static void test_strv_many(void **state)
{
        (void)state;
        struct strv v = {0};
        char buf[32];
        for (int i = 0; i < 1000; i++) {
                snprintf(buf, sizeof buf, "item-%d", i);
                assert_int_equal(strv_push(&v, buf), 0);
        }
        assert_int_equal(v.n, 1000);
        assert_true(strv_contains(&v, "item-0"));
        assert_true(strv_contains(&v, "item-999"));
        assert_false(strv_contains(&v, "item-1000"));
        assert_string_equal(v.items[500], "item-500");
        assert_null(v.items[1000]);
        strv_free(&v);
}

/* ---- mountinfo.c ------------------------------------------------------------ */

static void test_mountinfo_parse(void **state)
{
        (void)state;
        struct mountinfo_entry e;
        const char *ok = "42 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw\n";
        assert_int_equal(mountinfo_parse_line(ok, strlen(ok), &e), 0);
        assert_int_equal(e.id, 42);
        assert_int_equal(major(e.dev), 254);
        assert_int_equal(minor(e.dev), 0);
        assert_string_equal(e.root, "/run/netns");
        assert_string_equal(e.mnt, "/run/netns");
        free(e.root);
        free(e.mnt);
        /* the kernel's escapes: space, tab, newline, backslash */
        const char *esc = "1 2 8:1 /a\\040b /m\\011n\\012\\134 rw - ext4 x rw";
        assert_int_equal(mountinfo_parse_line(esc, strlen(esc), &e), 0);
        assert_string_equal(e.root, "/a b");
        assert_string_equal(e.mnt, "/m\tn\n\\");
        free(e.root);
        free(e.mnt);
        const char *bad[] = {
                "", "1 2 8:1 /a", "1 2 8:1 /a ", "x 2 8:1 / / rw", "1 2 81 / / rw", "1 2 8: / / rw",
                "1 2 8:1 a / rw", "1 2 8:1 / m rw", "1 2 8:1 /\\000 / rw", "1 2 8:1 /\\9 / rw",
                "1 2 8:1 /\\04 / rw", "1 2 8:1 /a\\ / rw", "1  2 8:1 / / rw", "1 2 99999:1 / / rw",
                "1 2 8:1 //a / rw", "1 2 8:1 /a/ / rw", "1 2 8:1 / /a/./b rw", "1 2 8:1 / /a/.. rw",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (mountinfo_parse_line(bad[i], strlen(bad[i]), &e) != -EINVAL)
                        fail_msg("accepted '%s'", bad[i]);
}

static void check_alias(const struct path_alias *v, size_t n, const char *host, const char *rel)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].host, host) == 0 && strcmp(v[i].rel, rel) == 0)
                        return;
        fail_msg("no alias (%s, '%s') among %zu", host, rel, n);
}

static void test_mountinfo_aliases(void **state)
{
        (void)state;
        static const char *const table[] = {
                "1 0 8:1 / / rw - ext4 /dev/sda1 rw",
                "2 1 8:2 / /home rw - ext4 /dev/sda2 rw",
                "3 1 8:2 /u /srv/u rw - ext4 /dev/sda2 rw",            /* /home/u also at /srv/u */
                "4 1 8:1 /etc/ssl /mnt/ssl rw - ext4 /dev/sda1 rw",    /* /etc/ssl also at /mnt/ssl */
                "5 1 8:3 / /data rw - ext4 /dev/sda3 rw",
                NULL,
        };
        struct mountinfo mi = {0};
        for (size_t i = 0; table[i]; i++)
                assert_int_equal(mountinfo_add_line(&mi, table[i], strlen(table[i])), 0);
        struct path_alias *v;
        size_t n;
        /* A grant of /home: /srv/u is its part "u". */
        assert_int_equal(mountinfo_aliases(&mi, "/home", &v, &n), 0);
        assert_int_equal(n, 1);
        check_alias(v, n, "/srv/u", "u");
        path_aliases_free(v, n);
        /* A grant of /srv/u/proj: the same directory is /home/u/proj. */
        assert_int_equal(mountinfo_aliases(&mi, "/srv/u/proj", &v, &n), 0);
        assert_int_equal(n, 1);
        check_alias(v, n, "/home/u/proj", "");
        path_aliases_free(v, n);
        /* The root filesystem: /etc/ssl also shows at /mnt/ssl, and a grant
         * of /mnt/ssl/private is /etc/ssl/private. */
        assert_int_equal(mountinfo_aliases(&mi, "/etc", &v, &n), 0);
        check_alias(v, n, "/mnt/ssl", "ssl");
        path_aliases_free(v, n);
        assert_int_equal(mountinfo_aliases(&mi, "/mnt/ssl/private", &v, &n), 0);
        check_alias(v, n, "/etc/ssl/private", "");
        path_aliases_free(v, n);
        /* A filesystem mounted once, from its root: no other name. */
        assert_int_equal(mountinfo_aliases(&mi, "/data/x", &v, &n), 0);
        assert_int_equal(n, 0);
        path_aliases_free(v, n);
        mountinfo_clear(&mi);
        assert_null(mi.v);
}

/* The table from listmount and statmount is the one mountinfo prints:
 * the same entries in the same order, names with the characters the
 * kernel escapes there, a bind of a subdirectory (another name), two
 * mounts stacked on one point (the last one on top), in a mount
 * namespace of a child's own. */
static bool write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        bool ok = f && fputs(text, f) >= 0;
        return f && fclose(f) == 0 && ok;
}

static int compare_tables(void)
{
        char uid_map[32], gid_map[32];
        snprintf(uid_map, sizeof uid_map, "0 %u 1", (unsigned)geteuid());
        snprintf(gid_map, sizeof gid_map, "0 %u 1", (unsigned)getegid());
        /* "none", not NULL, for the types the kernel ignores here: valgrind
         * (tests/leaks/run) counts a NULL type as an error */
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return 77;  /* no user namespaces here: skipped */
        if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", uid_map) ||
            !write_file("/proc/self/gid_map", gid_map) || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("t", "/tmp", "tmpfs", 0, "size=64k") < 0 || mkdir("/tmp/a b\tc\nd\\e", 0755) < 0 ||
            mkdir("/tmp/a b\tc\nd\\e/sub", 0755) < 0 || mkdir("/tmp/alias", 0755) < 0 ||
            mount("/tmp/a b\tc\nd\\e/sub", "/tmp/alias", "none", MS_BIND, NULL) < 0 ||
            mount("u", "/tmp/alias", "tmpfs", 0, "size=64k") < 0)
                return 2;
        /* more mounts than listmount is first asked for (128): its ids in
         * pieces, each after the last one's */
        if (mkdir("/tmp/many", 0755) < 0)
                return 2;
        for (int i = 0; i < 200; i++)
                if (mount("m", "/tmp/many", "tmpfs", 0, "size=4k") < 0)
                        return 2;
        struct mountinfo listed, text;
        int r = mountinfo_load_listed(&listed);
        if (r == -ENOSYS || r == -EPERM)
                return 77;  /* before Linux 6.8, or a seccomp profile that does not know the calls */
        if (r < 0 || mountinfo_load_text(&text) < 0)
                return 3;
        bool same = listed.n == text.n && listed.n > 202;
        for (size_t i = 0; same && i < listed.n; i++)
                same = listed.v[i].id == text.v[i].id && listed.v[i].dev == text.v[i].dev &&
                       strcmp(listed.v[i].root, text.v[i].root) == 0 && strcmp(listed.v[i].mnt, text.v[i].mnt) == 0;
        size_t last = listed.n - 200;  /* the alias's two, then the 200 */
        bool stacked = listed.n >= 202 && strcmp(listed.v[last - 1].mnt, "/tmp/alias") == 0 &&
                       strcmp(listed.v[last - 2].mnt, "/tmp/alias") == 0 &&
                       strcmp(listed.v[last - 2].root, "/a b\tc\nd\\e/sub") == 0 &&
                       strcmp(listed.v[listed.n - 1].mnt, "/tmp/many") == 0;
        mountinfo_clear(&listed);
        mountinfo_clear(&text);
        return same && stacked ? 0 : 1;
}

static void test_mountinfo_listed_is_the_table(void **state)
{
        (void)state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(compare_tables());
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        if (WEXITSTATUS(st) == 77)
                skip();
        assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_normalize_plain),
                cmocka_unit_test(test_normalize_slashes),
                cmocka_unit_test(test_normalize_dot),
                cmocka_unit_test(test_normalize_dotted_names_kept),
                cmocka_unit_test(test_normalize_rejects_relative),
                cmocka_unit_test(test_normalize_rejects_dotdot),
                cmocka_unit_test(test_normalize_result_is_fresh),
                cmocka_unit_test(test_under_basic),
                cmocka_unit_test(test_under_prefix_is_not_parent),
                cmocka_unit_test(test_under_root_contains_everything),
                cmocka_unit_test(test_below_values),
                cmocka_unit_test(test_depth),
                cmocka_unit_test(test_depth_orders_parents_first),
                cmocka_unit_test(test_strv_push_contains),
                cmocka_unit_test(test_strv_push_copies),
                cmocka_unit_test(test_strv_push_take),
                cmocka_unit_test(test_strv_remove),
                cmocka_unit_test(test_strv_remove_first_duplicate_only),
                cmocka_unit_test(test_strv_remove_empty),
                cmocka_unit_test(test_strv_many),
                cmocka_unit_test(test_mountinfo_parse),
                cmocka_unit_test(test_mountinfo_aliases),
                cmocka_unit_test(test_mountinfo_listed_is_the_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
