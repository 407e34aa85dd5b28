/* The encoder's front cache (no Python): the last ids of short chunks, asked before any other
 * table.
 *
 * Natural text repeats its chunks: RusLit-40's first 4 MB has 469,588 chunks of which 50,247
 * differ, PUD English 21,448 of which 5,938 differ. Each repeat used to cost a hash of the
 * chunk, a Bloom filter block, the piece table (then 8 MB for o200k) and a slot of the growing
 * chunk cache behind a shard lock: two or three lines from L3 or memory, ~80 ns warm. The
 * front cache is direct-mapped and private to one encoder (no lock): 2^TK_FRONT_MIN_BITS slots
 * of one 64-byte line each, 2^TK_FRONT_MAX_BITS once grown (between calls, encode_core.c's
 * front_settle), and a chunk of up to TK_FRONT_KEY bytes with up to TK_FRONT_IDS ids is one
 * line there. A slot holds the chunk's bytes zero-padded beside its length, so a hit compares
 * four words and is exact; a new chunk overwrites whatever shared its slot, so the cache never
 * grows past its slots.
 *
 * Size: it was 8,192 slots (512 KiB, inside a core's L2). The 13 PUD languages (283,418
 * chunks, 77,805 distinct on cl100k) overflowed it: 94,000 chunks a call fell through to the
 * chunk cache, which got 47,000 puts for 8,000 hits, and the cold encoder ran 25-30% faster
 * with the chunk cache turned off than on (fresh processes, medians of 5, cl100k, o200k and
 * SmolLM2). 65,536 slots (4 MiB, on huge pages; its lines come from L3, asked for a batch of
 * chunks ahead, see run_batch) hold most repeats of such a text (front hits 170,571 -> 183,641 of
 * its chunks; RusLit-40 293,359 -> 332,535 of 469,583), and the chunk cache now takes a chunk
 * only on its second merge: it is asked 3,973 times and stores 3,509 chunks (encode_core.c,
 * where the two changes are measured together). Sets of two lines (a new chunk moving the
 * older one aside) measured 5-8% slower than one line, cold and on a warm RusLit stream: two
 * lines to ask for and compare per chunk, 64 bytes moved per new chunk.
 *
 * On the two-core test machine a random line costs ~15 ns up to 2 MiB and 120-190 ns from 4
 * MiB on (pointer chasing over huge pages): these 4 MiB are memory there, not L3. Half the
 * slots (2 MiB) still measured no better, fresh processes, medians of 7, one thread, this /
 * half: 13 languages cl100k 1.01, o200k 0.95, GPT-2 0.99; RusLit-40 1.19 / 1.11 / 0.96; PUD
 * English (0.11 MB, where the table zeroed at warm-up is still cached) 0.86 / 0.81 / 0.94. */
#ifndef TOKEMBED_ENCODE_FRONT_H
#define TOKEMBED_ENCODE_FRONT_H
#include "common.h"

/* Slots: 2^16 at first, 2^18 once the front is seen to lose the chunks a text repeats
 * (tk_front_grown). */
#define TK_FRONT_MIN_BITS 16
#define TK_FRONT_MAX_BITS 18
#define TK_FRONT_BYTES(bits) (((size_t)64) << (bits))
#define TK_FRONT_KEY 32
#define TK_FRONT_IDS 7

typedef struct {
    uint64_t w[4]; /* the chunk's bytes, zero after its length */
    uint8_t len;   /* 0: empty (chunks are never empty) */
    uint8_t n_ids;
    uint16_t pad;
    uint32_t ids[TK_FRONT_IDS];
} tk_front_slot;

_Static_assert(sizeof(tk_front_slot) == 64, "one front slot is one cache line (TK_FRONT_BYTES)");

/* A chunk's bytes as four zero-padded words and its slot's index. */
typedef struct {
    uint64_t w[4];
    size_t index;
} tk_front_key;

/* 0xff for the first n of 32 bytes, read at ones + 32 - n. */
static const unsigned char tk_front_ones[64] = {
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
};

