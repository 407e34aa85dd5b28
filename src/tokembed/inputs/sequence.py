"""The input sequence of a model: text and media rows joined on the row axis, with their metadata.

Once every branch has width d_model, the sequence a model's first layer reads is
``torch.cat(segments, dim=1)``. Equal widths make several wrong assemblies look right:
features joined on the last axis, segments in another order than training used, and
metadata (which row is text, image, audio, event or PAD; each row's position, patch
coordinates or time; which media rows are padding) left behind at the concatenation.
:func:`assemble_sequence` builds the rows and their metadata together in the order a
:class:`SequenceLayout` declares; :class:`InputSequence` checks any sequence handed to a
model against the layout.

Geometry is stored as ``[B, N, 2]`` float64: text rows hold (position, NaN),
image rows (patch row, patch column), audio and event rows (time, NaN), PAD rows
(NaN, NaN).

Example::

    >>> seq = assemble_sequence([image, question], layout=SequenceLayout(  # doctest: +SKIP
    ...     order=(RowType.IMAGE, RowType.TEXT), model="vicuna-7b", d_model=4096))
    >>> seq.row_types[0].tolist()  # doctest: +SKIP
    [2, 2, 2, 2, 1, 1, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tokembed.errors import EmbeddingError, HandoffError, UsageError
from tokembed.inputs.kinds import Kind, representation_of
from tokembed.inputs.rows import MediaRows, RowType, require_bool_mask, require_float_rows

__all__ = ["InputSequence", "SequenceLayout", "Span", "TextRows", "assemble_sequence"]


@dataclass(frozen=True, kw_only=True, eq=False)
class TextRows:
    """Text lookup rows ``[B, L, d_model]``, their padding mask and their positions.

    ``mask`` None declares every row real; ``positions`` None means 0..L-1 per item.

    Raises:
        UsageError INVALID_ARGUMENT: rows not a floating 3-D tensor, or a mask that is
            not bool.
        EmbeddingError SHAPE_MISMATCH: a mask or positions not ``[B, L]``.
    """

    rows: torch.Tensor
    mask: torch.Tensor | None = None
    positions: torch.Tensor | None = None

    row_type = RowType.TEXT

    def __post_init__(self) -> None:
        require_float_rows(
            self.rows,
            what="text rows",
            axes="[B, L, d]",
            fix="pass the lookup output E[ids], not the ids",
        )
        require_bool_mask(
            self.mask, what="a text mask", real="real token", fix="pass attention_mask.bool()"
        )
        for name, meta in (("mask", self.mask), ("positions", self.positions)):
            if meta is not None and tuple(meta.shape) != tuple(self.rows.shape[:2]):
                raise EmbeddingError(
                    "SHAPE_MISMATCH",
                    f"the text {name} has shape {tuple(meta.shape)}, the rows are"
                    f" {tuple(self.rows.shape[:2])} (batch, tokens)",
                    value=tuple(meta.shape),
                    fix=f"give one {name} entry per token",
                )


@dataclass(frozen=True, kw_only=True)
class SequenceLayout:
    """The declared layout: segment row types in order, the target model and its width.

    Raises:
        UsageError INVALID_ARGUMENT: an empty order, a PAD segment, or d_model < 1.
    """

    order: tuple[RowType, ...]
    model: str
    d_model: int

    def __post_init__(self) -> None:
        if not self.order or RowType.PAD in self.order or self.d_model < 1 or not self.model:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a layout is a non-empty order of TEXT/IMAGE/AUDIO/EVENT segments with a"
                f" model and d_model >= 1, got {self.order}, {self.model!r}, {self.d_model}",
                value=self.order,
                fix="e.g. order=(RowType.IMAGE, RowType.TEXT) as training used it",
            )

    def check_order(self, got: tuple[RowType, ...]) -> None:
        """Refuse segment types ``got`` that are not this layout's order.

        Raises:
            HandoffError X0_ROW_ORDER_MISMATCH: another order (every shape stays valid).
        """
        if got != self.order:
            raise HandoffError(
                "X0_ROW_ORDER_MISMATCH",
                f"segments are {[t.name for t in got]} but the layout (as training built it)"
                f" is {[t.name for t in self.order]}; every shape is still valid",
                value=[t.name for t in got],
                fix="pass the segments in the layout's order",
            )


@dataclass(frozen=True, kw_only=True)
class Span:
    """Segment ``row_type`` occupies rows ``[start, stop)`` of the sequence."""

    row_type: RowType
    start: int
    stop: int


def _width_error(width: int, d_model: int, what: str) -> HandoffError | EmbeddingError:
    if width > d_model and width % d_model == 0:
        return HandoffError(
            "X0_FEATURE_AXIS_CONCAT",
            f"{what} have width {width} = {width // d_model} x d_model: rows were joined on"
            " the feature axis, which makes a different object than a longer context",
            value=width,
            fix="torch.cat(segments, dim=1): append rows, keep width d_model",
        )
    return EmbeddingError(
        "SHAPE_MISMATCH",
        f"{what} have width {width}, the model's is {d_model}",
        value=width,
        fix="project every segment to d_model before assembly",
    )


@dataclass(frozen=True, kw_only=True, eq=False)
class InputSequence:
    """An assembled input sequence ``[B, N, d_model]`` and the metadata that gives rows meaning.

    Attributes:
        layout: the declared layout the state follows.
        states: ``[B, N, d_model]``.
        row_types: ``[B, N]`` int64 ``RowType`` values (PAD where ``mask`` is False).
        mask: ``[B, N]`` bool, True for real rows.
        geometry: ``[B, N, 2]`` float64 coordinates (see the module docstring).
        spans: the segments in row order.

    Raises:
        HandoffError X0_FEATURE_AXIS_CONCAT: the width is a multiple of d_model.
        HandoffError X0_ROW_TYPES_MISSING: ``row_types`` is None.
        HandoffError X0_GEOMETRY_MISSING: ``geometry`` is None.
        HandoffError X0_ROW_ORDER_MISMATCH: the spans' order is not the layout's.
        EmbeddingError SHAPE_MISMATCH: another width, or metadata of another shape.
    """

    layout: SequenceLayout
    states: torch.Tensor
    row_types: torch.Tensor | None
    mask: torch.Tensor
    geometry: torch.Tensor | None
    spans: tuple[Span, ...]

    def __post_init__(self) -> None:
        width = self.states.shape[-1]
        if self.states.dim() != 3 or width != self.layout.d_model:
            raise _width_error(width, self.layout.d_model, "the assembled states")
        if self.row_types is None:
            raise HandoffError(
                "X0_ROW_TYPES_MISSING",
                f"a [B, N, d_model] = {tuple(self.states.shape)} state without row types:"
                " image, text, event and PAD rows can no longer be told apart",
                value=tuple(self.states.shape),
                fix="build the sequence with assemble_sequence, which records every row's type",
            )
        if self.geometry is None:
            raise HandoffError(
                "X0_GEOMETRY_MISSING",
                "the state carries no geometry: positions, patch coordinates and times were"
                " dropped at the concatenation",
                value=tuple(self.states.shape),
                fix="build the sequence with assemble_sequence from segments that carry geometry",
            )
        b, n = self.states.shape[:2]
        for name, meta, shape in (
            ("row_types", self.row_types, (b, n)),
            ("mask", self.mask, (b, n)),
            ("geometry", self.geometry, (b, n, 2)),
        ):
            if tuple(meta.shape) != shape:
                raise EmbeddingError(
                    "SHAPE_MISMATCH",
                    f"the sequence's {name} has shape {tuple(meta.shape)}, expected {shape}",
                    value=tuple(meta.shape),
                    fix="derive the metadata from the same segments as the states",
                )
        self.layout.check_order(tuple(s.row_type for s in self.spans))
        bounds = [0, *(s.stop for s in self.spans)]
        if [s.start for s in self.spans] != bounds[:-1] or bounds[-1] != n:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"spans {[(s.start, s.stop) for s in self.spans]} do not tile the {n} rows",
                value=[(s.start, s.stop) for s in self.spans],
                fix="derive the spans from the same segments as the states",
            )


def _media_segment(seg: MediaRows, layout: SequenceLayout) -> None:
    rep = representation_of(seg.rows)
    width = seg.rows.shape[-1]
    projected = rep is not None and rep.kind is Kind.PROJECTED_MEDIA
    if width != layout.d_model and not projected:
        raise HandoffError(
            "PROJECTOR_WIDTH_MISMATCH",
            f"{seg.row_type.name} rows have width {width} (d_media, not projected) where"
            f" {layout.model} expects d_model={layout.d_model}",
            value=width,
            fix="pass the rows through the projector trained for this encoder and model",
        )
    if width != layout.d_model:
        raise _width_error(width, layout.d_model, f"{seg.row_type.name} rows")
    if rep is None or rep.kind is not Kind.PROJECTED_MEDIA or rep.model != layout.model:
        raise HandoffError(
            "PROJECTOR_SPACE_MISMATCH",
            f"{seg.row_type.name} rows are {rep.space if rep else 'undeclared'}, not rows"
            f" projected into {layout.model}'s input space",
            value=rep.space if rep else None,
            fix="project the features with the projector aligned to this model",
        )
    if seg.geometry is None:
        raise HandoffError(
            "X0_GEOMETRY_MISSING",
            f"{seg.row_type.name} rows come without geometry: the model cannot tell where"
            " (or when) each row was",
            value=seg.row_type.name,
            fix="pass geometry= (patch row/column, or time) with the media rows",
        )


def assemble_sequence(
    segments: Sequence[TextRows | MediaRows | torch.Tensor], *, layout: SequenceLayout
) -> InputSequence:
    """Join ``segments`` on the row axis (dim=1) in the layout's order, with metadata.

    Raises:
        HandoffError X0_ROW_TYPES_MISSING: a segment is a bare tensor (no row type).
        HandoffError X0_ROW_ORDER_MISMATCH: segment types not in the layout's order.
        HandoffError X0_GEOMETRY_MISSING: a media segment has no geometry.
        HandoffError X0_FEATURE_AXIS_CONCAT: a segment is k x d_model wide.
        HandoffError PROJECTOR_WIDTH_MISMATCH: media rows still at the encoder's width.
        HandoffError PROJECTOR_SPACE_MISMATCH: media rows not projected into this model.
        EmbeddingError SHAPE_MISMATCH: other widths, or different batch sizes.
        (MediaRows itself refuses ragged padding without a mask: X0_MEDIA_MASK_MISSING.)
    """
    for i, seg in enumerate(segments):
        if isinstance(seg, torch.Tensor):
            raise HandoffError(
                "X0_ROW_TYPES_MISSING",
                f"segment {i} is a bare tensor {tuple(seg.shape)}: its rows have no type",
                value=i,
                fix="wrap text rows in TextRows and media rows in MediaRows",
            )
    typed: list[TextRows | MediaRows] = [s for s in segments if not isinstance(s, torch.Tensor)]
    layout.check_order(tuple(s.row_type for s in typed))
    batch = {s.rows.shape[0] for s in typed}
    if len(batch) != 1:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"segments have batch sizes {sorted(batch)}",
            value=sorted(batch),
            fix="assemble segments of the same batch",
        )
    parts, types, masks, geos, spans, start = [], [], [], [], [], 0
    for seg in typed:
        b, n, width = seg.rows.shape
        if isinstance(seg, MediaRows):
            _media_segment(seg, layout)
            assert seg.geometry is not None
            geo = torch.full((b, n, 2), float("nan"), dtype=torch.float64)
            geo[..., : seg.geometry.shape[-1]] = seg.geometry.to(torch.float64)
        else:
            if width != layout.d_model:
                raise _width_error(width, layout.d_model, "text rows")
            pos = seg.positions if seg.positions is not None else torch.arange(n).expand(b, n)
            geo = torch.full((b, n, 2), float("nan"), dtype=torch.float64)
            geo[..., 0] = pos.to(torch.float64)
        mask = seg.mask if seg.mask is not None else torch.ones(b, n, dtype=torch.bool)
        kind = torch.full((b, n), int(seg.row_type), dtype=torch.int64)
        parts.append(seg.rows)
        types.append(torch.where(mask, kind, int(RowType.PAD)))
        masks.append(mask)
        geos.append(torch.where(mask[..., None], geo, float("nan")))
        spans.append(Span(row_type=seg.row_type, start=start, stop=start + n))
        start += n
    return InputSequence(
        layout=layout,
        states=torch.cat(parts, dim=1),  # the row axis: [B, sum n_i, d_model]
        row_types=torch.cat(types, dim=1),
        mask=torch.cat(masks, dim=1),
        geometry=torch.cat(geos, dim=1),
        spans=tuple(spans),
    )
