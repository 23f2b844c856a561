/* http.c — the HTTP proxy's request parser and rewriter (pure functions
 * over a byte buffer; fuzzed by tests/fuzz/fuzz_http.c).
 *
 * Two request shapes are served:
 *   CONNECT host:port HTTP/1.1          a tunnel (https, anything over TCP)
 *   GET http://host[:port]/path HTTP/1.1 plain http, forwarded in origin-form
 * The parser is strict where leniency would let a request mean one thing to
 * brig and another to the upstream (folded headers, userinfo in the URL,
 * both Content-Length and Transfer-Encoding). */
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

static int parse_target(const char *buf, size_t off, size_t n, struct http_request *req, const char **why)
{
        const char *t = buf + off;
        if (req->kind == HTTP_CONNECT) {
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
        if (n < 7 || strncasecmp(t, "http://", 7) != 0) {
                *why = "a proxy request needs an absolute http:// URL";
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
        if (req->port == 0)
                req->port = 80;
        req->path_off = off + e;
        req->path_len = n - e;
        /* a fragment never goes on the wire */
        const char *hash = memchr(t + e, '#', n - e);
        if (hash)
                req->path_len = (size_t)(hash - (t + e));
        return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_request *req, const char **why)
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
        if (memchr(buf, '\0', end)) {
                *why = "NUL byte in the request head";
                return -400;
        }
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
        int r = parse_target(buf, t0, t1 - t0, req, why);
        if (r < 0)
                return r;
        bool have_cl = false, have_te = false;
        for (;;) {
                n = next_line(buf, end, &pos, &start);
                if (n == 0)
                        break;
                const char *h = buf + start;
                if (h[0] == ' ' || h[0] == '\t') {
                        *why = "folded header lines are not accepted";
                        return -400;
                }
                size_t k = 0;
                while (k < n && is_tchar((unsigned char)h[k]))
                        k++;
                if (k == 0 || k >= n || h[k] != ':') {
                        *why = "bad header line";
                        return -400;
                }
                if (k == 14 && strncasecmp(h, "content-length", 14) == 0) {
                        if (have_cl) {
                                *why = "more than one Content-Length";
                                return -400;
                        }
                        have_cl = true;
                }
                if (k == 17 && strncasecmp(h, "transfer-encoding", 17) == 0)
                        have_te = true;
        }
        if (have_cl && have_te) {
                /* the classic request-smuggling ambiguity (RFC 9112 6.1) */
                *why = "both Content-Length and Transfer-Encoding";
                return -400;
        }
        return 1;
}

static bool hop_by_hop(const char *h, size_t k)
{
        static const char *const names[] = { "connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                             "proxy-authenticate", "te", "trailer", "upgrade", "host" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strlen(names[i]) == k && strncasecmp(h, names[i], k) == 0)
                        return true;
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
        size_t pos = 0, start;
        next_line(buf, req->head_len, &pos, &start);  /* the request line */
        for (;;) {
                size_t n = next_line(buf, req->head_len, &pos, &start);
                if (n == 0)
                        break;
                size_t k = strcspn(buf + start, ":");
                if (hop_by_hop(buf + start, k))
                        continue;
                memcpy(out + o, buf + start, n);
                o += n;
                memcpy(out + o, "\r\n", 2);
                o += 2;
        }
        /* One request per upstream connection: brig checks each request's
         * destination, so it never lets a kept-alive connection carry on. */
        static const char tail[] = "Connection: close\r\n\r\n";
        memcpy(out + o, tail, sizeof tail - 1);
        o += sizeof tail - 1;
        *out_len = o;
        return out;
}
