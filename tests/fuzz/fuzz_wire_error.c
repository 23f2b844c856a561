/* fuzz_wire_error.c — libFuzzer target for the decoder of the one wire
 * form of an error crossing a process boundary (core/error.c
 * wire_error_decode): the child's and pid 1's failures, the control
 * socket's CTL_ERROR, the supervisor program's ready pipe. Whatever the
 * bytes, the result is an error (negative, an errno in range), an exit
 * code of 1..255, and a message with no control byte but a new line.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly that size: any over-read is caught */
        uint8_t *buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        memcpy(buf, data, size);
        brig_error *err = NULL;
        int code = -1;
        int r = wire_error_decode(buf, size, &code, &err);
        if (r >= 0 || r < -WIRE_ERRNO_MAX || code < 1 || code > 255 || !err || !err->msg ||
            err->exit_code != code || err->errnum < 0 || err->errnum > WIRE_ERRNO_MAX)
                abort();
        for (const unsigned char *c = (const unsigned char *)err->msg; *c; c++)
                if ((*c < 0x20 && *c != '\n') || *c == 0x7f || (c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
                        abort();
        /* and what it decoded goes out again as the same error */
        struct wire_error again;
        wire_error_encode(&again, err, NULL);
        brig_error *back = NULL;
        if (wire_error_decode(&again, sizeof again, NULL, &back) != r)
                abort();
        brig_error_free(&back);
        brig_error_free(&err);
        free(buf);
        return 0;
}

#include "replay.h"
