/* Pre-tokenization of the preset patterns, compiled: the pieces each preset regex makes of a
   text, exactly as tiktoken's or Hugging Face's regex engine makes them.

   Shared by the compiled modules that split text (counting for training, encoding). Each preset
   is matched by hand-written code that follows the regex's alternatives in order, with the
   backtracking the regex does; the character classes come from scan_classes.h, generated per
   engine by gen_classes.py. Linear time: every position is examined a bounded number of times
   (whitespace runs twice, o200k's letter runs at most three times). */
#ifndef TOKEMBED_SCAN_H
#define TOKEMBED_SCAN_H
#include <stddef.h>

/* Qwen's is the pattern of its rank file (tokenization_qwen.py PAT_STR), not a named preset. */
enum {
    TK_PRESET_TEACHING,
    TK_PRESET_R50K,
    TK_PRESET_CL100K,
    TK_PRESET_O200K,
    TK_PRESET_GPT2_HF,
    TK_PRESET_QWEN,
    TK_NPRESETS
};
enum { TK_ENGINE_TIKTOKEN, TK_ENGINE_HUGGINGFACE };

/* Split valid UTF-8 text[0:n) into the preset's pieces as the engine reads them; call
   emit(ctx, start, end) with byte offsets for each piece, in order (pieces tile the text).
   Returns 0, or the first non-zero value emit returned (to stop early). */
typedef int (*tk_emit)(void *ctx, size_t start, size_t end);
int tk_scan(int preset, int engine, const unsigned char *text, size_t n, tk_emit emit, void *ctx);

/* The first byte offset p in [from, n) at which text can be cut into two texts, text[0:p) and
   text[p:n), whose pieces are together those of the whole text, for every preset and engine;
   n when there is none. Such a p follows a line feed that follows a character other than
   whitespace, and precedes a character other than whitespace and '/'. */
size_t tk_safe_cut(int engine, const unsigned char *text, size_t n, size_t from);

#endif
