/* test_settings.c — unit tests for the table of settings
 * (src/lib/policy/settings.c): what an entry must hold for the flag, the
 * loader, the dump and the schema to work from it (so a new entry that
 * misses a piece fails here, naming it), and the public calls over it
 * (brig_policy_option_info, brig_policy_set_option) on bad input. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "policy/settings.h"

/* ---- the table itself ------------------------------------------------------ */

static bool object_known(const char *key)
{
        const char *leaf = strrchr(key, '/');
        if (leaf == key)
                return true;  /* top level */
        for (const struct setting_object *o = setting_objects; o->path; o++)
                if (strlen(o->path) == (size_t)(leaf - key) && strncmp(o->path, key, (size_t)(leaf - key)) == 0)
                        return true;
        return false;
}

static void test_every_entry_is_complete(void **state)
{
        (void)state;
        for (size_t i = 0; i < n_settings; i++) {
                const struct setting *s = &settings[i];
                const char *name = s->key ? s->key : s->cli[0].name;
                if (!name)
                        fail_msg("entry %zu has neither a key nor a flag", i);
                if (s->key && (s->key[0] != '/' || !object_known(s->key)))
                        fail_msg("%s: a key is a JSON pointer below an object of setting_objects", name);
                if (s->cli[0].name && (!s->section || !s->cli[0].help))
                        fail_msg("%s: a flag needs a section and help text", name);
                json_t *own = s->schema ? json_loads(s->schema, 0, NULL) : NULL;
                if (s->schema && !own)
                        fail_msg("%s: its schema text is not JSON", name);
                json_decref(own);
                bool settable = false;
                switch (s->kind) {
                case SK_BOOL: settable = s->set_flag || s->set_bool; break;
                case SK_SIZE: settable = s->set_u64 != NULL; break;
                case SK_LIMIT: settable = true; break;
                case SK_STRING: case SK_PATH: case SK_LIST: settable = s->set_str != NULL; break;
                case SK_ENUM: settable = s->set_enum && s->choices; break;
                case SK_CUSTOM: settable = s->load || !s->key; break;
                case SK_IGNORED: settable = true; break;
                }
                if (!settable)
                        fail_msg("%s: no setter for its kind", name);
                if (s->kind == SK_LIST && !s->dump && !s->noun)
                        fail_msg("%s: a list the dump reads from its struct strv needs a noun (its strings are "
                                 "checked for UTF-8 before a dump, which would drop them)", name);
                if (s->key && s->kind == SK_CUSTOM && strcmp(s->key, "/extends") != 0 && !s->dump)
                        fail_msg("%s: a setting with structure needs a dump hook (or the dump loses it)", name);
                for (const struct setting_flag *f = s->cli; f->name; f++) {
                        if (s->kind == SK_CUSTOM && !f->cli && !s->set_str)
                                fail_msg("--%s: a flag of a setting with structure needs its cli hook", f->name);
                        if (f->arg && s->kind == SK_BOOL)
                                fail_msg("--%s: a bool's flag takes no value", f->name);
                }
        }
}

static void test_flags_and_keys_are_unique(void **state)
{
        (void)state;
        for (size_t i = 0; i < n_settings; i++) {
                for (size_t j = i + 1; j < n_settings; j++) {
                        if (settings[i].key && settings[j].key && strcmp(settings[i].key, settings[j].key) == 0)
                                fail_msg("key %s twice", settings[i].key);
                        for (const struct setting_flag *f = settings[i].cli; f->name; f++)
                                for (const struct setting_flag *g = settings[j].cli; g->name; g++)
                                        if (strcmp(f->name, g->name) == 0)
                                                fail_msg("--%s twice", f->name);
                }
        }
}

/* ---- the public calls ------------------------------------------------------- */

