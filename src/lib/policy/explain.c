/* explain.c — `brig policy explain`: what a run with this policy can and
 * cannot do, in plain words, from the same plan a run would use. */
#define _GNU_SOURCE
#include "core/model.h"
#include "policy/settings.h"
#include "tools/tools.h"
#include "net/intercept.h"
#include "controls/seccomp_filter.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void human_size(FILE *out, uint64_t bytes)
{
        char text[32];
        size_text(text, sizeof text, bytes);
        fputs(text, out);
}

static void files(FILE *out, const struct run_plan *plan)
{
        fprintf(out, "Files\n  readable, not writable:\n");
        for (size_t i = 0; i < plan->n_mounts; i++)
                if (plan->mounts[i].kind == MOUNT_BIND && plan->mounts[i].readonly)
                        fprintf(out, "    %s%s%s\n", plan->mounts[i].dst,
                                strcmp(plan->mounts[i].src, plan->mounts[i].dst) ? "  (from the host's " : "",
                                strcmp(plan->mounts[i].src, plan->mounts[i].dst) ? plan->mounts[i].src : "");
        fprintf(out, "  writable:\n");
        for (size_t i = 0; i < plan->n_mounts; i++) {
                const struct mount_entry *m = &plan->mounts[i];
                if (m->kind == MOUNT_BIND && !m->readonly) {
                        fprintf(out, "    %s  (the host's %s: changes stay)\n", m->dst, m->src);
                } else if (m->kind == MOUNT_TMPFS && strcmp(m->dst, BRIG_RUNTIME_DIR) != 0) {
                        fprintf(out, "    %s  (empty, in memory, at most ", m->dst);
                        human_size(out, m->size);
                        fprintf(out, "; gone after the run)\n");
                }
        }
        fprintf(out, "  hidden (secrets inside granted directories; they look empty):\n");
        if (plan->masks.n == 0)
                fprintf(out, "    (none inside the grants)\n");
        for (size_t i = 0; i < plan->masks.n; i++)
                fprintf(out, "    %s\n", plan->masks.items[i]);
        fprintf(out, "  everything else on the host is absent, including your real home (%s is empty)\n",
                plan->home);
        const struct tools_plan *t = plan->tools;
        if (!t || (!t->n_files && !t->agent_upstream))
                return;
        fprintf(out, "  handed in at start (docs/tools.md):\n");
        for (size_t i = 0; i < t->n_files; i++)
                fprintf(out, "    %s  (%s: %s)\n", t->files[i].path, t->files[i].origin,
                        t->files[i].copied ? "a read-only copy of a host file, the sandbox user's, never in a snapshot"
                                           : "generated, without credentials");
        if (t->agent_upstream)
                fprintf(out, "    %s  (--ssh-agent: the host's agent %s, for listing keys and signing only; "
                        "every key it holds can sign)\n", BRIG_AGENT_SOCKET, t->agent_upstream);
}

static void join(FILE *out, char *const *v, size_t n, const char *none)
{
        for (size_t i = 0; i < n; i++)
                fprintf(out, "%s%s", i ? ", " : "", v[i]);
        if (!n)
                fprintf(out, "%s", none);
}

/* Secrets and http rules, in words (docs/secrets.md). */
static void intercepted(FILE *out, const struct intercept_policy *ip)
{
        if (!ip || (!ip->n_secrets && !ip->n_rules))
                return;
        for (size_t i = 0; i < ip->n_secrets; i++) {
                const struct secret_spec *s = &ip->secrets[i];
                fprintf(out, "  secret %s (read from %s when the run starts): $%s inside holds only a placeholder;\n"
                             "    the proxy puts the value in the %s header of requests to ", s->name, s->source,
                        s->name, s->header);
                join(out, s->hosts, s->n_hosts, "(no host)");
                fprintf(out, ",\n    only over TLS whose certificate it verified for that name; the placeholder\n"
                             "    anywhere else (another host, the URL, a body, a DNS name, plain http) is\n"
                             "    refused and audited as exfiltration\n");
        }
        for (size_t i = 0; i < ip->n_rules; i++) {
                const struct http_rule *r = &ip->rules[i];
                fprintf(out, "  http rule for %s: only ", r->host);
                join(out, r->methods, r->n_methods, "any method");
                fprintf(out, " to ");
                join(out, r->paths, r->n_paths, "any path");
                fprintf(out, " (paths with dot or empty segments, ';' or encoded separators refused)\n");
        }
        fprintf(out, "  TLS to these hosts is opened by brig (a CA made for this sandbox, trusted inside;\n"
                     "  upstreams verified against the host's store%s); every other connection stays\n"
                     "  end-to-end\n", ip->n_upstream_cas ? " and --upstream-ca" : "");
}

