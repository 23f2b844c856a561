/* fuzz_auditlog.c — libFuzzer target for the reader of audit streams
 * (auditlog.c: brig_audit_verify, brig_audit_reader_line and the
 * summary), which brig log runs on files anyone may have edited. What it
 * holds: no crash or over-read on any bytes, a verdict that names a line
 * within the input (or one past it) whenever it says "altered", and text
 * for the terminal without a control character other than the colour
 * escapes it asked for (none here).
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_controls(const char *text)
{
        for (const unsigned char *c = (const unsigned char *)text; text && *c; c++)
                if ((*c < 0x20 && *c != '\n') || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly that size: any over-read is caught */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        memcpy(buf, data, size);
        brig_audit_verdict v = { .size = sizeof v };
        int r = brig_audit_verify(buf, size, &v);
        if (r == -EBADMSG && (!v.bad_line || !v.what[0]))
                abort();
        if (r == 0 && (v.bad_line || !v.ended || strlen(v.sha256) != 64))
                abort();
        brig_audit_reader *rd = NULL;
        if (brig_audit_reader_new(size && data[0] & 1 ? BRIG_AUDIT_DENIED : 0, size && data[0] & 2 ? "exec,net" : NULL,
                                  &rd, NULL) < 0)
                abort();
        for (size_t off = 0; off < size;) {
                const char *nl = memchr(buf + off, '\n', size - off);
                size_t n = nl ? (size_t)(nl - (buf + off)) : size - off;
                char *text = NULL;
                brig_audit_reader_line(rd, buf + off, n, &text);
                no_controls(text);
                free(text);
                off += n + 1;
        }
        char *summary = brig_audit_reader_summary(rd);
        no_controls(summary);
        free(summary);
        brig_audit_reader_free(rd);
        free(buf);
        return 0;
}

#include "replay.h"
