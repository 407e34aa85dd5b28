"""Per-rank ledgers: what a sharded table stores, and what its collectives move.

Three accounts, kept apart because they answer different questions:

* :func:`memory_ledger` — bytes this rank holds for parameters, gradients and
  optimizer state (tied Parameters counted once).
* :func:`schedule_payloads` — the *logical* payload per step of each way to lay out
  an embedding table over ranks (replicated, owner-routed rows, masked local rows,
  sharded columns) by closed formulas (tensor bytes, not a wire-time model).
* :func:`count_collectives` — the bytes actually handed to collectives while a
  block runs, recorded per call. It observes the ``c10d`` and
  ``_c10d_functional`` operators at the dispatcher, so it sees our layers,
  DeepSpeed, DTensor and Megatron-Core alike, in forward and in backward.

Example::

    >>> schedule_payloads(num_embeddings=8, embedding_dim=3, n_tokens=8, n_remote=2)
    {'replicated': 96, 'owner_routed': 80, 'masked_local': 96, 'column_sharded': 96}
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from tokembed.errors import UsageError

__all__ = [
    "CollectiveCall",
    "CollectiveLedger",
    "MemoryLedger",
    "count_collectives",
    "count_remote",
    "memory_ledger",
    "schedule_payloads",
]


# --- logical payload formulas -------------------------------------------------


def _require_nonnegative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"{name} = {value} is negative",
                value=value,
                fix=f"pass a count or byte width >= 0 for {name}",
            )


def schedule_payloads(
    *,
    num_embeddings: int,
    embedding_dim: int,
    n_tokens: int,
    n_remote: int,
    value_bytes: int = 4,
    id_bytes: int = 8,
    meta_bytes: int = 8,
) -> dict[str, int]:
    """Logical bytes one step of each table layout moves, by closed formulas.

    * ``replicated``: every rank holds the whole table and the data-parallel gradient
      all-reduce moves the dense gradient buffer ``V·d·b``.
    * ``owner_routed``: rows sharded by owner, each rank's ids routed to the owners
      (:class:`~tokembed.parallel.routed.RowRoutedEmbedding`):
      ``N_remote·(b_i + b_m) + 2·N_remote·d·b`` (requests, forward rows, backward row
      gradients).
    * ``masked_local``: rows sharded, every rank looks up the ids it owns and the
      partial outputs are summed (all-reduce, or reduce-scatter along the sequence;
      Megatron's and :class:`~tokembed.parallel.vocab_embedding.VocabParallelEmbedding`):
      the output reduction buffer ``N·d·b``.
    * ``column_sharded``: every rank holds a slice of the features of all rows, and the
      full output is gathered (:class:`~tokembed.parallel.column.ColumnParallelEmbedding`):
      ``N·d·b``.

    ``n_tokens`` is N (positions per step), ``n_remote`` the routed occurrences whose
    owner differs from their origin (:func:`count_remote`).

    Example: a two-rank trace (V=8, d=3, N=8, N_remote=2) gives
    ``{'replicated': 96, 'owner_routed': 80, 'masked_local': 96, 'column_sharded': 96}``.

    Raises:
        UsageError: INVALID_ARGUMENT for a negative count or width.
    """
    _require_nonnegative(
        num_embeddings=num_embeddings,
        embedding_dim=embedding_dim,
        n_tokens=n_tokens,
        n_remote=n_remote,
        value_bytes=value_bytes,
        id_bytes=id_bytes,
        meta_bytes=meta_bytes,
    )
    row_bytes = embedding_dim * value_bytes
    return {
        "replicated": num_embeddings * row_bytes,
        "owner_routed": n_remote * (id_bytes + meta_bytes) + 2 * n_remote * row_bytes,
        "masked_local": n_tokens * row_bytes,
        "column_sharded": n_tokens * row_bytes,
    }


def count_remote(
    ids_by_origin: Sequence[torch.Tensor], intervals: Sequence[tuple[int, int]]
) -> int:
    """Occurrences whose owner rank differs from their origin rank.

    ``ids_by_origin[r]`` are the ids that rank ``r`` looks up; ``intervals[r]`` is the
    ``[start, end)`` row range rank ``r`` owns. Every occurrence is counted (no
    deduplication), as in the routed-payload formula of :func:`schedule_payloads`.

    Example: origin 0 = [1, 4, 1, 0], origin 1 = [4, 6, 1, 4], intervals [(0, 4), (4, 8)] → 2.

    Raises:
        UsageError: INVALID_ARGUMENT when there is not one interval per origin rank.
    """
    if len(ids_by_origin) != len(intervals):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{len(ids_by_origin)} origin ranks but {len(intervals)} owner intervals",
            value=(len(ids_by_origin), len(intervals)),
            fix="pass one id tensor and one [start, end) interval per rank",
        )
    remote = 0
    for (start, end), ids in zip(intervals, ids_by_origin, strict=True):
        local = (ids >= start) & (ids < end)
        remote += int(ids.numel() - int(local.sum()))
    return remote


# --- per-rank memory ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class MemoryLedger:
    """Bytes one rank holds; each Parameter counted once even when tied."""

    parameters: int
    gradients: int
    optimizer_state: int
    table: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state


def _local_bytes(tensor: torch.Tensor) -> int:
    # A DTensor's nbytes is its global size; this rank stores only the local shard.
    to_local = getattr(tensor, "to_local", None)
    if callable(to_local):
        tensor = to_local()
    return tensor.numel() * tensor.element_size()


def memory_ledger(
    module: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    table: torch.Tensor | None = None,
) -> MemoryLedger:
    """Count this rank's parameter, gradient and optimizer-state bytes for ``module``.

    ``table`` names the embedding weight whose local bytes go to ``MemoryLedger.table``
    (0 when omitted). Optimizer state counts every tensor the optimizer keeps for
    the module's Parameters (moments, step counters).

    Example::

        >>> emb = nn.Embedding(10, 4)
        >>> memory_ledger(emb, table=emb.weight).parameters
        160
    """
    params = {id(p): p for p in module.parameters()}
    parameters = sum(_local_bytes(p) for p in params.values())
    gradients = sum(_local_bytes(p.grad) for p in params.values() if p.grad is not None)
    state_bytes = 0
    if optimizer is not None:
        for param, state in optimizer.state.items():
            if id(param) not in params:
                continue
            state_bytes += sum(
                _local_bytes(v) for v in state.values() if isinstance(v, torch.Tensor)
            )
    return MemoryLedger(
        parameters=parameters,
        gradients=gradients,
        optimizer_state=state_bytes,
        table=0 if table is None else _local_bytes(table),
    )


# --- collectives actually called ----------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CollectiveCall:
    """One collective: the operator family and the bytes of the tensors handed in."""

    op: str
    nbytes: int


@dataclass(kw_only=True)
class CollectiveLedger:
    """Calls recorded by :func:`count_collectives`, in call order."""

    calls: list[CollectiveCall] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(c.nbytes for c in self.calls)

    def by_op(self) -> dict[str, tuple[int, int]]:
        """``{op: (number of calls, bytes)}``."""
        out: dict[str, tuple[int, int]] = {}
        for call in self.calls:
            n, b = out.get(call.op, (0, 0))
            out[call.op] = (n + 1, b + call.nbytes)
        return out


# Operator name -> (family, index of the argument that holds the payload handed in).
# Process-group collectives (dist.all_reduce & co.) dispatch to ``c10d.*``; DTensor
# and functional collectives dispatch to ``_c10d_functional.*`` (torch 2.13 schemas).
_PAYLOAD_ARG: dict[str, tuple[str, int]] = {
    "c10d::allreduce_": ("all_reduce", 0),
    "c10d::allreduce_coalesced_": ("all_reduce", 0),
    "c10d::broadcast_": ("broadcast", 0),
    "c10d::allgather_": ("all_gather", 1),
    "c10d::_allgather_base_": ("all_gather", 1),
    "c10d::allgather_coalesced_": ("all_gather", 1),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", 1),
    "c10d::reduce_scatter_": ("reduce_scatter", 1),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", 1),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "c10d::alltoall_": ("all_to_all", 1),
    "c10d::alltoall_base_": ("all_to_all", 1),
    "_c10d_functional::all_reduce": ("all_reduce", 0),
    "_c10d_functional::all_reduce_": ("all_reduce", 0),
    "_c10d_functional::all_reduce_coalesced": ("all_reduce", 0),
    "_c10d_functional::broadcast": ("broadcast", 0),
    "_c10d_functional::all_gather_into_tensor": ("all_gather", 0),
    "_c10d_functional::all_gather_into_tensor_coalesced": ("all_gather", 0),
    "_c10d_functional::reduce_scatter_tensor": ("reduce_scatter", 0),
    "_c10d_functional::reduce_scatter_tensor_coalesced": ("reduce_scatter", 0),
    "_c10d_functional::all_to_all_single": ("all_to_all", 0),
}


def _payload_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return _local_bytes(value)
    if isinstance(value, list | tuple):
        return sum(_payload_bytes(v) for v in value)
    return 0


class _CollectiveRecorder(TorchDispatchMode):
    def __init__(self, ledger: CollectiveLedger) -> None:
        super().__init__()
        self._ledger = ledger

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        entry = _PAYLOAD_ARG.get(func._schema.name)
        if entry is not None:
            family, index = entry
            payload = args[index] if index < len(args) else None
            self._ledger.calls.append(CollectiveCall(op=family, nbytes=_payload_bytes(payload)))
        return func(*args, **(kwargs or {}))


@contextmanager
def count_collectives() -> Iterator[CollectiveLedger]:
    """Record every collective called inside the block, with the bytes handed in.

    For all-gather that is this rank's input shard, for all-reduce and broadcast the
    whole buffer, for reduce-scatter and all-to-all the full input. Backward passes
    run inside the block are recorded too (the autograd engine carries the mode).

    Example::

        with count_collectives() as ledger:
            loss = model(ids).sum(); loss.backward()
        print(ledger.by_op())      # {'all_reduce': (1, 65536)}
    """
    ledger = CollectiveLedger()
    with _CollectiveRecorder(ledger):
        yield ledger
