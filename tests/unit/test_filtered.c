/* test_filtered.c — unit tests for the filtered egress mode's pure parts:
 * the TLS SNI and HTTP Host sniffers (sniff.c), the DNS stub's messages
 * (dnsmsg.c), brig's address pool (names.c) and the stub's judgement
 * (dnsstub.c). Adversarial inputs included: split and byte-by-byte
 * records, lying length fields, names that are not names. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

/* ---- building TLS ClientHellos -------------------------------------------- */

struct bytes {
        uint8_t b[SNIFF_MAX + 4096];
        size_t n;
};

static void put(struct bytes *o, const void *p, size_t n)
{
        assert_true(o->n + n <= sizeof o->b);
        memcpy(o->b + o->n, p, n);
        o->n += n;
}

static void put8(struct bytes *o, unsigned v)
{
        uint8_t b = (uint8_t)v;
        put(o, &b, 1);
}

static void put16(struct bytes *o, unsigned v)
{
        put8(o, v >> 8);
        put8(o, v);
}

static void put24(struct bytes *o, size_t v)
{
        put8(o, (unsigned)(v >> 16));
        put16(o, (unsigned)(v & 0xffff));
}

/* Patch a 16-bit big-endian field at off. */
static void set16(struct bytes *o, size_t off, unsigned v)
{
        o->b[off] = (uint8_t)(v >> 8);
        o->b[off + 1] = (uint8_t)v;
}

/* How a hello is to be built (and how it lies). */
struct hello_spec {
        const char *sni;       /* NULL: no server_name extension */
        size_t sni_len;        /* bytes of sni (may hold NUL); 0: strlen */
        bool no_extensions;    /* stop after the compression methods */
        int sni_ext_delta;     /* added to the server_name extension's length field */
        int sni_list_delta;    /* added to its server_name_list length field */
        int sni_name_delta;    /* added to the host_name's length field */
        int ext_total_delta;   /* added to the extensions block's length field */
        bool other_name_first; /* a name of type 1 (not host_name) before the host_name */
        size_t padding;        /* a padding extension (RFC 7685) of that many bytes, before the name */
        bool sni_twice;        /* a second server_name extension naming "second.test" */
        bool two_names;        /* a second host_name in the same list */
        bool ech;              /* an encrypted_client_hello extension (as GREASE ECH sends it) */
};

/* Offsets inside the handshake message, for tests that patch them. */
struct hello_offsets {
        size_t sni_ext;        /* the server_name extension's type field */
};

/* Where the server_name_list length field is, just after the first
 * host_name (and the optional other name) went in. */
static size_t offs_list(const struct bytes *o, size_t nl, size_t other)
{
        return o->n - 14 - nl - 3 - other - 2;
}

/* A ClientHello handshake message (no record header) into o. */
static void hello_msg(struct bytes *o, const struct hello_spec *sp, struct hello_offsets *offs)
{
        o->n = 0;
        put8(o, 0x01);        /* client_hello */
        put24(o, 0);          /* length: patched below */
        put16(o, 0x0303);
        for (int i = 0; i < 32; i++)
                put8(o, (unsigned)(0xa0 + i));  /* random */
        put8(o, 32);
        for (int i = 0; i < 32; i++)
                put8(o, (unsigned)i);           /* legacy_session_id */
        put16(o, 6);
        put16(o, 0x1301);
        put16(o, 0x1302);
        put16(o, 0x1303);
        put8(o, 1);
        put8(o, 0);           /* null compression */
        if (!sp->no_extensions) {
                size_t ext_len_at = o->n;
                put16(o, 0);
                /* supported_versions: TLS 1.3 */
                put16(o, 0x002b);
                put16(o, 3);
                put8(o, 2);
                put16(o, 0x0304);
                if (sp->padding) {
                        put16(o, 0x0015);
                        put16(o, (unsigned)sp->padding);
                        for (size_t i = 0; i < sp->padding; i++)
                                put8(o, 0);
                }
                if (sp->ech) {
                        put16(o, 0xfe0d);
                        put16(o, 8);
                        put(o, "\x00\x00\x01\x00\x01\x07\x00\x00", 8);
                }
                if (sp->sni) {
                        size_t nl = sp->sni_len ? sp->sni_len : strlen(sp->sni);
                        size_t other = sp->other_name_first ? 3 + 4 : 0;
                        if (offs)
                                offs->sni_ext = o->n;
                        put16(o, 0x0000);
                        put16(o, (unsigned)((int)(2 + other + 3 + nl) + sp->sni_ext_delta));
                        put16(o, (unsigned)((int)(other + 3 + nl) + sp->sni_list_delta));
                        if (sp->other_name_first) {
                                put8(o, 1);
                                put16(o, 4);
                                put(o, "zzzz", 4);
                        }
                        put8(o, 0);   /* host_name */
                        put16(o, (unsigned)((int)nl + sp->sni_name_delta));
                        put(o, sp->sni, nl);
                        if (sp->two_names) {
                                put8(o, 0);
                                put16(o, 11);
                                put(o, "second.test", 11);
                                set16(o, offs_list(o, nl, other), (unsigned)(other + 3 + nl + 14));
                                set16(o, offs_list(o, nl, other) - 2, (unsigned)(2 + other + 3 + nl + 14));
                        }
                }
                if (sp->sni_twice) {
                        put16(o, 0x0000);
                        put16(o, 16);
                        put16(o, 14);
                        put8(o, 0);
                        put16(o, 11);
                        put(o, "second.test", 11);
                }
                /* signature_algorithms, after the name */
                put16(o, 0x000d);
                put16(o, 4);
                put16(o, 2);
                put16(o, 0x0804);
                set16(o, ext_len_at, (unsigned)((int)(o->n - ext_len_at - 2) + sp->ext_total_delta));
        }
        size_t body = o->n - 4;
        o->b[1] = (uint8_t)(body >> 16);
        o->b[2] = (uint8_t)(body >> 8);
        o->b[3] = (uint8_t)body;
}

/* Wrap a handshake message into TLS records, a new record starting at
 * each of the (ascending) cut offsets. */
static void records(struct bytes *out, const struct bytes *hs, const size_t *cuts, size_t ncuts)
{
        out->n = 0;
        size_t from = 0;
        for (size_t i = 0; i <= ncuts; i++) {
                size_t to = i < ncuts ? cuts[i] : hs->n;
                put8(out, 0x16);
                put16(out, 0x0301);
                put16(out, (unsigned)(to - from));
                put(out, hs->b + from, to - from);
                from = to;
        }
}

static int sni(const struct bytes *b, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        memset(host, 0, EGRESS_HOST_MAX + 1);
        /* a heap copy of exactly len bytes: ASan sees any over-read */
        uint8_t *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, b->b, len);
        int r = sniff_tls_sni(copy, len, host);
        free(copy);
        return r;
}

static int sni_of(const struct hello_spec *sp, char host[EGRESS_HOST_MAX + 1])
{
        static struct bytes hs, rec;
        hello_msg(&hs, sp, NULL);
        records(&rec, &hs, NULL, 0);
        return sni(&rec, rec.n, host);
}

/* A real TLS 1.3 ClientHello (Python's ssl module, OpenSSL 3, with
 * server_hostname='example.test'), as it went on the wire. */
