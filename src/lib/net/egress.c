/* egress.c — TEMPORARY placeholder while the proxy is written (issue 5):
 * refuses every rule, so nothing pretends to be reachable. */
#define _GNU_SOURCE
#include "net/egress.h"

int egress_policy_allow_host(struct egress_policy **ep, const char *pattern, brig_error **err)
{
        (void)ep;
        return brig_err(err, ENOSYS, "--allow-host '%s': network egress is not implemented yet", pattern);
}

int egress_policy_deny_host(struct egress_policy **ep, const char *pattern, brig_error **err)
{
        (void)ep;
        return brig_err(err, ENOSYS, "--deny-host '%s': network egress is not implemented yet", pattern);
}

int egress_policy_allow_cidr(struct egress_policy **ep, const char *cidr_port, brig_error **err)
{
        (void)ep;
        return brig_err(err, ENOSYS, "--allow-cidr '%s': network egress is not implemented yet", cidr_port);
}

int egress_policy_add_resolve(struct egress_policy **ep, const char *host_addr, brig_error **err)
{
        (void)ep;
        return brig_err(err, ENOSYS, "--resolve '%s': network egress is not implemented yet", host_addr);
}

bool egress_policy_has_allows(const struct egress_policy *ep)
{
        (void)ep;
        return false;
}

json_t *egress_policy_json(const struct egress_policy *ep)
{
        (void)ep;
        return json_object();
}

void egress_policy_free(struct egress_policy *ep)
{
        (void)ep;
}

int egress_make_listeners(int fds[], enum egress_listener_kind kinds[], size_t max, brig_error **err)
{
        (void)fds;
        (void)kinds;
        (void)max;
        return brig_err(err, ENOSYS, "network egress is not implemented yet");
}

struct egress *egress_new(const struct egress_policy *ep, egress_log_fn log, void *log_ctx, brig_error **err)
{
        (void)ep;
        (void)log;
        (void)log_ctx;
        brig_err(err, ENOSYS, "network egress is not implemented yet");
        return NULL;
}

int egress_add_listener(struct egress *e, int fd, enum egress_listener_kind kind, brig_error **err)
{
        (void)e;
        (void)fd;
        (void)kind;
        return brig_err(err, ENOSYS, "network egress is not implemented yet");
}

int egress_poll_fd(const struct egress *e)
{
        (void)e;
        return -1;
}

void egress_dispatch(struct egress *e)
{
        (void)e;
}

json_t *egress_summary_json(const struct egress *e)
{
        (void)e;
        return json_object();
}

void egress_free(struct egress *e)
{
        (void)e;
}
