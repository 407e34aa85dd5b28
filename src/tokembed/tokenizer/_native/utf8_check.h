/* Is it UTF-8? The check that lets bytes of a corpus reach the encoder without a str (no Python).
 *
 * Well-formed means Unicode's table 3-7, which Python's strict decoder also applies: no
 * overlong form, no surrogate (ED A0..BF), nothing past U+10FFFF, no sequence cut short.
 * tk_utf8_valid_prefix answers with the offset of the first byte that begins no well-formed
 * sequence, or n. A byte-at-a-time loop ran at ~570 MB/s on Russian text (a 1 MB block cost
 * more than a tenth of its encoding), so 16 bytes at a time are checked with SSSE3 where the
 * CPU has it (Keiser and Lemire, "Validating UTF-8 in less than one instruction per byte",
 * 2021: three 16-entry tables looked up by the nibbles of each byte and the one before it),
 * and the loop only finds the offset once a block fails. */
#ifndef TOKEMBED_UTF8_CHECK_H
#define TOKEMBED_UTF8_CHECK_H
#include <stddef.h>
#include <string.h>

#include "common.h"

static size_t tk_utf8_scalar_prefix(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time */
        while (i + 8 <= n && !(tk_load64(s + i) & 0x8080808080808080ull)) i += 8;
        if (i >= n) break;
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; /* the range of the byte after the lead */
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;      /* overlong */
            else if (c == 0xED) hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;      /* overlong */
            else if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
        } else
            return i;
        if (n - i <= need || s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return n;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TK_UTF8_SIMD 1

/* Error bits of a byte pair (the byte before, this byte); a pair is wrong where the three
 * lookups share a bit, and a continuation byte is wrong where "two continuations" disagrees
 * with the lead two or three bytes back. */
enum {
    TK_U8_SHORT = 1,      /* a lead, then no continuation */
    TK_U8_LONG = 2,       /* ASCII, then a continuation */
    TK_U8_OVER3 = 4,      /* E0 80..9F */
    TK_U8_LARGE = 8,      /* F4 90.. and F5.. */
    TK_U8_SURR = 16,      /* ED A0..BF */
    TK_U8_OVER2 = 32,     /* C0, C1 */
    TK_U8_LARGE1000 = 64, /* F5.. 80..8F; shares its bit with F0 80..8F (overlong) */
    TK_U8_TWO = 128,      /* a continuation after a continuation */
    TK_U8_CARRY = TK_U8_SHORT | TK_U8_LONG | TK_U8_TWO,
};

__attribute__((target("ssse3"))) static inline __m128i tk_u8_block(__m128i in, __m128i prev) {
    const __m128i nib = _mm_set1_epi8(0x0F);
    /* by the high nibble of the byte before */
    const __m128i high1 = _mm_setr_epi8(
        TK_U8_LONG, TK_U8_LONG, TK_U8_LONG, TK_U8_LONG, TK_U8_LONG, TK_U8_LONG, TK_U8_LONG,
        TK_U8_LONG, (char)TK_U8_TWO, (char)TK_U8_TWO, (char)TK_U8_TWO, (char)TK_U8_TWO,
        TK_U8_SHORT | TK_U8_OVER2, TK_U8_SHORT, TK_U8_SHORT | TK_U8_OVER3 | TK_U8_SURR,
        TK_U8_SHORT | TK_U8_LARGE | TK_U8_LARGE1000);
    /* by the low nibble of the byte before */
    const __m128i low1 = _mm_setr_epi8(
        (char)(TK_U8_CARRY | TK_U8_OVER3 | TK_U8_OVER2 | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_OVER2), (char)TK_U8_CARRY, (char)TK_U8_CARRY,
        (char)(TK_U8_CARRY | TK_U8_LARGE), (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000 | TK_U8_SURR),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000),
        (char)(TK_U8_CARRY | TK_U8_LARGE | TK_U8_LARGE1000));
    /* by the high nibble of this byte */
    const char cont8 = (char)(TK_U8_LONG | TK_U8_OVER2 | TK_U8_TWO | TK_U8_OVER3 | TK_U8_LARGE1000);
    const char cont9 = (char)(TK_U8_LONG | TK_U8_OVER2 | TK_U8_TWO | TK_U8_OVER3 | TK_U8_LARGE);
    const char contAB = (char)(TK_U8_LONG | TK_U8_OVER2 | TK_U8_TWO | TK_U8_SURR | TK_U8_LARGE);
    const __m128i high2 = _mm_setr_epi8(TK_U8_SHORT, TK_U8_SHORT, TK_U8_SHORT, TK_U8_SHORT,
                                        TK_U8_SHORT, TK_U8_SHORT, TK_U8_SHORT, TK_U8_SHORT, cont8,
                                        cont9, contAB, contAB, TK_U8_SHORT, TK_U8_SHORT,
                                        TK_U8_SHORT, TK_U8_SHORT);
    __m128i prev1 = _mm_alignr_epi8(in, prev, 15);
    __m128i special = _mm_and_si128(
        _mm_and_si128(_mm_shuffle_epi8(high1, _mm_and_si128(_mm_srli_epi16(prev1, 4), nib)),
                      _mm_shuffle_epi8(low1, _mm_and_si128(prev1, nib))),
        _mm_shuffle_epi8(high2, _mm_and_si128(_mm_srli_epi16(in, 4), nib)));
    /* a continuation is owed where the byte two back is E0.. or three back is F0.. */
    __m128i third = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 14), _mm_set1_epi8(0xE0 - 0x80));
    __m128i fourth = _mm_subs_epu8(_mm_alignr_epi8(in, prev, 13), _mm_set1_epi8(0xF0 - 0x80));
    __m128i owed = _mm_and_si128(_mm_or_si128(third, fourth), _mm_set1_epi8((char)0x80));
    return _mm_xor_si128(owed, special);
}

/* 1 when all of s[0:n) is UTF-8 (a sequence cut by the end is an error: a block of zeros,
 * ASCII, follows the last bytes). */
__attribute__((target("ssse3"))) static int tk_utf8_all_simd(const unsigned char *s, size_t n) {
    __m128i prev = _mm_setzero_si128(), err = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i in = _mm_loadu_si128((const __m128i *)(s + i));
        err = _mm_or_si128(err, tk_u8_block(in, prev));
        prev = in;
    }
    unsigned char tail[32] = {0};
    memcpy(tail, s + i, n - i);
    for (size_t k = 0; k < 32; k += 16) {
        __m128i in = _mm_loadu_si128((const __m128i *)(tail + k));
        err = _mm_or_si128(err, tk_u8_block(in, prev));
        prev = in;
    }
    return _mm_movemask_epi8(_mm_cmpeq_epi8(err, _mm_setzero_si128())) == 0xFFFF;
}
#endif

static size_t tk_utf8_valid_prefix(const unsigned char *s, size_t n) {
#ifdef TK_UTF8_SIMD
    if (__builtin_cpu_supports("ssse3") && tk_utf8_all_simd(s, n)) return n;
#endif
    return tk_utf8_scalar_prefix(s, n);
}
#endif
