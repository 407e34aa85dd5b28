"""Counting unique pre-tokenization chunks in order of first occurrence, streaming.

Order matters: the trainer breaks frequency ties by first encounter, so the
table must list chunks in the order a single left-to-right scan meets them.
Texts are consumed one at a time and never kept: memory follows the chunk
table (the number of distinct chunks), not the corpus.

Two counters give the same table:

* the compiled counter (``_native/_count``: the preset scanner of ``scan.c`` and an
  insertion-ordered hash table) for a pre-tokenizer that is one scanned pattern
  (:data:`~tokembed.tokenizer.patterns.SCANNED`); it releases the GIL while it scans.
  With ``workers > 1`` its texts are cut into blocks of about ``_NATIVE_BLOCK`` bytes at
  the scanner's safe cuts (``tk_safe_cut``: a line feed between a non-space character and
  a character that is neither space nor '/', where the pieces provably do not change),
  each block is counted by a thread into its own table, and the tables are merged in
  corpus order;
* the reference, :func:`count_chunks_reference`, for every other pre-tokenizer (and any
  when ``TOKEMBED_PURE_PYTHON=1`` or the module is not built): ``Pretokenizer.split``
  and a ``Counter``. With ``workers > 1`` it cuts each text into windows of ``_BLOCK``
  characters counted by worker processes and joined at their seams (``_seams``, the code
  the Dask counter uses for its byte ranges); a text whose seams do not join is counted
  again here, whole. At most ``2 * workers`` windows are in flight.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, TypeVar

import numpy as np

from tokembed.tokenizer._native import load
from tokembed.tokenizer._seams import (
    EMPTY,
    LOOKS_BACK,
    Partial,
    Spec,
    combine,
    count_window,
    first_stage,
    packed,
    refine,
)
from tokembed.tokenizer._utf8 import refuse_surrogates, utf8
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.dialect import DIALECTS
from tokembed.tokenizer.patterns import scanner_id
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = ["batches", "count_chunks", "count_chunks_reference"]

_BLOCK = 1 << 21  # characters per window: ~4 MB of Cyrillic UTF-8, ~0.5 s of regex
_OVERLAP = 1 << 13  # characters scanned past a window's end
_HEAD_CHARS = _OVERLAP // 2  # characters of a window whose chunks wait for the left scan
# Bytes per thread task of the compiled counter: large enough that merging a block's table
# (tens of thousands of distinct chunks) costs a few percent of scanning it.
_NATIVE_BLOCK = 1 << 22

# (spec, window text, extra text, first window, last window, text index): everything a
# worker needs travels in the task (spawned workers do not share this module's globals).
_Task = tuple[Spec, str, str, bool, bool, int]
_Sized = TypeVar("_Sized", str, memoryview)


def _native_counter(pretokenizer: Pretokenizer) -> tuple[ModuleType, int, int] | None:
    """The compiled module and the preset and dialect numbers, when they can count this."""
    preset = scanner_id(pretokenizer.stages[0]) if len(pretokenizer.stages) == 1 else None
    if preset is None:
        return None
    module = load("_count")
    if module is None:
        return None
    return module, preset, DIALECTS.index(pretokenizer.dialect)


def batches(items: Iterable[_Sized], limit: int) -> Iterator[list[_Sized]]:
    """``items`` in order, in lists closed as soon as their lengths add up to ``limit`` or more."""
    batch: list[_Sized] = []
    held = 0
    for item in items:
        batch.append(item)
        held += len(item)
        if held >= limit:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _native_blocks(
    texts: Iterable[bytes], module: ModuleType, dialect: int
) -> Iterator[memoryview]:
    """Whole texts, and blocks of a longer text cut at safe points (``_NATIVE_BLOCK`` bytes or more)."""
    for data in texts:
        view, start = memoryview(data), 0
        while len(data) - start > _NATIVE_BLOCK:
            cut = module.safe_cut(data, dialect, start + _NATIVE_BLOCK)  # >= its argument
            yield view[start:cut]
            start = cut
        if start < len(data):
            yield view[start:]


def _count_native(
    texts: Iterable[bytes], module: ModuleType, preset: int, dialect: int, workers: int
) -> Any:
    total = module.Counter(preset, dialect)
    if workers == 1:
        for data in texts:
            total.add(data)
        return total

    def count(group: list[memoryview]) -> Any:
        counter = module.Counter(preset, dialect)
        for view in group:
            counter.add(view)
        return counter

    with ThreadPoolExecutor(workers, thread_name_prefix="tokembed-count") as pool:
        pending: deque[Future[Any]] = deque()
        # A cut block holds _NATIVE_BLOCK bytes or more, so it closes the group it joins.
        for group in batches(_native_blocks(texts, module, dialect), _NATIVE_BLOCK):
            pending.append(pool.submit(count, group))
            while len(pending) > 2 * workers:
                total.merge(pending.popleft().result())
        while pending:
            total.merge(pending.popleft().result())
    return total


def _count_task(task: _Task) -> Partial:
    spec, text, extra, first, last, index = task
    return count_window(
        text, extra, first=first, last=last, stage=first_stage(spec), index=index,
        head_chars=_HEAD_CHARS,
    )  # fmt: skip


def _tasks(texts: Iterable[str], spec: Spec, held: dict[int, str]) -> Iterator[_Task]:
    for t, text in enumerate(texts):
        held[t] = text  # kept only while its windows are in flight (a seam may need a recount)
        n = len(text)
        for start in range(0, max(n, 1), _BLOCK):
            end = min(n, start + _BLOCK)
            yield spec, text[start:end], text[end : end + _OVERLAP], start == 0, end == n, t


def _count_parallel(
    texts: Iterable[str], spec: Spec, workers: int, recount: Callable[[str], ChunkTable]
) -> ChunkTable:
    """The first stage's table of ``texts`` from windows counted in ``workers`` processes."""
    tables: list[ChunkTable] = []
    held: dict[int, str] = {}
    ctx = multiprocessing.get_context("spawn")  # fork could inherit locks held by threads
    with ctx.Pool(workers) as pool:
        pending: deque[tuple[_Task, Any]] = deque()
        tasks = _tasks(texts, spec, held)
        current = Partial(head=None, table=EMPTY, tail=None, tail_file=-1)
        while True:
            while len(pending) < 2 * workers:
                task = next(tasks, None)
                if task is None:
                    break
                pending.append((task, pool.apply_async(_count_task, (task,))))
            if not pending:
                return ChunkTable.concat(tables)
            task, result = pending.popleft()
            part: Partial = result.get()
            current = part if task[3] else combine(current, part)
            if task[4]:  # the text's last window: its table is complete
                t = task[5]
                tables.append(recount(held.pop(t)) if current.refused else current.table)


