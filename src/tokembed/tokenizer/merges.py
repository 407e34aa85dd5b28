"""Applying merges to a sequence of ids: the helpers the reference trainer and encoder share.

A merge ``(left, right, result)`` of rank ``k`` replaces adjacent ``left, right``
by ``result``. Training applies a newly learned merge to every non-overlapping
occurrence, left to right; encoding joins one pair at a time, the leftmost of the
smallest rank (:func:`tokembed.tokenizer.encode.encode_chunk_reference`), which gives
the same ids for every list in which a merge's parts rank below it (trained lists,
real rank files). The helpers:

* :func:`replace_pair` — one training step on a list;
* :func:`compiled_rank_merges` — a rank file's merge list from the compiled deriver;
* :func:`merges_ordered` — whether every merge only joins bytes or earlier results,
  which is when merges fire in rank order and a prefix of the list is a tokenizer.

Example::

    >>> replace_pair([97, 98, 97, 98, 99], (97, 98), 256)
    [256, 256, 99]
"""

from __future__ import annotations

from collections.abc import Mapping

from tokembed.tokenizer._native import load
from tokembed.tokenizer.model import BPETables

__all__ = ["NO_RANK", "compiled_rank_merges", "merges_ordered", "replace_pair"]

NO_RANK = 1 << 62  # larger than any merge rank: "this pair is not a merge"


def replace_pair(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with the non-overlapping occurrences of ``pair`` (left to right) replaced."""
    a, b = pair
    n = len(ids)
    out: list[int] = []
    i = 0
    while i < n:
        if ids[i] == a and i + 1 < n and ids[i + 1] == b:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def merges_ordered(tables: BPETables) -> bool:
    """True when every merge joins bytes or results of earlier merges.

    Trained and tiktoken-derived tables are ordered; a hand-made table may not be.
    For ordered tables the merges that fire while encoding have non-decreasing
    ranks, because a new pair always contains the id just made, whose own merges
    come later in the list.
    """
    made_at = {result: k for k, (_, _, result) in enumerate(tables.merges)}
    return all(
        made_at.get(left, -1) < k and made_at.get(right, -1) < k
        for k, (left, right, _) in enumerate(tables.merges)
    )


def compiled_rank_merges(pieces: Mapping[int, bytes]) -> list[tuple[int, int, int]] | None:
    """The merges of ``pieces`` (rank -> bytes) from the compiled twin of
    :func:`tokembed.tokenizer.formats.ranks.lowest_rank_split` (``_native/ranks_core.c``, a heap per piece), or None where
    it is not built or a byte has no rank (the reference then fails as it always did)."""
    native = load("_learn")
    if native is None or sum(len(p) == 1 for p in pieces.values()) != 256:
        return None
    import numpy as np

    order = sorted(pieces)
    chunks = [pieces[r] for r in order]
    offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in chunks], out=offsets[1:])
    left, right = native.rank_splits(b"".join(chunks), offsets)
    lefts, rights = np.frombuffer(left, dtype=np.int64), np.frombuffer(right, dtype=np.int64)
    keep = np.flatnonzero(lefts >= 0)
    rank_of = np.asarray(order, dtype=np.int64)
    return list(
        zip(
            rank_of[lefts[keep]].tolist(),
            rank_of[rights[keep]].tolist(),
            rank_of[keep].tolist(),
            strict=True,
        )
    )
