/* util.c — string lists and path arithmetic. Pure functions, no side
 * effects on the system; unit-tested in tests/unit/test_util.c. */
#define _GNU_SOURCE
#include "core/util.h"

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

char *path_normalize(const char *path)
{
        if (!path || path[0] != '/') {
                errno = EINVAL;
                return NULL;
        }
        size_t len = strlen(path);
        char *out = malloc(len + 2);
        if (!out) {
                errno = ENOMEM;
                return NULL;
        }
        size_t o = 0;
        const char *p = path;
        while (*p) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                const char *end = strchrnul(p, '/');
                size_t n = (size_t)(end - p);
                if (n == 1 && p[0] == '.') {
                        p = end;
                        continue;
                }
                if (n == 2 && p[0] == '.' && p[1] == '.') {
                        /* ".." would make textual checks lie about where a
                         * path ends up; callers must give plain paths. */
                        free(out);
                        errno = EINVAL;
                        return NULL;
                }
                out[o++] = '/';
                memcpy(out + o, p, n);
                o += n;
                p = end;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        return out;
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
