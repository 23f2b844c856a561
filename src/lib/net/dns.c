/* dns.c — asynchronous name resolution with c-ares, on the egress epoll.
 *
 * c-ares reads /etc/hosts and the host's resolv.conf like the system
 * resolver; its sockets are registered with the egress epoll through the
 * socket-state callback, and its timeouts ride on the egress timerfd. The
 * channel is made on first use, so a run that only uses --resolve never
 * touches the host's resolver configuration. */
#define _GNU_SOURCE
#include "net/net.h"

#include <ares.h>
#include <string.h>
#include <sys/epoll.h>

#define DNS_SLOTS 32
#define DNS_MAX_ANSWERS 16

struct dns_slot {
        int fd;               /* -1: free */
};

struct dns {
        int epfd;
        bool ready, failed;
        ares_channel ch;
        struct dns_slot slots[DNS_SLOTS];
};

struct dns_query {
        dns_done_fn done;
        void *ctx;
        bool cancelled;
        bool in_call;         /* inside ares_getaddrinfo */
        bool finished;        /* the callback ran while in_call */
};

static void sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
        struct dns *d = data;
        struct dns_slot *slot = NULL, *free_slot = NULL;
        for (int i = 0; i < DNS_SLOTS; i++) {
                if (d->slots[i].fd == fd)
                        slot = &d->slots[i];
                else if (d->slots[i].fd < 0 && !free_slot)
                        free_slot = &d->slots[i];
        }
        if (!readable && !writable) {
                if (slot) {
                        epoll_ctl(d->epfd, EPOLL_CTL_DEL, fd, NULL);
                        slot->fd = -1;
                }
                return;
        }
        struct epoll_event ev = { .events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0) };
        if (slot) {
                ev.data.ptr = slot;
                epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &ev);
        } else if (free_slot) {
                free_slot->fd = fd;
                ev.data.ptr = free_slot;
                epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev);
        }
        /* No slot left: c-ares's own timeout ends that query with an error. */
}

struct dns *dns_new(int epfd, brig_error **err)
{
        struct dns *d = calloc(1, sizeof *d);
        if (!d) {
                brig_err(err, ENOMEM, "resolver");
                return NULL;
        }
        d->epfd = epfd;
        for (int i = 0; i < DNS_SLOTS; i++)
                d->slots[i].fd = -1;
        return d;
}

static bool dns_ready(struct dns *d)
{
        if (d->ready || d->failed)
                return d->ready;
        struct ares_options o = { .sock_state_cb = sock_state, .sock_state_cb_data = d, .timeout = 3000, .tries = 2 };
        if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS ||
            ares_init_options(&d->ch, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES) != ARES_SUCCESS) {
                d->failed = true;
                return false;
        }
        d->ready = true;
        return true;
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
        (void)timeouts;
        struct dns_query *q = arg;
        struct net_addr addrs[DNS_MAX_ANSWERS];
        size_t n = 0;
        for (struct ares_addrinfo_node *a = res ? res->nodes : NULL; a && n < DNS_MAX_ANSWERS; a = a->ai_next)
                if (a->ai_family == AF_INET || a->ai_family == AF_INET6)
                        net_addr_from_sockaddr(&addrs[n++], a->ai_addr);
        if (res)
                ares_freeaddrinfo(res);
        if (!q->cancelled && status != ARES_EDESTRUCTION)
                q->done(q->ctx, status == ARES_SUCCESS ? 0 : -ENOENT, addrs, n);
        if (q->in_call)
                q->finished = true;
        else
                free(q);
}

void *dns_resolve(struct dns *d, const char *host, dns_done_fn done, void *ctx)
{
        if (!dns_ready(d)) {
                done(ctx, -EIO, NULL, 0);
                return NULL;
        }
        struct dns_query *q = calloc(1, sizeof *q);
        if (!q) {
                done(ctx, -ENOMEM, NULL, 0);
                return NULL;
        }
        q->done = done;
        q->ctx = ctx;
        q->in_call = true;
        struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT };
        ares_getaddrinfo(d->ch, host, NULL, &hints, on_answer, q);
        q->in_call = false;
        if (q->finished) {
                free(q);
                return NULL;
        }
        return q;
}

void dns_cancel(void *token)
{
        if (token)
                ((struct dns_query *)token)->cancelled = true;
}

bool dns_owns(struct dns *d, void *tag, int *fd)
{
        if (!d || (struct dns_slot *)tag < d->slots || (struct dns_slot *)tag >= d->slots + DNS_SLOTS)
                return false;
        *fd = ((struct dns_slot *)tag)->fd;
        return true;
}

void dns_on_event(struct dns *d, int fd, uint32_t events)
{
        if (!d->ready || fd < 0)
                return;
        bool rd = events & (EPOLLIN | EPOLLERR | EPOLLHUP), wr = events & (EPOLLOUT | EPOLLERR);
        ares_process_fd(d->ch, rd ? fd : ARES_SOCKET_BAD, wr ? fd : ARES_SOCKET_BAD);
}

void dns_on_timer(struct dns *d)
{
        if (d->ready)
                ares_process_fd(d->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
}

int dns_timeout_ms(struct dns *d)
{
        if (!d->ready)
                return -1;
        struct timeval tv, *t = ares_timeout(d->ch, NULL, &tv);
        if (!t)
                return -1;
        long ms = t->tv_sec * 1000 + (t->tv_usec + 999) / 1000;
        return ms < 1 ? 1 : ms > 60000 ? 60000 : (int)ms;
}

void dns_free(struct dns *d)
{
        if (!d)
                return;
        if (d->ready) {
                ares_destroy(d->ch);  /* runs pending callbacks with ARES_EDESTRUCTION */
                ares_library_cleanup();
        }
        free(d);
}
