/* brig-settings — libbrig's table of settings as the tests and the docs
 * need it (not installed):
 *   brig-settings schema   the policy file schema: docs/policy.schema.json
 *                          is this output (make schema writes it;
 *                          tests/integration/test_settings.py compares)
 *   brig-settings flags    one line per flag: NAME TAB ARG TAB KEY TAB FLAGS
 *                          ("-" for none; FLAGS: first, run-only) */
#include "brig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
        if (argc == 2 && strcmp(argv[1], "schema") == 0) {
                char *schema = brig_policy_schema();
                if (!schema) {
                        fprintf(stderr, "brig-settings: the schema could not be made (a table entry's schema text?)\n");
                        return 1;
                }
                printf("%s\n", schema);
                free(schema);
                return 0;
        }
        if (argc == 2 && strcmp(argv[1], "flags") == 0) {
                brig_option_info info = { .size = sizeof info };
                for (size_t i = 0; brig_policy_option_info(i, &info) == 0; i++)
                        printf("%s\t%s\t%s\t%s%s%s\n", info.name, info.arg ? info.arg : "-", info.key ? info.key : "-",
                               info.flags & BRIG_OPTION_FIRST ? "first" : "",
                               (info.flags & BRIG_OPTION_FIRST) && (info.flags & BRIG_OPTION_RUN_ONLY) ? "," : "",
                               info.flags & BRIG_OPTION_RUN_ONLY ? "run-only" : "");
                return 0;
        }
        fprintf(stderr, "usage: brig-settings schema|flags\n");
        return 2;
}
