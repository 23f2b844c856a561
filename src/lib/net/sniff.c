/* sniff.c — what a redirected connection says it is for (filtered mode).
 *
 * A program that ignores the proxy connects straight to an address; the
 * kernel sends the connection to brig instead, and the first bytes the
 * client sends tell which host it means: the server_name of a TLS
 * ClientHello, or the Host header of a plain HTTP request. Both readers
 * are pure functions over untrusted memory (fuzzed: tests/fuzz/fuzz_sniff.c);
 * they never read past len and never trust a length field.
 *
 * A ClientHello is judged only whole (reassembled from any number of
 * records, up to SNIFF_HELLO_MAX): a name in a hello a server would not
 * take as written, or two names, is SNIFF_BAD and the connection refused.
 * Encrypted ClientHello (ECH) hides the inner name by design; what is
 * judged is the outer server_name, the one on the wire. */
#define _GNU_SOURCE
#include "net/net.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

/* ---- TLS ------------------------------------------------------------------ */

#define TLS_RECORD_HANDSHAKE 0x16
#define TLS_HANDSHAKE_CLIENT_HELLO 0x01
#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_SNI_HOST_NAME 0x00

struct reader {
        const uint8_t *p;
        size_t len, off;
        bool short_read;      /* ran out of bytes (more may come) */
};

static bool take(struct reader *r, size_t n, const uint8_t **out)
{
        if (r->len - r->off < n) {
                r->short_read = true;
                return false;
        }
        if (out)
                *out = r->p + r->off;
        r->off += n;
        return true;
}

static bool u8(struct reader *r, unsigned *v)
{
        const uint8_t *b;
        if (!take(r, 1, &b))
                return false;
        *v = b[0];
        return true;
}

static bool u16(struct reader *r, unsigned *v)
{
        const uint8_t *b;
        if (!take(r, 2, &b))
                return false;
        *v = (unsigned)b[0] << 8 | b[1];
        return true;
}

static bool u24(struct reader *r, size_t *v)
{
        const uint8_t *b;
        if (!take(r, 3, &b))
                return false;
        *v = (size_t)b[0] << 16 | (size_t)b[1] << 8 | b[2];
        return true;
}

/* The handshake bytes may be split over several TLS records: join the
 * fragments of the leading handshake records into out (at most cap bytes).
 * Returns the bytes joined, or -1 when the stream is not TLS handshake
 * records; *bad is set at a record no TLS peer may send (empty, or over
 * 2^14 bytes of plaintext, RFC 8446 5.1), where joining stops. */
static ssize_t join_handshake(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, bool *bad)
{
        size_t off = 0, n = 0;
        *bad = false;
        if (len > 0 && buf[0] != TLS_RECORD_HANDSHAKE)
                return -1;
        if (len > 1 && buf[1] != 0x03)
                return -1;
        while (len - off >= 5 && n < cap) {
                const uint8_t *h = buf + off;
                if (h[0] != TLS_RECORD_HANDSHAKE || h[1] != 0x03)
                        return (ssize_t)n;  /* a later record of another type ends the hello's bytes */
                size_t rec = (size_t)h[3] << 8 | h[4];
                if (rec == 0 || rec > 16384) {
                        *bad = true;
                        return (ssize_t)n;
                }
                size_t have = len - off - 5 < rec ? len - off - 5 : rec;
                if (have > cap - n)
                        have = cap - n;
                memcpy(out + n, h + 5, have);
                n += have;
                if (len - off - 5 < rec)
                        break;  /* this record is still arriving */
                off += 5 + rec;
                /* the hello's bytes are all in: what follows is not read,
                 * so more bytes never change a verdict */
                if (n >= 4 && n >= 4 + ((size_t)out[1] << 16 | (size_t)out[2] << 8 | out[3]))
                        break;
        }
        return (ssize_t)n;
}

/* The server_name extension's body: SNIFF_NAME, SNIFF_NO_NAME (only names
 * of other types) or SNIFF_BAD. */
static int server_name(const uint8_t *ext, size_t el, char host[EGRESS_HOST_MAX + 1])
{
        struct reader s = { .p = ext, .len = el };
        unsigned list_len, nt, nl;
        const uint8_t *name;
        if (!u16(&s, &list_len) || list_len != el - 2 || list_len == 0)
                return SNIFF_BAD;
        int found = SNIFF_NO_NAME;
        while (s.off < s.len) {
                if (!u8(&s, &nt) || !u16(&s, &nl) || !take(&s, nl, &name))
                        return SNIFF_BAD;
                if (nt != TLS_SNI_HOST_NAME)
                        continue;
                /* one host_name per hello (RFC 6066 §3): a second one could
                 * be the one the server reads; a name that is not a valid
                 * host name could be anything to it */
                if (found == SNIFF_NAME || !egress_host_normalize((const char *)name, nl, host))
                        return SNIFF_BAD;
                found = SNIFF_NAME;
        }
        return found;
}

