/* Two builds of the compiled encoder core in one process (bench_encode_ab.py --in-process).
 *
 *   inproc_ab BASE.so THIS.so TABLES PRESET DIALECT TEXT SAMPLES
 *
 * Each .so is encode_core.c + scan.c of one checkout. TABLES is a .tiktoken rank file, or a
 * merge list dumped by bench_encode_ab.py (".merges": 256 int64 byte ids, a uint64 count and a
 * byte for ignore_merges, count (left, right, result) uint32 triples, then a uint64 count of
 * (uint32 id, uint32 length, bytes) pieces). For SAMPLES rounds, alternating which build goes
 * first, each build makes a fresh encoder, encodes "warm up", then TEXT once (timed), and its
 * ids are compared with the other build's. Prints "base_mbs this_mbs same" (medians; same is
 * 1 when every output matched) and exits 1 when the ids differ. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    void *(*from_ranks)(const unsigned char *, size_t, size_t *);
    void *(*from_merges)(const int64_t *, const uint32_t *, size_t);
    int (*add_pieces)(void *, const unsigned char *const *, const uint32_t *, const uint32_t *,
                      size_t, int);
    void *(*encoder_new)(const void *, void *, size_t);
    void (*encoder_free)(void *);
    int (*encode_text)(void *, int, int, const unsigned char *, size_t, size_t *);
    const uint32_t *(*output)(const void *, size_t *);
    void *tables;
} build;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "%s: %s\n", what, detail);
    exit(2);
}

static void *need(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) die(name, dlerror());
    return f;
}

static void load(build *b, const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) die(path, dlerror());
    ((void (*)(void))need(lib, "tk_scan_init"))();
    ((void (*)(void))need(lib, "tk_encode_init"))();
    b->from_ranks = need(lib, "tk_tables_from_ranks");
    b->from_merges = need(lib, "tk_tables_from_merges");
    b->add_pieces = need(lib, "tk_tables_add_pieces");
    b->encoder_new = need(lib, "tk_encoder_new");
    b->encoder_free = need(lib, "tk_encoder_free");
    b->encode_text = need(lib, "tk_encode_text");
    b->output = need(lib, "tk_encoder_output");
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) die(path, "cannot read");
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *data = malloc(*n + 1);
    if (!data || fread(data, 1, *n, f) != *n) die(path, "cannot read");
    fclose(f);
    return data;
}

/* Both builds' tables from the file (see the header). */
static void make_tables(build *b, const char *path) {
    size_t n, bad;
    unsigned char *data = slurp(path, &n);
    size_t len = strlen(path);
    if (len < 7 || strcmp(path + len - 7, ".merges") != 0) {
        for (int k = 0; k < 2; k++)
            if (!(b[k].tables = b[k].from_ranks(data, n, &bad))) die(path, "rank file refused");
        return;
    }
    const unsigned char *p = data;
    int64_t byte_id[256];
    uint64_t n_merges, n_pieces;
    memcpy(byte_id, p, sizeof byte_id);
    p += sizeof byte_id;
    memcpy(&n_merges, p, 8);
    int every = p[8];
    p += 9;
    uint32_t *merges = malloc(n_merges * 12 + 1);
    memcpy(merges, p, n_merges * 12);
    p += n_merges * 12;
    memcpy(&n_pieces, p, 8);
    p += 8;
    const unsigned char **pieces = malloc(n_pieces * sizeof *pieces + 1);
    uint32_t *lens = malloc(n_pieces * 4 + 1), *ids = malloc(n_pieces * 4 + 1);
    for (uint64_t k = 0; k < n_pieces; k++) {
        memcpy(&ids[k], p, 4);
        memcpy(&lens[k], p + 4, 4);
        pieces[k] = p + 8;
        p += 8 + lens[k];
    }
    for (int k = 0; k < 2; k++) {
        b[k].tables = b[k].from_merges(byte_id, merges, n_merges);
        if (!b[k].tables) die(path, "merges refused");
        if (b[k].add_pieces(b[k].tables, pieces, lens, ids, n_pieces, every) < 0)
            die(path, "pieces refused");
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: inproc_ab BASE.so THIS.so TABLES PRESET DIALECT TEXT SAMPLES\n");
        return 2;
    }
    build b[2];
    load(&b[0], argv[1]);
    load(&b[1], argv[2]);
    make_tables(b, argv[3]);
    int preset = atoi(argv[4]), dialect = atoi(argv[5]), samples = atoi(argv[7]);
    size_t n, bad;
    unsigned char *text = slurp(argv[6], &n);
    double *secs[2] = {calloc((size_t)samples, 8), calloc((size_t)samples, 8)};
    uint32_t *first = NULL;
    size_t first_n = 0;
    int same = 1;
    for (int i = 0; i < samples; i++)
        for (int j = 0; j < 2; j++) {
            int k = i % 2 ? 1 - j : j; /* alternate which build goes first */
            void *e = b[k].encoder_new(b[k].tables, NULL, (size_t)1 << 20);
            const unsigned char *warm = (const unsigned char *)"warm up";
            if (!e || b[k].encode_text(e, preset, dialect, warm, 7, &bad))
                die(argv[1 + k], "cannot encode");
            double t0 = now();
            if (b[k].encode_text(e, preset, dialect, text, n, &bad))
                die(argv[6], "a byte without an id, or no memory");
            secs[k][i] = now() - t0;
            size_t m;
            const uint32_t *ids = b[k].output(e, &m);
            if (!first) {
                first = malloc(m * 4 + 1);
                memcpy(first, ids, m * 4);
                first_n = m;
            } else {
                same &= m == first_n && memcmp(ids, first, m * 4) == 0;
            }
            b[k].encoder_free(e);
        }
    for (int k = 0; k < 2; k++) qsort(secs[k], (size_t)samples, 8, by_value);
    printf("%.2f %.2f %d\n", (double)n / secs[0][samples / 2] / 1e6,
           (double)n / secs[1][samples / 2] / 1e6, same);
    return same ? 0 : 1;
}
