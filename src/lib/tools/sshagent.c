/* sshagent.c — --ssh-agent: the sandbox's ssh talks to a socket brig made
 * inside (/run/brig/ssh-agent.sock), and the supervisor relays it to the
 * host's agent ($SSH_AUTH_SOCK) — which the sandbox user could not reach
 * itself (root's socket, another user's directory, outside every grant).
 *
 * The relay passes on only what a client needs to log in, each checked to
 * be exactly the shape the protocol gives it: SSH_AGENTC_REQUEST_IDENTITIES
 * (list the public keys), SSH_AGENTC_SIGN_REQUEST (sign one challenge —
 * only an SSH login (userauth) request with the key it names) and the
 * client's session-bind@openssh.com (with it the host's agent applies
 * the destination constraints of keys added with ssh-add -h). Everything
 * else — adding or removing keys, locking the agent with a password of
 * the sandbox's choosing, other extensions (query, and whatever an agent
 * implements) — is answered SSH_AGENT_FAILURE by brig itself and never
 * reaches the agent. brig itself does not choose which keys or hosts a
 * login is for: every key the agent holds without constraints can log
 * the sandbox in while it runs (docs/tools.md).
 *
 * One thread accepts; one thread per connection relays, blocking, so a
 * slow agent (a confirmation prompt, ssh-add -c) holds up nothing else —
 * at most AGENT_MAX_CONNECTIONS of them: the sandbox makes the
 * connections, and each further one is closed at once. None of these
 * threads touches the supervisor's state but this file's (a->lock). */
#define _GNU_SOURCE
#include "tools/tools.h"
#include "core/refusals.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define AGENT_MAX_CONNECTIONS 16

/* ---- the protocol -------------------------------------------------------- */

static uint32_t be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* An SSH "string" (uint32 length, bytes) at *at within END, its bytes in
 * *s and *n; false when it does not fit. */
static bool get_string(const uint8_t *buf, size_t *at, size_t end, const uint8_t **s, size_t *n)
{
        if (end - *at < 4)
                return false;
        uint32_t len = be32(buf + *at);
        *at += 4;
        if (len > end - *at)
                return false;
        *s = buf + *at;
        *n = len;
        *at += len;
        return true;
}

/* A string that is exactly WANT (NULL: any text without a NUL in it). */
static bool get_text(const uint8_t *buf, size_t *at, size_t end, const char *want)
{
        const uint8_t *s;
        size_t n;
        if (!get_string(buf, at, end, &s, &n))
                return false;
        return want ? n == strlen(want) && memcmp(s, want, n) == 0 : !memchr(s, '\0', n);
}

#define SSH_MSG_USERAUTH_REQUEST 50
#define SESSION_ID_MAX 64  /* the longest exchange hash: SHA-512 */

/* Is DATA (N bytes) what an SSH client signs to log in with the key KEY —
 * a userauth request (RFC 4252 section 7, and OpenSSH's
 * publickey-hostbound-v00 method)? string session id, byte
 * SSH_MSG_USERAUTH_REQUEST, string user, string "ssh-connection", string
 * "publickey" (or the hostbound method, then string host key), bool TRUE,
 * string algorithm, string the same key, nothing more: the checks
 * OpenSSH's own agent makes (parse_userauth_request). Anything else —
 * an SSHSIG of a commit or a file, another protocol's challenge — is a
 * signature that outlives the run, and no login needs it. */
static bool is_login(const uint8_t *key, size_t key_n, const uint8_t *data, size_t n)
{
        size_t at = 0;
        const uint8_t *s, *blob;
        size_t sn, blob_n;
        if (!get_string(data, &at, n, &s, &sn) || sn == 0 || sn > SESSION_ID_MAX)
                return false;
        if (at >= n || data[at++] != SSH_MSG_USERAUTH_REQUEST)
                return false;
        if (!get_text(data, &at, n, NULL) || !get_text(data, &at, n, "ssh-connection"))
                return false;
        size_t method = at;
        bool hostbound = get_text(data, &method, n, "publickey-hostbound-v00@openssh.com");
        if (!hostbound && !get_text(data, &at, n, "publickey"))
                return false;
        at = hostbound ? method : at;
        if (at >= n || data[at++] != 1 || !get_text(data, &at, n, NULL))
                return false;
        if (!get_string(data, &at, n, &blob, &blob_n) || blob_n != key_n || memcmp(blob, key, key_n) != 0)
                return false;
        if (hostbound && (!get_string(data, &at, n, &s, &sn) || sn == 0))
                return false;
        return at == n;
}

