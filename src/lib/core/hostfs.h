/* hostfs.h — host paths a sandbox can reach (src/lib/core/hostfs.c): the
 * outputs brig writes, and tree removal. */
#ifndef BRIG_CORE_HOSTFS_H
#define BRIG_CORE_HOSTFS_H

#include "core/error.h"

#include <signal.h>
#include <sys/types.h>

/* Open a file brig writes during or after the run (report, audit stream),
 * following no symlink in any component of `path`; `what` names the
 * option in messages. A fd, or -errno with *err filled. */
BRIG_INTERNAL int output_open(const char *path, const char *what, bool append, brig_error **err);
/* Open a regular file brig reads for a sandbox (brig cp HOST NAME:/PATH),
 * by the same rules: no symlink in any component, nothing of brig's state
 * root. A fd, or -errno with *err filled. */
BRIG_INTERNAL int input_open(const char *path, const char *what, brig_error **err);
/* A descriptor the caller gave for an output (--json-report-fd N): is it
 * open for writing? 0, or -errno with *err naming `what` and the fix. */
BRIG_INTERNAL int output_fd_check(int fd, const char *what, brig_error **err);
/* Is `fd` the same pipe, socket or regular file as `other` (another
 * number for it: 3>&1)? Its kind ("pipe", ...), or NULL (not the same, or
 * a terminal or /dev/null, which no one parses). */
BRIG_INTERNAL const char *output_same_stream(int fd, int other);
/* The supervisor's own close-on-exec copy of it (fd, or -errno). */
BRIG_INTERNAL int output_fd(int fd, const char *what, brig_error **err);
/* Write all of buf to such an output: 0 or -errno (EPIPE, never SIGPIPE). */
/* SIGPIPE held in this thread around writes to a caller's descriptor, and
 * the one they raised taken back: EPIPE instead of brig killed mid-cleanup. */
BRIG_INTERNAL void sigpipe_hold(sigset_t *saved);
BRIG_INTERNAL void sigpipe_release(const sigset_t *saved);
BRIG_INTERNAL int output_write(int fd, const void *buf, size_t len);
/* One write of at most PIPE_BUF bytes that does not block once poll said
 * POLLOUT (a pipe takes it whole; a socket MSG_DONTWAIT): the count, or
 * -errno (-EAGAIN). No SIGPIPE from a socket; a pipe's is the caller's. */
BRIG_INTERNAL ssize_t output_write_some(int fd, const void *buf, size_t len);
/* output_write for what brig writes after the run (the report): it gives
 * up with -ETIMEDOUT when the reader takes nothing for idle_ms, so a
 * caller that never reads its pipe does not keep brig from ending. */
BRIG_INTERNAL int output_write_bounded(int fd, const void *buf, size_t len, int idle_ms);
/* Its fallback where openat2 is missing: fd or -errno (-ELOOP: a symlink). */
BRIG_INTERNAL int output_open_walk(const char *path, int flags, mode_t mode);
/* Remove `name` below `parent` and everything under it, however deep or
 * wide, following no symlink and entering no other mount: 0 or -errno
 * (-EXDEV a mount below, -ESTALE the tree moved during the walk). */
BRIG_INTERNAL int tree_remove_at(int parent, const char *name);

#endif
