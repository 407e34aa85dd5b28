"""Materialization states: fresh, exact load (every refusal by code) and growth (bit-exact prefix)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tokembed.artifacts.digest import tensor_digest
from tokembed.embedding.init import Initializer
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.embedding.materialize import (
    TableSpec,
    check_growth_prefix,
    grow,
    grow_optimizer_state_,
    is_safe_cast,
    load_exact,
    materialize_fresh,
)
from tokembed.errors import EmbeddingError, UsageError

# Address hashes have the form of tokembed.tokenizer.model.address_hash.
HASH_A, HASH_B, HASH_BIG, HASH_X = ("sha256:" + c * 64 for c in "abcd")
SPEC = TableSpec(num_embeddings=5, embedding_dim=4, address_hash=HASH_A)


def _table(rows: int = 5, dim: int = 4) -> torch.Tensor:
    return torch.arange(rows * dim, dtype=torch.float32).reshape(rows, dim) / 7


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.contiguous().view(torch.int32), b.contiguous().view(torch.int32))


def test_fresh_is_seeded_and_applies_pad_policy() -> None:
    spec = TableSpec(num_embeddings=50, embedding_dim=8, padding_idx=3, seed=11)
    a, b = materialize_fresh(spec), materialize_fresh(spec)
    assert a.state == "fresh"
    assert _bits_equal(a.weight, b.weight)
    assert torch.count_nonzero(a.weight[3]) == 0
    assert a.evidence["sha256"] == tensor_digest(a.weight)
    assert a.evidence["initializer"] == "constructor_default"
    other = materialize_fresh(TableSpec(num_embeddings=50, embedding_dim=8, seed=12))
    assert not torch.equal(a.weight, other.weight)


def test_exact_load_copies_bits_and_keeps_a_nonzero_pad_row() -> None:
    saved = _table()
    spec = TableSpec(num_embeddings=5, embedding_dim=4, address_hash=HASH_A, padding_idx=0)
    m = load_exact({"weight": saved}, spec=spec, checkpoint_hash=HASH_A)
    assert m.state == "exact_load"
    assert _bits_equal(m.weight, saved)
    assert m.weight.data_ptr() != saved.data_ptr()
    assert torch.count_nonzero(m.weight[0]) == 3  # the saved PAD row [0, 1/7, 2/7, 3/7]
    assert m.evidence["source_sha256"] == m.evidence["sha256"]


def test_exact_load_of_a_real_module_state_dict_under_a_prefix() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(9, 4), nn.Linear(4, 2))
    spec = TableSpec(num_embeddings=9, embedding_dim=4)
    m = load_exact(model.state_dict(), spec=spec, prefix="0.")
    assert torch.equal(m.weight, model[0].weight)
    assert m.evidence["source_key"] == "0.weight"


def test_widening_cast_is_admitted_and_exact() -> None:
    saved = _table().to(torch.bfloat16)
    m = load_exact({"weight": saved}, spec=SPEC, checkpoint_hash=HASH_A)
    assert m.weight.dtype == torch.float32
    assert torch.equal(m.weight.to(torch.bfloat16), saved)
    assert m.evidence["source_dtype"] == "bfloat16"


@pytest.mark.parametrize(
    ("tensors", "hash_", "code"),
    [
        ({"bias": _table()}, HASH_A, "MISSING_KEY"),
        ({"weight": _table(), "extra": _table()}, HASH_A, "UNEXPECTED_KEY"),
        ({"weight": _table(6)}, HASH_A, "SHAPE_MISMATCH"),
        ({"weight": _table()}, HASH_B, "ADDRESS_HASH_MISMATCH"),
        ({"weight": _table()}, None, "ADDRESS_HASH_MISMATCH"),
    ],
)
def test_exact_load_refusals(
    tensors: dict[str, torch.Tensor], hash_: str | None, code: str
) -> None:
    with pytest.raises(EmbeddingError) as e:
        load_exact(tensors, spec=SPEC, checkpoint_hash=hash_)
    assert e.value.code == code


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_exact_load_refuses_non_finite_values(bad: float) -> None:
    saved = _table()
    saved[3, 1] = bad
    with pytest.raises(EmbeddingError) as e:
        load_exact({"weight": saved}, spec=SPEC, checkpoint_hash=HASH_A)
    assert e.value.code == "NON_FINITE_VALUES"
    assert e.value.value == 3


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (torch.float32, torch.bfloat16),
        (torch.float32, torch.float16),
        (torch.float16, torch.bfloat16),
        (torch.bfloat16, torch.float16),
        (torch.float64, torch.float32),
        (torch.int64, torch.float32),
    ],
)
def test_unsafe_casts_are_refused(src: torch.dtype, dst: torch.dtype) -> None:
    assert not is_safe_cast(src, dst)
    spec = TableSpec(num_embeddings=5, embedding_dim=4, dtype=dst)
    with pytest.raises(EmbeddingError) as e:
        load_exact({"weight": _table().to(src)}, spec=spec)
    assert e.value.code == "UNSAFE_CAST"


def test_cast_table() -> None:
    assert is_safe_cast(torch.bfloat16, torch.float32)
    assert is_safe_cast(torch.float16, torch.float64)
    assert is_safe_cast(torch.int32, torch.int64)
    assert not is_safe_cast(torch.float32, torch.int64)  # float -> int
    assert not is_safe_cast(torch.int8, torch.float32)  # int -> float is never a table load


def test_integer_table_spec_is_refused() -> None:
    with pytest.raises(UsageError) as e:
        TableSpec(num_embeddings=5, embedding_dim=4, dtype=torch.int64)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(EmbeddingError) as p:
        TableSpec(num_embeddings=5, embedding_dim=4, padding_idx=5)
    assert p.value.code == "PAD_ID_INVALID"


def test_table_spec_takes_the_address_hash_format_of_lookup_tables() -> None:
    with pytest.raises(UsageError) as e:
        TableSpec(num_embeddings=5, embedding_dim=4, address_hash="tok-a")
    assert (e.value.code, e.value.value) == ("INVALID_ARGUMENT", "tok-a")
    assert SPEC.lookup().address_hash == HASH_A
    assert SPEC.lookup() == LookupConfig(num_embeddings=5, embedding_dim=4, address_hash=HASH_A)


def test_growth_preserves_the_old_prefix_bit_for_bit() -> None:
    old = _table()
    old[2, 0] = -0.0  # a sign bit a value comparison would not see
    spec = TableSpec(num_embeddings=8, embedding_dim=4, address_hash=HASH_BIG, padding_idx=7)
    new_rows = Initializer(name="normal", std=0.02)
    m = grow(
        {"weight": old},
        spec=spec,
        new_rows=new_rows,
        checkpoint_hash=HASH_A,
        old_address_hash=HASH_A,
    )
    assert m.state == "growth"
    assert tuple(m.weight.shape) == (8, 4)
    assert _bits_equal(m.weight[:5], old)
    assert torch.count_nonzero(m.weight[5:7]) == 8
    assert torch.count_nonzero(m.weight[7]) == 0  # new PAD row
    assert m.evidence["old_rows"] == 5
    with pytest.raises(EmbeddingError) as e:
        grow(
            {"weight": old},
            spec=spec,
            new_rows=new_rows,
            checkpoint_hash=HASH_X,
            old_address_hash=HASH_A,
        )
    assert e.value.code == "ADDRESS_HASH_MISMATCH"
    with pytest.raises(EmbeddingError) as e:
        grow({"weight": _table(9)}, spec=spec, new_rows=new_rows)
    assert e.value.code == "SHAPE_MISMATCH"


@pytest.mark.failure_lab("7.6")
def test_growth_prefix_check_sees_changed_bits() -> None:
    """Vocabulary growth overwrites old rows."""
    old = _table()
    new = torch.cat([old, torch.zeros(2, 4)])
    check_growth_prefix(old, new)
    changed = new.clone()
    changed[4, 3] = torch.nextafter(changed[4, 3], torch.tensor(10.0))
    with pytest.raises(EmbeddingError) as e:
        check_growth_prefix(old, changed)
    assert (e.value.code, e.value.value) == ("GROWTH_PREFIX_CHANGED", 4)
    signed = new.clone()
    signed[0, 0] = -0.0  # equal as a value to 0.0, different as bits
    with pytest.raises(EmbeddingError) as e:
        check_growth_prefix(old, signed)
    assert (e.value.code, e.value.value) == ("GROWTH_PREFIX_CHANGED", 0)


def test_growth_expands_optimizer_state_with_zero_rows() -> None:
    old = nn.Parameter(_table())
    opt = torch.optim.Adam([old], lr=0.1)
    old.grad = torch.ones_like(old)
    opt.step()
    before = {k: v.clone() for k, v in opt.state[old].items()}
    spec = TableSpec(num_embeddings=7, embedding_dim=4)
    grown = grow({"weight": old.detach()}, spec=spec, new_rows=Initializer(name="zeros"))
    new = nn.Parameter(grown.weight)
    grow_optimizer_state_(opt, old, new)
    assert opt.param_groups[0]["params"][0] is new
    state = opt.state[new]
    assert torch.equal(state["step"], before["step"])
    for name in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(state[name][:5], before[name])
        assert torch.count_nonzero(state[name][5:]) == 0
    new.grad = torch.ones_like(new)
    opt.step()
    with pytest.raises(UsageError) as e:
        grow_optimizer_state_(opt, old, new)
    assert e.value.code == "INVALID_ARGUMENT"
