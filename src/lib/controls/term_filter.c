/* term_filter.c — what the sandbox writes may reach the caller's terminal
 * only as something drawn on the screen. A terminal also obeys sequences
 * that act beyond it: OSC 52 sets the desktop's clipboard (a command the
 * user pastes later runs on the host), OSC 0/2 the window title, DECUDK
 * redefines function keys, kitty's APC graphics read host files, and the
 * queries (DSR, DA, DECRQM, DECRQSS, title report 21t ...) make the
 * terminal type its answer into the input — into the host shell when it
 * arrives after brig has exited. docs/security.md has the table of what
 * passes and why; in short:
 *
 *   passes   printable UTF-8; C0 controls but ENQ (answerback); CSI for
 *            cursor, erase, scroll, colours (SGR), modes (DECSET: alternate
 *            screen, bracketed paste, mouse, cursor style); ESC for
 *            cursor save/restore, index, keypad, charsets, RIS.
 *   dropped  every OSC, DCS, APC, PM and SOS string, whole; every CSI or
 *            ESC sequence not on the allow lists below (so every query and
 *            window operation, and whatever a terminal invents next); ENQ;
 *            C1 controls in either form: a stray 8-bit byte 0x80-0x9F is
 *            not valid UTF-8 and becomes U+FFFD, U+0080-U+009F is dropped,
 *            so no terminal sees an 8-bit CSI/OSC/DCS/APC introducer.
 *
 * The output is valid UTF-8 (each invalid byte sequence becomes one
 * U+FFFD, as Unicode's "maximal subpart" practice), which also takes away
 * overlong forms such as C0 9B that a lax decoder would read as ESC.
 *
 * The filter sees the stream as the terminal will, in one pass, a byte at
 * a time, so it does not care where read() cut it: a sequence is held
 * until its final byte (at most TERM_FILTER_SEQ_MAX bytes, else dropped
 * whole), a character until its last byte. Strings (OSC, DCS, APC, PM,
 * SOS) are never held: they are skipped to their terminator. Where the
 * filter and a terminal could disagree about where a string ends, the
 * terminal never saw it begin, so the bytes after it are ordinary text to
 * both; what reaches the terminal is re-parsed from the ground state and
 * contains only complete, allowed sequences (term_filter_feed of its own
 * output changes nothing, which the fuzz target checks).
 *
 * States, after ECMA-48 and the DEC parser of vt100.net/emu/dec_ansi_parser:
 *
 *   GROUND --ESC--> ESC --[--> CSI --final--> GROUND (emit if allowed)
 *                    |  --] P _ ^ X--> STRING --BEL/ST/CAN/SUB--> GROUND
 *                    |  --intermediate--> ESC (held) --final--> GROUND
 *   C0 controls inside a sequence are passed on at once (a terminal
 *   executes them there too); ESC restarts, CAN and SUB abort. */
#include "controls/term_filter.h"

#include <string.h>

enum { TF_GROUND, TF_ESC, TF_CSI, TF_STRING, TF_STRING_ESC };

enum { C_ENQ = 0x05, C_BEL = 0x07, C_CAN = 0x18, C_SUB = 0x1a, C_ESC = 0x1b, C_DEL = 0x7f };

static const char replacement[] = "\xef\xbf\xbd";  /* U+FFFD */

void term_filter_init(struct term_filter *f)
{
        memset(f, 0, sizeof *f);
        f->state = TF_GROUND;
}

/* CSI sequences that only draw: final byte, intermediate (0 for none) and
 * the private markers (< = > ?) allowed besides none. Everything else —
 * DSR n, DA c, DECRQM $p, window ops t, XTVERSION >q, DECRQCRA *y, media
 * copy i, ?S, ?m and ?u queries, unknown finals — is dropped. */
static const struct csi_rule {
        char final, inter;
        const char *markers;
} csi_allowed[] = {
        { '@', 0, "" }, { 'A', 0, "" }, { 'B', 0, "" }, { 'C', 0, "" }, { 'D', 0, "" }, { 'E', 0, "" },
        { 'F', 0, "" }, { 'G', 0, "" }, { 'H', 0, "" }, { 'I', 0, "" }, { 'J', 0, "?" }, { 'K', 0, "?" },
        { 'L', 0, "" }, { 'M', 0, "" }, { 'P', 0, "" }, { 'S', 0, "" }, { 'T', 0, "" }, { 'X', 0, "" },
        { 'Z', 0, "" }, { '`', 0, "" }, { 'a', 0, "" }, { 'b', 0, "" }, { 'd', 0, "" }, { 'e', 0, "" },
        { 'f', 0, "" }, { 'g', 0, "" },
        { 'h', 0, "?" }, { 'l', 0, "?" },   /* modes: alternate screen, bracketed paste, mouse */
        { 'm', 0, ">" },                     /* SGR; > : XTMODKEYS (key encoding, like a mode) */
        { 'r', 0, "?" }, { 's', 0, "?" },   /* margins / save cursor; ? : save/restore modes */
        { 'u', 0, "<=>" },                   /* restore cursor; kitty keyboard flags (not ?u) */
        { 'q', ' ', "" },                    /* DECSCUSR cursor style */
        { '@', ' ', "" }, { 'A', ' ', "" },  /* scroll left/right */
        { 'p', '!', "" },                    /* DECSTR soft reset */
        { 'p', '"', "" }, { 'q', '"', "" },  /* DECSCL, DECSCA */
        { 'r', '$', "" }, { 't', '$', "" }, { 'v', '$', "" }, { 'x', '$', "" }, { 'z', '$', "" },
        { '{', '$', "" },                    /* rectangular area operations */
        { 'x', '*', "" },                    /* DECSACE */
        { '}', '\'', "" }, { '~', '\'', "" }, /* DECIC, DECDC */
        { '{', '#', "" }, { '}', '#', "" },  /* XTPUSHSGR, XTPOPSGR */
};

