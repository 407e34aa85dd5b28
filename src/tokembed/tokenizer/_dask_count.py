"""Counting chunks on a Dask cluster, equal to the single-process count chunk for chunk.

Work is cut into tasks that workers count on their own: files are split into byte
ranges at line feeds (``measure.ranges.split_ranges``) and each worker reads its
range itself; texts held in memory travel in batches of whole texts. Each task
returns a :class:`_Partial`: a :class:`ChunkTable` of what it counted, in
first-encounter order. Partials are merged by a binary tree of ``combine``
tasks on the workers, left operand before right, so the final table lists chunks
in the order one left-to-right scan meets them and ties in the merge learner are
broken as in this process.

A file is one text (``train`` pre-tokenizes each text on its own), so a cut
inside it must not change the chunks. A range scans its own bytes plus
``_OVERLAP_BYTES`` past its end; the right neighbour's first ``_HEAD_CHARS``
characters are held back as its head. ``combine`` joins the two at the first
position where both scans end a chunk: from there a regex without look-behind
continues identically. The scans must agree up to the end of the head, or the
seam is refused; a refused seam (a chunk longer than the overlap, such as a
run of thousands of spaces) makes that file be read whole in a second pass,
and a pattern that looks behind its start is never cut. A range that is a
whole text is counted by ``count_chunks``, the single-process counter.

Only the first regex stage runs on the workers; later stages split each
distinct chunk of the final table here, which gives the same table because
refining distributes over concatenation in order.

Example::

    >>> table = count_on_dask(TextFiles(["a.txt", "b.txt"]), Pretokenizer.preset("teaching"),
    ...                       scheduler=None, workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import regex

from tokembed.errors import TokenizerError
from tokembed.text.ranges import ByteRange, TextFiles, read_range
from tokembed.tokenizer._count import count_chunks
from tokembed.tokenizer._dialect import Engine
from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.pretokenize import Pretokenizer

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["RANGE_BYTES", "combine", "count_on_dask", "count_with_client"]

# 8 MiB per task: ~0.7 s of regex on one core, a few hundred MB of chunk strings at
# peak on a worker, and ~12,000 tasks for 100 GB (the scheduler's overhead is ~1 ms each).
RANGE_BYTES = 8 << 20
_OVERLAP_BYTES = 1 << 15  # scanned past a range's end: >= 8,192 characters of any script
_HEAD_CHARS = 1 << 12  # a range's characters whose chunks wait for the left neighbour's scan
_CONNECT_SECONDS = 5.0  # a scheduler answers in milliseconds; 5 s covers a busy one
# Constructs that look before the scan position (look-behind, \b, anchors at a start):
# a scan started at a cut cannot reproduce them, so such patterns read files whole.
_LOOKS_BACK = regex.compile(r"\(\?<[=!]|\\[bBAGKZ]|(?<![\[\\])\^")

# A chunk near a cut: (start, end, text), in characters from the cut.
_Piece = tuple[int, int, str]
_Spec = tuple[tuple[str, ...], Engine]


@dataclass(frozen=True, kw_only=True)
class _Partial:
    """What a run of consecutive tasks counted; ``head``/``tail`` None at a text's edge."""

    head: tuple[_Piece, ...] | None  # chunks the left neighbour's scan must confirm
    table: ChunkTable  # the chunks between, in first-encounter order
    tail: tuple[_Piece, ...] | None  # this scan's chunks past the last range's end
    tail_file: int  # index of the file the last range belongs to (-1: texts in memory)
    refused: tuple[int, ...] = ()  # files whose seams did not join

    def __sizeof__(self) -> int:
        # Dask sizes results with sys.getsizeof; without this it would count 56 bytes a
        # partial, and its transfer logs and memory limits would not see the tables.
        pieces = (self.head or ()) + (self.tail or ())
        return self.table.nbytes + sum(24 + len(p[2]) for p in pieces)


_EMPTY = ChunkTable.from_lists([], [])


def _table(texts: Iterable[str], stage: Pretokenizer) -> ChunkTable:
    return count_chunks(texts, stage, workers=1, progress=False)


def _packed(counts: Counter[str]) -> ChunkTable:
    return ChunkTable.from_lists([utf8(c) for c in counts], counts.values())


@lru_cache(maxsize=8)
def _first_stage(spec: _Spec) -> Pretokenizer:
    stages, engine = spec
    return Pretokenizer(stages=stages[:1], engine=engine)


