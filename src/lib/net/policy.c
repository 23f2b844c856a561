/* policy.c — egress rules: host patterns, CIDR allows, --resolve; and the
 * two judgements made on every connection (the name, then each address).
 *
 *   --allow-host pypi.org            exact name, ports 80 and 443
 *   --allow-host '*.example.org:8443' subdomains only (not example.org), that port
 *   --deny-host  PATTERN             wins over every allow; without a port: all ports
 *   --allow-private-host db.internal:5432  an allow rule whose name may also
 *                                    resolve to a private address (see egress_judge_addr)
 *   --allow-cidr 10.0.0.0/8[:PORT]   addresses the classifier refuses, and
 *                                    literal connections to them; without a port: any
 *   --resolve    HOST:ADDR           answers for HOST without DNS (repeatable)
 *   --upstream-proxy http://HOST:PORT connect through that HTTP proxy (CONNECT)
 */
#define _GNU_SOURCE
#include "net/intercept.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct host_rule {
        char *pattern;        /* normalized; "*.suffix" or exact */
        uint16_t port;        /* 0: the default (allow: 80 and 443; deny: every port) */
        bool private_ok;      /* --allow-private-host: its names may resolve to private addresses */
};

struct cidr_rule {
        struct net_addr net;
        int bits;             /* prefix length in the 128-bit (mapped) space */
        int shown_bits;       /* as the user wrote it */
        uint16_t port;        /* 0: every port */
};

struct resolve_rule {
        char *host;
        struct net_addr addr;
};

struct egress_policy {
        struct host_rule *allow, *deny;
        size_t n_allow, n_deny;
        struct cidr_rule *cidrs;
        size_t n_cidrs;
        struct resolve_rule *resolves;
        size_t n_resolves;
        struct egress_upstream upstream;
        bool has_upstream;
        struct intercept_policy *intercept;  /* secrets, http rules, upstream CAs (intercept.h) */
};

/* Names that reach a cloud metadata service from inside a VM: refused
 * even when a suffix pattern would cover them, unless named exactly. */
static const char *const metadata_names[] = {
        "metadata.google.internal", "metadata", "metadata.goog", "instance-data", "instance-data.ec2.internal",
};

/* ---- names --------------------------------------------------------------- */

bool egress_host_normalize(const char *in, size_t len, char out[EGRESS_HOST_MAX + 1])
{
        if (len && in[len - 1] == '.')
                len--;
        if (len == 0 || len > EGRESS_HOST_MAX)
                return false;
        size_t label = 0;
        const char *last = in;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)in[i];
                if (c == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        last = in + i + 1;
                        out[i] = '.';
                        continue;
                }
                /* '_' appears in real names (SRV-style labels); nothing else
                 * outside LDH is let through, so a name can't smuggle bytes
                 * into a log line, a header or a resolver. */
                if (!(isalnum(c) || c == '-' || c == '_'))
                        return false;
                if (++label > 63)
                        return false;
                out[i] = (char)tolower(c);
        }
        if (label == 0)
                return false;
        out[len] = '\0';
        /* An all-digit last label is an IPv4 spelling, never a name. */
        bool digits = true;
        for (const char *p = last; p < in + len; p++)
                if (!isdigit((unsigned char)*p))
                        digits = false;
        return !digits;
}

bool egress_pattern_match(const char *pattern, const char *host)
{
        if (pattern[0] == '*' && pattern[1] == '.') {
                const char *suffix = pattern + 1;  /* ".example.org" */
                size_t hl = strlen(host), sl = strlen(suffix);
                /* a proper subdomain: at least one label before the suffix */
                return hl > sl && strcmp(host + hl - sl, suffix) == 0;
        }
        return strcmp(pattern, host) == 0;
}

