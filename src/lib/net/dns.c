/* dns.c — asynchronous name resolution with c-ares, on the egress epoll.
 *
 * c-ares reads /etc/hosts and the host's resolv.conf like the system
 * resolver; its sockets are registered with the egress epoll through the
 * socket-state callback, and its timeouts ride on the egress timerfd. The
 * channel is made on first use, so a run that only uses --resolve never
 * touches the host's resolver configuration.
 *
 * c-ares itself is opened then too, not linked: most runs resolve nothing
 * (no network, or only --resolve'd names), and loading and relocating it
 * cost every brig start about 0.07 ms (docs/benchmarks.md). It is opened
 * as OpenSSL is (core/libload.h): the build's own file, by absolute path,
 * root's and writable by nobody else; if it cannot be, the run says why
 * on stderr and no name resolves. */
#define _GNU_SOURCE
#include "net/net.h"
#include "core/libload.h"

#include <ares.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

/* The build's pkg-config libdir and c-ares 1.x's soname (meson.build). */
#ifndef BRIG_LIBCARES_PATH
#define BRIG_LIBCARES_PATH "/usr/lib/x86_64-linux-gnu/libcares.so.2"
#endif

/* Every c-ares function brig calls: a call of one missing here does not
 * compile into a direct call (ares.h declares it, nothing links it: an
 * undefined reference). */
#define CARES_FUNCTIONS(X) \
        X(ares_library_init) \
        X(ares_library_cleanup) \
        X(ares_init_options) \
        X(ares_destroy) \
        X(ares_getaddrinfo) \
        X(ares_freeaddrinfo) \
        X(ares_process_fd) \
        X(ares_timeout)

static struct {
#define CARES_FIELD(name) __typeof__(name) *name;
        CARES_FUNCTIONS(CARES_FIELD)
#undef CARES_FIELD
} cares;
static pthread_once_t cares_once = PTHREAD_ONCE_INIT;
static int cares_errno;
static char cares_why[PATH_MAX + 256];

static void cares_open(void)
{
        void *h = libload_open("c-ares", BRIG_LIBCARES_PATH, &cares_errno, cares_why, sizeof cares_why);
        if (!h)
                return;
#define CARES_SYM(name)                                                                                    \
        if (!(cares.name = (__typeof__(cares.name))libload_sym(h, #name, "c-ares", BRIG_LIBCARES_PATH,      \
                                                               &cares_errno, cares_why, sizeof cares_why))) \
                return;
        CARES_FUNCTIONS(CARES_SYM)
#undef CARES_SYM
}

/* c-ares, opened once (thread-safe); false with the reason on stderr,
 * once: without it nothing resolves, and the log says only that. */
static bool cares_load(void)
{
        static bool said;
        pthread_once(&cares_once, cares_open);
        if (cares_errno && !__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
                fprintf(stderr, "brig: %s; no name can be resolved (a broken install: reinstall c-ares)\n", cares_why);
        return cares_errno == 0;
}

#define ares_library_init (cares.ares_library_init)
#define ares_library_cleanup (cares.ares_library_cleanup)
#define ares_init_options (cares.ares_init_options)
#define ares_destroy (cares.ares_destroy)
#define ares_getaddrinfo (cares.ares_getaddrinfo)
#define ares_freeaddrinfo (cares.ares_freeaddrinfo)
#define ares_process_fd (cares.ares_process_fd)
#define ares_timeout (cares.ares_timeout)

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
        if (!cares_load() || ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS ||
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
