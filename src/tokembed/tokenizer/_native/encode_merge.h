/* The BPE rule on one chunk, in C (no Python), for the two table kinds:
 *
 * - explicit merges (tk_merge_*): while an adjacent pair is a merge, take the
 *   smallest rank and replace its non-overlapping occurrences left to right;
 * - rank files (tk_rankbpe_*): tiktoken's rule, join the leftmost adjacent pair
 *   whose concatenated bytes have the smallest rank.
 *
 * Short chunks run a rescanning loop (quadratic, but on a handful of ids it
 * beats any bookkeeping); longer ones keep every candidate pair in a binary
 * heap keyed rank << 32 | position, so a chunk of n bytes costs O(n log n):
 * each merge removes one id and adds at most two pairs. */
#ifndef TOKEMBED_ENCODE_MERGE_H
#define TOKEMBED_ENCODE_MERGE_H
#include "encode_prejoin.h"

/* Up to this many ids the rescanning loop is used (its worst case, 64^2 pair
 * checks, stays below the heap's constant costs). */
#define TK_SMALL 64

typedef struct {
    uint32_t *ids, *aux;
    uint32_t *rank, *res;
    int32_t *nxt, *prv;
    uint64_t *heap;
    uint64_t *bits; /* backtracking's positions still open (encode_backtrack.h) */
    size_t cap, heap_cap, heap_len, bits_cap;
} tk_scratch;

static void tk_scratch_free(tk_scratch *s) {
    free(s->ids);
    free(s->aux);
    free(s->rank);
    free(s->res);
    free(s->nxt);
    free(s->prv);
    free(s->heap);
    free(s->bits);
    memset(s, 0, sizeof(*s));
}

static int tk_scratch_reserve(tk_scratch *s, size_t n) {
    if (n <= s->cap) return 0;
    size_t c = s->cap ? s->cap : 256;
    while (c < n) c *= 2;
    void *p;
#define TK_GROW(field, type)                                   \
    p = realloc(s->field, c * sizeof(type));                   \
    if (!p) return -1;                                         \
    s->field = p;
    TK_GROW(ids, uint32_t)
    TK_GROW(aux, uint32_t)
    TK_GROW(rank, uint32_t)
    TK_GROW(res, uint32_t)
    TK_GROW(nxt, int32_t)
    TK_GROW(prv, int32_t)
#undef TK_GROW
    s->cap = c;
    return 0;
}

/* ---- a min-heap of u64 keys ---------------------------------------------------------- */
/* Four children per node: half the levels of a binary heap, and the children of
 * a node share one 32-byte span, so a long chunk's heap (megabytes for a
 * megabyte-long chunk) costs fewer cache misses per pop. */
static int tk_heap_push(tk_scratch *s, uint64_t key) {
    if (s->heap_len == s->heap_cap) {
        size_t c = s->heap_cap ? 2 * s->heap_cap : 256;
        void *p = realloc(s->heap, c * sizeof(uint64_t));
        if (!p) return -1;
        s->heap = p;
        s->heap_cap = c;
    }
    uint64_t *h = s->heap;
    size_t i = s->heap_len++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (h[parent] <= key) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = key;
    return 0;
}

static uint64_t tk_heap_pop(tk_scratch *s) {
    uint64_t *h = s->heap;
    uint64_t top = h[0];
    uint64_t last = h[--s->heap_len];
    size_t n = s->heap_len, i = 0;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t end = c + 4 < n ? c + 4 : n, best = c;
        for (size_t k = c + 1; k < end; k++)
            if (h[k] < h[best]) best = k;
        if (last <= h[best]) break;
        h[i] = h[best];
        i = best;
    }
    if (n) h[i] = last;
    return top;
}

