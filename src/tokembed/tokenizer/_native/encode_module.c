/* tokembed.tokenizer._native._encode: the Python binding of encode_core (see encode_core.h).
 *
 *   Tables.from_merges(byte_ids, merges)   explicit merge ranks; byte_ids holds 256 ids,
 *                                          None or -1 for a byte without one
 *   Tables.from_ranks(data)                a tiktoken rank file's contents (tiktoken's rule)
 *   SharedCache(tables, cache_limit=...)   one chunk cache for the encoders of many threads
 *   Encoder(tables, cache_limit=..., cache=None)
 *                                          one thread at a time (a lock): threads use one each
 *     encode_chunks(text, chunks)          text split by the Python pre-tokenizer
 *     encode_text(str, preset, dialect)    whole text, split by the compiled scanner
 *     encode_texts(list[str], preset, dialect, *, as_bytes)  one list of ids per text
 *                                               (as_bytes: flat uint32 ids, uint64 ends)
 *     encode_lines(bytes, preset, dialect) the non-empty lines of UTF-8 bytes as documents
 *
 * This file converts types and releases the GIL around the core's calls. A byte without an
 * id raises MissingByte(offset); callers check texts before they encode them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "common.h"
#include "encode_core.h"
#include "scan.h"

static PyObject *MissingByte;

/* ================================ Tables ================================ */
typedef struct {
    PyObject_HEAD
    tk_tables *t;
    PyObject **id_objs;   /* id -> its int object, built on first list output */
    uint32_t *id_reserve; /* id -> references its int holds for lists to take (reserved_fill) */
    uint32_t max_id;
} TablesObject;

static PyTypeObject TablesType;

/* A list's items are references to the table's int objects (ensure_id_objects), and giving
 * one to each item wrote to the int: a line of its own in 3-6 MB of ints, random across the
 * list and out of the CPU caches in a fresh process. Each int is made holding TK_RESERVE
 * references more than it has, counted in id_reserve: a list item takes one from that count
 * (4 bytes per id, read as the id's address is) and never touches the int, which gets
 * TK_RESERVE more once its count runs out; the table gives back what is left when it goes.
 * Every int's reference count is so always its holders' plus its reserve, and each int is
 * freed once the table and every list holding it are gone. Counting a long list's references
 * per id and adding the counts to the ints after it was filled (the way before, from 65,536
 * ids; shorter lists wrote a reference per item) still read every used int's line: that pass
 * took 1.0 ms of a cold call's 1.6-2.1 ms list of 203,429 ids (27,094 distinct; o200k, the 7
 * Latin-script PUD languages), the list now 0.67-0.91 ms.
 * Fresh processes interleaved, one thread, that text cold, medians of 15 / 11: o200k 19.98 ->
 * 19.17 ms, cl100k 18.63 -> 18.06. A 16-byte {int, reserve} entry per id (one line per item
 * where two arrays take two) measured 2% slower: 3.2 MB read at random instead of 2.4. Only
 * where the GIL orders every list's making and reference counts are plain integers (not a
 * free-threaded build, nor a debug build that totals references); from Python 3.12 the ints up
 * to 256 are immortal and setting their count does nothing, which holds the arithmetic. */
#if !defined(Py_GIL_DISABLED) && !defined(Py_REF_DEBUG)
#define TK_RESERVED 1
#endif
#define TK_RESERVE ((uint32_t)1 << 16) /* a refill, one write to the int, per 65,536 items */

static void Tables_dealloc(TablesObject *self) {
    if (self->id_objs) {
        for (size_t i = 0; i <= self->max_id; i++) {
#ifdef TK_RESERVED
            /* the references no list took; the table's own is dropped below */
            if (self->id_reserve)
                Py_SET_REFCNT(self->id_objs[i],
                              Py_REFCNT(self->id_objs[i]) - (Py_ssize_t)self->id_reserve[i]);
#endif
            Py_DECREF(self->id_objs[i]);
        }
        free(self->id_objs);
        free(self->id_reserve);
    }
    tk_tables_free(self->t);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tables_object(tk_tables *t) {
    if (!t) return PyErr_NoMemory();
    TablesObject *obj = (TablesObject *)TablesType.tp_alloc(&TablesType, 0);
    if (!obj) {
        tk_tables_free(t);
        return NULL;
    }
    obj->t = t;
    obj->max_id = tk_tables_max_id(t);
    return (PyObject *)obj;
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

static int byte_ids_from(PyObject *byte_ids, int64_t out[256]) {
    PyObject *seq = PySequence_Fast(byte_ids, "byte_ids must be a sequence");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 256) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "byte_ids must hold 256 entries");
        return -1;
    }
    for (int b = 0; b < 256; b++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, b);
        out[b] = -1;
        if (o == Py_None) continue;
        long v = PyLong_AsLong(o);
        uint32_t id;
        if (v == -1 && PyErr_Occurred()) goto fail;
        if (v < 0) continue;
        if (id_from(o, &id) < 0) goto fail;
        out[b] = id;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* Give ``t`` the map of ``pieces``, a sequence of (id, bytes) (see tk_tables_add_pieces); 0
 * or -1 with an exception set (``t`` is then freed). */
static int whole_pieces_from(tk_tables *t, PyObject *pieces, int every) {
    PyObject *seq = PySequence_Fast(pieces, "pieces must be a sequence of (id, bytes)");
    if (!seq) goto fail_tables;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    const unsigned char **ptr = malloc((n ? n : 1) * sizeof *ptr);
    uint32_t *lens = malloc((n ? n : 1) * sizeof *lens), *ids = malloc((n ? n : 1) * sizeof *ids);
    int rc = -1;
    if (!ptr || !lens || !ids) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)k);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "each piece must be an (id, bytes) tuple");
            goto done;
        }
        if (id_from(PyTuple_GET_ITEM(item, 0), &ids[k]) < 0) goto done;
        PyObject *b = PyTuple_GET_ITEM(item, 1);
        ptr[k] = (const unsigned char *)PyBytes_AS_STRING(b);
        lens[k] = (uint32_t)PyBytes_GET_SIZE(b);
        if (lens[k] == 0 || (size_t)PyBytes_GET_SIZE(b) >= UINT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "a piece must hold 1 to 2^32 - 2 bytes");
            goto done;
        }
    }
    rc = tk_tables_add_pieces(t, ptr, lens, ids, n, every);
    if (rc == 1) PyErr_SetString(PyExc_ValueError, "two pieces share their bytes");
    else if (rc < 0) PyErr_NoMemory();
done:
    free(ptr);
    free(lens);
    free(ids);
    Py_DECREF(seq);
    if (rc == 0) return 0;
fail_tables:
    tk_tables_free(t);
    return -1;
}

