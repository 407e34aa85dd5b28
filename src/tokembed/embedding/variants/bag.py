"""EmbeddingBag with checked bag boundaries: gather, then reduce each bag to one row.

A bag reduction removes the position axis: ``[N] ids + offsets ->
[num_bags, d]``. That suits unordered feature bags and never replaces the token
lookup in front of attention. Offsets must delimit half-open ranges
``[o_j, o_{j+1})`` over the flat ids: start at 0, never decrease, end inside the
input (with ``include_last_offset=True`` the last offset *is* the input length).
PyTorch checks only some of these; a decreasing offset reaches the kernel and fails
as "Expected i < index_size" (torch 2.13). :func:`validate_bag_offsets` refuses
all of them with one code and the first bad position, in one host sync.

Every refusal is also the built-in type ``nn.EmbeddingBag`` raises in the same place:
a ValueError for the wrong number of dimensions (2-D ids with offsets, 1-D ids
without, offsets not 1-D, ids of more than 2 dimensions), a RuntimeError for the
values (an id outside the table, offsets not starting at 0 or past the input).

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

from tokembed.embedding.contracts import (
    INDEX_DTYPES,
    first_bad_position,
    validate_ids,
    value_check_mode,
)
from tokembed.embedding.lookup_checks import supplied_weight, table_shape
from tokembed.embedding.lookup_config import LookupConfig, normalize_padding_idx
from tokembed.errors import EmbeddingError, require_choice

__all__ = ["BagMode", "TokenEmbeddingBag", "validate_bag_offsets"]

BagMode = Literal["sum", "mean", "max"]


def _bad_offsets(
    message: str, value: object, *, also: tuple[type[Exception], ...] = ()
) -> EmbeddingError:
    # INVALID_BAG_OFFSETS is a RuntimeError, as torch's value checks; a dimension
    # mistake passes also=(ValueError,), which torch's Python-side checks raise.
    return EmbeddingError(
        "INVALID_BAG_OFFSETS",
        message,
        value=value,
        fix="offsets are the non-decreasing start index of each bag, beginning at 0",
        also=also,
    )


def _check_bag_shape(ids: torch.Tensor, offsets: torch.Tensor | None) -> None:
    # The dimension checks torch's F.embedding_bag makes before any value is read, each
    # also the ValueError it raises there.
    if ids.dim() == 2:
        if offsets is not None:
            raise _bad_offsets(
                "2-D ids are fixed-size bags; offsets must be None", "2-D", also=(ValueError,)
            )
    elif ids.dim() == 1:
        if offsets is None:
            raise _bad_offsets(
                "1-D ids need offsets to say where each bag starts", None, also=(ValueError,)
            )
        if isinstance(offsets, torch.Tensor) and offsets.dim() != 1:
            raise _bad_offsets(
                f"offsets must be 1-D, got shape {tuple(offsets.shape)}",
                offsets.dim(),
                also=(ValueError,),
            )
    else:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"bag ids must be 1-D (with offsets) or 2-D, got {ids.dim()}-D",
            value=ids.dim(),
            fix="flatten the bags and pass offsets",
            also=(ValueError,),
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
            the input length, or (include_last_offset) a last offset != length. Also
            a RuntimeError (a ValueError too when the offsets are not 1-D), as torch.
    """
    if not isinstance(offsets, torch.Tensor) or offsets.dtype not in INDEX_DTYPES:
        kind = offsets.dtype if isinstance(offsets, torch.Tensor) else type(offsets).__name__
        raise _bad_offsets(f"offsets must be an int32/int64 tensor, got {kind}", kind)
    if offsets.dim() != 1:
        raise _bad_offsets(
            f"offsets must be 1-D, got shape {tuple(offsets.shape)}",
            offsets.dim(),
            also=(ValueError,),
        )
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


def _assert_offsets(offsets: torch.Tensor, num_inputs: int, *, include_last: bool) -> None:
    # validate_bag_offsets as tensor asserts (no host read): traced by compile/export.
    if offsets.numel() == 0:
        return
    ok = (offsets[0] == 0) & (offsets[-1] <= num_inputs) & (offsets.diff() >= 0).all()
    if include_last:
        ok = ok & (offsets[-1] == num_inputs)
    torch._assert_async(
        ok,
        "INVALID_BAG_OFFSETS: offsets must start at 0, never decrease and end inside the"
        " input (at its length with include_last_offset)",
    )


