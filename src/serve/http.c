/* http.c — libmicrohttpd's side: a request's body collected under
 * --max-body, its caller told apart (SO_PEERCRED on the unix socket, the
 * bearer token on TCP), its route found, and the replies: JSON, bytes,
 * errors as {"error": {code, message, details}}, and chunked streams. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

atomic_uint serve_inflight;

enum deny { DENY_NONE, DENY_WHO, DENY_TOKEN, DENY_UID };

struct conn_state {
        struct req r;
        bool started;           /* the handler has seen the headers */
        bool nul_in_url;        /* the raw URL escapes a NUL (%00) */
        bool too_large;
        bool refused;           /* answered before the body (413): the body is dropped */
        enum deny deny;         /* answered once the body is in (dropped as it comes): a client
                                 * still sending would see a reset instead of the answer */
};

static int reply_denied(struct req *r, enum deny deny)
{
        switch (deny) {
        case DENY_WHO:
                return reply_error(r, 500, "internal", NULL, "who is calling: SO_PEERCRED failed");
        case DENY_TOKEN:
                return reply_error(r, 401, "unauthorized", NULL,
                                   "a TCP request needs Authorization: Bearer and the token of brig serve --token-file");
        default:
                /* a caller the server cannot act for: a non-root server has
                 * no way to check a path as another user (owners.c) */
                return reply_error(r, 403, "forbidden", json_pack("{s:i}", "server_uid", serve_cfg.uid),
                                   "this brig serve runs as uid %u and serves that user only (uid %u asked); run "
                                   "brig serve as root to serve several users", serve_cfg.uid, r->uid);
        }
}

/* A brig_error of our own (the library's are made by it). */
int serve_err(brig_error **e, int errnum, const char *fmt, ...)
{
        if (e && !*e && (*e = calloc(1, sizeof **e))) {
                va_list ap;
                va_start(ap, fmt);
                if (vasprintf(&(*e)->msg, fmt, ap) < 0)
                        (*e)->msg = NULL;
                va_end(ap);
                (*e)->exit_code = BRIG_EXIT_SETUP;
                (*e)->errnum = errnum;
        }
        return -errnum;
}

int reply_bytes(struct req *r, unsigned status, const char *ctype, char *data, size_t len)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(len, data ? data : (char *)"",
                                                                    data ? MHD_RESPMEM_MUST_FREE
                                                                         : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(data);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        int ret = MHD_queue_response(r->conn, status, resp);
        MHD_destroy_response(resp);
        r->answered = true;
        return ret;
}

/* DOC (taken) as the answer; a newline ends it: curl and people read it
 * as a line. -1: out of memory, nothing queued. */
static int reply_doc(struct req *r, unsigned status, json_t *doc)
{
        char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        size_t len = text ? strlen(text) : 0;
        char *nl = text ? realloc(text, len + 2) : NULL;
        if (!nl) {
                free(text);
                return -1;
        }
        nl[len] = '\n';
        nl[len + 1] = '\0';
        return reply_bytes(r, status, "application/json", nl, len + 1);
}

int reply_json(struct req *r, unsigned status, json_t *doc)
{
        int ret = reply_doc(r, status, doc);
        return ret >= 0 ? ret : reply_error(r, 500, "internal", NULL, "out of memory for the answer");
}

int reply_error(struct req *r, unsigned status, const char *code, json_t *details, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        /* messages carry names the caller or the sandbox chose: jansson
         * refuses invalid UTF-8, so pass them through the same cleaning */
        json_t *m = json_text_of_bytes(msg, strlen(msg));
        json_t *doc = json_pack("{s:{s:s, s:o, s:o}}", "error", "code", code, "message", m ? m : json_string(""),
                                "details", details ? details : json_null());
        if (status >= 500)
                fprintf(stderr, "brig serve: %s %s: %s\n", r->method, r->url, msg);
        int ret = reply_doc(r, status, doc);
        return ret >= 0 ? ret : MHD_NO;
}

