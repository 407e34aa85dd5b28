"""FeatureProjector: floats in, no addresses; ids refused."""

from __future__ import annotations

import pytest
import torch

from tokembed.embedding.variants.projector import FeatureProjector
from tokembed.errors import EmbeddingError


def test_projector_fixture_shape_and_affine_values() -> None:
    proj = FeatureProjector(2, 5)
    features = torch.tensor([[[1.0, 2.0], [0.0, -1.0]], [[0.5, 0.5], [3.0, 0.0]]])  # [2,2,2]
    out = proj(features)
    assert out.shape == (2, 2, 5)
    torch.testing.assert_close(out, features @ proj.weight.T + proj.bias)


@pytest.mark.failure_lab("2.1")
@pytest.mark.parametrize("bad", [torch.tensor([[3, 7]]), torch.tensor([[True, False]])])
def test_integer_ids_refused(bad: torch.Tensor) -> None:
    """Token IDs treated as numeric magnitudes."""
    with pytest.raises(EmbeddingError) as e:
        FeatureProjector(2, 5)(bad)
    assert e.value.code == "OPERATOR_CONTRACT_MISMATCH"


def test_media_width_must_match() -> None:
    with pytest.raises(EmbeddingError) as e:
        FeatureProjector(4096, 8)(torch.zeros(1, 3, 1024))  # d_media mistaken for d_model
    assert e.value.code == "SHAPE_MISMATCH"
