/* probe_proc.c — process and privilege attacks, run inside the sandbox.
 *
 * Each subcommand really attempts something the sandbox must forbid and
 * prints one "key=value" line per attempt: the value is "ok" when the call
 * succeeded, or the errno name (EPERM, ESRCH, ...) when it failed. The
 * integration tests parse these lines and fail when an attack worked.
 *
 *   probe_proc caps               capability sets, bounding set, nnp, securebits
 *   probe_proc ids                real/effective/saved uid and gid
 *   probe_proc setuid             setuid(0), setresuid(0,0,0), setgid(0), setgroups
 *   probe_proc unshare            unshare() each namespace kind
 *   probe_proc clone              clone() with each namespace flag
 *   probe_proc kill PID           kill(PID, 0) and kill(PID, SIGTERM)
 *   probe_proc ptrace PID...      PTRACE_ATTACH and PTRACE_SEIZE of each PID
 *   probe_proc procopen PID       open /proc/PID/{status,cmdline,environ}, readlink exe
 *   probe_proc tiocsti TEXT       TIOCSTI every byte of TEXT on fd 0, 1, 2 and /dev/tty
 *                                 (in TEXT, a backslash-n is a newline)
 *   probe_proc tiocscty TEXT      TIOCSCTTY on fd 0 (steal it), then TIOCSTI on it
 *   probe_proc tioclinux          TIOCLINUX paste/selection on fd 0 and /dev/tty
 *   probe_proc writefd FD TEXT    write TEXT to an inherited fd
 *   probe_proc fds                list open fds among 3..64 (F_GETFD)
 *   probe_proc chroot             chroot("/tmp")
 *   probe_proc mount              mount a tmpfs, remount /, umount /proc, pivot_root
 *   probe_proc sethostname        sethostname / setdomainname
 *   probe_proc reboot             reboot(LINUX_REBOOT_CMD_CAD_OFF) (harmless if allowed)
 *   probe_proc zombie             leave an orphan zombie; count zombies after 2 s
 *   probe_proc exec PATH ARGS...  execv PATH (e.g. a setuid copy) after printing ids
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/reboot.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/reboot.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_GET_SECUREBITS
#define PR_GET_SECUREBITS 27
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_IS_SET 1
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *err_name(int e)
{
        const char *n = strerrorname_np(e);
        return n ? n : "E?";
}

/* Prints key=ok when r >= 0, key=ERRNO otherwise (errno read right after the call). */
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

static int last_cap(void)
{
        int last = CAP_LAST_CAP;
        FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "r");
        if (f) {
                if (fscanf(f, "%d", &last) != 1)
                        last = CAP_LAST_CAP;
                fclose(f);
        }
        return last;
}

