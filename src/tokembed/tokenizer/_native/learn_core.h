/* The merge learner (no Python): BPE merges over a chunk table, the unique chunks of a corpus
   in first-encounter order with their multiplicities, starting from their bytes or from a base
   tokenizer's ids of each chunk. Pair k makes id 256 + k (first_id + k from a start); ties go
   to the pair met first in the corpus. See learn_core.c for the algorithm. */
#ifndef TOKEMBED_LEARN_CORE_H
#define TOKEMBED_LEARN_CORE_H
#include <stdint.h>

typedef struct tk_learner tk_learner;

enum {
    TK_LEARN_OK,
    TK_LEARN_TOO_MANY_CHUNKS, /* more than 2^31 - 1 chunks (value: how many) */
    TK_LEARN_BAD_ENDS,        /* offsets do not start at 0 and end at the data's length */
    TK_LEARN_DECREASING,      /* offsets decrease at `chunk` */
    TK_LEARN_BAD_COUNT,       /* `chunk` has count `value` (not positive) */
    TK_LEARN_COUNT_OVERFLOW,  /* more than 2^63 - 1 adjacent pairs: counts could overflow */
    TK_LEARN_BAD_START,       /* the start's ids of `chunk` do not spell it (id `value`) */
};
typedef struct {
    int code;
    int64_t chunk, value;
} tk_learn_error;

/* Check a table (chunk w is data[offsets[w] .. offsets[w + 1]), counted counts[w] times) and
   store in *room the number of adjacent positions over its chunks: every merge shortens some
   chunk, so no more merges than that can be learned. */
tk_learn_error tk_learn_check(const int64_t *offsets, const int64_t *counts, int64_t n,
                              int64_t nbytes, int64_t *room);

/* Where learning starts when a base tokenizer's merges were applied first: chunk w is the
   ids[offsets[w] .. offsets[w] + lens[w]) (ids laid out like the byte blob, nbytes of room),
   id i spells pieces[i] bytes (0 for an id the base lacks), ids are below first_id, and
   learned merge k makes first_id + k. */
typedef struct {
    const int32_t *ids;
    const int64_t *lens;
    const int64_t *pieces;
    int32_t first_id;
} tk_learn_start;

/* Check that a start spells every chunk of a checked table: ids below first_id with a
   positive piece length summing to the chunk's byte length. */
tk_learn_error tk_learn_check_start(const int64_t *offsets, int64_t n, const tk_learn_start *start);

/* A learner over a checked table (and a checked start, or NULL to start from bytes), for at
   most `merges` merges (neither is copied: both must outlive the learner). NULL when memory
   runs out. */
tk_learner *tk_learner_new(const uint8_t *data, int64_t nbytes, const int64_t *offsets,
                           const int64_t *counts, int64_t n_chunks, int64_t merges,
                           const tk_learn_start *start);

/* Learn the next merge: 1 with its pair in *a, *b; 0 when no pair is left; -1 out of memory. */
int tk_learner_step(tk_learner *learner, int32_t *a, int32_t *b);

void tk_learner_free(tk_learner *learner);
#endif
