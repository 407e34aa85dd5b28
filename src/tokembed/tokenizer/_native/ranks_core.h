/* Merges derived from a tiktoken rank file (no Python): for every piece, the two parts that
   tiktoken's byte-pair joining leaves in its bytes when every other piece takes part (the twin
   of formats/ranks.py's lowest_rank_split, run for every piece of a file). See ranks_core.c. */
#ifndef TOKEMBED_RANKS_CORE_H
#define TOKEMBED_RANKS_CORE_H
#include <stdint.h>

enum {
    TK_RANKS_OK = 0,
    TK_RANKS_TOO_LONG = 1, /* a piece of 2**32 bytes or more */
    TK_RANKS_NO_MEMORY = -1,
};

/* Piece i is data[offsets[i] .. offsets[i + 1]); pieces are distinct and listed in rank order
   (a lower index is a lower rank). For every piece of two or more bytes, left[i] and right[i]
   receive the indices of the two pieces it splits into, or -1 when more than two parts remain
   (tiktoken never makes that piece by joining) or a remaining part is a byte no piece spells;
   single bytes get -1. */
int tk_rank_splits(const uint8_t *data, const int64_t *offsets, int64_t n, int64_t *left,
                   int64_t *right);
#endif
