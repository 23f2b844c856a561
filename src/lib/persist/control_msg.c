/* control_msg.c — framing of the control and exec messages (control.h):
 * one SOCK_SEQPACKET message each, checked before anything trusts it. */
#define _GNU_SOURCE
#include "persist/control.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int ctl_send(int fd, const struct ctl_hdr *h, const void *payload, size_t len, const int *fds, int nfds)
{
        struct iovec iov[2] = { { .iov_base = (void *)h, .iov_len = sizeof *h },
                                { .iov_base = (void *)payload, .iov_len = len } };
        union {
                char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
        if (nfds < 0 || nfds > CTL_MAX_FDS || sizeof *h + len > CTL_MAX_MSG)
                return -EINVAL;
        if (nfds > 0) {
                memset(&control, 0, sizeof control);
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
        }
        ssize_t n;
        do
                n = sendmsg(fd, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return n == (ssize_t)(sizeof *h + len) ? 0 : -EMSGSIZE;
}

ssize_t ctl_recv(int fd, void *buf, size_t cap, int *fds, int *nfds)
{
        struct iovec iov = { .iov_base = buf, .iov_len = cap };
        union {
                char buf[CMSG_SPACE(sizeof(int) * CTL_MAX_FDS)];
                struct cmsghdr align;
        } control;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
                              .msg_control = control.buf, .msg_controllen = sizeof control.buf };
        *nfds = 0;
        ssize_t n;
        do
                n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int got;
                        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
                        if (*nfds < CTL_MAX_FDS)
                                fds[(*nfds)++] = got;
                        else
                                close(got);
                }
        }
        if (n == 0)
                return 0;
        const struct ctl_hdr *h = buf;
        if ((size_t)n < sizeof *h || h->magic != CTL_MAGIC || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                for (int i = 0; i < *nfds; i++)
                        close(fds[i]);
                *nfds = 0;
                return -EBADMSG;
        }
        ((struct ctl_hdr *)buf)->text[sizeof h->text - 1] = '\0';
        return n;
}

int ctl_reply(int fd, enum ctl_type type, int arg, const brig_error *err)
{
        struct ctl_hdr h = { .magic = CTL_MAGIC, .type = type, .arg = arg };
        if (err)
                wire_error_encode(&h.error, err, NULL);
        return ctl_send(fd, &h, NULL, 0, NULL, 0);
}

int ctl_error(const struct ctl_hdr *h, int *exit_code, brig_error **err)
{
        return wire_error_decode(&h->error, sizeof h->error, exit_code, err);
}

int exec_gone(brig_error **err, const char *name, int errnum)
{
        return brig_err(err, errnum, "sandbox '%s' went away during the exec", name);
}

int exec_not_taken(brig_error **err, const char *name)
{
        /* without strerror's words: the front end's libc has others */
        bool first = err && !*err;
        brig_err_code(err, BRIG_EXIT_SETUP, 0, "sandbox '%s' ended before it took the command (it was stopping): "
                                               "nothing ran in it",
                      name);
        if (first && *err)
                (*err)->errnum = ESHUTDOWN;
        return -ESHUTDOWN;
}

