/* libload.c — system libraries opened on first use, checked (why, and
 * what is checked: libload.h). */
#define _GNU_SOURCE
#include "core/libload.h"
#include "core/fsutil.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool root_only(const struct stat *st)
{
        return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

void *libload_open(const char *what, const char *path, int *errnum, char *why, size_t n)
{
        char real[PATH_MAX], where[PATH_MAX];
        struct stat st;
        /* after its links: a distribution may link the soname to a
         * versioned file; the file and the directories above it are what
         * count */
        if (!realpath(path, real) || stat(real, &st) < 0) {
                *errnum = errno;
                snprintf(why, n, "%s: cannot find %s", what, path);
                return NULL;
        }
        snprintf(where, sizeof where, "%s", real);
        if (!S_ISREG(st.st_mode) || !root_only(&st) || !dirs_above_only(real, 0, st.st_uid, where, sizeof where)) {
                *errnum = EPERM;
                snprintf(why, n,
                         "%s: %s is not a regular file that only root can replace (%s is not root's, or others "
                         "may write it); refusing to load it",
                         what, real, where);
                return NULL;
        }
        void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                *errnum = ENOEXEC;
                snprintf(why, n, "%s: cannot load %s: %s", what, real, dlerror());
        }
        return h;
}

void *libload_sym(void *handle, const char *name, const char *what, const char *path, int *errnum, char *why,
                  size_t n)
{
        void *f = dlsym(handle, name);
        if (!f) {
                *errnum = ENOSYS;
                snprintf(why, n, "%s: %s has no %s (another version than brig was built for?)", what, path, name);
        }
        return f;
}
