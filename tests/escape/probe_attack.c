/* probe_attack.c — the red-team catalogue's attacks that the other probes
 * do not already make, run inside the sandbox (and, for the few marked
 * "host side", by the test on the host to prepare an attack).
 *
 * Each subcommand really makes the attempt, with arguments a real exploit
 * would use, and prints one "key=value" line per attempt: "ok" when the
 * step worked, the errno name when the kernel refused it, "SIGSYS" (or
 * another signal) when an attempt made in a child process was killed.
 * Extra facts come as "key=value" too. The test on the host decides; the
 * catalogue is tests/integration/test_escape.py, the table docs/security.md.
 *
 *   exe                     CVE-2019-5736: write brig's or our own binary through /proc/.../exe
 *   exe-watch DEV INO STOP  CVE-2019-5736 against brig exec: until the file STOP exists, open
 *                           /proc/PID/exe of every process that appears; one that is the file
 *                           DEV:INO (brig) is reopened for writing
 *   fds                     CVE-2024-21626: every descriptor above 2, and where ".." leads from it
 *   cwd                     where the working directory really is
 *   write PATH DATA         open PATH for writing and write DATA (/proc/sys, sysrq, core_pattern ...)
 *   cgroup                  CVE-2022-0492: new cgroup+mount namespace, mount cgroup v1, release_agent
 *   mknod DIR               block device 8:0 and /dev/mem's 1:1 in DIR, then open them
 *   handle-of PATH          (host side) print PATH's file handle as TYPE:HEX
 *   open-handle DIR HANDLE  "shocker": open_by_handle_at with a real host handle
 *   keyctl | bpf | userfaultfd | io_uring | perf   each with valid arguments
 *   userns                  unshare/clone/clone3 with CLONE_NEWUSER
 *   abi                     x32 and i386 (int 0x80) system calls, harmless and harmful
 *   tioclinux               TIOCLINUX subcodes on fd 0 and /dev/tty, also with high bits
 *   kmod                    init_module, finit_module, delete_module, kexec, reboot
 *   memscan REVERSED        look for a secret (given reversed) in every process's
 *                           environ, cmdline and memory reachable from inside
 *   pid1                    pid 1 (brig's init): its fds, cwd, root, memory, pidfd_getfd
 *   ipc-make KEY | ipc-rm KEY   (host side) System V shm/msg/sem with KEY
 *   ipc KEY                 reach the host's System V objects with KEY
 *   fds-exhaust             open descriptors until refused
 *   inodes DIR MAX          create empty files in DIR until refused (or MAX)
 *   forkbomb MAX            fork until refused (or MAX), children wait
 *   memhog MB               allocate and touch MB MiB, 16 MiB at a time
 *   setid DIR               setuid/setgid bits and file capabilities on files in DIR
 *   become-root             setgroups to root's group, setgid/setuid to 0, setresuid to 0
 *   link SRC DIR            hard links to SRC from DIR, by name and by descriptor
 *   swap A B                (host side) exchange A and B with renameat2 until killed
 *   signal PID...           kill(PID, 0) and kill(PID, SIGKILL)
 *   open-w PATH             open an existing file for writing (no truncation, nothing written)
 *   prio                    nice -20, SCHED_FIFO, real-time I/O priority
 *   rlimits                 raise hard limits (own and pid 1's)
 *   mlock MB                lock MB MiB of memory
 *   chattr PATH             make PATH immutable / append-only (FS_IOC_SETFLAGS)
 *   syscall-flood N         N rounds of refused calls over thousands of numbers
 *                           (keyctl, bpf, and unnamed ones): flood the audit stream
 *   killall                 kill(-1, SIGKILL): everything the caller may signal
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <linux/bpf.h>
#include <linux/fs.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/reboot.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#define X32_SYSCALL_BIT 0x40000000

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

/* Run fn in a child; report "ok", fn's errno, or the signal that killed it. */
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

static long open_close_mode(const char *path, int flags, mode_t mode)
{
        int fd = open(path, flags | O_CLOEXEC, mode);
        if (fd >= 0)
                close(fd);
        return fd;
}

static long open_close(const char *path, int flags)
{
        int fd = open(path, flags | O_CLOEXEC);
        if (fd >= 0)
                close(fd);
        return fd;
}

/* ---- CVE-2019-5736: the runtime's binary through /proc/PID/exe --------- */

static int cmd_exe(void)
{
        TRY("self_exe_wronly", open_close("/proc/self/exe", O_WRONLY));
        TRY("self_exe_rdwr", open_close("/proc/self/exe", O_RDWR));
        /* The runc exploit's second step: keep an O_PATH and reopen it
         * for writing through the magic link. */
        int p = open("/proc/self/exe", O_PATH | O_CLOEXEC);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", p);
        TRY("self_exe_reopen_wronly", p < 0 ? -1 : open_close(path, O_WRONLY));
        if (p >= 0)
                close(p);
        /* pid 1 is brig itself (forked, never re-executed): its exe is the
         * host's brig binary. */
        TRY("init_exe_opath", open_close("/proc/1/exe", O_PATH));
        TRY("init_exe_rdonly", open_close("/proc/1/exe", O_RDONLY));
        TRY("init_exe_wronly", open_close("/proc/1/exe", O_WRONLY));
        char target[512];
        TRY("init_exe_readlink", readlink("/proc/1/exe", target, sizeof target));
        TRY("init_map_files", open_close("/proc/1/map_files", O_RDONLY | O_DIRECTORY));
        return 0;
}

