/* The merge learner's core (no Python): BPE merges learned over the unique chunks of a
 * corpus, equal merge for merge to the reference (train_reference.learn_merges_reference).
 * learn_module.c binds it to Python.
 *
 * State:
 *   - every chunk as an int32 id array, rewritten in place as merges shorten it
 *     (all chunks live in one array laid out like the table's byte blob);
 *   - pair -> slot id through an open-addressing hash map (linear probing, deletion by
 *     backward shift, so there are no tombstones), and per slot: the exact count, a lower
 *     bound of the pair's first position, and a superset of the chunks that hold it;
 *   - an indexed binary heap of live slots, best first by (count desc, position asc).
 *
 * The start is the chunks' bytes (ids 0..255), or a base tokenizer's ids of each chunk
 * (tk_learn_start); learned merge k makes id first_id + k either way.
 *
 * Positions are offsets into the table's byte blob: chunks are laid out in first-encounter
 * order and byte offsets of surviving tokens never move under merges, so the smallest blob
 * offset of a pair is its first encounter in a left-to-right scan of the corpus (which the
 * reference uses to break ties). Invariant: every live pair's bound is <= its true first
 * position. A merge that creates an occurrence in chunk w lowers the bound to the start of
 * w; removals never invalidate a lower bound. The heap's top is the true best once its bound
 * is exact (distinct pairs never start at the same position) or its count is strictly
 * larger than both children's; otherwise the bound is made exact and the top re-sifted.
 *
 * Counts are int64. A pair's count never exceeds sum(count[w] * (len(w) - 1)) over the
 * chunks, the number of adjacent byte pairs in the corpus; learn() checks that this sum
 * fits in int64 (a corpus of about 9.2e18 bytes), so no count can overflow.
 */
#include "learn_core.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct {
    int32_t a, b;      /* the pair */
    int32_t chunk;     /* chunk of the position bound */
    int32_t heap;      /* index in the heap, -1 when not in it */
    int64_t count;     /* exact count (occurrences, overlapping, times multiplicity) */
    int64_t pos;       /* lower bound of the first occurrence's blob offset */
    int32_t *occ;      /* chunks that hold or held the pair (repeats allowed) */
    int32_t occ_len, occ_cap;
    int32_t dirty;     /* 1 while listed for a heap update after the current merge */
    int32_t next_free; /* free-list link of an unused slot */
} Slot;

typedef struct {
    int64_t count, pos; /* the slot's key when last (re-)sifted */
    int32_t id;
} HeapEntry;

typedef struct {
    uint64_t key; /* (a << 32) | b; EMPTY when unused */
    int32_t id;
} Cell;

#define EMPTY UINT64_MAX

struct tk_learner {
    /* input (views held by the caller) */
    const int64_t *offsets;
    const int64_t *counts;
    int64_t n_chunks;
    /* chunks as ids */
    int32_t *ids;     /* chunk w occupies ids[offsets[w] .. offsets[w] + len[w]) */
    int64_t *len;     /* current number of ids of each chunk */
    int32_t *seen;    /* last merge that visited each chunk (dedups occurrence lists) */
    int64_t *piece;   /* byte length of each id's piece */
    /* pairs */
    Slot *slots;
    int32_t n_slots, cap_slots, free_head;
    Cell *cells;
    uint64_t mask; /* cells capacity - 1 */
    int64_t n_live;
    HeapEntry *heap;
    int64_t heap_len, cap_heap;
    int32_t *dirty;
    int64_t n_dirty, cap_dirty;
    int64_t learned; /* merges made so far: the stamp of the next one */
    int32_t first_id; /* id of the first learned merge (256, or past a base's ids) */
};
typedef struct tk_learner Learner;

