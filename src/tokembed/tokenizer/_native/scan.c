/* The scanned patterns (tokembed.tokenizer.patterns.SCANNED: the presets and the pattern of
   Qwen's rank file) as hand-written matchers (see scan.h).

   At each position the alternatives of the preset's regex are tried in the regex's order, and
   the first that matches gives the piece, as a backtracking engine finds it:
   - a possessive or greedy run followed only by optional parts ends where the class ends;
   - `\s*[\r\n]` ends after the last CR or LF of the whitespace run it starts;
   - `\s+(?!\S)` ends at the end of the run when that is the end of the text, else one
     character earlier (the run minus its last character), or fails on a one-character run;
   - o200k's `[U]*[W]+` (U and W overlap) ends at the end of the W run that starts where the
     U run ends, or, when no W follows, right after the last W inside the U run.
   Class bits come from the generated scan_classes.h (one table per dialect). */
#include "scan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scan_bits.h"
#include "scan_classes.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#define TK_CYRILLIC_BLOCKS 1
#endif

#define TK_NCODE 0x110000u
#define TK_LNS (TK_CL | TK_CN | TK_CS)

/* Filled once by tk_scan_init at module import, never written after: no lock or once guards
 * them, so nothing a thread holds while scanning can be inherited locked by a forked child. */
static uint8_t tk_class_tiktoken[TK_NCODE];
static uint8_t tk_class_huggingface[TK_NCODE];
static const uint8_t *tk_classes_huggingface = tk_class_huggingface;

static void fill(uint8_t *table, const uint32_t (*runs)[3], size_t nruns) {
    for (size_t r = 0; r < nruns; r++)
        for (uint32_t c = runs[r][0]; c <= runs[r][1]; c++) table[c] = (uint8_t)runs[r][2];
}

/* ---- ASCII runs eight bytes at a time ----
 * Most pieces of Latin-script text are ASCII letter runs, and a run read one character at a
 * time costs a branch per letter and a mispredicted one where it ends: the scanner alone took
 * 13-19 ns per piece of PUD English, about half of a warm encode. A run of ASCII letters (or
 * digits, or letters of one case) is read here as whole 64-bit words: each byte's high bit
 * says whether it is in the class (exact, no carry crosses a byte), and the run ends at the
 * first byte that is not, found with one count of trailing zeros. Bytes from 0x80 up are never
 * in these classes here, so a run that meets a non-ASCII letter goes on one character at a
 * time from it (stopping early is always safe: `run` reads on from there). The ASCII ranges
 * are checked against the class table at tk_scan_init; a table that disagreed would turn this
 * off (tk_swar_ok). Scanning alone, old and new in one process, the fastest of 30
 * alternating passes each, time new / old, English / 13 PUD languages / RusLit-40 / PUD zh+ko:
 * cl100k 0.61-0.64 / 0.86-0.87 / 0.98-1.0 / 1.06-1.15; o200k 0.68 / 0.85 / 0.95-0.96 /
 * 0.99-1.01; GPT-2 0.65-0.66 / 0.87-0.88 / 0.99-1.0 / 0.96-0.97 (with the two- and three-byte
 * decoding inline in `run`). cl100k's Han and Hangul runs lose a little to the extra branch,
 * where scanning is about a tenth of an encode. Whole encodes, old and new compiled into one
 * process, medians of 15 fresh encoders: English cl100k 1.07x, o200k 1.05x. (Cyrillic read the
 * same way, four two-byte letters a word in 16-bit lanes, scanned RusLit-40 in 0.83-0.91 of the
 * time, yet whole encodes ran 0.92-1.01x, medians of 15-21: the time the scan saved was time the
 * encoder's prefetches of front slots had been hiding in; not kept.) */
#define TK_B1 0x0101010101010101ull
#define TK_H8 (TK_B1 * 0x80)
#define TK_L7 (TK_B1 * 0x7f)

/* High bit of each byte of w that is in (lo, hi) exclusive, for 0 <= lo < hi <= 128; bytes from
 * 0x80 up never are (Sean Anderson's "bit twiddling hacks", hasbetween, kept per byte). */
