"""untie/tie as recorded conversions: optimizer state, measured change, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _models import TinyLM, llama, lm_loss, train_steps
from torch import nn

from tokembed.checkpoint import check_registration, require_ties, tie, untie
from tokembed.embedding import TokenEmbedding
from tokembed.embedding.variants import FactorizedEmbedding
from tokembed.errors import CheckpointError

HASH_A = "sha256:" + "1" * 64
HASH_B = "sha256:" + "2" * 64


def test_untie_clones_the_table_and_its_adam_state(tmp_path: Path) -> None:
    model = TinyLM(tied=True)
    adam = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_steps(model, adam)
    conversion = untie(model, optimizer=adam, manifest=tmp_path / "untie.json")
    assert model.lm_head.weight is not model.embed.weight
    assert torch.equal(model.lm_head.weight, model.embed.weight)
    check_registration(model, adam)  # the clone is registered once, the original still is
    a, b = adam.state[model.embed.weight], adam.state[model.lm_head.weight]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert a["exp_avg"] is not b["exp_avg"]
    written = json.loads((tmp_path / "untie.json").read_text())
    assert written == conversion.to_dict()
    assert written["optimizer_state"] == "cloned from the shared table"
    train_steps(model, adam, steps=1)  # separate updates now diverge
    assert not torch.equal(model.lm_head.weight, model.embed.weight)


@pytest.mark.parametrize("keep", ["input", "output", "mean"])
def test_tie_keeps_the_chosen_values_and_measures_the_change(keep: str) -> None:
    model = TinyLM(tied=False, seed=3)
    e, o = model.embed.weight.detach().clone(), model.lm_head.weight.detach().clone()
    before = float(lm_loss(model).detach())
    c = tie(model, keep=keep, loss=lm_loss)  # type: ignore[arg-type]
    assert model.lm_head.weight is model.embed.weight
    expected = {"input": e, "output": o, "mean": ((e.double() + o.double()) / 2).float()}[keep]
    assert torch.equal(model.embed.weight, expected)
    assert c.changes["max_abs_difference"] == float((e.double() - o.double()).abs().max())
    assert c.changes["loss_before"] == before
    assert c.changes["loss_after"] == float(lm_loss(model).detach())


def test_tie_drops_the_output_registration_from_the_optimizer() -> None:
    model = TinyLM(tied=False)
    adam = torch.optim.Adam(model.parameters())
    train_steps(model, adam)
    c = tie(model, keep="input", optimizer=adam)
    assert sum(len(g["params"]) for g in adam.param_groups) == 3
    check_registration(model, adam)
    assert c.changes["optimizer_state"] == "input's kept, output's dropped"


def test_hf_tied_untied_tied_cycle_updates_the_config_and_the_storage() -> None:
    model = llama(tied=True)
    untie(model)
    assert model.config.tie_word_embeddings is False
    require_ties(model)  # consistent: untied and claimed untied
    tie(model, keep="input")
    assert model.config.tie_word_embeddings is True
    assert model.lm_head.weight is model.model.embed_tokens.weight
    require_ties(model)


def test_untie_of_an_untied_pair_and_tie_of_a_tied_pair_are_refused() -> None:
    with pytest.raises(CheckpointError) as e:
        untie(TinyLM(tied=False))
    assert e.value.code == "TIE_NOT_SHARED"
    with pytest.raises(CheckpointError) as e:
        tie(TinyLM(tied=True), keep="input")
    assert e.value.code == "UNDECLARED_TIE"


class _FactorizedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = FactorizedEmbedding(11, 3, 4)  # lexical [11, 3], hidden 4
        self.lm_head = nn.Linear(4, 11, bias=False)  # [11, 4]


def test_factorized_table_cannot_be_tied_to_a_hidden_width_head() -> None:
    model = _FactorizedLM()
    with pytest.raises(CheckpointError) as e:
        tie(model, keep="input", pair=("embed.lookup.weight", "lm_head.weight"))
    assert e.value.code == "TIE_WIDTH_MISMATCH"
    assert e.value.value == ((11, 3), (11, 4))


class _Seq2Seq(nn.Module):
    def __init__(self, src_hash: str | None, tgt_hash: str | None) -> None:
        super().__init__()
        self.src = TokenEmbedding(11, 4, address_hash=src_hash)
        self.tgt = TokenEmbedding(11, 4, address_hash=tgt_hash)


@pytest.mark.parametrize(("src", "tgt"), [(HASH_A, HASH_B), (None, None), (HASH_A, None)])
def test_source_and_target_tables_need_one_proven_vocabulary(
    src: str | None, tgt: str | None
) -> None:
    with pytest.raises(CheckpointError) as e:
        tie(_Seq2Seq(src, tgt), keep="input", pair=("src.weight", "tgt.weight"))
    assert e.value.code == "VOCABULARY_IDENTITY_MISMATCH"


def test_source_and_target_with_one_vocabulary_tie() -> None:
    model = _Seq2Seq(HASH_A, HASH_A)
    tie(model, keep="mean", pair=("src.weight", "tgt.weight"))
    assert model.tgt.weight is model.src.weight
