/* test_hostfs.c — unit tests for src/lib/core/hostfs.c: the walk that opens
 * output files where openat2 is missing (the integration tests exercise
 * openat2 itself), and tree removal of deep, wide and locked trees with a
 * symlink out of them. */
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
#include <linux/openat2.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/internal.h"

static char base[64];

static int setup(void **state)
{
        (void)state;
        strcpy(base, "/tmp/brig-hostfs-XXXXXX");
        assert_non_null(mkdtemp(base));
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        char cmd[256];
        snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", base, base);
        return system(cmd) == 0 ? 0 : -1;
}

static char *at(const char *rel)
{
        static char buf[4][256];
        static int i;
        char *b = buf[i++ % 4];
        snprintf(b, 256, "%s/%s", base, rel);
        return b;
}

static void put(const char *rel, const char *text)
{
        FILE *f = fopen(at(rel), "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static bool exists(const char *rel)
{
        struct stat st;
        return lstat(at(rel), &st) == 0;
}

/* ---- output_open_walk ---------------------------------------------------- */

static void test_walk_opens_plain_paths(void **state)
{
        (void)state;
        assert_int_equal(mkdir(at("a"), 0755), 0);
        assert_int_equal(mkdir(at("a/b"), 0755), 0);
        int fd = output_open_walk(at("a/b/r.json"), O_WRONLY | O_CREAT, 0644);
        assert_true(fd >= 0);
        close(fd);
        assert_true(exists("a/b/r.json"));
        fd = output_open_walk(at("a//b/../b/./s.json"), O_WRONLY | O_CREAT, 0644);
        assert_true(fd >= 0);
        close(fd);
        assert_true(exists("a/b/s.json"));
        /* relative to the working directory */
        char cwd[4096];
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(base), 0);
        fd = output_open_walk("a/b/t.json", O_WRONLY | O_CREAT, 0644);
        assert_int_equal(chdir(cwd), 0);
        assert_true(fd >= 0);
        close(fd);
        assert_true(exists("a/b/t.json"));
}

static void test_walk_refuses_every_symlink(void **state)
{
        (void)state;
        assert_int_equal(mkdir(at("a"), 0755), 0);
        assert_int_equal(mkdir(at("a/b"), 0755), 0);
        assert_int_equal(mkdir(at("target"), 0755), 0);
        assert_int_equal(mkdir(at("target/b"), 0755), 0);
        assert_int_equal(symlink(at("target"), at("link")), 0);
        assert_int_equal(symlink(at("target/b"), at("a/lb")), 0);
        put("target/victim", "original");
        assert_int_equal(symlink(at("target/victim"), at("a/b/last")), 0);
        assert_int_equal(output_open_walk(at("link/b/r.json"), O_WRONLY | O_CREAT, 0644), -ELOOP);
        assert_int_equal(output_open_walk(at("a/lb/r.json"), O_WRONLY | O_CREAT, 0644), -ELOOP);
        assert_int_equal(output_open_walk(at("a/b/last"), O_WRONLY | O_CREAT | O_TRUNC, 0644), -ELOOP);
        assert_false(exists("target/b/r.json"));
        struct stat st;
        assert_int_equal(stat(at("target/victim"), &st), 0);
        assert_int_equal(st.st_size, 8);
}

static void test_walk_odd_paths(void **state)
{
        (void)state;
        assert_int_equal(output_open_walk("/", O_WRONLY | O_CREAT, 0644), -EISDIR);
        assert_int_equal(output_open_walk(at("x/"), O_WRONLY | O_CREAT, 0644), -EISDIR);
        assert_int_equal(output_open_walk(at("none/r.json"), O_WRONLY | O_CREAT, 0644), -ENOENT);
        put("file", "");
        assert_int_equal(output_open_walk(at("file/r.json"), O_WRONLY | O_CREAT, 0644), -ENOTDIR);
}

/* ---- tree_remove_at ------------------------------------------------------- */

static void test_remove_deep_wide_locked_tree(void **state)
{
        (void)state;
        assert_int_equal(mkdir(at("outside"), 0755), 0);
        put("outside/canary", "alive");
        assert_int_equal(mkdir(at("tree"), 0755), 0);
        int fd = open(at("tree"), O_RDONLY | O_DIRECTORY);
        assert_true(fd >= 0);
        /* 3000 levels: 6000 bytes of path, more than PATH_MAX; every
         * 500th level holds a symlink out, the bottom is chmod 000 */
        for (int i = 0; i < 3000; i++) {
                assert_int_equal(mkdirat(fd, "d", 0755), 0);
                int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY);
                assert_true(sub >= 0);
                close(fd);
                fd = sub;
                if (i % 500 == 0)
                        assert_int_equal(symlinkat(at("outside"), fd, "out"), 0);
        }
        assert_int_equal(mkdirat(fd, "locked", 0755), 0);
        int f = openat(fd, "locked/f", O_WRONLY | O_CREAT, 0644);
        assert_true(f >= 0);
        close(f);
        assert_int_equal(fchmodat(fd, "locked", 0, 0), 0);
        assert_int_equal(fchmod(fd, 0500), 0);
        close(fd);
        assert_int_equal(mkdir(at("tree/wide"), 0755), 0);
        char name[64];
        for (int i = 0; i < 3000; i++) {
                snprintf(name, sizeof name, "tree/wide/%c%d", i % 2 ? 's' : 'f', i);
                if (i % 2) {
                        assert_int_equal(mkdir(at(name), 0755), 0);
                        strcat(name, "/x");
                }
                put(name, "");
        }
        assert_int_equal(chmod(at("tree/wide"), 0), 0);
        int parent = open(base, O_PATH | O_DIRECTORY);
        assert_true(parent >= 0);
        assert_int_equal(tree_remove_at(parent, "tree"), 0);
        assert_int_equal(tree_remove_at(parent, "tree"), 0);  /* gone: nothing to do */
        close(parent);
        assert_false(exists("tree"));
        assert_true(exists("outside/canary"));
}

