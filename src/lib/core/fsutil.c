/* fsutil.c — filesystem helpers (fsutil.h). */
#define _GNU_SOURCE
#include "core/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool dirs_above_only(const char *real, uid_t owner, uid_t entry_uid, char *where, size_t n)
{
        snprintf(where, n, "%s", real);
        uid_t child = entry_uid;
        struct stat dir;
        for (;;) {
                char *slash = strrchr(where, '/');
                if (!slash)
                        return false;
                slash[slash == where] = '\0';  /* the parent; "/" stays "/" */
                if (stat(where, &dir) < 0 || (dir.st_uid != 0 && dir.st_uid != owner))
                        return false;
                bool child_theirs = child != 0 && child != owner;
                if ((dir.st_mode & (S_IWGRP | S_IWOTH)) && (!(dir.st_mode & S_ISVTX) || child_theirs))
                        return false;
                if (strcmp(where, "/") == 0)
                        return true;
                child = dir.st_uid;
        }
}

bool tmpfile_link_over(int fd, int dir, const char *name)
{
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        for (int round = 0; round < 2; round++) {
                if (linkat(AT_FDCWD, self, dir, name, AT_SYMLINK_FOLLOW) == 0)
                        return true;
                if (errno != EEXIST)
                        return false;
                unlinkat(dir, name, 0);  /* the old file makes way */
        }
        return false;
}

/* (util.h declares it: path arithmetic, here for the front end, which
 * builds this file and not util.c) */
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