static PyObject *Tables_from_merges(PyObject *cls, PyObject *args, PyObject *kw) {
    static char *names[] = {"byte_ids", "merges", "pieces", "ignore_merges", NULL};
    PyObject *byte_ids, *merges, *pieces = Py_None;
    int every = 0;
    int64_t byte_id[256];
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$Op", names, &byte_ids, &merges, &pieces,
                                     &every) ||
        byte_ids_from(byte_ids, byte_id) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(merges, "merges must be a sequence of (left, right, result)");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint32_t *lr = malloc(3 * (size_t)(n ? n : 1) * sizeof(uint32_t));
    if (!lr) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *m = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyTuple_Check(m) || PyTuple_GET_SIZE(m) != 3) {
            PyErr_SetString(PyExc_TypeError, "each merge must be a (left, right, result) tuple");
            goto fail;
        }
        for (int f = 0; f < 3; f++)
            if (id_from(PyTuple_GET_ITEM(m, f), &lr[3 * (size_t)k + f]) < 0) goto fail;
    }
    Py_DECREF(seq);
    tk_tables *t = tk_tables_from_merges(byte_id, lr, (size_t)n);
    free(lr);
    if (t && pieces != Py_None && whole_pieces_from(t, pieces, every) < 0) return NULL;
    return tables_object(t);
fail:
    free(lr);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *Tables_from_ranks(PyObject *cls, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    tk_tables *t;
    size_t bad;
    Py_BEGIN_ALLOW_THREADS
    t = tk_tables_from_ranks(view.buf, (size_t)view.len, &bad);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!t) return PyErr_Format(PyExc_ValueError, "rank file refused at line %zu", bad);
    return tables_object(t);
}

static PyObject *Tables_get_ignore_merges(TablesObject *self, void *c) {
    return PyBool_FromLong(tk_tables_ignore_merges(self->t));
}

static PyObject *Tables_get_rank_mode(TablesObject *self, void *c) {
    return PyBool_FromLong(tk_tables_rank_mode(self->t));
}

static PyObject *Tables_get_size(TablesObject *self, void *c) {
    return PyLong_FromSize_t(tk_tables_size(self->t));
}

static PyObject *Tables_get_max_rank(TablesObject *self, void *c) {
    return PyLong_FromUnsignedLong(tk_tables_max_rank(self->t));
}

static PyObject *Tables_get_backtrack(TablesObject *self, void *c) {
    size_t from[3], tokens = tk_tables_backtrack_from(self->t, from);
    return Py_BuildValue("((nnn)n)", (Py_ssize_t)from[0], (Py_ssize_t)from[1], (Py_ssize_t)from[2],
                         (Py_ssize_t)tokens);
}

static PyObject *Tables_missing_bytes(TablesObject *self, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (int b = 0; out && b < 256; b++)
        if (!tk_tables_has_byte(self->t, b)) {
            PyObject *v = PyLong_FromLong(b);
            if (!v || PyList_Append(out, v) < 0) Py_CLEAR(out);
            Py_XDECREF(v);
        }
    return out;
}

/* The offsets `find` writes for a bytes-like chunk (room for n / 2 + 1), as a list. */
static PyObject *offsets_of(TablesObject *self, PyObject *arg,
                            size_t (*find)(const tk_tables *, const unsigned char *, size_t,
                                           uint32_t *)) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    size_t n = (size_t)view.len;
    uint32_t *at = PyMem_Malloc((n / 2 + 1) * sizeof(uint32_t));
    PyObject *out = NULL;
    if (!at) {
        PyErr_NoMemory();
    } else {
        size_t m = find(self->t, view.buf, n, at);
        out = PyList_New((Py_ssize_t)m);
        for (size_t k = 0; out && k < m; k++) {
            PyObject *v = PyLong_FromUnsignedLong(at[k]);
            if (!v) Py_CLEAR(out);
            else PyList_SET_ITEM(out, (Py_ssize_t)k, v);
        }
    }
    PyMem_Free(at);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *Tables_cuts(TablesObject *self, PyObject *arg) {
    return offsets_of(self, arg, tk_tables_cuts);
}

static PyObject *Tables_prejoined(TablesObject *self, PyObject *arg) {
    return offsets_of(self, arg, tk_tables_prejoined);
}

static PyObject *Tables_may_join(TablesObject *self, PyObject *args) {
    unsigned int l, r;
    if (!PyArg_ParseTuple(args, "II", &l, &r)) return NULL;
    return PyBool_FromLong(tk_tables_may_join(self->t, l, r));
}

static PyObject *Tables_backtracks(TablesObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int yes = tk_tables_backtracks(self->t, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyBool_FromLong(yes);
}

static PyObject *Tables_grid(TablesObject *self, PyObject *unused) {
    size_t dim = tk_tables_grid(self->t, NULL);
    if (!dim) Py_RETURN_NONE;
    PyObject *cells = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(dim * dim * 4));
    if (!cells) return NULL;
    tk_tables_grid(self->t, (uint32_t *)PyBytes_AS_STRING(cells));
    return Py_BuildValue("(nN)", (Py_ssize_t)dim, cells);
}

static PyObject *Tables_rank_pairs(TablesObject *self, PyObject *unused) {
    size_t n;
    if (!tk_tables_rank_pairs(self->t, NULL, &n)) Py_RETURN_NONE;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 12));
    if (!out) return NULL;
    tk_tables_rank_pairs(self->t, (uint32_t *)PyBytes_AS_STRING(out), &n);
    return out;
}

static PyObject *Tables_atoms(TablesObject *self, PyObject *unused) {
    size_t n;
    if (!tk_tables_atoms(self->t, NULL, NULL, &n)) Py_RETURN_NONE;
    PyObject *letters = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(65536 * 4));
    PyObject *joins = letters ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 12)) : NULL;
    if (!joins) {
        Py_XDECREF(letters);
        return NULL;
    }
    tk_tables_atoms(self->t, (uint32_t *)PyBytes_AS_STRING(letters),
                    (uint32_t *)PyBytes_AS_STRING(joins), &n);
    return Py_BuildValue("(NN)", letters, joins);
}

static PyMethodDef Tables_methods[] = {
    {"from_merges", (PyCFunction)(void (*)(void))Tables_from_merges, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "from_merges(byte_ids, merges, *, pieces=None, ignore_merges=False): explicit merge tables "
     "(byte_ids: 256 ids, None or -1 for none); pieces, (id, bytes) pairs, let a chunk that is "
     "one of them take one lookup (all of them with ignore_merges, else those the merges "
     "rebuild from their bytes)."},
    {"from_ranks", Tables_from_ranks, METH_VARARGS | METH_CLASS,
     "from_ranks(data): tiktoken rank-file tables; ValueError when the strict parser refuses it."},
    {"missing_bytes", (PyCFunction)Tables_missing_bytes, METH_NOARGS, "Bytes without an id."},
    {"cuts", (PyCFunction)Tables_cuts, METH_O,
     "cuts(chunk: bytes) -> list[int]: the offsets where a long chunk of three-byte letters is "
     "cut before its parts are encoded (no token crosses one); [] when these tables never cut."},
    {"grid", (PyCFunction)Tables_grid, METH_NOARGS,
     "grid() -> (dim, cells) | None: the rank at which parts a and b join, for ids below dim, "
     "as native uint32 cells a * dim + b (0xFFFFFFFF: never); None without a grid."},
    {"rank_pairs", (PyCFunction)Tables_rank_pairs, METH_NOARGS,
     "rank_pairs() -> bytes | None: a rank file's pair table, every split of a piece into two "
     "pieces, as native uint32 (left, right, joined) triples in no order; None without one."},
    {"atoms", (PyCFunction)Tables_atoms, METH_NOARGS,
     "atoms() -> (letters, joins) | None: a rank file's three-byte letters that parts of a cut "
     "chunk are merged from, as 65536 native uint32 ranks by the letter's low 4, 6 and 6 bits "
     "(0xFFFFFFFF: not one), and the joins of whole-letter parts, native uint32 (left, right, "
     "joined) triples in no order; None without them."},
    {"may_join", (PyCFunction)Tables_may_join, METH_VARARGS,
     "may_join(left: int, right: int) -> bool: False when the split filter says BPE never "
     "joins parts left and right (a rank file's tables); True otherwise or without one."},
    {"backtracks", (PyCFunction)Tables_backtracks, METH_O,
     "backtracks(chunk: bytes) -> bool: whether a chunk of these bytes that is not one piece "
     "is backtracked rather than merged (the ids are the same)."},
    {"prejoined", (PyCFunction)Tables_prejoined, METH_O,
     "prejoined(chunk: bytes) -> list[int]: the offsets of the byte pairs that merging the "
     "chunk starts from, joined, instead of their bytes (the ids are the same); [] for merge "
     "tables."},
    {NULL}};