static int parse_port(const char *s, uint16_t *port)
{
        if (!*s || strlen(s) > 5)
                return -1;
        unsigned v = 0;
        for (const char *p = s; *p; p++) {
                if (!isdigit((unsigned char)*p))
                        return -1;
                v = v * 10 + (unsigned)(*p - '0');
        }
        if (v == 0 || v > 65535)
                return -1;
        *port = (uint16_t)v;
        return 0;
}

static int parse_host_rule(const char *text, struct host_rule *r, brig_error **err)
{
        const char *colon = strrchr(text, ':');
        size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
        r->port = 0;
        if (colon && parse_port(colon + 1, &r->port) < 0)
                return brig_err(err, EINVAL, "'%s': bad port '%s' (expected 1-65535)", text, colon + 1);
        bool wildcard = hlen >= 2 && text[0] == '*' && text[1] == '.';
        const char *name = wildcard ? text + 2 : text;
        size_t nlen = wildcard ? hlen - 2 : hlen;
        char norm[EGRESS_HOST_MAX + 1];
        if (hlen == 1 && text[0] == '*')
                return brig_err(err, EINVAL, "'%s': '*' alone would allow everything; use --net host for that", text);
        if (memchr(name, '*', nlen))
                return brig_err(err, EINVAL, "'%s': '*' is only allowed as a leading '*.' (subdomains)", text);
        /* An address is a valid exact pattern too: "--allow-host 192.0.2.7". */
        char tmp[EGRESS_HOST_MAX + 1];
        struct net_addr a;
        if (!wildcard && nlen < sizeof tmp) {
                memcpy(tmp, name, nlen);
                tmp[nlen] = '\0';
                if (net_addr_parse(tmp, &a)) {
                        net_addr_format(&a, norm, sizeof norm);
                        r->pattern = strdup(norm);
                        return r->pattern ? 0 : brig_err(err, ENOMEM, "'%s'", text);
                }
        }
        if (!egress_host_normalize(name, nlen, norm))
                return brig_err(err, EINVAL, "'%s': not a host name or pattern (expected host, *.domain, optional :port)",
                                text);
        r->pattern = wildcard ? brig_strdup_printf("*.%s", norm) : strdup(norm);
        return r->pattern ? 0 : brig_err(err, ENOMEM, "'%s'", text);
}

static struct egress_policy *policy_get(struct egress_policy **ep)
{
        if (!*ep)
                *ep = calloc(1, sizeof **ep);
        return *ep;
}

static int add_host_rule(struct egress_policy **ep, const char *text, bool deny, bool private_ok, brig_error **err)
{
        if (!text)
                return brig_err(err, EINVAL, "empty host pattern");
        struct egress_policy *p = policy_get(ep);
        if (!p)
                return brig_err(err, ENOMEM, "'%s'", text);
        struct host_rule r;
        int rc = parse_host_rule(text, &r, err);
        if (rc < 0)
                return rc;
        r.private_ok = private_ok;
        struct host_rule **v = deny ? &p->deny : &p->allow;
        size_t *n = deny ? &p->n_deny : &p->n_allow;
        struct host_rule *grown = realloc(*v, (*n + 1) * sizeof **v);
        if (!grown) {
                free(r.pattern);
                return brig_err(err, ENOMEM, "'%s'", text);
        }
        grown[(*n)++] = r;
        *v = grown;
        return 0;
}

int egress_policy_allow_host(struct egress_policy **ep, const char *pattern, brig_error **err)
{
        return add_host_rule(ep, pattern, false, false, err);
}

int egress_policy_allow_private_host(struct egress_policy **ep, const char *pattern, brig_error **err)
{
        return add_host_rule(ep, pattern, false, true, err);
}

int egress_policy_deny_host(struct egress_policy **ep, const char *pattern, brig_error **err)
{
        return add_host_rule(ep, pattern, true, false, err);
}

/* "10.0.0.0/8", "10.0.0.0/8:443", "192.0.2.7", "192.0.2.7:80",
 * "fd00::/8", "fd00::/8:443", "[fd00::1]:443", "[fd00::]/8:443" */
