"""validate_ids: dtype, range (first bad position named), device, no copies."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.embedding.contracts import first_bad_position, same_device, validate_ids
from tokembed.errors import EmbeddingError, UsageError


def test_accepts_spec_trace_ids_int64_and_int32() -> None:
    ids = torch.tensor([[1, 4, 6, 2], [1, 5, 2, 0]])  # the worked [B=2, L=4] batch, V=8
    validate_ids(ids, 8)
    validate_ids(ids.to(torch.int32), 8, device=torch.device("cpu"))
    validate_ids(torch.empty(0, 5, dtype=torch.int64), 0)


@pytest.mark.parametrize(
    ("bad", "position", "value"),
    [(8, (1, 3), 8), (-1, (1, 3), -1), (100, (1, 3), 100)],
)
def test_out_of_range_names_first_bad_position(
    bad: int, position: tuple[int, int], value: int
) -> None:
    ids = torch.tensor([[1, 4, 6, 2], [1, 5, 2, bad]])
    with pytest.raises(EmbeddingError) as e:
        validate_ids(ids, 8)
    assert e.value.code == "ID_OUT_OF_RANGE"
    assert e.value.value == value
    assert f"ids[{position[0]}, {position[1]}] = {value}" in str(e.value)


def test_first_of_several_bad_positions_is_row_major_first() -> None:
    ids = torch.tensor([[0, 1, 2], [9, 0, -3]])
    with pytest.raises(EmbeddingError) as e:
        validate_ids(ids, 8, what="input_ids")
    assert "input_ids[1, 0] = 9" in str(e.value)
    assert first_bad_position(torch.tensor([[False, False], [False, True]])) == (1, 1)


@pytest.mark.parametrize(
    "bad",
    [
        torch.tensor([1.0, 2.0]),  # float features cast in place of ids
        torch.tensor([True, False]),  # a mask is not an address
        torch.tensor([1, 2], dtype=torch.uint8),
        torch.nn.functional.one_hot(torch.tensor([0, 2]), 3).float(),  # one-hot rows
    ],
)
def test_non_integer_address_tensors_refused(bad: torch.Tensor) -> None:
    with pytest.raises(EmbeddingError) as e:
        validate_ids(bad, 8)
    assert e.value.code == "INDEX_DTYPE_MISMATCH"


@pytest.mark.failure_lab("2.2")
@pytest.mark.parametrize("bad", ["cat dog .", [2314, 4812, 13]])
def test_strings_and_lists_refused(bad: object) -> None:
    """Strings passed into nn.Embedding."""
    with pytest.raises(EmbeddingError) as e:
        validate_ids(bad, 8)  # type: ignore[arg-type]
    assert e.value.code == "INDEX_DTYPE_MISMATCH"


def test_device_mismatch() -> None:
    ids = torch.tensor([1, 2], device="meta")
    with pytest.raises(EmbeddingError) as e:
        validate_ids(ids, 8, device=torch.device("cpu"))
    assert e.value.code == "DEVICE_MISMATCH"
    assert same_device(torch.device("cpu"), torch.device("cpu"))
    assert not same_device(torch.device("meta"), torch.device("cpu"))


def test_negative_row_count_is_usage_error() -> None:
    with pytest.raises(UsageError) as e:
        validate_ids(torch.tensor([0]), -1)
    assert e.value.code == "INVALID_ARGUMENT"


def test_ids_are_not_copied_or_modified() -> None:
    ids = torch.tensor([[3, 1], [2, 0]])
    before = ids.clone()
    version = ids._version
    validate_ids(ids, 4)
    assert torch.equal(ids, before)
    assert ids._version == version


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(-3, 12), min_size=3, max_size=3), min_size=1, max_size=5),
    st.integers(1, 10),
)
def test_first_bad_position_matches_a_plain_scan(rows: list[list[int]], v: int) -> None:
    bad = [(b, t) for b, row in enumerate(rows) for t, i in enumerate(row) if not 0 <= i < v]
    ids = torch.tensor(rows)
    if not bad:
        validate_ids(ids, v)
        return
    with pytest.raises(EmbeddingError) as e:
        validate_ids(ids, v)
    b, t = bad[0]
    assert e.value.value == rows[b][t]
    assert f"ids[{b}, {t}] = {rows[b][t]} is outside [0, {v})" in str(e.value)
