"""one_hot_lookup equals the gather with the declared V; the width never follows the batch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tokembed.embedding.variants.onehot import one_hot_linear, one_hot_lookup, one_hot_selectors
from tokembed.errors import EmbeddingError, UsageError


def test_scalar_sequence_and_batch_one_hot_equal_gather() -> None:
    weight = torch.randn(11, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for ids in (torch.tensor(3), torch.tensor([2, 7, 2]), torch.tensor([[2, 7, 2], [0, 10, 4]])):
        assert torch.equal(one_hot_lookup(ids, weight), F.embedding(ids, weight))


def test_width_is_declared_v_not_batch_max() -> None:
    ids = torch.tensor([[0, 2, 1]])  # batch max 2, table V = 128
    selectors = one_hot_selectors(ids, num_classes=128)
    assert selectors.shape == (1, 3, 128)
    assert F.one_hot(ids).shape[-1] == 3  # what inferring from the batch would have given
    with pytest.raises(UsageError) as u:
        one_hot_selectors(ids, num_classes=-1)
    assert u.value.code == "INVALID_ARGUMENT"
    with pytest.raises(EmbeddingError) as e:
        one_hot_selectors(torch.tensor([5]), num_classes=4)
    assert e.value.code == "ID_OUT_OF_RANGE"


def test_bias_free_linear_over_selectors_is_lookup() -> None:
    weight = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    linear = one_hot_linear(weight)
    assert linear.weight.shape == (3, 6)
    assert linear.bias is None
    ids = torch.tensor([[5, 0, 5]])
    torch.testing.assert_close(
        linear(one_hot_selectors(ids, num_classes=6)), F.embedding(ids, weight)
    )
