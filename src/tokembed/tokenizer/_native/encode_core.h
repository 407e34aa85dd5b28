/* The BPE encoder (no Python): tables, a chunk cache shared between threads, and encoders.

   Tables (immutable, shared between threads) come from an explicit merge list or from a
   tiktoken rank file's contents, parsed here (tiktoken's rule: join the adjacent pair whose
   bytes have the lowest rank; no merge list needed). An encoder holds scratch space, a small
   memo and an output buffer; one thread uses it at a time (each call takes its lock), so
   threads use one encoder each and may share one chunk cache. Each encode call replaces the
   encoder's output with the ids of its input and returns 0, TK_MISSING_BYTE with *bad set to
   the byte offset of a byte without an id, or -1 when memory runs out. */
#ifndef TOKEMBED_ENCODE_CORE_H
#define TOKEMBED_ENCODE_CORE_H
#include <stddef.h>
#include <stdint.h>

#define TK_MISSING_BYTE 1
#define TK_NOT_UTF8 2
/* Longer chunks are not cached: they rarely repeat and would pin memory. */
#define TK_CACHED_CHUNK 256

typedef struct tk_tables tk_tables;
typedef struct tk_shared_cache tk_shared_cache;
typedef struct tk_encoder tk_encoder;

/* Tables of an explicit merge list: byte_id[b] is the id of byte b (-1: none); merges holds
   (left, right, result) per rank, every id below 2^31. NULL when memory runs out. */
tk_tables *tk_tables_from_merges(const int64_t byte_id[256], const uint32_t *merges, size_t n);
/* Tables of a rank file (strict base64, one "PIECE RANK" per line); NULL with *bad_line the
   1-based line this parser refuses (1 as well when memory runs out or a piece or rank repeats:
   the caller's own parser then names the problem). */
tk_tables *tk_tables_from_ranks(const unsigned char *data, size_t n, size_t *bad_line);
/* Give merge tables a byte string -> id map of the n pieces (pieces[k] of lens[k] bytes, id
   ids[k]), so that a chunk that is one piece takes one lookup. every = 1: all of them
   (Hugging Face's ignore_merges: a chunk that is a piece is that piece, merged or not; rank
   files always follow that rule, as tiktoken does); every = 0: only pieces the merges make
   from their own bytes, which changes no id. 0, 1 when a piece repeats (every = 1), -1 when
   memory runs out or the tables already have the map. */
int tk_tables_add_pieces(tk_tables *t, const unsigned char *const *pieces, const uint32_t *lens,
                         const uint32_t *ids, size_t n, int every);
int tk_tables_ignore_merges(const tk_tables *t);
void tk_tables_free(tk_tables *t);
int tk_tables_rank_mode(const tk_tables *t);
size_t tk_tables_size(const tk_tables *t);      /* merges, or pieces of a rank file */
uint32_t tk_tables_max_rank(const tk_tables *t); /* rank files */
uint32_t tk_tables_max_id(const tk_tables *t);   /* the largest id the tables can give */
int tk_tables_has_byte(const tk_tables *t, int byte);
/* The shortest chunk that is backtracked (encode_backtrack.h) rather than merged, by its first
   byte after a leading space: from[0] ASCII or the lead of a Latin letter with a diacritic
   (0xC3-0xC9), from[1] the lead of another two-byte UTF-8 character, from[2] of a longer one;
   all 0 when none is. Returns the tokens backtracking may give (those BPE builds from their
   own bytes, in rank order). */
size_t tk_tables_backtrack_from(const tk_tables *t, size_t from[3]);

/* Where the encoder cuts the chunk d[0..n) before encoding its parts (encode_segment.h): writes
   the offsets 0 < c_1 < ... < n to cuts (room for n / 3 + 1) and returns how many; 0 when
   these tables never cut (no backtracking, or TOKEMBED_SEGMENT=0 when they were made). */
size_t tk_tables_cuts(const tk_tables *t, const unsigned char *d, size_t n, uint32_t *cuts);

/* 0 when the split filter of a rank file's tables says BPE never joins parts l and r; 1
   otherwise, and for tables without one (merge lists, TOKEMBED_SPLITS=0). */
int tk_tables_may_join(const tk_tables *t, uint32_t l, uint32_t r);

/* 1 when the chunk d[0..n), not found whole, is backtracked rather than merged (by its length
   and first letter, see backtrack_min in encode_core.c). */
int tk_tables_backtracks(const tk_tables *t, const unsigned char *d, size_t n);

/* Where merging the chunk d[0..n) starts from byte pairs joined rather than their bytes
   (encode_prejoin.h): writes the pairs' offsets to at (room for n / 2) and returns how many;
   0 with TOKEMBED_PREJOIN=0 when the tables were made. */
size_t tk_tables_prejoined(const tk_tables *t, const unsigned char *d, size_t n, uint32_t *at);

/* The grid of pair ranks (encode_tables.h): its side dim, or 0 when these tables have none
   (fewer than TK_GRID_DIM ranks, no memory, or TOKEMBED_GRID=0). Where cells is not NULL its
   dim * dim cells are written there, dense: cell a * dim + b is the rank at which parts a and
   b join (TK_NO_RANK: never), for ids a, b below dim. */
size_t tk_tables_grid(const tk_tables *t, uint32_t *cells);

