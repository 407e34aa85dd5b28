/* Lookup tables of the BPE encoder core (no Python): pair -> (rank, result) for explicit
 * merge lists, byte string -> rank for tiktoken rank files, and the chunk -> ids
 * cache. Open addressing with linear probing; capacities are powers of two kept
 * at most half full, so a probe ends after ~1.5 slots on average, except the piece table
 * (two-thirds full, of any size: see tk_piece_capacity). */
#ifndef TOKEMBED_ENCODE_TABLES_H
#define TOKEMBED_ENCODE_TABLES_H
#include "common.h"
#include <stdlib.h>

#define TK_NO_RANK UINT32_MAX

typedef struct tk_prejoin tk_prejoin;

/* Pairs of two ids below TK_GRID_DIM are answered from a grid of their merge rank, without
 * hashing, Bloom filter or a slot of the pair or piece table: ids and ranks follow BPE's
 * training order, so the tokens most words are merged through come first. A word met for the
 * first time (a fresh process, rare words) otherwise asks its joins of a table of 2-9 MiB out
 * of every CPU cache. Merging PUD fr / de / fi on cl100k, 73 / 72 / 79% of the joins the memo
 * did not know and that are pieces have both parts below 1024. TOKEMBED_GRID=0 in the
 * environment when tables are made leaves it out (A/B measurements of one build).
 *
 * Of the grid's 1,048,576 cells only 27,303 join on cl100k (o200k 35,873, qwen 28,762, GPT-2's
 * merges 15,373), so the grid is kept packed: a bit per cell, and the ranks of the cells that
 * join in cell order, found by counting the set bits before the cell (each 64-cell word
 * carries the count before it, in the same 16 bytes). 256 KiB of words and 108-144 KiB of
 * ranks stay in a core's L2; the dense grid of 4 MiB it replaces (one u32 per cell) did not:
 * its loads were 18% of the samples of merging new Latin-script words in a warm process (PUD
 * de, es, fi, fr, id, tr on cl100k after ar and ru). Dense -> packed, one thread, medians of 5
 * fresh processes interleaved: that stream 36.5 -> 38.5 MB/s; cold 13 PUD languages cl100k
 * 47.9 -> 51.0, PUD English o200k 51.9 -> 56.2, RusLit-40 o200k 57.5 -> 63.9; SmolLM2's and
 * GPT-2's merge lists within noise. */
#define TK_GRID_DIM 1024u
#define TK_GRID_WORDS ((size_t)TK_GRID_DIM * TK_GRID_DIM / 64)

typedef struct {
    uint64_t bits;   /* bit k: cell 64 * (this word's index) + k joins */
    uint32_t before; /* the joining cells before this word's */
    uint32_t unused; /* 16 bytes: four words to a line, a word and its count never split */
} tk_grid_word;

typedef struct {
    tk_grid_word *words; /* TK_GRID_WORDS */
    uint32_t *ranks;     /* of the joining cells, in cell order */
    uint32_t *results;   /* a merge list's: the id each joining cell makes, beside its rank
                            (read from the merge list by rank, it was a second dependent
                            load, 6% of a fresh process's samples on PUD English with
                            SmolLM2's merges); NULL for a rank file (the rank is the id) */
} tk_grid;

/* A dense grid to fill (cell l * TK_GRID_DIM + r, every cell "no merge" = TK_NO_RANK) and pack
 * with tk_grid_pack, or NULL without memory or when the environment leaves grids out. */
static uint32_t *tk_grid_dense(void) {
    const char *v = getenv("TOKEMBED_GRID");
    if (v && strcmp(v, "0") == 0) return NULL;
    size_t bytes = (size_t)TK_GRID_DIM * TK_GRID_DIM * sizeof(uint32_t);
    uint32_t *g = tk_table_alloc(bytes);
    if (g) memset(g, 0xff, bytes);
    return g;
}

static void tk_grid_free(tk_grid *g) {
    if (!g) return;
    free(g->words);
    free(g->ranks);
    free(g->results);
    free(g);
}

/* The packed form of a dense grid, which it frees; NULL for NULL or without memory. `lr`: a
 * merge list's (left, right, result) by rank, whose results the grid then keeps, or NULL. */
