"""Incremental BPE merge learning over unique chunks; gives exactly the reference's merges.

Input: a :class:`~tokembed.tokenizer.chunks.ChunkTable`, the unique chunks in
order of first occurrence in the corpus, each with its multiplicity. Memory is
bounded by this table, not by the corpus.

:func:`learn_merges` runs the compiled twin (``_native/learn.c``, the same
algorithm with an indexed heap and int64 counts) when it is built, and
:func:`learn_merges_python`, the pure-Python reference twin below, otherwise
(or under ``TOKEMBED_PURE_PYTHON=1``). Both give identical merges.

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

import gc
import heapq
from collections.abc import Callable

from tokembed.tokenizer._native import load
from tokembed.tokenizer.chunks import ChunkTable

__all__ = ["learn_merges", "learn_merges_python"]

_Pair = tuple[int, int]


class _Learner:
    def __init__(self, table: ChunkTable) -> None:
        self.words: list[list[int]] = [list(c) for c in table.chunks()]
        self.freq: list[int] = table.counts.tolist()
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
        self.unigram = [0] * 256  # occurrences of each id, weighted by multiplicity
        for ids, f in zip(self.words, self.freq, strict=True):
            for t in ids:
                self.unigram[t] += f
        self.heap = [(-c, *self.first[p], *p) for p, c in self.count.items()]
        heapq.heapify(self.heap)

    def _offset_of(self, w: int, pair: _Pair) -> int | None:
        """Byte offset of the first occurrence of ``pair`` in chunk ``w``, or None."""
        ids = self.words[w]
        a, b = pair
        n = len(ids) - 1
        i = -1
        # index() and sum(map()) run in C: a chunk may be a whole file (empty pattern).
        for _ in range(ids.count(a)):
            i = ids.index(a, i + 1)
            if i < n and ids[i + 1] == b:
                return sum(map(self.length.__getitem__, ids[:i]))
        return None

    def _exact_first(self, pair: _Pair) -> tuple[int, int]:
        # The bound (w, off) is <= the truth, so an occurrence in chunk w is the first one.
        w = self.first[pair][0]
        found = self._offset_of(w, pair)
        if found is not None:
            self.first[pair] = (w, found)
            return w, found
        where = self.where[pair]
        for cand in sorted(c for c in where if c > w):
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
        """Replace ``pair`` by ``new_id`` in every chunk holding it, updating statistics.

        Each replacement turns ``(prev, a)`` into ``(prev, new)`` and ``(b, next)``
        into ``(new, next)``; ``prev`` is read after earlier replacements in the
        same chunk, so ``abab`` correctly yields ``(new, new)``. A created pair's
        position bound is ``(chunk, 0)``: cheap, and never later than the truth.
        """
        a, b = pair
        length, words, freq = self.length, self.words, self.freq
        count, where, first = self.count, self.where, self.first
        length.append(length[a] + length[b])
        assert len(length) == new_id + 1
        del count[pair], first[pair]
        grown: set[_Pair] = set()
        dead: list[_Pair] = []
        uni = self.unigram
        # Find occurrences by searching for the rarer side: a Cyrillic lead byte
        # (0xD0) sits before half of all bytes, its partner is far rarer.
        by_right = a != b and uni[b] < uni[a]
        replaced = 0
        for w in where.pop(pair):
            ids = words[w]
            pos: list[int] = []
            # count() then index(): C-speed scans, no ValueError per chunk.
            if by_right:  # a != b: occurrences cannot overlap
                j = -1
                for _ in range(ids.count(b)):
                    j = ids.index(b, j + 1)
                    if j and ids[j - 1] == a:
                        pos.append(j - 1)
            else:
                i = -1
                last = -2
                n = len(ids) - 1
                for _ in range(ids.count(a)):
                    i = ids.index(a, i + 1)
                    if i < n and ids[i + 1] == b and i > last + 1:
                        pos.append(i)
                        last = i
            if not pos:
                continue  # stale membership: the pair left this chunk earlier
            f = freq[w]
            replaced += f * len(pos)
            # The chunk is rebuilt once (``out``): replacing in place costs a list
            # shift per occurrence, quadratic in a long chunk ('a' x 300,000).
            # ``out`` holds the chunk as rewritten so far, so out[-1] is the left
            # neighbour after earlier replacements; the right neighbour is still
            # the original ids[i + 2].
            out: list[int] = []
            done = 0
            has_next = len(ids) - 2  # i < has_next: a right neighbour exists
            for i in pos:
                out += ids[done:i]
                done = i + 2
                # Two neighbours, written out (not looped) because this is the hot path:
                # (prev, a) -> (prev, new) and (b, next) -> (new, next).
                if out:
                    prev = out[-1]
                    old = (prev, a)
                    if old != pair:  # an overlapping occurrence ("aaa") is already gone
                        c = count[old] - f
                        count[old] = c
                        if not c:
                            dead.append(old)
                    new = (prev, new_id)
                    got = count.get(new)
                    if got is None:
                        count[new] = f
                        where[new] = {w}
                        first[new] = (w, 0)
                    else:
                        count[new] = got + f
                        where[new].add(w)
                        if w <= first[new][0]:
                            first[new] = (w, 0)
                    grown.add(new)
                if i < has_next:
                    nxt = ids[i + 2]
                    old = (b, nxt)
                    if old != pair:
                        c = count[old] - f
                        count[old] = c
                        if not c:
                            dead.append(old)
                    new = (new_id, nxt)
                    got = count.get(new)
                    if got is None:
                        count[new] = f
                        where[new] = {w}
                        first[new] = (w, 0)
                    else:
                        count[new] = got + f
                        where[new].add(w)
                        if w <= first[new][0]:
                            first[new] = (w, 0)
                    grown.add(new)
                out.append(new_id)
            out += ids[done:]
            words[w] = out
        uni[a] -= replaced
        uni[b] -= replaced
        uni.append(replaced)
        for p in dead:  # forget dead pairs so memory follows the live table
            if count.get(p) == 0:
                del count[p], where[p], first[p]
        heap = self.heap
        for p in grown:
            c = count.get(p, 0)
            if c > 0:
                heapq.heappush(heap, (-c, *first[p], *p))


# Merges between two progress calls of the compiled learner: frequent enough for a live
# bar, rare enough that taking the GIL back costs nothing measurable.
_PROGRESS_EVERY = 32


def learn_merges(
    table: ChunkTable,
    *,
    merges: int,
    on_merge: Callable[[], None] | None = None,
) -> list[_Pair]:
    """Pairs learned from ``table`` (chunks in first-occurrence order, with multiplicities).

    Equal to ``train_reference`` on the corpus the table came from; pair ``k``
    produced id ``256 + k``. Stops early when no pair is left. ``on_merge`` is
    called once per learned merge (the compiled learner, which releases the GIL
    while it works, makes those calls in bursts of up to 32).

    Example::

        >>> learn_merges(ChunkTable.from_counts({b"abab": 2, b"ab": 1}), merges=5)
        [(97, 98), (256, 256)]

    Raises:
        OverflowError: (compiled learner) more than 2**31 - 1 chunks or 2**31 - 257
            merges (int32 ids), or a corpus of more than 2**63 - 1 adjacent pairs
            (int64 counts).
    """
    native = load("_learn")
    if native is None:
        return learn_merges_python(table, merges=merges, on_merge=on_merge)

    def progress(n: int) -> None:
        if on_merge is not None:
            for _ in range(n):
                on_merge()

    pairs: list[_Pair] = native.learn(
        table.data,
        table.offsets,
        table.counts,
        merges,
        progress=None if on_merge is None else progress,
        every=_PROGRESS_EVERY,
    )
    return pairs


def learn_merges_python(
    table: ChunkTable,
    *,
    merges: int,
    on_merge: Callable[[], None] | None = None,
) -> list[_Pair]:
    """The pure-Python twin of :func:`learn_merges` (same merges; ``on_merge`` after each one)."""
    # The tables are millions of small tuples/sets without reference cycles; the
    # cyclic collector would re-traverse all of them at every gen-2 pass (>half the
    # run time on PUD ru at 4096 merges), so it is paused while they are built.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        learner = _Learner(table)
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
    finally:
        if was_enabled:
            gc.enable()
