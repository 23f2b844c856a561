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
