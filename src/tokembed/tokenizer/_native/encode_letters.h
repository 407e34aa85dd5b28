/* Two-byte letters joined before merging starts (no Python).
 *
 * A new Russian word of o200k is merged from its bytes: RusLit-40's 4 MB has 52,663 chunks that
 * no cache holds, 17 bytes each on average, and about half of the ~11 joins of such a chunk only
 * put a letter's two bytes back together (U+0080-U+07FF: Cyrillic, Greek, Arabic, Hebrew, Latin
 * with diacritics). Each join asks for two new pairs, most of them a byte and a letter that no
 * token holds. Starting from the letters gives the same ids with half the joins where it is
 * safe, and this header decides where that is. Rank files only: tiktoken's rule ranks byte
 * strings, which the conditions below speak of.
 *
 * Let a letter L = (a, b) sit at byte p of a chunk (a at p, b at p+1) and have rank r(L). BPE
 * run from the bytes (S) and BPE run with L already joined (M) give the same ids when
 *   (1) L is a token, of rank r(L);
 *   (2) every token of two bytes or more that ends with byte a and occurs in the chunk ending
 *       at p, and every one that starts with byte b and occurs starting at p+1, ranks above r(L);
 *   (3) every other token holding the bytes a b ranks above r(L).
 * Why: in S the pair (a, b) stays on offer until it is joined, so every join S makes before it
 * ranks below r(L); a pair of a or b alone with a neighbour is such an occurrence, so by (2) S
 * never joins one. The pairs M offers and S does not yet are those touching L, each a token
 * holding L, so by (3) above r(L): M makes S's join at every step (equal ranks are equal byte
 * strings, so ties fall the same way), only without (a, b). By induction this holds for any set
 * of letters joined at once.
 *
 * (2) is asked of two-byte windows: `tail` holds the lowest rank of the tokens ending with each
 * x a (a a lead byte; o200k has 46 tokens ending with one, " \xd0" among them), `head` of those
 * starting with each b y (b a continuation byte; o200k 244). A window's lowest rank is at most
 * that of any token there, so passing it is enough. (3) is the letter's own flag: it holds for
 * 97% of RusLit-40's letters (by count) on o200k, 95% on cl100k and qwen. With (2), 86% of the
 * letters of the chunks o200k merges on RusLit-40 are joined first, 80% on cl100k and qwen; a
 * letter after a space mostly is not, since " \xd0" ranks below the letters it starts (300 on
 * o200k, "о" 317). In-process medians of 11 fresh encoders, joining on / off, RusLit-40 4 MB:
 * o200k 1.10-1.21x, qwen 1.16-1.17x, cl100k 0.99-1.08x. */
#ifndef TOKEMBED_ENCODE_LETTERS_H
#define TOKEMBED_ENCODE_LETTERS_H
#include "encode_tables.h"

#define TK_LETTER_LEAD 0xc2 /* first lead byte of a two-byte letter (0xc0 and 0xc1 are overlong) */
#define TK_LETTER_END 0xe0  /* first byte past them */
#define TK_LETTERS ((TK_LETTER_END - TK_LETTER_LEAD) * 64)

/* Lowest ranks, TK_NO_RANK where there is none. */
struct tk_letters {
    uint32_t rank[TK_LETTERS]; /* by letter (tk_letter_index): r(L) where (1) and (3) hold */
    uint32_t tail[256 * (TK_LETTER_END - TK_LETTER_LEAD)]; /* x, a: of tokens ending with x a */
    uint32_t head[64 * 256]; /* b, y: of tokens of >= 2 bytes starting with b y (b a cont) */
};

static inline int tk_is_lead2(unsigned c) { return c >= TK_LETTER_LEAD && c < TK_LETTER_END; }
static inline size_t tk_letter_index(unsigned a, unsigned b) {
    return (a - TK_LETTER_LEAD) * 64 + (b & 63);
}
static inline size_t tk_tail_index(unsigned x, unsigned a) {
    return x * (TK_LETTER_END - TK_LETTER_LEAD) + (a - TK_LETTER_LEAD);
}
static inline size_t tk_head_index(unsigned b, unsigned y) { return (b & 63) * 256 + y; }

