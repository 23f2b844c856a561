/* scmp.c — libseccomp opened on first use, and the notification ioctls
 * made without it (why: scmp.h; how the library is opened and checked:
 * core/libload.c). */
#define _GNU_SOURCE
#define SCMP_NO_REDIRECT
#include "controls/scmp.h"
#include "core/libload.h"

#include <errno.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The build's pkg-config libdir and libseccomp 2.x's soname (meson.build). */
#ifndef BRIG_LIBSECCOMP_PATH
#define BRIG_LIBSECCOMP_PATH "/usr/lib/x86_64-linux-gnu/libseccomp.so.2"
#endif

/* The file to open. Test builds only: BRIG_TEST_LIBSECCOMP_PATH stands
 * for a broken install (a path with nothing there), which no production
 * build can be made to show. */
static const char *lib_path(void)
{
#ifdef BRIG_TEST_HOOKS
        const char *path = getenv("BRIG_TEST_LIBSECCOMP_PATH");
        if (path && *path)
                return path;
#endif
        return BRIG_LIBSECCOMP_PATH;
}

static struct scmp_fns fns;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_errno;
static char load_why[PATH_MAX + 256];

static void load(void)
{
        const char *path = lib_path();
        void *h = libload_open("libseccomp", path, &load_errno, load_why, sizeof load_why);
        if (!h)
                return;
        struct scmp_fns f;
#define SCMP_SYM(name)                                                                                      \
        if (!(f.name = (__typeof__(f.name))libload_sym(h, #name, "libseccomp", path, &load_errno, load_why, \
                                                       sizeof load_why)))                                   \
                return;
        SCMP_FUNCTIONS(SCMP_SYM)
#undef SCMP_SYM
        fns = f;
}

int scmp_load(brig_error **err)
{
        pthread_once(&once, load);
        if (load_errno)
                return brig_err_code(err, BRIG_EXIT_SETUP, load_errno,
                                     "%s; brig compiles seccomp filters with it (a broken install: reinstall "
                                     "libseccomp2)",
                                     load_why);
        return 0;
}

const struct scmp_fns *scmp(void)
{
        if (scmp_load(NULL) < 0) {
                fprintf(stderr, "brig: %s\n", load_why);
                abort();
        }
        return &fns;
}

void scmp_identity(char *buf, size_t n)
{
        /* stat follows the links to the file itself, as realpath and a
         * stat of its answer would, in one call instead of one per level */
        struct stat st;
        if (stat(lib_path(), &st) < 0)
                snprintf(buf, n, "-");
        else
                snprintf(buf, n, "%llx-%llx-%lld.%09ld", (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
                         (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
}

uint32_t scmp_arch_native(void)
{
#if defined(__x86_64__) && defined(__LP64__)
        return SCMP_ARCH_X86_64;
#elif defined(__aarch64__)
        return SCMP_ARCH_AARCH64;
#else
        return scmp()->seccomp_arch_native();
#endif
}

/* ---- notifications ---------------------------------------------------------- */

/* The kernel's sizes of the two structures: a newer kernel's may be
 * larger than this build's headers, and it writes them whole. */
static struct seccomp_notif_sizes sizes;
static pthread_once_t sizes_once = PTHREAD_ONCE_INIT;
static int sizes_errno;

static void get_sizes(void)
{
        if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
                sizes_errno = errno;
}

int scmp_notify_alloc(struct seccomp_notif **req, struct seccomp_notif_resp **resp)
{
        pthread_once(&sizes_once, get_sizes);
        if (sizes_errno)
                return -sizes_errno;
        size_t rq = sizes.seccomp_notif > sizeof **req ? sizes.seccomp_notif : sizeof **req;
        size_t rs = sizes.seccomp_notif_resp > sizeof **resp ? sizes.seccomp_notif_resp : sizeof **resp;
        *req = calloc(1, rq);
        *resp = calloc(1, rs);
        if (!*req || !*resp) {
                free(*req);
                free(*resp);
                *req = NULL;
                *resp = NULL;
                return -ENOMEM;
        }
        return 0;
}

void scmp_notify_free(struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
        free(req);
        free(resp);
}

int scmp_notify_receive(int fd, struct seccomp_notif *req)
{
        /* the kernel refuses a request that is not zeroed (EINVAL) */
        memset(req, 0, sizes.seccomp_notif > sizeof *req ? sizes.seccomp_notif : sizeof *req);
        return ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0 ? -errno : 0;
}

int scmp_notify_respond(int fd, struct seccomp_notif_resp *resp)
{
        return ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 ? -errno : 0;
}

int scmp_notify_id_valid(int fd, uint64_t id)
{
        return ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0 ? -errno : 0;
}
