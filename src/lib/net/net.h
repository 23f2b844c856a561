/* net.h — shared declarations of the egress module's parts (not the
 * contract: that is egress.h). The policy, the address classifier and the
 * two protocol parsers are pure functions over memory, so the unit tests
 * and fuzz targets can drive them without sockets. */
#ifndef BRIG_NET_H
#define BRIG_NET_H

#include "net/egress.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define EGRESS_HOST_MAX 253  /* a DNS name's longest text form */

/* ---- addresses ----------------------------------------------------------- */

/* An IPv4 address is kept as its IPv4-mapped IPv6 form (::ffff:a.b.c.d)
 * tagged family AF_INET, so every range check has one representation. */
struct net_addr {
        int family;           /* AF_INET or AF_INET6 */
        uint8_t b[16];
};

BRIG_INTERNAL void net_addr_from_v4(struct net_addr *a, const uint8_t v4[4]);
/* An IPv4-mapped one (::ffff:a.b.c.d) is kept as the IPv4 address. */
BRIG_INTERNAL void net_addr_from_v6(struct net_addr *a, const uint8_t v6[16]);
BRIG_INTERNAL void net_addr_from_sockaddr(struct net_addr *a, const struct sockaddr *sa);
BRIG_INTERNAL void net_addr_to_sockaddr(const struct net_addr *a, uint16_t port, struct sockaddr_storage *ss,
                                        socklen_t *len);
/* "192.0.2.1" or "2001:db8::1" (no brackets). */
BRIG_INTERNAL void net_addr_format(const struct net_addr *a, char *buf, size_t size);
/* Strict literal: dotted quad or IPv6 text (brackets allowed). */
BRIG_INTERNAL bool net_addr_parse(const char *s, struct net_addr *a);
/* What a client may send as a host: also the legacy IPv4 spellings that
 * resolvers and browsers accept (0x7f000001, 2130706433, 127.1, 0177.0.0.1),
 * which must be judged as the address they denote, never as a name. */
BRIG_INTERNAL bool net_addr_parse_lenient(const char *s, struct net_addr *a);

/* ---- classification (classify.c) ---------------------------------------- */

enum addr_class {
        ADDR_PUBLIC = 0,
        ADDR_LOOPBACK,
        ADDR_UNSPECIFIED,
        ADDR_PRIVATE,
        ADDR_CGNAT,
        ADDR_LINK_LOCAL,
        ADDR_METADATA,
        ADDR_ULA,
        ADDR_MULTICAST,
        ADDR_BROADCAST,
        ADDR_RESERVED,
        ADDR_THIS_NETWORK,
        ADDR_DOCUMENTATION,
        ADDR_BENCHMARKING,
};

/* The class of an address; IPv4 embedded in IPv6 (mapped, NAT64, 6to4,
 * compatible) is judged by the embedded IPv4 address. */
BRIG_INTERNAL enum addr_class egress_classify(const struct net_addr *a);
BRIG_INTERNAL const char *addr_class_name(enum addr_class c);
/* Private, unique-local or CGNAT: what --allow-private-host opens to its names. */
BRIG_INTERNAL bool egress_class_private(enum addr_class c);
/* Addresses a refusal never suggests opening (egress.c refusal_fix). */
BRIG_INTERNAL bool egress_class_never_suggested(enum addr_class c);
BRIG_INTERNAL bool egress_is_metadata_name(const char *host);

/* ---- policy (policy.c) --------------------------------------------------- */

/* Lowercase, drop one trailing dot, check the syntax of a DNS name.
 * Returns false for anything that is not a plausible host name. */
BRIG_INTERNAL bool egress_host_normalize(const char *in, size_t len, char out[EGRESS_HOST_MAX + 1]);
/* Pattern `pattern` ("pypi.org", "*.example.org") names `host`? */
BRIG_INTERNAL bool egress_pattern_match(const char *pattern, const char *host);

struct egress_verdict {
        bool allow;
        bool private_ok;      /* host: allowed by --allow-private-host (its addresses may be private);
                               * address: a private one, let in by that rule */
        char reason[EGRESS_HOST_MAX + 160];  /* the rule or class; for the log and the 403 */
};

/* The name check, before any DNS: is `host` (normalized) allowed on `port`? */
BRIG_INTERNAL void egress_judge_host(const struct egress_policy *ep, const char *host, uint16_t port,
                                     struct egress_verdict *v);
/* Does a --deny-host rule name `host` on `port`? (v says which.) Deny
 * rules win wherever a name is visible, a CIDR rule for the address too. */
BRIG_INTERNAL bool egress_host_denied(const struct egress_policy *ep, const char *host, uint16_t port,
                                      struct egress_verdict *v);
