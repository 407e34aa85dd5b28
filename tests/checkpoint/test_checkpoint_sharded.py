"""Vocab-parallel tied tables: one file per rank with its row layout, aliases restored per rank."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from tokembed.artifacts.safetensors_header import read_checkpoint_metadata
from tokembed.checkpoint import load_checkpoint, save_checkpoint, tie_report
from tokembed.errors import TokembedError
from tokembed.parallel import VocabParallelEmbedding, VocabParallelLMHead

# The gloo harness lives with the parallel tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parallel"))
from _harness import run_ranks

pytestmark = pytest.mark.distributed


def _model(*, tied: bool, seed: int, group: Any = None) -> nn.Module:
    torch.manual_seed(seed)
    model = nn.Module()
    model.emb = VocabParallelEmbedding(10, 4, group=group)
    model.head = VocabParallelLMHead(4, 10, group=group, tie_to=model.emb if tied else None)
    return model


def _round_trip(rank: int, world_size: int, folder: str) -> Any:
    path = Path(folder) / f"rank{rank}.safetensors"
    source = _model(tied=True, seed=rank)
    save_checkpoint(source, path)
    target = _model(tied=False, seed=100 + rank)
    report = load_checkpoint(target, path, retie=True)
    singles = [dist.new_group([0]), dist.new_group([1])]  # every rank creates every group
    other_layout = _model(tied=True, seed=0, group=singles[0]) if rank == 0 else None
    code = None
    if other_layout is not None:
        try:
            load_checkpoint(other_layout, path)
        except TokembedError as exc:
            code = exc.code
    return {
        "shards": read_checkpoint_metadata(path)["shards"],  # type: ignore[index]
        "retied": report.retied,
        "same": target.head.weight is target.emb.weight,
        "equal": torch.equal(target.emb.weight, source.emb.weight),
        "kinds": [p.kind for p in tie_report(target).pairs],
        "layout_code": code,
    }


def test_each_rank_saves_its_rows_and_loading_reties_the_local_parameter(tmp_path: Path) -> None:
    results = run_ranks(_round_trip, 2, str(tmp_path))
    for rank, r in enumerate(results):
        rows = {"num_embeddings": 10, "start": 5 * rank, "end": 5 * rank + 5, "world_size": 2}
        assert r["shards"] == {"emb.weight": rows, "head.weight": rows}
        assert (r["retied"], r["same"], r["equal"], r["kinds"]) == (
            ("head.weight",), True, True, ["same_parameter"],
        )  # fmt: skip
    assert results[0]["layout_code"] == "SHARD_LAYOUT_MISMATCH"
