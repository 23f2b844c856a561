/* terminal.h — how the command meets the caller's terminal (terminal.c). */
#ifndef BRIG_CONTROLS_TERMINAL_H
#define BRIG_CONTROLS_TERMINAL_H

#include "core/error.h"

struct terminal;
struct pollfd;
#define TERMINAL_POLL_MAX 3
/* Decide how the command meets the caller's terminal: a pty, or the
 * caller's terminals among stdio (NULL: 0, 1, 2) behind pipes, both
 * relayed through the output filter unless passthrough; *ret stays NULL
 * when nothing stands in between. */
BRIG_INTERNAL int terminal_prepare(enum brig_tty_mode mode, bool passthrough, const int stdio[3],
                                   struct terminal **ret, brig_error **err);
BRIG_INTERNAL bool terminal_is_pty(const struct terminal *t);
/* Without a pty: replace the guarded ones among fds with the command's ends. */
BRIG_INTERNAL void terminal_stdio(const struct terminal *t, int fds[3]);
/* The command's ends were passed on: ours go. */
BRIG_INTERNAL void terminal_handed_over(struct terminal *t);
/* In the child: the command's ends become 0, 1, 2; the relay's ends go. */
BRIG_INTERNAL int terminal_child_stdio(struct terminal *t, brig_error **err);
/* Inside: a pty in the sandbox's own devpts; the master goes to the supervisor. */
BRIG_INTERNAL int terminal_create_inside(int *master, int *slave, brig_error **err);
/* Supervisor: start relaying through the master the sandbox sent. */
BRIG_INTERNAL void terminal_attach(struct terminal *t, int master);
BRIG_INTERNAL void terminal_on_winch(struct terminal *t);
/* The relay in a poll loop: fill up to TERMINAL_POLL_MAX entries, then
 * hand them back after poll(); drain writes out what is left when the
 * command is gone. */
BRIG_INTERNAL int terminal_poll_fds(struct terminal *t, struct pollfd *p);
BRIG_INTERNAL void terminal_dispatch(struct terminal *t, const struct pollfd *p, int n);
BRIG_INTERNAL void terminal_drain(struct terminal *t);
BRIG_INTERNAL void terminal_close(struct terminal *t);

#endif
