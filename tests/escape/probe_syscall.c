/* probe_syscall.c — syscall-filter and Landlock attacks, run inside the
 * sandbox.
 *
 * Each subcommand really makes the forbidden call and prints one
 * "key=value" line per attempt: "ok" when the call succeeded, the errno
 * name when it failed, or "SIGSYS"/"SIG..." when the attempt (made in a
 * child process) was killed. The integration tests fail when an attack
 * worked.
 *
 * Arguments are chosen so an executed call fails with something other than
 * EPERM/ENOSYS wherever the kernel allows (bad pointers give EFAULT, bad
 * fds EBADF): EPERM then means "filtered", as long as the same probe under
 * --seccomp-allow shows a different result (the tests check both).
 *
 *   probe_syscall denied           every call the default profile refuses
 *   probe_syscall clone            clone with namespace flags (and without)
 *   probe_syscall clone3           clone3 (must be ENOSYS)
 *   probe_syscall unshare          unshare(CLONE_NEWUSER)
 *   probe_syscall ioctl            TIOCSTI/TIOCLINUX plain and with high bits; neighbours
 *   probe_syscall abi              an x32 syscall and an i386 int 0x80 syscall
 *   probe_syscall every            every native syscall number 0-499 (and 1000), each with -1 for every
 *                                  argument, in a child: how each ended, to compare two filters' answers
 *   probe_syscall flood N S        N threads make a refused call (add_key) in a loop for S seconds; prints
 *                                  calls=COUNT, then waits a second (for the host to measure brig)
 *   probe_syscall sockets          socket() in each interesting family
 *   probe_syscall personality      harmless and harmful personas
 *   probe_syscall ptrace           ptrace/process_vm_readv/pidfd_getfd on a sibling
 *   probe_syscall abstract NAME    connect to the abstract unix socket @NAME
 *   probe_syscall abstract-self    listen on an abstract socket and connect to it
 *   probe_syscall signal PID       kill(PID, 0)
 *   probe_syscall write PATH       open PATH for writing (O_WRONLY|O_APPEND) and write a byte
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#define X32_SYSCALL_BIT 0x40000000
#define BAD ((long)1)  /* an address the kernel cannot read: EFAULT when executed */

static const char *err_name(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "E?";
}

static void result(const char *key, long r, int e)
{
        printf("%s=%s\n", key, r >= 0 ? "ok" : err_name(e));
        fflush(stdout);
}

#define TRY(key, call)                          \
        do {                                    \
                errno = 0;                      \
                long _r = (long)(call);         \
                result((key), _r, errno);       \
        } while (0)

/* Run fn in a child and report how it ended: killed (by a seccomp kill
 * action, say), or fn's errno ("ok" for success). */
static void in_child(const char *key, long (*fn)(void *), void *arg)
{
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
                result(key, -1, errno);
                return;
        }
        if (pid == 0) {
                errno = 0;
                long r = fn(arg);
                _exit(r >= 0 ? 0 : (errno ? errno : 255));
        }
        int st;
        if (waitpid(pid, &st, 0) < 0) {
                result(key, -1, errno);
                return;
        }
        if (WIFSIGNALED(st))
                printf("%s=%s\n", key, sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "SIG?");
        else if (WEXITSTATUS(st) == 0)
                printf("%s=ok\n", key);
        else
                printf("%s=%s\n", key, err_name(WEXITSTATUS(st)));
        fflush(stdout);
}

/* ---- the default profile's refusals ------------------------------------- */