static const uint8_t real_hello[] = {
        0x16, 0x03, 0x01, 0x00, 0xf1, 0x01, 0x00, 0x00, 0xed, 0x03, 0x03, 0x38,
        0x54, 0xd0, 0x8c, 0x1a, 0x6c, 0x19, 0xc6, 0x1b, 0x12, 0xef, 0xf2, 0x89,
        0x43, 0x53, 0xda, 0xc0, 0x10, 0xe0, 0x67, 0x7c, 0x3a, 0xcc, 0xd2, 0xd0,
        0x1f, 0xb8, 0xb8, 0x6f, 0x55, 0xc7, 0x4e, 0x20, 0xfa, 0x27, 0xc3, 0x5a,
        0x71, 0x13, 0x96, 0x0e, 0x51, 0x11, 0xa0, 0x89, 0xa0, 0x74, 0x75, 0x55,
        0x45, 0xbe, 0x12, 0x48, 0x30, 0xbc, 0x48, 0x98, 0xc9, 0x3e, 0x5e, 0xb7,
        0xe6, 0x8c, 0x94, 0xef, 0x00, 0x08, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01,
        0x00, 0xff, 0x01, 0x00, 0x00, 0x9c, 0x00, 0x00, 0x00, 0x11, 0x00, 0x0f,
        0x00, 0x00, 0x0c, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x74,
        0x65, 0x73, 0x74, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00,
        0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00,
        0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01,
        0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00,
        0x00, 0x00, 0x0d, 0x00, 0x1e, 0x00, 0x1c, 0x04, 0x03, 0x05, 0x03, 0x06,
        0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08,
        0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x00,
        0x2b, 0x00, 0x03, 0x02, 0x03, 0x04, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01,
        0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x11, 0xc9,
        0x6c, 0xd8, 0xce, 0xa2, 0xec, 0xf7, 0xae, 0xc3, 0x6b, 0x94, 0xcd, 0x44,
        0x1d, 0xb1, 0x6f, 0x5e, 0xe3, 0x59, 0x09, 0x4d, 0xdd, 0x37, 0x4a, 0x02,
        0x5f, 0x05, 0x5f, 0x47, 0x7d, 0x7b,

};

/* Every prefix of b: SNIFF_MORE until the server_name extension is in,
 * then SNIFF_NAME with the whole name (never a piece of it). */
static void check_prefixes(const struct bytes *b, const char *want)
{
        char host[EGRESS_HOST_MAX + 1];
        bool named = false;
        for (size_t k = 0; k <= b->n; k++) {
                int r = sni(b, k, host);
                if (r == SNIFF_NAME && strcmp(host, want) == 0)
                        named = true;
                else if (named || r != SNIFF_MORE)
                        fail_msg("prefix %zu of %zu: %d '%s'", k, b->n, r, host);
        }
        assert_true(named);
}

static void test_sni_real_hello(void **state)
{
        (void)state;
        struct bytes b = { .n = 0 };
        put(&b, real_hello, sizeof real_hello);
        char host[EGRESS_HOST_MAX + 1];
        assert_int_equal(sni(&b, b.n, host), SNIFF_NAME);
        assert_string_equal(host, "example.test");
        /* byte by byte, as a slow client sends it: more until the end */
        check_prefixes(&b, "example.test");
        assert_int_equal(sni(&b, 0x60, host), SNIFF_MORE);  /* the name not yet in */
        /* more bytes after the hello (early data, a second record) change nothing */
        put(&b, "\x17\x03\x03\x00\x02hi", 7);
        assert_int_equal(sni(&b, b.n, host), SNIFF_NAME);
        assert_string_equal(host, "example.test");
}

static void test_sni_split_records(void **state)
{
        (void)state;
        struct hello_spec sp = { .sni = "split.example.test" };
        struct bytes hs, rec;
        struct hello_offsets offs;
        hello_msg(&hs, &sp, &offs);
        char host[EGRESS_HOST_MAX + 1];
        /* cut in the middle of the name, and again one byte later */
        size_t name_at = offs.sni_ext + 9;
        size_t cuts[][2] = { { name_at + 5, 0 }, { 1, 0 }, { 3, name_at + 6 }, { offs.sni_ext, offs.sni_ext + 1 } };
        size_t ncuts[] = { 1, 1, 2, 2 };
        for (size_t c = 0; c < sizeof ncuts / sizeof ncuts[0]; c++) {
                records(&rec, &hs, cuts[c], ncuts[c]);
                assert_int_equal(sni(&rec, rec.n, host), SNIFF_NAME);
                assert_string_equal(host, "split.example.test");
                check_prefixes(&rec, "split.example.test");
        }
        /* every handshake byte in a record of its own */
        size_t each[600];
        assert_true(hs.n - 1 <= sizeof each / sizeof each[0]);
        for (size_t i = 1; i < hs.n; i++)
                each[i - 1] = i;
        records(&rec, &hs, each, hs.n - 1);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_NAME);
        assert_string_equal(host, "split.example.test");
        check_prefixes(&rec, "split.example.test");
}

static void test_sni_no_name(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        struct hello_spec none = { .sni = NULL };
        assert_int_equal(sni_of(&none, host), SNIFF_NO_NAME);
        struct hello_spec bare = { .no_extensions = true };
        assert_int_equal(sni_of(&bare, host), SNIFF_NO_NAME);
        /* an empty name, and a server_name list that holds only other types */
        struct hello_spec empty = { .sni = "", .sni_len = 0 };
        assert_int_equal(sni_of(&empty, host), SNIFF_BAD);
        /* a non-host_name entry first is skipped */
        struct hello_spec other = { .sni = "after.other.test", .other_name_first = true };
        assert_int_equal(sni_of(&other, host), SNIFF_NAME);
        assert_string_equal(host, "after.other.test");
}

static void test_sni_lying_lengths(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        /* server_name list length that does not match its extension */
        struct hello_spec list_long = { .sni = "liar.test", .sni_list_delta = 1 };
        assert_int_equal(sni_of(&list_long, host), SNIFF_BAD);
        struct hello_spec list_short = { .sni = "liar.test", .sni_list_delta = -1 };
        assert_int_equal(sni_of(&list_short, host), SNIFF_BAD);
        /* host_name length past the list's end, or short of it */
        struct hello_spec name_long = { .sni = "liar.test", .sni_name_delta = 40 };
        assert_int_equal(sni_of(&name_long, host), SNIFF_BAD);
        struct hello_spec name_short = { .sni = "liar.test", .sni_name_delta = -5, .sni_list_delta = 0 };
        assert_int_equal(sni_of(&name_short, host), SNIFF_BAD);
        /* extension length beyond the hello, extensions block length
         * beyond it or short of it: a server would refuse such a hello,
         * so no name from it counts — even one that came whole first */
        struct hello_spec ext_long = { .sni = "liar.test", .sni_ext_delta = 30000 };
        struct hello_spec total_long = { .sni = NULL, .ext_total_delta = 30000 };
        struct hello_spec late_lie = { .sni = "early.test", .ext_total_delta = 30000 };
        struct hello_spec total_short = { .sni = "early.test", .ext_total_delta = -2 };
        assert_int_equal(sni_of(&ext_long, host), SNIFF_BAD);
        assert_int_equal(sni_of(&total_long, host), SNIFF_BAD);
        assert_int_equal(sni_of(&late_lie, host), SNIFF_BAD);
        assert_int_equal(sni_of(&total_short, host), SNIFF_BAD);
        /* a record length of 0, or beyond TLS's limit */
        struct bytes b = { .n = 0 };
        put(&b, "\x16\x03\x01\x00\x00", 5);
        assert_int_equal(sni(&b, b.n, host), SNIFF_BAD);
        b.n = 0;
        put(&b, "\x16\x03\x01\x40\x01\x01\x00\x00\x10", 9);
        assert_int_equal(sni(&b, b.n, host), SNIFF_BAD);
        /* a session id longer than 32 */
        struct hello_spec ok = { .sni = "ok.test" };
        struct bytes hs, rec;
        hello_msg(&hs, &ok, NULL);
        hs.b[4 + 2 + 32] = 33;
        records(&rec, &hs, NULL, 0);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_BAD);
        /* an odd cipher_suites length */
        hello_msg(&hs, &ok, NULL);
        hs.b[4 + 2 + 32 + 1 + 32 + 1] = 5;
        records(&rec, &hs, NULL, 0);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_BAD);
        /* two names: in two extensions, or two host_names in one list */
        struct hello_spec twice = { .sni = "first.test", .sni_twice = true };
        assert_int_equal(sni_of(&twice, host), SNIFF_BAD);
        struct hello_spec two = { .sni = "first.test", .two_names = true };
        assert_int_equal(sni_of(&two, host), SNIFF_BAD);
        struct hello_spec only_second = { .sni = NULL, .sni_twice = true };
        assert_int_equal(sni_of(&only_second, host), SNIFF_NAME);
        assert_string_equal(host, "second.test");
}

