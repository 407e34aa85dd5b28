/* Lookup tables of the BPE encoder core (no Python): pair -> (rank, result) for explicit
 * merge lists, byte string -> rank for tiktoken rank files, and the chunk -> ids
 * cache. Open addressing with linear probing; capacities are powers of two kept
 * at most half full, so a probe ends after ~1.5 slots on average. */
#ifndef TOKEMBED_ENCODE_TABLES_H
#define TOKEMBED_ENCODE_TABLES_H
#include "common.h"
#include <stdlib.h>

#define TK_NO_RANK UINT32_MAX

static size_t tk_capacity_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;
    return cap;
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
} tk_pair_map;

static int tk_pair_map_init(tk_pair_map *m, size_t n) {
    size_t cap = tk_capacity_for(n);
    m->slots = malloc(cap * sizeof(tk_pair_slot));
    if (!m->slots) return -1;
    memset(m->slots, 0xff, cap * sizeof(tk_pair_slot));
    m->mask = cap - 1;
    return 0;
}

/* 0 inserted, 1 the pair was already there (the first insertion wins). */
static int tk_pair_map_put(tk_pair_map *m, uint32_t l, uint32_t r, uint32_t rank, uint32_t result) {
    uint64_t key = ((uint64_t)l << 32) | r;
    size_t i = tk_mix64(key) & m->mask;
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
    size_t i = tk_mix64(key) & m->mask;
    for (;;) {
        const tk_pair_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & m->mask;
    }
}

/* ---- rank files: byte string -> rank ---------------------------------------- */
typedef struct {
    uint32_t tag; /* the hash's high half: most mismatches end here, before the blob */
    uint32_t off; /* into the piece blob */
    uint32_t len; /* 0 marks an empty slot (pieces are never empty) */
    uint32_t rank;
} tk_piece_slot;

typedef struct {
    tk_piece_slot *slots;
    size_t mask;
    const unsigned char *blob;
    uint32_t *two; /* rank of every two-byte string (65536 entries): the first lookups of a chunk */
} tk_piece_map;

static int tk_piece_map_init(tk_piece_map *m, size_t n, const unsigned char *blob) {
    size_t cap = tk_capacity_for(n);
    m->slots = calloc(cap, sizeof(tk_piece_slot));
    if (!m->slots) return -1;
    m->mask = cap - 1;
    m->blob = blob;
    m->two = malloc(65536 * sizeof(uint32_t));
    if (!m->two) return -1;
    memset(m->two, 0xff, 65536 * sizeof(uint32_t));
    return 0;
}

/* 0 inserted, 1 the piece was already there. */
static int tk_piece_map_put(tk_piece_map *m, uint32_t off, uint32_t len, uint32_t rank) {
    const unsigned char *p = m->blob + off;
    uint64_t h = tk_hash_bytes(p, len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & m->mask;
    while (m->slots[i].len != 0) {
        tk_piece_slot *s = &m->slots[i];
        if (s->tag == tag && s->len == len && memcmp(m->blob + s->off, p, len) == 0) return 1;
        i = (i + 1) & m->mask;
    }
    if (len == 2) m->two[(unsigned)p[0] << 8 | p[1]] = rank;
    m->slots[i].tag = tag;
    m->slots[i].off = off;
    m->slots[i].len = len;
    m->slots[i].rank = rank;
    return 0;
}

static inline uint32_t tk_piece_map_get(const tk_piece_map *m, const unsigned char *p, size_t len) {
    if (len == 2) return m->two[(unsigned)p[0] << 8 | p[1]];
    uint64_t h = tk_hash_bytes(p, len);
    uint32_t tag = (uint32_t)(h >> 32);
    size_t i = h & m->mask;
    for (;;) {
        const tk_piece_slot *s = &m->slots[i];
        if (s->len == 0) return TK_NO_RANK;
        if (s->tag == tag && s->len == len && memcmp(m->blob + s->off, p, len) == 0) return s->rank;
        i = (i + 1) & m->mask;
    }
}

/* ---- rank mode's memo: (left rank, right rank) -> rank of the joined bytes ---- */
/* Two parts always join to the same bytes, so this memo of byte-string lookups
 * is exact; it stays small and hot where the piece table (12 MB for o200k, plus
 * the bytes to compare) misses the CPU cache on nearly every lookup. One per
 * encoder (no locking); emptied when it reaches its limit. */
typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX marks an empty slot */
    uint32_t rank;
    uint32_t unused;
} tk_memo_slot;

typedef struct {
    tk_memo_slot *slots;
    size_t mask, used;
} tk_memo;

#define TK_MEMO_LIMIT ((size_t)1 << 21)