int egress_policy_allow_cidr(struct egress_policy **ep, const char *text, brig_error **err)
{
        if (!text)
                return brig_err(err, EINVAL, "empty CIDR");
        /* Split ADDR from what follows ("/BITS", ":PORT"); `rest` points
         * into `text`, so the separators stay where they are. */
        struct cidr_rule r = { 0 };
        const char *addr = text, *rest;
        size_t alen;
        if (text[0] == '[') {
                const char *close = strchr(text, ']');
                if (!close)
                        return brig_err(err, EINVAL, "'%s': missing ']'", text);
                addr = text + 1;
                alen = (size_t)(close - addr);
                rest = close + 1;
        } else if (strchr(text, '/')) {
                alen = strcspn(text, "/");
                rest = text + alen;
        } else if (strchr(text, ':') && strchr(text, ':') == strrchr(text, ':')) {  /* IPv4:PORT */
                alen = strcspn(text, ":");
                rest = text + alen;
        } else {
                alen = strlen(text);
                rest = text + alen;
        }
        char addrtext[INET6_ADDRSTRLEN + 1];
        if (alen >= sizeof addrtext)
                return brig_err(err, EINVAL, "'%s': not an IPv4 or IPv6 address", text);
        memcpy(addrtext, addr, alen);
        addrtext[alen] = '\0';
        if (!net_addr_parse(addrtext, &r.net) || strchr(addrtext, '['))
                return brig_err(err, EINVAL, "'%s': '%s' is not an IPv4 or IPv6 address", text, addrtext);
        int maxbits = r.net.family == AF_INET ? 32 : 128;
        r.shown_bits = maxbits;
        if (*rest == '/') {
                char *end;
                if (!isdigit((unsigned char)rest[1]))
                        return brig_err(err, EINVAL, "'%s': bad prefix length (expected 0-%d)", text, maxbits);
                errno = 0;
                long bits = strtol(rest + 1, &end, 10);
                if (end == rest + 1 || errno || bits < 0 || bits > maxbits)
                        return brig_err(err, EINVAL, "'%s': bad prefix length (expected 0-%d)", text, maxbits);
                r.shown_bits = (int)bits;
                rest = end;
        }
        if (*rest == ':') {
                if (parse_port(rest + 1, &r.port) < 0)
                        return brig_err(err, EINVAL, "'%s': bad port '%s' (expected 1-65535)", text, rest + 1);
        } else if (*rest) {
                return brig_err(err, EINVAL, "'%s': unexpected '%s' (expected ADDR[/BITS][:PORT])", text, rest);
        }
        r.bits = r.net.family == AF_INET ? 96 + r.shown_bits : r.shown_bits;
        /* Host bits set ("10.1.2.3/8") are almost always a typo: refuse. */
        for (int i = r.bits; i < 128; i++)
                if (r.net.b[i / 8] & (0x80 >> (i % 8)))
                        return brig_err(err, EINVAL, "'%s': address has bits set beyond the /%d prefix", text,
                                        r.shown_bits);
        struct egress_policy *p = policy_get(ep);
        struct cidr_rule *grown = p ? realloc(p->cidrs, (p->n_cidrs + 1) * sizeof *grown) : NULL;
        if (!grown)
                return brig_err(err, ENOMEM, "'%s'", text);
        grown[p->n_cidrs++] = r;
        p->cidrs = grown;
        return 0;
}

int egress_policy_add_resolve(struct egress_policy **ep, const char *text, brig_error **err)
{
        const char *colon = text ? strchr(text, ':') : NULL;
        if (!colon)
                return brig_err(err, EINVAL, "'%s': expected HOST:ADDR", text ? text : "");
        char host[EGRESS_HOST_MAX + 1];
        if (!egress_host_normalize(text, (size_t)(colon - text), host))
                return brig_err(err, EINVAL, "'%s': '%.*s' is not a host name", text, (int)(colon - text), text);
        struct resolve_rule r = { 0 };
        if (!net_addr_parse(colon + 1, &r.addr))
                return brig_err(err, EINVAL, "'%s': '%s' is not an IPv4 or IPv6 address", text, colon + 1);
        struct egress_policy *p = policy_get(ep);
        struct resolve_rule *grown = p ? realloc(p->resolves, (p->n_resolves + 1) * sizeof *grown) : NULL;
        if (!grown)
                return brig_err(err, ENOMEM, "'%s'", text);
        p->resolves = grown;
        r.host = strdup(host);
        if (!r.host)
                return brig_err(err, ENOMEM, "'%s'", text);
        p->resolves[p->n_resolves++] = r;
        return 0;
}