/* runc's exploit waited for `runc exec` to enter the container and opened
 * /proc/PID/exe of the entering process. brig exec forks the command from
 * the sandbox's pid 1 (a brig process) and runs brig code in it until
 * execve: watch every new process for that window. */
static int cmd_exe_watch(const char *dev_s, const char *ino_s, const char *stop)
{
        dev_t dev = (dev_t)strtoull(dev_s, NULL, 0);
        ino_t ino = (ino_t)strtoull(ino_s, NULL, 0);
        long opened = 0, denied = 0, brig = 0, written = 0, rounds = 0;
        while (access(stop, F_OK) != 0) {
                rounds++;
                DIR *d = opendir("/proc");
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        int pid = atoi(de->d_name);
                        if (pid <= 1 || pid == getpid())
                                continue;
                        char path[64];
                        snprintf(path, sizeof path, "/proc/%d/exe", pid);
                        int fd = open(path, O_PATH | O_CLOEXEC);
                        if (fd < 0) {
                                denied += errno == EACCES || errno == EPERM;
                                continue;
                        }
                        opened++;
                        struct stat st;
                        if (fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
                                brig++;
                                char again[64];
                                snprintf(again, sizeof again, "/proc/self/fd/%d", fd);
                                int w = open(again, O_WRONLY | O_CLOEXEC);
                                if (w >= 0) {
                                        written++;
                                        close(w);  /* nothing written: the open is the proof */
                                }
                        }
                        close(fd);
                }
                if (d)
                        closedir(d);
        }
        printf("rounds=%ld\nexe_opened=%ld\nexe_denied=%ld\nbrig_exe_opened=%ld\nbrig_exe_writable=%ld\n", rounds,
               opened, denied, brig, written);
        return 0;
}

/* ---- CVE-2024-21626: leaked descriptors and the working directory ------ */

static int cmd_fds(void)
{
        printf("open_fds=");
        int first = 1;
        for (int fd = 3; fd < 1024; fd++) {
                if (fcntl(fd, F_GETFD) < 0)
                        continue;
                printf("%s%d", first ? "" : ",", fd);
                first = 0;
        }
        printf("\n");
        for (int fd = 3; fd < 1024; fd++) {
                if (fcntl(fd, F_GETFD) < 0)
                        continue;
                char link[64], target[512];
                snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
                ssize_t n = readlink(link, target, sizeof target - 1);
                target[n > 0 ? n : 0] = 0;
                printf("fd_%d_target=%s\n", fd, target);
                int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                printf("fd_%d_parent=%s\n", fd, up >= 0 ? "ok" : err_name(errno));
                if (up >= 0)
                        close(up);
        }
        fflush(stdout);
        return 0;
}

static int cmd_cwd(void)
{
        char buf[4096];
        errno = 0;
        char *c = getcwd(buf, sizeof buf);
        printf("getcwd=%s\n", c ? c : err_name(errno));
        ssize_t n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        printf("proc_cwd=%s\n", buf);
        /* Same device and inode as "/" after climbing: then ".." stays inside. */
        struct stat root, up;
        int ok = stat("/", &root) == 0 && stat("../../../../../../../../..", &up) == 0;
        printf("dotdot_is_root=%s\n", ok && root.st_dev == up.st_dev && root.st_ino == up.st_ino ? "yes" : "no");
        fflush(stdout);
        return 0;
}

static int cmd_write(const char *path, const char *data)
{
        errno = 0;
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        result("open_write", fd, errno);
        if (fd >= 0) {
                TRY("write", write(fd, data, strlen(data)));
                close(fd);
        }
        return 0;
}

/* ---- CVE-2022-0492: cgroup v1 release_agent ---------------------------- */

