"""Reconciliation gate: the four table layouts rebuild the same dE on 2 gloo ranks.

Replicated (every rank holds the table, gradients summed), owner-routed rows, masked
local rows and sharded columns.

The duplicate-id trace (V=8, d=3, padding_idx=0; origin rank 0 ids
[1,4,1,0], rank 1 ids [4,6,1,4]) is integer-valued, so every layout must
equal the single-table scatter-add exactly: dE[1]=[5,3,2], dE[4]=[6,3,1],
dE[6]=[0,1,3], all other rows (including PAD row 0) zero. The owner-routed
layout also reports its logical payload: 80 bytes for N_remote = 2.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from _harness import run_ranks
from torch import nn

from tokembed.parallel import (
    ColumnParallelEmbedding,
    GradientReduction,
    RowRoutedEmbedding,
    VocabParallelEmbedding,
    reduce_gradients,
)

pytestmark = pytest.mark.distributed

_IDS = ([1, 4, 1, 0], [4, 6, 1, 4])
_GRADS = (
    [[1, 0, 1], [0, 2, 0], [3, 1, 0], [9, 9, 9]],
    [[2, 0, 1], [0, 1, 3], [1, 2, 1], [4, 1, 0]],
)
_LAYOUTS = ("replicated", "owner_routed", "masked_local", "column_sharded")
_EXPECTED = [[0, 0, 0], [5, 3, 2], [0, 0, 0], [0, 0, 0], [6, 3, 1], [0, 0, 0], [0, 1, 3], [0, 0, 0]]


def _table() -> nn.Embedding:
    table = nn.Embedding(8, 3, padding_idx=0)
    with torch.no_grad():
        table.weight.copy_(torch.arange(24.0).reshape(8, 3))
    return table


def _gather_rows(grad: torch.Tensor) -> list[list[float]]:
    parts = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, grad)
    return torch.cat(parts).tolist()


def _schedules(rank: int, world: int) -> dict[str, object]:
    ids, grads = torch.tensor(_IDS[rank]), torch.tensor(_GRADS[rank], dtype=torch.float32)
    all_ids = torch.tensor(_IDS[0] + _IDS[1])
    all_grads = torch.tensor(_GRADS[0] + _GRADS[1], dtype=torch.float32)
    out: dict[str, object] = {}

    replicated = _table()  # every rank holds V x d, local scatter-add, then SUM
    (replicated(ids) * grads).sum().backward()
    convention = GradientReduction(collective="sum", loss_normalization="sum")
    reduce_gradients([replicated.weight], group=None, reduction=convention)
    assert replicated.weight.grad is not None
    out["replicated"] = replicated.weight.grad.tolist()

    routed = RowRoutedEmbedding.from_embedding(_table())  # ids travel to owners
    (routed(ids) * grads).sum().backward()
    assert routed.weight.grad is not None
    out["owner_routed"] = _gather_rows(routed.weight.grad)
    assert routed.last_route is not None
    out["owner_routed ledger"] = (routed.last_route.remote, routed.last_route.logical_bytes)

    masked = VocabParallelEmbedding.from_embedding(_table())  # all ids on every rank
    (masked(all_ids) * all_grads).sum().backward()
    assert masked.weight.grad is not None
    out["masked_local"] = _gather_rows(masked.weight.grad)

    column = ColumnParallelEmbedding.from_embedding(_table())  # columns [0,2) and [2,3)
    (column(all_ids) * all_grads).sum().backward()
    assert column.weight.grad is not None
    pad = torch.zeros(8, 2)
    pad[:, : column.weight.grad.shape[1]] = column.weight.grad
    parts = [torch.empty(8, 2) for _ in range(world)]
    dist.all_gather(parts, pad)
    out["column_sharded"] = torch.cat([parts[0], parts[1][:, :1]], dim=1).tolist()
    return out


def test_every_layout_rebuilds_the_worked_trace_gradient() -> None:
    results = run_ranks(_schedules, 2)
    for result in results:
        assert {k: result[k] for k in _LAYOUTS} == dict.fromkeys(_LAYOUTS, _EXPECTED)
    # Payload formula: N_remote = 2 over both ranks, 2*(8+8) + 2*3*4 + 2*3*4 = 80 bytes.
    assert [r["owner_routed ledger"] for r in results] == [(1, 40), (1, 40)]
