/* ossl.h — OpenSSL, loaded when first used (ossl.c; the table of its
 * functions: ossl_fns.h).
 *
 * A default `brig run` touches no OpenSSL: it hashes only for audit
 * streams, manifests and run changes, and speaks TLS only for hosts whose
 * traffic it must see (a bound secret, a request rule). Linked, libssl
 * and libcrypto were loaded and relocated at every start all the same
 * (about 0.7 ms of brig's 1.8 ms exec on this VM: docs/benchmarks.md).
 * They are now opened on first use, by absolute path (the system's, the
 * build's pkg-config libdir), libcrypto first so that libssl's need of it
 * is met by that one and never searched for, each checked to be a
 * regular file only root can replace (core/libload.h): never a
 * copy someone could put on LD_LIBRARY_PATH, beside brig or in the cwd.
 *
 * Files that call OpenSSL include ossl_fns.h (OpenSSL's headers with
 * it): every function brig uses is then a pointer of the loaded table,
 * with the prototype of OpenSSL's own declaration (__typeof__), and
 * OpenSSL's macros (SSL_set_tlsext_host_name → SSL_ctrl) expand to the
 * same. Where a run asks for it (--secret and --http-rule: intercept_new;
 * --audit and --manifest: spawn.c) ossl_load() is called for a located
 * error; a call without it loads too, and ends the process with
 * the reason if the load fails (a broken install: there is no safe way to
 * go on without the hash or the TLS a policy asked for). */
#ifndef BRIG_OSSL_H
#define BRIG_OSSL_H

#include "core/error.h"

/* Load both libraries once (thread-safe); 0 or -errno with the reason. */
BRIG_INTERNAL int ossl_load(brig_error **err);

#endif