/* SSH_AGENT_RSA_SHA2_256 | SSH_AGENT_RSA_SHA2_512 (and the old
 * SSH_AGENT_OLD_SIGNATURE bit): the flags a sign request may carry. */
#define SIGN_FLAGS_KNOWN 0x7u

enum agent_verdict sshagent_judge(const uint8_t *buf, size_t len, size_t *msg_len, uint8_t *type)
{
        *msg_len = 0;
        *type = 0;
        if (len < 4)
                return AGENT_MORE;
        uint32_t n = be32(buf);
        if (n == 0 || n > AGENT_MAX_MESSAGE)
                return AGENT_BAD;
        if (len - 4 < n)
                return AGENT_MORE;
        *msg_len = 4 + (size_t)n;
        *type = buf[4];
        size_t end = 4 + (size_t)n, at = 5, n1;
        const uint8_t *s1;
        switch (*type) {
        case SSH_AGENTC_REQUEST_IDENTITIES:
                return n == 1 ? AGENT_FORWARD : AGENT_REFUSE;
        case SSH_AGENTC_SIGN_REQUEST: {
                /* string key blob, string data, uint32 flags: nothing more */
                const uint8_t *key, *data;
                size_t key_n, data_n;
                if (!get_string(buf, &at, end, &key, &key_n) || !get_string(buf, &at, end, &data, &data_n) ||
                    end - at != 4 || (be32(buf + at) & ~SIGN_FLAGS_KNOWN))
                        return AGENT_REFUSE;
                return is_login(key, key_n, data, data_n) ? AGENT_FORWARD : AGENT_REFUSE_NOT_LOGIN;
        }
        case SSH_AGENTC_EXTENSION:
                /* session-bind@openssh.com: string host key, string session
                 * id, string the host key's signature of it, bool forwarding.
                 * The agent checks the signature, and with it the
                 * destination constraints of keys added with ssh-add -h:
                 * it signs with those only on a connection so bound. */
                if (get_text(buf, &at, end, "session-bind@openssh.com") && get_string(buf, &at, end, &s1, &n1) &&
                    n1 && get_string(buf, &at, end, &s1, &n1) && n1 && n1 <= SESSION_ID_MAX &&
                    get_string(buf, &at, end, &s1, &n1) && n1 && end - at == 1 && buf[at] <= 1)
                        return AGENT_FORWARD;
                return AGENT_REFUSE;
        default:
                return AGENT_REFUSE;
        }
}

/* ---- the relay ------------------------------------------------------------ */

struct conn {
        int client, upstream;
        pthread_t thread;
        bool done;
        struct sshagent *agent;
        struct conn *next;
};

struct sshagent {
        char *upstream;
        int listen_fd;
        pthread_t acceptor;
        bool accepting;
        bool stopping;
        pthread_mutex_t lock;
        struct conn *conns;
        uint64_t refused[256];   /* by message type */
        uint64_t refused_not_login;  /* well-formed sign requests for data that is no login */
};

struct sshagent *sshagent_new(const char *upstream)
{
        struct sshagent *a = calloc(1, sizeof *a);
        if (!a)
                return NULL;
        a->upstream = strdup(upstream);
        if (!a->upstream) {
                free(a);
                return NULL;
        }
        a->listen_fd = -1;
        pthread_mutex_init(&a->lock, NULL);
        return a;
}

static bool send_all(int fd, const uint8_t *p, size_t n)
{
        while (n) {
                ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return false;
                p += w;
                n -= (size_t)w;
        }
        return true;
}

/* Read until BUF holds at least WANT bytes; false at end or error. */
static bool fill(int fd, uint8_t *buf, size_t *have, size_t want, size_t cap)
{
        while (*have < want) {
                ssize_t r = recv(fd, buf + *have, cap - *have, 0);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return false;
                *have += (size_t)r;
        }
        return true;
}

/* One answer of the host's agent, framed by its length, to the client. */
static bool relay_answer(struct conn *c, uint8_t *buf, size_t cap)
{
        size_t have = 0;
        if (!fill(c->upstream, buf, &have, 4, 4))
                return false;
        uint32_t n = be32(buf);
        if (n == 0 || n > AGENT_MAX_MESSAGE)
                return false;
        if (!fill(c->upstream, buf, &have, 4 + (size_t)n, 4 + (size_t)n) || have > cap)
                return false;
        return send_all(c->client, buf, have);
}

