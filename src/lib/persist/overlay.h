/* overlay.h — the overlay workspace's inside (src/lib/persist/), shared
 * by its parts: overlay.c (resolving, the layer), overlay_manifest.c,
 * overlay_diff.c, overlay_commit.c, overlay_copy.c. Nothing else includes
 * it: the rest of libbrig sees sandbox.h and controls/mounts.h. */
#ifndef BRIG_PERSIST_OVERLAY_H
#define BRIG_PERSIST_OVERLAY_H

#include "core/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* How deep diff, commit and layer copies (snapshot, restore, fork) go.
 * They recurse with a few descriptors a level and keep paths relative to
 * the layer's root, which the kernel takes only up to PATH_MAX; a layer
 * deeper than this is refused with layer_walk_failed's message rather than
 * half handled. Removal has no such limit (tree_remove_at), so such a
 * sandbox can always be reset or removed. */
#define TREE_DEPTH_MAX 256

/* ---- on the host: what the layer changes (overlay_diff.c) ----------------- */

enum change_kind { CH_ADDED = 'A', CH_MODIFIED = 'M', CH_DELETED = 'D' };

struct change {
        char *path;
        enum change_kind kind;
        mode_t type;     /* S_IFREG, S_IFDIR, S_IFLNK (the new one; the old one for deletions) */
        mode_t mode;     /* permission bits in the layer */
        bool special;    /* device, FIFO or socket: never committed */
};

/* brig diff/commit PATH... --exclude PATTERN... (filter_prepare). */
struct filter {
        struct strv paths;     /* workspace-relative, normalized; "" the whole workspace; none: everything */
        struct strv excludes;  /* patterns; "/..." anchored at the workspace (filter_excludes) */
};

struct changes {
        struct change *v;
        size_t n;
        char *stopped_at;  /* where diff_dir stopped (note_stop) */
        const struct filter *filter;  /* the walk skips what it can never select, or NULL */
};

struct layer {
        char *dir;         /* the state directory */
        json_t *state;
        const char *workspace;
        int upper, ws;
        void *links;       /* commit: hard links in the layer (link_first) */
        int journal;       /* commit: where its temporary names are noted first */
};

/* resolving, the layer (overlay.c) */
BRIG_INTERNAL int open_beneath(int dirfd, const char *rel, int flags);
BRIG_INTERNAL int open_dir_nofollow(const char *path);
BRIG_INTERNAL int open_parent(int root, const char *rel, const char **base);
BRIG_INTERNAL char *join(const char *dir, const char *name);
BRIG_INTERNAL int note_stop(char **at, const char *rel, int errnum);
BRIG_INTERNAL int layer_walk_failed(brig_error **err, const char *what, const char *name, int r, const char *at);
BRIG_INTERNAL int copy_data(int in, int out);
BRIG_INTERNAL void link_free(void *p);
BRIG_INTERNAL const char *link_first(void **seen, const struct stat *st, const char *path);
BRIG_INTERNAL void layer_close(struct layer *l);
BRIG_INTERNAL int layer_open(const char *name, struct layer *l, brig_error **err);

/* the record of the workspace (overlay_manifest.c) */
BRIG_INTERNAL json_t *entry_record(const struct stat *st);
BRIG_INTERNAL int record_tree(int dfd, const char *rel, json_t *out, int depth);
/* The same walk with another record of each entry (runchanges.c), and
 * bounds: with `cap` non-NULL, each entry recorded takes one from
 * cap->left (when cap->max), and the walk stops with -E2BIG at the first
 * entry past it (what it recorded stays in out); a directory it cannot
 * open (rootless: one the sandbox made unreadable) is noted in
 * cap->unreadable (the first one) rather than passed over in silence. */
struct tree_cap {
        uint64_t max, left;
        char *unreadable;
};
BRIG_INTERNAL int record_tree_with(int dfd, const char *rel, json_t *out, int depth,
                                   json_t *(*record)(const struct stat *st), struct tree_cap *cap);
BRIG_INTERNAL int manifest_write(const char *dir, json_t *m, brig_error **err);
BRIG_INTERNAL int record_workspace(const char *workspace, const char *dir, brig_error **err);
BRIG_INTERNAL bool record_matches(json_t *rec, const struct stat *st);
BRIG_INTERNAL json_t *manifest_read(const char *dir, brig_error **err);

/* diff (overlay_diff.c) */
BRIG_INTERNAL void changes_free(struct changes *c);
BRIG_INTERNAL void filter_free(struct filter *f);
BRIG_INTERNAL int filter_prepare(const char *workspace, const brig_change_filter *in, struct filter *f, brig_error **err);
BRIG_INTERNAL bool below(const char *path, const char *dir);
BRIG_INTERNAL bool filter_selects(const struct filter *f, const char *path);
BRIG_INTERNAL int filter_changes(struct changes *c, const struct filter *f, json_t *base);
BRIG_INTERNAL const char *kind_name(enum change_kind k);
BRIG_INTERNAL const char *type_name(mode_t t);
BRIG_INTERNAL int layer_diff(struct layer *l, struct changes *c);

/* commit (overlay_commit.c) */
BRIG_INTERNAL void commit_sweep(const char *dir, int ws);

#endif
