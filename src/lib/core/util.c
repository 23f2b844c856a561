/* util.c — string lists and path arithmetic. Pure functions, no side
 * effects on the system; unit-tested in tests/unit/test_util.c. */
#define _GNU_SOURCE
#include "core/util.h"
#include "core/ossl_fns.h"

#include <stdio.h>
#include <string.h>

int strv_push_take(struct strv *v, char *s)
{
        if (!s)
                return -ENOMEM;
        char **n = realloc(v->items, (v->n + 2) * sizeof *n);
        if (!n) {
                free(s);
                return -ENOMEM;
        }
        v->items = n;
        v->items[v->n++] = s;
        v->items[v->n] = NULL;
        return 0;
}

int strv_push(struct strv *v, const char *s)
{
        return strv_push_take(v, strdup(s));
}

void strv_free(struct strv *v)
{
        for (size_t i = 0; i < v->n; i++)
                free(v->items[i]);
        free(v->items);
        v->items = NULL;
        v->n = 0;
}

bool strv_contains(const struct strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->items[i], s) == 0)
                        return true;
        return false;
}

int strv_remove(struct strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++) {
                if (strcmp(v->items[i], s) != 0)
                        continue;
                free(v->items[i]);
                memmove(&v->items[i], &v->items[i + 1], (v->n - i) * sizeof *v->items);
                v->n--;
                return 0;
        }
        return -ENOENT;
}

const char *path_below(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (strcmp(dir, "/") == 0)
                return path + 1;
        if (strncmp(path, dir, n) != 0)
                return NULL;
        if (path[n] == '\0')
                return path + n;
        if (path[n] == '/')
                return path + n + 1;
        return NULL;
}

bool path_is_under(const char *path, const char *dir)
{
        return path_below(path, dir) != NULL;
}

int path_depth(const char *path)
{
        int d = 0;
        for (const char *p = path; *p; p++)
                if (*p == '/' && p[1] != '\0')
                        d++;
        return d;
}

void size_text(char *buf, size_t n, uint64_t bytes)
{
        if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0)
                snprintf(buf, n, "%llu GiB", (unsigned long long)(bytes >> 30));
        else if (bytes >= (1ULL << 20))
                snprintf(buf, n, "%llu MiB", (unsigned long long)(bytes >> 20));
        else
                snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
}

static void to_hex(const unsigned char *md, unsigned n, char out[SHA256_HEX])
{
        out[0] = '\0';
        for (unsigned i = 0; i < n && 2 * i + 2 < SHA256_HEX; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void sha256_text(const void *buf, size_t len, char out[SHA256_HEX])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned n = 0;
        out[0] = '\0';
        if (EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL))
                to_hex(md, n, out);
}

int sha256_fd(int fd, uint64_t max, char out[SHA256_HEX])
{
        out[0] = '\0';
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
                EVP_MD_CTX_free(md);
                return -ENOMEM;
        }
        char buf[65536];
        uint64_t total = 0;
        ssize_t got;
        while ((got = read(fd, buf, sizeof buf)) > 0 && (total += (uint64_t)got) <= max)
                EVP_DigestUpdate(md, buf, (size_t)got);
        int r = got < 0 ? -errno : total > max ? -EFBIG : 0;
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned n = 0;
        if (r == 0 && EVP_DigestFinal_ex(md, digest, &n))
                to_hex(digest, n, out);
        EVP_MD_CTX_free(md);
        return r == 0 && !out[0] ? -EIO : r;
}

bool plan_long_way(void)
{
#ifdef BRIG_TEST_HOOKS
        const char *v = getenv("BRIG_TEST_PLAN_LONG_WAY");
        return v && strcmp(v, "1") == 0;
#else
        return false;
#endif
}