/* Relay threads are named, so that a look at the supervisor's tasks
 * (ps -L, /proc/PID/task/N/comm; the flood test) tells them apart. */
#define RELAY_THREAD_NAME "brig-agent"

static void *relay(void *arg)
{
        struct conn *c = arg;
        (void)pthread_setname_np(pthread_self(), RELAY_THREAD_NAME);
        size_t cap = 4 + AGENT_MAX_MESSAGE;
        uint8_t *in = malloc(cap), *out = malloc(cap);
        size_t have = 0;
        static const uint8_t failure[5] = { 0, 0, 0, 1, SSH_AGENT_FAILURE };
        while (in && out) {
                size_t len;
                uint8_t type;
                enum agent_verdict v = sshagent_judge(in, have, &len, &type);
                if (v == AGENT_MORE) {
                        if (!fill(c->client, in, &have, have + 1, cap))
                                break;
                        continue;
                }
                if (v == AGENT_BAD)
                        break;
                if (v == AGENT_FORWARD) {
                        if (!send_all(c->upstream, in, len) || !relay_answer(c, out, cap))
                                break;
                } else {
                        pthread_mutex_lock(&c->agent->lock);
                        if (v == AGENT_REFUSE_NOT_LOGIN)
                                c->agent->refused_not_login++;
                        else
                                c->agent->refused[type]++;
                        pthread_mutex_unlock(&c->agent->lock);
                        if (!send_all(c->client, failure, sizeof failure))
                                break;
                }
                memmove(in, in + len, have - len);
                have -= len;
        }
        free(in);
        free(out);
        /* Both ends go; the descriptors stay until sshagent_free joins us. */
        shutdown(c->client, SHUT_RDWR);
        shutdown(c->upstream, SHUT_RDWR);
        pthread_mutex_lock(&c->agent->lock);
        c->done = true;
        pthread_mutex_unlock(&c->agent->lock);
        return NULL;
}

static int connect_upstream(const char *path)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Finished connections: joined and freed (lock held). */
static size_t reap(struct sshagent *a)
{
        size_t live = 0;
        for (struct conn **p = &a->conns; *p;) {
                struct conn *c = *p;
                if (!c->done) {
                        live++;
                        p = &c->next;
                        continue;
                }
                pthread_join(c->thread, NULL);
                close(c->client);
                close(c->upstream);
                *p = c->next;
                free(c);
        }
        return live;
}

static void *acceptor(void *arg)
{
        struct sshagent *a = arg;
        for (;;) {
                int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0 && (errno == EINTR || errno == ECONNABORTED))
                        continue;
                pthread_mutex_lock(&a->lock);
                bool stop = fd < 0 || a->stopping;
                size_t live = stop ? 0 : reap(a);
                pthread_mutex_unlock(&a->lock);
                if (stop) {
                        if (fd >= 0)
                                close(fd);
                        break;
                }
                int up = live < AGENT_MAX_CONNECTIONS ? connect_upstream(a->upstream) : -1;
                struct conn *c = up >= 0 ? calloc(1, sizeof *c) : NULL;
                if (!c) {
                        /* the host's agent is gone, or too many at once:
                         * the client sees its connection end */
                        if (up >= 0)
                                close(up);
                        close(fd);
                        continue;
                }
                *c = (struct conn){ .client = fd, .upstream = up, .agent = a };
                pthread_mutex_lock(&a->lock);
                if (pthread_create(&c->thread, NULL, relay, c) == 0) {
                        c->next = a->conns;
                        a->conns = c;
                } else {
                        close(fd);
                        close(up);
                        free(c);
                }
                pthread_mutex_unlock(&a->lock);
        }
        return NULL;
}

int sshagent_serve(struct sshagent *a, int listen_fd)
{
        if (a->accepting)
                return -EBUSY;
        a->listen_fd = listen_fd;
        int r = pthread_create(&a->acceptor, NULL, acceptor, a);
        if (r != 0) {
                a->listen_fd = -1;
                return -r;
        }
        a->accepting = true;
        return 0;
}