/* The DNS stub's check, before any port is known: does an allow rule name
 * `host` (and no deny rule for every port)? */
BRIG_INTERNAL void egress_judge_name(const struct egress_policy *ep, const char *host, struct egress_verdict *v);
/* The address check, for every resolved or literal address. `host` is
 * the name a host rule already allowed this address for (NULL: a literal
 * address), `private_ok` that rule's verdict.private_ok: then private,
 * unique-local and CGNAT addresses pass too (never loopback, link-local
 * or metadata), with v->private_ok set. */
BRIG_INTERNAL void egress_judge_addr(const struct egress_policy *ep, const struct net_addr *a, uint16_t port,
                                     const char *host, bool private_ok, struct egress_verdict *v);
/* Does an --allow-cidr rule name this address (on this port)? */
BRIG_INTERNAL bool egress_cidr_allows(const struct egress_policy *ep, const struct net_addr *a, uint16_t port);
/* The upstream proxy (--upstream-proxy), or NULL: connect directly. */
struct egress_upstream {
        char host[EGRESS_HOST_MAX + 1];  /* normalized name, or the address's text (no brackets) */
        bool literal;
        struct net_addr addr;            /* when literal */
        uint16_t port;
};
BRIG_INTERNAL const struct egress_upstream *egress_policy_upstream(const struct egress_policy *ep);
/* "proxy.example:3128", "192.0.2.1:3128" or "[2001:db8::1]:3128". */
BRIG_INTERNAL void egress_upstream_format(const struct egress_upstream *u, char *buf, size_t size);
/* --resolve answers for `host`; returns how many were copied to out. */
BRIG_INTERNAL size_t egress_policy_resolve(const struct egress_policy *ep, const char *host, struct net_addr *out,
                                           size_t max);

/* ---- HTTP (http.c) ------------------------------------------------------- */

#define HTTP_HEAD_MAX 16384   /* bigger request heads get 431 */

/* HTTP_ORIGIN: a direct request (filtered mode), "GET /path" named by its Host */
enum http_target_kind { HTTP_CONNECT, HTTP_FORWARD, HTTP_ORIGIN };

struct http_request {
        enum http_target_kind kind;
        char method[16];
        char host[EGRESS_HOST_MAX + 3];  /* as sent (brackets stripped), not yet normalized */
        uint16_t port;
        size_t head_len;      /* bytes of the request head, up to and including the blank line */
        size_t line_off;      /* where the request line starts (past empty lines a direct request began with) */
        /* HTTP_FORWARD, HTTP_ORIGIN: the path ("/..." or "*") inside the buffer */
        size_t path_off, path_len;
        /* the authority ("host:port") as sent: the target's, or for
         * HTTP_ORIGIN the Host header's (empty: host "" names no host) */
        size_t auth_off, auth_len;
        int minor;            /* HTTP/1.minor */
        /* the body's framing, for keep-alive: Content-Length (0 when absent)
         * unless Transfer-Encoding is present, whose last (and only chunked)
         * coding is then chunked */
        bool has_te;
        uint64_t length;
        bool keep_alive;      /* the client wants the connection kept (1.1 default, 1.0 only on request) */
        bool upgrade;         /* direct only: Upgrade with "Connection: upgrade" (a WebSocket): passed on */
};

/* Parse a proxy request head (CONNECT or an absolute http:// URL) from
 * buf[0..len). Returns 1 when complete (req filled), 0 when more bytes are
 * needed, or -status (400, 405, 414, 431, 501, 505) with *why a static
 * reason. Never reads past len. RFC 9112 violations that could frame or
 * name a request differently upstream are 400 (see http.c). */
BRIG_INTERNAL int http_parse_request(const char *buf, size_t len, struct http_request *req, const char **why);
/* The same for a request sent straight to a server (filtered mode):
 * origin-form (HTTP_ORIGIN, the host from the one Host header, port 0
 * when it names none) or absolute-form; CONNECT is -405. */
BRIG_INTERNAL int http_parse_direct(const char *buf, size_t len, struct http_request *req, const char **why);
/* The head to send upstream: origin-form request line, the client's
 * headers minus the hop-by-hop ones, and "Connection: close" (for an
 * upgrade request: its Upgrade header and "Connection: upgrade"). Returns
 * a malloc'ed buffer and its length in *out_len, or NULL. */
BRIG_INTERNAL char *http_rewrite_request(const char *buf, const struct http_request *req, size_t *out_len);

/* The upstream's response head, for plain-http keep-alive: enough to know
 * where the response ends. */
