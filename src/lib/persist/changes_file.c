/* changes_file.c — the reader of a persistent sandbox's record since
 * create (changes.json in its state directory, runchanges_save's): brig
 * diff of a bind-mode sandbox and its stop compare the trees with it.
 * brig wrote it, but it is read back from a directory on disk, so it is
 * checked as untrusted bytes before anything uses it: the shape of every
 * root and entry, relative paths without '.', '..' or empty components,
 * no more entries than its own cap. Pure (jansson only): the fuzz target
 * fuzz_changes_file runs it on any bytes. */
#define _GNU_SOURCE
#include "persist/runchanges.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ROOTS_MAX 1024
#define PATH_TEXT_MAX 4096

static int bad(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
        return -EBADMSG;
}

/* "a/b/c": no leading '/', no empty, "." or ".." component. */
static bool relative_path(const char *p)
{
        size_t len = strlen(p);
        if (!len || len >= PATH_TEXT_MAX)
                return false;
        for (const char *c = p;;) {
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!c[n])
                        return true;
                c += n + 1;
        }
}

/* [type, inode, size, mtime ns, ctime ns, mode]: runchanges.c's record */
static bool record(json_t *rec)
{
        const char *t = json_string_value(json_array_get(rec, 0));
        if (!json_is_array(rec) || json_array_size(rec) != 6 || !t || strlen(t) != 1 || !strchr("dflo", t[0]))
                return false;
        for (size_t i = 1; i < 6; i++)
                if (!json_is_integer(json_array_get(rec, i)))
                        return false;
        json_int_t mode = json_integer_value(json_array_get(rec, 5));
        return json_integer_value(json_array_get(rec, 2)) >= 0 && mode >= 0 && mode <= 07777;
}

int runchanges_parse(const char *text, size_t len, json_t **out, char *why, size_t n)
{
        *out = NULL;
        json_error_t je;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!doc)
                return bad(why, n, "line %d: %s", je.line, je.text);
        json_t *roots = json_object_get(doc, "roots"), *max = json_object_get(doc, "max");
        int r = 0;
        if (!json_is_object(doc) || json_integer_value(json_object_get(doc, "v")) != 1)
                r = bad(why, n, "not a record of brig's (v 1)");
        else if (!json_is_integer(max) || json_integer_value(max) < 0)
                r = bad(why, n, "'max' is not a count");
        else if (!json_is_array(roots) || json_array_size(roots) > ROOTS_MAX)
                r = bad(why, n, "'roots' is not a list of at most %d", ROOTS_MAX);
        uint64_t total = 0;
        size_t i;
        json_t *root;
        json_array_foreach(roots, i, root) {
                if (r < 0)
                        break;
                const char *path = json_string_value(json_object_get(root, "path"));
                json_t *entries = json_object_get(root, "entries");
                json_t *e = json_object_get(root, "error");
                if (!path || path[0] != '/' || strlen(path) >= PATH_TEXT_MAX || !json_is_object(entries) ||
                    !json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > 4095 ||
                    !json_is_boolean(json_object_get(root, "stopped")) ||
                    (json_object_get(root, "unreadable") &&
                     !relative_path(json_string_value(json_object_get(root, "unreadable")) ?: ""))) {
                        r = bad(why, n, "root %zu: expected {path: an absolute path, error, stopped, entries}", i);
                        break;
                }
                const char *rel;
                json_t *rec;
                json_object_foreach(entries, rel, rec) {
                        if (!relative_path(rel) || !record(rec)) {
                                r = bad(why, n, "root %zu: an entry that is not a relative path and its record", i);
                                break;
                        }
                        total++;
                }
        }
        if (r == 0 && json_integer_value(max) > 0 && total > (uint64_t)json_integer_value(max))
                r = bad(why, n, "more entries than its cap (%lld)", (long long)json_integer_value(max));
        if (r < 0) {
                json_decref(doc);
                return r;
        }
        *out = doc;
        return 0;
}
