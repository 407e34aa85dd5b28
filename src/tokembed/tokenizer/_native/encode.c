/* tokembed.tokenizer._native._encode: the compiled twin of encode.py's FastEncoder.
 *
 * Tables (immutable, shared between threads):
 *   Tables.from_merges(byte_ids, merges)  explicit merge ranks; byte_ids holds 256
 *                                         ids, -1 for a byte without one
 *   Tables.from_ranks(data)               a tiktoken rank file's contents, parsed
 *                                         here (tiktoken's rule, no merge list)
 * Encoder(tables, cache_limit=..., cache=None)
 *                                         a chunk -> ids cache plus scratch space;
 *                                         one thread at a time (a mutex), so
 *                                         threads use one encoder each, and may
 *                                         share one SharedCache(tables) instead.
 *   encode_chunks(text, chunks)            text split by the Python pre-tokenizer
 *   encode_text(str, preset, engine)      whole text, split by scan.c (when built)
 *   encode_texts(list[str], preset, engine) one list of ids per text
 *
 * The GIL is released while merging (and scanning). A byte without an id raises
 * MissingByte(offset); the caller re-checks the text to raise its located error.
 */
#include "common.h"
#include <pthread.h>
#include "encode_merge.h"

#if defined(__has_include)
#if __has_include("scan.h")
#include "scan.h"
#define TK_HAVE_SCAN 1
#endif
#endif
#ifndef TK_HAVE_SCAN
#define TK_HAVE_SCAN 0
#endif

/* Longer chunks are not cached: they rarely repeat and would pin memory. */
#define TK_CACHED_CHUNK 256

static PyObject *MissingByte;

/* ================================ Tables ================================ */
typedef struct {
    PyObject_HEAD
    int rank_mode;
    uint32_t byte_id[256]; /* UINT32_MAX: no id */
    tk_pair_map pairs;     /* merge mode */
    uint32_t *merge_lr;    /* merge mode: (left, right, result) per rank */
    size_t n_merges;
    tk_piece_map pieces;   /* rank mode */
    unsigned char *blob;
    size_t n_pieces;
    uint32_t max_rank;
    uint32_t max_id;     /* largest id either mode can output */
    PyObject **id_objs;  /* id -> its int object, built on first list output */
} TablesObject;

