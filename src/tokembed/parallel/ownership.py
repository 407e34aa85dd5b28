"""Who may update which rows: ownership marks on shards and checks before an optimizer step.

A row has a *mathematical* owner (every occurrence adds to one logical dE[j])
and an *execution* owner (the rank that stores and updates it). This module records the execution owner on each sharded
Parameter, marks a full table once it has been cut into shards, and refuses
an optimizer step on rows this rank does not own (NON_OWNER_STEP):

* the optimizer still holds the full replicated table a shard was cut from
  (a stale optimizer reference after sharding: every rank would step every
  row, and the copies drift from the shards that forward actually uses);
* a shard Parameter no longer has its owned shape (e.g. ``weight.data`` was
  replaced by the full table), so the step would touch other ranks' rows;
* a shard marked for another rank of the group.

The check is local (no collective), so a rank that refuses cannot leave
peers waiting; :class:`OwnerCheckedOptimizer` runs it before every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed import ProcessGroup

from tokembed.errors import ParallelError
from tokembed.parallel.collectives import group_rank, group_size
from tokembed.parallel.intervals import row_intervals, validate_cover

__all__ = [
    "OwnerCheckedOptimizer",
    "RowOwnership",
    "check_owned_step",
    "mark_rows",
    "mark_sharded_source",
    "row_ownership",
]

_ATTR = "_tokembed_rows"
_SOURCE_ATTR = "_tokembed_sharded_into"


@dataclass(frozen=True, kw_only=True)
class RowOwnership:
    """Rows ``[start, end)`` of a ``num_embeddings``-row table, owned by ``rank`` of ``world_size``."""

    num_embeddings: int
    start: int
    end: int
    rank: int
    world_size: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.end <= self.num_embeddings, self
        assert 0 <= self.rank < self.world_size, self

    @classmethod
    def for_group(cls, num_embeddings: int, *, group: ProcessGroup | None) -> RowOwnership:
        """This rank's ceil-chunk interval of ``num_embeddings`` rows split over ``group``."""
        world, rank = group_size(group), group_rank(group)
        intervals = row_intervals(num_embeddings, world)
        validate_cover(intervals, num_embeddings)
        start, end = intervals[rank]
        return cls(num_embeddings=num_embeddings, start=start, end=end, rank=rank, world_size=world)

    @property
    def intervals(self) -> list[tuple[int, int]]:
        """Every rank's interval, in rank order."""
        return row_intervals(self.num_embeddings, self.world_size)

    @property
    def rows(self) -> int:
        """Number of rows held locally."""
        return self.end - self.start


def mark_rows(param: torch.Tensor, ownership: RowOwnership) -> None:
    """Record on ``param`` which rows it holds and which rank owns them."""
    setattr(param, _ATTR, ownership)


def row_ownership(param: torch.Tensor) -> RowOwnership | None:
    """The ownership recorded on ``param``, or None for an unsharded tensor."""
    return getattr(param, _ATTR, None)


def mark_sharded_source(param: torch.Tensor, ownership: RowOwnership) -> None:
    """Record that the full table ``param`` was cut into shards like ``ownership``."""
    setattr(param, _SOURCE_ATTR, ownership)


def check_owned_step(
    optimizer: torch.optim.Optimizer, *, group: ProcessGroup | None = None
) -> None:
    """Refuse a step that would update rows this rank does not own.

    ``group``, when given, is the tensor-parallel group the shards were built
    over; a shard recorded for another rank of it is refused too.

    Raises:
        ParallelError NON_OWNER_STEP: the optimizer holds a full table that was
            sharded, a shard whose shape is not its owned [e - s, d], or a
            shard recorded for another rank.
    """
    rank = None if group is None else group_rank(group)
    for index, param in enumerate(p for g in optimizer.param_groups for p in g["params"]):
        source: RowOwnership | None = getattr(param, _SOURCE_ATTR, None)
        if source is not None:
            raise ParallelError(
                "NON_OWNER_STEP",
                f"optimizer parameter {index} is the full [{source.num_embeddings}, ...] table "
                f"that was sharded; stepping it updates rows owned by other ranks",
                value=index,
                fix="build the optimizer from the sharded model's parameters, after sharding",
            )
        owned = row_ownership(param)
        if owned is None:
            continue
        if param.shape[0] != owned.rows or (rank is not None and rank != owned.rank):
            raise ParallelError(
                "NON_OWNER_STEP",
                f"optimizer parameter {index} has {param.shape[0]} rows on rank "
                f"{owned.rank if rank is None else rank}, but holds rows [{owned.start}, "
                f"{owned.end}) owned by rank {owned.rank}",
                value=index,
                fix="step only this rank's shard; load other rows through their owners",
            )


class OwnerCheckedOptimizer:
    """Wrap an optimizer so every ``step`` first runs :func:`check_owned_step`.

    Example::

        >>> opt = OwnerCheckedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        >>> loss.backward(); opt.step(); opt.zero_grad()
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, *, group: ProcessGroup | None = None
    ) -> None:
        self.optimizer, self.group = optimizer, group

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def step(self) -> None:
        """Check ownership, then step the wrapped optimizer."""
        check_owned_step(self.optimizer, group=self.group)
        self.optimizer.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()
