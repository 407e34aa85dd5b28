"""Spawn real gloo process groups for distributed tests, collect per-rank results, never hang.

``run_ranks(fn, world_size, *args, timeout=...)`` starts ``world_size``
processes, joins them into one gloo process group and calls
``fn(rank, world_size, *args)`` in each. It returns the per-rank return values
in rank order.

Start method: ``forkserver`` with torch and tokembed.parallel preloaded. The
server is started once per test process and has run no torch op (no thread
pools, no CUDA), so forking from it is as safe as ``spawn``, but each rank
starts in ~0.1 s instead of re-importing torch (2-4 s per rank on CI's two
cores; this cut the parallel suite's wall time by more than half).

Rendezvous: the parent process owns a ``TCPStore`` bound to port 0, so the OS
picks a free localhost port and no probe-then-bind race exists; the children
connect to it as clients.

Failure: if any rank raises, the parent waits a short grace period for the
other ranks (they may be blocked in a collective the failed rank never
entered), then terminates the stragglers and raises ``RankFailed`` carrying the
traceback of the rank whose error arrived first (the cause; later errors are
usually peers whose collective broke when it left). A child that dies without
reporting (segfault, ``os._exit``) or a run exceeding ``timeout`` also raises
``RankFailed`` once every child is killed: a test fails, the suite never hangs.

Results travel as ``torch.save`` bytes through a queue: tensors are then plain
copies, not shared-memory handles that die with the child.

Numeric settings: every rank runs with :func:`rank_threads` intra-op threads
(``$OMP_NUM_THREADS`` when the caller set it, else one: CI has 2 cores and 2-4
ranks per group) and deterministic kernels, through
:mod:`tokembed._determinism`. The thread variables are in the environment
before the forkserver imports torch, so the BLAS libraries load with them.

Example::

    def _sum(rank: int, world_size: int, base: int) -> int:
        t = torch.tensor([base + rank])
        dist.all_reduce(t)
        return int(t)

    assert run_ranks(_sum, 2, 10) == [21, 21]

``fn`` must be a module-level function (it is pickled by reference).
"""

from __future__ import annotations

import io
import os
import queue
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tokembed._determinism import configure_torch, pinned_environment

__all__ = ["RankFailed", "backend_for", "rank_device", "rank_threads", "run_ranks"]

# Seconds the parent keeps waiting for the other ranks after one has failed:
# enough for ranks that were about to finish, far below any collective timeout.
_GRACE_S = 3.0
_HOST = "127.0.0.1"


def backend_for(world_size: int) -> str:
    """``"nccl"`` when there is a GPU per rank, else ``"gloo"`` (CPU)."""
    return (
        "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world_size else "gloo"
    )


def rank_device() -> torch.device:
    """The device a rank's tensors live on: its GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def rank_threads() -> int:
    """Intra-op threads per rank: ``$OMP_NUM_THREADS`` if set (first entry of a list), else 1."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value else 1


def _context() -> Any:
    """A forkserver that imported torch once: each rank forks from it (~0.1 s), not re-imports."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed", "tokembed.parallel"])
    return ctx


class RankFailed(AssertionError):
    """A spawned rank raised, died or timed out; the message holds the child traceback."""


def _child(
    rank: int,
    world_size: int,
    port: int,
    timeout: float,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    results: Any,
    threads: int,
    backend: str,
) -> None:
    try:
        configure_torch(threads=threads)
        if backend == "nccl":
            torch.cuda.set_device(rank)
        store = dist.TCPStore(
            _HOST, port, world_size, is_master=False, timeout=timedelta(seconds=timeout)
        )
        dist.init_process_group(
            backend,
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
        )
        value = fn(rank, world_size, *args)
        buffer = io.BytesIO()
        torch.save(value, buffer)
        results.put((rank, "ok", buffer.getvalue()))
    except BaseException:  # report everything, including KeyboardInterrupt/SystemExit
        # Report before leaving the group: peers see the broken connection only after this.
        results.put((rank, "error", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _kill(processes: list[Any]) -> None:
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2.0)


def run_ranks(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    backend: str = "gloo",
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; return results by rank.

    ``backend="nccl"`` joins an NCCL group instead, rank ``r`` on ``cuda:r``
    (:func:`backend_for` picks NCCL where enough GPUs exist).

    Raises:
        RankFailed: a rank raised (message carries its traceback), died
            without a result, or the whole run exceeded ``timeout`` seconds.
    """
    __tracebackhide__ = True  # pytest: show the child traceback, not this function
    assert world_size >= 1, world_size
    ctx = _context()
    threads = rank_threads()
    store = dist.TCPStore(
        _HOST, 0, world_size + 1, is_master=True, wait_for_workers=False,
        timeout=timedelta(seconds=timeout),
    )  # fmt: skip
    results = ctx.Queue()
    processes = [
        ctx.Process(
            target=_child,
            args=(rank, world_size, store.port, timeout, fn, args, results, threads, backend),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    # The forkserver starts with the first child and keeps the environment it saw.
    with pinned_environment(threads=threads):
        for proc in processes:
            proc.start()
    values: dict[int, Any] = {}
    errors: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(values) + len(errors) < world_size:
            now = time.monotonic()
            if errors:
                deadline = min(deadline, now + _GRACE_S)
            if now >= deadline:
                break
            try:
                rank, status, payload = results.get(timeout=min(0.2, deadline - now))
            except queue.Empty:
                dead = [
                    r
                    for r, p in enumerate(processes)
                    if not p.is_alive() and p.exitcode != 0 and r not in values and r not in errors
                ]
                for r in dead:
                    errors[r] = f"rank {r} died with exit code {processes[r].exitcode}"
                continue
            if status == "ok":
                values[rank] = torch.load(io.BytesIO(payload), weights_only=False)
            else:
                errors[rank] = payload
    finally:
        _kill(processes)
        del store
    if errors:
        # The first error to arrive is the cause; later ones are usually peers whose
        # collective broke because the first rank left the group.
        first = next(iter(errors))
        others = sorted(set(errors) - {first})
        raise RankFailed(
            f"rank {first} of {world_size} failed in {fn.__name__}"
            + (f" (also failed: ranks {others})" if others else "")
            + f":\n{errors[first]}"
        )
    missing = sorted(set(range(world_size)) - set(values))
    if missing:
        raise RankFailed(
            f"{fn.__name__} on {world_size} ranks timed out after {timeout:.0f}s; "
            f"ranks without a result: {missing}"
        )
    return [values[r] for r in range(world_size)]
