/* Byte pairs joined before merging starts (no Python).
 *
 * A word met for the first time is merged from its bytes, and about half of its joins only put
 * a pair of bytes together that BPE was always going to join first: a two-byte letter (Cyrillic,
 * Greek, Arabic, accented Latin; RusLit-40's new chunks on o200k, 17 bytes each, ~11 joins)
 * or a frequent pair of ASCII letters ("in", "er", " t"). Each join asks for two new pairs, most
 * of them a byte and a neighbour that no token holds. Starting from such pairs gives the same ids
 * with fewer joins where it is safe, and this header decides where that is: for rank files
 * (tiktoken's rule ranks byte strings, which the conditions below speak of) and, read with
 * merges for tokens, for merge lists (tk_prejoin_of_merges).
 *
 * Let a pair L = (a, b) sit at byte p of a chunk (a at p, b at p+1) and have rank r(L). BPE run
 * from the bytes (S) and BPE run with L already joined (M) give the same ids when
 *   (1) L is a token, of rank r(L);
 *   (2) every token of two bytes or more that ends with byte a and occurs in the chunk ending at
 *       p ranks above r(L), and so does every one that starts with byte b and occurs starting
 *       at p+1, except one of rank r(L) itself (L again, where b = y = a);
 *   (3) every other token holding the bytes a b ranks above r(L).
 * Why: in S the pair (a, b) stays on offer until it is joined, so every join S makes before it
 * ranks below r(L), or equals it at a pair further left: L again, one byte earlier, when the
 * chunk repeats a byte ("\tviii" on o200k: "ii" at 2 goes before "ii" at 3, which (2) therefore
 * refuses on the left and allows on the right). A pair of a or b alone with a neighbour is such
 * a join, so by (2) S never makes one. The pairs M offers and S does not yet are those touching
 * L, each a token holding L, so by (3) above r(L): M makes S's join at every step (equal ranks
 * are equal byte strings, so ties fall the same way), only without (a, b). By induction this
 * holds for any set of pairs joined at once; two joinable pairs never overlap (the left one's
 * rank is below the right one's by (2) and its tail window refuses the right one).
 *
 * (2) is asked of two-byte windows: `tail` holds the lowest rank of the tokens ending with each
 * x a, `head` of those starting with each b y. A window's lowest rank is at most that of any
 * token there, so passing it is enough. (3) is kept with the pair's rank in `rank`. Ranks are
 * kept in 16 bits, saturated, so that the three tables take 128 KiB each (a word touches a few
 * of their lines): pairs ranked 65,535 or above are never joined first (rare pairs: of the
 * two-byte tokens for which (3) holds, cl100k 314 of 2,411, o200k 741 of 3,095, qwen 1,579 of
 * 3,593), and a saturated window still ranks above every pair that is joined, as its true
 * rank does.
 *
 * Of the joins merging the 31,034 distinct new chunks of PUD de/es/fi/fr/id/tr needs on
 * cl100k, 51% are such pairs (qwen 50%, o200k 49%). Joining two-byte letters alone gave
 * RusLit-40 1.10-1.21x on o200k and qwen; every pair against letters alone, one thread,
 * in-process medians of 7 fresh encoders over four interleaved rounds: those six languages on
 * cl100k 42.4 -> 46.4 MB/s, on qwen 40.0 -> 45.7, 13 PUD languages on cl100k 56.1 -> 59.3;
 * fresh processes, medians of 15: 13 languages cl100k 51.5 -> 54.9, qwen 44.2 -> 45.9; PUD
 * English on o200k (of 7) 50.4 -> 54.1; RusLit-40 on qwen (of 5) 73.6 -> 75.7. Merge lists,
 * which joined nothing first before: in-process as above, the six languages on SmolLM2's list
 * 43.8 -> 53.1 MB/s, GPT-2's 45.7 -> 51.1, PUD English on SmolLM2's 96.0 -> 101.6; fresh
 * processes, 13 languages, SmolLM2 (of 9) 52.6 -> 56.4, GPT-2 (of 11) 50.3 -> 55.8. */
#ifndef TOKEMBED_ENCODE_PREJOIN_H
#define TOKEMBED_ENCODE_PREJOIN_H
#include "encode_tables.h"

