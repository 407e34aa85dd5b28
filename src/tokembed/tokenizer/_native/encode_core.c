/* The BPE encoder's core (see encode_core.h); encode_module.c binds it to Python. */
#include "encode_core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "encode_atoms.h"
#include "encode_backtrack.h"
#include "encode_front.h"
#include "encode_merge.h"
#include "encode_segment.h"
#include "scan.h"
#include "utf8_check.h"
#include "utf8_write.h"

_Static_assert(TK_CACHED_CHUNK <= UINT16_MAX, "a cache slot holds a chunk's length in 16 bits");

/* ================================ tables ================================ */
struct tk_tables {
    int rank_mode;
    /* A chunk that is one of `pieces` is that piece's id: every piece of a rank file and of
     * tables with ignore_merges (tiktoken's and HF's rule), else the pieces the merges
     * rebuild from their own bytes (the same ids as merging, one lookup). */
    int whole;
    int ignore_merges;
    int all_bytes; /* every byte has an id */
    int warmed;    /* an encoder has read the large tables (warm_tables); set atomically */
    uint32_t byte_id[256]; /* UINT32_MAX: no id */
    tk_pair_map pairs;     /* merge mode; rank mode: every split of a piece, or empty */
    uint32_t *merge_lr;    /* merge mode: (left, right, result) per rank */
    size_t n_merges;
    tk_piece_map pieces;   /* rank mode */
    unsigned char *blob;
    size_t n_pieces;
    uint32_t max_rank;
    uint32_t max_id; /* largest id either mode can output */
    tk_bt *bt;       /* backtracking's trie and histories; NULL: chunks are merged */
    tk_seg *seg;     /* where long chunks may be cut (encode_segment.h); NULL: never */
    tk_atoms *atoms; /* rank files: their parts merged from letters (encode_atoms.h); or NULL */
    size_t bt_min[3]; /* shorter chunks are merged, by their first letter (see backtrack_from) */
};

/* The shortest chunk backtracking takes, by the chunk's first byte after a leading space: an ASCII
 * byte or the lead of a Latin letter with a diacritic (U+00C0-U+027F: 0xC3-0xC9; 0xC2's characters
 * are marks and spaces such as the NBSP and «, which cl100k's pattern puts before a Cyrillic
 * word), the lead of another two-byte UTF-8 character (Cyrillic, Greek, Arabic...), or of a longer
 * one (CJK, Thai, Devanagari...); 0 for none. Shorter chunks are merged, which costs fewer cycles
 * where its memo is warm and tokens are long (o200k): cycles per new chunk, merging /
 * backtracking, RusLit-40's 40 MB on one thread, o200k, 9-16 bytes 2,143 / 3,049, 17-24 3,137 /
 * 3,866, 25-32 4,460 / 5,026, 33-48 10,520 / 6,848; GPT-2 (short tokens, merges without a memo)
 * 9-16 1,333 / 958, 17-24 2,059 / 1,001. English (cold, 0.11 MB), 9-16 bytes: o200k ~2,300 /
 * ~4,000, GPT-2 ~2,900 / ~4,300. CJK (cold, 0.23 MB), o200k: 9-16 1,250 / 980, 17-24 2,543 /
 * 1,816, 33-64 12,270 / 5,497. Those rank-file numbers asked validity of the piece table; with a
 * pair table (by_pairs: merge lists, and rank files of short two-byte-letter pieces, see
 * wants_rank_pairs) other two-byte letters start at 9. Words led by ASCII or a Latin letter of
 * those blocks start at 33 whatever the table (Vietnamese's letters from U+1E00 are longer: 9): in
 * a cold call the trie's nodes come from memory, one line per byte, and backtracking new words
 * (ASCII-led from 17 bytes, accented from 9, up to 32) took 14% of SmolLM2's samples on the 7
 * Latin-script PUD languages (1,782 distinct words: 1,131 led by ASCII from 17 bytes, 651 by an
 * accented letter from 9). One thread, fresh processes interleaved, medians of 11, ASCII from 17
 * and accented letters from 9 -> both from 33 (leads 0xC2-0xC9 then; a second copy of the old
 * build beside them, on a host whose copies differed by up to 16%): that text SmolLM2 20.6 -> 18.2
 * ms (copy 23.9), GPT-2 19.8 -> 17.6 (19.3), cl100k 20.6 -> 19.6 (20.2); the 13 languages SmolLM2
 * 40.8 -> 37.1 (39.1), GPT-2 36.4 -> 35.6 (36.5); PUD English and RusLit-40 within the copies'
 * spread. In `bench_encode.py`, best of 5: that text GPT-2 0.88x -> 1.13x fastokens, SmolLM2 0.97x
 * -> 1.08x. TOKEMBED_BACKTRACK in the environment, read when tables are made: "0" never backtrack,
 * "always" backtrack every chunk of two bytes or more (tests). */
static void backtrack_from(int by_pairs, size_t from[3]) {
    const char *v = getenv("TOKEMBED_BACKTRACK");
    size_t all = v && strcmp(v, "0") == 0 ? 0 : v && strcmp(v, "always") == 0 ? 2 : 1;
    from[0] = all != 1 ? all : 33;                  /* ASCII and Latin letters */
    from[1] = all != 1 ? all : by_pairs ? 9 : 33;  /* two-byte letters */
    from[2] = all != 1 ? all : 9;                   /* longer letters */
}

/* The shortest chunk backtracking takes for a chunk of first byte `lead` (word_lead). */
static inline size_t backtrack_min(const size_t from[3], unsigned char lead) {
    return from[lead < 0x80 || (lead >= 0xc3 && lead <= 0xc9) ? 0 : lead < 0xe0 ? 1 : 2];
}

/* The byte a chunk is classed by above: its first after a leading space (tk_piece_lead), or,
 * for a chunk led by one character of U+2000-U+207F (E2 80-81 xx: quotes, dashes, the spaces
 * and marks of that block, which the split patterns put before a word as they do a space), the
 * byte after it. Only speed depends on it: both ways give the same ids. Such a word was
 * classed by the mark's 0xE2, as CJK is, and backtracked from 9 bytes: on the 7 Latin-script PUD
 * languages 199 chunks ("„Ausschuss", "“Nous"), 3% of a cold call's samples (o200k, qwen), the
 * trie's nodes one cold line per byte. Merged instead, one thread, fresh processes interleaved,
 * medians of 15: o200k 17.14 -> 16.63 ms, qwen 16.59 -> 16.29, cl100k (of 11) 15.72 -> 15.38; 13
 * PUD languages o200k (of 9) 40.9 -> 40.1; RusLit-40 qwen (of 7) 44.0 -> 43.7. */
static inline unsigned char word_lead(const unsigned char *d, size_t n) {
    if (n > 3 && d[0] == 0xe2 && (d[1] == 0x80 || d[1] == 0x81)) return d[3];
    return tk_piece_lead(d, n);
}

/* 1 when a chunk of n bytes classed by `lead` (word_lead), not found whole, is backtracked
 * rather than merged. */
static inline int backtracks(const tk_tables *t, size_t n, unsigned char lead) {
    return t->bt && n > 1 && n >= backtrack_min(t->bt_min, lead);
}

/* Whether a rank file's tables get the pair table below, which lets backtracking take words of
 * two-byte letters (Cyrillic, Greek, Arabic...; not Latin ones, see backtrack_from) from 9
 * bytes instead of 33. It pays where the vocabulary splits such words into short pieces, so that
 * merging one takes many joins: pieces starting with a two-byte letter (after one space) average
 * 4.9 bytes in cl100k, 7.5 in qwen and 8.2 in o200k. One thread, fresh processes, medians of 9
 * against 33 bytes: RusLit-40 on cl100k +7% (73.3 vs 68.3 MB/s), 13 PUD languages the same;
 * qwen +5% on RusLit-40 but -5% on 13 languages, o200k -2..-7% and -6..-11%: there merging a
 * word of long pieces stays cheaper. TOKEMBED_PAIRS in the environment when tables are made:
 * "0" never, "1" always (tests). */
#define TK_SHORT_LETTER_PIECES 6

static int wants_rank_pairs(const unsigned char *blob, const uint32_t *offs, const uint32_t *lens,
                            size_t count) {
    const char *v = getenv("TOKEMBED_PAIRS");
    if (v && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)) return v[0] == '1';
    size_t n = 0, bytes = 0;
    for (size_t k = 0; k < count; k++) {
        const unsigned char *p = blob + offs[k];
        size_t skip = lens[k] > 1 && p[0] == ' ';
        if (lens[k] <= skip || p[skip] < 0xc0 || p[skip] >= 0xe0) continue;
        n++;
        bytes += lens[k];
    }
    return n && bytes < TK_SHORT_LETTER_PIECES * n;
}

/* Every split of every piece into two pieces, as a pair table (left, right) -> (rank, result)
 * of the piece they join to, in t->pairs. Tiktoken's rule joins two parts exactly when their
 * bytes together are a piece, so the table gives backtracking's validity checks the piece
 * table's answer from two ids, without hashing the joined bytes or reading a 32-byte piece slot
 * (cl100k: 233,378 splits of 100,256 pieces, an 8 MiB table). Splits are found along the trie:
 * a piece's prefixes that are pieces are its chain of prefix links, and each rest is looked up
 * exactly. Without memory there is no table, and validity asks the piece table. */
static void pairs_of_ranks(tk_tables *t, const tk_bt *bt, const unsigned char *const *at,
                           size_t n_ids) {
    size_t n = 0, cap = 0;
    uint32_t *lr = NULL;
    for (size_t id = 0; id < n_ids; id++) {
        uint32_t len = bt->tok[id].len;
        if (len < 2) continue;
        for (uint32_t l = bt->prefix[id]; l != TK_BT_NONE; l = bt->prefix[l]) {
            uint32_t ll = bt->tok[l].len, r = tk_bt_exact(bt, at[id] + ll, len - ll);
            if (r == TK_BT_NONE) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 2 * n_ids + 16;
                uint32_t *grown = realloc(lr, 3 * cap * sizeof(uint32_t));
                if (!grown) goto done;
                lr = grown;
            }
            lr[3 * n] = l;
            lr[3 * n + 1] = r;
            lr[3 * n + 2] = (uint32_t)id;
            n++;
        }
    }
    if (tk_pair_map_init(&t->pairs, n) < 0) {
        tk_pair_map_free(&t->pairs);
        memset(&t->pairs, 0, sizeof t->pairs);
        goto done;
    }
    for (size_t k = 0; k < n; k++)
        tk_pair_map_put(&t->pairs, lr[3 * k], lr[3 * k + 1], lr[3 * k + 2], lr[3 * k + 2]);
done:
    free(lr);
}

/* The split filter of a rank file's tables (encode_tables.h): each token's history, and every
 * split of a token without one (`built` 0) into two pieces, found along the trie as in
 * pairs_of_ranks. Without memory there is no filter. */
