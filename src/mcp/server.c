/* server.c — `brig mcp`: the Model Context Protocol over stdio (docs/mcp.md).
 *
 * One session per process: the client starts brig mcp, speaks JSON-RPC on
 * its stdin and stdout (one message per line, jsonrpc.c), and ends the
 * session by closing stdin (or with SIGTERM, SIGINT, SIGHUP). The sandbox
 * is made from the command line's policy when a tool first needs it and
 * removed when the session ends, unless --keep NAME; its supervisor
 * removes it also when brig mcp itself is SIGKILLed (BRIG_SANDBOX_OWNED:
 * it watches this process, and no process of ours has to outlive us). Requests are handled
 * one at a time, in order. Nothing but protocol messages goes to stdout:
 * brig's own lines go to stderr (and, as notifications/message, to the
 * client). */
#define _GNU_SOURCE
#include "mcp/mcp.h"
#include "mcp/jsonrpc.h"
#include "cli/cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const char mcp_usage[] =
        "usage: brig mcp [--overlay] [--keep NAME] [RUN OPTIONS]\n"
        "\n"
        "Speak the Model Context Protocol on stdin and stdout: an agent host (Claude\n"
        "Code, Codex CLI, Cursor, VS Code) gets a shell, files and snapshots in one\n"
        "sandbox, made on first use from the policy these options give (every option\n"
        "of brig run: --profile, --policy, --workspace, --allow-host, --memory, ...;\n"
        "see brig run --help). Nothing the model sends widens it. docs/mcp.md.\n"
        "  --overlay      a copy-on-write layer over the workspace: the diff and reset\n"
        "                 tools; the workspace itself changes only by brig commit\n"
        "  --keep NAME    name the sandbox NAME and leave it running when the session\n"
        "                 ends (brig exec, diff, commit, rm NAME); without it the\n"
        "                 sandbox is removed with the session\n";

static const char *const protocol_versions[] = { "2025-11-25", "2025-06-18", NULL };
static const char *const log_levels[] = { "debug", "info", "notice", "warning", "error",
                                          "critical", "alert", "emergency", NULL };

static int level_of(const char *name)
{
        for (int i = 0; name && log_levels[i]; i++)
                if (strcmp(log_levels[i], name) == 0)
                        return i;
        return -1;
}

void mcp_send(struct mcp *m, char *line)
{
        if (!line) {
                cli_say("brig mcp: out of memory writing a message\n");
                return;
        }
        size_t n = strlen(line), off = 0;
        while (off < n && !m->stop) {
                ssize_t w = write(STDOUT_FILENO, line + off, n - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        /* The client is gone: the session is over. */
                        m->stop = true;
                        break;
                }
                off += (size_t)w;
        }
        free(line);
}

void mcp_log(struct mcp *m, const char *level, const char *fmt, ...)
{
        char *text = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        /* one line per message: a newline in what the model chose (a tag,
         * a path, grep's words about a file it named) would forge a line
         * of the agent host's log */
        char *safe = text_escaped(text, false);
        cli_say("brig mcp: %s\n", safe ? safe : "(out of memory)");
        free(safe);
        if (m->initialized && level_of(level) >= m->log_level) {
                json_t *p = json_pack("{s:s, s:s}", "level", level, "logger", "brig");
                json_object_set_new(p, "data", rpc_string_lossy(text, strlen(text)));
                mcp_send(m, rpc_notification("notifications/message", p));
        }
        free(text);
}

/* ---- the sandbox ------------------------------------------------------- */

