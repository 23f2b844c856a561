/* libload.h — a system library opened on first use (libload.c): OpenSSL
 * (ossl.c), c-ares (net/dns.c), libseccomp (controls/scmp.c) and, in
 * brig's engine, jansson (src/cli/jansson_lazy.c), which a default run
 * never calls, are not linked, so that no start pays for loading and
 * relocating them.
 *
 * Each is opened by the absolute path of the build's own (its pkg-config
 * libdir and soname: meson.build), after its links, only if the file is
 * a regular file that only root can replace: root's, in directories all
 * the way up that are root's and that only root may write (or sticky,
 * as /tmp, above an entry of root's). Never a copy someone could put on
 * LD_LIBRARY_PATH, beside brig or in the cwd (rows 340, 413 and 414:
 * openssl-, cares- and libseccomp-substituted), nor one below a directory
 * of someone else's, who could move the tree away and put another there
 * (row 385). */
#ifndef BRIG_CORE_LIBLOAD_H
#define BRIG_CORE_LIBLOAD_H

#include "core/util.h"

#include <stddef.h>

/* The library at PATH, checked and dlopen'ed (RTLD_NOW | RTLD_LOCAL);
 * NULL with *errnum and WHY ("WHAT: ...", the reason in words) said. */
BRIG_INTERNAL void *libload_open(const char *what, const char *path, int *errnum, char *why, size_t n);

/* NAME of a library libload_open gave; NULL with *errnum and WHY said. */
BRIG_INTERNAL void *libload_sym(void *handle, const char *name, const char *what, const char *path, int *errnum,
                                char *why, size_t n);

/* A program that opens jansson on first use (brig's engine:
 * src/cli/jansson_lazy.c) defines this, which opens it now; libbrig.so
 * and every other program link jansson, and have none (weak: NULL). */
BRIG_INTERNAL void brig_json_preload(void) __attribute__((weak));

#endif