/* "http://HOST:PORT" (one trailing '/' tolerated): HOST a name, an IPv4
 * literal or a bracketed IPv6 literal. No credentials, no path, no other
 * scheme: anything else is refused naming the value. */
static int parse_upstream(const char *url, struct egress_upstream *u, brig_error **err)
{
        static const char expected[] = "expected http://HOST:PORT";
        if (!url || !*url)
                return brig_err(err, EINVAL, "empty upstream proxy URL (%s)", expected);
        if (strncasecmp(url, "http://", 7) != 0) {
                const char *sep = strstr(url, "://");
                if (sep)
                        return brig_err(err, EINVAL, "'%s': scheme '%.*s' is not supported (%s)", url,
                                        (int)(sep - url), url, expected);
                return brig_err(err, EINVAL, "'%s': %s", url, expected);
        }
        const char *auth = url + 7;
        size_t alen = strlen(auth);
        if (alen && auth[alen - 1] == '/')
                alen--;
        if (memchr(auth, '@', alen)) {
                /* Name the proxy, never the credentials: the message goes to stderr and logs. */
                const char *at = memrchr(auth, '@', alen);
                return brig_err(err, EINVAL, "'http://***@%.*s': credentials in the upstream proxy URL are not supported",
                                (int)(alen - (size_t)(at + 1 - auth)), at + 1);
        }
        if (strcspn(auth, "/?#") < alen)
                return brig_err(err, EINVAL, "'%s': no path or query allowed (%s)", url, expected);
        const char *portp;
        size_t hlen;
        if (alen && auth[0] == '[') {
                const char *close = memchr(auth, ']', alen);
                if (!close)
                        return brig_err(err, EINVAL, "'%s': missing ']' (%s)", url, expected);
                hlen = (size_t)(close - auth) + 1;
                portp = close + 1;
        } else {
                const char *colon = memrchr(auth, ':', alen);
                if (colon && memchr(auth, ':', (size_t)(colon - auth)))
                        return brig_err(err, EINVAL, "'%s': an IPv6 address must be in brackets (%s)", url, expected);
                hlen = colon ? (size_t)(colon - auth) : alen;
                portp = colon ? colon : auth + alen;
        }
        if (hlen == 0)
                return brig_err(err, EINVAL, "'%s': missing host (%s)", url, expected);
        if (portp >= auth + alen || *portp != ':')
                return brig_err(err, EINVAL, "'%s': missing :PORT (%s)", url, expected);
        char text[EGRESS_HOST_MAX + 8];
        size_t plen = (size_t)(auth + alen - portp - 1);
        if (plen >= sizeof text)
                return brig_err(err, EINVAL, "'%s': bad port (expected 1-65535)", url);
        memcpy(text, portp + 1, plen);
        text[plen] = '\0';
        if (parse_port(text, &u->port) < 0)
                return brig_err(err, EINVAL, "'%s': bad port '%s' (expected 1-65535)", url, text);
        if (hlen >= sizeof text)
                return brig_err(err, EINVAL, "'%s': host name too long", url);
        memcpy(text, auth, hlen);
        text[hlen] = '\0';
        bool bracketed = text[0] == '[';
        if (net_addr_parse(text, &u->addr) && (u->addr.family == AF_INET6) == bracketed) {
                u->literal = true;
                net_addr_format(&u->addr, u->host, sizeof u->host);
                return 0;
        }
        u->literal = false;
        if (bracketed || !egress_host_normalize(text, hlen, u->host))
                return brig_err(err, EINVAL, "'%s': '%s' is not a host name or address (%s)", url, text, expected);
        return 0;
}