static int cmd_cgroup(void)
{
        TRY("unshare_cgroup", syscall(SYS_unshare, CLONE_NEWCGROUP));
        TRY("unshare_mount", syscall(SYS_unshare, CLONE_NEWNS));
        TRY("unshare_user_mount_cgroup", syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP));
        mkdir("/tmp/cgrp", 0755);
        TRY("mount_cgroup_rdma", mount("cgroup", "/tmp/cgrp", "cgroup", 0, "rdma"));
        TRY("mount_cgroup_memory", mount("cgroup", "/tmp/cgrp", "cgroup", 0, "memory"));
        TRY("mount_cgroup2", mount("cgroup2", "/tmp/cgrp", "cgroup2", 0, NULL));
        errno = 0;
        long fs = syscall(SYS_fsopen, "cgroup", 0);
        result("fsopen_cgroup", fs, errno);
        if (fs >= 0)
                close((int)fs);
        /* Any cgroup file system already visible? */
        glob_t g;
        int n = 0;
        const char *const pats[] = { "/sys/fs/cgroup/release_agent", "/sys/fs/cgroup/*/release_agent",
                                     "/tmp/cgrp/release_agent" };
        for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
                if (glob(pats[i], 0, NULL, &g) != 0)
                        continue;
                for (size_t j = 0; j < g.gl_pathc; j++, n++) {
                        char key[300];
                        snprintf(key, sizeof key, "write_%s", g.gl_pathv[j]);
                        int fd = open(g.gl_pathv[j], O_WRONLY | O_CLOEXEC);
                        TRY(key, fd < 0 ? -1 : write(fd, "/tmp/pwn\n", 9));
                        if (fd >= 0)
                                close(fd);
                }
                globfree(&g);
        }
        printf("release_agents_visible=%d\n", n);
        fflush(stdout);
        return 0;
}

/* ---- device nodes ------------------------------------------------------ */

static int cmd_mknod(const char *dir)
{
        static const struct { const char *name; mode_t type; unsigned maj, min; } nodes[] = {
                { "blk_sda", S_IFBLK, 8, 0 }, { "blk_vda", S_IFBLK, 254, 0 }, { "chr_mem", S_IFCHR, 1, 1 },
                { "chr_kmsg", S_IFCHR, 1, 11 },
        };
        for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
                char path[4096], key[64];
                snprintf(path, sizeof path, "%s/%s", dir, nodes[i].name);
                snprintf(key, sizeof key, "mknod_%s", nodes[i].name);
                errno = 0;
                int r = mknod(path, nodes[i].type | 0666, makedev(nodes[i].maj, nodes[i].min));
                result(key, r, errno);
                if (r == 0) {
                        char b;
                        snprintf(key, sizeof key, "read_%s", nodes[i].name);
                        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                        TRY(key, fd < 0 ? -1 : read(fd, &b, 1));
                        if (fd >= 0)
                                close(fd);
                }
        }
        return 0;
}

/* ---- "shocker": open_by_handle_at -------------------------------------- */

/* A file handle and room for its bytes (struct file_handle ends in a
 * flexible array). */
static union {
        struct file_handle fh;
        unsigned char raw[sizeof(struct file_handle) + MAX_HANDLE_SZ];
} hbuf;

static unsigned char *handle_bytes(void)
{
        return hbuf.raw + sizeof(struct file_handle);
}

static int cmd_handle_of(const char *path)
{
        hbuf.fh.handle_bytes = MAX_HANDLE_SZ;
        int mnt;
        if (name_to_handle_at(AT_FDCWD, path, &hbuf.fh, &mnt, 0) < 0) {
                result("handle", -1, errno);
                return 1;
        }
        printf("handle=%d:", hbuf.fh.handle_type);
        for (unsigned i = 0; i < hbuf.fh.handle_bytes; i++)
                printf("%02x", handle_bytes()[i]);
        printf("\n");
        return 0;
}

static int cmd_open_handle(const char *dir, const char *spec)
{
        char *hex;
        hbuf.fh.handle_type = (int)strtol(spec, &hex, 10);
        if (*hex != ':')
                return 2;
        hex++;
        size_t n = strlen(hex) / 2;
        if (n > MAX_HANDLE_SZ)
                return 2;
        for (size_t i = 0; i < n; i++)
                sscanf(hex + 2 * i, "%2hhx", &handle_bytes()[i]);
        hbuf.fh.handle_bytes = (unsigned)n;
        int mfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        result("open_mount_dir", mfd, errno);
        errno = 0;
        int fd = open_by_handle_at(mfd, &hbuf.fh, O_RDONLY | O_CLOEXEC);
        result("open_by_handle_at", fd, errno);
        if (fd >= 0) {
                char buf[256];
                ssize_t r = read(fd, buf, sizeof buf - 1);
                buf[r > 0 ? r : 0] = 0;
                for (char *c = buf; *c; c++)
                        if (*c == '\n')
                                *c = ' ';
                printf("handle_data=%s\n", buf);
        }
        return 0;
}

/* ---- the kernel surface no agent needs ---------------------------------- */

static int cmd_keyctl(void)
{
        TRY("join_session_keyring", syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "brig-attack", 0, 0, 0));
        TRY("add_key_user", syscall(SYS_add_key, "user", "brig-attack", "secret", 6, KEY_SPEC_SESSION_KEYRING));
        TRY("get_user_keyring", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0, 0, 0));
        TRY("request_key", syscall(SYS_request_key, "user", "brig-attack", NULL, KEY_SPEC_SESSION_KEYRING));
        return 0;
}

