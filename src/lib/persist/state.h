/* state.h — where persistent sandboxes keep their state, and how brig
 * finds, locks, reads and removes it (state.c). */
#ifndef BRIG_STATE_H
#define BRIG_STATE_H

#include "core/error.h"
#include "persist/state_root.h"

#include <jansson.h>
#include <sys/types.h>

/* state_dir(name, create_root) with the root's lock taken: returns the
 * lock's fd; *dir gets root/NAME and *root (optional) the root. */
BRIG_INTERNAL int state_dir_locked(const char *name, bool create_root, char **dir, char **root, brig_error **err);
/* dir/state.json, written whole through a rename. */
BRIG_INTERNAL int state_write(const char *dir, json_t *doc, brig_error **err);
/* dir/NAME the same way (0600, written whole through a rename). */
BRIG_INTERNAL int state_write_file(const char *dir, const char *name, json_t *doc, size_t json_flags,
                                   brig_error **err);
BRIG_INTERNAL json_t *state_read(const char *dir, brig_error **err);
/* dir/NAME whole, if it is what brig writes: a regular file of ours, not
 * writable by others, with one link, at most STATE_FILE_MAX bytes. */
#define STATE_FILE_MAX (4 << 20)
BRIG_INTERNAL char *state_read_file(const char *dir, const char *name, brig_error **err);
/* The same with another cap on its size. */
BRIG_INTERNAL char *state_read_file_max(const char *dir, const char *name, off_t max, brig_error **err);
/* <root>/cache (the compiled syscall filters, the policy step's
 * directory cache), made 0700 through the root's descriptor and checked
 * on its own: a directory brig did not make (not ours, or open to others)
 * is not used. -1 when there is no usable cache, and *why (if given)
 * says so where the state root itself was refused or could not be made. */
BRIG_INTERNAL int state_cache_dir_open(brig_error **why);
/* Is the supervisor recorded in this state alive? */
BRIG_INTERNAL bool state_supervisor_alive(json_t *st);
/* rm -rf that never follows a symlink and makes unreadable directories
 * (overlay's work/work) readable first. */
BRIG_INTERNAL int state_remove_tree(const char *path, brig_error **err);

/* What a grant is compared with: each root brig may use (the one in use
 * now, and the defaults without XDG_RUNTIME_DIR), as the root's st_dev/
 * st_ino (or, while it does not exist, its deepest existing ancestor's)
 * and those of every directory above it. */
struct state_ident {
        dev_t dev;
        ino_t ino;
};
struct state_guard_root {
        char *path;
        uid_t uid;  /* whose root it is */
        bool exists;
        bool by_name;  /* path is its real path (each prefix lstat'd: no symlink) */
        /* the roots of other mounts that show a directory inside it (a
         * bind of <root>/cache elsewhere): ".." from one leads to where it
         * is mounted, never up into the root (state_guard_mounts) */
        struct state_ident *parts;
        size_t n_parts;
        size_t n;  /* id[0]: the root (or where it would be made), then its ancestors to "/" */
        /* Last, and never zeroed as a whole: only id[0..n) is read, and
         * a guard's twelve of these are 24 KiB of a run's stack, whose
         * pages a memset faulted in only to clear them. */
        struct state_ident id[128];
};
struct guard_memo;
struct state_guard {
        size_t n_roots;
        struct state_guard_root roots[12];
        struct guard_memo *memo;  /* what was looked up by name (state.c) */
};
BRIG_INTERNAL int state_guard_init(struct state_guard *g, uid_t other, brig_error **err);
BRIG_INTERNAL void state_guard_free(struct state_guard *g);
/* The mounts of the table (mountinfo.h) that show a part of an existing
 * root somewhere else: whatever is, contains or lies inside one of them
 * lies inside the root. */
struct mountinfo;
BRIG_INTERNAL int state_guard_mounts(struct state_guard *g, const struct mountinfo *mi, brig_error **err);
/* NULL when `path` (a grant's host path) keeps clear of every root; else
 * how it meets one ("is", "contains" or "lies inside"), *root naming it. */
BRIG_INTERNAL const char *state_guard_test(const struct state_guard *g, const char *path, const char **root);

#endif
