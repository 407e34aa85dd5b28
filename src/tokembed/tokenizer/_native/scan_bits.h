/* Text of mostly ASCII read 64 bytes at a time for cl100k's pattern and its kin (teaching,
 * qwen, and o200k with the differences below), and for r50k's and Hugging Face's GPT-2 pattern
 * (tk_bits_starts_r50k, at the end):
 * every piece boundary of a block found with word operations on class bitmaps, where scan.c's
 * matcher decides piece by piece (a branch on the piece's kind, and a mispredicted one where a
 * run ends: 6.7 ns a piece of PUD English, a third of a warm encode).
 *
 * A block starts at a piece's start p. The pieces from p are those of the text text[p:] alone
 * (a match never looks behind), so the block is read as if the text began at p. Bit j of each
 * mask is the byte at p + j, a character's class on each of its bytes: L letters, N digits, S
 * whitespace, C CR and LF, B blanks (whitespace but CR and LF), SP the space, AP the
 * apostrophe, P everything else. tk_bits_of classifies ASCII; the letters among up to 12
 * characters from 0x80 up come from the dialect's table (scan.c, wide_classes), the rest of
 * them being punctuation, and a block with a number or whitespace from 0x80 up goes to the
 * matcher (the rules below count digits and blanks as bytes). The regex's alternatives, taken
 * in order at each start, make these starts (bit 0, p, is one):
 * - a letter run starts a piece unless the character before it is its prefix: a blank, or a
 *   punctuation run of one character that no space takes (below);
 * - a punctuation run starts a piece unless a space comes right before it, which then starts
 *   the piece (` ?[^\s\p{L}\p{N}]++`); its piece goes on over the CRs and LFs right after it;
 * - a digit run starts a piece, and so does every third digit of it (qwen: every digit);
 * - in a whitespace run, the first byte the punctuation piece before it did not take starts a
 *   piece, and so does the byte after its last CR or LF when blanks follow that to the run's
 *   end (`\s*[\r\n]` ends after the last one); of two or more blanks that end the run, the
 *   last starts a piece (`\s+(?!\S)`) that goes on to the word or punctuation after it, or is
 *   alone; a run that ends the text is not cut after its last CR or LF by cl100k (`\s++$`);
 * - an apostrophe that starts a piece and is followed by s, d, m, t or by ll, ve, re (any
 *   case) is a piece with those letters, and the letters after them start the next (the long
 *   s, which folds to s, sends its block to the matcher).
 * Every start a block finds is final: a start is decided by the bytes before it, by the three
 * after it at most (read past the block's end where the text goes on, as is a character the
 * end cuts) and by the ends of runs that end inside the block; the one start that waits on a
 * run's end past the block (after a CR or LF, in a run of blanks that reaches the block's
 * end) is not taken, and as it is the block's last, the next block, which begins at the last
 * start taken, finds it (o200k has one more such start: an apostrophe in the block's last byte
 * after a letter, which the next two bytes may make a contraction's). The ASCII classes are
 * checked against both dialects' tables at tk_scan_init (tk_bits_ok): a table that disagreed
 * turns this off.
 *
 * o200k's pattern differs in three places: a letter run is cut before each capital that follows
 * a small letter ([U]*[W]+|[U]+[W]*: the classes are disjoint for the letters a block takes, as
 * letters of no case and marks, in both, send it to the matcher); a contraction is not a piece
 * of its own but ends the word before it (tk_bits_suffixes); and its punctuation piece takes
 * '/' after its line breaks (such a block goes to the matcher). It has no `\s++$`.
 * Scanning alone, fastest of 30 passes, ns a piece, matcher -> blocks: PUD English 6.5 -> 3.6,
 * Indonesian 7.0 -> 4.1, German 8.3 -> 4.4, Spanish 8.3 -> 4.1, French 9.5 -> 4.3, Finnish
 * 10.9 -> 5.5, Turkish 13.4 -> 5.9; Arabic, Hindi, Korean, Thai, Chinese, Russian and
 * RusLit-40 within 2% (they try a block about once a kilobyte). o200k, with the ends handed to
 * Python, fastest of 30: PUD's 7 Latin-script languages 5.27 -> 3.91 ms (cl100k's 3.88), English
 * 0.68 -> 0.53; whole cold encodes, fresh processes interleaved, medians of 9: that text 1.04x,
 * English 1.07x, the 13 languages 1.02x, RusLit-40 0.99x, PUD's CJK 1.05x (this host's copies of
 * one build differ by up to 8%). */