static void network(FILE *out, const struct run_plan *plan)
{
        fprintf(out, "Network\n");
        switch (plan->net_mode) {
        case BRIG_NET_NONE:
                fprintf(out, "  none: only the sandbox's own loopback; nothing outside is reachable\n");
                break;
        case BRIG_NET_HOST:
                fprintf(out, "  HOST: the host's network, with no control at all (WARNING)\n");
                break;
        case BRIG_NET_PROXY:
        case BRIG_NET_FILTERED: {
                if (plan->net_mode == BRIG_NET_FILTERED)
                        fprintf(out, "  filtered: every outbound TCP connection and DNS query is sent to brig by the\n"
                                     "  kernel (nftables in the sandbox's own network namespace) and judged by name;\n"
                                     "  UDP other than DNS, ICMP and raw sockets are refused; proxy mode if the host\n"
                                     "  can't do this%s\n",
                                plan->net_filtered_required ? " (here: refuse to run instead)" : "");
                fprintf(out, "  only through brig's logging proxy (HTTP_PROXY, ALL_PROXY are set inside);\n"
                             "  loopback, private, link-local and metadata addresses stay closed unless allowed\n");
                /* the egress rules, each setting of the table that the proxy judges by */
                for (size_t i = 0; i < n_settings; i++) {
                        if (settings[i].dump != dump_egress || settings[i].load == load_secrets ||
                            settings[i].load == load_http_rules || !strcmp(settings[i].key, "/network/upstream_ca"))
                                continue;  /* secrets and http rules: in words below */
                        json_t *v = setting_dump(plan->policy, &settings[i]);
                        char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
                        if (v)
                                fprintf(out, "  %s: %s\n", strrchr(settings[i].key, '/') + 1, text ? text : "?");
                        free(text);
                        json_decref(v);
                }
                intercepted(out, egress_policy_intercept_of(plan->policy->egress));
                break;
        }
        }
        fprintf(out, "  unix sockets: the sandbox's own work; a socket file in a grant whose listener is\n"
                     "  outside the sandbox (a host database, docker.sock) is refused%s\n",
                plan->policy->allow_unix.n ? ", except:" : " (--allow-unix PATH)");
        for (size_t i = 0; i < plan->policy->allow_unix.n; i++)
                fprintf(out, "    %s\n", plan->policy->allow_unix.items[i]);
}

static void limits(FILE *out, const struct run_plan *plan)
{
        const struct limits *l = &plan->limits;
        fprintf(out, "Limits\n  memory: ");
        if (l->memory)
                human_size(out, l->memory), fprintf(out, ", no swap\n");
        else
                fprintf(out, "no limit\n");
        fprintf(out, "  processes: %s", l->pids ? "" : "no limit\n");
        if (l->pids)
                fprintf(out, "%llu\n", (unsigned long long)l->pids);
        if (l->cpus_millis)
                fprintf(out, "  CPU: %.2f cores\n", (double)l->cpus_millis / 1000.0);
        if (l->timeout_ms)
                fprintf(out, "  wall clock: %llu s, then SIGTERM to everything (SIGKILL %llu ms later)\n",
                        (unsigned long long)(l->timeout_ms / 1000), (unsigned long long)l->kill_after_ms);
        else
                fprintf(out, "  wall clock: no limit\n");
        fprintf(out, "  open files per process: %llu; core dumps: off\n", (unsigned long long)l->nofile);
        if (l->required)
                fprintf(out, "  cgroup limits are required: brig refuses to run without them\n");
}

static void syscalls(FILE *out, const struct run_plan *plan)
{
        fprintf(out, "System calls and privileges\n"
                     "  never root on the host; no capabilities; setuid binaries inert; no new namespaces\n"
                     "  refused: mount, ptrace, bpf, keyrings, io_uring, userfaultfd, kexec and modules,\n"
                     "  clock setters, raw sockets, terminal injection, setuid bits, 32-bit syscalls\n");
        json_t *rules = seccomp_policy_json(plan->policy->seccomp);
        size_t i;
        json_t *r;
        json_array_foreach(rules, i, r)
                fprintf(out, "  your rule: %s -> %s\n", json_string_value(json_object_get(r, "name")),
                        json_string_value(json_object_get(r, "action")));
        json_decref(rules);
}