#define TK_PREJOIN_NONE 0xffffu /* a 16-bit rank of 0xffff or more, or none */

struct tk_prejoin {
    uint16_t rank[65536]; /* a << 8 | b: r(ab) where (1) and (3) hold, else TK_PREJOIN_NONE */
    uint16_t tail[65536]; /* x << 8 | a: lowest rank of the tokens of >= 2 bytes ending x a */
    uint16_t head[65536]; /* b << 8 | y: lowest rank of the tokens of >= 2 bytes starting b y */
};

static inline void tk_lower16(uint16_t *slot, uint32_t rank) {
    if (rank < *slot) *slot = (uint16_t)rank;
}

/* 1 when TOKEMBED_PREJOIN is "0" in the environment when tables are made (tests and A/B
 * measurements of one build): no tables, merging starts from the bytes. */
static int tk_prejoin_off(void) {
    const char *v = getenv("TOKEMBED_PREJOIN");
    return v && strcmp(v, "0") == 0;
}

/* The tables of n tokens (token k: blob + off[k], len[k] bytes, rank rank[k]), two[] the rank
 * of every two-byte string; NULL without memory or with tk_prejoin_off(). Free with free(). */
static tk_prejoin *tk_prejoin_new(const unsigned char *blob, const uint32_t *off,
                                  const uint32_t *len, const uint32_t *rank, size_t n,
                                  const uint32_t *two) {
    if (tk_prejoin_off()) return NULL;
    tk_prejoin *j = malloc(sizeof *j);
    uint32_t *holding = malloc(65536 * sizeof(uint32_t)); /* lowest rank of >= 3 bytes holding */
    if (!j || !holding) {
        free(j);
        free(holding);
        return NULL;
    }
    memset(j, 0xff, sizeof *j);
    memset(holding, 0xff, 65536 * sizeof(uint32_t));
    for (size_t k = 0; k < n; k++) {
        const unsigned char *p = blob + off[k];
        size_t m = len[k];
        if (m < 2) continue;
        tk_lower16(&j->tail[p[m - 2] << 8 | p[m - 1]], rank[k]);
        tk_lower16(&j->head[p[0] << 8 | p[1]], rank[k]);
        for (size_t i = 0; m > 2 && i + 1 < m; i++) {
            uint32_t *h = &holding[p[i] << 8 | p[i + 1]];
            if (rank[k] < *h) *h = rank[k];
        }
    }
    for (size_t c = 0; c < 65536; c++) /* (1) and (3) */
        if (two[c] < holding[c] && two[c] < TK_PREJOIN_NONE) j->rank[c] = (uint16_t)two[c];
    free(holding);
    return j;
}

/* The same tables for a merge list (merge k: merge_lr[3k] + merge_lr[3k+1] -> merge_lr[3k+2],
 * byte b's id byte_id[b] or UINT32_MAX; the first merge of a pair is its merge, as in `pairs`).
 * There a pair joins by its merge's rank, and the conditions read: (1) the two bytes' ids have
 * a merge, of rank r, making z; (2) every merge of a part ending with byte a (its last byte x)
 * and a's id ranks above r, and every merge of b's id and a part starting with byte y at or
 * above it; (3) every merge with z as a part ranks above r (BPE's lists make z before any merge
 * of it; a list that does not gets no join of that pair). The argument above holds with merges
 * for tokens. A part's first and last bytes follow from the merges (a merge may use a part a
 * later merge makes); parts no bytes make are never met. NULL without memory, with
 * TOKEMBED_PREJOIN=0, or for a list that is not BPE's (two bytes of one id, an id made of two
 * byte strings). */
