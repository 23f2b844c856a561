/* fsutil.h — filesystem helpers that know nothing of brig's state
 * (fsutil.c): who can replace what a path names, and a file published
 * whole. Apart from hostfs.c so that the fuzz targets of the parsers
 * that use them (the directory cache, the library loader) link them
 * without the state root's code. */
#ifndef BRIG_CORE_FSUTIL_H
#define BRIG_CORE_FSUTIL_H

#include "core/util.h"

#include <stddef.h>
#include <sys/types.h>

/* Whether nobody but root and `owner` can change what `real` (a real
 * path: no links) names by changing a directory above it: each is root's
 * or owner's and writable by them alone, but for a sticky one (/tmp)
 * above an entry of root's or owner's, which nobody else may rename or
 * remove. `entry_uid` owns `real` itself. If not: false, and `where` is
 * the first directory that is not (system libraries: core/libload.c;
 * brig's state root: persist/state.c). */
BRIG_INTERNAL bool dirs_above_only(const char *real, uid_t owner, uid_t entry_uid, char *where, size_t n);

/* Link fd, a nameless file (O_TMPFILE) written whole, in as dir/name,
 * over a file there: readers see the old file, the new one or none, never
 * a part, and a process killed before the link leaves no name to sweep.
 * false if it could not be linked (the caches are optimisations: the
 * next run makes it again). */
BRIG_INTERNAL bool tmpfile_link_over(int fd, int dir, const char *name);

#endif
