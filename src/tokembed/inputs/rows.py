"""Media rows with the metadata that must travel with them: row type, mask, geometry, row map.

A media branch hands over ``[B, n, d]`` rows. What makes row ``j`` mean "patch
(3, 5) of image 2" is metadata: a validity mask for ragged batches, per-row
geometry (patch row and column, or a time) and, after an adapter that changes
the row count or order, a :class:`RowMap` from each output row back to the
input rows it summarises. :class:`MediaRows` holds them together and checks on
construction that they still describe the rows; :meth:`RowMap.carry_mask` and
:meth:`RowMap.carry_geometry` produce metadata that follows a row map.

Example::

    >>> m = pad_media([torch.ones(2, 4), torch.ones(1, 4)], row_type=RowType.IMAGE)
    >>> m.mask.tolist()
    [[True, True], [True, False]]
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from tokembed.errors import EmbeddingError, HandoffError, UsageError

__all__ = [
    "GEOMETRY_WIDTH",
    "MediaRows",
    "RowMap",
    "RowType",
    "pad_media",
    "require_bool_mask",
    "require_float_rows",
    "row_map_of",
]

_ATTRIBUTE = "_tokembed_row_map"


class RowType(enum.IntEnum):
    """What a row of the input sequence is; the integer is what ``InputSequence.row_types`` stores."""

    PAD = 0
    TEXT = 1
    IMAGE = 2
    AUDIO = 3
    EVENT = 4


# Coordinates per row: a patch has (row, column) in its grid; audio frames and events a time.
GEOMETRY_WIDTH: dict[RowType, int] = {
    RowType.TEXT: 1,
    RowType.IMAGE: 2,
    RowType.AUDIO: 1,
    RowType.EVENT: 1,
}


def row_map_of(tensor: torch.Tensor) -> RowMap | None:
    """The row map ``tensor`` was produced under (None when it was not)."""
    found = getattr(tensor, _ATTRIBUTE, None)
    assert found is None or isinstance(found, RowMap)
    return found


def require_float_rows(rows: torch.Tensor, *, what: str, axes: str, fix: str) -> None:
    """Refuse ``rows`` unless they are a floating 3-D batch (``axes`` names its axes).

    Raises:
        UsageError INVALID_ARGUMENT: not 3-D, or not a floating dtype (ids instead of rows).
    """
    if rows.dim() != 3 or not rows.is_floating_point():
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{what} are a floating {axes} tensor, got {rows.dtype} {tuple(rows.shape)}",
            value=tuple(rows.shape),
            fix=fix,
        )


def require_bool_mask(mask: torch.Tensor | None, *, what: str, real: str, fix: str) -> None:
    """Refuse a ``mask`` that is not bool (``True`` marks a ``real`` position); ``None`` passes.

    Raises:
        UsageError INVALID_ARGUMENT: an integer or float mask (HF's attention_mask is int64).
    """
    if mask is not None and mask.dtype != torch.bool:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{what} is bool (True = {real}), got {mask.dtype}",
            value=mask.dtype,
            fix=fix,
        )


@dataclass(frozen=True, kw_only=True)
class RowMap:
    """Output row ``j`` of an adapter summarises input rows ``sources[j]`` (of ``n_in``).

    Example::

        >>> RowMap(n_in=4, sources=((0, 1), (2, 3))).r
        2

    Raises:
        UsageError INVALID_ARGUMENT: an empty source set or an index outside [0, n_in).
    """

    n_in: int
    sources: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        bad = [s for s in self.sources if not s or not all(0 <= i < self.n_in for i in s)]
        if self.n_in < 1 or not self.sources or bad:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a row map over {self.n_in} input rows has invalid source sets {bad[:3]}",
                value=bad[:3],
                fix="give every output row a non-empty set of input rows in [0, n_in)",
            )

    @property
    def r(self) -> int:
        """The number of output rows."""
        return len(self.sources)

    @property
    def keeps_order(self) -> bool:
        """True when output row j is exactly input row j (old metadata still lines up)."""
        return all(s == (j,) for j, s in enumerate(self.sources))

    def stamp(self, tensor: torch.Tensor) -> torch.Tensor:
        """Mark ``tensor`` (rows or metadata) as laid out by this map; returns it."""
        setattr(tensor, _ATTRIBUTE, self)
        return tensor

    def _selector(self, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        # [r, n_in] with 1/|sources[j]| on row j's sources: the mean over each group.
        weights = torch.zeros(self.r, self.n_in, dtype=dtype, device=device)
        for j, source in enumerate(self.sources):
            weights[j, list(source)] = 1.0 / len(source)
        return weights

    def carry_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """``[B, n_in]`` validity -> ``[B, r]``: an output row is real if any source is."""
        counts = mask.to(torch.float64) @ (self._selector(torch.float64, mask.device) > 0).T.to(
            torch.float64
        )
        return self.stamp(counts > 0)

    def carry_geometry(self, geometry: torch.Tensor) -> torch.Tensor:
        """``[B, n_in, k]`` coordinates -> ``[B, r, k]``: the mean coordinate of each group."""
        weights = self._selector(geometry.dtype, geometry.device)
        return self.stamp(torch.einsum("rn,bnk->brk", weights, geometry))


def _trailing_zero_rows(rows: torch.Tensor) -> list[int]:
    # Per item, how many rows at the end are exactly zero: what pad_sequence leaves behind.
    nonzero = (rows != 0).any(dim=-1)  # [B, n]
    n = rows.shape[1]
    last = torch.where(nonzero, torch.arange(1, n + 1, device=rows.device), 0).amax(dim=1)
    return [n - int(v) for v in last]


@dataclass(frozen=True, kw_only=True, eq=False)
class MediaRows:
    """``[B, n, d]`` media rows with their row type, validity mask and geometry.

    Attributes:
        rows: floating ``[B, n, d]`` rows (encoder features, or projected rows).
        row_type: IMAGE, AUDIO or EVENT.
        mask: ``[B, n]`` bool, True for real rows; None declares every row real.
        geometry: ``[B, n, k]`` coordinates, k = ``GEOMETRY_WIDTH[row_type]``.

    Raises:
        HandoffError ADAPTER_ROW_COUNT_STALE: the mask or geometry has the row count an
            adapter started from, not the count it produced.
        HandoffError ADAPTER_ROW_ORDER_UNDECLARED: rows were regrouped or reordered by an
            adapter but the metadata was not carried through its row map.
        HandoffError X0_MEDIA_MASK_MISSING: no mask, and items end in different numbers
            of exactly-zero rows: the pattern ``pad_sequence`` leaves on a ragged batch
            (encoders do not emit all-zero rows; a zero-initialised projector makes every
            row zero, which is not flagged).
        EmbeddingError SHAPE_MISMATCH: metadata of another batch size or row count.
        UsageError INVALID_ARGUMENT: rows not a floating 3-D tensor, or a text/PAD type.
    """

    rows: torch.Tensor
    row_type: RowType
    mask: torch.Tensor | None = None
    geometry: torch.Tensor | None = None

    def __post_init__(self) -> None:
        require_float_rows(
            self.rows,
            what="media rows",
            axes="[B, n, d]",
            fix="pass encoder features as floats with a batch axis",
        )
        if self.row_type not in GEOMETRY_WIDTH or self.row_type is RowType.TEXT:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"media rows are IMAGE, AUDIO or EVENT rows, not {self.row_type!r}",
                value=self.row_type,
                fix="text rows go to TextRows; PAD is marked by the mask",
            )
        for name, meta in (("mask", self.mask), ("geometry", self.geometry)):
            if meta is not None:
                self._check_aligned(name, meta)
        require_bool_mask(self.mask, what="a media mask", real="real row", fix="pass mask.bool()")
        width = GEOMETRY_WIDTH[self.row_type]
        if self.geometry is not None and (
            self.geometry.dim() != 3 or self.geometry.shape[2] != width
        ):
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"{self.row_type.name} geometry has {width} coordinate(s) per row, got shape"
                f" {tuple(self.geometry.shape)}",
                value=tuple(self.geometry.shape),
                fix="image rows carry (row, column); audio and event rows carry a time",
            )
        if self.mask is None:
            padded = _trailing_zero_rows(self.rows)
            if len(set(padded)) > 1:
                raise HandoffError(
                    "X0_MEDIA_MASK_MISSING",
                    f"media rows have no mask but items end in {padded} all-zero (padding)"
                    " rows; unmasked, padding rows are attended to as evidence",
                    value=padded,
                    fix="build the batch with pad_media, or pass mask= for the real rows",
                )

    def _check_aligned(self, name: str, meta: torch.Tensor) -> None:
        row_map = row_map_of(self.rows)
        if meta.dim() < 2 or tuple(meta.shape[:2]) != tuple(self.rows.shape[:2]):
            if row_map is not None and meta.dim() >= 2 and meta.shape[1] == row_map.n_in:
                raise HandoffError(
                    "ADAPTER_ROW_COUNT_STALE",
                    f"the {name} has {row_map.n_in} rows, the count before the adapter; the"
                    f" adapter produced {row_map.r}",
                    value=tuple(meta.shape),
                    fix=f"carry the {name} through the adapter's row map"
                    f" (RowMap.carry_{'mask' if name == 'mask' else 'geometry'})",
                )
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"the {name} has shape {tuple(meta.shape)} but the rows are"
                f" {tuple(self.rows.shape[:2])} (batch, rows)",
                value=tuple(meta.shape),
                fix=f"give one {name} entry per row of each item",
            )
        if row_map is not None and not row_map.keeps_order and row_map_of(meta) != row_map:
            raise HandoffError(
                "ADAPTER_ROW_ORDER_UNDECLARED",
                f"the adapter regrouped or reordered rows (output row 0 summarises input rows"
                f" {row_map.sources[0]}), but this {name} was not carried through its row map",
                value=row_map.sources[:4],
                fix=f"use the {name} the adapter returned, or RowMap.carry_* on the old one",
            )

    @property
    def row_map(self) -> RowMap | None:
        """The adapter row map the rows were produced under, if any."""
        return row_map_of(self.rows)

    def with_rows(self, rows: torch.Tensor) -> MediaRows:
        """The same metadata on count-preserving new ``rows`` (a projector's output)."""
        row_map = row_map_of(self.rows)
        if row_map is not None:
            row_map.stamp(rows)
        return replace(self, rows=rows)


def pad_media(
    items: Sequence[torch.Tensor],
    *,
    row_type: RowType,
    geometry: Sequence[torch.Tensor] | None = None,
) -> MediaRows:
    """Pad ragged ``[n_i, d]`` items into one masked ``[B, max n_i, d]`` batch.

    Example::

        >>> pad_media([torch.ones(3, 2), torch.ones(1, 2)], row_type=RowType.AUDIO).rows.shape
        torch.Size([2, 3, 2])

    Raises:
        UsageError INVALID_ARGUMENT: no items, or items of different widths.
    """
    widths = {t.shape[-1] for t in items}
    if not items or len(widths) != 1 or any(t.dim() != 2 for t in items):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"pad_media takes [n_i, d] items of one width, got widths {sorted(widths)}",
            value=sorted(widths),
            fix="pass one feature tensor per item, all from the same encoder",
        )
    rows = torch.nn.utils.rnn.pad_sequence(list(items), batch_first=True)  # [B, n_max, d]
    lengths = torch.tensor([t.shape[0] for t in items])
    mask = torch.arange(rows.shape[1]) < lengths[:, None]  # [B, n_max]
    geo = None
    if geometry is not None:
        geo = torch.nn.utils.rnn.pad_sequence(list(geometry), batch_first=True)
    return MediaRows(rows=rows, row_type=row_type, mask=mask, geometry=geo)