static void Tables_dealloc(TablesObject *self) {
    if (self->id_objs) {
        for (size_t i = 0; i <= self->max_id; i++) Py_XDECREF(self->id_objs[i]);
        free(self->id_objs);
    }
    free(self->pairs.slots);
    free(self->merge_lr);
    free(self->pieces.slots);
    free(self->pieces.two);
    free(self->blob);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject TablesType;

static TablesObject *tables_new(int rank_mode) {
    TablesObject *t = (TablesObject *)TablesType.tp_alloc(&TablesType, 0);
    if (!t) return NULL;
    t->rank_mode = rank_mode;
    for (int b = 0; b < 256; b++) t->byte_id[b] = UINT32_MAX;
    return t;
}

/* Ids must fit in 31 bits (UINT32_MAX marks removed ids in the merge loops). */
static int id_from(PyObject *o, uint32_t *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "id %ld is outside [0, 2^31)", v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static PyObject *Tables_from_merges(PyObject *cls, PyObject *args) {
    PyObject *byte_ids, *merges;
    if (!PyArg_ParseTuple(args, "OO", &byte_ids, &merges)) return NULL;
    PyObject *bseq = PySequence_Fast(byte_ids, "byte_ids must be a sequence");
    if (!bseq) return NULL;
    if (PySequence_Fast_GET_SIZE(bseq) != 256) {
        Py_DECREF(bseq);
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 entries");
        return NULL;
    }
    TablesObject *t = tables_new(0);
    if (!t) goto fail_b;
    for (int b = 0; b < 256; b++) {
        PyObject *o = PySequence_Fast_GET_ITEM(bseq, b);
        if (o == Py_None) continue;
        long v = PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred()) goto fail;
        if (v < 0) continue;
        if (id_from(o, &t->byte_id[b]) < 0) goto fail;
        if (t->byte_id[b] > t->max_id) t->max_id = t->byte_id[b];
    }
    Py_CLEAR(bseq);
    PyObject *mseq = PySequence_Fast(merges, "merges must be a sequence of (left, right, result)");
    if (!mseq) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(mseq);
    t->n_merges = (size_t)n;
    t->merge_lr = malloc(3 * (size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!t->merge_lr || tk_pair_map_init(&t->pairs, (size_t)n) < 0) {
        Py_DECREF(mseq);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *m = PySequence_Fast_GET_ITEM(mseq, k);
        if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 3) {
            Py_DECREF(mseq);
            PyErr_SetString(PyExc_TypeError, "each merge must be a (left, right, result) tuple");
            goto fail;
        }
        uint32_t *lr = &t->merge_lr[3 * (size_t)k];
        for (int f = 0; f < 3; f++)
            if (id_from(PyTuple_GET_ITEM(m, f), &lr[f]) < 0) {
                Py_DECREF(mseq);
                goto fail;
            }
        tk_pair_map_put(&t->pairs, lr[0], lr[1], (uint32_t)k, lr[2]);
        if (lr[2] > t->max_id) t->max_id = lr[2];
    }
    Py_DECREF(mseq);
    return (PyObject *)t;
fail:
    Py_DECREF(t);
fail_b:
    Py_XDECREF(bseq);
    return NULL;
}

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

/* Returns 0, or the 1-based line of the first line this parser refuses. */
static size_t parse_rank_file(TablesObject *t, const unsigned char *d, size_t n) {
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
    qsort(ranks, count, sizeof(uint32_t), cmp_u32);
    for (size_t k = 1; k < count; k++)
        if (ranks[k] == ranks[k - 1]) {
            bad = 1;
            goto done;
        }
    t->n_pieces = count;
    t->max_id = t->max_rank;
done:
    free(offs);
    free(lens);
    free(ranks);
    return bad;
}

static PyObject *Tables_from_ranks(PyObject *cls, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    TablesObject *t = tables_new(1);
    if (!t) {
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = parse_rank_file(t, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (bad) {
        Py_DECREF(t);
        return PyErr_Format(PyExc_ValueError, "rank file refused at line %zu", bad);
    }
    return (PyObject *)t;
}

static PyObject *Tables_get_rank_mode(TablesObject *self, void *c) {
    return PyBool_FromLong(self->rank_mode);
}

static PyObject *Tables_get_size(TablesObject *self, void *c) {
    return PyLong_FromSize_t(self->rank_mode ? self->n_pieces : self->n_merges);
}

static PyObject *Tables_get_max_rank(TablesObject *self, void *c) {
    return PyLong_FromUnsignedLong(self->max_rank);
}

static PyObject *Tables_missing_bytes(TablesObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (int b = 0; out && b < 256; b++)
        if (self->byte_id[b] == UINT32_MAX) {
            PyObject *v = PyLong_FromLong(b);
            if (!v || PyList_Append(out, v) < 0) Py_CLEAR(out);
            Py_XDECREF(v);
        }
    return out;
}

static PyMethodDef Tables_methods[] = {
    {"from_merges", Tables_from_merges, METH_VARARGS | METH_CLASS,
     "from_merges(byte_ids, merges): explicit merge tables (byte_ids: 256 ids, None or -1 for none)."},
    {"from_ranks", Tables_from_ranks, METH_VARARGS | METH_CLASS,
     "from_ranks(data): tiktoken rank-file tables; ValueError when the strict parser refuses it."},
    {"missing_bytes", (PyCFunction)Tables_missing_bytes, METH_NOARGS, "Bytes without an id."},
    {NULL}};

static PyGetSetDef Tables_getset[] = {
    {"rank_mode", (getter)Tables_get_rank_mode, NULL, "True for a rank file's tables.", NULL},
    {"size", (getter)Tables_get_size, NULL, "Merges (merge mode) or pieces (rank mode).", NULL},
    {"max_rank", (getter)Tables_get_max_rank, NULL, "Largest rank (rank mode).", NULL},
    {NULL}};

static PyTypeObject TablesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._encode.Tables",
    .tp_basicsize = sizeof(TablesObject),
    .tp_dealloc = (destructor)Tables_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Immutable BPE lookup tables (explicit merges or a rank file).",
    .tp_methods = Tables_methods,
    .tp_getset = Tables_getset,
};

/* ============================== SharedCache ============================== */
/* One chunk cache for the encoders of several threads (a batch): split into
 * shards by the chunk's hash, each with its own lock, so two threads rarely wait
 * on each other, and a chunk merged by one thread is a hit for the others
 * (private caches would make every thread pay for the same misses). */
#define TK_SHARDS 64

typedef struct {
    PyObject_HEAD
    TablesObject *tables;
    tk_cache shard[TK_SHARDS];
    pthread_mutex_t lock[TK_SHARDS];
} SharedCacheObject;

static PyTypeObject SharedCacheType;

static int SharedCache_init(SharedCacheObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"tables", "cache_limit", NULL};
    PyObject *tables;
    Py_ssize_t limit = 1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$n", names, &TablesType, &tables, &limit))
        return -1;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "cache_limit must be >= 0");
        return -1;
    }
    if (self->tables) {
        PyErr_SetString(PyExc_RuntimeError, "SharedCache is already initialised");
        return -1;
    }
    Py_INCREF(tables);
    self->tables = (TablesObject *)tables;
    for (int k = 0; k < TK_SHARDS; k++)
        self->shard[k].limit = limit ? ((size_t)limit + TK_SHARDS - 1) / TK_SHARDS : 0;
    return 0;
}