/* hdr + cwd\0 argv...\0 env...\0, and context\0 for CTL_EXEC_LAST */
char *exec_request_build(const brig_exec_opts *o, bool tty, uint32_t flags, const char *context, size_t *len,
                         brig_error **err)
{
        size_t n = sizeof(struct ctl_hdr) + (o->cwd ? strlen(o->cwd) : 0) + 1;
        if (flags & CTL_EXEC_LAST)
                n += strlen(context ? context : "") + 1;
        uint32_t argc = 0, envc = 0;
        for (; o->argv[argc]; argc++)
                n += strlen(o->argv[argc]) + 1;
        for (; o->env && o->env[envc]; envc++)
                n += strlen(o->env[envc]) + 1;
        if (n > CTL_MAX_MSG) {
                brig_err(err, E2BIG, "exec: arguments and environment exceed %d bytes", CTL_MAX_MSG);
                return NULL;
        }
        char *buf = calloc(1, n);
        if (!buf) {
                brig_err(err, ENOMEM, "exec request");
                return NULL;
        }
        struct ctl_hdr *h = (struct ctl_hdr *)buf;
        *h = (struct ctl_hdr){ .magic = CTL_MAGIC, .type = CTL_EXEC,
                               .flags = flags | (tty ? CTL_EXEC_TTY : 0) | (o->detach ? CTL_EXEC_DETACH : 0),
                               .argc = argc, .envc = envc, .timeout_ms = o->timeout_ms };
        char *p = buf + sizeof *h;
        p = stpcpy(p, o->cwd ? o->cwd : "") + 1;
        for (uint32_t i = 0; i < argc; i++)
                p = stpcpy(p, o->argv[i]) + 1;
        for (uint32_t i = 0; i < envc; i++)
                p = stpcpy(p, o->env[i]) + 1;
        if (flags & CTL_EXEC_LAST)
                p = stpcpy(p, context ? context : "") + 1;
        *len = n;
        return buf;
}

/* n NUL-terminated strings from *p, within end; NULL when they do not fit. */
static char **take_strings(const char **p, const char *end, uint32_t n)
{
        if (n > 65536)
                return NULL;
        char **v = calloc((size_t)n + 1, sizeof *v);
        if (!v)
                return NULL;
        for (uint32_t i = 0; i < n; i++) {
                const char *nul = memchr(*p, '\0', (size_t)(end - *p));
                if (!nul) {
                        free(v);
                        return NULL;
                }
                v[i] = (char *)*p;
                *p = nul + 1;
        }
        return v;
}

int exec_request_parse(const void *msg, size_t len, struct exec_request *req)
{
        memset(req, 0, sizeof *req);
        const struct ctl_hdr *h = msg;
        if (len < sizeof *h || h->type != CTL_EXEC || h->argc == 0)
                return -EBADMSG;
        const char *p = (const char *)msg + sizeof *h, *end = (const char *)msg + len;
        const char *nul = memchr(p, '\0', (size_t)(end - p));
        if (!nul)
                return -EBADMSG;
        req->cwd = *p ? p : NULL;
        p = nul + 1;
        req->argv = take_strings(&p, end, h->argc);
        req->env = req->argv ? take_strings(&p, end, h->envc) : NULL;
        bool last = h->flags & CTL_EXEC_LAST;
        const char *cnul = last && req->env ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        if (cnul) {
                req->context = p;
                p = cnul + 1;
        }
        /* A file operation's argv[0] is empty (its words follow), which an
         * older parser refuses: a sandbox started by an older brig fails
         * the request instead of running the operation's name as a command. */
        bool fileop = h->flags & CTL_EXEC_FILEOP;
        if (!req->argv || !req->env || p != end || !req->argv[0][0] != fileop || (last && !req->context) ||
            (req->cwd && req->cwd[0] != '/') || (last && (h->flags & (CTL_EXEC_DETACH | CTL_EXEC_FILEOP))) ||
            ((h->flags & CTL_EXEC_AS_MADE) && !last)) {
                exec_request_free(req);
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < h->envc; i++)
                if (!strchr(req->env[i], '=') || req->env[i][0] == '=') {
                        exec_request_free(req);
                        return -EBADMSG;
                }
        req->flags = h->flags;
        req->timeout_ms = h->timeout_ms;
        return 0;
}

void exec_request_free(struct exec_request *req)
{
        free(req->argv);
        free(req->env);
        req->argv = req->env = NULL;
        req->context = NULL;
}

char *pool_identity(const char *policy_json, const char *workspace, const char *sources, const char *context)
{
        /* each part after its length: no policy, workspace (a path may
         * hold a newline) and context of one caller read as another's */
        char *id = NULL;
        return asprintf(&id, "%zu:%s%zu:%s%zu:%s%s", strlen(policy_json), policy_json, strlen(workspace), workspace,
                        strlen(sources), sources, context) < 0
                       ? NULL
                       : id;
}
