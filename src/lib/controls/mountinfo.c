/* mountinfo.c — which directories of this host have a second name.
 *
 * The deny list is matched by path, but a host can show one directory
 * under two names: a bind mount (/home also at /srv/home), or one
 * filesystem mounted twice. A grant of the second name must hide the
 * secrets of the first (plan.c). The kernel's own table says where:
 * /proc/self/mountinfo, read here — with names of directories anyone may
 * have made, so the reader is strict and has a fuzz target
 * (tests/fuzz/fuzz_mountinfo.c). */
#define _GNU_SOURCE
#include "core/error.h"
#include "core/syscalls.h"
#include "controls/mountinfo.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The kernel writes plain paths; anything else (//, /./, /../, a
 * trailing slash) would make the textual tests lie. */
static int plain_path(const char *p)
{
        _cleanup_free_ char *plain = path_normalize(p);
        if (!plain)
                return errno == ENOMEM ? -ENOMEM : -EINVAL;
        return strcmp(plain, p) == 0 ? 0 : -EINVAL;
}

/* One path field, with the kernel's escapes (\ooo for space, tab,
 * newline and backslash) undone. Absolute, no NUL, no other backslash. */
static int unescape_path(const char *s, size_t n, char **out)
{
        if (n == 0 || s[0] != '/')
                return -EINVAL;
        char *p = malloc(n + 1), *o = p;
        if (!p)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (s[i] != '\\') {
                        *o++ = s[i];
                        continue;
                }
                unsigned v = 0;
                for (size_t k = 1; k <= 3; k++) {
                        if (i + k >= n || s[i + k] < '0' || s[i + k] > '7') {
                                free(p);
                                return -EINVAL;
                        }
                        v = v * 8 + (unsigned)(s[i + k] - '0');
                }
                if (v == 0 || v > 0xff) {
                        free(p);
                        return -EINVAL;
                }
                *o++ = (char)v;
                i += 3;
        }
        *o = '\0';
        int r = plain_path(p);
        if (r < 0) {
                free(p);
                return r;
        }
        *out = p;
        return 0;
}

