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

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tokembed.errors import TokenizerError
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
from tokembed.tokenizer.pretokenize import Pretokenizer

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["RANGE_BYTES", "count_on_dask", "count_with_client"]

# 8 MiB per task: ~0.7 s of regex on one core, a few hundred MB of chunk strings at
# peak on a worker, and ~12,000 tasks for 100 GB (the scheduler's overhead is ~1 ms each).
RANGE_BYTES = 8 << 20
_OVERLAP_BYTES = 1 << 15  # scanned past a range's end: >= 8,192 characters of any script
_HEAD_CHARS = 1 << 12  # a range's characters whose chunks wait for the left neighbour's scan
_CONNECT_SECONDS = 5.0  # a scheduler answers in milliseconds; 5 s covers a busy one


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


@contextlib.contextmanager
def _connect(scheduler: str | None, workers: int) -> Iterator[Client]:
    import dask
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if scheduler is None:
            # Our own cluster serves no one's dashboard: its sampling profiler (a thread
            # per worker, every 10 ms) cost ~20% of the workers' CPU counting RusLit-40.
            stack.enter_context(dask.config.set({"distributed.worker.profile.enabled": False}))
            _require_importable_main(workers)
            try:
                cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",  # any free port, never a fixed one
                    silence_logs=logging.ERROR,
                )
            except (RuntimeError, OSError, TimeoutError) as exc:
                # Dask's "Nanny failed to start": most often a script without the
                # __main__ guard, whose import in each spawned worker starts training again.
                raise _cluster_not_started(workers, f"{type(exc).__name__}: {exc}") from exc
            stack.enter_context(cluster)
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


_CLUSTER_FIX = (
    'run it from a script file whose calls sit under `if __name__ == "__main__":`, or, '
    "in a notebook or `python -`, start an in-process cluster yourself and pass its address: "
    "`cluster = distributed.LocalCluster(processes=False)`, then "
    '`TrainConfig(engine="dask", scheduler=cluster.scheduler_address)`'
)


def _cluster_not_started(workers: int, why: str) -> TokenizerError:
    return TokenizerError(
        "LOCAL_CLUSTER_NOT_STARTED",
        f"a local Dask cluster of {workers} worker process(es) cannot start: {why}",
        value=workers,
        fix=_CLUSTER_FIX,
    )


def _require_importable_main(workers: int) -> None:
    # Dask spawns its worker processes, and a spawned process first re-imports the main
    # module from its file. Code read from stdin (`python -`) names a file that does not
    # exist ('<stdin>'), so every worker dies before it starts; say so before any process
    # is started instead of after Dask's traceback. (A notebook's main module has no
    # file at all, which spawn skips, so a notebook passes here.)
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(path, str) and not os.path.exists(path):
        raise _cluster_not_started(
            workers,
            f"its worker processes start by importing the main module from {path!r}, "
            "which is not a file (code read from stdin)",
        )


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
    with _connect(scheduler, workers) as client:
        return count_with_client(client, texts, pretokenizer, range_bytes=range_bytes)
