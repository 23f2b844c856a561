/* overlay.c — --workspace-mode overlay: a copy-on-write layer over the
 * workspace. */
#define _GNU_SOURCE
#include "internal.h"
#include "sandbox.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int overlay_prepare(const brig_policy *p, const char *dir, brig_error **err)
{
        static const char *const sub[] = { "upper", "work" };
        for (size_t i = 0; i < ARRAY_SIZE(sub); i++) {
                _cleanup_free_ char *path = brig_strdup_printf("%s/%s", dir, sub[i]);
                if (!path || mkdir(path, 0700) < 0)
                        return brig_err(err, path ? errno : ENOMEM, "overlay: create '%s/%s'", dir, sub[i]);
        }
        return 0;
}
