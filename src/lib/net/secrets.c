/* secrets.c — scoped credentials (docs/secrets.md).
 *
 *   --secret NAME=@FILE | NAME=env:VAR   the value, read when the run starts
 *   --secret-host NAME=PATTERN          where it may go (repeatable)
 *   --secret-header NAME=HEADER         in which header (Authorization)
 *
 * The sandbox sees $NAME = brig-secret-NAME-<32 hex digits>, random per
 * run. The values live in the vault: one anonymous mapping that is
 * MADV_DONTDUMP (no core file has it) and MADV_WIPEONFORK (the sandbox's
 * pid 1, a clone of this process that never execs, sees zeros there), and
 * is wiped and unmapped at the end. The policy, the report, the audit
 * stream and every message carry the source ("@FILE", "env:VAR") and the
 * name, never the value.
 *
 * A request is judged here as a whole head (intercept_judge_head): the
 * http rules first, then every placeholder in it. A placeholder is swapped
 * only in its header (an Authorization: Basic one decoded first: git sends
 * its token that way), only toward a host it is bound to, and only when
 * the caller says the upstream's certificate was verified for that name;
 * anywhere else — the URL, another header, another host, plain http — the
 * request is refused as an exfiltration attempt naming the secret. */
#define _GNU_SOURCE
#include "net/intercept.h"
#include "core/ossl_fns.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

/* SECRETS_MAX values of SECRET_VALUE_MAX, each with its base64 and hex
 * forms and its runs' bitmap, and the CA key */
#define VAULT_SIZE (8u << 20)

/* ---- the policy ------------------------------------------------------------ */

static struct intercept_policy *ip_get(struct intercept_policy **ip)
{
        if (!*ip)
                *ip = calloc(1, sizeof **ip);
        return *ip;
}