static PyGetSetDef Tables_getset[] = {
    {"rank_mode", (getter)Tables_get_rank_mode, NULL, "True for a rank file's tables.", NULL},
    {"ignore_merges", (getter)Tables_get_ignore_merges, NULL,
     "True when a chunk that is one piece encodes as that piece (rank files always).", NULL},
    {"size", (getter)Tables_get_size, NULL, "Merges (merge mode) or pieces (rank mode).", NULL},
    {"max_rank", (getter)Tables_get_max_rank, NULL, "Largest rank (rank mode).", NULL},
    {"backtrack", (getter)Tables_get_backtrack, NULL,
     "((shortest chunk backtracked starting with an ASCII byte or a Latin letter with a "
     "diacritic, another two-byte character, a longer one), tokens it may give); ((0, 0, 0), "
     "0): every chunk is merged.", NULL},
    {NULL}};

static PyObject *Tables_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyErr_SetString(PyExc_TypeError, "make Tables with Tables.from_merges or Tables.from_ranks");
    return NULL;
}

static PyTypeObject TablesType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._encode.Tables",
    .tp_basicsize = sizeof(TablesObject),
    .tp_dealloc = (destructor)Tables_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Immutable BPE lookup tables (explicit merges or a rank file).",
    .tp_methods = Tables_methods,
    .tp_getset = Tables_getset,
    .tp_new = Tables_new,
};

/* ============================== SharedCache ============================== */
typedef struct {
    PyObject_HEAD
    TablesObject *tables;
    tk_shared_cache *c;
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
    if (self->c) {
        PyErr_SetString(PyExc_RuntimeError, "SharedCache is already initialised");
        return -1;
    }
    self->c = tk_shared_cache_new((size_t)limit);
    if (!self->c) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(tables);
    self->tables = (TablesObject *)tables;
    return 0;
}

