/* fuzz_seccomp_cache.c — libFuzzer target for the compiled-filter cache
 * file's reader (src/lib/controls/seccomp_cache.c): the input is a cache file.
 * Its key is taken as the expected one when the first byte is odd (so the
 * fuzzer reaches the program) and a fixed key otherwise. A program that
 * is accepted must refuse every probe when run again, and must run on
 * seccomp_data made of the input's last bytes without reading out of
 * bounds.
 *
 * Build and run with tests/fuzz/run-fuzz-net. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controls/seccomp_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define AUDIT_X86_64 0xc000003eU
#define AUDIT_I386 0x40000003U

static const struct seccomp_probe probes[] = {
        { AUDIT_X86_64, 250 }, { AUDIT_X86_64, 248 }, { AUDIT_X86_64, 321 }, { AUDIT_X86_64, 101 },
        { AUDIT_I386, 1 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        bool own_key = data[0] & 1, notifies = data[0] & 2;
        data++;
        size--;
        /* a heap copy of exactly the input: any over-read is caught */
        uint8_t *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        static const char fixed[] = "brig-seccomp-4 fuzz build-0 libseccomp-2.5.4 arch-0 audit-0;";
        const char *key = fixed;
        size_t len = sizeof fixed - 1;
        uint32_t klen;
        if (own_key && size >= 4 && (memcpy(&klen, copy, 4), klen <= size - 4)) {
                key = (const char *)copy + 4;
                len = klen;
        }
        struct sock_filter *prog;
        size_t n;
        if (seccomp_cache_parse(copy, size, key, len, probes, sizeof probes / sizeof *probes, notifies, &prog, &n) == 0) {
                for (size_t i = 0; i < sizeof probes / sizeof *probes; i++) {
                        struct seccomp_data sd = { .nr = probes[i].nr, .arch = probes[i].arch };
                        uint32_t ret;
                        if (!seccomp_bpf_eval(prog, n, &sd, &ret))
                                abort();
                        uint32_t act = ret & SECCOMP_RET_ACTION_FULL;
                        if (act == SECCOMP_RET_ALLOW || act == SECCOMP_RET_LOG || act == SECCOMP_RET_TRACE ||
                            (!notifies && act == SECCOMP_RET_USER_NOTIF))
                                abort();
                }
                struct seccomp_data sd = { 0 };
                memcpy(&sd, copy + size - (size < sizeof sd ? size : sizeof sd), size < sizeof sd ? size : sizeof sd);
                uint32_t ret;
                (void)seccomp_bpf_eval(prog, n, &sd, &ret);
                free(prog);
        }
        free(copy);
        return 0;
}

#include "replay.h"
