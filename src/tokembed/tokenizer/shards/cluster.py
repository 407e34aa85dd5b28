"""Shards encoded on a Dask cluster: one task per planned shard, each worker reading its own bytes.

The tokenizer is scattered once to every worker; a task gets a :class:`~.shard_writer.ShardJob`
(the shard's byte ranges, the output folder) and runs :func:`~.shard_writer.encode_shard` there,
so the workers need the inputs and the output folder at the same paths (one machine, or a
shared filesystem, as for training on Dask). Results come back as shards finish; the
caller records each in the manifest. The cluster is the one counting uses
(:func:`tokembed.tokenizer.dask_cluster.connect_cluster`): ``scheduler=None`` starts a local cluster of
``workers`` processes with its profiler off.

Example::

    >>> for entry in dask_shards(jobs, tok, scheduler=None, workers=2):  # doctest: +SKIP
    ...     print(entry.name, entry.tokens)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tokembed.tokenizer.dask_cluster import connect_cluster
from tokembed.tokenizer.shards.manifest import ShardEntry
from tokembed.tokenizer.shards.shard_writer import ShardJob, encode_shard
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["dask_shards"]


def _encode_task(job: ShardJob, tokenizer: Tokenizer) -> ShardEntry:
    return encode_shard(job, tokenizer)


def dask_shards(
    jobs: Sequence[ShardJob], tokenizer: Tokenizer, *, scheduler: str | None, workers: int
) -> Iterator[ShardEntry]:
    """Each job's finished shard entry, in the order the shards finish.

    Raises:
        TokenizerError(SCHEDULER_UNREACHABLE, LOCAL_CLUSTER_NOT_STARTED): no cluster.
        What :func:`~.shard_writer.encode_shard` raises on a worker, re-raised here.
    """
    if not jobs:
        return
    from distributed import as_completed

    with connect_cluster(scheduler, workers) as client:
        shared: Any = client.scatter(tokenizer, broadcast=True)
        futures = [client.submit(_encode_task, job, shared, pure=False) for job in jobs]
        for future in as_completed(futures):
            entry: ShardEntry = future.result()
            yield entry
