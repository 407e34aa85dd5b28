"""The direct <-> factorized bridge: exact when the table's rank fits, tied lexical decoder."""

from __future__ import annotations

import pytest
import torch

from tokembed.checkpoint import FactorizedHead, defactorize, factorize_tied
from tokembed.errors import CheckpointError, UsageError


def _rank2_table() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(7, 2, generator=g, dtype=torch.float64) @ torch.randn(
        2, 5, generator=g, dtype=torch.float64
    )  # [7, 5], rank 2


def test_factorizing_a_rank_d_table_is_exact_in_both_roles() -> None:
    table = _rank2_table()
    emb, head, c = factorize_tied(table, lexical_dim=2)
    assert head.decoder_weight is emb.lookup.weight  # only the [V, D] table is tied
    assert tuple(emb.lookup.weight.shape) == (7, 2)
    ids = torch.arange(7)
    hidden = torch.randn(3, 5, dtype=torch.float64)
    eps = torch.finfo(torch.float64).eps
    scale = float(table.abs().max()) * 7 * 5  # SVD error grows with the size and magnitude
    torch.testing.assert_close(emb(ids), table, atol=eps * scale, rtol=0)
    torch.testing.assert_close(
        head(hidden), hidden @ table.t(), atol=eps * scale * float(hidden.abs().max()), rtol=0
    )
    assert c.changes["relative_error"] < eps * 7 * 5
    assert (c.changes["parameters_before"], c.changes["parameters_after"]) == (
        35,
        7 * 2 + 2 * 2 * 5,
    )


def test_truncation_is_measured_not_hidden() -> None:
    table = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    _, _, c = factorize_tied(table, lexical_dim=1)
    s = torch.linalg.svdvals(table)
    expected = float(torch.sqrt((s[1:] ** 2).sum()) / torch.sqrt((s**2).sum()))
    # Both sides are float64 reductions over 6 x 4 values: a few eps of the ratio.
    assert abs(c.changes["relative_error"] - expected) <= 24 * torch.finfo(torch.float64).eps
    assert c.changes["discarded_singular_values"] == 3


def test_defactorize_returns_a_tied_direct_pair_when_the_roles_agree() -> None:
    emb, head, _ = factorize_tied(_rank2_table(), lexical_dim=2)
    direct, linear, c = defactorize(emb, head)
    assert c.changes["tied"] == (linear.weight is direct.weight)
    with torch.no_grad():
        head.bridge.weight.mul_(2.0)  # the output bridge trained away from P_in^T
    direct, linear, c = defactorize(emb, head)
    assert linear.weight is not direct.weight
    assert c.changes["tied"] is False
    assert c.changes["max_abs_difference_in_out"] > 0


def test_refusals() -> None:
    with pytest.raises(UsageError):
        factorize_tied(torch.zeros(4, 3), lexical_dim=4)
    _, head, _ = factorize_tied(_rank2_table(), lexical_dim=2)
    other, _, _ = factorize_tied(_rank2_table(), lexical_dim=2)
    with pytest.raises(CheckpointError) as e:
        defactorize(other, head)
    assert e.value.code == "ALIAS_GRAPH_LOST"
    head.decoder_weight = torch.nn.Parameter(torch.zeros(7, 5, dtype=torch.float64))
    with pytest.raises(CheckpointError) as e:
        FactorizedHead.forward(head, torch.zeros(1, 5, dtype=torch.float64))
    assert e.value.code == "TIE_WIDTH_MISMATCH"
