/* fuzz_mountinfo.c — libFuzzer target for the mount table reader
 * (src/lib/controls/mountinfo.c): the input is a mountinfo file, line by line;
 * every line is parsed (most are refused), then the other names of each
 * accepted mount point, and of a path below it, are computed. The names
 * must be well formed: an absolute host path, a relative part without a
 * leading slash, and never the path itself as its own other name.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const struct mountinfo *mi, const char *path)
{
        struct path_alias *v;
        size_t n;
        if (mountinfo_aliases(mi, path, &v, &n) < 0)
                return;  /* out of memory */
        for (size_t i = 0; i < n; i++) {
                if (v[i].host[0] != '/' || v[i].rel[0] == '/')
                        abort();
                if (!v[i].rel[0] && strcmp(v[i].host, path) == 0)
                        abort();
        }
        path_aliases_free(v, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly the input: any over-read is caught */
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        struct mountinfo mi = {0};
        for (size_t start = 0; start < size;) {
                const char *nl = memchr(copy + start, '\n', size - start);
                size_t len = nl ? (size_t)(nl - (copy + start)) + 1 : size - start;
                struct mountinfo_entry e;
                if (mountinfo_parse_line(copy + start, len, &e) == 0) {
                        if (e.root[0] != '/' || e.mnt[0] != '/')
                                abort();
                        free(e.root);
                        free(e.mnt);
                        mountinfo_add_line(&mi, copy + start, len);
                }
                start += len;
        }
        for (size_t i = 0; i < mi.n && i < 64; i++) {
                check_names(&mi, mi.v[i].mnt);
                char *below = brig_strdup_printf("%s/x/y", strcmp(mi.v[i].mnt, "/") ? mi.v[i].mnt : "");
                if (below)
                        check_names(&mi, below);
                free(below);
        }
        mountinfo_clear(&mi);
        free(copy);
        return 0;
}

#include "replay.h"