static void SharedCache_dealloc(SharedCacheObject *self) {
    Py_XDECREF(self->tables);
    tk_shared_cache_free(self->c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *SharedCache_get_cache_size(SharedCacheObject *self, void *c) {
    if (!self->c) return PyLong_FromLong(0);
    size_t n;
    Py_BEGIN_ALLOW_THREADS
    n = tk_shared_cache_size(self->c);
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
    .tp_new = PyType_GenericNew,
};

/* ================================ Encoder ================================ */
typedef struct {
    PyObject_HEAD
    TablesObject *tables;
    SharedCacheObject *shared;
    tk_encoder *e;
} EncoderObject;

static int ready(EncoderObject *self) {
    if (self->e) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Encoder.__init__ was not called");
    return -1;
}

/* One int object per id, shared by every list this table's encoders return:
 * building a list then takes a reference per id (from its reserve, see TK_RESERVED)
 * instead of an allocation (ids above 256 are not among Python's cached small ints).
 * Vocabularies with ids beyond this bound allocate as usual. */
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
#ifdef TK_RESERVED
    t->id_reserve = malloc(((size_t)t->max_id + 1) * sizeof(uint32_t));
    for (size_t i = 0; t->id_reserve && i <= t->max_id; i++) {
        t->id_reserve[i] = TK_RESERVE;
        Py_SET_REFCNT(objs[i], Py_REFCNT(objs[i]) + (Py_ssize_t)TK_RESERVE);
    }
#endif
    return 0;
}

/* A list of ids reads an id-indexed entry or two per item, out of the CPU caches in a fresh
 * process: the address array entry (and the reserve entry) of the id TK_OBJ_AHEAD ahead are
 * asked for early; where a reference is written to the int itself (builds without reserves),
 * so is the int of the id half as far ahead, scattered over max_id * 32 bytes (6 MB for o200k)
 * (fresh encoders on PUD zh + ko, o200k: ids_list's share of the samples 9.8% -> 7.2%). */
#define TK_OBJ_AHEAD 16

/* A long text's list of ids is item pointers Python takes fresh from the system, and filling it
 * faulted one 4 KiB page at a time: 1,036 faults for the 547,608 ids of the 13 PUD languages
 * (qwen, a fresh process), ~2 us each on the test machine (a 2 MiB huge page costs ~0.33 ms,
 * a quarter as much per byte), where the encoder's own output buffer is on huge pages. The
 * array is advised huge before the first write (tk_advise_huge), but only a 2 MiB page wholly
 * inside it and untouched can be huge: where the array starts in heap memory already used (glibc
 * takes blocks of megabytes from the heap after a large free), the fresh memory after it is
 * often shorter than a whole aligned page, and the 13 languages on cl100k (680,099 ids, 5.4 MB)
 * still faulted 643 small pages. So the array is asked for with TK_LIST_SLACK more, which puts
 * every aligned page the items reach inside it, and the slack is given back once the items are
 * set: 61 faults. Fresh processes interleaved, one thread, medians of 21: cl100k 43.2 -> 41.0 ms
 * (of 15, qwen 45.0 -> 44.3); advising the pages populated (MADV_POPULATE_WRITE) as well, 41.4.
 * Below 4 MiB of pointers (the 7 Latin-script PUD languages' 2 MB list) from 1 MiB up: 20.1 ->
 * 20.2 ms, nothing to gain. Below it, from TK_LIST_POPULATE_MIN, an array on fresh small pages
 * is faulted in by one call (tk_populate) before it is filled: whether it is fresh depends on
 * what the process freed before (that text's 244,485-id list on qwen took 389-479 faults in a
 * fresh process, o200k's 203,429 ids 3). Fresh processes interleaved, one thread, that text
 * cold, medians of 21 / 15 / 21: qwen 20.00 -> 19.71 ms and 20.13 -> 19.57, o200k 19.31 ->
 * 19.37. */
#define TK_LIST_HUGE_MIN (((size_t)4 << 20) / sizeof(PyObject *))
#define TK_LIST_SLACK ((size_t)2 << 20)
#define TK_POPULATE_MIN ((size_t)256 << 10) /* bytes: fresh blocks from here are populated */
#define TK_LIST_POPULATE_MIN (TK_POPULATE_MIN / sizeof(PyObject *))

/* A list of room for n items and size 0, its item array not zeroed; the caller sets items and
 * then finishes it with list_filled, so the list never shows an item it has not set. PyList_New
 * callocs the array, and where that memory comes from the heap, calloc zeroes it in a pass of
 * its own before every item is overwritten: 0.6-0.8 ms of a warm 13-language call on cl100k. */
static PyObject *list_unfilled(size_t n) {
    PyObject *list = PyList_New(0);
    if (!list || n == 0) return list;
    size_t slack = n >= TK_LIST_HUGE_MIN ? TK_LIST_SLACK : 0;
    PyObject **items = n <= (PY_SSIZE_T_MAX - slack) / sizeof(PyObject *)
                           ? PyMem_Malloc(n * sizeof(PyObject *) + slack)
                           : NULL;
    if (!items) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    if (slack)
        tk_advise_huge(items, n * sizeof(PyObject *) + slack);
    else if (n >= TK_LIST_POPULATE_MIN)
        tk_populate(items, n * sizeof(PyObject *));
    ((PyListObject *)list)->ob_item = items;
    ((PyListObject *)list)->allocated = (Py_ssize_t)(n + slack / sizeof(PyObject *));
    return list;
}

/* The size of a list from list_unfilled, once its n items are set; its slack is given back. */
static void list_filled(PyObject *list, size_t n) {
    PyListObject *l = (PyListObject *)list;
    Py_SET_SIZE(list, (Py_ssize_t)n);
    if ((size_t)l->allocated == n) return;
    PyObject **items = PyMem_Realloc(l->ob_item, n * sizeof(PyObject *));
    if (!items) return; /* the slack stays: room the list may grow into */
    l->ob_item = items;
    l->allocated = (Py_ssize_t)n;
}

#ifdef TK_RESERVED
/* Fill items[0..n) of `list` (from list_unfilled) with the ids' ints, references taken from
 * their reserves; returns the list, or NULL (the list released) without memory. */
static PyObject *reserved_fill(TablesObject *t, const uint32_t *ids, size_t n, PyObject *list) {
    PyObject **objs = t->id_objs, **items = ((PyListObject *)list)->ob_item;
    uint32_t *reserve = t->id_reserve, max = t->max_id;
    size_t i = 0;
    for (; i < n; i++) {
        if (i + TK_OBJ_AHEAD < n && ids[i + TK_OBJ_AHEAD] <= max) {
            __builtin_prefetch(&objs[ids[i + TK_OBJ_AHEAD]]);
            __builtin_prefetch(&reserve[ids[i + TK_OBJ_AHEAD]], 1);
        }
        uint32_t id = ids[i];
        if (id <= max) {
            items[i] = objs[id];
            if (--reserve[id] == 0) {
                Py_SET_REFCNT(objs[id], Py_REFCNT(objs[id]) + (Py_ssize_t)TK_RESERVE);
                reserve[id] = TK_RESERVE;
            }
        } else if (!(items[i] = PyLong_FromUnsignedLong(id))) {
            break;
        }
    }
    if (i < n) {
        Py_SET_SIZE(list, (Py_ssize_t)i); /* the items set so far are released with it */
        Py_DECREF(list);
        return NULL;
    }
    list_filled(list, n);
    return list;
}
#endif

static PyObject *ids_list(TablesObject *t, const uint32_t *ids, size_t n) {
    if (ensure_id_objects(t) < 0) return PyErr_NoMemory();
    PyObject *list = list_unfilled(n);
    if (!list) return NULL;
#ifdef TK_RESERVED
    if (t->id_reserve) return reserved_fill(t, ids, n, list);
#endif
    PyObject **objs = t->id_objs, **items = ((PyListObject *)list)->ob_item;
    for (size_t i = 0; i < n; i++) {
        PyObject *v;
        if (objs && i + TK_OBJ_AHEAD < n) {
            uint32_t far = ids[i + TK_OBJ_AHEAD], near = ids[i + TK_OBJ_AHEAD / 2];
            if (far <= t->max_id) __builtin_prefetch(&objs[far]);
            if (near <= t->max_id) __builtin_prefetch(objs[near], 1);
        }
        if (objs && ids[i] <= t->max_id) {
            v = objs[ids[i]];
            Py_INCREF(v);
        } else if (!(v = PyLong_FromUnsignedLong(ids[i]))) {
            Py_SET_SIZE(list, (Py_ssize_t)i); /* the items set so far are released with it */
            Py_DECREF(list);
            return NULL;
        }
        items[i] = v;
    }
    list_filled(list, n);
    return list;
}

static PyObject *ids_result(EncoderObject *self, int as_bytes) {
    size_t n;
    const uint32_t *ids = tk_encoder_output(self->e, &n);
    if (as_bytes) return PyBytes_FromStringAndSize((const char *)ids, (Py_ssize_t)(n * sizeof(uint32_t)));
    return ids_list(self->tables, ids, n);
}

static PyObject *job_error(int status, size_t offset) {
    if (status == TK_MISSING_BYTE) {
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

/* Chunks already split by the Python pre-tokenizer: str objects that tile ``text`` in order.
 * The text is encoded to UTF-8 once; the chunks only give lengths. */
static PyObject *Encoder_encode_chunks(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "chunks", "as_bytes", NULL};
    PyObject *text, *chunks;
    int as_bytes = 0;
    if (ready(self) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kw, "UO|$p", names, &text, &chunks, &as_bytes))
        return NULL;
    Py_ssize_t total;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &total);
    if (!utf8) return NULL;
    PyObject *seq = PySequence_Fast(chunks, "chunks must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t *len = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(size_t));
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
        len[i] = (size_t)utf8_length(c);
        sum += (Py_ssize_t)len[i];
    }
    Py_DECREF(seq);
    if (sum != total) {
        PyMem_Free(len);
        PyErr_SetString(PyExc_ValueError, "chunks do not tile the text");
        return NULL;
    }
    int status;
    size_t bad = 0;
    Py_BEGIN_ALLOW_THREADS
    status = tk_encode_pieces(self->e, (const unsigned char *)utf8, len, (size_t)n, &bad);
    Py_END_ALLOW_THREADS
    PyMem_Free(len);
    if (status) return job_error(status, bad);
    return ids_result(self, as_bytes);
}

/* A byte offset of UTF-8 p[0..n) at which a character starts (or n). */
static int utf8_boundary(const char *p, Py_ssize_t n, Py_ssize_t at) {
    return at == n || ((unsigned char)p[at] & 0xC0) != 0x80;
}

/* 0 when the str's code points may be read in place (PyUnicode_DATA), else -1 with the error
 * set: a legacy str of 3.11's deprecated API is made ready first (every str is from 3.12). */
static int str_ready(PyObject *text) {
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(text);
#else
    (void)text;
    return 0;
#endif
}

/* 1 when the str's UTF-8 is not its storage (not ASCII) and Python has not made and kept it: the
 * encoder then writes it a window at a time from the code points (tk_encode_ucs) rather than
 * have Python make the whole of it, to be kept beside the str. */
static int utf8_not_kept(PyObject *text) {
    if (!PyUnicode_IS_COMPACT(text) || PyUnicode_IS_ASCII(text)) return 0;
    return ((PyCompactUnicodeObject *)text)->utf8 == NULL;
}