static int cmd_caps(void)
{
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof data);
        if (syscall(SYS_capget, &hdr, data) < 0) {
                result("capget", -1, errno);
                return 1;
        }
        unsigned long long eff = data[0].effective | ((unsigned long long)data[1].effective << 32);
        unsigned long long prm = data[0].permitted | ((unsigned long long)data[1].permitted << 32);
        unsigned long long inh = data[0].inheritable | ((unsigned long long)data[1].inheritable << 32);
        printf("capget=ok\ncap_effective=%016llx\ncap_permitted=%016llx\ncap_inheritable=%016llx\n", eff, prm, inh);
        /* The bounding and ambient sets, one cap at a time: a list of the
         * numbers still present (empty when none). */
        int last = last_cap();
        char bnd[512] = "", amb[512] = "";
        int bnd_err = 0;
        for (int c = 0; c <= last; c++) {
                char num[16];
                snprintf(num, sizeof num, "%d", c);
                int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
                if (r < 0)
                        bnd_err = errno;
                else if (r == 1) {
                        if (bnd[0])
                                strcat(bnd, ",");
                        strcat(bnd, num);
                }
                r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0);
                if (r == 1) {
                        if (amb[0])
                                strcat(amb, ",");
                        strcat(amb, num);
                }
        }
        printf("cap_last=%d\nbounding=%s\nbounding_err=%s\nambient=%s\n", last, bnd,
               bnd_err ? err_name(bnd_err) : "none", amb);
        printf("no_new_privs=%d\n", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
        printf("securebits=0x%x\n", prctl(PR_GET_SECUREBITS, 0, 0, 0, 0));
        /* Try to raise each capability back into the effective set. */
        data[0].effective = data[0].permitted = 0xffffffffu;
        data[1].effective = data[1].permitted = 0xffffffffu;
        TRY("capset_all", syscall(SYS_capset, &hdr, data));
        TRY("ambient_raise_sys_admin", prctl(PR_CAP_AMBIENT, 2 /* RAISE */, CAP_SYS_ADMIN, 0, 0));
        TRY("set_securebits_0", prctl(PR_SET_SECUREBITS, 0, 0, 0, 0));
        TRY("keepcaps", prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
        return 0;
}

static int cmd_ids(void)
{
        uid_t r, e, s;
        gid_t gr, ge, gs;
        getresuid(&r, &e, &s);
        getresgid(&gr, &ge, &gs);
        printf("ruid=%u\neuid=%u\nsuid=%u\nrgid=%u\negid=%u\nsgid=%u\n", r, e, s, gr, ge, gs);
        gid_t groups[64];
        int n = getgroups(64, groups);
        printf("groups=");
        for (int i = 0; i < n; i++)
                printf("%s%u", i ? "," : "", groups[i]);
        printf("\n");
        fflush(stdout);
        return 0;
}

static int cmd_setuid(void)
{
        TRY("setuid0", setuid(0));
        TRY("setresuid0", setresuid(0, 0, 0));
        TRY("seteuid0", seteuid(0));
        TRY("setgid0", setgid(0));
        TRY("setresgid0", setresgid(0, 0, 0));
        gid_t g = 0;
        TRY("setgroups0", setgroups(1, &g));
        /* setfsuid returns the previous value, never an error: read it back. */
        syscall(SYS_setfsuid, 0);
        long fsuid = syscall(SYS_setfsuid, -1);
        printf("setfsuid0=%s\n", fsuid == 0 ? "ok" : "EPERM");
        return cmd_ids();
}

static const struct {
        const char *name;
        int flag;
} namespaces[] = {
        { "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS },     { "pid", CLONE_NEWPID },
        { "net", CLONE_NEWNET },   { "ipc", CLONE_NEWIPC },    { "uts", CLONE_NEWUTS },
        { "cgroup", CLONE_NEWCGROUP }, { "time", CLONE_NEWTIME },
};

static int cmd_unshare(void)
{
        /* Each in a child: a success must not change the probe itself. */
        for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++) {
                int p[2];
                if (pipe(p) < 0)
                        return 1;
                pid_t pid = fork();
                if (pid == 0) {
                        close(p[0]);
                        int e = unshare(namespaces[i].flag) == 0 ? 0 : errno;
                        if (write(p[1], &e, sizeof e) != sizeof e)
                                _exit(1);
                        _exit(0);
                }
                close(p[1]);
                int e = -1;
                ssize_t n = read(p[0], &e, sizeof e);
                close(p[0]);
                waitpid(pid, NULL, 0);
                char key[64];
                snprintf(key, sizeof key, "unshare_%s", namespaces[i].name);
                if (n != sizeof e)
                        printf("%s=ENOREPLY\n", key);
                else
                        result(key, e ? -1 : 0, e);
        }
        /* Everything at once, as a container runtime would. */
        int all = 0;
        for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++)
                all |= namespaces[i].flag;
        pid_t pid = fork();
        if (pid == 0)
                _exit(unshare(all) == 0 ? 0 : 10 + (errno & 0x7f));
        int st = 0;
        waitpid(pid, &st, 0);
        printf("unshare_all=%s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok"
                                   : err_name(WIFEXITED(st) ? WEXITSTATUS(st) - 10 : 0));
        fflush(stdout);
        return 0;
}

