/* http.c — the HTTP proxy's request parser and rewriter (pure functions
 * over a byte buffer; fuzzed by tests/fuzz/fuzz_http.c).
 *
 * Two request shapes are served:
 *   CONNECT host:port HTTP/1.1          a tunnel (https, anything over TCP)
 *   GET http://host[:port]/path HTTP/1.1 plain http, forwarded in origin-form
 * and, for filtered mode's redirected plain-HTTP connections, the request a
 * program sends straight to a server (origin-form, named by its Host).
 *
 * The parser is strict where leniency would let a request mean one thing to
 * brig and another to the upstream (RFC 9112 and its smuggling notes): a
 * bare CR or any other control character in the head, folded headers,
 * userinfo in the URL, Content-Length twice or with Transfer-Encoding, a
 * Transfer-Encoding whose last coding is not chunked (or in HTTP/1.0), and
 * for direct requests a missing or doubled Host are all 400. A request body
 * is framed by its Content-Length or its chunks and nothing else, so the
 * next request on the connection is found and judged. */
#define _GNU_SOURCE
#include "net/net.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c)
{
        return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* End of the head (index just past the blank line), or 0 when absent. */
static size_t head_end(const char *buf, size_t len)
{
        for (size_t i = 0; i < len; i++) {
                if (buf[i] != '\n')
                        continue;
                if (i + 1 < len && buf[i + 1] == '\n')
                        return i + 2;
                if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

/* RFC 9112 2.2 and 5.5: a CR only as part of a line's CRLF, and no control
 * character but HTAB anywhere in a head. A bare CR is a line end to some
 * parsers and a byte of the value to others — forwarded, it would make
 * the upstream read headers brig never saw. */
static const char *head_bytes_bad(const char *buf, size_t end)
{
        for (size_t i = 0; i < end; i++) {
                unsigned char c = (unsigned char)buf[i];
                if (c == '\r' && (i + 1 == end || buf[i + 1] != '\n'))
                        return "bare CR in the head";
                if (c == '\0')
                        return "NUL byte in the head";
                if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f)
                        return "control character in the head";
        }
        return NULL;
}

/* One line from [*pos, end): returns its length without CR LF, advances *pos. */
static size_t next_line(const char *buf, size_t end, size_t *pos, size_t *start)
{
        *start = *pos;
        const char *nl = memchr(buf + *pos, '\n', end - *pos);
        size_t stop = nl ? (size_t)(nl - buf) : end;
        *pos = nl ? stop + 1 : end;
        size_t n = stop - *start;
        if (n && buf[*start + n - 1] == '\r')
                n--;
        return n;
}

/* "host:port", "[v6]:port", "host" (port 0 when absent). */
static int parse_authority(const char *s, size_t n, struct http_request *req, const char **why)
{
        if (memchr(s, '@', n)) {
                /* "http://allowed.example@other.example/" reads differently
                 * to different parsers: refuse rather than guess. */
                *why = "credentials in the URL are not accepted";
                return -400;
        }
        const char *host = s, *port = NULL;
        size_t hlen;
        if (n && s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close) {
                        *why = "bad IPv6 address";
                        return -400;
                }
                host = s + 1;
                hlen = (size_t)(close - host);
                if (close + 1 < s + n) {
                        if (close[1] != ':') {
                                *why = "bad authority";
                                return -400;
                        }
                        port = close + 2;
                }
        } else {
                const char *colon = memchr(s, ':', n);
                hlen = colon ? (size_t)(colon - s) : n;
                port = colon ? colon + 1 : NULL;
        }
        if (hlen == 0 || hlen >= sizeof req->host) {
                *why = "bad host";
                return -400;
        }
        memcpy(req->host, host, hlen);
        req->host[hlen] = '\0';
        if (memchr(req->host, '\0', hlen)) {
                *why = "bad host";
                return -400;
        }
        req->port = 0;
        if (port) {
                size_t plen = (size_t)(s + n - port);
                unsigned v = 0;
                if (plen == 0 || plen > 5) {
                        *why = "bad port";
                        return -400;
                }
                for (size_t i = 0; i < plen; i++) {
                        if (!isdigit((unsigned char)port[i])) {
                                *why = "bad port";
                                return -400;
                        }
                        v = v * 10 + (unsigned)(port[i] - '0');
                }
                if (v == 0 || v > 65535) {
                        *why = "bad port";
                        return -400;
                }
                req->port = (uint16_t)v;
        }
        return 0;
}

/* A header value without its surrounding blanks. */
static void trim(const char **v, size_t *n)
{
        while (*n && (**v == ' ' || **v == '\t')) {
                (*v)++;
                (*n)--;
        }
        while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
                (*n)--;
}

/* Content-Length: decimal digits only, at most 18 of them. */
static bool parse_length(const char *v, size_t n, uint64_t *out)
{
        trim(&v, &n);
        if (n == 0 || n > 18)
                return false;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++) {
                if (!isdigit((unsigned char)v[i]))
                        return false;
                x = x * 10 + (uint64_t)(v[i] - '0');
        }
        *out = x;
        return true;
}

