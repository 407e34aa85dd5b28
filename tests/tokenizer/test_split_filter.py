"""A rank file's split filter (``splits_of_ranks`` in ``_native/encode_core.c``, read by the
joins in ``encode_tables.h``): which two parts BPE can join at all, asked by their ids before
the memo and the piece table. It must hold every join BPE makes - the last join BPE on a
piece's own bytes makes, for every piece - or ids change; a pair it leaves out is asked no
further. ``TOKEMBED_SPLITS`` ("0": off), read when tables are made, switches it, so that each
way is checked against tiktoken.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from _core_data import (
    assert_switch_keeps_ids,
    encode_module,
    rank_bpe,
    rank_file_of,
    rank_vocab,
    real_text,
    switched_tables,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import data_path

RANK_FILES = ["r50k_base", "cl100k_base", "o200k_base", "qwen"]


def _tables(monkeypatch: pytest.MonkeyPatch, data: bytes, *, on: bool) -> Any:
    return switched_tables(monkeypatch, "TOKEMBED_SPLITS", on, data)


def _filters(tables: Any) -> bool:
    """Whether the tables have a filter: it refuses some of 64 pairs of bytes' ids (with one,
    each of them passes by chance with probability under 0.11)."""
    rnd = random.Random(0)
    return not all(tables.may_join(rnd.randrange(256), rnd.randrange(256)) for _ in range(64))


def _last_join(ranks: dict[bytes, int], piece: bytes) -> tuple[int, int] | None:
    """The parts BPE on the piece's own bytes joins last, or None when it never makes it."""
    parts, _ = rank_bpe(ranks, [bytes([b]) for b in piece], stop=2)
    return (ranks[parts[0]], ranks[parts[1]]) if len(parts) == 2 else None


@pytest.mark.parametrize("name", RANK_FILES)
def test_the_filter_holds_the_join_that_makes_every_piece(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, ranks, _ = rank_vocab(name)
    tables = _tables(monkeypatch, data, on=True)
    made = 0
    for piece in ranks:
        if len(piece) > 1 and (join := _last_join(ranks, piece)) is not None:
            made += 1
            assert tables.may_join(*join), piece
    assert made > 0.99 * (len(ranks) - 256)  # nearly every piece is made from its bytes


@pytest.mark.parametrize("name", RANK_FILES)
def test_the_filter_refuses_most_pairs_and_is_off_when_switched_off(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, ranks, _ = rank_vocab(name)
    on, off = _tables(monkeypatch, data, on=True), _tables(monkeypatch, data, on=False)
    rnd = random.Random(1)
    pairs = [(rnd.randrange(len(ranks)), rnd.randrange(len(ranks))) for _ in range(20_000)]
    # two bits of 2^20 per join: qwen's ~152,000 joins leave ~7% of other pairs passing,
    # o200k's ~200,000 ~10%
    assert sum(on.may_join(a, b) for a, b in pairs) < 0.15 * len(pairs)
    assert all(off.may_join(a, b) for a, b in pairs)


def test_merge_lists_have_no_split_filter() -> None:
    from tokembed.tokenizer.compiled import compiled_tables
    from tokembed.tokenizer.formats import load_tokenizer

    native = compiled_tables(load_tokenizer(data_path("tokenizers", "gpt2-hf")).tables)
    assert native is not None
    assert not _filters(native)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_the_filter_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_switch_keeps_ids(monkeypatch, name, "TOKEMBED_SPLITS", real_text(), _filters)


@st.composite
def _crafted(draw: st.DrawFn) -> tuple[bytes, str]:
    """A rank file over three letters whose longer pieces take shuffled ranks (a piece may rank
    below its parts, or BPE may never make it), and a chunk of up to 80 letters (merged up to
    32 bytes, backtracked from 33, merged where backtracking cannot: a list up to 64 bytes, a
    heap above)."""
    longer = draw(
        st.lists(
            st.binary(min_size=2, max_size=5).map(lambda b: bytes(97 + x % 3 for x in b)),
            max_size=30,
            unique=True,
        )
    )
    text = "".join(draw(st.lists(st.sampled_from("abc"), min_size=2, max_size=80)))
    return rank_file_of(*longer), text


@settings(max_examples=300, deadline=None)
@given(_crafted())
# "abc" ranks below "ab", its only split's left part: not made from "ab" + "c" in rank order
@example((rank_file_of(b"abc", b"ab"), "abcabcab"))
# "ab" + "c" and "a" + "bc" both spell "abc": only the one BPE on "abc" joins last is held
@example((rank_file_of(b"bc", b"ab", b"abc"), "abcbcabcab"))
@example((rank_file_of(b"ab", b"bc", b"abc"), "abcbcabcab"))
# 75 bytes that backtracking cannot take ("abc" has no history): merged on the heap
@example((rank_file_of(b"abc", b"ab"), "abc" * 25))
def test_crafted_rank_files_with_and_without_the_filter_equal_tiktoken(
    case: tuple[bytes, str],
) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    data, chunk = case
    ranks = parse_ranks(data)
    peer = tiktoken.Encoding("crafted", pat_str=r"[^\n]+", mergeable_ranks=ranks, special_tokens={})
    expected = peer.encode_ordinary(chunk)
    with pytest.MonkeyPatch.context() as monkeypatch:
        for on in (True, False):
            tables = _tables(monkeypatch, data, on=on)
            enc = encode_module().Encoder(tables, cache_limit=0)
            assert enc.encode_chunks(chunk, [chunk]) == expected, on
            for piece in ranks:
                join = _last_join(ranks, piece) if len(piece) > 1 else None
                assert join is None or tables.may_join(*join), piece
