/* report.h — the run report (report.c). */
#ifndef BRIG_CORE_REPORT_H
#define BRIG_CORE_REPORT_H

#include "core/plan.h"

#include <stddef.h>

struct audit;
struct egress;
struct refusals;

struct run_report {
        const struct run_plan *plan;
        const brig_result *result;
        const brig_error *error;
        const struct audit *audit;
        const struct egress *egress;
        const struct refusals *refusals;
};
BRIG_INTERNAL int report_write(int fd, const struct run_report *r, brig_error **err);
/* How long a report's reader may take nothing before brig gives up on it
 * (output_write_bounded; docs/report.md). */
#define REPORT_IDLE_MS 5000
/* A report's text (json_dumps; NULL: out of memory) and a new line to fd,
 * bounded, then freed; errors name `what` ("--json-report-fd 3"). */
BRIG_INTERNAL int report_text_write(int fd, char *text, const char *what, brig_error **err);
/* "--json-report-fd 3" or "--json-report PATH": the policy's report flag. */
BRIG_INTERNAL void report_what(const brig_policy *p, char *buf, size_t size);

#endif
