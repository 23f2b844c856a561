/* fuzz_exec_outcome.c — libFuzzer target for the reader of an exec's end
 * (persist/exec_outcome.c exec_outcome_read): the supervisor's last
 * message as the brig front end hands it to the engine on a socket
 * (src/front/brig.c), and, through exec_outcome_take, as the engine's own
 * client reads it off the socket. Whatever the bytes, it reads within
 * them and gives either a result (an exit code of 0..255, its summary and
 * refusals' lines terminated) or an error with a message and an exit code
 * of 1..255: never success with an error, never a crash.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "persist/sandbox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                abort();
        if (size && send(pair[0], data, size, 0) != (ssize_t)size)
                abort();
        close(pair[0]);
        int fd = pair[1];
        brig_result res;
        memset(&res, 0, sizeof res);
        res.exit_code = BRIG_EXIT_SETUP;
        brig_error *err = NULL;
        int r = exec_outcome_read(fd, "fuzz", &res, &err);
        close(fd);
        if (r == 0) {
                if (err || res.exit_code < 0 || res.exit_code > 255 ||
                    !memchr(res.summary, '\0', sizeof res.summary) || !memchr(res.refusals, '\0', sizeof res.refusals))
                        abort();
        } else if (r > 0 || !err || !err->msg || err->exit_code < 1 || err->exit_code > 255) {
                abort();
        }
        brig_error_free(&err);
        return 0;
}

#include "replay.h"
