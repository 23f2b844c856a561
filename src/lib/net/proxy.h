/* proxy.h — the egress proxy's inside (src/lib/net/): the connection
 * state, shared by the connection core (egress.c) and its protocol front
 * ends (egress_http.c, egress_socks.c, egress_filtered.c, egress_dns.c).
 * Nothing outside those files includes it: the rest of libbrig sees
 * egress.h. */
#ifndef BRIG_NET_PROXY_H
#define BRIG_NET_PROXY_H

#include "net/net.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_MAX_CONNS 8192
#define HANDSHAKE_TIMEOUT_MS 30000   /* request head, DNS and connect, from accept */
#define IDLE_TIMEOUT_MS 300000       /* a relay with no byte either way */
#define DRAIN_TIMEOUT_MS 2000        /* reading what a refused client still sends */
#define MAX_CANDIDATES 16
#define MAX_DESTINATIONS 256
#define SOCKS_IN_MAX 600             /* greeting (257) + request (262), with room */
#define TUNNEL_HEAD_MAX 8192         /* the upstream proxy's answer to CONNECT */
/* Filtered mode: how long the first bytes are awaited. For an address the
 * stub handed out (or a CIDR rule allows) the name is known or not needed,
 * and a server that speaks first (ssh banners come from both sides, but
 * SMTP, MySQL) must not wait long; for a bare address those bytes are the
 * only way to a name. A first message begun must be whole within
 * SNIFF_BARE_MS, or the connection is refused. */
#define SNIFF_NAMED_MS 250
#define SNIFF_BARE_MS 2000
#define DNS_TCP_IDLE_MS 10000

enum watch_kind { W_LISTENER, W_TIMER, W_CLIENT, W_UPSTREAM, W_INTERCEPT };

struct watch {
        enum watch_kind kind;
        int fd;
        uint32_t events;
        bool registered;
};

struct listener {
        struct watch w;
        enum egress_listener_kind kind;
        bool paused;          /* out of descriptors: resumed by the timer */
        struct listener *next;
};

enum conn_state { C_REQUEST, C_SNIFF, C_DNS, C_RESOLVING, C_UPSTREAM_DNS, C_CONNECTING, C_TUNNEL, C_RELAY, C_REFUSING, C_DEAD };

struct conn {
        struct egress *e;
        struct conn *prev, *next;
        struct watch cw, uw;  /* client, upstream */
        enum egress_listener_kind kind;  /* what it speaks: on a proxy port, known from its first byte */
        enum egress_listener_kind port_kind;  /* the listener it reached */
        bool detected;        /* proxy port: the first byte said which protocol */
        bool socks4;          /* EGRESS_SOCKS: SOCKS4 or 4a, not SOCKS5 */
        enum conn_state state;
        const char *protocol;
        char method[16];
        char *in;             /* the request as read so far */
        size_t in_len, in_cap, in_used;
        bool greeted;         /* SOCKS: method selection done */
        struct http_request req;
        bool forward;         /* plain http: one request per upstream connection */
        bool keep_alive;      /* plain http: the client connection may carry another request */
        bool resp_head;       /* plain http: reading the response head (in `reply`) */
        uint64_t interim;     /* plain http: bytes of a 1xx relayed ahead of the response */
        bool kept;            /* plain http: waiting for the next request on a kept connection */
        char host[EGRESS_HOST_MAX + 1];  /* normalized name, "" for a literal */
        char why[EGRESS_HOST_MAX + 160];  /* the host rule that allowed the name */
        bool private_ok;      /* ... and it was an --allow-private-host rule */
        bool at_limit;        /* refused for one of brig's own bounds: no flag lets it through */
        uint16_t port;
        struct net_addr cands[MAX_CANDIDATES];
        size_t n_cands, next_cand;
        int connected;        /* index into cands, -1 while none */
        size_t next_up;       /* upstream proxy: the next of its addresses to try */
        char *reply;          /* upstream proxy: its answer to CONNECT so far */
        size_t reply_len, reply_used;
        bool established;     /* relaying (directly or through the upstream) */
        char failure[512];    /* why an allowed connection failed, for the close event */
        int last_errno;
        bool allowed;         /* an allow was logged: a close event follows */
        void *dns;
        struct flow up, down;
        uint64_t started_ms, last_ms;
        /* filtered mode (EGRESS_TRANSPARENT) */
        struct net_addr orig;  /* where the program connected */
        char mapped[EGRESS_HOST_MAX + 1];  /* the name orig was handed out for, or "" */
        bool pinned;          /* a bare address named by SNI/Host: only orig may be used */
        bool cidr_ok;         /* orig itself is allowed (--allow-cidr, or a host rule naming it) */
        bool late;            /* allowed before the client said anything: its first bytes still judged */
        uint64_t late_ms;     /* when those first bytes began */
        size_t sniff_need;    /* a ClientHello: no verdict before in_len reaches this */
        size_t sniffed;       /* in_len at the last look that said "more" */
        bool client_eof;      /* the client shut its side while being sniffed */
};

struct dest {
        char *host;
        uint16_t port;
        bool allowed;
        uint64_t count;
        char *reason;         /* of the first decision */
};