/* encode_text(text, preset, dialect, *, as_bytes, start, end, chars): the ids of bytes [start,
 * end) of the text's UTF-8 (by default all of it), or with chars of characters [start, end),
 * which the caller cut where the scanner allows (safe_cuts): the parts of one long text share
 * the str instead of each being a new one. */
static PyObject *Encoder_encode_text(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "preset", "dialect", "as_bytes", "start", "end", "chars", NULL};
    PyObject *text;
    int preset, dialect, as_bytes = 0, chars = 0;
    Py_ssize_t start = 0, end = -1;
    if (ready(self) < 0 ||
        !PyArg_ParseTupleAndKeywords(args, kw, "Uii|$pnnp", names, &text, &preset, &dialect,
                                     &as_bytes, &start, &end, &chars))
        return NULL;
    int status;
    size_t bad = 0;
    if (str_ready(text) < 0) return NULL;
    if (chars && PyUnicode_IS_ASCII(text)) {
        chars = 0; /* its characters are its UTF-8's bytes */
    } else if (chars) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        if (end < 0) end = n;
        if (start < 0 || start > end || end > n) {
            PyErr_Format(PyExc_ValueError,
                         "start and end must be character offsets of the text's %zd, start <= "
                         "end; got %zd and %zd", n, start, end);
            return NULL;
        }
    } else if (start == 0 && end < 0 && utf8_not_kept(text)) {
        end = PyUnicode_GET_LENGTH(text);
        chars = 1;
    }
    if (chars) {
        const void *data = PyUnicode_DATA(text);
        int kind = PyUnicode_KIND(text);
        Py_BEGIN_ALLOW_THREADS
        status = tk_encode_ucs(self->e, preset, dialect, (const char *)data + start * kind, kind,
                               (size_t)(end - start), &bad);
        Py_END_ALLOW_THREADS
        if (status == 0) return ids_result(self, as_bytes);
        if (status == TK_MISSING_BYTE) bad += tk_ucs_utf8_length(data, kind, (size_t)start);
        if (status != TK_NOT_UTF8) return job_error(status, bad);
        /* a surrogate: Python's own UTF-8 raises its UnicodeEncodeError */
        if (!PyUnicode_AsUTF8AndSize(text, NULL)) return NULL;
        PyErr_SetString(PyExc_SystemError, "a surrogate Python writes as UTF-8");
        return NULL;
    }
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(text, &n);
    if (!p) return NULL;
    if (end < 0) end = n;
    if (start < 0 || start > end || end > n || !utf8_boundary(p, n, start) ||
        !utf8_boundary(p, n, end)) {
        PyErr_Format(PyExc_ValueError,
                     "start and end must be character boundaries of the text's %zd UTF-8 bytes, "
                     "start <= end; got %zd and %zd", n, start, end);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = tk_encode_text(self->e, preset, dialect, (const unsigned char *)p + start,
                            (size_t)(end - start), &bad);
    Py_END_ALLOW_THREADS
    if (status) return job_error(status, bad + (size_t)start);
    return ids_result(self, as_bytes);
}

/* (uint32 ids of all texts as bytes, uint64 end offset of each text as bytes): no int object
 * per id. The ids' bytes, from 256 KiB, are faulted in by one call before they are copied, as a
 * list's item array is (list_unfilled): the 7 Latin-script PUD languages' 244,485 ids on qwen
 * (0.98 MB) took 237 page faults in a fresh process's batch call (273 -> 104 in all). One thread,
 * cold batches, fresh processes interleaved, medians of 21: that text qwen 17.77 -> 17.55 ms,
 * o200k 17.93 -> 17.77; RusLit-40 o200k (of 9) 48.1 -> 46.9. populated_bytes: a new bytes
 * object of that size, faulted in from TK_POPULATE_MIN. */
static PyObject *populated_bytes(size_t bytes) {
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)bytes);
    if (b && bytes >= TK_POPULATE_MIN) tk_populate(PyBytes_AS_STRING(b), bytes);
    return b;
}

static PyObject *flat_result(const uint32_t *ids, size_t total, const size_t *ends, size_t n) {
    PyObject *result = NULL;
    size_t bytes = total * sizeof(uint32_t);
    PyObject *flat = populated_bytes(bytes);
    if (flat && bytes) memcpy(PyBytes_AS_STRING(flat), ids, bytes);
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
    if (flat && offs) {
        uint64_t *o = (uint64_t *)PyBytes_AS_STRING(offs);
        for (size_t i = 0; i < n; i++) o[i] = (uint64_t)ends[i];
        result = PyTuple_Pack(2, flat, offs);
    }
    Py_XDECREF(flat);
    Py_XDECREF(offs);
    return result;
}

/* Many texts in one call (a batch slice), all split and merged without the GIL; one list of
 * ids per text. A text whose UTF-8 Python holds (ASCII, or made before) is read there; any other
 * is given as its code points and written as UTF-8 by the encoder a window at a time
 * (utf8_not_kept): having Python make each line's UTF-8 with the GIL held, to be kept beside the
 * str, was the part of a batch that threads could not share, and cost a small block per line.
 * Cold batches (encode_ordinary_batch_to_numpy), fresh processes interleaved, medians: the 7
 * Latin-script PUD languages on qwen, one thread 18.8 -> 17.8 ms, two 13.0 -> 12.4 (of 11);
 * RusLit-40's 4 MB on o200k 55.2 -> 48.8 (of 7), two threads 35.1 -> 32.3 (of 11); PUD English
 * (ASCII: read in place either way) and Chinese + Korean within 1% (of 21). */
static PyObject *Encoder_encode_texts(EncoderObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"texts", "preset", "dialect", "as_bytes", NULL};
    PyObject *texts;
    int preset, dialect, as_bytes = 0;
    if (ready(self) < 0 || !PyArg_ParseTupleAndKeywords(args, kw, "Oii|$p", names, &texts, &preset,
                                                        &dialect, &as_bytes))
        return NULL;
    /* a tuple of its own, so no other thread can free a str the encoder is reading while the
     * GIL is released (a list passed in could be cleared meanwhile) */
    PyObject *seq = PySequence_Tuple(texts);
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    size_t count = (size_t)(n ? n : 1);
    const void **ptr = PyMem_Malloc(count * sizeof(void *));
    int *kinds = PyMem_Malloc(count * sizeof(int));
    size_t *len = PyMem_Malloc(count * sizeof(size_t));
    size_t *ends = PyMem_Malloc(count * sizeof(size_t));
    PyObject *result = NULL;
    if (!ptr || !kinds || !len || !ends) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(seq, i);
        if (!PyUnicode_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto done;
        }
        if (str_ready(t) < 0) goto done;
        if (utf8_not_kept(t)) {
            ptr[i] = PyUnicode_DATA(t);
            kinds[i] = PyUnicode_KIND(t);
            len[i] = (size_t)PyUnicode_GET_LENGTH(t);
            continue;
        }
        Py_ssize_t size;
        ptr[i] = PyUnicode_AsUTF8AndSize(t, &size);
        if (!ptr[i]) goto done;
        kinds[i] = 0;
        len[i] = (size_t)size;
    }
    int status;
    size_t failed = 0, bad = 0;
    /* the texts stay alive and unchanged: seq holds them, and a str never changes */
    Py_BEGIN_ALLOW_THREADS
    status = tk_encode_texts(self->e, preset, dialect, ptr, kinds, len, (size_t)n, ends, &failed,
                             &bad);
    Py_END_ALLOW_THREADS
    if (status == TK_NOT_UTF8) {
        /* a surrogate: Python's own UTF-8 raises its UnicodeEncodeError */
        if (PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(seq, (Py_ssize_t)failed), NULL))
            PyErr_SetString(PyExc_SystemError, "a surrogate Python writes as UTF-8");
        goto done;
    }
    if (status) {
        job_error(status, bad);
        goto done;
    }
    size_t total;
    const uint32_t *ids = tk_encoder_output(self->e, &total);
    if (as_bytes) {
        result = flat_result(ids, total, ends, (size_t)n);
        goto done;
    }
    /* One list per text: each is a new container, and a few hundred of them start a garbage
     * collection that walks every id already placed (RusLit-40's 9,446 lines on o200k: 38-46
     * ms against 28 for the same ids in one list). None of them can be in a cycle. */
    int collecting = PyGC_Disable();
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result && i < n; i++) {
        size_t start = i ? ends[i - 1] : 0;
        PyObject *one = ids_list(self->tables, ids + start, ends[i] - start);
        if (!one) Py_CLEAR(result);
        else PyList_SET_ITEM(result, i, one);
    }
    if (collecting) PyGC_Enable();
