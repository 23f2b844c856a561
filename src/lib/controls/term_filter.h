/* term_filter.h — the streaming filter between the sandbox's output and the
 * caller's terminal (term_filter.c). Pure: no I/O, no allocation. */
#ifndef BRIG_TERM_FILTER_H
#define BRIG_TERM_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/util.h"

/* The longest escape or control sequence the filter holds back while it
 * decides; a longer one is dropped whole. */
#define TERM_FILTER_SEQ_MAX 256
/* The most term_filter_feed() writes for n input bytes: each byte yields at
 * most one U+FFFD (3 bytes), plus what was held from earlier calls. */
#define TERM_FILTER_OUT_MAX(n) ((n) * 3 + TERM_FILTER_SEQ_MAX + 8)

struct term_filter {
        uint8_t state;
        bool seq_bad;              /* the sequence held is dropped at its end */
        uint8_t u8_need, u8_len;   /* UTF-8 continuation bytes expected, held */
        uint8_t u8_lo, u8_hi;      /* the range the next continuation byte must be in */
        uint8_t u8[4];
        uint16_t seq_len;
        char seq[TERM_FILTER_SEQ_MAX];
};

BRIG_INTERNAL void term_filter_init(struct term_filter *f);
/* Filter n bytes of the stream into out (room for TERM_FILTER_OUT_MAX(n));
 * returns the bytes written. State carries over to the next call; what is
 * still held when the stream ends (an unfinished sequence or character) is
 * simply never written. */
BRIG_INTERNAL size_t term_filter_feed(struct term_filter *f, const void *in, size_t n, char *out);

#endif