struct clone_args_v0 {
        unsigned long long flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int cmd_clone(void)
{
        /* clone3, fork-like (no new stack): the only way to ask for
         * CLONE_NEWTIME at creation, and the same path brig itself uses. */
        for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++) {
                char key[64];
                snprintf(key, sizeof key, "clone_%s", namespaces[i].name);
                struct clone_args_v0 args = { .flags = (unsigned)namespaces[i].flag, .exit_signal = SIGCHLD };
                errno = 0;
                long pid = syscall(SYS_clone3, &args, sizeof args);
                if (pid == 0)
                        _exit(0);
                int e = errno;
                if (pid > 0)
                        waitpid((pid_t)pid, NULL, 0);
                result(key, pid, e);
        }
        /* The classic clone() too: with clone3 refused (ENOSYS), libc
         * falls back to it. CLONE_NEWTIME does not fit its flags. */
        for (size_t i = 0; i < sizeof namespaces / sizeof namespaces[0]; i++) {
                if (namespaces[i].flag == CLONE_NEWTIME)
                        continue;
                char key[64];
                snprintf(key, sizeof key, "clone_legacy_%s", namespaces[i].name);
                errno = 0;
                long pid = syscall(SYS_clone, (unsigned long)namespaces[i].flag | SIGCHLD, 0, NULL, NULL, 0);
                if (pid == 0)
                        _exit(0);
                int e = errno;
                if (pid > 0)
                        waitpid((pid_t)pid, NULL, 0);
                result(key, pid, e);
        }
        return 0;
}

static int cmd_kill(pid_t pid)
{
        char key[64];
        snprintf(key, sizeof key, "kill0_%d", pid);
        TRY(key, kill(pid, 0));
        snprintf(key, sizeof key, "killterm_%d", pid);
        TRY(key, kill(pid, SIGTERM));
        snprintf(key, sizeof key, "killpg_%d", pid);
        TRY(key, kill(-pid, SIGTERM));
        snprintf(key, sizeof key, "sigqueue_%d", pid);
        TRY(key, sigqueue(pid, SIGTERM, (union sigval){ 0 }));
        snprintf(key, sizeof key, "pidfd_open_%d", pid);
        errno = 0;
        long fd = syscall(SYS_pidfd_open, pid, 0);
        result(key, fd, errno);
        if (fd >= 0)
                close((int)fd);
        return 0;
}

static int cmd_ptrace(int argc, char **argv)
{
        for (int i = 0; i < argc; i++) {
                pid_t pid = (pid_t)atoi(argv[i]);
                char key[64];
                snprintf(key, sizeof key, "ptrace_attach_%d", pid);
                errno = 0;
                long r = ptrace(PTRACE_ATTACH, pid, 0, 0);
                int e = errno;
                result(key, r, e);
                if (r == 0) {
                        waitpid(pid, NULL, __WALL);
                        ptrace(PTRACE_DETACH, pid, 0, 0);
                }
                snprintf(key, sizeof key, "ptrace_seize_%d", pid);
                errno = 0;
                r = ptrace(PTRACE_SEIZE, pid, 0, 0);
                e = errno;
                result(key, r, e);
                if (r == 0)
                        ptrace(PTRACE_DETACH, pid, 0, 0);
                snprintf(key, sizeof key, "process_vm_readv_%d", pid);
                char buf[8];
                struct iovec l = { buf, sizeof buf }, rm = { (void *)0x400000, sizeof buf };
                errno = 0;
                r = syscall(SYS_process_vm_readv, pid, &l, 1, &rm, 1, 0);
                e = errno;
                /* EFAULT means access was granted and only the address was bad. */
                printf("%s=%s\n", key, r >= 0 || e == EFAULT ? "ok" : err_name(e));
        }
        fflush(stdout);
        return 0;
}

