/* network.c — a sandbox's egress rules: what its supervisor judges by now
 * (brig_sandbox_net_json), and allow/deny host rules added and removed
 * live (brig_sandbox_net_rule; each one an audit event there). */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <string.h>

static const struct field rule_fields[] = {
        { "action", F_STRING, true }, { "host", F_STRING, true }, { NULL, 0, false },
};

static int reply_rules(struct req *r, brig_sandbox *sb)
{
        brig_error *e = NULL;
        char *text = brig_sandbox_net_json(sb, &e);
        brig_sandbox_close(sb, NULL);
        json_t *doc = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        if (!doc)
                return reply_brig(r, e && e->errnum ? -e->errnum : -EIO, e, "network rules");
        return reply_json(r, 200, doc);
}

int handle_network(struct req *r)
{
        if (!sandbox_visible(r))
                return MHD_YES;
        _serve_json_ json_t *body = NULL;
        if (r->route != R_NETWORK_GET && !(body = req_json(r, false, rule_fields)))
                return MHD_YES;
        const char *action = json_string_value(json_object_get(body, "action"));
        if (body && strcmp(action, "allow") != 0 && strcmp(action, "deny") != 0)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "action"),
                                   "action '%.20s': allow or deny", action);
        brig_sandbox *sb = NULL;
        brig_error *e = NULL;
        if (sandbox_open_running(r, &sb) < 0)
                return MHD_YES;
        if (body) {
                int rc = brig_sandbox_net_rule(sb, strcmp(action, "deny") == 0 ? BRIG_NET_RULE_DENY_HOST
                                                                            : BRIG_NET_RULE_ALLOW_HOST,
                                           json_string_value(json_object_get(body, "host")),
                                           r->route == R_NETWORK_REMOVE ? BRIG_NET_RULE_REMOVE : 0, &e);
                if (rc < 0) {
                        brig_sandbox_close(sb, NULL);
                        if (rc == -EOPNOTSUPP) {
                                int ret = reply_error(r, 409, "conflict", NULL, "%s", e && e->msg ? e->msg : "");
                                brig_error_free(&e);
                                return ret;
                        }
                        if (rc == -EINVAL) {
                                int ret = reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "host"), "%s",
                                                      e && e->msg ? e->msg : "");
                                brig_error_free(&e);
                                return ret;
                        }
                        return reply_brig(r, rc, e, "network rule");
                }
        }
        return reply_rules(r, sb);
}