done:
    PyMem_Free((void *)ptr);
    PyMem_Free(kinds);
    PyMem_Free(len);
    PyMem_Free(ends);
    Py_DECREF(seq);
    return result;
}

/* The lines of UTF-8 bytes as documents (tk_encode_lines), without a str per line: (uint32
 * ids of all documents, uint64 end offset of each). Bytes that are not UTF-8 raise
 * UnicodeDecodeError at the first bad byte, as bytes.decode() does. */
static PyObject *Encoder_encode_lines(EncoderObject *self, PyObject *args) {
    Py_buffer data;
    int preset, dialect;
    if (ready(self) < 0 || !PyArg_ParseTuple(args, "y*ii", &data, &preset, &dialect)) return NULL;
    const unsigned char *p = data.buf;
    size_t n = (size_t)data.len, lines = 1, n_docs = 0, bad = 0;
    for (const unsigned char *q = p; (q = memchr(q, '\n', n - (size_t)(q - p))) != NULL; q++)
        lines++;
    size_t *ends = PyMem_Malloc(lines * sizeof(size_t));
    PyObject *result = NULL;
    if (!ends) {
        PyErr_NoMemory();
        goto done;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = tk_encode_lines(self->e, preset, dialect, p, n, ends, &n_docs, &bad);
    Py_END_ALLOW_THREADS
    if (status == TK_NOT_UTF8) {
        PyObject *exc = PyObject_CallFunction(PyExc_UnicodeDecodeError, "sy#nns", "utf-8",
                                              (const char *)p, (Py_ssize_t)n, (Py_ssize_t)bad,
                                              (Py_ssize_t)bad + 1, "invalid UTF-8");
        if (exc) {
            PyErr_SetObject(PyExc_UnicodeDecodeError, exc);
            Py_DECREF(exc);
        }
        goto done;
    }
    if (status) {
        job_error(status, bad);
        goto done;
    }
    size_t total;
    const uint32_t *ids = tk_encoder_output(self->e, &total);
    result = flat_result(ids, total, ends, n_docs);
done:
    PyMem_Free(ends);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *Encoder_clear_cache(EncoderObject *self, PyObject *unused) {
    if (ready(self) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    tk_encoder_clear_cache(self->e);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *Encoder_get_cache_size(EncoderObject *self, void *c) {
    return PyLong_FromSize_t(self->e ? tk_encoder_cache_size(self->e) : 0);
}

static PyObject *Encoder_get_cache_clears(EncoderObject *self, void *c) {
    return PyLong_FromUnsignedLongLong(self->e ? tk_encoder_cache_clears(self->e) : 0);
}

static PyObject *Encoder_get_front_slots(EncoderObject *self, void *c) {
    return PyLong_FromSize_t(self->e ? tk_encoder_front_slots(self->e) : 0);
}

static PyObject *Encoder_get_window_bytes(EncoderObject *self, void *c) {
    return PyLong_FromSize_t(self->e ? tk_encoder_window_bytes(self->e) : 0);
}

static PyObject *Encoder_get_tables(EncoderObject *self, void *c) {
    if (ready(self) < 0) return NULL;
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
    if (self->e) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is already initialised");
        return -1;
    }
    tk_shared_cache *cache = shared == Py_None ? NULL : ((SharedCacheObject *)shared)->c;
    self->e = tk_encoder_new(((TablesObject *)tables)->t, cache, (size_t)limit);
    if (!self->e) {
        PyErr_NoMemory();
        return -1;
    }
    Py_INCREF(tables);
    self->tables = (TablesObject *)tables;
    if (shared != Py_None) {
        Py_INCREF(shared);
        self->shared = (SharedCacheObject *)shared;
    }
    return 0;
}

static void Encoder_dealloc(EncoderObject *self) {
    tk_encoder_free(self->e); /* before the tables and cache it reads */
    Py_XDECREF(self->tables);
    Py_XDECREF(self->shared);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Encoder_methods[] = {
    {"encode_chunks", (PyCFunction)(void (*)(void))Encoder_encode_chunks, METH_VARARGS | METH_KEYWORDS,
     "encode_chunks(text, chunks, *, as_bytes=False): ids of text split into chunks (list, or uint32 bytes)."},
    {"encode_text", (PyCFunction)(void (*)(void))Encoder_encode_text, METH_VARARGS | METH_KEYWORDS,
     "encode_text(text, preset, dialect, *, as_bytes=False, start=0, end=-1, chars=False): ids "
     "of a text, or of a range of its UTF-8 (of its characters with chars), split by scan.c."},
    {"encode_texts", (PyCFunction)(void (*)(void))Encoder_encode_texts, METH_VARARGS | METH_KEYWORDS,
     "encode_texts(texts, preset, dialect, *, as_bytes=False): one list of ids per text, split by "
     "scan.c (as_bytes: all ids as uint32 bytes and each text's end as uint64 bytes)."},
    {"encode_lines", (PyCFunction)Encoder_encode_lines, METH_VARARGS,
     "encode_lines(data, preset, dialect): the non-empty lines of UTF-8 bytes as documents (a CR "
     "ending a line dropped): (uint32 ids as bytes, uint64 end offsets as bytes)."},
    {"clear_cache", (PyCFunction)Encoder_clear_cache, METH_NOARGS, "Forget every cached chunk."},
    {NULL}};

static PyGetSetDef Encoder_getset[] = {
    {"cache_size", (getter)Encoder_get_cache_size, NULL, "Chunks in the cache.", NULL},
    {"cache_clears", (getter)Encoder_get_cache_clears, NULL, "Times the cache was emptied.", NULL},
    {"front_slots", (getter)Encoder_get_front_slots, NULL,
     "Slots of the front cache of short chunks (0 before the first); it grows between calls.",
     NULL},
    {"window_bytes", (getter)Encoder_get_window_bytes, NULL,
     "Bytes of the window a str's UTF-8 is written into (0 before the first str that is not "
     "ASCII).",
     NULL},
    {"tables", (getter)Encoder_get_tables, NULL, "The Tables this encoder reads.", NULL},
    {NULL}};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._encode.Encoder",
    .tp_basicsize = sizeof(EncoderObject),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(tables, *, cache_limit=2**20, cache=None): BPE encoding, one thread at a time.",
    .tp_methods = Encoder_methods,
    .tp_getset = Encoder_getset,
    .tp_init = (initproc)Encoder_init,
    .tp_new = PyType_GenericNew,
};

/* ============================== scan_text ============================== */
/* Does code point c need a byte flagged in missing (256 flags, one per byte value)? */
static inline int needs_missing(Py_UCS4 c, const unsigned char *m) {
    if (c < 0x80) return m[c];
    if (c < 0x800) return m[0xC0 | (c >> 6)] | m[0x80 | (c & 0x3F)];
    if (c < 0x10000)
        return m[0xE0 | (c >> 12)] | m[0x80 | ((c >> 6) & 0x3F)] | m[0x80 | (c & 0x3F)];
    return m[0xF0 | (c >> 18)] | m[0x80 | ((c >> 12) & 0x3F)] | m[0x80 | ((c >> 6) & 0x3F)] |
           m[0x80 | (c & 0x3F)];
}

#define TK_IS_SURROGATE(c) (((c) & 0xF800) == 0xD800)
#define TK_BMP_BAD(bmp, c) (((bmp)[(c) >> 3] >> ((c) & 7)) & 1)

/* scan_text(text, missing, bmp) -> (problem, offset), reading the str's code points in place:
 * (1, i) for the first surrogate; else (2, i) for the first character whose UTF-8 holds a
 * byte flagged in missing (256 flags); else (0, -1). bmp is the same answer for U+0000..U+FFFF
 * as a bitmap (8192 bytes), or empty when no byte is missing. The compiled form of
 * encode.TextCheck's search (the same answers as its Python form). */
static PyObject *scan_text(PyObject *mod, PyObject *args) {
    PyObject *text;
    Py_buffer flags, bitmap;
    if (!PyArg_ParseTuple(args, "Uy*y*", &text, &flags, &bitmap)) return NULL;
    if (flags.len != 256 || (bitmap.len != 0 && bitmap.len != 8192)) {
        PyBuffer_Release(&flags);
        PyBuffer_Release(&bitmap);
        PyErr_SetString(PyExc_ValueError, "missing must hold 256 flags and bmp 0 or 8192 bytes");
        return NULL;
    }
    const unsigned char *m = flags.buf, *bmp = bitmap.buf;
    int any = bitmap.len != 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), bad = -1, surrogate = -1;
    Py_BEGIN_ALLOW_THREADS /* a str never changes, and the caller holds a reference to it */
    if (kind == PyUnicode_1BYTE_KIND) { /* below U+0100: no surrogates */
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; any && i < n; i++)
            if (TK_BMP_BAD(bmp, p[i])) {
                bad = i;
                break;
            }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = data;
        Py_ssize_t i = 0;
        for (; any && bad < 0 && i < n; i++) { /* until the first missing byte */
            if (TK_IS_SURROGATE(p[i])) {
                surrogate = i;
                break;
            }
            if (TK_BMP_BAD(bmp, p[i])) bad = i;
        }
        if (surrogate < 0) /* the rest: surrogates only, in blocks the compiler can vectorize */
            for (; i < n; i += 64) {
                Py_ssize_t end = i + 64 < n ? i + 64 : n;
                int found = 0;
                for (Py_ssize_t k = i; k < end; k++) found |= TK_IS_SURROGATE(p[k]);
                if (found) {
                    while (!TK_IS_SURROGATE(p[i])) i++;
                    surrogate = i;
                    break;
                }
            }
    } else {
        const Py_UCS4 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = p[i];
            if (TK_IS_SURROGATE(c)) {
                surrogate = i;
                break;
            }
            if (any && bad < 0 && (c < 0x10000 ? TK_BMP_BAD(bmp, c) : needs_missing(c, m))) bad = i;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&flags);
    PyBuffer_Release(&bitmap);
    if (surrogate >= 0) return Py_BuildValue("(in)", 1, surrogate);
    return bad >= 0 ? Py_BuildValue("(in)", 2, bad) : Py_BuildValue("(in)", 0, (Py_ssize_t)-1);
}

/* utf8_windows(text, cap) -> bytes: the str's UTF-8 as the encoder writes it from its code points
 * (tk_ucs_to_utf8), cap bytes at a time (cap >= 4); ValueError naming the character index of a
 * surrogate. For tests: any window size, against str.encode. */
static PyObject *utf8_windows(PyObject *mod, PyObject *args) {
    PyObject *text;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "Un", &text, &cap) || str_ready(text) < 0) return NULL;
    if (cap < 4) {
        PyErr_SetString(PyExc_ValueError, "cap must be at least 4");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 4 + cap);
    if (!out) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    size_t w = 0, at = 0;
    for (;;) {
        ptrdiff_t k = tk_utf8_window(data, kind, (size_t)n, &at, o + w, (size_t)cap);
        if (k < 0) {
            Py_DECREF(out);
            return PyErr_Format(PyExc_ValueError, "surrogate at %zu", at);
        }
        if (k == 0) break;
        w += (size_t)k;
    }
    if (_PyBytes_Resize(&out, (Py_ssize_t)w) < 0) return NULL;
    return out;
}

