/* sync.h — the messages between the supervisor and the sandbox's side
 * (sync.c), and the signal protocol of pid 1. */
#ifndef BRIG_CORE_SYNC_H
#define BRIG_CORE_SYNC_H

#include "core/error.h"

/* si_int of a signal the supervisor queues to pid 1 meaning "to every
 * process of the sandbox", not only the command (the timeout's SIGTERM). */
#define BRIG_SIGNAL_EVERYONE 0x62726967

/* sync.c: messages from the child side to the supervisor */
enum sync_type {
        SYNC_GO = 1,       /* parent → child: uid maps are written */
        SYNC_ERROR,        /* setup failed: step, errno, message */
        SYNC_EXEC_FAILED,  /* execve failed: errno, message, exit code */
        SYNC_STATUS,       /* the command's wait status, from pid 1 */
        SYNC_PTY,          /* carries the master of the sandbox's own pty */
        SYNC_NOTIFY_FD,    /* carries the seccomp listener (audit mode) */
        SYNC_NETWORK,      /* carries the network step's sockets at once (child.c
                            * send_network); status = how many, kinds[i] = each one's */
        SYNC_READY,        /* persistent sandbox: pid 1 is set up and waits for execs */
        SYNC_EXEC,         /* supervisor → pid 1: carries one exec's socket (persist_init.c) */
        SYNC_AGENT,        /* carries the listening socket of the ssh-agent relay (--ssh-agent) */
        SYNC_STARTED,      /* pid 1: a detached exec was forked; status = its pid, text = its log */
        SYNC_SPARE,        /* supervisor → pid 1: carries the socket of the next exec, for a child
                            * pid 1 forks and confines ahead of it (persist_init.c) */
        SYNC_CGROUP,       /* supervisor → child: carries the `tasks` of its v1 groups to join;
                            * status = how many, kinds[i] = each one's controller (cgroup.c) */
};
/* The most descriptors one message carries: the network step's ten proxy
 * listeners at most (net/listener.c) and the unix guard's socket. */
#define SYNC_MAX_FDS 16
/* kinds[] of SYNC_NETWORK: an egress_listener_kind (net/egress.h), or this:
 * a NETLINK_SOCK_DIAG socket of the sandbox's network namespace, for the
 * unix socket guard (controls/unixguard.c) */
#define SYNC_SOCKET_UNIX_DIAG 0x100
struct sync_msg {
        int type;
        int exit_code;
        int status;
        char text[1024];
        /* SYNC_STATUS of an exec (persist_init.c), or of brig run's
         * command with every other process reaped (init.c): wait4 figures */
        uint64_t cpu_user_us, cpu_system_us;
        int64_t maxrss_kb;
        /* SYNC_STATUS of brig run: nothing but pid 1 is left in the
         * sandbox, and pid 1 sends nothing more (init_main) */
        bool alone;
        struct wire_error error;  /* SYNC_ERROR, SYNC_EXEC_FAILED (error.h) */
        /* SYNC_NETWORK: what each descriptor is, in the order they come;
         * text = why filtered mode fell back to proxy mode, or empty */
        int kinds[SYNC_MAX_FDS];
};
BRIG_INTERNAL int sync_send(int fd, const struct sync_msg *m);
BRIG_INTERNAL int sync_send_fd(int fd, const struct sync_msg *m, int passed_fd);
/* One message with n descriptors (n <= SYNC_MAX_FDS), in one sendmsg. */
BRIG_INTERNAL int sync_send_fds(int fd, const struct sync_msg *m, const int fds[], size_t n);
BRIG_INTERNAL int sync_send_error(int fd, int type, const brig_error *err);
/* The error a SYNC_ERROR or SYNC_EXEC_FAILED message carries, checked
 * (wire_error_decode): into *err, its exit code into *exit_code — 125 for
 * a setup failure whatever the message says. Returns -errno. */
BRIG_INTERNAL int sync_failure(const struct sync_msg *m, int *exit_code, brig_error **err);
BRIG_INTERNAL int sync_recv(int fd, struct sync_msg *m, int *passed_fd);
/* sync_recv for up to max descriptors (max <= SYNC_MAX_FDS), in the order
 * they were sent, into fds[0..*n): any beyond max are closed, and so are
 * all of them when the message is bad (*n = 0). */
BRIG_INTERNAL int sync_recv_fds(int fd, struct sync_msg *m, int fds[], size_t max, size_t *n);

#endif