/* ---- explicit merges ------------------------------------------------------------ */
static inline void tk_pair_lookup(const tk_pair_map *pairs, uint32_t l, uint32_t r,
                                  uint32_t *rank, uint32_t *res) {
    if (pairs->grid && (l | r) < TK_GRID_DIM) { /* the result beside the rank: one load */
        uint32_t k = tk_grid_find(pairs->grid, l, r);
        *rank = k == TK_NO_RANK ? TK_NO_RANK : pairs->grid->ranks[k];
        *res = k == TK_NO_RANK ? 0 : pairs->grid->results[k];
        return;
    }
    const tk_pair_slot *slot = tk_pair_map_get(pairs, l, r);
    *rank = slot ? slot->rank : TK_NO_RANK;
    *res = slot ? slot->result : 0;
}

/* s->ids[0..n) in (the ids of the bytes data[0..n)), the merged ids out in s->ids; returns
 * their count. Byte pairs start joined where encode_prejoin.h allows it (`first`, or NULL).
 * Each step joins the leftmost pair of the smallest rank and looks up only the two pairs it
 * creates. */
static size_t tk_merge_small(const tk_pair_map *pairs, const tk_prejoin *first,
                             const unsigned char *data, tk_scratch *s, size_t n) {
    uint32_t *ids = s->ids, *rank = s->rank, *res = s->res;
    if (first) { /* ids[w] is written only once ids[i] and ids[i + 1] (i >= w) were read */
        size_t w = 0;
        for (size_t i = 0; i < n; i++, w++) {
            if (tk_prejoin_at(first, data, i, n) == TK_NO_RANK) {
                ids[w] = ids[i];
                continue;
            }
            uint32_t r;
            tk_pair_lookup(pairs, ids[i], ids[i + 1], &r, &ids[w]);
            i++;
        }
        n = w;
    }
    for (size_t i = 0; i + 1 < n; i++) tk_pair_lookup(pairs, ids[i], ids[i + 1], &rank[i], &res[i]);
    while (n > 1) {
        size_t i = 0;
        uint32_t br = rank[0];
        for (size_t k = 1; k + 1 < n; k++)
            if (rank[k] < br) br = rank[k], i = k;
        if (br == TK_NO_RANK) break;
        /* one join at the leftmost lowest rank, then the minimum is found again (HF's and
         * tiktoken's order; see encode_chunk_reference) */
        uint32_t out = res[i];
        ids[i] = out;
        memmove(&ids[i + 1], &ids[i + 2], (n - i - 2) * sizeof(uint32_t));
        if (i + 2 < n) {
            memmove(&rank[i + 1], &rank[i + 2], (n - i - 3) * sizeof(uint32_t));
            memmove(&res[i + 1], &res[i + 2], (n - i - 3) * sizeof(uint32_t));
        }
        n--;
        if (i > 0) tk_pair_lookup(pairs, ids[i - 1], out, &rank[i - 1], &res[i - 1]);
        if (i + 1 < n) tk_pair_lookup(pairs, out, ids[i + 1], &rank[i], &res[i]);
    }
    return n;
}

/* The heap form of the same order: one join at a time, the lowest rank first and the
 * leftmost position among equal ranks, each join's new pairs pushed at once. */