/* The comma-separated list v[0..n), its elements compared with `tok`
 * (case-insensitive; with `params`, each without its ";..." parameters):
 * does one equal it (any), or does every non-empty one (!any)? */
static bool list_match(const char *v, size_t n, const char *tok, bool params, bool any)
{
        size_t tl = strlen(tok), i = 0;
        while (i < n) {
                size_t j = i;
                while (j < n && v[j] != ',')
                        j++;
                const char *e = v + i;
                size_t el = j - i;
                const char *semi = params ? memchr(e, ';', el) : NULL;
                if (semi)
                        el = (size_t)(semi - e);
                trim(&e, &el);
                bool same = el == tl && strncasecmp(e, tok, tl) == 0;
                if (any && same)
                        return true;
                if (!any && el && !same)
                        return false;
                i = j + 1;
        }
        return !any;
}

/* Does the comma-separated list v[0..n) hold `tok`? */
static bool has_token(const char *v, size_t n, const char *tok)
{
        return list_match(v, n, tok, false, true);
}

/* Is every element of v[0..n) `tok` or empty (parameters aside)? */
static bool only_tokens(const char *v, size_t n, const char *tok)
{
        return list_match(v, n, tok, true, false);
}

/* The last coding of a Transfer-Encoding list is chunked? */
static bool last_is_chunked(const char *v, size_t n)
{
        const char *comma = NULL;
        for (size_t i = 0; i < n; i++)
                if (v[i] == ',')
                        comma = v + i;
        if (comma) {
                n -= (size_t)(comma + 1 - v);
                v = comma + 1;
        }
        trim(&v, &n);
        return n == 7 && strncasecmp(v, "chunked", 7) == 0;
}

/* Count the codings of one Transfer-Encoding line into *n_chunked, and
 * note whether the last one seen so far is chunked. */
static void te_codings(const char *v, size_t n, unsigned *n_chunked, bool *last_chunked)
{
        size_t i = 0;
        while (i <= n) {
                size_t j = i;
                while (j < n && v[j] != ',')
                        j++;
                const char *e = v + i;
                size_t el = j - i;
                const char *semi = memchr(e, ';', el);  /* transfer-parameters */
                if (semi)
                        el = (size_t)(semi - e);
                trim(&e, &el);
                if (el) {  /* empty list elements are allowed and mean nothing */
                        *last_chunked = el == 7 && strncasecmp(e, "chunked", 7) == 0;
                        *n_chunked += *last_chunked;
                }
                i = j + 1;
        }
}

