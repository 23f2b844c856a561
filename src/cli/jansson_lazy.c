/* jansson_lazy.c — brig's engine opens jansson on first use.
 *
 * A plain `brig run` parses no JSON and writes none (no report, no policy
 * file, no audit: its run record is written by hand, reaper.c), yet a
 * linked libjansson was loaded and relocated at every start of the
 * engine: 0.07 ms of `brig-engine --version`'s 0.74 here (medians of 2000
 * interleaved runs against a build with jansson linked in statically).
 * The engine is linked without it: the jansson functions brig calls are
 * defined here, each a call through the table of the library opened on
 * its first use, as libseccomp, OpenSSL and c-ares are (core/libload.c:
 * this build's own file, by absolute path, root's and writable by nobody
 * else; never one found through LD_LIBRARY_PATH, beside brig or in the
 * cwd: row 462, jansson-substituted). libbrig.so, brig-supervisor and
 * brig-serve, which parse JSON as they start, link jansson as before.
 *
 * Opened where the engine started and nowhere else: a sandbox's child
 * runs in its own mount namespace, where the path names the sandbox's
 * file, which may be an image's. The gVisor wall writes its bundle's JSON
 * in that child, so spawn.c opens the library before the clone
 * (brig_json_preload); a first use in any other mount namespace ends the
 * process with the reason instead of opening anything. A function the
 * engine calls that is missing from the list fails the link. */
#define _GNU_SOURCE
#include "core/error.h"
#include "core/libload.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The build's pkg-config libdir and jansson 2.x's soname (meson.build). */
#ifndef BRIG_LIBJANSSON_PATH
#define BRIG_LIBJANSSON_PATH "/usr/lib/x86_64-linux-gnu/libjansson.so.4"
#endif

/* return type, name, parameters, arguments: every jansson function brig
 * calls but the two variadic ones, which are made of their va_list forms */
#define JANSSON_FUNCTIONS(X) \
        X(json_t *, json_array, (void), ()) \
        X(int, json_array_append_new, (json_t *array, json_t *value), (array, value)) \
        X(int, json_array_extend, (json_t *array, json_t *other), (array, other)) \
        X(json_t *, json_array_get, (const json_t *array, size_t index), (array, index)) \
        X(int, json_array_remove, (json_t *array, size_t index), (array, index)) \
        X(size_t, json_array_size, (const json_t *array), (array)) \
        X(json_t *, json_deep_copy, (const json_t *value), (value)) \
        X(int, json_dump_file, (const json_t *json, const char *path, size_t flags), (json, path, flags)) \
        X(char *, json_dumps, (const json_t *json, size_t flags), (json, flags)) \
        X(int, json_equal, (const json_t *value1, const json_t *value2), (value1, value2)) \
        X(json_t *, json_false, (void), ()) \
        X(json_t *, json_integer, (json_int_t value), (value)) \
        X(json_int_t, json_integer_value, (const json_t *integer), (integer)) \
        X(json_t *, json_load_file, (const char *path, size_t flags, json_error_t *error), (path, flags, error)) \
        X(json_t *, json_loadb, (const char *buffer, size_t buflen, size_t flags, json_error_t *error), \
          (buffer, buflen, flags, error)) \
        X(json_t *, json_loads, (const char *input, size_t flags, json_error_t *error), (input, flags, error)) \
        X(json_t *, json_null, (void), ()) \
        X(double, json_number_value, (const json_t *json), (json)) \
        X(json_t *, json_object, (void), ()) \
        X(int, json_object_del, (json_t *object, const char *key), (object, key)) \
        X(json_t *, json_object_get, (const json_t *object, const char *key), (object, key)) \
        X(void *, json_object_iter, (json_t *object), (object)) \
        X(const char *, json_object_iter_key, (void *iter), (iter)) \
        X(void *, json_object_iter_next, (json_t *object, void *iter), (object, iter)) \
        X(json_t *, json_object_iter_value, (void *iter), (iter)) \
        X(void *, json_object_key_to_iter, (const char *key), (key)) \
        X(int, json_object_set_new, (json_t *object, const char *key, json_t *value), (object, key, value)) \
        X(size_t, json_object_size, (const json_t *object), (object)) \
        X(int, json_object_update, (json_t *object, json_t *other), (object, other)) \
        X(json_t *, json_real, (double value), (value)) \
        X(json_t *, json_string, (const char *value), (value)) \
        X(size_t, json_string_length, (const json_t *string), (string)) \
        X(json_t *, json_string_nocheck, (const char *value), (value)) \
        X(const char *, json_string_value, (const json_t *string), (string)) \
        X(json_t *, json_stringn, (const char *value, size_t len), (value, len)) \
        X(json_t *, json_true, (void), ()) \
        X(json_t *, json_vpack_ex, (json_error_t *error, size_t flags, const char *fmt, va_list ap), \
          (error, flags, fmt, ap)) \
        X(json_t *, json_vsprintf, (const char *fmt, va_list ap), (fmt, ap))

