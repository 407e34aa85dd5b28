/* Cutting long chunks of three-byte letters where no token can cross (no Python).
 *
 * A Chinese or Japanese sentence is often one chunk of 20-100 letters, and almost none of it
 * repeats, so the chunk caches do not help and every chunk is backtracked afresh. But most of
 * such a chunk's letter boundaries are crossed by no token of the vocabulary: on PUD Chinese,
 * 66% of them for qwen, 84% for o200k, 96% for cl100k. BPE never joins across such a
 * boundary, and BPE of each side alone makes the same merges in the same order (a merge inside
 * one side is the lowest pair of that side whenever it is the lowest of the whole), so a chunk
 * cut there encodes as its parts, one after the other. The parts are short (1.45 letters on
 * average for qwen on PUD Chinese, 4,686 distinct among 20,865) and repeat, so the front cache
 * answers most of them.
 *
 * Which boundaries: only one between two letters of three bytes each (U+0800-U+FFFF: CJK,
 * kana, Hangul, Thai, Devanagari...), p the offset of the second letter's first byte. A token
 * that crosses p matches the text over p-1 and p, and either
 *   - holds both letters whole: the pair (a, b) occurs in some token, letter after letter;
 *     `pairs` has a bit for each such pair of the vocabulary (qwen 18,462 pairs, o200k 11,890,
 *     cl100k 407), or
 *   - starts inside a or ends inside b: then it matches text[p-1], text[p] and text[p+1]
 *     where it goes on that far; `win` has a bit for each such three bytes (qwen 85, o200k
 *     170) and `wild` for each token that ends one byte after p (two bytes of window).
 * A boundary whose bits are all clear is crossed by no token and is cut. The bit tables are
 * hashed or packed and never miss a token (a collision only keeps a boundary), so a cut is
 * safe on any bytes, UTF-8 or not; the tests check the cuts against the vocabulary itself.
 *
 * The encoder cuts only chunks that start with a letter from U+3000 on (kana, CJK, Hangul),
 * or whose second character does (after a space or a mark: cut_worthy in encode_core.c):
 * Thai and Devanagari words measured no faster cut. Where a rank file's tables have atoms
 * (encode_atoms.h) most parts are then merged from their letters instead of looked up.
 *
 * A part equal to a token BPE does not build from its own bytes must be merged: the rule that
 * a whole chunk that is a token is that token (tiktoken's, HF's ignore_merges) is about whole
 * chunks, not parts (the encoder checks, see encode_core.c). */
#ifndef TOKEMBED_ENCODE_SEGMENT_H
#define TOKEMBED_ENCODE_SEGMENT_H
#include "common.h"

/* 2^20 bits (128 KiB, shared by every encoder of the tables): qwen's 18,462 pairs set 1.8%
 * of them, so a pair-free boundary is kept for a collision 1.8% of the time. */
#define TK_SEG_PAIR_BITS 20

typedef struct {
    uint64_t pairs[((size_t)1 << TK_SEG_PAIR_BITS) / 64];
    uint64_t win[(1 << 16) / 64]; /* text[p-1] & 63, text[p] & 15, text[p+1] & 63 */
    uint64_t wild[(1 << 10) / 64]; /* text[p-1] & 63, text[p] & 15 */
    uint64_t *whole; /* by id: a part that is this token alone is this token (see below) */
    size_t n_ids;
} tk_seg;

static tk_seg *tk_seg_new(size_t n_ids) {
    tk_seg *s = calloc(1, sizeof *s);
    if (s && !(s->whole = calloc(n_ids / 64 + 1, sizeof(uint64_t)))) {
        free(s);
        return NULL;
    }
    if (s) s->n_ids = n_ids;
    return s;
}

static void tk_seg_free(tk_seg *s) {
    if (!s) return;
    free(s->whole);
    free(s);
}

static inline int tk_seg_lead(unsigned char c) { return (c & 0xF0) == 0xE0; }

/* A three-byte letter at p: its lead and two continuation bytes. */
static inline int tk_seg_letter(const unsigned char *p) {
    return tk_seg_lead(p[0]) && tk_is_cont(p[1]) && tk_is_cont(p[2]);
}