static int cmd_bpf(void)
{
        union bpf_attr map = { .map_type = BPF_MAP_TYPE_ARRAY, .key_size = 4, .value_size = 4, .max_entries = 1 };
        errno = 0;
        long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &map, sizeof map);
        result("bpf_map_create", fd, errno);
        if (fd >= 0)
                close((int)fd);
        struct bpf_insn prog[] = {
                { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },  /* r0 = 0 */
                { .code = BPF_JMP | BPF_EXIT },
        };
        char log[256];
        union bpf_attr load = {
                .prog_type = BPF_PROG_TYPE_SOCKET_FILTER, .insn_cnt = 2, .insns = (uintptr_t)prog,
                .license = (uintptr_t)"GPL", .log_buf = (uintptr_t)log, .log_size = sizeof log, .log_level = 1,
        };
        errno = 0;
        fd = syscall(SYS_bpf, BPF_PROG_LOAD, &load, sizeof load);
        result("bpf_prog_load", fd, errno);
        if (fd >= 0)
                close((int)fd);
        return 0;
}

static int cmd_userfaultfd(void)
{
        TRY("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
        TRY("userfaultfd_user_only", syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
        TRY("dev_userfaultfd", open_close("/dev/userfaultfd", O_RDWR));
        return 0;
}

static int cmd_io_uring(void)
{
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        errno = 0;
        long fd = syscall(SYS_io_uring_setup, 4, &p);
        result("io_uring_setup", fd, errno);
        if (fd >= 0)
                close((int)fd);
        return 0;
}

static int cmd_perf(void)
{
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.disabled = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        errno = 0;
        long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        result("perf_sw_self", fd, errno);
        if (fd >= 0)
                close((int)fd);
        a.type = PERF_TYPE_HARDWARE;
        a.config = PERF_COUNT_HW_INSTRUCTIONS;
        errno = 0;
        fd = syscall(SYS_perf_event_open, &a, -1, 0, -1, 0);  /* every process on cpu 0 */
        result("perf_hw_cpu0", fd, errno);
        if (fd >= 0)
                close((int)fd);
        return 0;
}

static long do_clone_newuser(void *unused)
{
        long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
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

static long do_unshare_newuser(void *unused)
{
        return syscall(SYS_unshare, CLONE_NEWUSER);
}

static int cmd_userns(void)
{
        in_child("unshare_newuser", do_unshare_newuser, NULL);
        in_child("clone_newuser", do_clone_newuser, NULL);
        in_child("clone3_newuser", do_clone3_newuser, NULL);
        char buf[32] = "";
        int fd = open("/proc/sys/user/max_user_namespaces", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, buf, sizeof buf - 1);
                buf[n > 0 ? n - 1 : 0] = 0;
                close(fd);
        }
        printf("max_user_namespaces=%s\n", buf);
        return 0;
}

/* ---- non-native ABIs ----------------------------------------------------- */

static long do_x32(void *nr)
{
        long r = syscall(X32_SYSCALL_BIT | (long)(intptr_t)nr, CLONE_NEWUSER, 0, 0, 0, 0);
        return r >= 0 ? 0 : -1;
}

static long do_int80(void *nr)
{
#if defined(__x86_64__)
        long r = (long)(intptr_t)nr;
        long arg = CLONE_NEWUSER;
        __asm__ volatile("int $0x80" : "+a"(r) : "b"(arg) : "memory");
        if (r >= 0)
                return 0;
        errno = (int)-r;
        return -1;
#else
        errno = EOPNOTSUPP;
        return -1;
#endif
}

static int cmd_abi(void)
{
        in_child("x32_getpid", do_x32, (void *)(intptr_t)SYS_getpid);
        in_child("x32_unshare_newuser", do_x32, (void *)(intptr_t)SYS_unshare);
        in_child("x32_keyctl", do_x32, (void *)(intptr_t)SYS_keyctl);
        in_child("i386_getpid", do_int80, (void *)(intptr_t)20);
        in_child("i386_unshare_newuser", do_int80, (void *)(intptr_t)310);
        in_child("i386_keyctl", do_int80, (void *)(intptr_t)288);
        return 0;
}

/* ---- terminals ----------------------------------------------------------- */

static int cmd_tioclinux(void)
{
        int fds[2] = { 0, open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC) };
        const char *names[2] = { "fd0", "devtty" };
        static const struct { const char *name; unsigned long hi; } cmds[] = {
                { "plain", 0 }, { "hibit32", 1UL << 32 }, { "hiall", 0xffffffff00000000UL },
        };
        for (int i = 0; i < 2; i++) {
                if (fds[i] < 0)
                        continue;
                for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
                        char key[64];
                        char paste = 3;  /* TIOCL_PASTESEL: paste the selection as input */
                        snprintf(key, sizeof key, "tioclinux_paste_%s_%s", cmds[c].name, names[i]);
                        TRY(key, syscall(SYS_ioctl, fds[i], cmds[c].hi | TIOCLINUX, &paste));
                        struct {
                                char sub;
                                unsigned short xs, ys, xe, ye, mode;
                        } __attribute__((packed)) sel = { 2, 1, 1, 40, 1, 0 };  /* TIOCL_SETSEL */
                        snprintf(key, sizeof key, "tioclinux_setsel_%s_%s", cmds[c].name, names[i]);
                        TRY(key, syscall(SYS_ioctl, fds[i], cmds[c].hi | TIOCLINUX, &sel));
                }
        }
        return 0;
}

