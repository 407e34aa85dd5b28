"""probability_shift: exact new-token mass and KL, the log(1 + M/V0) bound for mean rows."""

from __future__ import annotations

import math

import pytest
import torch
from _fixtures import llama

from conftest import rounding_bound
from tokembed.errors import CheckpointError, UsageError
from tokembed.migrate import NewRows, RowMap, migrate_model
from tokembed.migrate.measure import bits_per_byte, model_logits, probability_shift

F64 = torch.finfo(torch.float64).eps


def _grow(old: int, added: int) -> RowMap:
    return RowMap(old_rows=old, new_rows=old + added, source=tuple(range(old)) + (-1,) * added)


def _setup(v0: int = 50, m: int = 5, d: int = 8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(v0, d, generator=gen, dtype=torch.float64)
    hidden = 2 * torch.randn(64, d, generator=gen, dtype=torch.float64)
    return table, hidden, table.mean(dim=0).expand(m, -1)


def test_worked_example_one_new_row() -> None:
    # z = (0, log 2, log 3): Z = 6. One new row with logit log 3: A = 3, q_new = 1/3, KL = log 1.5.
    z = torch.tensor([[0.0, math.log(2), math.log(3)]], dtype=torch.float64)
    new = torch.cat([z, torch.tensor([[math.log(3)]], dtype=torch.float64)], dim=1)
    report = probability_shift(z, new, _grow(3, 1))
    assert abs(report.mean_new_mass - 1 / 3) <= 4 * F64
    assert abs(report.max_kl - math.log(1.5)) <= 8 * F64
    assert report.logits_preserved
    assert abs(report.mean_init_bound - math.log(4 / 3)) <= F64
    assert not report.within_mean_bound  # log 3 > mean logit: the bound does not apply


def test_mean_rows_stay_within_the_bound_in_every_context() -> None:
    table, hidden, mean_rows = _setup()
    z = hidden @ table.T
    new = torch.cat([z, hidden @ mean_rows.T], dim=1)
    report = probability_shift(z, new, _grow(50, 5))
    assert report.within_mean_bound
    assert report.max_kl > 0
    assert report.max_kl_formula_gap <= 64 * F64
    assert report.logits_preserved


@pytest.mark.failure_lab("3.8")
def test_preserved_logits_do_not_mean_preserved_probabilities() -> None:
    """Old raw logits are preserved, so old probabilities are assumed preserved."""
    table, hidden, _ = _setup()
    z = hidden @ table.T - 20.0  # a trained model with strongly negative logits
    new = torch.cat([z, torch.zeros(64, 5, dtype=torch.float64)], dim=1)  # zero rows: logit 0
    report = probability_shift(z, new, _grow(50, 5))
    assert report.logits_preserved
    assert report.max_old_prob_change > 0
    assert report.mean_new_mass > 0.9  # exp(0) dwarfs most exp(-20 + z)
    with pytest.raises(CheckpointError) as err:
        report.check(max_kl=report.mean_init_bound)
    assert err.value.code == "PROBABILITY_SHIFT"
    assert "preserved bit for bit" in err.value.message


def test_permutation_without_new_rows_changes_nothing() -> None:
    z = torch.randn(4, 6, dtype=torch.float64)
    perm = (3, 0, 5, 1, 4, 2)
    rows = RowMap(old_rows=6, new_rows=6, source=perm)
    report = probability_shift(z, z[:, list(perm)], rows)
    assert report.mean_new_mass == 0.0
    # Permuted columns are summed in another order by log-softmax: equal up to rounding.
    bound = rounding_bound(torch.float64, terms=6, magnitude=float(z.abs().max()) + 1)
    assert 0.0 <= report.max_kl <= bound
    assert report.max_old_prob_change <= bound


def test_migrated_llama_keeps_old_logits_and_the_bound() -> None:
    model = llama(40, tied=True)
    ids = torch.randint(0, 40, (2, 12), generator=torch.Generator().manual_seed(3))
    before = model_logits(model, ids)
    with torch.no_grad():
        ref = model(input_ids=ids).logits
    scale = float(ref.abs().max())
    assert float((before - ref.double()).abs().max()) <= 64 * torch.finfo(torch.float32).eps * scale
    migrate_model(model, _grow(40, 6), init=NewRows(name="mean"))
    report = probability_shift(before, model_logits(model, ids), _grow(40, 6))
    assert report.logits_preserved
    assert report.within_mean_bound


def test_bits_per_byte_of_uniform_logits_is_log2_v_per_token() -> None:
    model = llama(40, tied=False)
    with torch.no_grad():
        model.lm_head.weight.zero_()  # every logit 0: p = 1/V for each token
    seqs = [[1, 5, 7, 9], [1, 3], [2]]  # 3 + 1 + 0 scored ids
    result = bits_per_byte(model, seqs, 10)
    assert result.tokens == 4
    assert abs(result.bits - 4 * math.log2(40)) <= 16 * F64 * result.bits
    assert abs(result.bits_per_byte - math.log2(40) * 4 / 10) <= 16 * F64
    two = bits_per_byte(model, seqs, 10, context=2)  # the second id conditions too
    assert two.tokens == 2


def test_bits_per_byte_equals_cross_entropy_of_the_model() -> None:
    model = llama(40, tied=True, seed=3)
    seqs = [[1, 5, 7, 9, 11, 2], [4, 8, 15, 16, 23]]
    result = bits_per_byte(model, seqs, 17)
    nats = 0.0
    for s in seqs:
        ids = torch.tensor([s])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, :-1].double()
        nats += float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
    assert result.tokens == 9
    assert abs(result.bits - nats / math.log(2)) <= 1e-5 * result.bits  # float32 forward
    assert result.bits_per_byte == result.bits / 17
    assert result.to_json()["bits_per_byte"] == result.bits_per_byte


@pytest.mark.parametrize(
    ("seqs", "n_bytes", "context"), [([[1, 2]], 0, 1), ([[1, 2]], 5, 0), ([[1]], 5, 1)]
)
def test_bits_per_byte_refuses_what_it_cannot_score(
    seqs: list[list[int]], n_bytes: int, context: int
) -> None:
    with pytest.raises(UsageError) as e:
        bits_per_byte(llama(40, tied=True), seqs, n_bytes, context=context)
    assert e.value.code == "INVALID_ARGUMENT"