int egress_policy_set_upstream(struct egress_policy **ep, const char *url, brig_error **err)
{
        struct egress_upstream u = { 0 };
        int r = parse_upstream(url, &u, err);
        if (r < 0)
                return r;
        struct egress_policy *p = policy_get(ep);
        if (!p)
                return brig_err(err, ENOMEM, "'%s'", url);
        p->upstream = u;  /* the last one set wins */
        p->has_upstream = true;
        return 0;
}

struct intercept_policy **egress_policy_intercept(struct egress_policy **ep)
{
        struct egress_policy *p = policy_get(ep);
        return p ? &p->intercept : NULL;
}

const struct intercept_policy *egress_policy_intercept_of(const struct egress_policy *ep)
{
        return ep ? ep->intercept : NULL;
}

const struct egress_upstream *egress_policy_upstream(const struct egress_policy *ep)
{
        return ep && ep->has_upstream ? &ep->upstream : NULL;
}

void egress_upstream_format(const struct egress_upstream *u, char *buf, size_t size)
{
        snprintf(buf, size, u->literal && u->addr.family == AF_INET6 ? "[%s]:%u" : "%s:%u", u->host, u->port);
}

bool egress_policy_has_allows(const struct egress_policy *ep)
{
        return ep && (ep->n_allow || ep->n_cidrs);
}

static json_t *host_rules_json(const struct host_rule *v, size_t n, bool private_ok)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++) {
                if (v[i].private_ok != private_ok)
                        continue;
                char *s = v[i].port ? brig_strdup_printf("%s:%u", v[i].pattern, v[i].port) : strdup(v[i].pattern);
                json_array_append_new(a, json_string(s ? s : "?"));
                free(s);
        }
        return a;
}

json_t *egress_policy_json(const struct egress_policy *ep)
{
        json_t *o = json_object();
        json_object_set_new(o, "allow_hosts", host_rules_json(ep ? ep->allow : NULL, ep ? ep->n_allow : 0, false));
        json_t *private_hosts = host_rules_json(ep ? ep->allow : NULL, ep ? ep->n_allow : 0, true);
        if (json_array_size(private_hosts))  /* only when used: policy files and reports stay as they were */
                json_object_set_new(o, "allow_private_hosts", private_hosts);
        else
                json_decref(private_hosts);
        json_object_set_new(o, "deny_hosts", host_rules_json(ep ? ep->deny : NULL, ep ? ep->n_deny : 0, false));
        json_t *cidrs = json_array(), *res = json_array();
        for (size_t i = 0; ep && i < ep->n_cidrs; i++) {
                char a[INET6_ADDRSTRLEN], s[96];
                const struct cidr_rule *c = &ep->cidrs[i];
                net_addr_format(&c->net, a, sizeof a);
                if (c->port)
                        snprintf(s, sizeof s, c->net.family == AF_INET6 ? "[%s]/%d:%u" : "%s/%d:%u", a, c->shown_bits,
                                 c->port);
                else
                        snprintf(s, sizeof s, "%s/%d", a, c->shown_bits);
                json_array_append_new(cidrs, json_string(s));
        }
        for (size_t i = 0; ep && i < ep->n_resolves; i++) {
                char a[INET6_ADDRSTRLEN];
                net_addr_format(&ep->resolves[i].addr, a, sizeof a);
                char *s = brig_strdup_printf("%s:%s", ep->resolves[i].host, a);
                json_array_append_new(res, json_string(s ? s : "?"));
                free(s);
        }
        json_object_set_new(o, "allow_cidrs", cidrs);
        json_object_set_new(o, "resolve", res);
        if (ep && ep->has_upstream) {
                char hp[EGRESS_HOST_MAX + 16];
                egress_upstream_format(&ep->upstream, hp, sizeof hp);
                char *url = brig_strdup_printf("http://%s", hp);
                json_object_set_new(o, "upstream_proxy", json_string(url ? url : "?"));
                free(url);
        }
        intercept_policy_json(ep ? ep->intercept : NULL, o);
        return o;
}

