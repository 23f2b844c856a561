/* fuzz_exec_request.c — libFuzzer target for the parser of an exec
 * request (persist/control_msg.c exec_request_parse): what the supervisor
 * reads from a control socket's client and pid 1 reads again from the
 * supervisor. Whatever the bytes, a request it accepts has its argc and
 * envc strings inside the message, every variable NAME=VALUE with a name,
 * an absolute cwd or none, and a context exactly when CTL_EXEC_LAST asks
 * for one (never with --detach or a file operation).
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "persist/control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *s, const char *buf, size_t size)
{
        if (!s || s < buf || s + strlen(s) >= buf + size)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* a heap copy of exactly that size: any over-read is caught */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                abort();
        memcpy(buf, data, size);
        struct exec_request req;
        if (exec_request_parse(buf, size, &req) == 0) {
                const struct ctl_hdr *h = (const struct ctl_hdr *)buf;
                bool last = h->flags & CTL_EXEC_LAST;
                if (h->argc == 0 || !req.argv || !req.env || req.argv[h->argc] || req.env[h->envc] ||
                    last != (req.context != NULL) ||
                    (last && (h->flags & (CTL_EXEC_DETACH | CTL_EXEC_FILEOP))) || (req.cwd && req.cwd[0] != '/'))
                        abort();
                for (uint32_t i = 0; i < h->argc; i++)
                        inside(req.argv[i], buf, size);
                for (uint32_t i = 0; i < h->envc; i++) {
                        inside(req.env[i], buf, size);
                        if (req.env[i][0] == '=' || !strchr(req.env[i], '='))
                                abort();
                }
                if (req.cwd)
                        inside(req.cwd, buf, size);
                if (req.context)
                        inside(req.context, buf, size);
                exec_request_free(&req);
        } else if (req.argv || req.env || req.context) {
                abort();  /* a refused request holds nothing */
        }
        free(buf);
        return 0;
}

#include "replay.h"
