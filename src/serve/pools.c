/* pools.c — the server's warm pools (`brig pool --name NAME`, started as
 * the server's user with the same state): listed, and the one run of a
 * ready member, which is then an exec of the member's like any other
 * (exec.c). A pool is the server's user's, as the sandboxes its daemon
 * makes are (owner_of): other callers of a server that serves several
 * users see none, and their run in one answers as a pool that does not
 * exist — its policy was never checked against what they may name. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <string.h>

static bool pools_visible(const struct req *r)
{
        return r->uid == 0 || r->uid == serve_cfg.uid;
}

static int list_pools(struct req *r)
{
        if (!pools_visible(r))
                return reply_json(r, 200, json_pack("{s:[]}", "pools"));
        brig_error *e = NULL;
        char *text = brig_pool_list_json(&e);
        json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        if (!json_is_array(doc)) {
                json_decref(doc);
                return reply_brig(r, e && e->errnum ? -e->errnum : -EIO, e, "pools");
        }
        brig_error_free(&e);
        return reply_json(r, 200, json_pack("{s:o}", "pools", doc));
}

int handle_pools(struct req *r)
{
        if (r->route == R_POOLS_LIST)
                return list_pools(r);
        if (!pools_visible(r))
                return reply_error(r, 404, "not_found", json_pack("{s:s}", "pool", r->p.name),
                                   "exec: no pool named '%s' runs", r->p.name);
        return handle_pool_exec(r);
}