static tk_prejoin *tk_prejoin_of_merges(const uint32_t byte_id[256], const uint32_t *merge_lr,
                                        size_t n, size_t n_ids, const tk_pair_map *pairs) {
    if (tk_prejoin_off()) return NULL;
    tk_prejoin *j = malloc(sizeof *j);
    uint16_t *ends = malloc(n_ids * sizeof(uint16_t)); /* first byte << 8 | last, or none */
    uint16_t *byte_of = malloc(n_ids * sizeof(uint16_t)); /* the byte an id stands for */
    uint32_t *used = malloc(n_ids * sizeof(uint32_t)); /* lowest rank of a merge of the id */
    uint8_t *known = calloc(n_ids, 1);
    if (!j || !ends || !byte_of || !used || !known) goto fail;
    memset(j, 0xff, sizeof *j);
    memset(byte_of, 0xff, n_ids * sizeof(uint16_t));
    memset(used, 0xff, n_ids * sizeof(uint32_t));
    for (unsigned b = 0; b < 256; b++) {
        if (byte_id[b] >= n_ids) continue;
        if (known[byte_id[b]]) goto fail; /* two bytes, one id: a part's bytes are not its ids' */
        known[byte_id[b]] = 1;
        byte_of[byte_id[b]] = (uint16_t)b;
        ends[byte_id[b]] = (uint16_t)(b << 8 | b);
    }
    /* every part's first and last bytes: a merge may use a part a later merge makes, so the
     * list is read until nothing new is made */
    for (int more = 1; more;) {
        more = 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t l = merge_lr[3 * k], r = merge_lr[3 * k + 1], z = merge_lr[3 * k + 2];
            if (l >= n_ids || r >= n_ids || z >= n_ids || !known[l] || !known[r]) continue;
            uint16_t e = (uint16_t)((ends[l] & 0xff00) | (ends[r] & 0xff));
            if (known[z] && ends[z] != e) goto fail; /* one id, two byte strings: not BPE's */
            more |= !known[z];
            known[z] = 1;
            ends[z] = e;
        }
    }
    for (size_t k = 0; k < n; k++) {
        uint32_t l = merge_lr[3 * k], r = merge_lr[3 * k + 1], z = merge_lr[3 * k + 2];
        const tk_pair_slot *first = tk_pair_map_get(pairs, l, r);
        if (l >= n_ids || r >= n_ids || z >= n_ids || !first || first->rank != k) continue;
        if (k < used[l]) used[l] = (uint32_t)k;
        if (k < used[r]) used[r] = (uint32_t)k;
        if (!known[l] || !known[r]) continue; /* a part no bytes make: never met */
        if (byte_of[r] != 0xffff) tk_lower16(&j->tail[(ends[l] & 0xff) << 8 | byte_of[r]], (uint32_t)k);
        if (byte_of[l] != 0xffff) tk_lower16(&j->head[byte_of[l] << 8 | ends[r] >> 8], (uint32_t)k);
    }
    for (size_t k = 0; k < n && k < TK_PREJOIN_NONE; k++) { /* (1) and (3), pairs of bytes */
        uint32_t l = merge_lr[3 * k], r = merge_lr[3 * k + 1], z = merge_lr[3 * k + 2];
        if (l >= n_ids || r >= n_ids || z >= n_ids || byte_of[l] == 0xffff || byte_of[r] == 0xffff)
            continue;
        const tk_pair_slot *first = tk_pair_map_get(pairs, l, r);
        if (first && first->rank == k && used[z] > k)
            j->rank[byte_of[l] << 8 | byte_of[r]] = (uint16_t)k;
    }
    goto done;
fail:
    free(j);
    j = NULL;
done:
    free(ends);
    free(byte_of);
    free(used);
    free(known);
    return j;
}

/* r(L) of the pair at d[i], d[i+1] of the chunk d[0..n) when it may be joined before merging,
 * else TK_NO_RANK; j NULL joins nothing. */
static inline uint32_t tk_prejoin_at(const tk_prejoin *j, const unsigned char *d, size_t i,
                                     size_t n) {
    if (!j || i + 1 >= n) return TK_NO_RANK;
    unsigned a = d[i], b = d[i + 1];
    uint32_t r = j->rank[a << 8 | b];
    if (r == TK_PREJOIN_NONE || (i > 0 && j->tail[(unsigned)d[i - 1] << 8 | a] <= r) ||
        (i + 2 < n && j->head[b << 8 | d[i + 2]] < r))
        return TK_NO_RANK;
    return r;
}

/* The offsets of the pairs merging d[0..n) starts from, left to right, into at (room for n / 2);
 * returns how many. */
static size_t tk_prejoin_in(const tk_prejoin *j, const unsigned char *d, size_t n, uint32_t *at) {
    size_t m = 0;
    for (size_t i = 0; j && i < n; i++)
        if (tk_prejoin_at(j, d, i, n) != TK_NO_RANK) at[m++] = (uint32_t)i++;
    return m;
}
#endif
