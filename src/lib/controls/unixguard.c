/* unixguard.c — the answers to the syscall filter's notifications, and the
 * guard on pathname unix sockets.
 *
 * A unix socket bound to a path is reached by that path, and the path
 * reaches it from any namespace: a project's postgres or redis socket in
 * the workspace, docker.sock or the nix daemon's socket under a bound
 * tree, connect(2) from inside gets the host's server on the other end,
 * whatever --net says. A read-only mount does not stop it (the kernel's
 * write-permission check on a socket inode ignores read-only mounts) and
 * Landlock (ABI 7) covers abstract sockets only.
 *
 * So every connect(2), and every sendto(2) that names a destination (the
 * filter tests argument 4, see seccomp.c), stops in the kernel and waits
 * for the supervisor, which decides AND does the call itself:
 *
 *   1. it takes the target's socket (pidfd_getfd) and copies the address
 *      (and sendto's bytes) out of the target's memory, checking with
 *      SECCOMP_IOCTL_NOTIF_ID_VALID that it read the right process;
 *   2. for a pathname address on a unix socket it resolves the path as
 *      the sandbox would — inside the target's root, from its cwd
 *      (openat2 RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS), to an O_PATH
 *      descriptor — and judges that inode: a socket that one of the
 *      sandbox's own sockets is bound to (NETLINK_SOCK_DIAG in the
 *      sandbox's network namespace lists them, with device and inode; a
 *      socket is accounted to the namespace of the process that made it,
 *      so no host listener is ever on that list), or one the policy names
 *      (--allow-unix), passes; anything else is refused with EACCES;
 *   3. it connects (or sends) on the target's socket to
 *      "/proc/self/fd/N" of that O_PATH descriptor, and answers the
 *      notification with the result.
 *
 * Nothing is ever answered "continue": after SECCOMP_USER_NOTIF_FLAG_CONTINUE
 * the kernel would read the descriptor number and the address again from
 * the target, and another thread of the sandbox could have swapped either
 * (dup2 a unix socket over a TCP one, rewrite the buffer, rename the
 * socket file) in between. That is why TCP and UDP connects are done by
 * the supervisor too: the decision "not a unix socket" is worth nothing
 * once the fd number may name another socket. The supervisor's connect
 * runs on the sandbox's socket, so it happens in the sandbox's network
 * namespace, through its routes and its nftables redirect, exactly as the
 * sandbox's own would have.
 *
 * With --net host the namespace is the host's, so "own" also needs a
 * process of the sandbox (its pid namespace) to hold the socket.
 *
 * The supervisor's event loop must never block: every connect(2) goes to
 * a worker thread that waits in it as the sandbox would have, with the
 * kernel's own semantics (backlog full, SYN retries, SO_SNDTIMEO), and
 * answers when it returns — even on a non-blocking socket, whose
 * O_NONBLOCK another thread of the sandbox could clear between our look
 * and our call; a sendto runs in the loop only with MSG_DONTWAIT, which
 * is per call. The loop itself only makes calls that do not wait on
 * anything the sandbox controls. Other notifications (audit mode's
 * refusals and "log" rules) are answered here too, as before.
 *
 * sendmsg(2) and sendmmsg(2) carry their destination inside a struct in
 * memory that the filter cannot read and that may change after any check;
 * they are not intercepted (see docs/security.md: a datagram to a host
 * unix datagram socket by sendmsg with msg_name is the residual). */
#define _GNU_SOURCE
#include "core/model.h"
#include "core/syscalls.h"
#include "controls/mountinfo.h"
#include "controls/unixguard.h"
#include "tools/tools.h"
#include "core/refusals.h"
#include "core/audit.h"
#include "controls/seccomp_filter.h"
#include "controls/exectrace.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <dirent.h>
#include <pthread.h>
#include "controls/scmp.h"
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/un.h>

/* Bytes of one sendto the supervisor copies: a datagram larger than any
 * default socket buffer fails with EMSGSIZE as it would have; a stream
 * (TCP fast open) sends this much, a short write the caller handles. */
#define SEND_MAX (256 * 1024)
/* Calls made in worker threads at once; more wait in a queue for the next
 * free worker, at most MAX_QUEUED (each holds the caller's socket and two
 * descriptors more); beyond that a call gets EAGAIN, said on stderr. */
#define MAX_WORKERS 64
#define MAX_QUEUED 192
/* ... and never more than leave this process FD_RESERVE descriptors for
 * the rest of its work (brig exec's connections, the audit log, the
 * proxy), each call in flight holding up to FDS_PER_CALL: a sandbox that
 * keeps 256 connects waiting must not starve its own supervisor. */
#define FD_RESERVE 128
#define FDS_PER_CALL 4
/* one recv of the socket list (the kernel fills what fits, then the next) */
#define DIAG_BUF 32768