int sniff_tls_sni(const uint8_t *buf, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        /* On the heap, for the call: as thread-local storage, its 32 KiB
         * were zeroed by every brig process at its start (8 page faults
         * before main, every brig run and exec) and carved out of every
         * thread's stack, parsing TLS or not. Without memory, refused. */
        _cleanup_free_ uint8_t *hs = malloc(SNIFF_HELLO_MAX);
        if (!hs)
                return SNIFF_BAD;
        bool bad;
        ssize_t n = join_handshake(buf, len, hs, SNIFF_HELLO_MAX, &bad);
        if (n < 0)
                return SNIFF_NOT_THIS;
        struct reader r = { .p = hs, .len = (size_t)n };
        unsigned type, v;
        size_t body;
        if (!u8(&r, &type))
                return bad ? SNIFF_BAD : SNIFF_MORE;
        if (type != TLS_HANDSHAKE_CLIENT_HELLO)
                return SNIFF_NOT_THIS;  /* decided by its first byte, whatever follows */
        if (!u24(&r, &body))
                return bad ? SNIFF_BAD : SNIFF_MORE;
        if (4 + body > SNIFF_HELLO_MAX)
                return SNIFF_TOO_BIG;   /* decided by its length field, whatever follows */
        if (bad)
                return SNIFF_BAD;
        /* Nothing past the hello's own end is read as part of it, and
         * nothing is judged before all of it is in: a name is only a name
         * in a hello a server would accept. */
        if (4 + body > r.len)
                return SNIFF_MORE;
        r.len = 4 + body;
        if (!u16(&r, &v) /* legacy_version */ || !take(&r, 32, NULL) /* random */)
                return SNIFF_BAD;
        if (!u8(&r, &v) || v > 32 || !take(&r, v, NULL))  /* legacy_session_id */
                return SNIFF_BAD;
        if (!u16(&r, &v) || (v & 1) || v == 0 || !take(&r, v, NULL))  /* cipher_suites */
                return SNIFF_BAD;
        if (!u8(&r, &v) || v == 0 || !take(&r, v, NULL))  /* legacy_compression_methods */
                return SNIFF_BAD;
        if (r.off == r.len)
                return SNIFF_NO_NAME;  /* a hello without extensions */
        unsigned ext_len;
        if (!u16(&r, &ext_len) || r.off + ext_len != r.len)
                return SNIFF_BAD;
        int found = SNIFF_NO_NAME;
        while (r.off < r.len) {
                unsigned et, el;
                const uint8_t *ext;
                if (!u16(&r, &et) || !u16(&r, &el) || !take(&r, el, &ext))
                        return SNIFF_BAD;
                if (et != TLS_EXT_SERVER_NAME)
                        continue;
                /* a second server_name extension (RFC 8446 4.2: at most one
                 * of each) could be the one the server reads */
                if (found != SNIFF_NO_NAME)
                        return SNIFF_BAD;
                found = server_name(ext, el, host);
                if (found == SNIFF_BAD)
                        return SNIFF_BAD;
                if (found == SNIFF_NO_NAME)
                        found = -2;  /* seen, without a host_name */
        }
        return found == SNIFF_NAME ? SNIFF_NAME : SNIFF_NO_NAME;
}

/* A lower bound of the stream length at which sniff_tls_sni() can say
 * anything but SNIFF_MORE or SNIFF_BAD (len: it may now), from the record
 * headers and the hello's declared length alone — so a hello sent a byte
 * at a time is parsed once, not once a byte. (A bad record header among
 * the bytes still to come makes the hello SNIFF_BAD sooner; waiting for it
 * only delays a refusal.) */
size_t sniff_tls_need(const uint8_t *buf, size_t len)
{
        uint8_t head[4];
        size_t off = 0, payload = 0;
        while (len - off >= 5) {
                const uint8_t *h = buf + off;
                size_t rec = (size_t)h[3] << 8 | h[4];
                if (h[0] != TLS_RECORD_HANDSHAKE || h[1] != 0x03 || rec == 0 || rec > 16384)
                        return len;  /* the parser's to judge */
                size_t have = len - off - 5 < rec ? len - off - 5 : rec;
                for (size_t i = 0; i < have && payload + i < 4; i++)
                        head[payload + i] = h[5 + i];
                payload += have;
                if (have < rec)
                        break;
                off += 5 + rec;
        }
        if (len - off < 5 && len - off > 0 && (buf[off] != TLS_RECORD_HANDSHAKE || (len - off > 1 && buf[off + 1] != 0x03)))
                return len;
        if (payload == 0 || head[0] != TLS_HANDSHAKE_CLIENT_HELLO)
                return len;
        if (payload < 4)
                return len + 4 - payload;
        size_t want = 4 + ((size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3]);
        if (want > SNIFF_HELLO_MAX || payload >= want)
                return len;
        return len + (want - payload);
}

/* ---- HTTP ----------------------------------------------------------------- */

