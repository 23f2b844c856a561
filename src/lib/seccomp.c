/* seccomp.c — TEMPORARY placeholder being replaced by the seccomp work
 * (issue 3); refuses rules so nothing pretends to be filtered. */
#define _GNU_SOURCE
#include "seccomp.h"

int seccomp_policy_add(struct seccomp_policy **sp, const char *name, const char *action, brig_error **err)
{
        (void)sp;
        (void)action;
        return brig_err(err, ENOSYS, "syscall rule '%s': seccomp rules are not implemented yet", name);
}

void seccomp_policy_free(struct seccomp_policy *sp)
{
        (void)sp;
}

int seccomp_apply(const struct run_plan *plan, brig_error **err)
{
        (void)plan;
        (void)err;
        return 0;
}
