"""Frequency-scaled lookup gradients with a declared count scope.

``scale_grad_by_freq`` divides row j's gradient by a count c_j. Whose
count is the question: PyTorch counts within one embedding call ("invocation"
scope: on a data-parallel rank, that rank's micro-batch), while a training
objective may mean the count over the whole effective batch ("global" scope:
every rank's ids, summed). The two differ — in a two-rank example row 1
gets [3, 2.5, 1.5] under rank-local counts and [5, 3, 2]/3 under global ones —
so :class:`~tokembed.embedding.lookup.TokenEmbedding` refuses
``scale_grad_by_freq`` without a scope. This module implements the global scope:
a gather whose weight gradient divides by counts the caller supplies (typically
:func:`row_counts` all-reduced with SUM).

Example::

    >>> ids = torch.tensor([1, 4, 1])
    >>> row_counts(ids, 8).tolist()
    [0, 2, 0, 0, 1, 0, 0, 0]
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F

from tokembed.errors import EmbeddingError

__all__ = ["CountScope", "global_frequency_embedding", "row_counts"]

CountScope = Literal["invocation", "global"]


def row_counts(
    ids: torch.Tensor, num_embeddings: int, *, padding_idx: int | None = None
) -> torch.Tensor:
    """c_j: int64 [V] occurrences of each row in ``ids``, PAD occurrences not counted."""
    flat = ids.reshape(-1)
    if padding_idx is not None:
        flat = flat[flat != padding_idx]
    return torch.bincount(flat, minlength=num_embeddings)


class _GlobalFrequencyLookup(torch.autograd.Function):
    """Gather whose weight gradient divides row j by a caller-given count c_j."""

    @staticmethod
    def forward(
        ctx: Any, ids: torch.Tensor, weight: torch.Tensor, counts: torch.Tensor, pad: int
    ) -> torch.Tensor:
        ctx.save_for_backward(ids, counts)
        ctx.pad = pad
        ctx.weight_shape = weight.shape
        return F.embedding(ids, weight)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        ids, counts = ctx.saved_tensors
        flat = ids.reshape(-1)
        rows = grad_out.reshape(flat.numel(), -1)  # [N, d]
        keep = flat != ctx.pad  # pad=-1 keeps everything: admitted ids are >= 0
        grad = rows.new_zeros(ctx.weight_shape).index_add_(0, flat[keep], rows[keep])
        grad /= counts.clamp(min=1).to(grad.dtype).unsqueeze(1)  # c_j = 0 rows stay 0
        return None, grad, None, None


def global_frequency_embedding(
    ids: torch.Tensor,
    weight: torch.Tensor,
    counts: torch.Tensor | None,
    *,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
) -> torch.Tensor:
    """``F.embedding`` whose backward scales row j by 1/counts[j] (0 where counts[j] = 0).

    ``ids`` must already be admitted (validate_ids). ``max_norm`` rescales the
    selected rows in place first, exactly as F.embedding does.

    Raises:
        EmbeddingError FREQ_COUNT_SCOPE_UNDECLARED: ``counts`` is None.
        EmbeddingError SHAPE_MISMATCH: ``counts`` is not an integer [V] tensor.
    """
    v = weight.shape[0]
    if counts is None:
        raise EmbeddingError(
            "FREQ_COUNT_SCOPE_UNDECLARED",
            "count_scope='global' divides by effective-batch row counts, none were given",
            value=None,
            fix="pass row_counts= (row_counts(ids, V) of every rank, all-reduced with SUM)",
        )
    if tuple(counts.shape) != (v,) or counts.is_floating_point():
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"row_counts must be an integer [{v}] tensor, got {counts.dtype} {tuple(counts.shape)}",
            value=tuple(counts.shape),
            fix="count with tokembed.embedding.frequency.row_counts(ids, V)",
        )
    if max_norm is not None:
        with torch.no_grad():  # the same in-place rescale F.embedding performs
            torch.embedding_renorm_(weight, ids, max_norm, norm_type)
    pad = -1 if padding_idx is None else padding_idx
    out: torch.Tensor = _GlobalFrequencyLookup.apply(ids, weight, counts, pad)
    return out