static PyObject *SharedCache_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    SharedCacheObject *self = (SharedCacheObject *)type->tp_alloc(type, 0);
    for (int k = 0; self && k < TK_SHARDS; k++) pthread_mutex_init(&self->lock[k], NULL);
    return (PyObject *)self;
}

static void SharedCache_dealloc(SharedCacheObject *self) {
    Py_XDECREF(self->tables);
    for (int k = 0; k < TK_SHARDS; k++) {
        tk_cache_free(&self->shard[k]);
        pthread_mutex_destroy(&self->lock[k]);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *SharedCache_get_cache_size(SharedCacheObject *self, void *c) {
    size_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int k = 0; k < TK_SHARDS; k++) {
        pthread_mutex_lock(&self->lock[k]);
        n += self->shard[k].used;
        pthread_mutex_unlock(&self->lock[k]);
    }
    Py_END_ALLOW_THREADS
    return PyLong_FromSize_t(n);
}

static PyGetSetDef SharedCache_getset[] = {
    {"cache_size", (getter)SharedCache_get_cache_size, NULL, "Chunks in the cache.", NULL},
    {NULL}};

static PyTypeObject SharedCacheType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._encode.SharedCache",
    .tp_basicsize = sizeof(SharedCacheObject),
    .tp_dealloc = (destructor)SharedCache_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SharedCache(tables, *, cache_limit=2**20): one chunk cache for many encoders.",
    .tp_getset = SharedCache_getset,
    .tp_init = (initproc)SharedCache_init,
    .tp_new = SharedCache_new,
};

/* ================================ Encoder ================================ */
typedef struct {
    PyObject_HEAD
    TablesObject *tables;
    SharedCacheObject *shared; /* NULL: the private cache below */
    tk_cache cache;
    tk_memo memo;
    tk_scratch scratch;
    pthread_mutex_t lock;
    uint32_t *out;
    size_t out_len, out_cap;
} EncoderObject;

typedef struct {
    EncoderObject *enc;
    const unsigned char *text;
    size_t missing_at; /* byte offset of a byte without an id */
    int status;        /* 0 ok, 1 missing byte, -1 no memory */
} tk_job;

static int out_append(EncoderObject *e, const uint32_t *ids, size_t m) {
    if (tk_reserve((void **)&e->out, &e->out_cap, e->out_len + m, sizeof(uint32_t)) < 0) return -1;
    memcpy(e->out + e->out_len, ids, m * sizeof(uint32_t));
    e->out_len += m;
    return 0;
}

