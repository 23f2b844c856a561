/* bench/floor.c — the physical floor of each step of a cold brig run:
 * what the system calls alone cost on this machine, with no brig code
 * around them (bench/timings puts them beside brig run --timings).
 *
 *   cc -O2 -o floor bench/floor.c && ./floor [PATH/TO/brig] [RUNS] [MOUNTS] [STEP...]
 *
 * Prints "step microseconds" lines, medians of RUNS (default 200), of
 * every step or of the STEPs named (bench/targets asks for one). A step
 * this user cannot do here (a cgroup v1 group as non-root) prints "-" and
 * why. Each measurement runs in a child of its own, so nothing it makes
 * outlives it; the cgroup step removes the groups it made. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS_ALL (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | \
                CLONE_NEWNET | CLONE_NEWTIME)

static int runs = 200;
static const char *brig = "build/brig";

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

/* One measurement: ns, or 0 when the step cannot be done here. */
typedef uint64_t (*step_fn)(void);

static char **only;  /* the steps asked for (NULL-terminated), or NULL: all */

static void report(const char *name, step_fn fn, const char *why_not)
{
        bool asked = !only;
        for (char **o = only; o && *o && !asked; o++)
                asked = strcmp(*o, name) == 0;
        if (!asked)
                return;
        uint64_t *v = calloc((size_t)runs, sizeof *v);
        for (int i = 0; i < runs; i++) {
                v[i] = fn();
                if (!v[i]) {
                        printf("%-22s - (%s: %s)\n", name, why_not, strerror(errno));
                        free(v);
                        return;
                }
        }
        qsort(v, (size_t)runs, sizeof *v, cmp_u64);
        printf("%-22s %.1f\n", name, (double)v[runs / 2] / 1e3);
        free(v);
}

static uint64_t wait_ok(pid_t pid)
{
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return 0;
        return 1;
}

/* fork, child execs argv, parent waits: exec, loading and run. */
static uint64_t spawn_wait(char *const argv[], char *const envp[])
{
        uint64_t t = now_ns();
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                execve(argv[0], argv, envp);
                _exit(127);
        }
        return wait_ok(pid) ? now_ns() - t : 0;
}

static uint64_t exec_true(void)
{
        return spawn_wait((char *[]){ "/bin/true", NULL }, (char *[]){ NULL });
}

static uint64_t exec_brig(void)
{
        return spawn_wait((char *[]){ (char *)brig, "--version", NULL }, (char *[]){ NULL });
}

/* brig's engine alone (brig-engine beside brig): what --version costs
 * without the front end that execs it (src/front/brig.c). */
static char engine[4096];

static uint64_t exec_engine(void)
{
        return spawn_wait((char *[]){ engine, "--version", NULL }, (char *[]){ NULL });
}

static uint64_t exec_brig_now(void)
{
        return spawn_wait((char *[]){ engine, "--version", NULL }, (char *[]){ "LD_BIND_NOW=1", NULL });
}

/* The programs of bench/nolibc.c, if bench/timings built them (their
 * paths in FLOOR_NOLIBC and FLOOR_STATIC_LIBC). */
static uint64_t exec_env_path(const char *var)
{
        const char *path = getenv(var);
        if (!path) {
                errno = ENOENT;
                return 0;
        }
        return spawn_wait((char *[]){ (char *)path, NULL }, (char *[]){ NULL });
}

static uint64_t exec_nolibc(void)
{
        return exec_env_path("FLOOR_NOLIBC");
}

static uint64_t exec_static_libc(void)
{
        return exec_env_path("FLOOR_STATIC_LIBC");
}

/* One cpuid instruction (leaf 4, the cache parameters glibc's start reads
 * again and again): a trap to the hypervisor on a virtual machine. */
static uint64_t cpuid_one(void)
{
#if defined(__x86_64__)
        enum { N = 100 };
        uint64_t t = now_ns();
        for (unsigned i = 0; i < N; i++) {
                unsigned a = 4, b, c = i & 3, d;
                __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
        }
        uint64_t per = (now_ns() - t) / N;
        return per ? per : 1;
#else
        errno = ENOSYS;
        return 0;
#endif
}

