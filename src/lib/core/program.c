/* program.c — one of brig's own programs, opened and checked where it is
 * looked for (program.h). */
#define _GNU_SOURCE
#include "core/program.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

static bool trusted_owner(const struct stat *st)
{
        return (st->st_uid == 0 || st->st_uid == geteuid()) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int program_open_in(const char *dir, const char *prog, brig_error **err)
{
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (dfd < 0 && (errno == ENOENT || errno == ENOTDIR))
                return -ENOENT;
        if (dfd < 0 || fstat(dfd, &st) < 0)
                return brig_err_code(err, BRIG_EXIT_SETUP, errno, "%s: cannot open '%s'", prog, dir);
        int fd = openat(dfd, prog, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                return -ENOENT;
        if (fd < 0)
                return brig_err_code(err, BRIG_EXIT_SETUP, errno, "%s: cannot open it in '%s'", prog, dir);
        if (!trusted_owner(&st)) {
                close(fd);
                return brig_err_code(err, BRIG_EXIT_SETUP, EPERM,
                                     "%s: '%s' is writable by others or owned by another user; "
                                     "refusing to run a program from it",
                                     prog, dir);
        }
        struct stat fst;
        if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || !trusted_owner(&fst) || !(fst.st_mode & S_IXUSR)) {
                close(fd);
                return brig_err_code(err, BRIG_EXIT_SETUP, EPERM,
                                     "%s in '%s' is not an executable regular file owned by root or "
                                     "by us and writable by nobody else; refusing to run it",
                                     prog, dir);
        }
        return fd;
}

int program_start(void)
{
        for (int fd = 0; fd <= 2; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) < 0)
                        return -errno;
        /* brig's own lines (warnings at start, the end-of-run summary, the
         * terminal relay, --help) go to a stdout and stderr whose reader
         * may be gone — `brig run ... 2>&1 | head -1` — and SIGPIPE's
         * default would then kill brig, after the cleanup or in the middle
         * of it, with 141 instead of the command's status. Blocked here for
         * every thread brig starts, as sigpipe_hold does around libbrig's
         * writes to a caller's descriptor: such a write fails with EPIPE
         * and brig goes on. Blocked, never ignored: an ignored signal stays
         * ignored across exec, while the command starts with nothing
         * blocked (child.c reset_signals, the supervisor's posix_spawn). */
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigprocmask(SIG_BLOCK, &pipe_set, NULL);
        return 0;
}