/* Ids of data[0..n) appended to e->out. Returns 0, 1 (missing byte at *bad), -1 (memory). */
static int encode_chunk(EncoderObject *e, const unsigned char *data, size_t n, size_t *bad) {
    const TablesObject *t = e->tables;
    if (n == 1) {
        uint32_t id = t->byte_id[data[0]];
        if (id == UINT32_MAX) {
            *bad = 0;
            return 1;
        }
        return out_append(e, &id, 1);
    }
    uint64_t h = 0;
    tk_cache *cache = &e->cache;
    pthread_mutex_t *lock = NULL;
    if (e->shared && n <= TK_CACHED_CHUNK) {
        h = tk_hash_bytes(data, n);
        size_t k = (size_t)(h >> 58) % TK_SHARDS; /* high bits: the low ones pick the slot */
        cache = &e->shared->shard[k];
        lock = &e->shared->lock[k];
    }
    int cached = n <= TK_CACHED_CHUNK && cache->limit;
    if (cached) {
        if (!lock) h = tk_hash_bytes(data, n);
        if (lock) pthread_mutex_lock(lock);
        const tk_cache_slot *slot = tk_cache_get(cache, data, n, h);
        int rc = slot ? out_append(e, cache->vals + slot->voff, slot->vlen) : 0;
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
    if (t->rank_mode) {
        if (n <= TK_SMALL)
            m = tk_rankbpe_small(&t->pieces, &e->memo, data, n, s);
        else if (tk_rankbpe_heap(&t->pieces, &e->memo, data, n, s, &m) < 0)
            return -1;
    } else {
        if (n <= TK_SMALL)
            m = tk_merge_small(&t->pairs, s, n);
        else if (tk_merge_heap(&t->pairs, t->merge_lr, s, n, &m) < 0)
            return -1;
    }
    if (cached) {
        if (lock) pthread_mutex_lock(lock);
        int rc = tk_cache_put(cache, data, n, h, s->ids, m);
        if (lock) pthread_mutex_unlock(lock);
        if (rc < 0) return -1;
    }
    return out_append(e, s->ids, m);
}

/* One int object per id, shared by every list this table's encoders return:
 * building a list is then a reference count per id instead of an allocation
 * (ids above 256 are not among Python's cached small ints). Vocabularies with
 * ids beyond this bound allocate as usual. */
#define TK_ID_OBJECTS_MAX (1u << 22)

static int ensure_id_objects(TablesObject *t) {
    if (t->id_objs || t->max_id >= TK_ID_OBJECTS_MAX) return 0;
    PyObject **objs = calloc((size_t)t->max_id + 1, sizeof(PyObject *));
    if (!objs) return -1;
    for (size_t i = 0; i <= t->max_id; i++) {
        objs[i] = PyLong_FromSize_t(i);
        if (!objs[i]) {
            for (size_t k = 0; k < i; k++) Py_DECREF(objs[k]);
            free(objs);
            return -1;
        }
    }
    t->id_objs = objs;
    return 0;
}

static PyObject *ids_list(TablesObject *t, const uint32_t *ids, size_t n) {
    if (ensure_id_objects(t) < 0) return PyErr_NoMemory();
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *v;
        if (t->id_objs && ids[i] <= t->max_id) {
            v = t->id_objs[ids[i]];
            Py_INCREF(v);
        } else if (!(v = PyLong_FromUnsignedLong(ids[i]))) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyObject *ids_result(EncoderObject *e, int as_bytes) {
    if (as_bytes)
        return PyBytes_FromStringAndSize((const char *)e->out, (Py_ssize_t)(e->out_len * sizeof(uint32_t)));
    return ids_list(e->tables, e->out, e->out_len);
}

static PyObject *job_error(int status, size_t offset) {
    if (status == 1) {
        PyObject *v = PyLong_FromSize_t(offset);
        if (v) {
            PyErr_SetObject(MissingByte, v);
            Py_DECREF(v);
        }
        return NULL;
    }
    return PyErr_NoMemory();
}

/* UTF-8 length of a str without encoding it (chunks of a text whose UTF-8 is known). */
static Py_ssize_t utf8_length(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) return n;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t bytes = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        bytes += 1 + (c >= 0x80) + (c >= 0x800) + (c >= 0x10000);
    }
    return bytes;
}

/* Chunks already split by the Python pre-tokenizer: str objects that tile ``text``
 * in order. The text is encoded to UTF-8 once; the chunks only give lengths. All
 * merging runs with the GIL released. */
static PyObject *Encoder_encode_chunks(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "chunks", "as_bytes", NULL};
    PyObject *text, *chunks;
    int as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UO|$p", names, &text, &chunks, &as_bytes))
        return NULL;
    Py_ssize_t total;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &total);
    if (!utf8) return NULL;
    PyObject *seq = PySequence_Fast(chunks, "chunks must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t *len = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    if (!len) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_ssize_t sum = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(c)) {
            PyMem_Free(len);
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "chunks must be str");
            return NULL;
        }
        len[i] = utf8_length(c);
        sum += len[i];
    }
    Py_DECREF(seq);
    if (sum != total) {
        PyMem_Free(len);
        PyErr_SetString(PyExc_ValueError, "chunks do not tile the text");
        return NULL;
    }
    int status = 0;
    size_t bad = 0, base = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    self->out_len = 0;
    for (Py_ssize_t i = 0; i < n && status == 0; i++) {
        if (len[i] == 0) continue;
        status = encode_chunk(self, (const unsigned char *)utf8 + base, (size_t)len[i], &bad);
        if (status == 1) bad += base;
        base += (size_t)len[i];
    }
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    PyMem_Free(len);
    if (status) return job_error(status, bad);
    return ids_result(self, as_bytes);
}

