"""AddressedIds: stamping, batching with PAD, and hash form."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.embedding.addressed import AddressedIds
from tokembed.errors import UsageError

HASH = "sha256:" + "c" * 64


def test_from_lists_pads_right_and_builds_mask() -> None:
    batch = AddressedIds.from_lists([[5, 6, 7], [8]], source=HASH, pad_id=0)
    assert batch.ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch.ids.dtype == torch.int64
    assert batch.attention_mask().tolist() == [[True, True, True], [True, False, False]]
    assert batch.shape == (2, 3)
    plain = AddressedIds(ids=batch.ids, address_hash=HASH)
    assert plain.ids is batch.ids  # no copy
    assert plain.attention_mask().all()


def test_refusals() -> None:
    with pytest.raises(UsageError):
        AddressedIds.from_lists([[1, 2], [3]], source=HASH)  # ragged without pad
    with pytest.raises(UsageError):
        AddressedIds.from_lists([[1, 2, 3]], source=HASH, length=2)
    with pytest.raises(UsageError):
        AddressedIds(ids=torch.tensor([1]), address_hash="sha256:ABC")
    with pytest.raises(UsageError) as e:
        AddressedIds(ids=[1, 2], address_hash=HASH)  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.integers(1, 50_000), max_size=7), min_size=1, max_size=5))
def test_from_lists_round_trip(rows: list[list[int]]) -> None:
    batch = AddressedIds.from_lists(rows, source=HASH, pad_id=0)
    mask = batch.attention_mask()
    assert [r[m].tolist() for r, m in zip(batch.ids, mask, strict=True)] == rows
