/* tokembed.tokenizer._native._count: pre-tokenize texts with the compiled preset scanner and
   count their pieces in first-encounter order (the compiled twin of _count.py's Python path).

   A Counter holds an insertion-ordered hash table of chunk bytes: the chunks are appended to
   one growing blob in the order they are first met, so the blob, their offsets and their
   counts are already the three buffers of a ChunkTable. Scanning releases the GIL; one Counter
   is used by one thread at a time (a second concurrent call raises), and counters filled by
   threads over consecutive blocks are merged in block order, which keeps first-encounter order. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

#include "scan.h"

typedef struct {
    uint64_t hash;
    int64_t off;   /* into the blob */
    int64_t len;
    int64_t count;
} Entry;

typedef struct {
    PyObject_HEAD
    int preset, engine;
    int busy;               /* a call is scanning into this counter (GIL released) */
    unsigned char *blob;    /* distinct chunks, concatenated in first-encounter order */
    size_t blob_len, blob_cap;
    Entry *entries;
    size_t n, entries_cap;
    uint32_t *slots;        /* entry index + 1; 0 = empty; size a power of two */
    size_t mask;
    int failed;             /* out of memory while the GIL was released */
} Counter;

static int grow_slots(Counter *c) {
    size_t size = c->mask ? (c->mask + 1) * 2 : 1024;
    uint32_t *slots = calloc(size, sizeof *slots);
    if (!slots) return -1;
    for (size_t e = 0; e < c->n; e++) {
        size_t s = c->entries[e].hash & (size - 1);
        while (slots[s]) s = (s + 1) & (size - 1);
        slots[s] = (uint32_t)(e + 1);
    }
    free(c->slots);
    c->slots = slots;
    c->mask = size - 1;
    return 0;
}

/* Add `count` occurrences of p[0:n); -1 when memory runs out (or past 2^32 - 1 chunks). */
static int add_chunk(Counter *c, const unsigned char *p, size_t n, int64_t count) {
    uint64_t h = tk_hash_bytes(p, n);
    size_t s = h & c->mask;
    for (uint32_t k; (k = c->slots[s]); s = (s + 1) & c->mask) {
        Entry *e = &c->entries[k - 1];
        if (e->hash == h && (size_t)e->len == n && memcmp(c->blob + e->off, p, n) == 0) {
            e->count += count;
            return 0;
        }
    }
    if (c->n >= UINT32_MAX - 1) return -1;
    if (c->n == c->entries_cap) {
        size_t cap = c->entries_cap ? c->entries_cap * 2 : 1024;
        Entry *entries = realloc(c->entries, cap * sizeof *entries);
        if (!entries) return -1;
        c->entries = entries;
        c->entries_cap = cap;
    }
    if (c->blob_len + n > c->blob_cap) {
        size_t cap = c->blob_cap ? c->blob_cap * 2 : 1 << 16;
        while (cap < c->blob_len + n) cap *= 2;
        unsigned char *blob = realloc(c->blob, cap);
        if (!blob) return -1;
        c->blob = blob;
        c->blob_cap = cap;
    }
    memcpy(c->blob + c->blob_len, p, n);
    c->entries[c->n] = (Entry){h, (int64_t)c->blob_len, (int64_t)n, count};
    c->blob_len += n;
    c->slots[s] = (uint32_t)(++c->n);
    if (2 * c->n > c->mask) return grow_slots(c); /* keep the load at most 1/2 */
    return 0;
}

typedef struct {
    Counter *c;
    const unsigned char *text;
} CountCtx;

static int count_piece(void *ctx, size_t start, size_t end) {
    CountCtx *k = ctx;
    return add_chunk(k->c, k->text + start, end - start, 1);
}

