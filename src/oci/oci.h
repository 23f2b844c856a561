/* oci.h — brig oci: the runc command line over libbrig (docs/oci.md).
 * config.c maps an OCI bundle's config.json onto a brig policy (the part
 * tests/fuzz/fuzz_oci_config.c drives); oci.c holds the commands. */
#ifndef BRIG_OCI_H
#define BRIG_OCI_H

#include "brig.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The process the spec asks for (config.json's "process", or exec's
 * --process file). */
struct oci_process {
        char **argv;
        char **env;      /* NAME=VALUE */
        char *cwd;
        bool terminal;
        unsigned rows, cols;
        char *user;      /* process.user as brig_policy_set_user takes it ("UID:GID[:G,...]"), or NULL */
        char *umask;     /* process.user.umask, octal, or NULL */
};

/* Annotations that carry brig's own policy (docs/oci.md). */
#define OCI_ANNOTATION_POLICY "dev.brig.policy"
#define OCI_ANNOTATION_ALLOW_HOSTS "dev.brig.allow-hosts"
/* The operator's policy for every container, under the annotations'. */
#define OCI_OPERATOR_POLICY "/etc/brig/oci-policy.json"

/* Parse config.json's text (`name` in messages) and apply it to p on top
 * of what p holds: the rootfs (relative to bundle, which must be absolute),
 * mounts, limits, hostname, seccomp rules, annotations. Fills *proc.
 * Anything brig cannot honour or does not know is refused: -EINVAL, and
 * *msg (free()) names the place as "config.json: /process/args: ...". */
int oci_config_apply(brig_policy *p, const char *name, const char *text, size_t len, const char *bundle,
                     struct oci_process *proc, json_t **annotations, char **msg);
/* The same for a "process" object alone (brig oci exec --process). */
int oci_process_parse(const char *name, const char *text, size_t len, struct oci_process *proc, char **msg);
void oci_process_clear(struct oci_process *proc);
/* proc's user and umask onto p (after the maps): a refusal located at
 * its field, as oci_config_apply's. */
int oci_user_apply(brig_policy *p, const struct oci_process *proc, const char *name, char **msg);

/* The limits brig oci update changes, in this order, and the policy
 * without them that a file's are read into. */
#define OCI_N_LIMITS 3
extern const enum brig_limit oci_limits[OCI_N_LIMITS];
brig_policy *oci_policy_without_limits(void);
/* linux.resources alone (brig oci update -r): the memory, pids and cpu
 * limits it sets, 0 where it sets none; located errors as above. */
int oci_resources_parse(const char *name, const char *text, size_t len, uint64_t out[OCI_N_LIMITS], char **msg);

int oci_main(int argc, char **argv);

#endif
