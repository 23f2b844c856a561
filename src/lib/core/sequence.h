/* sequence.h — the run sequence's steps: spawn (the supervisor's side),
 * child, pid 1 and the command (the sandbox's side). */
#ifndef BRIG_CORE_SEQUENCE_H
#define BRIG_CORE_SEQUENCE_H

#include "core/plan.h"

/* child.c, init.c */
BRIG_INTERNAL _Noreturn void child_main(struct run_plan *plan);
BRIG_INTERNAL _Noreturn void init_main(struct run_plan *plan, pid_t command_pid);
/* The command's side of the run, after fork from pid 1: session, fds, cwd,
 * rlimits, Landlock, seccomp, execve. Also used for each `brig exec`. */
BRIG_INTERNAL _Noreturn void command_exec(const struct run_plan *plan);
/* command_exec in two halves: everything up to the seccomp filter
 * (-errno, *err filled; *inherited: what a file operation counts toward
 * RLIMIT_DATA), and the rest (the memory limit where no cgroup holds it,
 * then a file operation or execve, whose failure goes to plan->sync_fd).
 * Apart for pid 1's pre-forked exec child (persist_init.c), which confines
 * itself before its request arrives. */
BRIG_INTERNAL int command_confine(const struct run_plan *plan, uint64_t *inherited, brig_error **err);
BRIG_INTERNAL _Noreturn void command_become(const struct run_plan *plan, uint64_t inherited);
/* fileops.c: a file operation (plan->argv) in the confined child, at the
 * point where command_exec would execve. */
BRIG_INTERNAL _Noreturn void fileop_main(const struct run_plan *plan);
BRIG_INTERNAL void init_hide_command_line(void);
BRIG_INTERNAL void init_detach_stdio(void);
/* persist_init.c: pid 1 of a persistent sandbox: forks one command per
 * exec request, through command_exec, and reports each one's status. */
BRIG_INTERNAL _Noreturn void persist_init_main(struct run_plan *plan);


struct control;
/* spawn.c: the run sequence; ctl non-NULL for a persistent sandbox. */
BRIG_INTERNAL int spawn_run(const brig_policy *p, char *const argv[], struct control *ctl, brig_result *result,
                            brig_error **err);

#endif
