"""Collectives with declared backward pairs: each forward collective names its adjoint.

Each forward collective below is a torch.autograd.Function whose backward is the
adjoint of the forward linear map, so a distributed layer differentiates like
its single-process twin:

====================  ============================  ==============================
function              forward                       backward
====================  ============================  ==============================
reduce_from_group     all-reduce SUM                identity
copy_to_group         identity                      all-reduce SUM
reduce_scatter_along  reduce-scatter on ``dim``     all-gather on ``dim``
gather_along          all-gather + concat ``dim``   keep this rank's slice
all_to_all_rows       all_to_all (send -> recv)     all_to_all (recv -> send)
====================  ============================  ==============================

``gather_along``'s split backward assumes the gathered tensor feeds a loss that
every rank computes identically (replicated activations), so each rank's full
upstream gradient is the true one and its own slice is its input's gradient.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroup

from tokembed.parallel.collectives import (
    all_gather_uneven,
    exchange_rows,
    group_rank,
    group_size,
)

__all__ = [
    "all_to_all_rows",
    "copy_to_group",
    "gather_along",
    "reduce_from_group",
    "reduce_scatter_along",
]


class _ReduceFromGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup | None) -> torch.Tensor:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class _CopyToGroup(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def _reduce_scatter(x: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    world = group_size(group)
    moved = x.movedim(dim, 0).contiguous()  # [S, *rest]
    out = moved.new_empty((moved.shape[0] // world, *moved.shape[1:]))  # [S/R, *rest]
    dist.reduce_scatter_single(out, moved, group=group)
    return out.movedim(0, dim)


def _all_gather(x: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    world = group_size(group)
    moved = x.movedim(dim, 0).contiguous()  # [S/R, *rest]
    out = moved.new_empty((moved.shape[0] * world, *moved.shape[1:]))  # [S, *rest]
    dist.all_gather_single(out, moved, group=group)
    return out.movedim(0, dim)


class _ReduceScatterAlong(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int, group: ProcessGroup | None) -> torch.Tensor:
        ctx.dim, ctx.group = dim, group
        return _reduce_scatter(x, dim, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return _all_gather(grad, ctx.dim, ctx.group), None, None


class _GatherAlong(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, dim: int, sizes: list[int], group: ProcessGroup | None
    ) -> torch.Tensor:
        ctx.dim, ctx.sizes, ctx.rank = dim, sizes, group_rank(group)
        moved = x.movedim(dim, 0)  # [n_r, *rest]
        full = all_gather_uneven(moved, sizes, group=group)  # [sum(sizes), *rest]
        return full.movedim(0, dim).contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        start = sum(ctx.sizes[: ctx.rank])
        return grad.narrow(ctx.dim, start, ctx.sizes[ctx.rank]).contiguous(), None, None, None


class _AllToAllRows(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        send: list[int],
        recv: list[int],
        group: ProcessGroup | None,
    ) -> torch.Tensor:
        ctx.send, ctx.recv, ctx.group = send, recv, group
        return exchange_rows(x, send, recv, group=group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return exchange_rows(grad, ctx.recv, ctx.send, group=ctx.group), None, None, None


def reduce_from_group(x: torch.Tensor, *, group: ProcessGroup | None) -> torch.Tensor:
    """Sum ``x`` over the group (forward); pass the gradient through unchanged (backward)."""
    return _ReduceFromGroup.apply(x, group)


def copy_to_group(x: torch.Tensor, *, group: ProcessGroup | None) -> torch.Tensor:
    """Identity forward on a replicated ``x``; sum the partial gradients over the group."""
    return _CopyToGroup.apply(x, group)


def reduce_scatter_along(x: torch.Tensor, *, dim: int, group: ProcessGroup | None) -> torch.Tensor:
    """Sum over the group and keep this rank's ``1/R`` slice of ``dim`` (divisible by R)."""
    return _ReduceScatterAlong.apply(x, dim, group)


def gather_along(
    x: torch.Tensor, *, dim: int, sizes: list[int], group: ProcessGroup | None
) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` (rank r contributes ``sizes[r]``)."""
    return _GatherAlong.apply(x, dim, sizes, group)


def all_to_all_rows(
    x: torch.Tensor, *, send: list[int], recv: list[int], group: ProcessGroup | None
) -> torch.Tensor:
    """Send ``x[sum(send[:r]) : sum(send[:r+1])]`` to rank r; rows from rank r arrive in order."""
    return _AllToAllRows.apply(x, send, recv, group)