static inline void tk_lower(uint32_t *slot, uint32_t rank) {
    if (rank < *slot) *slot = rank;
}

/* The letters of n tokens (token k: p[k] of len[k] bytes and rank rank[k]), two[] the rank of
 * every two-byte string; NULL without memory or when TOKEMBED_LETTERS is "0" in the environment
 * when tables are made (tests and A/B measurements of one build). Free with free(). */
static tk_letters *tk_letters_new(const unsigned char *blob, const uint32_t *off,
                                  const uint32_t *len, const uint32_t *rank, size_t n,
                                  const uint32_t *two) {
    const char *v = getenv("TOKEMBED_LETTERS");
    if (v && strcmp(v, "0") == 0) return NULL;
    tk_letters *l = malloc(sizeof *l);
    if (!l) return NULL;
    memset(l, 0xff, sizeof *l); /* every rank TK_NO_RANK */
    uint32_t *lowest = l->rank; /* first the lowest rank of a token of >= 3 bytes holding L */
    for (size_t k = 0; k < n; k++) {
        const unsigned char *p = blob + off[k];
        size_t m = len[k];
        if (m < 2) continue;
        if (tk_is_lead2(p[m - 1])) tk_lower(&l->tail[tk_tail_index(p[m - 2], p[m - 1])], rank[k]);
        if (tk_is_cont(p[0])) tk_lower(&l->head[tk_head_index(p[0], p[1])], rank[k]);
        for (size_t i = 0; m > 2 && i + 1 < m; i++)
            if (tk_is_lead2(p[i]) && tk_is_cont(p[i + 1]))
                tk_lower(&lowest[tk_letter_index(p[i], p[i + 1])], rank[k]);
    }
    for (unsigned a = TK_LETTER_LEAD; a < TK_LETTER_END; a++)
        for (unsigned b = 0x80; b < 0xc0; b++) {
            uint32_t *r = &l->rank[tk_letter_index(a, b)];
            uint32_t own = two[a << 8 | b];
            *r = own != TK_NO_RANK && own < *r ? own : TK_NO_RANK; /* (1) and (3) */
        }
    return l;
}

/* r(L) of the letter at d[p], d[p+1] of the chunk d[0..n) when it may be joined before merging
 * (d[p] a lead byte of a two-byte letter, p + 1 < n), else TK_NO_RANK. */
static inline uint32_t tk_letter_at(const tk_letters *l, const unsigned char *d, size_t p,
                                    size_t n) {
    unsigned a = d[p], b = d[p + 1];
    if (!tk_is_cont(b)) return TK_NO_RANK;
    uint32_t r = l->rank[tk_letter_index(a, b)];
    if (r == TK_NO_RANK || (p > 0 && l->tail[tk_tail_index(d[p - 1], a)] < r) ||
        (p + 2 < n && l->head[tk_head_index(b, d[p + 2])] < r))
        return TK_NO_RANK;
    return r;
}

/* The same for any offset i < n of a chunk, with l NULL when nothing is joined: the one test of
 * the merge loop and of tk_letters_in. */
static inline uint32_t tk_letter_join(const tk_letters *l, const unsigned char *d, size_t i,
                                      size_t n) {
    return l && tk_is_lead2(d[i]) && i + 1 < n ? tk_letter_at(l, d, i, n) : TK_NO_RANK;
}

/* The offsets of the letters merging d[0..n) starts from, left to right, into at (room for
 * n / 2); returns how many. */
static size_t tk_letters_in(const tk_letters *l, const unsigned char *d, size_t n, uint32_t *at) {
    size_t m = 0;
    for (size_t i = 0; l && i < n; i++)
        if (tk_letter_join(l, d, i, n) != TK_NO_RANK) at[m++] = (uint32_t)i++;
    return m;
}
#endif