static void splits_of_ranks(tk_tables *t, const tk_bt *bt, const unsigned char *const *at,
                            size_t n_ids, const uint8_t *built) {
    const char *v = getenv("TOKEMBED_SPLITS");
    if ((v && strcmp(v, "0") == 0) || !(t->pieces.split = tk_table_alloc(TK_SPLIT_WORDS * 8)))
        return;
    for (size_t id = 0; id < n_ids; id++) {
        uint32_t len = bt->tok[id].len;
        if (len < 2) continue;
        if (built[id]) {
            tk_split_add(t->pieces.split, bt->tok[id].left, bt->tok[id].right);
            continue;
        }
        for (uint32_t l = bt->prefix[id]; l != TK_BT_NONE; l = bt->prefix[l]) {
            uint32_t ll = bt->tok[l].len, r = tk_bt_exact(bt, at[id] + ll, len - ll);
            if (r != TK_BT_NONE) tk_split_add(t->pieces.split, l, r);
        }
    }
}

/* Backtracking for a rank file: the pieces in rank order, each given the history of its longest
 * prefix whose rest is a piece and whose pair is valid below its rank (a piece BPE does not
 * build from its own bytes gets none and leaves the trie). NULL (chunks are merged) when memory
 * runs out or ranks are far sparser than the pieces. Where wants_rank_pairs holds, the pair
 * table is built from the trie before pieces no merge builds are dropped from it. */
static tk_bt *backtrack_of_ranks(tk_tables *t, const uint32_t *offs, const uint32_t *lens,
                                 const uint32_t *ranks, size_t count) {
    if (!t->bt_min[2]) return NULL;
    size_t n_ids = (size_t)t->max_rank + 1;
    if (n_ids > 4 * (count + 256)) return NULL;
    tk_bt_entry *e = malloc(count * sizeof *e);
    const unsigned char **at = calloc(n_ids, sizeof *at);
    uint8_t *built = calloc(n_ids, 1);
    tk_bt *bt = NULL;
    if (e && at && built) {
        for (size_t k = 0; k < count; k++) {
            e[k] = tk_bt_entry_of(t->blob + offs[k], lens[k], ranks[k]);
            at[ranks[k]] = t->blob + offs[k];
        }
        bt = tk_bt_trie(e, count, n_ids);
    }
    if (bt && wants_rank_pairs(t->blob, offs, lens, count)) pairs_of_ranks(t, bt, at, n_ids);
    if (bt) {
        tk_bt_ranks r = {&t->pieces, NULL, NULL};
        for (size_t id = 0; id < n_ids; id++) {
            uint32_t len = bt->tok[id].len;
            if (len == 1) built[id] = 1;
            if (len < 2) continue;
            for (uint32_t l = bt->prefix[id]; l != TK_BT_NONE; l = bt->prefix[l]) {
                if (!built[l]) continue;
                uint32_t ll = bt->tok[l].len, rt = tk_bt_exact(bt, at[id] + ll, len - ll);
                if (rt == TK_BT_NONE || !built[rt]) continue;
                if (tk_bt_keep(bt, &r, (uint32_t)id, l, rt, at[id], (uint32_t)id)) {
                    built[id] = 1;
                    break;
                }
            }
        }
        splits_of_ranks(t, bt, at, n_ids, built);
        tk_bt_drop_unbuilt(bt, e, count, built);
    }
    free(e);
    free(at);
    free(built);
    return bt;
}

/* The cut tables of n tokens (token k: blob + off[k], len[k] bytes; len 0: none), or NULL:
 * without memory, or when TOKEMBED_SEGMENT is "0" in the environment when tables are made
 * (tests and A/B measurements of the same build). */
static tk_seg *segments_of(const unsigned char *blob, const uint32_t *off, const uint32_t *len,
                           size_t n, const tk_bt *bt) {
    const char *v = getenv("TOKEMBED_SEGMENT");
    if (v && strcmp(v, "0") == 0) return NULL;
    tk_seg *s = tk_seg_new(bt->n_ids);
    if (!s) return NULL;
    for (size_t k = 0; k < n; k++)
        if (len[k] > 1) tk_seg_add(s, blob + off[k], len[k]);
    for (size_t id = 0; id < bt->n_ids; id++)
        if (bt->tok[id].len) tk_seg_set(s->whole, id);
    return s;
}

static tk_tables *tables_new(int rank_mode) {
    tk_tables *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->rank_mode = rank_mode;
    t->whole = t->ignore_merges = rank_mode;
    backtrack_from(!rank_mode, t->bt_min);
    for (int b = 0; b < 256; b++) t->byte_id[b] = UINT32_MAX;
    return t;
}

void tk_tables_free(tk_tables *t) {
    if (!t) return;
    tk_pair_map_free(&t->pairs);
    free(t->merge_lr);
    tk_piece_map_free(&t->pieces);
    free(t->blob);
    tk_bt_free(t->bt);
    tk_seg_free(t->seg);
    tk_atoms_free(t->atoms);
    free(t);
}

/* Backtracking for a merge list: a token's bytes are its merge's parts' bytes (bytes first, then
 * merges in order), its history the first merge, in rank order, whose pair is valid. NULL (chunks
 * are merged) when memory runs out, ids are far sparser than the merges, or the list gives one
 * id two byte strings. */
static tk_bt *backtrack_of_merges(const tk_tables *t, tk_seg **seg) {
    if (!t->bt_min[2]) return NULL;
    size_t n_ids = (size_t)t->max_id + 1, n = t->n_merges, n_entries = 0, blob_len = 0;
    if (n_ids > 4 * (n + 256)) return NULL;
    uint32_t *off = calloc(n_ids, sizeof(uint32_t)), *len = calloc(n_ids, sizeof(uint32_t));
    uint8_t *built = calloc(n_ids, 1);
    unsigned char *blob = NULL;
    size_t blob_cap = 0;
    tk_bt_entry *e = NULL;
    tk_bt *bt = NULL;
    int ok = off && len && built;
    for (int b = 0; ok && b < 256; b++) {
        uint32_t id = t->byte_id[b];
        if (id == UINT32_MAX) continue;
        ok = len[id] == 0 && tk_reserve((void **)&blob, &blob_cap, blob_len + 1, 1) == 0;
        if (!ok) break;
        blob[blob_len] = (unsigned char)b;
        off[id] = (uint32_t)blob_len++;
        len[id] = 1;
        built[id] = 1;
    }
    for (size_t k = 0; ok && k < n; k++) {
        uint32_t l = t->merge_lr[3 * k], r = t->merge_lr[3 * k + 1], res = t->merge_lr[3 * k + 2];
        if (!len[l] || !len[r]) continue; /* a part no bytes make: never reached */
        size_t m = (size_t)len[l] + len[r];
        if (len[res]) { /* made again: the same bytes, or the list is not BPE's */
            ok = len[res] == m && memcmp(blob + off[res], blob + off[l], len[l]) == 0 &&
                 memcmp(blob + off[res] + len[l], blob + off[r], len[r]) == 0;
            continue;
        }
        ok = blob_len + m < UINT32_MAX &&
             tk_reserve((void **)&blob, &blob_cap, blob_len + m, 1) == 0;
        if (!ok) break;
        memcpy(blob + blob_len, blob + off[l], len[l]); /* blob may have moved: offsets only */
        memcpy(blob + blob_len + len[l], blob + off[r], len[r]);
        off[res] = (uint32_t)blob_len;
        len[res] = (uint32_t)m;
        blob_len += m;
    }
    if (ok) ok = (e = malloc(n_ids * sizeof *e)) != NULL;
    for (size_t id = 0; ok && id < n_ids; id++)
        if (len[id]) e[n_entries++] = tk_bt_entry_of(blob + off[id], len[id], (uint32_t)id);
    if (ok && (bt = tk_bt_trie(e, n_entries, n_ids)) != NULL) {
        tk_bt_ranks ranks = {NULL, &t->pairs, NULL};
        for (size_t k = 0; k < n; k++) {
            uint32_t l = t->merge_lr[3 * k], r = t->merge_lr[3 * k + 1], res = t->merge_lr[3 * k + 2];
            if (built[res] || !built[l] || !built[r]) continue;
            built[res] = (uint8_t)tk_bt_keep(bt, &ranks, res, l, r, blob + off[res], (uint32_t)k);
        }
        tk_bt_drop_unbuilt(bt, e, n_entries, built);
        *seg = segments_of(blob, off, len, n_ids, bt); /* every token merges may make */
    }
    free(off);
    free(len);
    free(built);
    free(blob);
    free(e);
    return bt;
}

tk_tables *tk_tables_from_merges(const int64_t byte_id[256], const uint32_t *merges, size_t n) {
    tk_tables *t = tables_new(0);
    if (!t) return NULL;
    for (int b = 0; b < 256; b++) {
        if (byte_id[b] < 0) continue;
        t->byte_id[b] = (uint32_t)byte_id[b];
        if (t->byte_id[b] > t->max_id) t->max_id = t->byte_id[b];
    }
    t->n_merges = n;
    t->merge_lr = malloc(3 * (n ? n : 1) * sizeof(uint32_t));
    if (!t->merge_lr || tk_pair_map_init(&t->pairs, n) < 0) {
        tk_tables_free(t);
        return NULL;
    }
    memcpy(t->merge_lr, merges, 3 * n * sizeof(uint32_t));
    uint32_t *grid = tk_grid_dense();
    for (size_t k = 0; k < n; k++) {
        const uint32_t *lr = &merges[3 * k];
        /* the first pair wins, in the table and in the grid */
        if (tk_pair_map_put(&t->pairs, lr[0], lr[1], (uint32_t)k, lr[2]) == 0 && grid &&
            (lr[0] | lr[1]) < TK_GRID_DIM)
            grid[lr[0] * TK_GRID_DIM + lr[1]] = (uint32_t)k;
        if (lr[2] > t->max_id) t->max_id = lr[2];
    }
    t->pairs.grid = tk_grid_pack(grid, t->merge_lr);
    t->pairs.prejoin = tk_prejoin_of_merges(t->byte_id, t->merge_lr, n, (size_t)t->max_id + 1,
                                            &t->pairs);
    t->bt = backtrack_of_merges(t, &t->seg);
    return t;
}

static int every_byte_has_an_id(const tk_tables *t) {
    for (int b = 0; b < 256; b++)
        if (t->byte_id[b] == UINT32_MAX) return 0;
    return 1;
}

/* 1 when the merges turn the bytes p[0..len) into the one id `id`, else 0; -1 without memory. */
static int merges_rebuild(const tk_tables *t, tk_scratch *s, const unsigned char *p, size_t len,
                          uint32_t id) {
    if (tk_scratch_reserve(s, len + 1) < 0) return -1;
    for (size_t i = 0; i < len; i++)
        if ((s->ids[i] = t->byte_id[p[i]]) == UINT32_MAX) return 0; /* never reached */
    size_t m;
    if (len <= TK_SMALL)
        m = tk_merge_small(&t->pairs, NULL, p, s, len);
    else if (tk_merge_heap(&t->pairs, t->merge_lr, s, len, &m) < 0)
        return -1;
    return m == 1 && s->ids[0] == id;
}

