/* test_error.c — unit tests for the one wire form of an error crossing a
 * process boundary (src/lib/core/error.c, error.h): what the encoder
 * writes, and what the decoder makes of bytes the other side may have
 * forged. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "core/error.h"

static struct wire_error encoded(int exit_code, int errnum, const char *msg, const char *where)
{
        brig_error e = { .exit_code = exit_code, .errnum = errnum, .msg = (char *)msg };
        struct wire_error w;
        memset(&w, 0xa5, sizeof w);  /* what the sender's stack held before */
        wire_error_encode(&w, &e, where);
        return w;
}

static void test_round_trip(void **state)
{
        (void)state;
        struct wire_error w = encoded(127, ENOENT, "command not found 'x': No such file or directory", NULL);
        brig_error *err = NULL;
        int code = 0;
        assert_int_equal(wire_error_decode(&w, sizeof w, &code, &err), -ENOENT);
        assert_int_equal(code, 127);
        assert_int_equal(err->exit_code, 127);
        assert_int_equal(err->errnum, ENOENT);
        assert_string_equal(err->msg, "command not found 'x': No such file or directory");
        brig_error_free(&err);
}

static void test_where_prefixes(void **state)
{
        (void)state;
        struct wire_error w = encoded(125, 0, "malformed configuration", "brig-supervisor");
        brig_error *err = NULL;
        assert_int_equal(wire_error_decode(&w, sizeof w, NULL, &err), -EIO);
        assert_string_equal(err->msg, "brig-supervisor: malformed configuration");
        assert_int_equal(err->exit_code, 125);
        brig_error_free(&err);
}

/* Nothing of the sender's memory goes along: every byte past the text's
 * end is zero. */
static void test_encode_writes_every_byte(void **state)
{
        (void)state;
        struct wire_error w = encoded(1, EISDIR, "read '/x'", NULL);
        size_t used = strlen(w.text) + 1;
        for (size_t i = used; i < sizeof w.text; i++)
                assert_int_equal(w.text[i], 0);
        for (size_t i = 0; i < sizeof w.where; i++)
                assert_int_equal(w.where[i], 0);
        assert_int_equal(w.magic, WIRE_ERROR_MAGIC);
}

/* A missing error, an exit code of 0 or past 255, an errno out of range:
 * the encoder never sends them. */
static void test_encode_bounds(void **state)
{
        (void)state;
        struct wire_error w;
        wire_error_encode(&w, NULL, NULL);
        assert_int_equal(w.exit_code, BRIG_EXIT_SETUP);
        assert_string_equal(w.text, "unknown error");
        w = encoded(0, -3, "", NULL);
        assert_int_equal(w.exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(w.errnum, 0);
        assert_string_equal(w.text, "unknown error");
        w = encoded(300, 99999, "x", NULL);
        assert_int_equal(w.exit_code, BRIG_EXIT_SETUP);
        assert_int_equal(w.errnum, 0);
        char big[4000];
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        w = encoded(1, 0, big, NULL);
        assert_int_equal(strlen(w.text), WIRE_ERROR_TEXT - 1);  /* cut to fit, still terminated */
}

static void check_refused(const struct wire_error *w, size_t len, const char *want)
{
        brig_error *err = NULL;
        int code = 0;
        assert_int_equal(wire_error_decode(w, len, &code, &err), -EPROTO);
        assert_int_equal(code, BRIG_EXIT_SETUP);  /* never success */
        assert_non_null(err);
        assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
        assert_non_null(strstr(err->msg, want));
        brig_error_free(&err);
}

/* What a forger could send: every field out of bounds is refused as a
 * malformed message, never taken at its word. */
static void test_decode_refuses_forgeries(void **state)
{
        (void)state;
        struct wire_error w = encoded(127, ENOENT, "x", NULL);
        check_refused(&w, sizeof w - 1, "bytes");
        check_refused(&w, sizeof w + 1, "bytes");
        check_refused(NULL, sizeof w, "bytes");
        struct wire_error bad = w;
        bad.magic = 0x62726731;
        check_refused(&bad, sizeof bad, "magic");
        bad = w;
        bad.errnum = -5;
        check_refused(&bad, sizeof bad, "errno");
        bad.errnum = WIRE_ERRNO_MAX + 1;
        check_refused(&bad, sizeof bad, "errno");
        bad = w;
        memset(bad.text, 'A', sizeof bad.text);  /* no end */
        check_refused(&bad, sizeof bad, "end");
        bad = w;
        memset(bad.where, 'A', sizeof bad.where);
        check_refused(&bad, sizeof bad, "end");
        bad = w;
        strcpy(bad.where, "step\x1b[2J");
        check_refused(&bad, sizeof bad, "plain word");
}

/* An exit code that would read as success, or as a signal's: 125. */
static void test_decode_exit_codes(void **state)
{
        (void)state;
        const int32_t codes[] = { 0, -1, 256, INT32_MAX, INT32_MIN };
        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
                struct wire_error w = encoded(1, 0, "x", NULL);
                w.exit_code = codes[i];
                brig_error *err = NULL;
                int code = 0;
                wire_error_decode(&w, sizeof w, &code, &err);
                assert_int_equal(code, BRIG_EXIT_SETUP);
                assert_int_equal(err->exit_code, BRIG_EXIT_SETUP);
                brig_error_free(&err);
        }
}