static tk_grid *tk_grid_pack(uint32_t *dense, const uint32_t *lr) {
    if (!dense) return NULL;
    size_t joins = 0, cells = (size_t)TK_GRID_DIM * TK_GRID_DIM;
    for (size_t c = 0; c < cells; c++) joins += dense[c] != TK_NO_RANK;
    tk_grid *g = calloc(1, sizeof *g);
    if (g) {
        g->words = tk_table_alloc(TK_GRID_WORDS * sizeof(tk_grid_word));
        g->ranks = malloc((joins ? joins : 1) * sizeof(uint32_t));
        if (lr) g->results = malloc((joins ? joins : 1) * sizeof(uint32_t));
    }
    if (!g || !g->words || !g->ranks || (lr && !g->results)) {
        tk_grid_free(g);
        free(dense);
        return NULL;
    }
    uint32_t k = 0;
    for (size_t w = 0; w < TK_GRID_WORDS; w++) {
        g->words[w].before = k;
        for (size_t b = 0; b < 64; b++) {
            uint32_t rank = dense[64 * w + b];
            if (rank == TK_NO_RANK) continue;
            g->words[w].bits |= (uint64_t)1 << b;
            if (lr) g->results[k] = lr[3 * (size_t)rank + 2];
            g->ranks[k++] = rank;
        }
    }
    free(dense);
    return g;
}

/* Where the grid keeps the join of ids l and r (both below TK_GRID_DIM): its index among the
 * joining cells, or TK_NO_RANK when the cell does not join. */
static inline uint32_t tk_grid_find(const tk_grid *grid, uint32_t l, uint32_t r) {
    size_t cell = (size_t)l * TK_GRID_DIM + r;
    const tk_grid_word *w = &grid->words[cell >> 6];
    uint64_t bits = w->bits;
    unsigned k = (unsigned)(cell & 63);
    return bits >> k & 1 ? w->before + tk_popcount64(bits & (((uint64_t)1 << k) - 1)) : TK_NO_RANK;
}

/* 1 when `grid` (or NULL) answers the join of ids l and r: its rank, or TK_NO_RANK, in *rank. */
static inline int tk_grid_get(const tk_grid *grid, uint32_t l, uint32_t r, uint32_t *rank) {
    if (!grid || (l | r) >= TK_GRID_DIM) return 0;
    uint32_t k = tk_grid_find(grid, l, r);
    *rank = k == TK_NO_RANK ? TK_NO_RANK : grid->ranks[k];
    return 1;
}

/* Every cell of the grid, dense (cell l * TK_GRID_DIM + r). */
static void tk_grid_cells(const tk_grid *grid, uint32_t *cells) {
    for (uint32_t l = 0; l < TK_GRID_DIM; l++)
        for (uint32_t r = 0; r < TK_GRID_DIM; r++)
            tk_grid_get(grid, l, r, &cells[(size_t)l * TK_GRID_DIM + r]);
}

static size_t tk_capacity_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;
    return cap;
}

/* ---- a blocked Bloom filter of 64-bit hashes ---------------------------------- */
/* Most keys the encoder looks up are in no table (Russian on o200k: 459k of 873k lookups
 * of 3 or more bytes find no piece). The filter, 8 bits per key in 64-byte blocks, answers
 * ~95% of those from one cache line that stays in L2 (256 KiB for o200k's pieces, 64 KiB
 * for GPT-2's merges) instead of a probe of the table (then 16 MB, 2 MB). Cold, in-process A/B
 * medians of 5: SmolLM2 on Russian 18.3 -> 21.6 MB/s, qwen on CJK 5.1 -> 7.1, o200k on 13
 * languages 9.9 -> 12.9. The piece table's slot takes the hash's low 32 bits (tk_piece_home),
 * the chunk cache's its low bits and its shard the top 6; the filter takes bits 20-37 and 40 up. */
typedef struct {
    uint64_t *words; /* 8 per block */
    size_t blocks_mask;
} tk_bloom;

static int tk_bloom_init(tk_bloom *b, size_t n) {
    size_t blocks = 1;
    while (blocks * 512 < 8 * n) blocks <<= 1; /* >= 8 bits per key, 2 set: ~5% false hits */
    b->words = calloc(blocks * 8, sizeof(uint64_t));
    b->blocks_mask = blocks - 1;
    return b->words ? 0 : -1;
}

static inline const uint64_t *tk_bloom_block(const tk_bloom *b, uint64_t h) {
    return b->words + 8 * ((h >> 40) & b->blocks_mask);
}

static inline void tk_bloom_add(tk_bloom *b, uint64_t h) {
    uint64_t *w = b->words + 8 * ((h >> 40) & b->blocks_mask);
    unsigned x = (unsigned)(h >> 20) & 511, y = (unsigned)(h >> 29) & 511;
    w[x >> 6] |= (uint64_t)1 << (x & 63);
    w[y >> 6] |= (uint64_t)1 << (y & 63);
}

/* 0 when no key added has hash h. */
static inline int tk_bloom_maybe(const tk_bloom *b, uint64_t h) {
    const uint64_t *w = tk_bloom_block(b, h);
    unsigned x = (unsigned)(h >> 20) & 511, y = (unsigned)(h >> 29) & 511;
    return (w[x >> 6] >> (x & 63) & 1) & (w[y >> 6] >> (y & 63) & 1);
}