int egress_policy_remove_host(struct egress_policy *ep, const char *pattern, bool deny, brig_error **err)
{
        if (!pattern)
                return brig_err(err, EINVAL, "empty host pattern");
        /* the rule as add_host_rule would have stored it */
        struct host_rule want;
        int rc = parse_host_rule(pattern, &want, err);
        if (rc < 0)
                return rc;
        struct host_rule *v = ep ? (deny ? ep->deny : ep->allow) : NULL;
        size_t *n = ep ? (deny ? &ep->n_deny : &ep->n_allow) : NULL;
        for (size_t i = 0; n && i < *n; i++) {
                if (strcmp(v[i].pattern, want.pattern) != 0 || v[i].port != want.port)
                        continue;
                free(v[i].pattern);
                memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof *v);
                (*n)--;
                free(want.pattern);
                return 0;
        }
        rc = brig_err(err, ENOENT, "no %s rule '%s'", deny ? "deny" : "allow", pattern);
        free(want.pattern);
        return rc;
}

void egress_policy_free(struct egress_policy *ep)
{
        if (!ep)
                return;
        intercept_policy_free(ep->intercept);
        for (size_t i = 0; i < ep->n_allow; i++)
                free(ep->allow[i].pattern);
        for (size_t i = 0; i < ep->n_deny; i++)
                free(ep->deny[i].pattern);
        for (size_t i = 0; i < ep->n_resolves; i++)
                free(ep->resolves[i].host);
        free(ep->allow);
        free(ep->deny);
        free(ep->cidrs);
        free(ep->resolves);
        free(ep);
}

/* ---- judgements ------------------------------------------------------------ */

static bool allow_port_ok(const struct host_rule *r, uint16_t port)
{
        return r->port ? r->port == port : (port == 80 || port == 443);
}

bool egress_is_metadata_name(const char *host)
{
        for (size_t i = 0; i < ARRAY_SIZE(metadata_names); i++)
                if (strcmp(host, metadata_names[i]) == 0)
                        return true;
        return false;
}

/* The allow rules that name `host` (metadata names need an exact rule: a
 * broad suffix that happens to cover them is not consent). any_port: the
 * DNS stub's question, asked before a port is known. */
static bool host_denied(const struct egress_policy *ep, const char *host, uint16_t port, bool any_port,
                        struct egress_verdict *v)
{
        v->allow = false;
        v->private_ok = false;
        for (size_t i = 0; ep && i < ep->n_deny; i++)
                if (egress_pattern_match(ep->deny[i].pattern, host) &&
                    (!ep->deny[i].port || (!any_port && ep->deny[i].port == port))) {
                        snprintf(v->reason, sizeof v->reason, "denied by --deny-host %s", ep->deny[i].pattern);
                        return true;
                }
        return false;
}

bool egress_host_denied(const struct egress_policy *ep, const char *host, uint16_t port, struct egress_verdict *v)
{
        return host_denied(ep, host, port, false, v);
}

