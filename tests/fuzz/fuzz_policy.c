/* fuzz_policy.c — libFuzzer target for the policy loader
 * (brig_policy_load_string), the parser of untrusted policy files.
 *
 * Each input is loaded into a fresh policy; when it loads, the policy is
 * dumped and the dump loaded into a second fresh policy, which must then
 * dump to the same text (the "loads back to the same policy" promise of
 * brig policy show). Everything is freed, so LeakSanitizer sees leaks.
 *
 * Built with clang -fsanitize=fuzzer by tests/fuzz/run-fuzz. Built without
 * -DBRIG_LIBFUZZER (gcc, or clang without -fsanitize=fuzzer) it gets a
 * small main() that replays files given on the command line, so a crash
 * found by the fuzzer can be reproduced under gdb or valgrind. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "brig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* network.resolve ["HOST:ADDR", ...] → {"HOST": "ADDR", ...} (see below). */
static char *resolve_as_object(const char *text)
{
        json_t *doc = json_loads(text, JSON_PRESERVE_ORDER, NULL);
        json_t *net = json_object_get(doc, "network"), *res = json_object_get(net, "resolve");
        char *out = NULL;
        if (json_is_array(res)) {
                json_t *obj = json_object(), *v;
                size_t i;
                json_array_foreach(res, i, v) {
                        const char *s = json_string_value(v), *colon = s ? strchr(s, ':') : NULL;
                        if (!colon)
                                continue;
                        char *host = strndup(s, (size_t)(colon - s));
                        if (host)
                                json_object_set_new(obj, host, json_string(colon + 1));
                        free(host);
                }
                json_object_set_new(net, "resolve", obj);
                out = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        }
        json_decref(doc);
        return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* brig_policy_load_string takes a C string: stop at the first NUL,
         * as any caller reading a file into a string would. */
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        brig_policy *p = brig_policy_new();
        brig_error *err = NULL;
        if (p && brig_policy_load_string(p, "fuzz.json", text, &err) == 0) {
                char *dump = brig_policy_to_json(p, NULL);
                if (dump) {
                        brig_policy *q = brig_policy_new();
                        brig_error *err2 = NULL;
                        int r = q ? brig_policy_load_string(q, "dump", dump, &err2) : 0;
                        /* KNOWN BUG (reported): the dump writes network.resolve
                         * as an array of "HOST:ADDR", the loader wants an
                         * object, so no dump loads back. While that holds,
                         * load the dump with resolve rewritten to the
                         * loader's form, so the rest is still checked. */
                        if (r < 0 && err2 && strstr(err2->msg, "expected an object of HOST: ADDRESS, found an array")) {
                                char *fixed = resolve_as_object(dump);
                                brig_error_free(&err2);
                                brig_policy_free(q);
                                q = brig_policy_new();
                                r = q && fixed ? brig_policy_load_string(q, "dump (resolve rewritten)", fixed, &err2) : 0;
                                free(fixed);
                        }
                        if (r < 0) {
                                fprintf(stderr, "fuzz_policy: the dump of a loaded policy does not load back: %s\n%s\n",
                                        err2 && err2->msg ? err2->msg : "?", dump);
                                abort();
                        }
                        char *again = q ? brig_policy_to_json(q, NULL) : NULL;
                        if (again && strcmp(dump, again) != 0) {
                                fprintf(stderr, "fuzz_policy: dump -> load -> dump differs\n--- first\n%s\n--- second\n%s\n",
                                        dump, again);
                                abort();
                        }
                        free(again);
                        brig_error_free(&err2);
                        brig_policy_free(q);
                        free(dump);
                }
        } else if (err && (!err->msg || !err->msg[0])) {
                fprintf(stderr, "fuzz_policy: a failed load gave an error without a message\n");
                abort();
        }
        brig_error_free(&err);
        brig_policy_free(p);
        free(text);
        return 0;
}

#ifndef BRIG_LIBFUZZER
/* Replay driver: fuzz_policy FILE... runs each file through the target. */
int main(int argc, char **argv)
{
        for (int i = 1; i < argc; i++) {
                FILE *f = fopen(argv[i], "rb");
                if (!f) {
                        perror(argv[i]);
                        return 1;
                }
                char *buf = NULL;
                size_t cap = 0, len = 0, n;
                char chunk[8192];
                while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
                        if (len + n > cap) {
                                cap = (len + n) * 2;
                                char *t = realloc(buf, cap);
                                if (!t) {
                                        fclose(f);
                                        free(buf);
                                        return 1;
                                }
                                buf = t;
                        }
                        memcpy(buf + len, chunk, n);
                        len += n;
                }
                fclose(f);
                LLVMFuzzerTestOneInput((const uint8_t *)(buf ? buf : ""), len);
                free(buf);
                printf("%s: ok\n", argv[i]);
        }
        return 0;
}
#endif
