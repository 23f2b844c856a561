/* jsonrpc.h — the framing of brig mcp's stdio transport: one JSON-RPC 2.0
 * message per line (MCP stdio: newline-delimited, no embedded newlines),
 * told apart and checked before anything acts on it. Pure: no I/O, so
 * tests/fuzz/fuzz_mcp_frame.c drives it with any bytes. */
#ifndef BRIG_MCP_JSONRPC_H
#define BRIG_MCP_JSONRPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The JSON-RPC 2.0 error codes brig answers with (and MCP's for an
 * unknown resource). */
enum {
        RPC_PARSE_ERROR = -32700,
        RPC_INVALID_REQUEST = -32600,
        RPC_METHOD_NOT_FOUND = -32601,
        RPC_INVALID_PARAMS = -32602,
        RPC_INTERNAL_ERROR = -32603,
        RPC_RESOURCE_NOT_FOUND = -32002,
};

/* A message longer than this is refused unread (a client's tool call with
 * a file's content fits; a runaway one does not take the server's memory). */
#define RPC_MAX_LINE (16u << 20)

enum rpc_kind {
        RPC_REQUEST,       /* method and id: answered with a result or an error */
        RPC_NOTIFICATION,  /* method, no id: never answered */
        RPC_RESPONSE,      /* result or error and an id: the client answering us */
        RPC_INVALID,       /* answered with `code` and `why`, to `id` (JSON null when unknown) */
};

struct rpc_msg {
        enum rpc_kind kind;
        json_t *doc;        /* the whole message (owned) */
        json_t *id;         /* borrowed from doc, or NULL (answered as null) */
        const char *method; /* borrowed from doc */
        json_t *params;     /* borrowed from doc: an object, or NULL when absent */
        int code;           /* RPC_INVALID: the error code */
        char why[200];      /* RPC_INVALID: the error message */
};

/* Classify one line (without its newline). Never fails: what is not a
 * valid request, notification or response comes back as RPC_INVALID with
 * the code a JSON-RPC 2.0 server answers it with: -32700 for bytes that
 * are not one JSON value, -32600 for a value that is not a request (a
 * batch too: MCP 2025-06-18 and later have none), -32602 for params that
 * are not an object. Free with rpc_msg_clear. */
void rpc_parse(const char *line, size_t len, struct rpc_msg *m);
void rpc_msg_clear(struct rpc_msg *m);

/* The messages brig sends, as one line each (free()), newline included;
 * NULL when out of memory. `id` NULL means JSON null. Steal `result`. */
char *rpc_result(json_t *id, json_t *result);
char *rpc_error(json_t *id, int code, const char *message, json_t *data);
char *rpc_notification(const char *method, json_t *params);

/* A newline-delimited reader over a buffer the caller fills: take the next
 * complete line (without '\n', a trailing '\r' dropped) or report that a
 * line grew past RPC_MAX_LINE (it is then skipped up to its newline). */
struct rpc_reader {
        char *buf;
        size_t start, len, cap; /* unread bytes are buf[start..len) */
        size_t scanned;         /* of those, how many hold no newline */
        bool skipping;          /* inside a line that was too long */
};
enum rpc_take { RPC_TAKE_NONE, RPC_TAKE_LINE, RPC_TAKE_TOO_LONG };
/* Append bytes read from the transport; -ENOMEM when out of memory. */
int rpc_reader_feed(struct rpc_reader *r, const char *data, size_t n);
/* *line points into the reader's buffer, valid until the next call. */
enum rpc_take rpc_reader_take(struct rpc_reader *r, const char **line, size_t *len);
void rpc_reader_free(struct rpc_reader *r);

/* Bytes as a JSON string: invalid UTF-8 (a command's output is whatever
 * the command wrote) becomes U+FFFD, one per bad byte. */
json_t *rpc_string_lossy(const char *s, size_t n);

/* A JSON string holding a NUL (\u0000): its C string would stop short,
 * and "debug" followed by one would pass for "debug". */
bool rpc_has_nul(const json_t *s);

#endif