struct listener {
        int fd;                  /* -1 once no process uses that filter */
        uint64_t id;
        uint64_t refused;
        char first_refused[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
};

struct unixguard {
        int epfd;
        int diag_fd;             /* NETLINK_SOCK_DIAG in the sandbox's network namespace */
        uint32_t diag_seq;
        int root_fd;             /* the sandbox's root, O_PATH, once a call needed it */
        uid_t uid;               /* the sandbox user's credentials, on the host */
        gid_t gid;
        gid_t *groups;
        int n_groups;
        char *diag_buf;          /* DIAG_BUF bytes */
        bool host_netns;         /* --net host: that namespace is the host's */
        const char *agent_socket; /* --ssh-agent: brig's relay socket inside (tools.h), or NULL */
        const struct strv *allow;  /* --allow-unix, paths inside */
        struct audit *audit;
        struct exectrace *exec;      /* exec events, or NULL */
        const struct seccomp_replies *replies;
        struct seccomp_notif *req;
        struct seccomp_notif_resp *resp;
        struct listener *listeners;  /* one per command's filter, kept until its counts are taken */
        size_t n_listeners;
        struct listener *current;    /* whose notification is being answered */
        uint64_t next_id;
        uint64_t refused;
        char first_refused[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
        struct refusals *refusals;   /* the run's summary, or NULL */
        const struct seccomp_policy *rules;  /* the user's, for the summary's words */
        const struct run_plan *plan; /* for the answers, made at the first refusal */
        struct seccomp_replies *own_replies;
        uint64_t window_end_ms;      /* this window of the refused calls' pace, and */
        unsigned window_answers;     /* the calls answered in it */
};

int unixguard_new(const struct run_plan *plan, struct audit *audit, const struct seccomp_replies *replies,
                  struct unixguard **ret, brig_error **err)
{
        struct unixguard *g = calloc(1, sizeof *g);
        if (!g)
                return brig_err(err, ENOMEM, "unix socket guard");
        g->diag_fd = g->root_fd = -1;
        g->epfd = epoll_create1(EPOLL_CLOEXEC);
        g->diag_buf = malloc(DIAG_BUF);
        if (g->epfd < 0 || !g->diag_buf || seccomp_notify_alloc(&g->req, &g->resp) < 0) {
                int e = g->epfd < 0 ? errno : ENOMEM;
                unixguard_free(g);
                return brig_err(err, e, "unix socket guard");
        }
        g->host_netns = plan->net_mode == BRIG_NET_HOST;
        g->uid = plan->host_uid;
        g->gid = plan->host_gid;
        /* rootless the sandbox keeps our groups (setgroups is denied there) */
        int n = plan->map_root_for_setup ? 0 : getgroups(0, NULL);
        g->groups = n > 0 ? calloc((size_t)n, sizeof *g->groups) : NULL;
        g->n_groups = g->groups ? getgroups(n, g->groups) : 0;
        if (g->n_groups < 0)
                g->n_groups = 0;
        g->allow = &plan->policy->allow_unix;
        g->agent_socket = plan->tools && plan->tools->agent_upstream ? BRIG_AGENT_SOCKET : NULL;
        g->rules = plan->policy->seccomp;
        g->plan = plan;
        g->audit = audit;
        g->replies = replies;
        if (audit && plan->audit_exec && !(g->exec = exectrace_new(audit, g->epfd))) {
                unixguard_free(g);
                return brig_err(err, ENOMEM, "exec events");
        }
        *ret = g;
        return 0;
}

/* Linux 6.6: the notifying thread and the supervisor switch on one CPU,
 * roughly halving a notification's round trip (older kernels: EINVAL,
 * and the ordinary wake-up it is). */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

uint64_t unixguard_add_listener(struct unixguard *g, int fd)
{
        (void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
        struct listener *grown = realloc(g->listeners, (g->n_listeners + 1) * sizeof *grown);
        if (grown)
                g->listeners = grown;
        if (!grown || epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                close(fd);  /* nobody answers: its calls fail with ENOSYS */
                return 0;
        }
        g->listeners[g->n_listeners++] = (struct listener){ .fd = fd, .id = ++g->next_id };
        return g->next_id;
}

static struct listener *listener_by_fd(struct unixguard *g, int fd)
{
        for (size_t i = 0; i < g->n_listeners; i++)
                if (g->listeners[i].fd == fd)
                        return &g->listeners[i];
        return NULL;
}

static void forget(struct unixguard *g, struct listener *l)
{
        *l = g->listeners[--g->n_listeners];
}

/* Hung up: no process uses that filter any more. Its counts stay until
 * taken, unless nobody will ask (nothing was refused). */
static void drop_listener(struct unixguard *g, int fd)
{
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
        struct listener *l = listener_by_fd(g, fd);
        if (!l)
                return;
        l->fd = -1;
        if (!l->refused)
                forget(g, l);
}

uint64_t unixguard_take_refused(struct unixguard *g, uint64_t id, char *first, size_t len)
{
        for (size_t i = 0; g && id && i < g->n_listeners; i++) {
                struct listener *l = &g->listeners[i];
                if (l->id != id)
                        continue;
                uint64_t n = l->refused;
                snprintf(first, len, "%s", l->first_refused);
                l->refused = 0;
                if (l->fd < 0)
                        forget(g, l);
                return n;
        }
        snprintf(first, len, "%s", "");
        return 0;
}

void unixguard_set_diag(struct unixguard *g, int fd)
{
        closep(&g->diag_fd);
        g->diag_fd = fd;
}

BRIG_IDLE_LOOP int unixguard_poll_fd(const struct unixguard *g)
{
        return g->epfd;
}

uint64_t unixguard_refused(const struct unixguard *g, const char **first)
{
        if (first)
                *first = g && g->refused ? g->first_refused : "";
        return g ? g->refused : 0;
}

void unixguard_free(struct unixguard *g)
{
        if (!g)
                return;
        for (size_t i = 0; i < g->n_listeners; i++)
                closep(&g->listeners[i].fd);
        free(g->listeners);
        closep(&g->diag_fd);
        closep(&g->root_fd);
        closep(&g->epfd);
        free(g->groups);
        seccomp_notify_free(g->req, g->resp);
        free(g->diag_buf);
        free(g->own_replies);
        exectrace_free(g->exec);
        free(g);
}

void unixguard_finish(struct unixguard *g)
{
        if (g)
                exectrace_finish(g->exec);
}

/* ---- one call, copied out of the target ---------------------------------- */

struct call {
        int nr;                  /* __NR_connect or __NR_sendto */
        int sock;                /* the target's socket, our duplicate */
        int domain, type;
        struct sockaddr_storage addr;
        socklen_t alen;
        char *data;              /* sendto */
        size_t len;
        int flags;
        int target_pidfd;        /* SIGPIPE goes back to the target */
        int path_fd;             /* O_PATH of the judged socket file, or -1 */
        const char *uninspectable;  /* the call that failed when the socket could not be taken */
        bool out_of_fds;         /* this process had no descriptor free for it: EAGAIN, said */
        bool as_sandbox;         /* made with the sandbox user's credentials (uid, gid, no groups) */
        uid_t uid;
        gid_t gid;
        char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
};

static void call_free(struct call *c)
{
        closep(&c->sock);
        closep(&c->target_pidfd);
        closep(&c->path_fd);
        free(c->data);
        c->data = NULL;
}

static int read_target(pid_t pid, uint64_t addr, void *buf, size_t len)
{
        if (len == 0)
                return 0;
        struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        return n == (ssize_t)len ? 0 : EFAULT;
}

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

static pid_t thread_group(pid_t tid)
{
        char path[64], line[128];
        snprintf(path, sizeof path, "/proc/%d/status", tid);
        FILE *f = fopen(path, "re");
        pid_t tgid = tid;
        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "Tgid:", 5) == 0)
                        tgid = (pid_t)strtol(line + 5, NULL, 10);
        if (f)
                fclose(f);
        return tgid;
}

/* Copy what the call names out of the target. Returns 0, an errno for the
 * answer, or -1 when the target is gone (nothing to answer). */
static int copy_call(int listener, const struct seccomp_notif *req, struct call *c)
{
        const __u64 *a = req->data.args;
        c->nr = req->data.nr;
        /* req->pid is the calling thread: its own descriptor table and cwd
         * (PIDFD_THREAD, Linux 6.9); before that, its thread group's. */
        c->target_pidfd = (int)syscall(SYS_pidfd_open, req->pid, PIDFD_THREAD);
        if (c->target_pidfd < 0 && errno == EINVAL)
                c->target_pidfd = (int)syscall(SYS_pidfd_open, thread_group(req->pid), 0);
        int open_errno = c->target_pidfd < 0 ? errno : 0;
        /* The pid named the target when the pidfd was made only if the
         * notification is still alive afterwards. */
        if (seccomp_notify_id_valid(listener, req->id) < 0)
                return -1;
        if (open_errno == EMFILE || open_errno == ENFILE)
                return open_errno;  /* guard_call: EAGAIN, said */
        if (c->target_pidfd < 0) {
                c->uninspectable = "pidfd_open";
                return EACCES;  /* cannot look at it: refuse */
        }
        c->sock = (int)syscall(SYS_pidfd_getfd, c->target_pidfd, (int)a[0], 0);
        if (c->sock < 0 && errno == EBADF)
                return EBADF;
        if (c->sock < 0 && (errno == EMFILE || errno == ENFILE))
                return errno;
        if (c->sock < 0) {
                c->uninspectable = "pidfd_getfd";  /* EPERM: a ptrace policy (Yama) forbids it */
                return EACCES;
        }
        socklen_t ol = sizeof c->domain;
        if (getsockopt(c->sock, SOL_SOCKET, SO_DOMAIN, &c->domain, &ol) < 0)
                return errno == ENOTSOCK ? ENOTSOCK : errno;
        ol = sizeof c->type;
        if (getsockopt(c->sock, SOL_SOCKET, SO_TYPE, &c->type, &ol) < 0)
                return errno;
        bool is_connect = c->nr == __NR_connect;
        uint64_t addr = is_connect ? a[1] : a[4];
        int alen = (int)(is_connect ? a[2] : a[5]);
        if (!is_connect && addr == 0)
                alen = 0;  /* sendto ignores the length without an address (a "log" rule notifies those too) */
        /* move_addr_to_kernel's rules */
        if (alen < 0 || alen > (int)sizeof c->addr)
                return EINVAL;
        c->alen = (socklen_t)alen;
        int e = read_target(req->pid, addr, &c->addr, c->alen);
        if (e == 0 && !is_connect) {
                c->len = (size_t)a[2];
                c->flags = (int)a[3];
                if (c->len > SEND_MAX) {
                        if (c->type != SOCK_STREAM)
                                return EMSGSIZE;
                        c->len = SEND_MAX;
                }
                c->data = malloc(c->len ? c->len : 1);
                e = c->data ? read_target(req->pid, a[1], c->data, c->len) : ENOMEM;
        }
        if (seccomp_notify_id_valid(listener, req->id) < 0)
                return -1;  /* the memory read may have been another process's */
        return e;
}

/* ---- is this socket file one of the sandbox's own? ----------------------- */

/* dev_t as UNIX_DIAG_VFS reports it: the kernel's own encoding (MKDEV,
 * major in the top 12 bits), not stat's */
static uint32_t diag_dev(dev_t d)
{
        return (uint32_t)(major(d) << 20) | (uint32_t)minor(d);
}

/* Is a socket of the sandbox's network namespace bound to this inode (or
 * abstract name)? 1 yes (*sock_ino: its socket's inode), 0 no, -errno.
 * Streams and seqpackets are reached only through a listener; datagram
 * sockets in any state. */
static int diag_bound(struct unixguard *g, int type, const struct unix_bound *want, uint32_t *sock_ino)
{
        struct {
                struct nlmsghdr h;
                struct unix_diag_req r;
        } q = {
                .h = { .nlmsg_len = sizeof q, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = ++g->diag_seq },
                .r = { .sdiag_family = AF_UNIX, .udiag_states = type == SOCK_DGRAM ? ~0U : 1U << 10 /* TCP_LISTEN */,
                       .udiag_show = want->name ? UDIAG_SHOW_NAME : UDIAG_SHOW_VFS },
        };
        int fd = g->diag_fd;
        if (fd < 0)
                return -ENOTCONN;  /* the sandbox never sent it: nothing is its own */
        struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
        if (sendto(fd, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
                return -errno;
        bool found = false;
        char *buf = g->diag_buf;
        for (;;) {
                /* The kernel answers a dump as it is read: never waits on the sandbox. */
                ssize_t n = recv(fd, buf, DIAG_BUF, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EPROTO;
                int r = unixguard_diag_parse(buf, (size_t)n, q.h.nlmsg_seq, want, &found, sock_ino);
                if (r < 0)
                        return r;
                if (r > 0)
                        return found;
        }
}

/* The device of an overlayfs as the file's mount shows it (mountinfo's
 * MAJOR:MINOR: the superblock's, which the kernel's socket list has).
 * Over layers on two filesystems (brig create --workspace-mode overlay
 * with the upper in a tmpfs, as /run/user is) stat's st_dev is a layer's
 * instead, and the sandbox's own sockets there were refused. Only
 * overlayfs: a socket reached through it is one bound through it (a
 * lower layer's socket answers ECONNREFUSED there), so a match by
 * inode number alone on its device cannot be a host listener; on
 * btrfs, whose subvolumes share one superblock and number their inodes
 * each from 256, it could be. 0 or -errno. */
#ifndef OVERLAYFS_SUPER_MAGIC
#define OVERLAYFS_SUPER_MAGIC 0x794c7630
#endif
static int mount_dev(int listener, const struct seccomp_notif *req, int fd, dev_t *dev)
{
        struct statfs fs;
        if (fstatfs(fd, &fs) < 0)
                return -errno;
        if (fs.f_type != OVERLAYFS_SUPER_MAGIC)
                return -EOPNOTSUPP;
        struct statx sx;
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/mountinfo", req->pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        int r = -ENOENT;
        while (r == -ENOENT && (n = getline(&line, &cap, f)) > 0) {
                struct mountinfo_entry e;
                if (mountinfo_parse_line(line, (size_t)n, &e) < 0)
                        continue;
                if (e.id == sx.stx_mnt_id) {
                        *dev = e.dev;
                        r = 0;
                }
                free(e.root);
                free(e.mnt);
        }
        free(line);
        fclose(f);
        /* the target's mount table, not a reused pid's */
        if (r == 0 && seccomp_notify_id_valid(listener, req->id) < 0)
                r = -ESRCH;
        return r;
}

/* --net host: the namespace is the host's, so a bound socket is the
 * sandbox's only when a process of the sandbox holds it: one in the
 * target's pid namespace (the sandbox's; it cannot make another). Not
 * pid 1's: it never ran execve, so its memory still counts as the
 * caller's and a rootless supervisor may not look at it. */
static bool held_by_sandbox(int listener, const struct seccomp_notif *req, uint32_t sock_ino)
{
        char path[PATH_MAX], want[64], link[64];
        struct stat ns;
        snprintf(path, sizeof path, "/proc/%d/ns/pid", req->pid);
        /* still the target's namespace, not a reused pid's */
        if (stat(path, &ns) < 0 || seccomp_notify_id_valid(listener, req->id) < 0)
                return false;
        snprintf(want, sizeof want, "socket:[%u]", sock_ino);
        DIR *proc = opendir("/proc");
        bool held = false;
        for (struct dirent *d; proc && !held && (d = readdir(proc));) {
                struct stat s;
                snprintf(path, sizeof path, "/proc/%s/ns/pid", d->d_name);
                if (d->d_name[0] < '0' || d->d_name[0] > '9' || stat(path, &s) < 0 || s.st_ino != ns.st_ino ||
                    s.st_dev != ns.st_dev)
                        continue;
                snprintf(path, sizeof path, "/proc/%s/fd", d->d_name);
                int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                DIR *fds = dfd >= 0 ? fdopendir(dfd) : NULL;
                if (!fds)
                        closep(&dfd);
                for (struct dirent *e; fds && !held && (e = readdir(fds));) {
                        ssize_t n = readlinkat(dfd, e->d_name, link, sizeof link - 1);
                        if (n > 0) {
                                link[n] = '\0';
                                held = strcmp(link, want) == 0;
                        }
                }
                if (fds)
                        closedir(fds);
        }
        if (proc)
                closedir(proc);
        return held;
}

/* Does the policy name this socket? Each --allow-unix path is resolved
 * now, in the same root, without following symlinks (a link planted at
 * the allowed path would otherwise carry the permission elsewhere).
 * 1 yes, 0 no, -1 named but on a mount the sandbox may write: there a
 * path does not say which socket it is — the sandbox could have renamed
 * (or linked) any other host socket of that mount, docker.sock next to
 * the allowed pg.sock, to the allowed name, or a directory above it. On
 * a read-only mount it can change no name. */
static int allowed(const struct unixguard *g, const struct stat *st)
{
        /* and brig's own --ssh-agent socket, on its read-only /run/brig:
         * with --net host no process inside holds its listener (the
         * supervisor does), so it is not the sandbox's own by that test */
        for (size_t i = 0; i < g->allow->n + (g->agent_socket != NULL); i++) {
                struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
                const char *path = i < g->allow->n ? g->allow->items[i] : g->agent_socket;
                _cleanup_close_ int fd = sys_openat2(g->root_fd, path, &how);
                struct stat a;
                struct statfs fs;
                if (fd < 0 || fstat(fd, &a) < 0 || a.st_dev != st->st_dev || a.st_ino != st->st_ino)
                        continue;
                return fstatfs(fd, &fs) == 0 && (fs.f_flags & ST_RDONLY) ? 1 : -1;
        }
        return 0;
}

/* The kernel's own check on the way in (unix_find_bsd): the caller needs
 * write permission on the socket file. The supervisor connects with its
 * own credentials, so it checks the sandbox's: every process inside has
 * the sandbox user's fsuid and fsgid (no capability to change them) and,
 * rootless, the caller's groups (root: none). ACLs are not consulted (a
 * socket with an ACL is judged by its mode bits). */
static bool may_write(const struct unixguard *g, const struct stat *st)
{
        if (g->uid == st->st_uid)
                return st->st_mode & S_IWUSR;
        bool in_group = g->gid == st->st_gid;
        for (int i = 0; i < g->n_groups && !in_group; i++)
                in_group = g->groups[i] == st->st_gid;
        return st->st_mode & (in_group ? S_IWGRP : S_IWOTH);
}

/* Open the file the sandbox would reach by this path, as the target sees
 * it: its root (the same for every process inside: chroot and
 * pivot_root are refused, so it is looked up once), its cwd. */
static int resolve_inside(struct unixguard *g, int listener, const struct seccomp_notif *req, const char *path)
{
        char proc[64];
        if (g->root_fd < 0) {
                snprintf(proc, sizeof proc, "/proc/%d/root", req->pid);
                _cleanup_close_ int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
                /* still the target, not a reused pid */
                if (root < 0 || seccomp_notify_id_valid(listener, req->id) < 0)
                        return -ESRCH;
                g->root_fd = TAKE_FD(root);
        }
        char full[PATH_MAX + sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
        if (path[0] == '/') {
                snprintf(full, sizeof full, "%s", path);
        } else {
                /* Relative to the target's cwd as a path inside (readlink
                 * shows it from the sandbox's root): resolving from a cwd
                 * descriptor with RESOLVE_IN_ROOT would make ".." stop there. */
                char cwd[PATH_MAX];
                snprintf(proc, sizeof proc, "/proc/%d/cwd", req->pid);
                ssize_t n = readlink(proc, cwd, sizeof cwd - 1);
                if (n <= 0 || cwd[0] != '/' || seccomp_notify_id_valid(listener, req->id) < 0)
                        return -ENOENT;
                cwd[n] = '\0';
                snprintf(full, sizeof full, "%s/%s", cwd, path);
        }
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        int fd = sys_openat2(g->root_fd, full, &how);
        return fd < 0 ? -errno : fd;
}

void unixguard_set_refusals(struct unixguard *g, struct refusals *r)
{
        g->refusals = r;
}

/* A socket file can be let through by name; an abstract one never (only
 * the sandbox's own listeners answer there). */
static void note_refused(struct unixguard *g, const struct call *c, const char *reason)
{
        char quoted[4 * sizeof c->path + 1], fix[sizeof quoted + 64];
        bool named = c->path[0] == '/';
        refusals_quote(c->path, quoted, sizeof quoted);  /* the sandbox's bytes: as refusals_add shows them */
        if (named)
                snprintf(fix, sizeof fix, "--allow-unix %s, from a read-only grant (--ro-bind DIR)", quoted);
        refusals_add(g->refusals, REFUSAL_UNIX, c->path, reason, named ? fix : NULL, 1);
}

static void record(struct unixguard *g, pid_t pid, const struct call *c, const char *action, const char *reason)
{
        if (strcmp(action, "refused") == 0)
                note_refused(g, c, reason);
        if (strcmp(action, "refused") == 0 && g->refused++ == 0)
                snprintf(g->first_refused, sizeof g->first_refused, "%s", c->path);
        if (strcmp(action, "refused") == 0 && g->current && g->current->refused++ == 0)
                snprintf(g->current->first_refused, sizeof g->current->first_refused, "%s", c->path);
        if (!g->audit)
                return;
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "event", "unix", "call",
                              c->nr == __NR_connect ? "connect" : "sendto", "path", c->path, "action", action,
                              "reason", reason, "host_pid", (int)pid);
        if (o && strcmp(action, "refused") == 0)
                json_object_set_new(o, "errno", json_string("EACCES"));
        if (o)
                audit_net(g->audit, o);
}

/* A call answered EAGAIN because the guard had no room for it: in the
 * audit stream as refused, with the address it named (read from the
 * target: no descriptor needed), so that no attempt at a socket outside
 * goes unrecorded while the guard is full. */
static void record_no_room(struct unixguard *g, const struct seccomp_notif *req, const char *reason)
{
        if (!g->audit)
                return;
        bool is_connect = req->data.nr == __NR_connect;
        uint64_t addr = is_connect ? req->data.args[1] : req->data.args[4];
        int64_t alen = (int64_t)(is_connect ? req->data.args[2] : req->data.args[5]);
        struct sockaddr_un un;
        memset(&un, 0, sizeof un);
        size_t n = alen > 0 && (uint64_t)alen < sizeof un ? (size_t)alen : sizeof un - 1;
        if (!addr || alen <= (int64_t)offsetof(struct sockaddr_un, sun_path) ||
            read_target((pid_t)req->pid, addr, &un, n) != 0 || un.sun_family != AF_UNIX)
                return;  /* no unix address: not a unix event */
        char path[sizeof un.sun_path + 2];
        if (un.sun_path[0])
                snprintf(path, sizeof path, "%.*s", (int)sizeof un.sun_path, un.sun_path);
        else
                snprintf(path, sizeof path, "@%.*s", (int)(n - offsetof(struct sockaddr_un, sun_path) - 1),
                         un.sun_path + 1);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "event", "unix", "call",
                              is_connect ? "connect" : "sendto", "path", path, "action", "refused", "reason", reason,
                              "errno", "EAGAIN", "host_pid", (int)req->pid);
        if (o)
                audit_net(g->audit, o);
}

/* Judge a pathname destination; on success the call goes to
 * /proc/self/fd/N of the inode judged. Returns 0 or an errno. */
static int judge_path(struct unixguard *g, int listener, const struct seccomp_notif *req, struct call *c)
{
        const struct sockaddr_un *un = (const struct sockaddr_un *)&c->addr;
        size_t max = c->alen - offsetof(struct sockaddr_un, sun_path);
        size_t n = strnlen(un->sun_path, max);
        memcpy(c->path, un->sun_path, n);
        c->path[n] = '\0';
        pid_t pid = (pid_t)req->pid;
        int fd = resolve_inside(g, listener, req, c->path);
        if (fd < 0)
                return -fd;
        c->path_fd = fd;
        struct stat st;
        int e = fstat(fd, &st) < 0 ? errno : 0;
        if (e == 0 && !S_ISSOCK(st.st_mode))
                e = ECONNREFUSED;  /* what the kernel says for a file that is not a socket */
        uint32_t sock_ino = 0;
        struct unix_bound want = { .dev = diag_dev(st.st_dev), .ino = (uint32_t)st.st_ino };
        int own = e ? 0 : diag_bound(g, c->type, &want, &sock_ino);
        dev_t sb_dev;
        if (own == 0 && mount_dev(listener, req, fd, &sb_dev) == 0 && sb_dev != st.st_dev) {
                want.dev = diag_dev(sb_dev);
                own = diag_bound(g, c->type, &want, &sock_ino);
        }
        if (own > 0 && g->host_netns)
                own = held_by_sandbox(listener, req, sock_ino);
        if (e == 0 && own <= 0) {
                int a = allowed(g, &st);
                if (a > 0) {
                        record(g, pid, c, "allowed", "--allow-unix");
                } else {
                        record(g, pid, c, "refused",
                               a < 0 ? "--allow-unix names it, but on a mount the sandbox can write (it could have "
                                       "moved another socket to that name): give its directory with --ro-bind"
                               : own < 0 ? "the sandbox's sockets could not be listed"
                                         : "listener outside the sandbox");
                        e = EACCES;
                }
        }
        if (e == 0 && !may_write(g, &st))
                e = EACCES;
        if (e)
                return e;
        struct sockaddr_un *to = (struct sockaddr_un *)&c->addr;
        memset(to, 0, sizeof *to);
        to->sun_family = AF_UNIX;
        snprintf(to->sun_path, sizeof to->sun_path, "/proc/self/fd/%d", fd);
        c->alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(to->sun_path) + 1);
        return 0;
}

/* Abstract names live in a network namespace. Landlock's scoping, which
 * refuses listeners outside the sandbox's domain, does not see a connect
 * made by the supervisor, so the guard states it again: only a listener
 * that a process of the sandbox holds passes. That is also needed in the
 * sandbox's own namespace: a host process may bind there (nsenter, or
 * setns by the user owning the sandbox's user namespace), and with --net
 * host the namespace is the host's. */
static int judge_abstract(struct unixguard *g, int listener, const struct seccomp_notif *req, struct call *c)
{
        const char *name = ((const struct sockaddr_un *)&c->addr)->sun_path;
        size_t len = c->alen - offsetof(struct sockaddr_un, sun_path);
        struct unix_bound want = { .name = name, .name_len = len };
        uint32_t sock_ino = 0;
        if (diag_bound(g, c->type, &want, &sock_ino) > 0 && held_by_sandbox(listener, req, sock_ino))
                return 0;
        snprintf(c->path, sizeof c->path, "@%.*s", (int)(len - 1), name + 1);
        record(g, (pid_t)req->pid, c, "refused",
               g->host_netns ? "abstract socket of the host's network namespace (--net host)"
                             : "abstract socket no process of the sandbox holds");
        return EPERM;  /* Landlock's answer for a listener outside the domain */
}

/* ---- doing the call ------------------------------------------------------ */

/* The other end of a unix socket learns who connected or sent from the
 * calling thread: SO_PEERCRED (effective ids), SO_PEERGROUPS and
 * SCM_CREDENTIALS (real ids). Made by a root supervisor, a host server
 * that --allow-unix names saw uid 0 and root's groups: a dbus system bus
 * or a postgres with peer authentication took the sandbox for root. So
 * the call is made with the sandbox user's ids, in this thread alone
 * (the raw calls: glibc's would change every thread), the saved uid kept
 * to come back. The pid they see stays the supervisor's. */
struct saved_ids {
        uid_t ruid, euid, suid;
        gid_t rgid, egid, sgid;
        int n_groups;
        gid_t groups[64];
};

static void restore_ids(const struct saved_ids *o)
{
        /* allowed with the saved uid still ours; then the capabilities are back */
        if (syscall(SYS_setresuid, o->ruid, o->euid, -1) < 0 || syscall(SYS_setresgid, o->rgid, o->egid, -1) < 0 ||
            syscall(SYS_setgroups, o->n_groups, o->groups) < 0)
                abort();  /* a supervisor thread with the sandbox's ids must not go on */
}

static int become_sandbox(const struct call *c, struct saved_ids *o)
{
        if (getresuid(&o->ruid, &o->euid, &o->suid) < 0 || getresgid(&o->rgid, &o->egid, &o->sgid) < 0)
                return -errno;
        o->n_groups = getgroups(ARRAY_SIZE(o->groups), o->groups);
        if (o->n_groups < 0)
                return -errno;
        if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, c->gid, c->gid, -1) < 0 ||
            syscall(SYS_setresuid, c->uid, c->uid, -1) < 0) {
                int e = errno;
                restore_ids(o);
                return -e;
        }
        return 0;
}