static inline uint64_t tk_between(uint64_t w, unsigned lo, unsigned hi) {
    uint64_t x = w & TK_L7;
    return (TK_B1 * (127 + hi) - x) & ~w & (x + TK_B1 * (127 - lo)) & TK_H8;
}

/* The ASCII members of the classes read a word at a time: letters (L), digits (N), upper
 * (U) and lower (W) case letters. 0 for a mask this does not cover. */
static inline uint64_t tk_word_in(uint64_t w, unsigned mask) {
    switch (mask) {
    case TK_CL: return tk_between(w | (TK_B1 * 0x20), 'a' - 1, 'z' + 1);
    case TK_CN: return tk_between(w, '0' - 1, '9' + 1);
    case TK_CU: return tk_between(w, 'A' - 1, 'Z' + 1);
    case TK_CW: return tk_between(w, 'a' - 1, 'z' + 1);
    default: return 0;
    }
}

static int tk_swar_ok; /* set by tk_scan_init: the table's ASCII classes are tk_word_in's */
static int tk_cyrillic_ok; /* set by tk_scan_init: the classes cyrillic_run assumes hold */
#ifdef TK_SCAN_BITS
static int tk_bits_ok; /* set by tk_scan_init: the tables' ASCII classes are tk_bits_of's */
static int tk_case_ok; /* set by tk_scan_init: the tables' ASCII cases are tk_bits_of's */
#endif

/* Whether every code point in [lo, hi] has `mask` in both dialects' tables. */
static int all_in(uint32_t lo, uint32_t hi, unsigned mask) {
    for (uint32_t c = lo; c <= hi; c++)
        if (!(tk_class_tiktoken[c] & mask) || !(tk_classes_huggingface[c] & mask)) return 0;
    return 1;
}

void tk_scan_init(void) {
    fill(tk_class_tiktoken, tk_runs_tiktoken, TK_NRUNS_TIKTOKEN);
    /* The generator names one table for both dialects when their classes agree. */
    if ((const void *)tk_runs_huggingface == (const void *)tk_runs_tiktoken)
        tk_classes_huggingface = tk_class_tiktoken;
    else
        fill(tk_class_huggingface, tk_runs_huggingface, TK_NRUNS_HUGGINGFACE);
    static const unsigned masks[] = {TK_CL, TK_CN, TK_CU, TK_CW};
    int ok = 1;
    for (unsigned c = 0; c < 0x80; c++)
        for (int k = 0; k < 4; k++) {
            int in = tk_word_in(c, masks[k]) != 0;
            ok &= in == ((tk_class_tiktoken[c] & masks[k]) != 0);
            ok &= in == ((tk_classes_huggingface[c] & masks[k]) != 0);
        }
    tk_swar_ok = ok;
#ifdef TK_SCAN_BITS
    unsigned char ascii[128];
    tk_bits b[2];
    for (unsigned c = 0; c < 128; c++) ascii[c] = (unsigned char)c;
    tk_bits_of(ascii, &b[0], 1);
    tk_bits_of(ascii + 64, &b[1], 1);
    ok = 1;
    for (unsigned c = 0; c < 128; c++) {
        const tk_bits *h = &b[c / 64];
        unsigned j = c % 64, want[3] = {TK_CL, TK_CN, TK_CS};
        uint64_t got[3] = {h->L, h->N, h->S};
        for (int k = 0; k < 3; k++) {
            int in = (int)(got[k] >> j & 1);
            ok &= in == ((tk_class_tiktoken[c] & want[k]) != 0);
            ok &= in == ((tk_classes_huggingface[c] & want[k]) != 0);
        }
        ok &= (int)(h->C >> j & 1) == (c == '\r' || c == '\n');
    }
    ok &= tk_bits_high(ascii) == 0 && tk_bits_high(ascii + 64) == 0;
    tk_bits_ok = ok;
    for (unsigned c = 0; c < 128; c++) { /* o200k: capitals upper case alone, letters lower */
        int up = (int)(b[c / 64].U >> (c % 64) & 1), letter = (int)(b[c / 64].L >> (c % 64) & 1);
        for (int d = 0; d < 2; d++) {
            unsigned cls = d ? tk_classes_huggingface[c] : tk_class_tiktoken[c];
            ok &= ((cls & TK_CU) != 0) == up && ((cls & TK_CW) != 0) == (letter && !up);
        }
        ok &= (int)(b[c / 64].SL >> (c % 64) & 1) == (c == '/');
    }
    tk_case_ok = ok;
#endif
    tk_cyrillic_ok = all_in(0x400, 0x47f, TK_CL) && all_in(0x430, 0x45f, TK_CW);
}