/* ---- modules, kexec, reboot ----------------------------------------------- */

static int cmd_kmod(void)
{
        static const char elf[64] = "\177ELF";  /* a module the kernel would parse, had it the right */
        TRY("init_module", syscall(SYS_init_module, elf, sizeof elf, ""));
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        TRY("finit_module", syscall(SYS_finit_module, fd, "", 0));
        TRY("delete_module", syscall(SYS_delete_module, "loop", O_NONBLOCK));
        TRY("kexec_file_load", syscall(SYS_kexec_file_load, fd, fd, 1, "", 2 /* KEXEC_FILE_NO_INITRAMFS */));
        TRY("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
        /* CAD_OFF only: harmless had it worked. */
        TRY("reboot_cad_off", reboot(RB_DISABLE_CAD));
        if (fd >= 0)
                close(fd);
        return 0;
}

/* ---- the supervisor's secrets --------------------------------------------- */

static char secret[256];

/* Count occurrences of the secret in a buffer. */
static int has_secret(const char *buf, size_t n)
{
        size_t k = strlen(secret);
        for (size_t i = 0; k && i + k <= n; i++)
                if (memcmp(buf + i, secret, k) == 0)
                        return 1;
        return 0;
}

static int scan_file(const char *path, int *opened)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        (*opened)++;
        static char buf[1 << 16];
        ssize_t n = read(fd, buf, sizeof buf);
        close(fd);
        return n > 0 && has_secret(buf, (size_t)n);
}

static int cmd_memscan(const char *reversed)
{
        size_t k = strlen(reversed);
        if (k >= sizeof secret)
                return 2;
        for (size_t i = 0; i < k; i++)  /* reversed, so our own argv does not hold it */
                secret[i] = reversed[k - 1 - i];
        int found = 0, opened = 0;
        DIR *d = opendir("/proc");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (atoi(de->d_name) <= 0 || atoi(de->d_name) == getpid())
                        continue;
                static const char *const files[] = { "environ", "cmdline", "stat", "status", "maps" };
                for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
                        char path[300];
                        snprintf(path, sizeof path, "/proc/%s/%s", de->d_name, files[i]);
                        if (scan_file(path, &opened)) {
                                printf("secret_in=%s\n", path);
                                found++;
                        }
                }
        }
        if (d)
                closedir(d);
        printf("proc_files_read=%d\n", opened);
        TRY("open_init_environ", open_close("/proc/1/environ", O_RDONLY));
        TRY("open_init_mem", open_close("/proc/1/mem", O_RDONLY));
        TRY("open_init_maps", open_close("/proc/1/maps", O_RDONLY));
        /* process_vm_readv on pid 1 at a typical data address; EFAULT
         * would mean access was granted. */
        char buf[64];
        struct iovec l = { buf, sizeof buf }, r = { (void *)0x400000, sizeof buf };
        errno = 0;
        long n = syscall(SYS_process_vm_readv, 1, &l, 1, &r, 1, 0);
        printf("process_vm_readv_init=%s\n", n >= 0 || errno == EFAULT ? "ok" : err_name(errno));
        printf("secret_found=%d\n", found);
        fflush(stdout);
        return 0;
}

static int cmd_pid1(void)
{
        int opened = 0;
        for (int fd = 0; fd < 64; fd++) {
                char path[64];
                snprintf(path, sizeof path, "/proc/1/fd/%d", fd);
                int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
                if (f >= 0) {
                        opened++;
                        close(f);
                } else if (errno != ENOENT && fd < 8) {
                        printf("init_fd_%d=%s\n", fd, err_name(errno));
                }
        }
        printf("init_fds_opened=%d\n", opened);
        TRY("init_fd_dir", open_close("/proc/1/fd", O_RDONLY | O_DIRECTORY));
        TRY("init_cwd", open_close("/proc/1/cwd/", O_RDONLY | O_DIRECTORY));
        TRY("init_root", open_close("/proc/1/root/", O_RDONLY | O_DIRECTORY));
        errno = 0;
        long pidfd = syscall(SYS_pidfd_open, 1, 0);
        result("pidfd_open_init", pidfd, errno);
        int got = 0;
        for (int fd = 0; pidfd >= 0 && fd < 64; fd++) {
                long g = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
                if (g >= 0) {
                        got++;
                        close((int)g);
                } else if (fd == 3) {
                        printf("pidfd_getfd_3=%s\n", err_name(errno));
                }
        }
        printf("pidfd_getfd_got=%d\n", got);
        fflush(stdout);
        return 0;
}

/* ---- System V IPC ------------------------------------------------------------ */

static int cmd_ipc_make(key_t key)
{
        TRY("shmget", shmget(key, 4096, IPC_CREAT | 0666));
        TRY("msgget", msgget(key, IPC_CREAT | 0666));
        TRY("semget", semget(key, 1, IPC_CREAT | 0666));
        return 0;
}