/* ---- explicit merges: (left, right) -> (rank, result) ---------------------- */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX marks an empty slot */
    uint32_t rank;
    uint32_t result;
} tk_pair_slot;

typedef struct {
    tk_pair_slot *slots;
    size_t mask;
    tk_bloom bloom;
    tk_grid *grid;        /* the rank and result of pairs of ids below TK_GRID_DIM, or NULL */
    tk_prejoin *prejoin;  /* a merge list's pairs joined before merging, or NULL */
} tk_pair_map;

static int tk_pair_map_init(tk_pair_map *m, size_t n) {
    size_t cap = tk_capacity_for(n);
    m->slots = malloc(cap * sizeof(tk_pair_slot));
    if (!m->slots || tk_bloom_init(&m->bloom, n) < 0) return -1;
    memset(m->slots, 0xff, cap * sizeof(tk_pair_slot));
    m->mask = cap - 1;
    return 0;
}

static void tk_pair_map_free(tk_pair_map *m) {
    free(m->slots);
    free(m->bloom.words);
    tk_grid_free(m->grid);
    free(m->prejoin);
}

/* 0 inserted, 1 the pair was already there (the first insertion wins). */
static int tk_pair_map_put(tk_pair_map *m, uint32_t l, uint32_t r, uint32_t rank, uint32_t result) {
    uint64_t key = ((uint64_t)l << 32) | r;
    uint64_t h = tk_mix64(key);
    size_t i = h & m->mask;
    tk_bloom_add(&m->bloom, h);
    while (m->slots[i].key != UINT64_MAX) {
        if (m->slots[i].key == key) return 1;
        i = (i + 1) & m->mask;
    }
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].result = result;
    return 0;
}

static inline const tk_pair_slot *tk_pair_map_get(const tk_pair_map *m, uint32_t l, uint32_t r) {
    uint64_t key = ((uint64_t)l << 32) | r;
    uint64_t h = tk_mix64(key);
    if (!tk_bloom_maybe(&m->bloom, h)) return NULL;
    size_t i = h & m->mask;
    for (;;) {
        const tk_pair_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & m->mask;
    }
}

/* ---- rank files: byte string -> rank ---------------------------------------- */
/* A 32-byte slot (two to a cache line) holds a piece's first 24 bytes, its rank, and its length
 * and blob offset packed in one word, so a lookup - found or not - of a string of up to 24
 * bytes (nearly every chunk and join) touches one slot and nothing else; only a longer piece
 * compares its remaining bytes in the blob. (8-byte slots pointing at an entry and the blob
 * made each found piece cost three cache misses: cold English ran at a third of the speed.
 * 16-byte slots holding 8 bytes sent every longer chunk to the blob: that second, dependent
 * miss was 8% of cold PUD English on cl100k in-process and 10% in fresh processes, all of it
 * libc's memcmp; a prefetch of the blob line three chunks ahead did not arrive in time. Twice
 * the table, in-process A/B medians of 11 fresh encoders: English 1.06-1.12x on o200k, qwen,
 * SmolLM2 and GPT-2, other texts 0.93-1.12x.) A piece of 256 bytes or more, or one past 16 MiB
 * of blob, keeps TK_PIECE_FAR and its length and offset in the entries. (A second table of the
 * pieces of 3-5 bytes, one u64 each, 512 KiB for cl100k and 1 MiB for o200k, asked before this
 * one, ran 0.88-0.95x, fresh processes, medians of 7, cl100k / o200k / qwen on 13 languages
 * and RusLit-40: one more table in the caches, and the lookups the memo misses were not
 * waiting on this one's lines.) */
#define TK_PIECE_FAR UINT32_MAX

typedef struct {
    uint64_t head; /* the first min(len, 8) bytes, little-endian, zero-padded */
    uint64_t tail[2]; /* bytes past the head, as tk_piece_tail reads them */
    uint32_t rank;
    uint32_t meta; /* len << 24 | blob offset; 0 empty (pieces are never empty); or FAR */
} tk_piece_slot;
_Static_assert(sizeof(tk_piece_slot) == 32, "two slots to a 64-byte line");

/* Bytes 8 and up of p[0..len) (8 < len <= 24) as two words, read only inside p: up to 16
 * bytes, the word ending at len (overlapping the head); up to 24, bytes 8..16 and the word
 * ending at len. With the head and the length they cover every byte, so two strings of that
 * length are equal when their words are. */
static inline void tk_piece_tail(const unsigned char *p, size_t len, uint64_t tail[2]) {
    if (len <= 16) {
        memcpy(&tail[0], p + len - 8, 8);
        tail[1] = 0;
    } else {
        memcpy(&tail[0], p + 8, 8);
        memcpy(&tail[1], p + len - 8, 8);
    }
}

