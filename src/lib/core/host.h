/* host.h — what the host offers (probe.c) and what keeps user namespaces
 * from brig here (restrict.c). */
#ifndef BRIG_CORE_HOST_H
#define BRIG_CORE_HOST_H

#include "core/util.h"

#include <stdbool.h>
#include <stddef.h>

struct host_features {
        bool userns;
        bool ns_time;
        bool ns_cgroup;
        bool mount_api;        /* open_tree/move_mount/mount_setattr/fsopen */
        bool openat2;
        bool clone3;
        bool seccomp;          /* seccomp filters (SECCOMP_SET_MODE_FILTER) */
};
BRIG_INTERNAL const struct host_features *host_probe(void);

/* restrict.c: which restriction keeps user namespaces from brig here. */
struct userns_restriction {
        const char *id;        /* max_user_namespaces, unprivileged_userns_clone, apparmor, container, unknown */
        char what[320];        /* the restriction met, in words */
        char fix[320];         /* what to change */
};
/* probe_errno: how unshare(CLONE_NEWUSER) or clone3 ended (0: it worked). */
BRIG_INTERNAL bool restrict_userns(int probe_errno, struct userns_restriction *out);
/* "Docker", "Podman", ... when this looks like a container, with why. */
BRIG_INTERNAL const char *restrict_container(char *detail, size_t n);
/* The path to read for a host file: the host's, or under
 * $BRIG_TEST_PROBE_ROOT in a test build. */
BRIG_INTERNAL const char *restrict_path(const char *path, char *buf, size_t n);
/* Test builds: a faked probe errno / Landlock ABI / seccomp (else 0 / real). */
BRIG_INTERNAL int restrict_fake_userns_errno(void);
BRIG_INTERNAL int restrict_fake_landlock_abi(int real);
BRIG_INTERNAL bool restrict_fake_seccomp(bool real);

#endif
