/* fuzz_mcp_frame.c — libFuzzer target for brig mcp's stdio framing
 * (src/mcp/jsonrpc.c): bytes from the client cut into lines by the
 * reader, in chunks whose sizes the input chooses, each line classified
 * by rpc_parse and answered as the server answers it. What must hold:
 * no crash, leak or over-read; every line taken is at most RPC_MAX_LINE
 * and holds no newline; a parse says exactly one kind, a request has a
 * method and an id of the types MCP allows, params absent or an object;
 * every answer is one line of JSON ending in its only newline; any bytes
 * made a JSON string are valid UTF-8 (jansson would refuse them).
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(char *out)
{
        if (!out)
                return;  /* out of memory only */
        size_t n = strlen(out);
        if (n < 2 || out[n - 1] != '\n' || memchr(out, '\n', n - 1))
                abort();
        json_t *back = json_loadb(out, n - 1, 0, NULL);
        if (!json_is_object(back))
                abort();
        json_decref(back);
        free(out);
}

static void answer(const char *line, size_t len)
{
        if (len > RPC_MAX_LINE || memchr(line, '\n', len))
                abort();
        char *copy = malloc(len ? len : 1);  /* exactly len: an over-read is caught */
        if (!copy)
                abort();
        memcpy(copy, line, len);
        struct rpc_msg m;
        rpc_parse(copy, len, &m);
        switch (m.kind) {
        case RPC_REQUEST:
                if (!m.method || !(json_is_string(m.id) || json_is_integer(m.id)) ||
                    (m.params && !json_is_object(m.params)))
                        abort();
                check_line(rpc_result(m.id, json_pack("{s:s}", "method", m.method)));
                break;
        case RPC_NOTIFICATION:
                if (m.id || (m.params && !json_is_object(m.params)))
                        abort();
                break;
        case RPC_RESPONSE:
                if (!m.id)
                        abort();
                break;
        case RPC_INVALID:
                if (m.code > -32000 || m.code < -32768 || !m.why[0])
                        abort();
                check_line(rpc_error(m.id, m.code, m.why, NULL));
                break;
        default:
                abort();
        }
        /* whatever the line held, as the lossy string a command's output becomes */
        json_t *s = rpc_string_lossy(copy, len);
        if (!s)
                abort();
        json_decref(s);
        rpc_msg_clear(&m);
        free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* The first byte picks the chunk size: lines cut anywhere. */
        size_t chunk = size ? (size_t)data[0] % 17 + 1 : 1;
        struct rpc_reader r = { 0 };
        for (size_t off = size ? 1 : 0; off < size; off += chunk) {
                size_t n = size - off < chunk ? size - off : chunk;
                if (rpc_reader_feed(&r, (const char *)data + off, n) < 0)
                        abort();
                const char *line;
                size_t len;
                enum rpc_take t;
                while ((t = rpc_reader_take(&r, &line, &len)) != RPC_TAKE_NONE)
                        if (t == RPC_TAKE_LINE)
                                answer(line, len);
        }
        rpc_reader_free(&r);
        /* and the whole input as one line */
        answer((const char *)data, size && memchr(data, '\n', size) ? (size_t)((const uint8_t *)memchr(data, '\n', size) - data) : size);
        return 0;
}

#include "replay.h"
