/* test_term_filter.c — unit tests for the terminal output filter
 * (src/lib/controls/term_filter.c): what reaches beyond the screen is dropped,
 * what draws passes unchanged, whatever read() cut the stream into. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controls/term_filter.h"

struct buf {
        char *p;
        size_t n;
};

static struct buf start(struct term_filter *f, size_t n)
{
        term_filter_init(f);
        struct buf b = { malloc(TERM_FILTER_OUT_MAX(n)), 0 };
        assert_non_null(b.p);
        return b;
}

static void feed(struct term_filter *f, struct buf *b, const char *in, size_t len)
{
        b->n += term_filter_feed(f, in, len, b->p + b->n);
}

/* The stream fed in pieces of at most `piece` bytes (0: whole). */
static struct buf run_pieces(const char *in, size_t n, size_t piece)
{
        struct term_filter f;
        struct buf b = start(&f, n);
        size_t step = piece ? piece : (n ? n : 1);
        for (size_t off = 0; off < n; off += step)
                feed(&f, &b, in + off, n - off < step ? n - off : step);
        return b;
}

/* The stream cut once at `cut`. */
static struct buf run_cut(const char *in, size_t n, size_t cut)
{
        struct term_filter f;
        struct buf b = start(&f, n);
        feed(&f, &b, in, cut);
        feed(&f, &b, in + cut, n - cut);
        return b;
}

static void show(char *dst, size_t size, const char *s, size_t n)
{
        size_t o = 0;
        for (size_t i = 0; i < n && o + 5 < size; i++) {
                unsigned char c = (unsigned char)s[i];
                o += (size_t)snprintf(dst + o, size - o, c >= 0x20 && c < 0x7f && c != '\\' ? "%c" : "\\x%02x", c);
        }
        dst[o < size ? o : size - 1] = 0;
}

static void expect_buf(const struct buf *b, const char *in, size_t n, const char *want, size_t wn, const char *how)
{
        if (b->n == wn && memcmp(b->p, want, wn) == 0)
                return;
        char a[600], w[600], i[600];
        show(a, sizeof a, b->p, b->n);
        show(w, sizeof w, want, wn);
        show(i, sizeof i, in, n);
        fail_msg("filter(\"%s\") %s = \"%s\", expected \"%s\"", i, how, a, w);
}

/* The same output whole, a byte at a time, and cut at every offset. */
static void check_n(const char *in, size_t n, const char *want, size_t wn)
{
        struct buf b = run_pieces(in, n, 0);
        expect_buf(&b, in, n, want, wn, "whole");
        free(b.p);
        b = run_pieces(in, n, 1);
        expect_buf(&b, in, n, want, wn, "byte by byte");
        free(b.p);
        for (size_t cut = 0; cut <= n; cut++) {
                b = run_cut(in, n, cut);
                char how[64];
                snprintf(how, sizeof how, "cut at %zu", cut);
                expect_buf(&b, in, n, want, wn, how);
                free(b.p);
        }
}

#define check(in, want) check_n(in, sizeof(in) - 1, want, sizeof(want) - 1)
#define passes(in) check(in, in)

static void text_passes(void **state)
{
        (void)state;
        passes("hello, world\r\n\tx\b\a");
        passes("gr\xc3\xbc\xc3\x9f dich \xe2\x82\xac \xe2\x86\x92 \xe2\x80\xba \xe6\x97\xa5\xe6\x9c\xac "
               "\xf0\x9f\x98\x80 e\xcc\x81");  /* 0x80-0x9f as continuation bytes stay */
        passes("\xc2\xa0\xc2\xbf\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf\xf0\x90\x80\x80"
               "\xf4\x8f\xbf\xbf");  /* the edges of every range */
        passes("\x7f\x0e\x0f\x18\x1a");
}

static void drawing_passes(void **state)
{
        (void)state;
        passes("\x1b[31mred\x1b[0m \x1b[1;38;5;196mx\x1b[38:2::1:2:3m\x1b[m");
        passes("\x1b[H\x1b[2J\x1b[3J\x1b[10;20H\x1b[5A\x1b[B\x1b[2C\x1b[D\x1b[K\x1b[?K\x1b[1;24r\x1b[S\x1b[2T");
        passes("\x1b[?1049h\x1b[?25l\x1b[?2004h\x1b[?1000h\x1b[?1006h\x1b[?1004h\x1b[?2026h\x1b[?2004l");
        passes("\x1b[4 q\x1b[!p\x1b[>4;1m\x1b[>1u\x1b[<u\x1b[=1;1u\x1b[s\x1b[u\x1b[?1s\x1b[?1r\x1b[4h\x1b[4l");
        passes("\x1b" "7\x1b" "8\x1b=\x1b>\x1bM\x1b" "D\x1b" "E\x1b(0q\x1b(B\x1b)0\x1b#8\x1b" "c");
}