#if TK_HAVE_SCAN
static int emit_piece(void *ctx, size_t start, size_t end) {
    tk_job *job = ctx;
    size_t bad = 0;
    int st = encode_chunk(job->enc, job->text + start, end - start, &bad);
    if (st == 1) job->missing_at = start + bad;
    job->status = st;
    return st;
}
#endif

static PyObject *Encoder_encode_text(EncoderObject *self, PyObject *args, PyObject *kw) {
#if TK_HAVE_SCAN
    static char *names[] = {"text", "preset", "engine", "as_bytes", NULL};
    PyObject *text;
    int preset, engine, as_bytes = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Uii|$p", names, &text, &preset, &engine, &as_bytes))
        return NULL;
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (!p) return NULL;
    tk_job job = {self, (const unsigned char *)p, 0, 0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    self->out_len = 0;
    rc = tk_scan(preset, engine, (const unsigned char *)p, (size_t)n, emit_piece, &job);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    if (job.status) return job_error(job.status, job.missing_at);
    if (rc) return PyErr_Format(PyExc_ValueError, "scan failed with code %d", rc);
    return ids_result(self, as_bytes);
#else
    PyErr_SetString(PyExc_NotImplementedError, "this build has no compiled pre-tokenizer");
    return NULL;
#endif
}

/* Many texts in one call (a batch slice): UTF-8 of each is taken with the GIL,
 * then all are split and merged without it; one list of ids per text. */
static PyObject *Encoder_encode_texts(EncoderObject *self, PyObject *args) {
#if TK_HAVE_SCAN
    PyObject *texts;
    int preset, engine;
    if (!PyArg_ParseTuple(args, "Oii", &texts, &preset, &engine)) return NULL;
    PyObject *seq = PySequence_Fast(texts, "texts must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    const char **ptr = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(char *));
    Py_ssize_t *len = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    size_t *ends = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(size_t));
    PyObject *result = NULL;
    if (!ptr || !len || !ends) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyUnicode_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto done;
        }
        ptr[i] = PyUnicode_AsUTF8AndSize(t, &len[i]);
        if (!ptr[i]) goto done;
    }
    tk_job job = {self, NULL, 0, 0};
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    self->out_len = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0 && job.status == 0; i++) {
        job.text = (const unsigned char *)ptr[i];
        rc = tk_scan(preset, engine, job.text, (size_t)len[i], emit_piece, &job);
        ends[i] = self->out_len;
    }
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    if (job.status) {
        job_error(job.status, job.missing_at);
        goto done;
    }
    if (rc) {
        PyErr_Format(PyExc_ValueError, "scan failed with code %d", rc);
        goto done;
    }
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++) {
        size_t start = i ? ends[i - 1] : 0;
        PyObject *ids = ids_list(self->tables, self->out + start, ends[i] - start);
        if (!ids) Py_CLEAR(result);
        else PyList_SET_ITEM(result, i, ids);
    }
done:
    PyMem_Free(ptr);
    PyMem_Free(len);
    PyMem_Free(ends);
    Py_DECREF(seq);
    return result;
#else
    PyErr_SetString(PyExc_NotImplementedError, "this build has no compiled pre-tokenizer");
    return NULL;
#endif
}

static PyObject *Encoder_clear_cache(EncoderObject *self, PyObject *unused) {
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    tk_cache_clear(&self->cache);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Encoder_get_cache_size(EncoderObject *self, void *c) {
    return PyLong_FromSize_t(self->cache.used);
}

static PyObject *Encoder_get_cache_clears(EncoderObject *self, void *c) {
    return PyLong_FromUnsignedLongLong(self->cache.clears);
}

static PyObject *Encoder_get_tables(EncoderObject *self, void *c) {
    Py_INCREF(self->tables);
    return (PyObject *)self->tables;
}

static int Encoder_init(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"tables", "cache_limit", "cache", NULL};
    PyObject *tables, *shared = Py_None;
    Py_ssize_t limit = 1 << 20;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$nO", names, &TablesType, &tables, &limit,
                                     &shared))
        return -1;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "cache_limit must be >= 0");
        return -1;
    }
    if (shared != Py_None &&
        (!PyObject_TypeCheck(shared, &SharedCacheType) ||
         ((SharedCacheObject *)shared)->tables != (TablesObject *)tables)) {
        PyErr_SetString(PyExc_ValueError, "cache must be a SharedCache of the same tables");
        return -1;
    }
    if (self->tables) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    Py_INCREF(tables);
    self->tables = (TablesObject *)tables;
    if (shared != Py_None) {
        Py_INCREF(shared);
        self->shared = (SharedCacheObject *)shared;
    } else {
        self->cache.limit = (size_t)limit;
    }
    return 0;
}