char *brig_policy_explain(const brig_policy *p, brig_error **err)
{
        static char *const argv[] = { "sh", NULL };
        struct run_plan plan = RUN_PLAN_INIT;
        if (plan_build(&plan, p, argv, err) < 0) {
                plan_free(&plan);
                return NULL;
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out) {
                plan_free(&plan);
                brig_err(err, errno, "explain");
                return NULL;
        }
        fprintf(out, "A run in %s (the workspace, %s) runs as uid %u inside (host uid %u).\n\n", plan.workspace,
                p->workspace_readonly ? "read-only" : "read-write", plan.sandbox_uid, plan.host_uid);
        files(out, &plan);
        fputc('\n', out);
        network(out, &plan);
        fputc('\n', out);
        limits(out, &plan);
        fputc('\n', out);
        syscalls(out, &plan);
        fclose(out);
        plan_free(&plan);
        return buf;
}

/* "pypi.org, files.pythonhosted.org" from a JSON array of rules. */
static void rule_list(FILE *out, const char *label, json_t *rules)
{
        if (json_array_size(rules) == 0)
                return;
        fprintf(out, "; %s ", label);
        size_t i;
        json_t *v;
        json_array_foreach(rules, i, v) {
                char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                fprintf(out, "%s%s", i ? ", " : "", text ? text : json_is_string(v) ? json_string_value(v) : "?");
                free(text);
        }
}

char *policy_summary(const brig_policy *p, bool overlay)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out)
                return NULL;
        enum brig_net_mode net = p->net_mode_set ? p->net_mode
                                 : egress_policy_has_allows(p->egress) ? BRIG_NET_FILTERED : BRIG_NET_NONE;
        static const char *const nets[] = { [BRIG_NET_NONE] = "none (nothing outside is reachable)",
                                            [BRIG_NET_PROXY] = "proxy", [BRIG_NET_FILTERED] = "filtered",
                                            [BRIG_NET_HOST] = "HOST (the host's network, no control at all)" };
        fprintf(out, "network %s", nets[net]);
        if (net == BRIG_NET_PROXY || net == BRIG_NET_FILTERED) {
                json_t *rules = egress_policy_json(p->egress);
                rule_list(out, "allowed hosts", json_object_get(rules, "allow_hosts"));
                rule_list(out, "allowed hosts on private addresses", json_object_get(rules, "allow_private_hosts"));
                rule_list(out, "allowed addresses", json_object_get(rules, "allow_cidrs"));
                rule_list(out, "denied hosts", json_object_get(rules, "deny_hosts"));
                if (json_array_size(json_object_get(rules, "allow_hosts")) +
                    json_array_size(json_object_get(rules, "allow_private_hosts")) +
                    json_array_size(json_object_get(rules, "allow_cidrs")) == 0)
                        fprintf(out, "; nothing allowed");
                json_decref(rules);
        }
        size_t binds = 0;
        for (size_t i = 0; i < p->n_mounts; i++)
                binds += p->mounts[i].kind == MOUNT_BIND;
        fprintf(out, "\nworkspace %s %s; %zu bind%s; memory ", p->workspace ? p->workspace : "(current directory)",
                overlay ? "as an overlay (changes kept apart until brig commit)"
                : p->workspace_readonly ? "read-only" : "read-write",
                binds, binds == 1 ? "" : "s");
        if (p->limits.memory)
                human_size(out, p->limits.memory);
        else
                fprintf(out, "unlimited");
        if (p->limits.pids)
                fprintf(out, ", %llu processes", (unsigned long long)p->limits.pids);
        if (p->limits.cpus_millis)
                fprintf(out, ", %.2f CPUs", (double)p->limits.cpus_millis / 1000.0);
        if (p->limits.timeout_ms)
                fprintf(out, ", timeout %llu s", (unsigned long long)(p->limits.timeout_ms / 1000));
        json_t *sc = seccomp_policy_json(p->seccomp);
        size_t rules = json_array_size(sc);
        json_decref(sc);
        fprintf(out, "; syscalls: the default profile%s", rules ? " and your rules (" : "");
        if (rules)
                fprintf(out, "%zu)", rules);
        if (fclose(out) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}