static int cmd_procopen(pid_t pid)
{
        static const char *const files[] = { "status", "cmdline", "environ", "stat", "mem" };
        char path[128], key[128];
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
                snprintf(path, sizeof path, "/proc/%d/%s", pid, files[i]);
                snprintf(key, sizeof key, "open_%s", files[i]);
                errno = 0;
                int fd = open(path, O_RDONLY);
                result(key, fd, errno);
                if (fd >= 0)
                        close(fd);
        }
        snprintf(path, sizeof path, "/proc/%d/exe", pid);
        char target[512];
        errno = 0;
        ssize_t n = readlink(path, target, sizeof target);
        result("readlink_exe", n, errno);
        snprintf(path, sizeof path, "/proc/%d", pid);
        errno = 0;
        TRY("access_dir", access(path, F_OK));
        return 0;
}

/* "\\n" in an argument stands for a newline, so a test can pass a whole
 * command line without a literal newline in its own shell's input. */
static const char *unescape(const char *in)
{
        static char buf[4096];
        size_t o = 0;
        for (const char *c = in; *c && o < sizeof buf - 1; c++) {
                if (c[0] == '\\' && c[1] == 'n') {
                        buf[o++] = '\n';
                        c++;
                } else {
                        buf[o++] = *c;
                }
        }
        buf[o] = 0;
        return buf;
}

static int push_bytes(int fd, const char *text)
{
        for (const char *c = text; *c; c++)
                if (ioctl(fd, TIOCSTI, c) < 0)
                        return -1;
        return 0;
}

/* The kernel takes the ioctl command as 32 bits; a seccomp filter that
 * compares all 64 would miss TIOCSTI with junk in the upper half. */
static int push_bytes_hibits(int fd, const char *text)
{
        for (const char *c = text; *c; c++)
                if (syscall(SYS_ioctl, fd, 0xdead00000000UL | (unsigned long)TIOCSTI, c) < 0)
                        return -1;
        return 0;
}

static int cmd_tiocsti(const char *text)
{
        printf("isatty0=%d\n", isatty(0));
        errno = 0;
        TRY("tiocsti_fd0", push_bytes(0, text));
        TRY("tiocsti_hibits_fd0", push_bytes_hibits(0, text));
        errno = 0;
        int tty = open("/dev/tty", O_RDWR | O_NOCTTY);
        result("open_dev_tty", tty, errno);
        if (tty >= 0) {
                errno = 0;
                TRY("tiocsti_dev_tty", push_bytes(tty, text));
                close(tty);
        }
        /* fds 1 and 2 may be the same terminal. */
        errno = 0;
        TRY("tiocsti_fd1", push_bytes(1, text));
        errno = 0;
        TRY("tiocsti_fd2", push_bytes(2, text));
        return 0;
}

static int cmd_tiocscty(const char *text)
{
        /* A session leader without a controlling terminal may adopt any
         * terminal that is nobody's controlling terminal yet; arg 1 steals
         * one with CAP_SYS_ADMIN. */
        if (getsid(0) != getpid()) {
                errno = 0;
                TRY("setsid", setsid());
        }
        errno = 0;
        TRY("tiocscty_fd0", ioctl(0, TIOCSCTTY, 0));
        errno = 0;
        TRY("tiocscty_fd0_steal", ioctl(0, TIOCSCTTY, 1));
        errno = 0;
        TRY("tiocsti_after_tiocscty", push_bytes(0, text));
        TRY("tiocsti_hibits_after_tiocscty", push_bytes_hibits(0, text));
        return 0;
}

