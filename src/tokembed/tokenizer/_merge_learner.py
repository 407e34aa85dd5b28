"""Incremental BPE merge learning over unique chunks; gives exactly the reference's merges.

Input: the unique chunks (as bytes) in order of first occurrence in the corpus,
each with its multiplicity. Memory is bounded by this table, not by the corpus.

State per pair ``p``: its exact count (sum of multiplicities of overlapping
occurrences, Python ints so it cannot overflow), a superset of the chunks that
contain it, and a lower bound of its *first-encounter position*.

Why positions are (chunk index, byte offset): the reference breaks ties by the
first pair met scanning the current corpus left to right. That is the pair whose
first occurrence lies in the earliest chunk (unique chunks are numbered by first
occurrence), at the smallest offset inside it. Byte offsets of surviving tokens
never change under merges, so a position stays meaningful while token indices
shift.

Selection uses a heap of keys ``(-count, chunk, offset, left, right)`` with
lazy validation. Invariant: every live pair has an entry whose key is <= its
true key (a count at least the true one, a position at most the true one).
Counts only rise and positions only move earlier when a merge *creates* an
occurrence, and every creation pushes a fresh entry; decreases need nothing.
A popped entry is re-pushed with the true key unless it already equals it; an
entry equal to its true key at the top of the heap is the true maximum
(distinct pairs never share a first position).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

__all__ = ["learn_merges"]

_Pair = tuple[int, int]


class _Learner:
    def __init__(self, chunks: Sequence[bytes], counts: Sequence[int]) -> None:
        self.words: list[list[int]] = [list(c) for c in chunks]
        self.freq = list(counts)
        self.length: list[int] = [1] * 256  # byte length of each id's piece
        self.count: dict[_Pair, int] = {}
        self.where: dict[_Pair, set[int]] = {}
        self.first: dict[_Pair, tuple[int, int]] = {}
        for w, ids in enumerate(self.words):
            f = self.freq[w]
            for off in range(len(ids) - 1):
                pair = (ids[off], ids[off + 1])
                if pair in self.count:
                    self.count[pair] += f
                    self.where[pair].add(w)
                else:  # scanning in corpus order: this is the first encounter
                    self.count[pair] = f
                    self.where[pair] = {w}
                    self.first[pair] = (w, off)
        self.heap = [(-c, *self.first[p], *p) for p, c in self.count.items()]
        heapq.heapify(self.heap)

    def _offset_of(self, w: int, pair: _Pair) -> int | None:
        """Byte offset of the first occurrence of ``pair`` in chunk ``w``, or None."""
        ids, length, off = self.words[w], self.length, 0
        a, b = pair
        for i in range(len(ids) - 1):
            if ids[i] == a and ids[i + 1] == b:
                return off
            off += length[ids[i]]
        return None

    def _exact_first(self, pair: _Pair) -> tuple[int, int]:
        w, off = self.first[pair]
        if self._offset_of(w, pair) == off:  # the bound is attained: it is exact
            return w, off
        where = self.where[pair]
        for cand in sorted(where):
            found = self._offset_of(cand, pair)
            if found is not None:
                self.first[pair] = (cand, found)
                return cand, found
            where.discard(cand)  # stale: the pair left this chunk earlier
        raise AssertionError(f"pair {pair} has count {self.count[pair]} but no occurrence")

    def pop_best(self) -> _Pair | None:
        heap, count = self.heap, self.count
        while heap:
            negc, w, off, a, b = heapq.heappop(heap)
            pair = (a, b)
            c = count.get(pair, 0)
            if c == 0:
                continue
            if -negc != c:
                heapq.heappush(heap, (-c, *self.first[pair], a, b))
                continue
            if heap and heap[0][0] > negc:
                return pair  # strictly more frequent than any other live pair
            exact = self._exact_first(pair)
            if exact == (w, off):
                return pair
            heapq.heappush(heap, (negc, *exact, a, b))
        return None

    def apply(self, pair: _Pair, new_id: int) -> None:
        a, b = pair
        length, words, freq = self.length, self.words, self.freq
        count, where = self.count, self.where
        length.append(length[a] + length[b])
        assert len(length) == new_id + 1
        del count[pair], self.first[pair]
        grown: set[_Pair] = set()
        for w in where.pop(pair):
            ids, f = words[w], freq[w]
            n = len(ids)
            out: list[int] = []
            i = off = 0
            prev_off = -1
            while i < n:
                t = ids[i]
                if t == a and i + 1 < n and ids[i + 1] == b:
                    if out:  # (prev, a) becomes (prev, new)
                        self._shrink((out[-1], a), f, pair)
                        self._grow((out[-1], new_id), f, w, prev_off, grown)
                    if i + 2 < n:  # (b, next) becomes (new, next)
                        self._shrink((b, ids[i + 2]), f, pair)
                        self._grow((new_id, ids[i + 2]), f, w, off, grown)
                    out.append(new_id)
                    prev_off = off
                    off += length[new_id]
                    i += 2
                else:
                    out.append(t)
                    prev_off = off
                    off += length[t]
                    i += 1
            words[w] = out
        for p in grown:
            c = count.get(p, 0)
            if c > 0:
                heapq.heappush(self.heap, (-c, *self.first[p], *p))

    def _shrink(self, old: _Pair, f: int, merged: _Pair) -> None:
        if old == merged:  # an overlapping occurrence ("aaa"): its count is already gone
            return
        c = self.count[old] - f
        if c:
            self.count[old] = c
        else:  # forget dead pairs so memory follows the live table
            del self.count[old], self.where[old], self.first[old]

    def _grow(self, pair: _Pair, f: int, w: int, off: int, grown: set[_Pair]) -> None:
        if pair in self.count:
            self.count[pair] += f
            self.where[pair].add(w)
            if (w, off) < self.first[pair]:
                self.first[pair] = (w, off)
        else:
            self.count[pair] = f
            self.where[pair] = {w}
            self.first[pair] = (w, off)
        grown.add(pair)


def learn_merges(
    chunks: Sequence[bytes],
    counts: Sequence[int],
    *,
    merges: int,
    on_merge: Callable[[], None] | None = None,
) -> list[_Pair]:
    """Pairs learned from ``chunks`` (first-occurrence order) with multiplicities ``counts``.

    Equal to ``train_reference`` on the corpus those chunks came from; pair ``k``
    produced id ``256 + k``. Stops early when no pair is left.
    """
    learner = _Learner(chunks, counts)
    learned: list[_Pair] = []
    for k in range(merges):
        pair = learner.pop_best()
        if pair is None:
            break
        learner.apply(pair, 256 + k)
        learned.append(pair)
        if on_merge is not None:
            on_merge()
    return learned
