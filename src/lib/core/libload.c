/* libload.c — system libraries opened on first use, checked (why, and
 * what is checked: libload.h). */
#define _GNU_SOURCE
#include "core/libload.h"

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
        char real[PATH_MAX];
        struct stat st, dst;
        /* after its links: a distribution may link the soname to a
         * versioned file; the file and its directory are what count */
        if (!realpath(path, real) || stat(real, &st) < 0) {
                *errnum = errno;
                snprintf(why, n, "%s: cannot find %s", what, path);
                return NULL;
        }
        char *slash = strrchr(real, '/');
        *slash = '\0';
        int dr = stat(real[0] ? real : "/", &dst);
        *slash = '/';
        if (!S_ISREG(st.st_mode) || !root_only(&st) || dr < 0 || !root_only(&dst)) {
                *errnum = EPERM;
                snprintf(why, n,
                         "%s: %s is not a regular file owned by root in a directory only root may write; "
                         "refusing to load it",
                         what, real);
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
