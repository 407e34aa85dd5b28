/* Parts of a cut chunk merged from their letters (no Python).
 *
 * A long chunk of CJK letters is cut into short parts (encode_segment.h), and each part was
 * then looked up in the front cache and, on a miss, in the piece table or backtracked: on PUD
 * Chinese with qwen, 19,852 parts (13,249 one letter long, 5,013 two), 4,742 distinct, each
 * new one a miss in the 4 MiB front cache and then in the piece table (megabytes). Merging a
 * part from its letters instead asks two small tables: `letter`, by a letter's 16 payload bits,
 * holds the letter's rank (256 KiB), and `joins` every join of two whole-letter parts BPE can
 * make (qwen 20,684 of them, 256 KiB), so a two-letter part costs two letter loads and one join.
 *
 * When is that exact? A rank file's BPE over the part's bytes and BPE over its letters, each
 * letter starting as one part, give the same ids when
 *   (1) every letter c is a token that BPE builds from its own three bytes (a two-byte
 *       token inside it, then c), each byte of which has an id (else the chunk fails);
 *   (2) every token of two or more whole letters that holds c ranks above both of the joins
 *       that make c;
 *   (3) no token that holds part of a letter crosses a boundary between two of the part's
 *       letters (the segment tables' `win` and `wild` bits are clear there), and none crosses
 *       the part's ends (cuts, or the chunk's ends).
 * Why: by (3) every join of the bytes either stays inside one letter or joins whole letters
 * to whole letters, so each letter's own joins run as they would alone and end in c (1). A
 * join of whole letters that BPE over letters makes at some step is on offer over the bytes
 * at that step too: were one of its letters c not yet whole, c's next own join would be
 * pending at a rank below the step's (it is on offer, and the step took the lowest), while
 * the join's token holds c and ranks above c's joins (2). So both make the same joins of
 * whole letters in the same order (equal ranks are equal byte strings: ties fall alike).
 *
 * `joins` holds, for each token T of whole letters that are all such letters, the one join BPE
 * over T's own letters makes last (T's canonical split). Over text it is the only join that
 * makes T: the joins inside T's span before T exists are exactly BPE over T's letters (each
 * was the lowest on offer, so the lowest inside the span), which ends in that split. A token
 * BPE over its own letters never reaches is never made over text, and has no entry.
 *
 * Ranks are packed in 21 bits, three to a slot, as the memo packs them: tables with ranks of
 * 2^21 - 1 or more do without atoms. Where the conditions fail (a leading space, a letter
 * that is no atom, a boundary a partial token may cross, more than TK_ATOM_MAX letters) the
 * part takes the path it took before. */
#ifndef TOKEMBED_ENCODE_ATOMS_H
#define TOKEMBED_ENCODE_ATOMS_H
#include "encode_segment.h"
#include "encode_tables.h"

/* Longest part merged from its letters: the merge rescans its parts for each join. */
#define TK_ATOM_MAX 16

typedef struct {
    uint32_t letter[1 << 16]; /* tk_atom_code(letter): its rank when an atom, else TK_NO_RANK */
    uint64_t *joins; /* tk_memo_key(left, right) | joined; UINT64_MAX: empty (open addressing) */
    size_t mask;
    unsigned bits;
} tk_atoms;

static void tk_atoms_free(tk_atoms *a) {
    if (!a) return;
    free(a->joins);
    free(a);
}

/* The 16 payload bits of the three-byte letter at p: distinct for distinct byte triples. */
static inline unsigned tk_atom_code(const unsigned char *p) {
    return (unsigned)(p[0] & 15) << 12 | (unsigned)(p[1] & 63) << 6 | (p[2] & 63);
}

static inline size_t tk_atoms_slot(const tk_atoms *a, uint64_t key) {
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - a->bits));
}

/* The rank at which whole-letter parts l and r join, or TK_NO_RANK. */
static inline uint32_t tk_atoms_join(const tk_atoms *a, uint32_t l, uint32_t r) {
    uint64_t key = tk_memo_key(l, r);
    for (size_t i = tk_atoms_slot(a, key);; i = (i + 1) & a->mask) {
        uint64_t v = a->joins[i];
        if (v == UINT64_MAX) return TK_NO_RANK;
        if ((v & ~(uint64_t)TK_MEMO_NONE) == key) return (uint32_t)(v & TK_MEMO_NONE);
    }
}

/* 1 when p[0..len) is two or more three-byte letters: a token the joins may make. */
static inline int tk_atoms_word(const unsigned char *p, size_t len) {
    return len >= 6 && tk_seg_letters(p, len);
}

/* BPE over the letters of p[0..len) (k of them, all atoms), stopped when two parts are left:
 * their split (the left part's length in bytes), or 0 when it stops earlier. */
static size_t tk_atoms_split(const tk_piece_map *pieces, const unsigned char *p, size_t k,
                             uint32_t *end) {
    for (size_t i = 0; i < k; i++) end[i] = (uint32_t)(3 * i + 3);
    for (size_t m = k; m > 2; m--) {
        size_t best = m;
        uint32_t br = TK_NO_RANK;
        for (size_t i = 0; i + 1 < m; i++) {
            size_t from = i ? end[i - 1] : 0, len = end[i + 1] - from;
            uint32_t r = tk_piece_map_get(pieces, p + from, len, tk_hash_bytes(p + from, len));
            if (r < br) br = r, best = i;
        }
        if (best == m) return 0;
        memmove(&end[best], &end[best + 1], (m - best - 1) * sizeof(uint32_t));
    }
    return end[0];
}