int mcp_sandbox(struct mcp *m, brig_error **err)
{
        if (m->sb)
                return 0;
        brig_sandbox_opts o = {
                .size = sizeof o,
                /* the audit resource; owned, not ephemeral: restore stops
                 * and starts it, and only our end (--keep aside) removes it */
                .flags = BRIG_SANDBOX_AUDIT | (m->keep ? 0 : BRIG_SANDBOX_OWNED),
                .name = m->name,
                .workspace_mode = m->overlay ? BRIG_WORKSPACE_OVERLAY : BRIG_WORKSPACE_BIND,
        };
        int r = brig_sandbox_new(m->policy, &o, &m->sb, err);
        if (r < 0)
                return r;
        json_t *row = cli_sandbox_row(m->name);
        const char *ws = json_string_value(json_object_get(row, "workspace"));
        if (ws) {
                free(m->workspace);
                m->workspace = strdup(ws);
        }
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(row, "warnings"), i, w)
                mcp_log(m, "warning", "%s", json_string_value(w));
        json_decref(row);
        mcp_log(m, "info", "sandbox '%s' is running (workspace %s%s)%s", m->name, m->workspace,
                m->overlay ? ", overlay" : "", m->keep ? "; it stays when the session ends (--keep)" : "");
        return 0;
}

static void session_end(struct mcp *m)
{
        brig_error *err = NULL;
        if (m->sb && brig_sandbox_close(m->sb, &err) < 0) {
                mcp_log(m, "warning", "%s", err->msg);
                brig_error_free(&err);
        }
        /* only what this session made: a sandbox already called so (a
         * user's mcp-PID, a reused pid) is someone else's */
        bool made = m->sb != NULL;
        m->sb = NULL;
        if (!m->keep && made) {
                int r = brig_sandbox_remove(m->name, &err);
                if (r < 0 && r != -ENOENT)
                        cli_say("brig mcp: remove sandbox '%s': %s\n", m->name, err->msg);
                brig_error_free(&err);
        }
}

/* ---- resources --------------------------------------------------------- */

static json_t *resource(const char *uri, const char *name, const char *title, const char *desc, const char *mime)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri, "name", name, "title", title, "description",
                         desc, "mimeType", mime);
}

static json_t *resources_list(struct mcp *m)
{
        json_t *list = json_array();
        json_array_append_new(list, resource("brig://policy", "policy", "The sandbox's policy",
                                             "The effective policy of this session's sandbox, as brig policy show "
                                             "prints it (the user's command line; the model cannot change it)",
                                             "application/json"));
        json_array_append_new(list, resource("brig://audit", "audit", "Audit stream",
                                             "Every refused or logged system call and network attempt of the "
                                             "sandbox, JSON lines (docs/audit.md)",
                                             "application/x-ndjson"));
        size_t i;
        json_t *r;
        json_array_foreach(m->reports, i, r) {
                char uri[64], name[64], title[300];
                json_int_t n = json_integer_value(json_object_get(r, "n"));
                snprintf(uri, sizeof uri, "brig://reports/%lld", (long long)n);
                snprintf(name, sizeof name, "report-%lld", (long long)n);
                snprintf(title, sizeof title, "Run report %lld: %.200s", (long long)n,
                         json_string_value(json_object_get(r, "command")) ?: "");
                json_array_append_new(list, resource(uri, name, title,
                                                     "How one run_command ended: exit code, reason, what brig "
                                                     "refused (docs/report.md)", "application/json"));
        }
        return json_pack("{s:o}", "resources", list);
}

static char *read_all_fd(int fd, size_t cap, size_t *len)
{
        size_t n = 0, size = 65536;
        char *buf = malloc(size);
        while (buf) {
                if (n == size) {
                        char *b = size < cap ? realloc(buf, size * 2) : NULL;
                        if (!b)
                                break;
                        buf = b;
                        size *= 2;
                }
                ssize_t r = read(fd, buf + n, size - n);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                n += (size_t)r;
        }
        *len = n;
        return buf;
}

/* The audit stream: its last 4 MiB (a long session writes more; the rest
 * is in the state directory of a --keep sandbox). */
#define AUDIT_SHOWN (4u << 20)

