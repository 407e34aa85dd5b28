"""TokenEmbeddingBag equals nn.EmbeddingBag and the oracle; bad offsets refused."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from conftest import assert_within, rounding_bound
from tokembed.embedding import oracles as O
from tokembed.embedding.variants.bag import TokenEmbeddingBag, validate_bag_offsets
from tokembed.errors import EmbeddingError

# The worked-example fixtures live with the lookup tests, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _lookup_spec import SPEC_IDS, SPEC_TABLE

FLAT = torch.tensor(SPEC_IDS).reshape(-1)
OFFSETS = torch.tensor([0, 4, 8])


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_worked_bags_equal_peer_and_oracle(mode: str) -> None:
    weight = torch.tensor(SPEC_TABLE)
    ours = TokenEmbeddingBag(
        8, 3, mode=mode, padding_idx=0, include_last_offset=True, weight=weight
    )
    peer = nn.EmbeddingBag(8, 3, mode=mode, padding_idx=0, include_last_offset=True, _weight=weight)
    out = ours(FLAT, OFFSETS)
    assert out.shape == (2, 3)
    torch.testing.assert_close(out, peer(FLAT, OFFSETS))
    expected = O.bag_reduce(
        SPEC_TABLE,
        FLAT.numpy(),
        OFFSETS.numpy(),
        mode=mode,
        padding_idx=0,
        include_last_offset=True,
    )
    # A bag sums at most 4 rows of halves and ones (exact); "mean" divides once more.
    assert_within(out, expected, rounding_bound(np.float64, terms=4 + 1, magnitude=3.0))
    if mode == "sum":
        assert out.tolist() == [[2.0, 3.0, 1.5], [1.5, 0.5, 3.0]]
    if mode == "mean":
        # The worked example prints 4 decimals: half a unit of the last place.
        assert_within(out, [[0.5, 0.75, 0.375], [0.5, 0.1667, 1.0]], 0.5e-4)


def test_fixed_size_bags_and_per_sample_weights() -> None:
    weight = torch.tensor(SPEC_TABLE)
    bag = TokenEmbeddingBag(8, 3, mode="sum", weight=weight)
    two_d = bag(torch.tensor(SPEC_IDS))
    torch.testing.assert_close(two_d, bag(FLAT, torch.tensor([0, 4])))
    w = torch.tensor([1.0, 2.0, 0.5, 1.0, 1.0, 1.0, 3.0, 1.0], dtype=torch.float64)
    expected = O.bag_reduce(
        SPEC_TABLE, FLAT.numpy(), [0, 4], mode="sum", per_sample_weights=w.numpy()
    )
    got = bag(FLAT, torch.tensor([0, 4]), w)
    # 4 weighted rows per bag: products of halves and small integers, then a sum (<= 6).
    assert_within(got, expected, rounding_bound(np.float64, terms=4 + 1, magnitude=6.0))
    assert list(bag.state_dict()) == ["weight"]


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        (torch.tensor([1, 4]), "offsets[0] = 1"),  # not starting at 0
        (torch.tensor([0, 5, 3]), "offsets[2] = 3 < offsets[1] = 5"),  # decreasing
        (torch.tensor([0, 4, 9]), "beyond the input length 8"),
        (torch.tensor([0.0, 4.0]), "int32/int64"),  # wrong dtype
        (torch.tensor([[0, 4]]), "1-D"),
        (torch.tensor([], dtype=torch.int64), "empty"),
    ],
)
def test_invalid_offsets(offsets: torch.Tensor, message: str) -> None:
    with pytest.raises(EmbeddingError) as e:
        TokenEmbeddingBag(8, 3)(FLAT, offsets)
    assert e.value.code == "INVALID_BAG_OFFSETS"
    assert message in str(e.value)


def test_include_last_offset_must_end_at_length() -> None:
    with pytest.raises(EmbeddingError) as e:
        validate_bag_offsets(torch.tensor([0, 4, 6]), 8, include_last_offset=True)
    assert e.value.code == "INVALID_BAG_OFFSETS"
    validate_bag_offsets(torch.tensor([0, 4, 4], dtype=torch.int32), 8)  # empty bag is fine


def test_offsets_required_exactly_for_1d_ids() -> None:
    bag = TokenEmbeddingBag(8, 3)
    with pytest.raises(EmbeddingError) as e:
        bag(FLAT)
    assert e.value.code == "INVALID_BAG_OFFSETS"
    with pytest.raises(EmbeddingError) as e:
        bag(torch.tensor(SPEC_IDS), OFFSETS)
    assert e.value.code == "INVALID_BAG_OFFSETS"
    with pytest.raises(EmbeddingError) as e:
        bag(FLAT.float(), OFFSETS)
    assert e.value.code == "INDEX_DTYPE_MISMATCH"