static int parse_target(const char *buf, size_t off, size_t n, struct http_request *req, bool direct,
                        const char **why)
{
        const char *t = buf + off;
        if (req->kind == HTTP_CONNECT) {
                if (direct) {
                        /* sent straight to an address, CONNECT would make
                         * that server a proxy to wherever it names */
                        *why = "CONNECT to a redirected address (use brig's proxy, HTTP_PROXY)";
                        return -405;
                }
                req->auth_off = off;
                req->auth_len = n;
                int r = parse_authority(t, n, req, why);
                if (r == 0 && req->port == 0) {
                        *why = "CONNECT needs host:port";
                        return -400;
                }
                return r;
        }
        if (n >= 8 && strncasecmp(t, "https://", 8) == 0) {
                *why = "https URLs go through CONNECT";
                return -400;
        }
        if (direct && (t[0] == '/' || (n == 1 && t[0] == '*'))) {
                /* origin-form (or OPTIONS *): the Host header names the server */
                req->kind = HTTP_ORIGIN;
                req->path_off = off;
                req->path_len = n;
                return 0;
        }
        if (n < 7 || strncasecmp(t, "http://", 7) != 0) {
                *why = direct ? "bad request target" : "a proxy request needs an absolute http:// URL";
                return -400;
        }
        size_t a = 7, e = a;
        while (e < n && t[e] != '/' && t[e] != '?' && t[e] != '#')
                e++;
        req->auth_off = off + a;
        req->auth_len = e - a;
        int r = parse_authority(t + a, e - a, req, why);
        if (r < 0)
                return r;
        if (req->port == 0 && !direct)
                req->port = 80;
        req->path_off = off + e;
        req->path_len = n - e;
        /* a fragment never goes on the wire */
        const char *hash = memchr(t + e, '#', n - e);
        if (hash)
                req->path_len = (size_t)(hash - (t + e));
        return 0;
}

/* The length of a header line's name (up to its ':'), or 0 when the line
 * is no "name: value" header (folded, empty name, no colon). */
static size_t header_name(const char *h, size_t n)
{
        size_t k = 0;
        while (k < n && is_tchar((unsigned char)h[k]))
                k++;
        return k > 0 && k < n && h[k] == ':' ? k : 0;
}

static bool header_is(const char *h, size_t k, const char *name)
{
        return strlen(name) == k && strncasecmp(h, name, k) == 0;
}

/* A direct request's Host value [v, v+n): the authority it names. Empty
 * (RFC 9112 3.2: a target without an authority) names no host. */
static int direct_host(const char *buf, const char *v, size_t n, struct http_request *req, const char **why)
{
        trim(&v, &n);
        req->auth_off = (size_t)(v - buf);
        req->auth_len = n;
        if (n == 0) {
                req->host[0] = '\0';
                req->port = 0;
                return 0;
        }
        return parse_authority(v, n, req, why);
}

