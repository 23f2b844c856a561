/* netrules.c — the egress rules and the cgroup limits of a running
 * sandbox, read and changed live over its control socket (docs/api.md,
 * network rules, live limits): the supervisor changes the rules its proxy
 * and DNS stub judge by, or its cgroup's limits, and its audit stream
 * records each change (control.c). */
#define _GNU_SOURCE
#include "persist/control.h"
#include "persist/sandbox.h"

#include <string.h>

/* One request on a new connection; the answer's payload to *payload. */
static int ask(brig_sandbox *sb, const char *what, struct ctl_hdr *h, char **payload, brig_error **err)
{
        const char *name = brig_sandbox_name(sb);
        if (!name)
                return brig_err(err, EBADF, "%s: not a live sandbox handle", what);
        _cleanup_close_ int fd = sandbox_connect(name, err);
        if (fd < 0)
                return fd;
        int r = ctl_send(fd, h, NULL, 0, NULL, 0);
        if (r < 0)
                return brig_err(err, -r, "%s: talk to sandbox '%s'", what, name);
        _cleanup_free_ char *buf = malloc(CTL_MAX_MSG);
        if (!buf)
                return brig_err(err, ENOMEM, "%s", what);
        int fds[CTL_MAX_FDS], nfds = 0;
        ssize_t n = ctl_recv(fd, buf, CTL_MAX_MSG, fds, &nfds);
        for (int i = 0; i < nfds; i++)
                close(fds[i]);
        if (n < (ssize_t)sizeof *h)
                return brig_err(err, n < 0 ? (int)-n : EPIPE, "%s: no answer from sandbox '%s'", what, name);
        memcpy(h, buf, sizeof *h);
        if (h->type == CTL_ERROR)
                return ctl_error(h, NULL, err);
        if (h->type != CTL_OK)
                return brig_err(err, EBADMSG, "%s: sandbox '%s' answered %u", what, name, h->type);
        if (payload) {
                size_t len = (size_t)n - sizeof *h;
                if (!len || buf[sizeof *h + len - 1] != '\0')
                        return brig_err(err, EBADMSG, "%s: sandbox '%s' sent no rules", what, name);
                *payload = strdup(buf + sizeof *h);
                if (!*payload)
                        return brig_err(err, ENOMEM, "%s", what);
        }
        return 0;
}

int brig_sandbox_net_rule(brig_sandbox *sb, unsigned rule, const char *pattern, unsigned flags, brig_error **err)
{
        if (rule != BRIG_NET_RULE_ALLOW_HOST && rule != BRIG_NET_RULE_DENY_HOST)
                return brig_err(err, EINVAL, "brig_sandbox_net_rule: rule %u: BRIG_NET_RULE_ALLOW_HOST or _DENY_HOST",
                                rule);
        if (flags & ~(unsigned)BRIG_NET_RULE_REMOVE)
                return brig_err(err, EINVAL, "brig_sandbox_net_rule: unknown flags 0x%x", flags);
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_NET_RULE };
        if (!pattern || !*pattern || strlen(pattern) >= sizeof h.text)
                return brig_err(err, EINVAL, "brig_sandbox_net_rule: a host pattern of 1 to %zu bytes",
                                sizeof h.text - 1);
        h.arg = (rule == BRIG_NET_RULE_DENY_HOST ? CTL_NET_DENY : CTL_NET_ALLOW) |
                (flags & BRIG_NET_RULE_REMOVE ? CTL_NET_REMOVE : 0);
        snprintf(h.text, sizeof h.text, "%s", pattern);
        return ask(sb, "network rule", &h, NULL, err);
}

int brig_sandbox_set_limit(brig_sandbox *sb, enum brig_limit which, uint64_t value, brig_error **err)
{
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_SET_LIMIT, .arg = (int32_t)which };
        if (which != BRIG_LIMIT_MEMORY && which != BRIG_LIMIT_PIDS && which != BRIG_LIMIT_CPUS_MILLI)
                return brig_err(err, EINVAL, "brig_sandbox_set_limit: limit %d: BRIG_LIMIT_MEMORY, _PIDS or "
                                "_CPUS_MILLI", (int)which);
        snprintf(h.text, sizeof h.text, "%llu", (unsigned long long)value);
        return ask(sb, "set limit", &h, NULL, err);
}

char *brig_sandbox_net_json(brig_sandbox *sb, brig_error **err)
{
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = CTL_NET_RULES };
        char *text = NULL;
        return ask(sb, "network rules", &h, &text, err) < 0 ? NULL : text;
}
