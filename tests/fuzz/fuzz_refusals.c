/* fuzz_refusals.c — libFuzzer target for the reader of what a sandbox's
 * supervisor sends with an exec's status for its report (refusals.c
 * refusals_json_parse: {"refusals": [...], "refusals_dropped": N}). What
 * it accepts is exactly that shape: an object of the two fields, at most
 * REFUSALS_MAX entries, each of the five fields with a kind of brig's.
 * The same bytes go to exec_usage_parse, the reader of the status's third
 * part (an exec's CPU and memory): three non-negative integers or nothing.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/refusals.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly that size: any over-read is caught */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        memcpy(buf, data, size);
        json_t *doc = refusals_json_parse(buf, size);
        if (doc) {
                json_t *list = json_object_get(doc, "refusals");
                if (!json_is_array(list) || json_array_size(list) > REFUSALS_MAX ||
                    json_integer_value(json_object_get(doc, "refusals_dropped")) < 0)
                        abort();
                size_t i;
                json_t *f;
                json_array_foreach(list, i, f)
                        if (!json_is_string(json_object_get(f, "what")) || json_object_size(f) != 5)
                                abort();
        }
        json_decref(doc);
        struct exec_usage u = { 0 };
        if (exec_usage_parse(buf, size, &u) == 0 && u.memory_peak_bytes < 0)
                abort();
        free(buf);
        return 0;
}

#include "replay.h"