int tk_tables_add_pieces(tk_tables *t, const unsigned char *const *pieces, const uint32_t *lens,
                         const uint32_t *ids, size_t n, int every) {
    if (t->rank_mode || t->whole) return -1;
    size_t total = 0;
    for (size_t k = 0; k < n; k++) total += lens[k];
    if (total >= UINT32_MAX || !(t->blob = calloc(1, total ? total : 1))) return -1;
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(t->blob + off, pieces[k], lens[k]);
        off += lens[k];
    }
    if (tk_piece_map_init(&t->pieces, n, t->blob) < 0) return -1;
    tk_scratch scratch = {0};
    int rc = 0;
    off = 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        size_t at = off;
        off += lens[k];
        if (!every) { /* only what the merges rebuild: exact without the rule */
            rc = lens[k] < 2 ? 0 : merges_rebuild(t, &scratch, t->blob + at, lens[k], ids[k]);
            if (rc <= 0) continue; /* 0: not rebuilt, -1: no memory (ends the loop) */
        }
        rc = tk_piece_map_put(&t->pieces, (uint32_t)at, lens[k], ids[k]);
        if (ids[k] > t->max_id) t->max_id = ids[k]; /* a piece no merge makes */
    }
    tk_scratch_free(&scratch);
    if (rc) return rc;
    t->whole = 1;
    t->ignore_merges = every;
    t->all_bytes = every_byte_has_an_id(t);
    return 0;
}

int tk_tables_ignore_merges(const tk_tables *t) { return t->ignore_merges; }

/* ---- rank files ------------------------------------------------------------- */
static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict base64 (length a multiple of 4, '=' only as the last one or two
 * characters); anything else is refused, and the caller's Python parser then
 * decides (it raises MALFORMED_RANKS with the line, or accepts a corner case). */
static long b64_decode(const unsigned char *p, size_t n, unsigned char *out) {
    if (n == 0 || n % 4) return -1;
    size_t pad = 0;
    if (p[n - 1] == '=') pad++;
    if (p[n - 2] == '=') pad++;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            if (i + k >= n - pad) {
                v[k] = 0;
                continue;
            }
            v[k] = b64_value(p[i + k]);
            if (v[k] < 0) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (unsigned char)(w >> 16);
        if (i + 4 < n || pad < 2) out[o++] = (unsigned char)(w >> 8);
        if (i + 4 < n || pad < 1) out[o++] = (unsigned char)w;
    }
    return (long)o;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The piece of rank below TK_GRID_DIM spelled p[0..len), or TK_NO_RANK: `slot` is an
 * open-addressed table of 4 * TK_GRID_DIM (rank + 1, 0 empty) over those pieces. */
static uint32_t grid_piece(const uint16_t *slot, const uint32_t *off, const uint32_t *len,
                           const unsigned char *blob, const unsigned char *p, size_t n) {
    for (size_t i = tk_hash_bytes(p, n) & (4 * TK_GRID_DIM - 1); slot[i];
         i = (i + 1) & (4 * TK_GRID_DIM - 1)) {
        uint32_t r = slot[i] - 1u;
        if (len[r] == n && memcmp(blob + off[r], p, n) == 0) return r;
    }
    return TK_NO_RANK;
}

/* tk_piece_map.grid: every piece split in two pieces of rank below TK_GRID_DIM writes its
 * rank at theirs, every other cell says no piece; NULL (the piece table answers) without
 * memory or with ranks below TK_GRID_DIM missing. Each piece tries only the splits whose
 * parts are no longer than the longest low-rank piece, each against the small table of
 * those pieces (~10 ms for o200k's 200k pieces). */
static tk_grid *grid_of_ranks(const unsigned char *blob, const uint32_t *offs,
                               const uint32_t *lens, const uint32_t *ranks, size_t count) {
    uint32_t off[TK_GRID_DIM], len[TK_GRID_DIM];
    size_t have = 0, longest = 0;
    memset(len, 0, sizeof len);
    for (size_t k = 0; k < count; k++)
        if (ranks[k] < TK_GRID_DIM) {
            off[ranks[k]] = offs[k];
            len[ranks[k]] = lens[k];
            have++;
            if (lens[k] > longest) longest = lens[k];
        }
    if (have < TK_GRID_DIM) return NULL;
    uint16_t *slot = calloc(4 * TK_GRID_DIM, sizeof *slot);
    uint32_t *grid = slot ? tk_grid_dense() : NULL;
    if (!grid) {
        free(slot);
        return NULL;
    }
    uint64_t starts[65536 / 64] = {0}; /* bit: a low-rank piece of 2+ bytes starts so */
    for (uint32_t r = 0; r < TK_GRID_DIM; r++) {
        const unsigned char *q = blob + off[r];
        size_t i = tk_hash_bytes(q, len[r]) & (4 * TK_GRID_DIM - 1);
        while (slot[i]) i = (i + 1) & (4 * TK_GRID_DIM - 1);
        slot[i] = (uint16_t)(r + 1);
        if (len[r] >= 2) starts[(q[0] << 8 | q[1]) >> 6] |= (uint64_t)1 << (q[1] & 63);
    }
#define TK_STARTS(q) (starts[((q)[0] << 8 | (q)[1]) >> 6] >> ((q)[1] & 63) & 1)
    for (size_t k = 0; k < count; k++) {
        const unsigned char *p = blob + offs[k];
        size_t n = lens[k];
        if (n < 2 || n > 2 * longest) continue;
        for (size_t cut = n > longest ? n - longest : 1; cut < n && cut <= longest; cut++) {
            if (cut >= 2 && !TK_STARTS(p)) break; /* no longer prefix is a low-rank piece */
            if (n - cut >= 2 && !TK_STARTS(p + cut)) continue;
            uint32_t a = grid_piece(slot, off, len, blob, p, cut);
            if (a == TK_NO_RANK) continue;
            uint32_t b = grid_piece(slot, off, len, blob, p + cut, n - cut);
            if (b != TK_NO_RANK) grid[a * TK_GRID_DIM + b] = ranks[k];
        }
    }
#undef TK_STARTS
    free(slot);
    return tk_grid_pack(grid, NULL);
}

/* Returns 0, or the 1-based line of the first line this parser refuses. */
static size_t parse_rank_file(tk_tables *t, const unsigned char *d, size_t n) {
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += d[i] == '\n';
    uint32_t *offs = malloc(lines * sizeof(uint32_t)), *lens = malloc(lines * sizeof(uint32_t));
    uint32_t *ranks = malloc(lines * sizeof(uint32_t));
    t->blob = malloc(n / 4 * 3 + 4);
    size_t bad = 0, count = 0, blob_len = 0, lineno = 0;
    if (!offs || !lens || !ranks || !t->blob || n >= UINT32_MAX) {
        bad = 1;
        goto done;
    }
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && d[e] != '\n') e++;
        lineno++;
        size_t end = e;
        if (end > i && d[end - 1] == '\r') end--;
        size_t a = i;
        while (a < end && (d[a] == ' ' || d[a] == '\t')) a++;
        i = e + 1;
        if (a == end) continue; /* blank line */
        size_t b = a;
        while (b < end && d[b] != ' ' && d[b] != '\t' && d[b] != '\r') b++;
        size_t c = b;
        while (c < end && (d[c] == ' ' || d[c] == '\t')) c++;
        size_t f = c;
        uint64_t rank = 0;
        while (f < end && d[f] >= '0' && d[f] <= '9' && rank < UINT32_MAX) rank = rank * 10 + (d[f++] - '0');
        long len = b64_decode(d + a, b - a, t->blob + blob_len);
        if (c == b || f == c || f != end || rank >= UINT32_MAX || len <= 0) {
            bad = lineno;
            goto done;
        }
        offs[count] = (uint32_t)blob_len;
        lens[count] = (uint32_t)len;
        ranks[count] = (uint32_t)rank;
        blob_len += (size_t)len;
        count++;
    }
    if (count == 0) {
        bad = lineno ? lineno : 1;
        goto done;
    }
    if (tk_piece_map_init(&t->pieces, count, t->blob) < 0) {
        bad = 1;
        goto done;
    }
    for (size_t k = 0; k < count; k++) {
        if (tk_piece_map_put(&t->pieces, offs[k], lens[k], ranks[k])) {
            bad = 1; /* a repeated piece: let the Python parser name the line */
            goto done;
        }
        if (lens[k] == 1) t->byte_id[t->blob[offs[k]]] = ranks[k];
        if (ranks[k] > t->max_rank) t->max_rank = ranks[k];
    }
    t->max_id = t->pieces.max_rank = t->max_rank;
    /* all three before `ranks` is sorted */
    t->pieces.grid = grid_of_ranks(t->blob, offs, lens, ranks, count);
    t->pieces.prejoin = tk_prejoin_new(t->blob, offs, lens, ranks, count, t->pieces.two);
    t->bt = backtrack_of_ranks(t, offs, lens, ranks, count);
    if (t->bt) t->seg = segments_of(t->blob, offs, lens, count, t->bt);
    if (t->seg) t->atoms = tk_atoms_new(t->blob, offs, lens, ranks, count, &t->pieces, t->byte_id);
    backtrack_from(t->pairs.slots != NULL, t->bt_min); /* two-byte letters from 9 with pairs */
    qsort(ranks, count, sizeof(uint32_t), cmp_u32);
    for (size_t k = 1; k < count; k++)
        if (ranks[k] == ranks[k - 1]) {
            bad = 1;
            goto done;
        }
    t->n_pieces = count;
    t->max_id = t->pieces.max_rank = t->max_rank;
    t->all_bytes = every_byte_has_an_id(t);
done:
    free(offs);
    free(lens);
    free(ranks);
    return bad;
}

tk_tables *tk_tables_from_ranks(const unsigned char *data, size_t n, size_t *bad_line) {
    tk_tables *t = tables_new(1);
    if (!t) {
        *bad_line = 1;
        return NULL;
    }
    *bad_line = parse_rank_file(t, data, n);
    if (*bad_line) {
        tk_tables_free(t);
        return NULL;
    }
    return t;
}

int tk_tables_rank_mode(const tk_tables *t) { return t->rank_mode; }
size_t tk_tables_size(const tk_tables *t) { return t->rank_mode ? t->n_pieces : t->n_merges; }
uint32_t tk_tables_max_rank(const tk_tables *t) { return t->max_rank; }
uint32_t tk_tables_max_id(const tk_tables *t) { return t->max_id; }
int tk_tables_has_byte(const tk_tables *t, int byte) { return t->byte_id[byte] != UINT32_MAX; }

