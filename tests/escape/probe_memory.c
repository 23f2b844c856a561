/* probe_memory.c — memory the sandbox's --memory limit must cover, beyond
 * the private heap that RLIMIT_DATA counts: each subcommand fills one kind
 * 1 MiB at a time up to MAX MiB (the test's bound plus a margin, never a
 * real 1 GiB on a shared machine) and prints
 *
 *   held_mb=N          after every 8 MiB (flushed: the last one survives an OOM kill)
 *   stopped_by=ERRNO   the kernel refused more (ENOSPC, ENOMEM, EFBIG, EINVAL ...),
 *   stopped_by=max     or MAX MiB were held: the limit did not stop it
 *
 *   memfd MAX          memfd_create, then write() — no mapping at all
 *   shared-fork MAX    one MAP_SHARED|MAP_ANONYMOUS region of MAX MiB, touched by
 *                      four forked children, a quarter each
 *   sysv MAX           one System V segment of 1 GiB (shmget), then 8 MiB segments,
 *                      attached and touched, until MAX
 *   posix-shm MAX      shm_open in /dev/shm, then write()
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1L << 20)

static char chunk[MiB];

static const char *err_name(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "E?";
}

static void held(long mb)
{
        if (mb % 8 == 0) {
                printf("held_mb=%ld\n", mb);
                fflush(stdout);
        }
}

static int stopped(long mb, const char *why)
{
        printf("held_mb=%ld\nstopped_by=%s\n", mb, why);
        fflush(stdout);
        return 0;
}

/* write() into fd until max MiB or a refusal. */
static int fill_fd(int fd, long max)
{
        long mb = 0;
        for (; mb < max; mb++) {
                if (write(fd, chunk, MiB) != MiB)
                        return stopped(mb, errno ? err_name(errno) : "short-write");
                held(mb + 1);
        }
        return stopped(mb, "max");
}

static int cmd_memfd(long max)
{
        int fd = memfd_create("probe", MFD_CLOEXEC);
        if (fd < 0)
                return stopped(0, err_name(errno));
        return fill_fd(fd, max);
}

static int cmd_posix_shm(long max)
{
        int fd = shm_open("/probe-memory", O_CREAT | O_RDWR | O_TRUNC, 0600);
        if (fd < 0)
                return stopped(0, err_name(errno));
        return fill_fd(fd, max);
}

static int cmd_shared_fork(long max)
{
        char *p = mmap(NULL, (size_t)max * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
                return stopped(0, err_name(errno));
        /* The children count what they touched in a page of their own. */
        volatile long *touched = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (touched == MAP_FAILED)
                return stopped(0, err_name(errno));
        long quarter = max / 4;
        pid_t kids[4];
        for (int k = 0; k < 4; k++) {
                kids[k] = fork();
                if (kids[k] < 0)
                        return stopped(*touched, err_name(errno));
                if (kids[k] == 0) {
                        for (long mb = 0; mb < quarter; mb++) {
                                memset(p + (k * quarter + mb) * MiB, 1, MiB);
                                held(__atomic_add_fetch(touched, 1, __ATOMIC_SEQ_CST));
                        }
                        _exit(0);
                }
        }
        const char *why = "max";
        for (int k = 0; k < 4; k++) {
                int st;
                while (waitpid(kids[k], &st, 0) < 0 && errno == EINTR)
                        ;
                if (WIFSIGNALED(st))
                        why = sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "signal";
        }
        return stopped(*touched, why);
}

static int cmd_sysv(long max)
{
        /* One segment of 1 GiB: what shmmax / shmall must refuse. */
        int big = shmget(IPC_PRIVATE, 1L << 30, IPC_CREAT | 0600);
        printf("one_gib_segment=%s\n", big >= 0 ? "ok" : err_name(errno));
        if (big >= 0)
                shmctl(big, IPC_RMID, NULL);  /* only its creation was the test */
        long mb = 0;
        while (mb < max) {
                int id = shmget(IPC_PRIVATE, 8 * MiB, IPC_CREAT | 0600);
                if (id < 0)
                        return stopped(mb, err_name(errno));
                char *p = shmat(id, NULL, 0);
                /* Marked for removal at once: it lives while attached, and
                 * attached it stays (no shmdt) until this process exits. */
                shmctl(id, IPC_RMID, NULL);
                if (p == (void *)-1)
                        return stopped(mb, err_name(errno));
                for (int i = 0; i < 8; i++) {
                        memset(p + i * MiB, 1, MiB);
                        held(++mb);
                }
        }
        return stopped(mb, "max");
}

int main(int argc, char **argv)
{
        memset(chunk, 'x', sizeof chunk);
        if (argc != 3) {
                fprintf(stderr, "usage: %s memfd|shared-fork|sysv|posix-shm MAX_MB\n", argv[0]);
                return 2;
        }
        long max = atol(argv[2]);
        const char *cmd = argv[1];
        if (strcmp(cmd, "memfd") == 0)
                return cmd_memfd(max);
        if (strcmp(cmd, "shared-fork") == 0)
                return cmd_shared_fork(max);
        if (strcmp(cmd, "sysv") == 0)
                return cmd_sysv(max);
        if (strcmp(cmd, "posix-shm") == 0)
                return cmd_posix_shm(max);
        fprintf(stderr, "%s: unknown subcommand '%s'\n", argv[0], cmd);
        return 2;
}
