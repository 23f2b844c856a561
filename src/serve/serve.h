/* serve.h — brig serve: the HTTP API (docs/serve.md, docs/api/openapi.json),
 * a thin layer over libbrig's handle API (include/brig.h, docs/api.md). */
#ifndef BRIG_SERVE_H
#define BRIG_SERVE_H

#include "brig.h"

#include <jansson.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

struct MHD_Connection;

static inline void serve_freep(void *p) { free(*(void **)p); }
static inline void serve_closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
static inline void serve_json_decrefp(json_t **j) { json_decref(*j); }
#define _serve_free_ __attribute__((cleanup(serve_freep)))
#define _serve_close_ __attribute__((cleanup(serve_closep)))
#define _serve_json_ __attribute__((cleanup(serve_json_decrefp)))

/* ---- route.c: which route a method and path name (pure; fuzzed) ---------- */

enum route {
        R_HEALTH, R_VERSION, R_DOCTOR,
        R_SANDBOXES_LIST, R_SANDBOX_CREATE, R_SANDBOX_GET, R_SANDBOX_DELETE,
        R_SANDBOX_STOP, R_SANDBOX_START, R_SANDBOX_PAUSE, R_SANDBOX_RESUME,
        R_EXECS_LIST, R_EXEC_START, R_EXEC_GET, R_EXEC_DELETE, R_EXEC_OUTPUT, R_EXEC_STDIN, R_EXEC_RESIZE,
        R_EXEC_SIGNAL, R_EXEC_WAIT,
        R_FILE_READ, R_FILE_WRITE, R_FILE_REMOVE, R_FILE_LIST, R_FILE_STAT, R_FILE_MKDIR, R_TAR_OUT, R_TAR_IN,
        R_DIFF, R_COMMIT, R_RESET,
        R_SNAPSHOTS_LIST, R_SNAPSHOT_CREATE, R_SNAPSHOT_DELETE, R_SNAPSHOT_RESTORE, R_SNAPSHOT_FORK,
        R_EVENTS, R_NETWORK_GET, R_NETWORK_ADD, R_NETWORK_REMOVE,
        R_POOLS_LIST, R_POOL_EXEC,
        R_COUNT,
};

enum { ROUTE_NOT_FOUND = -1, ROUTE_BAD_METHOD = -2, ROUTE_BAD_NAME = -3 };

struct route_params {
        char name[72];          /* {name}: a sandbox name as state_name_valid takes it */
        char exec_id[24];       /* {exec_id}: x<digits> */
        char tag[72];           /* {tag} */
        const char *bad;        /* ROUTE_BAD_NAME: which parameter */
};

/* The route of METHOD PATH (PATH without the query), its parameters
 * checked; ROUTE_NOT_FOUND, ROUTE_BAD_METHOD (the path exists), or
 * ROUTE_BAD_NAME (p->bad says which parameter is malformed). */
int route_match(const char *method, const char *path, struct route_params *p);
/* "GET" ... of a route, and its OpenAPI template ("/v1/sandboxes/{name}"). */
const char *route_method(enum route r);
const char *route_template(enum route r);
bool serve_name_valid(const char *s);
bool serve_tag_valid(const char *s);

/* ---- body.c: JSON bodies, base64, UTF-8 (pure; fuzzed) ------------------- */

enum field_type { F_STRING, F_BOOL, F_INT, F_OBJECT, F_ARRAY_STRINGS, F_OBJECT_STRINGS, F_ANY };
struct field {
        const char *name;
        enum field_type type;
        bool required;
};
/* Parse a JSON object body and hold it to FIELDS: NULL with *code
 * ("invalid_json", "unknown_field", "bad_field"), *field (the field, or
 * NULL) and msg filled when it is not one. An empty body is {} when
 * allow_empty. */
json_t *body_parse(const char *body, size_t len, bool allow_empty, const struct field *fields, const char **code,
                   const char **field, char *msg, size_t msg_size);
char *b64_encode(const void *data, size_t len);
/* -1 for bad base64; else the length written to *out (malloc'ed). */
ssize_t b64_decode(const char *text, size_t len, char **out);
/* A JSON string of the bytes with invalid UTF-8 replaced by U+FFFD. */
json_t *json_text_of_bytes(const char *data, size_t len);
/* "TERM", "SIGTERM", "15": the signal number, or -1. */
int signal_parse(json_t *v);
/* "0644", "755": permission bits, or -1. */
int mode_parse(const char *s);

/* ---- main.c: the server's configuration -------------------------------- */

