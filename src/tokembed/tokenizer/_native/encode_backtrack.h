/* Backtracking BPE (no Python): the ids BPE gives a chunk, found without replaying its merges.
 *
 * After GitHub's rust-gems `bpe` crate (backtrack_encoder.rs; van Antwerpen and Neubeck,
 * "So many tokens, so little time", GitHub blog 2024). Two facts make it exact:
 *
 * 1. Any part BPE builds (final or not) was built by the same merges, in the same order, as
 *    BPE on that part's bytes alone: no merge ever crossed its edges, and among the pairs
 *    inside it the lowest (rank, position) always went first. So a token has one history: the
 *    last merge of BPE on its own bytes, `left` + `right` at `rank`.
 * 2. Hence BPE's output is the one tiling of the chunk by tokens in which every adjacent pair
 *    (a, b) is *valid*: BPE on bytes(a) + bytes(b) gives [a, b]. Where every merge of both
 *    histories ranks above the merges that made its parts, BPE runs them in rank order, and
 *    validity is decided by unwinding both from their last merge down, checking at each step
 *    that the pair across the edge could not have joined before the merge just unwound
 *    (tk_bt_valid).
 *
 * The encoder walks the chunk taking the longest token that starts at the current position,
 * falls back to the next shorter token that is a prefix of it when the pair with the previous
 * token is not valid, and pops the previous token when none is; a bit per position remembers
 * the positions no valid tiling goes through, so each is given up once, and a chunk of n
 * bytes costs O(n) steps whatever its text (each step bounded by the tokens' lengths). The
 * walk is down a double-array trie of the tokens: one array read per byte, and every shorter
 * token that is a prefix of the longest is met on the way.
 *
 * The trie holds only tokens with a history in rank order. Any other token (one BPE builds
 * from a part that ranks above it, or never builds from its own bytes, as a rank file may
 * have) is left out; a chunk whose BPE ids include one has no tiling of valid pairs in the
 * trie, and goes to the merging engine, as does a chunk with a byte without a token. Works on
 * both table kinds: rank files (the rank of a pair is that of its joined bytes) and merge lists
 * (the rank of a pair is its merge's). */
#ifndef TOKEMBED_ENCODE_BACKTRACK_H
#define TOKEMBED_ENCODE_BACKTRACK_H
#include "encode_merge.h"

#define TK_BT_NONE UINT32_MAX
/* A longer token makes the trie's build recurse deeper than is worth it: no backtracking then
 * (real vocabularies stop at 128 bytes). */
#define TK_BT_MAX_TOKEN 1024

typedef struct {
    uint32_t base;  /* a child by byte c sits at base + c */
    uint32_t check; /* the parent of the node here; TK_BT_NONE: a free slot */
    uint32_t tok;   /* the token spelled by the path here, or TK_BT_NONE */
} tk_bt_node;

/* What validity reads of a token, in one 16-byte slot (a cache line holds four). */
typedef struct {
    uint32_t left, right; /* the last merge that builds it (a byte: itself, itself) */
    uint32_t rank;        /* that merge's rank + 1; 0 for a byte */
    uint32_t len;         /* bytes; 0: not a token of the trie */
} tk_bt_tok;

typedef struct {
    tk_bt_node *nodes;
    size_t n_nodes;
    tk_bt_tok *tok;  /* by id, n_ids entries */
    uint32_t *prefix; /* by id: the longest token that is a proper prefix of it, or TK_BT_NONE */
    size_t n_ids;
    size_t n_tokens; /* in the trie */
} tk_bt;

/* What a pair's rank is asked of: a rank file's pieces, or a merge list's pairs. */
typedef struct {
    const tk_piece_map *pieces; /* NULL: merge list */
    const tk_pair_map *pairs;
    uint64_t *seen; /* TK_BT_SEEN_SLOTS answers of tk_bt_valid, or NULL */
} tk_bt_ranks;

/* Adjacent tokens repeat (a text's frequent words and characters meet the same neighbours), so
 * an encoder keeps the last answer for each of TK_BT_SEEN_SLOTS pairs, direct-mapped: a slot is
 * (a << 31 | b) << 1 | valid, ids below 2^31, UINT64_MAX empty; 256 KiB, within L2. */
#define TK_BT_SEEN_SLOTS ((size_t)1 << 15)

static void tk_bt_free(tk_bt *bt) {
    if (!bt) return;
    free(bt->nodes);
    free(bt->tok);
    free(bt->prefix);
    free(bt);
}