/* A rank file's pair table (every split of a piece into two pieces): 0 when it has none, else 1
   with its size in *count and, where out is not NULL, (left, right, joined) triples in out. */
int tk_tables_rank_pairs(const tk_tables *t, uint32_t *out, size_t *count);

/* A rank file's atoms (encode_atoms.h): 0 when it has none, else 1 with the count of its joins
   in *count and, where not NULL, the rank of every three-byte letter by its 16 payload bits in
   letters (65536 entries, UINT32_MAX: no atom) and (left, right, joined) triples in joins. */
int tk_tables_atoms(const tk_tables *t, uint32_t *letters, uint32_t *joins, size_t *count);

/* A chunk cache in shards, each with its own lock, holding about `limit` chunks in all. */
tk_shared_cache *tk_shared_cache_new(size_t limit);
void tk_shared_cache_free(tk_shared_cache *c);
size_t tk_shared_cache_size(tk_shared_cache *c);

/* An encoder of `tables` using `shared` (may be NULL: then a private cache of `cache_limit`
   chunks). The tables and the cache must outlive it. NULL when memory runs out. */
tk_encoder *tk_encoder_new(const tk_tables *tables, tk_shared_cache *shared, size_t cache_limit);
void tk_encoder_free(tk_encoder *e);

/* Pieces given by their byte lengths, which tile text. */
int tk_encode_pieces(tk_encoder *e, const unsigned char *text, const size_t *lens, size_t n_pieces,
                     size_t *bad);
/* Valid UTF-8 text split by the compiled scanner (scan.h's preset and dialect). */
int tk_encode_text(tk_encoder *e, int preset, int dialect, const unsigned char *text, size_t n,
                   size_t *bad);
/* A text given as n code points of `kind` bytes each (1, 2 or 4: a str's storage), encoded as
   tk_encode_text encodes its UTF-8, which is written a window at a time and never whole.
   TK_NOT_UTF8 with *bad the index of a surrogate code point (the output means nothing then);
   TK_MISSING_BYTE with *bad the offset of the byte in the text's UTF-8. */
int tk_encode_ucs(tk_encoder *e, int preset, int dialect, const void *data, int kind, size_t n,
                  size_t *bad);
/* The UTF-8 of code points data[*at..n) of `kind` bytes each, as tk_encode_ucs writes it: whole
   characters into out[0..cap) (cap >= 4), *at moved past them; the bytes written (0 at the
   end), or -1 at a surrogate (*at its index). */
ptrdiff_t tk_utf8_window(const void *data, int kind, size_t n, size_t *at, unsigned char *out,
                         size_t cap);
/* Bytes of the UTF-8 of code points data[0..n) of `kind` bytes each (a surrogate counted as
   three). */
size_t tk_ucs_utf8_length(const void *data, int kind, size_t n);
/* tk_safe_cut on code points: the first index p in [from, n) at which they can be cut into two
   texts whose pieces are together those of the whole (found in their UTF-8, written a window
   at a time), or n when there is none (or a surrogate comes first). */
size_t tk_ucs_safe_cut(int dialect, const void *data, int kind, size_t n, size_t from);
/* Several texts, one after the other; ends[i] is the output length after text i. Text i is
   lens[i] bytes of valid UTF-8 where kinds is NULL or kinds[i] is 0, else lens[i] code points of
   kinds[i] bytes each (written as UTF-8 a window at a time, as tk_encode_ucs does). On an error,
   *failed is the text that holds it: TK_MISSING_BYTE with *bad the byte's offset in that text's
   UTF-8, TK_NOT_UTF8 with *bad the index of its surrogate (the output means nothing then). */
int tk_encode_texts(tk_encoder *e, int preset, int dialect, const void *const *texts,
                    const int *kinds, const size_t *lens, size_t n_texts, size_t *ends,
                    size_t *failed, size_t *bad);
/* The lines of data[0:n) as documents: cut at line feeds, a carriage return ending a line
   dropped, empty lines skipped; ends[k] is the output length after document k (ends holds one
   slot per line feed, plus one), *n_docs how many there are. TK_NOT_UTF8 with *bad the offset of
   the first byte that is not UTF-8 (nothing encoded); TK_MISSING_BYTE with *bad its offset in
   data. */
int tk_encode_lines(tk_encoder *e, int preset, int dialect, const unsigned char *data, size_t n,
                    size_t *ends, size_t *n_docs, size_t *bad);
/* The ids of the last call (valid until the next). */
const uint32_t *tk_encoder_output(const tk_encoder *e, size_t *n);
size_t tk_encoder_cache_size(const tk_encoder *e);
uint64_t tk_encoder_cache_clears(const tk_encoder *e);
/* Slots of the encoder's front cache (0 before its first chunk); it grows between calls. */
size_t tk_encoder_front_slots(const tk_encoder *e);
/* Bytes of the window a str's UTF-8 is written into (0 before the first such call). */
size_t tk_encoder_window_bytes(const tk_encoder *e);
void tk_encoder_clear_cache(tk_encoder *e);

/* Install the fork handler that lets a forked child repair encoders' and caches' locks. Call
   it once, from the module's init, before any encoder exists (no once guards it). */
void tk_encode_init(void);

/* Encoders and shared caches whose locks were made new in this forked process (tests). */
unsigned long long tk_fork_repair_count(void);
#endif