static const uint8_t *classes(int dialect) {
    return dialect == TK_DIALECT_HUGGINGFACE ? tk_classes_huggingface : tk_class_tiktoken;
}

typedef struct {
    const unsigned char *t;
    size_t n;
    const uint8_t *cls;
} Text;

/* Code point at i (valid UTF-8; a truncated sequence reads as U+FFFD of the bytes left). */
static inline uint32_t decode(const Text *s, size_t i, size_t *len) {
    const unsigned char *t = s->t + i;
    unsigned c = t[0];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (i + k > s->n) {
        *len = s->n - i;
        return 0xFFFD;
    }
    *len = k;
    switch (k) {
    case 1: return c;
    case 2: return ((c & 0x1Fu) << 6) | (t[1] & 0x3Fu);
    case 3: return ((c & 0x0Fu) << 12) | ((t[1] & 0x3Fu) << 6) | (t[2] & 0x3Fu);
    default: {
        uint32_t cp = ((c & 0x07u) << 18) | ((t[1] & 0x3Fu) << 12) | ((t[2] & 0x3Fu) << 6) |
                      (t[3] & 0x3Fu);
        return cp < TK_NCODE ? cp : 0xFFFD;
    }
    }
}

static inline unsigned bits_at(const Text *s, size_t i, size_t *len) {
    if (s->t[i] < 0x80) {
        *len = 1;
        return s->cls[s->t[i]];
    }
    return s->cls[decode(s, i, len)];
}

static inline unsigned bits_of(const Text *s, size_t i) {
    size_t len;
    return bits_at(s, i, &len);
}

static inline int is_crlf(unsigned char c) { return c == '\r' || c == '\n'; }

/* "Punctuation": not whitespace, letter or number ([^\s\p{L}\p{N}]). */
static inline int is_p(unsigned b) { return (b & TK_LNS) == 0; }

/* Forced inline, with o200k's letter pieces below: each call site then knows its mask and keeps
 * `len` in a register (the compiler had kept `run` a call, a tenth of o200k's warm samples on
 * PUD English). Warm loops, medians of 5 alternating processes: o200k 82.4 -> 92.3 MB/s,
 * GPT-2 ~+8%, cl100k unchanged. */
#define TK_INLINE static inline __attribute__((always_inline))

/* End of the run of ASCII characters of `mask` from i (i itself is past one). */
TK_INLINE size_t ascii_run(const Text *s, size_t i, unsigned mask) {
    if (tk_swar_ok && (mask == TK_CL || mask == TK_CN || mask == TK_CU || mask == TK_CW)) {
        while (i + 8 <= s->n) {
            uint64_t w;
            memcpy(&w, s->t + i, 8);
            uint64_t out = ~tk_word_in(w, mask) & TK_H8;
            if (out) return i + (size_t)(__builtin_ctzll(out) >> 3);
            i += 8;
        }
    }
    while (i < s->n && s->t[i] < 0x80 && (s->cls[s->t[i]] & mask)) i++;
    return i;
}

/* ---- Cyrillic runs sixteen bytes at a time ----
 * A Russian word is read one two-byte letter at a time otherwise: a decode, a class load and a
 * branch each, and a mispredicted branch where the word ends. Its letters after the first are
 * read here as eight per SSE2 block instead: in 16-bit lanes (lead byte low) a lane is taken
 * when it is a letter of the run's class, L: leads 0xD0-0xD1 (U+0400-U+047F, every one a
 * letter); W, o200k's lower case: U+0430-U+045F (D0 B0-BF, D1 80-9F). Valid UTF-8 makes every
 * lane a whole character once the first is (a lead 0xD0 or 0xD1 is followed by its one
 * continuation byte). The run stops at the first lane not taken, and `run` reads on from there
 * one character at a time (stopping early is always safe). tk_scan_init checks those classes
 * in both dialects' tables (tk_cyrillic_ok). Fresh processes interleaved, medians of 7, one
 * thread, RusLit-40 cold / warm MB/s: cl100k 80.4 -> 86.6 / 198 -> 238, qwen 70.7 -> 73.1 /
 * 206 -> 244, o200k 66.1 -> 68.0 / 192 -> 222; SmolLM2 (medians of 5) 79.8 -> 84.7 / 158 -> 183;
 * 13 PUD languages unchanged. Elsewhere than SSE2 (every x86-64) the run is read as before. */