/* Big hellos (post-quantum key shares, padding): read whole across records
 * and segments up to SNIFF_HELLO_MAX; longer ones are refused, never
 * passed for want of a name. */
static void test_sni_big_hellos(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        static struct bytes hs, rec;
        /* 20 KB: two records (one can hold 16 KiB), the name after the padding */
        struct hello_spec big = { .sni = "big.example.test", .padding = 20000 };
        hello_msg(&hs, &big, NULL);
        size_t cut[] = { 16384 };
        records(&rec, &hs, cut, 1);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_NAME);
        assert_string_equal(host, "big.example.test");
        for (size_t k = 0; k < rec.n; k += 997)
                assert_int_equal(sni(&rec, k, host), SNIFF_MORE);  /* segment by segment: wait */
        /* 500-byte records: 41 of them */
        size_t cuts[64], nc = 0;
        for (size_t at = 500; at < hs.n; at += 500)
                cuts[nc++] = at;
        records(&rec, &hs, cuts, nc);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_NAME);
        /* how far the egress may skip parsing: never past a verdict */
        assert_int_equal(sniff_tls_need(rec.b, rec.n), rec.n);
        assert_int_equal(sniff_tls_need(rec.b, 0), 0);
        for (size_t k = 1; k < rec.n; k += 211) {
                size_t need = sniff_tls_need(rec.b, k);
                assert_true(need >= k && need <= rec.n);
                if (need > k)
                        assert_int_equal(sni(&rec, need - 1, host), SNIFF_MORE);
        }
        assert_true(sniff_tls_need(rec.b, 9) > 20000);  /* the declared length is known at once */
        /* the largest hello taken, and one byte more */
        struct hello_spec max = { .sni = "max.test", .padding = SNIFF_HELLO_MAX - 4 - 132 };
        hello_msg(&hs, &max, NULL);
        size_t pad = SNIFF_HELLO_MAX - hs.n;
        max.padding += pad;
        hello_msg(&hs, &max, NULL);
        assert_int_equal(hs.n, SNIFF_HELLO_MAX);
        size_t cut2[] = { 16384, 32768 };
        records(&rec, &hs, cut2, 1);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_NAME);
        max.padding++;
        hello_msg(&hs, &max, NULL);
        records(&rec, &hs, cut2, 2);
        assert_int_equal(sni(&rec, 9, host), SNIFF_TOO_BIG);  /* known from its length field */
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_TOO_BIG);
        /* GREASE ECH beside a real name: the outer name is the name */
        struct hello_spec ech = { .sni = "outer.test", .ech = true };
        assert_int_equal(sni_of(&ech, host), SNIFF_NAME);
        assert_string_equal(host, "outer.test");
}

static void test_sni_not_tls(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        struct bytes b = { .n = 0 };
        put(&b, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 32);
        assert_int_equal(sni(&b, b.n, host), SNIFF_NOT_THIS);
        b.n = 0;
        put(&b, "SSH-2.0-OpenSSH_9.2p1\r\n", 23);
        assert_int_equal(sni(&b, b.n, host), SNIFF_NOT_THIS);
        assert_int_equal(sni(&b, 1, host), SNIFF_NOT_THIS);
        /* one byte of a handshake record: could still be TLS */
        b.n = 0;
        put(&b, "\x16\x02", 2);
        assert_int_equal(sni(&b, 0, host), SNIFF_MORE);
        assert_int_equal(sni(&b, 1, host), SNIFF_MORE);
        assert_int_equal(sni(&b, 2, host), SNIFF_NOT_THIS);  /* not version 3.x */
        /* application data, an alert: not a handshake */
        b.n = 0;
        put(&b, "\x17\x03\x03\x00\x05hello", 10);
        assert_int_equal(sni(&b, b.n, host), SNIFF_NOT_THIS);
        b.n = 0;
        put(&b, "\x15\x03\x03\x00\x02\x02\x28", 7);
        assert_int_equal(sni(&b, b.n, host), SNIFF_NOT_THIS);
        /* a handshake that is not a ClientHello (a ServerHello) */
        struct hello_spec sp = { .sni = "x.test" };
        struct bytes hs, rec;
        hello_msg(&hs, &sp, NULL);
        hs.b[0] = 0x02;
        records(&rec, &hs, NULL, 0);
        assert_int_equal(sni(&rec, rec.n, host), SNIFF_NOT_THIS);
}

static void test_sni_names(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        struct hello_spec upper = { .sni = "WWW.Example.TEST" };
        assert_int_equal(sni_of(&upper, host), SNIFF_NAME);
        assert_string_equal(host, "www.example.test");
        struct hello_spec dot = { .sni = "trailing.example.test." };
        assert_int_equal(sni_of(&dot, host), SNIFF_NAME);
        assert_string_equal(host, "trailing.example.test");
        const char *bad[] = { "exa mple.test", "a\r\nHost: b.test", "a/b.test", "a..b.test", ".a.test",
                              "a.test..", "192.0.2.1", "a%2e.test", "[::1]", "a:443.test", "\xc3\xa9.test" };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct hello_spec sp = { .sni = bad[i] };
                int r = sni_of(&sp, host);
                if (r != SNIFF_BAD)
                        fail_msg("SNI '%s': %d, expected SNIFF_BAD", bad[i], r);
        }
        /* a NUL inside the name: never cut at it */
        struct hello_spec nul = { .sni = "good.test\0.evil.test", .sni_len = 20 };
        assert_int_equal(sni_of(&nul, host), SNIFF_BAD);
        /* the longest name is fine, one more byte is not */
        char longest[EGRESS_HOST_MAX + 2];
        memset(longest, 'a', sizeof longest);
        for (size_t i = 63; i < EGRESS_HOST_MAX; i += 64)
                longest[i] = '.';
        longest[EGRESS_HOST_MAX] = '\0';
        struct hello_spec max = { .sni = longest };
        assert_int_equal(sni_of(&max, host), SNIFF_NAME);
        assert_string_equal(host, longest);
        longest[EGRESS_HOST_MAX] = 'a';
        longest[EGRESS_HOST_MAX + 1] = '\0';
        struct hello_spec over = { .sni = longest };
        assert_int_equal(sni_of(&over, host), SNIFF_BAD);
}

/* ---- HTTP Host ------------------------------------------------------------ */

static int http(const char *text, size_t len, char host[EGRESS_HOST_MAX + 1])
{
        memset(host, 0, EGRESS_HOST_MAX + 1);
        char *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, text, len);
        int r = sniff_http_host(copy, len, host);
        free(copy);
        return r;
}

static void expect_http(const char *text, int want, const char *want_host)
{
        char host[EGRESS_HOST_MAX + 1];
        int r = http(text, strlen(text), host);
        if (r != want)
                fail_msg("'%s': %d, expected %d", text, r, want);
        if (want_host && strcmp(host, want_host) != 0)
                fail_msg("'%s': host '%s', expected '%s'", text, host, want_host);
}