/* The atom tables of a rank file's n pieces (piece k: blob + off[k], len[k] bytes, rank
 * rank[k]), or NULL: ranks too large to pack, no memory, or TOKEMBED_ATOMS is "0" in the
 * environment when the tables are made (tests and A/B measurements of one build). */
static tk_atoms *tk_atoms_new(const unsigned char *blob, const uint32_t *off, const uint32_t *len,
                              const uint32_t *rank, size_t n, const tk_piece_map *pieces,
                              const uint32_t byte_id[256]) {
    const char *v = getenv("TOKEMBED_ATOMS");
    if ((v && strcmp(v, "0") == 0) || pieces->max_rank >= TK_MEMO_NONE) return NULL;
    tk_atoms *a = malloc(sizeof *a);
    uint32_t *own = malloc(sizeof a->letter); /* the later of the two joins that make a letter */
    size_t longest = 0, multi = 0;
    for (size_t k = 0; k < n; k++) longest = len[k] > longest ? len[k] : longest;
    uint32_t *end = malloc((longest / 3 + 1) * sizeof(uint32_t));
    if (!a || !own || !end) goto fail;
    a->joins = NULL;
    for (size_t c = 0; c < 65536; c++) a->letter[c] = TK_NO_RANK;
    for (size_t k = 0; k < n; k++) { /* (1) */
        const unsigned char *p = blob + off[k];
        if (len[k] != 3 || !tk_seg_letter(p)) continue;
        /* a byte without an id fails the chunk whatever its merges (encode_core.c) */
        if (byte_id[p[0]] == TK_NO_RANK || byte_id[p[1]] == TK_NO_RANK || byte_id[p[2]] == TK_NO_RANK)
            continue;
        uint32_t l = pieces->two[p[0] << 8 | p[1]], r = pieces->two[p[1] << 8 | p[2]];
        uint32_t first = l < r ? l : r;
        if (first == TK_NO_RANK) continue;
        a->letter[tk_atom_code(p)] = rank[k];
        own[tk_atom_code(p)] = first > rank[k] ? first : rank[k];
    }
    for (size_t k = 0; k < n; k++) { /* (2) */
        const unsigned char *p = blob + off[k];
        if (!tk_atoms_word(p, len[k])) continue;
        multi++;
        for (size_t i = 0; i < len[k]; i += 3)
            if (a->letter[tk_atom_code(p + i)] != TK_NO_RANK && rank[k] <= own[tk_atom_code(p + i)])
                a->letter[tk_atom_code(p + i)] = TK_NO_RANK;
    }
    for (a->bits = 6; ((size_t)1 << a->bits) < multi + multi / 2; a->bits++) {
    }
    a->mask = ((size_t)1 << a->bits) - 1;
    if (!(a->joins = malloc((a->mask + 1) * sizeof(uint64_t)))) goto fail;
    memset(a->joins, 0xff, (a->mask + 1) * sizeof(uint64_t));
    for (size_t k = 0; k < n; k++) {
        const unsigned char *p = blob + off[k];
        if (!tk_atoms_word(p, len[k])) continue;
        int atoms = 1;
        for (size_t i = 0; i < len[k] && atoms; i += 3) atoms = a->letter[tk_atom_code(p + i)] != TK_NO_RANK;
        size_t cut = atoms ? tk_atoms_split(pieces, p, len[k] / 3, end) : 0;
        if (!cut) continue;
        uint32_t l = tk_piece_map_get(pieces, p, cut, tk_hash_bytes(p, cut));
        uint32_t r = tk_piece_map_get(pieces, p + cut, len[k] - cut, tk_hash_bytes(p + cut, len[k] - cut));
        uint64_t key = tk_memo_key(l, r);
        size_t i = tk_atoms_slot(a, key);
        while (a->joins[i] != UINT64_MAX) i = (i + 1) & a->mask;
        a->joins[i] = key | rank[k];
    }
    free(own);
    free(end);
    return a;
fail:
    tk_atoms_free(a);
    free(own);
    free(end);
    return NULL;
}

/* BPE over the n whole-letter parts ids[0..n) (n <= TK_ATOM_MAX; letters that are atoms, of a
 * part that meets the conditions above), in place; returns the count of ids left. */
static size_t tk_atoms_merge(const tk_atoms *a, uint32_t *ids, size_t n) {
    uint32_t rank[TK_ATOM_MAX];
    for (size_t i = 0; i + 1 < n; i++) rank[i] = tk_atoms_join(a, ids[i], ids[i + 1]);
    while (n > 1) { /* the leftmost lowest join, then the two pairs it makes */
        size_t b = 0;
        for (size_t i = 1; i + 1 < n; i++) b = rank[i] < rank[b] ? i : b;
        if (rank[b] == TK_NO_RANK) break;
        ids[b] = rank[b];
        memmove(&ids[b + 1], &ids[b + 2], (n - b - 2) * sizeof(uint32_t));
        if (b + 2 < n) memmove(&rank[b + 1], &rank[b + 2], (n - b - 3) * sizeof(uint32_t));
        n--;
        if (b > 0) rank[b - 1] = tk_atoms_join(a, ids[b - 1], ids[b]);
        if (b + 1 < n) rank[b] = tk_atoms_join(a, ids[b], ids[b + 1]);
    }
    return n;
}
#endif