static PyObject *fork_repairs(PyObject *mod, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(tk_fork_repair_count());
}

/* safe_cuts(text, dialect, parts) -> (list[int], int): up to parts - 1 increasing character
 * offsets of the text, each the first place from i/parts of the way on where tk_safe_cut allows
 * a cut (the pieces of the parts are then those of the whole; fewer where the text has fewer),
 * then the text's length: the parts' ends; and the bytes of the text's UTF-8. Python's UTF-8 of
 * the text is not made: an ASCII str is its own, any other is read a window at a time. */
static PyObject *safe_cuts(PyObject *mod, PyObject *args) {
    PyObject *text;
    int dialect;
    Py_ssize_t parts;
    if (!PyArg_ParseTuple(args, "Uin", &text, &dialect, &parts) || str_ready(text) < 0)
        return NULL;
    size_t total = (size_t)PyUnicode_GET_LENGTH(text), prev = 0, bytes = total;
    const void *data = PyUnicode_DATA(text);
    int kind = PyUnicode_KIND(text), ascii = PyUnicode_IS_ASCII(text);
    if (!ascii) bytes = tk_ucs_utf8_length(data, kind, total);
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 1; out && i < parts; i++) {
        size_t from = (size_t)((double)total * (double)i / (double)parts);
        if (from <= prev) from = prev + 1;
        if (from >= total) break;
        size_t cut = ascii ? tk_safe_cut(dialect, data, total, from)
                           : tk_ucs_safe_cut(dialect, data, kind, total, from);
        if (cut >= total) break;
        PyObject *v = PyLong_FromSize_t(cut);
        if (!v || PyList_Append(out, v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
        prev = cut;
    }
    PyObject *v = out ? PyLong_FromSize_t(total) : NULL;
    if (out && (!v || PyList_Append(out, v) < 0)) Py_CLEAR(out);
    Py_XDECREF(v);
    return out ? Py_BuildValue("(Nn)", out, (Py_ssize_t)bytes) : NULL;
}

/* join_lists(lists) -> list: the lists' items in order, in one new list. A list no one else
 * refers to (a part's ids, made for this join) gives its items up instead of having them
 * copied: the pointers move and the part is left empty, with no reference count touched. For
 * 4 MB of Russian (1M ids in 8 parts) extending one list by the others and freeing them took
 * ~8 ms after the threads were done. The new list's array is advised huge as ids_list's is:
 * GPT-2's 2.4M ids of RusLit-40 (19 MB of pointers) faulted in 4,700 small pages, 10.8 ms of a
 * 41 ms two-thread call, and two threads ran no faster than one. */
static PyObject *join_lists(PyObject *mod, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &seq)) return NULL;
    Py_ssize_t k = PyList_GET_SIZE(seq), total = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *part = PyList_GET_ITEM(seq, i);
        if (!PyList_Check(part)) {
            PyErr_SetString(PyExc_TypeError, "join_lists takes a list of lists");
            return NULL;
        }
        total += PyList_GET_SIZE(part);
    }
    PyObject *out = list_unfilled((size_t)total);
    if (!out) return NULL;
    PyObject **to = ((PyListObject *)out)->ob_item;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *part = PyList_GET_ITEM(seq, i);
        Py_ssize_t n = PyList_GET_SIZE(part);
        PyObject **from = ((PyListObject *)part)->ob_item;
        if (Py_REFCNT(part) == 1) { /* only `lists` holds it: its items move */
            memcpy(to, from, (size_t)n * sizeof(PyObject *));
            Py_SET_SIZE(part, 0);
        } else {
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_INCREF(from[j]);
                to[j] = from[j];
            }
        }
        to += n;
    }
    list_filled(out, (size_t)total);
    return out;
}

