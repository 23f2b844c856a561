/* cli.h — the brig command line: a thin layer over libbrig. */
#ifndef BRIG_CLI_H
#define BRIG_CLI_H

#include "brig.h"
#include "core/error.h"  /* text_escaped, for cli_say's callers */

#include <jansson.h>

#include <stdbool.h>
#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_log(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_policy(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_exec(int argc, char **argv);
/* brig run --pool NAME [EXEC OPTIONS] -- COMMAND: argv[1] is NAME, the options follow */
int cli_run_in_pool(int argc, char **argv, const char *pool);
int cmd_ls(int argc, char **argv);
/* files.c: brig cp, brig files */
int cmd_cp(int argc, char **argv);
int cmd_files(int argc, char **argv);
/* stop, rm, pause, resume (argv[0] names which) */
int cmd_simple(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_reset(int argc, char **argv);
/* snapshot, restore, fork (argv[0] names which) */
int cmd_snapshot(int argc, char **argv);
int cmd_pool(int argc, char **argv);
/* NAME's row of brig ls --json (json_decref it), or NULL (sandbox.c). */
json_t *cli_sandbox_row(const char *name);
/* src/mcp/server.c: brig mcp */
int cmd_mcp(int argc, char **argv);
/* brig serve: execs brig-serve (src/serve/) with the same arguments */
int cmd_serve(int argc, char **argv);
/* The policy that argv[1..first) and the environment asked for is the
 * defaults alone: no option before the command (or "--"), no BRIG_POLICY. */
bool cli_plain_policy(int argc, char **argv, int first);
int cli_policy_from_args(const char *cmd, int argc, char **argv, brig_policy **ret, int *rest);

/* The usage text of a command without an option parser of its own (ls,
 * stop, diff, snapshot, doctor...; main.c), or NULL. */
const char *cli_usage(const char *cmd);

/* Print "brig: MESSAGE" and return the exit code the error carries. */
int cli_fail(brig_error *err);

/* Write S with terminal control characters shown as \xNN (newlines kept
 * when MULTILINE): names a sandbox made (files, hosts) reach the caller's
 * terminal as text, never as escape sequences. For stdout; a line on
 * stderr goes whole through cli_say. */
void cli_put_safe(FILE *f, const char *s, bool multiline);

/* One line of brig's on stderr, formatted whole and written at once:
 * stderr is unbuffered, and printf writes an unbuffered stream in pieces
 * (glibc 2.37 on: 128 bytes; musl: 80), between which another writer to
 * the same stderr lands. Text a sandbox chose goes in through
 * text_escaped (core/error.h), as cli_put_safe shows it. */
void cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* After brig run or brig exec: the connections to unix sockets outside the
 * sandbox that were refused, and the flag that allows one (nothing if none). */
void cli_put_unix_refused(const brig_result *res);
/* After brig run: what brig refused during the run, one "brig: " line per
 * cause (res->refusals), or the unix socket count where that is all there
 * is; nothing with QUIET (--quiet). */
void cli_put_refusals(const brig_result *res, bool quiet);

#endif