int reply_brig(struct req *r, int rc, brig_error *e, const char *what)
{
        const char *msg = e && e->msg ? e->msg : strerror(-rc);
        int errnum = -rc;
        unsigned status;
        const char *code;
        switch (errnum) {
        case ENOENT:
                status = 404, code = "not_found";
                break;
        case EEXIST:
        case EBUSY:
        case ENOTEMPTY:
                status = 409, code = "conflict";
                break;
        case ESRCH:
        case ECONNREFUSED:
        case ENOTCONN:
        case EPIPE:
                status = 409, code = "not_running";
                break;
        case EINVAL:
        case ENAMETOOLONG:
        case ELOOP:
        case EISDIR:
        case ENOTDIR:
        case E2BIG:
                status = 400, code = "bad_request";
                break;
        case EACCES:
        case EPERM:
        case EROFS:
                status = 403, code = "forbidden";
                break;
        case EFBIG:
                status = 413, code = "payload_too_large";
                break;
        case ETIMEDOUT:
                status = 504, code = "timeout";
                break;
        case EOPNOTSUPP:
                /* this host (or this sandbox) lacks what it takes: the message says what */
                status = 409, code = "unavailable";
                break;
        default:
                status = 500, code = "internal";
        }
        json_t *details = json_pack("{s:i, s:s}", "errno", errnum, "errno_name", strerrorname_np(errnum) ?: "?");
        int ret = reply_error(r, status, code, details, "%s: %s", what, msg);
        brig_error_free(&e);
        return ret;
}