static json_t *resources_read(struct mcp *m, json_t *params, int *code, char *why, size_t why_size)
{
        const char *uri = json_string_value(json_object_get(params, "uri"));
        if (!uri) {
                *code = RPC_INVALID_PARAMS;
                snprintf(why, why_size, "invalid params: resources/read takes {\"uri\": STRING}");
                return NULL;
        }
        char *text = NULL;
        const char *mime = "application/json";
        if (strcmp(uri, "brig://policy") == 0) {
                text = json_dumps(m->policy_json, JSON_INDENT(2) | JSON_SORT_KEYS);
        } else if (strcmp(uri, "brig://audit") == 0) {
                mime = "application/x-ndjson";
                brig_error *err = NULL;
                int fd = m->sb ? brig_sandbox_audit_fd(m->sb, &err) : -ENOENT;
                brig_error_free(&err);
                size_t n = 0;
                if (fd >= 0) {
                        off_t end = lseek(fd, 0, SEEK_END);
                        off_t from = end > (off_t)AUDIT_SHOWN ? end - (off_t)AUDIT_SHOWN : 0;
                        lseek(fd, from, SEEK_SET);
                        text = read_all_fd(fd, AUDIT_SHOWN, &n);
                        close(fd);
                }
                if (text) {
                        json_t *s = rpc_string_lossy(text, n);
                        free(text);
                        text = strdup(json_string_value(s));
                        json_decref(s);
                } else {
                        text = strdup("");
                }
        } else if (strncmp(uri, "brig://reports/", 15) == 0) {
                char *end;
                long long want = strtoll(uri + 15, &end, 10);
                size_t i;
                json_t *r;
                json_array_foreach(m->reports, i, r)
                        if (!*end && end != uri + 15 && json_integer_value(json_object_get(r, "n")) == want)
                                text = json_dumps(json_object_get(r, "report"), JSON_INDENT(2) | JSON_SORT_KEYS);
        }
        if (!text) {
                *code = RPC_RESOURCE_NOT_FOUND;
                snprintf(why, why_size, "resource not found: '%.100s' (resources/list names what there is)", uri);
                return NULL;
        }
        json_t *c = json_pack("{s:s, s:s}", "uri", uri, "mimeType", mime);
        json_object_set_new(c, "text", json_string(text) ?: json_string(""));
        free(text);
        return json_pack("{s:[o]}", "contents", c);
}

/* ---- requests ---------------------------------------------------------- */

static json_t *initialize(struct mcp *m, json_t *params, int *code, char *why, size_t why_size)
{
        const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
        json_t *caps = json_object_get(params, "capabilities");
        if (!asked || (caps && !json_is_object(caps))) {
                *code = RPC_INVALID_PARAMS;
                snprintf(why, why_size, "invalid params: initialize takes {\"protocolVersion\": STRING, "
                                        "\"capabilities\": OBJECT, \"clientInfo\": OBJECT}");
                return NULL;
        }
        if (m->initialized) {
                *code = RPC_INVALID_REQUEST;
                snprintf(why, why_size, "invalid request: the session is initialized already");
                return NULL;
        }
        /* The revision the client asks for when it is one of ours, else
         * our latest: the client then decides whether it can go on. */
        const char *version = protocol_versions[0];
        for (int i = 0; protocol_versions[i]; i++)
                if (strcmp(asked, protocol_versions[i]) == 0)
                        version = protocol_versions[i];
        snprintf(m->version, sizeof m->version, "%s", version);
        m->client_elicitation = json_object_get(caps, "elicitation") != NULL;
        m->initialized = true;
        const char *instructions =
                "Every tool runs inside one brig sandbox made for this session from the user's policy: "
                "commands, files and network reach only what that policy grants, and nothing you send can "
                "widen it. run_command's result says why a command ended (timeout, memory limit, refused "
                "connection) and what would allow it; only the user can change the policy. network_status "
                "shows what is allowed.";
        return json_pack("{s:s, s:{s:{s:b}, s:{s:b, s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
                         "capabilities", "tools", "listChanged", 0, "resources", "listChanged", 1, "subscribe", 0,
                         "logging", "serverInfo", "name", "brig", "title", "brig sandbox", "version", brig_version(),
                         "instructions", instructions);
}

