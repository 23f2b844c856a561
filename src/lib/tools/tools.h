/* tools.h — what the tools agents use are handed at start: files copied in
 * for the sandbox user (--copy-in), the ssh-agent relay (--ssh-agent),
 * configuration without credentials (--git-identity, --carry-config) and
 * a passwd entry whose home is the sandbox's $HOME (tools.c, sshagent.c;
 * docs/tools.md). */
#ifndef BRIG_TOOLS_H
#define BRIG_TOOLS_H

#include "core/plan.h"

#include <stdint.h>

/* brig's own tmpfs inside: the generated passwd, the copied files, the
 * agent socket. Read-only once the sandbox is set up; never saved by a
 * snapshot (only $HOME and /tmp are). */
#define BRIG_RUNTIME_DIR "/run/brig"
#define BRIG_COPY_IN_DIR BRIG_RUNTIME_DIR "/copy-in"
#define BRIG_AGENT_SOCKET BRIG_RUNTIME_DIR "/ssh-agent.sock"
#define BRIG_RUNTIME_SIZE (16ULL << 20)
/* Secrets and http rules (net/intercept.h): the sandbox's CA, alone and
 * with the host's bundle (which is bound over /etc/ssl/certs/ca-certificates.crt). */
#define BRIG_CA_CERT BRIG_RUNTIME_DIR "/brig-ca.pem"
#define BRIG_CA_BUNDLE BRIG_RUNTIME_DIR "/ca-certificates.crt"
#define BRIG_SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

#define COPY_IN_MAX_BYTES (1 << 20)  /* per file: keys and tokens, not data sets */
#define COPY_IN_MAX_FILES 64
#define CONFIG_MAX_BYTES (256 << 10)  /* a host config file carried in */

enum carry_config {
        CARRY_NPM = 1 << 0,
        CARRY_PIP = 1 << 1,
};

struct copy_in {
        char *src;       /* host path, absolute or ~/ (the caller's home) */
        char *dst;       /* inside, absolute or ~/ (the sandbox's $HOME) */
        bool secret;     /* --copy-in-secret: SRC may be on the deny list */
};

struct tools_policy {
        struct copy_in *copy_ins;
        size_t n_copy_ins;
        bool ssh_agent;
        bool git_identity;
        unsigned carry;  /* enum carry_config */
};

BRIG_INTERNAL void tools_policy_free(struct tools_policy *t);
/* The policy's tools part, created on first use. */
BRIG_INTERNAL struct tools_policy *tools_policy_get(brig_policy *p);

/* One file made inside at start. */
struct inside_file {
        char *path;      /* inside, absolute */
        char *data;
        size_t len;
        mode_t mode;
        bool copied;     /* --copy-in: the bytes in BRIG_COPY_IN_DIR, a symlink at path */
        char origin[64]; /* the flag that asked for it, for messages */
};

struct tools_plan {
        struct inside_file *files;
        size_t n_files;
        char *passwd;          /* /etc/passwd inside: the sandbox user's home is $HOME (a rootfs: NULL, the image's) */
        bool runtime_dir;      /* brig's tmpfs at BRIG_RUNTIME_DIR is mounted (a rootfs may do without) */
        size_t passwd_len;
        char *agent_upstream;  /* --ssh-agent: the host's $SSH_AUTH_SOCK */
        char *ca_pem;          /* secrets, http rules: the sandbox's CA certificate, or NULL */
        char *ca_bundle;       /* ... after the host's bundle */
};

/* Host side, before clone: read what is copied in, generate the config
 * files and the passwd entry (from PASSWD, the host's /etc/passwd as the
 * plan read it), check every destination. */
BRIG_INTERNAL int tools_plan_build(struct run_plan *plan, const char *passwd, size_t passwd_len, brig_error **err);
/* The most of the host's /etc/passwd that goes inside (brig's tmpfs). */
#define TOOLS_PASSWD_MAX (4u << 20)
/* A regular host file (never a FIFO, device or socket), at most CAP
 * bytes, NUL-terminated; with no_symlinks, through no symlink and with
 * one name. WHAT names it in the error. */
BRIG_INTERNAL int tools_read_host_file(const char *what, const char *path, bool no_symlinks, size_t cap, char **out,
                                       size_t *out_len, brig_error **err);
BRIG_INTERNAL void tools_plan_free(struct tools_plan *t);
/* Inside, while the tree is built (mounts.c): fill brig's tmpfs and the
 * sandbox's, bind the passwd over /etc/passwd. */
BRIG_INTERNAL int tools_populate(int root_fd, const struct run_plan *plan, brig_error **err);
/* Inside, after pivot_root (child.c): the agent socket, then brig's tmpfs
 * read-only. */
BRIG_INTERNAL int tools_finish_inside(const struct run_plan *plan, brig_error **err);

/* Pure functions (toolconf.c, unit-tested). Each returns a new
 * NUL-terminated text. */
BRIG_INTERNAL char *tools_passwd_for(const char *passwd, size_t len, uid_t uid, gid_t gid, const char *name,
                                     const char *home);
BRIG_INTERNAL char *tools_filter_npmrc(const char *text, size_t len);
BRIG_INTERNAL char *tools_filter_pip_conf(const char *text, size_t len);
BRIG_INTERNAL char *tools_gitconfig(const char *name, const char *email);

/* ---- the ssh-agent relay (sshagent.c) ----------------------------------- */

/* SSH agent protocol (draft-miller-ssh-agent): uint32 length, then a
 * message whose first byte is its type. */
#define AGENT_MAX_MESSAGE (256 << 10)
#define SSH_AGENT_FAILURE 5
#define SSH_AGENTC_REQUEST_IDENTITIES 11
#define SSH_AGENTC_SIGN_REQUEST 13
#define SSH_AGENTC_EXTENSION 27

enum agent_verdict {
        AGENT_MORE = 0,   /* not a whole message yet */
        AGENT_FORWARD,    /* a request the relay passes on */
        AGENT_REFUSE,     /* a whole request the relay answers with failure itself */
        AGENT_REFUSE_NOT_LOGIN,  /* likewise: a sign request for data that is no SSH login */
        AGENT_BAD,        /* a length the protocol does not allow: end the connection */
};
/* Judge the first message in BUF (LEN bytes): *msg_len is its length with
 * the 4 length bytes (FORWARD and the REFUSEs), *type its type (0 if empty). */
BRIG_INTERNAL enum agent_verdict sshagent_judge(const uint8_t *buf, size_t len, size_t *msg_len, uint8_t *type);

struct sshagent;
BRIG_INTERNAL struct sshagent *sshagent_new(const char *upstream);
/* Serve the sandbox's listening socket (taken) on a thread of its own. */
BRIG_INTERNAL int sshagent_serve(struct sshagent *a, int listen_fd);
struct refusals;
/* Every request the relay answered itself, one refusal per kind (refusals.h). */
BRIG_INTERNAL void sshagent_refusals(struct sshagent *a, struct refusals *r);
BRIG_INTERNAL void sshagent_free(struct sshagent *a);

#endif