static int cmd_denied(void)
{
        TRY("keyctl", syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0));
        TRY("add_key", syscall(SYS_add_key, BAD, BAD, 0, 0, 0));
        TRY("request_key", syscall(SYS_request_key, BAD, BAD, 0, 0));
        TRY("bpf", syscall(SYS_bpf, 0x7fff, BAD, 8));
        TRY("perf_event_open", syscall(SYS_perf_event_open, BAD, 0, -1, -1, 0));
        TRY("userfaultfd", syscall(SYS_userfaultfd, ~0));
        TRY("io_uring_setup", syscall(SYS_io_uring_setup, 8, BAD));
        TRY("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, 0, 0));
        TRY("io_uring_register", syscall(SYS_io_uring_register, -1, 0, 0, 0));
        TRY("ptrace", syscall(SYS_ptrace, PTRACE_ATTACH, 0x3fffffff, 0, 0));
        TRY("process_vm_readv", syscall(SYS_process_vm_readv, 0x3fffffff, BAD, 1, BAD, 1, 0));
        TRY("process_vm_writev", syscall(SYS_process_vm_writev, 0x3fffffff, BAD, 1, BAD, 1, 0));
        TRY("kcmp", syscall(SYS_kcmp, 0x3fffffff, 0x3fffffff, 0, 0, 0));
        TRY("pidfd_getfd", syscall(SYS_pidfd_getfd, -1, 0, 0));
        TRY("mount", syscall(SYS_mount, BAD, BAD, BAD, 0, 0));
        TRY("umount2", syscall(SYS_umount2, BAD, 0));
        TRY("open_tree", syscall(SYS_open_tree, -1, BAD, 0));
        TRY("move_mount", syscall(SYS_move_mount, -1, BAD, -1, BAD, 0));
        TRY("fsopen", syscall(SYS_fsopen, BAD, 0));
        TRY("fsconfig", syscall(SYS_fsconfig, -1, 0, 0, 0, 0));
        TRY("fsmount", syscall(SYS_fsmount, -1, 0, 0));
        TRY("fspick", syscall(SYS_fspick, -1, BAD, 0));
        TRY("mount_setattr", syscall(SYS_mount_setattr, -1, BAD, 0, BAD, 32));
        TRY("pivot_root", syscall(SYS_pivot_root, BAD, BAD));
        TRY("chroot", syscall(SYS_chroot, BAD));
        TRY("unshare", syscall(SYS_unshare, ~0L));
        TRY("setns", syscall(SYS_setns, -1, 0));
        TRY("open_by_handle_at", syscall(SYS_open_by_handle_at, -1, BAD, 0));
        TRY("name_to_handle_at", syscall(SYS_name_to_handle_at, -1, BAD, BAD, BAD, 0));
        TRY("kexec_load", syscall(SYS_kexec_load, 0, 0, 0, 0));
        TRY("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, 0, 0));
        TRY("init_module", syscall(SYS_init_module, BAD, 0, BAD));
        TRY("finit_module", syscall(SYS_finit_module, -1, BAD, 0));
        TRY("delete_module", syscall(SYS_delete_module, BAD, 0));
        TRY("reboot", syscall(SYS_reboot, 0, 0, 0, 0));
        TRY("swapon", syscall(SYS_swapon, BAD, 0));
        TRY("swapoff", syscall(SYS_swapoff, BAD));
        TRY("acct", syscall(SYS_acct, BAD));
        TRY("quotactl", syscall(SYS_quotactl, 0, BAD, 0, 0));
        TRY("quotactl_fd", syscall(SYS_quotactl_fd, -1, 0, 0, 0));
        TRY("settimeofday", syscall(SYS_settimeofday, BAD, 0));
        TRY("clock_settime", syscall(SYS_clock_settime, CLOCK_REALTIME, BAD));
        TRY("clock_adjtime", syscall(SYS_clock_adjtime, CLOCK_REALTIME, BAD));
        TRY("adjtimex", syscall(SYS_adjtimex, BAD));
        TRY("fanotify_init", syscall(SYS_fanotify_init, ~0U, 0));
        TRY("sethostname", syscall(SYS_sethostname, BAD, 4));
        TRY("setdomainname", syscall(SYS_setdomainname, BAD, 4));
        TRY("iopl", syscall(SYS_iopl, 3));
        TRY("ioperm", syscall(SYS_ioperm, 0x80, 1, 1));
        TRY("syslog", syscall(SYS_syslog, 3, BAD, 16));
        /* Not named by the default profile: the allowlist's ENOSYS. */
        TRY("unlisted_lookup_dcookie", syscall(SYS_lookup_dcookie, 0, BAD, 0));
        TRY("unlisted_modify_ldt", syscall(SYS_modify_ldt, 0, BAD, 16));
        /* Controls: allowed calls with bad arguments must reach the kernel. */
        TRY("allowed_read_badfd", syscall(SYS_read, -1, BAD, 1));
        TRY("allowed_stat_fault", syscall(SYS_stat, BAD, BAD));
        return 0;
}

/* ---- namespaces --------------------------------------------------------- */

static long do_clone(void *flags)
{
        long r = syscall(SYS_clone, (unsigned long)(uintptr_t)flags | SIGCHLD, 0, 0, 0, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return r;
}

static int cmd_clone(void)
{
        in_child("clone_plain", do_clone, (void *)0);
        in_child("clone_newuser", do_clone, (void *)(uintptr_t)CLONE_NEWUSER);
        in_child("clone_newns", do_clone, (void *)(uintptr_t)CLONE_NEWNS);
        in_child("clone_newnet", do_clone, (void *)(uintptr_t)CLONE_NEWNET);
        in_child("clone_newpid", do_clone, (void *)(uintptr_t)CLONE_NEWPID);
        /* High bits set: the kernel reads only the low 32 bits of the flags. */
        in_child("clone_newuser_highbits", do_clone, (void *)(uintptr_t)((1UL << 40) | CLONE_NEWUSER));
        return 0;
}

static long do_clone3(void *unused)
{
        struct clone_args args = { .exit_signal = SIGCHLD };
        long r = syscall(SYS_clone3, &args, sizeof args);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return r;
}

static long do_clone3_newuser(void *unused)
{
        struct clone_args args = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
        long r = syscall(SYS_clone3, &args, sizeof args);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        return r;
}

static int cmd_clone3(void)
{
        in_child("clone3", do_clone3, NULL);
        in_child("clone3_newuser", do_clone3_newuser, NULL);
        return 0;
}

static int cmd_unshare(void)
{
        TRY("unshare_newuser", syscall(SYS_unshare, CLONE_NEWUSER));
        TRY("unshare_newns", syscall(SYS_unshare, CLONE_NEWNS));
        TRY("setns_self_user", syscall(SYS_setns, open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC), 0));
        return 0;
}

/* ---- terminal injection ------------------------------------------------- */

static int cmd_ioctl(void)
{
        char c = 'x';
        int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
        int fds[2] = { 0, tty };
        const char *names[2] = { "stdin", "devtty" };
        for (int i = 0; i < 2; i++) {
                if (fds[i] < 0)
                        continue;
                char key[64];
                snprintf(key, sizeof key, "tiocsti_%s", names[i]);
                TRY(key, syscall(SYS_ioctl, fds[i], (unsigned long)TIOCSTI, &c));
                /* CVE-2019-10063: the kernel ignores the high half of cmd. */
                snprintf(key, sizeof key, "tiocsti_highbits_%s", names[i]);
                TRY(key, syscall(SYS_ioctl, fds[i], 0x100000000UL | TIOCSTI, &c));
                snprintf(key, sizeof key, "tiocsti_allbits_%s", names[i]);
                TRY(key, syscall(SYS_ioctl, fds[i], 0xffffffff00000000UL | TIOCSTI, &c));
                char sub = 2;  /* TIOCL_SETSEL-ish: any subcode will do */
                snprintf(key, sizeof key, "tioclinux_%s", names[i]);
                TRY(key, syscall(SYS_ioctl, fds[i], (unsigned long)TIOCLINUX, &sub));
                snprintf(key, sizeof key, "tioclinux_highbits_%s", names[i]);
                TRY(key, syscall(SYS_ioctl, fds[i], 0x100000000UL | TIOCLINUX, &sub));
        }
        /* Neighbours of the refused commands must still work or fail in the
         * kernel (ENOTTY), never EPERM: the complement encoding is exact. */
        struct winsize ws;
        int n;
        TRY("neighbour_tiocgwinsz", syscall(SYS_ioctl, 0, (unsigned long)TIOCGWINSZ, &ws));
        TRY("neighbour_fionread", syscall(SYS_ioctl, 0, (unsigned long)FIONREAD, &n));
        TRY("neighbour_0x5410", syscall(SYS_ioctl, -1, 0x5410UL, &n));
        TRY("neighbour_0x5413", syscall(SYS_ioctl, -1, 0x5413UL, &n));
        TRY("neighbour_0x541d", syscall(SYS_ioctl, -1, 0x541dUL, &n));
        TRY("neighbour_0x1005412", syscall(SYS_ioctl, -1, 0x1005412UL, &n));
        return 0;
}

/* ---- non-native ABIs ---------------------------------------------------- */

static long do_x32_getpid(void *unused)
{
        long r = syscall(X32_SYSCALL_BIT | SYS_getpid);
        /* Any pid means the x32 entry ran the call: report success. */
        return r > 0 ? 0 : -1;
}

static long do_int80_getpid(void *unused)
{
#if defined(__x86_64__)
        long r = 20;  /* __NR_getpid in the i386 table */
        __asm__ volatile("int $0x80" : "+a"(r) : : "memory");
        if (r > 0)
                return 0;
        errno = (int)-r;
        return -1;
#else
        errno = EOPNOTSUPP;
        return -1;
#endif
}

static long do_x32_mount(void *unused)
{
        /* x32's mount is 165 | bit, like x86_64's: a filter ignoring the
         * bit would judge it as "mount" — either way it must not run. */
        return syscall(X32_SYSCALL_BIT | SYS_mount, BAD, BAD, BAD, 0, 0);
}

static int cmd_abi(void)
{
        printf("pid=%d\n", getpid());
        in_child("x32_getpid", do_x32_getpid, NULL);
        in_child("x32_mount", do_x32_mount, NULL);
        in_child("int80_getpid", do_int80_getpid, NULL);
        return 0;
}

/* ---- sockets ------------------------------------------------------------ */

/* -1 everywhere: a bad fd, an unreadable address, an invalid size or
 * flag set, so an executed call fails at once (or the child just exits);
 * the alarm ends one that waits (pause). */
static long do_any(void *nr)
{
        alarm(1);
        return syscall((long)(intptr_t)nr, -1L, -1L, -1L, -1L, -1L, -1L);
}

static int cmd_every(void)
{
        for (long nr = 0; nr <= 1000; nr = nr == 499 ? 1000 : nr + 1) {
                if (nr == __NR_fork || nr == __NR_vfork)
                        continue;  /* a second copy of this loop */
                if (nr == __NR_sync)
                        continue;  /* it flushes every filesystem: as long as the host's disks take, past the
                                    * alarm on a loaded machine (a run's answer told from another's by time) */
                char key[32];
                snprintf(key, sizeof key, "nr%ld", nr);
                in_child(key, do_any, (void *)(intptr_t)nr);
        }
        return 0;
}

static atomic_long flood_calls;
static double flood_seconds;

static double seconds(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *flood_thread(void *unused)
{
        (void)unused;
        double end = seconds() + flood_seconds;
        long n = 0;
        while (seconds() < end) {
                syscall(__NR_add_key, BAD, BAD, BAD, 0, 0);
                n++;
        }
        atomic_fetch_add(&flood_calls, n);
        return NULL;
}

static int cmd_flood(int threads, double secs)
{
        pthread_t t[64];
        flood_seconds = secs;
        if (threads < 1 || threads > 64)
                return 2;
        for (int i = 0; i < threads; i++)
                if (pthread_create(&t[i], NULL, flood_thread, NULL) != 0)
                        return 1;
        for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
        printf("calls=%ld\n", atomic_load(&flood_calls));
        fflush(stdout);
        sleep(1);
        return 0;
}

static long try_socket(long family, int type, long protocol)
{
        long fd = syscall(SYS_socket, family, type | SOCK_CLOEXEC, protocol);
        if (fd >= 0)
                close((int)fd);
        return fd;
}

static int cmd_sockets(void)
{
        TRY("af_unix", try_socket(AF_UNIX, SOCK_STREAM, 0));
        TRY("af_inet", try_socket(AF_INET, SOCK_STREAM, 0));
        TRY("af_inet6", try_socket(AF_INET6, SOCK_DGRAM, 0));
        TRY("af_netlink_route", try_socket(AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */));
        TRY("af_netlink_audit", try_socket(AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */));
        TRY("af_netlink_uevent", try_socket(AF_NETLINK, SOCK_DGRAM, 15 /* NETLINK_KOBJECT_UEVENT */));
        TRY("af_netlink_route_highbits", try_socket(AF_NETLINK, SOCK_RAW, 0x100000009L));
        TRY("af_alg", try_socket(AF_ALG, SOCK_SEQPACKET, 0));
        TRY("af_packet", try_socket(AF_PACKET, SOCK_RAW, 0));
        TRY("af_vsock", try_socket(AF_VSOCK, SOCK_STREAM, 0));
        TRY("af_bluetooth", try_socket(AF_BLUETOOTH, SOCK_STREAM, 0));
        TRY("af_tipc", try_socket(AF_TIPC, SOCK_RDM, 0));
        TRY("af_key", try_socket(AF_KEY, SOCK_RAW, 2));
        TRY("af_packet_highbits", try_socket(0x100000000L | AF_PACKET, SOCK_RAW, 0));
        int sv[2];
        TRY("socketpair_unix", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
        TRY("socketpair_tipc", socketpair(AF_TIPC, SOCK_RDM | SOCK_CLOEXEC, 0, sv));
        return 0;
}

/* ---- personality -------------------------------------------------------- */

static int cmd_personality(void)
{
        TRY("query", syscall(SYS_personality, 0xffffffffUL));
        TRY("linux", syscall(SYS_personality, PER_LINUX));
        TRY("linux32", syscall(SYS_personality, PER_LINUX32));
        TRY("addr_no_randomize", syscall(SYS_personality, PER_LINUX | ADDR_NO_RANDOMIZE));
        TRY("read_implies_exec", syscall(SYS_personality, PER_LINUX | READ_IMPLIES_EXEC));
        TRY("mmap_page_zero", syscall(SYS_personality, PER_LINUX | MMAP_PAGE_ZERO));
        TRY("restore", syscall(SYS_personality, PER_LINUX));
        return 0;
}

/* ---- other processes ---------------------------------------------------- */

static pid_t sibling;

static long do_attach(void *how)
{
        return syscall(SYS_ptrace, (long)(intptr_t)how, sibling, 0, 0);
}

static long do_vm_read(void *unused)
{
        char buf[16];
        struct iovec local = { buf, sizeof buf }, remote = { (void *)0x400000, sizeof buf };
        return syscall(SYS_process_vm_readv, sibling, &local, 1, &remote, 1, 0);
}

static long do_getfd(void *unused)
{
        long pidfd = syscall(SYS_pidfd_open, sibling, 0);
        if (pidfd < 0)
                return pidfd;
        return syscall(SYS_pidfd_getfd, pidfd, 0, 0);
}

static int cmd_ptrace(void)
{
        sibling = fork();
        if (sibling == 0) {
                pause();
                _exit(0);
        }
        /* Each attempt comes from a second child: a sibling, not a parent. */
        in_child("ptrace_attach", do_attach, (void *)(intptr_t)PTRACE_ATTACH);
        in_child("ptrace_seize", do_attach, (void *)(intptr_t)PTRACE_SEIZE);
        in_child("process_vm_readv", do_vm_read, NULL);
        in_child("pidfd_getfd", do_getfd, NULL);
        kill(sibling, SIGKILL);
        waitpid(sibling, NULL, 0);
        return 0;
}

static socklen_t abstract_addr(struct sockaddr_un *a, const char *name)
{
        memset(a, 0, sizeof *a);
        a->sun_family = AF_UNIX;
        size_t n = strnlen(name, sizeof a->sun_path - 1);
        memcpy(a->sun_path + 1, name, n);
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int cmd_abstract(const char *name)
{
        struct sockaddr_un a;
        socklen_t len = abstract_addr(&a, name);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        TRY("abstract_connect", fd < 0 ? -1 : connect(fd, (struct sockaddr *)&a, len));
        return 0;
}

static int cmd_abstract_self(void)
{
        char name[64];
        snprintf(name, sizeof name, "brig-probe-self-%d", getpid());
        struct sockaddr_un a;
        socklen_t len = abstract_addr(&a, name);
        int srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        TRY("abstract_listen", srv < 0 ? -1 : (bind(srv, (struct sockaddr *)&a, len) ?: listen(srv, 1)));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        TRY("abstract_connect_self", fd < 0 ? -1 : connect(fd, (struct sockaddr *)&a, len));
        return 0;
}

static int cmd_write(const char *path)
{
        errno = 0;
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        result("open_write", fd, errno);
        if (fd >= 0)
                TRY("write", write(fd, "1\n", 2));
        return 0;
}

static int usage(void)
{
        fprintf(stderr, "usage: probe_syscall denied|clone|clone3|unshare|ioctl|abi|sockets|personality|"
                        "ptrace|abstract NAME|abstract-self|signal PID|write PATH\n");
        return 2;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return usage();
        const char *c = argv[1];
        if (!strcmp(c, "denied"))
                return cmd_denied();
        if (!strcmp(c, "clone"))
                return cmd_clone();
        if (!strcmp(c, "clone3"))
                return cmd_clone3();
        if (!strcmp(c, "unshare"))
                return cmd_unshare();
        if (!strcmp(c, "ioctl"))
                return cmd_ioctl();
        if (!strcmp(c, "abi"))
                return cmd_abi();
        if (!strcmp(c, "every"))
                return cmd_every();
        if (!strcmp(c, "flood") && argc == 4)
                return cmd_flood(atoi(argv[2]), atof(argv[3]));
        if (!strcmp(c, "sockets"))
                return cmd_sockets();
        if (!strcmp(c, "personality"))
                return cmd_personality();
        if (!strcmp(c, "ptrace"))
                return cmd_ptrace();
        if (!strcmp(c, "abstract") && argc == 3)
                return cmd_abstract(argv[2]);
        if (!strcmp(c, "abstract-self"))
                return cmd_abstract_self();
        if (!strcmp(c, "signal") && argc == 3) {
                TRY("signal0", kill((pid_t)atoi(argv[2]), 0));
                return 0;
        }
        if (!strcmp(c, "write") && argc == 3)
                return cmd_write(argv[2]);
        return usage();
}
