"""ColumnParallelEmbedding (feature shards) equals nn.Embedding on real gloo groups.

Uneven width (d=7 over 4 ranks: columns [0,2) [2,4) [4,6) [6,7)), PAD row,
the gathered forward with its split backward, and the undeclared-gather
layout (gather_output=False) that returns only this rank's columns.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _harness import run_ranks
from torch import nn
from torch.testing import assert_close

from tokembed.errors import EmbeddingError, ParallelError, TokembedError, UsageError
from tokembed.parallel import (
    ColumnParallelEmbedding,
    VocabParallelEmbedding,
    require_full_rows,
    row_intervals,
)

pytestmark = pytest.mark.distributed


def _checks(rank: int, world: int) -> dict[str, Any]:
    torch.manual_seed(5)
    ref = nn.Embedding(131, 7, padding_idx=77)
    col = ColumnParallelEmbedding.from_embedding(ref)
    sharded = ColumnParallelEmbedding.from_embedding(ref, gather_output=False)
    gen = torch.Generator().manual_seed(6)
    ids = torch.randint(0, 131, (3, 6), generator=gen)
    ids[2, :2] = 77
    upstream = torch.randn(3, 6, 7, generator=gen)
    expected = ref(ids)
    (expected * upstream).sum().backward()
    got = col(ids)
    assert_close(got, expected, rtol=0, atol=0)
    (got * upstream).sum().backward()  # every rank computes the same replicated loss
    columns = slice(col.column_start, col.column_end)
    assert col.weight.grad is not None
    assert ref.weight.grad is not None
    assert_close(col.weight.grad, ref.weight.grad[:, columns])
    assert_close(col.gather_weight(), ref.weight.detach(), rtol=0, atol=0)
    local = sharded(ids)  # declared feature-sharded layout: no collective
    assert_close(local, expected[..., columns], rtol=0, atol=0)
    out: dict[str, Any] = {"columns": (col.column_start, col.column_end)}
    try:
        col(torch.tensor([131]))
    except EmbeddingError as e:
        out["bad"] = e.code
    try:
        ColumnParallelEmbedding.from_embedding(nn.Embedding(4, 4, max_norm=1.0))
    except UsageError as e:
        out["max_norm"] = e.code
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_column_shards_match_nn_embedding(world: int) -> None:
    results = run_ranks(_checks, world)
    assert [r["columns"] for r in results] == row_intervals(7, world)
    assert all(r["bad"] == "ID_OUT_OF_RANGE" for r in results)
    assert all(r["max_norm"] == "INVALID_ARGUMENT" for r in results)


@pytest.mark.parametrize(
    ("module", "column_code", "row_code"),
    [
        (nn.Linear(4, 4), "NOT_AN_EMBEDDING", "NOT_AN_EMBEDDING"),
        (nn.Embedding(4, 4, sparse=True), "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        (nn.Embedding(4, 4, scale_grad_by_freq=True), "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        (nn.Embedding(4, 4, max_norm=1.0), "INVALID_ARGUMENT", None),  # rows renormalize
    ],
)
def test_only_plain_embeddings_are_sharded(
    module: nn.Module, column_code: str, row_code: str | None
) -> None:
    # Refused before any process group is touched: no spawn needed.
    with pytest.raises(TokembedError) as e:
        ColumnParallelEmbedding.from_embedding(module)  # type: ignore[arg-type]
    assert e.value.code == column_code
    if row_code is not None:
        with pytest.raises(TokembedError) as row:
            VocabParallelEmbedding.from_embedding(module)  # type: ignore[arg-type]
        assert row.value.code == row_code


def _next_operator(rank: int, world: int) -> list[Any]:
    torch.manual_seed(5)
    ref = nn.Embedding(13, 6)
    ids = torch.tensor([[1, 5, 12]])
    out: list[Any] = []
    for gather in (False, True):
        col = ColumnParallelEmbedding.from_embedding(ref, gather_output=gather)
        try:
            rows = require_full_rows(col(ids), d_model=6, by="RMSNorm")
            out.append(tuple(rows.shape))
        except ParallelError as e:
            out.append((e.code, e.value))
    return out


@pytest.mark.failure_lab("5.12")
def test_a_column_slice_is_not_a_full_activation() -> None:
    """Column-wise weight placement is mistaken for a full activation schedule.

    gather_output=False hands each rank [*, d_r]; a norm over the hidden width needs [*, d].
    """
    results = run_ranks(_next_operator, 2)
    assert results == [[("ACTIVATION_NOT_GATHERED", 3), (1, 3, 6)]] * 2