typedef struct {
    uint32_t off, len;
} tk_piece_entry;

typedef struct {
    tk_piece_slot *slots;
    tk_piece_entry *entries; /* by slot index, for FAR pieces only */
    size_t cap; /* slots */
    const unsigned char *blob;
    uint32_t *two; /* rank of every two-byte string (65536 entries): the first lookups of a chunk */
    tk_bloom bloom; /* of the pieces' tk_hash_bytes */
    uint32_t max_rank;
    tk_prejoin *prejoin; /* pairs joined before merging (encode_prejoin.h), or NULL */
    tk_grid *grid;       /* the rank of the join of pieces a, b < TK_GRID_DIM, or NULL */
    uint32_t longest[256]; /* by tk_piece_lead: the longest piece (0: none) */
    uint64_t *split; /* TK_SPLIT_WORDS: the joins BPE can make (tk_split_maybe), or NULL */
} tk_piece_map;

/* The byte a piece or chunk is filed under for tk_piece_map.longest: its first, or its second
 * after a leading space. */
static inline unsigned char tk_piece_lead(const unsigned char *p, size_t len) {
    return p[0] == ' ' && len > 1 ? p[1] : p[0];
}

/* 0 when p[0..len) is longer than every piece filed under its lead, so is none of them: a
 * sentence of Chinese (a chunk of 40-100 bytes, where qwen's Chinese pieces reach 33) is not
 * hashed for the piece table. */
static inline int tk_piece_may_be(const tk_piece_map *m, const unsigned char *p, size_t len) {
    return len <= m->longest[tk_piece_lead(p, len)];
}

static inline uint64_t tk_head8(const unsigned char *p, size_t len) {
    uint64_t v = 0;
    memcpy(&v, p, len < 8 ? len : 8);
    return v;
}

/* Slots for n pieces: two-thirds full, any count (tk_piece_home). A rank file's table is the
 * largest an encoder probes, and a fresh process's lookups miss the CPU caches unless it fits
 * their share of L3, which on a shared host changes from run to run: random reads of a 16 MiB
 * table cost 31-125 ns across runs of one program here, of 8 MiB 17-24 ns. The power of two at
 * least twice the pieces made qwen's and o200k's tables 16 MiB (a third full); this makes them
 * 7.0 and 9.2 MiB (cl100k 8 -> 4.6). One thread, fresh processes interleaved, the 13 PUD
 * languages on qwen cold: runs at full speed (48-50 MB/s; the others near half) 21 of 34 with
 * qwen's table at 8 MiB (a power of two, 58% full), 10 of 34 at 16 MiB; at 7.0 MiB in a quiet
 * period every run was fast, 49.9-50.9 against 48.2-49.7 MB/s at 16. A probe that finds its
 * piece reads ~2 slots, about as many lines as before (two slots a line). */
static size_t tk_piece_capacity(size_t n) { return n + n / 2 + 16; }

static int tk_piece_map_init(tk_piece_map *m, size_t n, const unsigned char *blob) {
    size_t cap = tk_piece_capacity(n);
    m->slots = tk_table_alloc(cap * sizeof(tk_piece_slot));
    m->entries = NULL; /* made on the first FAR piece */
    m->prejoin = NULL;
    m->grid = NULL;
    m->split = NULL;
    m->two = malloc(65536 * sizeof(uint32_t));
    if (!m->slots || !m->two || tk_bloom_init(&m->bloom, n) < 0) return -1;
    m->cap = cap;
    m->blob = blob;
    memset(m->two, 0xff, 65536 * sizeof(uint32_t));
    return 0;
}

static void tk_piece_map_free(tk_piece_map *m) {
    free(m->slots);
    free(m->entries);
    free(m->two);
    free(m->bloom.words);
    free(m->prejoin);
    free(m->split);
    tk_grid_free(m->grid);
}

static inline int tk_piece_slot_is(const tk_piece_map *m, size_t i, const unsigned char *p,
                                   size_t len, uint64_t head) {
    const tk_piece_slot *s = &m->slots[i];
    if (s->head != head) return 0;
    size_t off, plen;
    if (s->meta != TK_PIECE_FAR) {
        plen = s->meta >> 24;
        off = s->meta & 0xffffff;
    } else {
        plen = m->entries[i].len;
        off = m->entries[i].off;
    }
    if (plen != len) return 0;
    if (len <= 8) return 1;
    if (len > 24) return memcmp(m->blob + off + 8, p + 8, len - 8) == 0;
    uint64_t tail[2];
    tk_piece_tail(p, len, tail);
    return ((tail[0] ^ s->tail[0]) | (tail[1] ^ s->tail[1])) == 0;
}

