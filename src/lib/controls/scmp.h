/* scmp.h — libseccomp, opened on first use (scmp.c), for the files that
 * call it (seccomp.c, unixguard.c, exectrace.c): include this instead of
 * <seccomp.h>.
 *
 * A default run needs none of libseccomp's code: its filter comes from the
 * cache (seccomp.c), and the notifications of the unix socket guard are
 * the kernel's ioctls, which scmp.c makes itself. Linked, the library was
 * loaded and relocated at every start all the same (about 0.06 ms of the
 * exec of brig on this VM: docs/benchmarks.md). It is opened as OpenSSL
 * and c-ares are (core/libload.h): the build's own file, by absolute path,
 * root's and writable by nobody else (row 414, libseccomp-substituted).
 *
 * Every libseccomp function brig calls is a pointer of the loaded table
 * here, with the prototype of the library's own declaration: a call of
 * one missing from the list fails the link. A compile (a cache miss)
 * calls scmp_load() first for a located error; any other call loads too,
 * and ends the process with the reason if it cannot (a broken install). */
#ifndef BRIG_CONTROLS_SCMP_H
#define BRIG_CONTROLS_SCMP_H

#include "core/error.h"

#include <seccomp.h>
#include <stddef.h>

#define SCMP_FUNCTIONS(X) \
        X(seccomp_arch_native) \
        X(seccomp_attr_set) \
        X(seccomp_export_bpf) \
        X(seccomp_init) \
        X(seccomp_release) \
        X(seccomp_rule_add_exact_array) \
        X(seccomp_syscall_resolve_name) \
        X(seccomp_syscall_resolve_num_arch) \
        X(seccomp_version)

struct scmp_fns {
#define SCMP_FIELD(name) __typeof__(name) *name;
        SCMP_FUNCTIONS(SCMP_FIELD)
#undef SCMP_FIELD
};

/* Load libseccomp once (thread-safe); 0 or -errno with the reason. */
BRIG_INTERNAL int scmp_load(brig_error **err);
/* The loaded table (loading it if need be; on failure: the reason on
 * stderr and abort). */
BRIG_INTERNAL const struct scmp_fns *scmp(void);
/* The library's file as it is now (inode, size, change time), without
 * loading it: what a cached program was compiled with ("-" if it cannot
 * be found), for the cache's key. */
BRIG_INTERNAL void scmp_identity(char *buf, size_t n);
/* The native architecture's token (SCMP_ARCH_*), without the library
 * where the build knows it. */
BRIG_INTERNAL uint32_t scmp_arch_native(void);

/* The user-notification calls, as the kernel's ioctls (seccomp_unotify(2)),
 * under libseccomp's names and with its conventions: 0 or -errno. */
BRIG_INTERNAL int scmp_notify_alloc(struct seccomp_notif **req, struct seccomp_notif_resp **resp);
BRIG_INTERNAL void scmp_notify_free(struct seccomp_notif *req, struct seccomp_notif_resp *resp);
BRIG_INTERNAL int scmp_notify_receive(int fd, struct seccomp_notif *req);
BRIG_INTERNAL int scmp_notify_respond(int fd, struct seccomp_notif_resp *resp);
BRIG_INTERNAL int scmp_notify_id_valid(int fd, uint64_t id);

#ifndef SCMP_NO_REDIRECT
#define seccomp_arch_native (scmp()->seccomp_arch_native)
#define seccomp_attr_set (scmp()->seccomp_attr_set)
#define seccomp_export_bpf (scmp()->seccomp_export_bpf)
#define seccomp_init (scmp()->seccomp_init)
#define seccomp_release (scmp()->seccomp_release)
#define seccomp_rule_add_exact_array (scmp()->seccomp_rule_add_exact_array)
#define seccomp_syscall_resolve_name (scmp()->seccomp_syscall_resolve_name)
#define seccomp_syscall_resolve_num_arch (scmp()->seccomp_syscall_resolve_num_arch)
#define seccomp_version (scmp()->seccomp_version)
#define seccomp_notify_alloc scmp_notify_alloc
#define seccomp_notify_free scmp_notify_free
#define seccomp_notify_receive scmp_notify_receive
#define seccomp_notify_respond scmp_notify_respond
#define seccomp_notify_id_valid scmp_notify_id_valid
#endif

#endif