static void osc_dropped(void **state)
{
        (void)state;
        /* OSC 52 clipboard, with BEL, with ST, and the 8-bit/UTF-8 C1 forms */
        check("a\x1b]52;c;ZWNobyBDQU5BUlk=\x07z", "az");
        check("a\x1b]52;c;ZWNobyBDQU5BUlk=\x1b\\z", "az");
        check("a\x1b]52;c;?\x07z", "az");  /* the clipboard query */
        check("a\xc2\x9d" "52;c;Wg==\xc2\x9cz", "a52;c;Wg==z");  /* C1s gone: text to any terminal */
        check("a\x9d" "52;c;Wg==\x9cz", "a\xef\xbf\xbd" "52;c;Wg==\xef\xbf\xbdz");
        /* titles, colours, cwd, notifications, iTerm file, font */
        check("\x1b]0;owned\x07\x1b]2;owned\x1b\\\x1b]1;x\x07ok", "ok");
        check("\x1b]4;1;?\x07\x1b]10;?\x07\x1b]11;rgb:0/0/0\x07\x1b]12;?\x1b\\ok", "ok");
        check("\x1b]7;file://host/etc\x07\x1b]9;hi\x07\x1b]777;notify;a;b\x07ok", "ok");
        check("\x1b]1337;File=name=eA==;inline=1:AAAA\x07\x1b]50;?\x07ok", "ok");
        /* OSC 8: the link goes, its text stays */
        check("see \x1b]8;;https://evil.example/\x1b\\https://good.example/\x1b]8;;\x1b\\ now",
              "see https://good.example/ now");
        /* a title with UTF-8 in it, 0x9c included, does not end early */
        check("\x1b]0;\xc5\x9c\xc5\x93\x07ok", "ok");
}

static void strings_dropped(void **state)
{
        (void)state;
        check("a\x1bP$qm\x1b\\b", "ab");                            /* DECRQSS */
        check("a\x1bP+q544e\x1b\\b", "ab");                          /* XTGETTCAP */
        check("a\x1bPtmux;\x1b\x1b]52;c;Wg==\x07\x1b\\b", "ab");       /* tmux passthrough */
        check("a\x1bP0;1;0q\"1;1;1;1#0~~@@\x1b\\b", "ab");           /* sixel */
        check("a\x1bP1;1|17/6563686F0A\x1b\\b", "ab");               /* DECUDK: F6 types a command */
        check("a\x1b_Ga=T,t=f;L2V0Yy9wYXNzd2Q=\x1b\\b", "ab");       /* kitty graphics from a file */
        check("a\x1b^pm\x1b\\b\x1bXsos\x1b\\c", "abc");               /* PM, SOS */
        check("a\xc2\x90$qm\xc2\x9c" "b", "a$qmb");
        check("a\xc2\x9f" "Gx\xc2\x9c" "b", "aGxb");
        /* CAN and SUB abort a string; ESC other than ST ends it and starts anew */
        check("a\x1b]0;x\x18" "b\x1b]0;y\x1a" "c\x1b]0;z\x1b[31md", "abc\x1b[31md");
}

static void queries_dropped(void **state)
{
        (void)state;
        check("a\x1b[5nb\x1b[6nc\x1b[?6nd\x1b[?996ne", "abcde");        /* DSR */
        check("a\x1b[cb\x1b[0cc\x1b[>cd\x1b[>0ce\x1b[=cf", "abcdef");    /* DA1 DA2 DA3 */
        check("a\x1b[?2026$pb\x1b[4$pc", "abc");                        /* DECRQM */
        check("a\x1b[21tb\x1b[14tc\x1b[18td\x1b[1te\x1b[3;0;0tf\x1b[8;100;100tg\x1b[22;0t", "abcdefg");
        check("a\x1b[>qb\x1b[>0qc", "abc");                              /* XTVERSION */
        check("a\x1b[1;1;1;1;1*yb", "ab");                               /* DECRQCRA */
        check("a\x1b[?1;1Sb\x1b[?4mc\x1b[?ud\x1b[xe\x1b[1$wf\x1b[1$ug\x1b[#Rh", "abcdefgh");
        check("a\x1b[5ib\x1b[4ic\x1b[0id", "abcd");                      /* media copy: the printer */
        check("a\x1bZ" "b\xc2\x9a" "c\x05" "d", "abcd");                 /* DECID, SCI, ENQ */
        check("a\xc2\x9b" "6nb\x9b" "6nc", "a6nb\xef\xbf\xbd" "6nc");
}

