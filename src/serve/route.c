/* route.c — which route of docs/api/openapi.json a request names. Pure
 * (no I/O): tests/fuzz/fuzz_serve.c feeds it arbitrary methods and paths.
 * Every parameter is checked here, before any handler sees it: a sandbox
 * name as the state directory takes it (no '/', no "..", no leading '.'),
 * an exec id x<digits>, a snapshot tag. */
#define _GNU_SOURCE
#include "serve.h"

#include <string.h>

static const struct {
        const char *method, *tmpl;
} routes[R_COUNT] = {
        [R_HEALTH] = { "GET", "/v1/health" },
        [R_VERSION] = { "GET", "/v1/version" },
        [R_DOCTOR] = { "GET", "/v1/doctor" },
        [R_SANDBOXES_LIST] = { "GET", "/v1/sandboxes" },
        [R_SANDBOX_CREATE] = { "POST", "/v1/sandboxes" },
        [R_SANDBOX_GET] = { "GET", "/v1/sandboxes/{name}" },
        [R_SANDBOX_DELETE] = { "DELETE", "/v1/sandboxes/{name}" },
        [R_SANDBOX_STOP] = { "POST", "/v1/sandboxes/{name}/stop" },
        [R_SANDBOX_START] = { "POST", "/v1/sandboxes/{name}/start" },
        [R_SANDBOX_PAUSE] = { "POST", "/v1/sandboxes/{name}/pause" },
        [R_SANDBOX_RESUME] = { "POST", "/v1/sandboxes/{name}/resume" },
        [R_EXECS_LIST] = { "GET", "/v1/sandboxes/{name}/execs" },
        [R_EXEC_START] = { "POST", "/v1/sandboxes/{name}/execs" },
        [R_EXEC_GET] = { "GET", "/v1/sandboxes/{name}/execs/{exec_id}" },
        [R_EXEC_DELETE] = { "DELETE", "/v1/sandboxes/{name}/execs/{exec_id}" },
        [R_EXEC_OUTPUT] = { "GET", "/v1/sandboxes/{name}/execs/{exec_id}/output" },
        [R_EXEC_STDIN] = { "POST", "/v1/sandboxes/{name}/execs/{exec_id}/stdin" },
        [R_EXEC_RESIZE] = { "POST", "/v1/sandboxes/{name}/execs/{exec_id}/resize" },
        [R_EXEC_SIGNAL] = { "POST", "/v1/sandboxes/{name}/execs/{exec_id}/signal" },
        [R_EXEC_WAIT] = { "POST", "/v1/sandboxes/{name}/execs/{exec_id}/wait" },
        [R_FILE_READ] = { "GET", "/v1/sandboxes/{name}/files" },
        [R_FILE_WRITE] = { "PUT", "/v1/sandboxes/{name}/files" },
        [R_FILE_REMOVE] = { "DELETE", "/v1/sandboxes/{name}/files" },
        [R_FILE_LIST] = { "GET", "/v1/sandboxes/{name}/files/list" },
        [R_FILE_STAT] = { "GET", "/v1/sandboxes/{name}/files/stat" },
        [R_FILE_MKDIR] = { "POST", "/v1/sandboxes/{name}/files/mkdir" },
        [R_TAR_OUT] = { "GET", "/v1/sandboxes/{name}/files/tar" },
        [R_TAR_IN] = { "PUT", "/v1/sandboxes/{name}/files/tar" },
        [R_DIFF] = { "GET", "/v1/sandboxes/{name}/diff" },
        [R_COMMIT] = { "POST", "/v1/sandboxes/{name}/commit" },
        [R_RESET] = { "POST", "/v1/sandboxes/{name}/reset" },
        [R_SNAPSHOTS_LIST] = { "GET", "/v1/sandboxes/{name}/snapshots" },
        [R_SNAPSHOT_CREATE] = { "POST", "/v1/sandboxes/{name}/snapshots" },
        [R_SNAPSHOT_DELETE] = { "DELETE", "/v1/sandboxes/{name}/snapshots/{tag}" },
        [R_SNAPSHOT_RESTORE] = { "POST", "/v1/sandboxes/{name}/snapshots/{tag}/restore" },
        [R_SNAPSHOT_FORK] = { "POST", "/v1/sandboxes/{name}/snapshots/{tag}/fork" },
        [R_EVENTS] = { "GET", "/v1/sandboxes/{name}/events" },
        [R_NETWORK_GET] = { "GET", "/v1/sandboxes/{name}/network" },
        [R_NETWORK_ADD] = { "POST", "/v1/sandboxes/{name}/network/rules" },
        [R_NETWORK_REMOVE] = { "DELETE", "/v1/sandboxes/{name}/network/rules" },
        [R_POOLS_LIST] = { "GET", "/v1/pools" },
        [R_POOL_EXEC] = { "POST", "/v1/pools/{name}/execs" },
};

