/* Merges derived from a tiktoken rank file, in C (no Python): the twin of formats/ranks.py's
 * lowest_rank_split run for every piece; learn_module.c binds it.
 *
 * For a piece p of n bytes, tiktoken's joining is replayed on p's bytes with every piece of
 * the file but p itself: the adjacent pair whose concatenation has the lowest rank joins, the
 * leftmost of equal ranks first, until two parts remain or no pair is a piece. The two parts
 * left (if exactly two) are p's split. Pieces come in rank order, so a piece's index stands
 * for its rank.
 *
 * Cost. Candidate pairs sit in a binary heap keyed index << 32 | start, each join removing one
 * part and adding at most two candidates, so a piece costs O(n log n) heap work where the
 * rescanning reference costs O(n^2). The piece a concatenation longer than TK_MEMO_FROM bytes
 * spells is looked up once per distinct pair of parts in the whole file (a memo keyed by the
 * two parts' piece indices), so the bytes of a long pair are hashed only the first time that
 * pair is met: a crafted chain of ever longer pieces (a^2 .. a^3000, 6 MB) costs about its
 * size instead of the cube of its longest piece.
 */
#include "ranks_core.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct {
    uint64_t hash;
    int64_t idx; /* -1: empty */
} PieceCell;

typedef struct {
    int64_t a, b; /* a == -1: empty */
    int64_t val;  /* the piece a + b spells, or -1 */
} PairCell;

typedef struct {
    uint64_t key; /* piece index (= rank order) << 32 | start of the left part */
    int64_t mid, end;
    int64_t res;
} Cand;

typedef struct {
    const uint8_t *data;
    const int64_t *offsets;
    int64_t n;
    PieceCell *pieces;
    uint64_t piece_mask;
    PairCell *pairs;
    uint64_t pair_mask, pair_count;
    int64_t byte_piece[256]; /* piece of each single byte, or n + byte when it has none */
    /* scratch, sized to the longest piece: part [s, end[s]) is piece part[s]; prv[s] is the
       start of the part before it; end[s] == -1 once s is inside a longer part */
    int64_t *end, *prv, *part;
    Cand *heap;
    int64_t heap_len;
} Deriver;

static inline int64_t piece_len(const Deriver *D, int64_t i) {
    return D->offsets[i + 1] - D->offsets[i];
}

static int64_t piece_find(const Deriver *D, const uint8_t *p, int64_t len) {
    uint64_t h = tk_hash_bytes(p, (size_t)len);
    for (uint64_t i = h & D->piece_mask;; i = (i + 1) & D->piece_mask) {
        const PieceCell *c = &D->pieces[i];
        if (c->idx < 0) return -1;
        if (c->hash == h && piece_len(D, c->idx) == len &&
            memcmp(D->data + D->offsets[c->idx], p, (size_t)len) == 0)
            return c->idx;
    }
}

static inline uint64_t pair_hash(int64_t a, int64_t b) {
    return tk_mix64((uint64_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)b);
}

static int pairs_grow(Deriver *D) {
    uint64_t cap = (D->pair_mask + 1) * 2;
    PairCell *cells = malloc(cap * sizeof(PairCell));
    if (!cells) return -1;
    for (uint64_t i = 0; i < cap; i++) cells[i].a = -1;
    for (uint64_t i = 0; i <= D->pair_mask; i++) {
        PairCell c = D->pairs[i];
        if (c.a < 0) continue;
        uint64_t j = pair_hash(c.a, c.b) & (cap - 1);
        while (cells[j].a >= 0) j = (j + 1) & (cap - 1);
        cells[j] = c;
    }
    free(D->pairs);
    D->pairs = cells;
    D->pair_mask = cap - 1;
    return 0;
}

/* Pairs up to this many bytes are hashed each time: one probe of the piece table costs no
 * more than a probe of the memo, and most pairs of a real file are short. */
#define TK_MEMO_FROM 32

/* The piece that parts a and b (adjacent, spelling p[0 .. len)) join into, or -1; -2 on OOM. */
static int64_t pair_piece(Deriver *D, int64_t a, int64_t b, const uint8_t *p, int64_t len) {
    if (len <= TK_MEMO_FROM) return piece_find(D, p, len);
    uint64_t i = pair_hash(a, b) & D->pair_mask;
    for (; D->pairs[i].a >= 0; i = (i + 1) & D->pair_mask)
        if (D->pairs[i].a == a && D->pairs[i].b == b) return D->pairs[i].val;
    int64_t val = piece_find(D, p, len);
    if ((D->pair_count + 1) * 2 > D->pair_mask + 1) {
        if (pairs_grow(D) < 0) return -2;
        i = pair_hash(a, b) & D->pair_mask;
        while (D->pairs[i].a >= 0) i = (i + 1) & D->pair_mask;
    }
    D->pairs[i].a = a;
    D->pairs[i].b = b;
    D->pairs[i].val = val;
    D->pair_count++;
    return val;
}

/* ---- a binary min-heap of candidates (scratch of 3 x the longest piece) --------------- */

static void heap_push(Deriver *D, Cand c) {
    int64_t i = D->heap_len++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (D->heap[parent].key <= c.key) break;
        D->heap[i] = D->heap[parent];
        i = parent;
    }
    D->heap[i] = c;
}