class TokenEmbeddingBag(nn.EmbeddingBag):
    """``nn.EmbeddingBag`` (a subclass, same constructor, ``from_pretrained`` and
    ``weight`` key) with ids and offsets checked.

    ``forward(input, offsets=None, per_sample_weights=None) -> [num_bags, d]``: 1-D ids
    need offsets; 2-D ids ``[B, n]`` are B fixed-size bags and take none. PAD
    entries (``padding_idx``; a negative k means row V + k) are excluded from sum,
    mean's denominator and max. The id range is the current weight's row count.
    ``weight=`` is accepted as this package's name for ``_weight``. Under
    torch.compile and torch.export the value checks are traced
    tensor asserts (torch's RuntimeError, the code in its message).

    Example::

        >>> bag = TokenEmbeddingBag.from_pretrained(torch.eye(3), mode="sum")
        >>> bag(torch.tensor([[0, 2]])).tolist()
        [[1.0, 0.0, 1.0]]

    Raises (forward), each an EmbeddingError that is also the built-in type
    ``nn.EmbeddingBag`` raises there:
        INVALID_BAG_OFFSETS (RuntimeError; also ValueError for 2-D ids with
            offsets, 1-D ids without, or offsets not 1-D);
        SHAPE_MISMATCH (RuntimeError and ValueError): ids of more than 2 dimensions,
            or a weight assigned later that is not 2-D;
        ID_OUT_OF_RANGE (IndexError, as nn.Embedding, and RuntimeError, as
            nn.EmbeddingBag), INDEX_DTYPE_MISMATCH, DEVICE_MISMATCH (RuntimeError).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: BagMode = "mean",
        sparse: bool = False,
        _weight: torch.Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        weight: torch.Tensor | None = None,
    ) -> None:
        require_choice(mode, ("sum", "mean", "max"), "mode", fix='use mode="sum", "mean" or "max"')
        weight = supplied_weight(weight, _weight, (num_embeddings, embedding_dim))
        # LookupConfig validates the options shared with the lookup (sizes, norms, PAD).
        LookupConfig(
            num_embeddings=num_embeddings,
            embedding_dim=embedding_dim,
            max_norm=max_norm,
            norm_type=norm_type,
            padding_idx=normalize_padding_idx(padding_idx, num_embeddings),
        )
        super().__init__(
            num_embeddings,
            embedding_dim,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            None,
            include_last_offset,
            padding_idx,
            device,
            dtype,
        )
        if weight is not None:
            # Used as is, like nn.Embedding(_weight=...): no copy, PAD row kept.
            self.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight)

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls,
        embeddings: torch.Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: BagMode = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> TokenEmbeddingBag:
        """nn.EmbeddingBag.from_pretrained: a bag table over ``embeddings`` (shared).

        Raises:
            EmbeddingError SHAPE_MISMATCH: ``embeddings`` is not 2-D.
        """
        rows, cols = table_shape(embeddings)
        bag = cls(
            rows,
            cols,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            nn.Parameter(embeddings, requires_grad=not freeze),  # shares the storage
            include_last_offset,
            padding_idx,
        )
        return bag

    def forward(
        self,
        input: torch.Tensor,
        offsets: torch.Tensor | None = None,
        per_sample_weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.weight.dim() != 2:  # a weight assigned after construction
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"the bag table must be 2-D [V, d], got shape {tuple(self.weight.shape)}",
                value=tuple(self.weight.shape),
                fix="assign a [num_embeddings, embedding_dim] weight",
                also=(ValueError,),
            )
        if isinstance(input, torch.Tensor):
            # Dimensions first, as torch: a 3-D batch is a ValueError whatever its ids.
            _check_bag_shape(input, offsets)
        try:
            validate_ids(input, self.weight.shape[0], device=self.weight.device)
        except EmbeddingError as err:
            # nn.Embedding raises IndexError for an id outside the table (the code's
            # type), torch's embedding_bag a RuntimeError: the bag's error is both.
            raise err.also_as(RuntimeError) from None
        if offsets is not None and input.dim() == 1:
            mode = value_check_mode(offsets)
            if mode == "eager":
                validate_bag_offsets(
                    offsets, input.numel(), include_last_offset=self.include_last_offset
                )
            elif mode == "assert":
                _assert_offsets(offsets, input.numel(), include_last=self.include_last_offset)
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )
