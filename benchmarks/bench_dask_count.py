"""Counting chunks on a Dask LocalCluster against the single-process counter, and what moves.

Both sides count the same plain-text file (RusLit-40, decompressed once into a
temporary file) with the ``teaching`` pattern; the tables are checked equal. The
single-process side is ``count_chunks`` at its best configuration for one core
(``workers=1``: no pool to start) on the file's text read by ``read_source``; the
cluster side is ``count_with_client`` on a ``LocalCluster`` of ``--workers``
processes, one thread each, whose workers read their byte ranges themselves (the
workers' sampling profiler off, as in the cluster ``train`` starts).
Reading the file is timed on both sides. Cluster start-up is timed apart (a real
cluster is started once for many jobs), and both sides are warmed first (the
regex dialect tables are built once per process).

Bytes over the network, per worker: the pickled tasks the scheduler sends (a
``ByteRange`` and the pattern), the partial tables the range tasks produce, and the
transfers between workers and to the client that the workers' own transfer logs
record. CPU time is printed beside wall time: the machine is shared.

    python benchmarks/bench_dask_count.py                 # RusLit-40, 2 workers
    python benchmarks/bench_dask_count.py --range-mb 4    # more, smaller ranges
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _env import load_line, machine_line
from tokembed.text.ranges import TextFiles
from tokembed.text.sources import read_source
from tokembed.tokenizer._count import count_chunks
from tokembed.tokenizer._dask_count import RANGE_BYTES, _count_range, count_with_client
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.pretokenize import Pretokenizer

_DATA = Path(
    os.environ.get("TOKEMBED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def _single(path: str, pre: Pretokenizer) -> tuple[ChunkTable, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    text = read_source(path).text
    table = count_chunks([text], pre, workers=1, progress=False)
    return table, time.perf_counter() - wall, time.process_time() - cpu


def _worker_cpu(dask_worker: Any) -> float:
    return time.process_time()


def _transfers(dask_worker: Any) -> dict[str, int]:
    out = sum(int(t.get("total", 0)) for t in dask_worker.transfer_outgoing_log)
    inc = sum(int(t.get("total", 0)) for t in dask_worker.transfer_incoming_log)
    return {"outgoing": out, "incoming": inc}


def _sizes(client: Any, path: str, pre: Pretokenizer, range_bytes: int) -> None:
    """Per worker: ranges, task bytes the scheduler sends, partial-table bytes produced."""
    spec = (pre.stages, pre.dialect)
    ranges = TextFiles((path,)).ranges(target_bytes=range_bytes)
    futures = client.map(_count_range, ranges, spec=spec, pure=False)
    sizes = client.gather(client.map(lambda p: len(pickle.dumps(p, protocol=5)), futures))
    where = client.who_has(futures)
    per: dict[str, list[int]] = {}
    for r, f, size in zip(ranges, futures, sizes, strict=True):
        task = len(pickle.dumps((_count_range, r, spec), protocol=5))
        worker = where[f.key][0]
        row = per.setdefault(worker, [0, 0, 0, 0])
        row[0] += 1
        row[1] += task
        row[2] += size
        row[3] += (r.stop or os.path.getsize(path)) - r.start
    for worker, (n, task, size, read) in sorted(per.items()):
        print(
            f"  {worker}: {n} ranges, {read / 1e6:.1f} MB read from disk; tasks in "
            f"{task:,} B; partial tables out {size / 1e6:.2f} MB ({size / read:.1%} of its bytes)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--range-mb", type=float, default=RANGE_BYTES / 2**20)
    args = ap.parse_args()
    import dask
    from distributed import Client, LocalCluster

    # As count_on_dask starts its own cluster: without the workers' sampling profiler.
    dask.config.set({"distributed.worker.profile.enabled": False})

    print(machine_line())
    print(load_line("start"))
    pre = Pretokenizer.preset("teaching")
    src = _DATA / "ruslit" / "ruslit40.txt.gz"
    range_bytes = int(args.range_mb * 2**20)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "ruslit40.txt")
        Path(path).write_text(read_source(src).text, encoding="utf-8")
        n_bytes = os.path.getsize(path)
        count_chunks(["warm up the dialect tables"], pre, workers=1, progress=False)
        single, wall1, cpu1 = _single(path, pre)
        print(
            f"corpus: {src.name} decompressed, {n_bytes:,} bytes, {len(single):,} distinct chunks"
        )
        print(
            f"single process  count_chunks(workers=1): {wall1:6.2f} s wall "
            f"({n_bytes / 1e6 / wall1:5.2f} MB/s), {cpu1:.2f} s CPU"
        )
        start = time.perf_counter()
        with (
            LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            print(
                f"LocalCluster of {args.workers} processes started in {time.perf_counter() - start:.1f} s"
            )
            client.run(lambda: count_chunks(["warm"], pre, workers=1, progress=False))
            before = client.run(_worker_cpu)
            wall = time.perf_counter()
            table = count_with_client(client, TextFiles((path,)), pre, range_bytes=range_bytes)
            wall2 = time.perf_counter() - wall
            cpu2 = sum(client.run(_worker_cpu).values()) - sum(before.values())
            assert table.to_dict() == single.to_dict()
            assert table.chunks() == single.chunks()
            n_ranges = len(TextFiles((path,)).ranges(target_bytes=range_bytes))
            print(
                f"dask {args.workers} workers, {n_ranges} ranges of {args.range_mb:g} MiB: "
                f"{wall2:6.2f} s wall ({n_bytes / 1e6 / wall2:5.2f} MB/s), {cpu2:.2f} s CPU on workers"
            )
            print(f"speed-up (single / dask, wall): {wall1 / wall2:.2f}x; tables equal: True")
            print(f"final table: {table.nbytes / 1e6:.2f} MB packed ({len(table):,} chunks)")
            print("transfers logged by the workers during the count (bytes):")
            for worker, t in sorted(client.run(_transfers).items()):
                print(f"  {worker}: out {t['outgoing']:,}, in {t['incoming']:,}")
            print("per worker, the range tasks alone:")
            _sizes(client, path, pre, range_bytes)
    print(load_line("end"))


if __name__ == "__main__":
    main()
