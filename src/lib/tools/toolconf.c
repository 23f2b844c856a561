/* toolconf.c — the texts brig generates for the tools inside (tools.c,
 * docs/tools.md): the sandbox's passwd database, and the host's npm, pip
 * and git settings with everything that could carry a credential left
 * out. Pure functions of their input (unit-tested in tests/unit/test_tools.c):
 * an allow list of keys, never a deny list, so a key npm or pip adds
 * tomorrow stays out until someone puts it on the list. */
#define _GNU_SOURCE
#include "tools/tools.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

struct buf {
        char *s;
        size_t n, cap;
        bool oom;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
        if (b->oom)
                return;
        if (b->n + n + 1 > b->cap) {
                size_t cap = (b->n + n + 1) * 2;
                char *g = realloc(b->s, cap);
                if (!g) {
                        b->oom = true;
                        return;
                }
                b->s = g;
                b->cap = cap;
        }
        memcpy(b->s + b->n, s, n);
        b->n += n;
        b->s[b->n] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
        buf_add(b, s, strlen(s));
}

static char *buf_take(struct buf *b)
{
        if (b->oom || !b->s) {
                free(b->s);
                return b->oom ? NULL : strdup("");
        }
        return b->s;
}

/* The passwd database the sandbox sees: the host's, with the sandbox
 * user's home replaced by the sandbox's $HOME, or a line added for a uid
 * the host does not list. NULL when HOME cannot stand in a passwd line. */
char *tools_passwd_for(const char *passwd, size_t len, uid_t uid, gid_t gid, const char *name, const char *home)
{
        if (strpbrk(home, ":\n"))
                return NULL;
        struct buf b = { 0 };
        bool found = false;
        for (size_t at = 0; at < len;) {
                const char *line = passwd + at;
                const char *nl = memchr(line, '\n', len - at);
                size_t n = nl ? (size_t)(nl - line) : len - at;
                at += n + (nl ? 1 : 0);
                /* name:pw:uid:gid:gecos:home:shell */
                const char *f[7];
                size_t k = 0;
                f[k++] = line;
                for (size_t i = 0; i < n && k < 7; i++)
                        if (line[i] == ':')
                                f[k++] = line + i + 1;
                char num[16];
                int w = snprintf(num, sizeof num, "%u:", uid);
                if (!found && k == 7 && strncmp(f[2], num, (size_t)w) == 0) {
                        found = true;
                        buf_add(&b, line, (size_t)(f[5] - line));
                        buf_str(&b, home);
                        buf_add(&b, f[6] - 1, (size_t)(line + n - (f[6] - 1)));
                } else {
                        buf_add(&b, line, n);
                }
                buf_str(&b, "\n");
        }
        if (!found) {
                char extra[512];
                snprintf(extra, sizeof extra, "%s:x:%u:%u:brig sandbox user:%s:/bin/sh\n", name, uid, gid, home);
                buf_str(&b, extra);
        }
        return buf_take(&b);
}

static const char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = '\0';
        return s;
}

/* The next line of TEXT from *AT on, a new string; NULL for a line with a
 * NUL in it (not text) or when out of memory (b->oom, and *AT at the end). */
static char *next_line(const char *text, size_t len, size_t *at, struct buf *b)
{
        const char *nl = memchr(text + *at, '\n', len - *at);
        size_t n = nl ? (size_t)(nl - (text + *at)) : len - *at;
        char *line = strndup(text + *at, n);
        *at += n + (nl ? 1 : 0);
        if (!line) {
                b->oom = true;
                *at = len;
        } else if (strlen(line) != n) {
                free(line);
                line = NULL;
        }
        return line;
}

/* A URL with user or password in it ("https://u:tok@host/") carries a credential. */
static bool url_has_credentials(const char *v)
{
        const char *s = strstr(v, "://");
        if (!s)
                return strchr(v, '@') != NULL;
        s += 3;
        size_t host = strcspn(s, "/?#");
        return memchr(s, '@', host) != NULL;
}