/* 1 when p[0..len) is whole three-byte letters, one after the other (len a multiple of 3). */
static inline int tk_seg_letters(const unsigned char *p, size_t len) {
    if (len % 3) return 0;
    for (size_t i = 0; i < len; i += 3)
        if (!tk_seg_letter(p + i)) return 0;
    return 1;
}

static inline size_t tk_seg_pair_bit(const unsigned char *a, const unsigned char *b) {
    uint64_t ka = (uint64_t)(a[0] & 15) << 12 | (uint64_t)(a[1] & 63) << 6 | (a[2] & 63);
    uint64_t kb = (uint64_t)(b[0] & 15) << 12 | (uint64_t)(b[1] & 63) << 6 | (b[2] & 63);
    return (size_t)(((ka << 16 | kb) * 0x9e3779b97f4a7c15ull) >> (64 - TK_SEG_PAIR_BITS));
}

static inline size_t tk_seg_win_bit(const unsigned char *p) {
    return (size_t)(p[-1] & 63) << 10 | (size_t)(p[0] & 15) << 6 | (p[1] & 63);
}

static inline size_t tk_seg_wild_bit(const unsigned char *p) {
    return (size_t)(p[-1] & 63) << 4 | (p[0] & 15);
}

static inline void tk_seg_set(uint64_t *bits, size_t b) { bits[b >> 6] |= (uint64_t)1 << (b & 63); }
static inline int tk_seg_bit(const uint64_t *bits, size_t b) { return (int)(bits[b >> 6] >> (b & 63) & 1); }

/* 1 when a part that is token `id` alone may be answered by `id`. */
static inline int tk_seg_whole(const tk_seg *s, uint32_t id) {
    return id < s->n_ids && tk_seg_bit(s->whole, id);
}

/* Record token t[0..len): every place q inside it where a three-byte letter could start with
 * the byte before it a continuation byte, i.e. every boundary it could cross. */
static void tk_seg_add(tk_seg *s, const unsigned char *t, size_t len) {
    for (size_t q = 1; q < len; q++) {
        if (!tk_seg_lead(t[q]) || !tk_is_cont(t[q - 1])) continue;
        if (q + 1 < len && !tk_is_cont(t[q + 1])) continue; /* no letter starts at q */
        if (q >= 3 && q + 3 <= len && tk_seg_letter(t + q - 3) && tk_seg_letter(t + q))
            tk_seg_set(s->pairs, tk_seg_pair_bit(t + q - 3, t + q));
        else if (q + 1 < len)
            tk_seg_set(s->win, tk_seg_win_bit(t + q));
        else
            tk_seg_set(s->wild, tk_seg_wild_bit(t + q));
    }
}

/* 1 when a token holding part of a letter may cross the boundary at p (three-byte letters at
 * p-3 and p): the boundary a part merged from its letters may not hold (encode_atoms.h). */
static inline int tk_seg_partial(const tk_seg *s, const unsigned char *p) {
    return tk_seg_bit(s->win, tk_seg_win_bit(p)) || tk_seg_bit(s->wild, tk_seg_wild_bit(p));
}

/* 1 when a token may hold both letters at p-3 and p whole (or a hash collision says so). */
static inline int tk_seg_paired(const tk_seg *s, const unsigned char *p) {
    return tk_seg_bit(s->pairs, tk_seg_pair_bit(p - 3, p));
}

/* 1 when the boundary at p (three-byte letters at p-3 and p) is crossed by no token. */
static inline int tk_seg_open(const tk_seg *s, const unsigned char *p) {
    return !tk_seg_paired(s, p) && !tk_seg_partial(s, p);
}

/* The cuts of d[0..n): offsets 0 < c_1 < c_2 < ... < n written to cuts (room for n / 3), their
 * number returned. */
static size_t tk_seg_cuts(const tk_seg *s, const unsigned char *d, size_t n, uint32_t *cuts) {
    size_t m = 0, after = 0; /* after: where the last three-byte letter ended (0: none yet) */
    for (size_t i = 0; i + 3 <= n;) {
        if (!tk_seg_letter(d + i)) {
            i++;
            continue;
        }
        if (after == i && i > 0 && tk_seg_open(s, d + i)) cuts[m++] = (uint32_t)i;
        i += 3;
        after = i;
    }
    return m;
}
#endif