static void test_remove_symlink_and_file(void **state)
{
        (void)state;
        assert_int_equal(mkdir(at("outside"), 0755), 0);
        put("outside/canary", "alive");
        assert_int_equal(symlink(at("outside"), at("link")), 0);
        put("plain", "x");
        int parent = open(base, O_PATH | O_DIRECTORY);
        assert_int_equal(tree_remove_at(parent, "link"), 0);
        assert_int_equal(tree_remove_at(parent, "plain"), 0);
        close(parent);
        assert_false(exists("link"));
        assert_false(exists("plain"));
        assert_true(exists("outside/canary"));
}

/* A ".." resolved beneath a directory while renames happen elsewhere on
 * the system: the kernel answers EAGAIN, and sys_openat2 tries again, so
 * a busy host does not turn an ordinary lookup into a failure (the unix
 * socket guard refused a sandbox's own "./sub/../db.sock" this way). */
static void test_openat2_beneath_survives_renames(void **state)
{
        (void)state;
        assert_int_equal(mkdir(at("sub"), 0755), 0);
        assert_int_equal(mkdir(at("spin"), 0755), 0);
        put("file", "x");
        int dir = open(base, O_PATH | O_DIRECTORY);
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS };
        int probe = sys_openat2(dir, "sub/../file", &how);
        if (probe < 0 && errno == ENOSYS) {
                /* valgrind (tests/leaks/run) does not know openat2 */
                print_message("OPENAT2 NOT AVAILABLE HERE (valgrind?): the retry on EAGAIN is not tested in this run\n");
                close(dir);
                skip();
        }
        assert_true(probe >= 0);
        close(probe);
        pid_t renamer = fork();
        assert_true(renamer >= 0);
        if (renamer == 0) {
                char a[PATH_MAX], b[PATH_MAX + 8];
                snprintf(a, sizeof a, "%s", at("spin"));
                snprintf(b, sizeof b, "%s.2", a);
                for (;;)
                        if (rename(a, b) == 0)
                                rename(b, a);
        }
        int failures = 0;
        for (int i = 0; i < 20000; i++) {
                int fd = sys_openat2(dir, "sub/../file", &how);
                if (fd < 0)
                        failures++;
                else
                        close(fd);
        }
        kill(renamer, SIGKILL);
        waitpid(renamer, NULL, 0);
        close(dir);
        assert_int_equal(failures, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_walk_opens_plain_paths, setup, teardown),
                cmocka_unit_test_setup_teardown(test_walk_refuses_every_symlink, setup, teardown),
                cmocka_unit_test_setup_teardown(test_walk_odd_paths, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove_deep_wide_locked_tree, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove_symlink_and_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_openat2_beneath_survives_renames, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