static json_t *dispatch(struct mcp *m, const char *method, json_t *params, int *code, char *why, size_t why_size)
{
        if (strcmp(method, "initialize") == 0)
                return initialize(m, params, code, why, why_size);
        if (strcmp(method, "ping") == 0)
                return json_object();
        if (!m->initialized) {
                *code = RPC_INVALID_REQUEST;
                snprintf(why, why_size, "invalid request: '%.60s' before initialize", method);
                return NULL;
        }
        if (strcmp(method, "tools/list") == 0)
                return json_pack("{s:o}", "tools", mcp_tools_list());
        if (strcmp(method, "tools/call") == 0) {
                const char *name = json_string_value(json_object_get(params, "name"));
                json_t *args = json_object_get(params, "arguments");
                if (!name || (args && !json_is_object(args))) {
                        *code = RPC_INVALID_PARAMS;
                        snprintf(why, why_size, "invalid params: tools/call takes {\"name\": STRING, "
                                                "\"arguments\": OBJECT}");
                        return NULL;
                }
                return mcp_tools_call(m, name, args, code, why, why_size);
        }
        if (strcmp(method, "resources/list") == 0)
                return resources_list(m);
        if (strcmp(method, "resources/templates/list") == 0)
                return json_pack("{s:[]}", "resourceTemplates");
        if (strcmp(method, "resources/read") == 0)
                return resources_read(m, params, code, why, why_size);
        if (strcmp(method, "logging/setLevel") == 0) {
                json_t *asked = json_object_get(params, "level");
                int level = rpc_has_nul(asked) ? -1 : level_of(json_string_value(asked));
                if (level < 0) {
                        *code = RPC_INVALID_PARAMS;
                        snprintf(why, why_size, "invalid params: level is one of debug, info, notice, warning, "
                                                "error, critical, alert, emergency");
                        return NULL;
                }
                m->log_level = level;
                return json_object();
        }
        *code = RPC_METHOD_NOT_FOUND;
        snprintf(why, why_size, "method not found: '%.100s'", method);
        return NULL;
}

/* Was this request cancelled while it waited? Then forgotten: true once. */
static bool cancelled_before_it_ran(struct mcp *m, const json_t *id)
{
        size_t i;
        json_t *v;
        json_array_foreach(m->cancelled_ids, i, v)
                if (json_equal(v, id)) {
                        json_array_remove(m->cancelled_ids, i);
                        return true;
                }
        return false;
}

static void handle_line(struct mcp *m, const char *line, size_t len)
{
        struct rpc_msg msg;
        rpc_parse(line, len, &msg);
        switch (msg.kind) {
        case RPC_INVALID:
                mcp_send(m, rpc_error(msg.id, msg.code, msg.why, NULL));
                break;
        case RPC_RESPONSE:
                break;  /* brig asks the client nothing yet */
        case RPC_NOTIFICATION:
                /* notifications/initialized, cancelled, roots/list_changed:
                 * nothing to do; a notification is never answered. */
                break;
        case RPC_REQUEST: {
                if (cancelled_before_it_ran(m, msg.id))
                        break;  /* nothing run, nothing answered */
                int code = RPC_INTERNAL_ERROR;
                char why[512] = "internal error";
                m->current_id = msg.id;
                m->cancelled = false;
                json_t *res = dispatch(m, msg.method, msg.params ? msg.params : NULL, &code, why, sizeof why);
                m->current_id = NULL;
                /* A cancelled request gets no answer (MCP: the client has
                 * stopped waiting for it). */
                if (m->cancelled)
                        json_decref(res);
                else
                        mcp_send(m, res ? rpc_result(msg.id, res) : rpc_error(msg.id, code, why, NULL));
                break;
        }
        }
        rpc_msg_clear(&msg);
}

/* What a queued line holds of our memory: its bytes, its record and
 * malloc's own (an empty line is not free: a flood of them grew brig mcp
 * without bound). */
#define LINE_OVERHEAD 128
static size_t line_cost(size_t len)
{
        return sizeof(struct mcp_line) + LINE_OVERHEAD + (len == SIZE_MAX ? 0 : len);
}

