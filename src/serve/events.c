/* events.c — a sandbox's audit stream (docs/audit.md) as chunked NDJSON:
 * what brig_sandbox_audit_fd reads from the start, then each line as the
 * supervisor appends it (inotify on that descriptor's file), until the
 * client goes, the sandbox is removed or the server drains. */
#define _GNU_SOURCE
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

struct events {
        int fd, ino, conn_fd;
        bool follow;
        char *buf;              /* read, not yet sent up to its last newline */
        size_t len, cap, sent;
};

static ssize_t events_fill(void *cls, char *out, size_t max)
{
        struct events *ev = cls;
        for (;;) {
                /* whole lines only: a line the writer is still appending waits */
                char *nl = ev->len > ev->sent ? memrchr(ev->buf + ev->sent, '\n', ev->len - ev->sent) : NULL;
                if (nl) {
                        size_t n = (size_t)(nl + 1 - (ev->buf + ev->sent));
                        if (n > max)
                                n = max;
                        memcpy(out, ev->buf + ev->sent, n);
                        ev->sent += n;
                        return (ssize_t)n;
                }
                /* keep the unsent tail at the front */
                memmove(ev->buf, ev->buf + ev->sent, ev->len - ev->sent);
                ev->len -= ev->sent;
                ev->sent = 0;
                if (ev->cap - ev->len < 64 * 1024) {
                        if (ev->cap > 16 * 1024 * 1024)
                                return -1;  /* one line of 16 MiB: not an audit line */
                        char *b = realloc(ev->buf, ev->cap * 2);
                        if (!b)
                                return -1;
                        ev->buf = b;
                        ev->cap *= 2;
                }
                ssize_t n = read(ev->fd, ev->buf + ev->len, ev->cap - ev->len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -1;
                if (n > 0) {
                        ev->len += (size_t)n;
                        continue;
                }
                struct stat st;
                if (!ev->follow || serve_draining || fstat(ev->fd, &st) < 0 || st.st_nlink == 0)
                        return 0;  /* the end, or the sandbox was removed */
                struct pollfd pf = { .fd = ev->ino, .events = POLLIN };
                int p = poll(&pf, 1, 250);
                if (p > 0) {
                        char drain[4096];
                        (void)!read(ev->ino, drain, sizeof drain);
                }
                if (conn_hung_up(ev->conn_fd))
                        return -1;
        }
}

static void events_done(void *cls)
{
        struct events *ev = cls;
        close(ev->fd);
        if (ev->ino >= 0)
                close(ev->ino);
        free(ev->buf);
        free(ev);
}

int handle_events(struct req *r)
{
        if (!sandbox_visible(r))
                return MHD_YES;
        const char *follow = req_query(r, "follow");
        if (follow && strcmp(follow, "true") != 0 && strcmp(follow, "false") != 0)
                return reply_error(r, 400, "bad_field", json_pack("{s:s}", "field", "follow"), "follow: true or false");
        brig_sandbox *sb = NULL;
        brig_error *e = NULL;
        if (sandbox_open_running(r, &sb) < 0)
                return MHD_YES;
        int fd = brig_sandbox_audit_fd(sb, &e);
        brig_sandbox_close(sb, NULL);
        if (fd < 0) {
                int ret = reply_error(r, 409, "conflict", NULL, "events of '%s': %s", r->p.name,
                                      e && e->msg ? e->msg : strerror(-fd));
                brig_error_free(&e);
                return ret;
        }
        struct events *ev = calloc(1, sizeof *ev);
        char *buf = malloc(128 * 1024);
        if (!ev || !buf) {
                free(ev);
                free(buf);
                close(fd);
                return reply_error(r, 500, "internal", NULL, "out of memory");
        }
        *ev = (struct events){ .fd = fd, .ino = -1, .conn_fd = r->conn_fd, .buf = buf, .cap = 128 * 1024,
                               .follow = !follow || strcmp(follow, "true") == 0 };
        /* the file behind our descriptor, whatever renames meanwhile */
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        ev->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (ev->ino >= 0 && inotify_add_watch(ev->ino, self, IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF) < 0) {
                close(ev->ino);
                ev->ino = -1;
        }
        return reply_stream(r, "application/x-ndjson", events_fill, events_done, ev);
}