/* The slot where a piece of hash h is first looked for: the high half of its low 32 bits times
 * the slot count (any count, where a mask needs a power of two). */
static inline size_t tk_piece_home(const tk_piece_map *m, uint64_t h) {
    return (size_t)(((h & 0xffffffffu) * (uint64_t)m->cap) >> 32);
}

/* The rank of p[0..len) (h its tk_hash_bytes), or TK_NO_RANK; *slot is where it is or
 * would go. */
static inline uint32_t tk_piece_map_find(const tk_piece_map *m, const unsigned char *p, size_t len,
                                         uint64_t h, size_t *slot) {
    uint64_t head = tk_head8(p, len);
    size_t i = tk_piece_home(m, h);
    for (; m->slots[i].meta != 0; i = i + 1 == m->cap ? 0 : i + 1)
        if (tk_piece_slot_is(m, i, p, len, head)) {
            *slot = i;
            return m->slots[i].rank;
        }
    *slot = i;
    return TK_NO_RANK;
}

/* 0 inserted, 1 the piece was already there, -1 out of memory. */
static int tk_piece_map_put(tk_piece_map *m, uint32_t off, uint32_t len, uint32_t rank) {
    const unsigned char *p = m->blob + off;
    size_t i;
    uint64_t h = tk_hash_bytes(p, len);
    if (tk_piece_map_find(m, p, len, h, &i) != TK_NO_RANK) return 1;
    tk_bloom_add(&m->bloom, h);
    if (len == 2) m->two[(unsigned)p[0] << 8 | p[1]] = rank;
    unsigned char lead = tk_piece_lead(p, len);
    if (len > m->longest[lead]) m->longest[lead] = len;
    tk_piece_slot *s = &m->slots[i];
    s->head = tk_head8(p, len);
    if (len > 8 && len <= 24) tk_piece_tail(p, len, s->tail);
    s->rank = rank;
    if (len < 256 && off < (1u << 24)) {
        s->meta = len << 24 | off; /* never 0: len >= 1 */
        return 0;
    }
    if (!m->entries && !(m->entries = calloc(m->cap, sizeof(tk_piece_entry)))) return -1;
    m->entries[i] = (tk_piece_entry){off, len};
    s->meta = TK_PIECE_FAR;
    return 0;
}

/* The rank of p[0..len) (h its tk_hash_bytes, unused for two bytes), or TK_NO_RANK. */
static inline uint32_t tk_piece_map_get(const tk_piece_map *m, const unsigned char *p, size_t len,
                                        uint64_t h) {
    if (len == 2) return m->two[(unsigned)p[0] << 8 | p[1]];
    if (!tk_bloom_maybe(&m->bloom, h)) return TK_NO_RANK;
    size_t i;
    return tk_piece_map_find(m, p, len, h, &i);
}

/* ---- rank mode's memo: (left rank, right rank) -> rank of the joined bytes ---- */
/* Two parts always join to the same bytes, so this memo of byte-string lookups is
 * exact. A slot is one u64 (left, right and the joined rank in 21 bits each), the table
 * direct-mapped and of fixed size, TK_MEMO_SLOTS x 8 bytes = 256 KiB, so it stays in a
 * core's L2 cache: a hit costs a few nanoseconds, where the piece table (9 MiB for o200k)
 * misses the CPU caches on nearly every lookup. A
 * collision overwrites, so it never grows. Tables with ranks of 2^21 - 1 or more do
 * without it. One per encoder (no locking). */
#define TK_MEMO_SLOT_BITS 15
#define TK_MEMO_SLOTS ((size_t)1 << TK_MEMO_SLOT_BITS)
#define TK_MEMO_BITS 21
#define TK_MEMO_NONE ((1u << TK_MEMO_BITS) - 1) /* the packed "no rank" */

typedef struct {
    uint64_t *slots; /* UINT64_MAX: empty (its left part, 2^22 - 1, is never a rank) */
} tk_memo;

static void tk_memo_free(tk_memo *m) {
    free(m->slots);
    m->slots = NULL;
}

static inline uint64_t tk_memo_key(uint32_t l, uint32_t r) {
    return ((uint64_t)l << (2 * TK_MEMO_BITS)) | ((uint64_t)r << TK_MEMO_BITS);
}

/* The slot of a key: the top bits of one multiply by 2^64 / phi (Fibonacci hashing), which
 * every bit of the key reaches. The memo's loads wait on this index, a join's lookups on the
 * loads: splitmix64's finaliser here (two more multiplies) ran 2-3% slower cold on RusLit-40
 * with qwen and o200k, fresh processes interleaved, medians of 7. */
static inline size_t tk_memo_index(uint64_t key) {
    return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - TK_MEMO_SLOT_BITS));
}