static long perform(struct call *c)
{
        struct saved_ids ids;
        if (c->as_sandbox && become_sandbox(c, &ids) < 0)
                return -EACCES;  /* never as ourselves */
        long r;
        if (c->nr == __NR_connect) {
                r = connect(c->sock, (struct sockaddr *)&c->addr, c->alen);
        } else {
                /* SIGPIPE belongs to the target, not to us */
                r = sendto(c->sock, c->data, c->len, c->flags | MSG_NOSIGNAL, (struct sockaddr *)&c->addr, c->alen);
        }
        int e = errno;
        if (c->as_sandbox)
                restore_ids(&ids);
        if (r < 0 && e == EPIPE && c->nr != __NR_connect && !(c->flags & MSG_NOSIGNAL))
                (void)sys_pidfd_send_signal(c->target_pidfd, SIGPIPE);
        return r < 0 ? -e : r;
}

static void answer(int listener, struct seccomp_notif_resp *resp, uint64_t id, long r)
{
        memset(resp, 0, sizeof *resp);
        resp->id = id;
        if (r < 0)
                resp->error = (int32_t)r;
        else
                resp->val = r;
        (void)seccomp_notify_respond(listener, resp);  /* ENOENT: it died or was interrupted meanwhile */
}

/* ---- the workers ---------------------------------------------------------
 *
 * A connect(2) may wait for as long as the other end likes (a listener
 * whose backlog is full, a SYN nobody answers), and whether it waits is
 * the open file's O_NONBLOCK, which another thread of the sandbox can flip
 * between our look and our call. So connects always run in a worker;
 * sendto runs inline only with MSG_DONTWAIT, which is per call. Workers
 * are kept in one pool per process, idle ones for a while, at most
 * MAX_WORKERS. A call that finds none free waits in the pool's queue, as
 * it would have waited in the kernel: a blocking connect(2) must not fail
 * with EAGAIN because other threads of the sandbox connect at once (a
 * hundred concurrent connects under AddressSanitizer did). Nor must a
 * non-blocking one: Python's socket with a timeout is one, and takes
 * EAGAIN for an error. The price: while every worker is held by a connect
 * that waits long (a full backlog), a non-blocking connect waits too, at
 * the sandbox's own doing only. A call still queued when its notification
 * goes away is answered without being made (run_job's look).
 *
 * A call in a worker is abandoned when its notification goes away: the
 * target was killed, or a signal interrupted its wait (it got EINTR, or
 * the kernel restarts the call as a new notification). The kernel tells
 * the listener nothing then, and a connect left waiting (a backlog that
 * stays full) would keep its worker for as long as the listener lives:
 * 64 killed clients, and every later connect of the sandbox got EAGAIN;
 * an interrupted one connected later behind the caller's back. So while
 * calls are in flight a watcher looks every WATCH_MS and interrupts the
 * worker of one whose notification is gone with SIG_ABANDON (a handler
 * without SA_RESTART: the call returns EINTR, the socket as the target's
 * own interrupted connect leaves it). Workers take that signal only
 * while in the call: sent to one that has just finished, it stays
 * pending until the next unblock, before the next call is made. */