size_t tk_tables_cuts(const tk_tables *t, const unsigned char *d, size_t n, uint32_t *cuts) {
    return t->seg ? tk_seg_cuts(t->seg, d, n, cuts) : 0;
}

int tk_tables_may_join(const tk_tables *t, uint32_t l, uint32_t r) {
    return !t->rank_mode || !t->pieces.split || tk_split_maybe(&t->pieces, l, r);
}

int tk_tables_backtracks(const tk_tables *t, const unsigned char *d, size_t n) {
    return backtracks(t, n, word_lead(d, n));
}

size_t tk_tables_prejoined(const tk_tables *t, const unsigned char *d, size_t n, uint32_t *at) {
    return tk_prejoin_in(t->rank_mode ? t->pieces.prejoin : t->pairs.prejoin, d, n, at);
}

size_t tk_tables_grid(const tk_tables *t, uint32_t *cells) {
    const tk_grid *grid = t->rank_mode ? t->pieces.grid : t->pairs.grid;
    if (!grid) return 0;
    if (cells) tk_grid_cells(grid, cells);
    return TK_GRID_DIM;
}

int tk_tables_rank_pairs(const tk_tables *t, uint32_t *out, size_t *count) {
    if (!t->rank_mode || !t->pairs.slots) return 0;
    size_t n = 0;
    for (size_t i = 0; i <= t->pairs.mask; i++) {
        const tk_pair_slot *slot = &t->pairs.slots[i];
        if (slot->key == UINT64_MAX) continue;
        if (out) {
            out[3 * n] = (uint32_t)(slot->key >> 32);
            out[3 * n + 1] = (uint32_t)slot->key;
            out[3 * n + 2] = slot->result;
        }
        n++;
    }
    *count = n;
    return 1;
}

int tk_tables_atoms(const tk_tables *t, uint32_t *letters, uint32_t *joins, size_t *count) {
    const tk_atoms *a = t->atoms;
    if (!a) return 0;
    if (letters) memcpy(letters, a->letter, sizeof a->letter);
    size_t c = 0;
    for (size_t i = 0; i <= a->mask; i++) {
        uint64_t v = a->joins[i];
        if (v == UINT64_MAX) continue;
        if (joins) {
            joins[3 * c] = (uint32_t)(v >> (2 * TK_MEMO_BITS));
            joins[3 * c + 1] = (uint32_t)(v >> TK_MEMO_BITS) & TK_MEMO_NONE;
            joins[3 * c + 2] = (uint32_t)v & TK_MEMO_NONE;
        }
        c++;
    }
    *count = c;
    return 1;
}

size_t tk_tables_backtrack_from(const tk_tables *t, size_t from[3]) {
    for (int k = 0; k < 3; k++) from[k] = t->bt ? t->bt_min[k] : 0;
    return t->bt ? t->bt->n_tokens : 0;
}

/* =============================== fork safety ===============================
 * A process may fork while another of its threads is inside an encoder, holding the
 * encoder's lock or a shard's lock of the shared cache. The child has only the forking
 * thread: those locks would stay locked forever (a DataLoader worker that encodes with
 * the parent's tokenizer hangs), and what they guard may be half-updated.
 *
 * A fork generation, bumped by a pthread_atfork child handler, says which process a lock
 * belongs to. Every encoder and shared cache records the generation its locks were made
 * in; the first use in a newer generation (only ever in a forked child) makes its locks
 * new and drops its caches and buffers as they were at fork (leaked, never read or freed:
 * the parent may have been mid-update), so the child starts from an empty cache. */
static unsigned tk_fork_gen;                                    /* read with __atomic */
static pthread_mutex_t tk_repair_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long tk_fork_repairs; /* objects repaired in this process (tests) */