/* The slot index of a chunk of n bytes whose zero-padded words are w, in a front of 2^bits. */
static inline size_t tk_front_index(const uint64_t w[4], size_t n, unsigned bits) {
    uint64_t h = (w[0] * 0x9e3779b97f4a7c15ull) ^ (w[1] * 0xc2b2ae3d27d4eb4full) ^
                 (w[2] * 0x165667b19e3779f9ull) ^ (w[3] * 0xd6e8feb86659fd93ull) ^ n;
    return (size_t)(tk_mix64(h) >> (64 - bits));
}

/* The key of p[0..n) (1 <= n <= TK_FRONT_KEY); `avail` bytes from p may be read (>= n). Whole
 * 8-byte loads, masked, when the text goes on that far: no byte-wise copy per chunk. Each word
 * stays in a register until it is stored: masking a local array that the compiler then read
 * back as 16-byte vectors made every chunk wait on a failed store-to-load forward (41% of the
 * batch loop's samples on a warm French stream; fixing it alone: 168 -> 178 MB/s). */
static inline void tk_front_key_of(const unsigned char *p, size_t n, size_t avail, unsigned bits,
                                   tk_front_key *k) {
    uint64_t w[4];
    if (avail >= TK_FRONT_KEY) {
        const unsigned char *ones = tk_front_ones + TK_FRONT_KEY - n;
        for (int j = 0; j < 4; j++) w[j] = tk_load64(p + 8 * j) & tk_load64(ones + 8 * j);
    } else {
        unsigned char buf[TK_FRONT_KEY] = {0};
        memcpy(buf, p, n);
        for (int j = 0; j < 4; j++) w[j] = tk_load64(buf + 8 * j);
    }
    for (int j = 0; j < 4; j++) k->w[j] = w[j];
    k->index = tk_front_index(w, n, bits);
}

/* The slot holding the chunk of `k` (n bytes), or NULL. */
static inline const tk_front_slot *tk_front_get(const tk_front_slot *slots, const tk_front_key *k,
                                                size_t n) {
    const tk_front_slot *s = &slots[k->index];
    if (s->len != n) return NULL;
    return ((s->w[0] ^ k->w[0]) | (s->w[1] ^ k->w[1]) | (s->w[2] ^ k->w[2]) |
            (s->w[3] ^ k->w[3])) == 0
               ? s
               : NULL;
}

/* Remember the m ids of the chunk of `k` (n bytes), when they fit a slot (a chunk the slot
 * does not hold: put after a miss). Returns 1 when that displaced another chunk. */
static inline int tk_front_put(tk_front_slot *slots, const tk_front_key *k, size_t n,
                               const uint32_t *ids, size_t m) {
    if (m > TK_FRONT_IDS) return 0;
    tk_front_slot *s = &slots[k->index];
    int displaced = s->len != 0;
    memcpy(s->w, k->w, sizeof s->w);
    s->len = (uint8_t)n;
    s->n_ids = (uint8_t)m;
    memcpy(s->ids, ids, m * sizeof(uint32_t));
    return displaced;
}

/* A front of 2^bits slots holding the chunks of `old` (2^old_bits slots, bits > old_bits), or
 * NULL without memory (`old` is kept then). Two chunks that meet in one new slot keep the later
 * in `old`'s order; the rest are lost, as any chunk a new one displaces. A key made for the
 * old front names one of the first 2^old_bits slots of the new: asked there, it misses, or is
 * put where it is never asked; never a wrong answer, since a hit compares the whole chunk. */
static tk_front_slot *tk_front_grown(const tk_front_slot *old, unsigned old_bits, unsigned bits) {
    tk_front_slot *slots = tk_table_alloc(TK_FRONT_BYTES(bits));
    if (!slots) return NULL;
    for (size_t i = 0; i < (size_t)1 << old_bits; i++)
        if (old[i].len) slots[tk_front_index(old[i].w, old[i].len, bits)] = old[i];
    return slots;
}
#endif