struct job {
        struct job *next;
        struct job *run_next;  /* in pool.running while its call is made */
        pthread_t thread;
        struct call c;
        int listener;    /* our own duplicate: the job may outlive the guard */
        uint64_t id;
};

static struct {
        pthread_mutex_t lock;
        pthread_cond_t more;
        struct job *head, *tail;
        unsigned pending, idle, threads;
        struct job *running;
        bool watching;
} pool = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, 0, NULL, false };

#define IDLE_SECONDS 10
#define WATCH_MS 20
/* the highest real-time signals are nobody's by convention; brig uses none */
#define SIG_ABANDON (SIGRTMAX - 1)

static bool notif_valid(int listener, uint64_t id)
{
        return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

static void on_abandon(int sig)
{
        (void)sig;  /* only to make the worker's call return EINTR */
}

static void install_abandon(void)
{
        struct sigaction sa = { .sa_handler = on_abandon };  /* no SA_RESTART */
        sigemptyset(&sa.sa_mask);
        (void)sigaction(SIG_ABANDON, &sa, NULL);
}

static void run_job(struct job *j)
{
        sigset_t abandon;
        sigemptyset(&abandon);
        sigaddset(&abandon, SIG_ABANDON);
        pthread_sigmask(SIG_UNBLOCK, &abandon, NULL);
        /* gone before we began (killed, interrupted): nobody waits for it */
        long r = notif_valid(j->listener, j->id) ? perform(&j->c) : -EINTR;
        pthread_sigmask(SIG_BLOCK, &abandon, NULL);
        pthread_mutex_lock(&pool.lock);
        for (struct job **p = &pool.running; *p; p = &(*p)->run_next)
                if (*p == j) {
                        *p = j->run_next;
                        break;
                }
        pthread_mutex_unlock(&pool.lock);
        struct seccomp_notif_resp resp;
        memset(&resp, 0, sizeof resp);
        resp.id = j->id;
        if (r < 0)
                resp.error = (int32_t)r;
        else
                resp.val = r;
        /* the ioctl directly: libseccomp's buffers are per call otherwise */
        (void)ioctl(j->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        close(j->listener);
        call_free(&j->c);
        free(j);
}

/* Runs while calls are in flight. Every round interrupts again: a signal
 * that landed just before the worker entered its call was spent. */
static void *watcher(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&pool.lock);
        while (pool.running) {
                for (struct job *j = pool.running; j; j = j->run_next)
                        if (!notif_valid(j->listener, j->id))
                                (void)pthread_kill(j->thread, SIG_ABANDON);
                pthread_mutex_unlock(&pool.lock);
                struct timespec t = { 0, WATCH_MS * 1000000L };
                while (nanosleep(&t, &t) < 0 && errno == EINTR)
                        ;
                pthread_mutex_lock(&pool.lock);
        }
        pool.watching = false;
        pthread_mutex_unlock(&pool.lock);
        return NULL;
}

static bool start_thread(void *(*fn)(void *));

static void *worker(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&pool.lock);
        for (;;) {
                while (!pool.head) {
                        struct timespec until;
                        clock_gettime(CLOCK_REALTIME, &until);
                        until.tv_sec += IDLE_SECONDS;
                        pool.idle++;
                        int r = pthread_cond_timedwait(&pool.more, &pool.lock, &until);
                        pool.idle--;
                        if (r == ETIMEDOUT && !pool.head) {
                                pool.threads--;
                                pthread_mutex_unlock(&pool.lock);
                                return NULL;
                        }
                }
                struct job *j = pool.head;
                pool.head = j->next;
                if (!pool.head)
                        pool.tail = NULL;
                pool.pending--;
                j->thread = pthread_self();
                j->run_next = pool.running;
                pool.running = j;
                /* without a watcher (no thread to be had) calls still work,
                 * an abandoned one just keeps its worker as before */
                if (!pool.watching)
                        pool.watching = start_thread(watcher);
                pthread_mutex_unlock(&pool.lock);
                run_job(j);
                pthread_mutex_lock(&pool.lock);
        }
}

