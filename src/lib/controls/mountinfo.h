/* mountinfo.h — the mount table (src/lib/controls/mountinfo.c). */
#ifndef BRIG_CONTROLS_MOUNTINFO_H
#define BRIG_CONTROLS_MOUNTINFO_H

#include "core/util.h"

/* mountinfo.c: the mount table, and the other names a directory has in
 * it (a bind mount of /home at /srv/home, a filesystem mounted twice). */
struct mountinfo_entry {
        unsigned long id;  /* the mount's, as statx's STATX_MNT_ID gives it */
        dev_t dev;
        char *root;      /* the mounted directory, inside its filesystem */
        char *mnt;       /* where it is mounted */
};
struct mountinfo {
        struct mountinfo_entry *v;
        size_t n;
};
/* Host paths below HOST also show at REL ("" or a relative path) below
 * the directory they are another name of. */
struct path_alias {
        char *host;
        char *rel;
};
BRIG_INTERNAL int mountinfo_parse_line(const char *line, size_t len, struct mountinfo_entry *e);
BRIG_INTERNAL int mountinfo_add_line(struct mountinfo *mi, const char *line, size_t len);
/* The mount table: from listmount and statmount (Linux 6.8+), else (any
 * error of theirs) from /proc/self/mountinfo; the same entries in the
 * same order either way. */
BRIG_INTERNAL int mountinfo_load(struct mountinfo *mi);
BRIG_INTERNAL int mountinfo_load_listed(struct mountinfo *mi);
BRIG_INTERNAL int mountinfo_load_text(struct mountinfo *mi);
BRIG_INTERNAL void mountinfo_clear(struct mountinfo *mi);
BRIG_INTERNAL int mountinfo_aliases(const struct mountinfo *mi, const char *path, struct path_alias **out,
                                    size_t *n);
BRIG_INTERNAL void path_aliases_free(struct path_alias *v, size_t n);

#endif
