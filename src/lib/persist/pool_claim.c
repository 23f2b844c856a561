/* pool_claim.c — a ready member of a warm pool, claimed. What a run
 * that names its pool (`brig run --pool NAME`) does before its exec, and
 * what `brig run --pooled` does once it has computed its pool's key: no
 * policy is read, so the brig front end does it too, without the engine
 * (libc only: it is built against musl there).
 *
 * The pool's directory and its ready/, claimed/ and done/ are pool.c's
 * (it says how a claim is made and who removes what). */
#define _GNU_SOURCE
#include "persist/pool_claim.h"
#include "persist/state_root.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int no_such_pool(brig_error **err, const char *name)
{
        return state_fail(err, ENOENT, "no pool named '%s' runs (brig pool --name %s --size N [RUN OPTIONS] starts one)",
                          name, name);
}

int pool_named(const char *name, char **dir_out, char key_out[POOL_KEY_LEN + 1], char **root_out,
               brig_error **err)
{
        *dir_out = NULL;
        if (!state_name_valid(name))
                return state_fail(err, EINVAL, "pool name '%s': use letters, digits, _ . - (up to 64, not starting "
                                               "with _ . -)", name);
        _cleanup_free_ char *root = NULL;
        brig_error *rerr = NULL;
        int r = state_root(false, &root, &rerr);
        if (r == -ENOENT) {  /* no state root yet: this user never made a sandbox, nor a pool */
                brig_error_free(&rerr);
                return no_such_pool(err, name);
        }
        if (r < 0) {
                if (err && !*err)
                        *err = TAKE_PTR(rerr);
                brig_error_free(&rerr);
                return r;
        }
        char link[PATH_MAX], key[POOL_KEY_LEN + 2];
        if ((size_t)snprintf(link, sizeof link, "%s/pools/names/%s", root, name) >= sizeof link)
                return brig_err(err, ENAMETOOLONG, "pool '%s'", name);
        ssize_t n = readlink(link, key, sizeof key);
        if (n < 0 && errno == ENOENT)
                return no_such_pool(err, name);
        if (n < 0)
                return brig_err(err, errno, "read the pool name '%s'", link);
        /* only ever a key that brig wrote: 16 hex digits, nothing to follow */
        bool hex = n == POOL_KEY_LEN;
        for (ssize_t i = 0; hex && i < n; i++)
                hex = (key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f');
        if (!hex)
                return state_fail(err, EBADMSG, "the pool name '%s' names no pool key (remove it: brig pool --stop "
                                                "--name %s)", link, name);
        memcpy(key_out, key, POOL_KEY_LEN);
        key_out[POOL_KEY_LEN] = '\0';
        *dir_out = brig_strdup_printf("%s/pools/%s", root, key_out);
        if (!*dir_out)
                return brig_err(err, ENOMEM, "pool");
        if (root_out)
                *root_out = TAKE_PTR(root);
        return 0;
}

bool pool_member_of(const char *key, const char *name)
{
        char prefix[32];
        snprintf(prefix, sizeof prefix, POOL_MEMBER_PREFIX "%.8s-", key);
        return strncmp(name, prefix, strlen(prefix)) == 0;
}

int pool_claim_owner(char *buf, size_t n)
{
        struct stat ns;
        pid_t pid = getpid();
        unsigned long long start = state_process_start(pid);
        if (!start || stat("/proc/self/ns/pid", &ns) < 0)
                return -ESRCH;
        int len = snprintf(buf, n, "%d-%llu-%llu", pid, start, (unsigned long long)ns.st_ino);
        return len > 0 && (size_t)len < n ? 0 : -ENAMETOOLONG;
}

int pool_claim_ready(const char *dir, const char *key, char *member, size_t n)
{
        char owner[96], ready[PATH_MAX];
        member[0] = '\0';
        int r = pool_claim_owner(owner, sizeof owner);
        if (r < 0)
                return r;
        if ((size_t)snprintf(ready, sizeof ready, "%s/ready", dir) >= sizeof ready)
                return -ENAMETOOLONG;
        DIR *d = opendir(ready);
        if (!d)
                return errno == ENOENT ? -ENOENT : -errno;
        struct dirent *e;
        r = -EAGAIN;
        while (r == -EAGAIN && (e = readdir(d))) {
                /* what is not one of this pool's members is not ours to take */
                if (!state_name_valid(e->d_name) || !pool_member_of(key, e->d_name) || strlen(e->d_name) >= n)
                        continue;
                _cleanup_free_ char *from = brig_strdup_printf("%s/ready/%s", dir, e->d_name);
                _cleanup_free_ char *to = brig_strdup_printf("%s/claimed/%s.%s", dir, e->d_name, owner);
                if (!from || !to) {
                        r = -ENOMEM;
                        break;
                }
                if (rename(from, to) == 0) {  /* another run's, if it failed: the next one */
                        snprintf(member, n, "%s", e->d_name);
                        r = 0;
                }
        }
        closedir(d);
        return r;
}

void pool_claim_drop(const char *dir, const char *member)
{
        char owner[96];
        if (pool_claim_owner(owner, sizeof owner) < 0)
                return;
        _cleanup_free_ char *from = brig_strdup_printf("%s/claimed/%s.%s", dir, member, owner);
        _cleanup_free_ char *to = brig_strdup_printf("%s/done/%s", dir, member);
        if (from && to)
                (void)rename(from, to);
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
        return h;
}

void pool_key_text(const char *json, const char *ws, const char *context, char out[POOL_KEY_LEN + 1])
{
        uint64_t h = fnv1a(context, fnv1a(ws, fnv1a(json, 0xcbf29ce484222325ULL)));
        snprintf(out, POOL_KEY_LEN + 1, "%016llx", (unsigned long long)h);
}

int pool_plain_name(int engine_fd, char out[POOL_PLAIN_NAME_LEN])
{
        struct stat st;
        if (fstat(engine_fd, &st) < 0)
                return -errno;
        char id[128];
        snprintf(id, sizeof id, "%llu.%llu.%lld.%lld.%ld.%lld.%ld", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino, (long long)st.st_size, (long long)st.st_mtim.tv_sec,
                 st.st_mtim.tv_nsec, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        snprintf(out, POOL_PLAIN_NAME_LEN, "pooled-plain-%016llx", (unsigned long long)fnv1a(id, 0xcbf29ce484222325ULL));
        return 0;
}
