"""The public collectives: uneven gathers and row exchanges on real gloo groups."""

from __future__ import annotations

import pytest
import torch
from _harness import run_ranks

from tokembed.parallel.collectives import all_gather_uneven, exchange_rows, group_rank, group_size

pytestmark = pytest.mark.distributed


def _gather(rank: int, world_size: int) -> torch.Tensor:
    sizes = [3, 0, 2][:world_size]  # rank 1 holds no rows (a tail rank of an uneven split)
    start = sum(sizes[:rank])
    local = torch.arange(start * 2, (start + sizes[rank]) * 2, dtype=torch.float64).reshape(-1, 2)
    return all_gather_uneven(local, sizes, group=None)


def test_every_rank_gets_the_rows_of_all_ranks_in_rank_order() -> None:
    expected = torch.arange(10, dtype=torch.float64).reshape(5, 2)
    for full in run_ranks(_gather, 3):
        assert torch.equal(full, expected)


def _exchange(rank: int, world_size: int) -> tuple[int, int, list[float]]:
    # Rank r sends r + 1 rows to each peer, each row holding 10 * r + destination.
    send = [rank + 1] * world_size
    x = torch.cat([torch.full((rank + 1,), 10.0 * rank + dst) for dst in range(world_size)])
    recv = [src + 1 for src in range(world_size)]
    return group_rank(None), group_size(None), exchange_rows(x, send, recv, group=None).tolist()


def test_exchange_rows_delivers_each_segment_to_its_rank() -> None:
    out = run_ranks(_exchange, 2)
    assert out == [(0, 2, [0.0, 10.0, 10.0]), (1, 2, [1.0, 11.0, 11.0])]