static void queue_line(struct mcp *m, const char *data, size_t len)
{
        struct mcp_line *l = malloc(sizeof *l + (len == SIZE_MAX ? 0 : len));
        if (!l) {
                cli_say("brig mcp: out of memory: a message dropped\n");
                return;
        }
        l->next = NULL;
        l->len = len;
        if (len != SIZE_MAX)
                memcpy(l->data, data, len);
        *m->pending_tail = l;
        m->pending_tail = &l->next;
        m->pending_bytes += line_cost(len);
}

/* Is the line a notifications/cancelled? Then it is taken here, not
 * queued: the request being handled is stopped, one still queued is
 * remembered and skipped when its turn comes (MCP: a cancelled request
 * gets no answer), one that is unknown or done is ignored. */
static bool take_cancel(struct mcp *m, const char *line, size_t len)
{
        if (!memmem(line, len, "notifications/cancelled", 23))
                return false;
        struct rpc_msg msg;
        rpc_parse(line, len, &msg);
        json_t *id = json_object_get(msg.params, "requestId");
        bool cancel = msg.kind == RPC_NOTIFICATION && msg.method &&
                      strcmp(msg.method, "notifications/cancelled") == 0 && (json_is_string(id) || json_is_integer(id));
        if (cancel && m->current_id && json_equal(id, m->current_id)) {
                m->cancelled = true;
        } else if (cancel && m->cancelled_ids) {
                /* ids are never reused in a session (MCP): one for a
                 * request already answered only waits to be pushed out */
                if (json_array_size(m->cancelled_ids) >= MCP_CANCELS_KEPT)
                        json_array_remove(m->cancelled_ids, 0);
                json_array_append(m->cancelled_ids, id);
        }
        rpc_msg_clear(&msg);
        return cancel;
}


void mcp_read_input(struct mcp *m)
{
        char buf[65536];
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (n <= 0 || rpc_reader_feed(&m->rd, buf, (size_t)n) < 0) {
                if (n > 0)
                        cli_say("brig mcp: out of memory\n");
                m->eof = true;
                return;
        }
        const char *line;
        size_t len;
        enum rpc_take t;
        while ((t = rpc_reader_take(&m->rd, &line, &len)) != RPC_TAKE_NONE) {
                if (t != RPC_TAKE_LINE || !take_cancel(m, line, len))
                        queue_line(m, line, t == RPC_TAKE_TOO_LONG ? SIZE_MAX : len);
        }
}

/* ---- the command ------------------------------------------------------- */

