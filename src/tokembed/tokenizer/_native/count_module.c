/* tokembed.tokenizer._native._count: the Python binding of count_core (chunk counting with the
   compiled scanner) and of the scanner's piece ends and safe cuts. Scanning releases the GIL;
   a Counter is used by one thread at a time (a second concurrent call raises). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "count_core.h"
#include "scan.h"

typedef struct {
    PyObject_HEAD
    int preset, dialect;
    int busy;   /* a call is scanning into this counter (GIL released) */
    int ready;  /* __init__ ran */
    int failed; /* out of memory while the GIL was released */
    tk_counter c;
} Counter;

static int Counter_init(Counter *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"preset", "dialect", NULL};
    int preset, dialect;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ii", names, &preset, &dialect)) return -1;
    if (preset < 0 || preset >= TK_NPRESETS || dialect < 0 || dialect >= TK_NDIALECTS) {
        PyErr_Format(PyExc_ValueError, "unknown preset %d or dialect %d", preset, dialect);
        return -1;
    }
    if (self->ready) {
        PyErr_SetString(PyExc_RuntimeError, "a Counter is initialised once");
        return -1;
    }
    self->preset = preset;
    self->dialect = dialect;
    if (tk_counter_init(&self->c)) {
        PyErr_NoMemory();
        return -1;
    }
    self->ready = 1;
    return 0;
}

static void Counter_dealloc(Counter *self) {
    tk_counter_free(&self->c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int claim(Counter *self) {
    if (!self->ready) {
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
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tk_counter_add(&self->c, self->preset, self->dialect, view.buf, (size_t)view.len);
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
    int rc = tk_counter_merge(&self->c, &other->c);
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
    const tk_counter *c = &self->c;
    PyObject *data = PyBytes_FromStringAndSize((const char *)c->blob, (Py_ssize_t)c->blob_len);
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)((c->n + 1) * 8));
    PyObject *counts = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(c->n * 8));
    if (!data || !offsets || !counts) {
        Py_XDECREF(data);
        Py_XDECREF(offsets);
        Py_XDECREF(counts);
        return NULL;
    }
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(offsets);
    int64_t *k = (int64_t *)PyByteArray_AS_STRING(counts);
    for (size_t e = 0; e < c->n; e++) {
        o[e] = c->entries[e].off;
        k[e] = c->entries[e].count;
    }
    o[c->n] = (int64_t)c->blob_len;
    return Py_BuildValue("(NNN)", data, offsets, counts);
}

static Py_ssize_t Counter_len(Counter *self) { return (Py_ssize_t)self->c.n; }

static PyObject *Counter_nbytes(Counter *self, void *unused) {
    return PyLong_FromSize_t(tk_counter_nbytes(&self->c));
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
    .tp_doc = "Counter(preset, dialect): chunk counts of texts in first-encounter order.",
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

/* piece_ends(text, preset, dialect) -> list[int]: the byte offset where each piece ends. */
static PyObject *piece_ends(PyObject *mod, PyObject *args) {
    Py_buffer view;
    int preset, dialect;
    if (!PyArg_ParseTuple(args, "y*ii", &view, &preset, &dialect)) return NULL;
    PyObject *out = PyList_New(0);
    if (out && tk_scan(preset, dialect, view.buf, (size_t)view.len, collect_end, out)) Py_CLEAR(out);
    PyBuffer_Release(&view);
    return out;
}

/* safe_cut(text, dialect, start) -> int: see tk_safe_cut. */
static PyObject *safe_cut(PyObject *mod, PyObject *args) {
    Py_buffer view;
    int dialect;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "y*in", &view, &dialect, &start)) return NULL;
    size_t p = tk_safe_cut(dialect, view.buf, (size_t)view.len, start < 0 ? 0 : (size_t)start);
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
    tk_scan_init(); /* eagerly, before any thread can scan: nothing to inherit locked at fork */
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
