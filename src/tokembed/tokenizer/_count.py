"""Counting unique pre-tokenization chunks in order of first occurrence, streaming.

Order matters: the trainer breaks frequency ties by first encounter, so the
table must list chunks in the order a single left-to-right scan meets them.
Texts are consumed one at a time and never kept: memory follows the chunk
table (the number of distinct chunks), not the corpus.

A pre-tokenizer that is one preset stage is counted by the compiled twin
(``_native/_count``: the preset scanner of ``scan.c`` and an insertion-ordered
hash table), which releases the GIL while it scans. With ``workers > 1`` its
texts are cut into blocks of about ``_NATIVE_BLOCK`` bytes at points where the
presets' pieces provably do not change (``tk_safe_cut``: a line feed between a
non-space character and a character that is neither space nor '/'), each block is
counted by a thread into its own table, and the tables are merged in corpus order.

Every other pre-tokenizer (and any when ``TOKEMBED_PURE_PYTHON=1`` or the module
is not built) takes the Python path, the reference twin. With ``workers > 1`` it
cuts each text into blocks scanned by worker processes. A regex scan started
mid-text may chunk the first few characters differently from the full scan, so
each block also scans ``_OVERLAP`` characters past its end, and the seam is
joined at the first position ``q`` where both scans end a match: from a common
match end, a regex without look-behind continues identically. Both scans must
then agree up to ``_HALF`` past the seam; if they do not (no common position),
that text is counted again in this process. At most ``2 * workers`` blocks are
in flight, and a text's counts join the total when its last block is joined.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import regex

from tokembed.tokenizer._native import load
from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.pretokenize import PATTERNS, Piece, Pretokenizer, iter_pieces

__all__ = ["count_chunks"]

_BLOCK = 1 << 21  # characters per task: ~4 MB of Cyrillic UTF-8, ~0.5 s of regex
_OVERLAP = 1 << 13  # characters scanned past a block's end
_HALF = _OVERLAP // 2
# Constructs that look before the scan position: a block scan cannot reproduce them.
_LOOKS_BACK = regex.compile(r"\(\?<[=!]|\\[bBAGKZ]|(?<![\[\\])\^")
# Bytes per thread task of the compiled counter: large enough that merging a block's table
# (tens of thousands of distinct chunks) costs a few percent of scanning it.
_NATIVE_BLOCK = 1 << 22
# scan.h's TK_PRESET_* and TK_ENGINE_* numbering: preset names, and "qwen", the pattern of
# Qwen's rank file (formats.encodings), which is not a Pretokenizer preset.
_PRESET_IDS = {
    name: i for i, name in enumerate(("teaching", "r50k", "cl100k", "o200k", "gpt2-hf", "qwen"))
}
_ENGINE_IDS = {"tiktoken": 0, "huggingface": 1}

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


def _tasks(texts: Iterable[str], stage: str, held: dict[int, str]) -> Iterator[tuple[int, _Task]]:
    for t, text in enumerate(texts):
        held[t] = text  # kept only while its blocks are in flight (a seam may need a recount)
        n = len(text)
        for start in range(0, max(n, 1), _BLOCK):
            end = min(n, start + _BLOCK)
            last = end == n
            stop = n if last else min(n, end + _OVERLAP)
            yield t, (stage, text[start:stop], start, end, start == 0, last, stop == n, _HALF)


def _count_parallel(
    texts: Iterable[str], stage: str, workers: int, recount: Callable[[str], Counter[str]]
) -> Counter[str]:
    total: Counter[str] = Counter()
    held: dict[int, str] = {}
    ctx = multiprocessing.get_context("spawn")  # fork could inherit locks held by threads
    with ctx.Pool(workers) as pool:
        pending: deque[tuple[int, _Task, Any]] = deque()
        tasks = _tasks(texts, stage, held)
        current: Counter[str] = Counter()  # the counts of the text being joined
        prev = _Block([], Counter(), [], False)
        failed = -1  # a text whose seams did not join: recounted whole, its blocks skipped
        while True:
            while len(pending) < 2 * workers:
                item = next(tasks, None)
                if item is None:
                    break
                pending.append((item[0], item[1], pool.apply_async(_scan, (item[1],))))
            if not pending:
                return total
            t, task, result = pending.popleft()
            first, last = task[4], task[5]
            block: _Block = result.get()
            if t == failed:
                pass
            elif first:
                current = Counter(block.middle)
            elif prev.reaches_end:  # its overlap scan was exact up to the text's end
                current.update(p[3] for p in prev.tail)  # (nothing of this last block is new)
            elif (seam := _join(prev.tail, block.head)) is None:
                total.update(recount(held[t]))
                failed = t
            else:
                current.update(seam)
                current.update(block.middle)
            prev = block
            if last:
                if t != failed:
                    total.update(current)
                del held[t]


def _native_counter(pretokenizer: Pretokenizer) -> tuple[ModuleType, int, int] | None:
    """The compiled module and the preset and engine numbers, when they can count this."""
    preset = _pattern_ids().get(pretokenizer.stages[0]) if len(pretokenizer.stages) == 1 else None
    if preset is None:
        return None
    module = load("_count")
    if module is None:
        return None
    return module, preset, _ENGINE_IDS[pretokenizer.engine]


@cache
def _pattern_ids() -> dict[str, int]:
    """Pattern -> scanner preset number (formats is imported on first use, not with the trainer)."""
    from tokembed.tokenizer.formats.encodings import OWN_ENCODINGS

    def pattern(name: str) -> str:
        return PATTERNS[name] if name in PATTERNS else OWN_ENCODINGS[name].pattern

    return {pattern(name): i for name, i in _PRESET_IDS.items()}


def _utf8_text(text: str, pretokenizer: Pretokenizer) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        for chunk in pretokenizer.split(text):  # the Python path's error, located in its chunk
            utf8(chunk)
        raise


def _native_blocks(
    texts: Iterable[bytes], module: ModuleType, engine: int
) -> Iterator[list[memoryview]]:
    """Groups of whole texts and text blocks cut at safe points, about ``_NATIVE_BLOCK`` bytes each."""
    group: list[memoryview] = []
    size = 0
    for data in texts:
        view, start = memoryview(data), 0
        while len(data) - start > _NATIVE_BLOCK:
            cut = module.safe_cut(data, engine, start + _NATIVE_BLOCK)
            group.append(view[start:cut])
            yield group
            group, size, start = [], 0, cut
        if start < len(data):
            group.append(view[start:])
            size += len(data) - start
            if size >= _NATIVE_BLOCK:
                yield group
                group, size = [], 0
    if group:
        yield group


def _count_native(
    texts: Iterable[bytes], module: ModuleType, preset: int, engine: int, workers: int
) -> Any:
    total = module.Counter(preset, engine)
    if workers == 1:
        for data in texts:
            total.add(data)
        return total

    def count(group: list[memoryview]) -> Any:
        counter = module.Counter(preset, engine)
        for view in group:
            counter.add(view)
        return counter

    with ThreadPoolExecutor(workers, thread_name_prefix="tokembed-count") as pool:
        pending: deque[Future[Any]] = deque()
        for group in _native_blocks(texts, module, engine):
            pending.append(pool.submit(count, group))
            while len(pending) > 2 * workers:
                total.merge(pending.popleft().result())
        while pending:
            total.merge(pending.popleft().result())
    return total


def _count_python(texts: Iterator[str], pretokenizer: Pretokenizer, workers: int) -> Counter[str]:
    stages = pretokenizer.stages
    first_stage = Pretokenizer(stages=stages[:1], engine=pretokenizer.engine)

    def recount(text: str) -> Counter[str]:
        return Counter(first_stage.split(text))

    first_pattern = pretokenizer.patterns[0]  # what workers compile: the engine's reading
    counts: Counter[str] | None = None
    if workers > 1 and _LOOKS_BACK.search(first_pattern) is None:
        # Text that fits in one block would make one task: spawning a pool for it only adds
        # start-up time (~0.4 s on PUD Russian, 3x the whole count), so look ahead that far.
        head: list[str] = []
        seen = 0
        for text in texts:
            head.append(text)
            seen += len(text)
            if seen > _BLOCK:
                counts = _count_parallel(
                    itertools.chain(head, texts), first_pattern, workers, recount
                )
                break
        texts = iter(head) if counts is None else texts
    if counts is None:
        counts = Counter()
        for text in texts:
            counts.update(first_stage.split(text))
    if len(stages) > 1:  # later stages split each first-stage chunk; order is kept
        rest = Pretokenizer(stages=stages[1:], engine=pretokenizer.engine)
        refined: Counter[str] = Counter()
        for chunk, n in counts.items():
            for sub in rest.split(chunk):
                refined[sub] += n
        counts = refined
    return counts


def count_chunks(
    texts: Iterable[str], pretokenizer: Pretokenizer, *, workers: int, progress: bool
) -> ChunkTable:
    """The unique chunks of ``texts`` (UTF-8, first-occurrence order) and their multiplicities.

    ``texts`` is read once, one text at a time (an iterator is never turned into a
    list). Uses the compiled counter when ``pretokenizer`` is a single preset stage
    and ``_native._count`` is built, else the Python reference path; both give the
    same table.

    Example::

        >>> count_chunks(["ab ab"], Pretokenizer.preset("teaching"), workers=1, progress=False).to_dict()
        {b'ab': 1, b' ab': 1}

    Raises:
        TokenizerError(LONE_SURROGATE): a text has no UTF-8 form.
    """
    from tqdm import tqdm

    shown: Iterator[str] = iter(tqdm(texts, disable=not progress, unit="text", desc="counting"))
    native = _native_counter(pretokenizer)
    if native is not None:
        module, preset, engine = native
        encoded = (_utf8_text(text, pretokenizer) for text in shown)
        data, offsets, counts = _count_native(encoded, module, preset, engine, workers).buffers()
        return ChunkTable(data, np.frombuffer(offsets, np.int64), np.frombuffer(counts, np.int64))
    python = _count_python(shown, pretokenizer, workers)
    return ChunkTable.from_lists([utf8(c) for c in python], python.values())
