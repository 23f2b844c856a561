/* fuzz_unixdiag.c — libFuzzer target for the unix socket guard's reader of
 * NETLINK_SOCK_DIAG answers (src/lib/controls/unixdiag.c). The input is: seq (4
 * bytes), device and inode (4 each), one byte choosing a file (even) or an
 * abstract name (odd) and, for a name, its length and bytes; the rest is
 * what recv() returned, in a heap copy of exactly that size (any over-read
 * is caught). The answer is -errno, 0 (more) or 1 (done), and the socket
 * inode is set exactly when a socket matched.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controls/unixguard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 13)
                return 0;
        struct unix_bound want = { 0 };
        uint32_t seq;
        memcpy(&seq, data, 4);
        memcpy(&want.dev, data + 4, 4);
        memcpy(&want.ino, data + 8, 4);
        size_t at = 13;
        char name[108];
        if (data[12] & 1) {
                if (size < at + 1)
                        return 0;
                want.name_len = data[at++] % (sizeof name + 1);
                if (size < at + want.name_len)
                        return 0;
                memcpy(name, data + at, want.name_len);
                want.name = name;
                at += want.name_len;
        }
        size_t n = size - at;
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                abort();
        memcpy(buf, data + at, n);
        bool found = false;
        uint32_t sock_ino = 0xffffffffu;
        int r = unixguard_diag_parse(buf, n, seq, &want, &found, &sock_ino);
        free(buf);
        if (r < -4095 || r > 1)
                abort();  /* an errno, "more" or "done" */
        if (!found && sock_ino != 0xffffffffu)
                abort();  /* set only with a match */
        return 0;
}

#include "replay.h"
