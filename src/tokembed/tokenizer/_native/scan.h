/* Pre-tokenization of the scanned patterns, compiled (no Python): the pieces each pattern makes
   of a text, exactly as tiktoken's or Hugging Face's regex engine makes them.

   Shared by the compiled cores that split text (counting for training, encoding). Each pattern
   is matched by hand-written code that follows the regex's alternatives in order, with the
   backtracking the regex does; the character classes come from scan_classes.h, generated per
   dialect by _gen_tables.py. Linear time: every position is examined a bounded number of times
   (whitespace runs twice, o200k's letter runs at most three times). */
#ifndef TOKEMBED_SCAN_H
#define TOKEMBED_SCAN_H
#include <stddef.h>

/* TK_PRESET_* (a pattern's position in tokembed.tokenizer.patterns.SCANNED) and TK_DIALECT_*. */
#include "scan_presets.h"

/* Fill the character-class tables. Call it once, from the extension's module init (under the
   import lock, before any of the module's code can scan, so no thread is ever inside it when
   the process forks); every other function here only reads the tables. */
void tk_scan_init(void);

/* Split valid UTF-8 text[0:n) into the preset's pieces as the dialect reads them; call
   emit(ctx, start, end) with byte offsets for each piece, in order (pieces tile the text).
   Returns 0, or the first non-zero value emit returned (to stop early). */
typedef int (*tk_emit)(void *ctx, size_t start, size_t end);
int tk_scan(int preset, int dialect, const unsigned char *text, size_t n, tk_emit emit, void *ctx);

/* The same pieces, the next ones from byte `from` (a piece's start): their end offsets, in
   order, into ends[0..cap). Returns how many were written: with cap > 0, 0 exactly when
   from == n. */
size_t tk_scan_some(int preset, int dialect, const unsigned char *text, size_t n, size_t from,
                    size_t *ends, size_t cap);

/* tk_scan_some across calls on one text (from never decreasing): `state` (zeroed before the
   first call) keeps where the scanner tries a 64-byte block again after one it could not read
   (scan_bits.h). */
typedef struct {
    size_t retry, skip;
} tk_scan_state;
size_t tk_scan_run(int preset, int dialect, const unsigned char *text, size_t n, size_t from,
                   size_t *ends, size_t cap, tk_scan_state *state);

/* The first byte offset p in [from, n) at which text can be cut into two texts, text[0:p) and
   text[p:n), whose pieces are together those of the whole text, for every preset and dialect;
   n when there is none. Such a p follows a line feed that follows a character other than
   whitespace, and precedes a character other than whitespace and '/'; or p is a space
   after a space or line feed, before a letter. */
size_t tk_safe_cut(int dialect, const unsigned char *text, size_t n, size_t from);

#endif
