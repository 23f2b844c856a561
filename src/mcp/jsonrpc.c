/* jsonrpc.c — JSON-RPC 2.0 framing for brig mcp (jsonrpc.h).
 *
 * Every line from the client goes through rpc_parse before the server
 * looks at it, and what it says about the line decides the answer: the
 * server acts only on a RPC_REQUEST or RPC_NOTIFICATION whose method is a
 * string and whose params, when present, are an object. What brig writes
 * back is made by jansson from values, never by pasting text, so nothing a
 * command printed can end a line early and read as a message of its own. */
#define _GNU_SOURCE
#include "mcp/jsonrpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void invalid(struct rpc_msg *m, int code, json_t *id, const char *why)
{
        m->kind = RPC_INVALID;
        m->code = code;
        m->id = id;
        snprintf(m->why, sizeof m->why, "%s", why);
}

/* MCP: "a string or integer" and never null; JSON-RPC also asks for no
 * fractional part. */
static bool valid_id(json_t *id)
{
        return json_is_string(id) || json_is_integer(id);
}

void rpc_parse(const char *line, size_t len, struct rpc_msg *m)
{
        *m = (struct rpc_msg){ 0 };
        json_error_t e;
        /* Duplicate keys refused: two "method"s are two readings of one
         * message, and whoever reads it after us may take the other. */
        m->doc = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
        if (!m->doc) {
                char why[200];
                snprintf(why, sizeof why, "parse error: %s (line 1, column %d)", e.text, e.column);
                invalid(m, RPC_PARSE_ERROR, NULL, why);
                return;
        }
        if (json_is_array(m->doc)) {
                invalid(m, RPC_INVALID_REQUEST, NULL,
                        "invalid request: a JSON-RPC batch; MCP 2025-06-18 and later send one message per line");
                return;
        }
        if (!json_is_object(m->doc)) {
                invalid(m, RPC_INVALID_REQUEST, NULL, "invalid request: a message is a JSON object");
                return;
        }
        json_t *id = json_object_get(m->doc, "id");
        json_t *reply_to = valid_id(id) ? id : NULL;
        const char *version = json_string_value(json_object_get(m->doc, "jsonrpc"));
        if (!version || strcmp(version, "2.0") != 0) {
                invalid(m, RPC_INVALID_REQUEST, reply_to, "invalid request: \"jsonrpc\" must be \"2.0\"");
                return;
        }
        if (id && !valid_id(id)) {
                invalid(m, RPC_INVALID_REQUEST, NULL, "invalid request: \"id\" must be a string or an integer");
                return;
        }
        json_t *method = json_object_get(m->doc, "method");
        if (!method) {
                bool result = json_object_get(m->doc, "result") != NULL;
                bool error = json_is_object(json_object_get(m->doc, "error"));
                if (id && result != error) {
                        m->kind = RPC_RESPONSE;
                        m->id = id;
                        return;
                }
                invalid(m, RPC_INVALID_REQUEST, reply_to,
                        "invalid request: no \"method\" (and not a response: one of \"result\" or \"error\", and an id)");
                return;
        }
        if (!json_is_string(method)) {
                invalid(m, RPC_INVALID_REQUEST, reply_to, "invalid request: \"method\" must be a string");
                return;
        }
        m->method = json_string_value(method);
        if (rpc_has_nul(method)) {
                invalid(m, RPC_INVALID_REQUEST, reply_to, "invalid request: \"method\" holds a NUL character");
                return;
        }
        json_t *params = json_object_get(m->doc, "params");
        if (params && !json_is_object(params)) {
                /* JSON-RPC allows an array; no MCP method takes one. */
                invalid(m, json_is_array(params) ? RPC_INVALID_PARAMS : RPC_INVALID_REQUEST, reply_to,
                        json_is_array(params) ? "invalid params: MCP methods take their params as an object"
                                              : "invalid request: \"params\" must be an object");
                /* a notification is never answered, whatever is wrong with it */
                if (!id)
                        m->kind = RPC_NOTIFICATION, m->method = NULL;
                return;
        }
        m->params = params;
        m->id = id;
        m->kind = id ? RPC_REQUEST : RPC_NOTIFICATION;
}

void rpc_msg_clear(struct rpc_msg *m)
{
        json_decref(m->doc);
        *m = (struct rpc_msg){ 0 };
}

static char *line_of(json_t *msg)
{
        if (!msg)
                return NULL;
        /* ENSURE_ASCII: U+2028 and the like reach the client as escapes;
         * jansson escapes every control character, so the only newline is ours. */
        char *text = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(msg);
        if (!text)
                return NULL;
        size_t n = strlen(text);
        char *out = realloc(text, n + 2);
        if (!out) {
                free(text);
                return NULL;
        }
        out[n] = '\n';
        out[n + 1] = '\0';
        return out;
}

