"""ScaleLedger: the variance of scaled rows follows from the recorded initializer, shape and scale."""

from __future__ import annotations

import math

import pytest
import torch

from tokembed.embedding import Initializer, initialize_, sample_statistics
from tokembed.embedding.guards import ScaleLedger
from tokembed.errors import EmbeddingError, UsageError


def _ledger(init: Initializer, v: int = 32_000, d: int = 512) -> ScaleLedger:
    return ScaleLedger(
        init=init, num_embeddings=v, embedding_dim=d, scale=math.sqrt(d), scale_owner="Embeddings"
    )


@pytest.mark.failure_lab("7.3")
def test_sqrt_d_gives_unit_variance_only_when_sigma_squared_is_1_over_d() -> None:
    """Treating sqrt(d_model) as an initializer-independent law."""
    gpt2 = _ledger(Initializer(name="normal", std=0.02))
    assert gpt2.output_variance == pytest.approx(512 * 0.02**2, rel=1e-15)  # 0.2048
    with pytest.raises(EmbeddingError) as e:
        gpt2.check_claim(output_variance=1.0)
    assert (e.value.code, e.value.value) == ("SCALED_VARIANCE_MISSTATED", 1.0)
    assert "Embeddings scales by 22.6274" in e.value.message
    gpt2.check_claim(output_variance=512 * 0.02**2)
    matched = _ledger(Initializer(name="normal", std=512**-0.5))  # sigma^2 = 1/d
    matched.check_claim(output_variance=1.0)
    default = _ledger(Initializer(name="constructor_default"))  # N(0, 1): s^2 sigma^2 = d
    with pytest.raises(EmbeddingError) as e:
        default.check_claim(output_variance=1.0)
    assert e.value.code == "SCALED_VARIANCE_MISSTATED"
    default.check_claim(output_variance=512.0)


@pytest.mark.failure_lab("7.4")
def test_rectangular_xavier_variance_is_not_1_over_d() -> None:
    """Calling rectangular Xavier variance 1/d_model."""
    xavier = _ledger(Initializer(name="xavier_uniform"))
    with pytest.raises(EmbeddingError) as e:
        xavier.check_claim(coordinate_variance=1 / 512)
    assert e.value.code == "INIT_VARIANCE_MISSTATED"
    assert "2 g^2 / 32512" in (e.value.fix or "")
    xavier.check_claim(coordinate_variance=2 / (32_000 + 512))
    xavier.check_claim(output_variance=512 * 2 / (32_000 + 512))  # 0.0315, not 1
    square = ScaleLedger(
        init=Initializer(name="xavier_uniform"), num_embeddings=512, embedding_dim=512,
        scale=1.0, scale_owner="caller",
    )  # fmt: skip
    square.check_claim(coordinate_variance=1 / 512)  # only the square table has 2/(2d) = 1/d


def test_ledger_figures_match_a_sampled_table() -> None:
    # 4096 x 64 draws: the sample variance's relative standard error is
    # sqrt(2 / n) for a normal (about 0.0028 here); 6 standard errors cannot fail by chance.
    v, d = 4096, 64
    ledger = ScaleLedger(
        init=Initializer(name="normal", std=0.02), num_embeddings=v, embedding_dim=d,
        scale=math.sqrt(d), scale_owner="lut",
    )  # fmt: skip
    table = initialize_(
        torch.empty(v, d, dtype=torch.float64), ledger.init,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    sampled = sample_statistics(table, scale=ledger.scale)
    assert sampled.scaled_variance == pytest.approx(
        ledger.output_variance, rel=6 * math.sqrt(2 / (v * d))
    )


def test_invalid_ledgers() -> None:
    for kwargs in ({"scale": 0.0}, {"scale_owner": ""}, {"embedding_dim": 0}):
        args: dict[str, object] = {
            "init": Initializer(name="zeros"), "num_embeddings": 4, "embedding_dim": 2,
            "scale": 1.0, "scale_owner": "x",
        }  # fmt: skip
        args.update(kwargs)
        with pytest.raises(UsageError) as e:
            ScaleLedger(**args)  # type: ignore[arg-type]
        assert e.value.code == "INVALID_ARGUMENT"