static int parse_request(const char *buf, size_t len, struct http_request *req, bool direct, const char **why)
{
        memset(req, 0, sizeof *req);
        *why = "bad request";
        size_t end = head_end(buf, len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX);
        if (!end) {
                if (len >= HTTP_HEAD_MAX) {
                        *why = "request head too large";
                        return -431;
                }
                return 0;
        }
        *why = head_bytes_bad(buf, end);
        if (*why)
                return -400;
        *why = "bad request";
        req->head_len = end;
        size_t pos = 0, start;
        size_t n = next_line(buf, end, &pos, &start);
        /* method SP target SP HTTP/1.x */
        size_t m = 0;
        while (m < n && is_tchar((unsigned char)buf[m]))
                m++;
        if (m == 0 || m >= sizeof req->method || m >= n || buf[m] != ' ') {
                *why = m >= sizeof req->method ? "method too long" : "bad request line";
                return m >= sizeof req->method ? -501 : -400;
        }
        memcpy(req->method, buf, m);
        req->method[m] = '\0';
        size_t t0 = m + 1, t1 = t0;
        while (t1 < n && buf[t1] != ' ')
                t1++;
        if (t1 == t0 || t1 >= n) {
                *why = "bad request line";
                return -400;
        }
        const char *ver = buf + t1 + 1;
        size_t vlen = n - t1 - 1;
        if (vlen != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)ver[7])) {
                *why = vlen >= 5 && memcmp(ver, "HTTP/", 5) == 0 ? "only HTTP/1.x is supported" : "bad request line";
                return vlen >= 5 && memcmp(ver, "HTTP/", 5) == 0 ? -505 : -400;
        }
        req->minor = ver[7] - '0';
        if (req->minor > 1) {
                *why = "only HTTP/1.0 and 1.1 are supported";
                return -505;
        }
        req->kind = strcmp(req->method, "CONNECT") == 0 ? HTTP_CONNECT : HTTP_FORWARD;
        int r = parse_target(buf, t0, t1 - t0, req, direct, why);
        if (r < 0)
                return r;
        bool have_cl = false, have_te = false, conn_close = false, conn_keep = false, te_last_chunked = false;
        bool conn_upgrade = false, have_upgrade = false;
        unsigned n_host = 0, n_chunked = 0;
        for (;;) {
                n = next_line(buf, end, &pos, &start);
                if (n == 0)
                        break;
                const char *h = buf + start;
                size_t k = header_name(h, n);
                if (k == 0) {
                        *why = h[0] == ' ' || h[0] == '\t' ? "folded header lines are not accepted" : "bad header line";
                        return -400;
                }
                if (header_is(h, k, "content-length")) {
                        if (have_cl) {
                                *why = "more than one Content-Length";
                                return -400;
                        }
                        have_cl = true;
                        if (!parse_length(h + k + 1, n - k - 1, &req->length)) {
                                *why = "bad Content-Length";
                                return -400;
                        }
                }
                if (header_is(h, k, "transfer-encoding")) {
                        have_te = true;
                        te_codings(h + k + 1, n - k - 1, &n_chunked, &te_last_chunked);
                }
                if (header_is(h, k, "connection") || header_is(h, k, "proxy-connection")) {
                        conn_close |= has_token(h + k + 1, n - k - 1, "close");
                        conn_keep |= has_token(h + k + 1, n - k - 1, "keep-alive");
                        conn_upgrade |= has_token(h + k + 1, n - k - 1, "upgrade");
                }
                if (header_is(h, k, "upgrade"))
                        have_upgrade = true;
                if (header_is(h, k, "host") && n_host++ == 0 && req->kind == HTTP_ORIGIN) {
                        r = direct_host(buf, h + k + 1, n - k - 1, req, why);
                        if (r < 0)
                                return r;
                }
        }
        if (have_cl && have_te) {
                /* the classic request-smuggling ambiguity (RFC 9112 6.1) */
                *why = "both Content-Length and Transfer-Encoding";
                return -400;
        }
        if (have_te && req->minor == 0) {
                /* RFC 9112 6.1: an HTTP/1.0 message with it has faulty framing */
                *why = "Transfer-Encoding in an HTTP/1.0 request";
                return -400;
        }
        if (have_te && (!te_last_chunked || n_chunked != 1)) {
                /* RFC 9112 6.3: no other way to find the body's end */
                *why = "Transfer-Encoding whose last coding is not chunked (once)";
                return -400;
        }
        if (direct && n_host > 1) {
                /* RFC 9112 3.2: which one the server reads is anyone's guess */
                *why = "more than one Host header";
                return -400;
        }
        if (req->kind == HTTP_ORIGIN && n_host == 0 && req->minor >= 1) {
                *why = "no Host header";
                return -400;
        }
        req->has_te = have_te;
        req->keep_alive = !conn_close && (req->minor >= 1 || conn_keep);
        /* Sent straight to a server, a WebSocket handshake goes through:
         * after a 101 the connection is the new protocol's, and no HTTP
         * request follows on it. (Through the proxy, ws:// goes by
         * CONNECT, as clients send it.) */
        req->upgrade = direct && have_upgrade && conn_upgrade && req->minor >= 1;
        return 1;
}

int http_parse_request(const char *buf, size_t len, struct http_request *req, const char **why)
{
        return parse_request(buf, len, req, false, why);
}

int http_parse_direct(const char *buf, size_t len, struct http_request *req, const char **why)
{
        /* RFC 9112 2.2: a server may skip empty lines before the request
         * line; brig does too (and drops them), so they cannot hide it */
        size_t skip = 0;
        for (;;) {
                if (skip < len && buf[skip] == '\n')
                        skip++;
                else if (skip + 1 < len && buf[skip] == '\r' && buf[skip + 1] == '\n')
                        skip += 2;
                else
                        break;
        }
        if (skip >= HTTP_HEAD_MAX) {
                memset(req, 0, sizeof *req);
                *why = "request head too large";
                return -431;
        }
        int r = parse_request(buf + skip, len - skip, req, true, why);
        if (r == 1) {
                req->line_off = skip;
                req->head_len += skip;
                req->path_off += skip;
                req->auth_off += skip;
        }
        return r;
}

