"""Same numbers from run to run: pinned thread counts, deterministic kernels, child environments.

Floating-point reductions give different roundings when they are split
differently, and a CPU matmul or sum is split by the number of intra-op
threads. Two runs agree bit for bit, or to a tolerance derived from the
rounding unit, only when they run with the same thread count and
deterministic kernels. This module is the one place that sets them, for the
distributed tests and the benchmarks alike:

* :func:`child_environment` / :func:`pinned_environment` — the variables a
  child process needs *before* it imports torch (OpenMP, MKL and OpenBLAS read
  their thread counts once, when they load). Start spawned or forkserver
  children inside :func:`pinned_environment`: they copy the environment then.
* :func:`configure_torch` — in a process that runs torch: intra-op threads,
  ``torch.use_deterministic_algorithms`` and cuDNN's deterministic mode.
* :func:`intra_op_threads` — run one block under another thread count (a
  reference computed under different settings than the code it checks).

torch is imported only inside the functions that use it: a parent may call
:func:`pinned_environment` before anything imported torch.

What this module does not do: seed random generators (callers seed what they
draw), or make different thread counts give the same bits (they do not).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from tokembed.errors import UsageError

__all__ = [
    "THREAD_VARIABLES",
    "child_environment",
    "configure_torch",
    "intra_op_threads",
    "pinned_environment",
]

# Every thread-count variable a CPU torch build or its BLAS reads at load time.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def _check_threads(threads: int) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"threads must be a positive int, got {threads!r}",
            value=threads,
            fix="pass threads=1 or more (one per core the process may use)",
        )
    return threads


def child_environment(*, threads: int) -> dict[str, str]:
    """Variables to set before a child process imports torch, for ``threads`` intra-op threads.

    Example::

        >>> child_environment(threads=1)["OMP_NUM_THREADS"]
        '1'

    Raises:
        UsageError INVALID_ARGUMENT: ``threads`` is not a positive int.
    """
    env = {name: str(_check_threads(threads)) for name in THREAD_VARIABLES}
    # cuBLAS picks reduction splits per call unless its workspace is fixed; torch's
    # deterministic mode refuses cuBLAS matmuls without this (ignored on CPU).
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    return env


@contextmanager
def pinned_environment(*, threads: int) -> Iterator[dict[str, str]]:
    """Within the block ``os.environ`` holds :func:`child_environment`; restored after.

    Child processes started inside the block (``spawn``, ``forkserver``, a
    subprocess) inherit the variables before they import torch.

    Example::

        >>> with pinned_environment(threads=1):
        ...     proc = multiprocessing.get_context("spawn").Process(target=work)
        ...     proc.start()

    Raises:
        UsageError INVALID_ARGUMENT: ``threads`` is not a positive int.
    """
    env = child_environment(threads=threads)
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def configure_torch(*, threads: int, deterministic: bool = True) -> None:
    """Pin this process's torch to ``threads`` intra-op threads and deterministic kernels.

    Call it first thing in a worker (after :func:`pinned_environment` set the
    variables its BLAS read at load). ``deterministic=True`` makes torch refuse
    an op that has no deterministic kernel instead of running one that rounds
    differently from call to call.

    Example::

        >>> configure_torch(threads=1)
        >>> torch.get_num_threads()
        1

    Raises:
        UsageError INVALID_ARGUMENT: ``threads`` is not a positive int.
    """
    _check_threads(threads)
    import torch

    os.environ.update(child_environment(threads=threads))  # for this process's children
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(deterministic)
    # PyTorch's own test utilities freeze these flags process-wide
    # (torch.backends.disable_global_flags); cuDNN is then left as the process set it.
    if not torch.backends.flags_frozen():
        torch.backends.cudnn.deterministic = deterministic
        torch.backends.cudnn.benchmark = not deterministic


@contextmanager
def intra_op_threads(threads: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(threads)``; restore the previous count.

    Example::

        >>> with intra_op_threads(2):
        ...     reference = model(ids)

    Raises:
        UsageError INVALID_ARGUMENT: ``threads`` is not a positive int.
    """
    _check_threads(threads)
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