/* A detached thread with no signal of the caller's (workers unblock
 * SIG_ABANDON only in their call). */
static bool start_thread(void *(*fn)(void *))
{
        pthread_attr_t attr;
        pthread_t t;
        if (pthread_attr_init(&attr) != 0)
                return false;
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        (void)pthread_attr_setstacksize(&attr, 64 * 1024);
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        bool ok = pthread_create(&t, &attr, fn, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
        return ok;
}

/* Start a worker; called with the pool locked. */
static bool spawn_worker(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, install_abandon);
        bool ok = start_thread(worker);
        if (ok)
                pool.threads++;
        return ok;
}

/* Has the guard as many calls in flight as this process can hold the
 * descriptors of (FD_RESERVE)? Its limit as it is when the first call
 * comes: the supervisor has raised it by then (spawn.c). Where the limit
 * allows more than the workers and the queue take, hand_off bounds them. */
static bool guard_full(void)
{
        static unsigned budget;
        if (!budget) {
                struct rlimit rl;
                rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
                budget = n > FD_RESERVE + FDS_PER_CALL ? (unsigned)((n - FD_RESERVE) / FDS_PER_CALL) : 1;
        }
        if (budget >= MAX_WORKERS + MAX_QUEUED)
                return false;
        pthread_mutex_lock(&pool.lock);
        unsigned in_flight = pool.pending + (pool.threads - pool.idle);
        pthread_mutex_unlock(&pool.lock);
        return in_flight >= budget;
}