static bool key_in(const char *key, const char *const *list)
{
        for (size_t i = 0; list[i]; i++)
                if (strcmp(key, list[i]) == 0)
                        return true;
        return false;
}

/* Why VALUE of an allowed KEY stays out, or NULL. */
static const char *value_refused(const char *value)
{
        if (url_has_credentials(value))
                return "a URL with credentials";
        if (strstr(value, "${"))
                return "refers to an environment variable";
        return NULL;
}

/* Does one run of letters and digits read as a word of a key ("registry",
 * "authToken", "Example", "http2", "8080"), not as a token? Words are
 * lower case or camelCase with a few digits at the end; base64 and hex
 * (upper case letters in a row, digits between letters) and anything
 * longer than any key's word are not. */
static bool word_like(const char *w, size_t n)
{
        if (n > 24)
                return false;
        size_t digits = 0;
        while (digits < n && isdigit((unsigned char)w[n - 1 - digits]))
                digits++;
        if (digits == n)
                return n <= 5;
        if (digits > 3)
                return false;
        for (size_t i = 1; i < n - digits; i++)
                if (!islower((unsigned char)w[i]) && !(isupper((unsigned char)w[i]) && i + 1 < n - digits &&
                                                      islower((unsigned char)w[i + 1])))
                        return false;
        return isalpha((unsigned char)w[0]);
}

/* KEY as the host file spells it could be a bare token with '=' in it
 * (base64's padding): name it only when each of its words reads as one. */
