/* UTF-8 written from code points stored one, two or four bytes each (no Python): how a str
 * keeps its characters, read in place so that encoding a long str does not first make and keep
 * its whole UTF-8.
 *
 * Python makes a str's UTF-8 once and keeps it beside the str (twice the memory from then on);
 * for the 13 PUD languages (1.35 M characters, 2.06 MB of UTF-8) that took 2.4 ms and ~500
 * page faults in a fresh process, and for the first 4 MB of RusLit-40 6.3-8.3 ms (~3 ns a
 * Cyrillic character): 6% and 13% of encoding them cold. The encoder instead takes the UTF-8
 * a window at a time into a buffer it keeps (encode_core.c, tk_encode_ucs). A block of eight
 * two-byte code points is written at once (SSSE3, where the CPU has it) when all are below
 * U+0800, ASCII and two-byte mixed as in Russian or Arabic prose, or all are three-byte; any
 * other block, one character at a time with no branch on its length. Writing alone, best of
 * 20 into a 256 KiB window: RusLit-40 0.43 ns a character, the 13 languages 0.70 (one at a
 * time without a branch: 2.6 and 1.4; with one: 3.2 and 1.8). */
#ifndef TOKEMBED_UTF8_WRITE_H
#define TOKEMBED_UTF8_WRITE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Code points data[0..n) of `kind` bytes each (1, 2 or 4), the next to write at `at`. */
typedef struct {
    const void *data;
    size_t n, at;
    int kind;
} tk_ucs_text;

/* The most UTF-8 bytes one code point of `kind` bytes takes. */
static inline size_t tk_ucs_max_bytes(int kind) { return kind == 1 ? 2 : kind == 2 ? 3 : 4; }

/* One code point c as UTF-8 at o; its length, or 0 for a surrogate (UTF-8 has none). */
static inline size_t tk_utf8_put(unsigned char *o, uint32_t c) {
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | c >> 6);
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        if (c >= 0xD800 && c < 0xE000) return 0;
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#define TK_UTF8_BLOCKS 1
#include <tmmintrin.h>

/* By the mask of a block's two-byte lanes (bit k: lane k is from U+0080 to U+07FF, the others
 * ASCII): which of the 16 bytes of its lanes, each lane's bytes in order, are its UTF-8 (0x80:
 * none), and how many. Filled once, by tk_utf8_write_init. */
static unsigned char tk_utf8_pick2[256][16];
static unsigned char tk_utf8_len2[256];

static void tk_utf8_write_init(void) {
    for (unsigned m = 0; m < 256; m++) {
        unsigned w = 0;
        memset(tk_utf8_pick2[m], 0x80, 16);
        for (unsigned k = 0; k < 8; k++) {
            tk_utf8_pick2[m][w++] = (unsigned char)(2 * k);
            if (m >> k & 1) tk_utf8_pick2[m][w++] = (unsigned char)(2 * k + 1);
        }
        tk_utf8_len2[m] = (unsigned char)w;
    }
}

/* Eight code points at s as UTF-8 at o (up to 24 bytes written): when all are below U+0800
 * (ASCII and two-byte, in any order) or all are three-byte, 1 with their length in *w; else 0.
 * A lane's bytes are made in place (lead | continuation << 8 is its two bytes in order) and
 * the block's are then picked out with a shuffle (Lemire and Keiser's transcoding, "Unicode at
 * gigabytes per second", 2021, by a table of 256 shuffles). */
__attribute__((target("ssse3"))) static inline int tk_utf8_put8(unsigned char *o,
                                                                const uint16_t *s, size_t *w) {
    __m128i v = _mm_loadu_si128((const __m128i *)s), zero = _mm_setzero_si128();
    __m128i low6 = _mm_set1_epi16(0x3F), cont = _mm_set1_epi16(0x80);
    __m128i big = _mm_and_si128(v, _mm_set1_epi16((short)0xF800)); /* bits from 0x800 up */
    int narrow = _mm_movemask_epi8(_mm_cmpeq_epi16(big, zero));
    if (narrow == 0xFFFF) { /* all below U+0800 */
        __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16((short)0xFF80)), zero);
        unsigned two = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(ascii, zero)) ^ 0xFF;
        __m128i lead = _mm_or_si128(_mm_srli_epi16(v, 6), _mm_set1_epi16(0xC0));
        __m128i both = _mm_or_si128(lead, _mm_slli_epi16(_mm_or_si128(_mm_and_si128(v, low6),
                                                                      cont), 8));
        __m128i lanes = _mm_or_si128(_mm_and_si128(ascii, v), _mm_andnot_si128(ascii, both));
        __m128i pick = _mm_loadu_si128((const __m128i *)tk_utf8_pick2[two]);
        _mm_storeu_si128((__m128i *)o, _mm_shuffle_epi8(lanes, pick));
        *w = tk_utf8_len2[two];
        return 1;
    }
    __m128i surrogate = _mm_cmpeq_epi16(big, _mm_set1_epi16((short)0xD800));
    if (narrow != 0 || _mm_movemask_epi8(surrogate) != 0) return 0;
    /* all three-byte: lead | middle << 8 per lane, the last bytes packed, and the 24 bytes
     * picked from the two (char k at bytes 3k..3k+2) */
    __m128i lead = _mm_or_si128(_mm_srli_epi16(v, 12), _mm_set1_epi16(0xE0));
    __m128i mid = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(v, 6), low6), cont);
    __m128i a = _mm_or_si128(lead, _mm_slli_epi16(mid, 8));
    __m128i t = _mm_or_si128(_mm_and_si128(v, low6), cont);
    t = _mm_packus_epi16(t, t);
    const char x = (char)0x80;
    __m128i a0 = _mm_setr_epi8(0, 1, x, 2, 3, x, 4, 5, x, 6, 7, x, 8, 9, x, 10);
    __m128i t0 = _mm_setr_epi8(x, x, 0, x, x, 1, x, x, 2, x, x, 3, x, x, 4, x);
    __m128i a1 = _mm_setr_epi8(11, x, 12, 13, x, 14, 15, x, x, x, x, x, x, x, x, x);
    __m128i t1 = _mm_setr_epi8(x, 5, x, x, 6, x, x, 7, x, x, x, x, x, x, x, x);
    _mm_storeu_si128((__m128i *)o,
                     _mm_or_si128(_mm_shuffle_epi8(a, a0), _mm_shuffle_epi8(t, t0)));
    _mm_storel_epi64((__m128i *)(o + 16),
                     _mm_or_si128(_mm_shuffle_epi8(a, a1), _mm_shuffle_epi8(t, t1)));
    *w = 24;
    return 1;
}
#else
static void tk_utf8_write_init(void) {}
#endif

