/* tokembed.tokenizer._native._learn: the Python binding of learn_core (merges learned from a
   chunk table) and ranks_core (merges derived from a rank file): buffers in, pairs out, the GIL
   released while the cores work. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include "learn_core.h"
#include "ranks_core.h"

static int int_view(PyObject *obj, Py_buffer *view, const char *name, Py_ssize_t size) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<') f++;
    int ok = size == 8 ? !strcmp(f, "l") || !strcmp(f, "q") : !strcmp(f, "i");
    if (view->itemsize != size || !ok) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous int%d buffer, got format %s", name,
                     (int)(size * 8), view->format ? view->format : "B");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int int64_view(PyObject *obj, Py_buffer *view, const char *name) {
    return int_view(obj, view, name, 8);
}

/* The Python error of a refused table. */
static void table_error(tk_learn_error err) {
    switch (err.code) {
    case TK_LEARN_TOO_MANY_CHUNKS:
        PyErr_Format(PyExc_OverflowError, "%lld chunks: at most 2**31 - 1 are supported",
                     (long long)err.value);
        break;
    case TK_LEARN_BAD_ENDS:
        PyErr_SetString(PyExc_ValueError, "offsets must start at 0 and end at len(data)");
        break;
    case TK_LEARN_DECREASING:
        PyErr_Format(PyExc_ValueError, "offsets decrease at chunk %lld", (long long)err.chunk);
        break;
    case TK_LEARN_BAD_COUNT:
        PyErr_Format(PyExc_ValueError, "chunk %lld has count %lld; counts must be positive",
                     (long long)err.chunk, (long long)err.value);
        break;
    case TK_LEARN_BAD_START:
        PyErr_Format(PyExc_ValueError, "the start ids of chunk %lld do not spell it (id %lld)",
                     (long long)err.chunk, (long long)err.value);
        break;
    default:
        PyErr_SetString(PyExc_OverflowError,
                        "the corpus holds more than 2**63 - 1 adjacent pairs: counts could overflow");
    }
}

/* progress(n) with the GIL held; 0, or -1 when it raised. */
static int report(PyObject *progress, Py_ssize_t n) {
    if (progress == Py_None || n == 0) return 0;
    PyObject *r = PyObject_CallFunction(progress, "n", n);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

static PyObject *learn(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"data",  "offsets", "counts", "merges", "progress",
                             "every", "ids",     "lens",   "pieces", NULL};
    PyObject *data_obj, *off_obj, *cnt_obj, *progress = Py_None;
    PyObject *ids_obj = Py_None, *lens_obj = Py_None, *pieces_obj = Py_None;
    Py_ssize_t merges, every = 64;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOn|On$OOO:learn", kwlist, &data_obj,
                                     &off_obj, &cnt_obj, &merges, &progress, &every, &ids_obj,
                                     &lens_obj, &pieces_obj))
        return NULL;
    int has_start = ids_obj != Py_None;
    if (has_start != (lens_obj != Py_None) || has_start != (pieces_obj != Py_None)) {
        PyErr_SetString(PyExc_TypeError, "pass ids, lens and pieces together, or none of them");
        return NULL;
    }
    if (merges < 0) {
        PyErr_Format(PyExc_ValueError, "merges must be >= 0, got %zd", merges);
        return NULL;
    }
    if (every < 1) {
        PyErr_Format(PyExc_ValueError, "every must be >= 1, got %zd", every);
        return NULL;
    }
    if (progress != Py_None && !PyCallable_Check(progress)) {
        PyErr_SetString(PyExc_TypeError, "progress must be callable or None");
        return NULL;
    }
    Py_buffer data, off, cnt;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (int64_view(off_obj, &off, "offsets") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (int64_view(cnt_obj, &cnt, "counts") < 0) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&off);
        return NULL;
    }
    Py_buffer ids = {0}, lens = {0}, pieces = {0};
    tk_learn_start start = {0};
    PyObject *result = NULL;
    int32_t *learned = NULL;
    tk_learner *learner = NULL;
    if (has_start) {
        if (int_view(ids_obj, &ids, "ids", 4) < 0) goto done;
        if (int64_view(lens_obj, &lens, "lens") < 0) goto done;
        if (int64_view(pieces_obj, &pieces, "pieces") < 0) goto done;
    }
    const int64_t *offsets = off.buf, *counts = cnt.buf;
    int64_t n_chunks = cnt.len / 8, room;
    if (off.len / 8 != n_chunks + 1) {
        PyErr_SetString(PyExc_ValueError, "offsets must have one entry more than counts");
        goto done;
    }
    tk_learn_error err = tk_learn_check(offsets, counts, n_chunks, data.len, &room);
    if (err.code != TK_LEARN_OK) {
        table_error(err);
        goto done;
    }
    Py_ssize_t first_id = 256;
    if (has_start) {
        if (ids.len / 4 != data.len || lens.len / 8 != n_chunks) {
            PyErr_SetString(PyExc_ValueError,
                            "ids must have one entry per byte of data and lens one per chunk");
            goto done;
        }
        if (pieces.len / 8 > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "pieces: ids are int32, at most 2**31 - 1");
            goto done;
        }
        first_id = pieces.len / 8;
        start.ids = ids.buf;
        start.lens = lens.buf;
        start.pieces = pieces.buf;
        start.first_id = (int32_t)first_id;
        err = tk_learn_check_start(offsets, n_chunks, &start);
        if (err.code != TK_LEARN_OK) {
            table_error(err);
            goto done;
        }
    }
    if (merges > room) merges = room; /* a huge request on a small corpus allocates nothing */
    if (merges > INT32_MAX - first_id) {
        PyErr_Format(PyExc_OverflowError, "%zd merges past id %zd: ids are int32 (below 2**31)",
                     merges, first_id);
        goto done;
    }
    learned = malloc((size_t)(merges ? merges : 1) * 2 * sizeof(int32_t));
    if (!learned) {
        PyErr_NoMemory();
        goto done;
    }
    int failed = 0, stop = 0;
    Py_ssize_t k = 0, reported = 0;
    PyThreadState *ts = PyEval_SaveThread();
    learner = tk_learner_new(data.buf, data.len, offsets, counts, n_chunks, merges,
                             has_start ? &start : NULL);
    failed = learner == NULL;
    while (!failed && !stop && k < merges) {
        int got = tk_learner_step(learner, &learned[2 * k], &learned[2 * k + 1]);
        if (got == 0) break;
        failed = got < 0;
        k++;
        if (!failed && k % every == 0) { /* the GIL is taken only here, between merges */
            PyEval_RestoreThread(ts);
            stop = PyErr_CheckSignals() < 0 || report(progress, k - reported) < 0;
            reported = k;
            ts = PyEval_SaveThread();
        }
    }
    PyEval_RestoreThread(ts);
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (stop || report(progress, k - reported) < 0) goto done;
    result = PyList_New(k);
    if (!result) goto done;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *pair = Py_BuildValue("(ii)", learned[2 * i], learned[2 * i + 1]);
        if (!pair) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, pair);
    }