/* 0: the job owns the call; -EAGAIN: no worker is free, no more may
 * start and the queue is full; -EMFILE (or -ENOMEM): no descriptor or
 * memory for the job. */
static int hand_off(int listener, uint64_t id, struct call *c)
{
        struct job *j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        int dup_fd = fcntl(listener, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0) {
                int e = errno;
                free(j);
                return -e;
        }
        pthread_mutex_lock(&pool.lock);
        bool ok = pool.pending < pool.idle || (pool.threads < MAX_WORKERS && spawn_worker()) ||
                  (pool.threads > 0 && pool.pending < MAX_QUEUED);
        if (ok) {
                j->c = *c;
                j->listener = dup_fd;
                j->id = id;
                if (pool.tail)
                        pool.tail->next = j;
                else
                        pool.head = j;
                pool.tail = j;
                pool.pending++;
                pthread_cond_signal(&pool.more);
        }
        pthread_mutex_unlock(&pool.lock);
        if (!ok) {
                close(dup_fd);
                free(j);
                return -EAGAIN;
        }
        *c = (struct call){ .sock = -1, .target_pidfd = -1, .path_fd = -1 };
        return 0;
}

/* Only a sendto that cannot wait runs here: MSG_DONTWAIT is added when the
 * socket is non-blocking, so a flip of O_NONBLOCK meanwhile changes
 * nothing for us. */