/* The rank at which BPE joins adjacent parts a and b (their bytes p[0..n)), or TK_NO_RANK.
 * A rank file's pairs go to the piece table's Bloom filter first, not through the merging
 * engine's memo: the pairs validity asks are mostly not pieces (the filter answers those from
 * one line that stays in L2) and mostly new (encoding PUD Chinese with qwen, the memo answered
 * 21% of the lookups of three bytes or more), so the memo's probe and store cost a line each
 * for little. Cold, one thread, PUD Chinese on qwen, in-process medians of 7 in three
 * interleaved rounds: 22.8 -> 23.7, 30.2 -> 32.4, 23.9 -> 31.2 MB/s; fresh processes, medians
 * of 9: CJK qwen +16%, o200k +11%, 13 languages +2-3%, Russian the same. */
static inline uint32_t tk_bt_pair_rank(const tk_bt_ranks *r, uint32_t a, uint32_t b,
                                       const unsigned char *p, size_t n) {
    if (r->pieces) return tk_piece_map_get(r->pieces, p, n, n == 2 ? 0 : tk_hash_bytes(p, n));
    const tk_pair_slot *slot = tk_pair_map_get(r->pairs, a, b);
    return slot ? slot->rank : TK_NO_RANK;
}

/* 1 when BPE on bytes(a) + bytes(b) (a's ending at `at`) reaches [a, b] and does not join
 * them below rank `limit` (TK_NO_RANK: at all), else 0. The histories are unwound from the
 * later of the two last merges down; before a's merge at rank q the pair across the edge must
 * not rank below q (a's merge, on the left, wins a tie), before b's it must not rank at or
 * below q (there the edge's pair is on the left). */
static inline int tk_bt_valid(const tk_bt *bt, const tk_bt_ranks *r, uint32_t a, uint32_t b,
                              const unsigned char *at, uint32_t limit) {
    for (;;) {
        const tk_bt_tok *ta = &bt->tok[a], *tb = &bt->tok[b];
        if (tk_bt_pair_rank(r, a, b, at - ta->len, (size_t)ta->len + tb->len) < limit) return 0;
        if (ta->rank > tb->rank) {
            limit = ta->rank - 1;
            a = ta->right;
        } else if (tb->rank) {
            limit = tb->rank;
            b = tb->left;
        } else {
            return 1;
        }
    }
}

/* tk_bt_valid(a, b) at any rank, through the encoder's answers. */
static inline int tk_bt_pair_ok(const tk_bt *bt, const tk_bt_ranks *r, uint32_t a, uint32_t b,
                                const unsigned char *at) {
    if (!r->seen) return tk_bt_valid(bt, r, a, b, at, TK_NO_RANK);
    uint64_t key = ((uint64_t)a << 31 | b) << 1;
    uint64_t *slot = &r->seen[tk_mix64(key) >> (64 - 15)];
    if ((*slot | 1) == (key | 1)) return (int)(*slot & 1);
    int ok = tk_bt_valid(bt, r, a, b, at, TK_NO_RANK);
    *slot = key | (uint64_t)ok;
    return ok;
}

static int tk_scratch_bits(tk_scratch *s, size_t nbits) {
    size_t words = (nbits + 63) / 64;
    if (words > s->bits_cap) {
        size_t c = s->bits_cap ? s->bits_cap : 64;
        while (c < words) c *= 2;
        void *p = realloc(s->bits, c * sizeof(uint64_t));
        if (!p) return -1;
        s->bits = p;
        s->bits_cap = c;
    }
    memset(s->bits, 0xff, words * sizeof(uint64_t));
    return 0;
}

/* The tokens that are prefixes of p[0..n), shortest first: their ids in tok[k % TK_BT_CHAIN] and
 * lengths in len[k % TK_BT_CHAIN] for k below the count returned (a ring: past TK_BT_CHAIN of
 * them only the longest are kept). One walk down the trie gives the longest token and every
 * shorter one to fall back on, so the fallbacks cost no lookup. */
#define TK_BT_CHAIN 32

static inline size_t tk_bt_prefixes(const tk_bt *bt, const unsigned char *p, size_t n,
                                    uint32_t *tok, uint32_t *len) {
    const tk_bt_node *nd = bt->nodes;
    uint32_t s = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = nd[s].base + p[i];
        if (nd[c].check != s) break;
        s = c;
        if (nd[c].tok != TK_BT_NONE) {
            tok[m % TK_BT_CHAIN] = nd[c].tok;
            len[m % TK_BT_CHAIN] = (uint32_t)i + 1;
            m++;
        }
    }
    return m;
}

