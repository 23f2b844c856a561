/* mcp.h — brig mcp: the Model Context Protocol over stdio, a thin layer
 * over libbrig's handle API (docs/mcp.md). server.c speaks the protocol
 * and owns the session; tools.c holds the tools, each one call or a few
 * into include/brig.h. */
#ifndef BRIG_MCP_H
#define BRIG_MCP_H

#include "brig.h"
#include "mcp/jsonrpc.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct mcp {
        brig_policy *policy;      /* the command line's; nothing the model sends changes it */
        json_t *policy_json;      /* the same as brig_policy_to_json says it (network, limits) */
        bool overlay;             /* --overlay: diff and reset */
        const char *keep;         /* --keep NAME, or NULL: removed at the session's end */
        char name[72];            /* the session's sandbox */
        char *workspace;          /* absolute; the same path inside */
        brig_sandbox *sb;         /* NULL until a tool first needs it */
        uint64_t timeout_cap_ms;  /* the policy's --timeout (0: none): no command runs longer */
        int sig_fd;               /* signalfd: SIGTERM, SIGINT, SIGHUP end the session */
        bool stop;                /* one of those came, or stdout is gone */
        bool initialized;         /* initialize answered */
        char version[16];         /* the protocol revision agreed */
        int log_level;            /* notifications/message at this level and above */
        bool client_elicitation;  /* the client said it can be asked (approvals: not in brig yet) */
        json_t *reports;          /* [{"n", "command", "report"}], the last MCP_REPORTS_KEPT commands' */
        unsigned runs;
        json_t *refusals;         /* what brig refused this session: [{kind, what, why, allow_with, count}] */
        /* The client's lines: read while a command runs too, so that a
         * notifications/cancelled for it is seen; the others wait here. */
        struct rpc_reader rd;
        struct mcp_line *pending, **pending_tail;
        size_t pending_bytes;     /* past MCP_PENDING_MAX stdin is not read until they are handled */
        json_t *current_id;       /* the request being handled, or NULL */
        bool cancelled;           /* the client cancelled it: no answer */
        json_t *cancelled_ids;    /* requestIds cancelled before they ran: the last MCP_CANCELS_KEPT */
        bool eof;                 /* stdin ended: the session is over */
};

struct mcp_line {
        struct mcp_line *next;
        size_t len;               /* SIZE_MAX: a line over RPC_MAX_LINE, skipped */
        char data[];
};

#define MCP_REPORTS_KEPT 64
#define MCP_PENDING_MAX (32u << 20)
#define MCP_CANCELS_KEPT 64

static inline void mcp_freep(void *p)
{
        free(*(void **)p);
}
#define _autofree_ __attribute__((cleanup(mcp_freep)))

/* Write one line the jsonrpc.h builders made (freed here). */
void mcp_send(struct mcp *m, char *line);
/* notifications/message at LEVEL ("info", "warning", ...), and on stderr. */
void mcp_log(struct mcp *m, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Read what stdin has (once; it is readable): complete lines are queued,
 * a cancellation of the current request sets m->cancelled, one of a
 * queued request keeps its id in m->cancelled_ids. EOF or an
 * error sets m->eof. */
void mcp_read_input(struct mcp *m);
/* The session's sandbox, made from the command line's policy on first use. */
int mcp_sandbox(struct mcp *m, brig_error **err);

/* tools.c */
json_t *mcp_tools_list(void);
/* The result of tools/call (a tool's failure is a result with isError),
 * or NULL for a protocol error: *code and why say which. */
json_t *mcp_tools_call(struct mcp *m, const char *name, json_t *args, int *code, char *why, size_t why_size);

#endif