static void test_http_host(void **state)
{
        (void)state;
        expect_http("GET / HTTP/1.1\r\nHost: www.example.test\r\nAccept: */*\r\n\r\n", SNIFF_NAME, "www.example.test");
        expect_http("GET / HTTP/1.1\r\nUser-Agent: x\r\nHost: Example.TEST:8080\r\n\r\n", SNIFF_NAME,
                    "example.test");
        expect_http("POST /x HTTP/1.0\r\nhost:\tTrail.Test. \r\n\r\nbody", SNIFF_NAME, "trail.test");
        expect_http("OPTIONS * HTTP/1.1\r\nHOST: star.test\r\n\r\n", SNIFF_NAME, "star.test");
        /* the first Host wins; a header that ends in "host" is not Host */
        expect_http("GET / HTTP/1.1\r\nX-Forwarded-Host: evil.test\r\nHost: good.test\r\n\r\n", SNIFF_NAME,
                    "good.test");
        expect_http("GET / HTTP/1.1\r\nX-Host: evil.test\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* a bracketed IPv6 literal is an address, not a name: the
         * connection's own destination is what gets judged */
        expect_http("GET / HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: []\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: 192.0.2.1\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* names that are not names */
        expect_http("GET / HTTP/1.1\r\nHost: a b.test\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: \r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: :80\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* missing Host */
        expect_http("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", SNIFF_NO_NAME, NULL);
        expect_http("GET / HTTP/1.0\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* Host after the head (in the body) does not count */
        expect_http("GET / HTTP/1.1\r\nA: b\r\n\r\nHost: late.test\r\n\r\n", SNIFF_NO_NAME, NULL);
}

static void test_http_absolute_form(void **state)
{
        (void)state;
        expect_http("GET http://Abs.Example.test:81/x?y HTTP/1.1\r\nHost: other.test\r\n\r\n", SNIFF_NAME,
                    "abs.example.test");
        expect_http("GET HTTP://up.test HTTP/1.1\r\n\r\n", SNIFF_NAME, "up.test");
        expect_http("GET http://[2001:db8::1]:80/ HTTP/1.1\r\nHost: named.test\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* "http://" alone names nothing: the Host header does */
        expect_http("GET http:// HTTP/1.1\r\nHost: named.test\r\n\r\n", SNIFF_NAME, "named.test");
        expect_http("GET http:///path HTTP/1.1\r\nHost: named.test\r\n\r\n", SNIFF_NO_NAME, NULL);
        /* https:// is no absolute-form for plain HTTP: the Host header counts */
        expect_http("GET https://abs.test/ HTTP/1.1\r\nHost: named.test\r\n\r\n", SNIFF_NAME, "named.test");
}

static void test_http_not_http(void **state)
{
        (void)state;
        expect_http("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("SSH-2.0-OpenSSH_9.2p1\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("\x16\x03\x01\x00\xf1", SNIFF_NOT_THIS, NULL);
        expect_http(" GET / HTTP/1.1\r\n\r\n", SNIFF_NOT_THIS, NULL);
        /* runs of blanks between the words and after the version: nginx
         * takes them, so they are a request (and the parser refuses it) */
        expect_http("GET  / HTTP/1.1\r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        expect_http("GET /  HTTP/1.1  \r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        expect_http("GET\thttp://b.test/\tHTTP/1.0\r\n\r\n", SNIFF_NAME, "b.test");
        /* versions with more digits (nginx reads the numbers) */
        expect_http("GET / HTTP/01.10\r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        expect_http("GET / HTTP/1.9\r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        expect_http("GET / HTTP/1.\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("GET / HTTP/11.1\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("GET / HTTP/1.1x\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("GET HTTP/1.1\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);  /* no target */
        /* an odd target is still a request (and the parser refuses it) */
        expect_http("GET foo HTTP/1.1\r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        expect_http("GET ftp://b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", SNIFF_NAME, "a.test");
        /* empty lines first (RFC 9112 2.2: servers may skip them), a long method */
        expect_http("\r\n\r\nGET / HTTP/1.1\r\nHost: after.test\r\n\r\n", SNIFF_NAME, "after.test");
        expect_http("\nGET / HTTP/1.1\r\nHost: after.test\r\n\r\n", SNIFF_NAME, "after.test");
        expect_http("\r\n", SNIFF_MORE, NULL);
        expect_http("VERYLONGMETHODNAMEX / HTTP/1.1\r\nHost: long.test\r\n\r\n", SNIFF_NAME, "long.test");
        expect_http("GET / HTTP/2\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("GET / SPDY/1.1\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        expect_http("GET /\r\nHost: a.test\r\n\r\n", SNIFF_NOT_THIS, NULL);
        /* nginx and Go take a method of any length: a request to come,
         * whatever follows (the parser refuses it) */
        expect_http("AVERYLONGMETHODNAMEOFSIXTYFOURCHARACTERSORMOREWHICHSOMESERVERSTAKE / HTTP/1.1\r\n\r\n",
                    SNIFF_MORE, NULL);
        expect_http("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", SNIFF_NOT_THIS, NULL);  /* the h2 preface */
        /* the SSH banner byte by byte: more while it could be a method, then
         * never a name */
        const char *ssh = "SSH-2.0-OpenSSH_9.2p1\r\n";
        char host[EGRESS_HOST_MAX + 1];
        for (size_t k = 0; k <= strlen(ssh); k++) {
                int r = http(ssh, k, host);
                if (r != SNIFF_MORE && r != SNIFF_NOT_THIS)
                        fail_msg("SSH banner prefix %zu: %d", k, r);
                if (k > 21 && r != SNIFF_NOT_THIS)
                        fail_msg("SSH banner prefix %zu: still %d", k, r);
        }
}

static void test_http_incomplete(void **state)
{
        (void)state;
        char host[EGRESS_HOST_MAX + 1];
        const char *req = "GET /index.html HTTP/1.1\r\nHost: slow.example.test\r\nAccept: */*\r\n\r\n";
        size_t len = strlen(req);
        for (size_t k = 0; k < len; k++)
                if (http(req, k, host) != SNIFF_MORE)
                        fail_msg("prefix %zu: not SNIFF_MORE", k);
        assert_int_equal(http(req, len, host), SNIFF_NAME);
        assert_string_equal(host, "slow.example.test");
        /* a head that never ends: more, however long (the caller bounds
         * it, and refuses) */
        char *big = malloc(SNIFF_MAX + 64);
        assert_non_null(big);
        strcpy(big, "GET / HTTP/1.1\r\nX: ");
        size_t n = strlen(big);
        memset(big + n, 'a', SNIFF_MAX + 64 - n);
        assert_int_equal(http(big, SNIFF_MAX - 1, host), SNIFF_MORE);
        assert_int_equal(http(big, SNIFF_MAX, host), SNIFF_MORE);
        /* the request line decides as soon as it is in */
        assert_int_equal(http("GET / SPDY/3\r\n", 14, host), SNIFF_NOT_THIS);
        assert_int_equal(http("GET / HTTP/1.1\r\n", 16, host), SNIFF_MORE);
        assert_int_equal(http("CONNECT a.test:443 HTTP/1.1\r\n\r\n", 31, host), SNIFF_NO_NAME);
        free(big);
}

/* ---- DNS messages ----------------------------------------------------------- */

/* A query: header (id, flags, qdcount 1) and the question for name. */
static size_t query(uint8_t *out, uint16_t id, uint16_t flags, const char *name, uint16_t qtype, uint16_t qclass)
{
        size_t off = 0;
        out[off++] = (uint8_t)(id >> 8);
        out[off++] = (uint8_t)id;
        out[off++] = (uint8_t)(flags >> 8);
        out[off++] = (uint8_t)flags;
        memcpy(out + off, "\x00\x01\x00\x00\x00\x00\x00\x00", 8);
        off += 8;
        const char *p = name;
        while (*p) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t)(dot - p) : strlen(p);
                out[off++] = (uint8_t)l;
                memcpy(out + off, p, l);
                off += l;
                p += l;
                if (*p == '.')
                        p++;
        }
        out[off++] = 0;
        out[off++] = (uint8_t)(qtype >> 8);
        out[off++] = (uint8_t)qtype;
        out[off++] = (uint8_t)(qclass >> 8);
        out[off++] = (uint8_t)qclass;
        return off;
}

#define DNS_HEADER_LEN 12

static unsigned be16(const uint8_t *p)
{
        return (unsigned)p[0] << 8 | p[1];
}

static int parse(const uint8_t *buf, size_t len, struct dns_question *q)
{
        uint8_t *copy = malloc(len ? len : 1);
        assert_non_null(copy);
        memcpy(copy, buf, len);
        int r = dns_parse_query(copy, len, q);
        free(copy);
        q->question = r == 0 ? buf + DNS_HEADER_LEN : NULL;  /* point into the caller's buffer again */
        return r;
}

static void test_dns_a_query_and_reply(void **state)
{
        (void)state;
        uint8_t qbuf[512], out[512];
        size_t qlen = query(qbuf, 0xbeef, 0x0100 /* RD */, "www.Example.test", DNS_TYPE_A, DNS_CLASS_IN);
        struct dns_question q;
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        assert_int_equal(q.id, 0xbeef);
        assert_string_equal(q.name, "www.Example.test");  /* as asked: normalized later */
        assert_int_equal(q.qtype, DNS_TYPE_A);
        assert_int_equal(q.qclass, DNS_CLASS_IN);
        assert_int_equal(q.question_len, qlen - DNS_HEADER_LEN);
        assert_ptr_equal(q.question, qbuf + DNS_HEADER_LEN);

        struct net_addr a;
        assert_true(net_addr_parse("100.64.0.7", &a));
        size_t n = dns_build_reply(&q, DNS_RCODE_NOERROR, &a, 1, 60, out, sizeof out);
        assert_int_equal(n, qlen + 16);
        assert_int_equal(be16(out), 0xbeef);
        unsigned flags = be16(out + 2);
        assert_true(flags & 0x8000);               /* QR */
        assert_int_equal((flags >> 11) & 0xf, 0);  /* opcode QUERY */
        assert_true(flags & 0x0100);               /* RD copied */
        assert_true(flags & 0x0080);               /* RA */
        assert_false(flags & 0x0200);              /* not truncated */
        assert_int_equal(flags & 0xf, DNS_RCODE_NOERROR);
        assert_int_equal(be16(out + 4), 1);        /* QDCOUNT */
        assert_int_equal(be16(out + 6), 1);        /* ANCOUNT */
        assert_int_equal(be16(out + 8), 0);
        assert_int_equal(be16(out + 10), 0);
        assert_memory_equal(out + DNS_HEADER_LEN, qbuf + DNS_HEADER_LEN, qlen - DNS_HEADER_LEN);
        const uint8_t *ans = out + qlen;
        assert_int_equal(be16(ans), 0xc00c);       /* a pointer to the question's name */
        assert_int_equal(be16(ans + 2), DNS_TYPE_A);
        assert_int_equal(be16(ans + 4), DNS_CLASS_IN);
        assert_int_equal((uint32_t)be16(ans + 6) << 16 | be16(ans + 8), 60);
        assert_int_equal(be16(ans + 10), 4);
        assert_memory_equal(ans + 12, "\x64\x40\x00\x07", 4);

        /* no RD asked, none answered; an AAAA answer has 16 bytes */
        qlen = query(qbuf, 0x0102, 0, "v6.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        assert_true(net_addr_parse("fd62:7269:6700::2", &a));
        n = dns_build_reply(&q, DNS_RCODE_NOERROR, &a, 1, 0x01020304, out, sizeof out);
        assert_int_equal(n, qlen + 28);
        assert_int_equal(be16(out), 0x0102);
        assert_false(be16(out + 2) & 0x0100);
        ans = out + qlen;
        assert_int_equal(be16(ans + 2), DNS_TYPE_AAAA);
        assert_int_equal((uint32_t)be16(ans + 6) << 16 | be16(ans + 8), 0x01020304);
        assert_int_equal(be16(ans + 10), 16);
        assert_memory_equal(ans + 12, a.b, 16);

        /* NXDOMAIN: the question, no answers even when given some */
        n = dns_build_reply(&q, DNS_RCODE_NXDOMAIN, &a, 1, 60, out, sizeof out);
        assert_int_equal(n, qlen);
        assert_int_equal(be16(out + 2) & 0xf, DNS_RCODE_NXDOMAIN);
        assert_int_equal(be16(out + 4), 1);
        assert_int_equal(be16(out + 6), 0);

        /* the root, and a name at the length limit */
        qlen = query(qbuf, 1, 0, "", DNS_TYPE_A, DNS_CLASS_IN);
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        assert_string_equal(q.name, "");
        char name[300];
        memset(name, 'a', sizeof name);
        for (size_t i = 63; i < sizeof name; i += 64)
                name[i] = '.';
        name[252] = '\0';  /* 252 characters */
        qlen = query(qbuf, 1, 0, name, DNS_TYPE_A, DNS_CLASS_IN);
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        assert_string_equal(q.name, name);
        name[252] = 'a';
        name[254] = '\0';  /* 254: longer than any name */
        qlen = query(qbuf, 1, 0, name, DNS_TYPE_A, DNS_CLASS_IN);
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_FORMERR);
}

static void test_dns_refusals(void **state)
{
        (void)state;
        uint8_t qbuf[512];
        struct dns_question q;
        size_t qlen = query(qbuf, 7, 0, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
        /* too short for a header; a response (QR): dropped, never answered */
        assert_int_equal(parse(qbuf, 11, &q), DNS_DROP);
        assert_int_equal(parse(qbuf, 0, &q), DNS_DROP);
        qbuf[2] |= 0x80;
        assert_int_equal(parse(qbuf, qlen, &q), DNS_DROP);
        qbuf[2] &= 0x7f;
        /* opcode STATUS, NOTIFY */
        qbuf[2] = 2 << 3;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_NOTIMP);
        assert_int_equal(q.id, 7);
        qbuf[2] = 4 << 3;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_NOTIMP);
        qbuf[2] = 0;
        /* QDCOUNT 2, 0 */
        qbuf[5] = 2;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_FORMERR);
        qbuf[5] = 0;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_FORMERR);
        qbuf[4] = 1;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_FORMERR);  /* 256 */
        qbuf[4] = 0;
        qbuf[5] = 1;
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        /* truncated anywhere in the question */
        for (size_t k = DNS_HEADER_LEN; k < qlen; k++)
                if (parse(qbuf, k, &q) != -DNS_RCODE_FORMERR)
                        fail_msg("question cut at %zu: not FORMERR", k);
        /* a compression pointer in the question (to the header) */
        uint8_t ptr[] = { 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1 };
        assert_int_equal(parse(ptr, sizeof ptr, &q), -DNS_RCODE_FORMERR);
        /* after a first label, and a pointer to itself */
        uint8_t ptr2[] = { 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0xc0, 0x0e, 0, 1, 0, 1 };
        assert_int_equal(parse(ptr2, sizeof ptr2, &q), -DNS_RCODE_FORMERR);
        /* the reserved label types 0x40 and 0x80 */
        ptr2[14] = 0x40;
        assert_int_equal(parse(ptr2, sizeof ptr2, &q), -DNS_RCODE_FORMERR);
        ptr2[14] = 0x80;
        assert_int_equal(parse(ptr2, sizeof ptr2, &q), -DNS_RCODE_FORMERR);
        /* a label with a dot or a NUL inside: one label, not two names */
        uint8_t dot[] = { 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 6, 'a', '.', 't', 'e', 's', 't', 0, 0, 1, 0, 1 };
        assert_int_equal(parse(dot, sizeof dot, &q), -DNS_RCODE_FORMERR);
        dot[14] = 0;
        assert_int_equal(parse(dot, sizeof dot, &q), -DNS_RCODE_FORMERR);
        dot[14] = 'b';
        assert_int_equal(parse(dot, sizeof dot, &q), 0);
        assert_string_equal(q.name, "abtest");
        /* a label length past the end */
        dot[12] = 60;
        assert_int_equal(parse(dot, sizeof dot, &q), -DNS_RCODE_FORMERR);
        /* qtype and qclass cut short */
        dot[12] = 6;
        assert_int_equal(parse(dot, sizeof dot - 1, &q), -DNS_RCODE_FORMERR);
        /* trailing bytes (an EDNS OPT record counted nowhere) are ignored */
        uint8_t more[600];
        qlen = query(more, 9, 0, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
        memset(more + qlen, 0xff, 40);
        assert_int_equal(parse(more, qlen + 40, &q), 0);
        assert_int_equal(q.question_len, qlen - DNS_HEADER_LEN);
}

static void test_dns_small_buffers(void **state)
{
        (void)state;
        uint8_t qbuf[512], out[512];
        size_t qlen = query(qbuf, 0x4242, 0x0100, "small.test", DNS_TYPE_A, DNS_CLASS_IN);
        struct dns_question q;
        assert_int_equal(parse(qbuf, qlen, &q), 0);
        struct net_addr a[2];
        assert_true(net_addr_parse("100.64.0.1", &a[0]));
        assert_true(net_addr_parse("100.64.0.2", &a[1]));
        /* both fit */
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, qlen + 32), qlen + 32);
        assert_int_equal(be16(out + 6), 2);
        assert_false(be16(out + 2) & 0x0200);
        /* room for one: one answer and TC */
        memset(out, 0xaa, sizeof out);
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, qlen + 31), qlen + 16);
        assert_int_equal(be16(out + 6), 1);
        assert_true(be16(out + 2) & 0x0200);
        assert_int_equal(be16(out), 0x4242);
        /* room for the question only: no answers and TC */
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, qlen), qlen);
        assert_int_equal(be16(out + 4), 1);
        assert_int_equal(be16(out + 6), 0);
        assert_true(be16(out + 2) & 0x0200);
        /* no room for the question: a bare header, nothing past it */
        memset(out, 0xaa, sizeof out);
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, qlen - 1), DNS_HEADER_LEN);
        assert_int_equal(be16(out), 0x4242);
        assert_true(be16(out + 2) & 0x8000);
        assert_int_equal(be16(out + 4), 0);
        assert_int_equal(be16(out + 6), 0);
        assert_int_equal(out[DNS_HEADER_LEN], 0xaa);
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, DNS_HEADER_LEN), DNS_HEADER_LEN);
        /* no room for a header: nothing */
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, DNS_HEADER_LEN - 1), 0);
        assert_int_equal(dns_build_reply(&q, 0, a, 2, 60, out, 0), 0);
        /* a FORMERR reply to an unparsed question: a bare header with the id */
        qbuf[5] = 2;
        assert_int_equal(parse(qbuf, qlen, &q), -DNS_RCODE_FORMERR);
        assert_int_equal(dns_build_reply(&q, DNS_RCODE_FORMERR, NULL, 0, 0, out, sizeof out), DNS_HEADER_LEN);
        assert_int_equal(be16(out), 0x4242);
        assert_int_equal(be16(out + 2) & 0xf, DNS_RCODE_FORMERR);
        assert_int_equal(be16(out + 4), 0);
}

