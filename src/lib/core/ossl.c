/* ossl.c — OpenSSL opened on first use (why, and what is checked:
 * ossl.h). */
#define _GNU_SOURCE
#define OSSL_NO_REDIRECT
#include "core/ossl_fns.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The build's pkg-config libdir and sonames (meson.build). */
#ifndef BRIG_LIBCRYPTO_PATH
#define BRIG_LIBCRYPTO_PATH "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"
#endif
#ifndef BRIG_LIBSSL_PATH
#define BRIG_LIBSSL_PATH "/usr/lib/x86_64-linux-gnu/libssl.so.3"
#endif

static struct ossl_fns fns;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_errno;
static char load_why[PATH_MAX + 256];

static bool root_only(const struct stat *st)
{
        return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* PATH's library, opened once checked: the file (after its links: a
 * distribution may link the soname to a versioned file) and its directory
 * owned by root and writable by nobody else. NULL with load_why said. */
static void *open_checked(const char *path)
{
        char real[PATH_MAX];
        struct stat st, dst;
        if (!realpath(path, real) || stat(real, &st) < 0) {
                load_errno = errno;
                snprintf(load_why, sizeof load_why, "OpenSSL: cannot find %s", path);
                return NULL;
        }
        char *slash = strrchr(real, '/');
        *slash = '\0';
        int dr = stat(real[0] ? real : "/", &dst);
        *slash = '/';
        if (!S_ISREG(st.st_mode) || !root_only(&st) || dr < 0 || !root_only(&dst)) {
                load_errno = EPERM;
                snprintf(load_why, sizeof load_why,
                         "OpenSSL: %s is not a regular file owned by root in a directory only root may write; "
                         "refusing to load it",
                         real);
                return NULL;
        }
        void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                load_errno = ENOEXEC;
                snprintf(load_why, sizeof load_why, "OpenSSL: cannot load %s: %s", real, dlerror());
        }
        return h;
}

static void load(void)
{
        /* libcrypto first: libssl's DT_NEEDED libcrypto.so.3 is then the
         * one already loaded (matched by soname), never searched for */
        void *crypto = open_checked(BRIG_LIBCRYPTO_PATH);
        void *ssl = crypto ? open_checked(BRIG_LIBSSL_PATH) : NULL;
        if (!ssl)
                return;
        struct ossl_fns f;
#define OSSL_SYM(handle, path, name)                                                                        \
        if (!(f.name = (__typeof__(f.name))dlsym(handle, #name))) {                                          \
                load_errno = ENOSYS;                                                                         \
                snprintf(load_why, sizeof load_why,                                                          \
                         "OpenSSL: %s has no %s (another OpenSSL than brig was built for?)", path, #name);   \
                return;                                                                                      \
        }
#define OSSL_CRYPTO(name) OSSL_SYM(crypto, BRIG_LIBCRYPTO_PATH, name)
#define OSSL_SSL(name) OSSL_SYM(ssl, BRIG_LIBSSL_PATH, name)
        OSSL_CRYPTO_FUNCTIONS(OSSL_CRYPTO)
        OSSL_SSL_FUNCTIONS(OSSL_SSL)
        fns = f;
}

int ossl_load(brig_error **err)
{
        pthread_once(&once, load);
        if (load_errno)
                return brig_err_code(err, BRIG_EXIT_SETUP, load_errno, "%s", load_why);
        return 0;
}

const struct ossl_fns *ossl(void)
{
        if (ossl_load(NULL) < 0) {
                fprintf(stderr, "brig: %s\n", load_why);
                abort();
        }
        return &fns;
}
