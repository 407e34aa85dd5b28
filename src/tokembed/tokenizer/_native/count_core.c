/* The chunk counter (see count_core.h): an insertion-ordered open-addressing table of chunks. */
#include "count_core.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scan.h"

static int grow_slots(tk_counter *c) {
    size_t size = c->mask ? (c->mask + 1) * 2 : 1024;
    /* zeroed by writing (tk_table_alloc): counters run on threads, and calloc's lazily zeroed
     * pages would cost every other thread a TLB flush on each first write */
    uint32_t *slots = tk_table_alloc(size * sizeof *slots);
    if (!slots) return -1;
    for (size_t e = 0; e < c->n; e++) {
        size_t s = c->entries[e].hash & (size - 1);
        while (slots[s]) s = (s + 1) & (size - 1);
        slots[s] = (uint32_t)(e + 1);
    }
    free(c->slots);
    c->slots = slots;
    c->mask = size - 1;
    return 0;
}

int tk_counter_init(tk_counter *c) {
    memset(c, 0, sizeof *c);
    return grow_slots(c);
}

void tk_counter_free(tk_counter *c) {
    free(c->blob);
    free(c->entries);
    free(c->slots);
    memset(c, 0, sizeof *c);
}

/* Add `count` occurrences of p[0:n); -1 when memory runs out (or past 2^32 - 1 chunks). */
static int add_chunk(tk_counter *c, const unsigned char *p, size_t n, int64_t count) {
    uint64_t h = tk_hash_bytes(p, n);
    size_t s = h & c->mask;
    for (uint32_t k; (k = c->slots[s]); s = (s + 1) & c->mask) {
        tk_count_entry *e = &c->entries[k - 1];
        if (e->hash == h && (size_t)e->len == n && memcmp(c->blob + e->off, p, n) == 0) {
            e->count += count;
            return 0;
        }
    }
    if (c->n >= UINT32_MAX - 1) return -1;
    if (c->n == c->entries_cap) {
        size_t cap = c->entries_cap ? c->entries_cap * 2 : 1024;
        tk_count_entry *entries = realloc(c->entries, cap * sizeof *entries);
        if (!entries) return -1;
        c->entries = entries;
        c->entries_cap = cap;
    }
    if (c->blob_len + n > c->blob_cap) {
        size_t cap = c->blob_cap ? c->blob_cap * 2 : 1 << 16;
        while (cap < c->blob_len + n) cap *= 2;
        unsigned char *blob = realloc(c->blob, cap);
        if (!blob) return -1;
        c->blob = blob;
        c->blob_cap = cap;
    }
    memcpy(c->blob + c->blob_len, p, n);
    c->entries[c->n] = (tk_count_entry){h, (int64_t)c->blob_len, (int64_t)n, count};
    c->blob_len += n;
    c->slots[s] = (uint32_t)(++c->n);
    if (2 * c->n > c->mask) return grow_slots(c); /* keep the load at most 1/2 */
    return 0;
}

typedef struct {
    tk_counter *c;
    const unsigned char *text;
} count_ctx;

static int count_piece(void *ctx, size_t start, size_t end) {
    count_ctx *k = ctx;
    return add_chunk(k->c, k->text + start, end - start, 1);
}

int tk_counter_add(tk_counter *c, int preset, int dialect, const unsigned char *text, size_t n) {
    count_ctx ctx = {c, text};
    return tk_scan(preset, dialect, text, n, count_piece, &ctx) ? -1 : 0;
}

int tk_counter_merge(tk_counter *dst, const tk_counter *src) {
    for (size_t e = 0; e < src->n; e++) {
        const tk_count_entry *x = &src->entries[e];
        if (add_chunk(dst, src->blob + x->off, (size_t)x->len, x->count)) return -1;
    }
    return 0;
}

size_t tk_counter_nbytes(const tk_counter *c) {
    return c->blob_cap + c->entries_cap * sizeof(tk_count_entry) +
           (c->slots ? (c->mask + 1) * sizeof(uint32_t) : 0);
}
