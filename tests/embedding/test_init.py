"""Initialization statistics: figures from formulas, checked against sampled tables."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from conftest import rounding_bound
from tokembed.embedding.init import (
    Initializer,
    initialize_,
    initializer_statistics,
    matching_scale,
    sample_statistics,
)
from tokembed.errors import EmbeddingError, UsageError

XAVIER = Initializer(name="xavier_uniform")
# A closed form of a few float64 operations, each off by at most half an ulp.
_FORMULA = rounding_bound(torch.float64, terms=8, magnitude=1.0)
# Sampled figures: 6 standard errors (a fixed seed, but the bound is the statistics').
_SIGMAS = 6


def _variance_tolerance(n: int) -> float:
    """Relative standard error of a sample variance, sqrt((kurtosis - 1) / n), times 6.

    Kurtosis 3 (the normal's) bounds every initializer here: the uniform has 9/5,
    a normal truncated at 2 std about 2.4.
    """
    return _SIGMAS * math.sqrt((3 - 1) / n)


def test_xavier_rectangular_table_figures() -> None:
    # V=32,000, d_model=512, g=1, Harvard multiplier sqrt(512).
    stats = initializer_statistics(
        XAVIER, num_embeddings=32_000, embedding_dim=512, scale=math.sqrt(512)
    )
    assert stats.coordinate_variance == pytest.approx(2 / 32_512, rel=_FORMULA)
    # The published figure is 2 / 32,512 = 6.1515...e-5 cut to 0.00006151: within one
    # unit of its last place.
    assert stats.coordinate_variance == pytest.approx(0.00006151, abs=1e-8)
    assert round(stats.scaled_variance, 4) == 0.0315
    assert round(stats.scaled_sq_row_norm, 2) == 16.13
    assert round(stats.scaled_rms, 4) == 0.1775
    # The square-matrix intuition "variance 1/d, scaled to 1" does not hold here.
    assert stats.scaled_variance < 0.5


@pytest.fixture(scope="module")
def xavier_table() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return initialize_(torch.empty(32_000, 512), XAVIER, generator=gen)


def test_xavier_sampled_table_matches_formula(xavier_table: torch.Tensor) -> None:
    scale = math.sqrt(512)
    want = initializer_statistics(XAVIER, num_embeddings=32_000, embedding_dim=512, scale=scale)
    got = sample_statistics(xavier_table, scale=scale)
    n = xavier_table.numel()
    # The mean of n draws has standard error std / sqrt(n); a row's squared norm is d
    # draws of x^2, so its mean over rows errs like the variance; the rms half as much.
    std = math.sqrt(want.coordinate_variance)
    assert got.coordinate_mean == pytest.approx(0.0, abs=_SIGMAS * std / math.sqrt(n))
    rel = _variance_tolerance(n)
    assert got.coordinate_variance == pytest.approx(want.coordinate_variance, rel=rel)
    assert got.scaled_sq_row_norm == pytest.approx(want.scaled_sq_row_norm, rel=rel)
    assert got.scaled_rms == pytest.approx(want.scaled_rms, rel=rel / 2)
    bound = math.sqrt(6 / 32_512)
    assert float(xavier_table.abs().max()) <= bound


def test_initialize_equals_torch_init_with_the_same_generator() -> None:
    ours = initialize_(torch.empty(300, 40), XAVIER, generator=torch.Generator().manual_seed(7))
    peer = nn.init.xavier_uniform_(torch.empty(300, 40), generator=torch.Generator().manual_seed(7))
    assert torch.equal(ours, peer)
    init = Initializer(name="truncated_normal", std=0.02)
    ours = initialize_(torch.empty(300, 40), init, generator=torch.Generator().manual_seed(7))
    peer = nn.init.trunc_normal_(
        torch.empty(300, 40), std=0.02, a=-0.04, b=0.04, generator=torch.Generator().manual_seed(7)
    )
    assert torch.equal(ours, peer)


def test_normal_gpt2_style_std() -> None:
    stats = initializer_statistics(
        Initializer(name="normal", std=0.02), num_embeddings=50_257, embedding_dim=768
    )
    assert stats.coordinate_variance == pytest.approx(4e-4, rel=_FORMULA)
    assert stats.sq_row_norm == pytest.approx(768 * 4e-4, rel=_FORMULA)
    assert stats.scaled_rms == pytest.approx(0.02, rel=_FORMULA)
    gen = torch.Generator().manual_seed(1)
    table = initialize_(
        torch.empty(20_000, 768), Initializer(name="normal", std=0.02), generator=gen
    )
    rel = _variance_tolerance(table.numel())
    assert sample_statistics(table).coordinate_variance == pytest.approx(4e-4, rel=rel)


def test_truncated_normal_bert_style_variance() -> None:
    # N(0, 0.02^2) conditioned on |x| <= 2 std keeps 0.7737 of the variance:
    # 1 - 2*2*phi(2) / (Phi(2) - Phi(-2)).
    stats = initializer_statistics(
        Initializer(name="truncated_normal", std=0.02), num_embeddings=30_522, embedding_dim=768
    )
    factor = 1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2))
    assert round(factor, 4) == 0.7737
    assert stats.coordinate_variance == pytest.approx(4e-4 * factor, rel=_FORMULA)
    assert stats.coordinate_mean == 0.0
    gen = torch.Generator().manual_seed(2)
    init = Initializer(name="truncated_normal", std=0.02)
    table = initialize_(torch.empty(4_000, 768), init, generator=gen)
    got = sample_statistics(table)
    rel = _variance_tolerance(table.numel())
    assert got.coordinate_variance == pytest.approx(stats.coordinate_variance, rel=rel)
    assert float(table.abs().max()) <= 0.04


def test_asymmetric_truncation_has_a_mean() -> None:
    stats = initializer_statistics(
        Initializer(name="truncated_normal", std=1.0, a=0.0, b=10.0),
        num_embeddings=4,
        embedding_dim=4,
    )
    # Half-normal: mean sqrt(2/pi), variance 1 - 2/pi.
    assert stats.coordinate_mean == pytest.approx(math.sqrt(2 / math.pi), rel=_FORMULA)
    assert stats.coordinate_variance == pytest.approx(1 - 2 / math.pi, rel=_FORMULA)
    assert stats.sq_row_norm == pytest.approx(4 * 1.0, rel=_FORMULA)  # E[x^2] = 1


def test_constructor_default_matches_nn_embedding() -> None:
    stats = initializer_statistics(
        Initializer(name="constructor_default"), num_embeddings=8_000, embedding_dim=64, scale=0.5
    )
    assert (stats.coordinate_variance, stats.sq_row_norm, stats.scaled_variance) == (
        1.0,
        64.0,
        0.25,
    )
    torch.manual_seed(3)
    emb = nn.Embedding(8_000, 64, padding_idx=0)
    assert torch.count_nonzero(emb.weight[0]) == 0
    got = sample_statistics(emb.weight[1:])
    rel = _variance_tolerance(emb.weight[1:].numel())
    assert got.coordinate_variance == pytest.approx(1.0, rel=rel)
    assert got.sq_row_norm == pytest.approx(64.0, rel=rel)


def test_zeros_and_matching_scale() -> None:
    zeros = initializer_statistics(Initializer(name="zeros"), num_embeddings=3, embedding_dim=2)
    assert (zeros.coordinate_variance, zeros.sq_row_norm, zeros.scaled_rms) == (0.0, 0.0, 0.0)
    assert torch.count_nonzero(initialize_(torch.ones(3, 2), Initializer(name="zeros"))) == 0
    with pytest.raises(UsageError) as e:
        matching_scale(zeros)
    assert e.value.code == "INVALID_ARGUMENT"
    # sqrt(d) gives unit variance exactly when sigma^2 = 1/d ...
    d = 512
    stats = initializer_statistics(
        Initializer(name="normal", std=d**-0.5), num_embeddings=100, embedding_dim=d
    )
    assert matching_scale(stats) == pytest.approx(math.sqrt(d), rel=_FORMULA)
    # ... and s = tau / sigma in general (rectangular Xavier needs far more than sqrt(d)).
    xav = initializer_statistics(XAVIER, num_embeddings=32_000, embedding_dim=512)
    want = 0.5 * math.sqrt(16_256)
    assert matching_scale(xav, target_variance=0.25) == pytest.approx(want, rel=_FORMULA)


def test_padding_row_zeroed_only_when_asked() -> None:
    gen = torch.Generator().manual_seed(0)
    t = initialize_(torch.empty(6, 3), Initializer(name="normal", std=1.0), generator=gen)
    assert torch.count_nonzero(t[2]) == 3
    initialize_(t, Initializer(name="normal", std=1.0), padding_idx=2, generator=gen)
    assert torch.count_nonzero(t[2]) == 0


def test_unknown_initializer_and_bad_parameters() -> None:
    with pytest.raises(EmbeddingError) as e:
        Initializer(name="kaiming")
    assert e.value.code == "UNKNOWN_INITIALIZER"
    with pytest.raises(UsageError) as u:
        Initializer(name="normal", std=-1.0)
    assert u.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as u:
        Initializer(name="truncated_normal", a=1.0, b=-1.0)
    assert u.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as u:
        initializer_statistics(XAVIER, num_embeddings=0, embedding_dim=4)
    assert u.value.code == "INVALID_ARGUMENT"