TK_INLINE size_t cyrillic_run(const Text *s, size_t i, unsigned mask) {
#ifdef TK_CYRILLIC_BLOCKS
    if (!tk_cyrillic_ok || (mask != TK_CL && mask != TK_CW)) return i;
    while (i + 16 <= s->n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s->t + i)), taken;
        if (mask == TK_CL) {
            taken = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(0x00fe)), _mm_set1_epi16(0x00d0));
        } else {
            __m128i lower_d0 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xf0ff)),
                                               _mm_set1_epi16((short)0xb0d0));
            __m128i lower_d1 = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xe0ff)),
                                               _mm_set1_epi16((short)0x80d1));
            taken = _mm_or_si128(lower_d0, lower_d1);
        }
        unsigned left = ~(unsigned)_mm_movemask_epi8(taken) & 0xffffu;
        if (left) return i + ((unsigned)__builtin_ctz(left) & ~1u); /* the first lane not taken */
        i += 16;
    }
#else
    (void)s;
    (void)mask;
#endif
    return i;
}

/* End of the run of characters from i whose bits meet `mask`. */
TK_INLINE size_t run(const Text *s, size_t i, unsigned mask) {
    size_t len;
    while (i < s->n) {
        unsigned char c = s->t[i];
        if (c < 0x80) {
            if (!(s->cls[c] & mask)) return i;
            i = ascii_run(s, i + 1, mask);
        } else if (c < 0xE0 && i + 1 < s->n) { /* decode's two- and three-byte cases, inline */
            if (!(s->cls[((c & 0x1Fu) << 6) | (s->t[i + 1] & 0x3Fu)] & mask)) return i;
            i += 2;
            if ((c & 0xFE) == 0xD0) i = cyrillic_run(s, i, mask);
        } else if (c < 0xF0 && i + 2 < s->n) {
            uint32_t cp = ((c & 0x0Fu) << 12) | ((s->t[i + 1] & 0x3Fu) << 6);
            if (!(s->cls[cp | (s->t[i + 2] & 0x3Fu)] & mask)) return i;
            i += 3;
        } else {
            if (!(s->cls[decode(s, i, &len)] & mask)) return i;
            i += len;
        }
    }
    return i;
}

static size_t run_p(const Text *s, size_t i) {
    size_t len;
    while (i < s->n && is_p(bits_at(s, i, &len))) i += len;
    return i;
}

/* At most three numbers (\p{N}{1,3}). */
static size_t run_n3(const Text *s, size_t i) {
    size_t len;
    for (int k = 0; k < 3 && i < s->n && (bits_at(s, i, &len) & TK_CN); k++) i += len;
    return i;
}

static size_t run_crlf(const Text *s, size_t i, int slash) {
    while (i < s->n && (is_crlf(s->t[i]) || (slash && s->t[i] == '/'))) i++;
    return i;
}

static inline size_t prev_start(const Text *s, size_t i) {
    do i--;
    while ((s->t[i] & 0xC0) == 0x80);
    return i;
}

/* Does the letter at i read as `lower` under case folding? ASCII, and U+017F (long s) for s. */
static size_t fold_letter(const Text *s, size_t i, char lower) {
    if (i >= s->n) return 0;
    unsigned char c = s->t[i];
    if (c == (unsigned char)lower || c == (unsigned char)(lower - 32)) return 1;
    if (lower == 's' && c == 0xC5 && i + 1 < s->n && s->t[i + 1] == 0xBF) return 2;
    return 0;
}

/* Length of the contraction after the apostrophe at i-1 (0 if none). Case-sensitive:
   s d m t ll ve re; insensitive: the same with any case (and the long s). */
