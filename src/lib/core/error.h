/* error.h — brig_error, filled and extended (src/lib/core/error.c). */
#ifndef BRIG_CORE_ERROR_H
#define BRIG_CORE_ERROR_H

#include "brig.h"
#include "core/util.h"

/* Fill *err (if err and *err is empty) and return -errnum, or -EIO when
 * errnum is 0, so the result is always negative. The message gets
 * ": strerror" appended when errnum is non-zero. */
BRIG_INTERNAL int brig_err(brig_error **err, int errnum, const char *fmt, ...) BRIG_PRINTF(3, 4);
/* Same, with an explicit exit code (126/127 for exec failures). */
BRIG_INTERNAL int brig_err_code(brig_error **err, int exit_code, int errnum, const char *fmt, ...)
        BRIG_PRINTF(4, 5);
/* Put "context: " in front of an existing message; returns -errnum. */
BRIG_INTERNAL int brig_err_prefix(brig_error **err, const char *fmt, ...) BRIG_PRINTF(2, 3);
BRIG_INTERNAL char *brig_strdup_printf(const char *fmt, ...) BRIG_PRINTF(1, 2);

#endif
