"""Applying merges to a sequence of ids: the helpers the trainer, the encoder and the
tiktoken bridge share.

A merge ``(left, right, result)`` of rank ``k`` replaces adjacent ``left, right``
by ``result``. The BPE rule used everywhere in tokembed: while any adjacent pair
is a merge, take the pair of smallest rank and replace its non-overlapping
occurrences, left to right. This module holds that rule once:

* :func:`replace_pair` — one step on a list (the trainer's reference uses it too);
* :func:`merges_ordered` — whether every merge only joins bytes or earlier results,
  which is when merges fire in rank order and a prefix of the list is a tokenizer;
* :func:`merge_all` — the whole rule on one sequence, in O(n log n).

Example::

    >>> replace_pair([97, 98, 97, 98, 99], (97, 98), 256)
    [256, 256, 99]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import pairwise, repeat

from tokembed.tokenizer.model import BPETables

__all__ = ["NO_RANK", "merge_all", "merges_ordered", "replace_pair"]

NO_RANK = 1 << 62  # larger than any merge rank: "this pair is not a merge"

RankOf = Callable[[tuple[int, int], int], int]


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


def merge_all(ids: list[int], rank_of: RankOf, merges: Sequence[tuple[int, int, int]]) -> list[int]:
    """The BPE rule on ``ids`` (modified in place) for any merge table, in O(n log n).

    ``ids`` becomes a linked list (a consumed id is set to -1); the position of
    every adjacent pair that is a merge waits under its rank, and a heap yields
    the smallest rank. Each step takes every position of that rank: in position
    order they are exactly the reference's left-to-right scan, and a position
    whose pair has changed since (a neighbour merged first, or an overlapping
    ``aaa``) is skipped.
    The pairs a step creates are pushed only after the step: a created pair never
    has the step's own rank (its result's bytes are longer than either part), but
    in an unordered table it may rank lower and must wait for the next step, as
    in the reference. Every merge adds at most two positions, so the work is
    O(n log n) against the O(n^2) of rescanning a list per step.
    """
    n = len(ids)
    if n < 2:
        return ids
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    # Positions wait in one list per rank; the heap holds only the distinct ranks.
    # A step sorts its list (C speed) instead of popping a heap once per position.
    waiting: dict[int, list[int]] = {}
    for i, r in enumerate(map(rank_of, pairwise(ids), repeat(NO_RANK))):
        if r != NO_RANK:
            found = waiting.get(r)
            if found is None:
                waiting[r] = [i]
            else:
                found.append(i)
    pending = list(waiting)
    heapq.heapify(pending)
    while pending:
        rank = heapq.heappop(pending)
        left, right, result = merges[rank]
        made: list[int] = []
        for i in sorted(waiting.pop(rank)):
            j = nxt[i]
            if ids[i] != left or j < 0 or ids[j] != right:
                continue  # stale: this position no longer holds the pair
            ids[i] = result
            ids[j] = -1
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prv[k] = i
            made.append(i)
        for i in made:  # written out twice (left, right neighbour): the hot loop
            p = prv[i]
            if p >= 0:
                r = rank_of((ids[p], result), NO_RANK)
                if r != NO_RANK:
                    found = waiting.get(r)
                    if found is None:
                        waiting[r] = [p]
                        heapq.heappush(pending, r)
                    else:
                        found.append(p)
            k = nxt[i]
            if k >= 0:
                r = rank_of((result, ids[k]), NO_RANK)
                if r != NO_RANK:
                    found = waiting.get(r)
                    if found is None:
                        waiting[r] = [i]
                        heapq.heappush(pending, r)
                    else:
                        found.append(i)
    return [t for t in ids if t >= 0]