struct stream {
        stream_fill_fn fill;
        void (*done)(void *cls);
        void *cls;
};

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct stream *s = cls;
        ssize_t n = s->fill(s->cls, buf, max);
        if (n == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (n < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        return n;
}

static void stream_free(void *cls)
{
        struct stream *s = cls;
        if (s->done)
                s->done(s->cls);
        free(s);
}

int reply_stream(struct req *r, const char *ctype, stream_fill_fn fill, void (*done)(void *cls), void *cls)
{
        struct stream *s = calloc(1, sizeof *s);
        if (!s) {
                if (done)
                        done(cls);
                return reply_error(r, 500, "internal", NULL, "out of memory for the stream");
        }
        *s = (struct stream){ fill, done, cls };
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_cb, s,
                                                                      stream_free);
        if (!resp) {
                stream_free(s);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        int ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        r->answered = true;
        return ret;
}

const char *req_query(struct req *r, const char *key)
{
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

struct query_all {
        const char *key;
        const char **vals;
        size_t n;
        bool oom;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct query_all *q = cls;
        if (strcmp(key, q->key) != 0 || !value)
                return MHD_YES;
        const char **v = realloc(q->vals, (q->n + 2) * sizeof *v);
        if (!v) {
                q->oom = true;
                return MHD_NO;
        }
        q->vals = v;
        q->vals[q->n++] = value;
        q->vals[q->n] = NULL;
        return MHD_YES;
}

const char **req_query_all(struct req *r, const char *key)
{
        struct query_all q = { .key = key };
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect, &q);
        if (q.oom) {
                free(q.vals);
                return NULL;
        }
        if (!q.vals)
                q.vals = calloc(1, sizeof *q.vals);
        return q.vals;
}

json_t *req_json(struct req *r, bool allow_empty, const struct field *fields)
{
        const char *ctype = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (r->body_len && (!ctype || strncasecmp(ctype, "application/json", 16) != 0 ||
                            (ctype[16] && ctype[16] != ';' && ctype[16] != ' '))) {
                reply_error(r, 415, "unsupported_media_type", NULL,
                            "this route takes a JSON body: send Content-Type: application/json");
                return NULL;
        }
        const char *code, *field;
        char msg[512];
        json_t *doc = body_parse(r->body, r->body_len, allow_empty, fields, &code, &field, msg, sizeof msg);
        if (!doc)
                reply_error(r, 400, code, field ? json_pack("{s:s}", "field", field) : NULL, "%s", msg);
        return doc;
}

bool conn_hung_up(int fd)
{
        struct pollfd pf = { .fd = fd, .events = POLLRDHUP };
        return fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

bool req_client_gone(struct req *r)
{
        return conn_hung_up(r->conn_fd);
}

/* Constant-time: the time taken says nothing about how much of a guess
 * was right (nor, beyond the loop's bound, about the token's length). */
static bool token_ok(const char *given, size_t len)
{
        if (!given)
                return false;
        unsigned char diff = len != serve_cfg.token_len;
        for (size_t i = 0; i < sizeof serve_cfg.token; i++) {
                unsigned char a = i < len ? (unsigned char)given[i] : 0;
                unsigned char b = i < serve_cfg.token_len ? (unsigned char)serve_cfg.token[i] : 0;
                diff |= a ^ b;
        }
        return diff == 0 && len <= sizeof serve_cfg.token;
}

static bool caller_of(struct req *r)
{
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        r->conn_fd = ci ? ci->connect_fd : -1;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (r->conn_fd < 0 || getsockname(r->conn_fd, (struct sockaddr *)&ss, &sl) < 0)
                return false;
        if (ss.ss_family == AF_UNIX) {
                struct ucred uc;
                socklen_t ul = sizeof uc;
                if (getsockopt(r->conn_fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0)
                        return false;
                r->uid = uc.uid, r->gid = uc.gid, r->pid = uc.pid;
                return true;
        }
        /* TCP: whoever holds the token acts as the server's user */
        r->tcp = true;
        r->uid = serve_cfg.uid, r->gid = getegid(), r->pid = 0;
        return true;
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        (void)kind, (void)value;
        unsigned *n = cls;
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
                n[0]++;
        else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
                n[1]++;
        return MHD_YES;
}

/* A body framed two ways (Content-Length and Transfer-Encoding, or two
 * lengths) is where a proxy in front and this server would disagree on
 * where the next request starts (request smuggling, RFC 9112 6.3):
 * refused, and the connection closed with the answer. */
static bool framing_ambiguous(struct MHD_Connection *conn)
{
        unsigned n[2] = { 0, 0 };
        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, n);
        return n[0] > 1 || n[1] > 1 || (n[0] && n[1]);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
        struct conn_state *cs = *con_cls;
        if (!cs)
                return MHD_NO; /* on_url found no memory */
        if (!cs->started) {
                /* headers only: who asks, may they, will the body fit */
                cs->started = true;
                struct req *r = &cs->r;
                r->conn = conn, r->url = url, r->method = method;
                if (!caller_of(r)) {
                        cs->deny = DENY_WHO;
                } else if (r->tcp) {
                        const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                       MHD_HTTP_HEADER_AUTHORIZATION);
                        if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !token_ok(auth + 7, strlen(auth + 7)))
                                cs->deny = DENY_TOKEN;
                } else if (r->uid != serve_cfg.uid && r->uid != 0 && serve_cfg.uid != 0) {
                        cs->deny = DENY_UID;
                }
                if (framing_ambiguous(conn)) {
                        cs->refused = true;
                        return reply_error(r, 400, "bad_request", json_pack("{s:s}", "field", "Content-Length"),
                                           "the body's length is given twice (Content-Length with "
                                           "Transfer-Encoding, or two of either): send one") ? MHD_YES : MHD_NO;
                }
                if (cs->nul_in_url) {
                        cs->refused = true;
                        return reply_error(r, 400, "bad_request", json_pack("{s:s}", "field", "url"),
                                           "the URL holds %%00: no name or path has a NUL byte in it")
                                       ? MHD_YES : MHD_NO;
                }
                const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl && strtoull(cl, NULL, 10) > serve_cfg.max_body) {
                        cs->refused = true;
                        return reply_error(r, 413, "payload_too_large",
                                           json_pack("{s:s, s:I}", "limit", "max_body", "value",
                                                     (json_int_t)serve_cfg.max_body),
                                           "the body (%s bytes) is larger than brig serve --max-body (%llu bytes)",
                                           cl, (unsigned long long)serve_cfg.max_body) ? MHD_YES : MHD_NO;
                }
                return MHD_YES;
        }
        struct req *r = &cs->r;
        if (*upload_data_size) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (cs->refused || cs->too_large || cs->deny)
                        return MHD_YES;
                if (r->body_len + n > serve_cfg.max_body) {
                        /* chunked, without a length to refuse it by: stop here */
                        cs->too_large = true;
                        free(r->body);
                        r->body = NULL;
                        r->body_len = 0;
                        return MHD_NO;
                }
                char *b = realloc(r->body, r->body_len + n + 1);
                if (!b)
                        return MHD_NO;
                memcpy(b + r->body_len, upload_data, n);
                r->body = b;
                r->body_len += n;
                r->body[r->body_len] = '\0';
                return MHD_YES;
        }
        if (cs->refused || r->answered)
                return MHD_YES;
        if (cs->deny)
                return reply_denied(r, cs->deny) ? MHD_YES : MHD_NO;
        /* the path without its query (MHD has split it off already) */
        int route = route_match(method, url, &r->p);
        if (route == ROUTE_NOT_FOUND)
                return reply_error(r, 404, "not_found", NULL, "no route %s %s (docs/api/openapi.json)", method, url)
                               ? MHD_YES : MHD_NO;
        if (route == ROUTE_BAD_METHOD)
                return reply_error(r, 405, "method_not_allowed", NULL, "%s is not a method of %s", method, url)
                               ? MHD_YES : MHD_NO;
        if (route == ROUTE_BAD_NAME)
                return reply_error(r, 400, "bad_request", json_pack("{s:s}", "field", r->p.bad),
                                   "the %s in %s is not valid: letters, digits, _ . - (up to 64, not starting with "
                                   "_ . -)", r->p.bad, url) ? MHD_YES : MHD_NO;
        r->route = (enum route)route;
        int ret = handle_request(r);
        if (!r->answered)
                ret = reply_error(r, 500, "internal", NULL, "no answer was made");
        return ret == MHD_YES ? MHD_YES : MHD_NO;
}