static int tk_merge_heap(const tk_pair_map *pairs, const uint32_t *merge_lr, tk_scratch *s,
                         size_t n, size_t *out_n) {
    uint32_t *ids = s->ids;
    int32_t *nxt = s->nxt, *prv = s->prv;
    s->heap_len = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        prv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        const tk_pair_slot *slot = tk_pair_map_get(pairs, ids[i], ids[i + 1]);
        if (slot && tk_heap_push(s, ((uint64_t)slot->rank << 32) | i) < 0) return -1;
    }
    while (s->heap_len) {
        /* the leftmost pair of the lowest rank (ties by position: ids never move left),
         * joined; the pairs it makes are pushed at once and may be the next to join */
        uint64_t top = tk_heap_pop(s);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t i = (int32_t)(uint32_t)top;
        uint32_t L = merge_lr[3 * (size_t)rank], R = merge_lr[3 * (size_t)rank + 1];
        uint32_t out = merge_lr[3 * (size_t)rank + 2];
        int32_t j = nxt[i];
        if (ids[i] != L || j < 0 || ids[j] != R) continue; /* stale */
        ids[i] = out;
        ids[j] = UINT32_MAX;
        int32_t k = nxt[j];
        nxt[i] = k;
        if (k >= 0) prv[k] = i;
        int32_t p = prv[i];
        const tk_pair_slot *slot;
        if (p >= 0 && (slot = tk_pair_map_get(pairs, ids[p], out)) &&
            tk_heap_push(s, ((uint64_t)slot->rank << 32) | (uint32_t)p) < 0)
            return -1;
        if (k >= 0 && (slot = tk_pair_map_get(pairs, out, ids[k])) &&
            tk_heap_push(s, ((uint64_t)slot->rank << 32) | (uint32_t)i) < 0)
            return -1;
    }
    size_t w = 0;
    for (int32_t i = 0; i >= 0; i = nxt[i]) ids[w++] = ids[i];
    *out_n = w;
    return 0;
}

/* ---- rank files ------------------------------------------------------------------ */
/* The parts are a list threaded through s->nxt (no element moves: a join unlinks its
 * right part), ids in s->ids, start offsets in s->aux and the rank of the pair a part starts
 * in s->rank. Each join rescans the list for the leftmost lowest rank. Returns the count of
 * ids, left in s->ids[0..count). (The merge mode above moves its arrays instead: there the
 * scan is the cost and contiguous arrays scan faster; here the joins' piece lookups wait on
 * memory, and three memmoves per join cost more than the list's dependent loads.) */
static size_t tk_rankbpe_small(const tk_piece_map *pieces, tk_memo *memo,
                               const unsigned char *data, size_t n, tk_scratch *s) {
    uint32_t *id = s->ids, *start = s->aux, *rank = s->rank;
    int32_t *nxt = s->nxt;
    for (size_t i = 0; i < n; i++) {
        start[i] = (uint32_t)i;
        nxt[i] = (int32_t)(i + 1);
    }
    start[n] = (uint32_t)n; /* part n: the end marker */
    for (size_t i = 0; i + 1 < n; i++) rank[i] = pieces->two[(unsigned)data[i] << 8 | data[i + 1]];
    rank[n - 1] = TK_NO_RANK;
    for (size_t m = n; m > 1; m--) {
        int32_t best = 0, before = -1;
        uint32_t br = rank[0];
        for (int32_t i = nxt[0], p = 0; i < (int32_t)n; p = i, i = nxt[i])
            if (rank[i] < br) br = rank[i], best = i, before = p;
        if (br == TK_NO_RANK) break;
        int32_t j = nxt[best], e = nxt[j];
        id[best] = br;
        nxt[best] = e;
        /* both new pairs' lookups start before either is waited on */
        uint64_t lh = 0, rh = 0;
        if (before >= 0) lh = tk_piece_prefetch(pieces, data + start[before], start[e] - start[before]);
        if (e < (int32_t)n) rh = tk_piece_prefetch(pieces, data + start[best], start[nxt[e]] - start[best]);
        if (before >= 0)
            rank[before] = tk_join_rank(pieces, memo, id[before], br, data + start[before],
                                        start[e] - start[before], lh);
        rank[best] = e < (int32_t)n ? tk_join_rank(pieces, memo, br, id[e], data + start[best],
                                                   start[nxt[e]] - start[best], rh)
                                    : TK_NO_RANK;
    }
    size_t w = 0;
    for (int32_t i = 0; i < (int32_t)n; i = nxt[i]) id[w++] = id[i];
    return w;
}