static bool run_inline(struct call *c)
{
        if (c->nr != __NR_sendto)
                return false;
        int fl = fcntl(c->sock, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK))
                c->flags |= MSG_DONTWAIT;
        return c->flags & MSG_DONTWAIT;
}

static void guard_call(struct unixguard *g, int listener, const struct seccomp_notif *req)
{
        struct call c = { .sock = -1, .target_pidfd = -1, .path_fd = -1 };
        if (guard_full()) {
                /* nothing is copied (no descriptor is taken): not made, and
                 * said; recorded first, while the caller still waits (its
                 * address is read from its memory: once answered, it may
                 * have exited, and the attempt would go unrecorded) */
                record_no_room(g, req, "brig's socket guard had no room for it (calls in flight)");
                answer(listener, g->resp, req->id, -EAGAIN);
                refusals_add(g->refusals, REFUSAL_LIMIT, "supervisor descriptors",
                             "a connect or sendto got EAGAIN: brig's socket guard had as many calls in flight as its "
                             "supervisor can hold the descriptors of (a higher `ulimit -n` for brig gives it more)",
                             NULL, 1);
                return;
        }
        int e = copy_call(listener, req, &c);
        const struct sockaddr_un *un = (const struct sockaddr_un *)&c.addr;
        /* Another family on a unix socket: the kernel's EINVAL (or, AF_UNSPEC
         * on a datagram socket, "disconnect") with the address as it is. */
        bool named = e == 0 && c.domain == AF_UNIX && c.alen > offsetof(struct sockaddr_un, sun_path) &&
                     un->sun_family == AF_UNIX;
        if (named && c.alen > sizeof(struct sockaddr_un))
                e = EINVAL;  /* unix_validate_addr */
        else if (named && un->sun_path[0])
                e = judge_path(g, listener, req, &c);
        else if (named)
                e = judge_abstract(g, listener, req, &c);
        if (e < 0) {
                call_free(&c);
                return;  /* the target is gone */
        }
        /* The kernel's own connect and sendto take no new descriptor: an
         * EMFILE is ours (the socket, its path or the socket list could
         * not be opened), and the call is not made. */
        if (e == EMFILE || e == ENFILE) {
                c.out_of_fds = true;
                e = EAGAIN;
        }
        if (c.uninspectable) {
                /* fail closed, and say so: every connect would be refused */
                snprintf(c.path, sizeof c.path, "(fd %d)", (int)req->data.args[0]);
                record(g, (pid_t)req->pid, &c, "refused",
                       strcmp(c.uninspectable, "pidfd_open") == 0 ? "the calling thread could not be opened (pidfd_open)"
                                                                   : "the supervisor may not take the socket "
                                                                     "(pidfd_getfd; a ptrace policy such as Yama?)");
        }
        /* rootless the sandbox user is ours already */
        if (e == 0 && c.domain == AF_UNIX && (g->uid != geteuid() || g->gid != getegid())) {
                c.as_sandbox = true;
                c.uid = g->uid;
                c.gid = g->gid;
        }
        if (c.out_of_fds) {
                refusals_add(g->refusals, REFUSAL_LIMIT, "supervisor descriptors",
                             "a connect or sendto got EAGAIN: brig's supervisor had no file descriptor free for it "
                             "(many calls in flight; a higher `ulimit -Hn` for brig gives it more)", NULL, 1);
                record_no_room(g, req, "brig's supervisor had no file descriptor free for it");
        }
        if (e > 0)
                answer(listener, g->resp, req->id, -e);
        else if (run_inline(&c))
                answer(listener, g->resp, req->id, perform(&c));
        else if ((e = hand_off(listener, req->id, &c)) < 0) {
                char why[160];
                if (e == -EAGAIN)
                        snprintf(why, sizeof why,
                                 "a connect or sendto got EAGAIN: all %d workers of brig's socket guard were busy "
                                 "and %d calls waited for one already", MAX_WORKERS, MAX_QUEUED);
                else
                        snprintf(why, sizeof why, "a connect or sendto got EAGAIN: brig's socket guard could not "
                                 "take it (%s)", strerror(-e));
                record_no_room(g, req, why);  /* before the answer, as above */
                answer(listener, g->resp, req->id, -EAGAIN);
                refusals_add(g->refusals, REFUSAL_LIMIT, "connects at once", why, NULL, 1);
        }
        call_free(&c);
}