static size_t contraction(const Text *s, size_t i, int fold) {
    if (i >= s->n) return 0;
    if (!fold) {
        unsigned char c = s->t[i];
        if (c == 's' || c == 'd' || c == 'm' || c == 't') return 1;
        if (i + 1 < s->n) {
            unsigned char d = s->t[i + 1];
            if ((c == 'l' && d == 'l') || (c == 'v' && d == 'e') || (c == 'r' && d == 'e'))
                return 2;
        }
        return 0;
    }
    size_t a, b;
    static const char one[] = "sdmt";
    for (int k = 0; k < 4; k++)
        if ((a = fold_letter(s, i, one[k]))) return a;
    static const char two[][2] = {{'l', 'l'}, {'v', 'e'}, {'r', 'e'}};
    for (int k = 0; k < 3; k++)
        if ((a = fold_letter(s, i, two[k][0])) && (b = fold_letter(s, i + a, two[k][1])))
            return a + b;
    return 0;
}

/* End of a whitespace piece starting at i (bits of i include S). `eot_run`: a run reaching the
   end of the text is whole (\s++$); `last_crlf`: \s*[\r\n] comes next. */
static size_t whitespace(const Text *s, size_t i, size_t first_len, int eot_run, int last_crlf) {
    size_t j = run(s, i, TK_CS);
    if (eot_run && j == s->n) return j;
    if (last_crlf)
        for (size_t k = j; k > i; k--)
            if (is_crlf(s->t[k - 1])) return k; /* UTF-8 continuation bytes are never CR/LF */
    if (j == s->n) return j;                    /* \s+(?!\S) */
    size_t last = prev_start(s, j);
    return last > i ? last : i + first_len;     /* \s+(?!\S), else \s (one character) */
}

/* teaching, cl100k and qwen: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}|
   ?[^\s\p{L}\p{N}]++[\r\n]*| then the whitespace alternatives. Qwen's pattern spells the
   contractions as (?i:'s|'t|'re|'ve|'m|'ll|'d) (the same set: no two share a first letter),
   makes the optional prefix, the letter run and the punctuation run plain greedy (nothing after
   them can take back a character, so backtracking ends them where the possessive forms end),
   takes one number (`qwen`: \p{N}, not \p{N}{1,3}) and has \s*[\r\n]+ for \s*[\r\n] (both end
   after the last CR or LF of the whitespace run). */
TK_INLINE size_t piece_cl100k(const Text *s, size_t i, int cl100k, int qwen) {
    unsigned char c0 = s->t[i];
    size_t len0, k;
    if (c0 == '\'' && (k = contraction(s, i + 1, 1))) return i + 1 + k;
    unsigned b0 = bits_at(s, i, &len0);
    if (b0 & TK_CL) return run(s, i, TK_CL);
    if (!(b0 & (TK_CL | TK_CN)) && !is_crlf(c0) && i + len0 < s->n &&
        (bits_of(s, i + len0) & TK_CL))
        return run(s, i + len0, TK_CL);
    if (b0 & TK_CN) return qwen ? i + len0 : run_n3(s, i);
    if (c0 == ' ' && i + 1 < s->n && is_p(bits_of(s, i + 1)))
        return run_crlf(s, run_p(s, i + 1), 0);
    if (is_p(b0)) return run_crlf(s, run_p(s, i), 0);
    return whitespace(s, i, len0, cl100k, 1);
}

/* r50k and gpt2-hf: contractions, then ` ?` before a letter, number or "punctuation" run,
   then \s+(?!\S) and one whitespace character (\s++$ changes nothing after them). */
TK_INLINE size_t piece_r50k(const Text *s, size_t i) {
    unsigned char c0 = s->t[i];
    size_t len0, k;
    if (c0 == '\'' && (k = contraction(s, i + 1, 0))) return i + 1 + k;
    unsigned b0 = bits_at(s, i, &len0);
    size_t at = i;
    if (c0 == ' ' && i + 1 < s->n) {
        unsigned b1 = bits_of(s, i + 1);
        if (b1 & (TK_CL | TK_CN) || is_p(b1)) {
            b0 = b1;
            at = i + 1;
        }
    }
    if (b0 & TK_CL) return run(s, at, TK_CL);
    if (b0 & TK_CN) return run(s, at, TK_CN);
    if (is_p(b0)) return run_p(s, at);
    return whitespace(s, i, len0, 1, 0);
}

