"""EmbeddingBag with checked bag boundaries: gather, then reduce each bag to one row.

A bag reduction removes the position axis: ``[N] ids + offsets ->
[num_bags, d]``. That suits unordered feature bags and never replaces the token
lookup in front of attention. Offsets must delimit half-open ranges
``[o_j, o_{j+1})`` over the flat ids: start at 0, never decrease, end inside the
input (with ``include_last_offset=True`` the last offset *is* the input length).
PyTorch checks only some of these; a decreasing offset reaches the kernel and fails
as "Expected i < index_size" (torch 2.13). :func:`validate_bag_offsets` refuses
all of them with one code and the first bad position, in one host sync.

Example::

    >>> bag = TokenEmbeddingBag(8, 3, mode="sum", padding_idx=0, include_last_offset=True)
    >>> bag(torch.tensor([1, 4, 6, 2, 1, 5, 2, 0]), torch.tensor([0, 4, 8])).shape
    torch.Size([2, 3])
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.contracts import INDEX_DTYPES, first_bad_position, validate_ids
from tokembed.errors import EmbeddingError, UsageError

__all__ = ["BagMode", "TokenEmbeddingBag", "validate_bag_offsets"]

BagMode = Literal["sum", "mean", "max"]


def _bad_offsets(message: str, value: object) -> EmbeddingError:
    return EmbeddingError(
        "INVALID_BAG_OFFSETS",
        message,
        value=value,
        fix="offsets are the non-decreasing start index of each bag, beginning at 0",
    )


def validate_bag_offsets(
    offsets: torch.Tensor, num_inputs: int, *, include_last_offset: bool = False
) -> None:
    """Refuse offsets that do not delimit monotonic half-open bags over ``num_inputs`` ids.

    Example::

        >>> validate_bag_offsets(torch.tensor([0, 4, 8]), 8, include_last_offset=True)

    Raises:
        EmbeddingError INVALID_BAG_OFFSETS: not a 1-D int32/int64 tensor, empty
            (with include_last_offset), offsets[0] != 0, a decrease, an offset beyond
            the input length, or (include_last_offset) a last offset != length.
    """
    if not isinstance(offsets, torch.Tensor) or offsets.dtype not in INDEX_DTYPES:
        kind = offsets.dtype if isinstance(offsets, torch.Tensor) else type(offsets).__name__
        raise _bad_offsets(f"offsets must be an int32/int64 tensor, got {kind}", kind)
    if offsets.dim() != 1:
        raise _bad_offsets(f"offsets must be 1-D, got shape {tuple(offsets.shape)}", offsets.dim())
    if offsets.numel() == 0:
        if include_last_offset or num_inputs:
            raise _bad_offsets("offsets are empty, so no bag starts at 0", 0)
        return
    steps = offsets.diff()
    # first, last, and "any decrease" read together: one host sync for the whole check.
    first, last, decreases = torch.stack(
        (offsets[0], offsets[-1], (steps < 0).any().to(offsets.dtype))
    ).tolist()
    if first != 0:
        raise _bad_offsets(f"offsets[0] = {first}; the first bag must start at 0", first)
    if decreases:
        (i,) = first_bad_position(steps < 0)
        pair = (int(offsets[i]), int(offsets[i + 1]))
        raise _bad_offsets(f"offsets[{i + 1}] = {pair[1]} < offsets[{i}] = {pair[0]}", pair)
    if last > num_inputs:
        raise _bad_offsets(f"offsets[-1] = {last} is beyond the input length {num_inputs}", last)
    if include_last_offset and last != num_inputs:
        raise _bad_offsets(
            f"with include_last_offset the last offset must equal the input length {num_inputs},"
            f" got {last}",
            last,
        )


class TokenEmbeddingBag(nn.Module):
    """``nn.EmbeddingBag`` semantics (``weight`` key) with ids and offsets checked.

    ``forward(ids, offsets=None, per_sample_weights=None) -> [num_bags, d]``: 1-D ids
    need offsets; 2-D ids ``[B, n]`` are B fixed-size bags and take none. PAD
    entries (``padding_idx``) are excluded from sum, mean's denominator and max.

    Raises (forward): INDEX_DTYPE_MISMATCH, ID_OUT_OF_RANGE, DEVICE_MISMATCH,
    INVALID_BAG_OFFSETS (EmbeddingError).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        mode: BagMode = "mean",
        padding_idx: int | None = None,
        include_last_offset: bool = False,
        weight: torch.Tensor | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise UsageError("INVALID_ARGUMENT", f"unknown mode {mode!r}", value=mode, fix="")
        if padding_idx is not None and not 0 <= padding_idx < num_embeddings:
            raise EmbeddingError(
                "PAD_ID_INVALID",
                f"padding_idx={padding_idx} is not a row of a {num_embeddings}-row table",
                value=padding_idx,
                fix="pick a real row for PAD",
            )
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode: BagMode = mode
        self.padding_idx = padding_idx
        self.include_last_offset = include_last_offset
        if weight is None:
            weight = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
            nn.init.normal_(weight)
            if padding_idx is not None:
                weight[padding_idx] = 0
        elif tuple(weight.shape) != (num_embeddings, embedding_dim):
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"supplied weight has shape {tuple(weight.shape)}",
                value=tuple(weight.shape),
                fix=f"pass a [{num_embeddings}, {embedding_dim}] table",
            )
        self.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight)

    def forward(
        self,
        ids: torch.Tensor,
        offsets: torch.Tensor | None = None,
        per_sample_weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        validate_ids(ids, self.num_embeddings, device=self.weight.device)
        if ids.dim() == 2:
            if offsets is not None:
                raise _bad_offsets("2-D ids are fixed-size bags; offsets must be None", "2-D")
        elif ids.dim() == 1:
            if offsets is None:
                raise _bad_offsets("1-D ids need offsets to say where each bag starts", None)
            validate_bag_offsets(offsets, ids.numel(), include_last_offset=self.include_last_offset)
        else:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"bag ids must be 1-D (with offsets) or 2-D, got {ids.dim()}-D",
                value=ids.dim(),
                fix="flatten the bags and pass offsets",
            )
        return F.embedding_bag(
            ids,
            self.weight,
            offsets,
            mode=self.mode,
            per_sample_weights=per_sample_weights,
            include_last_offset=self.include_last_offset,
            padding_idx=self.padding_idx,
        )
