"""Global-norm gradient clipping for sparse and row-sharded embedding gradients.

``torch.nn.utils.clip_grad_norm_`` on one rank's shard clips by the *local*
norm, so the global gradient can exceed the threshold (local clipping is
not global clipping). Here each rank sums squared row norms of
what it owns, ``q_r = sum_u ||g_u||^2``, the sums are all-reduced, and every
rank scales by ``gamma = min(1, m / (sqrt(q) + eps))``. Sparse
gradients are coalesced first (duplicate indices must be summed before they
are squared) and scaled through their stored values: nothing is densified.

:func:`check_global_norm` is the matching check after the fact: it
all-reduces the squared norms of the clipped shards and refuses a global norm
above the threshold, which is what per-shard ``clip_grad_norm_`` leaves.

With ``group=None`` this is single-process clipping and equals
``clip_grad_norm_`` on the densified gradients (same eps=1e-6 convention).

Example::

    >>> w = torch.nn.Parameter(torch.zeros(8, 3))
    >>> w.grad = torch.sparse_coo_tensor([[1, 1]], [[3.0, 0, 0], [0, 4.0, 0]], (8, 3))
    >>> float(clip_grad_norm_sparse_([w], 1.0))
    5.0
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from tokembed.errors import EmbeddingError, UsageError

__all__ = ["check_global_norm", "clip_grad_norm_sparse_", "squared_grad_norm"]


def squared_grad_norm(grads: Iterable[torch.Tensor]) -> torch.Tensor:
    """Sum of squared entries of dense and (coalesced) sparse gradients, in float64."""
    total = torch.zeros((), dtype=torch.float64)
    for g in grads:
        values = g.values() if g.layout == torch.sparse_coo else g
        total = total + values.detach().to(torch.float64).pow(2).sum().cpu()
    return total


def clip_grad_norm_sparse_(
    parameters: Iterable[torch.Tensor],
    max_norm: float,
    *,
    eps: float = 1e-6,
    group: torch.distributed.ProcessGroup | None = None,
) -> torch.Tensor:
    """Clip the gradients of ``parameters`` in place to global L2 norm ``max_norm``.

    ``group``: a process group whose ranks hold disjoint row shards of the same
    logical gradient; their squared norms are SUM-all-reduced (one scalar per
    call). Returns the global norm before clipping (float32, like torch).
    Sparse gradients are replaced by their coalesced form.
    """
    if not max_norm > 0:
        raise UsageError(
            "INVALID_ARGUMENT", f"max_norm must be > 0, got {max_norm}", value=max_norm
        )
    params = [p for p in parameters if p.grad is not None]
    for p in params:
        assert p.grad is not None
        if p.grad.layout == torch.sparse_coo and not p.grad.is_coalesced():
            p.grad = p.grad.coalesce()
    grads = [p.grad for p in params if p.grad is not None]
    squared = squared_grad_norm(grads)
    if group is not None:
        import torch.distributed as dist

        dist.all_reduce(squared, op=dist.ReduceOp.SUM, group=group)
    norm = squared.sqrt().to(torch.float32)
    coef = torch.clamp(max_norm / (norm + eps), max=1.0)
    for g in grads:
        target = g.values() if g.layout == torch.sparse_coo else g
        target.mul_(coef.to(device=target.device, dtype=target.dtype))
    return norm


def check_global_norm(
    parameters: Iterable[torch.Tensor],
    max_norm: float,
    *,
    group: torch.distributed.ProcessGroup | None = None,
) -> float:
    """Return the global gradient norm over ``group``'s shards; refuse one above ``max_norm``.

    Call it on every rank of ``group`` after clipping (a collective when
    ``group`` is given). Clipping scales by ``max_norm / (norm + eps)`` in the
    gradients' dtype, so a correctly clipped norm exceeds ``max_norm`` by at most
    that dtype's rounding: the bound is ``max_norm * (1 + eps(dtype))``.

    Raises:
        EmbeddingError CLIP_NOT_GLOBAL: the global norm exceeds the bound (each shard
            was clipped by its own local norm).
        UsageError INVALID_ARGUMENT: ``max_norm`` is not positive.
    """
    if not max_norm > 0:
        raise UsageError(
            "INVALID_ARGUMENT", f"max_norm must be > 0, got {max_norm}", value=max_norm
        )
    grads = [p.grad for p in parameters if p.grad is not None]
    squared = squared_grad_norm(grads)
    if group is not None:
        import torch.distributed as dist

        dist.all_reduce(squared, op=dist.ReduceOp.SUM, group=group)
    norm = float(squared.sqrt())
    eps = max((torch.finfo(g.dtype).eps for g in grads), default=0.0)
    if norm > max_norm * (1 + eps):
        raise EmbeddingError(
            "CLIP_NOT_GLOBAL",
            f"the global gradient norm is {norm:.6g}, above the declared threshold {max_norm:g}:"
            " the shards were clipped by their local norms",
            value=norm,
            fix="clip with clip_grad_norm_sparse_(params, max_norm, group=...) so the squared"
            " norms are summed across owners before scaling",
        )
    return norm