static inline uint64_t pack(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

/* ---- hash map: pair -> slot id ------------------------------------------------------ */

static int32_t map_get(const Learner *L, uint64_t key) {
    for (uint64_t i = tk_mix64(key) & L->mask;; i = (i + 1) & L->mask) {
        if (L->cells[i].key == key) return L->cells[i].id;
        if (L->cells[i].key == EMPTY) return -1;
    }
}

static void map_put_raw(Cell *cells, uint64_t mask, uint64_t key, int32_t id) {
    uint64_t i = tk_mix64(key) & mask;
    while (cells[i].key != EMPTY) i = (i + 1) & mask;
    cells[i].key = key;
    cells[i].id = id;
}

static int map_grow(Learner *L) {
    uint64_t cap = (L->mask + 1) * 2;
    Cell *cells = malloc(cap * sizeof(Cell));
    if (!cells) return -1;
    for (uint64_t i = 0; i < cap; i++) cells[i].key = EMPTY;
    for (uint64_t i = 0; i <= L->mask; i++)
        if (L->cells[i].key != EMPTY) map_put_raw(cells, cap - 1, L->cells[i].key, L->cells[i].id);
    free(L->cells);
    L->cells = cells;
    L->mask = cap - 1;
    return 0;
}

static void map_del(Learner *L, uint64_t key) {
    uint64_t mask = L->mask, i = tk_mix64(key) & mask;
    while (L->cells[i].key != key) {
        assert(L->cells[i].key != EMPTY);
        i = (i + 1) & mask;
    }
    /* Backward shift: pull later cells of the probe run into the hole when their home
     * position does not lie cyclically in (hole, j]. */
    uint64_t hole = i;
    for (uint64_t j = (i + 1) & mask; L->cells[j].key != EMPTY; j = (j + 1) & mask) {
        uint64_t home = tk_mix64(L->cells[j].key) & mask;
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            L->cells[hole] = L->cells[j];
            hole = j;
        }
    }
    L->cells[hole].key = EMPTY;
}

/* ---- slots ---------------------------------------------------------------------------- */

/* The slot of (a, b), created with count 0 and bound `pos` in chunk w when absent; -1 on OOM.
 * May move L->slots. */
static int32_t slot_for(Learner *L, int32_t a, int32_t b, int32_t w, int64_t pos) {
    uint64_t key = pack(a, b);
    int32_t id = map_get(L, key);
    if (id >= 0) return id;
    if ((uint64_t)(L->n_live + 1) * 2 > L->mask + 1 && map_grow(L) < 0) return -1;
    if (L->free_head >= 0) {
        id = L->free_head;
        L->free_head = L->slots[id].next_free;
    } else {
        if (L->n_slots == L->cap_slots) {
            if (L->cap_slots > INT32_MAX / 2) return -1;
            int32_t cap = L->cap_slots ? L->cap_slots * 2 : 1024;
            Slot *s = realloc(L->slots, (size_t)cap * sizeof(Slot));
            if (!s) return -1;
            L->slots = s;
            L->cap_slots = cap;
        }
        id = L->n_slots++;
    }
    Slot *s = &L->slots[id];
    memset(s, 0, sizeof *s);
    s->a = a;
    s->b = b;
    s->chunk = w;
    s->pos = pos;
    s->heap = -1;
    map_put_raw(L->cells, L->mask, key, id);
    L->n_live++;
    return id;
}

static void slot_free(Learner *L, int32_t id) {
    Slot *s = &L->slots[id];
    map_del(L, pack(s->a, s->b));
    free(s->occ);
    s->occ = NULL;
    s->occ_len = s->occ_cap = 0;
    s->next_free = L->free_head;
    L->free_head = id;
    L->n_live--;
}

static int occ_add(Slot *s, int32_t w) {
    if (s->occ_len && s->occ[s->occ_len - 1] == w) return 0;
    if (s->occ_len == s->occ_cap) {
        int32_t cap = s->occ_cap ? s->occ_cap * 2 : 2;
        int32_t *o = realloc(s->occ, (size_t)cap * sizeof(int32_t));
        if (!o) return -1;
        s->occ = o;
        s->occ_cap = cap;
    }
    s->occ[s->occ_len++] = w;
    return 0;
}