static bool hop_by_hop(const char *h, size_t k, bool upgrade)
{
        static const char *const names[] = { "connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                             "proxy-authenticate", "te", "trailer", "upgrade", "host" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (header_is(h, k, names[i]))
                        return !(upgrade && header_is(h, k, "upgrade"));
        return false;
}

char *http_rewrite_request(const char *buf, const struct http_request *req, size_t *out_len)
{
        /* bare-LF lines grow by one byte (CRLF): at most double, plus Host and the tail */
        size_t cap = 2 * req->head_len + req->auth_len + 64;
        char *out = malloc(cap);
        if (!out)
                return NULL;
        size_t o = 0;
        const char *path = req->path_len ? buf + req->path_off : "/";
        size_t plen = req->path_len ? req->path_len : 1;
        bool query_only = req->path_len && path[0] == '?';  /* "http://h?q" means "/?q" */
        o += (size_t)sprintf(out + o, "%s %s", req->method, query_only ? "/" : "");
        memcpy(out + o, path, plen);
        o += plen;
        o += (size_t)sprintf(out + o, " HTTP/1.%d\r\nHost: ", req->minor);
        /* Host names the server brig checked, whatever the client's Host said. */
        memcpy(out + o, buf + req->auth_off, req->auth_len);
        o += req->auth_len;
        memcpy(out + o, "\r\n", 2);
        o += 2;
        size_t pos = req->line_off, start;
        next_line(buf, req->head_len, &pos, &start);  /* the request line */
        for (;;) {
                size_t n = next_line(buf, req->head_len, &pos, &start);
                if (n == 0)
                        break;
                size_t k = strcspn(buf + start, ":");
                if (hop_by_hop(buf + start, k, req->upgrade))
                        continue;
                memcpy(out + o, buf + start, n);
                o += n;
                memcpy(out + o, "\r\n", 2);
                o += 2;
        }
        /* One request per upstream connection: brig checks each request's
         * destination, so it never lets a kept-alive connection carry on. */
        const char *tail = req->upgrade ? "Connection: upgrade\r\n\r\n" : "Connection: close\r\n\r\n";
        memcpy(out + o, tail, strlen(tail));
        o += strlen(tail);
        *out_len = o;
        return out;
}

int http_parse_response(const char *buf, size_t len, struct http_response *resp, const char **why)
{
        memset(resp, 0, sizeof *resp);
        *why = "malformed response head";
        size_t end = head_end(buf, len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX);
        if (!end) {
                if (len >= HTTP_HEAD_MAX) {
                        *why = "response head too large";
                        return -502;
                }
                return 0;
        }
        if (head_bytes_bad(buf, end))
                return -502;
        resp->head_len = end;
        size_t pos = 0, start;
        size_t n = next_line(buf, end, &pos, &start);
        /* HTTP/1.x SP 3DIGIT [SP reason] */
        if (n < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)buf[7]) || buf[8] != ' ' ||
            !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) || !isdigit((unsigned char)buf[11]) ||
            (n > 12 && buf[12] != ' '))
                return -502;
        resp->minor = buf[7] - '0';
        resp->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
        if (resp->status < 100)
                return -502;
        for (;;) {
                n = next_line(buf, end, &pos, &start);
                if (n == 0)
                        break;
                const char *h = buf + start;
                size_t k = header_name(h, n);
                if (k == 0) {
                        if (h[0] == ' ' || h[0] == '\t')
                                *why = "folded header line in the response";
                        return -502;
                }
                if (header_is(h, k, "content-length")) {
                        uint64_t v;
                        if (!parse_length(h + k + 1, n - k - 1, &v) || (resp->has_length && v != resp->length)) {
                                *why = "bad Content-Length in the response";
                                return -502;
                        }
                        resp->has_length = true;
                        resp->length = v;
                }
                if (header_is(h, k, "transfer-encoding")) {
                        resp->has_te = true;
                        /* the last header line decides */
                        resp->chunked = last_is_chunked(h + k + 1, n - k - 1);
                        resp->coded |= !only_tokens(h + k + 1, n - k - 1, "chunked");
                }
                if (header_is(h, k, "content-encoding"))
                        resp->coded |= !only_tokens(h + k + 1, n - k - 1, "identity");
        }
        if (resp->has_length && resp->has_te) {
                *why = "both Content-Length and Transfer-Encoding in the response";
                return -502;
        }
        return 1;
}