static inline int tk_bt_open(const uint64_t *bits, size_t at) { return bits[at >> 6] >> (at & 63) & 1; }

/* The ids of d[0..n) into s->ids (room for n), their count in *out_n. 0, 1 when the trie
 * cannot tile the chunk (a byte without a token: the caller merges instead), -1 without
 * memory. */
static int tk_bt_encode(const tk_bt *bt, const tk_bt_ranks *r, const unsigned char *d, size_t n,
                        tk_scratch *s, size_t *out_n) {
    if (tk_scratch_bits(s, n + 1) < 0) return -1;
    uint64_t *bits = s->bits;
    uint32_t *ids = s->ids, ctok[TK_BT_CHAIN], clen[TK_BT_CHAIN];
    size_t cnt = 0, pos = 0;
    while (pos < n) {
        /* the longest token here whose end is open and whose pair with the last is valid */
        size_t m = tk_bt_prefixes(bt, d + pos, n - pos, ctok, clen);
        uint32_t last = cnt ? ids[cnt - 1] : TK_BT_NONE, tok = TK_BT_NONE;
        size_t k = m, next = 0;
        for (; k > 0 && k + TK_BT_CHAIN > m; k--) {
            uint32_t t = ctok[(k - 1) % TK_BT_CHAIN];
            size_t end = pos + clen[(k - 1) % TK_BT_CHAIN];
            if (tk_bt_open(bits, end) && (last == TK_BT_NONE || tk_bt_pair_ok(bt, r, last, t, d + pos))) {
                tok = t;
                next = end;
                break;
            }
        }
        /* past the ring (a token with over TK_BT_CHAIN prefixes): its links */
        for (uint32_t t = tok == TK_BT_NONE && k ? bt->prefix[ctok[k % TK_BT_CHAIN]] : TK_BT_NONE;
             tok == TK_BT_NONE && t != TK_BT_NONE; t = bt->prefix[t])
            if (tk_bt_open(bits, pos + bt->tok[t].len) &&
                (last == TK_BT_NONE || tk_bt_pair_ok(bt, r, last, t, d + pos)))
                tok = t;
        /* none: no valid tiling goes through pos. Give pos up, take `last` back and try the
         * tokens shorter than it, popping further while none fits. */
        while (tok == TK_BT_NONE) {
            if (!cnt) return 1; /* no tiling at all: only when a byte has no token */
            bits[pos >> 6] &= ~((uint64_t)1 << (pos & 63));
            uint32_t popped = ids[--cnt];
            pos -= bt->tok[popped].len;
            last = cnt ? ids[cnt - 1] : TK_BT_NONE;
            for (uint32_t t = bt->prefix[popped]; t != TK_BT_NONE; t = bt->prefix[t])
                if (tk_bt_open(bits, pos + bt->tok[t].len) &&
                    (last == TK_BT_NONE || tk_bt_pair_ok(bt, r, last, t, d + pos))) {
                    tok = t;
                    break;
                }
        }
        ids[cnt++] = tok;
        pos = next ? next : pos + bt->tok[tok].len;
    }
    *out_n = cnt;
    return 0;
}

/* ---- building --------------------------------------------------------------- */
typedef struct {
    const unsigned char *p;
    uint64_t head; /* the first 8 bytes, big-endian, zero-padded: most compares end here */
    uint32_t len, id;
} tk_bt_entry;

static tk_bt_entry tk_bt_entry_of(const unsigned char *p, uint32_t len, uint32_t id) {
    unsigned char b[8] = {0};
    memcpy(b, p, len < 8 ? len : 8);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h = h << 8 | b[i];
    return (tk_bt_entry){p, h, len, id};
}

/* Byte order, a prefix first. */
static int tk_bt_entry_cmp(const void *x, const void *y) {
    const tk_bt_entry *a = x, *b = y;
    if (a->head != b->head) return a->head < b->head ? -1 : 1;
    if (a->len > 8 && b->len > 8) {
        size_t n = a->len < b->len ? a->len : b->len;
        int c = memcmp(a->p + 8, b->p + 8, n - 8);
        if (c) return c;
    }
    return a->len < b->len ? -1 : a->len > b->len;
}