static bool valid_name(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n > 64 || strchr("_.-", s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", s[i]))
                        return false;
        return true;
}

/* --overlay and --keep NAME are ours; the rest are brig run's policy options. */
static int take_own_options(int *argc, char **argv, struct mcp *m)
{
        int out = 1;
        for (int i = 1; i < *argc; i++) {
                if (strcmp(argv[i], "--overlay") == 0) {
                        m->overlay = true;
                } else if (strcmp(argv[i], "--keep") == 0 || strncmp(argv[i], "--keep=", 7) == 0) {
                        const char *v = argv[i][6] == '=' ? argv[i] + 7 : i + 1 < *argc ? argv[++i] : NULL;
                        if (!v || !valid_name(v)) {
                                cli_say("brig mcp: --keep '%s': a sandbox name is letters, digits, _ . - "
                                        "(up to 64, not starting with _ . -)\n", v ? v : "");
                                return BRIG_EXIT_SETUP;
                        }
                        m->keep = v;
                } else if (strcmp(argv[i], "--") == 0) {
                        cli_say("brig mcp: no command: the model runs commands with the run_command tool\n");
                        return BRIG_EXIT_SETUP;
                } else {
                        argv[out++] = argv[i];
                }
        }
        *argc = out;
        argv[out] = NULL;
        return 0;
}

static uint64_t policy_timeout(json_t *policy)
{
        const char *t = json_string_value(json_object_get(json_object_get(policy, "limits"), "timeout"));
        uint64_t ms = 0;
        brig_error *err = NULL;
        if (t && brig_parse_duration(t, &ms, &err) < 0)
                ms = 0;
        brig_error_free(&err);
        return ms;
}

static int setup(struct mcp *m, int argc, char **argv)
{
        int code = take_own_options(&argc, argv, m);
        if (code)
                return code;
        int first;
        code = cli_policy_from_args("brig mcp", argc, argv, &m->policy, &first);
        if (code)
                return code;
        if (first < argc) {
                cli_say("brig mcp: unexpected argument '%s' (see brig mcp --help)\n", argv[first]);
                return BRIG_EXIT_SETUP;
        }
        brig_error *err = NULL;
        char *text = brig_policy_to_json(m->policy, &err);
        m->policy_json = text ? json_loads(text, 0, NULL) : NULL;
        free(text);
        if (!m->policy_json)
                return err ? cli_fail(err) : BRIG_EXIT_SETUP;
        m->timeout_cap_ms = policy_timeout(m->policy_json);
        if (m->keep) {
                snprintf(m->name, sizeof m->name, "%s", m->keep);
                /* Made from this command line, never an existing one whose
                 * policy may be wider than what the user gave here. */
                json_t *row = cli_sandbox_row(m->name);
                if (row) {
                        json_decref(row);
                        cli_say("brig mcp: --keep %s: a sandbox '%s' exists already; brig mcp makes its "
                                "sandbox from its own command line (brig rm %s first, or another name)\n",
                                m->name, m->name, m->name);
                        return BRIG_EXIT_SETUP;
                }
        } else {
                snprintf(m->name, sizeof m->name, "mcp-%d", getpid());
        }
        char cwd[4096];
        m->workspace = strdup(getcwd(cwd, sizeof cwd) ? cwd : "/");
        m->reports = json_array();
        m->refusals = json_array();
        m->log_level = level_of("info");
        return 0;
}

int cmd_mcp(int argc, char **argv)
{
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                fputs(mcp_usage, stdout);
                return 0;
        }
        struct mcp m = { .sig_fd = -1 };
        int code = setup(&m, argc, argv);
        if (code) {
                code = code == 1 ? 0 : code;
                goto out;
        }
        /* The end of the session, by signal, in the poll loop: blocked
         * here and read from a signalfd (the supervisor starts with an
         * empty mask whatever ours is). */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigprocmask(SIG_BLOCK, &set, NULL);
        m.sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (m.sig_fd < 0) {
                cli_say("brig mcp: cannot watch for the session's end: %s\n", strerror(errno));
                code = BRIG_EXIT_SETUP;
                goto out;
        }
        m.pending_tail = &m.pending;
        m.cancelled_ids = json_array();
        while (!m.stop) {
                struct mcp_line *l = m.pending;
                if (l) {
                        if (!(m.pending = l->next))
                                m.pending_tail = &m.pending;
                        m.pending_bytes -= line_cost(l->len);
                        if (l->len == SIZE_MAX)
                                mcp_send(&m, rpc_error(NULL, RPC_INVALID_REQUEST,
                                                       "invalid request: a message longer than 16 MiB", NULL));
                        else if (l->len)
                                handle_line(&m, l->data, l->len);
                        free(l);
                        continue;
                }
                if (m.eof)
                        break;  /* the client closed our stdin: the session is over */
                struct pollfd pfd[2] = { { .fd = STDIN_FILENO, .events = POLLIN }, { .fd = m.sig_fd, .events = POLLIN } };
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[1].revents)
                        break;
                if (pfd[0].revents)
                        mcp_read_input(&m);
        }
        rpc_reader_free(&m.rd);
        while (m.pending) {
                struct mcp_line *l = m.pending;
                m.pending = l->next;
                free(l);
        }
        session_end(&m);
        code = 0;
out:
        if (m.sig_fd >= 0)
                close(m.sig_fd);
        brig_policy_free(m.policy);
        json_decref(m.policy_json);
        json_decref(m.cancelled_ids);
        json_decref(m.reports);
        json_decref(m.refusals);
        free(m.workspace);
        return code;
}
