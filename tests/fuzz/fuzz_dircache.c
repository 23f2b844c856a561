/* fuzz_dircache.c — libFuzzer target for the policy step's directory
 * cache file (src/lib/core/dircache.c): the input is the file. A file the
 * reader takes must come out of the writer as the same bytes (the order
 * of records kept: none is used yet), but for the records past the
 * first DIRCACHE_MAX_UNUSED, and be taken again; a record it
 * holds answers for its own directory and time only, and for each of its
 * names asked in any order (backwards, then forwards: the search starts
 * after the last name found).
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dircache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly the input: any over-read is caught */
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        struct dircache dc = { .margin_ns = DIRCACHE_MARGIN_NS };
        if (dircache_parse(&dc, copy, size) < 0) {
                free(copy);
                dircache_free(&dc);
                return 0;
        }
        char *out = NULL;
        size_t len = 0;
        if (dircache_format(&dc, &out, &len) == 0) {
                /* the magic, the count, the records: those kept as they were */
                const size_t head = 12 + sizeof(uint32_t);
                uint32_t kept = dc.n < DIRCACHE_MAX_UNUSED ? (uint32_t)dc.n : DIRCACHE_MAX_UNUSED, count;
                if (len < head || len > size || memcmp(out, data, 12) != 0)
                        abort();
                memcpy(&count, out + 12, sizeof count);
                if (count != kept || memcmp(out + head, data + head, len - head) != 0 ||
                    (kept == dc.n && len != size))
                        abort();
                struct dircache again = { 0 };
                if (dircache_parse(&again, out, len) < 0 || again.n != kept)
                        abort();
                out = NULL;  /* again's */
                dircache_free(&again);
        }
        free(out);
        for (size_t i = 0; i < dc.n && i < 16; i++) {
                struct stat st = { .st_dev = dc.v[i].dev, .st_ino = dc.v[i].ino, .st_ctim = dc.v[i].ctime };
                const char *names[DIRCACHE_MAX_NAMES];
                uint32_t k = dc.v[i].n_names;
                const unsigned char *p = (const unsigned char *)dc.v[i].names;
                for (uint32_t j = 0; j < k; j++, p += 1 + p[0])
                        names[j] = strndup((const char *)p + 1, p[0]);
                for (uint32_t j = 0; j < 2 * k; j++) {
                        const char *name = names[j < k ? k - 1 - j : j - k];
                        if (name && !dircache_absent(&dc, &st, name))
                                abort();  /* a name of the record it did not find */
                }
                for (uint32_t j = 0; j < k; j++)
                        free((char *)names[j]);
        }
        for (size_t i = 0; i < dc.n && i < 16; i++) {
                struct stat st = { .st_dev = dc.v[i].dev, .st_ino = dc.v[i].ino, .st_ctim = dc.v[i].ctime };
                (void)dircache_absent(&dc, &st, ".ssh");
                st.st_ctim.tv_nsec ^= 1;
                if (dircache_absent(&dc, &st, ".ssh") || dircache_absent(&dc, &st, ".aws"))
                        abort();  /* another time: the record says nothing */
        }
        dircache_free(&dc);
        return 0;
}

#include "replay.h"