struct http_response {
        int status;
        int minor;
        size_t head_len;      /* up to and including the blank line */
        bool has_length;
        uint64_t length;
        bool has_te;
        bool chunked;         /* Transfer-Encoding whose last coding is chunked */
        bool coded;           /* a Content-Encoding other than identity, or a transfer
                               * coding other than chunked (gzip, ...) */
};

/* Parse a response head from buf[0..len). Returns 1 when complete, 0 when
 * more bytes are needed (and len < HTTP_HEAD_MAX), or -502 with *why a
 * static reason (malformed, too large, Content-Length with
 * Transfer-Encoding, conflicting Content-Lengths). Never reads past len. */
BRIG_INTERNAL int http_parse_response(const char *buf, size_t len, struct http_response *resp, const char **why);
/* The head to send the client: the status line and headers minus the
 * connection-scoped ones, then "Connection: keep-alive" or "close".
 * malloc'ed (length in *out_len), or NULL. At most 2 * head_len + 32. */
BRIG_INTERNAL char *http_rewrite_response(const char *buf, const struct http_response *resp, bool keep_alive,
                                          size_t *out_len);

/* Following a chunked body: http_chunk_feed() says how many of the len
 * bytes belong to the message (all of them until its end; the rest after
 * the last chunk and trailers are not), sets done at its end, and returns
 * -1 for a malformed body. `strict` (request bodies, whose end is where
 * brig looks for the next request to judge): every line ends in CRLF and
 * holds no control character, as RFC 9112 7.1 writes it — no bare LF or
 * CR that another parser could frame differently. */
struct http_chunk {
        bool strict;
        int state;
        unsigned digits;
        uint64_t size;        /* of the chunk being read, then what is left of it */
        size_t line;          /* trailer line length so far */
        bool done;
};
BRIG_INTERNAL ssize_t http_chunk_feed(struct http_chunk *ch, const char *buf, size_t len);
/* Inside a chunk's data: how many of its bytes are still to come (the next
 * that many bytes fed are data), or 0 when the next byte is framing. */
BRIG_INTERNAL uint64_t http_chunk_data_left(const struct http_chunk *ch);

/* ---- SOCKS5 (socks5.c) --------------------------------------------------- */

enum {
        SOCKS_OK = 0x00,
        SOCKS_GENERAL_FAILURE = 0x01,
        SOCKS_NOT_ALLOWED = 0x02,
        SOCKS_NET_UNREACHABLE = 0x03,
        SOCKS_HOST_UNREACHABLE = 0x04,
        SOCKS_CONN_REFUSED = 0x05,
        SOCKS_TTL_EXPIRED = 0x06,
        SOCKS_CMD_UNSUPPORTED = 0x07,
        SOCKS_ATYP_UNSUPPORTED = 0x08,
};

/* The method selection message. Returns bytes consumed (>0), 0 for more,
 * -1 when it is not SOCKS5 at all. *no_auth: the client offers "no auth". */
BRIG_INTERNAL int socks5_parse_greeting(const uint8_t *buf, size_t len, bool *no_auth);

struct socks5_request {
        uint8_t cmd;          /* 1 CONNECT, 2 BIND, 3 UDP ASSOCIATE */
        bool is_name;
        char host[256];       /* a domain as sent (NUL-terminated) */
        struct net_addr addr; /* when !is_name */
        uint16_t port;
};

/* The request. Returns bytes consumed (>0), 0 for more, or -reply code
 * (SOCKS_CMD_UNSUPPORTED, SOCKS_ATYP_UNSUPPORTED, SOCKS_GENERAL_FAILURE)
 * to answer with before closing. A non-CONNECT command parses fine
 * (cmd tells); the caller refuses it. */
BRIG_INTERNAL int socks5_parse_request(const uint8_t *buf, size_t len, struct socks5_request *req);
/* A 10-byte reply (IPv4 0.0.0.0:0 as the bound address). */
BRIG_INTERNAL void socks5_reply(uint8_t out[10], uint8_t code);
/* A SOCKS4 or 4a request (into the same struct: cmd 1 CONNECT, 2 BIND;
 * is_name for 4a). Returns bytes consumed (>0), 0 for more, -1 when it is
 * not SOCKS4 or is malformed (a user id or name over 255 bytes, an empty
 * name). */
BRIG_INTERNAL int socks4_parse_request(const uint8_t *buf, size_t len, struct socks5_request *req);
/* The 8-byte reply: 0x5a granted, 0x5b refused or failed. */
BRIG_INTERNAL void socks4_reply(uint8_t out[8], bool granted);

/* ---- filtered mode: what a redirected connection is for (sniff.c) -------- */