static void modes_beyond_dropped(void **state)
{
        (void)state;
        check("a\x1b[?2lb\x1b[?1;2lc\x1b[2hd\x1b[?2he", "abcd\x1b[?2he");  /* VT52 mode, keyboard lock */
        check("a\x1b%@b\x1b%Gc\x1bk title\x1b\\d", "abc titled");   /* leave UTF-8; screen's title */
        check("a\x1b[1?hb\x1b[1$1pc\x1b[1 $qd", "abcd");  /* malformed: not what draws */
}

static void controls_inside_sequences(void **state)
{
        (void)state;
        /* executed where they stand, so passed on at once */
        check("\x1b[3\n1m", "\n\x1b[31m");
        check("\x1b[6\rn", "\r");
        check("\x1b[3\x05" "1m", "\x1b[31m");
        check("\x1b[3\x1b[32m", "\x1b[32m");
        check("\x1b[3\x18x", "\x18x");
        check("\x1b\x1b\x1b[1m", "\x1b[1m");
        check("\x1b[3\x7f" "1m", "\x1b[31m");
        check("\x1b[3\xc3\xa9m", "\xc3\xa9m");
}

static void utf8_invalid_replaced(void **state)
{
        (void)state;
        check("a\xc0\x9b[6n", "a\xef\xbf\xbd\xef\xbf\xbd[6n");  /* an overlong ESC */
        check("a\xe0\x80\x9bz", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
        check("a\xed\xa0\x80z", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");  /* a surrogate */
        check("a\xf4\x90\x80\x80z", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
        check("a\xe2\x82z", "a\xef\xbf\xbdz");  /* cut short */
        check("a\xe2\x82\x1b[1mz", "a\xef\xbf\xbd\x1b[1mz");
        check("a\xff\xfe\x80z", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz");
}

static void long_sequences_dropped_whole(void **state)
{
        (void)state;
        char in[4096];
        size_t n = 0;
        n += (size_t)sprintf(in, "a\x1b[");
        while (n < 1000)
                n += (size_t)sprintf(in + n, "1;");
        n += (size_t)sprintf(in + n, "mb");
        check_n(in, n, "ab", 2);
        /* exactly at the limit it still passes */
        n = (size_t)sprintf(in, "\x1b[");
        while (n < TERM_FILTER_SEQ_MAX - 1)
                in[n++] = '1';
        in[n++] = 'm';
        check_n(in, n, in, n);
        in[n - 1] = '1';
        in[n++] = 'm';
        check_n(in, n, "", 0);
        /* a long string costs no memory: it is skipped */
        static char big[300000];
        n = (size_t)sprintf(big, "a\x1b]52;c;");
        memset(big + n, 'A', sizeof big - n - 8);
        n = sizeof big - 8;
        n += (size_t)sprintf(big + n, "\x07z");
        struct buf b = run_pieces(big, n, 4096);
        expect_buf(&b, "(long OSC 52)", 13, "az", 2, "in 4 KiB pieces");
        free(b.p);
}

static void unterminated_at_end_dropped(void **state)
{
        (void)state;
        check("abc\x1b", "abc");
        check("abc\x1b[31", "abc");
        check("abc\x1b]52;c;Wg==", "abc");
        check("abc\x1bP$q", "abc");
        check("abc\x1b(", "abc");
        check("abc\xe2\x82", "abc");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(text_passes),
                cmocka_unit_test(drawing_passes),
                cmocka_unit_test(osc_dropped),
                cmocka_unit_test(strings_dropped),
                cmocka_unit_test(queries_dropped),
                cmocka_unit_test(modes_beyond_dropped),
                cmocka_unit_test(controls_inside_sequences),
                cmocka_unit_test(utf8_invalid_replaced),
                cmocka_unit_test(long_sequences_dropped_whole),
                cmocka_unit_test(unterminated_at_end_dropped),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