static void test_dns_type_names(void **state)
{
        (void)state;
        char buf[8];
        assert_string_equal(dns_type_name(DNS_TYPE_A, buf), "A");
        assert_string_equal(dns_type_name(DNS_TYPE_AAAA, buf), "AAAA");
        assert_string_equal(dns_type_name(15, buf), "MX");
        assert_string_equal(dns_type_name(65, buf), "HTTPS");
        assert_string_equal(dns_type_name(99, buf), "99");
        assert_string_equal(dns_type_name(65535, buf), "65535");
}

/* ---- brig's address pool ---------------------------------------------------- */

static const char *text_of(const struct net_addr *a)
{
        static char text[INET6_ADDRSTRLEN];
        net_addr_format(a, text, sizeof text);
        return text;
}

static const char *lookup(const struct name_book *nb, const char *text)
{
        struct net_addr a;
        if (!net_addr_parse(text, &a))
                fail_msg("'%s' did not parse", text);
        return names_lookup(nb, &a);
}

/* The whole pool: every name gets its own index, the next one is refused
 * (-ENOSPC), and names already handed out are still found (hash probing
 * at its fullest). */
static void test_names_full_pool(void **state)
{
        (void)state;
        struct name_book nb = { 0 };
        char name[32];
        for (int i = 0; i < NAMES_MAX; i++) {
                snprintf(name, sizeof name, "h%d.wild.test", i);
                assert_int_equal(names_index(&nb, name), i);
        }
        assert_int_equal(names_index(&nb, "one-more.wild.test"), -ENOSPC);
        for (int i = 0; i < NAMES_MAX; i += 997) {
                snprintf(name, sizeof name, "h%d.wild.test", i);
                assert_int_equal(names_index(&nb, name), i);
        }
        struct net_addr a;
        names_addr(NAMES_MAX - 1, AF_INET, &a);
        assert_string_equal(names_lookup(&nb, &a), "h65534.wild.test");
        names_free(&nb);
}