struct jansson_fns {
#define JANSSON_FIELD(ret, name, params, args) __typeof__(name) *name;
        JANSSON_FUNCTIONS(JANSSON_FIELD)
#undef JANSSON_FIELD
        void (*json_delete)(json_t *json);
};

static struct jansson_fns fns;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_errno;
static char load_why[PATH_MAX + 256];
static struct stat start_mounts;  /* /proc/self/ns/mnt as the engine started */

__attribute__((constructor)) static void note_start_mounts(void)
{
        if (stat("/proc/self/ns/mnt", &start_mounts) < 0)
                start_mounts.st_ino = 0;  /* no /proc: nothing to tell apart, nowhere to be refused */
}

static bool in_start_mounts(void)
{
        struct stat now;
        if (start_mounts.st_ino == 0)
                return stat("/proc/self/ns/mnt", &now) < 0;
        return stat("/proc/self/ns/mnt", &now) == 0 && now.st_ino == start_mounts.st_ino &&
               now.st_dev == start_mounts.st_dev;
}

static void load(void)
{
        if (!in_start_mounts()) {
                load_errno = EPERM;
                snprintf(load_why, sizeof load_why, "jansson: first needed in another mount namespace than brig "
                                                    "started in (a sandbox's), where it is not opened");
                return;
        }
        void *h = libload_open("jansson", BRIG_LIBJANSSON_PATH, &load_errno, load_why, sizeof load_why);
        if (!h) {
                size_t used = strlen(load_why);  /* what to do about it, as scmp_load says for libseccomp */
                snprintf(load_why + used, sizeof load_why - used, "; brig reads and writes JSON with it (a broken "
                                                                  "install: reinstall libjansson4)");
                return;
        }
        struct jansson_fns f;
#define JANSSON_SYM(ret, name, params, args)                                                                  \
        if (!(f.name = (__typeof__(f.name))libload_sym(h, #name, "jansson", BRIG_LIBJANSSON_PATH, &load_errno, \
                                                       load_why, sizeof load_why)))                            \
                return;
        JANSSON_FUNCTIONS(JANSSON_SYM)
        JANSSON_SYM(void, json_delete, (json_t * json), (json))
#undef JANSSON_SYM
        fns = f;
}

/* The loaded table; on failure the reason, and the end (a broken install,
 * or a bug: brig's own words for it on stderr, 125). */
static const struct jansson_fns *lib(void)
{
        pthread_once(&once, load);
        if (load_errno) {
                fprintf(stderr, "brig: %s\n", load_why);
                _exit(BRIG_EXIT_SETUP);
        }
        return &fns;
}

void brig_json_preload(void)
{
        (void)lib();
}

#define JANSSON_CALL(ret, name, params, args) \
        ret name params                       \
        {                                     \
                return lib()->name args;      \
        }
JANSSON_FUNCTIONS(JANSSON_CALL)
#undef JANSSON_CALL

void json_delete(json_t *json)
{
        lib()->json_delete(json);
}

json_t *json_pack(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        json_t *value = lib()->json_vpack_ex(NULL, 0, fmt, ap);
        va_end(ap);
        return value;
}

json_t *json_sprintf(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        json_t *value = lib()->json_vsprintf(fmt, ap);
        va_end(ap);
        return value;
}