/* o200k's optional contraction after a letter piece. */
TK_INLINE size_t o200k_suffix(const Text *s, size_t e) {
    if (e >= s->n || s->t[e] != '\'') return e;
    static const char *forms[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (int f = 0; f < 7; f++) {
        size_t at = e + 1, a;
        const char *p = forms[f];
        for (; *p && (a = fold_letter(s, at, *p)); p++) at += a;
        if (!*p) return at;
    }
    return e;
}

/* [U]*[W]+ from i (a backtracking reading), or 0 when it does not match. */
TK_INLINE size_t o200k_lower(const Text *s, size_t i) {
    size_t u = run(s, i, TK_CU);
    if (u < s->n && (bits_of(s, u) & TK_CW)) return run(s, u, TK_CW);
    for (size_t k = u; k > i;) {
        size_t p = prev_start(s, k);
        if (bits_of(s, p) & TK_CW) return k;
        k = p;
    }
    return 0;
}

/* [U]+[W]* from i, or 0. */
static size_t o200k_upper(const Text *s, size_t i) {
    size_t u = run(s, i, TK_CU);
    return u > i ? run(s, u, TK_CW) : 0;
}

static size_t piece_o200k(const Text *s, size_t i) {
    unsigned char c0 = s->t[i];
    size_t len0, e;
    unsigned b0 = bits_at(s, i, &len0);
    int prefix = !(b0 & (TK_CL | TK_CN)) && !is_crlf(c0);
    if (prefix && (e = o200k_lower(s, i + len0))) return o200k_suffix(s, e);
    if ((e = o200k_lower(s, i))) return o200k_suffix(s, e);
    if (prefix && (e = o200k_upper(s, i + len0))) return o200k_suffix(s, e);
    if ((e = o200k_upper(s, i))) return o200k_suffix(s, e);
    if (b0 & TK_CN) return run_n3(s, i);
    if (c0 == ' ' && i + 1 < s->n && is_p(bits_of(s, i + 1)))
        return run_crlf(s, run_p(s, i + 1), 1);
    if (is_p(b0)) return run_crlf(s, run_p(s, i), 1);
    return whitespace(s, i, len0, 0, 1);
}

/* The patterns read a block at a time (scan_bits.h): cl100k's kin, r50k's with Hugging Face's
 * GPT-2 pattern, and o200k's. */
enum { TK_KIN_TEACHING, TK_KIN_CL100K, TK_KIN_QWEN, TK_KIN_R50K, TK_KIN_O200K };

#ifdef TK_SCAN_BITS
/* Most characters from 0x80 up a block can hold. */
#define TK_BLOCK_WIDE_MAX 12

/* The letters among the characters from 0x80 up of a block (its bytes `hi`; `avail` bytes from
 * t may be read) into b->L; the others are punctuation to the block's rules. 0 (the block goes
 * to the matcher) when there are more than TK_BLOCK_WIDE_MAX of them, when one is a number or
 * whitespace (a digit run is cut every third character, a blank run before its last character:
 * the rules count bytes), when the long s (U+017F) follows an apostrophe (it folds to s there:
 * a contraction), or when a sequence runs past the text (the matcher reads it as U+FFFD).
 * `cased` (o200k): each letter's case into b->U, and 0 for a character in both of o200k's
 * case classes: a letter of no case (\p{Lm}, \p{Lo}: CJK, Thai...) or a mark. */
static int wide_classes(const Text *s, const unsigned char *t, size_t avail, uint64_t hi,
                        tk_bits *b, int cased) {
    uint64_t lead = hi & ~b->cont;
    if (tk_popcount64(lead) > TK_BLOCK_WIDE_MAX) return 0;
    for (; lead; lead &= lead - 1) {
        unsigned j = (unsigned)__builtin_ctzll(lead);
        unsigned char c = t[j];
        unsigned len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp; /* a character the block's end cuts is read whole: the text goes on */
        if (j + len > avail) return 0;
        cp = c & (0x7Fu >> len); /* the lead's bits, then six from each continuation byte */
        for (unsigned m = 1; m < len; m++) cp = cp << 6 | (t[j + m] & 0x3Fu);
        unsigned bits = cp < TK_NCODE ? s->cls[cp] : 0;
        if (bits & (TK_CN | TK_CS) || (cp == 0x17F && j > 0 && t[j - 1] == '\'')) return 0;
        if (cased) { /* o200k: Lm, Lo and marks are in both of its case classes */
            unsigned kase = bits & (TK_CU | TK_CW);
            if (kase == (TK_CU | TK_CW)) return 0;
            if (kase == TK_CU) b->U |= tk_low_bits(len) << j;
        }
        if (bits & TK_CL) b->L |= tk_low_bits(len) << j; /* bits past 63 fall off */
    }
    return 1;
}

/* One block from i (scan_bits.h): its pieces' ends into ends[k..cap); returns the new k, and in
 * *at the last end written (i when none). *high: when the matcher is to read the block (nothing
 * written then), the offset past its last byte from 0x80 up, or for o200k past its last '/'
 * after punctuation's line breaks; *dense: more than 16 bytes from 0x80 up. Out of line: with
 * it inline, the matcher's loop in scan_blocks lost registers (Russian scanned 10% slower). */
static __attribute__((noinline)) size_t bits_block(const Text *s, size_t i, size_t *ends,
                                                   size_t k, size_t cap, int kin, size_t *at,
                                                   size_t *high, int *dense) {
    unsigned char tail[64];
    const unsigned char *t = s->t + i;
    unsigned w = 64;
    int end = s->n - i <= 64;
    *at = i;
    *high = 0;
    if (end) {
        w = (unsigned)(s->n - i);
        memset(tail, 0, sizeof tail);
        memcpy(tail, t, w);
        t = tail;
    }
    uint64_t hi = tk_bits_high(t) & tk_low_bits(w);
    tk_bits b;
    int many = hi && tk_popcount64(hi) > 2 * TK_BLOCK_WIDE_MAX; /* too many even as pairs */
    const int o200k = kin == TK_KIN_O200K;
    if (!many) {
        tk_bits_of(t, &b, o200k);
    }
    if (many || (hi && !wide_classes(s, t, end ? w : s->n - i, hi, &b, o200k))) {
        *high = i + (size_t)tk_top_bit(hi) + 1;
        *dense = tk_popcount64(hi) > 16;
        return k;
    }
    uint64_t slash = o200k ? tk_bits_slash_after_breaks(&b, w) : 0;
    if (slash) { /* the matcher reads past it (code: "});\n//"), as scan_blocks backs off */
        *high = i + (size_t)tk_top_bit(slash) + 1;
        *dense = 0;
        return k;
    }
    uint64_t st = kin == TK_KIN_R50K ? tk_bits_starts_r50k(t, &b, w, end)
                                     : tk_bits_starts(t, &b, w, end, kin == TK_KIN_CL100K,
                                                      kin == TK_KIN_QWEN, o200k);
    st &= ~1ull;
    for (; st && k < cap; st &= st - 1) ends[k++] = *at = i + (size_t)__builtin_ctzll(st);
    if (end && !st && k < cap) ends[k++] = *at = s->n;
    return k;
}
#endif

/* The matcher's piece from i (valid input never gives an empty one; never loop on one). */
TK_INLINE size_t match_piece(const Text *s, size_t i, int kin) {
    size_t e = kin == TK_KIN_O200K  ? piece_o200k(s, i)
               : kin == TK_KIN_R50K ? piece_r50k(s, i)
                                    : piece_cl100k(s, i, kin == TK_KIN_CL100K, kin == TK_KIN_QWEN);
    return e > i ? e : i + 1;
}

/* A block at a time (bits_block), the matcher where a block cannot be read; the pieces from i
 * into ends[0..cap), returning how many. After a block the matcher took, it reads past that
 * block's last byte from 0x80 up, and 64 bytes more for each such block in a row (1,024 at once
 * after a block of mostly such bytes), up to 1,024: Russian or CJK text tries a block about
 * once a kilobyte. o200k's blocks refused for a '/' after line breaks back off the same way, so
 * code with comment lines after punctuation (";\n//") is read by the matcher in stretches, as
 * all of o200k's text was before it had blocks (not measured on code). `state` carries that
 * across calls on one text. The matcher's loop keeps its offset and count in registers (behind a
 * pointer, or with the block's work inline, Hindi, Korean and Thai scanned ~8% slower). */
TK_INLINE size_t scan_blocks(const Text *s, size_t i, size_t *ends, size_t cap, int kin,
                             tk_scan_state *state) {
    size_t k = 0, n = s->n;
#ifdef TK_SCAN_BITS
    if (tk_bits_ok && (kin != TK_KIN_O200K || tk_case_ok)) {
        while (k < cap && i < n) {
            if (i >= state->retry) {
                size_t at, high;
                int dense;
                k = bits_block(s, i, ends, k, cap, kin, &at, &high, &dense);
                if (at > i) {
                    i = at;
                    state->skip = 0;
                    continue;
                }
                size_t stop = i + 1; /* no final start in the block: one piece by the matcher */
                if (high) {
                    size_t skip = state->skip;
                    skip = dense ? 1024 : skip < 64 ? 64 : skip < 1024 ? skip * 2 : skip;
                    stop = i + skip > high ? i + skip : high;
                    state->skip = skip;
                }
                state->retry = stop;
            }
            size_t stop = state->retry < n ? state->retry : n;
            for (; k < cap && i < stop; k++) ends[k] = i = match_piece(s, i, kin);
        }
        return k;
    }
#else
    (void)state;
#endif
    for (; k < cap && i < n; k++) ends[k] = i = match_piece(s, i, kin);
    return k;
}

size_t tk_scan_run(int preset, int dialect, const unsigned char *text, size_t n, size_t from,
                   size_t *ends, size_t cap, tk_scan_state *state) {
    Text s = {text, n, classes(dialect)};
    switch (preset) {
    case TK_PRESET_TEACHING: return scan_blocks(&s, from, ends, cap, TK_KIN_TEACHING, state);
    case TK_PRESET_CL100K: return scan_blocks(&s, from, ends, cap, TK_KIN_CL100K, state);
    case TK_PRESET_QWEN: return scan_blocks(&s, from, ends, cap, TK_KIN_QWEN, state);
    case TK_PRESET_O200K: return scan_blocks(&s, from, ends, cap, TK_KIN_O200K, state);
    default: return scan_blocks(&s, from, ends, cap, TK_KIN_R50K, state);
    }
}

size_t tk_scan_some(int preset, int dialect, const unsigned char *text, size_t n, size_t from,
                    size_t *ends, size_t cap) {
    tk_scan_state state = {0, 0};
    return tk_scan_run(preset, dialect, text, n, from, ends, cap, &state);
}

int tk_scan(int preset, int dialect, const unsigned char *text, size_t n, tk_emit emit, void *ctx) {
    size_t ends[256];
    tk_scan_state state = {0, 0};
    for (size_t i = 0, m; (m = tk_scan_run(preset, dialect, text, n, i, ends, 256, &state)) != 0;) {
        for (size_t k = 0; k < m; i = ends[k++]) {
            int rc = emit(ctx, i, ends[k]);
            if (rc) return rc;
        }
    }
    return 0;
}

size_t tk_safe_cut(int dialect, const unsigned char *text, size_t n, size_t from) {
    Text s = {text, n, classes(dialect)};
    for (size_t p = from < 2 ? 2 : from; p < n; p++) {
        /* A space after a space or line feed and before a letter: every preset's whitespace
         * rule leaves that last space to the letter's piece, and ends the whitespace before
         * it the same way whether the text goes on or ends there. Lines of prose that
         * start indented (RusLit-40: two spaces) have no other cut. */
        if (text[p] == ' ' && (text[p - 1] == ' ' || text[p - 1] == '\n') && p + 1 < n &&
            (bits_of(&s, p + 1) & TK_CL))
            return p;
        if (text[p - 1] != '\n' || text[p] == '/') continue;
        if ((bits_of(&s, p) & TK_CS) || (bits_of(&s, prev_start(&s, p - 1)) & TK_CS)) continue;
        return p;
    }
    return n;
}
