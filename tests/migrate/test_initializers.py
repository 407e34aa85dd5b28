"""New-row initializers: exact values, transformers' mean/covariance rule, the init ledger."""

from __future__ import annotations

import math

import pytest
import torch
from _fixtures import base, make
from torch import nn

from tokembed.embedding.init import Initializer, initializer_statistics
from tokembed.errors import CheckpointError, EmbeddingError
from tokembed.migrate import (
    InitRecord,
    NewRows,
    RowMap,
    bias_for_mass,
    bias_rows,
    classify_change,
    decompositions,
    init_records,
    init_rows,
    row_map,
)

H, I, BANG = 104, 105, 33


def _grow(old_rows: int, added: int) -> RowMap:
    return RowMap(
        old_rows=old_rows,
        new_rows=old_rows + added,
        source=tuple(range(old_rows)) + (-1,) * added,
    )


def test_mean_is_the_float64_mean_of_all_old_rows() -> None:
    old = torch.randn(50, 8, generator=torch.Generator().manual_seed(1))
    rows = init_rows(old, _grow(50, 3), NewRows(name="mean"))
    expected = old.double().mean(dim=0)
    # Exact float64 sums in another order, then one rounding to float32: at most one ulp apart.
    assert float((rows - expected.float()).abs().max()) <= float(
        torch.finfo(torch.float32).eps * expected.abs().max()
    )
    assert torch.equal(rows[0], rows[2])


def test_zeros_and_constructor() -> None:
    old = torch.randn(50, 8)
    assert torch.equal(init_rows(old, _grow(50, 2), NewRows(name="zeros")), torch.zeros(2, 8))
    rule = Initializer(name="normal", std=0.02)
    got = init_rows(old, _grow(50, 4000), NewRows(name="constructor", random=rule, seed=3))
    want = torch.empty(4000, 8).normal_(0.0, 0.02, generator=torch.Generator().manual_seed(3))
    assert torch.equal(got, want)
    led = initializer_statistics(rule, num_embeddings=4000, embedding_dim=8)
    # The sample's mean squared row norm is within 5 standard errors of the ledger's figure.
    sq = got.double().pow(2).sum(dim=1)
    assert abs(float(sq.mean()) - led.sq_row_norm) < 5 * float(sq.std()) / math.sqrt(4000)
    record = init_records(
        _grow(50, 4000), NewRows(name="constructor", random=rule), embedding_dim=8
    )[0]
    assert record.params is not None
    assert record.params["expected_sq_row_norm"] == led.sq_row_norm == 8 * 0.02**2


def test_mean_cov_equals_transformers_draw_bit_for_bit() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=40, hidden_size=8, intermediate_size=8, num_hidden_layers=0,
                    num_attention_heads=1, num_key_value_heads=1)
    )  # fmt: skip
    old = nn.Embedding(40, 8)
    new = nn.Embedding(43, 8)
    torch.manual_seed(11)
    model._init_added_embeddings_weights_with_mean(old, new, 40, 3)
    ours = init_rows(old.weight.detach(), _grow(40, 3), NewRows(name="mean_cov", seed=11))
    assert torch.equal(ours, new.weight.detach()[40:])


def test_mean_cov_falls_back_to_the_mean_when_covariance_is_singular() -> None:
    old = torch.randn(4, 8)  # 4 rows cannot span 8 dimensions
    got = init_rows(old, _grow(4, 2), NewRows(name="mean_cov"))
    assert torch.equal(got, old.mean(dim=0).expand(2, -1))


def test_decomposition_average_uses_the_old_tokenizer() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300, "hi!!": 302})
    rows = row_map(classify_change(base(), new))
    sources = decompositions(base(), new, rows.new_row_ids)
    assert sources == {301: (256, BANG), 302: (256, 257)}
    old = torch.randn(301, 4, dtype=torch.float64)
    got = init_rows(old, rows, NewRows(name="decomposition"), sources=sources)
    assert torch.equal(got[0], (old[256] + old[BANG]) / 2)
    records = init_records(rows, NewRows(name="decomposition"), sources=sources)
    assert [(r.row, r.initializer, r.sources) for r in records] == [
        (301, "decomposition", (256, BANG)),
        (302, "decomposition", (256, 257)),
    ]


@pytest.mark.failure_lab("3.7")
def test_decomposition_to_one_old_row_is_still_not_an_exact_copy() -> None:
    """An approximate initializer is recorded as an exact row copy."""
    # A new special spelled "hi" decomposes to exactly one old row: equal values, not an edge.
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300, "hi": 301})
    rows = row_map(classify_change(base(), new))
    sources = decompositions(base(), new, rows.new_row_ids)
    old = torch.randn(301, 4)
    got = init_rows(old, rows, NewRows(name="decomposition"), sources=sources)
    assert torch.equal(got[0], old[256])
    assert rows.source[301] == -1
    assert init_records(rows, NewRows(name="decomposition"), sources=sources)[0].initializer == (
        "decomposition"
    )
    with pytest.raises(CheckpointError) as err:
        InitRecord(row=301, initializer="exact_copy", sources=(256,))
    assert err.value.code == "APPROXIMATE_AS_EXACT"


def test_unknown_initializer() -> None:
    with pytest.raises(EmbeddingError) as err:
        NewRows(name="focus")
    assert err.value.code == "UNKNOWN_INITIALIZER"


def test_bias_rules_and_prior_for_a_target_mass() -> None:
    old = torch.randn(30)
    rows = _grow(30, 2)
    assert torch.equal(bias_rows(old, rows, "zeros"), torch.zeros(2))
    assert torch.equal(bias_rows(old, rows, "prior", value=-3.0), torch.full((2,), -3.0))
    mean = bias_rows(old, rows, "mean")
    assert float((mean - old.mean()).abs().max()) <= 1e-6 * float(old.std()) + 4 * float(
        torch.finfo(torch.float32).eps
    ) * float(old.abs().max())
    # One context: b solves A e^b / (Z + A e^b) = q exactly.
    z = torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64)
    a = torch.tensor([[0.3, -0.2]], dtype=torch.float64)
    b = bias_for_mass(0.1, z, a)
    q = torch.softmax(torch.cat([z, a + b], dim=1), dim=1)[0, 3:].sum()
    assert abs(float(q) - 0.1) <= 8 * torch.finfo(torch.float64).eps
