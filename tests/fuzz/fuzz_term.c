/* fuzz_term.c — libFuzzer target for the terminal output filter
 * (src/lib/controls/term_filter.c). The first byte of the input says where the
 * stream is cut into reads; the rest is the stream. The filter must:
 *   - give the same output however the stream is cut (whole, at the cut,
 *     a byte at a time);
 *   - stay within TERM_FILTER_OUT_MAX for every call;
 *   - write valid UTF-8 without C1 controls, and only sequences it would
 *     pass again: filtering its own output changes nothing.
 *
 * Build and run with tests/fuzz/run-fuzz. Without -DBRIG_LIBFUZZER it
 * gets a main() that replays the files named on the command line. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "controls/term_filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t feed(struct term_filter *f, const uint8_t *in, size_t n, char *out)
{
        /* a heap copy of exactly n bytes, so an over-read is caught */
        uint8_t *copy = malloc(n ? n : 1);
        if (!copy)
                abort();
        memcpy(copy, in, n);
        size_t w = term_filter_feed(f, copy, n, out);
        free(copy);
        if (w > TERM_FILTER_OUT_MAX(n))
                abort();
        return w;
}

/* Valid UTF-8, no U+0080..U+009F; the filter's own rules are checked by
 * feeding the output again. */
static void check_utf8(const uint8_t *s, size_t n)
{
        for (size_t i = 0; i < n;) {
                uint8_t b = s[i];
                size_t len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3
                           : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
                if (!len || i + len > n)
                        abort();
                if (b == 0xc2 && s[i + 1] <= 0x9f)
                        abort();
                for (size_t k = 1; k < len; k++)
                        if ((s[i + k] & 0xc0) != 0x80)
                                abort();
                if ((b == 0xe0 && s[i + 1] < 0xa0) || (b == 0xed && s[i + 1] > 0x9f) ||
                    (b == 0xf0 && s[i + 1] < 0x90) || (b == 0xf4 && s[i + 1] > 0x8f))
                        abort();
                if (b == 0x05)
                        abort();  /* ENQ */
                i += len;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 1)
                return 0;
        const uint8_t *in = data + 1;
        size_t n = size - 1, cut = n ? (size_t)data[0] * n / 255 : 0;
        size_t cap = TERM_FILTER_OUT_MAX(n);
        char *whole = malloc(cap), *parts = malloc(cap), *bytes = malloc(cap), *again = malloc(TERM_FILTER_OUT_MAX(cap));
        if (!whole || !parts || !bytes || !again)
                abort();
        struct term_filter f;
        term_filter_init(&f);
        size_t wn = feed(&f, in, n, whole);
        term_filter_init(&f);
        size_t pn = feed(&f, in, cut, parts);
        pn += feed(&f, in + cut, n - cut, parts + pn);
        term_filter_init(&f);
        size_t bn = 0;
        for (size_t i = 0; i < n; i++)
                bn += feed(&f, in + i, 1, bytes + bn);
        if (pn != wn || memcmp(parts, whole, wn) != 0 || bn != wn || memcmp(bytes, whole, wn) != 0)
                abort();
        check_utf8((const uint8_t *)whole, wn);
        term_filter_init(&f);
        size_t an = feed(&f, (const uint8_t *)whole, wn, again);
        if (an != wn || memcmp(again, whole, wn) != 0)
                abort();
        free(whole);
        free(parts);
        free(bytes);
        free(again);
        return 0;
}

#include "replay.h"