#ifndef TOKEMBED_SCAN_BITS_H
#define TOKEMBED_SCAN_BITS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define TK_SCAN_BITS 1

typedef struct {
    uint64_t L, N, S, C, SP, AP, cont; /* cont: UTF-8 continuation bytes */
    uint64_t U, SL; /* o200k alone: upper-case letters (tk_bits_of, wide_classes), '/' */
} tk_bits;

/* The bytes from 0x80 up of the 64 at t. */
static inline uint64_t tk_bits_high(const unsigned char *t) {
    uint64_t hi = 0;
    for (int k = 0; k < 4; k++)
        hi |= (uint64_t)(unsigned)_mm_movemask_epi8(
                  _mm_loadu_si128((const __m128i *)(const void *)(t + 16 * k)))
              << (16 * k);
    return hi;
}

/* Bytes of x in [lo, hi], as 0xff lanes. */
static inline __m128i tk_in(__m128i x, int lo, int hi) {
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8((char)lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((char)(hi - lo))), d);
}

static inline uint64_t tk_lanes(__m128i m, int k) {
    return (uint64_t)(unsigned)_mm_movemask_epi8(m) << (16 * k);
}

/* The class masks of the 64 bytes at t; with `cased` (o200k) also ASCII capitals (its letter
 * pieces are cut where a capital follows a small letter) and '/' (which its punctuation piece
 * takes after line breaks), from the same loads. */
static inline void tk_bits_of(const unsigned char *t, tk_bits *b, int cased) {
    memset(b, 0, sizeof *b);
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(t + 16 * k));
        __m128i sp = _mm_cmpeq_epi8(x, _mm_set1_epi8(' '));
        __m128i c = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')),
                                 _mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
        b->L |= tk_lanes(tk_in(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 'z'), k);
        b->N |= tk_lanes(tk_in(x, '0', '9'), k);
        b->S |= tk_lanes(_mm_or_si128(sp, tk_in(x, '\t', '\r')), k);
        b->C |= tk_lanes(c, k);
        b->SP |= tk_lanes(sp, k);
        b->AP |= tk_lanes(_mm_cmpeq_epi8(x, _mm_set1_epi8('\'')), k);
        b->cont |= tk_lanes(_mm_cmpeq_epi8(_mm_and_si128(x, _mm_set1_epi8((char)0xC0)),
                                           _mm_set1_epi8((char)0x80)),
                            k);
        if (cased) {
            b->U |= tk_lanes(tk_in(x, 'A', 'Z'), k);
            b->SL |= tk_lanes(_mm_cmpeq_epi8(x, _mm_set1_epi8('/')), k);
        }
    }
}