static int cmd_ipc_rm(key_t key)
{
        int id = shmget(key, 0, 0);
        if (id >= 0)
                shmctl(id, IPC_RMID, NULL);
        id = msgget(key, 0);
        if (id >= 0)
                msgctl(id, IPC_RMID, NULL);
        id = semget(key, 0, 0);
        if (id >= 0)
                semctl(id, 0, IPC_RMID);
        return 0;
}

static int cmd_ipc(key_t key)
{
        TRY("shmget", shmget(key, 0, 0));
        TRY("msgget", msgget(key, 0));
        TRY("semget", semget(key, 0, 0));
        return 0;
}

/* ---- exhaustion --------------------------------------------------------------- */

static int cmd_fds_exhaust(void)
{
        long n = 0;
        int e = 0;
        for (;;) {
                if (open("/dev/null", O_RDONLY) < 0) {
                        e = errno;
                        break;
                }
                n++;
        }
        struct rlimit rl;
        getrlimit(RLIMIT_NOFILE, &rl);
        printf("opened=%ld\nstopped_by=%s\nnofile=%llu\n", n, err_name(e), (unsigned long long)rl.rlim_cur);
        return 0;
}

static int cmd_inodes(const char *dir, long max)
{
        long n = 0;
        int e = 0;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                result("open_dir", -1, errno);
                return 1;
        }
        for (; n < max; n++) {
                char name[32];
                snprintf(name, sizeof name, "i%ld", n);
                int fd = openat(dfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
                if (fd < 0) {
                        e = errno;
                        break;
                }
                close(fd);
        }
        printf("created=%ld\nstopped_by=%s\n", n, e ? err_name(e) : "max");
        return 0;
}

static int cmd_forkbomb(long max)
{
        long n = 0;
        int e = 0;
        pid_t *kids = calloc((size_t)max, sizeof *kids);
        for (; kids && n < max; n++) {
                pid_t p = fork();
                if (p < 0) {
                        e = errno;
                        break;
                }
                if (p == 0) {
                        pause();
                        _exit(0);
                }
                kids[n] = p;
        }
        printf("forked=%ld\nstopped_by=%s\n", n, e ? err_name(e) : "max");
        fflush(stdout);
        for (long i = 0; i < n; i++)
                kill(kids[i], SIGKILL);
        for (long i = 0; i < n; i++)
                waitpid(kids[i], NULL, 0);
        return 0;
}

static int cmd_memhog(long mb)
{
        long got = 0;
        for (; got < mb; got += 16) {
                char *p = mmap(NULL, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) {
                        printf("allocated_mb=%ld\nstopped_by=%s\n", got, err_name(errno));
                        return 0;
                }
                for (long i = 0; i < (16 << 20); i += 4096)
                        p[i] = 1;
                if (got % 1024 == 0) {
                        printf("progress_mb=%ld\n", got);
                        fflush(stdout);
                }
        }
        printf("allocated_mb=%ld\nstopped_by=max\n", got);
        return 0;
}

/* ---- other ids: the user asked for is the user it stays ----------------------- */

static int cmd_become_root(void)
{
        gid_t root = 0, list[64];
        int n = getgroups(64, list);
        printf("groups=");
        for (int i = 0; i < n; i++)
                printf("%s%u", i ? "," : "", (unsigned)list[i]);
        printf("\nuid=%u\ngid=%u\n", (unsigned)getuid(), (unsigned)getgid());
        TRY("setgroups_root", setgroups(1, &root));
        TRY("setgroups_none", setgroups(0, NULL));
        TRY("setgid_root", setgid(0));
        TRY("setresgid_root", setresgid(0, 0, 0));
        TRY("setuid_root", setuid(0));
        TRY("setresuid_root", setresuid(0, 0, 0));
        return 0;
}

/* ---- setuid bits and file capabilities ----------------------------------------- */