static int mark_dirty(Learner *L, int32_t id) {
    if (L->slots[id].dirty) return 0;
    if (L->n_dirty == L->cap_dirty) {
        int64_t cap = L->cap_dirty ? L->cap_dirty * 2 : 1024;
        int32_t *d = realloc(L->dirty, (size_t)cap * sizeof(int32_t));
        if (!d) return -1;
        L->dirty = d;
        L->cap_dirty = cap;
    }
    L->dirty[L->n_dirty++] = id;
    L->slots[id].dirty = 1;
    return 0;
}

/* ---- heap: best first by (count desc, pos asc) ------------------------------------------
 * Entries carry their own copy of the key, so the heap stays ordered while a merge changes
 * many slots; after the merge each changed slot is re-keyed and re-sifted one at a time. */

static inline int better(const HeapEntry *x, const HeapEntry *y) {
    return x->count > y->count || (x->count == y->count && x->pos < y->pos);
}

static inline void heap_set(Learner *L, int64_t i, HeapEntry e) {
    L->heap[i] = e;
    L->slots[e.id].heap = (int32_t)i;
}

static void sift_up(Learner *L, int64_t i) {
    HeapEntry e = L->heap[i];
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!better(&e, &L->heap[parent])) break;
        heap_set(L, i, L->heap[parent]);
        i = parent;
    }
    heap_set(L, i, e);
}

static void sift_down(Learner *L, int64_t i) {
    HeapEntry e = L->heap[i];
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= L->heap_len) break;
        if (c + 1 < L->heap_len && better(&L->heap[c + 1], &L->heap[c])) c++;
        if (!better(&L->heap[c], &e)) break;
        heap_set(L, i, L->heap[c]);
        i = c;
    }
    heap_set(L, i, e);
}

/* Re-key slot id's entry from the slot and restore the order. */
static void heap_update(Learner *L, int32_t id) {
    int64_t i = L->slots[id].heap;
    L->heap[i].count = L->slots[id].count;
    L->heap[i].pos = L->slots[id].pos;
    sift_up(L, i);
    sift_down(L, L->slots[id].heap);
}

static void heap_remove(Learner *L, int32_t id) {
    int64_t i = L->slots[id].heap;
    L->slots[id].heap = -1;
    int64_t last = --L->heap_len;
    if (i == last) return;
    HeapEntry moved = L->heap[last];
    heap_set(L, i, moved);
    sift_up(L, i);
    sift_down(L, L->slots[moved.id].heap);
}

/* L->heap has room for every slot (apply() sizes it to cap_slots). */
static void heap_push(Learner *L, int32_t id) {
    int64_t i = L->heap_len++;
    HeapEntry e = {L->slots[id].count, L->slots[id].pos, id};
    heap_set(L, i, e);
    sift_up(L, i);
}

/* ---- first positions -------------------------------------------------------------------- */

