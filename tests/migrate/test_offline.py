"""Migrating a distributed checkpoint folder offline equals migrating the loaded model.

Saved from a sharded model at 2 ranks and loaded at 4 after the migration:
tests/checkpoint/test_distributed.py. Here, one process: an untied model with an
output bias, every role and its AdamW moments compared bit for bit with
migrate_model, the record of the result, and each refusal before anything is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from tokembed.artifacts.dcp_metadata import read_dcp_record
from tokembed.checkpoint import load_checkpoint, save_checkpoint
from tokembed.errors import TokembedError
from tokembed.migrate import NewRows, RowMap, VocabRoles, migrate_checkpoint, migrate_model

V, D = 13, 4
OLD, NEW = "sha256:" + "a" * 64, "sha256:" + "b" * 64
ROWS = RowMap(old_rows=V, new_rows=16, source=(*range(1, V), 0, -1, -1, -1))
ROLES = VocabRoles(input="emb.weight", output="head.weight", bias="head.bias")


class LM(nn.Module):
    def __init__(self, vocab: int = V) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.emb = nn.Embedding(vocab, D, dtype=torch.float64)
        self.head = nn.Linear(D, vocab, dtype=torch.float64)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.emb(ids)))


def _trained() -> tuple[LM, torch.optim.Optimizer]:
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    ids = torch.tensor([[1, 5, 7, 12], [0, 3, 3, 9]])
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(ids).reshape(-1, V), ids.flatten()).backward()
        opt.step()
    return model, opt


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    model, opt = _trained()
    return save_checkpoint(model, tmp_path / "old", optimizer=opt, tokenizer=OLD, distributed=True)


def test_offline_migration_is_the_one_process_migration(folder: Path, tmp_path: Path) -> None:
    init = NewRows(name="mean")
    entry = migrate_checkpoint(
        folder, tmp_path / "new", ROWS, roles=ROLES, init=init, old_hash=OLD, new_hash=NEW
    )
    model, opt = _trained()
    done = migrate_model(model, ROWS, roles=ROLES, init=init, optimizer=opt)

    loaded = LM(vocab=16)
    load_checkpoint(loaded, tmp_path / "new", tokenizer=NEW)
    loaded_opt = torch.optim.AdamW(loaded.parameters(), lr=0.1)
    load_checkpoint(loaded, tmp_path / "new", optimizer=loaded_opt, tokenizer=NEW)
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    for mine, theirs in zip(loaded.parameters(), model.parameters(), strict=True):
        for key, value in opt.state[theirs].items():
            assert torch.equal(loaded_opt.state[mine][key], value), key
    record = read_dcp_record(tmp_path / "new")
    assert record is not None
    assert record["address_hash"] == NEW
    assert record["migration"] == entry
    assert entry["row_map_digest"] == ROWS.digest
    assert entry["init_ledger"] == done.to_json()["init_ledger"]  # table, head, bias
    assert sorted(p.name for p in (tmp_path / "new").iterdir())[0] == ".metadata"


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"old_hash": NEW}, "ADDRESS_HASH_MISMATCH"),
        ({"roles": VocabRoles(input="emb.weight", output="head.weight", tied=True)}, "TIE_NOT_SHARED"),
        ({"roles": VocabRoles(input="body.weight")}, "MALFORMED_CHECKPOINT"),
        ({"rows": RowMap(old_rows=12, new_rows=12, source=tuple(range(12)))}, "ROW_COUNT_MISMATCH"),
    ],
)  # fmt: skip
def test_refusals_write_nothing(
    folder: Path, tmp_path: Path, kwargs: dict[str, object], code: str
) -> None:
    args: dict[str, object] = {"rows": ROWS, "roles": ROLES, "old_hash": OLD, **kwargs}
    with pytest.raises(TokembedError) as info:
        migrate_checkpoint(folder, tmp_path / "new", **args)  # type: ignore[arg-type]
    assert info.value.code == code
    assert "\n" not in str(info.value)
    assert not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["old"]