char *http_rewrite_response(const char *buf, const struct http_response *resp, bool keep_alive, size_t *out_len)
{
        size_t cap = 2 * resp->head_len + 32;
        char *out = malloc(cap);
        if (!out)
                return NULL;
        size_t o = 0, pos = 0, start;
        size_t n = next_line(buf, resp->head_len, &pos, &start);
        memcpy(out, buf, n);
        o = n;
        memcpy(out + o, "\r\n", 2);
        o += 2;
        static const char *const names[] = { "connection", "proxy-connection", "keep-alive" };
        for (;;) {
                n = next_line(buf, resp->head_len, &pos, &start);
                if (n == 0)
                        break;
                size_t k = strcspn(buf + start, ":");
                bool skip = false;
                for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                        skip |= header_is(buf + start, k, names[i]);
                if (skip)
                        continue;
                memcpy(out + o, buf + start, n);
                o += n;
                memcpy(out + o, "\r\n", 2);
                o += 2;
        }
        const char *tail = keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
        memcpy(out + o, tail, strlen(tail));
        o += strlen(tail);
        *out_len = o;
        return out;
}

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF, CH_DONE };

static int hexval(unsigned char c)
{
        return isdigit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A byte that may stand in a chunk extension or a trailer line. */
static bool line_byte_ok(unsigned char c)
{
        return c == '\t' || (c >= 0x20 && c != 0x7f);
}

uint64_t http_chunk_data_left(const struct http_chunk *ch)
{
        return ch->state == CH_DATA ? ch->size : 0;
}

ssize_t http_chunk_feed(struct http_chunk *ch, const char *buf, size_t len)
{
        size_t i = 0;
        while (i < len && ch->state != CH_DONE) {
                unsigned char c = (unsigned char)buf[i];
                switch (ch->state) {
                case CH_SIZE:
                        if (hexval(c) >= 0) {
                                if (ch->size >> 56)
                                        return -1;  /* no chunk is that big */
                                ch->size = ch->size * 16 + (uint64_t)hexval(c);
                                ch->digits++;
                        } else if (ch->digits && (c == ';' || c == ' ' || c == '\t')) {
                                ch->state = CH_EXT;
                        } else if (ch->digits && c == '\r') {
                                ch->state = CH_SIZE_LF;
                        } else if (ch->digits && c == '\n' && !ch->strict) {
                                goto size_line_done;
                        } else {
                                return -1;
                        }
                        i++;
                        continue;
                case CH_EXT:
                        if (c == '\n' && !ch->strict)
                                goto size_line_done;
                        if (c == '\r' && ch->strict)
                                ch->state = CH_SIZE_LF;
                        else if (ch->strict && !line_byte_ok(c))
                                return -1;
                        i++;
                        continue;
                case CH_SIZE_LF:
                        if (c != '\n')
                                return -1;
                size_line_done:
                        i++;
                        ch->digits = 0;
                        ch->line = 0;
                        ch->state = ch->size ? CH_DATA : CH_TRAILER;
                        continue;
                case CH_DATA: {
                        size_t take = len - i;
                        if (take > ch->size)
                                take = (size_t)ch->size;
                        i += take;
                        ch->size -= take;
                        if (!ch->size)
                                ch->state = CH_DATA_CR;
                        continue;
                }
                case CH_DATA_CR:
                        if (c == '\r')
                                ch->state = CH_DATA_LF;
                        else if (c == '\n' && !ch->strict)
                                ch->state = CH_SIZE;
                        else
                                return -1;
                        i++;
                        continue;
                case CH_DATA_LF:
                        if (c != '\n')
                                return -1;
                        ch->state = CH_SIZE;
                        i++;
                        continue;
                case CH_TRAILER:
                        if (c == '\n' && !ch->strict) {
                                if (ch->line == 0)
                                        ch->state = CH_DONE;
                                ch->line = 0;
                        } else if (c == '\r' && ch->strict) {
                                ch->state = CH_TRAILER_LF;
                        } else if (ch->strict && !line_byte_ok(c)) {
                                return -1;
                        } else if (c != '\r') {
                                ch->line++;
                        }
                        i++;
                        continue;
                case CH_TRAILER_LF:
                        if (c != '\n')
                                return -1;
                        ch->state = ch->line == 0 ? CH_DONE : CH_TRAILER;
                        ch->line = 0;
                        i++;
                        continue;
                }
        }
        ch->done = ch->state == CH_DONE;
        return (ssize_t)i;
}
