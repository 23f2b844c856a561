/* probe_fs — really attempts filesystem attacks from inside the sandbox.
 *
 *   probe_fs OP ARGS...
 *
 * Prints exactly one result line on stdout:
 *
 *   OP ARG: ok [details]        the operation worked
 *   OP ARG: fail ERRNAME        the kernel refused it (errno's name)
 *
 * and exits 0 when the operation WORKED, 1 when it was refused, 2 on a
 * usage error. For an attack, exit 0 / "ok" means the attack succeeded;
 * the integration tests check both the status and the line.
 *
 * Operations:
 *   read PATH [MAX]        open O_RDONLY and read up to MAX bytes (default 256)
 *   list DIR               the directory's entries, sorted, comma-separated
 *   stat PATH              lstat: type, mode, uid, gid, size
 *   statfs PATH            mount flags (ro, nosuid, nodev, noexec) and fs magic
 *   write PATH [DATA]      create/truncate and write DATA (default "brig-probe")
 *   overwrite PATH DATA    open an existing file O_WRONLY (no create) and write
 *   fill PATH BYTES        create and write BYTES bytes; ok only if all written
 *   mkdir PATH | rmdir PATH | unlink PATH | truncate PATH
 *   rename OLD NEW | symlink TARGET LINK | link OLD NEW (hard link)
 *   exchange A B           renameat2(RENAME_EXCHANGE): swap two names atomically
 *   readlink PATH
 *   mknod PATH             character device 1:1 (/dev/mem)
 *   chmod PATH OCTAL | chown PATH UID GID
 *   mount-tmpfs DIR        mount(2) a new tmpfs
 *   bind SRC DST           mount(2) MS_BIND
 *   remount-rw PATH        mount(2) MS_REMOUNT|MS_BIND without MS_RDONLY
 *   umount PATH            umount2(MNT_DETACH): uncover what a mask hides
 *   opath-reopen PATH r|w  open O_PATH, then reopen /proc/self/fd/N
 *   dotdot DIR N           open DIR, climb ".." N times with openat, list it
 *   handle PATH            open_by_handle_at with the ext4/xfs root inode
 *                          (the "shocker" escape) on PATH's filesystem
 *   chroot-escape DIR      chroot(DIR) then chdir("..") x64 and chroot(".")
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char *op;
static const char *arg;

static const char *errname(int e)
{
        switch (e) {
#define E(x) case x: return #x
        E(EPERM); E(ENOENT); E(EIO); E(ENXIO); E(EBADF); E(EACCES); E(EFAULT);
        E(EBUSY); E(EEXIST); E(EXDEV); E(ENODEV); E(ENOTDIR); E(EISDIR); E(EINVAL);
        E(EMFILE); E(ENFILE); E(ETXTBSY); E(EFBIG); E(ENOSPC); E(ESPIPE); E(EROFS);
        E(EMLINK); E(ENAMETOOLONG); E(ENOSYS); E(ENOTEMPTY); E(ELOOP); E(EDQUOT);
        E(EOPNOTSUPP); E(ESTALE); E(ENOMEM); E(E2BIG); E(ECHILD); E(ENOTTY);
        E(EOVERFLOW); E(EAGAIN); E(EINTR); E(ESRCH); E(ENOTBLK); E(EUCLEAN);
#undef E
        default: {
                static char buf[32];
                snprintf(buf, sizeof buf, "ERRNO%d", e);
                return buf;
        }
        }
}

static int worked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int worked(const char *fmt, ...)
{
        printf("%s %s: ok", op, arg);
        if (fmt && *fmt) {
                va_list ap;
                putchar(' ');
                va_start(ap, fmt);
                vprintf(fmt, ap);
                va_end(ap);
        }
        putchar('\n');
        fflush(stdout);
        return 0;
}

static int refused(int e)
{
        printf("%s %s: fail %s\n", op, arg, errname(e));
        fflush(stdout);
        return 1;
}

static int usage(void)
{
        fprintf(stderr, "probe_fs: bad arguments for '%s' (see the comment at the top of probe_fs.c)\n",
                op ? op : "");
        return 2;
}

/* Bytes as printable text: non-printables as \xNN, so a marker stays
 * greppable and the line stays one line. */
static void print_escaped(const unsigned char *buf, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (buf[i] >= 0x21 && buf[i] < 0x7f && buf[i] != '\\')
                        putchar(buf[i]);
                else
                        printf("\\x%02x", buf[i]);
        }
}

static int read_fd_report(int fd, size_t max)
{
        unsigned char *buf = malloc(max + 1);
        if (!buf)
                return usage();
        size_t total = 0;
        while (total < max) {
                ssize_t n = read(fd, buf + total, max - total);
                if (n < 0) {
                        int e = errno;
                        free(buf);
                        return refused(e);
                }
                if (n == 0)
                        break;
                total += (size_t)n;
        }
        printf("%s %s: ok size=%zu data=", op, arg, total);
        print_escaped(buf, total);
        putchar('\n');
        fflush(stdout);
        free(buf);
        return 0;
}