/* One code point c below U+10000 and no surrogate as UTF-8 into the four bytes at o (bytes
 * past its length are scratch); its length. No branch on the length: a space between
 * Cyrillic words would mispredict one every few characters. */
static inline size_t tk_utf8_put_bmp(unsigned char *o, uint32_t c) {
    uint32_t one = c, two = (0xC0 | c >> 6) | (0x80 | (c & 0x3F)) << 8;
    uint32_t three = (0xE0 | c >> 12) | (0x80 | (c >> 6 & 0x3F)) << 8 | (0x80 | (c & 0x3F)) << 16;
    uint32_t word = c < 0x80 ? one : c < 0x800 ? two : three;
    memcpy(o, &word, 4);
    return 1 + (c >= 0x80) + (c >= 0x800);
}

/* The two-byte kind's blocks of tk_ucs_to_utf8, from t->at while eight more fit (8 * 3 bytes
 * and the put's scratch byte); 1 when a surrogate stopped it (t->at names it). `blocks`: SSSE3
 * is there for tk_utf8_put8 (tk_ucs2_blocks), else every character goes one at a time. */
static inline __attribute__((always_inline)) int tk_ucs2_loop(tk_ucs_text *t, unsigned char *out,
                                                              size_t cap, size_t *written,
                                                              int blocks) {
    const uint16_t *s = t->data;
    size_t w = *written, i = t->at;
    while (i + 8 <= t->n && w + 8 * 3 + 1 <= cap) {
        size_t k;
#if defined(TK_UTF8_BLOCKS)
        if (blocks && tk_utf8_put8(out + w, s + i, &k)) {
            i += 8;
            w += k;
            continue;
        }
#else
        (void)blocks;
        (void)k;
#endif
        for (size_t end = i + 8; i < end; i++) {
            if ((s[i] & 0xF800) == 0xD800) {
                t->at = i;
                *written = w;
                return 1;
            }
            w += tk_utf8_put_bmp(out + w, s[i]);
        }
    }
    t->at = i;
    *written = w;
    return 0;
}

#if defined(TK_UTF8_BLOCKS)
__attribute__((target("ssse3"))) static int tk_ucs2_blocks(tk_ucs_text *t, unsigned char *out,
                                                           size_t cap, size_t *written) {
    return tk_ucs2_loop(t, out, cap, written, 1);
}
#endif

static int tk_ucs2_plain(tk_ucs_text *t, unsigned char *out, size_t cap, size_t *written) {
    return tk_ucs2_loop(t, out, cap, written, 0);
}

/* The next code points of t as UTF-8 into out[0..cap): whole characters only, as many as fit.
 * Returns the bytes written (0 only at the end of t, given cap >= 4), or -1 at a surrogate
 * (t->at then names it; what was written before it is in out). Where a block of eight is
 * neither all below U+0800 nor all three-byte, the eight go one at a time before blocks are
 * tried again; a str of one byte a character goes eight at a time while they are ASCII. */
static ptrdiff_t tk_ucs_to_utf8(tk_ucs_text *t, unsigned char *out, size_t cap) {
    size_t w = 0, i = t->at;
    if (t->kind == 2) {
#if defined(TK_UTF8_BLOCKS)
        int stopped = __builtin_cpu_supports("ssse3") ? tk_ucs2_blocks(t, out, cap, &w)
                                                      : tk_ucs2_plain(t, out, cap, &w);
#else
        int stopped = tk_ucs2_plain(t, out, cap, &w);
#endif
        if (stopped) return -1;
        i = t->at;
    } else if (t->kind == 1) {
        const unsigned char *s = t->data;
        while (i + 8 <= t->n && w + 8 * 2 + 2 <= cap) {
            uint64_t x;
            memcpy(&x, s + i, 8);
            if (!(x & 0x8080808080808080ull)) { /* eight ASCII */
                memcpy(out + w, &x, 8);
                i += 8;
                w += 8;
                continue;
            }
            for (size_t end = i + 8; i < end; i++) w += tk_utf8_put_bmp(out + w, s[i]);
        }
    }
    /* the text's last few characters, or the window's: one at a time, each only if it fits */
    unsigned char tmp[4];
    for (; i < t->n; i++) {
        uint32_t c = t->kind == 1 ? ((const unsigned char *)t->data)[i]
                     : t->kind == 2 ? ((const uint16_t *)t->data)[i]
                                    : ((const uint32_t *)t->data)[i];
        size_t len = tk_utf8_put(tmp, c);
        if (!len) {
            t->at = i;
            return -1;
        }
        if (w + len > cap) break;
        memcpy(out + w, tmp, len);
        w += len;
    }
    t->at = i;
    return (ptrdiff_t)w;
}
#endif