static bool valid_name(const char *s, size_t n)
{
        if (n == 0 || n > SECRET_NAME_MAX || isdigit((unsigned char)s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
                        return false;
        return true;
}

static struct secret_spec *find_spec(struct intercept_policy *ip, const char *name, size_t n)
{
        for (size_t i = 0; ip && i < ip->n_secrets; i++)
                if (strlen(ip->secrets[i].name) == n && strncmp(ip->secrets[i].name, name, n) == 0)
                        return &ip->secrets[i];
        return NULL;
}

int intercept_policy_add_secret(struct intercept_policy **ipp, const char *spec, brig_error **err)
{
        const char *eq = strchr(spec, '=');
        if (!eq || !valid_name(spec, (size_t)(eq - spec)))
                return brig_err(err, EINVAL, "'%s': expected NAME=@FILE or NAME=env:VAR, NAME a variable name "
                                "(letters, digits, '_', at most %d)", spec, SECRET_NAME_MAX);
        const char *src = eq + 1;
        bool file = src[0] == '@' && src[1] == '/';
        bool env = strncmp(src, "env:", 4) == 0 && valid_name(src + 4, strlen(src + 4));
        if (!file && !env)
                return brig_err(err, EINVAL, "'%s': the value comes from @FILE (an absolute path) or env:VAR, never "
                                "from the command line itself", spec);
        struct intercept_policy *ip = ip_get(ipp);
        if (!ip)
                return brig_err(err, ENOMEM, "'%s'", spec);
        size_t nl = (size_t)(eq - spec);
        if (find_spec(ip, spec, nl))
                return brig_err(err, EEXIST, "'%s': secret %.*s given twice", spec, (int)nl, spec);
        if (ip->n_secrets == SECRETS_MAX)
                return brig_err(err, E2BIG, "'%s': at most %d secrets", spec, SECRETS_MAX);
        struct secret_spec *grown = realloc(ip->secrets, (ip->n_secrets + 1) * sizeof *grown);
        if (!grown)
                return brig_err(err, ENOMEM, "'%s'", spec);
        ip->secrets = grown;
        struct secret_spec *s = &ip->secrets[ip->n_secrets];
        *s = (struct secret_spec){ .name = strndup(spec, nl), .source = strdup(src), .header = strdup("authorization") };
        if (!s->name || !s->source || !s->header) {
                free(s->name);
                free(s->source);
                free(s->header);
                return brig_err(err, ENOMEM, "'%s'", spec);
        }
        ip->n_secrets++;
        return 0;
}

/* NAME=VALUE for a secret already given. */
static struct secret_spec *spec_of(struct intercept_policy **ipp, const char *spec, const char *flag,
                                   const char *expected, const char **value, brig_error **err)
{
        const char *eq = strchr(spec, '=');
        if (!eq || !eq[1]) {
                brig_err(err, EINVAL, "'%s': expected %s", spec, expected);
                return NULL;
        }
        struct secret_spec *s = find_spec(*ipp, spec, (size_t)(eq - spec));
        if (!s) {
                brig_err(err, ENOENT, "'%s': no secret %.*s (give --secret %.*s=@FILE before %s)", spec,
                         (int)(eq - spec), spec, (int)(eq - spec), spec, flag);
                return NULL;
        }
        *value = eq + 1;
        return s;
}

/* A host pattern as in allow rules, without a port: "name" or "*.suffix". */
static char *host_pattern(const char *text)
{
        bool wildcard = text[0] == '*' && text[1] == '.';
        const char *name = wildcard ? text + 2 : text;
        char norm[EGRESS_HOST_MAX + 1];
        if (strchr(name, '*') || strchr(name, ':') || !egress_host_normalize(name, strlen(name), norm))
                return NULL;
        return brig_strdup_printf("%s%s", wildcard ? "*." : "", norm);
}

int intercept_policy_secret_host(struct intercept_policy **ipp, const char *spec, brig_error **err)
{
        const char *pattern;
        struct secret_spec *s = spec_of(ipp, spec, "--secret-host", "NAME=HOST", &pattern, err);
        if (!s)
                return -EINVAL;
        char *p = host_pattern(pattern);
        if (!p)
                return brig_err(err, EINVAL, "'%s': '%s' is not a host name or '*.suffix' pattern (no port: the "
                                "secret goes only over TLS the proxy verified, on any port an allow rule opens)",
                                spec, pattern);
        char **grown = realloc(s->hosts, (s->n_hosts + 1) * sizeof *grown);
        if (!grown) {
                free(p);
                return brig_err(err, ENOMEM, "'%s'", spec);
        }
        s->hosts = grown;
        s->hosts[s->n_hosts++] = p;
        return 0;
}

int intercept_policy_secret_header(struct intercept_policy **ipp, const char *spec, brig_error **err)
{
        const char *h;
        struct secret_spec *s = spec_of(ipp, spec, "--secret-header", "NAME=HEADER", &h, err);
        if (!s)
                return -EINVAL;
        for (const char *c = h; *c; c++)
                if (!(isalnum((unsigned char)*c) || *c == '-') || c - h >= 64)
                        return brig_err(err, EINVAL, "'%s': '%s' is not a header name", spec, h);
        char *low = strdup(h);
        if (!low)
                return brig_err(err, ENOMEM, "'%s'", spec);
        for (char *c = low; *c; c++)
                *c = (char)tolower((unsigned char)*c);
        free(s->header);
        s->header = low;
        return 0;
}

int intercept_policy_add_upstream_ca(struct intercept_policy **ipp, const char *path, brig_error **err)
{
        if (path[0] != '/')
                return brig_err(err, EINVAL, "'%s': an absolute path to a PEM file", path);
        struct intercept_policy *ip = ip_get(ipp);
        char **grown = ip ? realloc(ip->upstream_cas, (ip->n_upstream_cas + 1) * sizeof *grown) : NULL;
        if (!grown)
                return brig_err(err, ENOMEM, "'%s'", path);
        ip->upstream_cas = grown;
        if (!(ip->upstream_cas[ip->n_upstream_cas] = strdup(path)))
                return brig_err(err, ENOMEM, "'%s'", path);
        ip->n_upstream_cas++;
        return 0;
}

int intercept_policy_check(const struct intercept_policy *ip, brig_error **err)
{
        for (size_t i = 0; ip && i < ip->n_secrets; i++)
                if (!ip->secrets[i].n_hosts)
                        return brig_err(err, EINVAL, "--secret %s: bound to no host; add --secret-host %s=HOST "
                                        "(the hosts the proxy may send it to)", ip->secrets[i].name,
                                        ip->secrets[i].name);
        return 0;
}

static json_t *strings_json(char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, json_string(v[i]));
        return a;
}

void intercept_policy_json(const struct intercept_policy *ip, json_t *network)
{
        if (!ip)
                return;
        if (ip->n_secrets) {
                json_t *a = json_array();
                for (size_t i = 0; i < ip->n_secrets; i++) {
                        const struct secret_spec *s = &ip->secrets[i];
                        /* the source, never the value */
                        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:s}", "name", s->name, "source",
                                                           s->source, "hosts", strings_json(s->hosts, s->n_hosts),
                                                           "header", s->header));
                }
                json_object_set_new(network, "secrets", a);
        }
        if (ip->n_rules) {
                json_t *a = json_array();
                for (size_t i = 0; i < ip->n_rules; i++) {
                        const struct http_rule *r = &ip->rules[i];
                        json_array_append_new(a, json_pack("{s:s, s:o, s:o}", "host", r->host, "methods",
                                                           strings_json(r->methods, r->n_methods), "paths",
                                                           strings_json(r->paths, r->n_paths)));
                }
                json_object_set_new(network, "http_rules", a);
        }
        if (ip->n_upstream_cas)
                json_object_set_new(network, "upstream_ca", strings_json(ip->upstream_cas, ip->n_upstream_cas));
}

