"""Count-changing adapters: n media rows in, r model-width rows out, with a row map back.

Two adapters in miniature, both under a :class:`ProjectorContract`:

* :class:`QueryBottleneck` — r learned queries cross-attend to the n encoder rows
  (the bridge idea of BLIP-2's Q-Former, reduced to one cross-attention); every
  output row reads every real input row.
* :class:`PatchMerger` — averages each ``k x k`` window of a patch grid, then
  projects; output row j summarises exactly its window's patches.

Each returns :class:`Adapted`: the new :class:`MediaRows` (mask and geometry carried
through the adapter's :class:`RowMap`, so they follow r, not n) and the mixing
weights ``[B, r, n]`` (output row j is a weighted sum of per-row functions of the
inputs, with these weights). Two checks use them:

* :func:`check_row_map` asks autograd which input rows each output row depends on
  and compares with the declared row map, so an adapter that reorders rows while
  declaring the old order is caught on a real batch.
* :func:`check_evidence` takes a declared set of evidence rows (the patches holding
  the small text an OCR question needs) and a floor: each evidence row must make up
  at least ``min_weight`` of some output row. A row averaged with 575 others
  (weight 1/576) cannot be read back by a linear reader against that noise; a weight
  floor is necessary for recoverability, not sufficient (the value projection may
  still discard it), and is the part of it this module can measure exactly.

Example::

    >>> merger = PatchMerger(contract, grid=(4, 4), window=2)  # doctest: +SKIP
    >>> merger(media).media.row_map.sources[0]  # doctest: +SKIP
    (0, 1, 4, 5)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from tokembed.embedding.variants.projector import FeatureProjector
from tokembed.errors import EmbeddingError, HandoffError, UsageError
from tokembed.inputs.kinds import declare, representation_of
from tokembed.inputs.media_projector import ProjectorContract, Trainability
from tokembed.inputs.rows import MediaRows, RowMap

__all__ = ["Adapted", "PatchMerger", "QueryBottleneck", "check_evidence", "check_row_map"]


@dataclass(frozen=True, kw_only=True, eq=False)
class Adapted:
    """An adapter's output: the new rows with their metadata, and the mixing weights.

    Attributes:
        media: ``[B, r, d_model]`` rows; mask and geometry follow the row map.
        weights: ``[B, r, n]``, the share of each input row in each output row.
    """

    media: MediaRows
    weights: torch.Tensor


def _finish(
    contract: ProjectorContract,
    media: MediaRows,
    rows: torch.Tensor,
    weights: torch.Tensor,
    row_map: RowMap,
) -> Adapted:
    mask = None if media.mask is None else row_map.carry_mask(media.mask)
    geometry = None
    if media.geometry is not None:
        # Each output row sits at the weighted centroid of what it read.
        geometry = row_map.stamp(
            torch.einsum("brn,bnk->brk", weights.to(media.geometry.dtype), media.geometry)
        )
    declare(rows, contract.output)
    row_map.stamp(rows)
    out = MediaRows(rows=rows, row_type=media.row_type, mask=mask, geometry=geometry)
    return Adapted(media=out, weights=weights)


class QueryBottleneck(nn.Module):
    """``[B, n, d_media] -> [B, r, d_model]`` by r learned queries and one cross-attention.

    Masked input rows get no attention. Weights are averaged over heads
    (``nn.MultiheadAttention``'s default).

    Raises (forward):
        HandoffError PROJECTOR_WIDTH_MISMATCH, PROJECTOR_ENCODER_MISMATCH: see
            :meth:`ProjectorContract.check_features`.
    """

    def __init__(self, contract: ProjectorContract, *, r: int, heads: int = 1) -> None:
        super().__init__()
        if r < 1:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a query bottleneck needs at least one query, got r={r}",
                value=r,
                fix="pass r >= 1 (BLIP-2 uses 32)",
            )
        self.contract = contract
        # [r, d_model]; std 0.02 is the BERT/GPT-2 initializer, which BLIP-2 keeps for its queries.
        self.queries = nn.Parameter(torch.randn(r, contract.d_model) * 0.02)
        self.attn = nn.MultiheadAttention(
            contract.d_model,
            heads,
            kdim=contract.d_media,
            vdim=contract.d_media,
            batch_first=True,
        )
        self.requires_grad_(contract.trainability is Trainability.TRAINED)

    def forward(self, media: MediaRows) -> Adapted:
        self.contract.check_features(media)
        b, n, _ = media.rows.shape
        queries = self.queries.expand(b, -1, -1)  # [B, r, d_model]
        padding = None if media.mask is None else ~media.mask  # True = ignore
        rows, weights = self.attn(
            queries, media.rows, media.rows, key_padding_mask=padding, need_weights=True
        )  # [B, r, d_model], [B, r, n]
        row_map = RowMap(n_in=n, sources=(tuple(range(n)),) * self.queries.shape[0])
        return _finish(self.contract, media, rows, weights, row_map)


class PatchMerger(nn.Module):
    """Average each ``window x window`` block of a raster ``grid`` of patches, then project.

    Output rows come in raster order of the windows; row j's sources are its
    window's patches (``grid=(4, 4), window=2``: row 0 <- patches 0, 1, 4, 5).
    Masked patches are left out of their window's average.

    Raises:
        UsageError INVALID_ARGUMENT: the grid is not divisible by the window.
        EmbeddingError SHAPE_MISMATCH (forward): the rows are not ``grid`` patches.
    """

    def __init__(self, contract: ProjectorContract, *, grid: tuple[int, int], window: int) -> None:
        super().__init__()
        h, w = grid
        if window < 1 or h % window or w % window:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a {h}x{w} patch grid does not split into {window}x{window} windows",
                value=(grid, window),
                fix="choose a window that divides both grid sides",
            )
        self.contract = contract
        self.grid = grid
        sources = []
        for wy in range(0, h, window):
            for wx in range(0, w, window):
                sources.append(
                    tuple((wy + dy) * w + wx + dx for dy in range(window) for dx in range(window))
                )
        self.row_map = RowMap(n_in=h * w, sources=tuple(sources))
        self.proj = FeatureProjector(contract.d_media, contract.d_model)
        self.requires_grad_(contract.trainability is Trainability.TRAINED)

    def forward(self, media: MediaRows) -> Adapted:
        self.contract.check_features(media)
        b, n, _ = media.rows.shape
        if n != self.row_map.n_in:
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"the merger was built for a {self.grid[0]}x{self.grid[1]} grid"
                f" ({self.row_map.n_in} patches), got {n} rows",
                value=n,
                fix="build the merger with the encoder's patch grid",
            )
        member = torch.zeros(self.row_map.r, n, dtype=media.rows.dtype, device=media.rows.device)
        for j, source in enumerate(self.row_map.sources):
            member[j, list(source)] = 1.0
        valid = (
            torch.ones(b, n, dtype=media.rows.dtype, device=media.rows.device)
            if media.mask is None
            else media.mask.to(media.rows.dtype)
        )
        weights = member[None] * valid[:, None, :]  # [B, r, n]
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1.0)
        rows = self.proj(weights @ media.rows)  # [B, r, d_media] -> [B, r, d_model]
        return _finish(self.contract, media, rows, weights, self.row_map)


def check_row_map(adapter: nn.Module, media: MediaRows) -> None:
    """Check on ``media`` that each output row depends on exactly its declared sources.

    Dependence is read from autograd: input row i feeds output row j when the
    gradient of row j with respect to row i is not all zero. Masked inputs are
    expected to feed nothing.

    Raises:
        HandoffError ADAPTER_ROW_ORDER_UNDECLARED: an output row depends on other input
            rows than its row map declares (reordered or regrouped rows).
    """
    probe = media.rows.detach().clone().requires_grad_(True)
    rep = representation_of(media.rows)
    if rep is not None:
        declare(probe, rep)
    adapted = adapter(replace(media, rows=probe))
    out = adapted.media
    row_map = out.row_map
    assert row_map is not None, "an adapter's rows carry its row map"
    valid = (
        torch.ones(probe.shape[:2], dtype=torch.bool, device=probe.device)
        if media.mask is None
        else media.mask
    )
    for j, source in enumerate(row_map.sources):
        (grad,) = torch.autograd.grad(out.rows[:, j].sum(), probe, retain_graph=True)
        depends = (grad != 0).any(dim=-1)  # [B, n]
        declared = torch.zeros_like(depends)
        declared[:, list(source)] = True
        declared &= valid
        if not torch.equal(depends, declared):
            b = int((depends != declared).any(dim=1).nonzero()[0])
            seen = tuple(int(i) for i in depends[b].nonzero().flatten())
            raise HandoffError(
                "ADAPTER_ROW_ORDER_UNDECLARED",
                f"output row {j} of item {b} depends on input rows {seen[:8]}, but the row"
                f" map declares {source[:8]}; metadata carried by the map would describe"
                " other rows",
                value=(j, seen[:8], source[:8]),
                fix="make the adapter return the row map of the order it actually produces",
            )


def check_evidence(adapted: Adapted, evidence: torch.Tensor, *, min_weight: float) -> torch.Tensor:
    """Each declared evidence row's best share in any output row, ``[B, n]``; refuse losses.

    Example::

        >>> check_evidence(merger(media), evidence, min_weight=0.2)  # doctest: +SKIP

    Raises:
        HandoffError ADAPTER_EVIDENCE_DROPPED: an evidence row makes up less than
            ``min_weight`` of every output row.
        UsageError INVALID_ARGUMENT: ``min_weight`` not in (0, 1], or ``evidence`` not a
            ``[B, n]`` bool tensor.
    """
    weights = adapted.weights
    if (
        not 0 < min_weight <= 1
        or evidence.dtype != torch.bool
        or evidence.shape
        != (
            weights.shape[0],
            weights.shape[2],
        )
    ):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"evidence is a [B, n] = {(weights.shape[0], weights.shape[2])} bool mask and"
            f" min_weight lies in (0, 1]; got {evidence.dtype} {tuple(evidence.shape)},"
            f" {min_weight}",
            value=(tuple(evidence.shape), min_weight),
            fix="mark the input rows that hold the needed evidence",
        )
    coverage = weights.detach().amax(dim=1)  # [B, n]: the largest share any output row gives row i
    lost = (evidence & (coverage < min_weight)).nonzero().tolist()
    if lost:
        shown = [(b, i, round(float(coverage[b, i]), 6)) for b, i in lost[:4]]
        raise HandoffError(
            "ADAPTER_EVIDENCE_DROPPED",
            f"{len(lost)} evidence row(s) make up less than {min_weight} of every output row"
            f" (item, row, best share): {shown}",
            value=shown,
            fix="keep more output rows, a finer merge window, or route the evidence rows"
            " around the bottleneck",
        )
    return coverage
