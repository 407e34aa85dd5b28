"""Applying merges to a sequence of ids: the helpers the reference trainer and encoder share.

A merge ``(left, right, result)`` of rank ``k`` replaces adjacent ``left, right``
by ``result``. The BPE rule used everywhere in tokembed: while any adjacent pair
is a merge, take the pair of smallest rank and replace its non-overlapping
occurrences, left to right. This module holds that rule once:

* :func:`replace_pair` — one step on a list;
* :func:`merges_ordered` — whether every merge only joins bytes or earlier results,
  which is when merges fire in rank order and a prefix of the list is a tokenizer.

Example::

    >>> replace_pair([97, 98, 97, 98, 99], (97, 98), 256)
    [256, 256, 99]
"""

from __future__ import annotations

from tokembed.tokenizer.model import BPETables

__all__ = ["NO_RANK", "merges_ordered", "replace_pair"]

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