static uint64_t fork_exit(void)
{
        uint64_t t = now_ns();
        pid_t pid = fork();
        if (pid == 0)
                _exit(0);
        return wait_ok(pid) ? now_ns() - t : 0;
}

/* brig exec's relay with nothing of brig's in it: a request (about 2 KiB,
 * three descriptors) to a supervisor, which forwards it to a pid 1, which
 * hands it to the child it forked ahead (the spare), which execs
 * /bin/true; pid 1 reaps it, the status goes back through the supervisor,
 * and pid 1 forks the next spare. Timed from our send to the status:
 * what a brig exec costs beyond its client's start (exec_nolibc) with no
 * policy, namespace, filter or check (bench/targets puts the two side by
 * side as the exec row's floor). Plain processes, made once. */
static int relay_fd = -1;
static pid_t relay_pid;

static int relay_send(int s, const void *buf, size_t n, const int *fds, int nfds)
{
        struct iovec io = { (void *)buf, n };
        char control[CMSG_SPACE(3 * sizeof(int))] = { 0 };
        struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1 };
        if (nfds) {
                m.msg_control = control;
                m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
                struct cmsghdr *h = CMSG_FIRSTHDR(&m);
                h->cmsg_level = SOL_SOCKET;
                h->cmsg_type = SCM_RIGHTS;
                h->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
                memcpy(CMSG_DATA(h), fds, (size_t)nfds * sizeof(int));
        }
        return sendmsg(s, &m, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static ssize_t relay_recv(int s, void *buf, size_t n, int *fds, int *nfds)
{
        struct iovec io = { buf, n };
        char control[CMSG_SPACE(3 * sizeof(int))];
        struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
        ssize_t r = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
        *nfds = 0;
        struct cmsghdr *h = r > 0 ? CMSG_FIRSTHDR(&m) : NULL;
        if (h && h->cmsg_type == SCM_RIGHTS && h->cmsg_len <= CMSG_LEN(3 * sizeof(int))) {
                *nfds = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                memcpy(fds, CMSG_DATA(h), (size_t)*nfds * sizeof(int));
        }
        return r;
}

static pid_t relay_spare(int *ctl)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        pid_t pid = fork();
        if (pid == 0) {
                char buf[4096];
                int fds[3], nfds;
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                if (relay_recv(sv[1], buf, sizeof buf, fds, &nfds) <= 0 || nfds != 3)
                        _exit(1);
                for (int i = 0; i < 3; i++)
                        dup2(fds[i], i);
                execve("/bin/true", (char *[]){ "/bin/true", NULL }, (char *[]){ NULL });
                _exit(127);
        }
        close(sv[1]);
        *ctl = sv[0];
        return pid;
}

static void relay_pid1(int sup)
{
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, NULL);
        int sfd = signalfd(-1, &chld, SFD_CLOEXEC), ctl = -1;
        pid_t spare = relay_spare(&ctl);
        while (sfd >= 0 && spare > 0) {
                struct pollfd p[2] = { { .fd = sup, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0)
                        continue;
                if (p[0].revents) {
                        char buf[4096];
                        int fds[3], nfds;
                        ssize_t n = relay_recv(sup, buf, sizeof buf, fds, &nfds);
                        if (n <= 0)
                                break;
                        relay_send(ctl, buf, (size_t)n, fds, nfds);
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
                        close(ctl);
                }
                if (p[1].revents) {
                        struct signalfd_siginfo si;
                        (void)!read(sfd, &si, sizeof si);
                        int st;
                        pid_t w;
                        while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                                if (w == spare) {
                                        relay_send(sup, &st, sizeof st, NULL, 0);
                                        spare = relay_spare(&ctl);
                                }
                }
        }
        if (spare > 0)  /* never kill(-1): a fork that failed left no spare */
                kill(spare, SIGKILL);
        _exit(0);
}