/* Chunks of up to TK_TINY bytes (most words): parts stay where they started (a part starting
 * at byte i is slot i), and key[i] holds the rank of the pair part i starts, with i in its low
 * half, or UINT64_MAX; a join then finds the leftmost lowest rank as the smallest key, a
 * branch-free pass over a contiguous array, where the list walk above waits on each part's
 * successor and mispredicts its compares (it was a third of merging 50,247 distinct RusLit-40
 * chunks on o200k). Byte pairs start joined where encode_prejoin.h allows it (half the joins
 * of a new word, Russian or Latin; the pairs next to them then come from the grid, the memo or
 * the piece table rather than the two-byte table). Same contract as tk_rankbpe_small. */
#define TK_TINY 32

static inline uint64_t tk_pair_key(uint32_t rank, int32_t at) {
    return rank == TK_NO_RANK ? UINT64_MAX : ((uint64_t)rank << 32) | (uint32_t)at;
}

static size_t tk_rankbpe_tiny(const tk_piece_map *pieces, tk_memo *memo,
                              const unsigned char *data, size_t n, tk_scratch *s) {
    uint32_t *id = s->ids;
    int32_t *nxt = s->nxt, *prv = s->prv;
    uint64_t key[TK_TINY];
    const tk_prejoin *first = pieces->prejoin;
    int joined = 0; /* a pair was joined before merging (encode_prejoin.h) */
    for (int32_t i = 0, last = -1; i < (int32_t)n; last = i, i = nxt[i]) {
        uint32_t r = tk_prejoin_at(first, data, (size_t)i, n);
        prv[i] = last;
        nxt[i] = i + 1 + (r != TK_NO_RANK);
        if (r != TK_NO_RANK) {
            id[i] = r;
            key[i + 1] = UINT64_MAX;
            joined = 1;
        }
    }
    if (!joined) { /* every part a byte (most chunks): the two-byte table alone, no list walk */
        for (size_t i = 0; i + 1 < n; i++)
            key[i] = tk_pair_key(pieces->two[(unsigned)data[i] << 8 | data[i + 1]], (int32_t)i);
    } else {
        /* the pairs the memo knows, then the others' slots asked for together (as below) */
        uint64_t hash[TK_TINY];
        uint32_t ask = 0; /* bit i: the pair starting at i waits for the piece table */
        for (int32_t i = 0; i < (int32_t)n; i = nxt[i]) {
            int32_t j = nxt[i];
            uint32_t r = TK_NO_RANK;
            size_t len = j < (int32_t)n ? (size_t)(nxt[j] - i) : 0;
            if (!len || tk_join_known(pieces, memo, id[i], id[j], data + i, len, &r)) {
                key[i] = tk_pair_key(r, i);
                continue;
            }
            hash[i] = tk_piece_prefetch(pieces, data + i, len);
            ask |= 1u << i;
        }
        for (; ask; ask &= ask - 1) {
            int32_t i = __builtin_ctz(ask), j = nxt[i];
            key[i] = tk_pair_key(
                tk_join_rank(pieces, memo, id[i], id[j], data + i, (size_t)(nxt[j] - i), hash[i]), i);
        }
    }
    /* keys to a multiple of four, the last ones never the least: the minimum is taken in
     * four independent chains (one chain waits on each compare; this is the loop new chunks
     * spend most time in) */
    size_t m = (n + 3) & ~(size_t)3;
    for (size_t i = n - 1; i < m; i++) key[i] = UINT64_MAX;
    for (;;) {
        uint64_t b0 = UINT64_MAX, b1 = UINT64_MAX, b2 = UINT64_MAX, b3 = UINT64_MAX;
        for (size_t i = 0; i < m; i += 4) {
            b0 = key[i] < b0 ? key[i] : b0;
            b1 = key[i + 1] < b1 ? key[i + 1] : b1;
            b2 = key[i + 2] < b2 ? key[i + 2] : b2;
            b3 = key[i + 3] < b3 ? key[i + 3] : b3;
        }
        b0 = b1 < b0 ? b1 : b0;
        b2 = b3 < b2 ? b3 : b2;
        uint64_t best = b2 < b0 ? b2 : b0;
        if (best == UINT64_MAX) break;
        int32_t b = (int32_t)(uint32_t)best, j = nxt[b], e = nxt[j], before = prv[b];
        uint32_t br = (uint32_t)(best >> 32);
        id[b] = br;
        key[j] = UINT64_MAX;
        nxt[b] = e;
        if (e < (int32_t)n) prv[e] = b;
        /* the new pairs the memo knows, then the others' lookups started together */
        uint32_t lr = TK_NO_RANK, rr = TK_NO_RANK;
        size_t llen = (size_t)(e - before), rlen = e < (int32_t)n ? (size_t)(nxt[e] - b) : 0;
        int lk = before < 0 || tk_join_known(pieces, memo, id[before], br, data + before, llen, &lr);
        int rk = !rlen || tk_join_known(pieces, memo, br, id[e], data + b, rlen, &rr);
        uint64_t lh = lk ? 0 : tk_piece_prefetch(pieces, data + before, llen);
        uint64_t rh = rk ? 0 : tk_piece_prefetch(pieces, data + b, rlen);
        if (!lk) lr = tk_join_rank(pieces, memo, id[before], br, data + before, llen, lh);
        if (!rk) rr = tk_join_rank(pieces, memo, br, id[e], data + b, rlen, rh);
        if (before >= 0) key[before] = tk_pair_key(lr, before);
        key[b] = rlen ? tk_pair_key(rr, b) : UINT64_MAX;
    }
    size_t w = 0;
    for (int32_t i = 0; i < (int32_t)n; i = nxt[i]) id[w++] = id[i];
    return w;
}

