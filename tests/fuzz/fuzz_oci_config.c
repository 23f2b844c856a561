/* fuzz_oci_config.c — libFuzzer target for brig oci's reading of an OCI
 * bundle's config.json (src/oci/config.c) into a brig policy: the file is
 * the engine's, its contents an image's and a user's. The bundle is "/"
 * (so a root.path like "tmp" resolves; a symlink such as /lib64 on merged
 * hosts is refused). What must hold: no crash, leak or over-read; a refusal
 * is -EINVAL with one line of message that starts with the file's name and
 * names a place; an accepted file gives a command (argv non-empty, every
 * entry a string), an absolute cwd, annotations as an object, and a policy
 * that dumps to JSON which loads back. The same bytes as exec's "process"
 * object and as update's "linux.resources" object.
 *
 * Build and run with tests/fuzz/run-fuzz (it links the library). Without
 * -DBRIG_LIBFUZZER it gets a main() that replays the files named on the
 * command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci/oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        brig_policy *p = brig_policy_new();
        if (!p)
                return 0;
        struct oci_process proc = { 0 };
        json_t *ann = NULL;
        char *msg = NULL;
        int r = oci_config_apply(p, "config.json", (const char *)data, size, "/", &proc, &ann, &msg);
        if (r < 0) {
                if (r != -EINVAL || proc.argv || ann)
                        abort();
                if (msg && (strncmp(msg, "config.json", 11) != 0 || strchr(msg, '\n')))
                        abort();
        } else {
                if (r != 0 || msg || !proc.argv || !proc.argv[0] || !proc.cwd || proc.cwd[0] != '/' ||
                    !json_is_object(ann))
                        abort();
                char *dump = brig_policy_to_json(p, NULL);
                if (dump) {
                        brig_policy *back = brig_policy_new();
                        brig_error *e = NULL;
                        if (back && brig_policy_load_string(back, "dump", dump, &e) < 0)
                                abort();
                        brig_error_free(&e);
                        brig_policy_free(back);
                        free(dump);
                }
        }
        /* the exec side reads a "process" object alone */
        struct oci_process ex = { 0 };
        char *xmsg = NULL;
        if (oci_process_parse("process.json", (const char *)data, size, &ex, &xmsg) == 0 && (!ex.argv || !ex.argv[0]))
                abort();
        oci_process_clear(&ex);
        free(xmsg);
        /* and update -r a "linux.resources" object alone: a refusal names
         * the file, an accepted one gives limits the engine takes */
        uint64_t lim[OCI_N_LIMITS];
        char *rmsg = NULL;
        int rr = oci_resources_parse("res.json", (const char *)data, size, lim, &rmsg);
        if (rr < 0 ? rr != -EINVAL || (rmsg && (strncmp(rmsg, "res.json", 8) != 0 || strchr(rmsg, '\n')))
                   : rmsg || (lim[0] && lim[0] < (1 << 20)))
                abort();
        free(rmsg);
        free(msg);
        json_decref(ann);
        oci_process_clear(&proc);
        brig_policy_free(p);
        return 0;
}

#include "replay.h"