static void relay_supervisor(int client)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                _exit(1);
        pid_t pid1 = fork();
        if (pid1 == 0) {
                close(client);
                close(sv[0]);
                relay_pid1(sv[1]);
        }
        close(sv[1]);
        for (;;) {
                struct pollfd p[2] = { { .fd = client, .events = POLLIN }, { .fd = sv[0], .events = POLLIN } };
                if (poll(p, 2, -1) < 0)
                        continue;
                char buf[4096];
                int fds[3], nfds;
                if (p[0].revents) {
                        ssize_t n = relay_recv(client, buf, sizeof buf, fds, &nfds);
                        if (n <= 0)
                                break;
                        relay_send(sv[0], buf, (size_t)n, fds, nfds);
                        for (int i = 0; i < nfds; i++)
                                close(fds[i]);
                }
                if (p[1].revents) {
                        ssize_t n = relay_recv(sv[0], buf, sizeof buf, fds, &nfds);
                        if (n <= 0)
                                break;
                        relay_send(client, buf, (size_t)n, NULL, 0);
                }
        }
        close(sv[0]);  /* pid 1 ends at the hangup */
        waitpid(pid1, NULL, 0);
        _exit(0);
}

static uint64_t exec_relay(void)
{
        if (relay_fd < 0) {
                int sv[2];
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                        return 0;
                relay_pid = fork();
                if (relay_pid == 0) {
                        close(sv[0]);
                        relay_supervisor(sv[1]);
                }
                close(sv[1]);
                if (relay_pid < 0) {
                        close(sv[0]);
                        return 0;
                }
                relay_fd = sv[0];
        }
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int fds[3] = { null, null, null }, got[3], ngot, st = -1;
        static char request[2051];  /* brig exec's is about this long */
        uint64_t t = now_ns();
        ssize_t n = relay_send(relay_fd, request, sizeof request, fds, 3) < 0
                            ? -1 : relay_recv(relay_fd, &st, sizeof st, got, &ngot);
        uint64_t d = now_ns() - t;
        close(null);
        return n == (ssize_t)sizeof st && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? d : 0;
}

static void relay_stop(void)
{
        if (relay_fd < 0)
                return;
        close(relay_fd);
        waitpid(relay_pid, NULL, 0);
        relay_fd = -1;
}

/* clone3 with every namespace brig makes, to its return in the parent. */
static pid_t clone_all(uint64_t flags)
{
        struct clone_args a = { .flags = flags, .exit_signal = SIGCHLD };
        return (pid_t)syscall(SYS_clone3, &a, sizeof a);
}

/* clone3 with these namespaces, to its return in the parent. */
static uint64_t clone3_timed(uint64_t flags)
{
        uint64_t t = now_ns();
        pid_t pid = clone_all(flags);
        if (pid == 0)
                _exit(0);
        uint64_t d = now_ns() - t;
        return wait_ok(pid) ? d : 0;
}

static uint64_t clone3_ns(void)
{
        return clone3_timed(NS_ALL);
}

/* clone3 with every namespace but the network's, and with the user and
 * network namespaces alone: the network namespace is most of the step
 * (its loopback device and the ipv4, ipv6, conntrack and mptcp sysctl
 * tables, registered for each new namespace). */
static uint64_t clone3_no_net(void)
{
        return clone3_timed(NS_ALL & ~(uint64_t)CLONE_NEWNET);
}

static uint64_t clone3_user_net(void)
{
        return clone3_timed(CLONE_NEWUSER | CLONE_NEWNET);
}

static int write_file(const char *path, const char *s)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        ssize_t n = write(fd, s, strlen(s));
        close(fd);
        return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* uid_map, setgroups, gid_map of a child in a new user namespace. */
