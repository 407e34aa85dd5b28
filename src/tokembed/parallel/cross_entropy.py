"""Cross entropy over vocabulary-sharded logits, never materializing [N, V] on one rank.

Rank r holds the logit block ``z[:, s_r:e_r]`` (from
:class:`~tokembed.parallel.lm_head.VocabParallelLMHead`). With the global
quantities

    m_t   = max_c z_tc                      (all-reduce MAX)
    Z_t   = sum_c exp(z_tc - m_t)           (all-reduce SUM)
    y_t   = z_{t, target_t} - m_t           (owner contributes, all-reduce SUM)
    a_t   = sum_c (z_tc - m_t)              (all-reduce SUM; label smoothing only)

the per-position loss with label smoothing eps over V classes is

    l_t = (1 - eps) (log Z_t - y_t) + eps (log Z_t - a_t / V)

which equals ``F.cross_entropy(..., label_smoothing=eps)``. Positions whose
target is ``ignore_index`` contribute 0 and are excluded from the mean. The
three SUMs travel in one all-reduce of [N, 3] values.

Backward needs no communication: the gradient of the local block is
``softmax_r - (1 - eps) onehot_r(target) - eps / V``, scaled by the upstream
gradient (and ``1 / n_valid`` for the mean). The gradient of the hidden states
is summed across ranks by the head's own backward.

Contract: every rank of the group passes the same ``target`` (tensor
parallelism replicates it). The first collective all-gathers every rank's
``(vocab_start, V_r)``: it yields V and proves the logit blocks tile
``[0, V)``; targets are validated right after it, before any other, so a bad
cover or target raises at the same point on every rank and nobody waits.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.distributed as dist

from tokembed.errors import EmbeddingError, UsageError
from tokembed.parallel.collectives import ProcessGroup
from tokembed.parallel.intervals import validate_cover

__all__ = ["vocab_parallel_cross_entropy"]

Reduction = Literal["mean", "sum", "none"]


def _loss_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least fp32: exp and the sums over V lose too much in fp16/bf16; fp64 stays fp64."""
    return torch.promote_types(dtype, torch.float32)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        logits: torch.Tensor,  # [N, V_r]
        target: torch.Tensor,  # [N]
        vocab_start: int,
        vocab_size: int,
        ignore_index: int,
        smoothing: float,
        group: ProcessGroup | None,
    ) -> torch.Tensor:
        local_v, input_dtype = logits.shape[1], logits.dtype
        # Half-precision logits are summed in fp32; fp32 and fp64 keep their own precision.
        logits = logits.to(_loss_dtype(logits.dtype))
        valid = target != ignore_index  # [N]
        owned = valid & (target >= vocab_start) & (target < vocab_start + local_v)  # [N]
        local_target = torch.where(owned, target - vocab_start, 0)  # [N]

        # An empty tail shard (e.g. V=9 over 4) contributes -inf to the max.
        local_max = (
            logits.max(dim=1).values
            if local_v
            else logits.new_full((logits.shape[0],), float("-inf"))
        )  # [N]
        dist.all_reduce(local_max, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - local_max.unsqueeze(1)  # [N, V_r]
        exp = shifted.exp()  # [N, V_r]
        picked = (
            shifted.gather(1, local_target.unsqueeze(1)).squeeze(1)
            if local_v
            else logits.new_zeros(logits.shape[0])
        )  # [N]
        sums = torch.stack((picked * owned, exp.sum(dim=1), shifted.sum(dim=1)), dim=1)  # [N, 3]
        dist.all_reduce(sums, group=group)
        target_logit, sum_exp, sum_shifted = sums.unbind(1)  # [N] each

        log_z = sum_exp.log()  # [N]
        loss = (1.0 - smoothing) * (log_z - target_logit)
        if smoothing:
            loss = loss + smoothing * (log_z - sum_shifted / vocab_size)
        loss = torch.where(valid, loss, 0.0)  # [N]

        ctx.smoothing, ctx.vocab_size, ctx.logits_dtype = smoothing, vocab_size, input_dtype
        ctx.save_for_backward(exp / sum_exp.unsqueeze(1), local_target, owned, valid)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        softmax, local_target, owned, valid = ctx.saved_tensors  # [N, V_r], [N], [N], [N]
        grad = softmax.clone()  # [N, V_r]
        if grad.shape[1]:
            rows = owned.nonzero().squeeze(1)
            grad[rows, local_target[rows]] -= 1.0 - ctx.smoothing
        if ctx.smoothing:
            grad -= ctx.smoothing / ctx.vocab_size
        grad *= (grad_loss * valid).unsqueeze(1)
        return grad.to(ctx.logits_dtype), None, None, None, None, None, None


def vocab_parallel_cross_entropy(
    local_logits: torch.Tensor,
    target: torch.Tensor,
    *,
    group: ProcessGroup | None = None,
    vocab_start: int,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: Reduction = "mean",
) -> torch.Tensor:
    """Cross entropy of logits sharded by vocabulary rows; equals ``F.cross_entropy``.

    ``local_logits``: [..., V_r], this rank's columns ``[vocab_start,
    vocab_start + V_r)``; ``target``: [...] global ids (same on every rank).
    Returns a scalar for "mean"/"sum", else [...] (0 at ignored positions).
    The loss is computed and returned in the logits' dtype promoted to at least
    fp32 (fp16/bf16 -> fp32, fp64 stays fp64); the logits' gradient has their
    own dtype.

    Example::

        >>> head = VocabParallelLMHead(4, 10)
        >>> loss = vocab_parallel_cross_entropy(head(h), target, vocab_start=head.vocab_start)

    Raises:
        EmbeddingError ID_OUT_OF_RANGE: a non-ignored target is outside [0, V).
        EmbeddingError SHAPE_MISMATCH: logits and target shapes disagree.
        ParallelError SHARD_GAP / SHARD_OVERLAP: the ranks' ``[vocab_start,
            vocab_start + V_r)`` blocks do not tile ``[0, V)`` in rank order.
        UsageError INVALID_ARGUMENT: bad reduction or label_smoothing.
    """
    if reduction not in ("mean", "sum", "none") or not 0.0 <= label_smoothing <= 1.0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"reduction={reduction!r}, label_smoothing={label_smoothing}",
            value=(reduction, label_smoothing),
            fix="use reduction in ('mean', 'sum', 'none') and 0 <= label_smoothing <= 1",
        )
    if local_logits.shape[:-1] != target.shape:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"logits {tuple(local_logits.shape)} do not match target {tuple(target.shape)}",
            value=(tuple(local_logits.shape), tuple(target.shape)),
            fix="pass logits [..., V_r] and target [...] for the same positions",
        )
    # One tiny all-gather of (vocab_start, V_r) per rank gives V and proves the
    # blocks tile [0, V); it is the first collective, so a bad cover or target
    # below is refused at the same point on every rank.
    mine = torch.tensor([vocab_start, local_logits.shape[-1]], dtype=torch.int64)
    blocks = torch.empty(2 * dist.get_world_size(group), dtype=torch.int64)
    dist.all_gather_single(blocks, mine, group=group)
    starts, widths = blocks.view(-1, 2).unbind(1)
    vocab_size = int(widths.sum())
    validate_cover(
        [(s, s + w) for s, w in zip(starts.tolist(), widths.tolist(), strict=True)], vocab_size
    )
    bad = (target != ignore_index) & ((target < 0) | (target >= vocab_size))
    if bool(bad.any()):
        value = int(target[bad][0])
        raise EmbeddingError(
            "ID_OUT_OF_RANGE",
            f"target {value} is outside [0, {vocab_size}) and is not ignore_index={ignore_index}",
            value=value,
            fix="use targets from the model's vocabulary, or ignore_index for padding",
        )
    flat_logits = local_logits.reshape(target.numel(), local_logits.shape[-1])  # [N, V_r]
    loss = _VocabParallelCrossEntropy.apply(
        flat_logits, target.reshape(-1).long(), vocab_start, vocab_size, ignore_index,
        label_smoothing, group,
    )  # fmt: skip
    if reduction == "none":
        return loss.reshape(target.shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (target != ignore_index).sum()
