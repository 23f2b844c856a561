/* fuzz_sshagent.c — libFuzzer target for the ssh-agent relay's judge of
 * what the sandbox sends (src/lib/tools/sshagent.c): the input is the byte
 * stream of one connection, judged message by message as the relay does,
 * from a heap copy of exactly the bytes "received" so far (any over-read
 * is caught). Checked: a judged message lies within the bytes given and
 * is longer than its length field; only list-identities, sign requests
 * and the session-bind@openssh.com extension are ever passed on, and a passed-on sign request has exactly the
 * protocol's fields and signs a login (a userauth request).
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* The first byte says how the stream arrives: in pieces this big. */
        if (size < 1)
                return 0;
        size_t piece = (size_t)data[0] + 1, have = 0;
        data++, size--;
        uint8_t *buf = NULL;
        size_t off = 0;
        for (;;) {
                size_t len;
                uint8_t type;
                free(buf);
                buf = malloc(have ? have : 1);
                if (!buf)
                        abort();
                memcpy(buf, data + off, have);
                enum agent_verdict v = sshagent_judge(buf, have, &len, &type);
                if (v == AGENT_BAD)
                        break;
                if (v == AGENT_MORE) {
                        if (off + have >= size)
                                break;
                        have += piece;
                        if (off + have > size)
                                have = size - off;
                        continue;
                }
                if (len < 5 || len > have || len != 4 + (size_t)be32(buf) || type != buf[4])
                        abort();
                if (v == AGENT_FORWARD) {
                        if (type != SSH_AGENTC_REQUEST_IDENTITIES && type != SSH_AGENTC_SIGN_REQUEST &&
                            type != SSH_AGENTC_EXTENSION)
                                abort();
                        /* the one extension: session-bind@openssh.com */
                        if (type == SSH_AGENTC_EXTENSION &&
                            (len < 9 + 24 || be32(buf + 5) != 24 || memcmp(buf + 9, "session-bind@openssh.com", 24)))
                                abort();
                        if (type == SSH_AGENTC_REQUEST_IDENTITIES && len != 5)
                                abort();
                        if (type == SSH_AGENTC_SIGN_REQUEST) {
                                size_t p = 5, data = 0;
                                for (int s = 0; s < 2; s++) {
                                        if (len - p < 4 || be32(buf + p) > len - p - 4)
                                                abort();
                                        data = p + 4;
                                        p += 4 + be32(buf + p);
                                }
                                if (len - p != 4)
                                        abort();
                                /* the data is a login: string session id (1 to
                                 * 64 bytes), then SSH_MSG_USERAUTH_REQUEST */
                                uint32_t sid = p - data >= 4 ? be32(buf + data) : 0;
                                if (sid == 0 || sid > 64 || p - data < 5 + (size_t)sid || buf[data + 4 + sid] != 50)
                                        abort();
                        }
                }
                off += len;
                have -= len;
        }
        free(buf);
        return 0;
}

#include "replay.h"
