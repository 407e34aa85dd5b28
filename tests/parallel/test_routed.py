"""RowRoutedEmbedding: owner-routed lookup on real gloo groups.

At 2 and 4 ranks each rank's own batch equals single-process nn.Embedding
on the global batch (uneven V=131, PAD on a non-zero owner, max_norm, an
empty batch); a bad id on one rank raises on every rank; lost origin
metadata is refused. (The two-rank duplicate-id trace and its 80-byte
payload are checked in test_schedules.py.)
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _harness import run_ranks
from torch import nn
from torch.testing import assert_close

from tokembed.errors import EmbeddingError, ParallelError
from tokembed.parallel import RowRoutedEmbedding, restore_origin_order

pytestmark = pytest.mark.distributed


def _matches_global_batch(rank: int, world: int, max_norm: float | None) -> None:
    torch.manual_seed(3)
    ref = nn.Embedding(131, 5, padding_idx=40, max_norm=max_norm)
    with torch.no_grad():
        ref.weight.mul_(2.0)
    routed = RowRoutedEmbedding.from_embedding(ref)
    gen = torch.Generator().manual_seed(4)
    batches = [torch.randint(0, 131, (2, 7), generator=gen) for _ in range(world)]
    batches[1][0, :3] = 40
    batches[0] = batches[0][:0]  # rank 0 brings no ids: it still serves its rows
    upstream = [torch.randn(*b.shape, 5, generator=gen) for b in batches]
    expected = ref(torch.cat([b.reshape(-1) for b in batches]))  # one global batch
    (expected * torch.cat([u.reshape(-1, 5) for u in upstream])).sum().backward()
    got = routed(batches[rank])
    start = sum(b.numel() for b in batches[:rank])
    assert_close(got.reshape(-1, 5), expected[start : start + batches[rank].numel()])
    (got * upstream[rank]).sum().backward()
    assert routed.weight.grad is not None
    assert ref.weight.grad is not None
    assert_close(routed.weight.grad, ref.weight.grad[routed.vocab_start : routed.vocab_end])
    assert_close(routed.gather_weight(), ref.weight.detach())


def _checks(rank: int, world: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    _matches_global_batch(rank, world, None)
    _matches_global_batch(rank, world, 1.5)
    routed = RowRoutedEmbedding(10, 2)
    bad = torch.tensor([3, 10 if rank == world - 1 else 4])
    try:
        routed(bad)
    except (EmbeddingError, ParallelError) as e:
        out["bad"] = f"{type(e).__name__}:{e.code}:{e.value}"
    out["after"] = tuple(routed(torch.tensor([[9, 0, 5]], dtype=torch.int32)).shape)
    return out


@pytest.mark.parametrize("world", [2, 4])
def test_routed_lookup_matches_single_process(world: int) -> None:
    results = run_ranks(_checks, world)
    last = world - 1
    for rank, r in enumerate(results):
        expected_bad = (
            "EmbeddingError:ID_OUT_OF_RANGE:10"
            if rank == last
            else f"EmbeddingError:ID_OUT_OF_RANGE:{last}"
        )
        assert r["bad"] == expected_bad
        assert r["after"] == (1, 3, 2)


@pytest.mark.failure_lab("5.10")
def test_lost_origin_positions_are_refused() -> None:
    """Origin-position metadata is lost during routing."""
    rows = torch.arange(6.0).reshape(3, 2)
    good = torch.tensor([[0, 2], [0, 0], [0, 1]])
    assert restore_origin_order(rows, good, rank=0).tolist() == [[2, 3], [4, 5], [0, 1]]
    for origin in (
        torch.tensor([[0, 0], [0, 0], [0, 1]]),  # position 2 lost, 0 twice
        torch.tensor([[0, 0], [1, 1], [0, 2]]),  # a row of rank 1's batch
        torch.tensor([[0, 0], [0, 1], [0, 3]]),  # a position past the batch
    ):
        with pytest.raises(ParallelError) as e:
            restore_origin_order(rows, origin, rank=0)
        assert e.value.code == "ORIGIN_POSITION_LOST"
