"""Counting unique pre-tokenization chunks in order of first occurrence, optionally in processes.

Order matters: the trainer breaks frequency ties by first encounter, so the
table must list chunks in the order a single left-to-right scan meets them.

With ``workers > 1`` each text is cut into blocks scanned by worker processes.
A regex scan started mid-text may chunk the first few characters differently
from the full scan, so each block also scans ``_OVERLAP`` characters past its
end, and the seam is joined at the first position ``q`` where both scans end a
match: from a common match end, a regex without look-behind continues
identically. Both scans must then agree up to ``_HALF`` past the seam; if they
do not (no common position, a look-behind pattern), the text is counted in
this process instead. Counters are merged in corpus order, which keeps the
first-occurrence order exact. At most ``2 * workers`` blocks are in flight,
so memory follows the chunk table, not the corpus.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import regex

from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.pretokenize import Piece, Pretokenizer, iter_pieces

__all__ = ["count_chunks"]

_BLOCK = 1 << 21  # characters per task: ~4 MB of Cyrillic UTF-8, ~0.5 s of regex
_OVERLAP = 1 << 13  # characters scanned past a block's end
_HALF = _OVERLAP // 2
# Constructs that look before the scan position: a block scan cannot reproduce them.
_LOOKS_BACK = regex.compile(r"\(\?<[=!]|\\[bBAGKZ]|(?<![\[\\])\^")

# (stage, block text, start, end, first block, last block, overlap reaches the text end,
#  head width): everything a worker needs travels in the task (spawned workers do not
#  share this module's globals with the parent).
_Task = tuple[str, str, int, int, bool, bool, bool, int]


@dataclass
class _Block:
    head: list[Piece]  # pieces starting before start + _HALF (non-first blocks)
    middle: Counter[str]  # the rest of the block's own range, ordered
    tail: list[Piece]  # pieces starting at or after the block's end (non-last blocks)
    reaches_end: bool  # the overlap scan ran to the end of the text: its tail is exact


def _scan(args: _Task) -> _Block:
    stage, text, start, end, first, last, reaches_end, half = args
    pattern = regex.compile(stage)
    head_end = start if first else start + half
    block = _Block([], Counter(), [], reaches_end and not last)
    middle = block.middle
    for piece in iter_pieces(pattern, text, start):
        s = piece[0]
        if s < head_end:
            block.head.append(piece)
        elif s < end or last:
            middle[piece[3]] += 1
        else:
            block.tail.append(piece)
    return block


def _join(tail: list[Piece], head: list[Piece]) -> list[str] | None:
    """Pieces of the seam in corpus order, or None when the two scans never synchronize."""
    ends_tail = {p[1] for p in tail if p[2]}
    common = sorted(p[1] for p in head if p[2] and p[1] in ends_tail)
    if not common:
        return None
    q = common[0]
    limit = head[-1][0] if head else q
    mine = [p for p in tail if q <= p[0] <= limit]
    theirs = [p for p in head if q <= p[0] <= limit]
    if mine != theirs:
        return None
    return [p[3] for p in tail if p[0] < q] + [p[3] for p in head if p[0] >= q]


def _tasks(texts: Iterable[str], stage: str) -> Iterator[tuple[int, _Task]]:
    for t, text in enumerate(texts):
        n = len(text)
        for start in range(0, max(n, 1), _BLOCK):
            end = min(n, start + _BLOCK)
            last = end == n
            stop = n if last else min(n, end + _OVERLAP)
            yield t, (stage, text[start:stop], start, end, start == 0, last, stop == n, _HALF)


def _count_parallel(texts: Iterable[str], stage: str, workers: int) -> Counter[str] | None:
    total: Counter[str] = Counter()
    ctx = multiprocessing.get_context("spawn")  # fork could inherit locks held by threads
    with ctx.Pool(workers) as pool:
        pending: deque[tuple[int, bool, object]] = deque()
        tasks = _tasks(texts, stage)
        prev = _Block([], Counter(), [], False)
        done = False
        while True:
            while not done and len(pending) < 2 * workers:
                item = next(tasks, None)
                if item is None:
                    done = True
                    break
                pending.append((item[0], item[1][4], pool.apply_async(_scan, (item[1],))))
            if not pending:
                return total
            _, first, result = pending.popleft()
            block: _Block = result.get()  # type: ignore[attr-defined]
            if not first:
                if prev.reaches_end:  # its overlap scan was exact up to the text's end
                    total.update(p[3] for p in prev.tail)
                    prev = _Block([], Counter(), [], False)
                    continue  # (this block is the text's last; nothing of it is new)
                seam = _join(prev.tail, block.head)
                if seam is None:
                    return None
                total.update(seam)
            total.update(block.middle)
            prev = block


def count_chunks(
    texts: Iterable[str], pretokenizer: Pretokenizer, *, workers: int, progress: bool
) -> tuple[list[bytes], list[int]]:
    """Unique chunks as UTF-8 bytes (first-occurrence order) and their multiplicities."""
    from tqdm import tqdm

    stages = pretokenizer.stages
    first_pattern = pretokenizer.patterns[0]  # what workers compile: the engine's reading
    counts: Counter[str] | None = None
    texts = list(texts) if workers > 1 else texts
    # Text that fits in one block would make one task: spawning a pool for it only
    # adds start-up time (~0.4 s on PUD Russian, 3x the whole count), so count here.
    if workers > 1 and sum(map(len, texts)) > _BLOCK and _LOOKS_BACK.search(first_pattern) is None:
        counts = _count_parallel(texts, first_pattern, workers)
    if counts is None:
        counts = Counter()
        first_stage = Pretokenizer(stages=stages[:1], engine=pretokenizer.engine)
        for text in tqdm(texts, disable=not progress, unit="text", desc="counting"):
            counts.update(first_stage.split(text))
    if len(stages) > 1:  # later stages split each first-stage chunk; order is kept
        rest = Pretokenizer(stages=stages[1:], engine=pretokenizer.engine)
        refined: Counter[str] = Counter()
        for chunk, n in counts.items():
            for sub in rest.split(chunk):
                refined[sub] += n
        counts = refined
    return [utf8(c) for c in counts], list(counts.values())