def _count_texts(texts: list[str], spec: _Spec) -> _Partial:
    return _Partial(head=None, table=_table(texts, _first_stage(spec)), tail=None, tail_file=-1)


def _count_range(
    r: ByteRange,
    spec: _Spec,
    *,
    overlap_bytes: int = _OVERLAP_BYTES,
    head_chars: int = _HEAD_CHARS,
) -> _Partial:
    """Count one range on a worker: its head and tail wait for the neighbours' scans."""
    stage = _first_stage(spec)
    text, extra = read_range(r, overlap_bytes=overlap_bytes)
    if r.first and r.last:
        return _Partial(head=None, table=_table([text], stage), tail=None, tail_file=r.index)
    chunks = stage.split(text + extra)  # they tile the window: positions are running sums
    n = len(text)
    head: list[_Piece] = []
    if not r.first:
        head_end, pos = min(head_chars, n), 0  # never into the overlap: the next range's
        while len(head) < len(chunks) and pos < head_end:
            chunk = chunks[len(head)]
            head.append((pos, pos + len(chunk), chunk))
            pos += len(chunk)
    tail: list[_Piece] = []  # chunks ending past the range (the first may straddle its end)
    if not r.last:
        end = n + len(extra)
        while len(tail) < len(chunks) and end > n:
            chunk = chunks[len(chunks) - 1 - len(tail)]
            tail.append((end - len(chunk) - n, end - n, chunk))
            end -= len(chunk)
        tail.reverse()
    tail_start = len(chunks) - len(tail)
    # A chunk in both head and tail spans the head region and the range's end: the two
    # seams would both count it. Such a range is refused, and its file read whole.
    refused = (r.index,) if tail_start < len(head) else ()
    return _Partial(
        head=None if r.first else tuple(head),
        table=_packed(Counter(chunks[len(head) : tail_start])),
        tail=None if r.last else tuple(tail),
        tail_file=r.index,
        refused=refused,
    )


def _join(tail: tuple[_Piece, ...], head: tuple[_Piece, ...]) -> list[str] | None:
    """The seam's chunks in order, or None when the two scans do not provably agree.

    Any position where both scans end a chunk is one where both resume the same search;
    from the first such position the right scan is the truth.
    """
    tail_ends = {p[1] for p in tail}
    q = next((p[1] for p in head if p[1] in tail_ends), None)
    if q is None:
        return None
    limit = head[-1][0]
    if [p for p in tail if q <= p[0] <= limit] != [p for p in head if q <= p[0] <= limit]:
        return None
    return [p[2] for p in tail if p[0] < q] + [p[2] for p in head if p[0] >= q]


def combine(left: _Partial, right: _Partial) -> _Partial:
    """The partial of ``left``'s tasks followed by ``right``'s (never commutative)."""
    refused = left.refused + right.refused
    seam: list[str] | None = []
    if left.tail is not None:
        assert right.head is not None, "a range that ends mid-text is followed by its own file"
        seam = _join(left.tail, right.head)
        if seam is None:
            refused += (left.tail_file,)
    if refused:  # the table is recounted; stop merging it
        table = _EMPTY
    else:
        assert seam is not None
        table = ChunkTable.concat([left.table, _packed(Counter(seam)), right.table])
    return _Partial(
        head=left.head, table=table, tail=right.tail, tail_file=right.tail_file, refused=refused
    )


def _reduce(
    client: Client, futures: list[Any], merge: Callable[[_Partial, _Partial], _Partial]
) -> _Partial:
    """Binary tree of ``merge`` tasks over ``futures`` in order; depth ceil(log2 n)."""
    if not futures:
        return _Partial(head=None, table=_EMPTY, tail=None, tail_file=-1)
    level = futures
    while len(level) > 1:
        pairs = [
            client.submit(merge, a, b, pure=False)
            for a, b in zip(level[::2], level[1::2], strict=False)
        ]
        level = pairs + level[len(pairs) * 2 :]
    result: _Partial = level[0].result()
    return result


