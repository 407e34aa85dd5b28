"""Roles and bindings of a two-vocabulary (seq2seq) model: swapped or mis-sized tables are refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tokembed.errors import CheckpointError, EmbeddingError, UsageError
from tokembed.migrate import RowMap, VocabRoles, check_bindings, migrate_model, vocab_roles

SRC, TGT = "sha256:" + "1" * 64, "sha256:" + "2" * 64
D = 8


class Seq2Seq(nn.Module):
    """Source table, target table and a target generator with a bias."""

    def __init__(self, v_src: int, v_tgt: int, *, generator_rows: int | None = None) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(v_src, D)
        self.tgt_embed = nn.Embedding(v_tgt, D)
        self.generator = nn.Linear(D, v_tgt if generator_rows is None else generator_rows)


BINDINGS = {
    "src_embed.weight": SRC,
    "tgt_embed.weight": TGT,
    "generator.weight": TGT,
    "generator.bias": TGT,
}
TARGET = VocabRoles(input="tgt_embed.weight", output="generator.weight", bias="generator.bias")


def _grow(old: int, added: int) -> RowMap:
    return RowMap(old_rows=old, new_rows=old + added, source=tuple(range(old)) + (-1,) * added)


def test_target_vocabulary_migrates_and_source_table_stays() -> None:
    model = Seq2Seq(20, 20)
    src = model.src_embed.weight.detach().clone()
    migrate_model(model, _grow(20, 2), roles=TARGET, bindings=BINDINGS, old_hash=TGT)
    assert model.tgt_embed.weight.shape[0] == model.generator.weight.shape[0] == 22
    assert torch.equal(model.src_embed.weight, src)


@pytest.mark.failure_lab("3.3")
def test_source_and_target_tables_swapped_are_refused() -> None:
    """Source and target embedding tables swapped."""
    model = Seq2Seq(20, 20)  # equal sizes: shapes cannot tell the tables apart
    swapped = VocabRoles(input="src_embed.weight", output="generator.weight", bias="generator.bias")
    with pytest.raises(CheckpointError) as err:
        migrate_model(model, _grow(20, 2), roles=swapped, bindings=BINDINGS, old_hash=TGT)
    assert (err.value.code, err.value.value) == (
        "TABLE_ROLE_SWAPPED",
        ("src_embed.weight", "tgt_embed.weight"),
    )
    assert model.src_embed.weight.shape[0] == 20  # nothing written


@pytest.mark.failure_lab("3.5")
def test_target_generator_built_with_the_source_vocabulary_is_refused() -> None:
    """Target Generator initialized with V_src."""
    model = Seq2Seq(30, 20, generator_rows=30)
    with pytest.raises(CheckpointError) as err:
        check_bindings(model, BINDINGS, {SRC: 30, TGT: 20})
    assert (err.value.code, err.value.value) == (
        "TABLE_SIZED_FOR_OTHER_VOCAB",
        ("generator.weight", 30, 20),
    )
    with pytest.raises(CheckpointError) as err:
        migrate_model(
            model, _grow(20, 2), roles=TARGET, bindings=BINDINGS, vocabularies={SRC: 30, TGT: 20}
        )
    assert err.value.code == "TABLE_SIZED_FOR_OTHER_VOCAB"


def test_table_of_an_unknown_tokenizer_is_an_address_mismatch() -> None:
    model = Seq2Seq(20, 20)
    with pytest.raises(EmbeddingError) as err:
        migrate_model(
            model, _grow(20, 2), roles=TARGET, bindings=BINDINGS, old_hash="sha256:" + "3" * 64
        )
    assert err.value.code == "ADDRESS_HASH_MISMATCH"


def test_odd_row_count_is_a_row_count_mismatch() -> None:
    model = Seq2Seq(30, 20, generator_rows=25)
    with pytest.raises(CheckpointError) as err:
        check_bindings(model, BINDINGS, {SRC: 30, TGT: 20})
    assert err.value.code == "ROW_COUNT_MISMATCH"


def test_roles_need_named_parameters() -> None:
    with pytest.raises(UsageError):
        vocab_roles(Seq2Seq(5, 5))
    with pytest.raises(UsageError):
        migrate_model(Seq2Seq(5, 5), _grow(5, 1), roles=VocabRoles(input="nope.weight"))
