/* intercept.h — scoped credentials and request-level rules (issue 18):
 * what the proxy does for the few hosts whose requests it must see.
 *
 *   secrets.c    --secret NAME=@FILE|env:VAR, --secret-host, --secret-header:
 *                the real values (in memory that is neither dumped nor
 *                inherited by the sandbox), their placeholders, finding a
 *                placeholder in bytes (a body piece by piece too) and
 *                swapping it where it may go, finding a value's echoes
 *                (encoded, escaped, in part) in a response
 *   httprules.c  http_rules: methods and path patterns per host, with the
 *                path normalised (or refused when it is ambiguous)
 *   tls.c        the per-sandbox CA, leaf certificates minted per name and
 *                cached, the upstream's verification (trust store and
 *                --upstream-ca, host name)
 *   intercept.c  one intercepted connection: TLS to the upstream first,
 *                verified, then TLS to the client with a minted leaf, then
 *                each request judged, rewritten and relayed (keep-alive,
 *                pipelining), on a thread of its own
 *
 * Only hosts with a bound secret or an http rule are intercepted; every
 * other connection stays end-to-end (docs/secrets.md). */
#ifndef BRIG_INTERCEPT_H
#define BRIG_INTERCEPT_H

#include "net/net.h"

#include <jansson.h>
#include <pthread.h>

/* ---- the policy (net/secrets.c, net/httprules.c) ------------------------- */

#define SECRET_NAME_MAX 64
#define SECRETS_MAX 32
#define SECRET_VALUE_MAX (16u << 10)
/* Echoes (echo_find): a value's longest form searched for in a response
 * is ECHO_CODED_MAX times its length (every byte a JSON \u00XX escape).
 * Values of ECHO_PARTIAL_FROM bytes or more are also found by a run of
 * half their bytes, ECHO_PARTIAL_MIN at least (docs/secrets.md says why). */
#define ECHO_CODED_MAX 6
#define ECHO_PARTIAL_FROM 16
#define ECHO_PARTIAL_MIN 12
#define ECHO_RUN 8            /* the runs looked up in a value's bitmap */
#define ECHO_RUN_LOG2 16
#define ECHO_RUN_BITS (1u << ECHO_RUN_LOG2)

struct secret_spec {
        char *name;           /* an environment variable name */
        char *source;         /* "@/path" or "env:VAR": the value is read at run time */
        char **hosts;         /* patterns as in allow rules (no port) */
        size_t n_hosts;
        char *header;         /* lowercase; "authorization" by default */
};

struct http_rule {
        char *host;           /* pattern, as in allow rules (no port) */
        char **methods;       /* uppercase; none: any */
        size_t n_methods;
        char **paths;         /* "/v1/messages", "/v1/models/STAR" (fnmatch, '*' within one segment) */
        size_t n_paths;
};

struct intercept_policy {
        struct secret_spec *secrets;
        size_t n_secrets;
        struct http_rule *rules;
        size_t n_rules;
        char **upstream_cas;  /* --upstream-ca FILE: trusted besides the host's store */
        size_t n_upstream_cas;
};

BRIG_INTERNAL int intercept_policy_add_secret(struct intercept_policy **ip, const char *spec, brig_error **err);
BRIG_INTERNAL int intercept_policy_secret_host(struct intercept_policy **ip, const char *spec, brig_error **err);
BRIG_INTERNAL int intercept_policy_secret_header(struct intercept_policy **ip, const char *spec, brig_error **err);
BRIG_INTERNAL int intercept_policy_add_upstream_ca(struct intercept_policy **ip, const char *path, brig_error **err);
/* "HOST METHOD[,METHOD] PATH[,PATH]" (the flag) or its parts (policy files). */
BRIG_INTERNAL int intercept_policy_add_rule(struct intercept_policy **ip, const char *host, char **methods,
                                            size_t n_methods, char **paths, size_t n_paths, brig_error **err);
BRIG_INTERNAL int intercept_policy_add_rule_text(struct intercept_policy **ip, const char *text, brig_error **err);
/* Every secret bound to a host (checked when the run is planned). */
BRIG_INTERNAL int intercept_policy_check(const struct intercept_policy *ip, brig_error **err);
BRIG_INTERNAL void intercept_policy_json(const struct intercept_policy *ip, json_t *network);
BRIG_INTERNAL void intercept_policy_free(struct intercept_policy *ip);

/* ---- request paths (httprules.c; pure, fuzzed) --------------------------- */