static void test_names(void **state)
{
        (void)state;
        struct name_book nb = { 0 };
        assert_int_equal(names_index(&nb, "a.test"), 0);
        assert_int_equal(names_index(&nb, "b.test"), 1);
        assert_int_equal(names_index(&nb, "a.test"), 0);
        assert_int_equal(names_index(&nb, "b.test"), 1);
        assert_int_equal(nb.n, 2);
        /* past the first growth */
        for (int i = 0; i < 300; i++) {
                char name[32];
                snprintf(name, sizeof name, "n%d.test", i);
                assert_int_equal(names_index(&nb, name), i + 2);
        }
        assert_int_equal(names_index(&nb, "a.test"), 0);
        assert_int_equal(names_index(&nb, "n299.test"), 301);

        struct net_addr a;
        names_addr(0, AF_INET, &a);
        assert_int_equal(a.family, AF_INET);
        assert_string_equal(text_of(&a), "100.64.0.1");
        assert_true(names_in_pool(&a));
        assert_string_equal(names_lookup(&nb, &a), "a.test");
        names_addr(0, AF_INET6, &a);
        assert_int_equal(a.family, AF_INET6);
        assert_string_equal(text_of(&a), "fd62:7269:6700::1");
        assert_true(names_in_pool(&a));
        assert_string_equal(names_lookup(&nb, &a), "a.test");
        names_addr(255, AF_INET, &a);
        assert_string_equal(text_of(&a), "100.64.1.0");
        assert_string_equal(names_lookup(&nb, &a), "n253.test");
        names_addr(301, AF_INET6, &a);
        assert_string_equal(text_of(&a), "fd62:7269:6700::12e");
        assert_string_equal(names_lookup(&nb, &a), "n299.test");
        names_addr(NAMES_MAX - 1, AF_INET, &a);
        assert_string_equal(text_of(&a), "100.64.255.255");
        assert_null(names_lookup(&nb, &a));
        /* every handed-out index round-trips, both families */
        for (int i = 0; i < (int)nb.n; i++) {
                for (int f = 0; f < 2; f++) {
                        names_addr(i, f ? AF_INET6 : AF_INET, &a);
                        assert_ptr_equal(names_lookup(&nb, &a), nb.names[i]);
                }
        }
        /* pool addresses never handed out */
        assert_null(lookup(&nb, "100.64.0.0"));
        assert_null(lookup(&nb, "100.64.1.47"));   /* index 302: one past the last */
        assert_non_null(lookup(&nb, "100.64.1.46"));
        assert_null(lookup(&nb, "fd62:7269:6700::"));
        assert_null(lookup(&nb, "fd62:7269:6700::12f"));
        assert_null(lookup(&nb, "fd62:7269:6700:0:0:1:0:1"));  /* bits above the index */
        assert_null(lookup(&nb, "fd62:7269:6700:0:1::1"));
        /* outside the pool */
        assert_null(lookup(&nb, "100.65.0.1"));
        assert_null(lookup(&nb, "100.63.0.1"));
        assert_null(lookup(&nb, "10.64.0.1"));
        assert_null(lookup(&nb, "8.8.8.8"));
        assert_null(lookup(&nb, "fd62:7269:6701::1"));
        assert_null(lookup(&nb, "fd62:7269:6700:1::1"));
        /* the mapped spelling of a pool address: the same address when it
         * parses as IPv4, never another name */
        struct net_addr mapped;
        assert_true(net_addr_parse("::ffff:100.64.0.1", &mapped));
        const char *m = names_lookup(&nb, &mapped);
        assert_true(m == NULL || (mapped.family == AF_INET && strcmp(m, "a.test") == 0));
        assert_null(lookup(&nb, "::1"));
        struct net_addr out_v4;
        assert_true(net_addr_parse("100.65.0.1", &out_v4));
        assert_false(names_in_pool(&out_v4));
        names_free(&nb);
        assert_int_equal(nb.n, 0);
        assert_null(nb.names);
        /* an empty book knows no address */
        names_addr(0, AF_INET, &a);
        assert_null(names_lookup(&nb, &a));
        names_free(&nb);
}

