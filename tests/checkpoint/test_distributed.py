"""Sharded models and optimizers through distributed checkpoint folders, at other world sizes.

A tied vocabulary-parallel table of 131 rows (66 + 65 over 2 ranks, 33 + 33 + 33 + 32
over 4) is trained a few AdamW steps with an elementwise loss, so a row's values
depend on nothing but its own history: the sharded run is the single-process run
bit for bit, and every comparison here is ``torch.equal``. It is saved at 2 ranks,
loaded at 2, at 4 and in one process (weights and optimizer moments), and converted
to a single-file checkpoint and a model folder and back. A per-rank file written by
older versions still loads into its own row layout and is refused in another. The
folder migrated offline to 140 rows (tokembed.migrate.offline) loads at 4 ranks
equal to migrating the model in one process. The bad-input tests run in
one process on a folder saved there: each refusal is a coded one-line error and the
model keeps its values.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

from tokembed.artifacts.dcp_metadata import read_dcp_record
from tokembed.artifacts.safetensors_header import CHECKPOINT_META_KEY, CHECKPOINT_VERSION
from tokembed.artifacts.safetensors_writer import write_safetensors
from tokembed.checkpoint import (
    dcp_to_file,
    dcp_to_model_folder,
    file_to_dcp,
    load_checkpoint,
    save_checkpoint,
    tie_report,
)
from tokembed.errors import TokembedError
from tokembed.migrate import RowMap, VocabRoles, migrate_checkpoint, migrate_model
from tokembed.parallel import VocabParallelEmbedding, VocabParallelLMHead

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "parallel"))
from _harness import backend_for, rank_device, run_ranks

V, D, STEPS = 131, 8, 3
HASH = "sha256:" + "7" * 64
OTHER_HASH = "sha256:" + "8" * 64
NEW_HASH = "sha256:" + "9" * 64
# 131 -> 140 rows: old rows 0 and 130 trade places, 9 rows are new (initialized to the mean).
NEW_V = 140
ROWS = RowMap(old_rows=V, new_rows=NEW_V, source=(130, *range(1, 130), 0, *[-1] * 9))
ROLES = VocabRoles(input="emb.weight", output="head.weight", tied=True)


def _table() -> torch.Tensor:
    return torch.arange(V * D, dtype=torch.float64).reshape(V, D).mul(0.37).sin()


def _goal(rows: tuple[int, int]) -> torch.Tensor:
    return torch.arange(V * D, dtype=torch.float64).reshape(V, D)[rows[0] : rows[1]].cos()


class Plain(nn.Module):
    """The single-process model: one table, the head tied to it."""

    def __init__(self, *, tied: bool = True, vocab: int = V) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, D, dtype=torch.float64)
        self.head = nn.Linear(D, vocab, bias=False, dtype=torch.float64)
        if tied:
            self.head.weight = self.emb.weight


class Sharded(nn.Module):
    """The same model with the table's rows split over the ranks of ``group``."""

    def __init__(
        self,
        *,
        tied: bool = True,
        device: torch.device | None = None,
        group: Any = None,
        vocab: int = V,
    ) -> None:
        super().__init__()
        self.emb = VocabParallelEmbedding(vocab, D, dtype=torch.float64, device=device, group=group)
        self.head = VocabParallelLMHead(
            D,
            vocab,
            tie_to=self.emb if tied else None,
            dtype=torch.float64,
            device=device,
            group=group,
        )


def _rows(model: nn.Module) -> tuple[int, int]:
    emb = model.emb
    if isinstance(emb, VocabParallelEmbedding):
        return int(emb.vocab_start), int(emb.vocab_end)
    return 0, V


def _train(model: nn.Module) -> torch.optim.Optimizer:
    """Set the table from the global formula and take STEPS AdamW steps (elementwise loss)."""
    rows = _rows(model)
    weight = model.emb.weight
    with torch.no_grad():
        weight.copy_(_table()[rows[0] : rows[1]])
    goal = _goal(rows).to(weight.device)
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        ((weight - goal) ** 2).sum().backward()
        opt.step()
    return opt