/* Does the parameter list (digits, ';' and ':') hold the value want? */
static bool has_param(const char *p, size_t n, unsigned want)
{
        unsigned v = 0;
        bool any = false;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && p[i] >= '0' && p[i] <= '9') {
                        v = v > 100000 ? v : v * 10 + (unsigned)(p[i] - '0');
                        any = true;
                        continue;
                }
                if (any && v == want)
                        return true;
                v = 0;
                any = false;
        }
        return false;
}

static bool csi_ok(const char *s, size_t n)
{
        /* s = ESC [ [marker] params [intermediate] final */
        const char *p = s + 2, *end = s + n - 1;
        char marker = 0, inter = 0, final = s[n - 1];
        if (p < end && *p >= '<' && *p <= '?')
                marker = *p++;
        const char *params = p;
        while (p < end && *p >= '0' && *p <= ';')
                p++;
        size_t nparams = (size_t)(p - params);
        if (p < end)
                inter = *p++;
        if (p != end)
                return false;  /* a marker mid-way, two intermediates: not what draws */
        for (size_t i = 0; i < ARRAY_SIZE(csi_allowed); i++) {
                const struct csi_rule *r = &csi_allowed[i];
                if (r->final != final || r->inter != inter || (marker && !strchr(r->markers, marker)))
                        continue;
                /* CSI ? 2 l puts the terminal in VT52 mode, which this parser
                 * does not speak; CSI 2 h (KAM) locks the keyboard. */
                if ((final == 'l' && marker == '?') || (final == 'h' && !marker))
                        return !has_param(params, nparams, 2);
                return true;
        }
        return false;
}

/* ESC sequences that only draw: save/restore cursor (7 8), keypad modes
 * (= >), index and next line (D E M), tab set (H), single and locking
 * shifts (N O n o | } ~), back/forward index (6 9), full reset (c); with
 * an intermediate: charset designation ( ) * + - . / and DEC line sizes
 * and the alignment test (# 3-8). Dropped: DECID (ESC Z, answers like
 * DA), ESC % (leaves UTF-8, after which this filter's reading would be
 * wrong), screen's ESC k title, everything unknown. */
static bool esc_ok(const char *s, size_t n)
{
        if (n == 2)
                return strchr("6789=>DEHMNOcno|}~", s[1]) != NULL;
        if (strchr("()*+-./", s[1]))
                return true;
        return n == 3 && s[1] == '#' && s[2] >= '3' && s[2] <= '8';
}

struct out {
        char *p;
        size_t n;
};

static void put(struct out *o, const void *b, size_t n)
{
        memcpy(o->p + o->n, b, n);
        o->n += n;
}

/* A C0 control met anywhere: executed by the terminal where it stands. */
static void put_c0(struct out *o, uint8_t b)
{
        if (b != C_ENQ)  /* ENQ asks for the answerback string, typed into the input */
                put(o, &b, 1);
}

static void seq_start(struct term_filter *f, int state)
{
        f->state = (uint8_t)state;
        f->seq_bad = false;
        f->seq[0] = (char)C_ESC;
        f->seq_len = 1;
}

static void seq_add(struct term_filter *f, uint8_t b)
{
        if (f->seq_len >= TERM_FILTER_SEQ_MAX)
                f->seq_bad = true;  /* too long: dropped whole at its end */
        else
                f->seq[f->seq_len++] = (char)b;
}

static void seq_end(struct term_filter *f, struct out *o, bool (*ok)(const char *, size_t))
{
        if (!f->seq_bad && ok(f->seq, f->seq_len))
                put(o, f->seq, f->seq_len);
        f->state = TF_GROUND;
        f->seq_len = 0;
}

/* Ground state: text. Returns false when b must be read again (it ended an
 * invalid UTF-8 sequence and starts something of its own). */
