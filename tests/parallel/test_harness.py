"""The spawn harness itself: results by rank, child tracebacks, no hang on a stuck rank."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
import torch
import torch.distributed as dist
from _harness import RankFailed, rank_threads, run_ranks

pytestmark = pytest.mark.distributed


def _sum_and_settings(rank: int, world_size: int, base: int) -> tuple[Any, ...]:
    t = torch.tensor([base + rank])
    dist.all_reduce(t)
    settings = (
        torch.get_num_threads(),
        os.environ["OMP_NUM_THREADS"],
        os.environ["MKL_NUM_THREADS"],
        torch.are_deterministic_algorithms_enabled(),
    )
    return int(t), settings, torch.arange(rank + 1)


def _fail_on_rank_one(rank: int, world_size: int) -> None:
    if rank == 1:
        raise KeyError("boom on rank one")
    # Rank 0 blocks in a collective rank 1 never enters: the harness must not wait for gloo.
    dist.barrier()


def _rank_one_never_returns(rank: int, world_size: int) -> None:
    if rank == 1:
        time.sleep(3600)
    dist.barrier()


def test_results_come_back_in_rank_order_under_pinned_settings() -> None:
    out = run_ranks(_sum_and_settings, 2, 10)
    # rank_threads(): $OMP_NUM_THREADS if the caller set it, else one per rank.
    n = rank_threads()
    assert [o[:2] for o in out] == [(21, (n, str(n), str(n), True))] * 2
    assert out[1][2].tolist() == [0, 1]


def test_child_traceback_is_reported_and_stuck_peer_is_killed() -> None:
    with pytest.raises(RankFailed) as e:
        run_ranks(_fail_on_rank_one, 2, timeout=60.0)
    assert "rank 1 of 2 failed in _fail_on_rank_one" in str(e.value)
    assert "KeyError: 'boom on rank one'" in str(e.value)


def test_a_run_that_never_finishes_times_out_and_is_killed() -> None:
    start = time.monotonic()
    with pytest.raises(RankFailed) as e:
        run_ranks(_rank_one_never_returns, 2, timeout=10.0)
    # The harness deadline starts before the spawn, so it fires before gloo's own 10 s timer.
    assert "timed out after 10s; ranks without a result: [0, 1]" in str(e.value)
    assert time.monotonic() - start < 30.0