/* ---- rank mode's split filter: which parts BPE can join at all ---- */
/* Of the pairs a new word's joins ask about that neither the grid nor the memo answers, nearly
 * all are no piece: of the 61,971 distinct pairs merging the 7 Latin-script PUD languages' new
 * words asks on qwen, 5,646 join. Each such question hashed the joined bytes and read the piece
 * table's Bloom filter. This filter answers most of them from the two ids: one multiply and
 * one line of a table small enough to stay in L2 (TK_SPLIT_WORDS x 8 bytes = 128 KiB), two bits
 * per join BPE can make, set when tables load.
 *
 * Which joins are those? A part BPE makes in a chunk is made as BPE on its own bytes makes it:
 * the joins inside the part's bytes before it exists are the lowest on offer there each time
 * (pairs inside a span change only by joins inside it), so in the same order as alone, and the
 * part is made by the last join BPE on its bytes alone makes - its history, which backtracking
 * keeps for the tokens it can take (encode_backtrack.h). So a pair of parts l, r whose bytes
 * are piece T but are not T's history is never joined: were it ever the leftmost lowest pair on
 * offer, BPE would make T from it. Calling it no join removes a pair that is never the one taken
 * and changes no choice. The filter holds each token's history and, for the tokens
 * backtracking has none for (BPE builds them out of rank order, or never from their bytes),
 * every split of them into two pieces: about one join per piece (qwen ~152,000, o200k
 * ~200,000), a sixth to a third of the bits set, so that 3-10% of the pairs that are no join
 * pass (cl100k 3%, qwen 7%, o200k 10%). A pair it refuses is no join; for the others the memo
 * and the piece table answer as before. The filter is made from backtracking's trie: tables
 * without one (TOKEMBED_BACKTRACK=0, ids far sparser than the pieces, a piece over 1,024
 * bytes) have none, and every join goes on to the memo as before.
 *
 * One thread, fresh processes interleaved, medians (of 13 unless said), cold, before -> after:
 * the 7 Latin-script PUD languages qwen 16.30 -> 15.46 ms, o200k 15.93 -> 15.42, cl100k (of 11)
 * 16.08 -> 14.99; 13 PUD languages o200k (of 7) 40.8 -> 39.9; RusLit-40 qwen (of 7) 43.6 ->
 * 40.9; PUD Chinese + Korean (of 15) qwen 5.31 -> 5.08, o200k 5.34 -> 5.04; PUD English and
 * the other scripts within their spread. Twice the size measured within 3% either way (cl100k's
 * Latin faster, qwen's CJK slower); every split of every piece (qwen 294,166, o200k 446,189)
 * in 256 KiB instead of the histories, 1-2% slower; in 512 KiB, 6% slower (L2). Making the
 * tables takes as long with it as without (qwen, o200k, cl100k, min of 5: within 3%).
 * TOKEMBED_SPLITS=0 in the environment when tables are made leaves it out (tests). */
#define TK_SPLIT_BITS 14 /* log2 of the filter's words */
#define TK_SPLIT_WORDS ((size_t)1 << TK_SPLIT_BITS)

/* One multiply: a product's top bits depend on every bit of l and r, its low 32 bits on r
 * alone, so the word and both bits come from the top 26 (bits from 20 and 26 were r's alone:
 * a common right part such as "s" or "ing" put every pair ending in it on the same two bits,
 * and on cl100k such pairs passed at ~10% against ~3% for all). */
static inline uint64_t tk_split_hash(uint32_t l, uint32_t r) {
    return ((uint64_t)l << 32 | r) * 0x9e3779b97f4a7c15ull;
}

static inline uint64_t tk_split_bits(uint64_t h) {
    return (uint64_t)1 << (h >> 38 & 63) | (uint64_t)1 << (h >> 44 & 63);
}

static inline void tk_split_add(uint64_t *split, uint32_t l, uint32_t r) {
    uint64_t h = tk_split_hash(l, r);
    split[h >> (64 - TK_SPLIT_BITS)] |= tk_split_bits(h);
}

/* 0 when BPE never joins parts l and r (by the filter of `m`, which must exist). */
static inline int tk_split_maybe(const tk_piece_map *m, uint32_t l, uint32_t r) {
    uint64_t h = tk_split_hash(l, r), bits = tk_split_bits(h);
    return (m->split[h >> (64 - TK_SPLIT_BITS)] & bits) == bits;
}

/* The hash of p[0..len) for tk_join_rank, its slot already loading, so that the lookups a
 * join makes wait on memory at once instead of one after the other (0 for two bytes: the
 * two-byte table answers those). */
