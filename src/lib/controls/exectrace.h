/* exectrace.h — exec events: the supervisor's record of every exec the
 * filter notifies, and of how each process ended (exectrace.c). */
#ifndef BRIG_EXECTRACE_H
#define BRIG_EXECTRACE_H

#include "core/plan.h"

struct audit;
struct seccomp_notif;
struct exectrace;

/* Pidfds of the processes watched go into epfd (the guard's), beside its
 * listeners; exectrace_owns tells them apart. */
BRIG_INTERNAL struct exectrace *exectrace_new(struct audit *audit, int epfd);
/* One notified execve/execveat: recorded; the caller answers "continue". */
BRIG_INTERNAL void exectrace_seen(struct exectrace *x, int listener, const struct seccomp_notif *req);
BRIG_INTERNAL bool exectrace_owns(const struct exectrace *x, int fd);
/* That pidfd is readable: its process ended (an exit event). */
BRIG_INTERNAL void exectrace_on_exit(struct exectrace *x, int fd);
/* The run is over: an exit event for each process still watched. */
BRIG_INTERNAL void exectrace_finish(struct exectrace *x);
/* Execs recorded whose exit could not be watched (no pidfd, too many). */
BRIG_INTERNAL uint64_t exectrace_untracked(const struct exectrace *x);
BRIG_INTERNAL void exectrace_free(struct exectrace *x);

#endif