static PyObject *Encoder_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    EncoderObject *self = (EncoderObject *)type->tp_alloc(type, 0);
    if (self) pthread_mutex_init(&self->lock, NULL);
    return (PyObject *)self;
}

static void Encoder_dealloc(EncoderObject *self) {
    Py_XDECREF(self->tables);
    Py_XDECREF(self->shared);
    tk_cache_free(&self->cache);
    tk_memo_free(&self->memo);
    tk_scratch_free(&self->scratch);
    free(self->out);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_chunks", (PyCFunction)(void (*)(void))Encoder_encode_chunks, METH_VARARGS | METH_KEYWORDS,
     "encode_chunks(text, chunks, *, as_bytes=False): ids of text split into chunks (list, or uint32 bytes)."},
    {"encode_text", (PyCFunction)(void (*)(void))Encoder_encode_text, METH_VARARGS | METH_KEYWORDS,
     "encode_text(text, preset, engine, *, as_bytes=False): ids of a whole text split by scan.c."},
    {"encode_texts", (PyCFunction)Encoder_encode_texts, METH_VARARGS,
     "encode_texts(texts, preset, engine): one list of ids per text, split by scan.c."},
    {"clear_cache", (PyCFunction)Encoder_clear_cache, METH_NOARGS, "Forget every cached chunk."},
    {NULL}};

static PyGetSetDef Encoder_getset[] = {
    {"cache_size", (getter)Encoder_get_cache_size, NULL, "Chunks in the cache.", NULL},
    {"cache_clears", (getter)Encoder_get_cache_clears, NULL, "Times the cache was emptied.", NULL},
    {"tables", (getter)Encoder_get_tables, NULL, "The Tables this encoder reads.", NULL},
    {NULL}};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._encode.Encoder",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(tables, *, cache_limit=2**20): cached BPE encoding, one thread at a time.",
    .tp_methods = Encoder_methods,
    .tp_getset = Encoder_getset,
    .tp_init = (initproc)Encoder_init,
    .tp_new = Encoder_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_encode", .m_doc = "Compiled BPE encoding (see encode.py).", .m_size = -1,
};

PyMODINIT_FUNC PyInit__encode(void) {
    if (PyType_Ready(&TablesType) < 0 || PyType_Ready(&EncoderType) < 0 ||
        PyType_Ready(&SharedCacheType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    MissingByte = PyErr_NewException("tokembed.tokenizer._native._encode.MissingByte", PyExc_ValueError, NULL);
    if (!MissingByte || PyModule_AddObjectRef(m, "MissingByte", MissingByte) < 0 ||
        PyModule_AddObjectRef(m, "Tables", (PyObject *)&TablesType) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "SharedCache", (PyObject *)&SharedCacheType) < 0 ||
        PyModule_AddIntConstant(m, "HAVE_SCAN", TK_HAVE_SCAN) < 0 ||
        PyModule_AddIntConstant(m, "CACHED_CHUNK", TK_CACHED_CHUNK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#if TK_HAVE_SCAN
    if (PyModule_AddIntConstant(m, "PRESET_TEACHING", TK_PRESET_TEACHING) < 0 ||
        PyModule_AddIntConstant(m, "PRESET_R50K", TK_PRESET_R50K) < 0 ||
        PyModule_AddIntConstant(m, "PRESET_CL100K", TK_PRESET_CL100K) < 0 ||
        PyModule_AddIntConstant(m, "PRESET_O200K", TK_PRESET_O200K) < 0 ||
        PyModule_AddIntConstant(m, "PRESET_GPT2_HF", TK_PRESET_GPT2_HF) < 0 ||
        PyModule_AddIntConstant(m, "PRESET_QWEN", TK_PRESET_QWEN) < 0 ||
        PyModule_AddIntConstant(m, "ENGINE_TIKTOKEN", TK_ENGINE_TIKTOKEN) < 0 ||
        PyModule_AddIntConstant(m, "ENGINE_HUGGINGFACE", TK_ENGINE_HUGGINGFACE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