struct serve_config {
        char *socket_path;
        char *state_dir;        /* --state, or NULL: the default */
        mode_t socket_mode;
        char *listen;
        char *token_file;
        char token[512];
        size_t token_len;
        char **policy_files;
        size_t n_policy_files;
        unsigned max_sandboxes, max_execs;
        uint64_t max_body, max_output, idle_timeout_ms;
        unsigned client_timeout_s;
        bool remove_on_exit;
        char dir[PATH_MAX];     /* the server's own: owners/, workspaces/ */
        uid_t uid;              /* the server's user */
};
extern struct serve_config serve_cfg;
extern atomic_bool serve_draining;

/* ---- http.c: one request as the handlers see it ------------------------ */

struct req {
        struct MHD_Connection *conn;
        const char *method, *url;
        int conn_fd;
        uid_t uid;              /* the caller (SO_PEERCRED; TCP: the server's user) */
        gid_t gid;
        pid_t pid;
        bool tcp;
        char *body;
        size_t body_len;
        struct route_params p;
        enum route route;
        bool answered;
};

/* Fill *e (when empty) with a message of the server's own; -errnum. */
int serve_err(brig_error **e, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int reply_json(struct req *r, unsigned status, json_t *doc);  /* takes doc */
int reply_error(struct req *r, unsigned status, const char *code, json_t *details, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
/* A libbrig failure: the status its errno means, its message. */
int reply_brig(struct req *r, int rc, brig_error *e, const char *what);
int reply_bytes(struct req *r, unsigned status, const char *ctype, char *data, size_t len);  /* takes data */
/* A streamed (chunked) response: fill(cls, buf, max) returns bytes, 0 at
 * the end, -1 to drop the connection; done(cls) frees. */
typedef ssize_t (*stream_fill_fn)(void *cls, char *buf, size_t max);
int reply_stream(struct req *r, const char *ctype, stream_fill_fn fill, void (*done)(void *cls), void *cls);
const char *req_query(struct req *r, const char *key);
/* Every value of a repeated query key, NULL-terminated (free the array). */
const char **req_query_all(struct req *r, const char *key);
/* The body as a JSON object held to FIELDS; NULL when answered with 4xx. */
json_t *req_json(struct req *r, bool allow_empty, const struct field *fields);
/* Has the client gone (its connection hung up)? */
bool req_client_gone(struct req *r);
/* The same for a connection's descriptor (a stream's, after its request). */
bool conn_hung_up(int fd);

/* ---- owners.c: who owns which sandbox; what a caller's policy may name -- */

/* uid of NAME's owner: its record, else the server's user. */
uid_t owner_of(const char *name);
int owner_record(const char *name, uid_t uid, bool workspace_ours, const char *policy_json, brig_error **err);
void owner_forget(const char *name);
/* The record's "workspace_ours" and "policy" (json_decref). */
json_t *owner_read(const char *name);
int owner_update(const char *name, json_t *record);
/* May this caller see NAME? (exists and is theirs, or they are root) */
bool owner_visible(const struct req *r, const char *name);
/* NAME's sandboxes a server created for UID (--max-sandboxes) */
unsigned owner_count(uid_t uid);
/* A caller who is not the server's user (nor root): refuse in the policy
 * they sent what would reach beyond their own rights (docs/serve.md):
 * 0, or -EACCES with *field and msg saying what. */
int owner_check_policy(const struct req *r, json_t *policy, const char *workspace, bool workspace_readonly,
                       const char **field, char *msg, size_t msg_size);
/* The same for what NAME's creator sent (its record's "checked"), before a
 * call that starts NAME again from its policy and so reads its host paths
 * again as the server's user: a path swapped since the create is refused. */
int owner_recheck(const struct req *r, const char *name, const char **field, char *msg, size_t msg_size);
/* The server's own empty workspace for NAME (made, 0700), or NULL. */
char *owner_workspace_make(const char *name, brig_error **err);
void owner_workspace_remove(const char *name);

/* ---- sandboxes.c, files.c, exec.c: the handlers ------------------------- */

int handle_request(struct req *r);
int handle_sandboxes(struct req *r);
int handle_files(struct req *r);
int handle_exec(struct req *r);
/* exec.c: POST /v1/pools/{name}/execs, once pools.c has let the caller in */
int handle_pool_exec(struct req *r);
int handle_pools(struct req *r);
int handle_events(struct req *r);
int handle_network(struct req *r);
/* The caller's sandbox from the route, or false (answered 404). */
bool sandbox_visible(struct req *r);
/* A handle on the route's sandbox, or a negative errno answered 409
 * not_running (it is visible but not running). */
int sandbox_open_running(struct req *r, brig_sandbox **sb);
/* The sandbox was touched now (for --idle-timeout). */
void sandbox_touch(const char *name);
/* The execs of NAME end (the sandbox is removed, stopped or restored). */
void exec_close_sandbox(const char *name);
unsigned exec_running(const char *name);  /* NULL: all */
void exec_close_all(void);
/* created by this server (--remove-on-exit) */
void serve_created_add(const char *name);
void serve_created_remove_all(void);
void idle_sweep(void);

#endif