/* A name --allow-private-host let reach private addresses, and which:
 * those of its first lookup in this run (see pin_private). */
struct private_pin {
        char *host;
        struct net_addr addrs[MAX_CANDIDATES];
        size_t n;
};
#define PINS_MAX 256

struct egress {
        const struct egress_policy *policy;
        egress_log_fn log;
        void *log_ctx;
        int epfd;
        struct watch timer;
        int timer_armed;      /* 0 off, 1 one second, 2 fast (sniffing) */
        struct dns *dns;
        struct listener *listeners;
        struct conn *conns, *dead;
        size_t n_conns;
        uint64_t allowed, denied, bytes_up, bytes_down;
        struct dest *dests;
        size_t n_dests;
        bool dests_truncated;
        /* --upstream-proxy: NULL to connect directly */
        const struct egress_upstream *upstream;
        char up_text[EGRESS_HOST_MAX + 16];  /* "host:port" */
        enum { UP_UNRESOLVED, UP_RESOLVING, UP_READY } up_state;
        struct net_addr up_addrs[MAX_CANDIDATES];
        size_t n_up;
        void *up_dns;
        struct refusals *refusals;  /* the run's, for the summary; or NULL */
        struct private_pin *pins;
        size_t n_pins;
        bool offline;         /* network off: only the DNS stub (egress_new_offline) */
        /* filtered mode */
        bool filtered;        /* a redirect listener was added */
        size_t in_held;       /* bytes of first-message buffers: sniffed first bytes, proxy request heads */
        struct dns_stub stub;
        /* secrets and http rules (intercept.h): the hosts whose requests are seen */
        struct intercept *ic;
        struct watch icw;     /* its event fd */
};

#define conn_of(w, member) ((struct conn *)((char *)(w) - offsetof(struct conn, member)))

/* A connection's first message is buffered until judged: a proxy
 * request head (1 KiB, grown fourfold up to HTTP_HEAD_MAX), a redirected
 * connection's first bytes (2 KiB, up to SNIFF_MAX). What all of them
 * hold beyond those first sizes is bounded too, or thousands of
 * connections each sending most of a big head or ClientHello would pin
 * the maximum apiece in the supervisor, outside the sandbox's memory
 * limit (8100 proxy connections held 16 KiB heads, 156 MiB, before). */
#define HEAD_BUF_MIN 1024
#define SNIFF_BUF_MIN 2048
#define IN_BUDGET (32u << 20)

/* the connection core (egress.c) */
BRIG_INTERNAL uint64_t now_ms(void);
BRIG_INTERNAL void set_interest(struct egress *e, struct watch *w, uint32_t want);
BRIG_INTERNAL void unwatch(struct egress *e, struct watch *w);
BRIG_INTERNAL int proxy_port_number(enum egress_listener_kind kind);
BRIG_INTERNAL void log_decision(struct conn *c, bool allow, const char *reason, const struct net_addr *addr);
BRIG_INTERNAL void log_close(struct conn *c);
BRIG_INTERNAL void in_free(struct conn *c);
BRIG_INTERNAL int in_grow(struct conn *c, size_t cap, size_t base);
BRIG_INTERNAL void conn_close(struct conn *c);
BRIG_INTERNAL void conn_refuse_with(struct conn *c, const char *reply, size_t len);
BRIG_INTERNAL void refuse(struct conn *c, const char *reason, const struct net_addr *a);
BRIG_INTERNAL void on_addresses(struct conn *c, const struct net_addr *addrs, size_t n, bool named);
BRIG_INTERNAL void judge_target(struct conn *c, const char *host, uint16_t port);
/* Plain http with secrets or http rules: refused (and answered) here? */
BRIG_INTERNAL bool plain_http_refused(struct conn *c);
BRIG_INTERNAL void relay(struct conn *c);

/* the HTTP proxy front end (egress_http.c) */
BRIG_INTERNAL void http_refuse(struct conn *c, int status, const char *target, const char *reason);
BRIG_INTERNAL void read_request(struct conn *c);
BRIG_INTERNAL void next_request(struct conn *c);
BRIG_INTERNAL bool read_response_head(struct conn *c);

/* SOCKS (egress_socks.c) */
BRIG_INTERNAL void socks_refuse(struct conn *c, uint8_t code);
BRIG_INTERNAL void on_socks_bytes(struct conn *c);

/* filtered mode (egress_filtered.c) */
BRIG_INTERNAL enum flow_state late_read(struct conn *c);
BRIG_INTERNAL void late_timeout(struct conn *c);
BRIG_INTERNAL void reset_close(struct conn *c);
BRIG_INTERNAL int original_destination(int fd, struct net_addr *a, uint16_t *port);
BRIG_INTERNAL void transparent_accept(struct conn *c);
BRIG_INTERNAL void sniff_judge(struct conn *c);
BRIG_INTERNAL void sniff_timeout(struct conn *c);
BRIG_INTERNAL void sniff_read(struct conn *c);

/* the DNS stub's sockets (egress_dns.c) */
BRIG_INTERNAL void dns_udp_serve(struct egress *e, struct listener *l);
BRIG_INTERNAL void dns_tcp_read(struct conn *c);

#endif