/* Control characters in the text (a name the sandbox chose) arrive as
 * \xNN text — C0, DEL and UTF-8's C1 (U+009B is a CSI to xterm) — and a
 * new line stays one; other UTF-8 is kept. */
static void test_decode_escapes_controls(void **state)
{
        (void)state;
        struct wire_error w = encoded(127, 0, "a\x1b]52;c;eA==\x07 b\xc2\x9b" "2J c\x7f d\ne \xc3\xa9", NULL);
        brig_error *err = NULL;
        wire_error_decode(&w, sizeof w, NULL, &err);
        assert_string_equal(err->msg, "a\\x1b]52;c;eA==\\x07 b\\xc2\\x9b" "2J c\\x7f d\ne \xc3\xa9");
        brig_error_free(&err);
        /* Unicode's bidirectional controls reorder the rest of the line:
         * "/tmp/<RLO>txt.exe" reads as "/tmp/exe.txt" (U+202E, U+2066,
         * U+061C, U+200F); their neighbours (U+202F, U+2065, U+2010) stay */
        w = encoded(1, 0, "/tmp/\xe2\x80\xaetxt.exe \xe2\x81\xa6x \xd8\x9cy \xe2\x80\x8fz "
                          "\xe2\x80\xaf \xe2\x81\xa5 \xe2\x80\x90", NULL);
        wire_error_decode(&w, sizeof w, NULL, &err);
        assert_string_equal(err->msg, "/tmp/\\xe2\\x80\\xaetxt.exe \\xe2\\x81\\xa6x \\xd8\\x9cy \\xe2\\x80\\x8fz "
                                      "\xe2\x80\xaf \xe2\x81\xa5 \xe2\x80\x90");
        brig_error_free(&err);
        /* a cut sequence at the end reads nothing past it */
        assert_int_equal(text_control_len("\xe2\x80"), 0);
        assert_int_equal(text_control_len("\xe2"), 0);
        assert_int_equal(text_control_len("\xc2"), 0);
        assert_int_equal(text_control_len("\xe2\x80\xae"), 3);
}

/* text_escaped: what the CLI prints of text a sandbox chose. Newlines
 * stay only when multiline; every byte of a control becomes \xNN, so the
 * worst case (controls alone) is four times as long; a sequence cut at
 * the end is text. */
static void test_text_escaped(void **state)
{
        (void)state;
        char *t = text_escaped("a\nb\x1b[2J\xc2\x9b\xe2\x80\xae.", false);
        assert_string_equal(t, "a\\x0ab\\x1b[2J\\xc2\\x9b\\xe2\\x80\\xae.");
        free(t);
        t = text_escaped("a\nb\x07", true);
        assert_string_equal(t, "a\nb\\x07");
        free(t);
        t = text_escaped("\x01\x02\x7f", false);
        assert_string_equal(t, "\\x01\\x02\\x7f");
        assert_int_equal(strlen(t), 12);
        free(t);
        t = text_escaped("end\xe2\x80", false);
        assert_string_equal(t, "end\xe2\x80");
        free(t);
        t = text_escaped("", true);
        assert_string_equal(t, "");
        free(t);
}

/* An earlier error is the cause: the decoder leaves it as it is. */
static void test_decode_keeps_first_error(void **state)
{
        (void)state;
        brig_error *err = NULL;
        brig_err(&err, EPERM, "first");
        struct wire_error w = encoded(127, ENOENT, "second", NULL);
        assert_int_equal(wire_error_decode(&w, sizeof w, NULL, &err), -ENOENT);
        assert_string_equal(err->msg, "first: Operation not permitted");
        assert_int_equal(err->errnum, EPERM);
        brig_error_free(&err);
        assert_int_equal(wire_error_decode(&w, sizeof w, NULL, NULL), -ENOENT);  /* no error wanted */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_where_prefixes),
                cmocka_unit_test(test_encode_writes_every_byte),
                cmocka_unit_test(test_encode_bounds),
                cmocka_unit_test(test_decode_refuses_forgeries),
                cmocka_unit_test(test_decode_exit_codes),
                cmocka_unit_test(test_decode_escapes_controls),
                cmocka_unit_test(test_decode_keeps_first_error),
                cmocka_unit_test(test_text_escaped),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