static int tk_rankbpe_heap(const tk_piece_map *pieces, tk_memo *memo, const unsigned char *data,
                           size_t n, tk_scratch *s, size_t *out_n) {
    uint32_t *id = s->ids;
    int32_t *nxt = s->nxt, *prv = s->prv;
    s->heap_len = 0;
    for (size_t i = 0; i < n; i++) {
        nxt[i] = (int32_t)(i + 1); /* n marks the end */
        prv[i] = (int32_t)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = pieces->two[(unsigned)data[i] << 8 | data[i + 1]];
        if (r != TK_NO_RANK && tk_heap_push(s, ((uint64_t)r << 32) | i) < 0) return -1;
    }
    while (s->heap_len) {
        uint64_t top = tk_heap_pop(s);
        uint32_t r = (uint32_t)(top >> 32);
        int32_t i = (int32_t)(uint32_t)top;
        if (id[i] == UINT32_MAX) continue; /* i was absorbed by its left neighbour */
        int32_t j = nxt[i];
        if (j >= (int32_t)n) continue;
        int32_t e = nxt[j];
        /* A rank names one byte string, so the pair is current iff it spans the same bytes. */
        if (tk_join_rank(pieces, memo, id[i], id[j], data + i, (size_t)(e - i), 0) != r) continue;
        id[i] = r;
        id[j] = UINT32_MAX;
        nxt[i] = e;
        if (e < (int32_t)n) prv[e] = i;
        int32_t p = prv[i];
        if (p >= 0) {
            uint32_t q = tk_join_rank(pieces, memo, id[p], r, data + p, (size_t)(e - p), 0);
            if (q != TK_NO_RANK && tk_heap_push(s, ((uint64_t)q << 32) | (uint32_t)p) < 0) return -1;
        }
        if (e < (int32_t)n) {
            uint32_t q = tk_join_rank(pieces, memo, r, id[e], data + i, (size_t)(nxt[e] - i), 0);
            if (q != TK_NO_RANK && tk_heap_push(s, ((uint64_t)q << 32) | (uint32_t)i) < 0) return -1;
        }
    }
    size_t w = 0;
    for (int32_t i = 0; i < (int32_t)n; i = nxt[i]) id[w++] = id[i];
    *out_n = w;
    return 0;
}
#endif