static void tk_after_fork_child(void) {
    __atomic_add_fetch(&tk_fork_gen, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_init(&tk_repair_lock, NULL); /* a thread of the parent may have held it */
}

void tk_encode_init(void) {
    tk_utf8_write_init();
    pthread_atfork(NULL, NULL, tk_after_fork_child);
}

static unsigned tk_generation(void) { return __atomic_load_n(&tk_fork_gen, __ATOMIC_ACQUIRE); }

unsigned long long tk_fork_repair_count(void) {
    return __atomic_load_n(&tk_fork_repairs, __ATOMIC_ACQUIRE);
}

static void tk_cache_abandon(tk_cache *c) {
    size_t limit = c->limit;
    memset(c, 0, sizeof *c); /* what it held stays allocated: it may be half-written */
    c->limit = limit;
}

/* ============================== shared cache ============================== */
/* Split into shards by the chunk's hash, each with its own lock, so two threads rarely wait
 * on each other, and a chunk merged by one thread is a hit for the others (private caches
 * would make every thread pay for the same misses). */
#define TK_SHARDS 64

/* A shard's lock and counters on cache lines of their own: packed side by side, a lock
 * taken by one thread invalidated the line holding its neighbours' locks in the other
 * core's cache, and two threads encoding one text ran slower than one (o200k on Russian,
 * 9.8 against 15.5 MB/s). */
typedef struct {
    _Alignas(128) tk_cache cache;
    pthread_mutex_t lock;
} tk_shard;

struct tk_shared_cache {
    tk_shard shard[TK_SHARDS];
    unsigned gen; /* fork generation its locks were made in */
};

/* 1 when ``c``'s locks were made before the fork that started this process (and were just
 * made new), else 0. */
static int shared_repair(tk_shared_cache *c) {
    unsigned g = tk_generation();
    if (__atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) == g) return 0;
    pthread_mutex_lock(&tk_repair_lock);
    int repaired = c->gen != g;
    if (repaired) {
        for (int k = 0; k < TK_SHARDS; k++) {
            pthread_mutex_init(&c->shard[k].lock, NULL);
            tk_cache_abandon(&c->shard[k].cache);
        }
        __atomic_add_fetch(&tk_fork_repairs, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&c->gen, g, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tk_repair_lock);
    return repaired;
}

tk_shared_cache *tk_shared_cache_new(size_t limit) {
    tk_shared_cache *c = aligned_alloc(_Alignof(tk_shared_cache), sizeof *c); /* a multiple */
    if (!c) return NULL;
    memset(c, 0, sizeof *c);
    c->gen = tk_generation();
    for (int k = 0; k < TK_SHARDS; k++) {
        pthread_mutex_init(&c->shard[k].lock, NULL);
        c->shard[k].cache.limit = limit ? (limit + TK_SHARDS - 1) / TK_SHARDS : 0;
    }
    return c;
}

void tk_shared_cache_free(tk_shared_cache *c) {
    if (!c) return;
    shared_repair(c); /* in a forked child: never free what the parent may have been writing */
    for (int k = 0; k < TK_SHARDS; k++) {
        tk_cache_free(&c->shard[k].cache);
        pthread_mutex_destroy(&c->shard[k].lock);
    }
    free(c);
}

size_t tk_shared_cache_size(tk_shared_cache *c) {
    shared_repair(c);
    size_t n = 0;
    for (int k = 0; k < TK_SHARDS; k++) {
        pthread_mutex_lock(&c->shard[k].lock);
        n += c->shard[k].cache.used;
        pthread_mutex_unlock(&c->shard[k].lock);
    }
    return n;
}

/* ================================ encoder ================================ */
struct tk_encoder {
    const tk_tables *tables;
    tk_shared_cache *shared; /* NULL: the private cache below */
    tk_cache cache;
    tk_memo memo;
    uint64_t *seen; /* backtracking's pair answers (TK_BT_SEEN_SLOTS), made on first use */
    tk_front_slot *front; /* 2^front_bits slots, made on first use; NULL without memory */
    unsigned front_bits;
    size_t front_lost;  /* chunks displaced from the front since it was made (front_settle) */
    size_t lost_before; /* front_lost when the last call started */
    uint64_t *door;       /* the chunk cache's doorkeeper (TK_DOOR_BITS), made on first use */
    size_t short_merges;  /* chunks a front slot could hold, merged (short_cached) */
    size_t many_ids;      /* of those, the ones of more ids than a slot holds */
    size_t door_marks;    /* bits set in `door` since it was last cleared */
    tk_scratch scratch;
    uint32_t *cuts; /* a chunk's cuts; its next parts' front keys (encode_cut) */
    size_t cuts_cap;
    tk_front_key *keys;
    size_t keys_cap;
    pthread_mutex_t lock;
    uint32_t *out;
    size_t out_len, out_cap;
    unsigned char *window; /* a str's UTF-8, a window at a time (tk_encode_ucs, _texts) */
    size_t window_cap;
    unsigned gen; /* fork generation its lock was made in */
};

/* Make ``e`` (and its shared cache) usable in a forked child: see "fork safety". */
static void encoder_repair(tk_encoder *e) {
    if (e->shared) shared_repair(e->shared);
    unsigned g = tk_generation();
    if (__atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) == g) return;
    pthread_mutex_lock(&tk_repair_lock);
    if (e->gen != g) {
        pthread_mutex_init(&e->lock, NULL);
        tk_cache_abandon(&e->cache);
        memset(&e->memo, 0, sizeof e->memo);
        e->seen = NULL;
        e->front = NULL;
        e->front_bits = TK_FRONT_MIN_BITS;
        e->front_lost = e->lost_before = 0;
        e->door = NULL;
        e->door_marks = 0;
        e->short_merges = e->many_ids = 0;
        memset(&e->scratch, 0, sizeof e->scratch);
        e->cuts = NULL;
        e->keys = NULL;
        e->cuts_cap = e->keys_cap = 0;
        e->out = NULL;
        e->out_len = e->out_cap = 0;
        e->window = NULL;
        e->window_cap = 0;
        __atomic_add_fetch(&tk_fork_repairs, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&e->gen, g, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&tk_repair_lock);
}

tk_encoder *tk_encoder_new(const tk_tables *tables, tk_shared_cache *shared, size_t cache_limit) {
    tk_encoder *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->gen = tk_generation();
    pthread_mutex_init(&e->lock, NULL);
    e->tables = tables;
    e->shared = shared;
    e->front_bits = TK_FRONT_MIN_BITS;
    if (!shared) e->cache.limit = cache_limit;
    return e;
}

void tk_encoder_free(tk_encoder *e) {
    if (!e) return;
    encoder_repair(e);
    tk_cache_free(&e->cache);
    tk_memo_free(&e->memo);
    free(e->seen);
    free(e->front);
    free(e->door);
    tk_scratch_free(&e->scratch);
    free(e->cuts);
    free(e->keys);
    free(e->window);
    free(e->out);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* A call that encodes `bytes` bytes starts with an empty output that has room for them all
 * (a byte gives at most one id), on huge pages from 2 MiB up: its pages are then touched once
 * each, where growing by doubling faulted in a 4 KiB page per 1,024 ids (GPT-2 on the 13 PUD
 * languages, 1.08 M ids: page faults and clearing were ~7% of a cold call's samples; RusLit-40
 * 4 MB, fresh processes, medians of 9: GPT-2 1.15x, SmolLM2 1.08x, cl100k 1.08x, o200k 1.01x).
 * Pages the ids never reach are never touched. Without memory the output grows as it goes. */
static void out_start(tk_encoder *e, size_t bytes) {
    e->out_len = 0;
    if (bytes <= e->out_cap || bytes > SIZE_MAX / sizeof(uint32_t) ||
        bytes * sizeof(uint32_t) < ((size_t)2 << 20))
        return;
    uint32_t *out = tk_huge_alloc(bytes * sizeof(uint32_t), 0);
    if (!out) return;
    free(e->out);
    e->out = out;
    e->out_cap = bytes;
}

static int out_append(tk_encoder *e, const uint32_t *ids, size_t m) {
    if (tk_reserve((void **)&e->out, &e->out_cap, e->out_len + m, sizeof(uint32_t)) < 0) return -1;
    memcpy(e->out + e->out_len, ids, m * sizeof(uint32_t));
    e->out_len += m;
    return 0;
}

/* out_append of a front slot's ids: all TK_FRONT_IDS slots copied at once where the output
 * has room for them (a fixed-size copy, no branch on the count; ids past the count are
 * overwritten by the next chunk or never read). */
static inline int out_front(tk_encoder *e, const tk_front_slot *s) {
    if (e->out_len + TK_FRONT_IDS > e->out_cap) return out_append(e, s->ids, s->n_ids);
    memcpy(e->out + e->out_len, s->ids, sizeof s->ids);
    e->out_len += s->n_ids;
    return 0;
}

static int has_every_byte(const tk_tables *t, const unsigned char *data, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[data[i]] == UINT32_MAX) return 0;
    return 1;
}

/* Read one byte of every line of p[0..bytes) (p may be NULL); volatile, so the reads stay. */
static void warm_lines(const void *p, size_t bytes) {
    const volatile unsigned char *c = p;
    for (size_t i = 0; p && i < bytes; i += 64) (void)c[i];
}

/* The tables an encoder reads, brought into the CPU caches when an encoder starts (its first
 * chunk, right after its front cache is zeroed): the largest and least often read first, so that
 * the small tables every chunk asks are the most recently read. Tables are made at load, and by
 * the first call the work that followed has pushed most of them out to memory, so a fresh
 * process's first long call paid a miss per table line it read. Reading them is ~16 MB for qwen,
 * ~0.5 ms once per encoder (a first call on "hello": 4.07 -> 4.54 ms). One thread, fresh
 * processes interleaved, cold, medians of 6, off -> on: PUD English SmolLM2 63 -> 82 MB/s, GPT-2
 * 85 -> 88.5, o200k 55.6 -> 59.0; RusLit o200k 60 -> 64.5; 13 languages qwen, cl100k, GPT-2 and
 * SmolLM2 within +-2%, CJK qwen the same. Reading them before zeroing the front measured the
 * same (SmolLM2 English 78). fastokens reads its merge tables this way when it makes them.
 *
 * Only the first encoder of a tables object reads the large ones (the piece, pair and trie
 * tables, megabytes each), which then sit in the cache the cores share; every encoder reads the
 * small ones each chunk asks (the two-byte table, grid, Bloom filters, split filter, prejoin
 * and letter tables, about 2 MiB) into its own core's. A second thread's encoder is made in the
 * middle of a threaded call, the first thread already at work: its first call ("hello world", qwen)
 * took 1.14-1.37 ms reading them all, 0.57-0.84 ms reading the small ones (a cold two-thread
 * batch of the 7 Latin-script PUD languages, medians of 31: 12.39 -> 12.26 ms, within its
 * spread). A forked child's tables keep the flag: its encoders read the small tables only.
 * TOKEMBED_WARM=0 in the environment leaves them as they are (A/B of one build). */
static void warm_tables(tk_tables *t) {
    const char *v = getenv("TOKEMBED_WARM");
    if (v && strcmp(v, "0") == 0) return;
    if (!__atomic_exchange_n(&t->warmed, 1, __ATOMIC_RELAXED)) {
        if (t->bt) {
            warm_lines(t->bt->nodes, t->bt->n_nodes * sizeof(tk_bt_node));
            warm_lines(t->bt->tok, t->bt->n_ids * sizeof(tk_bt_tok));
        }
        if (t->pairs.slots) warm_lines(t->pairs.slots, (t->pairs.mask + 1) * sizeof(tk_pair_slot));
        if (t->pieces.slots) warm_lines(t->pieces.slots, t->pieces.cap * sizeof(tk_piece_slot));
        if (t->atoms) warm_lines(t->atoms->joins, (t->atoms->mask + 1) * sizeof(uint64_t));
    }
    if (t->atoms) warm_lines(t->atoms->letter, sizeof t->atoms->letter);
    warm_lines(t->pieces.split, t->pieces.split ? TK_SPLIT_WORDS * 8 : 0);
    if (t->seg) {
        warm_lines(t->seg, sizeof *t->seg);
        warm_lines(t->seg->whole, (t->seg->n_ids / 64 + 1) * sizeof(uint64_t));
    }
    const tk_grid *g = t->rank_mode ? t->pieces.grid : t->pairs.grid;
    if (g) {
        const tk_grid_word *last = &g->words[TK_GRID_WORDS - 1];
        size_t joins = last->before + tk_popcount64(last->bits);
        warm_lines(g->words, TK_GRID_WORDS * sizeof(tk_grid_word));
        warm_lines(g->ranks, joins * sizeof(uint32_t));
        warm_lines(g->results, g->results ? joins * sizeof(uint32_t) : 0);
    }
    const tk_bloom *blooms[2] = {&t->pieces.bloom, &t->pairs.bloom};
    for (int k = 0; k < 2; k++)
        if (blooms[k]->words) warm_lines(blooms[k]->words, (blooms[k]->blocks_mask + 1) * 64);
    warm_lines(t->pieces.two, 65536 * sizeof(uint32_t));
    const tk_prejoin *j = t->rank_mode ? t->pieces.prejoin : t->pairs.prejoin;
    warm_lines(j, sizeof(*j));
}

static tk_front_slot *front_of(tk_encoder *e) {
    if (!e->front && (e->front = tk_table_alloc(TK_FRONT_BYTES(e->front_bits))) != NULL)
        warm_tables((tk_tables *)e->tables); /* `warmed`: the one field encoders write */
    return e->front;
}

/* The front grows, at the start of a call, when the last call displaced a quarter of its slots'
 * worth of chunks, or all calls since it was made half as many as it has slots: the text has
 * more distinct short chunks than it holds, and the next text like it would merge again (or
 * ask the chunk cache, a hash and a lock, for) the ones it lost. Never during a call, so a
 * call on a new encoder costs what it did; a long text cut into parts for threads (or a batch
 * into runs) is several calls, whose parts each displace too few to grow it. The 13 PUD
 * languages (2.3 MB, 77,675 distinct chunks on qwen) displace 33,334 from 2^16 slots,
 * RusLit-40's first 4 MB 25,437, PUD English 359 and PUD Chinese + Korean 814 (a direct-mapped
 * replay of the pre-tokenizer's chunks). 2^18 slots (16 MiB), one thread, qwen, five calls on
 * one text in fresh processes, the last three's MB/s over three processes, fixed -> grown: the
 * 13 languages 121-139 -> 139-180, RusLit-40 236-251 -> 275-293 (the second call, which grows
 * it, ~3 ms more; on a VM whose host backs fresh huge pages lazily, up to ~150 ms once); PUD
 * English and zh + ko never grow. At most that: 16 MiB per thread is the most one encoder
 * keeps here. */
#define TK_FRONT_GROW_SHIFT 2

static void front_settle(tk_encoder *e) {
    size_t last = e->front_lost - e->lost_before, slots = (size_t)1 << e->front_bits;
    e->lost_before = e->front_lost;
    if (!e->front || e->front_bits >= TK_FRONT_MAX_BITS ||
        (last < slots >> TK_FRONT_GROW_SHIFT && e->front_lost < slots >> 1))
        return;
    tk_front_slot *grown = tk_front_grown(e->front, e->front_bits, TK_FRONT_MAX_BITS);
    if (!grown) return; /* no memory: the front stays as it is */
    free(e->front);
    e->front = grown;
    e->front_bits = TK_FRONT_MAX_BITS;
    e->front_lost = e->lost_before = 0;
}

/* What every encode call does first, under the encoder's lock: the front grows if the calls
 * before asked for it, and the output starts empty with room for `bytes` ids. */
static void call_start(tk_encoder *e, size_t bytes) {
    front_settle(e);
    out_start(e, bytes);
}

/* tk_front_put, counting the chunks it displaces. */
static inline void front_put(tk_encoder *e, tk_front_slot *front, const tk_front_key *key,
                             size_t n, const uint32_t *ids, size_t m) {
    e->front_lost += (size_t)tk_front_put(front, key, n, ids, m);
}

static int merge_chunk(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                       size_t *bad, tk_front_slot *front, const tk_front_key *key, int part);

/* The chunk cache's doorkeeper: a chunk enters the chunk cache only when it is merged a second
 * time, and the cache is asked for a chunk only when its bit is set; one bit per hash remembers
 * the first merge. The front cache (encode_front.h) holds most repeats of short chunks, and most
 * chunks it does not hold never come back (CJK and Thai sentences, rare words): storing each grew
 * the cache's slot table and arena in a fresh process for nothing, and asking the cache for each
 * cost a line from memory. Cold, one thread, in-process medians of 7, 8,192-slot front and every
 * short chunk cached at once -> this policy and the 65,536-slot front: 13 PUD languages cl100k
 * 34.3 -> 39.2 MB/s, o200k 24.6 -> 28.3, qwen 28.0 -> 33.8; PUD zh + ko cl100k 25.8 -> 28.9, o200k
 * 26.3 -> 28.7, qwen 22.7 -> 25.2; fresh processes, medians of 5: SmolLM2 and GPT-2 on the 13
 * languages 26.4 -> 35.8 and 28.3 -> 36.8, on zh + ko 30.3 -> 39.2 and 29.6 -> 39.1; RusLit-40
 * 0.96-1.20; a warm 24 MB RusLit stream 0.89-1.02 over repeats (its noise is ~10%: it may lose a
 * few percent, the price of merging a word twice). A cleared bit only costs one more merge. 2^20
 * bits (128 KiB) per encoder, cleared when a quarter are set, so it never grows; 2^18 bits,
 * cleared four times as often, measured 1-10% slower on the warm stream (medians of 9). */
#define TK_DOOR_BITS ((size_t)1 << 20)

/* 1 when the chunk cache (and its doorkeeper) also serves the chunks a front slot can hold. The
 * front is their cache, and a short chunk it loses is merged again when it comes back: within
 * one call few do (of the 7 Latin-script PUD languages' 40,960 front misses on cl100k, 1,745
 * are chunks it had lost), and marking the doorkeeper for each merge, asking it for each miss
 * and putting what it admits into the locked shared cache cost more than those merges. Two
 * cases want it still: the front has grown to its largest (front_settle: the calls before lost
 * more short chunks than it holds, a stream of text whose next calls would merge them again), or an
 * eighth of the short chunks merged have more ids than a slot holds, so the front cannot keep
 * them (Russian on GPT-2's merges: 53,058 of 64,083; the 13 PUD languages on cl100k 2,303 of
 * 64,310, on SmolLM2 11,007 of 65,233). Cold, one thread, fresh processes interleaved, medians
 * of 11, the chunk cache for every chunk -> this: 13 PUD languages cl100k 1.024x, qwen 1.018x,
 * GPT-2 1.031x, SmolLM2 1.001x; the 7 Latin-script ones cl100k 1.033x; RusLit-40 (4 MB) o200k
 * 1.043x, GPT-2 0.983x. Never for short chunks, GPT-2 on RusLit-40 ran 0.954-0.963x, and
 * 24 MB of it (o200k) in 1 MB calls, the third time over, 115-130 MB/s against 160-180. The 13
 * languages in 50,000-character calls, five times over (cl100k): the same 118-124 MB/s, one
 * pass later. */
static inline int short_cached(const tk_encoder *e) {
    return e->front_bits == TK_FRONT_MAX_BITS || e->many_ids * 8 > e->short_merges;
}

/* The doorkeeper's bit for hash h: bits the cache's slot index (the low ones) leaves. */
static inline size_t door_bit(uint64_t h) { return (size_t)(h >> 32) & (TK_DOOR_BITS - 1); }

/* 1 when the doorkeeper has seen the chunk of hash h (or has no memory); sets nothing. */
static inline int door_knows(const tk_encoder *e, uint64_t h) {
    if (!e->door) return 1;
    size_t b = door_bit(h);
    return (int)(e->door[b >> 6] >> (b & 63) & 1);
}

/* 1 when the chunk of hash h may enter the chunk cache (seen before, or no memory for the
 * doorkeeper), else remembers it and 0. */
static int door_admits(tk_encoder *e, uint64_t h) {
    if (!e->door && !(e->door = tk_table_alloc(TK_DOOR_BITS / 8))) return 1;
    size_t b = door_bit(h);
    uint64_t bit = (uint64_t)1 << (b & 63);
    if (e->door[b >> 6] & bit) return 1;
    if (++e->door_marks > TK_DOOR_BITS / 4) {
        memset(e->door, 0, TK_DOOR_BITS / 8);
        e->door_marks = 1;
    }
    e->door[b >> 6] |= bit;
    return 0;
}

static int encode_keyed(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                        size_t *bad, const tk_front_key *key);

/* Ids of data[0..n) appended to e->out; `avail` bytes from data may be read (>= n).
 * Returns 0, TK_MISSING_BYTE (at *bad), -1 (memory). */
static int encode_chunk(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                        size_t *bad) {
    const tk_tables *t = e->tables;
    if (n == 1) {
        uint32_t id = t->byte_id[data[0]];
        if (id == UINT32_MAX) {
            *bad = 0;
            return 1;
        }
        return out_append(e, &id, 1);
    }
    /* Repeats first: one line of the front cache (see encode_front.h). */
    tk_front_slot *front = n <= TK_FRONT_KEY ? front_of(e) : NULL;
    if (!front) return merge_chunk(e, data, n, avail, bad, NULL, NULL, 0);
    tk_front_key key;
    tk_front_key_of(data, n, avail, e->front_bits, &key);
    return encode_keyed(e, data, n, avail, bad, &key);
}

/* encode_chunk of a chunk whose front key is known (e->front exists). */
static int encode_keyed(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                        size_t *bad, const tk_front_key *key) {
    const tk_front_slot *hit = tk_front_get(e->front, key, n);
    if (hit) return out_front(e, hit);
    return merge_chunk(e, data, n, avail, bad, e->front, key, 0);
}

/* 1 when BPE builds token `id` from its own bytes as backtracking does (a token of its trie).
 * A part of a cut chunk that is any other token must be merged, so the front cache never holds
 * such a token alone (encode_segment.h). */
static inline int builds_itself(const tk_tables *t, uint32_t id) {
    return !t->seg || tk_seg_whole(t->seg, id);
}

/* Shortest chunk that is cut: three letters of three bytes. */
#define TK_CUT_MIN 9
/* The lowest lead byte of a chunk's first letter (after one leading character, cut_worthy)
 * for the chunk to be cut: U+3000 on, kana, CJK and Hangul. Thai (lead 0xe0) lost 10% cut and
 * Devanagari 1% (qwen, PUD, in-process medians of 9 fresh encoders; Chinese gained 26%, Korean
 * 16%): their parts are single letters, each an extra front lookup, where backtracking the
 * whole word is as cheap. */
#define TK_CUT_LEAD 0xe3

/* 1 when the chunk d[0..n) is cut: TK_CUT_MIN bytes or more, its first character's lead byte
 * from TK_CUT_LEAD, or else its second's (one character before the letters: a leading space,
 * or a mark such as an opening quote, which qwen's and cl100k's patterns put before a word). */
static inline int cut_worthy(const unsigned char *d, size_t n) {
    if (n < TK_CUT_MIN) return 0;
    if (d[0] >= TK_CUT_LEAD) return 1;
    size_t w = d[0] < 0x80 ? 1 : d[0] < 0xe0 ? 2 : d[0] < 0xf0 ? 3 : 4;
    return d[w] >= TK_CUT_LEAD;
}

/* Parts whose front slots are asked for ahead of the one being encoded: most parts are repeats
 * (81% of qwen's on PUD Chinese), their slots lines of a 4 MiB table; without asking ahead,
 * cutting gained nothing. A ring, so a chunk of a million parts ("中" * 10**6) holds 16 keys,
 * not a key per part (asking all first measured 0.54x linear from 10 KB to 1 MB on o200k). */
#define TK_PART_AHEAD 16

/* The front key of the part cuts[k-1]..cuts[k] (cuts[-1] = 0) into the ring, its slot loading;
 * parts over TK_FRONT_KEY bytes have none (every part holds a three-byte letter or more). */
static void key_part(tk_encoder *e, const unsigned char *data, size_t avail, size_t k) {
    size_t at = k ? e->cuts[k - 1] : 0, len = e->cuts[k] - at;
    if (len > TK_FRONT_KEY) return;
    tk_front_key *key = &e->keys[k % TK_PART_AHEAD];
    tk_front_key_of(data + at, len, avail - at, e->front_bits, key);
    __builtin_prefetch(&e->front[key->index]);
}

/* One part of a cut chunk, data[at..at+len): the front cache's slot for `key` (NULL: the part
 * has none), else merged. */
static int encode_part(tk_encoder *e, const unsigned char *data, size_t at, size_t len,
                       size_t avail, size_t *bad, const tk_front_key *key) {
    const tk_front_slot *hit = key ? tk_front_get(e->front, key, len) : NULL;
    int rc = hit ? out_front(e, hit)
                 : merge_chunk(e, data + at, len, avail - at, bad, key ? e->front : NULL, key, 1);
    if (rc == TK_MISSING_BYTE) *bad += at;
    return rc;
}

/* A part of encode_atom_chunk, d[at..at+len), its letters' ranks at e->out + e->out_len
 * (n of them): merged there when `atoms` (encode_atoms.h allows it), else as encode_part. */
static int atom_part(tk_encoder *e, const unsigned char *d, size_t at, size_t len, size_t n,
                     int atoms, size_t avail, size_t *bad) {
    if (atoms) {
        e->out_len += tk_atoms_merge(e->tables->atoms, e->out + e->out_len, n);
        return 0;
    }
    if (!front_of(e) || len > TK_FRONT_KEY) return encode_part(e, d, at, len, avail, bad, NULL);
    tk_front_key key;
    tk_front_key_of(d + at, len, avail - at, e->front_bits, &key);
    return encode_part(e, d, at, len, avail, bad, &key);
}

/* encode_cut where the tables have atoms, for a chunk of three-byte letters (after a leading
 * byte or more of others): cut and merged in one pass over its letters, each part from its
 * letters where encode_atoms.h allows (most: no cache lookup), else as encode_part. The cuts
 * are tk_seg_cuts'. 2 (nothing appended) for any other chunk. */
static int encode_atom_chunk(tk_encoder *e, const unsigned char *d, size_t n, size_t avail,
                             size_t *bad) {
    const tk_atoms *a = e->tables->atoms;
    const tk_seg *s = e->tables->seg;
    size_t first = 0;
    while (first + 3 <= n && !tk_seg_letter(d + first)) first++;
    if (first + 3 > n || !tk_seg_letters(d + first, n - first)) return 2;
    /* room for every part's ids, each at most its bytes, and for the letters of any part */
    if (tk_reserve((void **)&e->out, &e->out_cap, e->out_len + n, sizeof(uint32_t)) < 0) return -1;
    size_t at = 0, k = 0; /* the part's first byte, its letters so far */
    int atoms = first == 0; /* a part with other bytes is merged as before */
    for (size_t i = first; i < n; i += 3) {
        if (i > first) {
            int partial = tk_seg_partial(s, d + i);
            if (!partial && !tk_seg_paired(s, d + i)) {
                int rc = atom_part(e, d, at, i - at, k, atoms, avail, bad);
                if (rc) return rc;
                at = i, k = 0, atoms = 1;
            }
            atoms &= !partial;
        }
        uint32_t r = a->letter[tk_atom_code(d + i)];
        atoms &= r != TK_NO_RANK && k < TK_ATOM_MAX;
        e->out[e->out_len + k++] = r;
    }
    return atom_part(e, d, at, n - at, k, atoms, avail, bad);
}

/* Ids of data[0..n) appended to e->out part by part when the chunk has cuts (encode_segment.h)
 * or is all letters and the tables have atoms; 2 (nothing appended) when neither. */
static int encode_cut(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                      size_t *bad) {
    const tk_tables *t = e->tables;
    if (tk_reserve((void **)&e->cuts, &e->cuts_cap, n / 3 + 1, sizeof(uint32_t)) < 0 ||
        tk_reserve((void **)&e->keys, &e->keys_cap, TK_PART_AHEAD, sizeof(tk_front_key)) < 0)
        return -1;
    if (t->atoms) {
        int rc = encode_atom_chunk(e, data, n, avail, bad);
        if (rc != 2) return rc;
    }
    size_t m = tk_seg_cuts(t->seg, data, n, e->cuts);
    if (m == 0) return 2;
    e->cuts[m] = (uint32_t)n;
    tk_front_slot *front = front_of(e);
    for (size_t k = 0; front && k <= m && k < TK_PART_AHEAD; k++) key_part(e, data, avail, k);
    for (size_t k = 0, at = 0; k <= m; at = e->cuts[k++]) {
        size_t len = e->cuts[k] - at;
        tk_front_key key = e->keys[k % TK_PART_AHEAD];
        if (front && k + TK_PART_AHEAD <= m) key_part(e, data, avail, k + TK_PART_AHEAD);
        int rc = encode_part(e, data, at, len, avail, bad,
                             front && len <= TK_FRONT_KEY ? &key : NULL);
        if (rc) return rc;
    }
    return 0;
}

static int merge_chunk(tk_encoder *e, const unsigned char *data, size_t n, size_t avail,
                       size_t *bad, tk_front_slot *front, const tk_front_key *key, int part) {
    const tk_tables *t = e->tables;
    int keep = 1; /* 0: a part that is a token its bytes may not build: merged, kept nowhere */
    int piece = t->whole && tk_piece_may_be(&t->pieces, data, n);
    uint64_t h = piece ? tk_hash_bytes(data, n) : 0;
    /* A chunk that is a piece: one lookup, before the cache, which then holds only chunks
     * that merge (most words of English text are pieces: o200k on PUD English 9.5 -> 19.6
     * MB/s cold; looking in the cache first was slower, 16.1). A byte without an id fails
     * whatever the chunk, as in the reference's check. */
    if (piece && (t->all_bytes || has_every_byte(t, data, n))) {
        uint32_t id = tk_piece_map_get(&t->pieces, data, n, h);
        int itself = id != TK_NO_RANK && builds_itself(t, id);
        if (id != TK_NO_RANK && (!part || itself)) {
            if (front && itself) front_put(e, front, key, n, &id, 1);
            return out_append(e, &id, 1);
        }
        keep = id == TK_NO_RANK;
    }
    if (!part && t->seg && cut_worthy(data, n)) {
        size_t start = e->out_len;
        int rc = encode_cut(e, data, n, avail, bad);
        if (rc != 2) {
            if (rc == 0 && front) front_put(e, front, key, n, e->out + start, e->out_len - start);
            return rc;
        }
    }
    /* the hash and the cache's shard only for a chunk the cache may hold */
    int cached = keep && n <= TK_CACHED_CHUNK && (!front || short_cached(e));
    if (cached && !piece) h = tk_hash_bytes(data, n);
    tk_cache *cache = &e->cache;
    pthread_mutex_t *lock = NULL;
    if (cached && e->shared) {
        size_t k = (size_t)(h >> 58) % TK_SHARDS; /* high bits: the low ones pick the slot */
        cache = &e->shared->shard[k].cache;
        lock = &e->shared->shard[k].lock;
    }
    cached = cached && cache->limit;
    if (cached && door_knows(e, h)) {
        if (lock) pthread_mutex_lock(lock);
        const tk_cache_slot *slot = tk_cache_get(cache, data, n, h);
        int rc = 0;
        if (slot) {
            const uint32_t *ids = tk_cache_ids(cache, slot);
            if (front) front_put(e, front, key, n, ids, slot->vlen);
            rc = out_append(e, ids, slot->vlen);
        }
        if (lock) pthread_mutex_unlock(lock);
        if (slot) return rc;
    }
    if (n >= (size_t)INT32_MAX) return -1;
    tk_scratch *s = &e->scratch;
    if (tk_scratch_reserve(s, n + 1) < 0) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = t->byte_id[data[i]];
        if (id == UINT32_MAX) {
            *bad = i;
            return 1;
        }
        s->ids[i] = id;
    }
    size_t m;
    int merged = 0;
    unsigned char lead = word_lead(data, n);
    if (backtracks(t, n, lead)) {
        if (!e->seen && (e->seen = malloc(TK_BT_SEEN_SLOTS * sizeof(uint64_t))) != NULL)
            memset(e->seen, 0xff, TK_BT_SEEN_SLOTS * sizeof(uint64_t));
        /* a rank file's pair table answers words led by a two-byte character (it lowered
         * the threshold for most of them); other chunks (CJK: 6-10% slower by pairs) ask the
         * piece table and its Bloom filter */
        int by_pairs = !t->rank_mode || (t->pairs.slots && lead >= 0xc0 && lead < 0xe0);
        tk_bt_ranks ranks = {by_pairs ? NULL : &t->pieces, &t->pairs, e->seen};
        int rc = tk_bt_encode(t->bt, &ranks, data, n, s, &m);
        if (rc < 0) return -1;
        merged = rc == 0;
        for (size_t i = 0; !merged && i < n; i++) s->ids[i] = t->byte_id[data[i]];
    }
    if (!merged && t->rank_mode) {
        if (n <= TK_TINY)
            m = tk_rankbpe_tiny(&t->pieces, &e->memo, data, n, s);
        else if (n <= TK_SMALL)
            m = tk_rankbpe_small(&t->pieces, &e->memo, data, n, s);
        else if (tk_rankbpe_heap(&t->pieces, &e->memo, data, n, s, &m) < 0)
            return -1;
    } else if (!merged) {
        if (n <= TK_SMALL)
            m = tk_merge_small(&t->pairs, t->pairs.prejoin, data, s, n);
        else if (tk_merge_heap(&t->pairs, t->merge_lr, s, n, &m) < 0)
            return -1;
    }
    if (cached && door_admits(e, h)) {
        if (lock) pthread_mutex_lock(lock);
        int rc = tk_cache_put(cache, data, n, h, s->ids, m);
        if (lock) pthread_mutex_unlock(lock);
        if (rc < 0) return -1;
    }
    if (front) {
        e->short_merges++;
        e->many_ids += m > TK_FRONT_IDS;
    }
    if (front && keep) front_put(e, front, key, n, s->ids, m);
    return out_append(e, s->ids, m);
}