static bool all_digits(const char *s, size_t n)
{
        if (n == 0 || n > 10)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

int mountinfo_parse_line(const char *line, size_t len, struct mountinfo_entry *e)
{
        /* "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS ...", one space
         * between fields; only the first five are read. */
        const char *field[5];
        size_t flen[5];
        size_t pos = 0;
        for (size_t f = 0; f < 5; f++) {
                size_t start = pos;
                while (pos < len && line[pos] != ' ' && line[pos] != '\n' && line[pos] != '\0')
                        pos++;
                field[f] = line + start;
                flen[f] = pos - start;
                if (flen[f] == 0 || (f < 4 && (pos >= len || line[pos] != ' ')))
                        return -EINVAL;
                pos++;
        }
        const char *colon = memchr(field[2], ':', flen[2]);
        if (!all_digits(field[0], flen[0]) || !all_digits(field[1], flen[1]) || !colon ||
            !all_digits(field[2], (size_t)(colon - field[2])) ||
            !all_digits(colon + 1, flen[2] - (size_t)(colon - field[2]) - 1))
                return -EINVAL;
        unsigned long maj = strtoul(field[2], NULL, 10), min = strtoul(colon + 1, NULL, 10);
        if (maj > 0xfff || min > 0xfffff)
                return -EINVAL;
        *e = (struct mountinfo_entry){ .id = strtoul(field[0], NULL, 10), .dev = makedev(maj, min) };
        int r = unescape_path(field[3], flen[3], &e->root);
        if (r == 0)
                r = unescape_path(field[4], flen[4], &e->mnt);
        if (r < 0) {
                free(e->root);
                *e = (struct mountinfo_entry){0};
        }
        return r;
}

void mountinfo_clear(struct mountinfo *mi)
{
        for (size_t i = 0; i < mi->n; i++) {
                free(mi->v[i].root);
                free(mi->v[i].mnt);
        }
        free(mi->v);
        *mi = (struct mountinfo){0};
}

int mountinfo_add_line(struct mountinfo *mi, const char *line, size_t len)
{
        struct mountinfo_entry e;
        int r = mountinfo_parse_line(line, len, &e);
        if (r < 0)
                return r;
        struct mountinfo_entry *grown = realloc(mi->v, (mi->n + 1) * sizeof *grown);
        if (!grown) {
                free(e.root);
                free(e.mnt);
                return -ENOMEM;
        }
        mi->v = grown;
        mi->v[mi->n++] = e;
        return 0;
}

/* The whole table in one read (the kernel prints it afresh for each
 * read; stdio asked it in pieces of 1 KiB), its lines parsed where they
 * lie, the entries' array made for their number at once. */
int mountinfo_load_text(struct mountinfo *mi)
{
        *mi = (struct mountinfo){0};
        _cleanup_close_ int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t cap = 16384, len = 0;
        _cleanup_free_ char *buf = malloc(cap);
        ssize_t n;
        while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
                len += (size_t)n;
                if (len == cap) {
                        char *grown = cap < (64u << 20) ? realloc(buf, 2 * cap) : NULL;
                        if (!grown)
                                return -ENOMEM;
                        buf = grown;
                        cap *= 2;
                }
        }
        if (!buf)
                return -ENOMEM;
        if (n < 0)
                return -errno;
        size_t lines = 0;
        for (size_t i = 0; i < len; i++)
                lines += buf[i] == '\n';
        mi->v = calloc(lines + 1, sizeof *mi->v);
        if (!mi->v)
                return -ENOMEM;
        int r = 0;
        for (size_t start = 0; r == 0 && start < len;) {
                const char *nl = memchr(buf + start, '\n', len - start);
                size_t l = nl ? (size_t)(nl - (buf + start)) + 1 : len - start;
                struct mountinfo_entry e;
                r = mountinfo_parse_line(buf + start, l, &e);
                if (r == 0 && mi->n <= lines)
                        mi->v[mi->n++] = e;
                else if (r == 0) {
                        free(e.root);
                        free(e.mnt);
                }
                if (r == -EINVAL)
                        r = 0;  /* a line of another form: not a mount we could use */
                start += l;
        }
        if (r < 0)
                mountinfo_clear(mi);
        return r;
}

/* The same table from the mounts themselves (listmount, then statmount
 * of each): the kernel prints mountinfo's every field, options and all,
 * for each read, and the first read of a process's /proc/self costs it
 * more again — twice the time of these calls for the 20-odd mounts of a
 * host. The same entries in the same order (the namespace's, by id); a
 * mount gone meanwhile is left out, as the table would not show it, and
 * so is one the caller's root does not reach. -ENOSYS or -EINVAL where
 * the kernel cannot say it all (before Linux 6.8). */
