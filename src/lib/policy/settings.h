/* settings.h — one descriptor per policy setting.
 *
 * Each entry of settings[] (settings.c) is one setting: its key in a
 * policy file, its command-line flags with their --help text, the type of
 * its value, the setter that checks and stores it and where the dump reads
 * it back. The command line (brig_policy_set_option, brig_policy_option_info
 * for getopt and --help), the loader and the dump (policy_json.c) and the
 * schema (brig_policy_schema, docs/policy.schema.json) all walk this one
 * table: adding a setting is one entry plus its enforcement
 * (docs/policy.md, "Adding a setting"). Settings with structure (binds,
 * rules, env, copy-ins) keep hooks of their own; the table still names
 * them. */
#ifndef BRIG_POLICY_SETTINGS_H
#define BRIG_POLICY_SETTINGS_H

#include "core/error.h"

#include <jansson.h>
#include <stddef.h>

/* The value's type: what the loader accepts, what the flag parses, how
 * the dump writes it and the schema describes it. */
enum setting_kind {
        SK_BOOL,     /* true/false; the flag takes no value and sets it */
        SK_SIZE,     /* "512M" or a number of bytes */
        SK_LIMIT,    /* one of brig_policy_set_limit's, in its unit */
        SK_STRING,   /* one string */
        SK_PATH,     /* one path: a relative one on the command line is the caller's directory's */
        SK_LIST,     /* an array of strings, each given to set_str; the flag repeats */
        SK_ENUM,     /* one of choices[] */
        SK_CUSTOM,   /* structure: the entry's own hooks (load, dump, a cli hook per flag) */
        SK_IGNORED,  /* a key the loader accepts and ignores ("$schema") */
};

/* SK_LIMIT: the unit of the value. */
enum setting_unit {
        SU_SIZE,      /* bytes: "4G" */
        SU_COUNT,     /* a whole number */
        SU_DURATION,  /* milliseconds: "90s", "1h30m"; a number of seconds in a file */
        SU_SECONDS,   /* a duration, kept in whole seconds (rounded up) */
        SU_CPUS,      /* thousandths of a core: 1.5 on the command line and in a file */
};

/* SETTING_* in setting.flags, beside brig.h's BRIG_OPTION_*. */
enum {
        SETTING_EARLY = 1u << 16,      /* loaded before the other keys of its object (removals before additions) */
        SETTING_DUMP_LATE = 1u << 17,  /* dumped after the others of its object: a dump (and a pool's key,
                                        * a hash of it) stays the same as before the table */
};

struct setting;
struct loader;  /* policy_json.c: a file being loaded, for located errors */

/* A setting with structure: its value from a file (AT: its JSON pointer,
 * for located errors), and its value for the dump (NULL: left out). */
typedef int setting_load_fn(const struct loader *L, const char *at, json_t *v, brig_policy *p,
                            const struct setting *s);
typedef json_t *setting_dump_fn(const brig_policy *p, const struct setting *s);

struct setting_choice {
        const char *name;
        int value;
};

struct setting_flag {
        const char *name;   /* "ro-bind": --ro-bind; NULL ends the list */
        const char *arg;    /* "SRC[:DST]" in --help; NULL: the flag takes no value */
        const char *help;   /* its --help text ('\n' continues it); NULL: on the line of the flag before */
        int param;          /* the hook's own (BRIG_BIND_READONLY, BRIG_TTY_NEVER) */
        /* The flag's parser, when the kind's own does not fit; NULL: by kind. */
        int (*cli)(brig_policy *p, const struct setting *s, const struct setting_flag *f, const char *arg,
                   brig_error **err);
        bool prefix;        /* a setter's message gets "--flag: " in front */
};

struct setting {
        const char *key;       /* "/limits/memory" in a policy file; NULL: the command line only */
        const char *section;   /* the --help heading it is listed under (--help: in the order the table
                                * first names each) */
        enum setting_kind kind;
        unsigned flags;        /* BRIG_OPTION_*, SETTING_* */
        struct setting_flag cli[4];
        /* setters, by kind */
        void (*set_flag)(brig_policy *p, bool on);                    /* SK_BOOL that cannot fail */
        int (*set_bool)(brig_policy *p, bool on, brig_error **err);   /* SK_BOOL that can */
        int (*set_u64)(brig_policy *p, uint64_t v, brig_error **err); /* SK_SIZE */
        int (*set_str)(brig_policy *p, const char *s, brig_error **err);  /* SK_STRING, SK_PATH, SK_LIST */
        void (*set_enum)(brig_policy *p, int value);                 /* SK_ENUM */
        enum brig_limit limit;                                        /* SK_LIMIT */
        enum setting_unit unit;                                       /* SK_LIMIT */
        const struct setting_choice *choices;                         /* SK_ENUM, ended by a NULL name */
        /* where the dump reads it: offsetof(struct brig_policy, ...) of a
         * bool, a uint64_t, a char *, a struct strv or an enum (by kind) */
        size_t offset;
        bool omit_empty;       /* SK_LIST: left out of the dump when empty */
        const char *noun;      /* SK_LIST kept as a struct strv at offset: "pattern" in "the --deny pattern
                                * ... is not valid UTF-8" (brig_policy_to_json refuses what JSON cannot hold) */
        const char *what;      /* SK_STRING, SK_PATH: the loader's "expected ..." ("a path") */
        const char *label;     /* SK_ENUM: "tty" in "tty 'x': expected ..." */
        /* structure */
        setting_load_fn *load;
        setting_dump_fn *dump;
        const char *schema;    /* JSON text merged into the schema the kind gives (a description, a pattern) */
};

BRIG_INTERNAL extern const struct setting settings[];
BRIG_INTERNAL extern const size_t n_settings;

/* The objects of a policy file that hold settings ("/filesystem"): what
 * the loader says it expects there, and the schema's description. */
struct setting_object {
        const char *path;
        const char *what;
        const char *description;
};
BRIG_INTERNAL extern const struct setting_object setting_objects[];

/* "\"auto\", \"always\" or \"never\"" from an SK_ENUM's choices, into BUF. */
BRIG_INTERNAL const char *setting_choices_what(const struct setting *s, char *buf, size_t n);

/* The value of S in P as its dump writes it; NULL when the dump leaves it
 * out (policy_json.c). */
BRIG_INTERNAL json_t *setting_dump(const brig_policy *p, const struct setting *s);

/* ---- hooks of the settings with structure (policy_json.c) ---------------- */

BRIG_INTERNAL setting_load_fn load_extends, load_binds, load_tmpfs, load_env, load_rules, load_resolve,
        load_copy_ins, load_cpus, load_secrets, load_http_rules;
BRIG_INTERNAL int load_unsafe_allow(brig_policy *p, const char *pattern, brig_error **err);

BRIG_INTERNAL setting_dump_fn dump_binds, dump_tmpfs, dump_deny, dump_env, dump_rules, dump_degraded, dump_net_mode,
        dump_egress, dump_copy_ins, dump_tool_bool, dump_carry;

#endif