/* join_flat(parts): the flat results of runs of texts, in order, as one: each part is (ids,
 * offsets), buffers of uint32 ids and of its texts' int64 offsets into them (one more than its
 * texts, from 0 to its ids' count; else ValueError); the result is (ids as bytes, offsets as a
 * bytearray), the offsets moved past the ids before them. The ids' bytes are faulted in by one
 * call before they are copied (populated_bytes): numpy's join of two threads' runs was a new
 * array's page faults, a copy and a loop over the runs in Python, after both threads were
 * done. Cold two-thread batches, fresh processes interleaved, medians: the 7 Latin-script PUD
 * languages on qwen 12.29 -> 11.73 ms (of 21), RusLit-40 on o200k 34.5 -> 33.0 (of 11), the 13
 * languages the same (of 17). */
static PyObject *join_flat(PyObject *mod, PyObject *args) {
    PyObject *list;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &list)) return NULL;
    PyObject *seq = PySequence_Tuple(list); /* its own references: a buffer's getter may run code */
    if (!seq) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(seq);
    Py_buffer *views = PyMem_Calloc((size_t)(2 * k + 1), sizeof(Py_buffer));
    PyObject *result = NULL, *flat = NULL, *offs = NULL;
    Py_ssize_t got = 0, ids = 0, texts = 0;
    if (!views) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < 2 * k; got++) {
        PyObject *part = PyTuple_GET_ITEM(seq, got / 2);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) != 2) {
            PyErr_SetString(PyExc_TypeError, "join_flat takes a list of (ids, offsets) pairs");
            goto done;
        }
        PyObject *half = PyTuple_GET_ITEM(part, got % 2);
        if (PyObject_GetBuffer(half, &views[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
        Py_ssize_t item = got % 2 ? (Py_ssize_t)sizeof(int64_t) : (Py_ssize_t)sizeof(uint32_t);
        Py_ssize_t len = views[got].len / item;
        const int64_t *cuts = views[got].buf;
        if (views[got].len % item ||
            (got % 2 && (len < 1 || cuts[0] != 0 || cuts[len - 1] != views[got - 1].len / 4))) {
            PyErr_SetString(PyExc_ValueError,
                            "join_flat: ids are uint32, offsets int64 from 0 to the ids' count");
            got++;
            goto done;
        }
        Py_ssize_t *sum = got % 2 ? &texts : &ids, add = got % 2 ? len - 1 : len;
        if (*sum > PY_SSIZE_T_MAX / 8 - add) {
            PyErr_SetString(PyExc_OverflowError, "join_flat: too many ids or texts");
            got++;
            goto done;
        }
        *sum += add;
    }
    flat = populated_bytes((size_t)ids * sizeof(uint32_t));
    offs = PyByteArray_FromStringAndSize(NULL, (texts + 1) * (Py_ssize_t)sizeof(int64_t));
    if (!flat || !offs) goto done;
    unsigned char *to = (unsigned char *)PyBytes_AS_STRING(flat);
    int64_t *o = (int64_t *)(void *)PyByteArray_AS_STRING(offs), shift = 0;
    *o++ = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        const Py_buffer *v = &views[2 * i], *w = &views[2 * i + 1];
        if (v->len) memcpy(to, v->buf, (size_t)v->len);
        to += v->len;
        const int64_t *from = (const int64_t *)w->buf;
        Py_ssize_t cuts = w->len / (Py_ssize_t)sizeof(int64_t);
        for (Py_ssize_t j = 1; j < cuts; j++) *o++ = from[j] + shift;
        shift += v->len / (Py_ssize_t)sizeof(uint32_t);
    }
    result = PyTuple_Pack(2, flat, offs);
done:
    for (Py_ssize_t i = 0; views && i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    Py_XDECREF(flat);
    Py_XDECREF(offs);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef module_methods[] = {
    {"join_flat", join_flat, METH_VARARGS,
     "join_flat(parts) -> (bytes, bytearray): (uint32 ids, int64 offsets from 0) pairs as one."},
    {"join_lists", join_lists, METH_VARARGS,
     "join_lists(lists) -> list: the items of the lists in order (a list only `lists` holds is "
     "emptied: its items move)."},
    {"safe_cuts", safe_cuts, METH_VARARGS,
     "safe_cuts(text, dialect, parts) -> (list[int], int): character offsets where the text may "
     "be cut, then its length; and its UTF-8's length."},
    {"scan_text", scan_text, METH_VARARGS,
     "scan_text(text, missing, bmp) -> (problem, offset): 1 a surrogate, 2 a missing byte, 0 none."},
    {"utf8_windows", utf8_windows, METH_VARARGS,
     "utf8_windows(text, cap): the text's UTF-8 as the encoder writes it, cap bytes at a time."},
    {"fork_repairs", fork_repairs, METH_NOARGS,
     "fork_repairs() -> int: encoders and shared caches made usable again in this forked process."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_encode",
    .m_doc = "Compiled BPE encoding (see compiled.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__encode(void) {
    /* Eagerly, under the import lock and before any thread can encode: no once or lock of
       the scanner's tables or the fork handler can then be held when the process forks. */
    tk_scan_init();
    tk_encode_init();
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
        PyModule_AddIntConstant(m, "CACHED_CHUNK", TK_CACHED_CHUNK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