static inline uint64_t tk_piece_prefetch(const tk_piece_map *pieces, const unsigned char *p,
                                         size_t len) {
    if (len <= 2) return 0;
    uint64_t h = tk_hash_bytes(p, len);
    __builtin_prefetch(tk_bloom_block(&pieces->bloom, h));
    __builtin_prefetch(&pieces->slots[tk_piece_home(pieces, h)]);
    return h;
}

/* 1 when the memo holds the join of parts l and r (len bytes), its rank then in *rank; two
 * bytes are always known (the two-byte table). A join's two new pairs are asked here first,
 * and only those the memo lacks are hashed and prefetched: most are in it (87% of the joins
 * of RusLit-40's distinct chunks on o200k), and hashing them and fetching their piece slots
 * anyway cost time and cache lines for nothing. (tk_join_rank below keeps its own probe:
 * written on top of this function it ran 4-8% slower on RusLit-40, in-process.) */
static inline int tk_join_known(const tk_piece_map *pieces, const tk_memo *memo, uint32_t l,
                                uint32_t r, const unsigned char *p, size_t len, uint32_t *rank) {
    if (len == 2) {
        *rank = pieces->two[(unsigned)p[0] << 8 | p[1]];
        return 1;
    }
    if (tk_grid_get(pieces->grid, l, r, rank)) return 1;
    if (pieces->split && !tk_split_maybe(pieces, l, r)) {
        *rank = TK_NO_RANK;
        return 1;
    }
    if (pieces->max_rank >= TK_MEMO_NONE || !memo->slots) return 0;
    uint64_t key = tk_memo_key(l, r), v = memo->slots[tk_memo_index(key)];
    if ((v & ~(uint64_t)TK_MEMO_NONE) != key) return 0;
    *rank = (uint32_t)(v & TK_MEMO_NONE) == TK_MEMO_NONE ? TK_NO_RANK : (uint32_t)(v & TK_MEMO_NONE);
    return 1;
}

/* Rank of the bytes of parts l and r (p[0..len)), through the memo. h is their hash from
 * tk_piece_prefetch, or 0 to hash them here only if the memo misses (a hash that happens
 * to be 0 is just computed again). */
static inline uint32_t tk_join_rank(const tk_piece_map *pieces, tk_memo *memo, uint32_t l,
                                    uint32_t r, const unsigned char *p, size_t len, uint64_t h) {
    if (len == 2) return pieces->two[(unsigned)p[0] << 8 | p[1]];
    uint32_t known;
    if (tk_grid_get(pieces->grid, l, r, &known)) return known;
    if (pieces->split && !tk_split_maybe(pieces, l, r)) return TK_NO_RANK;
    if (pieces->max_rank >= TK_MEMO_NONE)
        return tk_piece_map_get(pieces, p, len, h ? h : tk_hash_bytes(p, len));
    uint64_t key = tk_memo_key(l, r);
    size_t i = tk_memo_index(key);
    if (memo->slots) {
        uint64_t v = memo->slots[i];
        if ((v & ~(uint64_t)TK_MEMO_NONE) == key) {
            uint32_t rank = (uint32_t)(v & TK_MEMO_NONE);
            return rank == TK_MEMO_NONE ? TK_NO_RANK : rank;
        }
    } else if ((memo->slots = malloc(TK_MEMO_SLOTS * sizeof(uint64_t))) != NULL) {
        memset(memo->slots, 0xff, TK_MEMO_SLOTS * sizeof(uint64_t));
    }
    uint32_t rank = tk_piece_map_get(pieces, p, len, h ? h : tk_hash_bytes(p, len));
    if (memo->slots) /* out of memory: only the memo is lost */
        memo->slots[i] = key | (rank == TK_NO_RANK ? TK_MEMO_NONE : rank);
    return rank;
}

/* ---- the chunk -> ids cache ------------------------------------------------- */
/* One 64-byte slot (a cache line) per chunk: a chunk of up to TK_INLINE_KEY bytes with
 * up to TK_INLINE_IDS ids - nearly every word of natural text - is answered by one
 * memory access, where slot, key and ids in three places cost three cache misses (the
 * hit path of a warm encoder is bound by them). Longer chunks keep their key and ids in
 * one arena record: key bytes, then the ids, 4-byte aligned. */
#define TK_INLINE_KEY 32
#define TK_INLINE_IDS 4

typedef struct {
    uint64_t hash;
    uint16_t klen; /* 0 marks an empty slot (chunks are never empty) */
    uint16_t vlen;
    uint32_t ext;  /* arena offset of the record of a chunk that is not inline */
    unsigned char key[TK_INLINE_KEY];
    uint32_t ids[TK_INLINE_IDS];
} tk_cache_slot;

typedef struct {
    tk_cache_slot *slots;
    size_t mask, used, limit;
    unsigned char *arena;
    size_t arena_len, arena_cap;
    uint64_t clears;
} tk_cache;