def _batches(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    held = 0
    for text in texts:
        batch.append(text)
        held += len(text)
        if held >= size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _refine(table: ChunkTable, pretokenizer: Pretokenizer) -> ChunkTable:
    """Later stages split each first-stage chunk in order (as the single-process counter)."""
    if len(pretokenizer.stages) == 1:
        return table
    rest = Pretokenizer(stages=pretokenizer.stages[1:], engine=pretokenizer.engine)
    refined: Counter[str] = Counter()
    for chunk, n in zip(table.chunks(), table.counts.tolist(), strict=True):
        for sub in rest.split(chunk.decode("utf-8")):
            refined[sub] += n
    return _packed(refined)


def _count(
    client: Client,
    texts: Iterable[str],
    pretokenizer: Pretokenizer,
    *,
    range_bytes: int,
    merge: Callable[[_Partial, _Partial], _Partial],
) -> tuple[ChunkTable, tuple[int, ...]]:
    """The table, and the files read whole after a seam was refused (in order)."""
    spec: _Spec = (pretokenizer.stages, pretokenizer.engine)
    if not isinstance(texts, TextFiles):
        # One batch at a time leaves this process: the corpus need not fit in its memory.
        futures = [
            client.submit(_count_texts, client.scatter([batch])[0], spec, pure=False)
            for batch in _batches(texts, range_bytes)
        ]
        partial = _reduce(client, futures, merge)
        return _refine(partial.table, pretokenizer), ()
    ranges = texts.ranges(target_bytes=range_bytes)
    whole: set[int] = set()
    if _LOOKS_BACK.search(pretokenizer.patterns[0]) is not None:
        ranges = [r for r in ranges if r.first]
        ranges = [ByteRange(path=r.path, index=r.index, start=0, stop=None) for r in ranges]
    while True:
        if whole:
            ranges = [r for r in ranges if r.index not in whole or r.first]
            ranges = [
                ByteRange(path=r.path, index=r.index, start=0, stop=None) if r.index in whole else r
                for r in ranges
            ]
        partial = _reduce(client, client.map(_count_range, ranges, spec=spec, pure=False), merge)
        if not partial.refused:
            return _refine(partial.table, pretokenizer), tuple(sorted(whole))
        assert not whole.issuperset(partial.refused), "a whole file has no seam to refuse"
        whole |= set(partial.refused)


def count_with_client(
    client: Client,
    texts: Iterable[str],
    pretokenizer: Pretokenizer,
    *,
    range_bytes: int = RANGE_BYTES,
) -> ChunkTable:
    """The chunk table of ``texts`` counted on ``client``'s workers (see the module docstring).

    ``texts`` given as :class:`~tokembed.measure.ranges.TextFiles` are read by the
    workers in ranges of about ``range_bytes``; other texts are sent in batches.

    Raises:
        UsageError(FILE_NOT_FOUND), MeasureError(UNREADABLE_INPUT, INPUT_NOT_UTF8, ...):
            a worker could not read its range.
    """
    return _count(client, texts, pretokenizer, range_bytes=range_bytes, merge=combine)[0]


@contextlib.contextmanager
def _connect(scheduler: str | None, workers: int) -> Iterator[Client]:
    import dask
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if scheduler is None:
            # Our own cluster serves no one's dashboard: its sampling profiler (a thread
            # per worker, every 10 ms) cost ~20% of the workers' CPU counting RusLit-40.
            stack.enter_context(dask.config.set({"distributed.worker.profile.enabled": False}))
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port, never a fixed one
                    silence_logs=logging.ERROR,
                )
            )
            yield stack.enter_context(Client(cluster))
            return
        try:
            client = Client(scheduler, timeout=_CONNECT_SECONDS)
        except (OSError, TimeoutError, ValueError) as exc:
            raise TokenizerError(
                "SCHEDULER_UNREACHABLE",
                f"no Dask scheduler answers at {scheduler!r} within {_CONNECT_SECONDS:.0f} s: {exc}",
                value=scheduler,
                fix="start one (dask scheduler) and pass its address, e.g. tcp://host:8786, "
                "or pass scheduler=None for a local cluster",
            ) from None
        yield stack.enter_context(client)


def count_on_dask(
    texts: Iterable[str],
    pretokenizer: Pretokenizer,
    *,
    scheduler: str | None,
    workers: int,
    range_bytes: int = RANGE_BYTES,
) -> ChunkTable:
    """Count on the scheduler at ``scheduler``, or on a local cluster of ``workers`` processes.

    Raises:
        TokenizerError(SCHEDULER_UNREACHABLE): nothing answers at ``scheduler``.
        and what :func:`count_with_client` raises.
    """
    with _connect(scheduler, workers) as client:
        return count_with_client(client, texts, pretokenizer, range_bytes=range_bytes)
