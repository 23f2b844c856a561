/* bench/wall.c — the wall time of one command as hyperfine -N takes it:
 * CLOCK_MONOTONIC from just before posix_spawn (glibc: a vfork-style
 * clone, as Rust's Command uses) to waitpid's return. bench/timings runs
 * each timed brig run through it, so a run's time outside every stamp of
 * its report (the exec and loading of brig, its command line, its exit)
 * is measured in that same run, not guessed from another loop.
 *
 *   cc -O2 -o wall bench/wall.c && ./wall CMD [ARG...]
 *
 * The command inherits stdin, stdout and stderr. Prints "start_ns N" (the
 * CLOCK_MONOTONIC nanosecond before the spawn) and "wall_ns N" on stdout
 * once the command has exited; exits with the command's status
 * (128+N when it died of signal N, 127 when it could not start). */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: wall CMD [ARG...]\n");
                return 2;
        }
        pid_t pid;
        uint64_t t0 = now_ns();
        int e = posix_spawn(&pid, argv[1], NULL, NULL, argv + 1, environ);
        if (e) {
                fprintf(stderr, "wall: %s: %s\n", argv[1], strerror(e));
                return 127;
        }
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
        uint64_t t1 = now_ns();
        printf("start_ns %llu\nwall_ns %llu\n", (unsigned long long)t0, (unsigned long long)(t1 - t0));
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