/* ---- the listeners ------------------------------------------------------- */

static bool guarded_call(int nr)
{
        return nr == __NR_connect || nr == __NR_sendto;
}

/* A refused call, for the run's summary. */
static void note_syscall(struct unixguard *g, int nr, int reply)
{
        if (!g->refusals)
                return;
        _cleanup_free_ char *name = seccomp_syscall_name(nr);
        char why[160], fix[96];
        if (!name)
                return;
        seccomp_refusal_text(g->rules, name, reply, why, sizeof why, fix, sizeof fix);
        refusals_add(g->refusals, REFUSAL_SYSCALL, name, why, fix[0] ? fix : NULL, 1);
}

/* One pending notification of this listener. */
static void on_listener(struct unixguard *g, int fd)
{
        memset(g->req, 0, sizeof *g->req);
        if (seccomp_notify_receive(fd, g->req) < 0)
                return;  /* ENOENT: the caller died meanwhile; EINTR */
        int nr = g->req->data.nr;
        /* The answers to refusals are made from the policy when the first
         * one arrives (a cached filter came without them); unmade, every
         * call is refused, never let through. */
        if (!g->replies && !guarded_call(nr) && seccomp_replies_build(g->plan, &g->own_replies) == 0)
                g->replies = g->own_replies;
        int reply = g->replies ? seccomp_reply_for(g->replies, &g->req->data)
                    : guarded_call(nr) ? SECCOMP_REPLY_GUARD : EPERM;
        if (g->audit && reply >= 0) {
                uint64_t args[6];
                for (int i = 0; i < 6; i++)
                        args[i] = g->req->data.args[i];
                audit_syscall(g->audit, (pid_t)g->req->pid, nr, args, reply);
        }
        if ((reply == 0 || reply == SECCOMP_REPLY_GUARD) && guarded_call(nr)) {
                guard_call(g, fd, g->req);  /* allowed or "log": the guard does it, never "continue" */
                return;
        }
        bool exec = nr == __NR_execve || nr == __NR_execveat;
        if (g->exec && exec && (reply == 0 || reply == SECCOMP_REPLY_ALLOW)) {
                exectrace_seen(g->exec, fd, g->req);  /* recorded only: it runs as the policy says */
                reply = 0;
        }
        if (reply < 0)
                reply = EPERM;  /* a call that should not notify */
        if (reply > 0) {
                note_syscall(g, nr, reply);
                g->window_answers++;  /* paced (unixguard_wait_ms); a "log" of the user's is not */
        }
        memset(g->resp, 0, sizeof *g->resp);
        g->resp->id = g->req->id;
        if (reply == 0)
                g->resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;  /* "log": only recorded */
        else
                g->resp->error = -reply;
        (void)seccomp_notify_respond(fd, g->resp);
}

/* Every refused call is a round trip through this supervisor — about
 * 7 us of brig's CPU, outside the sandbox's cgroup and its --cpus: threads
 * retrying one in a loop kept half a core of brig busy however little CPU
 * the sandbox had. Past REFUSED_PER_WINDOW answers in a window the
 * listeners are left unread until the next one: the callers sleep in the
 * kernel, and the run's summary says they were slowed. Connects and
 * sendtos from the same sandbox wait with them (one queue); timeout, kill,
 * signals and the egress proxy do not (the supervisor's other fds). A call
 * a "log" rule of the user's lets run is not counted: that cost is chosen. */
#define REFUSED_WINDOW_MS 100
#define REFUSED_PER_WINDOW 200  /* 2000 a second */

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

BRIG_IDLE_LOOP int unixguard_wait_ms(struct unixguard *g)
{
        uint64_t now = mono_ms();
        if (now >= g->window_end_ms) {
                g->window_end_ms = now + REFUSED_WINDOW_MS;
                g->window_answers = 0;
        }
        if (g->window_answers < REFUSED_PER_WINDOW)
                return -1;
        if (g->window_answers == REFUSED_PER_WINDOW) {
                g->window_answers++;  /* one note per window it is held */
                refusals_add(g->refusals, REFUSAL_LIMIT, "refused system calls a second",
                             "refused system calls were slowed: brig answers at most 2000 a second (a call a "
                             "program retries in a loop: --seccomp-deny NAME has the kernel refuse it)", NULL, 1);
        }
        return (int)(g->window_end_ms - now);
}

void unixguard_dispatch(struct unixguard *g)
{
        struct epoll_event ev[8];
        int n = epoll_wait(g->epfd, ev, ARRAY_SIZE(ev), 0);
        for (int i = 0; i < n; i++) {
                int fd = ev[i].data.fd;
                if (exectrace_owns(g->exec, fd)) {
                        exectrace_on_exit(g->exec, fd);  /* a process an exec event named ended */
                        continue;
                }
                if (ev[i].events & EPOLLIN) {
                        g->current = listener_by_fd(g, fd);
                        on_listener(g, fd);
                        g->current = NULL;
                } else {
                        drop_listener(g, fd);  /* POLLHUP: no process uses that filter any more */
                }
        }
}