static int Counter_init(Counter *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"preset", "engine", NULL};
    int preset, engine;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ii", names, &preset, &engine)) return -1;
    if (preset < TK_PRESET_TEACHING || preset >= TK_NPRESETS || engine < TK_ENGINE_TIKTOKEN ||
        engine > TK_ENGINE_HUGGINGFACE) {
        PyErr_Format(PyExc_ValueError, "unknown preset %d or engine %d", preset, engine);
        return -1;
    }
    if (self->slots) {
        PyErr_SetString(PyExc_RuntimeError, "a Counter is initialised once");
        return -1;
    }
    self->preset = preset;
    self->engine = engine;
    if (grow_slots(self)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void Counter_dealloc(Counter *self) {
    free(self->blob);
    free(self->entries);
    free(self->slots);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int claim(Counter *self) {
    if (!self->slots) {
        PyErr_SetString(PyExc_RuntimeError, "Counter.__init__ was not called");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a Counter is used by one thread at a time");
        return -1;
    }
    if (self->failed) {
        PyErr_NoMemory();
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* add(text: bytes-like UTF-8): count the pieces of one text. */
static PyObject *Counter_add(Counter *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (claim(self) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    CountCtx ctx = {self, view.buf};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tk_scan(self->preset, self->engine, view.buf, (size_t)view.len, count_piece, &ctx);
    Py_END_ALLOW_THREADS
    self->busy = 0;
    PyBuffer_Release(&view);
    if (rc) {
        self->failed = 1;
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* merge(other: Counter): add other's chunks and counts, in other's order. */
static PyObject *Counter_merge(Counter *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, Py_TYPE(self))) {
        PyErr_SetString(PyExc_TypeError, "merge() takes a Counter");
        return NULL;
    }
    Counter *other = (Counter *)arg;
    if (other == self) {
        PyErr_SetString(PyExc_ValueError, "a Counter cannot merge itself");
        return NULL;
    }
    if (claim(self) < 0) return NULL;
    int rc = 0;
    for (size_t e = 0; e < other->n && !rc; e++) {
        Entry *x = &other->entries[e];
        rc = add_chunk(self, other->blob + x->off, (size_t)x->len, x->count);
    }
    self->busy = 0;
    if (rc) {
        self->failed = 1;
        return PyErr_NoMemory();
    }
    Py_RETURN_NONE;
}

/* buffers() -> (data, offsets, counts): the chunk blob as bytes, then len + 1 int64 offsets and
   len int64 counts as bytearrays (numpy.frombuffer makes writable arrays of them, no copy). */
static PyObject *Counter_buffers(Counter *self, PyObject *unused) {
    if (claim(self) < 0) return NULL;
    self->busy = 0;
    PyObject *data = PyBytes_FromStringAndSize((const char *)self->blob, (Py_ssize_t)self->blob_len);
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((self->n + 1) * 8));
    PyObject *counts = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(self->n * 8));
    if (!data || !offsets || !counts) {
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        Py_XDECREF(counts);
        return NULL;
    }
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(offsets);
    int64_t *k = (int64_t *)PyByteArray_AS_STRING(counts);
    for (size_t e = 0; e < self->n; e++) {
        o[e] = self->entries[e].off;
        k[e] = self->entries[e].count;
    }
    o[self->n] = (int64_t)self->blob_len;
    return Py_BuildValue("(NNN)", data, offsets, counts);
}

static Py_ssize_t Counter_len(Counter *self) { return (Py_ssize_t)self->n; }

static PyObject *Counter_nbytes(Counter *self, void *unused) {
    size_t held = self->blob_cap + self->entries_cap * sizeof(Entry) +
                  (self->slots ? (self->mask + 1) * sizeof(uint32_t) : 0);
    return PyLong_FromSize_t(held);
}

static PyMethodDef Counter_methods[] = {
    {"add", (PyCFunction)Counter_add, METH_O, "Count the pieces of one UTF-8 text (bytes-like)."},
    {"merge", (PyCFunction)Counter_merge, METH_O, "Add another Counter's chunks, in its order."},
    {"buffers", (PyCFunction)Counter_buffers, METH_NOARGS,
     "(data bytes, offsets and counts as int64 bytearrays) of the chunk table."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Counter_getset[] = {
    {"nbytes", (getter)Counter_nbytes, NULL, "Bytes of memory the table holds.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Counter_seq = {.sq_length = (lenfunc)Counter_len};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tokembed.tokenizer._native._count.Counter",
    .tp_basicsize = sizeof(Counter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Counter(preset, engine): chunk counts of texts in first-encounter order.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_methods = Counter_methods,
    .tp_getset = Counter_getset,
    .tp_as_sequence = &Counter_seq,
};

static int collect_end(void *ctx, size_t start, size_t end) {
    PyObject *n = PyLong_FromSize_t(end);
    if (!n) return -1;
    int rc = PyList_Append((PyObject *)ctx, n);
    Py_DECREF(n);
    return rc;
}

/* piece_ends(text, preset, engine) -> list[int]: the byte offset where each piece ends. */
static PyObject *piece_ends(PyObject *mod, PyObject *args) {
    Py_buffer view;
    int preset, engine;
    if (!PyArg_ParseTuple(args, "y*ii", &view, &preset, &engine)) return NULL;
    PyObject *out = PyList_New(0);
    if (out && tk_scan(preset, engine, view.buf, (size_t)view.len, collect_end, out)) Py_CLEAR(out);
    PyBuffer_Release(&view);
    return out;
}

/* safe_cut(text, engine, start) -> int: see tk_safe_cut. */
static PyObject *safe_cut(PyObject *mod, PyObject *args) {
    Py_buffer view;
    int engine;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*in", &view, &engine, &start)) return NULL;
    size_t p = tk_safe_cut(engine, view.buf, (size_t)view.len, start < 0 ? 0 : (size_t)start);
    PyBuffer_Release(&view);
    return PyLong_FromSize_t(p);
}

static PyMethodDef module_methods[] = {
    {"piece_ends", piece_ends, METH_VARARGS, "Byte offsets where the preset's pieces end."},
    {"safe_cut", safe_cut, METH_VARARGS, "First offset >= start where the text may be cut."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_count",
    .m_doc = "Compiled preset pre-tokenization and chunk counting.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__count(void) {
    if (PyType_Ready(&CounterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CounterType);
    if (PyModule_AddObject(m, "Counter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(&CounterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