/* ---- the DNS stub ------------------------------------------------------------- */

struct events {
        json_t *list;
};

static void collect(void *ctx, json_t *event)
{
        struct events *ev = ctx;
        json_array_append_new(ev->list, event);
}

struct stub_fixture {
        struct egress_policy *ep;
        struct dns_stub stub;
        struct events ev;
};

static int stub_setup(void **state)
{
        struct stub_fixture *f = calloc(1, sizeof *f);
        assert_non_null(f);
        brig_error *err = NULL;
        const char *allow[] = { "secure.test", "*.example.test", "*.internal", NULL };
        for (const char *const *p = allow; *p; p++)
                assert_int_equal(egress_policy_allow_host(&f->ep, *p, &err), 0);
        assert_int_equal(egress_policy_deny_host(&f->ep, "bad.example.test", &err), 0);
        f->ev.list = json_array();
        f->stub.policy = f->ep;
        f->stub.log = collect;
        f->stub.log_ctx = &f->ev;
        *state = f;
        return 0;
}

static int stub_teardown(void **state)
{
        struct stub_fixture *f = *state;
        names_free(&f->stub.names);
        egress_policy_free(f->ep);
        json_decref(f->ev.list);
        free(f);
        return 0;
}

struct answer {
        size_t len;
        unsigned rcode, ancount, qdcount, flags;
        char addr[INET6_ADDRSTRLEN];  /* the first answer's */
        uint16_t atype;
        uint8_t msg[512];
};

static void ask(struct stub_fixture *f, const char *name, uint16_t qtype, uint16_t qclass, struct answer *a)
{
        uint8_t qbuf[512];
        size_t qlen = query(qbuf, 0x1234, 0x0100, name, qtype, qclass);
        memset(a, 0, sizeof *a);
        a->len = dns_stub_answer(&f->stub, qbuf, qlen, a->msg, sizeof a->msg, "udp");
        if (a->len == 0)
                return;
        assert_true(a->len >= DNS_HEADER_LEN);
        assert_int_equal(be16(a->msg), 0x1234);
        a->flags = be16(a->msg + 2);
        assert_true(a->flags & 0x8000);
        a->rcode = a->flags & 0xf;
        a->qdcount = be16(a->msg + 4);
        a->ancount = be16(a->msg + 6);
        if (a->ancount) {
                const uint8_t *ans = a->msg + qlen;
                a->atype = (uint16_t)be16(ans + 2);
                struct net_addr addr = { 0 };
                if (a->atype == DNS_TYPE_A) {
                        assert_int_equal(be16(ans + 10), 4);
                        net_addr_from_v4(&addr, ans + 12);
                } else {
                        assert_int_equal(be16(ans + 10), 16);
                        addr.family = AF_INET6;
                        memcpy(addr.b, ans + 12, 16);
                }
                net_addr_format(&addr, a->addr, sizeof a->addr);
        }
}

/* The last logged event: a "dns" event with this decision and name. */
static json_t *last_event(struct stub_fixture *f, size_t want_count, const char *decision, const char *name)
{
        assert_int_equal(json_array_size(f->ev.list), want_count);
        json_t *e = json_array_get(f->ev.list, want_count - 1);
        assert_string_equal(json_string_value(json_object_get(e, "event")), "dns");
        assert_string_equal(json_string_value(json_object_get(e, "decision")), decision);
        assert_string_equal(json_string_value(json_object_get(e, "transport")), "udp");
        assert_non_null(json_string_value(json_object_get(e, "reason")));
        json_t *n = json_object_get(e, "name");
        if (name)
                assert_string_equal(json_string_value(n), name);
        else
                assert_true(json_is_null(n));
        assert_true(json_is_array(json_object_get(e, "answers")));
        return e;
}

