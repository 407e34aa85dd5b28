"""Learning merges from a chunk table: the compiled learner, or the reference where it is not built.

Input: a :class:`~tokembed.tokenizer.chunks.ChunkTable`, the unique chunks in order of
first occurrence in the corpus, each with its multiplicity; memory is bounded by this
table, not by the corpus. :func:`learn_merges` runs the compiled learner
(``_native/learn.c``: the reference's rule over an indexed heap with lazily exact
first-encounter positions, int64 counts) and, where it is not built or
``TOKEMBED_PURE_PYTHON=1``, :func:`~tokembed.tokenizer.train_reference.learn_merges_reference`.
Both give the merges :func:`~tokembed.tokenizer.train_reference.train_reference` learns.

Example::

    >>> learn_merges(ChunkTable.from_counts({b"abab": 2, b"ab": 1}), merges=5)
    [(97, 98), (256, 256)]
"""

from __future__ import annotations

from collections.abc import Callable

from tokembed.tokenizer._native import load
from tokembed.tokenizer.chunks import ChunkTable
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
) -> list[tuple[int, int]]:
    """Pairs learned from ``table`` (chunks in first-occurrence order, with multiplicities).

    Equal to ``train_reference`` on the corpus the table came from; pair ``k``
    produced id ``256 + k``. Stops early when no pair is left. ``on_merge`` is
    called once per learned merge (the compiled learner, which releases the GIL
    while it works, makes those calls in bursts of up to 32).

    Raises:
        UsageError(INVALID_ARGUMENT): (reference) ``merges`` is negative.
        OverflowError: (compiled learner) more than 2**31 - 1 chunks or 2**31 - 257
            merges (int32 ids), or a corpus of more than 2**63 - 1 adjacent pairs
            (int64 counts).
    """
    native = load("_learn")
    if native is None:
        return learn_merges_reference(table, merges=merges, on_merge=on_merge)

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
    )
    return pairs