/* A ClientHello is read whole, across any number of TLS records and TCP
 * segments, up to SNIFF_HELLO_MAX bytes of handshake message — eight times
 * a post-quantum hello (X25519MLKEM768: ~1.8 KB), and twice what one TLS
 * record can hold. SNIFF_MAX bounds the bytes buffered for it (record
 * headers included): a hello spread over more is refused, never guessed. */
#define SNIFF_HELLO_MAX 32768
#define SNIFF_MAX (SNIFF_HELLO_MAX + 16384)
enum {
        SNIFF_NOT_THIS = -1,  /* not this protocol */
        SNIFF_MORE = 0,       /* still arriving: more bytes can decide */
        SNIFF_NAME = 1,       /* the name, normalized into host */
        SNIFF_NO_NAME = 2,    /* whole, and without a name (no server_name, HTTP/1.0 without Host) */
        SNIFF_BAD = 3,        /* this protocol, malformed: what the server reads is anyone's guess */
        SNIFF_TOO_BIG = 4,    /* a ClientHello declared longer than SNIFF_HELLO_MAX */
};
/* The server_name of a TLS ClientHello at the start of buf (normalized
 * into host): SNIFF_NAME; SNIFF_MORE while it is still arriving, however
 * long (the caller bounds it: SNIFF_MAX, a deadline); SNIFF_NO_NAME for a
 * well-formed hello without a server_name extension (or only names of
 * other types); SNIFF_BAD for a malformed hello, a server_name that is not
 * a host name, two of them, or a record over TLS's 2^14 bytes;
 * SNIFF_NOT_THIS when the bytes are not a TLS handshake. */
BRIG_INTERNAL int sniff_tls_sni(const uint8_t *buf, size_t len, char host[EGRESS_HOST_MAX + 1]);
/* The least length a stream starting with buf[0..len) must reach before
 * sniff_tls_sni() can answer other than SNIFF_MORE or SNIFF_BAD (len when
 * it may now): the egress parses a hello again only then. */
BRIG_INTERNAL size_t sniff_tls_need(const uint8_t *buf, size_t len);
/* Does buf start like an HTTP/1.x request? SNIFF_NOT_THIS as soon as it
 * cannot be one (a method token, a blank, any target, and once the line is
 * in, " HTTP/1.x" with any blanks around the words); else
 * the same as below: SNIFF_MORE until the head is in, then SNIFF_NAME (the
 * absolute-form target's host or the Host header's, port and brackets
 * dropped, normalized) or SNIFF_NO_NAME. Filtered mode judges the name
 * with http_parse_direct(), the proxy's own parser; this says only that
 * the bytes are HTTP and tells the fuzz target what to expect. */
BRIG_INTERNAL int sniff_http_host(const char *buf, size_t len, char host[EGRESS_HOST_MAX + 1]);
/* A first word this long is a request's method still to some servers
 * (nginx and Go's net/http take any token): sniff_http_host() says
 * SNIFF_MORE for it whatever follows, and the parser refuses it (501). */
#define SNIFF_METHOD_MAX 64

/* ---- filtered mode: the DNS stub's messages (dnsmsg.c) ------------------ */

#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1
#define DNS_RCODE_NOERROR 0
#define DNS_RCODE_FORMERR 1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP 4
#define DNS_RCODE_REFUSED 5
#define DNS_DROP (-100)       /* not a query: no answer at all */

struct dns_question {
        uint16_t id, flags;
        char name[EGRESS_HOST_MAX + 1];  /* as asked, not yet normalized */
        uint16_t qtype, qclass;
        const uint8_t *question;          /* inside the query buffer */
        size_t question_len;
};
/* 0 for a well-formed query; -rcode to answer with (FORMERR, NOTIMP);
 * DNS_DROP for what must not be answered (too short, a response). */
BRIG_INTERNAL int dns_parse_query(const uint8_t *buf, size_t len, struct dns_question *q);
/* The reply to q: rcode, and for NOERROR the addresses as A/AAAA answers
 * (ttl seconds). Sets TC when they don't fit in cap. Returns its length,
 * 0 when cap cannot hold a header. */
BRIG_INTERNAL size_t dns_build_reply(const struct dns_question *q, int rcode, const struct net_addr *addrs, size_t n,
                                     uint32_t ttl, uint8_t *out, size_t cap);
BRIG_INTERNAL const char *dns_type_name(uint16_t type, char buf[8]);

/* ---- filtered mode: brig's own addresses for allowed names (names.c) ---- */

