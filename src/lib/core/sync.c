/* sync.c — messages between the supervisor and the sandbox's side over a
 * SOCK_SEQPACKET socket: each message arrives whole or not at all, and may
 * carry file descriptors (the sandbox's pty master, its network sockets). */
#define _GNU_SOURCE
#include "core/sync.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int sync_send_fds(int fd, const struct sync_msg *m, const int fds[], size_t n)
{
        struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof *m };
        union {
                char buf[CMSG_SPACE(sizeof(int) * SYNC_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n > SYNC_MAX_FDS)
                return -E2BIG;
        if (n) {
                memset(&control, 0, sizeof control);
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        }
        ssize_t sent;
        do
                sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (sent < 0 && errno == EINTR);
        if (sent < 0)
                return -errno;
        return sent == (ssize_t)sizeof *m ? 0 : -EMSGSIZE;
}

int sync_send_fd(int fd, const struct sync_msg *m, int passed_fd)
{
        return sync_send_fds(fd, m, &passed_fd, passed_fd >= 0);
}

int sync_send(int fd, const struct sync_msg *m)
{
        return sync_send_fd(fd, m, -1);
}

int sync_send_error(int fd, int type, const brig_error *err)
{
        struct sync_msg m = { .type = type };
        wire_error_encode(&m.error, err, NULL);
        return sync_send(fd, &m);
}

int sync_failure(const struct sync_msg *m, int *exit_code, brig_error **err)
{
        int code;
        bool filled = err && !*err;  /* an earlier error stays as it is */
        int r = wire_error_decode(&m->error, sizeof m->error, &code, err);
        /* only an exec's failure says how the command fails (126, 127,
         * a file operation's 1); anything else is brig's own */
        if (m->type != SYNC_EXEC_FAILED) {
                code = BRIG_EXIT_SETUP;
                if (filled && *err)
                        (*err)->exit_code = code;
        }
        if (exit_code)
                *exit_code = code;
        return r;
}

/* Returns 1 for a message, 0 at end of stream, negative errno on error. */
int sync_recv_fds(int fd, struct sync_msg *m, int fds[], size_t max, size_t *n)
{
        struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
        union {
                char buf[CMSG_SPACE(sizeof(int) * SYNC_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                              .msg_control = control.buf, .msg_controllen = sizeof control.buf };
        *n = 0;
        ssize_t got;
        do
                got = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (got < 0 && errno == EINTR);
        if (got == 0)
                return 0;
        if (got < 0)
                return -errno;
        bool bad = got != (ssize_t)sizeof *m || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int passed;
                        memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
                        if (!bad && *n < max)
                                fds[(*n)++] = passed;
                        else
                                close(passed);
                }
        }
        if (bad)
                return -EBADMSG;
        m->text[sizeof m->text - 1] = '\0';
        return 1;
}

/* A passed descriptor lands in *passed_fd (any other is closed). */
int sync_recv(int fd, struct sync_msg *m, int *passed_fd)
{
        int got = -1;
        size_t n;
        int r = sync_recv_fds(fd, m, &got, passed_fd ? 1 : 0, &n);
        if (passed_fd)
                *passed_fd = n ? got : -1;
        return r;
}
