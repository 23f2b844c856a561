/* error.c — brig_error: an errno plus a message that callers extend. */
#define _GNU_SOURCE
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

char *brig_strdup_printf(const char *fmt, ...)
{
        va_list ap;
        char *s = NULL;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

static int vfill(brig_error **err, int exit_code, int errnum, const char *fmt, va_list ap)
{
        int ret = errnum > 0 ? -errnum : -EIO;
        if (!err || *err)  /* keep the first error: it is the cause */
                return ret;
        brig_error *e = calloc(1, sizeof *e);
        if (!e)
                return ret;
        char *text = NULL;
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        if (text && errnum > 0) {
                char *full = brig_strdup_printf("%s: %s", text, strerror(errnum));
                free(text);
                text = full;
        }
        e->exit_code = exit_code;
        e->errnum = errnum;
        e->msg = text ? text : strdup("out of memory while reporting an error");
        *err = e;
        return ret;
}

int brig_err(brig_error **err, int errnum, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = vfill(err, BRIG_EXIT_SETUP, errnum, fmt, ap);
        va_end(ap);
        return r;
}

int brig_err_code(brig_error **err, int exit_code, int errnum, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = vfill(err, exit_code, errnum, fmt, ap);
        va_end(ap);
        return r;
}

int brig_err_prefix(brig_error **err, const char *fmt, ...)
{
        if (!err || !*err)
                return -EIO;
        int ret = (*err)->errnum > 0 ? -(*err)->errnum : -EIO;
        va_list ap;
        char *ctx = NULL;
        va_start(ap, fmt);
        if (vasprintf(&ctx, fmt, ap) < 0)
                ctx = NULL;
        va_end(ap);
        if (!ctx)
                return ret;
        char *full = brig_strdup_printf("%s: %s", ctx, (*err)->msg);
        free(ctx);
        if (full) {
                free((*err)->msg);
                (*err)->msg = full;
        }
        return ret;
}

void brig_error_free(brig_error **err)
{
        if (!err || !*err)
                return;
        free((*err)->msg);
        free(*err);
        *err = NULL;
}

/* ---- the wire form (error.h) ------------------------------------------- */

void wire_error_encode(struct wire_error *w, const brig_error *err, const char *where)
{
        memset(w, 0, sizeof *w);
        w->magic = WIRE_ERROR_MAGIC;
        w->exit_code = err && err->exit_code > 0 && err->exit_code <= 255 ? err->exit_code : BRIG_EXIT_SETUP;
        w->errnum = err && err->errnum > 0 && err->errnum <= WIRE_ERRNO_MAX ? err->errnum : 0;
        snprintf(w->where, sizeof w->where, "%s", where ? where : "");
        snprintf(w->text, sizeof w->text, "%s", err && err->msg && err->msg[0] ? err->msg : "unknown error");
}

/* A place is a plain word or two: letters, digits and " _-.:/'" — what
 * brig's own steps and program names are made of. */
static bool place_ok(const char *s)
{
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      strchr(" _-.:/'", *s)))
                        return false;
        return true;
}

size_t text_control_len(const char *s)
{
        const unsigned char *c = (const unsigned char *)s;
        if (c[0] < 0x20 || c[0] == 0x7f)
                return 1;
        if ((c[0] == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) || (c[0] == 0xd8 && c[1] == 0x9c))
                return 2;
        if (c[0] == 0xe2 && c[1] == 0x80 && (c[2] == 0x8e || c[2] == 0x8f || (c[2] >= 0xaa && c[2] <= 0xae)))
                return 3;
        if (c[0] == 0xe2 && c[1] == 0x81 && c[2] >= 0xa6 && c[2] <= 0xa9)
                return 3;
        return 0;
}

char *text_escaped(const char *s, bool multiline)
{
        size_t n = strlen(s);
        char *out = malloc(4 * n + 1), *o = out;
        if (!out)
                return NULL;
        for (const char *c = s; *c;) {
                size_t k = *c == '\n' && multiline ? 0 : text_control_len(c);
                if (!k)
                        *o++ = *c++;
                for (; k; k--)
                        o += sprintf(o, "\\x%02x", (unsigned char)*c++);
        }
        *o = '\0';
        return out;
}

int wire_error_decode(const void *buf, size_t len, int *exit_code, brig_error **err)
{
        struct wire_error w;
        if (exit_code)
                *exit_code = BRIG_EXIT_SETUP;
        if (!buf || len != sizeof w)
                return brig_err(err, EPROTO, "a malformed error message (%zu bytes, not %zu) from the other side",
                                len, sizeof w);
        memcpy(&w, buf, sizeof w);
        if (w.magic != WIRE_ERROR_MAGIC)
                return brig_err(err, EPROTO, "a malformed error message (no magic) from the other side");
        if (w.errnum < 0 || w.errnum > WIRE_ERRNO_MAX)
                return brig_err(err, EPROTO, "a malformed error message (errno %d) from the other side", (int)w.errnum);
        if (!memchr(w.text, '\0', sizeof w.text) || !memchr(w.where, '\0', sizeof w.where))
                return brig_err(err, EPROTO, "a malformed error message (text without its end) from the other side");
        if (!place_ok(w.where))
                return brig_err(err, EPROTO, "a malformed error message (a place that is no plain word) from the "
                                             "other side");
        int code = w.exit_code > 0 && w.exit_code <= 255 ? w.exit_code : BRIG_EXIT_SETUP;
        if (exit_code)
                *exit_code = code;
        /* the same bytes the CLI shows of an error, for every front end */
        _cleanup_free_ char *text = text_escaped(w.text[0] ? w.text : "unknown error (an empty message)", true);
        bool filled = err && !*err;  /* an earlier error is the cause: left as it is */
        int r = brig_err_code(err, code, 0, w.where[0] ? "%s: %s" : "%s%s", w.where,
                              text ? text : "out of memory while reporting an error");
        if (filled && *err)
                (*err)->errnum = w.errnum;
        return w.errnum > 0 ? -w.errnum : r;
}
