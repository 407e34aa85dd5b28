"""Counting chunks on a Dask cluster, equal to the single-process count chunk for chunk.

Work is cut into tasks that workers count on their own: files are split into byte
ranges at line feeds (``tokembed.text.ranges.split_ranges``) and each worker reads its
range itself; texts held in memory travel in batches of whole texts. Each range is
counted as a window of its file by ``_seams.count_window`` (the code this machine's worker
processes use for windows of a text) and returns a ``_seams.Partial``: a
:class:`ChunkTable` of what it counted, in first-encounter order, plus the chunks
near its cuts. Partials are merged by a binary tree of ``combine`` tasks on the
workers, left operand before right, so the final table lists chunks in the order one
left-to-right scan meets them and ties in the merge learner are broken as in this process.

A range scans its own bytes plus ``_OVERLAP_BYTES`` past its end and holds back its first
``_HEAD_CHARS`` characters as its head; a refused seam (a chunk longer than the overlap,
such as a run of thousands of spaces) makes that file be read whole in a second pass,
and a pattern that looks behind its start is never cut. A range that is a whole text is
counted by ``count_chunks``, the single-process counter (compiled for a scanned pattern).

Only the first regex stage runs on the workers; later stages split each
distinct chunk of the final table here, which gives the same table because
refining distributes over concatenation in order.

Example::

    >>> table = count_on_dask(TextFiles(["a.txt", "b.txt"]), Pretokenizer.preset("teaching"),
    ...                       scheduler=None, workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tokembed.text.ranges import ByteRange, TextFiles, read_range
from tokembed.tokenizer._count import batches, count_chunks
from tokembed.tokenizer._seams import (
    EMPTY,
    LOOKS_BACK,
    Partial,
    Spec,
    combine,
    count_window,
    first_stage,
    refine,
)
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.dask_cluster import connect_cluster
from tokembed.tokenizer.pretokenize import Pretokenizer

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["RANGE_BYTES", "count_on_dask", "count_with_client"]

# 8 MiB per task: ~0.7 s of regex on one core, a few hundred MB of chunk strings at
# peak on a worker, and ~12,000 tasks for 100 GB (the scheduler's overhead is ~1 ms each).
RANGE_BYTES = 8 << 20
_OVERLAP_BYTES = 1 << 15  # scanned past a range's end: >= 8,192 characters of any script
_HEAD_CHARS = 1 << 12  # a range's characters whose chunks wait for the left neighbour's scan


def _table(texts: Iterable[str], stage: Pretokenizer) -> ChunkTable:
    return count_chunks(texts, stage, workers=1, progress=False)


def _count_texts(texts: list[str], spec: Spec) -> Partial:
    return Partial(head=None, table=_table(texts, first_stage(spec)), tail=None, tail_file=-1)


def _count_range(
    r: ByteRange,
    spec: Spec,
    *,
    overlap_bytes: int = _OVERLAP_BYTES,
    head_chars: int = _HEAD_CHARS,
) -> Partial:
    """Count one range on a worker: its head and tail wait for the neighbours' scans."""
    stage = first_stage(spec)
    text, extra = read_range(r, overlap_bytes=overlap_bytes)
    if r.first and r.last:
        return Partial(head=None, table=_table([text], stage), tail=None, tail_file=r.index)
    return count_window(
        text, extra, first=r.first, last=r.last, stage=stage, index=r.index, head_chars=head_chars
    )


def _reduce(
    client: Client, futures: list[Any], merge: Callable[[Partial, Partial], Partial]
) -> Partial:
    """Binary tree of ``merge`` tasks over ``futures`` in order; depth ceil(log2 n)."""
    if not futures:
        return Partial(head=None, table=EMPTY, tail=None, tail_file=-1)
    level = futures
    while len(level) > 1:
        pairs = [
            client.submit(merge, a, b, pure=False)
            for a, b in zip(level[::2], level[1::2], strict=False)
        ]
        level = pairs + level[len(pairs) * 2 :]
    result: Partial = level[0].result()
    return result


def _count(
    client: Client,
    texts: Iterable[str],
    pretokenizer: Pretokenizer,
    *,
    range_bytes: int,
    merge: Callable[[Partial, Partial], Partial],
) -> tuple[ChunkTable, tuple[int, ...]]:
    """The table, and the files read whole after a seam was refused (in order)."""
    spec: Spec = (pretokenizer.stages, pretokenizer.dialect)
    if not isinstance(texts, TextFiles):
        # One batch at a time leaves this process: the corpus need not fit in its memory.
        futures = [
            client.submit(_count_texts, client.scatter([batch])[0], spec, pure=False)
            for batch in batches(texts, range_bytes)
        ]
        partial = _reduce(client, futures, merge)
        return refine(partial.table, pretokenizer), ()
    ranges = texts.ranges(target_bytes=range_bytes)
    whole: set[int] = set()
    if LOOKS_BACK.search(pretokenizer.patterns[0]) is not None:
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
            return refine(partial.table, pretokenizer), tuple(sorted(whole))
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

    ``texts`` given as :class:`~tokembed.text.ranges.TextFiles` are read by the
    workers in ranges of about ``range_bytes``; other texts are sent in batches.

    Raises:
        UsageError(FILE_NOT_FOUND), MeasureError(UNREADABLE_INPUT, INPUT_NOT_UTF8, ...):
            a worker could not read its range.
    """
    return _count(client, texts, pretokenizer, range_bytes=range_bytes, merge=combine)[0]


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
        TokenizerError(LOCAL_CLUSTER_NOT_STARTED): with no scheduler, the local cluster's
            worker processes cannot start (code run from stdin, or a script without the
            ``__main__`` guard); the fix says how to run it.
        and what :func:`count_with_client` raises.
    """
    with connect_cluster(scheduler, workers) as client:
        return count_with_client(client, texts, pretokenizer, range_bytes=range_bytes)