/* Chunks are encoded in batches: the scanner fills a batch of TK_BATCH chunks, then every
 * chunk's front key is made and its slot asked for, and then the chunks are encoded in order,
 * the front slot of the chunk TK_PROBE places ahead read on the way (probe_chunk: where it does
 * not hold that chunk, the piece table's and the chunk cache's lines are asked for). By the
 * time a chunk is encoded its front slot has had a batch's worth of work to arrive; a chunk the
 * front misses has had TK_PROBE chunks' worth for the lines it merges with.
 *
 * This replaced a ring of 8 chunks between scanning and encoding, each chunk's slot asked for
 * at the scan and probed two chunks later. Fresh processes, one thread, medians of 5, ring ->
 * batch of 64, probe 8 ahead: cl100k PUD French warm 168 -> 190 MB/s, 13 PUD languages cold
 * 44.8 -> 47.7 and warm 102 -> 111, RusLit-40 cold 71.0 -> 77.2; o200k PUD Chinese + Korean
 * warm 130 -> 143. Batches of 32 and 128 and probing 16 ahead measured the same;
 * probing every chunk of a batch before encoding any, 5% slower warm (two passes over the
 * slots), and not probing at all, 3% faster on French but ~10% slower warm on 13 languages. */
#define TK_BATCH 64
#define TK_PROBE 8