static uint64_t uid_map(void)
{
        int p[2];
        if (pipe(p) < 0)
                return 0;
        pid_t pid = clone_all(CLONE_NEWUSER);
        if (pid == 0) {
                char c;
                close(p[1]);
                _exit(read(p[0], &c, 1) == 0 ? 0 : 1);
        }
        close(p[0]);
        char path[64], map[64];
        uint64_t t = now_ns();
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)getuid());
        snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
        int r = write_file(path, map);
        snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
        r |= write_file(path, "deny");
        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)getgid());
        snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
        r |= write_file(path, map);
        uint64_t d = now_ns() - t;
        close(p[1]);
        return wait_ok(pid) && r == 0 ? d : 0;
}

/* Our own v1 group in each controller brig's default profile uses (its
 * --memory and --pids): mkdir, attach a child, move it out, rmdir. */
#define N_CONTROLLERS 2
static const char *const controllers[N_CONTROLLERS] = { "memory", "pids" };

static int own_group(const char *ctl, char *buf, size_t n)
{
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[512];
        int r = -1;
        while (f && fgets(line, sizeof line, f)) {
                char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
                if (!b)
                        continue;
                *b = '\0';
                line[strcspn(line, "\n")] = '\0';
                b[1 + strcspn(b + 1, "\n")] = '\0';
                if (strstr(a + 1, ctl) && (strcmp(a + 1, ctl) == 0 || strstr(a + 1, ",")))
                        r = snprintf(buf, n, "/sys/fs/cgroup/%s%s", a + 1, b + 1) < (int)n ? 0 : -1;
        }
        if (f)
                fclose(f);
        return r;
}

/* attach: 0 mkdir only; 1 the parent writes the child's pid to each
 * cgroup.procs (the whole thread group: cgroup_threadgroup_rwsem); 2 the
 * child writes "0" to each `tasks` the parent opened before the fork (one
 * thread moving itself: no such lock), as brig's child does. */
static uint64_t cgroup_v1(int attach)
{
        char dirs[N_CONTROLLERS][512], procs[1100], pidbuf[32];
        int made = 0, tasks[N_CONTROLLERS], p[2];
        uint64_t t_mkdir = now_ns();
        for (; made < N_CONTROLLERS; made++) {
                char base[480];
                if (own_group(controllers[made], base, sizeof base) < 0)
                        break;
                snprintf(dirs[made], sizeof dirs[made], "%s/floor-%d", base, getpid());
                if (mkdir(dirs[made], 0755) < 0)
                        break;
        }
        uint64_t d = now_ns() - t_mkdir;
        if (made == N_CONTROLLERS && attach == 2 && pipe(p) == 0) {
                int opened = 0;
                for (; opened < N_CONTROLLERS; opened++) {
                        snprintf(procs, sizeof procs, "%s/tasks", dirs[opened]);
                        if ((tasks[opened] = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
                                break;
                }
                pid_t pid = opened == N_CONTROLLERS ? fork() : -1;
                if (pid == 0) {
                        uint64_t t = now_ns();
                        int ok = 1;
                        for (int i = 0; i < N_CONTROLLERS; i++)
                                ok &= write(tasks[i], "0", 1) == 1;
                        uint64_t dt = ok ? now_ns() - t : 0;
                        _exit(write(p[1], &dt, sizeof dt) == sizeof dt ? 0 : 1);
                }
                close(p[1]);
                if (pid < 0 || read(p[0], &d, sizeof d) != sizeof d)
                        d = 0;
                close(p[0]);
                for (int i = 0; i < opened; i++)
                        close(tasks[i]);
                if (pid > 0)
                        waitpid(pid, NULL, 0);
        } else if (made == N_CONTROLLERS && attach == 1) {
                pid_t pid = fork();
                if (pid == 0) {
                        pause();
                        _exit(0);
                }
                uint64_t t = now_ns();
                snprintf(pidbuf, sizeof pidbuf, "%d", pid);
                for (int i = 0; i < N_CONTROLLERS; i++) {
                        snprintf(procs, sizeof procs, "%s/cgroup.procs", dirs[i]);
                        if (write_file(procs, pidbuf) < 0)
                                t = 0;
                }
                d = t ? now_ns() - t : 0;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
        }
        for (int i = 0; i < made; i++)
                rmdir(dirs[i]);
        return made == N_CONTROLLERS ? d : 0;
}

static uint64_t cgroup_create(void)
{
        return cgroup_v1(0);
}

static uint64_t cgroup_attach(void)
{
        return cgroup_v1(1);
}

/* The same after 50 ms of quiet, as between two brig runs: a v1 attach
 * takes cgroup_threadgroup_rwsem for writing, which waits for an RCU
 * grace period unless a writer came just before (the loop above). */
static uint64_t cgroup_attach_cold(void)
{
        usleep(50000);
        return cgroup_v1(1);
}

/* The child joining itself after the same quiet (brig's way, cgroup.c). */
static uint64_t cgroup_join_cold(void)
{
        usleep(50000);
        return cgroup_v1(2);
}

/* The rest runs inside a new user and mount namespace, timed there and
 * sent back through a pipe. */
typedef uint64_t (*inside_fn)(void);

static uint64_t in_child(uint64_t flags, inside_fn fn)
{
        int p[2];
        if (pipe(p) < 0)
                return 0;
        pid_t pid = fork();
        if (pid == 0) {
                uid_t u = getuid();
                gid_t g = getgid();
                char map[64];
                uint64_t d = 0;
                if (unshare(flags) == 0) {
                        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)u);
                        write_file("/proc/self/uid_map", map);
                        write_file("/proc/self/setgroups", "deny");
                        snprintf(map, sizeof map, "0 %u 1\n", (unsigned)g);
                        write_file("/proc/self/gid_map", map);
                        d = fn();
                }
                _exit(write(p[1], &d, sizeof d) == sizeof d ? 0 : 1);
        }
        close(p[1]);
        uint64_t d = 0;
        if (read(p[0], &d, sizeof d) != sizeof d)
                d = 0;
        close(p[0]);
        waitpid(pid, NULL, 0);
        return d;
}

