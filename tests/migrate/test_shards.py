"""Vocabulary-parallel shards migrated through the canonical table, on real gloo groups."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _gloo import run_ranks
from torch import nn

from tokembed.errors import ParallelError
from tokembed.migrate import NewRows, RowMap, init_rows, migrate_rows
from tokembed.migrate.optimizer import move_state
from tokembed.migrate.shards import check_reconstruction, migrate_vocab_parallel
from tokembed.parallel import (
    VocabParallelEmbedding,
    VocabParallelLMHead,
    load_rows,
    row_intervals,
    save_vocab_shards,
)

pytestmark = pytest.mark.distributed

V0, D = 11, 4  # 11 rows: uneven at 2 and 4 ranks
# New row v copies old row SOURCE[v]: old rows reversed, then three initialized rows.
SOURCE = (*range(V0 - 1, -1, -1), -1, -1, -1)
IDS = torch.tensor([[0, 3, 10, 5], [7, 7, 1, 9]])


def _rows() -> RowMap:
    return RowMap(old_rows=V0, new_rows=len(SOURCE), source=SOURCE)


def _table() -> torch.Tensor:
    return torch.randn(V0, D, generator=torch.Generator().manual_seed(3))


def _reference() -> tuple[torch.Tensor, dict[str, Any]]:
    """One process: the full table trained one step, then migrated."""
    emb = nn.Embedding(V0, D)
    with torch.no_grad():
        emb.weight.copy_(_table())
    opt = torch.optim.Adam(emb.parameters(), lr=0.1)
    emb(IDS).square().sum().backward()
    opt.step()
    old = emb.weight
    values = init_rows(old.detach(), _rows(), NewRows(name="mean"))
    new = nn.Parameter(migrate_rows(old, _rows(), values))
    move_state(opt, old, new, _rows())
    return new.detach(), dict(opt.state[new])


def _migrate_on_ranks(rank: int, world_size: int, tied: bool, directory: str) -> dict[str, Any]:
    full = nn.Embedding(V0, D)
    with torch.no_grad():
        full.weight.copy_(_table())
    emb = VocabParallelEmbedding.from_embedding(full)
    head = VocabParallelLMHead(D, V0, tie_to=emb) if tied else None
    opt = torch.optim.Adam(emb.parameters(), lr=0.1)
    emb(IDS).square().sum().backward()
    opt.step()
    values = init_rows(emb.gather_weight(), _rows(), NewRows(name="mean"))
    new_emb, new_head = migrate_vocab_parallel(emb, _rows(), values, head=head, optimizer=opt)
    save_vocab_shards(new_emb, directory)  # the migrated shards: one checkpoint folder
    state = opt.state[new_emb.weight]
    sizes = [e - s for s, e in new_emb.intervals]
    from tokembed.parallel.collectives import all_gather_uneven

    return {
        "table": new_emb.gather_weight(),
        "exp_avg": all_gather_uneven(state["exp_avg"], sizes, group=None),
        "exp_avg_sq": all_gather_uneven(state["exp_avg_sq"], sizes, group=None),
        "step": float(state["step"]),
        "intervals": new_emb.intervals,
        "tied": new_head is not None and new_head.weight is new_emb.weight,
        "head_intervals": None if new_head is None else new_head.intervals,
        "lookup": new_emb(_rows().map_ids(IDS)),
    }


@pytest.mark.parametrize("world_size", [2, 4])
def test_shards_equal_the_single_process_migration(world_size: int, tmp_path: Path) -> None:
    table, state = _reference()
    folder = tmp_path / "shards"
    results = run_ranks(_migrate_on_ranks, world_size, True, str(folder))
    # Saved at this size, read back at the other: the folder holds the migrated logical table.
    other = 6 - world_size
    pieces = [load_rows(folder, s, e) for s, e in row_intervals(len(SOURCE), other)]
    assert torch.equal(torch.cat(pieces), table)
    for out in results:
        assert torch.equal(out["table"], table)
        assert torch.equal(out["exp_avg"], state["exp_avg"])
        assert torch.equal(out["exp_avg_sq"], state["exp_avg_sq"])
        assert out["step"] == float(state["step"])
        assert out["intervals"] == row_intervals(len(SOURCE), world_size)
        assert out["tied"]
        assert out["head_intervals"] == out["intervals"]
        assert torch.equal(out["lookup"], nn.functional.embedding(_rows().map_ids(IDS), table))


def _edit_shards_locally(rank: int, world_size: int) -> str:
    """Each rank appends its share of new rows to its own shard: every local shape is right."""
    old_rows, added = 10, 4
    full = torch.randn(old_rows, D, generator=torch.Generator().manual_seed(0))
    rows = RowMap(
        old_rows=old_rows, new_rows=old_rows + added, source=tuple(range(old_rows)) + (-1,) * added
    )
    values = init_rows(full, rows, NewRows(name="mean"))
    start, end = row_intervals(old_rows, world_size)[rank]
    share = added // world_size
    local = torch.cat([full[start:end], values[rank * share : (rank + 1) * share]])
    layer = VocabParallelEmbedding(old_rows + added, D)
    assert layer.weight.shape == local.shape  # 5 + 2 rows == the new interval's 7 rows
    with torch.no_grad():
        layer.weight.copy_(local)
    try:
        check_reconstruction(layer, migrate_rows(full, rows, values))
    except ParallelError as error:
        return error.code
    return "accepted"


@pytest.mark.failure_lab("3.12")
def test_shards_edited_independently_are_caught() -> None:
    """Physical shards are edited independently without a canonical reconstruction."""
    assert run_ranks(_edit_shards_locally, 2) == ["SHARD_LAYOUT_MISMATCH"] * 2