/* The front key of p[0..n) with its slot loading; 0 when the front is not asked (chunks of
 * one byte or more than TK_FRONT_KEY bytes). */
static int key_chunk(tk_encoder *e, const unsigned char *p, size_t n, size_t avail,
                     tk_front_key *key) {
    if (n < 2 || n > TK_FRONT_KEY || !front_of(e)) return 0;
    tk_front_key_of(p, n, avail, e->front_bits, key);
    __builtin_prefetch(&e->front[key->index]);
    return 1;
}

static void probe_chunk(tk_encoder *e, const unsigned char *p, size_t n, const tk_front_key *key) {
    if (tk_front_get(e->front, key, n)) return;
    const tk_tables *t = e->tables;
    uint64_t h = tk_hash_bytes(p, n);
    if (t->whole && n > 2) {
        __builtin_prefetch(tk_bloom_block(&t->pieces.bloom, h));
        __builtin_prefetch(&t->pieces.slots[tk_piece_home(&t->pieces, h)]);
    }
    if (!short_cached(e) || !door_knows(e, h)) return; /* not in the cache */
    const tk_cache *c = &e->cache;
    if (e->shared) c = &e->shared->shard[(size_t)(h >> 58) % TK_SHARDS].cache;
    /* Read without the shard's lock: only an address to prefetch, never dereferenced here
     * (a prefetch of a line another thread just freed cannot fault). */
    const tk_cache_slot *slots = __atomic_load_n(&c->slots, __ATOMIC_RELAXED);
    size_t mask = __atomic_load_n(&c->mask, __ATOMIC_RELAXED);
    if (slots) __builtin_prefetch(&slots[h & mask]);
}

typedef struct {
    tk_encoder *enc;
    const unsigned char *text;
    size_t len;
    size_t missing_at; /* byte offset of a byte without an id */
    int status;        /* 0 ok, TK_MISSING_BYTE, -1 no memory */
    size_t bound[TK_BATCH + 1]; /* a batch's chunk i is text[bound[i]..bound[i + 1]) */
    tk_front_key key[TK_BATCH];
    unsigned char keyed[TK_BATCH];
} tk_job;

/* probe_chunk of the job's chunk i, when it has a front key. */
static void probe_at(tk_job *job, size_t i) {
    if (job->keyed[i])
        probe_chunk(job->enc, job->text + job->bound[i], job->bound[i + 1] - job->bound[i],
                    &job->key[i]);
}

/* Encode the batch's m chunks, in order, stopping at the first that fails (job->status). */
static void run_batch(tk_job *job, size_t m) {
    tk_encoder *e = job->enc;
    const size_t *bound = job->bound;
    for (size_t i = 0; i < m; i++)
        job->keyed[i] = (unsigned char)key_chunk(e, job->text + bound[i], bound[i + 1] - bound[i],
                                                 job->len - bound[i], &job->key[i]);
    for (size_t i = 0; i < m && i < TK_PROBE; i++) probe_at(job, i);
    for (size_t i = 0; i < m; i++) {
        if (i + TK_PROBE < m) probe_at(job, i + TK_PROBE);
        size_t at = bound[i], n = bound[i + 1] - at, bad = 0;
        const unsigned char *data = job->text + at;
        int st = job->keyed[i] ? encode_keyed(e, data, n, job->len - at, &bad, &job->key[i])
                               : encode_chunk(e, data, n, job->len - at, &bad);
        if (st) {
            if (st == TK_MISSING_BYTE) job->missing_at = at + bad;
            job->status = st;
            return;
        }
    }
}

/* Scan job->text[0..job->len) and encode its chunks, a batch at a time: each batch's chunks
 * start where the last one's ended. */