static void strings_free(char **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void intercept_policy_free(struct intercept_policy *ip)
{
        if (!ip)
                return;
        for (size_t i = 0; i < ip->n_secrets; i++) {
                free(ip->secrets[i].name);
                free(ip->secrets[i].source);
                free(ip->secrets[i].header);
                strings_free(ip->secrets[i].hosts, ip->secrets[i].n_hosts);
        }
        free(ip->secrets);
        for (size_t i = 0; i < ip->n_rules; i++) {
                free(ip->rules[i].host);
                strings_free(ip->rules[i].methods, ip->rules[i].n_methods);
                strings_free(ip->rules[i].paths, ip->rules[i].n_paths);
        }
        free(ip->rules);
        strings_free(ip->upstream_cas, ip->n_upstream_cas);
        free(ip);
}

/* ---- the run's secrets ----------------------------------------------------- */

static char *vault_take(struct intercept *k, size_t n)
{
        if (n > VAULT_SIZE - k->vault_used)
                return NULL;
        char *p = k->vault + k->vault_used;
        k->vault_used += n;
        return p;
}

static int read_value(struct intercept *k, struct secret *s, brig_error **err)
{
        const struct secret_spec *sp = s->spec;
        char *dst = vault_take(k, SECRET_VALUE_MAX + 1);
        if (!dst)
                return brig_err(err, ENOMEM, "--secret %s: too many secrets", sp->name);
        size_t len = 0;
        if (sp->source[0] == '@') {
                int fd = open(sp->source + 1, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return brig_err(err, errno, "--secret %s: cannot read '%s'", sp->name, sp->source + 1);
                for (;;) {
                        ssize_t n = read(fd, dst + len, SECRET_VALUE_MAX + 1 - len);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0) {
                                int e = errno;
                                close(fd);
                                return brig_err(err, e, "--secret %s: read '%s'", sp->name, sp->source + 1);
                        }
                        if (n == 0 || (len += (size_t)n) > SECRET_VALUE_MAX)
                                break;
                }
                close(fd);
        } else {
                const char *v = getenv(sp->source + 4);
                if (!v)
                        return brig_err(err, ENOENT, "--secret %s: environment variable %s is not set", sp->name,
                                        sp->source + 4);
                len = strlen(v);
                if (len <= SECRET_VALUE_MAX)
                        memcpy(dst, v, len);
        }
        if (len > SECRET_VALUE_MAX)
                return brig_err(err, EFBIG, "--secret %s: the value from %s is over %u bytes", sp->name, sp->source,
                                SECRET_VALUE_MAX);
        /* one line end, as editors and `echo` leave it */
        if (len && dst[len - 1] == '\n')
                len--;
        if (len && dst[len - 1] == '\r')
                len--;
        if (len == 0)
                return brig_err(err, EINVAL, "--secret %s: the value from %s is empty", sp->name, sp->source);
        /* It goes into a header line: no byte could end or fold it. */
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
                        return brig_err(err, EINVAL, "--secret %s: the value from %s holds a control character "
                                        "(a header could not carry it)", sp->name, sp->source);
        dst[len] = '\0';
        s->value = dst;
        s->value_len = len;
        return 0;
}

/* The base64 forms of s's value (struct secret): for k = 0, 1, 2 bytes
 * before it, the characters of the encoding of (k bytes, value) that hold
 * value bits only. A response holding one of them holds the value. */
static uint32_t run_hash(const char *p)
{
        uint64_t w;
        memcpy(&w, p, sizeof w);
        return (uint32_t)((w * 0x9e3779b97f4a7c15ull) >> (64 - ECHO_RUN_LOG2));
}

static void mark_runs(struct secret *s, const char *form, size_t n)
{
        for (size_t i = 0; i + ECHO_RUN <= n; i++) {
                uint32_t h = run_hash(form + i);
                s->runs[h / 8] |= (uint8_t)(1u << (h % 8));
        }
}

static int value_b64(struct intercept *k, struct secret *s, brig_error **err)
{
        if (s->value_len < 8)
                return 0;  /* a core of 8 characters or fewer matches by chance */
        size_t in_cap = s->value_len + 2;
        _cleanup_free_ unsigned char *in = malloc(in_cap);
        if (!in)
                return brig_err(err, ENOMEM, "--secret %s", s->spec->name);
        for (size_t pre = 0; pre < 3; pre++) {
                size_t n = pre + s->value_len, enc_len = 4 * ((n + 2) / 3);
                char *out = vault_take(k, enc_len + 1);
                if (!out) {
                        explicit_bzero(in, in_cap);
                        return brig_err(err, ENOMEM, "--secret %s: too many secrets", s->spec->name);
                }
                memset(in, 0, pre);
                memcpy(in + pre, s->value, s->value_len);
                (void)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
                /* a character is the value's alone when its 6 bits lie
                 * past the prefix's 8 * pre and before the value's end */
                size_t first = (8 * pre + 5) / 6, last = 8 * n / 6;
                memmove(out, out + first, last - first);
                explicit_bzero(out + (last - first), enc_len + 1 - (last - first));
                s->b64[pre] = out;
                s->b64_len[pre] = last - first;
        }
        explicit_bzero(in, in_cap);
        return 0;
}

/* The hex forms of s's value (lower and upper case), and for a value of
 * ECHO_PARTIAL_FROM bytes or more the bitmap of its 8-byte runs (echo_find). */
static int value_forms(struct intercept *k, struct secret *s, brig_error **err)
{
        static const char digits[2][17] = { "0123456789abcdef", "0123456789ABCDEF" };
        for (size_t c = 0; c < 2 && s->value_len >= 8; c++) {  /* shorter: as base64, matched by chance */
                char *out = vault_take(k, 2 * s->value_len + 1);
                if (!out)
                        return brig_err(err, ENOMEM, "--secret %s: too many secrets", s->spec->name);
                for (size_t i = 0; i < s->value_len; i++) {
                        out[2 * i] = digits[c][(unsigned char)s->value[i] >> 4];
                        out[2 * i + 1] = digits[c][(unsigned char)s->value[i] & 15];
                }
                s->hex[c] = out;
        }
        s->hex_len = s->hex[0] ? 2 * s->value_len : 0;
        if (s->value_len < ECHO_RUN)
                return 0;  /* searched for whole, as it is */
        if (s->value_len >= ECHO_PARTIAL_FROM) {
                s->partial = (s->value_len + 1) / 2;
                if (s->partial < ECHO_PARTIAL_MIN)
                        s->partial = ECHO_PARTIAL_MIN;
        }
        /* every form holds an 8-byte run at a multiple of `step` wherever
         * it lies: the shortest thing searched for (the value or a run
         * of `partial` of it) is step + 7 bytes long */
        s->step = (s->partial ? s->partial : s->value_len) - ECHO_RUN + 1;
        s->runs = (uint8_t *)vault_take(k, ECHO_RUN_BITS / 8);
        if (!s->runs)
                return brig_err(err, ENOMEM, "--secret %s: too many secrets", s->spec->name);
        mark_runs(s, s->value, s->value_len);
        for (size_t j = 0; j < ARRAY_SIZE(s->b64); j++)
                if (s->b64[j])
                        mark_runs(s, s->b64[j], s->b64_len[j]);
        for (size_t j = 0; j < ARRAY_SIZE(s->hex); j++)
                if (s->hex[j])
                        mark_runs(s, s->hex[j], s->hex_len);
        return 0;
}

struct intercept *intercept_new(const struct intercept_policy *ip, const struct egress_policy *ep, brig_error **err)
{
        (void)ep;
        if (!ip || (!ip->n_secrets && !ip->n_rules))
                return NULL;
        if (intercept_policy_check(ip, err) < 0)
                return NULL;
        /* the TLS that --secret and --http-rule need: OpenSSL, loaded now */
        if (ossl_load(err) < 0) {
                brig_err_prefix(err, "%s", ip->n_secrets ? "--secret" : "--http-rule");
                return NULL;
        }
        struct intercept *ic = calloc(1, sizeof *ic);
        if (!ic || intercept_init(ic) < 0) {
                free(ic);
                brig_err(err, ENOMEM, "secrets");
                return NULL;
        }
        struct intercept *k = ic;
        k->policy = ip;
        k->vault = mmap(NULL, VAULT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (k->vault == MAP_FAILED) {
                k->vault = NULL;
                brig_err(err, errno, "secrets: mmap");
                goto fail;
        }
        /* Fail closed: without both, a value could reach a core file or the
         * sandbox's pid 1 (a copy of this process). */
        if (madvise(k->vault, VAULT_SIZE, MADV_DONTDUMP) < 0 || madvise(k->vault, VAULT_SIZE, MADV_WIPEONFORK) < 0) {
                brig_err(err, errno, "secrets: madvise (MADV_DONTDUMP, MADV_WIPEONFORK; Linux 4.14+)");
                goto fail;
        }
        (void)mlock(k->vault, VAULT_SIZE);  /* not swapped out where the limit allows */
        for (size_t i = 0; i < ip->n_secrets; i++) {
                struct secret *s = &k->secrets[k->n++];
                s->spec = &ip->secrets[i];
                uint8_t rnd[16];
                if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
                        brig_err(err, errno, "secrets: getrandom");
                        goto fail;
                }
                for (size_t j = 0; j < sizeof rnd; j++)
                        snprintf(s->token + 2 * j, 3, "%02x", rnd[j]);
                char ph[sizeof s->placeholder];
                snprintf(ph, sizeof ph, "brig-secret-%s-%s", s->spec->name, s->token);
                memcpy(s->placeholder, ph, sizeof ph);
                if (read_value(k, s, err) < 0 || value_b64(k, s, err) < 0 || value_forms(k, s, err) < 0)
                        goto fail;
        }
        char *pem = NULL, *keybuf = vault_take(k, 4096);
        k->ca = keybuf ? tls_ca_new(&pem, keybuf, 4096, err) : NULL;
        if (!k->ca) {
                if (!keybuf)
                        brig_err(err, ENOMEM, "secrets: the vault");
                goto fail;
        }
        k->ca_pem = pem;
        /* A bad --upstream-ca is an error before anything runs, not a 502
         * later (the host's store itself is loaded on first use). */
        for (size_t i = 0; i < ip->n_upstream_cas; i++)
                if (!tls_cafile_ok(ip->upstream_cas[i])) {
                        brig_err(err, EINVAL, "--upstream-ca %s: not a readable PEM file of certificates",
                                 ip->upstream_cas[i]);
                        goto fail;
                }
        return ic;
fail:
        intercept_free(ic);
        return NULL;
}

void intercept_free(struct intercept *ic)
{
        if (!ic)
                return;
        intercept_stop(ic);
        struct intercept *k = ic;
        tls_ca_free(k->ca);
        free(k->ca_pem);
        if (k->vault) {
                explicit_bzero(k->vault, VAULT_SIZE);
                munlock(k->vault, VAULT_SIZE);
                munmap(k->vault, VAULT_SIZE);
        }
        intercept_fini(ic);
        free(ic);
}

size_t intercept_secret_count(const struct intercept *ic)
{
        return ic ? ((struct intercept *)ic)->n : 0;
}

const struct secret *intercept_secret(const struct intercept *ic, size_t i)
{
        return &((struct intercept *)ic)->secrets[i];
}

const char *intercept_ca_pem(const struct intercept *ic)
{
        return ic ? ((struct intercept *)ic)->ca_pem : NULL;
}

struct tls_ca *intercept_ca(struct intercept *ic)
{
        return ic->ca;
}

const struct intercept_policy *intercept_policy_of(const struct intercept *ic)
{
        return ((struct intercept *)ic)->policy;
}

void intercept_scrub_environ(const struct intercept_policy *ip)
{
        extern char **environ;
        for (size_t i = 0; ip && i < ip->n_secrets; i++) {
                const char *src = ip->secrets[i].source;
                if (strncmp(src, "env:", 4) != 0)
                        continue;
                size_t n = strlen(src + 4);
                for (char **e = environ; e && *e; e++)
                        if (strncmp(*e, src + 4, n) == 0 && (*e)[n] == '=')
                                explicit_bzero(*e + n + 1, strlen(*e + n + 1));
        }
}

/* ---- finding and swapping -------------------------------------------------- */

static const char *find_ci(const char *buf, size_t len, const char *needle, size_t n)
{
        for (size_t i = 0; i + n <= len; i++)
                if (tolower((unsigned char)buf[i]) == needle[0] && strncasecmp(buf + i, needle, n) == 0)
                        return buf + i;
        return NULL;
}

const struct secret *intercept_find(const struct intercept *ic, const char *buf, size_t len, size_t *at)
{
        const struct intercept *k = ic ? ((struct intercept *)ic) : NULL;
        const struct secret *best = NULL;
        size_t where = 0;
        for (size_t i = 0; k && i < k->n; i++) {
                const char *p = find_ci(buf, len, k->secrets[i].token, sizeof k->secrets[i].token - 1);
                if (p && (!best || (size_t)(p - buf) < where)) {
                        best = &k->secrets[i];
                        where = (size_t)(p - buf);
                }
        }
        if (at)
                *at = where;
        return best;
}

/* ---- echoes of a value in a response ---------------------------------------- */

static int hexval(char c)
{
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                                                           : -1;
}

static long hex_at(const char *p, size_t n, size_t digits)
{
        if (n < digits)
                return -1;
        long v = 0;
        for (size_t i = 0; i < digits; i++) {
                int d = hexval(p[i]);
                if (d < 0)
                        return -1;
                v = v * 16 + d;
        }
        return v;
}

static size_t put_utf8(char *out, long cp)
{
        if (cp < 0x80) {
                out[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char)(0xc0 | (cp >> 6));
                out[1] = (char)(0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char)(0xe0 | (cp >> 12));
                out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char)(0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char)(0xf0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
}

size_t echo_decode(const char *p, size_t n, char *out)
{
        size_t o = 0;
        for (size_t i = 0; i < n;) {
                long v;
                if (p[i] == '%' && (v = hex_at(p + i + 1, n - i - 1, 2)) >= 0) {
                        out[o++] = (char)v;
                        i += 3;
                } else if (p[i] == '\\' && i + 1 < n && p[i + 1] == 'x' && (v = hex_at(p + i + 2, n - i - 2, 2)) >= 0) {
                        out[o++] = (char)v;
                        i += 4;
                } else if (p[i] == '\\' && i + 1 < n && p[i + 1] == 'u' && (v = hex_at(p + i + 2, n - i - 2, 4)) >= 0) {
                        i += 6;
                        long lo;
                        if (v >= 0xd800 && v < 0xdc00 && i + 1 < n && p[i] == '\\' && p[i + 1] == 'u' &&
                            (lo = hex_at(p + i + 2, n - i - 2, 4)) >= 0xdc00 && lo < 0xe000) {
                                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
                                i += 6;
                        }
                        o += put_utf8(out + o, v);
                } else if (p[i] == '\\' && i + 1 < n && strchr("\"\\/", p[i + 1]) && p[i + 1]) {
                        out[o++] = p[i + 1];
                        i += 2;
                } else {
                        out[o++] = p[i++];
                }
        }
        return o;
}

/* The run of the value's bytes around p[i..i+8), if that is one: is it
 * s->partial long or more? */
static bool partial_at(const struct secret *s, const char *p, size_t n, size_t i)
{
        for (const char *v = s->value, *end = s->value + s->value_len;
             (v = memmem(v, (size_t)(end - v), p + i, ECHO_RUN)); v++) {
                size_t at = (size_t)(v - s->value), back = 0, fwd = ECHO_RUN;
                while (back < at && back < i && s->value[at - back - 1] == p[i - back - 1])
                        back++;
                while (at + fwd < s->value_len && i + fwd < n && s->value[at + fwd] == p[i + fwd])
                        fwd++;
                if (back + fwd >= s->partial)
                        return true;
        }
        return false;
}

static bool whole_in(const struct secret *s, const char *p, size_t n)
{
        if (memmem(p, n, s->value, s->value_len))
                return true;
        for (size_t j = 0; j < ARRAY_SIZE(s->b64); j++)
                if (s->b64[j] && memmem(p, n, s->b64[j], s->b64_len[j]))
                        return true;
        for (size_t j = 0; j < ARRAY_SIZE(s->hex); j++)
                if (s->hex[j] && memmem(p, n, s->hex[j], s->hex_len))
                        return true;
        return false;
}

/* One pass: every form of the value (and every run of `partial` of it)
 * holds an 8-byte run starting at a multiple of s->step, so only those
 * are looked up in the bitmap of the forms' runs; a hit is searched for
 * exactly in the bytes around it. */
static bool echo_in(const struct secret *s, const char *p, size_t n)
{
        if (!s->runs)
                return memmem(p, n, s->value, s->value_len) != NULL;
        size_t reach = s->hex_len > s->value_len ? s->hex_len : s->value_len;
        for (size_t j = 0; j < ARRAY_SIZE(s->b64); j++)
                if (s->b64_len[j] > reach)
                        reach = s->b64_len[j];
        for (size_t i = 0; i + ECHO_RUN <= n; i += s->step) {
                uint32_t h = run_hash(p + i);
                if (!(s->runs[h / 8] & (1u << (h % 8))))
                        continue;
                size_t lo = i > reach ? i - reach : 0, hi = n - i > reach + ECHO_RUN ? i + reach + ECHO_RUN : n;
                if (whole_in(s, p + lo, hi - lo) || (s->partial && partial_at(s, p, n, i)))
                        return true;
        }
        return false;
}

const struct secret *echo_find(const struct intercept *ic, const char *host, const char *p, size_t n, char *scratch)
{
        bool coded = memchr(p, '%', n) || memchr(p, '\\', n);
        size_t dn = coded ? echo_decode(p, n, scratch) : 0;
        for (size_t i = 0; ic && i < ic->n; i++) {
                const struct secret *s = &ic->secrets[i];
                if (!secret_bound_to(s, host))
                        continue;  /* never sent there: nothing to echo */
                if (echo_in(s, p, n) || (coded && echo_in(s, scratch, dn)))
                        return s;
        }
        return NULL;
}

size_t echo_longest(const struct intercept *ic, const char *host)
{
        size_t m = 0;
        for (size_t i = 0; ic && i < ic->n; i++)
                if (secret_bound_to(&ic->secrets[i], host) && ECHO_CODED_MAX * ic->secrets[i].value_len > m)
                        m = ECHO_CODED_MAX * ic->secrets[i].value_len;
        return m;
}

/* The token split across the seam: the last bytes before and the first
 * of this piece, searched together. */
static const struct secret *scan_data(const struct intercept *ic, struct placeholder_scan *ps, const char *p,
                                      size_t n)
{
        const struct secret *s = intercept_find(ic, p, n, NULL);
        if (!s && ps->len) {
                char joint[2 * PLACEHOLDER_SEAM];
                size_t k = n < PLACEHOLDER_SEAM ? n : PLACEHOLDER_SEAM;
                memcpy(joint, ps->tail, ps->len);
                memcpy(joint + ps->len, p, k);
                s = intercept_find(ic, joint, ps->len + k, NULL);
        }
        /* keep the last PLACEHOLDER_SEAM bytes: of p, and those held before if p is short */
        size_t keep = n < PLACEHOLDER_SEAM ? n : PLACEHOLDER_SEAM, old = PLACEHOLDER_SEAM - keep;
        if (old > ps->len)
                old = ps->len;
        memmove(ps->tail, ps->tail + ps->len - old, old);
        memcpy(ps->tail + old, p + n - keep, keep);
        ps->len = old + keep;
        return s;
}

const struct secret *placeholder_scan(const struct intercept *ic, struct placeholder_scan *ps, const char *p,
                                      size_t n)
{
        if (!ic || !ic->n)
                return NULL;
        if (!ps->chunked)
                return scan_data(ic, ps, p, n);
        /* the chunks' data alone: the framing between two halves would hide a token */
        size_t used = 0;
        while (used < n && !ps->ch.done) {
                uint64_t data = http_chunk_data_left(&ps->ch);
                size_t m = !data ? 1 : n - used < data ? n - used : (size_t)data;
                if (http_chunk_feed(&ps->ch, p + used, m) != (ssize_t)m)
                        return NULL;  /* bad framing: the relay's own parser refuses it */
                const struct secret *s = data ? scan_data(ic, ps, p + used, m) : NULL;
                if (s)
                        return s;
                used += m;
        }
        return NULL;
}

const struct secret *intercept_in_name(const struct intercept *ic, const char *name)
{
        return name ? intercept_find(ic, name, strlen(name), NULL) : NULL;
}

bool secret_bound_to(const struct secret *s, const char *host)
{
        for (size_t i = 0; host && i < s->spec->n_hosts; i++)
                if (egress_pattern_match(s->spec->hosts[i], host))
                        return true;
        return false;
}

bool intercept_wants(const struct intercept *ic, const char *host, uint16_t port)
{
        (void)port;
        if (!ic || !host || !host[0])
                return false;  /* a literal address: nothing verifies a name for it */
        const struct intercept *k = ((struct intercept *)ic);
        for (size_t i = 0; i < k->n; i++)
                if (secret_bound_to(&k->secrets[i], host))
                        return true;
        return http_rules_cover(k->policy, host);
}

struct head_out {
        char *buf;
        size_t len, cap;
        bool oom;
};

static void out_add(struct head_out *o, const char *s, size_t n)
{
        if (o->oom)
                return;
        if (o->len + n + 1 > o->cap) {
                size_t cap = (o->len + n + 1) * 2;
                char *b = malloc(cap);
                if (!b) {
                        o->oom = true;
                        return;
                }
                if (o->buf) {
                        memcpy(b, o->buf, o->len);
                        explicit_bzero(o->buf, o->cap);  /* it may hold a value already */
                        free(o->buf);
                }
                o->buf = b;
                o->cap = cap;
        }
        memcpy(o->buf + o->len, s, n);
        o->len += n;
        o->buf[o->len] = '\0';
}

static void out_free(struct head_out *o)
{
        if (o->buf)
                explicit_bzero(o->buf, o->cap);
        free(o->buf);
        o->buf = NULL;
}

/* In text[0..n): every placeholder of s swapped into out; false when the
 * token appears without its whole placeholder (a part of one). */
static bool swap_into(struct head_out *o, const struct secret *s, const char *text, size_t n)
{
        size_t pl = strlen(s->placeholder), tl = sizeof s->token - 1;
        size_t i = 0;
        while (i < n) {
                const char *p = find_ci(text + i, n - i, s->placeholder, pl);
                const char *t = find_ci(text + i, n - i, s->token, tl);
                if (!p) {
                        if (t)
                                return false;
                        out_add(o, text + i, n - i);
                        return true;
                }
                if (t && t < p + pl - tl)
                        return false;
                /* exactly as handed out: the token's case too */
                if (memcmp(p, s->placeholder, pl) != 0)
                        return false;
                out_add(o, text + i, (size_t)(p - (text + i)));
                out_add(o, s->value, s->value_len);
                i = (size_t)(p - text) + pl;
        }
        return true;
}

static bool header_named(const char *line, size_t k, const char *name)
{
        return strlen(name) == k && strncasecmp(line, name, k) == 0;
}

static void refuse_exfil(struct intercept_verdict *v, const struct secret *s, const char *where, const char *host)
{
        v->status = 403;
        v->secret = s;
        snprintf(v->reason, sizeof v->reason, "exfiltration: the placeholder of secret %s %s%s%s", s->spec->name,
                 where, host ? " to " : "", host ? host : "");
}

/* The audit's path: normalised, placeholders shown as {NAME}. */
static void audit_path(const struct intercept *ic, const char *path, size_t n, char *out, size_t size)
{
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < size;) {
                /* a whole placeholder, or its token alone, at i */
                size_t skip = 0;
                const struct secret *s = NULL;
                for (size_t k = 0; ic && k < ic->n && !skip; k++) {
                        const struct secret *c = &ic->secrets[k];
                        size_t pl = strlen(c->placeholder), tl = sizeof c->token - 1;
                        if (n - i >= pl && strncasecmp(path + i, c->placeholder, pl) == 0)
                                skip = pl;
                        else if (n - i >= tl && strncasecmp(path + i, c->token, tl) == 0)
                                skip = tl;
                        s = skip ? c : NULL;
                }
                if (s) {
                        int w = snprintf(out + o, size - o, "{%s}", s->spec->name);
                        o = w > 0 && (size_t)w < size - o ? o + (size_t)w : size - 1;
                        i += skip;
                        continue;
                }
                unsigned char c = (unsigned char)path[i++];
                out[o++] = c >= 0x21 && c < 0x7f ? (char)c : '?';
        }
        out[o < size ? o : size - 1] = '\0';
}

/* The name a Host header's value gives (its port aside) into out
 * (normalised), or false when it gives none. */
static bool host_header_name(const char *val, size_t vl, char out[EGRESS_HOST_MAX + 1])
{
        while (vl && (val[vl - 1] == ' ' || val[vl - 1] == '\t'))
                vl--;
        const char *colon = memchr(val, ':', vl);
        size_t n = colon ? (size_t)(colon - val) : vl;
        for (size_t i = n + 1; colon && i < vl; i++)
                if (!isdigit((unsigned char)val[i]))
                        return false;
        return n && (!colon || vl - n - 1 <= 5) && egress_host_normalize(val, n, out);
}

/* An Authorization: Basic value decoded, the placeholder swapped, encoded
 * again into o. Returns 1 swapped, 0 no placeholder, -1 refused. */
static int basic_swap(struct head_out *o, const struct intercept *ic, const char *val, size_t n, bool may,
                      const struct secret **who)
{
        if (n < 6 || strncasecmp(val, "basic ", 6) != 0)
                return 0;
        const char *b64 = val + 6;
        size_t bl = n - 6;
        while (bl && (*b64 == ' ' || *b64 == '\t'))
                b64++, bl--;
        if (bl == 0 || bl > 4096 || bl % 4)
                return 0;
        unsigned char dec[3 * 4096 / 4 + 4];
        int dl = EVP_DecodeBlock(dec, (const unsigned char *)b64, (int)bl);
        if (dl < 0)
                return 0;
        if (b64[bl - 1] == '=')
                dl--;
        if (bl > 1 && b64[bl - 2] == '=')
                dl--;
        size_t at;
        const struct secret *s = intercept_find(ic, (const char *)dec, (size_t)dl, &at);
        if (!s)
                return 0;
        *who = s;
        if (!may)
                return -1;
        struct head_out plain = { 0 };
        bool ok = swap_into(&plain, s, (const char *)dec, (size_t)dl) && !plain.oom &&
                  !intercept_find(ic, plain.buf, plain.len, NULL);
        explicit_bzero(dec, sizeof dec);
        if (!ok) {
                out_free(&plain);
                return -1;
        }
        size_t cap = 4 * ((plain.len + 2) / 3) + 1;
        _cleanup_free_ unsigned char *enc = malloc(cap);
        if (!enc) {
                out_free(&plain);
                o->oom = true;
                return -1;
        }
        int el = EVP_EncodeBlock(enc, (const unsigned char *)plain.buf, (int)plain.len);
        out_free(&plain);
        out_add(o, "Basic ", 6);
        out_add(o, (const char *)enc, (size_t)el);
        explicit_bzero(enc, cap);
        return 1;
}

void intercept_judge_head(const struct intercept *ic, const struct intercept_policy *ip, const char *host,
                          bool verified, const char *buf, const struct http_request *req,
                          struct intercept_verdict *v)
{
        memset(v, 0, sizeof *v);
        char norm[1024];
        const char *path = buf + req->path_off;
        size_t plen = req->path_len;
        audit_path(ic, path, plen, v->path, sizeof v->path);
        /* the name the request claims must be the connection's */
        char claimed[EGRESS_HOST_MAX + 1] = "";
        if (req->host[0] && !egress_host_normalize(req->host, strlen(req->host), claimed))
                claimed[0] = '\0';
        if (host && strcmp(claimed, host) != 0) {  /* Host, or an absolute-form target's */
                v->status = 403;
                snprintf(v->reason, sizeof v->reason, "the request names host '%s', not %s, the host of its TLS "
                         "connection", claimed[0] ? claimed : "?", host);
                return;
        }
        const char *name = host ? host : claimed;
        if (http_rules_cover(ip, name)) {
                const char *bad = http_path_normalize(path, plen, norm, sizeof norm);
                if (bad) {
                        v->status = 403;
                        snprintf(v->reason, sizeof v->reason, "http_rules for %s: %s", name, bad);
                        return;
                }
                if (!http_rules_allow(ip, name, req->method, norm, v->reason, sizeof v->reason)) {
                        v->status = 403;
                        return;
                }
                /* A GET or HEAD body has no meaning (RFC 9110 9.3.1), and a
                 * server that does not read it takes it for the next request
                 * on the connection: one brig never judged. */
                if ((strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0) &&
                    (req->has_te || req->length > 0)) {
                        v->status = 403;
                        snprintf(v->reason, sizeof v->reason, "http_rules for %.180s: a %.4s request with a body (a server "
                                 "that ignores it would read it as a request of its own)", name, req->method);
                        return;
                }
        }
        size_t at;
        const struct secret *s;
        /* The request line: a placeholder in the URL is never sent on. */
        size_t line_end = req->line_off;
        while (line_end < req->head_len && buf[line_end] != '\n')
                line_end++;
        if ((s = intercept_find(ic, buf + req->line_off, line_end - req->line_off, &at))) {
                refuse_exfil(v, s, "in the URL", name);
                return;
        }
        struct head_out o = { 0 };
        size_t rl = line_end - req->line_off;
        if (rl && buf[req->line_off + rl - 1] == '\r')
                rl--;
        out_add(&o, buf + req->line_off, rl);
        out_add(&o, "\r\n", 2);  /* every line ends as RFC 9112 writes it */
        /* A bound host answers uncompressed: its responses are searched for
         * the values, which gzip would hide (intercept.c refuses a coded
         * response from it). */
        bool identity = false;
        for (size_t i = 0; ic && host && i < ic->n && !identity; i++)
                identity = secret_bound_to(&ic->secrets[i], host);
        for (size_t pos = line_end + 1; pos < req->head_len;) {
                const char *nl = memchr(buf + pos, '\n', req->head_len - pos);
                size_t end = nl ? (size_t)(nl - buf) + 1 : req->head_len;
                const char *line = buf + pos;
                size_t n = end - pos, body = n;
                while (body && (line[body - 1] == '\n' || line[body - 1] == '\r'))
                        body--;
                const char *colon = memchr(line, ':', body);
                if (!colon) {  /* the blank line */
                        if (identity)
                                out_add(&o, "Accept-Encoding: identity\r\n", 27);
                        out_add(&o, "\r\n", 2);
                        pos = end;
                        continue;
                }
                size_t k = (size_t)(colon - line);
                if (identity && (header_named(line, k, "accept-encoding") || header_named(line, k, "te"))) {
                        pos = end;
                        continue;
                }
                const char *val = colon + 1;
                size_t vl = body - k - 1;
                while (vl && (*val == ' ' || *val == '\t'))
                        val++, vl--;
                /* An absolute-form target named the host above; a Host
                 * header beside it must too: a front end shared by many
                 * names may route by Host (domain fronting). */
                char named[EGRESS_HOST_MAX + 1];
                if (host && header_named(line, k, "host") &&
                    (!host_header_name(val, vl, named) || strcmp(named, host) != 0)) {
                        out_free(&o);
                        v->status = 403;
                        int w = snprintf(v->reason, sizeof v->reason, "the request names host '%.64s' in its Host "
                                         "header, not %s, the host of its TLS connection",
                                         host_header_name(val, vl, named) ? named : "?", host);
                        (void)w;  /* cut short for a long name: the reason says enough */
                        return;
                }
                s = intercept_find(ic, line, body, &at);
                bool auth = header_named(line, k, "authorization");
                const struct secret *b = NULL;
                /* may it go here? its header, a bound host, verified TLS */
                const struct secret *cand = s;
                if (!cand && auth) {
                        struct head_out probe = { 0 };
                        (void)basic_swap(&probe, ic, val, vl, false, &cand);
                        out_free(&probe);
                }
                if (!cand) {
                        out_add(&o, line, body);
                        out_add(&o, "\r\n", 2);
                        pos = end;
                        continue;
                }
                bool here = header_named(line, k, cand->spec->header);
                bool may = here && verified && host && secret_bound_to(cand, host);
                if (!may) {
                        char where[128];
                        if (!here)
                                snprintf(where, sizeof where, "in header %.*s (it may go in %s only)", (int)(k > 64 ? 64 : k),
                                         line, cand->spec->header);
                        else if (!host || !verified)
                                snprintf(where, sizeof where, "over plain http (only TLS the proxy verified carries it)");
                        else
                                snprintf(where, sizeof where, "to a host it is not bound to (--secret-host %s=...)",
                                         cand->spec->name);
                        out_free(&o);
                        refuse_exfil(v, cand, where, name);
                        return;
                }
                out_add(&o, line, k + 1);
                out_add(&o, " ", 1);
                int r = auth ? basic_swap(&o, ic, val, vl, true, &b) : 0;
                if (r == 0 && !swap_into(&o, cand, val, vl))
                        r = -1;
                if (r < 0 || o.oom) {
                        out_free(&o);
                        refuse_exfil(v, cand, "in a form brig does not swap (part of the placeholder)", name);
                        return;
                }
                out_add(&o, "\r\n", 2);
                pos = end;
        }
        if (o.oom) {
                out_free(&o);
                v->status = 503;
                snprintf(v->reason, sizeof v->reason, "out of memory");
                return;
        }
        v->head = o.buf;
        v->head_len = o.len;
}