#define NAMES_MAX 65535
struct name_book {
        char **names;         /* index i is handed out as pool address i + 1 */
        size_t n, cap;
        int32_t *slots;       /* open-addressing hash of names: index + 1, 0 empty */
};
/* The index of name, added when new; -ENOSPC when the pool is full. */
BRIG_INTERNAL int names_index(struct name_book *nb, const char *name);
BRIG_INTERNAL void names_addr(int index, int family, struct net_addr *a);
BRIG_INTERNAL bool names_in_pool(const struct net_addr *a);
/* The name an address of the pool was handed out for, or NULL. */
BRIG_INTERNAL const char *names_lookup(const struct name_book *nb, const struct net_addr *a);
BRIG_INTERNAL void names_free(struct name_book *nb);

/* ---- filtered mode: the DNS stub (dnsstub.c) ---------------------------- */

struct refusals;
struct dns_stub {
        const struct egress_policy *policy;
        struct name_book names;
        bool ipv6;            /* AAAA answered (the namespace routes IPv6 to brig) */
        bool offline;         /* network off: every name NXDOMAIN, "network is off" */
        egress_log_fn log;
        void *log_ctx;
        struct refusals *refusals;  /* the run's summary (refusals.h), or NULL */
        struct intercept *intercept;  /* secrets: a placeholder in a name is refused (intercept.h), or NULL */
        uint64_t allowed, denied;
};
/* The reply to one query (its length), or 0: send nothing. Logs a "dns"
 * event for every question. */
BRIG_INTERNAL size_t dns_stub_answer(struct dns_stub *s, const uint8_t *query, size_t len, uint8_t *out, size_t cap,
                                     const char *transport);

/* ---- DNS (dns.c): c-ares driven by the egress epoll --------------------- */

struct dns;
typedef void (*dns_done_fn)(void *ctx, int status, const struct net_addr *addrs, size_t n);
BRIG_INTERNAL struct dns *dns_new(int epfd, brig_error **err);
/* The callback may run before dns_resolve returns (hosts file, errors).
 * Returns a token to cancel with (the callback then never runs). */
BRIG_INTERNAL void *dns_resolve(struct dns *d, const char *host, dns_done_fn done, void *ctx);
BRIG_INTERNAL void dns_cancel(void *token);
BRIG_INTERNAL void dns_on_event(struct dns *d, int fd, uint32_t events);
BRIG_INTERNAL void dns_on_timer(struct dns *d);
/* Milliseconds until c-ares needs dns_on_timer, or -1 for never. */
BRIG_INTERNAL int dns_timeout_ms(struct dns *d);
BRIG_INTERNAL void dns_free(struct dns *d);
/* epoll tags: the dns slots are addressed by this tag in epoll data. */
BRIG_INTERNAL bool dns_owns(struct dns *d, void *tag, int *fd);

/* ---- relay (relay.c): one direction of a connection --------------------- */

struct intercept;
struct placeholder_scan;
struct secret;
struct flow {
        int from, to;
        int pipe[2];          /* splice path; -1 until made, or when unavailable */
        size_t in_pipe;
        char *buf;            /* bytes to send first (reply, request head), then the fallback buffer */
        size_t off, len, cap;
        bool eof;             /* `from` reached end of stream */
        bool shut;            /* shutdown(to, SHUT_WR) done */
        bool big_pipe;        /* one of the few enlarged pipes (relay.c) */
        uint64_t bytes;       /* delivered to `to` */
        /* framing (plain-http keep-alive): read no more than the message */
        bool limited;         /* at most `remain` more bytes are read from `from` */
        uint64_t remain;
        bool chunked;         /* follow `chunk` (through the buffer, not splice) */
        struct http_chunk chunk;
        bool ended;           /* the message ended by its framing: FLOW_DONE, no shutdown */
        /* a plain-http request body in a run with secrets: every byte is
         * searched for a placeholder before it is sent (through the
         * buffer, never spliced); one found stops the flow (FLOW_ERROR)
         * with `found` set, the bytes holding it unsent */
        const struct intercept *scan_ic;
        struct placeholder_scan *scan;  /* malloc'ed, freed with the flow */
        const struct secret *found;
};

enum flow_state { FLOW_WANT_READ, FLOW_WANT_WRITE, FLOW_DONE, FLOW_ERROR };

BRIG_INTERNAL void flow_init(struct flow *f, int from, int to);
/* Queue bytes to be sent before anything relayed (copied). */
BRIG_INTERNAL int flow_prepend(struct flow *f, const void *data, size_t len);
/* Move what can move now without blocking; tells what it waits for. */
BRIG_INTERNAL enum flow_state flow_pump(struct flow *f);
BRIG_INTERNAL void flow_free(struct flow *f);

#endif
