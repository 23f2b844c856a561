/* httprules.c — request-level rules: which methods and paths a host takes
 * (docs/secrets.md). Pure functions, fuzzed through fuzz_intercept.c.
 *
 *   --http-rule 'api.example.com GET,POST /v1/messages,/v1/models/ID'
 *   "network": {"http_rules": [{"host": "api.example.com", "methods": ["POST"],
 *                               "paths": ["/v1/messages"]}]}
 *
 * A host named by a rule takes only requests some rule for it allows:
 * plain http always (the proxy reads it), https through interception. A
 * '*' in a path pattern stays within one segment; a pattern ending in
 * "/" and two stars takes everything below. Methods are case-sensitive (RFC 9110 9.1).
 *
 * Paths mean different things to different servers when they hold dot
 * segments, empty segments, path parameters or encoded separators (the
 * "..;" and "%2e%2e" families): such a path is refused outright, whatever
 * the rules, rather than normalised one way and read another upstream.
 * Only %XX of unreserved characters is decoded (RFC 3986 6.2.2.2: "%41"
 * is "A" to everyone); other escapes stay as they are, in upper case. */
#define _GNU_SOURCE
#include "net/intercept.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static int hexval(char c)
{
        return isdigit((unsigned char)c) ? c - '0'
               : c >= 'a' && c <= 'f'    ? c - 'a' + 10
               : c >= 'A' && c <= 'F'    ? c - 'A' + 10
                                         : -1;
}

const char *http_path_normalize(const char *path, size_t len, char *out, size_t size)
{
        if (len == 0 || path[0] != '/')
                return "the target is not a path";
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)path[i];
                if (c == '?' || c == '#')
                        break;
                if (c <= 0x20 || c >= 0x7f)
                        return "a control, blank or non-ASCII byte in the path";
                if (c == ';')
                        return "';' in the path (path parameters, read differently by servers)";
                if (c == '\\')
                        return "'\\' in the path (a separator to some servers)";
                char emit[3];
                size_t en = 1;
                emit[0] = (char)c;
                if (c == '%') {
                        int hi = i + 2 < len ? hexval(path[i + 1]) : -1, lo = i + 2 < len ? hexval(path[i + 2]) : -1;
                        if (hi < 0 || lo < 0)
                                return "a bad %-escape in the path";
                        unsigned char d = (unsigned char)(hi * 16 + lo);
                        i += 2;
                        if (d == '/' || d == '\\')
                                return "an encoded '/' or '\\' in the path";
                        if (d == '.')
                                return "an encoded '.' in the path";
                        if (d == '%')
                                return "an encoded '%' in the path (double encoding)";
                        if (d == ';')
                                return "an encoded ';' in the path";
                        if (d < 0x20 || d >= 0x7f)
                                return "an encoded control or non-ASCII byte in the path";
                        if (isalnum(d) || d == '-' || d == '_' || d == '~') {
                                emit[0] = (char)d;
                        } else {
                                static const char hex[] = "0123456789ABCDEF";
                                emit[0] = '%';
                                emit[1] = hex[d >> 4];
                                emit[2] = hex[d & 15];
                                en = 3;
                        }
                }
                if (o + en >= size)
                        return "the path is too long";
                memcpy(out + o, emit, en);
                o += en;
        }
        out[o] = '\0';
        /* segments: no empty one but the last, no "." or ".." */
        for (const char *s = out; *s == '/'; ) {
                const char *seg = s + 1, *next = strchr(seg, '/');
                size_t n = next ? (size_t)(next - seg) : strlen(seg);
                if (n == 0 && next)
                        return "an empty segment ('//') in the path";
                if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                        return "a dot segment ('.' or '..') in the path";
                if (!next)
                        break;
                s = next;
        }
        return NULL;
}

static bool path_matches(const char *pattern, const char *path)
{
        size_t n = strlen(pattern);
        if (n >= 3 && strcmp(pattern + n - 3, "/**") == 0)
                return strncmp(path, pattern, n - 2) == 0 || (strncmp(path, pattern, n - 3) == 0 && !path[n - 3]);
        return fnmatch(pattern, path, FNM_PATHNAME) == 0;
}

bool http_rules_cover(const struct intercept_policy *ip, const char *host)
{
        for (size_t i = 0; ip && host && i < ip->n_rules; i++)
                if (egress_pattern_match(ip->rules[i].host, host))
                        return true;
        return false;
}

bool http_rules_allow(const struct intercept_policy *ip, const char *host, const char *method, const char *norm_path,
                      char *why, size_t size)
{
        size_t seen = 0;
        for (size_t i = 0; ip && i < ip->n_rules; i++) {
                const struct http_rule *r = &ip->rules[i];
                if (!egress_pattern_match(r->host, host))
                        continue;
                seen++;
                bool m = r->n_methods == 0;
                for (size_t j = 0; !m && j < r->n_methods; j++)
                        m = strcmp(r->methods[j], method) == 0;
                bool p = r->n_paths == 0;
                for (size_t j = 0; m && !p && j < r->n_paths; j++)
                        p = path_matches(r->paths[j], norm_path);
                if (m && p)
                        return true;
        }
        char shown[160];
        size_t o = 0;
        for (const char *c = norm_path; *c && o + 4 < sizeof shown; c++)
                shown[o++] = *c;
        shown[o] = '\0';
        snprintf(why, size, "http_rules for %s: %s %s%s matches none of its %zu rule%s", host, method, shown,
                 *(norm_path + o) ? "..." : "", seen, seen == 1 ? "" : "s");
        return false;
}