static uint64_t lo_up_inside(void)
{
        uint64_t t = now_ns();
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr = { .ifr_name = "lo" };
        int r = s < 0 ? -1 : ioctl(s, SIOCGIFFLAGS, &ifr);
        ifr.ifr_flags |= IFF_UP;
        if (r == 0)
                r = ioctl(s, SIOCSIFFLAGS, &ifr);
        close(s);
        return r == 0 ? now_ns() - t : 0;
}

static uint64_t loopback_up(void)
{
        return in_child(CLONE_NEWUSER | CLONE_NEWNET, lo_up_inside);
}

/* setsid, as pid 1 and the command call it: the system call alone, in a
 * child of brig's namespaces just made (a new session, and with it a new
 * scheduler autogroup, /proc/sys/kernel/sched_autogroup_enabled), and in
 * the fork of a process that already leads a session of its own (the
 * command, forked by pid 1). Timed in the child. */
static uint64_t setsid_in(int leader)
{
        int p[2];
        if (pipe(p) < 0)
                return 0;
        pid_t pid = clone_all(NS_ALL);
        if (pid == 0) {
                uint64_t d = 0;
                pid_t inner = leader && setsid() >= 0 ? fork() : 0;
                if (inner > 0) {
                        waitpid(inner, NULL, 0);
                        _exit(0);
                }
                uint64_t t = now_ns();
                if (inner == 0 && setsid() >= 0)
                        d = now_ns() - t;
                _exit(write(p[1], &d, sizeof d) == sizeof d ? 0 : 1);
        }
        close(p[1]);
        uint64_t d = 0;
        if (pid < 0 || read(p[0], &d, sizeof d) != sizeof d)
                d = 0;
        close(p[0]);
        if (pid > 0)
                waitpid(pid, NULL, 0);
        return d;
}

static uint64_t setsid_new(void)
{
        return setsid_in(0);
}

static uint64_t setsid_again(void)
{
        return setsid_in(1);
}