typedef struct {
    tk_bt_node *nodes;
    uint32_t *next_free; /* next_free[i] leads (union-find) to the first free slot >= i */
    size_t cap, used_end;
    /* per trie depth, the child bytes of the node being placed there and where each child's
     * entries end: on the heap, so that the recursion's frames stay small (a thread's stack
     * may be 128 KiB; depth reaches the longest token's length) */
    unsigned char *level_bytes;
    uint32_t *level_ends;
} tk_bt_builder;

static void tk_bt_builder_free(tk_bt_builder *b) {
    free(b->nodes);
    free(b->next_free);
    free(b->level_bytes);
    free(b->level_ends);
    memset(b, 0, sizeof *b);
}

static int tk_bt_reserve(tk_bt_builder *b, size_t need) {
    if (need <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 4096;
    while (c < need) c *= 2;
    if (c >= TK_BT_NONE - 1) return -1;
    tk_bt_node *p = realloc(b->nodes, c * sizeof *p);
    if (!p) return -1;
    b->nodes = p;
    uint32_t *f = realloc(b->next_free, c * sizeof *f);
    if (!f) return -1;
    b->next_free = f;
    for (size_t i = b->cap; i < c; i++) {
        p[i] = (tk_bt_node){0, TK_BT_NONE, TK_BT_NONE};
        f[i] = (uint32_t)i;
    }
    b->cap = c;
    return 0;
}

/* The first free slot at or after i (with room for a node's 256 children after it). */
static int tk_bt_free_from(tk_bt_builder *b, size_t i, size_t *out) {
    size_t r = i;
    for (;;) {
        if (tk_bt_reserve(b, r + 257) < 0) return -1;
        if (b->next_free[r] == r) break;
        r = b->next_free[r];
    }
    while (b->next_free[i] != i) { /* path compression */
        size_t nx = b->next_free[i];
        b->next_free[i] = (uint32_t)r;
        i = nx;
    }
    *out = r;
    return 0;
}

static void tk_bt_take(tk_bt_builder *b, size_t i, uint32_t parent) {
    b->nodes[i].check = parent;
    b->next_free[i] = (uint32_t)(i + 1);
}

/* Place the node `node` for the sorted entries e[lo..hi), which share their first `depth`
 * bytes, and below it their children (the classic sorted-list double-array build: a base is
 * the first one, from the lowest free slot up, at which every child's slot is free; after 256
 * free slots that do not fit, the first base past every slot in use, so a build stays linear).
 * 0, 1 when two tokens share their bytes, -1 without memory. */
static int tk_bt_place(tk_bt_builder *b, const tk_bt_entry *e, size_t lo, size_t hi,
                       size_t depth, uint32_t node) {
    if (lo < hi && e[lo].len == depth) {
        b->nodes[node].tok = e[lo].id;
        lo++;
        if (lo < hi && e[lo].len == depth) return 1;
    }
    if (lo == hi) return 0; /* a leaf: base 0 reaches only slots whose parent is the root */
    unsigned char *bytes = b->level_bytes + 256 * depth;
    uint32_t *ends = b->level_ends + 256 * depth;
    size_t k = 0;
    for (size_t i = lo; i < hi; i++) {
        unsigned char c = e[i].p[depth];
        if (k && bytes[k - 1] == c) {
            ends[k - 1] = (uint32_t)(i + 1);
        } else {
            bytes[k] = c;
            ends[k++] = (uint32_t)(i + 1);
        }
    }
    size_t base = 0, p = (size_t)bytes[0] + 1, tries = 0;
    for (;; p++, tries++) {
        if (tries == 256 && p < b->used_end + bytes[0]) p = b->used_end + bytes[0];
        if (tk_bt_free_from(b, p, &p) < 0) return -1;
        base = p - bytes[0];
        size_t j = 1;
        while (j < k && b->nodes[base + bytes[j]].check == TK_BT_NONE) j++;
        if (j == k) break;
    }
    b->nodes[node].base = (uint32_t)base;
    for (size_t j = 0; j < k; j++) tk_bt_take(b, base + bytes[j], node);
    if (base + 256 > b->used_end) b->used_end = base + 256;
    size_t start = lo;
    for (size_t j = 0; j < k; j++) {
        int rc = tk_bt_place(b, e, start, ends[j], depth + 1, (uint32_t)(base + bytes[j]));
        if (rc) return rc;
        start = ends[j];
    }
    return 0;
}

/* The token of exactly p[0..n) in the trie, or TK_BT_NONE. */
static uint32_t tk_bt_exact(const tk_bt *bt, const unsigned char *p, size_t n) {
    uint32_t s = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = bt->nodes[s].base + p[i];
        if (bt->nodes[c].check != s) return TK_BT_NONE;
        s = c;
    }
    return bt->nodes[s].tok;
}