static bool ground(struct term_filter *f, struct out *o, uint8_t b)
{
        if (f->u8_need) {
                if (b < f->u8_lo || b > f->u8_hi) {
                        put(o, replacement, 3);
                        f->u8_need = f->u8_len = 0;
                        return false;
                }
                f->u8[f->u8_len++] = b;
                f->u8_lo = 0x80;
                f->u8_hi = 0xbf;
                if (--f->u8_need == 0) {
                        /* U+0080..U+009F are the C1 controls: CSI, OSC, DCS,
                         * APC ... to a terminal that reads them. */
                        if (!(f->u8_len == 2 && f->u8[0] == 0xc2 && f->u8[1] <= 0x9f))
                                put(o, f->u8, f->u8_len);
                        f->u8_len = 0;
                }
                return true;
        }
        if (b == C_ESC) {
                seq_start(f, TF_ESC);
                return true;
        }
        if (b < 0x80) {
                put_c0(o, b);  /* printable ASCII and DEL pass the same way */
                return true;
        }
        /* The lead byte decides the length and the range of the second byte
         * (Unicode table 3-7): no overlong forms, no surrogates, nothing
         * past U+10FFFF. */
        uint8_t need = 0, lo = 0x80, hi = 0xbf;
        if (b >= 0xc2 && b <= 0xdf)
                need = 1;
        else if (b >= 0xe0 && b <= 0xef)
                need = 2, lo = b == 0xe0 ? 0xa0 : 0x80, hi = b == 0xed ? 0x9f : 0xbf;
        else if (b >= 0xf0 && b <= 0xf4)
                need = 3, lo = b == 0xf0 ? 0x90 : 0x80, hi = b == 0xf4 ? 0x8f : 0xbf;
        if (!need) {
                put(o, replacement, 3);  /* a stray 8-bit C1 byte among them */
                return true;
        }
        f->u8[0] = b;
        f->u8_len = 1;
        f->u8_need = need;
        f->u8_lo = lo;
        f->u8_hi = hi;
        return true;
}

/* Inside ESC or CSI: the controls every such state treats alike. Returns
 * true when b was taken. */
static bool seq_control(struct term_filter *f, struct out *o, uint8_t b)
{
        if (b == C_ESC) {
                seq_start(f, TF_ESC);  /* the held sequence is abandoned */
                return true;
        }
        if (b == C_CAN || b == C_SUB) {
                put(o, &b, 1);
                f->state = TF_GROUND;
                f->seq_len = 0;
                return true;
        }
        if (b < 0x20) {
                put_c0(o, b);
                return true;
        }
        if (b == C_DEL)
                return true;  /* ignored by terminals inside a sequence */
        return false;
}

/* Returns false when b must be read again in the new state. */
static bool step(struct term_filter *f, struct out *o, uint8_t b)
{
        switch (f->state) {
        case TF_GROUND:
                return ground(f, o, b);
        case TF_ESC:
                if (seq_control(f, o, b))
                        return true;
                if (b >= 0x80) {
                        f->state = TF_GROUND;  /* not a sequence: dropped */
                        f->seq_len = 0;
                        return false;
                }
                if (f->seq_len == 1 && b == '[') {
                        seq_add(f, b);
                        f->state = TF_CSI;
                } else if (f->seq_len == 1 && strchr("]P_^X", b)) {
                        f->state = TF_STRING;  /* OSC DCS APC PM SOS: skipped, never held */
                        f->seq_len = 0;
                } else if (b < 0x30) {
                        seq_add(f, b);  /* intermediate */
                } else {
                        seq_add(f, b);
                        seq_end(f, o, esc_ok);
                }
                return true;
        case TF_CSI:
                if (seq_control(f, o, b))
                        return true;
                if (b >= 0x80) {
                        f->state = TF_GROUND;
                        f->seq_len = 0;
                        return false;
                }
                seq_add(f, b);
                if (b >= 0x40)
                        seq_end(f, o, csi_ok);
                return true;
        case TF_STRING:
                /* Not the 8-bit ST (0x9c): in UTF-8 that byte is part of a
                 * character. Ending late or early is safe either way (the
                 * terminal never saw the string begin). */
                if (b == C_ESC)
                        f->state = TF_STRING_ESC;
                else if (b == C_BEL || b == C_CAN || b == C_SUB)
                        f->state = TF_GROUND;
                return true;
        case TF_STRING_ESC:
                if (b == '\\') {
                        f->state = TF_GROUND;  /* ST */
                        return true;
                }
                seq_start(f, TF_ESC);  /* the string ended; a new sequence begins */
                return false;
        }
        f->state = TF_GROUND;
        return false;
}

size_t term_filter_feed(struct term_filter *f, const void *in, size_t n, char *out)
{
        struct out o = { out, 0 };
        const uint8_t *p = in;
        for (size_t i = 0; i < n; i++)
                while (!step(f, &o, p[i]))
                        ;
        return o.n;
}