/* Each refused request by its name in the protocol and what it asks. */
static const struct {
        uint8_t type;
        const char *name, *asks;
} requests[] = {
        { SSH_AGENTC_REQUEST_IDENTITIES, "SSH_AGENTC_REQUEST_IDENTITIES", "malformed: a list request carries nothing" },
        { SSH_AGENTC_SIGN_REQUEST, "SSH_AGENTC_SIGN_REQUEST", "malformed, or flags brig does not know" },
        { 1, "SSH_AGENTC_REQUEST_RSA_IDENTITIES", "lists SSH-1 keys" },
        { 3, "SSH_AGENTC_RSA_CHALLENGE", "an SSH-1 challenge" },
        { 7, "SSH_AGENTC_ADD_RSA_IDENTITY", "adds an SSH-1 key" },
        { 8, "SSH_AGENTC_REMOVE_RSA_IDENTITY", "removes an SSH-1 key" },
        { 9, "SSH_AGENTC_REMOVE_ALL_RSA_IDENTITIES", "removes all SSH-1 keys" },
        { 17, "SSH_AGENTC_ADD_IDENTITY", "adds a key" },
        { 18, "SSH_AGENTC_REMOVE_IDENTITY", "removes a key" },
        { 19, "SSH_AGENTC_REMOVE_ALL_IDENTITIES", "removes all keys" },
        { 20, "SSH_AGENTC_ADD_SMARTCARD_KEY", "adds a smartcard key" },
        { 21, "SSH_AGENTC_REMOVE_SMARTCARD_KEY", "removes a smartcard key" },
        { 22, "SSH_AGENTC_LOCK", "locks the agent with a password" },
        { 23, "SSH_AGENTC_UNLOCK", "unlocks the agent" },
        { 24, "SSH_AGENTC_ADD_RSA_ID_CONSTRAINED", "adds an SSH-1 key with constraints" },
        { 25, "SSH_AGENTC_ADD_ID_CONSTRAINED", "adds a key with constraints" },
        { 26, "SSH_AGENTC_ADD_SMARTCARD_KEY_CONSTRAINED", "adds a smartcard key with constraints" },
        { 27, "SSH_AGENTC_EXTENSION", "an extension (of those only a well-formed session-bind@openssh.com passes)" },
};

void sshagent_refusals(struct sshagent *a, struct refusals *r)
{
        pthread_mutex_lock(&a->lock);
        for (int t = 0; t < 256; t++) {
                if (!a->refused[t])
                        continue;
                char name[48], why[160];
                const char *asks = "a request brig does not know";
                snprintf(name, sizeof name, "type-%d", t);
                for (size_t i = 0; i < ARRAY_SIZE(requests); i++)
                        if (requests[i].type == t) {
                                snprintf(name, sizeof name, "%s", requests[i].name);
                                asks = requests[i].asks;
                        }
                snprintf(why, sizeof why, "%s; brig's --ssh-agent relay passes on only listing keys and signing", asks);
                refusals_add(r, REFUSAL_AGENT, name, why, NULL, a->refused[t]);
        }
        if (a->refused_not_login)
                refusals_add(r, REFUSAL_AGENT, "SSH_AGENTC_SIGN_REQUEST",
                             "data that is not an SSH login (a commit's or a file's signature, another "
                             "protocol's challenge); brig's --ssh-agent relay signs only logins", NULL,
                             a->refused_not_login);
        pthread_mutex_unlock(&a->lock);
}

void sshagent_free(struct sshagent *a)
{
        if (!a)
                return;
        pthread_mutex_lock(&a->lock);
        a->stopping = true;
        pthread_mutex_unlock(&a->lock);
        if (a->accepting) {
                /* wakes accept() with EINVAL */
                shutdown(a->listen_fd, SHUT_RDWR);
                pthread_join(a->acceptor, NULL);
        }
        if (a->listen_fd >= 0)
                close(a->listen_fd);
        /* No connection is added any more: end them all. */
        for (struct conn *c = a->conns; c; c = c->next) {
                shutdown(c->client, SHUT_RDWR);
                shutdown(c->upstream, SHUT_RDWR);
        }
        for (struct conn *c = a->conns, *next; c; c = next) {
                next = c->next;
                pthread_join(c->thread, NULL);
                close(c->client);
                close(c->upstream);
                free(c);
        }
        pthread_mutex_destroy(&a->lock);
        free(a->upstream);
        free(a);
}