/* What a new session costs beside it: the child, woken on its parent's
 * CPU (both pinned to one), calls setsid (or setpgid) while the parent,
 * which yielded to it, still has 400 µs of work — as brig's supervisor
 * sweeps what dead brigs left while pid 1 starts. setsid moves the child
 * into a new autogroup and asks for a reschedule: the parent's group wins
 * the CPU and the child waits for all of its work. setpgid changes no
 * group. From setsid's call to its return, in the child. */
static uint64_t beside_busy(int new_session)
{
        int go[2], res[2];
        if (pipe(go) < 0)
                return 0;
        if (pipe(res) < 0) {
                close(go[0]);
                close(go[1]);
                return 0;
        }
        cpu_set_t one, was;
        sched_getaffinity(0, sizeof was, &was);
        CPU_ZERO(&one);
        CPU_SET(sched_getcpu(), &one);
        sched_setaffinity(0, sizeof one, &one);
        pid_t pid = fork();
        if (pid == 0) {
                char c;
                uint64_t d = 0;
                if (read(go[0], &c, 1) == 1) {
                        uint64_t t = now_ns();
                        if ((new_session ? setsid() : setpgid(0, 0)) >= 0)
                                d = now_ns() - t;
                }
                _exit(write(res[1], &d, sizeof d) == sizeof d ? 0 : 1);
        }
        uint64_t d = 0;
        if (pid > 0) {
                usleep(1000);  /* asleep in its read */
                if (write(go[1], "g", 1) == 1) {
                        sched_yield();
                        for (uint64_t t = now_ns(); now_ns() - t < 400000;)
                                ;
                        if (read(res[0], &d, sizeof d) != sizeof d)
                                d = 0;
                }
                waitpid(pid, NULL, 0);
        }
        sched_setaffinity(0, sizeof was, &was);
        close(go[0]);
        close(go[1]);
        close(res[0]);
        close(res[1]);
        return d;
}

static uint64_t setsid_busy(void)
{
        return beside_busy(1);
}

static uint64_t setpgid_busy(void)
{
        return beside_busy(0);
}

/* One mount: a read-only recursive bind (brig's layout is mostly these),
 * per mount; bench/timings multiplies by brig's count. */
static uint64_t bind_inside(void)
{
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mount("tmpfs", "/tmp", "tmpfs", 0, NULL) < 0 ||
            mkdir("/tmp/usr", 0755) < 0)
                return 0;
        uint64_t t = now_ns();
        int r = mount("/usr", "/tmp/usr", NULL, MS_BIND | MS_REC, NULL);
        if (r == 0)
                r = mount(NULL, "/tmp/usr", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
        return r == 0 ? now_ns() - t : 0;
}

static uint64_t bind_mount(void)
{
        return in_child(CLONE_NEWUSER | CLONE_NEWNS, bind_inside);
}

/* A root of brig's shape with one system call per kernel operation and
 * no brig code: a tmpfs attached over "/", 7 filesystems more (6 tmpfs,
 * where brig has tmpfs, proc and devpts: proc needs a pid namespace of
 * our own) and recursive read-only binds up to tree_mounts in all (brig's
 * count, the third argument; 41 by default), then pivot_root and the old
 * root's detach (an RCU grace period). */
static int tree_mounts = 41;
#define MOUNT_TREE_FS 7

static int tree_fs(void)
{
        int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0 || syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -1;
        int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        close(fs);
        return mnt;
}