char *rpc_result(json_t *id, json_t *result)
{
        json_t *msg = json_object();
        json_object_set_new(msg, "jsonrpc", json_string("2.0"));
        json_object_set(msg, "id", id ? id : json_null());
        json_object_set_new(msg, "result", result ? result : json_object());
        return line_of(msg);
}

char *rpc_error(json_t *id, int code, const char *message, json_t *data)
{
        json_t *err = json_object();
        json_object_set_new(err, "code", json_integer(code));
        json_object_set_new(err, "message", rpc_string_lossy(message, strlen(message)));
        if (data)
                json_object_set_new(err, "data", data);
        json_t *msg = json_object();
        json_object_set_new(msg, "jsonrpc", json_string("2.0"));
        json_object_set(msg, "id", id ? id : json_null());
        json_object_set_new(msg, "error", err);
        return line_of(msg);
}

char *rpc_notification(const char *method, json_t *params)
{
        json_t *msg = json_object();
        json_object_set_new(msg, "jsonrpc", json_string("2.0"));
        json_object_set_new(msg, "method", json_string(method));
        if (params)
                json_object_set_new(msg, "params", params);
        return line_of(msg);
}

int rpc_reader_feed(struct rpc_reader *r, const char *data, size_t n)
{
        if (r->skipping) {
                const char *nl = memchr(data, '\n', n);
                if (!nl)
                        return 0;
                r->skipping = false;
                n -= (size_t)(nl + 1 - data);
                data = nl + 1;
        }
        if (r->start && r->start == r->len)
                r->start = r->len = r->scanned = 0;
        if (r->len + n > r->cap) {
                /* Move what is unread to the front before growing. */
                if (r->start) {
                        memmove(r->buf, r->buf + r->start, r->len - r->start);
                        r->len -= r->start;
                        r->start = 0;
                }
                size_t cap = r->cap ? r->cap : 65536;
                while (cap < r->len + n)
                        cap *= 2;
                if (cap > r->cap) {
                        char *b = realloc(r->buf, cap);
                        if (!b)
                                return -ENOMEM;
                        r->buf = b;
                        r->cap = cap;
                }
        }
        memcpy(r->buf + r->len, data, n);
        r->len += n;
        return 0;
}

enum rpc_take rpc_reader_take(struct rpc_reader *r, const char **line, size_t *len)
{
        size_t avail = r->len - r->start;
        char *from = r->buf + r->start;
        char *nl = avail > r->scanned ? memchr(from + r->scanned, '\n', avail - r->scanned) : NULL;
        if (!nl) {
                r->scanned = avail;
                if (avail > RPC_MAX_LINE) {
                        /* Drop it: the rest of it is skipped as it comes. */
                        r->start = r->len = r->scanned = 0;
                        r->skipping = true;
                        return RPC_TAKE_TOO_LONG;
                }
                return RPC_TAKE_NONE;
        }
        size_t n = (size_t)(nl - from);
        r->start += n + 1;
        r->scanned = 0;
        if (n > RPC_MAX_LINE)
                return RPC_TAKE_TOO_LONG;
        if (n && from[n - 1] == '\r')
                n--;
        *line = from;
        *len = n;
        return RPC_TAKE_LINE;
}

void rpc_reader_free(struct rpc_reader *r)
{
        free(r->buf);
        *r = (struct rpc_reader){ 0 };
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!len || len > n)
                return 0;
        for (size_t i = 1; i < len; i++)
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
            (c == 0xf4 && s[1] > 0x8f))
                return 0;
        return len;
}

bool rpc_has_nul(const json_t *s)
{
        return json_is_string(s) && strlen(json_string_value(s)) != json_string_length(s);
}

json_t *rpc_string_lossy(const char *s, size_t n)
{
        const unsigned char *u = (const unsigned char *)s;
        size_t bad = 0;
        for (size_t i = 0; i < n;) {
                size_t k = utf8_seq(u + i, n - i);
                bad += !k;
                i += k ? k : 1;
        }
        if (!bad)
                return json_stringn(s, n);
        char *out = malloc(n + 2 * bad + 1);  /* each bad byte: 3 bytes of U+FFFD */
        if (!out)
                return json_string("");
        size_t o = 0;
        for (size_t i = 0; i < n;) {
                size_t k = utf8_seq(u + i, n - i);
                if (k) {
                        memcpy(out + o, s + i, k);
                        o += k;
                        i += k;
                } else {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        i++;
                }
        }
        json_t *str = json_stringn(out, o);
        free(out);
        return str;
}