static inline uint64_t tk_low_bits(unsigned n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

/* Letters a contraction takes after its apostrophe (s d m t: 1; ll ve re: 2), given the two
 * bytes after it; 0 for none. `fold`: any case (cl100k's kin), else lower case only (r50k). */
static inline unsigned tk_contraction_len(unsigned char c1, unsigned char c2, int fold) {
    if (fold) c1 |= 0x20, c2 |= 0x20; /* under | 0x20 only A-Z become these lower-case letters */
    if (c1 == 's' || c1 == 'd' || c1 == 'm' || c1 == 't') return 1;
    if ((c1 == 'l' && c2 == 'l') || (c1 == 'v' && c2 == 'e') || (c1 == 'r' && c2 == 'e')) return 2;
    return 0;
}

/* The highest bit of m below 64, or -1. */
static inline int tk_top_bit(uint64_t m) { return m ? 63 - __builtin_clzll(m) : -1; }

/* o200k's contractions: an apostrophe right after a letter piece's letters (a letter that is
 * not itself a contraction's), then s d m t or ll ve re in any case, ends that piece, so the
 * apostrophe and those letters start nothing, and a letter after them starts the next piece.
 * An apostrophe after a letter in the block's last byte may be one: not taken (the next block,
 * which begins at or before it, decides). */
static inline uint64_t tk_bits_suffixes(const unsigned char *t, const tk_bits *b, unsigned w,
                                        int end, uint64_t st) {
    const uint64_t L = b->L & tk_low_bits(w);
    uint64_t ends = 0; /* the contractions' last letters */
    for (uint64_t m = b->AP & (L << 1) & (L >> 1); m; m &= m - 1) {
        unsigned q = (unsigned)__builtin_ctzll(m);
        if (ends >> (q - 1) & 1) continue; /* that letter's piece has ended: "'s" of "a'd's" */
        unsigned char c2 = q + 2 < w || !end ? t[q + 2] : 0; /* t[64] is text */
        unsigned len = tk_contraction_len(t[q + 1], c2, 1), after = q + 1 + len;
        if (!len) continue;
        st &= ~(tk_low_bits(len + 1) << q); /* bits past 63 fall off */
        if (after <= 64) ends |= 1ull << (after - 1);
        if (after < 64 && (L >> after & 1)) st |= 1ull << after;
    }
    if (!end && w == 64 && (b->AP >> 63 & 1) && (L >> 62 & 1)) st &= ~(1ull << 63);
    return st;
}

/* o200k's punctuation piece takes '/' as it takes CR and LF after its run ([\r\n/]*): the
 * slashes right after such a run's line breaks, which these rules do not cover (the block goes
 * to the matcher). */
static inline uint64_t tk_bits_slash_after_breaks(const tk_bits *b, unsigned w) {
    const uint64_t valid = tk_low_bits(w);
    const uint64_t S = b->S & valid, C = b->C & valid, P = valid & ~(b->L | b->N | S);
    const uint64_t breaks = S & ~(S << 1) & (P << 1) & C; /* line breaks right after a run */
    return (C + breaks) & ~C & b->SL & valid;
}

/* Piece starts in the block of w bytes at t (1 <= w <= 64; `end`: the text ends after them,
 * else w is 64 and t[64] is text too) as a mask (bit 0 set). `eot_run`: a whitespace run that
 * ends the text is one piece (cl100k); `one_digit`: every digit is a piece (qwen); `o200k`:
 * o200k's letters (b->U, cut where a capital follows a small letter, and contractions that end
 * a letter piece, tk_bits_suffixes) with eot_run 0. */
static inline uint64_t tk_bits_starts(const unsigned char *t, const tk_bits *b, unsigned w,
                                      int end, int eot_run, int one_digit, int o200k) {
    const uint64_t valid = tk_low_bits(w);
    const uint64_t L = b->L & valid, N = b->N & valid, S = b->S & valid, C = b->C & valid;
    const uint64_t B = S & ~C, P = valid & ~(L | N | S);
    const uint64_t Ps = P & ~(P << 1), Ls = L & ~(L << 1), Ss = S & ~(S << 1);
    const uint64_t taken = Ps & (b->SP << 1); /* punctuation runs a space takes */
    /* the byte after each punctuation run of two characters or more, and after each that a
     * space takes: a carry from a run's inner character start (or its first byte) runs through
     * the run to the byte after it */
    const uint64_t longer = (P + (P & ~Ps & ~b->cont)) & ~P, took = (P + taken) & ~P;
    uint64_t st = 1;
    st |= Ls & ~((B << 1) | ((P << 1) & ~longer & ~took)); /* letter runs without a prefix */
    st |= Ps & ~taken;
    if (one_digit) {
        st |= N;
    } else {
        uint64_t Ns = N & ~(N << 1);
        st |= Ns;
        for (uint64_t m = Ns & (N >> 1) & (N >> 2) & (N >> 3); m; m &= m - 1) {
            unsigned r = (unsigned)__builtin_ctzll(m), j; /* a run of four digits or more: */
            uint64_t rest = ~(N >> r);                    /* every third digit starts a piece */
            unsigned e = rest ? r + (unsigned)__builtin_ctzll(rest) : 64;
            for (j = r + 3; j < e; j += 3) st |= 1ull << j;
        }
    }
    /* a whitespace run's first byte, or the first the punctuation piece before it left */
    const uint64_t after_p = Ss & (P << 1);
    st |= (Ss & ~after_p) | (after_p & ~C) | ((C + (after_p & C)) & ~C & S);
    uint64_t inner = B & (B << 1) & ((valid & ~S) >> 1); /* the last of two or more blanks */
    for (uint64_t m = B & (C << 1); m; m &= m - 1) {  /* blanks after a CR or LF */
        unsigned k = (unsigned)__builtin_ctzll(m);
        unsigned e = k + (unsigned)__builtin_ctzll(~(B >> k)); /* the byte after them */
        /* past the block: a start only where the text ends there (unknown, it is left to the
         * next block, which begins at or before this run) */
        if (e < w ? !(C >> e & 1) : end && !eot_run) inner |= 1ull << k;
    }
    st |= inner;
    if (o200k) return tk_bits_suffixes(t, b, w, end, st | (b->U & (L & ~b->U) << 1)) & valid;
    /* contractions: an apostrophe that starts a piece, then s d m t or ll ve re */
    for (uint64_t m = b->AP & Ps & ~taken & (L >> 1); m; m &= m - 1) {
        unsigned q = (unsigned)__builtin_ctzll(m);
        unsigned char c2 = q + 2 < w || !end ? t[q + 2] : 0; /* t[64] is text */
        unsigned len = tk_contraction_len(t[q + 1], c2, 1), after = q + 1 + len;
        if (len && after < 64 && (L >> after & 1)) st |= 1ull << after;
    }
    return st & valid;
}

/* tk_bits_starts for r50k's pattern and Hugging Face's GPT-2 pattern (scan.c's piece_r50k):
 * a letter, digit or punctuation run starts a piece unless a space comes right before it
 * (` ?\p{L}+` and the like: that space starts the piece; punctuation is never a prefix), a
 * whitespace run starts one, and so does its last character when it has two or more and the
 * text goes on (`\s+(?!\S)`); an apostrophe that starts a piece, followed by s, d, m, t, ll,
 * ve or re (lower case only), is a piece with those letters. */
static inline uint64_t tk_bits_starts_r50k(const unsigned char *t, const tk_bits *b, unsigned w,
                                           int end) {
    const uint64_t valid = tk_low_bits(w);
    const uint64_t L = b->L & valid, N = b->N & valid, S = b->S & valid;
    const uint64_t P = valid & ~(L | N | S);
    const uint64_t runs = (L & ~(L << 1)) | (N & ~(N << 1)) | (P & ~(P << 1));
    uint64_t st = 1 | (runs & ~(b->SP << 1)) | (S & ~(S << 1));
    st |= S & (S << 1) & ((valid & ~S) >> 1);
    for (uint64_t m = b->AP & st & (L >> 1); m; m &= m - 1) {
        unsigned q = (unsigned)__builtin_ctzll(m);
        unsigned char c2 = q + 2 < w || !end ? t[q + 2] : 0; /* t[64] is text */
        unsigned len = tk_contraction_len(t[q + 1], c2, 0), after = q + 1 + len;
        if (!len) continue;
        st &= ~(1ull << (q + 1)); /* the letters are the contraction's */
        if (after < 64 && (L >> after & 1)) st |= 1ull << after;
    }
    return st & valid;
}
#endif
#endif