static void tk_memo_free(tk_memo *m) {
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static inline const tk_memo_slot *tk_memo_get(const tk_memo *m, uint64_t key) {
    if (!m->slots) return NULL;
    size_t i = tk_mix64(key) & m->mask;
    for (;;) {
        const tk_memo_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & m->mask;
    }
}

static int tk_memo_put(tk_memo *m, uint64_t key, uint32_t rank) {
    if (m->used >= TK_MEMO_LIMIT) {
        memset(m->slots, 0xff, (m->mask + 1) * sizeof(tk_memo_slot));
        m->used = 0;
    }
    if (!m->slots || 2 * (m->used + 1) > m->mask + 1) {
        size_t cap = m->slots ? 2 * (m->mask + 1) : 4096;
        tk_memo_slot *slots = malloc(cap * sizeof(tk_memo_slot));
        if (!slots) return -1;
        memset(slots, 0xff, cap * sizeof(tk_memo_slot));
        for (size_t j = 0; m->slots && j <= m->mask; j++) {
            if (m->slots[j].key == UINT64_MAX) continue;
            size_t i = tk_mix64(m->slots[j].key) & (cap - 1);
            while (slots[i].key != UINT64_MAX) i = (i + 1) & (cap - 1);
            slots[i] = m->slots[j];
        }
        free(m->slots);
        m->slots = slots;
        m->mask = cap - 1;
    }
    size_t i = tk_mix64(key) & m->mask;
    while (m->slots[i].key != UINT64_MAX) i = (i + 1) & m->mask;
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->used++;
    return 0;
}

/* Rank of the bytes of parts l and r (p[0..len)), through the memo. */
static inline uint32_t tk_join_rank(const tk_piece_map *pieces, tk_memo *memo, uint32_t l,
                                    uint32_t r, const unsigned char *p, size_t len) {
    if (len == 2) return pieces->two[(unsigned)p[0] << 8 | p[1]];
    uint64_t key = ((uint64_t)l << 32) | r;
    const tk_memo_slot *s = tk_memo_get(memo, key);
    if (s) return s->rank;
    uint32_t rank = tk_piece_map_get(pieces, p, len);
    tk_memo_put(memo, key, rank); /* out of memory: only the memo is lost */
    return rank;
}

/* ---- the chunk -> ids cache ------------------------------------------------- */
typedef struct {
    uint64_t hash;
    uint32_t koff, klen; /* klen 0 marks an empty slot (chunks are never empty) */
    uint32_t voff, vlen;
} tk_cache_slot;

typedef struct {
    tk_cache_slot *slots;
    size_t mask, used, limit;
    unsigned char *keys;
    size_t keys_len, keys_cap;
    uint32_t *vals;
    size_t vals_len, vals_cap;
    uint64_t clears;
} tk_cache;

/* Arena offsets are u32: a cache is cleared before its arenas reach 1 GiB. */
#define TK_CACHE_ARENA_LIMIT ((size_t)1 << 30)

static void tk_cache_free(tk_cache *c) {
    free(c->slots);
    free(c->keys);
    free(c->vals);
    memset(c, 0, sizeof(*c));
}

static void tk_cache_clear(tk_cache *c) {
    if (c->slots) memset(c->slots, 0, (c->mask + 1) * sizeof(tk_cache_slot));
    c->used = 0;
    c->keys_len = 0;
    c->vals_len = 0;
    c->clears++;
}

static inline const tk_cache_slot *tk_cache_get(const tk_cache *c, const unsigned char *p,
                                                size_t n, uint64_t h) {
    if (!c->slots) return NULL;
    size_t i = h & c->mask;
    for (;;) {
        const tk_cache_slot *s = &c->slots[i];
        if (s->klen == 0) return NULL;
        if (s->hash == h && s->klen == n && memcmp(c->keys + s->koff, p, n) == 0) return s;
        i = (i + 1) & c->mask;
    }
}

static int tk_cache_grow(tk_cache *c) {
    size_t cap = c->slots ? 2 * (c->mask + 1) : 1024;
    tk_cache_slot *slots = calloc(cap, sizeof(tk_cache_slot));
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

/* Remember ids for a chunk; when full, the whole cache is dropped (a cheap and
 * predictable policy: natural text refills it with its frequent chunks). */
static int tk_cache_put(tk_cache *c, const unsigned char *p, size_t n, uint64_t h,
                        const uint32_t *ids, size_t m) {
    if (c->limit == 0) return 0;
    if (c->used >= c->limit || c->keys_len + n > TK_CACHE_ARENA_LIMIT ||
        c->vals_len + m > TK_CACHE_ARENA_LIMIT / 4)
        tk_cache_clear(c);
    if (!c->slots || 2 * (c->used + 1) > c->mask + 1) {
        if (tk_cache_grow(c) < 0) return -1;
    }
    if (tk_reserve((void **)&c->keys, &c->keys_cap, c->keys_len + n, 1) < 0) return -1;
    if (tk_reserve((void **)&c->vals, &c->vals_cap, c->vals_len + m, sizeof(uint32_t)) < 0)
        return -1;
    memcpy(c->keys + c->keys_len, p, n);
    memcpy(c->vals + c->vals_len, ids, m * sizeof(uint32_t));
    size_t i = h & c->mask;
    while (c->slots[i].klen != 0) i = (i + 1) & c->mask;
    c->slots[i].hash = h;
    c->slots[i].koff = (uint32_t)c->keys_len;
    c->slots[i].klen = (uint32_t)n;
    c->slots[i].voff = (uint32_t)c->vals_len;
    c->slots[i].vlen = (uint32_t)m;
    c->keys_len += n;
    c->vals_len += m;
    c->used++;
    return 0;
}
#endif