static uint64_t mount_tree_inside(void)
{
        uint64_t t = now_ns();
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return 0;
        int usr = open("/usr", O_PATH | O_CLOEXEC | O_DIRECTORY);
        int root = tree_fs();
        if (usr < 0 || root < 0 || syscall(SYS_move_mount, root, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return 0;
        for (int i = 1; i < tree_mounts; i++) {
                char name[16];
                snprintf(name, sizeof name, "m%d", i);
                int tree = i <= MOUNT_TREE_FS
                        ? tree_fs()
                        : (int)syscall(SYS_open_tree, usr, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                       AT_RECURSIVE);
                struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
                if (tree < 0 || mkdirat(root, name, 0755) < 0 ||
                    (i > MOUNT_TREE_FS &&
                     syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof ro) < 0) ||
                    syscall(SYS_move_mount, tree, "", root, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return 0;
                close(tree);
        }
        if (fchdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
            chdir("/") < 0)
                return 0;
        return now_ns() - t;
}

static uint64_t mount_tree(void)
{
        return in_child(CLONE_NEWUSER | CLONE_NEWNS, mount_tree_inside);
}

static uint64_t landlock_inside(void)
{
        uint64_t t = now_ns();
        struct landlock_ruleset_attr attr = { .handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE |
                                                                   LANDLOCK_ACCESS_FS_READ_FILE |
                                                                   LANDLOCK_ACCESS_FS_READ_DIR };
        int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
        struct landlock_path_beneath_attr pb = { .allowed_access = attr.handled_access_fs,
                                                 .parent_fd = open("/", O_PATH | O_CLOEXEC) };
        int r = rs < 0 ? -1 : (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
        if (r == 0)
                r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (r == 0)
                r = (int)syscall(SYS_landlock_restrict_self, rs, 0);
        return r == 0 ? now_ns() - t : 0;
}

static uint64_t landlock(void)
{
        return in_child(CLONE_NEWUSER, landlock_inside);
}

/* A filter of N compares (one per allowed call; brig's has a few
 * hundred, as a binary tree): N = 0 is the syscall's own floor. */
enum { FILTER_MAX = 400 };
static int filter_len;

/* no_new_privs and the load of PROG: its time, 0 if it failed */
static uint64_t seccomp_timed(struct sock_filter *prog, int len)
{
        struct sock_fprog fp = { .len = (unsigned short)len, .filter = prog };
        uint64_t t = now_ns();
        int r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (r == 0)
                r = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp);
        return r == 0 ? now_ns() - t : 0;
}

static uint64_t seccomp_inside(void)
{
        int N = filter_len;
        static struct sock_filter f[FILTER_MAX + 3];
        f[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0);
        for (int i = 0; i < N; i++)
                f[1 + i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1000 + (unsigned)i, N - i, 0);
        f[N + 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        f[N + 2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        return seccomp_timed(f, N + 3);
}

static uint64_t seccomp_load(void)
{
        return in_child(CLONE_NEWUSER, seccomp_inside);
}

static uint64_t seccomp_load_allow(void)
{
        filter_len = 0;
        return seccomp_load();
}

static uint64_t seccomp_load_400(void)
{
        filter_len = FILTER_MAX;
        return seccomp_load();
}

/* A filter shaped as brig's is (libseccomp's binary tree: compares on
 * the number down to groups of four, then a JEQ and a RET per allowed
 * call): its load time against its length.
 * The kernel's checks, the conversion to eBPF and the JIT are linear in
 * the instructions; the constant-action cache's emulation (which made the
 * 400 linear compares above cost a millisecond) stays short in a tree. */
enum { TREE_MAX = 4096 };
static struct sock_filter tree[TREE_MAX];
static int tree_len, tree_calls;

static void tree_emit(struct sock_filter f)
{
        if (tree_len < TREE_MAX)
                tree[tree_len++] = f;
}

static void tree_build(unsigned lo, unsigned hi)  /* numbers lo..hi-1 allowed */
{
        if (hi - lo <= 4) {
                for (unsigned nr = lo; nr < hi; nr++) {
                        tree_emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
                        tree_emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
                }
                tree_emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1));
                return;
        }
        unsigned mid = lo + (hi - lo) / 2;
        tree_emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, mid, 0, 1));  /* below: over the JA */
        int ja = tree_len;
        tree_emit((struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
        tree_build(lo, mid);
        tree[ja].k = (unsigned)(tree_len - ja - 1);  /* at or above: over the left half */
        tree_build(mid, hi);
}

static uint64_t seccomp_tree_inside(void)
{
        tree_len = 0;
        tree_emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4));  /* arch */
        tree_emit((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xc000003e, 1, 0));  /* x86_64 */
        tree_emit((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
        tree_emit((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0));  /* nr */
        tree_build(0, (unsigned)tree_calls);
        return seccomp_timed(tree, tree_len);
}

static uint64_t seccomp_load_tree(void)
{
        return in_child(CLONE_NEWUSER, seccomp_tree_inside);
}

int main(int argc, char **argv)
{
        if (argc > 1)
                brig = argv[1];
        const char *slash = strrchr(brig, '/');
        snprintf(engine, sizeof engine, "%.*sbrig-engine", slash ? (int)(slash - brig + 1) : 0, brig);
        if (argc > 2)
                runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : runs;
        if (argc > 3 && atoi(argv[3]) > MOUNT_TREE_FS)
                tree_mounts = atoi(argv[3]);
        if (argc > 4)
                only = argv + 4;
        report("fork_exit", fork_exit, "fork");
        report("exec_true", exec_true, "exec /bin/true");
        report("exec_brig_version", exec_brig, "exec brig --version");
        report("exec_brig_engine_version", exec_engine, "exec brig-engine --version (no front end)");
        report("exec_brig_bind_now", exec_brig_now, "exec brig-engine --version, LD_BIND_NOW=1");
        report("exec_nolibc", exec_nolibc, "exec a static program with no C library (bench/nolibc.c)");
        report("exec_static_libc", exec_static_libc, "exec a static glibc program, empty main (bench/nolibc.c)");
        report("exec_relay", exec_relay, "brig exec's relay alone: supervisor, pid 1, a spare that execs /bin/true");
        relay_stop();
        report("cpuid", cpuid_one, "one cpuid instruction (x86 only)");
        report("clone3_all_ns", clone3_ns, "clone3 with every namespace");
        report("clone3_no_net", clone3_no_net, "clone3 with every namespace but the network's");
        report("clone3_user_net", clone3_user_net, "clone3 with a user and a network namespace");
        report("uid_map", uid_map, "write the maps");
        report("cgroup_v1_create", cgroup_create, "mkdir memory, pids groups (v1, root only)");
        report("cgroup_v1_attach", cgroup_attach, "attach a child to memory, pids groups (v1, root only)");
        int warm_runs = runs;
        runs = runs < 20 ? runs : 20;
        report("cgroup_v1_attach_cold", cgroup_attach_cold, "attach a child after 50 ms of quiet (v1, root only)");
        report("cgroup_v1_join_cold", cgroup_join_cold, "the child joins itself after 50 ms of quiet (v1, root only)");
        runs = warm_runs;
        report("loopback_up", loopback_up, "lo up in a new netns");
        report("setsid", setsid_new, "setsid in a child of every namespace");
        report("setsid_again", setsid_again, "setsid in the fork of a session leader");
        int all_runs = runs;
        runs = runs < 30 ? runs : 30;  /* each spends 0.4 ms of CPU on purpose */
        report("setsid_beside_busy", setsid_busy, "setsid while the parent works on the same CPU");
        report("setpgid_beside_busy", setpgid_busy, "setpgid while the parent works on the same CPU");
        runs = all_runs;
        report("bind_mount_ro", bind_mount, "one recursive read-only bind");
        report("mount_tree", mount_tree, "a root of brig's mount count, pivot_root and the old root's detach");
        report("landlock", landlock, "landlock ruleset, rule, restrict_self");
        report("seccomp_load_allow", seccomp_load_allow, "seccomp filter that allows all");
        report("seccomp_load_400", seccomp_load_400, "seccomp filter of 400 compares");
        /* named by their length in instructions (brig's default: 230, was 543
         * in libseccomp's tree alone) */
        static const int calls[] = { 32, 64, 128, 200, 256 };
        for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
                tree_calls = calls[i];
                tree_len = 0;
                char name[40];  /* its length first, for the name */
                tree_build(0, (unsigned)calls[i]);
                snprintf(name, sizeof name, "seccomp_load_tree_%d", tree_len + 4);
                report(name, seccomp_load_tree, "seccomp filter shaped as a tree");
        }
        return 0;
}
