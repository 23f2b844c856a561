/* ossl.c — OpenSSL opened on first use (why: ossl.h; how, and what is
 * checked: libload.c). */
#define _GNU_SOURCE
#define OSSL_NO_REDIRECT
#include "core/ossl_fns.h"
#include "core/libload.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

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

static void *open_checked(const char *path)
{
        return libload_open("OpenSSL", path, &load_errno, load_why, sizeof load_why);
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
        if (!(f.name = (__typeof__(f.name))libload_sym(handle, #name, "OpenSSL", path, &load_errno, load_why,  \
                                                       sizeof load_why)))                                    \
                return;
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
