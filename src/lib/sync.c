/* sync.c — messages between the supervisor and the sandbox's side over a
 * SOCK_SEQPACKET socket: each message arrives whole or not at all. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int sync_send(int fd, const struct sync_msg *m)
{
        ssize_t n;
        do
                n = send(fd, m, sizeof *m, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n == (ssize_t)sizeof *m ? 0 : -errno;
}

int sync_send_error(int fd, int type, const brig_error *err)
{
        struct sync_msg m = { .type = type };
        if (err) {
                m.errnum = err->errnum;
                m.exit_code = err->exit_code;
                snprintf(m.text, sizeof m.text, "%s", err->msg ? err->msg : "unknown error");
        } else {
                m.exit_code = BRIG_EXIT_SETUP;
                snprintf(m.text, sizeof m.text, "unknown error");
        }
        return sync_send(fd, &m);
}

/* Returns 1 for a message, 0 at end of stream, negative errno on error. */
int sync_recv(int fd, struct sync_msg *m)
{
        ssize_t n;
        do
                n = recv(fd, m, sizeof *m, 0);
        while (n < 0 && errno == EINTR);
        if (n == 0)
                return 0;
        if (n < 0)
                return -errno;
        if (n != (ssize_t)sizeof *m)
                return -EBADMSG;
        m->text[sizeof m->text - 1] = '\0';
        return 1;
}