static int cmd_setid(const char *dir)
{
        char f[4096], g[4096], h[4096], k[4096];
        snprintf(f, sizeof f, "%s/chmod-suid", dir);
        snprintf(g, sizeof g, "%s/creat-suid", dir);
        snprintf(h, sizeof h, "%s/mknod-suid", dir);
        snprintf(k, sizeof k, "%s/fcaps", dir);
        int fd = open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        if (fd >= 0) {
                TRY("fchmod_setuid", fchmod(fd, 04755));
                TRY("fchmod_setgid", fchmod(fd, 02755));
                close(fd);
        }
        TRY("chmod_setuid", chmod(f, 04755));
        TRY("fchmodat_setuid", fchmodat(AT_FDCWD, f, 06755, 0));
        TRY("fchmodat2_setuid", syscall(452 /* fchmodat2 */, AT_FDCWD, f, 04755, 0));
        TRY("open_creat_setuid", open_close_mode(g, O_CREAT | O_WRONLY | O_EXCL, 04755));
        /* O_TMPFILE, then linked in: raw openat, as glibc's open() passes
         * a mode only with O_CREAT or O_TMPFILE */
        fd = (int)syscall(SYS_openat, AT_FDCWD, dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755);
        result("open_tmpfile_setuid", fd, errno);
        if (fd >= 0) {
                char p[64];
                snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
                linkat(AT_FDCWD, p, AT_FDCWD, g, AT_SYMLINK_FOLLOW);
                close(fd);
        }
        /* Not an attack: junk in the mode of a call that creates nothing
         * (the kernel ignores it) must not be refused. */
        TRY("open_dir_junk_mode", syscall(SYS_openat, AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 04755));
        TRY("open_file_junk_mode", syscall(SYS_openat, AT_FDCWD, f, O_RDONLY | O_CLOEXEC, 06755));
        TRY("mknod_reg_setuid", mknod(h, S_IFREG | 06755, 0));
        TRY("mkdir_setgid", mkdir(k, 02755) ?: rmdir(k));
        fd = open(k, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
        close(fd);
        /* VFS_CAP_REVISION_2, effective, permitted = CAP_SETUID | CAP_SYS_ADMIN. */
        uint32_t v2[5] = { 0x02000001, (1u << 7) | (1u << 21), 0, 0, 0 };
        TRY("setxattr_fcaps_v2", setxattr(k, "security.capability", v2, sizeof v2, 0));
        /* Revision 3 names the root uid it is relative to: host root. */
        uint32_t v3[6] = { 0x03000001, (1u << 7) | (1u << 21), 0, 0, 0, 0 };
        TRY("setxattr_fcaps_v3_root0", setxattr(k, "security.capability", v3, sizeof v3, 0));
        return 0;
}

/* ---- hard links ---------------------------------------------------------------- */

static int cmd_link(const char *src, const char *dir)
{
        char a[4096], b[4096], c[4096];
        snprintf(a, sizeof a, "%s/link-by-name", dir);
        snprintf(b, sizeof b, "%s/link-by-fd", dir);
        snprintf(c, sizeof c, "%s/link-by-procfd", dir);
        TRY("link", link(src, a));
        int fd = open(src, O_PATH | O_CLOEXEC);
        result("open_src", fd, errno);
        if (fd >= 0) {
                TRY("linkat_empty_path", linkat(fd, "", AT_FDCWD, b, AT_EMPTY_PATH));
                char p[64];
                snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
                TRY("linkat_procfd", linkat(AT_FDCWD, p, AT_FDCWD, c, AT_SYMLINK_FOLLOW));
        }
        return 0;
}

static _Noreturn void cmd_swap(const char *a, const char *b)
{
        for (;;)
                syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */);
}

static int cmd_signal(int argc, char **argv)
{
        for (int i = 0; i < argc; i++) {
                pid_t pid = (pid_t)atoi(argv[i]);
                char key[64];
                snprintf(key, sizeof key, "kill0_%d", pid);
                TRY(key, kill(pid, 0));
                snprintf(key, sizeof key, "killkill_%d", pid);
                TRY(key, kill(pid, SIGKILL));
                snprintf(key, sizeof key, "pidfd_%d", pid);
                TRY(key, syscall(SYS_pidfd_open, pid, 0));
        }
        return 0;
}

static int cmd_prio(void)
{
        TRY("nice_minus20", setpriority(PRIO_PROCESS, 0, -20));
        struct sched_param sp = { .sched_priority = 1 };
        TRY("sched_fifo", sched_setscheduler(0, SCHED_FIFO, &sp));
        TRY("sched_rr", sched_setscheduler(0, SCHED_RR, &sp));
        /* IOPRIO_WHO_PROCESS, class RT (1) level 0 */
        TRY("ioprio_rt", syscall(SYS_ioprio_set, 1, 0, (1 << 13) | 0));
        return 0;
}

static int cmd_rlimits(void)
{
        static const struct { const char *name; int res; } lims[] = {
                { "nofile", RLIMIT_NOFILE }, { "nproc", RLIMIT_NPROC }, { "core", RLIMIT_CORE },
                { "memlock", RLIMIT_MEMLOCK }, { "rtprio", RLIMIT_RTPRIO },
        };
        for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
                struct rlimit rl;
                getrlimit(lims[i].res, &rl);
                char key[64];
                if (rl.rlim_max == RLIM_INFINITY) {
                        printf("raise_%s=unlimited-already\n", lims[i].name);
                        continue;
                }
                struct rlimit up = { rl.rlim_max + 1, rl.rlim_max + 1 };
                if (lims[i].res == RLIMIT_NOFILE)
                        up.rlim_cur = up.rlim_max = 1 << 20;
                snprintf(key, sizeof key, "raise_%s", lims[i].name);
                TRY(key, setrlimit(lims[i].res, &up));
                snprintf(key, sizeof key, "prlimit_init_%s", lims[i].name);
                TRY(key, prlimit(1, lims[i].res, &up, NULL));
        }
        return 0;
}

static int cmd_mlock(long mb)
{
        size_t len = (size_t)mb << 20;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
                result("mmap", -1, errno);
                return 0;
        }
        TRY("mlock", mlock(p, len));
        TRY("mlockall", mlockall(MCL_CURRENT | MCL_FUTURE));
        return 0;
}