static void test_stub_allowed(void **state)
{
        struct stub_fixture *f = *state;
        struct answer a;
        ask(f, "secure.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_int_equal(a.qdcount, 1);
        assert_int_equal(a.ancount, 1);
        assert_int_equal(a.atype, DNS_TYPE_A);
        assert_string_equal(a.addr, "100.64.0.1");
        assert_true(a.flags & 0x0100);  /* RD echoed */
        json_t *e = last_event(f, 1, "allow", "secure.test");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "A");
        json_t *answers = json_object_get(e, "answers");
        assert_int_equal(json_array_size(answers), 1);
        assert_string_equal(json_string_value(json_array_get(answers, 0)), "100.64.0.1");

        ask(f, "www.example.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_string_equal(a.addr, "100.64.0.2");
        last_event(f, 2, "allow", "www.example.test");
        /* the same name (any case, trailing dot) keeps its address */
        ask(f, "WWW.Example.TEST.", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_string_equal(a.addr, "100.64.0.2");
        last_event(f, 3, "allow", "www.example.test");
        ask(f, "secure.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_string_equal(a.addr, "100.64.0.1");
        /* the name behind the address is what the supervisor will see */
        struct net_addr addr;
        assert_true(net_addr_parse("100.64.0.2", &addr));
        assert_string_equal(names_lookup(&f->stub.names, &addr), "www.example.test");

        /* AAAA: an empty answer unless the namespace routes IPv6 to brig */
        ask(f, "secure.test", DNS_TYPE_AAAA, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_int_equal(a.ancount, 0);
        assert_int_equal(a.qdcount, 1);
        e = last_event(f, 5, "allow", "secure.test");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "AAAA");
        assert_int_equal(json_array_size(json_object_get(e, "answers")), 0);
        f->stub.ipv6 = true;
        ask(f, "secure.test", DNS_TYPE_AAAA, DNS_CLASS_IN, &a);
        assert_int_equal(a.ancount, 1);
        assert_int_equal(a.atype, DNS_TYPE_AAAA);
        assert_string_equal(a.addr, "fd62:7269:6700::1");
        ask(f, "new.example.test", DNS_TYPE_AAAA, DNS_CLASS_IN, &a);
        assert_string_equal(a.addr, "fd62:7269:6700::3");
        ask(f, "new.example.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_string_equal(a.addr, "100.64.0.3");  /* one index per name, both families */

        /* other types of an allowed name: NOERROR, no answers */
        ask(f, "secure.test", 15 /* MX */, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_int_equal(a.ancount, 0);
        assert_int_equal(a.qdcount, 1);
        e = last_event(f, 9, "allow", "secure.test");
        assert_string_equal(json_string_value(json_object_get(e, "type")), "MX");
        ask(f, "www.example.test", 65 /* HTTPS */, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_int_equal(a.ancount, 0);
        assert_int_equal(f->stub.allowed, 10);
        assert_int_equal(f->stub.denied, 0);
        assert_int_equal(f->stub.names.n, 3);
}

static void test_stub_denied(void **state)
{
        struct stub_fixture *f = *state;
        struct answer a;
        size_t count = 0;
        /* not in the allow list; the apex of a suffix rule */
        const char *denied[] = { "evil.test", "example.test", "secure.test.evil.test", "bad.example.test",
                                 "BAD.Example.Test.", "metadata.google.internal", "METADATA.google.internal." };
        const char *logged[] = { "evil.test", "example.test", "secure.test.evil.test", "bad.example.test",
                                 "bad.example.test", "metadata.google.internal", "metadata.google.internal" };
        for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
                ask(f, denied[i], DNS_TYPE_A, DNS_CLASS_IN, &a);
                if (a.rcode != DNS_RCODE_NXDOMAIN)
                        fail_msg("%s: rcode %u, expected NXDOMAIN", denied[i], a.rcode);
                assert_int_equal(a.ancount, 0);
                assert_int_equal(a.qdcount, 1);
                json_t *e = last_event(f, ++count, "deny", logged[i]);
                assert_int_equal(json_array_size(json_object_get(e, "answers")), 0);
        }
        /* the deny rule's reason names it; the metadata name says so */
        json_t *e = json_array_get(f->ev.list, 3);
        assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "bad.example.test"));
        e = json_array_get(f->ev.list, 5);
        assert_non_null(strstr(json_string_value(json_object_get(e, "reason")), "metadata"));
        /* other types of a denied name: NXDOMAIN too, AAAA with ipv6 on as well */
        f->stub.ipv6 = true;
        ask(f, "evil.test", DNS_TYPE_AAAA, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
        assert_int_equal(a.ancount, 0);
        last_event(f, ++count, "deny", "evil.test");
        ask(f, "evil.test", 16 /* TXT */, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
        last_event(f, ++count, "deny", "evil.test");
        /* an exact deny rule leaves the names under it to the allow rules */
        ask(f, "deeper.bad.example.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        last_event(f, ++count, "allow", "deeper.bad.example.test");
        /* a suffix rule still covers other names under .internal */
        ask(f, "build.internal", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
        assert_int_equal(a.ancount, 1);
        last_event(f, ++count, "allow", "build.internal");
        /* names that are not host names: NXDOMAIN, logged without a name */
        ask(f, "a b.example.test", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
        last_event(f, ++count, "deny", NULL);
        ask(f, "", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
        last_event(f, ++count, "deny", NULL);
        ask(f, "10.0.0.1", DNS_TYPE_A, DNS_CLASS_IN, &a);
        assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
        last_event(f, ++count, "deny", NULL);
        /* not class IN (CHAOS version.bind): REFUSED */
        ask(f, "secure.test", 16, 3, &a);
        assert_int_equal(a.rcode, DNS_RCODE_REFUSED);
        assert_int_equal(a.ancount, 0);
        last_event(f, ++count, "deny", "secure.test");
        /* no address handed out for any of them but the two allowed */
        assert_int_equal(f->stub.names.n, 2);
        assert_int_equal(f->stub.denied, count - 2);
        assert_int_equal(f->stub.allowed, 2);
}

static void test_stub_malformed(void **state)
{
        struct stub_fixture *f = *state;
        uint8_t qbuf[512], out[512];
        size_t qlen = query(qbuf, 0x5555, 0, "secure.test", DNS_TYPE_A, DNS_CLASS_IN);
        /* a response: no reply, no event */
        qbuf[2] |= 0x80;
        assert_int_equal(dns_stub_answer(&f->stub, qbuf, qlen, out, sizeof out, "udp"), 0);
        assert_int_equal(dns_stub_answer(&f->stub, qbuf, 5, out, sizeof out, "udp"), 0);
        assert_int_equal(json_array_size(f->ev.list), 0);
        /* two questions: FORMERR with the id, logged as refused */
        qbuf[2] &= 0x7f;
        qbuf[5] = 2;
        size_t n = dns_stub_answer(&f->stub, qbuf, qlen, out, sizeof out, "udp");
        assert_int_equal(n, DNS_HEADER_LEN);
        assert_int_equal(be16(out), 0x5555);
        assert_int_equal(be16(out + 2) & 0xf, DNS_RCODE_FORMERR);
        last_event(f, 1, "deny", NULL);
        /* opcode NOTIFY: NOTIMP */
        qbuf[5] = 1;
        qbuf[2] = 4 << 3;
        n = dns_stub_answer(&f->stub, qbuf, qlen, out, sizeof out, "udp");
        assert_int_equal(n, DNS_HEADER_LEN);
        assert_int_equal(be16(out + 2) & 0xf, DNS_RCODE_NOTIMP);
        last_event(f, 2, "deny", NULL);
        /* over TCP the transport is logged as such */
        qbuf[2] = 0;
        n = dns_stub_answer(&f->stub, qbuf, qlen, out, sizeof out, "tcp");
        assert_int_equal(n, qlen + 16);
        json_t *e = json_array_get(f->ev.list, 2);
        assert_string_equal(json_string_value(json_object_get(e, "transport")), "tcp");
        assert_string_equal(json_string_value(json_object_get(e, "decision")), "allow");
        assert_int_equal(f->stub.allowed, 1);
        assert_int_equal(f->stub.denied, 2);
        /* without a log callback: answers all the same */
        f->stub.log = NULL;
        n = dns_stub_answer(&f->stub, qbuf, qlen, out, sizeof out, "udp");
        assert_int_equal(n, qlen + 16);
        assert_int_equal(f->stub.allowed, 2);
        assert_int_equal(json_array_size(f->ev.list), 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sni_real_hello),
                cmocka_unit_test(test_sni_split_records),
                cmocka_unit_test(test_sni_no_name),
                cmocka_unit_test(test_sni_lying_lengths),
                cmocka_unit_test(test_sni_big_hellos),
                cmocka_unit_test(test_sni_not_tls),
                cmocka_unit_test(test_sni_names),
                cmocka_unit_test(test_http_host),
                cmocka_unit_test(test_http_absolute_form),
                cmocka_unit_test(test_http_not_http),
                cmocka_unit_test(test_http_incomplete),
                cmocka_unit_test(test_dns_a_query_and_reply),
                cmocka_unit_test(test_dns_refusals),
                cmocka_unit_test(test_dns_small_buffers),
                cmocka_unit_test(test_dns_type_names),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_names_full_pool),
                cmocka_unit_test_setup_teardown(test_stub_allowed, stub_setup, stub_teardown),
                cmocka_unit_test_setup_teardown(test_stub_denied, stub_setup, stub_teardown),
                cmocka_unit_test_setup_teardown(test_stub_malformed, stub_setup, stub_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