done:
    tk_learner_free(learner);
    free(learned);
    PyBuffer_Release(&data);
    PyBuffer_Release(&off);
    PyBuffer_Release(&cnt);
    if (ids.obj) PyBuffer_Release(&ids);
    if (lens.obj) PyBuffer_Release(&lens);
    if (pieces.obj) PyBuffer_Release(&pieces);
    return result;
}

PyDoc_STRVAR(learn_doc,
             "learn(data, offsets, counts, merges, progress=None, every=64, *, ids=None, lens=None,\n"
             "      pieces=None) -> list[tuple[int, int]]\n\n"
             "BPE merges over a chunk table: chunk i is data[offsets[i]:offsets[i + 1]] (offsets and\n"
             "counts are int64 buffers, chunks in first-encounter order) occurring counts[i] times.\n"
             "Pair k makes id 256 + k; ties go to the pair met first in the corpus; stops early when\n"
             "no pair is left. progress(n) is called with the GIL held after every `every` merges\n"
             "(n = merges since the last call) and once at the end for the rest; the GIL is released\n"
             "in between. With ids (int32, one slot per byte of data), lens and pieces (int64), learning\n"
             "starts from a base tokenizer's ids: chunk i is ids[offsets[i]:offsets[i] + lens[i]], id j\n"
             "spells pieces[j] bytes, and pair k makes id len(pieces) + k. Raises ValueError/TypeError for a malformed table, OverflowError when\n"
             "counts could overflow int64, MemoryError, or what progress raises.");

static PyObject *rank_splits(PyObject *self, PyObject *args) {
    PyObject *data_obj, *off_obj;
    if (!PyArg_ParseTuple(args, "OO:rank_splits", &data_obj, &off_obj)) return NULL;
    Py_buffer data, off;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (int64_view(off_obj, &off, "offsets") < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL, *left = NULL, *right = NULL;
    int64_t n = off.len / 8 - 1;
    const int64_t *offsets = off.buf;
    if (n < 0 || offsets[0] != 0 || offsets[n] != data.len) {
        PyErr_SetString(PyExc_ValueError, "offsets must run from 0 to len(data)");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        if (offsets[i + 1] <= offsets[i]) {
            PyErr_Format(PyExc_ValueError, "piece %lld is empty or its offsets decrease",
                         (long long)i);
            goto done;
        }
    }
    left = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    right = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!left || !right) goto done;
    int status;
    int64_t *l = (int64_t *)PyBytes_AS_STRING(left), *r = (int64_t *)PyBytes_AS_STRING(right);
    Py_BEGIN_ALLOW_THREADS
    status = tk_rank_splits(data.buf, offsets, n, l, r);
    Py_END_ALLOW_THREADS
    if (status == TK_RANKS_NO_MEMORY) {
        PyErr_NoMemory();
        goto done;
    }
    if (status == TK_RANKS_TOO_LONG) {
        PyErr_SetString(PyExc_OverflowError, "a piece of 2**32 bytes or more, or 2**32 pieces");
        goto done;
    }
    result = PyTuple_Pack(2, left, right);
done:
    Py_XDECREF(left);
    Py_XDECREF(right);
    PyBuffer_Release(&data);
    PyBuffer_Release(&off);
    return result;
}

PyDoc_STRVAR(rank_splits_doc,
             "rank_splits(data, offsets) -> (left, right)\n\n"
             "Piece i is data[offsets[i]:offsets[i + 1]] (offsets an int64 buffer; pieces distinct,\n"
             "non-empty and in rank order). For each piece, the indices of the two pieces tiktoken's\n"
             "joining leaves in its bytes when every other piece takes part: left and right are bytes\n"
             "of native int64, -1 for single bytes and for pieces where more than two parts remain.\n"
             "Raises ValueError for bad offsets, OverflowError past 2**32, MemoryError.");

static PyMethodDef methods[] = {
    {"learn", (PyCFunction)(void (*)(void))learn, METH_VARARGS | METH_KEYWORDS, learn_doc},
    {"rank_splits", rank_splits, METH_VARARGS, rank_splits_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_learn",
    .m_doc = "Compiled BPE merge learning (the twin of train_reference.learn_merges_reference) and\n"
             "merge derivation from rank files (the twin of formats.ranks.lowest_rank_split).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__learn(void) { return PyModule_Create(&module); }
