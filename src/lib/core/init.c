/* init.c — pid 1 inside the sandbox: reaps every zombie, forwards the
 * signals a terminal or a supervisor sends, and exits with the command.
 * When it exits the kernel kills everything left in the pid namespace, so
 * nothing the command started can outlive it. */
#define _GNU_SOURCE
#include "core/sequence.h"
#include "core/sync.h"
#include "core/footprint.h"
#include "core/timings.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/resource.h>
#include <time.h>
#include <stdlib.h>
#include <sys/wait.h>

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2 };

/* /proc/1/cmdline is readable by everyone inside; brig's command line may
 * carry host paths and --env values. Blank it in place (the kernel reads
 * the memory between arg_start and arg_end, fields 48-49 of stat). */
void init_hide_command_line(void)
{
        FILE *f = fopen("/proc/self/stat", "re");
        if (!f)
                return;
        char buf[2048];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');  /* comm may hold spaces */
        if (!p)
                return;
        unsigned long start = 0, end = 0;
        int field = 2;
        for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
                field++;
                if (field == 48)
                        start = strtoul(tok, NULL, 10);
                else if (field == 49)
                        end = strtoul(tok, NULL, 10);
        }
        static const char name[] = "brig-init";
        if (start == 0 || end <= start + sizeof name)
                return;
        memset((void *)start, 0, end - start);
        memcpy((void *)start, name, sizeof name);
}

void init_detach_stdio(void)
{
        /* Our copies of the caller's stdio would keep pipes open. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0)
                return;
        for (int fd = 0; fd < 3; fd++)
                dup2(null, fd);
        close(null);
}

/* Close every descriptor but 0, 1, 2 and the two given. */
static void close_all_but(int a, int b)
{
        int lo = a < b ? a : b, hi = a < b ? b : a;
        if (lo > 3)
                syscall(SYS_close_range, 3, lo - 1, 0);
        if (hi > lo + 1)
                syscall(SYS_close_range, lo + 1, hi - 1, 0);
        syscall(SYS_close_range, hi + 1, ~0U, 0);
}

struct used {
        uint64_t user_us, system_us;
        int64_t maxrss_kb;
};

static void add_rusage(struct used *u, const struct rusage *ru)
{
        u->user_us += (uint64_t)ru->ru_utime.tv_sec * 1000000 + (uint64_t)ru->ru_utime.tv_usec;
        u->system_us += (uint64_t)ru->ru_stime.tv_sec * 1000000 + (uint64_t)ru->ru_stime.tv_usec;
        if (ru->ru_maxrss > u->maxrss_kb)
                u->maxrss_kb = ru->ru_maxrss;
}

/* The command has ended: everything it left ends now, before its status
 * is sent, so that the supervisor may give the status to its caller (and
 * walk the workspace for the report) while the kernel still tears this
 * process and the namespaces down: nothing of the sandbox's own runs any
 * more by then. What the kernel would do at our exit
 * (zap_pid_ns_processes), done first: SIGKILL to every process of the pid
 * namespace, again after each reaping (a fork racing the kill), until none
 * is left. Every process here is the sandbox user's, as this one is now.
 * One that outlives a second (EPERM: not ours to signal; stuck in the
 * kernel) is left to the kernel at our exit, and the supervisor then
 * waits for that end, as it did before. */
static bool end_everyone(int sfd, struct used *used)
{
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (;;) {
                bool signalled = kill(-1, SIGKILL) == 0 || errno != EPERM;
                int status;
                struct rusage ru;
                pid_t pid;
                while ((pid = wait4(-1, &status, WNOHANG | __WALL, &ru)) > 0)
                        add_rusage(used, &ru);
                if (pid < 0 && errno == ECHILD)
                        return true;
                clock_gettime(CLOCK_MONOTONIC, &now);
                long left_ms = 1000 - ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
                if (!signalled || left_ms <= 0)
                        return false;
                /* the next SIGCHLD (blocked; read through the signalfd) */
                struct pollfd p = { .fd = sfd, .events = POLLIN };
                if (poll(&p, 1, (int)left_ms) > 0) {
                        struct signalfd_siginfo si;
                        (void)!read(sfd, &si, sizeof si);
                }
        }
}

BRIG_IDLE_LOOP _Noreturn void init_main(struct run_plan *plan, pid_t command_pid)
{
        closep(&plan->pty_slave_fd);
        init_detach_stdio();
        init_hide_command_line();
        /* The supervisor blocked these before clone, so none was lost; we
         * read them here instead of running handlers. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGCHLD);
        for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
                sigaddset(&set, forwarded[i]);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC);
        if (sfd < 0) {
                /* Cannot supervise: take the command down with us. */
                kill(command_pid, SIGKILL);
                _exit(BRIG_EXIT_SETUP);
        }
        /* Supervising needs the signalfd and the sync socket, nothing else.
         * Whatever else this process still holds — descriptors the caller
         * leaked to brig (a host directory: CVE-2024-21626), the workspace
         * tree — would otherwise live inside the sandbox for the whole run. */
        close_all_but(sfd, plan->sync_fd);
        struct footprint fp = { 0 };
        struct used used = { 0 };
        for (;;) {
                struct pollfd p = { .fd = sfd, .events = POLLIN };
                int polled = poll(&p, 1, footprint_timeout(&fp, -1));
                footprint_polled(&fp, polled);
                if (polled <= 0)
                        continue;
                struct signalfd_siginfo si;
                ssize_t n = read(sfd, &si, sizeof si);
                if (n != (ssize_t)sizeof si)
                        continue;
                if ((int)si.ssi_signo != SIGCHLD) {
                        /* In a pid namespace, kill(-1) from pid 1 reaches
                         * every other process of the sandbox. */
                        bool everyone = si.ssi_code == SI_QUEUE && si.ssi_int == BRIG_SIGNAL_EVERYONE;
                        kill(everyone ? -1 : command_pid, (int)si.ssi_signo);
                        continue;
                }
                int status;
                pid_t pid;
                struct rusage ru;
                while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
                        add_rusage(&used, &ru);
                        if (pid != command_pid)
                                continue;  /* an orphan: reaped, nothing more */
                        timings_mark(plan->timings, TM_REAPED);
                        struct sync_msg m = { .type = SYNC_STATUS, .status = status };
                        m.alone = end_everyone(sfd, &used);
                        m.cpu_user_us = used.user_us;
                        m.cpu_system_us = used.system_us;
                        m.maxrss_kb = used.maxrss_kb;
                        sync_send(plan->sync_fd, &m);
#ifdef BRIG_TEST_HOOKS
                        /* BRIG_TEST_INIT_LINGER_MS=N: pid 1 ends N ms after the
                         * status, so that a test sees whatever would still run
                         * between the status and the kernel's end of the rest */
                        const char *linger = getenv("BRIG_TEST_INIT_LINGER_MS");
                        if (linger)
                                usleep((useconds_t)atoi(linger) * 1000);
#endif
                        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                }
        }
}
