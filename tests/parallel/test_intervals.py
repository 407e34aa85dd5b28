"""Row intervals: ceil chunks without vocabulary padding, and exact-cover validation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokembed.errors import ParallelError, UsageError
from tokembed.parallel.intervals import owner_of, row_intervals, validate_cover


def test_uneven_vocabularies_use_ceil_chunks_and_no_padding() -> None:
    assert row_intervals(10, 4) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert row_intervals(131, 4) == [(0, 33), (33, 66), (66, 99), (99, 131)]
    assert row_intervals(9, 4) == [(0, 3), (3, 6), (6, 9), (9, 9)]
    assert row_intervals(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert row_intervals(0, 2) == [(0, 0), (0, 0)]


@given(st.integers(0, 5000), st.integers(1, 64))
def test_intervals_cover_every_row_exactly_once(vocab: int, world: int) -> None:
    intervals = row_intervals(vocab, world)
    validate_cover(intervals, vocab)
    owners = [owner_of(row, intervals) for row in range(min(vocab, 300))]
    chunk = -(-vocab // world)
    assert owners == [row // chunk for row in range(min(vocab, 300))]
    assert sum(end - start for start, end in intervals) == vocab


@pytest.mark.failure_lab("5.8")
@pytest.mark.parametrize(
    ("intervals", "code", "value"),
    [
        ([(0, 3), (4, 10)], "SHARD_GAP", (3, 4)),
        ([(0, 3), (3, 9)], "SHARD_GAP", (9, 10)),
        ([(1, 10)], "SHARD_GAP", (0, 1)),
        ([(0, 4), (3, 10)], "SHARD_OVERLAP", (3, 4)),
        ([(0, 10), (0, 10)], "SHARD_OVERLAP", (0, 10)),
        ([(0, 6), (6, 11)], "SHARD_OVERLAP", (1, 6, 11)),
        ([(0, 6), (6, 5), (5, 10)], "SHARD_OVERLAP", (1, 6, 5)),
    ],
)
def test_bad_covers_name_the_rows(
    intervals: list[tuple[int, int]], code: str, value: tuple[int, ...]
) -> None:
    """Row-shard intervals contain a gap or overlap."""
    with pytest.raises(ParallelError) as e:
        validate_cover(intervals, 10)
    assert (e.value.code, e.value.value) == (code, value)


def test_invalid_split_and_unowned_row_are_refused() -> None:
    with pytest.raises(UsageError) as e:
        row_intervals(10, 0)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ParallelError) as p:
        owner_of(10, row_intervals(10, 4))
    assert p.value.code == "SHARD_GAP"