static int cmd_tioclinux(void)
{
        int fds[2] = { 0, -1 };
        fds[1] = open("/dev/tty", O_RDWR | O_NOCTTY);
        const char *names[2] = { "fd0", "dev_tty" };
        for (int i = 0; i < 2; i++) {
                char key[64];
                if (fds[i] < 0) {
                        snprintf(key, sizeof key, "tioclinux_%s", names[i]);
                        printf("%s=ENOTOPEN\n", key);
                        continue;
                }
                /* 3 = TIOCL_PASTESEL: paste the console selection as input. */
                char sub = 3;
                snprintf(key, sizeof key, "tioclinux_paste_%s", names[i]);
                TRY(key, ioctl(fds[i], TIOCLINUX, &sub));
                /* 2 = TIOCL_SETSEL: set a selection to paste later. */
                struct {
                        char sub;
                        unsigned short xs, ys, xe, ye, mode;
                } __attribute__((packed)) sel = { 2, 1, 1, 10, 1, 0 };
                snprintf(key, sizeof key, "tioclinux_setsel_%s", names[i]);
                TRY(key, ioctl(fds[i], TIOCLINUX, &sel));
        }
        if (fds[1] >= 0)
                close(fds[1]);
        return 0;
}

static int cmd_writefd(int fd, const char *text)
{
        char key[64];
        snprintf(key, sizeof key, "fcntl_%d", fd);
        TRY(key, fcntl(fd, F_GETFD));
        snprintf(key, sizeof key, "write_%d", fd);
        TRY(key, write(fd, text, strlen(text)));
        snprintf(key, sizeof key, "read_%d", fd);
        char buf[256];
        errno = 0;
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        if (n < 0 && errno == ESPIPE)
                n = read(fd, buf, sizeof buf - 1);
        result(key, n, errno);
        if (n > 0) {
                buf[n] = 0;
                for (ssize_t i = 0; i < n; i++)
                        if (buf[i] == '\n')
                                buf[i] = ' ';
                printf("read_data_%d=%s\n", fd, buf);
        }
        fflush(stdout);
        return 0;
}

static int cmd_fds(void)
{
        printf("open_fds=");
        int first = 1;
        for (int fd = 3; fd <= 64; fd++) {
                if (fcntl(fd, F_GETFD) >= 0) {
                        printf("%s%d", first ? "" : ",", fd);
                        first = 0;
                }
        }
        printf("\n");
        /* The same from the kernel's view; the directory fd itself is one. */
        DIR *d = opendir("/proc/self/fd");
        int count = 0;
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.' && atoi(de->d_name) > 2 && atoi(de->d_name) != dirfd(d))
                                count++;
                closedir(d);
        }
        printf("proc_fds_above_2=%d\n", count);
        fflush(stdout);
        return 0;
}

static int cmd_mount(void)
{
        TRY("mount_tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
        TRY("remount_root_rw", mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND, NULL));
        TRY("bind_root", mount("/", "/tmp", NULL, MS_BIND | MS_REC, NULL));
        TRY("umount_proc", umount2("/proc", MNT_DETACH));
        TRY("mount_proc", mount("proc", "/tmp", "proc", 0, NULL));
        TRY("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
        errno = 0;
        long fsfd = syscall(SYS_fsopen, "tmpfs", 0);
        result("fsopen_tmpfs", fsfd, errno);
        if (fsfd >= 0)
                close((int)fsfd);
        errno = 0;
        long tree = syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */);
        result("open_tree_clone", tree, errno);
        if (tree >= 0)
                close((int)tree);
        return 0;
}