def count_chunks_reference(texts: Iterable[str], pretokenizer: Pretokenizer) -> ChunkTable:
    """The chunk table by ``Pretokenizer.split`` and a ``Counter`` (see the module docstring).

    Raises:
        TokenizerError(LONE_SURROGATE): a text has no UTF-8 form.
    """
    stage = first_stage((pretokenizer.stages, pretokenizer.dialect))
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(stage.split(refuse_surrogates(text)))
    return refine(packed(counts), pretokenizer)


def _count_python(texts: Iterator[str], pretokenizer: Pretokenizer, workers: int) -> ChunkTable:
    spec: Spec = (pretokenizer.stages, pretokenizer.dialect)
    if workers > 1 and LOOKS_BACK.search(pretokenizer.patterns[0]) is None:
        # Text that fits in one window would make one task: spawning a pool for it only adds
        # start-up time (~0.4 s on PUD Russian, 3x the whole count), so look ahead that far.
        head: list[str] = []
        seen = 0
        for text in texts:
            head.append(refuse_surrogates(text))
            seen += len(text)
            if seen > _BLOCK:
                rest = (refuse_surrogates(text) for text in texts)

                def recount(text: str) -> ChunkTable:
                    return count_chunks_reference([text], first_stage(spec))

                table = _count_parallel(itertools.chain(head, rest), spec, workers, recount)
                return refine(table, pretokenizer)
        texts = iter(head)
    return count_chunks_reference(texts, pretokenizer)


def count_chunks(
    texts: Iterable[str], pretokenizer: Pretokenizer, *, workers: int, progress: bool
) -> ChunkTable:
    """The unique chunks of ``texts`` (UTF-8, first-occurrence order) and their multiplicities.

    ``texts`` is read once, one text at a time (an iterator is never turned into a
    list). Uses the compiled counter when ``pretokenizer`` is a single scanned pattern
    and ``_native._count`` is built, else the reference; both give the same table.

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
        module, preset, dialect = native
        encoded = (utf8(text) for text in shown)
        data, offsets, counts = _count_native(encoded, module, preset, dialect, workers).buffers()
        return ChunkTable(data, np.frombuffer(offsets, np.int64), np.frombuffer(counts, np.int64))
    return _count_python(shown, pretokenizer, workers)
