"""Count-changing adapters: exact provenance, metadata that follows r, evidence that survives."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tokembed.errors import HandoffError, UsageError
from tokembed.inputs.adapter import (
    Adapted,
    PatchMerger,
    QueryBottleneck,
    check_evidence,
    check_row_map,
)
from tokembed.inputs.kinds import Kind, Representation, declare, representation_of
from tokembed.inputs.media_projector import ProjectorContract, Trainability
from tokembed.inputs.rows import MediaRows, RowMap, RowType

VIT = Representation(kind=Kind.CONTEXTUAL, model="tiny-vit", layer=2)
CONTRACT = ProjectorContract(
    source=VIT, d_media=6, target="tiny-lm", d_model=4, trainability=Trainability.TRAINED
)
GRID = torch.stack(
    torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij"), dim=-1
).reshape(1, 16, 2)  # raster (row, column) of a 4x4 patch grid


def _patches(b: int = 2, mask: torch.Tensor | None = None) -> MediaRows:
    torch.manual_seed(1)
    rows = declare(torch.rand(b, 16, 6) + 0.5, VIT)
    return MediaRows(rows=rows, row_type=RowType.IMAGE, mask=mask, geometry=GRID.expand(b, 16, 2))


def test_patch_merger_provenance_geometry_and_values_are_exact() -> None:
    merger = PatchMerger(CONTRACT, grid=(4, 4), window=2)
    media = _patches()
    out = merger(media)
    assert out.media.row_map == RowMap(
        n_in=16, sources=((0, 1, 4, 5), (2, 3, 6, 7), (8, 9, 12, 13), (10, 11, 14, 15))
    )
    assert out.media.rows.shape == (2, 4, 4)
    assert out.media.geometry is not None
    assert out.media.geometry[0].tolist() == [[0.5, 0.5], [0.5, 2.5], [2.5, 0.5], [2.5, 2.5]]
    assert torch.equal(out.weights[0, 0, [0, 1, 4, 5]], torch.full((4,), 0.25))
    window0 = media.rows[:, [0, 1, 4, 5]].mean(dim=1)  # [B, d_media]
    expected = F.linear(window0, merger.proj.weight, merger.proj.bias)
    tol = 8 * torch.finfo(torch.float32).eps * float(expected.detach().abs().max())
    torch.testing.assert_close(out.media.rows[:, 0], expected, rtol=0, atol=tol)
    assert representation_of(out.media.rows) == CONTRACT.output
    check_row_map(merger, media)


def test_patch_merger_leaves_masked_patches_out() -> None:
    mask = torch.ones(1, 16, dtype=torch.bool)
    mask[0, [5, 10, 11, 14, 15]] = False  # window 3 (10, 11, 14, 15) is all padding
    out = PatchMerger(CONTRACT, grid=(4, 4), window=2)(_patches(1, mask))
    assert out.media.mask is not None
    assert out.media.mask.tolist() == [[True, True, True, False]]
    assert out.weights[0, 0, [0, 1, 4, 5]].tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0.0])
    assert out.weights[0, 3].sum().item() == 0.0


def _attention_oracle(qb: QueryBottleneck, h: torch.Tensor) -> torch.Tensor:
    # One head: softmax(q k^T / sqrt(d)) v, then the output projection (Vaswani et al., 2017).
    attn = qb.attn
    bq, bk, bv = attn.in_proj_bias.chunk(3)  # type: ignore[union-attr]
    q = F.linear(qb.queries, attn.q_proj_weight, bq)  # [r, d]
    k = F.linear(h, attn.k_proj_weight, bk)  # [B, n, d]
    v = F.linear(h, attn.v_proj_weight, bv)
    w = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)  # [B, r, n]
    return attn.out_proj(w @ v)


def test_query_bottleneck_matches_the_attention_formula() -> None:
    torch.manual_seed(0)
    qb = QueryBottleneck(CONTRACT, r=3)
    media = _patches()
    out = qb(media)
    assert out.media.rows.shape == (2, 3, 4)
    expected = _attention_oracle(qb, media.rows)
    tol = 64 * torch.finfo(torch.float32).eps * float(expected.detach().abs().max())
    torch.testing.assert_close(out.media.rows, expected, rtol=0, atol=tol)
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, 3))
    assert out.media.row_map == RowMap(n_in=16, sources=(tuple(range(16)),) * 3)
    check_row_map(qb, media)


def test_query_bottleneck_ignores_padding_rows() -> None:
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 9:] = False
    out = QueryBottleneck(CONTRACT, r=2)(_patches(2, mask))
    assert torch.equal(out.weights[1, :, 9:], torch.zeros(2, 7))
    assert out.media.mask is not None
    assert out.media.mask.tolist() == [[True, True]] * 2
    check_row_map(QueryBottleneck(CONTRACT, r=2), _patches(2, mask))
    with pytest.raises(UsageError):
        QueryBottleneck(CONTRACT, r=0)


@pytest.mark.failure_lab("10.1")
def test_adapter_changes_n_but_masks_keep_old_n() -> None:
    """Adapter changes n but masks still use old n.

    The merger turns 16 patches into 4 rows; the 16-wide mask of the input no
    longer describes them.
    """
    media = _patches(mask=torch.ones(2, 16, dtype=torch.bool))
    out = PatchMerger(CONTRACT, grid=(4, 4), window=2)(media)
    with pytest.raises(HandoffError) as e:
        MediaRows(rows=out.media.rows, row_type=RowType.IMAGE, mask=media.mask)
    assert e.value.code == "ADAPTER_ROW_COUNT_STALE"
    assert e.value.value == (2, 16)
    with pytest.raises(HandoffError) as e:
        replace(out.media, geometry=media.geometry)
    assert e.value.code == "ADAPTER_ROW_COUNT_STALE"


class _ReversingPool(nn.Module):
    """Pairs rows, then emits the pairs last-first while declaring first-last."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, media: MediaRows) -> Adapted:
        b, n, _ = media.rows.shape
        pairs = media.rows.reshape(b, n // 2, 2, -1).mean(dim=2).flip(1)  # reordered
        row_map = RowMap(n_in=n, sources=tuple((2 * j, 2 * j + 1) for j in range(n // 2)))
        rows = row_map.stamp(declare(self.proj(pairs), CONTRACT.output))
        weights = torch.zeros(b, n // 2, n)
        return Adapted(media=MediaRows(rows=rows, row_type=media.row_type), weights=weights)


@pytest.mark.failure_lab("10.2")
def test_adapter_reorders_rows_without_metadata_update() -> None:
    """Adapter reorders rows without metadata update.

    Old geometry cut to the new count lines up by shape only; and an adapter whose
    declared row map hides its reordering is caught by asking autograd which inputs
    each output row reads.
    """
    media = _patches()
    out = PatchMerger(CONTRACT, grid=(4, 4), window=2)(media)
    assert media.geometry is not None
    with pytest.raises(HandoffError) as e:
        replace(out.media, geometry=media.geometry[:, :4])
    assert e.value.code == "ADAPTER_ROW_ORDER_UNDECLARED"
    with pytest.raises(HandoffError) as e:
        check_row_map(_ReversingPool(), media)
    assert e.value.code == "ADAPTER_ROW_ORDER_UNDECLARED"
    assert e.value.value == (0, (14, 15), (0, 1))


@pytest.mark.failure_lab("10.3")
def test_query_bottleneck_collapses_needed_evidence() -> None:
    """Query bottleneck collapses needed evidence.

    Patch 5 holds the small text a question needs. Merged 2x2 it is a quarter of an
    output row; one row per image (or an untrained bottleneck's near-uniform
    attention) leaves it about 1/16 of every row, below the declared floor.
    """
    media = _patches()
    evidence = torch.zeros(2, 16, dtype=torch.bool)
    evidence[:, 5] = True
    fine = PatchMerger(CONTRACT, grid=(4, 4), window=2)(media)
    coverage = check_evidence(fine, evidence, min_weight=0.2)
    assert coverage[:, 5].tolist() == [0.25, 0.25]
    coarse = PatchMerger(CONTRACT, grid=(4, 4), window=4)(media)
    with pytest.raises(HandoffError) as e:
        check_evidence(coarse, evidence, min_weight=0.2)
    assert e.value.code == "ADAPTER_EVIDENCE_DROPPED"
    assert e.value.value == [(0, 5, 0.0625), (1, 5, 0.0625)]
    torch.manual_seed(0)
    with pytest.raises(HandoffError) as e:
        check_evidence(QueryBottleneck(CONTRACT, r=8)(media), evidence, min_weight=0.2)
    assert e.value.code == "ADAPTER_EVIDENCE_DROPPED"
    with pytest.raises(UsageError):
        check_evidence(fine, evidence, min_weight=0.0)


def test_adapters_check_their_source_like_a_projector() -> None:
    other = Representation(kind=Kind.CONTEXTUAL, model="other-vit", layer=2)
    media = MediaRows(rows=declare(torch.rand(1, 16, 6) + 0.5, other), row_type=RowType.IMAGE)
    with pytest.raises(HandoffError) as e:
        QueryBottleneck(CONTRACT, r=2)(media)
    assert e.value.code == "PROJECTOR_ENCODER_MISMATCH"
    with pytest.raises(UsageError):
        PatchMerger(CONTRACT, grid=(4, 4), window=3)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 3), w=st.integers(1, 3), window=st.sampled_from([1, 2, 4]))
def test_merger_windows_partition_the_grid_and_sit_at_their_centres(
    h: int, w: int, window: int
) -> None:
    rows, cols = h * window, w * window
    merger = PatchMerger(CONTRACT, grid=(rows, cols), window=window)
    assert sorted(i for s in merger.row_map.sources for i in s) == list(range(rows * cols))
    grid = torch.stack(
        torch.meshgrid(torch.arange(float(rows)), torch.arange(float(cols)), indexing="ij"), -1
    ).reshape(1, rows * cols, 2)
    features = declare(torch.rand(1, rows * cols, 6) + 0.5, VIT)
    out = merger(MediaRows(rows=features, row_type=RowType.IMAGE, geometry=grid))
    # Windows of 1, 2, 4 keep the shares 1/window**2 exact in binary, so centres compare exactly.
    half = (window - 1) / 2
    centres = [[wy * window + half, wx * window + half] for wy in range(h) for wx in range(w)]
    assert out.media.geometry is not None
    assert out.media.geometry[0].tolist() == centres
    check_row_map(merger, MediaRows(rows=features, row_type=RowType.IMAGE))
