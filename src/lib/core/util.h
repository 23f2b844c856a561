/* util.h — what every part of libbrig uses (src/lib/core/util.c): symbol
 * visibility, cleanup helpers, string lists, pure path functions. */
#ifndef BRIG_CORE_UTIL_H
#define BRIG_CORE_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define BRIG_INTERNAL __attribute__((visibility("hidden")))
#define BRIG_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* What an idle supervisor or pid 1 runs after it gave back setup's pages
 * (core/footprint.c): the compiler puts these functions side by side
 * (.text.hot), so the loop faults back one window of code, not one per
 * function scattered through brig. */
#define BRIG_IDLE_LOOP __attribute__((hot))

/* ---- cleanup helpers (systemd/crun style) ------------------------------ */

static inline void freep(void *p) { free(*(void **)p); }
/* The variable is left -EBADF: a second closep (a cleanup at the end of
 * the scope, a free of the struct holding it) must not close whatever
 * descriptor the number was given to meanwhile — in a front end's other
 * thread, or the supervisor's own next connection. */
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
                *fd = -EBADF;
        }
}
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
/* Moves ownership of an fd out of a _cleanup_close_ variable. */
#define TAKE_FD(fd) ({ int _t = (fd); (fd) = -EBADF; _t; })
#define TAKE_PTR(p) ({ __typeof__(p) _t = (p); (p) = NULL; _t; })
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))


/* ---- string lists ------------------------------------------------------ */

struct strv {
        char **items;
        size_t n;
};
/* SHA-256 in hex (65 bytes with the NUL; "" when it failed): of a buffer,
 * and of what a descriptor reads to its end — 0, -EFBIG past max bytes,
 * -errno (the audit stream's chain, the files event, a manifest). */
#define SHA256_HEX 65
BRIG_INTERNAL void sha256_text(const void *buf, size_t len, char out[SHA256_HEX]);
BRIG_INTERNAL int sha256_fd(int fd, uint64_t max, char out[SHA256_HEX]);
BRIG_INTERNAL int strv_push(struct strv *v, const char *s);
BRIG_INTERNAL int strv_push_take(struct strv *v, char *s);
BRIG_INTERNAL void strv_free(struct strv *v);
BRIG_INTERNAL bool strv_contains(const struct strv *v, const char *s);
/* Test hook (a test-hooks build, BRIG_TEST_PLAN_LONG_WAY=1): the policy
 * step takes the long way wherever it has a short cut (plan.c, the state
 * guard, the directory cache), for test_plan.py to compare; false in
 * other builds. */
BRIG_INTERNAL bool plan_long_way(void);
BRIG_INTERNAL int strv_remove(struct strv *v, const char *s);
/* ---- paths (pure functions, unit-tested) ------------------------------- */

/* Collapse "//", "/./", trailing "/" of an absolute path; refuse "..".
 * Returns a new string or NULL (errno EINVAL for relative or "..", ENOMEM). */
BRIG_INTERNAL char *path_normalize(const char *path);
/* True when `path` is `dir` or lies below it (both normalized). */
BRIG_INTERNAL bool path_is_under(const char *path, const char *dir);
/* The part of `path` below `dir` ("" when equal); NULL when not under. */
BRIG_INTERNAL const char *path_below(const char *path, const char *dir);
/* "512 MiB", "4 GiB" ("N bytes" below 1 MiB): a size for messages and brig policy explain. */
BRIG_INTERNAL void size_text(char *buf, size_t n, uint64_t bytes);
/* Number of components: "/" is 0, "/a/b" is 2. */
BRIG_INTERNAL int path_depth(const char *path);

#endif
