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

/* How many bytes at c (a NUL-terminated string) a terminal or a reader
 * of a log would take for a control, to be shown as \xNN each: C0 and
 * DEL (1), C1 in UTF-8 (2: 0xC2 0x80..0x9F; xterm takes U+009B as CSI),
 * and Unicode's bidirectional controls (U+061C, U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069: they reorder what is seen of the rest
 * of the line, so that a path or a reason reads as something else). 0:
 * c[0] prints as it is. Every printer of text a sandbox chose uses it. */
BRIG_INTERNAL size_t text_control_len(const char *c);
/* s with each control (above) as \xNN, newlines too unless multiline:
 * allocated, NULL when out of memory. What the CLI prints of text a
 * sandbox chose, built whole so that it leaves in one write. */
BRIG_INTERNAL char *text_escaped(const char *s, bool multiline);

/* ---- an error crossing a process boundary ------------------------------ */

/* The one form in which a brig_error leaves its process: the child's and
 * pid 1's failures to the supervisor (sync.h), the control socket's
 * CTL_ERROR answers (persist/control.h), the supervisor program's word on
 * its ready pipe (control.c). Fixed size, so it fits any carrier whole.
 * The sending side may be the sandbox's: the decoder takes nothing on
 * trust. */
#define WIRE_ERROR_MAGIC 0x62657231u  /* "ber1" */
#define WIRE_ERROR_WHERE 64           /* bytes, with the NUL */
#define WIRE_ERROR_TEXT 900           /* bytes, with the NUL */
#define WIRE_ERRNO_MAX 4095           /* the kernel's errno range */
struct wire_error {
        uint32_t magic;
        int32_t exit_code;            /* 1..255 */
        int32_t errnum;               /* 0 or 1..WIRE_ERRNO_MAX */
        char where[WIRE_ERROR_WHERE]; /* optional: what it is located at (a step, a program) */
        char text[WIRE_ERROR_TEXT];   /* the message, cut to fit */
};
/* Fill w from err (NULL: "unknown error"), located at `where` (NULL:
 * none). Every byte of w is written: nothing of the sender's memory goes
 * along. */
BRIG_INTERNAL void wire_error_encode(struct wire_error *w, const brig_error *err, const char *where);
/* The error `len` bytes at buf say, into *err (as brig_err_code would),
 * and its exit code into *exit_code (may be NULL): -errnum, -EIO when it
 * names none, -EPROTO when the bytes are no error of this form (wrong
 * size or magic, an errno out of range, text or place not terminated, a
 * place that is not a plain word). An exit code outside 1..255 becomes
 * 125: an error never reads as success. Control characters in the text
 * (but new lines) and the place are escaped as \xNN, as the CLI prints
 * them: nothing from the other side acts on a terminal. */
BRIG_INTERNAL int wire_error_decode(const void *buf, size_t len, int *exit_code, brig_error **err);

#endif