const char *route_method(enum route r) { return r < R_COUNT ? routes[r].method : NULL; }
const char *route_template(enum route r) { return r < R_COUNT ? routes[r].tmpl : NULL; }

static bool alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The state directory's rule (docs/persistent.md): [A-Za-z0-9][A-Za-z0-9_.-]{0,63}. */
bool serve_name_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || !alnum(s[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

/* Snapshot tags: letters, digits, _ . - (brig_sandbox_snapshot), not "." or "..". */
bool serve_tag_valid(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
                        return false;
        return true;
}

static bool exec_id_valid(const char *s)
{
        size_t n = strlen(s);
        if (n < 2 || n > 20 || s[0] != 'x')
                return false;
        for (size_t i = 1; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

/* Does PATH fit TMPL? Parameters copied into p (bounded), their syntax
 * left to the caller. */
static bool fits(const char *tmpl, const char *path, struct route_params *p, const char **bad)
{
        *bad = NULL;
        while (*tmpl && *path) {
                if (*tmpl == '{') {
                        const char *close = strchr(tmpl, '}');
                        size_t plen = strcspn(path, "/");
                        char *dst = NULL;
                        size_t cap = 0;
                        if (strncmp(tmpl, "{name}", 6) == 0)
                                dst = p->name, cap = sizeof p->name;
                        else if (strncmp(tmpl, "{exec_id}", 9) == 0)
                                dst = p->exec_id, cap = sizeof p->exec_id;
                        else
                                dst = p->tag, cap = sizeof p->tag;
                        if (plen == 0)
                                return false;
                        if (plen >= cap) {
                                /* too long to be valid: still this route */
                                *bad = tmpl[1] == 'n' ? "name" : tmpl[1] == 'e' ? "exec_id" : "tag";
                                dst[0] = '\0';
                        } else {
                                memcpy(dst, path, plen);
                                dst[plen] = '\0';
                        }
                        tmpl = close + 1;
                        path += plen;
                        continue;
                }
                if (*tmpl != *path)
                        return false;
                tmpl++, path++;
        }
        /* a trailing slash is the same route */
        if (*path == '/' && path[1] == '\0')
                path++;
        return *tmpl == '\0' && *path == '\0';
}

int route_match(const char *method, const char *path, struct route_params *p)
{
        memset(p, 0, sizeof *p);
        if (!method || !path || strncmp(path, "/v1/", 4) != 0)
                return ROUTE_NOT_FOUND;
        bool path_known = false;
        for (int r = 0; r < R_COUNT; r++) {
                struct route_params q = { 0 };
                const char *bad = NULL;
                if (!fits(routes[r].tmpl, path, &q, &bad))
                        continue;
                path_known = true;
                if (strcmp(routes[r].method, method) != 0)
                        continue;
                *p = q;
                if (!bad && strstr(routes[r].tmpl, "{name}") && !serve_name_valid(p->name))
                        bad = "name";
                if (!bad && strstr(routes[r].tmpl, "{exec_id}") && !exec_id_valid(p->exec_id))
                        bad = "exec_id";
                if (!bad && strstr(routes[r].tmpl, "{tag}") && !serve_tag_valid(p->tag))
                        bad = "tag";
                if (bad) {
                        p->bad = bad;
                        return ROUTE_BAD_NAME;
                }
                return r;
        }
        return path_known ? ROUTE_BAD_METHOD : ROUTE_NOT_FOUND;
}
