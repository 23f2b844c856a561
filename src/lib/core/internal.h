/* internal.h — every header of libbrig's core and the child's controls at
 * once. Nothing in the tree includes it any more: each file includes the
 * headers it uses (core/util.h, core/error.h, core/plan.h, core/model.h,
 * ... — src/lib/README.md), so that a control's includes say what it
 * depends on and the child's side cannot read the policy (core/model.h).
 * Kept for branches written against it; new code includes what it uses. */
#ifndef BRIG_INTERNAL_H
#define BRIG_INTERNAL_H

#include "core/util.h"
#include "core/error.h"
#include "core/hostfs.h"
#include "core/plan.h"
#include "core/model.h"
#include "core/host.h"
#include "core/syscalls.h"
#include "core/sync.h"
#include "core/sequence.h"
#include "core/supervisor.h"
#include "core/report.h"
#include "controls/mountinfo.h"
#include "controls/userns.h"
#include "controls/mounts.h"
#include "controls/rlimit.h"
#include "controls/caps.h"
#include "controls/terminal.h"
#include "net/netns.h"

#include <signal.h>
#include <stdarg.h>

#endif