static bool key_like(const char *key)
{
        size_t n = strlen(key);
        if (!n || n > 128 || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@/:._-") != n)
                return false;
        for (size_t at = 0; at < n;) {
                size_t w = strspn(key + at, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
                if (w && !word_like(key + at, w))
                        return false;
                at += w ? w : 1;
        }
        return true;
}

/* Name what was left out: a key by its name when it reads as one (never
 * its value); anything else — a line that is no key, a "key" that looks
 * like a token — only by what it is not. */
static void left_out(struct buf *b, const char *key, const char *why)
{
        char line[512];
        if (key && key_like(key))
                snprintf(line, sizeof line, "# brig left out '%s' (%s)\n", key, why);
        else
                snprintf(line, sizeof line, "# brig left out a line (%s)\n", why);
        buf_str(b, line);
}

static const char *const npm_keys[] = {
        "registry", "strict-ssl", "fetch-retries", "fetch-retry-factor", "fetch-retry-mintimeout",
        "fetch-retry-maxtimeout", "fetch-timeout", "save-exact", "save-prefix", "engine-strict",
        "legacy-peer-deps", "audit", "fund", "progress", "loglevel", "update-notifier", "package-lock",
        "prefer-offline", "prefer-online", "ignore-scripts", "omit", "include", "lockfile-version", NULL,
};

/* ~/.npmrc: only keys on the allow list ("@scope:registry" too), each
 * value without credentials; every key left out is named in a comment
 * (never its value). Auth keys (_authToken, _auth, _password, username,
 * certfile/keyfile, "//host/:..." per-registry settings) are not on it. */
char *tools_filter_npmrc(const char *text, size_t len)
{
        struct buf b = { 0 };
        buf_str(&b, "# generated by brig --carry-config npm from the host's ~/.npmrc: non-secret keys only\n");
        for (size_t at = 0; at < len;) {
                _cleanup_free_ char *line = next_line(text, len, &at, &b);
                if (!line)
                        continue;
                char *s = (char *)trim(line);
                if (!*s || *s == '#' || *s == ';')
                        continue;
                char *eq = strchr(s, '=');
                if (!eq) {
                        left_out(&b, NULL, "not key=value");
                        continue;
                }
                *eq = '\0';
                const char *key = trim(s), *value = trim(eq + 1);
                size_t kl = strlen(key);
                bool scoped = key[0] == '@' && kl > 10 && strcmp(key + kl - 9, ":registry") == 0 &&
                              !strpbrk(key, "/ ");
                const char *why = !key_in(key, npm_keys) && !scoped ? "not on brig's allow list of npm keys"
                                                                    : value_refused(value);
                if (why) {
                        left_out(&b, key, why);
                        continue;
                }
                buf_str(&b, key);
                buf_str(&b, "=");
                buf_str(&b, value);
                buf_str(&b, "\n");
        }
        return buf_take(&b);
}

static const char *const pip_keys[] = {
        "index-url", "extra-index-url", "trusted-host", "timeout", "default-timeout", "retries",
        "disable-pip-version-check", "prefer-binary", "only-binary", "no-binary", "break-system-packages",
        "require-virtualenv", "progress-bar", "no-input", "no-cache-dir", "find-links", "pre", "no-color",
        "quiet", "verbose", "upgrade-strategy", "use-pep517", "no-build-isolation", NULL,
};

/* pip.conf: sections kept, keys on the allow list (index URLs, trusted
 * hosts, timeouts), values and continuation lines without credentials;
 * client certificates and keyring settings stay out. */
char *tools_filter_pip_conf(const char *text, size_t len)
{
        struct buf b = { 0 };
        buf_str(&b, "# generated by brig --carry-config pip from the host's pip.conf: non-secret keys only\n");
        bool keeping = false;  /* the last key was kept: its continuation lines may be too */
        for (size_t at = 0; at < len;) {
                _cleanup_free_ char *line = next_line(text, len, &at, &b);
                if (!line)
                        continue;
                bool continuation = line[0] == ' ' || line[0] == '\t';
                char *s = (char *)trim(line);
                if (!*s || *s == '#' || *s == ';')
                        continue;
                if (continuation) {
                        const char *why = keeping ? value_refused(s) : NULL;
                        if (keeping && why)
                                left_out(&b, NULL, why);
                        else if (keeping) {
                                buf_str(&b, "    ");
                                buf_str(&b, s);
                                buf_str(&b, "\n");
                        }
                        continue;
                }
                keeping = false;
                if (*s == '[') {
                        const char *end = strchr(s, ']');
                        if (!end || strspn(s + 1, "abcdefghijklmnopqrstuvwxyz0123456789-_") != (size_t)(end - s - 1)) {
                                left_out(&b, NULL, "not a section name");
                                continue;
                        }
                        buf_add(&b, s, (size_t)(end - s + 1));
                        buf_str(&b, "\n");
                        continue;
                }
                char *eq = strpbrk(s, "=:");
                if (!eq) {
                        left_out(&b, NULL, "not key = value");
                        continue;
                }
                *eq = '\0';
                char *key = (char *)trim(s);
                bool nameable = key_like(key);  /* as the host spells it: a token's case is telling */
                for (char *c = key; *c; c++)
                        *c = *c == '_' ? '-' : (char)tolower((unsigned char)*c);
                const char *value = trim(eq + 1);
                const char *why = !key_in(key, pip_keys) ? "not on brig's allow list of pip keys" : value_refused(value);
                if (why) {
                        left_out(&b, nameable ? key : NULL, why);
                        continue;
                }
                keeping = true;
                buf_str(&b, key);
                buf_str(&b, " = ");
                buf_str(&b, value);
                buf_str(&b, "\n");
        }
        return buf_take(&b);
}

/* A git config value in double quotes; NULL when it holds a control
 * character (a newline would start a new section of config). */
static bool git_quote(struct buf *b, const char *v)
{
        buf_str(b, "\"");
        for (const char *c = v; *c; c++) {
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        return false;
                if (*c == '"' || *c == '\\')
                        buf_str(b, "\\");
                buf_add(b, c, 1);
        }
        buf_str(b, "\"\n");
        return true;
}

char *tools_gitconfig(const char *name, const char *email)
{
        struct buf b = { 0 };
        buf_str(&b, "# generated by brig --git-identity from the host's git config (identity only)\n[user]\n\tname = ");
        bool ok = git_quote(&b, name);
        buf_str(&b, "\temail = ");
        ok = ok && git_quote(&b, email);
        if (!ok) {
                free(b.s);
                return NULL;
        }
        return buf_take(&b);
}