#define PLACE_BYTES (512 + 2 * PATH_MAX)  /* statmount's reply: its fields, then the two paths */
int mountinfo_load_listed(struct mountinfo *mi)
{
        *mi = (struct mountinfo){0};
        size_t cap = 64;
        _cleanup_free_ uint64_t *ids = NULL;
        long n = 0, got;
        do {
                uint64_t *grown = cap < (1u << 20) ? realloc(ids, 2 * cap * sizeof *ids) : NULL;
                if (!grown)
                        return -ENOMEM;
                ids = grown;
                cap *= 2;
                got = sys_list_mounts(n ? ids[n - 1] : 0, ids + n, cap - (size_t)n);
                if (got < 0)
                        return -errno;
                n += got;
        } while ((size_t)n == cap);
        _cleanup_free_ char *buf = malloc(PLACE_BYTES);
        mi->v = buf ? calloc((size_t)n + 1, sizeof *mi->v) : NULL;
        if (!mi->v)
                return -ENOMEM;
        int r = 0;
        for (long i = 0; r == 0 && i < n; i++) {
                struct sys_mount_place at;
                if (sys_mount_place(ids[i], buf, PLACE_BYTES, &at) < 0) {
                        r = errno == ENOENT ? 0 : -errno;  /* ENOENT: gone meanwhile */
                        continue;
                }
                /* out of the caller's root, or a device the table's
                 * reader would not take */
                if (!at.point[0] || at.dev_major > 0xfff || at.dev_minor > 0xfffff)
                        continue;
                r = plain_path(at.root) ?: plain_path(at.point);
                if (r == -EINVAL) {
                        r = 0;  /* nor a path it would take */
                        continue;
                }
                struct mountinfo_entry *e = &mi->v[mi->n];
                *e = (struct mountinfo_entry){ .id = at.id_old, .dev = makedev(at.dev_major, at.dev_minor),
                                               .root = r == 0 ? strdup(at.root) : NULL,
                                               .mnt = r == 0 ? strdup(at.point) : NULL };
                mi->n++;
                r = r < 0 || (e->root && e->mnt) ? r : -ENOMEM;
        }
        if (r < 0)
                mountinfo_clear(mi);
        /* EOVERFLOW: a path longer than the reply's room; the table has it */
        return r == -EOVERFLOW ? -EINVAL : r;
}

int mountinfo_load(struct mountinfo *mi)
{
        /* any answer but the table (ENOSYS; EINVAL; EPERM from a
         * container's seccomp profile that does not know the calls): the
         * table the old way */
        int r = mountinfo_load_listed(mi);
        return r < 0 && r != -ENOMEM ? mountinfo_load_text(mi) : r;
}

static char *join(const char *dir, const char *rel)
{
        if (!*rel)
                return strdup(dir);
        return brig_strdup_printf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, rel);
}

void path_aliases_free(struct path_alias *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].host);
                free(v[i].rel);
        }
        free(v);
}

static int alias_push(struct path_alias **v, size_t *n, char *host, char *rel)
{
        struct path_alias *grown = host && rel ? realloc(*v, (*n + 1) * sizeof *grown) : NULL;
        if (!grown) {
                free(host);
                free(rel);
                return -ENOMEM;
        }
        *v = grown;
        grown[(*n)++] = (struct path_alias){ .host = host, .rel = rel };
        return 0;
}

int mountinfo_aliases(const struct mountinfo *mi, const char *path, struct path_alias **out, size_t *n_out)
{
        *out = NULL;
        *n_out = 0;
        /* The mount PATH is on: the longest mount point above it, the last
         * of equal ones (mounted on top). */
        const struct mountinfo_entry *m = NULL;
        for (size_t i = 0; i < mi->n; i++)
                if (path_is_under(path, mi->v[i].mnt) && (!m || strlen(mi->v[i].mnt) >= strlen(m->mnt)))
                        m = &mi->v[i];
        if (!m)
                return 0;
        /* Where PATH is inside its filesystem. */
        _cleanup_free_ char *fs_path = join(m->root, path_below(path, m->mnt));
        if (!fs_path)
                return -ENOMEM;
        struct path_alias *v = NULL;
        size_t n = 0;
        int r = 0;
        for (size_t i = 0; r == 0 && i < mi->n; i++) {
                const struct mountinfo_entry *o = &mi->v[i];
                if (o == m || o->dev != m->dev)
                        continue;
                const char *below = path_below(fs_path, o->root);
                if (below) {
                        /* the whole of PATH is also at o's mount point */
                        char *host = join(o->mnt, below);
                        if (host && strcmp(host, path) == 0)
                                free(host);
                        else
                                r = alias_push(&v, &n, host, strdup(""));
                } else if ((below = path_below(o->root, fs_path))) {
                        /* a part of PATH, at RELative path, is also at o's */
                        r = alias_push(&v, &n, strdup(o->mnt), strdup(below));
                }
        }
        if (r < 0) {
                path_aliases_free(v, n);
                return r;
        }
        *out = v;
        *n_out = n;
        return 0;
}