static void judge_host(const struct egress_policy *ep, const char *host, uint16_t port, bool any_port,
                       struct egress_verdict *v)
{
        if (host_denied(ep, host, port, any_port, v))
                return;
        bool metadata = egress_is_metadata_name(host);
        bool name_matched = false;
        const struct host_rule *by = NULL;
        for (size_t i = 0; ep && i < ep->n_allow; i++) {
                const struct host_rule *r = &ep->allow[i];
                if (!egress_pattern_match(r->pattern, host) || (metadata && r->pattern[0] == '*'))
                        continue;
                name_matched = true;
                /* a private rule wins over a plain one for the same name:
                 * it says more (the name's private addresses are meant) */
                if ((any_port || allow_port_ok(r, port)) && (!by || (r->private_ok && !by->private_ok)))
                        by = r;
        }
        if (by) {
                v->allow = true;
                v->private_ok = by->private_ok;
                snprintf(v->reason, sizeof v->reason, "allowed by --allow-%shost %s", by->private_ok ? "private-" : "",
                         by->pattern);
                return;
        }
        if (metadata)
                snprintf(v->reason, sizeof v->reason, "cloud metadata name");
        else if (name_matched)
                snprintf(v->reason, sizeof v->reason, "port %u not allowed for this host", port);
        else
                snprintf(v->reason, sizeof v->reason, "host not in the allow list");
}

void egress_judge_host(const struct egress_policy *ep, const char *host, uint16_t port, struct egress_verdict *v)
{
        judge_host(ep, host, port, false, v);
}

void egress_judge_name(const struct egress_policy *ep, const char *host, struct egress_verdict *v)
{
        judge_host(ep, host, 0, true, v);
}

static const struct cidr_rule *cidr_find(const struct egress_policy *ep, const struct net_addr *a, uint16_t port)
{
        for (size_t i = 0; ep && i < ep->n_cidrs; i++) {
                const struct cidr_rule *c = &ep->cidrs[i];
                int bits = c->bits, full = bits / 8, rest = bits % 8;
                /* Compare in the mapped space; an AF_INET rule only names
                 * IPv4 (and its mapped form), an AF_INET6 rule only IPv6. */
                if ((c->net.family == AF_INET) != (a->family == AF_INET))
                        continue;
                if (memcmp(c->net.b, a->b, (size_t)full) != 0)
                        continue;
                if (rest && ((c->net.b[full] ^ a->b[full]) & (uint8_t)(0xff << (8 - rest))))
                        continue;
                if (c->port && c->port != port)
                        continue;
                return c;
        }
        return NULL;
}

bool egress_cidr_allows(const struct egress_policy *ep, const struct net_addr *a, uint16_t port)
{
        return cidr_find(ep, a, port) != NULL;
}

void egress_judge_addr(const struct egress_policy *ep, const struct net_addr *a, uint16_t port, const char *host,
                       bool private_ok, struct egress_verdict *v)
{
        char text[INET6_ADDRSTRLEN];
        net_addr_format(a, text, sizeof text);
        v->private_ok = false;
        const struct cidr_rule *c = cidr_find(ep, a, port);
        if (c) {
                char net[INET6_ADDRSTRLEN];
                net_addr_format(&c->net, net, sizeof net);
                v->allow = true;
                snprintf(v->reason, sizeof v->reason, "allowed by --allow-cidr %s/%d", net, c->shown_bits);
                return;
        }
        enum addr_class cls = egress_classify(a);
        if (host && private_ok && egress_class_private(cls)) {
                v->allow = true;
                v->private_ok = true;  /* let in by the private host rule: pinned (egress.c) */
                snprintf(v->reason, sizeof v->reason, "address %s is %s, allowed for %s by --allow-private-host", text,
                         addr_class_name(cls), host);
                return;
        }
        if (cls != ADDR_PUBLIC) {
                v->allow = false;
                snprintf(v->reason, sizeof v->reason, "address %s is %s", text, addr_class_name(cls));
                return;
        }
        if (host) {
                v->allow = true;
                snprintf(v->reason, sizeof v->reason, "public address");
                return;
        }
        /* A literal address: allowed only when a host rule names it. */
        egress_judge_host(ep, text, port, v);
}

size_t egress_policy_resolve(const struct egress_policy *ep, const char *host, struct net_addr *out, size_t max)
{
        size_t n = 0;
        for (size_t i = 0; ep && i < ep->n_resolves && n < max; i++)
                if (strcmp(ep->resolves[i].host, host) == 0)
                        out[n++] = ep->resolves[i].addr;
        return n;
}