static int cmd_zombie(void)
{
        /* The child forks a grandchild and exits; the grandchild exits
         * right away as an orphan: only pid 1 can reap it. */
        pid_t child = fork();
        if (child == 0) {
                pid_t g = fork();
                if (g == 0) {
                        struct timespec ts = { 0, 200 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                        _exit(0);
                }
                printf("orphan_pid=%d\n", g);
                fflush(stdout);
                _exit(0);
        }
        waitpid(child, NULL, 0);
        int zombies = -1;
        for (int tries = 0; tries < 40; tries++) {
                struct timespec ts = { 0, 100 * 1000 * 1000 };
                nanosleep(&ts, NULL);
                zombies = 0;
                DIR *d = opendir("/proc");
                if (!d)
                        break;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (atoi(de->d_name) <= 0)
                                continue;
                        char path[300], buf[512];
                        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
                        int fd = open(path, O_RDONLY);
                        if (fd < 0)
                                continue;
                        ssize_t n = read(fd, buf, sizeof buf - 1);
                        close(fd);
                        if (n <= 0)
                                continue;
                        buf[n] = 0;
                        char *rp = strrchr(buf, ')');
                        if (rp && rp[1] == ' ' && rp[2] == 'Z')
                                zombies++;
                }
                closedir(d);
                /* Wait until the orphan has certainly exited (200 ms). */
                if (tries >= 5 && zombies == 0)
                        break;
        }
        printf("zombies=%d\n", zombies);
        fflush(stdout);
        return 0;
}

static int cmd_exec(int argc, char **argv)
{
        cmd_ids();
        printf("exec=%s\n", argv[0]);
        fflush(stdout);
        execv(argv[0], argv);
        result("execv", -1, errno);
        (void)argc;
        return 1;
}

static int usage(void)
{
        fprintf(stderr, "usage: probe_proc caps|ids|setuid|unshare|clone|kill PID|ptrace PID...|procopen PID|"
                        "tiocsti TEXT|tiocscty TEXT|tioclinux|writefd FD TEXT|fds|chroot|mount|sethostname|"
                        "reboot|zombie|exec PATH ARGS...\n");
        return 2;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return usage();
        const char *c = argv[1];
        if (!strcmp(c, "caps"))
                return cmd_caps();
        if (!strcmp(c, "ids"))
                return cmd_ids();
        if (!strcmp(c, "setuid"))
                return cmd_setuid();
        if (!strcmp(c, "unshare"))
                return cmd_unshare();
        if (!strcmp(c, "clone"))
                return cmd_clone();
        if (!strcmp(c, "kill") && argc == 3)
                return cmd_kill((pid_t)atoi(argv[2]));
        if (!strcmp(c, "ptrace") && argc >= 3)
                return cmd_ptrace(argc - 2, argv + 2);
        if (!strcmp(c, "procopen") && argc == 3)
                return cmd_procopen((pid_t)atoi(argv[2]));
        if (!strcmp(c, "tiocsti") && argc == 3)
                return cmd_tiocsti(unescape(argv[2]));
        if (!strcmp(c, "tiocscty") && argc == 3)
                return cmd_tiocscty(unescape(argv[2]));
        if (!strcmp(c, "tioclinux"))
                return cmd_tioclinux();
        if (!strcmp(c, "writefd") && argc == 4)
                return cmd_writefd(atoi(argv[2]), argv[3]);
        if (!strcmp(c, "fds"))
                return cmd_fds();
        if (!strcmp(c, "chroot")) {
                TRY("chroot", chroot("/tmp"));
                return 0;
        }
        if (!strcmp(c, "mount"))
                return cmd_mount();
        if (!strcmp(c, "sethostname")) {
                TRY("sethostname", sethostname("pwned", 5));
                TRY("setdomainname", setdomainname("pwned", 5));
                return 0;
        }
        if (!strcmp(c, "reboot")) {
                /* CAD_OFF only: inside a pid namespace a capable caller gets
                 * EINVAL, on the host it merely disables Ctrl-Alt-Del. Never
                 * a command that could restart anything. */
                TRY("reboot_cad_off", reboot(LINUX_REBOOT_CMD_CAD_OFF));
                return 0;
        }
        if (!strcmp(c, "zombie"))
                return cmd_zombie();
        if (!strcmp(c, "exec") && argc >= 3)
                return cmd_exec(argc - 2, argv + 2);
        return usage();
}