/* The path of an origin-form target, normalised for matching into out:
 * the query dropped, unreserved %XX decoded. Returns NULL when fine, or a
 * static reason when the path is ambiguous and refused whatever the rules
 * ("/../", "/./", "//", ";", an encoded '/', '\', '.' or '%', a control
 * byte, a path not starting with '/'). */
BRIG_INTERNAL const char *http_path_normalize(const char *path, size_t len, char *out, size_t size);
/* Does a rule for `host` exist, and does one allow this request? *rule
 * says which rules apply, for X-Brig-Deny. */
BRIG_INTERNAL bool http_rules_cover(const struct intercept_policy *ip, const char *host);
BRIG_INTERNAL bool http_rules_allow(const struct intercept_policy *ip, const char *host, const char *method,
                                    const char *norm_path, char *why, size_t size);

/* ---- the run's secrets (secrets.c) ---------------------------------------- */

struct secret {
        const struct secret_spec *spec;
        char placeholder[SECRET_NAME_MAX + 48];  /* brig-secret-NAME-<token> */
        char token[33];       /* 32 hex digits: what is searched for */
        char *value;          /* in the vault */
        size_t value_len;
        /* The value as base64 at each of the 3 alignments it can have in a
         * longer encoded text (only the characters that depend on the value
         * alone): what an upstream echoing a Basic credential sends back.
         * In the vault too; none for a value too short to tell apart. */
        char *b64[3];
        size_t b64_len[3];
        char *hex[2];         /* lower and upper case, in the vault */
        size_t hex_len;
        /* a run this long of the value's bytes is an echo too (0: only
         * the whole value; echo_find), and the bitmap of its 8-byte runs */
        size_t partial;
        uint8_t *runs;        /* of the value and each form above (none under 8 bytes) */
        size_t step;          /* echo_find looks up the runs starting at its multiples */
};

struct ic_conn;
struct intercept {
        const struct intercept_policy *policy;
        struct secret secrets[SECRETS_MAX];
        size_t n;
        char *vault;          /* MADV_DONTDUMP | MADV_WIPEONFORK, wiped at the end */
        size_t vault_used;
        char *ca_pem;
        struct tls_ca *ca;
        /* intercept.c: the connections' threads and the events they queue */
        pthread_mutex_t lock;
        int event_fd;
        json_t *events;       /* [[event, refusal], ...] */
        struct ic_conn *conns;
        bool stopping;
};
BRIG_INTERNAL int intercept_init(struct intercept *ic);
BRIG_INTERNAL void intercept_fini(struct intercept *ic);

/* Before clone (plan_build): read every value into the vault (not dumped,
 * zeroed in the child), make the placeholders and the CA. */
BRIG_INTERNAL struct intercept *intercept_new(const struct intercept_policy *ip, const struct egress_policy *ep,
                                              brig_error **err);
BRIG_INTERNAL void intercept_free(struct intercept *ic);
BRIG_INTERNAL size_t intercept_secret_count(const struct intercept *ic);
BRIG_INTERNAL const struct secret *intercept_secret(const struct intercept *ic, size_t i);
/* The CA certificate (PEM) for the sandbox's trust store. */
BRIG_INTERNAL const char *intercept_ca_pem(const struct intercept *ic);
/* In the child, before anything else runs: blank the env:VAR values of the
 * environment it inherited (it is a copy of brig's memory). */
BRIG_INTERNAL void intercept_scrub_environ(const struct intercept_policy *ip);

/* The first placeholder in buf[0..len) (any case), or NULL; *at its offset. */
BRIG_INTERNAL const struct secret *intercept_find(const struct intercept *ic, const char *buf, size_t len,
                                                  size_t *at);
/* A body searched as it passes, piece by piece: a placeholder split
 * across two pieces (or, chunked, across two chunks: only the data is
 * searched) is found in the piece that completes it. */
#define PLACEHOLDER_SEAM (sizeof(((struct secret *)0)->token) - 2)  /* a token's length - 1 */
struct placeholder_scan {
        bool chunked;         /* the pieces are a chunked body's, framing and all */
        struct http_chunk ch;
        char tail[PLACEHOLDER_SEAM];
        size_t len;
};
/* The first placeholder the piece p[0..n) holds or completes, or NULL. */
BRIG_INTERNAL const struct secret *placeholder_scan(const struct intercept *ic, struct placeholder_scan *ps,
                                                    const char *p, size_t n);
