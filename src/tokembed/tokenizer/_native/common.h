/* Shared definitions of tokembed's compiled tokenizer cores (no Python). */
#ifndef TOKEMBED_NATIVE_COMMON_H
#define TOKEMBED_NATIVE_COMMON_H
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
/* glibc before 2.35 lacks the name (manylinux images); the kernel before 5.14 refuses the
 * advice, which tk_populate ignores. 23 on these architectures (asm-generic). */
#if !defined(MADV_POPULATE_WRITE) && (defined(__x86_64__) || defined(__aarch64__))
#define MADV_POPULATE_WRITE 23
#endif
#endif

/* One hash for every open-addressing table of the compiled modules (chunk counter,
 * encoder tables and cache, merge learner). */
static inline uint64_t tk_mix64(uint64_t x) {
    /* splitmix64's finaliser: every input bit reaches every output bit. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Set bits of x (no popcnt instruction is assumed of the target: without one the builtin is
 * a call into libgcc, 1.7% of a warm English encode's samples when the scanner asked it of
 * every 64-byte block). */
static inline unsigned tk_popcount64(uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* 1 for a UTF-8 continuation byte (10xxxxxx). */
static inline int tk_is_cont(unsigned c) { return (c & 0xC0) == 0x80; }

static inline uint64_t tk_load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t tk_load32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Every byte of p[0..n), n < 8, in one word from fixed-size loads that may overlap (a memcpy
 * of 0-7 bytes was a library call: with the hash around it, a tenth of merging new RusLit-40
 * chunks on o200k). Strings of one length map to distinct words. */
static inline uint64_t tk_short64(const unsigned char *p, size_t n) {
    if (n >= 4) return tk_load32(p) | (uint64_t)tk_load32(p + n - 4) << 32;
    return n ? (uint64_t)p[0] | (uint64_t)p[n / 2] << 8 | (uint64_t)p[n - 1] << 16 : 0;
}

static inline uint64_t tk_hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    size_t len = n;
    while (n > 8) {
        h = (h ^ tk_load64(p)) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    /* the last 8 bytes, overlapping words already hashed (the length went in first) */
    h ^= len >= 8 ? tk_load64(p + n - 8) : tk_short64(p, n);
    return tk_mix64(h);
}

/* Ask for the whole 2 MiB pages inside p[0..bytes) to be backed by huge pages when first
 * touched (Linux with transparent huge pages in "madvise" mode, the common default, honours the
 * request; elsewhere it is ignored). Advice only: the memory and its contents stay as they are,
 * so it may be memory another allocator owns. */
static inline void tk_advise_huge(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), b = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (b > a) madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Fault in the pages wholly inside p[0..bytes) at once, writable (MADV_POPULATE_WRITE, Linux
 * 5.14 on; elsewhere, or where the kernel refuses, a no-op): one call where writing them took
 * a page fault each. Contents are unchanged. */
static inline void tk_populate(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    long size = sysconf(_SC_PAGESIZE);
    uintptr_t page = size > 0 ? (uintptr_t)size : 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + bytes) & ~(page - 1);
    if (b > a) (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Memory of `bytes` (not zeroed) on huge pages: 2 MiB-aligned, its pages advised huge
 * (tk_advise_huge). Free with free().
 *
 * Advice only reaches pages not yet touched, and malloc often hands back heap memory that a
 * freed block had touched (after a large free glibc raises its mmap threshold and serves the
 * next large blocks from the heap): after loading qwen's or o200k's rank file, a new encoder's
 * 4 MiB front cache came back on 1,024 small pages, and the process's AnonHugePages did not
 * grow when it was made. With `fresh` the block's pages are dropped first (whole pages of our
 * own block, whose contents are not promised), so that its first touch can take huge pages
 * where the kernel allows them and has one free: for tables read at random. That is one
 * madvise per table made (a TLB shootdown to the process's other threads where the pages were
 * mapped, as a chunk counter made on a worker thread may find), never per lookup; the kernel
 * then clears each page that the caller may clear again. An output written in order keeps
 * memory already touched, which costs no page fault. Speed on the two-core test machine did
 * not change measurably either way; this keeps the memory what the front cache's design
 * (encode_front.h) and the tables assume. */
static inline void *tk_huge_alloc(size_t bytes, int fresh) {
    const size_t huge = (size_t)2 << 20;
    size_t rounded = (bytes + huge - 1) & ~(huge - 1);
    if (rounded < bytes) return NULL;
    if (!rounded) rounded = huge;
    void *p = aligned_alloc(huge, rounded);
    if (!p) return NULL;
#if defined(__linux__) && defined(MADV_DONTNEED)
    if (fresh) madvise(p, rounded, MADV_DONTNEED);
#else
    (void)fresh;
#endif
    tk_advise_huge(p, rounded);
    return p;
}

/* Zeroed memory for a large randomly-probed table. From 1 MiB up it is on huge pages: a
 * lookup into an 8 MB table touches a random 4 KiB page, so with small pages nearly every
 * lookup missed the TLB as well as the cache. Below, it starts on a 64-byte line, so that a
 * slot of 16, 32 or 64 bytes never straddles two (malloc promises 16). Free with free().
 *
 * Zeroed by writing, never by calloc: calloc takes fresh pages from mmap as they are, a
 * lookup that reads one first maps the shared zero page, and the first write to it then
 * faults again and flushes that page from the TLB of every CPU running the process - an
 * interrupt to each other thread. Two threads encoding 2 MB of 13 languages (cl100k) took
 * ~15,000 such flushes and each ran 1.4-1.7x slower than alone. */
static inline void *tk_table_alloc(size_t bytes) {
    size_t lines = (bytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple */
    if (lines < bytes) return NULL;
    void *p = bytes < ((size_t)1 << 20) ? aligned_alloc(64, lines ? lines : 64)
                                         : tk_huge_alloc(bytes, 1);
    if (p) memset(p, 0, bytes);
    return p;
}
#endif
