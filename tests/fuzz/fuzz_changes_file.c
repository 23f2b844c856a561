/* fuzz_changes_file.c — libFuzzer target for the reader of a bind-mode
 * persistent sandbox's record since create (changes_file.c:
 * runchanges_parse), which brig diff and the sandbox's stop read back from
 * its state directory. What it holds: no crash or over-read on any bytes,
 * a reason whenever it refuses, and a record it accepts has only what
 * runchanges_from may take as given: roots with absolute paths, entries
 * with relative paths free of '.' and '..' and records of six fields.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "persist/runchanges.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(json_t *doc)
{
        size_t i;
        json_t *root;
        json_array_foreach(json_object_get(doc, "roots"), i, root) {
                const char *path = json_string_value(json_object_get(root, "path"));
                if (!path || path[0] != '/')
                        abort();
                const char *rel;
                json_t *rec;
                json_object_foreach(json_object_get(root, "entries"), rel, rec) {
                        if (!*rel || rel[0] == '/' || strstr(rel, "//") || !strcmp(rel, "..") ||
                            !strncmp(rel, "../", 3) || strstr(rel, "/../") || json_array_size(rec) != 6)
                                abort();
                        size_t n = strlen(rel);
                        if ((n >= 3 && !strcmp(rel + n - 3, "/..")) || (n >= 2 && !strcmp(rel + n - 2, "/.")))
                                abort();
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly that size: any over-read is caught */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        memcpy(buf, data, size);
        json_t *doc = NULL;
        char why[256] = "";
        int r = runchanges_parse(buf, size, &doc, why, sizeof why);
        if (r == 0)
                check_accepted(doc);
        else if (r != -EBADMSG || !why[0] || doc)
                abort();
        json_decref(doc);
        free(buf);
        return 0;
}

#include "replay.h"