/* The URL as it came, before libmicrohttpd decodes it: a %00 would
 * become a NUL that ends the C string, so "NAME%00x" would reach the
 * routes as NAME and "path=keep%00.bak" as keep — another sandbox or
 * file than the one asked for. What this returns is the request's
 * state (libmicrohttpd's con_cls), freed by on_completed. */
static void *on_url(void *cls, const char *url, struct MHD_Connection *conn)
{
        (void)cls, (void)conn;
        struct conn_state *cs = calloc(1, sizeof *cs);
        if (cs) {
                cs->nul_in_url = strstr(url, "%00") != NULL;
                serve_inflight++;
        }
        return cs;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
        struct conn_state *cs = *con_cls;
        if (!cs)
                return;
        free(cs->r.body);
        free(cs);
        *con_cls = NULL;
        serve_inflight--;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        fputs("brig serve: http: ", stderr);
        vfprintf(stderr, fmt, ap);
}

struct MHD_Daemon *http_start(int listen_fd, bool ipv6)
{
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_USE_POLL;
        if (ipv6)
                flags |= MHD_USE_IPv6;
        return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
                                MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_LISTEN_SOCKET, listen_fd,
                                MHD_OPTION_URI_LOG_CALLBACK, on_url, NULL,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                /* a client that sends nothing for this long is dropped (slowloris) */
                                MHD_OPTION_CONNECTION_TIMEOUT, serve_cfg.client_timeout_s,
                                MHD_OPTION_CONNECTION_LIMIT, 512u,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                MHD_OPTION_END);
}