/* Every token's prefix link: the last token met walking its bytes down the trie. */
static void tk_bt_link_prefixes(tk_bt *bt, const tk_bt_entry *e, size_t n) {
    for (size_t k = 0; k < n; k++) {
        uint32_t s = 0, best = TK_BT_NONE;
        for (size_t i = 0; i + 1 < e[k].len; i++) {
            s = bt->nodes[s].base + e[k].p[i];
            if (bt->nodes[s].tok != TK_BT_NONE) best = bt->nodes[s].tok;
        }
        bt->prefix[e[k].id] = best;
    }
}

/* The trie of the n candidate tokens e (ids below n_ids, sorted here), every token's prefix
 * link and length; histories are then the caller's (tk_bt_keep / tk_bt_drop_unbuilt). NULL
 * when two tokens share their bytes, a token is too long, or memory runs out. */
static tk_bt *tk_bt_trie(tk_bt_entry *e, size_t n, size_t n_ids) {
    size_t longest = 0;
    for (size_t k = 0; k < n; k++) {
        if (e[k].len == 0 || e[k].len > TK_BT_MAX_TOKEN || e[k].id >= n_ids) return NULL;
        if (e[k].len > longest) longest = e[k].len;
    }
    if (n >= UINT32_MAX) return NULL;
    qsort(e, n, sizeof *e, tk_bt_entry_cmp);
    tk_bt_builder b = {0};
    tk_bt *bt = calloc(1, sizeof *bt);
    b.level_bytes = malloc(256 * (longest + 1));
    b.level_ends = malloc(256 * (longest + 1) * sizeof(uint32_t));
    if (!bt || !b.level_bytes || !b.level_ends || tk_bt_reserve(&b, 4096) < 0) goto fail;
    tk_bt_take(&b, 0, TK_BT_NONE - 1); /* the root: never a free slot, nobody's child */
    if (tk_bt_place(&b, e, 0, n, 0, 0) != 0) goto fail;
    bt->n_nodes = b.used_end + 1;
    bt->nodes = tk_table_alloc(bt->n_nodes * sizeof(tk_bt_node));
    bt->tok = calloc(n_ids, sizeof(tk_bt_tok));
    bt->prefix = malloc(n_ids * sizeof(uint32_t));
    if (!bt->nodes || !bt->tok || !bt->prefix) goto fail;
    memcpy(bt->nodes, b.nodes, bt->n_nodes * sizeof(tk_bt_node));
    tk_bt_builder_free(&b);
    bt->n_ids = n_ids;
    for (size_t k = 0; k < n; k++) {
        tk_bt_tok *t = &bt->tok[e[k].id];
        t->len = e[k].len;
        t->left = t->right = e[k].id;
        t->rank = 0;
    }
    tk_bt_link_prefixes(bt, e, n);
    return bt;
fail:
    tk_bt_builder_free(&b);
    tk_bt_free(bt);
    return NULL;
}

/* Give token t the history left + right at `rank` if that pair is valid below it; 1 if so. */
static int tk_bt_keep(tk_bt *bt, const tk_bt_ranks *r, uint32_t t, uint32_t left, uint32_t right,
                      const unsigned char *bytes, uint32_t rank) {
    if (!tk_bt_valid(bt, r, left, right, bytes + bt->tok[left].len, rank)) return 0;
    tk_bt_tok *x = &bt->tok[t];
    x->left = left;
    x->right = right;
    x->rank = rank + 1;
    return 1;
}

/* Take out of the trie every multi-byte token without a history (built[id] == 0), then link
 * prefixes again over the tokens that stay. */
static void tk_bt_drop_unbuilt(tk_bt *bt, const tk_bt_entry *e, size_t n, const uint8_t *built) {
    for (size_t k = 0; k < n; k++) {
        if (built[e[k].id]) continue;
        uint32_t s = 0;
        for (size_t i = 0; i < e[k].len; i++) s = bt->nodes[s].base + e[k].p[i];
        bt->nodes[s].tok = TK_BT_NONE;
        bt->tok[e[k].id].len = 0;
    }
    size_t w = 0;
    tk_bt_entry *keep = (tk_bt_entry *)e; /* compacted in place: the caller's scratch */
    for (size_t k = 0; k < n; k++)
        if (built[e[k].id]) keep[w++] = e[k];
    tk_bt_link_prefixes(bt, keep, w);
    bt->n_tokens = w;
}
#endif
