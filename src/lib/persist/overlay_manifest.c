/* overlay_manifest.c — the record of the workspace (base.json in the
 * sandbox's state directory): every entry's (type, inode, size, mtime) at
 * create, and after each commit for what it touched. Commit compares the
 * host's entries with it to find paths changed on the host too
 * (overlay_commit.c). */
#define _GNU_SOURCE
#include "persist/overlay.h"
#include "persist/state.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MANIFEST "base.json"

/* ---- create: the record of the workspace ---------------------------------- */

json_t *entry_record(const struct stat *st)
{
        char type = S_ISDIR(st->st_mode) ? 'd' : S_ISREG(st->st_mode) ? 'f' : S_ISLNK(st->st_mode) ? 'l' : 'o';
        return json_pack("[s#, I, I, I]", &type, (size_t)1, (json_int_t)st->st_ino, (json_int_t)st->st_size,
                         (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
}

int record_tree(int dfd, const char *rel, json_t *out, int depth)
{
        return record_tree_with(dfd, rel, out, depth, entry_record, NULL);
}

int record_tree_with(int dfd, const char *rel, json_t *out, int depth, json_t *(*record)(const struct stat *st),
                     struct tree_cap *cap)
{
        if (depth > TREE_DEPTH_MAX)
                return -ELOOP;
        int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                closep(&fd);
                return -errno;
        }
        int r = 0;
        struct dirent *e;
        while (r == 0 && (e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;  /* vanished meanwhile */
                if (cap && cap->max && cap->left == 0) {
                        r = -E2BIG;  /* the caller's cap: what is recorded so far stays in out */
                        break;
                }
                if (cap && cap->max)
                        cap->left--;
                _cleanup_free_ char *path = join(rel, e->d_name);
                if (!path)
                        r = -ENOMEM;
                else
                        json_object_set_new(out, path, record(&st));
                if (r == 0 && S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = openat(dirfd(d), e->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        /* another filesystem mounted here is not part of the
                         * lower layer: overlayfs does not cross mounts */
                        struct stat sst;
                        if (sub < 0 && errno != ENOENT && cap && !cap->unreadable)
                                cap->unreadable = strdup(path);
                        if (sub >= 0 && fstat(sub, &sst) == 0 && sst.st_dev == st.st_dev)
                                r = record_tree_with(sub, path, out, depth + 1, record, cap);
                }
        }
        closedir(d);
        return r;
}

int manifest_write(const char *dir, json_t *m, brig_error **err)
{
        _cleanup_free_ char *tmp = brig_strdup_printf("%s/." MANIFEST ".tmp", dir);
        _cleanup_free_ char *final = brig_strdup_printf("%s/" MANIFEST, dir);
        if (!tmp || !final)
                return brig_err(err, ENOMEM, "overlay record");
        if (json_dump_file(m, tmp, JSON_COMPACT) < 0 || rename(tmp, final) < 0) {
                int e = errno ? errno : EIO;
                unlink(tmp);
                return brig_err(err, e, "write the workspace record '%s'", final);
        }
        return 0;
}

int record_workspace(const char *workspace, const char *dir, brig_error **err)
{
        _cleanup_close_ int ws = open_dir_nofollow(workspace);
        if (ws < 0)
                return brig_err(err, errno, "workspace '%s' (symlinks are not followed)", workspace);
        json_t *m = json_object();
        int r = m ? record_tree(ws, "", m, 0) : -ENOMEM;
        if (r < 0)
                json_decref(m);
        if (r == -ELOOP)  /* an earlier run in bind mode may have made it */
                return state_fail(err, ELOOP, "record the workspace '%s': it holds directories nested more than %d "
                                              "deep; overlay mode records every entry and goes no deeper: remove "
                                              "them, or use --workspace-mode bind", workspace, TREE_DEPTH_MAX);
        if (r < 0)
                return brig_err(err, -r, "record the workspace '%s'", workspace);
        r = manifest_write(dir, m, err);
        json_decref(m);
        return r;
}

/* ---- commit: a host entry against its record ------------------------------ */

bool record_matches(json_t *rec, const struct stat *st)
{
        json_t *now = entry_record(st);
        bool same;
        if (S_ISDIR(st->st_mode))
                /* A directory's size and mtime change whenever an entry in
                 * it does (our own commit too): type and inode say enough. */
                same = json_equal(json_array_get(rec, 0), json_array_get(now, 0)) &&
                       json_equal(json_array_get(rec, 1), json_array_get(now, 1));
        else
                same = json_equal(rec, now);
        json_decref(now);
        return same;
}

json_t *manifest_read(const char *dir, brig_error **err)
{
        _cleanup_free_ char *path = brig_strdup_printf("%s/" MANIFEST, dir);
        json_error_t je;
        json_t *m = path ? json_load_file(path, 0, &je) : NULL;
        if (!m || !json_is_object(m)) {
                json_decref(m);
                brig_err(err, EBADMSG, "the workspace record '%s': %s", path ? path : "", m ? "not an object" : je.text);
                return NULL;
        }
        return m;
}
