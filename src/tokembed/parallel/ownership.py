"""Who may update which rows: ownership marks on shards and checks before an optimizer step.

Spec 0x04A separates the *mathematical* owner of a row (every occurrence adds
to one logical dE[j]) from its *execution* owner (the rank that stores and
updates it). This module records the execution owner on each sharded
Parameter and refuses three mistakes that keep every shape valid (0x0D):

* NON_OWNER_STEP — an optimizer is about to step rows this rank does not
  own: a shard marked for another rank, or the full replicated table a shard
  was cut from (a stale optimizer reference after sharding).
* GROUP_CONFLATION — the tensor-parallel and data-parallel groups are the
  same group, or share more than this rank (the axes must be orthogonal).
* DOUBLE_AVERAGING — a data-parallel AVG all-reduce on gradients of a loss
  already averaged over the global batch divides by the world size twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tokembed.parallel._collectives import ProcessGroup, group_rank, group_size
from tokembed.parallel.intervals import row_intervals, validate_cover

__all__ = ["RowOwnership", "mark_rows", "row_ownership"]

_ATTR = "_tokembed_rows"


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