/* A response's bytes from `host`: the first secret bound to it whose
 * value they echo — the value, a run of `partial` of its bytes, its
 * base64 (at any alignment), its hex (lower or upper case), or the value
 * or such a run once %XX, \xXX, \uXXXX (JSON, surrogate pairs too) and
 * \" \\ \/ are decoded. `scratch` holds n bytes. Pure (fuzz_intercept). */
BRIG_INTERNAL const struct secret *echo_find(const struct intercept *ic, const char *host, const char *p, size_t n,
                                             char *scratch);
/* The decoding echo_find searches too; out holds n bytes. */
BRIG_INTERNAL size_t echo_decode(const char *p, size_t n, char *out);
/* The longest raw form of an echo from `host` (0: no secret is bound to it). */
BRIG_INTERNAL size_t echo_longest(const struct intercept *ic, const char *host);
BRIG_INTERNAL bool secret_bound_to(const struct secret *s, const char *host);
/* Should connections to host:port be intercepted? */
BRIG_INTERNAL bool intercept_wants(const struct intercept *ic, const char *host, uint16_t port);

/* A request head judged for one host (pure: fuzz_intercept.c). */
struct intercept_verdict {
        int status;           /* 0: forward; else refuse with it */
        char reason[320];     /* for X-Brig-Deny and the audit event */
        const struct secret *secret;  /* an exfiltration: whose placeholder */
        char *head;           /* status 0: the head to send (malloc'ed), placeholders swapped */
        size_t head_len;
        char path[256];       /* normalised, placeholders shown as {NAME}: the audit's */
};
/* `host`: the name the upstream's certificate was verified for (NULL:
 * plain http, nothing verified: no secret is ever sent). */
BRIG_INTERNAL void intercept_judge_head(const struct intercept *ic, const struct intercept_policy *ip,
                                        const char *host, bool verified, const char *buf,
                                        const struct http_request *req, struct intercept_verdict *v);
/* A placeholder in a name (CONNECT, SOCKS, SNI, a DNS question). */
BRIG_INTERNAL const struct secret *intercept_in_name(const struct intercept *ic, const char *name);

/* ---- TLS (tls.c) ---------------------------------------------------------- */

struct tls_ca;
/* The key's PEM goes into keybuf (the vault), never elsewhere. */
BRIG_INTERNAL struct tls_ca *tls_ca_new(char **pem, char *keybuf, size_t keycap, brig_error **err);
BRIG_INTERNAL void tls_ca_free(struct tls_ca *ca);
/* After clone, on first use: the server context for `host` (cached). */
BRIG_INTERNAL void *tls_server_ctx(struct tls_ca *ca, const char *host);
/* The client context: the host's trust store and the --upstream-ca files. */
/* Does this PEM file hold certificates OpenSSL can load? */
BRIG_INTERNAL bool tls_cafile_ok(const char *path);
BRIG_INTERNAL void *tls_client_ctx(struct tls_ca *ca, char *const *cas, size_t n, char *why, size_t size);
BRIG_INTERNAL struct tls_ca *intercept_ca(struct intercept *ic);
BRIG_INTERNAL const struct intercept_policy *intercept_policy_of(const struct intercept *ic);

/* ---- the connections (intercept.c) --------------------------------------- */

/* Take over an allowed connection: the client's socket (CONNECT answered
 * or not yet: `connect_reply`), the upstream's (TCP connected), the name
 * judged, and the bytes the client already sent (a filtered-mode
 * ClientHello). Events come back through the fd below. */
struct intercept_conn_args {
        int client_fd, upstream_fd;
        char host[EGRESS_HOST_MAX + 1];
        uint16_t port;
        char address[64];
        bool connect_reply;   /* send "200 Connection established" first */
        const char *protocol;
        char *early;          /* malloc'ed, taken */
        size_t early_len;
};
BRIG_INTERNAL int intercept_start(struct intercept *ic, struct intercept_conn_args *a);
/* An eventfd, readable when events are waiting: the egress loop drains
 * them into its log (the audit stream is the loop's alone). */
BRIG_INTERNAL int intercept_event_fd(struct intercept *ic);
/* The next event, or NULL. `refusal`: one for the summary too. */
BRIG_INTERNAL json_t *intercept_next_event(struct intercept *ic, bool *refusal);
/* Stop every connection and join its thread. */
BRIG_INTERNAL void intercept_stop(struct intercept *ic);

#endif
