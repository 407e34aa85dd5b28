"""Row stamps: which input-state transforms a tensor of gathered rows already carries.

Two transforms are easy to apply twice without any shape changing (a common
slip when reproducing the original Transformer): the content scale (sqrt(d_model) in the original
Transformer) and the positional rows (a caller adds positions to the output of
a module that already added them). Each is applied here through one function
that stamps its output; applying the same transform to a stamped tensor is an
error. The stamp is a plain attribute on the output tensor object, so it costs
nothing and survives exactly as long as that tensor; arithmetic done outside
these functions (``rows * 22.6``) produces a fresh, unstamped tensor and is not
tracked — route scaling through :func:`apply_input_scale` to be covered.
A consumer states what it expects with :func:`require_rows`: content rows
with positions (an encoder stack after ``Embeddings + PositionalEncoding``) or
raw content rows (a caller that adds its own positions later).

Example::

    >>> rows = apply_input_scale(torch.ones(2, 4), 2.0, by="lut")
    >>> row_stamp(rows).scale
    2.0
    >>> apply_input_scale(rows, 2.0, by="caller")
    Traceback (most recent call last):
    ...
    tokembed.errors.EmbeddingError: SCALE_APPLIED_TWICE: ...
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from tokembed.errors import EmbeddingError, UsageError

__all__ = [
    "RowStamp",
    "add_positions",
    "apply_input_scale",
    "carry_stamp",
    "require_rows",
    "row_stamp",
]

_ATTRIBUTE = "_tokembed_row_stamp"


@dataclass(frozen=True, kw_only=True)
class RowStamp:
    """What has been applied to a tensor of rows, and by whom.

    Attributes:
        scale: the content multiplier applied once, or None.
        scale_by: the owner that applied it (module or caller name).
        positions: the name of the positional rows added once, or None.
        positions_by: the owner that added them.
    """

    scale: float | None = None
    scale_by: str | None = None
    positions: str | None = None
    positions_by: str | None = None


def row_stamp(rows: torch.Tensor) -> RowStamp | None:
    """The stamp carried by ``rows`` (None when no stamped transform produced it)."""
    stamp = getattr(rows, _ATTRIBUTE, None)
    assert stamp is None or isinstance(stamp, RowStamp)
    return stamp


def _with_stamp(rows: torch.Tensor, stamp: RowStamp) -> torch.Tensor:
    setattr(rows, _ATTRIBUTE, stamp)
    return rows


def carry_stamp(source: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """Give ``result`` the stamp of ``source`` (for shape/scale-neutral ops such as dropout)."""
    stamp = row_stamp(source)
    return result if stamp is None else _with_stamp(result, stamp)


def apply_input_scale(rows: torch.Tensor, factor: float, *, by: str) -> torch.Tensor:
    """Return ``rows * factor`` stamped as scaled by ``by``; refuse a second scaling.

    Example::

        >>> apply_input_scale(torch.ones(1, 2), math.sqrt(4.0), by="Embeddings").tolist()
        [[2.0, 2.0]]

    Raises:
        EmbeddingError SCALE_APPLIED_TWICE: ``rows`` already carries a scale stamp.
        UsageError INVALID_ARGUMENT: ``factor`` is not finite and positive.
    """
    if not (math.isfinite(factor) and factor > 0):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"an input scale must be finite and positive, got {factor}",
            value=factor,
            fix="pass e.g. math.sqrt(d_model), or no scale",
        )
    stamp = row_stamp(rows) or RowStamp()
    if stamp.scale is not None:
        raise EmbeddingError(
            "SCALE_APPLIED_TWICE",
            f"{by} would scale rows by {factor:g}, but {stamp.scale_by} already scaled them"
            f" by {stamp.scale:g} (the product {stamp.scale * factor:g} is not a source contract)",
            value=(stamp.scale, factor),
            fix="give the scale one owner: drop it from either the embedding or the caller",
        )
    return _with_stamp(rows * factor, replace(stamp, scale=factor, scale_by=by))


def add_positions(
    rows: torch.Tensor, positions: torch.Tensor, *, name: str, by: str
) -> torch.Tensor:
    """Return ``rows + positions`` stamped with ``name``; refuse a second positional add.

    ``positions`` must broadcast to ``rows`` ([L, d] against [B, L, d]); the
    scale stamp, if any, is carried over.

    Raises:
        EmbeddingError POSITION_APPLIED_TWICE: ``rows`` already carry positions.
        EmbeddingError SHAPE_MISMATCH: ``positions`` does not broadcast to ``rows``.
    """
    stamp = row_stamp(rows) or RowStamp()
    if stamp.positions is not None:
        raise EmbeddingError(
            "POSITION_APPLIED_TWICE",
            f"{by} would add {name} positions to rows that {stamp.positions_by} already gave"
            f" {stamp.positions} positions",
            value=(stamp.positions, name),
            fix="call the content embedding alone (no positions) before adding positions",
        )
    try:
        fits = torch.broadcast_shapes(rows.shape, positions.shape) == rows.shape
    except RuntimeError:  # torch signals "not broadcastable" this way
        fits = False
    if not fits:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"positions of shape {tuple(positions.shape)} do not broadcast to rows"
            f" {tuple(rows.shape)}",
            value=tuple(positions.shape),
            fix="slice the position table to the sequence length: pe[:L]",
        )
    return _with_stamp(rows + positions, replace(stamp, positions=name, positions_by=by))


def require_rows(rows: torch.Tensor, *, positions: bool, by: str) -> RowStamp | None:
    """Check that ``rows`` do (``positions=True``) or do not carry positional rows; return the stamp.

    Positions are known only through the stamp :func:`add_positions` leaves, so rows
    whose positions were added by plain arithmetic count as carrying none.

    Example::

        >>> placed = add_positions(torch.zeros(1, 2, 4), torch.ones(2, 4), name="sinusoidal", by="m")
        >>> require_rows(placed, positions=True, by="encoder").positions
        'sinusoidal'

    Raises:
        EmbeddingError POSITIONS_MISSING: positions expected, none stamped (only the
            content embedding was called where the stack expects content + positions).
        EmbeddingError POSITIONS_UNEXPECTED: raw content expected, positions stamped
            (the positioned embedding was called where raw content was intended, so
            positions arrive too early and would be added again).
    """
    stamp = row_stamp(rows)
    carried = stamp is not None and stamp.positions is not None
    if positions and not carried:
        raise EmbeddingError(
            "POSITIONS_MISSING",
            f"{by} expects rows with positional rows added, but these carry content only",
            value=tuple(rows.shape),
            fix="call the embedding together with its positional encoding (forward, not content)",
        )
    if not positions and carried:
        assert stamp is not None
        raise EmbeddingError(
            "POSITIONS_UNEXPECTED",
            f"{by} expects raw content rows, but {stamp.positions_by} already added"
            f" {stamp.positions} positions",
            value=stamp.positions,
            fix="call the content embedding alone (e.g. ScaledSinusoidalEmbedding.content) and add"
            " positions once, where the model adds them",
        )
    return stamp
