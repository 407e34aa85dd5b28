"""Learning merges from a chunk table: the compiled learner, or the reference where it is not built.

Input: a :class:`~tokembed.tokenizer.chunks.ChunkTable`, the unique chunks in order of
first occurrence in the corpus, each with its multiplicity; memory is bounded by this
table, not by the corpus. :func:`learn_merges` runs the compiled learner
(``_native/learn.c``: the reference's rule over an indexed heap with lazily exact
first-encounter positions, int64 counts) and, where it is not built or
``TOKEMBED_PURE_PYTHON=1``, :func:`~tokembed.tokenizer.train_reference.learn_merges_reference`.
Both give the merges :func:`~tokembed.tokenizer.train_reference.train_reference` learns.

With ``base`` (tables of a trained tokenizer), learning continues it: every chunk starts as
the base's ids of it (the compiled encoder's, equal to the reference rule's) and learned
pair ``k`` makes id ``base.id_range + k``, past every id the base defines.

Example::

    >>> learn_merges(ChunkTable.from_counts({b"abab": 2, b"ab": 1}), merges=5)
    [(97, 98), (256, 256)]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokembed.tokenizer._native import load
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.compiled import compiled_tables
from tokembed.tokenizer.encode import encode_chunk_reference
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.train_reference import learn_merges_reference

__all__ = ["learn_merges"]

# Merges between two progress calls of the compiled learner: frequent enough for a live
# bar, rare enough that taking the GIL back costs nothing measurable.
_PROGRESS_EVERY = 32


def learn_merges(
    table: ChunkTable,
    *,
    merges: int,
    on_merge: Callable[[], None] | None = None,
    base: BPETables | None = None,
) -> list[tuple[int, int]]:
    """Pairs learned from ``table`` (chunks in first-occurrence order, with multiplicities).

    Equal to ``train_reference`` on the corpus the table came from; pair ``k``
    produced id ``256 + k`` (``base.id_range + k`` with a base, whose merges are applied
    to every chunk first). Stops early when no pair is left. ``on_merge`` is
    called once per learned merge (the compiled learner, which releases the GIL
    while it works, makes those calls in bursts of up to 32).

    Raises:
        UsageError(INVALID_ARGUMENT): (reference) ``merges`` is negative.
        TokenizerError(UNREPRESENTABLE_BYTE): a chunk holds a byte the base has no id for.
        OverflowError: (compiled learner) more than 2**31 - 1 chunks or 2**31 - 257
            merges (int32 ids), or a corpus of more than 2**63 - 1 adjacent pairs
            (int64 counts).
    """
    native = load("_learn")
    if native is None:
        extra = {} if base is None else {"base": base}
        return learn_merges_reference(table, merges=merges, on_merge=on_merge, **extra)
    start = {} if base is None else _start(table, base)

    def progress(n: int) -> None:
        if on_merge is not None:
            for _ in range(n):
                on_merge()

    pairs: list[tuple[int, int]] = native.learn(
        table.data,
        table.offsets,
        table.counts,
        merges,
        progress=None if on_merge is None else progress,
        every=_PROGRESS_EVERY,
        **start,
    )
    return pairs


def _start(table: ChunkTable, base: BPETables) -> dict[str, np.ndarray]:
    """The compiled learner's start from ``base``: every chunk's base ids at its byte offset
    (``ids``), how many (``lens``) and each id's piece length (``pieces``)."""
    pieces = np.zeros(base.id_range, dtype=np.int64)
    for i, piece in base.pieces.items():
        pieces[i] = len(piece)
    flat = _base_ids(table, base)
    # Each chunk's ids tile its bytes, so the tokens of chunks 0..w are those whose last
    # byte (running sum of piece lengths) lies before the end of chunk w.
    ends = np.cumsum(pieces[flat])
    cut = np.searchsorted(ends, table.offsets[1:], side="right")
    first = np.concatenate(([0], cut[:-1]))
    lens = (cut - first).astype(np.int64)
    ids = np.zeros(len(table.data), dtype=np.int32)
    # Token t of chunk w goes to offsets[w] + (t - first[w]).
    owner = np.repeat(np.arange(len(table), dtype=np.int64), lens)
    ids[table.offsets[:-1][owner] + np.arange(len(flat)) - first[owner]] = flat
    return {"ids": ids, "lens": lens, "pieces": pieces}


def _base_ids(table: ChunkTable, base: BPETables) -> np.ndarray:
    """The base's ids of every chunk, concatenated (the compiled encoder where it is built)."""
    missing = base.missing_bytes()
    if missing:
        at = np.flatnonzero(np.isin(np.frombuffer(table.data, dtype=np.uint8), missing))
        if len(at):
            chunk = int(np.searchsorted(table.offsets, at[0], side="right")) - 1
            encode_chunk_reference(base, table.chunk(chunk))  # raises UNREPRESENTABLE_BYTE
    compiled = compiled_tables(base)
    native = load("_encode")
    if compiled is None or native is None:
        flat = [i for chunk in table.chunks() for i in encode_chunk_reference(base, chunk)]
        return np.asarray(flat, dtype=np.int64)
    text = table.data.decode("utf-8")
    chunks = [chunk.decode("utf-8") for chunk in table.chunks()]
    out = native.Encoder(compiled).encode_chunks(text, chunks, as_bytes=True)
    return np.frombuffer(out, dtype=np.uint32).astype(np.int64)
