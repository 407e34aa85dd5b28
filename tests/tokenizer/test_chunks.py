from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tokembed.tokenizer.chunks import ChunkTable

_corpus = st.lists(st.binary(min_size=1, max_size=6), max_size=30)


def _first_encounter(pieces: list[bytes]) -> dict[bytes, int]:
    out: dict[bytes, int] = {}
    for p in pieces:
        out[p] = out.get(p, 0) + 1
    return out


def test_round_trip_keeps_order_and_counts() -> None:
    t = ChunkTable.from_counts({b"\xd0\xbd": 3, b" a": 1, b"": 2})
    assert t.chunks() == [b"\xd0\xbd", b" a", b""]
    assert t.offsets.tolist() == [0, 2, 4, 4]
    assert t.counts.tolist() == [3, 1, 2]
    assert t.chunk(1) == b" a"
    assert len(t) == 3
    assert t.nbytes == 4 + 4 * 8 + 3 * 8


@given(_corpus, _corpus)
def test_concat_equals_counting_the_joined_corpus(a: list[bytes], b: list[bytes]) -> None:
    joined = ChunkTable.concat(
        [ChunkTable.from_counts(_first_encounter(a)), ChunkTable.from_counts(_first_encounter(b))]
    )
    assert joined.to_dict() == _first_encounter(a + b)
    assert list(joined.to_dict()) == list(_first_encounter(a + b))  # order, not only content


def test_empty_table() -> None:
    t = ChunkTable.from_lists([], [])
    assert len(t) == 0
    assert t.data == b""
    assert t.offsets.tolist() == [0]
    assert t.counts.dtype == np.int64
