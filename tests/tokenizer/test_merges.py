"""The shared merge helpers, and the compiled heap merge against the plain all-occurrences rule."""

from __future__ import annotations

import os
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.tokenizer._native import load
from tokembed.tokenizer.compiled import compiled_tables
from tokembed.tokenizer.merges import NO_RANK, merges_ordered, replace_pair
from tokembed.tokenizer.model import BPETables


def _plain(ids: list[int], tables: BPETables) -> list[int]:
    """The rule as stated: smallest-rank pair present, all its occurrences, repeat."""
    ranks = tables.pair_ranks
    while True:
        present = [ranks[p] for p in pairwise(ids) if p in ranks]
        if not present:
            return ids
        rank, result = min(present)
        ids = replace_pair(ids, tables.merges[rank][:2], result)


def _heap(ids: list[int], tables: BPETables) -> list[int]:
    """The compiled merge (a heap for chunks of more than 64 bytes) on one chunk of bytes."""
    module = load("_encode")
    if module is None:
        reason = "tokembed.tokenizer._native._encode is not built (no compiler, or pure Python)"
        if os.environ.get("CI") == "true" and os.environ.get("TOKEMBED_PURE_PYTHON", "") in (
            "",
            "0",
        ):
            pytest.fail(reason)
        pytest.skip(reason)
    text = bytes(ids).decode("ascii")  # the tests' ids are ASCII bytes
    encoder = module.Encoder(compiled_tables(tables), cache_limit=0)
    merged: list[int] = encoder.encode_chunks(text, [text])
    return merged


def test_pinned_examples() -> None:
    # "abab" -> ab ab -> (ab ab): the second merge sees the first merge's result twice.
    t = BPETables.byte_level(merges=[(97, 98), (256, 256)])
    assert _heap([97, 98, 97, 98, 97], t) == [257, 97]
    # Overlapping occurrences: "aaa" with a+a merges the left pair only, left to right.
    t = BPETables.byte_level(merges=[(97, 97)])
    assert _heap([97, 97, 97], t) == [256, 97]
    assert _heap([97] * 7, t) == [256, 256, 256, 97]
    assert _heap([], t) == []
    assert _heap([97], t) == [97]
    assert NO_RANK > 10**15


def test_unordered_table_finishes_a_step_before_a_lower_rank_pair() -> None:
    # Rank 0 joins ab+a, a piece made only at rank 1: "abab" -> [ab, ab] by the rule,
    # although merging the first "ab" alone would expose (ab, a) of rank 0.
    pieces = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"aba"}
    t = BPETables(pieces=pieces, merges=((256, 97, 257), (97, 98, 256)))
    assert not merges_ordered(t)
    assert _heap([97, 98, 97, 98], t) == _plain([97, 98, 97, 98], t) == [256, 256]
    assert _heap([97, 98, 97], t) == [257]


def test_long_run_is_exact() -> None:
    t = BPETables.byte_level(merges=[(97, 97), (256, 256), (257, 257), (258, 97)])
    for n in (1, 2, 3, 7, 8, 9, 1000, 1001):
        assert _heap([97] * n, t) == _plain([97] * n, t)


@st.composite
def _tables_and_ids(draw: st.DrawFn) -> tuple[BPETables, list[int]]:
    """Random merges over a 4-letter alphabet, in tree order or shuffled ranks."""
    pieces = {i: bytes([i]) for i in range(256)}
    alphabet = [97, 98, 99, 100]
    ids_so_far = list(alphabet)
    merges: list[tuple[int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    for k in range(draw(st.integers(0, 12))):
        left, right = draw(st.sampled_from(ids_so_far)), draw(st.sampled_from(ids_so_far))
        if (left, right) in seen:
            continue
        seen.add((left, right))
        result = 256 + k
        pieces[result] = pieces[left] + pieces[right]
        merges.append((left, right, result))
        ids_so_far.append(result)
    if draw(st.booleans()):
        merges = draw(st.permutations(merges))
    text = draw(st.lists(st.sampled_from(alphabet), max_size=60))
    return BPETables(pieces=pieces, merges=tuple(merges)), text


@settings(max_examples=400, deadline=None)
@given(_tables_and_ids())
def test_heap_merge_equals_the_plain_rule(case: tuple[BPETables, list[int]]) -> None:
    tables, ids = case
    assert _heap(ids, tables) == _plain(ids, tables)