/* ---- the policy ------------------------------------------------------------ */

static bool method_token(const char *m)
{
        if (!*m || strlen(m) > 15)
                return false;
        for (const char *c = m; *c; c++)
                if (!isupper((unsigned char)*c) && *c != '-')
                        return false;
        return true;
}

static int check_path_pattern(const char *p, brig_error **err)
{
        char norm[1024];
        /* the pattern is a path itself, '*' aside */
        char tmp[1024];
        size_t n = strlen(p);
        if (n >= sizeof tmp)
                return brig_err(err, EINVAL, "http rule path '%s': too long", p);
        for (size_t i = 0; i <= n; i++)
                tmp[i] = p[i] == '*' ? 'x' : p[i];
        const char *bad = http_path_normalize(tmp, n, norm, sizeof norm);
        if (bad || strchr(p, '?') || strchr(p, '%') || strchr(p, '[') || strchr(p, '#'))
                return brig_err(err, EINVAL, "http rule path '%s': %s", p,
                                bad ? bad : "a pattern is a plain path: no '?', '%', '[' or '#'");
        return 0;
}

int intercept_policy_add_rule(struct intercept_policy **ipp, const char *host, char **methods, size_t n_methods,
                              char **paths, size_t n_paths, brig_error **err)
{
        char norm[EGRESS_HOST_MAX + 1];
        bool wildcard = host[0] == '*' && host[1] == '.';
        const char *name = wildcard ? host + 2 : host;
        if (strchr(name, '*') || strchr(name, ':') || !egress_host_normalize(name, strlen(name), norm))
                return brig_err(err, EINVAL, "http rule host '%s': a host name or '*.suffix' pattern, no port", host);
        for (size_t i = 0; i < n_methods; i++)
                if (!method_token(methods[i]))
                        return brig_err(err, EINVAL, "http rule for %s: method '%s' (upper case, like GET or POST)",
                                        host, methods[i]);
        for (size_t i = 0; i < n_paths; i++)
                if (check_path_pattern(paths[i], err) < 0)
                        return brig_err_prefix(err, "http rule for %s", host);
        if (!*ipp && !(*ipp = calloc(1, sizeof **ipp)))
                return brig_err(err, ENOMEM, "http rule");
        struct intercept_policy *ip = *ipp;
        struct http_rule *grown = realloc(ip->rules, (ip->n_rules + 1) * sizeof *grown);
        if (!grown)
                return brig_err(err, ENOMEM, "http rule");
        ip->rules = grown;
        struct http_rule *r = &ip->rules[ip->n_rules];
        *r = (struct http_rule){ .host = brig_strdup_printf("%s%s", wildcard ? "*." : "", norm),
                                 .methods = calloc(n_methods + 1, sizeof(char *)),
                                 .paths = calloc(n_paths + 1, sizeof(char *)) };
        bool ok = r->host && r->methods && r->paths;
        for (size_t i = 0; ok && i < n_methods; i++)
                ok = (r->methods[r->n_methods++] = strdup(methods[i])) != NULL;
        for (size_t i = 0; ok && i < n_paths; i++)
                ok = (r->paths[r->n_paths++] = strdup(paths[i])) != NULL;
        ip->n_rules++;  /* freed with the policy, whole or not */
        return ok ? 0 : brig_err(err, ENOMEM, "http rule");
}

static size_t split(char *s, char **out, size_t max)
{
        size_t n = 0;
        for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
                out[n++] = tok;
        return n;
}

int intercept_policy_add_rule_text(struct intercept_policy **ipp, const char *text, brig_error **err)
{
        _cleanup_free_ char *copy = strdup(text);
        if (!copy)
                return brig_err(err, ENOMEM, "--http-rule");
        char *host = strtok(copy, " "), *methods = strtok(NULL, " "), *paths = strtok(NULL, " ");
        if (!host || !methods || strtok(NULL, " "))
                return brig_err(err, EINVAL, "'%s': expected 'HOST METHOD[,METHOD...] [PATH[,PATH...]]' "
                                "(METHOD '*' for any)", text);
        char *mv[32], *pv[64];
        size_t nm = strcmp(methods, "*") == 0 ? 0 : split(methods, mv, ARRAY_SIZE(mv));
        size_t np = paths ? split(paths, pv, ARRAY_SIZE(pv)) : 0;
        int r = intercept_policy_add_rule(ipp, host, mv, nm, pv, np, err);
        return r < 0 ? brig_err_prefix(err, "'%s'", text) : 0;
}
