/* The chunk counter (no Python): pieces of texts, as the compiled scanner splits them, counted
   in first-encounter order. The distinct chunks are appended to one growing blob in the order
   they are first met, so the blob, their offsets and their counts are already the three
   buffers of a ChunkTable. Counters filled over consecutive blocks are merged in block order,
   which keeps first-encounter order. One thread uses a counter at a time. */
#ifndef TOKEMBED_COUNT_CORE_H
#define TOKEMBED_COUNT_CORE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t hash;
    int64_t off; /* into the blob */
    int64_t len;
    int64_t count;
} tk_count_entry;

typedef struct {
    unsigned char *blob; /* distinct chunks, concatenated in first-encounter order */
    size_t blob_len, blob_cap;
    tk_count_entry *entries;
    size_t n, entries_cap;
    uint32_t *slots; /* entry index + 1; 0 = empty; size a power of two */
    size_t mask;
} tk_counter;

/* 0, or -1 when memory runs out. */
int tk_counter_init(tk_counter *c);
void tk_counter_free(tk_counter *c);
/* Count the pieces of valid UTF-8 text[0:n); 0, or -1 (out of memory, or past 2^32 - 1 chunks). */
int tk_counter_add(tk_counter *c, int preset, int dialect, const unsigned char *text, size_t n);
/* Add src's chunks and counts to dst, in src's order; 0 or -1 as above. */
int tk_counter_merge(tk_counter *dst, const tk_counter *src);
/* Bytes of memory the counter holds. */
size_t tk_counter_nbytes(const tk_counter *c);
#endif
