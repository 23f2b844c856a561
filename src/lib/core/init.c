/* init.c — pid 1 inside the sandbox: reaps every zombie, forwards the
 * signals a terminal or a supervisor sends, and exits with the command.
 * When it exits the kernel kills everything left in the pid namespace, so
 * nothing the command started can outlive it. */
#define _GNU_SOURCE
#include "core/sequence.h"
#include "core/sync.h"
#include "core/footprint.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>
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
                while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
                        if (pid != command_pid)
                                continue;  /* an orphan: reaped, nothing more */
                        struct sync_msg m = { .type = SYNC_STATUS, .status = status };
                        sync_send(plan->sync_fd, &m);
                        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
                }
        }
}
