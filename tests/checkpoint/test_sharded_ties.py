"""Ties through FSDP2 and meta-device materialization: kept, proven, and refused when lost.

The uneven-split class of bug (a tied table whose rows do not divide by the world
size, where the last rank's rows were never updated) is reproduced on real gloo
ranks: a tied table of 131 rows (66 + 65 over 2 ranks, 33 + 33 + 33 + 32 over 4)
under ``fully_shard`` trains a few AdamW steps and ends where one process ends,
within the eps-derived bounds of the parallel parity tests (``_parity``); a run
that skipped a rank's rows would be off by a whole learning-rate step. The same
ranks save the FSDP2 model and optimizer as a distributed checkpoint, which one
process then loads bit for bit. The guards refuse a plan that shards the two
names of a tie in two groups, a tie broken after sharding, and ``to_empty``
untying a model built on the meta device.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from tokembed.checkpoint import (
    check_shard_plan,
    guard_ties,
    load_checkpoint,
    materialize,
    require_ties,
    save_checkpoint,
    shard_groups,
    tie_report,
)
from tokembed.errors import TokembedError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parallel"))
from _harness import backend_for, rank_device, run_ranks
from _llama import train
from _parity import Dims, assert_parity

V, D, SEQ, STEPS = 131, 8, 6, 3
SETTINGS = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}


class TiedLM(nn.Module):
    def __init__(self, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, D, dtype=torch.float64, device=device)
        self.body = nn.Linear(D, D, dtype=torch.float64, device=device)
        self.head = nn.Linear(D, V, bias=False, dtype=torch.float64, device=device)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(self.emb(ids))))


def _loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(ids[:, :-1]).reshape(-1, V), labels[:, 1:].reshape(-1))


def _batches(world_size: int, rank: int | None) -> list[torch.Tensor]:
    """Every step's ids, [world_size, SEQ]; one rank's row (rank) or all of them (None)."""
    gen = torch.Generator().manual_seed(5)
    steps = [torch.randint(0, V, (world_size, SEQ), generator=gen) for _ in range(STEPS)]
    return steps if rank is None else [ids[rank : rank + 1] for ids in steps]


def _full(p: torch.Tensor, local: torch.Tensor) -> torch.Tensor | None:
    from torch.distributed.tensor import DTensor

    return local.full_tensor() if isinstance(local, DTensor) else None


def _dims(world_size: int) -> Dims:
    return Dims(vocab=V, hidden=D, intermediate=D, layers=1, seq=SEQ, tokens=world_size * SEQ)


def _fsdp_case(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = rank_device()
    mesh = init_device_mesh(device.type, (world_size,))
    torch.manual_seed(0)
    model = TiedLM(device)
    reference = copy.deepcopy(model)
    check_shard_plan(model, [model])  # one group holds both names of the tie
    with guard_ties(model):
        fully_shard(model, mesh=mesh)
    report = tie_report(model)
    require_ties(model)
    opt = torch.optim.AdamW(model.parameters(), **SETTINGS)
    run = train(
        model,
        opt,
        [ids.to(device) for ids in _batches(world_size, rank)],
        _loss,
        gather=_full,
        state=lambda m: {k: v.full_tensor() for k, v in m.state_dict().items()},
    )
    losses = torch.tensor(run["losses"], dtype=torch.float64, device=device)
    dist.all_reduce(losses)  # each rank's loss is the mean over its own tokens
    run["losses"] = (losses / world_size).tolist()
    save_checkpoint(model, folder, optimizer=opt)
    ref = None
    if rank == 0:
        ref_opt = torch.optim.AdamW(reference.parameters(), **SETTINGS)
        ids = [x.to(device) for x in _batches(world_size, None)]
        ref = train(reference, ref_opt, ids, _loss)

    # A tie broken after sharding (a second Parameter under the head's name) is refused.
    broken = TiedLM(device)
    fully_shard(broken, mesh=mesh)
    try:
        with guard_ties(broken):
            broken.head.weight = nn.Parameter(broken.emb.weight.detach().clone())
        lost = None
    except TokembedError as exc:
        lost = exc.code

    # Two fully_shard groups for the two names of one tie.
    split = TiedLM(device)
    try:
        with guard_ties(split):
            fully_shard(split.emb, mesh=mesh)
            fully_shard(split, mesh=mesh)
        split_code = None
    except TokembedError as exc:
        split_code = exc.code
    return {
        "run": run,
        "ref": ref,
        "kinds": [p.kind for p in report.pairs],
        "local_rows": int(model.emb.weight.to_local().shape[0]),
        "lost": lost,
        "split": split_code,
        "adam": {
            k: v.full_tensor().cpu() if v.dim() else v.cpu()
            for k, v in opt.state[model.emb.weight].items()
        },
    }


@pytest.mark.distributed
@pytest.mark.parametrize("world_size", [2, 4])
def test_fsdp2_tied_table_of_131_rows_trains_as_one_process(
    tmp_path: Path, world_size: int
) -> None:
    folder = tmp_path / "fsdp"
    results = run_ranks(_fsdp_case, world_size, str(folder), backend=backend_for(world_size))
    rows = [-(-V // world_size)] * (world_size - 1)
    assert [r["local_rows"] for r in results] == [*rows, V - sum(rows)]
    ref = results[0]["ref"]
    for result in results:
        assert result["kinds"] == ["same_parameter"]
        assert_parity(
            result["run"], ref, dtype=torch.float64, dims=_dims(world_size), optimizer=SETTINGS
        )
        assert result["lost"] == "TIE_LOST_IN_MATERIALIZATION"
        assert result["split"] == "TIE_ACROSS_SHARD_GROUPS"
    # The FSDP2 run's state, saved as a DCP folder at world_size ranks, loads in one process.
    final = results[0]["run"]["state"]
    one = TiedLM()
    one.head.weight = nn.Parameter(one.emb.weight.detach().clone())  # untied: load reties
    assert load_checkpoint(one, folder).retied == ("head.weight",)
    opt = torch.optim.AdamW(one.parameters(), **SETTINGS)
    load_checkpoint(one, folder, optimizer=opt)
    for key, value in one.state_dict().items():
        assert torch.equal(value, final[key].cpu()), key
    for key, value in results[0]["adam"].items():
        assert torch.equal(opt.state[one.emb.weight][key], value), key


# --- one process: plans and materialization -------------------------------------------


def test_a_plan_that_shards_a_tie_in_two_groups_is_refused_before_sharding() -> None:
    model = TiedLM("meta")
    assert shard_groups(model, [model.emb, model]) == {
        "emb.weight": 0,
        "body.weight": 1,
        "body.bias": 1,
        "head.weight": 1,
    }
    with pytest.raises(TokembedError) as info:
        check_shard_plan(model, [model.emb, model])
    assert info.value.code == "TIE_ACROSS_SHARD_GROUPS"
    assert "\n" not in str(info.value)
    check_shard_plan(model, [model.body, model])  # the tie stays in the root group


def test_to_empty_unties_and_materialize_keeps_the_tie() -> None:
    model = TiedLM("meta")
    with pytest.raises(TokembedError) as info, guard_ties(model):
        model.to_empty(device="cpu")
    assert info.value.code == "TIE_LOST_IN_MATERIALIZATION"
    model = TiedLM("meta")
    assert materialize(model, device="cpu") == ["head.weight"]
    assert model.head.weight is model.emb.weight
    assert [p.kind for p in tie_report(model).pairs] == ["same_parameter"]