static bool is_tchar(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_blank(char c)
{
        return c == ' ' || c == '\t';
}

/* Does line[0..n) end in a blank and an HTTP/1 version as servers read
 * one: "HTTP/", digits of the value 1, ".", digits — nginx takes
 * "HTTP/01.10", and Go any minor digit. (HTTP/2's preface, "PRI *
 * HTTP/2.0", is no HTTP/1 request.) */
static bool http1_version_ends(const char *line, size_t n)
{
        size_t w = n;
        while (w > 0 && !is_blank(line[w - 1]))
                w--;
        if (w == 0)
                return false;  /* no blank before it: the target's end */
        const char *v = line + w, *end = line + n;
        if (end - v < 8 || memcmp(v, "HTTP/", 5) != 0)
                return false;
        v += 5;
        while (v < end && *v == '0')
                v++;
        if (v == end || *v != '1' || ++v == end || *v != '.')
                return false;
        if (++v == end)
                return false;
        for (; v < end; v++)
                if (*v < '0' || *v > '9')
                        return false;
        return true;
}

/* "host", "host:port", "[v6]:port" → the host part, unbracketed. */
static bool authority_host(const char *a, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        while (len && (a[len - 1] == ' ' || a[len - 1] == '\t'))
                len--;
        while (len && (*a == ' ' || *a == '\t')) {
                a++;
                len--;
        }
        if (len && a[0] == '[') {
                const char *close = memchr(a, ']', len);
                if (!close)
                        return false;
                size_t n = (size_t)(close - a - 1);
                if (n == 0 || n > EGRESS_HOST_MAX)
                        return false;
                memcpy(host, a + 1, n);
                host[n] = '\0';
                return true;
        }
        const char *colon = memchr(a, ':', len);
        size_t n = colon ? (size_t)(colon - a) : len;
        if (n == 0 || n > EGRESS_HOST_MAX)
                return false;
        memcpy(host, a, n);
        host[n] = '\0';
        return true;
}

int sniff_http_host(const char *buf, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        /* RFC 9112 2.2: a server may skip empty lines before the request
         * line, so they must not hide one */
        while (len && (buf[0] == '\r' || buf[0] == '\n')) {
                buf++;
                len--;
        }
        /* the method: a token, then a blank — the same answer however
         * the bytes were split into reads. A server may take a token of
         * any length as one (nginx, Go): a word of SNIFF_METHOD_MAX is a
         * request to come, whatever follows (http.c refuses it with 501),
         * never bytes without a name. */
        size_t i = 0;
        while (i < len && i < SNIFF_METHOD_MAX && is_tchar(buf[i]))
                i++;
        if (i == SNIFF_METHOD_MAX)
                return SNIFF_MORE;
        if (i == len)
                return SNIFF_MORE;
        if (i == 0 || !is_blank(buf[i]))
                return SNIFF_NOT_THIS;
        size_t target = i + 1;
        if (target == len)
                return SNIFF_MORE;
        /* Any target, CONNECT's too: what a server would take as a request
         * is one (the parser refuses the odd ones), not bytes without a
         * name. The request line, once in, ends in " HTTP/1.x" — after
         * runs of blanks between the words or after the version too, which
         * nginx takes (and RFC 9112 3 lets a server split on any
         * whitespace). */
        const char *nl = memchr(buf + target, '\n', len - target);
        if (!nl)
                return SNIFF_MORE;
        size_t ll = (size_t)(nl - buf);
        if (ll > target && buf[ll - 1] == '\r')
                ll--;
        while (ll > target && is_blank(buf[ll - 1]))
                ll--;
        if (!http1_version_ends(buf + target, ll - target))
                return SNIFF_NOT_THIS;
        const char *head_end = memmem(buf, len, "\r\n\r\n", 4);
        if (!head_end)
                return SNIFF_MORE;
        size_t head = (size_t)(head_end - buf) + 2;  /* through the last header's CRLF */
        /* the target: the word after the method's blanks */
        size_t t = target;
        while (t < ll && is_blank(buf[t]))
                t++;
        size_t tlen = 0;
        while (t + tlen < ll && !is_blank(buf[t + tlen]))
                tlen++;
        /* absolute-form names the host in the request line itself */
        if (tlen > 7 && strncasecmp(buf + t, "http://", 7) == 0) {
                const char *auth = buf + t + 7;
                size_t alen = tlen - 7;
                const char *slash = memchr(auth, '/', alen);
                if (slash)
                        alen = (size_t)(slash - auth);
                char raw[EGRESS_HOST_MAX + 1];
                return authority_host(auth, alen, raw) && egress_host_normalize(raw, strlen(raw), host)
                               ? SNIFF_NAME : SNIFF_NO_NAME;
        }
        for (const char *p = nl + 1; p < buf + head;) {
                const char *e = memmem(p, (size_t)(buf + head - p), "\r\n", 2);
                if (!e)
                        break;
                if ((size_t)(e - p) > 5 && strncasecmp(p, "host:", 5) == 0) {
                        char raw[EGRESS_HOST_MAX + 1];
                        if (!authority_host(p + 5, (size_t)(e - p) - 5, raw))
                                return SNIFF_NO_NAME;
                        return egress_host_normalize(raw, strlen(raw), host) ? SNIFF_NAME : SNIFF_NO_NAME;
                }
                p = e + 2;
        }
        return SNIFF_NO_NAME;
}
