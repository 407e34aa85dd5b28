"""Data-parallel gradient reduction with a declared convention, and orthogonal groups.

A row shard can be unique across the tensor-parallel (TP) group and still be
replicated across a data-parallel (DP) group. Two mistakes keep
every shape valid and silently change the update:

* GROUP_CONFLATION — the TP and DP groups are the same group, or share more
  than this rank. The axes must be orthogonal: with TP {0,1},{2,3} the DP
  groups are {0,2},{1,3}; reducing a shard over its own TP group sums
  different rows' owners, and reducing nothing over DP lets replicas drift.
* DOUBLE_AVERAGING — the loss is already a mean over the *global* batch and
  the DP all-reduce averages again: the gradient shrinks by the DP size.

:class:`GradientReduction` freezes the convention (collective SUM/AVG and the
loss normalization) and refuses the double division when it is built, before
any gradient exists. ``sum`` + ``local_mean`` (neither divides by R, the
effective learning rate grows R-fold) is refused as well.

Example::

    >>> conv = GradientReduction(collective="sum", loss_normalization="global_mean")
    >>> reduce_gradients(model.parameters(), group=dp_group, reduction=conv)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from tokembed.errors import ParallelError, UsageError
from tokembed.parallel.collectives import group_size

__all__ = ["GradientReduction", "check_parallel_groups", "reduce_gradients"]


def _ranks(group: ProcessGroup | None) -> list[int]:
    return dist.get_process_group_ranks(group if group is not None else dist.group.WORLD)


def check_parallel_groups(
    *, tensor_group: ProcessGroup | None, data_group: ProcessGroup | None
) -> None:
    """Require the TP and DP groups to be distinct axes that meet only at this rank.

    Local (no collective): every rank built the same groups, so every rank
    reaches the same verdict.

    Raises:
        ParallelError GROUP_CONFLATION: the same group object (None counts as
            the world) is passed for both, or the groups share other ranks.
    """
    tp, dp = _ranks(tensor_group), _ranks(data_group)
    shared = sorted(set(tp) & set(dp))
    me = dist.get_rank()
    same = tensor_group is data_group and group_size(tensor_group) > 1
    if same or shared != [me]:
        raise ParallelError(
            "GROUP_CONFLATION",
            f"tensor-parallel ranks {tp} and data-parallel ranks {dp} share {shared}; "
            f"they must meet only at rank {me}",
            value=(tuple(tp), tuple(dp)),
            fix="build TP groups of consecutive ranks and DP groups of ranks with the same "
            "TP index, e.g. TP {0,1},{2,3} and DP {0,2},{1,3}",
        )


@dataclass(frozen=True, kw_only=True)
class GradientReduction:
    """The data-parallel gradient convention.

    collective: "sum" or "avg" (divide the SUM by the DP size).
    loss_normalization: "global_mean" (loss divided by the global token/sample
        count), "local_mean" (divided by this rank's count) or "sum".

    Raises:
        ParallelError DOUBLE_AVERAGING: "avg" with "global_mean".
        UsageError INVALID_ARGUMENT: unknown values, or "sum" with "local_mean".
    """

    collective: Literal["sum", "avg"]
    loss_normalization: Literal["global_mean", "local_mean", "sum"]

    def __post_init__(self) -> None:
        if self.collective not in ("sum", "avg") or self.loss_normalization not in (
            "global_mean",
            "local_mean",
            "sum",
        ):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"collective={self.collective!r}, loss_normalization={self.loss_normalization!r}",
                value=(self.collective, self.loss_normalization),
                fix="collective in ('sum', 'avg'); loss_normalization in "
                "('global_mean', 'local_mean', 'sum')",
            )
        if self.collective == "avg" and self.loss_normalization == "global_mean":
            raise ParallelError(
                "DOUBLE_AVERAGING",
                "the loss is already averaged over the global batch and the all-reduce "
                "averages again: gradients shrink by the data-parallel size",
                value=(self.collective, self.loss_normalization),
                fix="use collective='sum' with a global-mean loss, or 'avg' with a local mean",
            )
        if self.collective == "sum" and self.loss_normalization == "local_mean":
            raise UsageError(
                "INVALID_ARGUMENT",
                "a SUM of per-rank mean gradients divides by nobody's R: the effective "
                "learning rate grows with the data-parallel size",
                value=(self.collective, self.loss_normalization),
                fix="use collective='avg' with a local-mean loss, or a global-mean loss",
            )


def reduce_gradients(
    params: Iterable[torch.Tensor],
    *,
    group: ProcessGroup | None,
    reduction: GradientReduction,
    tensor_group: ProcessGroup | None = None,
) -> None:
    """All-reduce ``.grad`` of ``params`` over the data-parallel ``group`` under ``reduction``.

    Grads are flattened into one buffer (one collective). When a
    ``tensor_group`` is given (None: no tensor-parallel axis to check), the
    two groups are checked first.

    Raises:
        ParallelError GROUP_CONFLATION: see :func:`check_parallel_groups`.
    """
    if tensor_group is not None:
        check_parallel_groups(tensor_group=tensor_group, data_group=group)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])  # [sum numel]
    dist.all_reduce(flat, group=group)
    if reduction.collective == "avg":
        flat /= group_size(group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    assert offset == flat.numel(), (offset, flat.numel())