static int cmd_chattr(const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                result("open", -1, errno);
                return 0;
        }
        int flags = 0;
        TRY("getflags", ioctl(fd, FS_IOC_GETFLAGS, &flags));
        int imm = flags | FS_IMMUTABLE_FL, app = flags | FS_APPEND_FL;
        TRY("set_immutable", ioctl(fd, FS_IOC_SETFLAGS, &imm));
        TRY("set_append_only", ioctl(fd, FS_IOC_SETFLAGS, &app));
        close(fd);
        return 0;
}

static int cmd_syscall_flood(long rounds)
{
        long refused = 0;
        for (long i = 0; i < rounds; i++) {
                refused += syscall(SYS_keyctl, i, 0, 0, 0, 0) < 0;
                refused += syscall(SYS_bpf, i, 0, 0) < 0;
                refused += syscall(1000 + (i % 3000)) < 0;  /* no such call: the allowlist's ENOSYS */
        }
        printf("refused=%ld\ncalls=%ld\n", refused, 3 * rounds);
        return 0;
}

static int usage(void)
{
        fprintf(stderr, "probe_attack: unknown or incomplete command (see the comment at the top of probe_attack.c)\n");
        return 2;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                return usage();
        const char *c = argv[1];
        const char *a = argc > 2 ? argv[2] : NULL, *b = argc > 3 ? argv[3] : NULL;
        if (!strcmp(c, "exe"))
                return cmd_exe();
        if (!strcmp(c, "exe-watch") && argc == 5)
                return cmd_exe_watch(argv[2], argv[3], argv[4]);
        if (!strcmp(c, "fds"))
                return cmd_fds();
        if (!strcmp(c, "cwd"))
                return cmd_cwd();
        if (!strcmp(c, "write") && b)
                return cmd_write(a, b);
        if (!strcmp(c, "cgroup"))
                return cmd_cgroup();
        if (!strcmp(c, "mknod") && a)
                return cmd_mknod(a);
        if (!strcmp(c, "handle-of") && a)
                return cmd_handle_of(a);
        if (!strcmp(c, "open-handle") && b)
                return cmd_open_handle(a, b);
        if (!strcmp(c, "keyctl"))
                return cmd_keyctl();
        if (!strcmp(c, "bpf"))
                return cmd_bpf();
        if (!strcmp(c, "userfaultfd"))
                return cmd_userfaultfd();
        if (!strcmp(c, "io_uring"))
                return cmd_io_uring();
        if (!strcmp(c, "perf"))
                return cmd_perf();
        if (!strcmp(c, "userns"))
                return cmd_userns();
        if (!strcmp(c, "abi"))
                return cmd_abi();
        if (!strcmp(c, "tioclinux"))
                return cmd_tioclinux();
        if (!strcmp(c, "kmod"))
                return cmd_kmod();
        if (!strcmp(c, "memscan") && a)
                return cmd_memscan(a);
        if (!strcmp(c, "pid1"))
                return cmd_pid1();
        if (!strcmp(c, "ipc-make") && a)
                return cmd_ipc_make((key_t)strtol(a, NULL, 0));
        if (!strcmp(c, "ipc-rm") && a)
                return cmd_ipc_rm((key_t)strtol(a, NULL, 0));
        if (!strcmp(c, "ipc") && a)
                return cmd_ipc((key_t)strtol(a, NULL, 0));
        if (!strcmp(c, "fds-exhaust"))
                return cmd_fds_exhaust();
        if (!strcmp(c, "inodes") && b)
                return cmd_inodes(a, strtol(b, NULL, 0));
        if (!strcmp(c, "forkbomb") && a)
                return cmd_forkbomb(strtol(a, NULL, 0));
        if (!strcmp(c, "memhog") && a)
                return cmd_memhog(strtol(a, NULL, 0));
        if (!strcmp(c, "become-root"))
                return cmd_become_root();
        if (!strcmp(c, "setid") && a)
                return cmd_setid(a);
        if (!strcmp(c, "link") && b)
                return cmd_link(a, b);
        if (!strcmp(c, "swap") && b)
                cmd_swap(a, b);
        if (!strcmp(c, "signal") && a)
                return cmd_signal(argc - 2, argv + 2);
        if (!strcmp(c, "open-w") && a) {
                TRY("open_write", open_close(a, O_WRONLY));
                return 0;
        }
        if (!strcmp(c, "chattr") && a)
                return cmd_chattr(a);
        if (!strcmp(c, "prio"))
                return cmd_prio();
        if (!strcmp(c, "rlimits"))
                return cmd_rlimits();
        if (!strcmp(c, "mlock") && a)
                return cmd_mlock(strtol(a, NULL, 0));
        if (!strcmp(c, "syscall-flood") && a)
                return cmd_syscall_flood(strtol(a, NULL, 0));
        if (!strcmp(c, "killall")) {
                TRY("kill_all", kill(-1, SIGKILL));
                return 0;
        }
        return usage();
}