def _facts(model: nn.Module, opt: torch.optim.Optimizer | None) -> dict[str, Any]:
    weight = model.emb.weight
    out: dict[str, Any] = {
        "rows": _rows(model),
        "weight": weight.detach().cpu().clone(),
        "tied": model.head.weight is weight,
        "kinds": [p.kind for p in tie_report(model).pairs],
    }
    if opt is not None:
        state = opt.state[weight]
        out["moments"] = {k: v.detach().cpu().clone() for k, v in state.items()}
    return out


def _save_and_reload(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    device = rank_device()
    model = Sharded(device=device)
    opt = _train(model)
    save_checkpoint(model, folder, optimizer=opt, tokenizer=HASH)
    # Same world size, a fresh untied model: the tie is restored before the values.
    target = Sharded(tied=False, device=device)
    first = load_checkpoint(target, folder, tokenizer=HASH)
    target_opt = torch.optim.AdamW(target.parameters(), lr=0.05, weight_decay=0.1)
    load_checkpoint(target, folder, optimizer=target_opt, tokenizer=HASH)
    refusal = None
    try:  # every rank refuses together
        load_checkpoint(Sharded(device=device), folder, tokenizer=OTHER_HASH)
    except TokembedError as error:
        refusal = error.code
    return {
        "saved": _facts(model, opt),
        "loaded": _facts(target, target_opt),
        "retied": first.retied,
        "refusal": refusal,
        "single_file": _single_file(rank, model, Path(folder).with_name(f"rank{rank}.safetensors")),
    }


def _single_file(rank: int, model: nn.Module, path: Path) -> str | None:
    """A single file holds whole tables: a rank of a row-sharded table refuses it."""
    whole = torch.zeros(V, model.emb.weight.shape[1], dtype=torch.float64)
    header = {
        "version": CHECKPOINT_VERSION,
        "aliases": {"head.weight": "emb.weight"},
        "tensors": {"emb.weight": {"shape": list(whole.shape), "dtype": "float64"}},
        "address_hash": None,
        "optimizer": None,
    }
    meta = {"format": "pt", CHECKPOINT_META_KEY: json.dumps(header)}
    write_safetensors(path, {"emb.weight": whole}, metadata=meta)
    target = Sharded(tied=False, device=rank_device())
    before = target.emb.weight.detach().clone()
    try:
        load_checkpoint(target, path)
    except TokembedError as exc:
        assert torch.equal(target.emb.weight, before)
        return exc.code
    return None


def _load_at(
    rank: int, world_size: int, folder: str, vocab: int = V, tokenizer: str = HASH
) -> dict[str, Any]:
    target = Sharded(tied=False, device=rank_device(), vocab=vocab)
    load_checkpoint(target, folder, tokenizer=tokenizer)
    opt = torch.optim.AdamW(target.parameters(), lr=0.05, weight_decay=0.1)
    load_checkpoint(target, folder, optimizer=opt, tokenizer=tokenizer)
    dist.barrier()
    return _facts(target, opt)


def _load_both_at(rank: int, world_size: int, folder: str, migrated: str) -> list[dict[str, Any]]:
    return [
        _load_at(rank, world_size, folder),
        _load_at(rank, world_size, migrated, NEW_V, NEW_HASH),
    ]


def _reference() -> dict[str, Any]:
    model = Plain()
    opt = _train(model)
    return _facts(model, opt)


def _assert_rows(got: dict[str, Any], want: dict[str, Any]) -> None:
    start, end = got["rows"]
    assert torch.equal(got["weight"], want["weight"][start:end])
    for key, value in want["moments"].items():
        expected = value if value.dim() == 0 else value[start:end]
        assert torch.equal(got["moments"][key].to(expected.dtype), expected), key
    assert got["tied"]
    assert got["kinds"] == ["same_parameter"]


@pytest.mark.distributed
def test_saved_at_two_ranks_loads_at_two_at_four_and_in_one_process(tmp_path: Path) -> None:
    folder = tmp_path / "step-3"
    want = _reference()
    two = run_ranks(_save_and_reload, 2, str(folder), backend=backend_for(2))
    assert [r["saved"]["rows"] for r in two] == [(0, 66), (66, 131)]
    for result in two:
        _assert_rows(result["saved"], want)  # sharded training is the one-process run
        _assert_rows(result["loaded"], want)
        assert result["retied"] == ("head.weight",)
        assert result["refusal"] == "ADDRESS_HASH_MISMATCH"
        assert result["single_file"] == "SHARD_LAYOUT_MISMATCH"
    record = read_dcp_record(folder)
    assert record is not None
    assert record["aliases"] == {"head.weight": "emb.weight"}
    assert record["address_hash"] == HASH
    assert record["layout"]["world_size"] == 2
    assert record["layout"]["tables"]["emb.weight"]["intervals"] == [[0, 66], [66, 131]]
    assert sorted(record["tensors"]) == [
        "emb.weight",
        "optimizer/emb.weight/exp_avg",
        "optimizer/emb.weight/exp_avg_sq",
        "optimizer/emb.weight/step",
    ]  # the tie is one entry, and so is its optimizer state

    # Migrated offline, table by table: loaded at 4 ranks it is the one-process migration.
    migrated = tmp_path / "step-3-v2"
    migrate_checkpoint(folder, migrated, ROWS, roles=ROLES, old_hash=HASH, new_hash=NEW_HASH)
    grown = Plain(tied=False)
    load_checkpoint(grown, folder, tokenizer=HASH)
    grown_opt = torch.optim.AdamW(grown.parameters(), lr=0.05, weight_decay=0.1)
    load_checkpoint(grown, folder, optimizer=grown_opt, tokenizer=HASH)
    migrate_model(grown, ROWS, roles=ROLES, optimizer=grown_opt)
    want_migrated = _facts(grown, grown_opt)

    four = run_ranks(_load_both_at, 4, str(folder), str(migrated), backend=backend_for(4))
    assert [r[0]["rows"] for r in four] == [(0, 33), (33, 66), (66, 99), (99, 131)]
    assert [r[1]["rows"] for r in four] == [(0, 35), (35, 70), (70, 105), (105, 140)]
    for result, result_migrated in four:
        _assert_rows(result, want)
        _assert_rows(result_migrated, want_migrated)

    one = Plain(tied=False)
    report = load_checkpoint(one, folder, tokenizer=HASH)
    opt = torch.optim.AdamW(one.parameters(), lr=0.05, weight_decay=0.1)
    load_checkpoint(one, folder, optimizer=opt, tokenizer=HASH)
    assert report.retied == ("head.weight",)
    _assert_rows(_facts(one, opt), want)

    # Both ways through a single file and a model folder: the tie stays one tensor.
    single = dcp_to_file(folder, tmp_path / "step-3.safetensors")
    back = file_to_dcp(single, tmp_path / "step-3-again")
    hf = dcp_to_model_folder(back, tmp_path / "model")
    again = file_to_dcp(hf, tmp_path / "from-model")
    for path in (single, back):
        model = Plain(tied=False)
        load_checkpoint(model, path, tokenizer=HASH)
        opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
        load_checkpoint(model, path, optimizer=opt, tokenizer=HASH)
        _assert_rows(_facts(model, opt), want)
    for path in (hf / "model.safetensors", again):
        model = Plain(tied=False)
        assert load_checkpoint(model, path, tokenizer=HASH).retied == ("head.weight",)
        assert torch.equal(model.emb.weight, want["weight"])
        assert model.head.weight is model.emb.weight


# --- bad input: one process, a folder saved there -------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    model = Plain()
    opt = _train(model)
    return save_checkpoint(model, tmp_path / "ck", optimizer=opt, tokenizer=HASH, distributed=True)


def _refusal(target: nn.Module, folder: Path, **kwargs: Any) -> TokembedError:
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(TokembedError) as info:
        load_checkpoint(target, folder, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(info.value.code + ":"), message
    after = target.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # nothing loaded halfway
    return info.value


def test_a_folder_missing_a_data_file_is_refused_before_any_value(saved: Path) -> None:
    bad = saved.with_name("missing")
    shutil.copytree(saved, bad)
    os.remove(next(bad.glob("*.distcp")))
    assert _refusal(Plain(), bad).code == "CHECKPOINT_SHARD_MISSING"


def test_a_truncated_data_file_is_a_missing_shard(saved: Path) -> None:
    bad = saved.with_name("short")
    shutil.copytree(saved, bad)
    data = next(bad.glob("*.distcp"))
    data.write_bytes(data.read_bytes()[:-16])
    assert _refusal(Plain(), bad).code == "CHECKPOINT_SHARD_MISSING"


def test_bytes_damaged_in_place_leave_the_model_as_it_was(saved: Path) -> None:
    # The last item (an Adam moment) is read after the weights: zeroed in place (same
    # length, so every size check passes), it fails only while values are being read.
    bad = saved.with_name("damaged")
    shutil.copytree(saved, bad)
    meta = pickle.loads((bad / ".metadata").read_bytes())
    info = max(meta.storage_data.values(), key=lambda i: i.offset)
    data = bad / info.relative_path
    raw = bytearray(data.read_bytes())
    raw[info.offset : info.offset + info.length] = bytes(info.length)
    data.write_bytes(bytes(raw))
    model = Plain()
    opt = torch.optim.AdamW(model.parameters())
    assert _refusal(model, bad, optimizer=opt, tokenizer=HASH).code == "MALFORMED_CHECKPOINT"
    assert not opt.state


@pytest.mark.parametrize("damage", ["truncate", "garbage", "foreign_pickle", "absent"])
def test_a_damaged_metadata_file_is_malformed(saved: Path, damage: str) -> None:
    bad = saved.with_name(damage)
    shutil.copytree(saved, bad)
    meta = bad / ".metadata"
    if damage == "truncate":
        meta.write_bytes(meta.read_bytes()[:40])
    elif damage == "garbage":
        meta.write_bytes(b"\x00not a pickle at all")
    elif damage == "foreign_pickle":  # would run os.system if unpickled blindly
        meta.write_bytes(b"cos\nsystem\n(S'true'\ntR.")
    else:
        meta.unlink()
    assert _refusal(Plain(), bad).code == "MALFORMED_CHECKPOINT"


def test_a_record_of_another_save_is_malformed(saved: Path, tmp_path: Path) -> None:
    other = Plain()
    with torch.no_grad():
        other.emb.weight.mul_(2)
    second = save_checkpoint(other, tmp_path / "other", tokenizer=HASH, distributed=True)
    bad = saved.with_name("mixed")
    shutil.copytree(saved, bad)
    shutil.copy(second / ".metadata", bad / ".metadata")  # another save's index
    assert _refusal(Plain(), bad).code == "MALFORMED_CHECKPOINT"


def test_another_tokenizer_is_refused(saved: Path) -> None:
    assert _refusal(Plain(), saved, tokenizer=OTHER_HASH).code == "ADDRESS_HASH_MISMATCH"


def test_another_tie_graph_is_refused(tmp_path: Path) -> None:
    untied = Plain(tied=False)
    with torch.no_grad():
        untied.emb.weight.copy_(_table())
        untied.head.weight.copy_(_table().flip(0))
    folder = save_checkpoint(untied, tmp_path / "untied", tokenizer=HASH, distributed=True)
    # Two different tables loaded into a tied model: one of them would be lost.
    assert _refusal(Plain(), folder).code == "DIVERGENT_ALIAS_VALUES"


def test_an_optimizer_for_another_model_is_refused(tmp_path: Path) -> None:
    model = Plain()
    folder = save_checkpoint(model, tmp_path / "noopt", tokenizer=HASH, distributed=True)
    target = Plain()
    opt = torch.optim.AdamW(target.parameters())
    assert _refusal(target, folder, optimizer=opt).code == "OPTIMIZER_STATE_MISMATCH"


def test_digests_and_an_existing_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TokembedError) as info:
        save_checkpoint(Plain(), tmp_path / "x", distributed=True, digests=True)
    assert info.value.code == "INVALID_ARGUMENT"
    save_checkpoint(Plain(), tmp_path / "x", distributed=True)
    with pytest.raises(TokembedError) as info:
        save_checkpoint(Plain(), tmp_path / "x", distributed=True)
    assert info.value.code == "OUTPUT_EXISTS"
