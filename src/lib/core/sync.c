/* sync.c — messages between the supervisor and the sandbox's side over a
 * SOCK_SEQPACKET socket: each message arrives whole or not at all, and may
 * carry one file descriptor (the sandbox's pty master). */
#define _GNU_SOURCE
#include "core/sync.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int sync_send_fd(int fd, const struct sync_msg *m, int passed_fd)
{
        struct iovec iov = { .iov_base = (void *)m, .iov_len = sizeof *m };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (passed_fd >= 0) {
                memset(&control, 0, sizeof control);
                msg.msg_control = control.buf;
                msg.msg_controllen = sizeof control.buf;
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &passed_fd, sizeof(int));
        }
        ssize_t n;
        do
                n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof *m ? 0 : -errno;
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

/* Returns 1 for a message, 0 at end of stream, negative errno on error.
 * A passed descriptor lands in *passed_fd (else it is closed). */
int sync_recv(int fd, struct sync_msg *m, int *passed_fd)
{
        struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
        union {
                char buf[CMSG_SPACE(sizeof(int))];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                              .msg_control = control.buf, .msg_controllen = sizeof control.buf };
        if (passed_fd)
                *passed_fd = -1;
        ssize_t n;
        do
                n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                int got;
                memcpy(&got, CMSG_DATA(c), sizeof got);
                if (passed_fd && *passed_fd < 0)
                        *passed_fd = got;
                else
                        close(got);
        }
        if (n != (ssize_t)sizeof *m || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
                return -EBADMSG;
        m->text[sizeof m->text - 1] = '\0';
        return 1;
}
