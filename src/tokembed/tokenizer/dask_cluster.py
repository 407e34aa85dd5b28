"""The Dask cluster a job runs on: the scheduler a user names, or a local one started for it.

:func:`connect_cluster` is the one way tokembed reaches Dask (counting chunks for training,
tokenizing a corpus into shards): with an address it connects within a few seconds or
refuses with ``SCHEDULER_UNREACHABLE``; without one it starts a local cluster of worker
processes (one thread each, the sampling profiler off) and says how to fix a script
whose workers cannot start (``LOCAL_CLUSTER_NOT_STARTED``).

Example::

    >>> with connect_cluster(None, 2) as client:  # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tokembed.errors import TokenizerError

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["connect_cluster"]

_CONNECT_SECONDS = 5.0  # a scheduler answers in milliseconds; 5 s covers a busy one


@contextlib.contextmanager
def connect_cluster(scheduler: str | None, workers: int) -> Iterator[Client]:
    """A client of the scheduler at ``scheduler``, or of a local cluster of ``workers`` processes.

    Raises:
        TokenizerError(SCHEDULER_UNREACHABLE): nothing answers at ``scheduler``.
        TokenizerError(LOCAL_CLUSTER_NOT_STARTED): the local workers cannot start (code
            read from stdin, or a script without the ``__main__`` guard).
    """
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