static void scan_job(tk_job *job, int preset, int dialect) {
    size_t m;
    tk_scan_state state = {0, 0};
    job->bound[0] = 0;
    while (job->status == 0 && (m = tk_scan_run(preset, dialect, job->text, job->len,
                                                job->bound[0], job->bound + 1, TK_BATCH, &state))) {
        run_batch(job, m);
        job->bound[0] = job->bound[m];
    }
}

int tk_encode_pieces(tk_encoder *e, const unsigned char *text, const size_t *lens, size_t n_pieces,
                     size_t *bad) {
    int status = 0;
    size_t base = 0, total = 0;
    for (size_t i = 0; i < n_pieces; i++) total += lens[i];
    encoder_repair(e);
    pthread_mutex_lock(&e->lock);
    call_start(e, total);
    for (size_t i = 0; i < n_pieces && status == 0; i++) {
        if (lens[i] == 0) continue;
        status = encode_chunk(e, text + base, lens[i], total - base, bad);
        if (status == TK_MISSING_BYTE) *bad += base;
        base += lens[i];
    }
    pthread_mutex_unlock(&e->lock);
    return status;
}

int tk_encode_text(tk_encoder *e, int preset, int dialect, const unsigned char *text, size_t n,
                   size_t *bad) {
    tk_job job = {.enc = e, .text = text, .len = n};
    encoder_repair(e);
    pthread_mutex_lock(&e->lock);
    call_start(e, n);
    scan_job(&job, preset, dialect);
    pthread_mutex_unlock(&e->lock);
    *bad = job.missing_at;
    return job.status;
}

/* A str's UTF-8 is taken TK_WINDOW bytes at a time (utf8_write.h); each window is encoded up to
 * the first safe cut in its second half (scan.h's tk_safe_cut, as the parts of a text cut for
 * threads are), and what follows the cut starts the next. A window with no cut in its second
 * half grows to twice the size; one grown past TK_WINDOW_KEPT is given back after the call.
 * The parts of a text cut for threads are windowed the same way, each from its first character
 * (compiled.py's parts are character ranges since). 256 KiB: read again by
 * the scanner and the front keys while still in the core's 1 MiB L2. Cold, one thread, fresh
 * processes, medians of 7, Python's whole UTF-8 -> windows: qwen, 13 PUD languages 47.9 -> 51.7
 * MB/s, RusLit-40 (4 MB) 76.4 -> 86.8; cl100k 56.7 -> 57.4 and 91.1 -> 104.2. The price: a str
 * encoded again is written again, where Python would have kept its UTF-8 from the first time
 * (one str encoded over and over, qwen: 5% slower on the 13 languages, 11% on RusLit-40); a
 * stream of new strs gained 1-3%. */
#define TK_WINDOW ((size_t)256 << 10)
#define TK_WINDOW_KEPT ((size_t)4 << 20)

static int window_reserve(tk_encoder *e, size_t cap) {
    if (e->window_cap >= cap) return 0;
    unsigned char *w = realloc(e->window, cap);
    if (!w) return -1;
    e->window = w;
    e->window_cap = cap;
    return 0;
}

ptrdiff_t tk_utf8_window(const void *data, int kind, size_t n, size_t *at, unsigned char *out,
                         size_t cap) {
    tk_ucs_text src = {data, n, *at, kind};
    ptrdiff_t w = tk_ucs_to_utf8(&src, out, cap);
    *at = src.at;
    return w;
}

size_t tk_ucs_utf8_length(const void *data, int kind, size_t n) {
    size_t len = n;
    if (kind == 1) {
        const uint8_t *s = data;
        for (size_t i = 0; i < n; i++) len += s[i] >= 0x80;
    } else if (kind == 2) {
        const uint16_t *s = data;
        for (size_t i = 0; i < n; i++) len += (size_t)(s[i] >= 0x80) + (s[i] >= 0x800);
    } else {
        const uint32_t *s = data;
        for (size_t i = 0; i < n; i++)
            len += (size_t)(s[i] >= 0x80) + (s[i] >= 0x800) + (s[i] >= 0x10000);
    }
    return len;
}

/* Windows of 16 KiB, each from two characters before where the search goes on (the rule reads
 * the two characters before a cut); a cut the rule could only confirm past a window's end is
 * passed over for a later one. */
size_t tk_ucs_safe_cut(int dialect, const void *data, int kind, size_t n, size_t from) {
    unsigned char buf[16384];
    while (from < n) {
        size_t start = from < 2 ? 0 : from - 2;
        tk_ucs_text src = {data, n, start, kind};
        ptrdiff_t have = tk_ucs_to_utf8(&src, buf, sizeof buf);
        if (have <= 0) return n;
        size_t b = 0; /* the byte where character `from` starts */
        for (size_t k = start; k < from && b < (size_t)have; k++)
            for (b++; b < (size_t)have && tk_is_cont(buf[b]); b++) {
            }
        size_t q = tk_safe_cut(dialect, buf, (size_t)have, b);
        if (q < (size_t)have) {
            size_t chars = 0;
            for (size_t i = 0; i < q; i++) chars += !tk_is_cont(buf[i]);
            return start + chars;
        }
        if (src.at >= n) return n;
        from = src.at;
    }
    return n;
}

/* The code points data[0..n) of `kind` bytes each, through the encoder's window (the caller
 * holds the lock and has started the call): tk_encode_ucs's contract. */
static int ucs_job(tk_job *job, int preset, int dialect, const void *data, int kind, size_t n,
                   size_t *bad) {
    tk_encoder *e = job->enc;
    tk_ucs_text src = {data, n, 0, kind};
    size_t have = 0, base = 0;
    int done = 0, status = 0;
    if (window_reserve(e, TK_WINDOW) < 0) status = -1;
    while (status == 0) {
        while (!done && e->window_cap - have >= 4) {
            ptrdiff_t k = tk_ucs_to_utf8(&src, e->window + have, e->window_cap - have);
            if (k < 0) {
                status = TK_NOT_UTF8;
                *bad = src.at;
                break;
            }
            done = k == 0;
            have += (size_t)k;
        }
        if (status) break;
        size_t cut = done ? have : tk_safe_cut(dialect, e->window, have, have / 2);
        if (cut == have && !done) { /* no cut in the window's second half */
            if (e->window_cap > SIZE_MAX / 2 || window_reserve(e, 2 * e->window_cap) < 0)
                status = -1;
            continue;
        }
        job->text = e->window;
        job->len = cut;
        scan_job(job, preset, dialect);
        if (job->status) {
            status = job->status;
            *bad = base + job->missing_at;
            break;
        }
        if (done) break;
        memmove(e->window, e->window + cut, have - cut);
        have -= cut;
        base += cut;
    }
    return status;
}

/* A window grown past TK_WINDOW_KEPT for one long text is given back at the end of the call. */
static void window_settle(tk_encoder *e) {
    if (e->window_cap > TK_WINDOW_KEPT) {
        free(e->window);
        e->window = NULL;
        e->window_cap = 0;
    }
}

int tk_encode_ucs(tk_encoder *e, int preset, int dialect, const void *data, int kind, size_t n,
                  size_t *bad) {
    tk_job job = {.enc = e};
    encoder_repair(e);
    pthread_mutex_lock(&e->lock);
    call_start(e, n <= SIZE_MAX / 4 ? n * tk_ucs_max_bytes(kind) : SIZE_MAX);
    int status = ucs_job(&job, preset, dialect, data, kind, n, bad);
    window_settle(e);
    pthread_mutex_unlock(&e->lock);
    return status;
}

int tk_encode_texts(tk_encoder *e, int preset, int dialect, const void *const *texts,
                    const int *kinds, const size_t *lens, size_t n_texts, size_t *ends,
                    size_t *failed, size_t *bad) {
    tk_job job = {.enc = e};
    encoder_repair(e);
    size_t total = 0;
    for (size_t i = 0; i < n_texts; i++) {
        size_t most = kinds && kinds[i] ? tk_ucs_max_bytes(kinds[i]) : 1;
        total += lens[i] <= SIZE_MAX / 4 ? lens[i] * most : SIZE_MAX / 4;
        if (total > SIZE_MAX / 4) total = SIZE_MAX / 4;
    }
    pthread_mutex_lock(&e->lock);
    call_start(e, total);
    int status = 0;
    *bad = 0;
    for (size_t i = 0; i < n_texts && status == 0; i++) {
        *failed = i;
        if (kinds && kinds[i]) {
            status = ucs_job(&job, preset, dialect, texts[i], kinds[i], lens[i], bad);
        } else {
            job.text = texts[i];
            job.len = lens[i];
            scan_job(&job, preset, dialect);
            status = job.status;
            *bad = job.missing_at;
        }
        ends[i] = e->out_len;
    }
    window_settle(e);
    pthread_mutex_unlock(&e->lock);
    return status;
}

int tk_encode_lines(tk_encoder *e, int preset, int dialect, const unsigned char *data, size_t n,
                    size_t *ends, size_t *n_docs, size_t *bad) {
    *n_docs = 0;
    size_t valid = tk_utf8_valid_prefix(data, n);
    if (valid < n) {
        *bad = valid;
        return TK_NOT_UTF8;
    }
    tk_job job = {.enc = e};
    encoder_repair(e);
    pthread_mutex_lock(&e->lock);
    call_start(e, n);
    size_t start = 0;
    while (job.status == 0) {
        const unsigned char *nl = memchr(data + start, '\n', n - start);
        size_t stop = nl ? (size_t)(nl - data) : n;
        size_t len = stop - start;
        if (len && data[stop - 1] == '\r') len--; /* a CR ending a line belongs to no line */
        if (len) {
            job.text = data + start;
            job.len = len;
            scan_job(&job, preset, dialect);
            if (job.status == TK_MISSING_BYTE) job.missing_at += start;
            ends[(*n_docs)++] = e->out_len;
        }
        if (!nl) break;
        start = stop + 1;
    }
    pthread_mutex_unlock(&e->lock);
    *bad = job.missing_at;
    return job.status;
}

const uint32_t *tk_encoder_output(const tk_encoder *e, size_t *n) {
    *n = e->out_len;
    return e->out;
}

size_t tk_encoder_cache_size(const tk_encoder *e) { return e->cache.used; }
uint64_t tk_encoder_cache_clears(const tk_encoder *e) { return e->cache.clears; }
size_t tk_encoder_front_slots(const tk_encoder *e) {
    return e->front ? (size_t)1 << e->front_bits : 0;
}
size_t tk_encoder_window_bytes(const tk_encoder *e) { return e->window_cap; }

void tk_encoder_clear_cache(tk_encoder *e) {
    encoder_repair(e);
    pthread_mutex_lock(&e->lock);
    tk_cache_clear(&e->cache);
    if (e->front) memset(e->front, 0, TK_FRONT_BYTES(e->front_bits));
    e->front_lost = e->lost_before = 0;
    if (e->door) memset(e->door, 0, TK_DOOR_BITS / 8);
    e->door_marks = 0;
    pthread_mutex_unlock(&e->lock);
}