static Cand heap_pop(Deriver *D) {
    Cand top = D->heap[0], last = D->heap[--D->heap_len];
    int64_t n = D->heap_len, i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && D->heap[c + 1].key < D->heap[c].key) c++;
        if (last.key <= D->heap[c].key) break;
        D->heap[i] = D->heap[c];
        i = c;
    }
    if (n) D->heap[i] = last;
    return top;
}

/* Queue the join of parts [s, m) and [m, e) of piece bytes p (n bytes) when it spells a
 * piece. The whole piece is never a candidate: its own rank takes no part. -1 on OOM. */
static int offer(Deriver *D, const uint8_t *p, int64_t n, int64_t s, int64_t m, int64_t e) {
    if (s == 0 && e == n) return 0;
    int64_t res = pair_piece(D, D->part[s], D->part[m], p + s, e - s);
    if (res == -2) return -1;
    if (res < 0) return 0;
    Cand c = {((uint64_t)res << 32) | (uint64_t)s, m, e, res};
    heap_push(D, c);
    return 0;
}

/* Split of piece k: 1 with *l, *r set; 0 when more than two parts remain; -1 on OOM.
 * A join of [s, m) and [m, e) is current while s and m still start parts ending at m and e
 * (parts only grow, so a stale entry never becomes current again). */
static int split(Deriver *D, int64_t k, int64_t *l, int64_t *r) {
    const uint8_t *p = D->data + D->offsets[k];
    int64_t n = piece_len(D, k), parts = n;
    for (int64_t i = 0; i < n; i++) {
        D->end[i] = i + 1;
        D->prv[i] = i - 1;
        D->part[i] = D->byte_piece[p[i]];
    }
    D->heap_len = 0;
    for (int64_t i = 0; i + 1 < n; i++)
        if (offer(D, p, n, i, i + 1, i + 2) < 0) return -1;
    while (D->heap_len && parts > 2) {
        Cand c = heap_pop(D);
        int64_t s = (int64_t)(c.key & 0xFFFFFFFFu), m = c.mid, e = c.end;
        if (D->end[s] != m || D->end[m] != e) continue; /* a part has joined another since */
        D->end[s] = e;
        D->end[m] = -1;
        D->part[s] = c.res;
        parts--;
        if (e < n) {
            D->prv[e] = s;
            if (offer(D, p, n, s, e, D->end[e]) < 0) return -1;
        }
        if (s > 0 && offer(D, p, n, D->prv[s], s, e) < 0) return -1;
    }
    if (parts != 2) return 0;
    *l = D->part[0];
    *r = D->part[D->end[0]];
    return *l < D->n && *r < D->n; /* a byte without a piece cannot be a merge's part */
}

int tk_rank_splits(const uint8_t *data, const int64_t *offsets, int64_t n, int64_t *left,
                   int64_t *right) {
    Deriver D;
    memset(&D, 0, sizeof D);
    D.data = data;
    D.offsets = offsets;
    D.n = n;
    int64_t longest = 2;
    for (int64_t i = 0; i < n; i++)
        if (piece_len(&D, i) > longest) longest = piece_len(&D, i);
    if ((uint64_t)longest > UINT32_MAX || (uint64_t)n > UINT32_MAX) return TK_RANKS_TOO_LONG;
    int status = TK_RANKS_NO_MEMORY;
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2;
    D.pieces = malloc(cap * sizeof(PieceCell));
    D.pair_mask = (1u << 12) - 1;
    D.pairs = malloc((D.pair_mask + 1) * sizeof(PairCell));
    D.end = malloc((size_t)longest * sizeof(int64_t));
    D.prv = malloc((size_t)longest * sizeof(int64_t));
    D.part = malloc((size_t)longest * sizeof(int64_t));
    D.heap = malloc((size_t)longest * 3 * sizeof(Cand)); /* n - 1 initial + 2 per join */
    if (!D.pieces || !D.pairs || !D.end || !D.prv || !D.part || !D.heap) goto done;
    D.piece_mask = cap - 1;
    for (uint64_t i = 0; i < cap; i++) D.pieces[i].idx = -1;
    for (uint64_t i = 0; i <= D.pair_mask; i++) D.pairs[i].a = -1;
    for (int b = 0; b < 256; b++) D.byte_piece[b] = n + b;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = piece_len(&D, i);
        uint64_t h = tk_hash_bytes(data + offsets[i], (size_t)len);
        uint64_t j = h & D.piece_mask;
        while (D.pieces[j].idx >= 0) j = (j + 1) & D.piece_mask;
        D.pieces[j].hash = h;
        D.pieces[j].idx = i;
        if (len == 1) D.byte_piece[data[offsets[i]]] = i;
    }
    status = TK_RANKS_OK;
    for (int64_t i = 0; i < n; i++) {
        left[i] = right[i] = -1;
        if (piece_len(&D, i) < 2) continue;
        int got = split(&D, i, &left[i], &right[i]);
        if (got < 0) {
            status = TK_RANKS_NO_MEMORY;
            break;
        }
        if (got == 0) left[i] = right[i] = -1;
    }
done:
    free(D.pieces);
    free(D.pairs);
    free(D.end);
    free(D.prv);
    free(D.part);
    free(D.heap);
    return status;
}