static void test_option_info_sizes(void **state)
{
        (void)state;
        brig_option_info info = { .size = sizeof info };
        assert_int_equal(brig_policy_option_info(0, &info), 0);
        assert_string_equal(info.name, "profile");
        assert_true(info.flags & BRIG_OPTION_FIRST);
        size_t n = 0;
        while (brig_policy_option_info(n, &info) == 0)
                n++;
        assert_true(n > 40);
        assert_int_equal(brig_policy_option_info(n, &info), -ENOENT);
        assert_int_equal(brig_policy_option_info(0, NULL), -EINVAL);
        info.size = sizeof info - 1;
        assert_int_equal(brig_policy_option_info(0, &info), -EINVAL);
        info.size = 8192;
        assert_int_equal(brig_policy_option_info(0, &info), -E2BIG);
        /* a newer caller's larger struct: its tail zeroed, not left as it was */
        struct {
                brig_option_info info;
                char tail[32];
        } big;
        memset(&big, 0xa5, sizeof big);
        big.info.size = sizeof big;
        assert_int_equal(brig_policy_option_info(5, &big.info), 0);
        for (size_t i = 0; i < sizeof big.tail; i++)
                assert_int_equal(big.tail[i], 0);
        assert_int_equal(big.info.size, sizeof big);
}

static void expect_option_error(brig_policy *p, const char *name, const char *value, const char *msg)
{
        brig_error *err = NULL;
        assert_true(brig_policy_set_option(p, name, value, &err) < 0);
        assert_non_null(err);
        assert_string_equal(err->msg, msg);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        brig_error_free(&err);
}

static void test_set_option_bad_input(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        expect_option_error(p, "memroy", "1G", "unknown option '--memroy'");
        expect_option_error(p, NULL, "1G", "unknown option '--'");
        expect_option_error(NULL, "memory", "1G", "unknown option '--memory'");
        expect_option_error(p, "memory", NULL, "option '--memory' needs a value");
        expect_option_error(p, "sys", "yes", "option '--sys' takes no value");
        expect_option_error(p, "net", "internet", "--net 'internet': expected none, proxy, filtered or host");
        expect_option_error(p, "pids", "-1", "--pids '-1': expected a whole number");
        expect_option_error(p, "env", "X", "--env 'X': expected NAME=VALUE");
        /* nothing of the failed ones stuck; a good one does */
        assert_int_equal(p->limits.memory, BRIG_DEFAULT_MEMORY);
        assert_false(p->mount_sys);
        assert_int_equal(brig_policy_set_option(p, "memory", "1G", NULL), 0);
        assert_int_equal(brig_policy_set_option(p, "no-tty", NULL, NULL), 0);
        assert_int_equal(p->limits.memory, 1ULL << 30);
        assert_int_equal(p->tty, BRIG_TTY_NEVER);
        brig_policy_free(p);
}

static void note(const char *line, void *data)
{
        snprintf(data, 256, "%s", line);
}

static void test_set_option_weakening_says_so(void **state)
{
        (void)state;
        brig_policy *p = brig_policy_new();
        char said[256] = "";
        brig_policy_set_notice(p, note, said);
        assert_int_equal(brig_policy_set_option(p, "net", "host", NULL), 0);
        assert_string_equal(said, "--net host: the sandbox shares the host's network; nothing controls where it "
                                  "connects");
        said[0] = '\0';
        assert_int_equal(brig_policy_set_option(p, "net", "proxy", NULL), 0);
        assert_string_equal(said, "");
        brig_policy_free(p);
}

static void test_schema_is_json_with_every_key(void **state)
{
        (void)state;
        char *text = brig_policy_schema();
        assert_non_null(text);
        json_t *schema = json_loads(text, 0, NULL);
        free(text);
        assert_non_null(schema);
        for (size_t i = 0; i < n_settings; i++) {
                if (!settings[i].key)
                        continue;
                char path[128];
                snprintf(path, sizeof path, "%s", settings[i].key);
                json_t *node = schema;
                for (char *save = NULL, *part = strtok_r(path, "/", &save); part && node;
                     part = strtok_r(NULL, "/", &save))
                        node = json_object_get(json_object_get(node, "properties"), part);
                if (!node)
                        fail_msg("%s: not in the schema", settings[i].key);
        }
        json_decref(schema);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_entry_is_complete),
                cmocka_unit_test(test_flags_and_keys_are_unique),
                cmocka_unit_test(test_option_info_sizes),
                cmocka_unit_test(test_set_option_bad_input),
                cmocka_unit_test(test_set_option_weakening_says_so),
                cmocka_unit_test(test_schema_is_json_with_every_key),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