/* Blob offset of the first occurrence of (a, b) in chunk w, or -1. */
static int64_t first_in(const Learner *L, int32_t w, int32_t a, int32_t b) {
    const int32_t *ids = L->ids + L->offsets[w];
    int64_t n = L->len[w], off = L->offsets[w];
    for (int64_t i = 0; i + 1 < n; i++) {
        if (ids[i] == a && ids[i + 1] == b) return off;
        off += L->piece[ids[i]];
    }
    return -1;
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* Make slot id's bound exact. Returns 1 if it moved, 0 if it was exact. Chunks before the
 * bound's chunk cannot hold the pair (the bound is a lower bound); chunks scanned without
 * an occurrence are dropped from the list. */
static int make_exact(Learner *L, int32_t id) {
    Slot *s = &L->slots[id];
    int64_t found = first_in(L, s->chunk, s->a, s->b);
    if (found >= 0) {
        int moved = found != s->pos;
        s->pos = found;
        return moved;
    }
    qsort(s->occ, (size_t)s->occ_len, sizeof(int32_t), cmp_i32);
    int32_t keep = 0, i = 0;
    for (; i < s->occ_len; i++) {
        int32_t w = s->occ[i];
        if (w <= s->chunk || (keep && s->occ[keep - 1] == w)) continue;
        found = first_in(L, w, s->a, s->b);
        if (found >= 0) break;
    }
    assert(i < s->occ_len); /* a live pair occurs somewhere */
    s->chunk = s->occ[i];
    s->pos = found;
    for (; i < s->occ_len; i++)
        if (!keep || s->occ[keep - 1] != s->occ[i]) s->occ[keep++] = s->occ[i];
    s->occ_len = keep;
    return 1;
}

/* The best pair's slot (removed from the heap), or -1 when no pair is left. */
static int32_t pop_best(Learner *L) {
    while (L->heap_len) {
        int32_t top = L->heap[0].id;
        int clear = 1;
        for (int64_t c = 1; c <= 2 && c < L->heap_len; c++)
            if (L->heap[c].count >= L->heap[0].count) clear = 0;
        if (!clear && make_exact(L, top)) {
            heap_update(L, top);
            continue;
        }
        heap_remove(L, top);
        return top;
    }
    return -1;
}

/* ---- one merge ---------------------------------------------------------------------------- */

static inline int dec(Learner *L, int32_t x, int32_t y, int64_t f) {
    int32_t id = map_get(L, pack(x, y));
    assert(id >= 0);
    L->slots[id].count -= f;
    return mark_dirty(L, id);
}

static inline int inc(Learner *L, int32_t x, int32_t y, int32_t w, int64_t f) {
    int64_t start = L->offsets[w];
    int32_t id = slot_for(L, x, y, w, start);
    if (id < 0) return -1;
    Slot *s = &L->slots[id];
    s->count += f;
    if (start < s->pos) {
        s->pos = start;
        s->chunk = w;
    }
    if (occ_add(s, w) < 0) return -1;
    return mark_dirty(L, id);
}

/* Replace the pair of slot p by new_id in every chunk holding it, left to right without
 * overlap; (prev, a) becomes (prev, new) and (b, next) becomes (new, next), prev read after
 * earlier replacements in the same chunk (so "abab" gives (new, new)). */
static int apply(Learner *L, int32_t p, int32_t new_id, int32_t stamp) {
    int32_t a = L->slots[p].a, b = L->slots[p].b;
    int32_t *occ = L->slots[p].occ;
    int32_t n_occ = L->slots[p].occ_len;
    L->slots[p].occ = NULL; /* detached: L->slots may move below */
    L->slots[p].occ_len = L->slots[p].occ_cap = 0;
    L->piece[new_id] = L->piece[a] + L->piece[b];
    int err = 0;
    for (int32_t k = 0; k < n_occ && !err; k++) {
        int32_t w = occ[k];
        if (L->seen[w] == stamp) continue;
        L->seen[w] = stamp;
        int32_t *ids = L->ids + L->offsets[w];
        int64_t n = L->len[w], r = 0;
        while (r + 1 < n && !(ids[r] == a && ids[r + 1] == b)) r++;
        if (r + 1 >= n) continue; /* stale: the pair left this chunk earlier */
        int64_t f = L->counts[w], out = r;
        while (r < n) {
            if (r + 1 < n && ids[r] == a && ids[r + 1] == b) {
                if (out > 0) {
                    int32_t prev = ids[out - 1];
                    if (!(prev == a && a == b)) err |= dec(L, prev, a, f);
                    err |= inc(L, prev, new_id, w, f);
                }
                if (r + 2 < n) {
                    int32_t next = ids[r + 2];
                    if (!(b == a && next == b)) err |= dec(L, b, next, f);
                    err |= inc(L, new_id, next, w, f);
                }
                ids[out++] = new_id;
                r += 2;
            } else {
                ids[out++] = ids[r++];
            }
        }
        L->len[w] = out;
    }
    free(occ);
    if (err) return -1;
    slot_free(L, p);
    if (L->cap_heap < L->cap_slots) { /* every live slot may enter the heap */
        HeapEntry *h = realloc(L->heap, (size_t)L->cap_slots * sizeof(HeapEntry));
        if (!h) return -1;
        L->heap = h;
        L->cap_heap = L->cap_slots;
    }
    for (int64_t k = 0; k < L->n_dirty; k++) {
        int32_t id = L->dirty[k];
        Slot *s = &L->slots[id];
        s->dirty = 0;
        if (s->count == 0) {
            if (s->heap >= 0) heap_remove(L, id);
            slot_free(L, id);
        } else if (s->heap >= 0) {
            heap_update(L, id);
        } else {
            heap_push(L, id);
        }
    }
    L->n_dirty = 0;
    return 0;
}

/* ---- set-up and tear-down ------------------------------------------------------------- */

static void learner_free(Learner *L) {
    if (!L) return;
    for (int32_t i = 0; i < L->n_slots; i++) free(L->slots[i].occ);
    free(L->slots);
    free(L->cells);
    free(L->heap);
    free(L->dirty);
    free(L->ids);
    free(L->len);
    free(L->seen);
    free(L->piece);
}

/* Index every adjacent pair of every chunk. Scanning in table order, a pair's first
 * sighting is its first encounter, so initial bounds are exact. Without a start, chunk w's
 * ids are its bytes; with one (a base tokenizer's encoding), they are start->ids at the
 * chunk's blob offset, start->lens[w] of them, and a token's position is the blob offset
 * of its first byte (the sum of start->pieces over the tokens before it). Returns -1 on OOM. */
static int learner_init(Learner *L, const uint8_t *data, int64_t nbytes, int64_t merges,
                        const tk_learn_start *start) {
    int64_t n = L->n_chunks;
    int64_t n_ids = (start ? (int64_t)start->first_id : 256) + merges;
    L->free_head = -1;
    L->first_id = start ? start->first_id : 256;
    L->ids = malloc((size_t)(nbytes ? nbytes : 1) * sizeof(int32_t));
    L->len = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    L->seen = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    L->piece = malloc((size_t)n_ids * sizeof(int64_t));
    L->mask = (1u << 16) - 1;
    L->cells = malloc((L->mask + 1) * sizeof(Cell));
    if (!L->ids || !L->len || !L->seen || !L->piece || !L->cells) return -1;
    for (uint64_t i = 0; i <= L->mask; i++) L->cells[i].key = EMPTY;
    if (start) {
        memcpy(L->ids, start->ids, (size_t)nbytes * sizeof(int32_t));
        memcpy(L->piece, start->pieces, (size_t)start->first_id * sizeof(int64_t));
    } else {
        for (int64_t i = 0; i < nbytes; i++) L->ids[i] = data[i];
        for (int i = 0; i < 256; i++) L->piece[i] = 1;
    }
    memset(L->seen, 0xFF, (size_t)n * sizeof(int32_t));
    for (int64_t w = 0; w < n; w++) {
        int64_t start_off = L->offsets[w];
        int64_t m = start ? start->lens[w] : L->offsets[w + 1] - start_off;
        const int32_t *ids = L->ids + start_off;
        L->len[w] = m;
        int64_t pos = start_off;
        for (int64_t i = 0; i + 1 < m; i++) {
            int32_t id = slot_for(L, ids[i], ids[i + 1], (int32_t)w, pos);
            if (id < 0) return -1;
            L->slots[id].count += L->counts[w];
            if (occ_add(&L->slots[id], (int32_t)w) < 0) return -1;
            pos += L->piece[ids[i]];
        }
    }
    L->cap_heap = L->cap_slots ? L->cap_slots : 1;
    L->heap = malloc((size_t)L->cap_heap * sizeof(HeapEntry));
    if (!L->heap) return -1;
    for (int32_t i = 0; i < L->n_slots; i++) {
        HeapEntry e = {L->slots[i].count, L->slots[i].pos, i};
        heap_set(L, i, e);
    }
    L->heap_len = L->n_slots;
    for (int64_t i = L->heap_len / 2 - 1; i >= 0; i--) sift_down(L, i);
    return 0;
}

/* ---- the entry points ------------------------------------------------------------------ */

tk_learn_error tk_learn_check(const int64_t *offsets, const int64_t *counts, int64_t n,
                              int64_t nbytes, int64_t *room) {
    tk_learn_error err = {TK_LEARN_OK, 0, 0};
    if (n > INT32_MAX) {
        err.code = TK_LEARN_TOO_MANY_CHUNKS;
        err.value = n;
        return err;
    }
    if (offsets[0] != 0 || offsets[n] != nbytes) {
        err.code = TK_LEARN_BAD_ENDS;
        return err;
    }
    int64_t pairs = 0;
    *room = 0;
    for (int64_t w = 0; w < n; w++) {
        int64_t m = offsets[w + 1] - offsets[w], term;
        if (m < 0) {
            err.code = TK_LEARN_DECREASING;
            err.chunk = w;
            return err;
        }
        if (counts[w] <= 0) {
            err.code = TK_LEARN_BAD_COUNT;
            err.chunk = w;
            err.value = counts[w];
            return err;
        }
        if (m > 1) *room += m - 1;
        if (m > 1 && (__builtin_mul_overflow(counts[w], m - 1, &term) ||
                      __builtin_add_overflow(pairs, term, &pairs))) {
            err.code = TK_LEARN_COUNT_OVERFLOW;
            return err;
        }
    }
    return err;
}

tk_learn_error tk_learn_check_start(const int64_t *offsets, int64_t n, const tk_learn_start *start) {
    tk_learn_error err = {TK_LEARN_OK, 0, 0};
    for (int64_t w = 0; w < n; w++) {
        int64_t m = start->lens[w], bytes = offsets[w + 1] - offsets[w], sum = 0;
        if (m < 0 || m > bytes) {
            err.code = TK_LEARN_BAD_START;
            err.chunk = w;
            return err;
        }
        for (int64_t i = 0; i < m; i++) {
            int32_t id = start->ids[offsets[w] + i];
            if (id < 0 || id >= start->first_id || start->pieces[id] < 1) {
                err.code = TK_LEARN_BAD_START;
                err.chunk = w;
                err.value = id;
                return err;
            }
            sum += start->pieces[id];
        }
        if (sum != bytes) {
            err.code = TK_LEARN_BAD_START;
            err.chunk = w;
            return err;
        }
    }
    return err;
}

tk_learner *tk_learner_new(const uint8_t *data, int64_t nbytes, const int64_t *offsets,
                           const int64_t *counts, int64_t n_chunks, int64_t merges,
                           const tk_learn_start *start) {
    Learner *L = calloc(1, sizeof(Learner));
    if (!L) return NULL;
    L->offsets = offsets;
    L->counts = counts;
    L->n_chunks = n_chunks;
    if (learner_init(L, data, nbytes, merges, start) < 0) {
        tk_learner_free(L);
        return NULL;
    }
    return L;
}

int tk_learner_step(tk_learner *L, int32_t *a, int32_t *b) {
    int32_t p = pop_best(L);
    if (p < 0) return 0;
    *a = L->slots[p].a;
    *b = L->slots[p].b;
    int32_t k = (int32_t)L->learned++;
    return apply(L, p, L->first_id + k, k) < 0 ? -1 : 1;
}

void tk_learner_free(tk_learner *L) {
    learner_free(L);
    free(L);
}