static int do_read(const char *path, const char *max_s)
{
        size_t max = max_s ? strtoul(max_s, NULL, 0) : 256;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return refused(errno);
        int r = read_fd_report(fd, max);
        close(fd);
        return r;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list_fd(int dfd)
{
        DIR *d = fdopendir(dfd);
        if (!d) {
                int e = errno;
                close(dfd);
                return refused(e);
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        errno = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                char **nn = realloc(names, (n + 1) * sizeof *nn);
                if (!nn)
                        return usage();
                names = nn;
                names[n++] = strdup(de->d_name);
        }
        int e = errno;
        closedir(d);
        if (e)
                return refused(e);
        qsort(names, n, sizeof *names, cmp_str);
        printf("%s %s: ok n=%zu entries=", op, arg, n);
        for (size_t i = 0; i < n; i++) {
                printf("%s%s", i ? "," : "", names[i]);
                free(names[i]);
        }
        free(names);
        putchar('\n');
        fflush(stdout);
        return 0;
}

static int do_list(const char *path)
{
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return refused(errno);
        return list_fd(fd);
}

static const char *type_name(mode_t m)
{
        if (S_ISREG(m)) return "file";
        if (S_ISDIR(m)) return "dir";
        if (S_ISLNK(m)) return "symlink";
        if (S_ISCHR(m)) return "chr";
        if (S_ISBLK(m)) return "blk";
        if (S_ISFIFO(m)) return "fifo";
        if (S_ISSOCK(m)) return "sock";
        return "other";
}

static int do_stat(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return refused(errno);
        return worked("type=%s mode=%04o uid=%u gid=%u size=%lld", type_name(st.st_mode),
                      (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
                      (long long)st.st_size);
}

static int do_statfs(const char *path)
{
        struct statvfs sv;
        struct statfs sf;
        if (statvfs(path, &sv) < 0 || statfs(path, &sf) < 0)
                return refused(errno);
        return worked("flags=%s%s%s%s magic=0x%lx bsize=%lu blocks=%llu", (sv.f_flag & ST_RDONLY) ? "ro" : "rw",
                      (sv.f_flag & ST_NOSUID) ? ",nosuid" : "", (sv.f_flag & ST_NODEV) ? ",nodev" : "",
                      (sv.f_flag & ST_NOEXEC) ? ",noexec" : "", (unsigned long)sf.f_type,
                      (unsigned long)sv.f_bsize, (unsigned long long)sv.f_blocks);
}

static int write_all(int fd, const char *data, size_t len)
{
        while (len) {
                ssize_t n = write(fd, data, len);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ENOSPC;
                data += n;
                len -= (size_t)n;
        }
        return 0;
}

static int do_write(const char *path, const char *data, int flags)
{
        int fd = open(path, flags | O_CLOEXEC, 0644);
        if (fd < 0)
                return refused(errno);
        int r = write_all(fd, data, strlen(data));
        if (r == 0 && close(fd) < 0)
                r = -errno;
        else if (r < 0)
                close(fd);
        return r < 0 ? refused(-r) : worked("wrote=%zu", strlen(data));
}

static int do_fill(const char *path, const char *bytes_s)
{
        unsigned long long want = strtoull(bytes_s, NULL, 0);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return refused(errno);
        static char chunk[65536];
        memset(chunk, 'x', sizeof chunk);
        unsigned long long done = 0;
        while (done < want) {
                size_t n = want - done < sizeof chunk ? (size_t)(want - done) : sizeof chunk;
                ssize_t w = write(fd, chunk, n);
                if (w <= 0) {
                        int e = w < 0 ? errno : ENOSPC;
                        close(fd);
                        printf("%s %s: fail %s written=%llu\n", op, arg, errname(e), done);
                        fflush(stdout);
                        return 1;
                }
                done += (unsigned long long)w;
        }
        if (close(fd) < 0)
                return refused(errno);
        return worked("written=%llu", done);
}

static int do_opath_reopen(const char *path, const char *how)
{
        int pfd = open(path, O_PATH | O_CLOEXEC);
        if (pfd < 0)
                return refused(errno);
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
        bool w = how[0] == 'w';
        int fd = open(proc, (w ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        int e = errno;
        close(pfd);
        if (fd < 0)
                return refused(e);
        int r;
        if (w) {
                r = write_all(fd, "brig-probe\n", 11);
                r = r < 0 ? refused(-r) : worked("reopened-rw wrote=11");
        } else {
                r = read_fd_report(fd, 256);
        }
        close(fd);
        return r;
}

static int do_dotdot(const char *dir, const char *n_s)
{
        int n = atoi(n_s);
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return refused(errno);
        for (int i = 0; i < n; i++) {
                int up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int e = errno;
                close(fd);
                if (up < 0)
                        return refused(e);
                fd = up;
        }
        return list_fd(fd);
}

/* The shocker attack: forge a file handle for inode 2 (the root directory
 * of ext2/3/4) and open it relative to any fd on that filesystem. Needs
 * CAP_DAC_READ_SEARCH in the initial user namespace; must fail. */
static int do_handle(const char *path)
{
        int mfd = open(path, O_RDONLY | O_CLOEXEC);
        if (mfd < 0)
                return refused(errno);
        struct {
                struct file_handle fh;
                unsigned char bytes[8];
        } h;
        memset(&h, 0, sizeof h);
        h.fh.handle_bytes = 8;
        h.fh.handle_type = 1;  /* FILEID_INO32_GEN */
        unsigned ino = 2, gen = 0;
        memcpy(h.fh.f_handle, &ino, 4);
        memcpy(h.fh.f_handle + 4, &gen, 4);
        int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_DIRECTORY);
        int e = errno;
        close(mfd);
        if (fd < 0)
                return refused(e);
        return list_fd(fd);
}

static int do_chroot_escape(const char *dir)
{
        if (chroot(dir) < 0)
                return refused(errno);
        for (int i = 0; i < 64; i++)
                if (chdir("..") < 0)
                        return refused(errno);
        if (chroot(".") < 0)
                return refused(errno);
        return worked("escaped");
}

static int check(int r)
{
        return r < 0 ? refused(errno) : worked(NULL);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: probe_fs OP ARGS... (see probe_fs.c)\n");
                return 2;
        }
        op = argv[1];
        arg = argv[2];
        const char *a3 = argc > 3 ? argv[3] : NULL;
        const char *a4 = argc > 4 ? argv[4] : NULL;

        if (!strcmp(op, "read"))
                return do_read(arg, a3);
        if (!strcmp(op, "list"))
                return do_list(arg);
        if (!strcmp(op, "stat"))
                return do_stat(arg);
        if (!strcmp(op, "statfs"))
                return do_statfs(arg);
        if (!strcmp(op, "write"))
                return do_write(arg, a3 ? a3 : "brig-probe\n", O_WRONLY | O_CREAT | O_TRUNC);
        if (!strcmp(op, "overwrite"))
                return a3 ? do_write(arg, a3, O_WRONLY) : usage();
        if (!strcmp(op, "fill"))
                return a3 ? do_fill(arg, a3) : usage();
        if (!strcmp(op, "mkdir"))
                return check(mkdir(arg, 0755));
        if (!strcmp(op, "rmdir"))
                return check(rmdir(arg));
        if (!strcmp(op, "unlink"))
                return check(unlink(arg));
        if (!strcmp(op, "truncate"))
                return check(truncate(arg, 0));
        if (!strcmp(op, "rename"))
                return a3 ? check(rename(arg, a3)) : usage();
        if (!strcmp(op, "exchange"))
                return a3 ? check(renameat2(AT_FDCWD, arg, AT_FDCWD, a3, RENAME_EXCHANGE)) : usage();
        if (!strcmp(op, "symlink"))
                return a3 ? check(symlink(arg, a3)) : usage();
        if (!strcmp(op, "link"))
                return a3 ? check(link(arg, a3)) : usage();
        if (!strcmp(op, "readlink")) {
                char buf[4096];
                ssize_t n = readlink(arg, buf, sizeof buf - 1);
                if (n < 0)
                        return refused(errno);
                buf[n] = '\0';
                return worked("target=%s", buf);
        }
        if (!strcmp(op, "mknod"))
                return check(mknod(arg, S_IFCHR | 0666, makedev(1, 1)));
        if (!strcmp(op, "chmod"))
                return a3 ? check(chmod(arg, (mode_t)strtoul(a3, NULL, 8))) : usage();
        if (!strcmp(op, "chown"))
                return a4 ? check(chown(arg, (uid_t)atoi(a3), (gid_t)atoi(a4))) : usage();
        if (!strcmp(op, "mount-tmpfs"))
                return check(mount("none", arg, "tmpfs", 0, NULL));
        if (!strcmp(op, "bind"))
                return a3 ? check(mount(arg, a3, NULL, MS_BIND | MS_REC, NULL)) : usage();
        if (!strcmp(op, "remount-rw"))
                return check(mount(NULL, arg, NULL, MS_REMOUNT | MS_BIND, NULL));
        if (!strcmp(op, "umount"))
                return check(umount2(arg, MNT_DETACH));
        if (!strcmp(op, "opath-reopen"))
                return a3 ? do_opath_reopen(arg, a3) : usage();
        if (!strcmp(op, "dotdot"))
                return a3 ? do_dotdot(arg, a3) : usage();
        if (!strcmp(op, "handle"))
                return do_handle(arg);
        if (!strcmp(op, "chroot-escape"))
                return do_chroot_escape(arg);
        return usage();
}