/* Arena offsets are u32: a cache is cleared before its arena reaches 1 GiB. */
#define TK_CACHE_ARENA_LIMIT ((size_t)1 << 30)
#define TK_ARENA_PER_ENTRY 64

static inline int tk_cache_inline(size_t n, size_t m) {
    return n <= TK_INLINE_KEY && m <= TK_INLINE_IDS;
}

static inline const unsigned char *tk_cache_key(const tk_cache *c, const tk_cache_slot *s) {
    return tk_cache_inline(s->klen, s->vlen) ? s->key : c->arena + s->ext;
}

/* The ids of a slot tk_cache_get returned. */
static inline const uint32_t *tk_cache_ids(const tk_cache *c, const tk_cache_slot *s) {
    if (tk_cache_inline(s->klen, s->vlen)) return s->ids;
    return (const uint32_t *)(const void *)(c->arena + s->ext + ((s->klen + 3u) & ~3u));
}

static void tk_cache_free(tk_cache *c) {
    free(c->slots);
    free(c->arena);
    memset(c, 0, sizeof(*c));
}

static void tk_cache_clear(tk_cache *c) {
    if (c->slots) memset(c->slots, 0, (c->mask + 1) * sizeof(tk_cache_slot));
    c->used = 0;
    c->arena_len = 0;
    c->clears++;
}

static inline const tk_cache_slot *tk_cache_get(const tk_cache *c, const unsigned char *p,
                                                size_t n, uint64_t h) {
    if (!c->slots) return NULL;
    size_t i = h & c->mask;
    for (;;) {
        const tk_cache_slot *s = &c->slots[i];
        if (s->klen == 0) return NULL;
        if (s->hash == h && s->klen == n && memcmp(tk_cache_key(c, s), p, n) == 0) return s;
        i = (i + 1) & c->mask;
    }
}

static int tk_cache_grow(tk_cache *c) {
    size_t cap = c->slots ? 2 * (c->mask + 1) : 64; /* 4 KiB: 64 shards start at 256 KiB, not 4 MB */
    tk_cache_slot *slots = tk_table_alloc(cap * sizeof(tk_cache_slot));
    if (!slots) return -1;
    if (c->slots) {
        for (size_t j = 0; j <= c->mask; j++) {
            tk_cache_slot *s = &c->slots[j];
            if (s->klen == 0) continue;
            size_t i = s->hash & (cap - 1);
            while (slots[i].klen != 0) i = (i + 1) & (cap - 1);
            slots[i] = *s;
        }
        free(c->slots);
    }
    c->slots = slots;
    c->mask = cap - 1;
    return 0;
}

static int tk_reserve(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need) n *= 2;
    void *p = realloc(*buf, n * item);
    if (!p) return -1;
    *buf = p;
    *cap = n;
    return 0;
}

/* Remember ids for a chunk (n <= 65535 bytes, m <= n ids); when full, the whole cache is
 * dropped (a cheap and predictable policy: natural text refills it with its frequent
 * chunks). */
static int tk_cache_put(tk_cache *c, const unsigned char *p, size_t n, uint64_t h,
                        const uint32_t *ids, size_t m) {
    if (c->limit == 0) return 0;
    size_t rec = tk_cache_inline(n, m) ? 0 : ((n + 3) & ~(size_t)3) + 4 * m;
    /* the arena holds at most as many bytes as a full slot table (TK_ARENA_PER_ENTRY per
     * entry), so the cache stays within ~3 x 64 bytes per entry of its limit */
    size_t arena_limit = c->limit * TK_ARENA_PER_ENTRY;
    if (arena_limit > TK_CACHE_ARENA_LIMIT) arena_limit = TK_CACHE_ARENA_LIMIT;
    if (c->used >= c->limit || c->arena_len + rec > arena_limit) tk_cache_clear(c);
    if (!c->slots || 2 * (c->used + 1) > c->mask + 1) {
        if (tk_cache_grow(c) < 0) return -1;
    }
    size_t i = h & c->mask;
    while (c->slots[i].klen != 0) i = (i + 1) & c->mask;
    tk_cache_slot *s = &c->slots[i];
    if (rec) {
        if (tk_reserve((void **)&c->arena, &c->arena_cap, c->arena_len + rec, 1) < 0) return -1;
        unsigned char *r = c->arena + c->arena_len;
        memcpy(r, p, n);
        memcpy(r + ((n + 3) & ~(size_t)3), ids, 4 * m);
        s->ext = (uint32_t)c->arena_len;
        c->arena_len += rec;
    } else {
        memcpy(s->key, p, n);
        memcpy(s->ids, ids, 4 * m);
    }
    s->hash = h;
    s->klen = (uint16_t)n;
    s->vlen = (uint16_t)m;
    c->used++;
    return 0;
}
#endif
