"""Merge learning: the compiled learner, the reference learner over a chunk table and
``train_reference`` over the corpus agree merge for merge."""

from __future__ import annotations

import importlib
import os
from collections import Counter
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.tokenizer import learn as learn_module
from tokembed.tokenizer._native import load
from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.learn import learn_merges
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.train_reference import learn_merges_reference, train_reference

TEACHING = Pretokenizer.preset("teaching")
# The module (the package's attribute of that name is its function).
reference_module = importlib.import_module("tokembed.tokenizer.train_reference")
_Pairs = list[tuple[int, int]]


@pytest.fixture(scope="module")
def native() -> ModuleType:
    """The compiled learner; its absence fails under CI (the build must have made it)."""
    module = load("_learn")
    if module is None:
        reason = "the compiled learner _native/_learn is not built (or TOKEMBED_PURE_PYTHON is set)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return module


def _table(text: str) -> ChunkTable:
    """The text's chunk table, from the same split the reference trains on (Counter keeps
    first-encounter order); the learner is tested apart from the chunk counter."""
    return ChunkTable.from_counts(Counter(utf8(c) for c in TEACHING.split(text)))


def _c(native: ModuleType, table: ChunkTable, merges: int) -> _Pairs:
    pairs: _Pairs = native.learn(table.data, table.offsets, table.counts, merges)
    return pairs


def _first_difference(a: _Pairs, b: _Pairs) -> int | None:
    """Index of the first merge where two runs differ (a length difference counts), or None."""
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))


def test_pinned_small_tables(native: ModuleType) -> None:
    cases: list[tuple[dict[bytes, int], int, _Pairs]] = [
        ({b"aaaa": 1}, 5, [(97, 97), (256, 256)]),  # overlapping occurrences: "aa|aa"
        ({b"aaa": 2}, 5, [(97, 97), (256, 97)]),  # "aa|a": the leftover a joins next
        ({b"abab": 2, b"ab": 1}, 5, [(97, 98), (256, 256)]),
        ({b"ba": 1, b"ab": 1}, 1, [(98, 97)]),  # a tie goes to the chunk met first
        ({b"xab ab": 1}, 1, [(97, 98)]),  # count 2 beats the earlier (120, 97)
        ({b"a": 7, b"b": 1}, 3, []),  # no pair at all
        ({}, 3, []),
    ]
    for counts, merges, expected in cases:
        table = ChunkTable.from_counts(counts)
        assert _c(native, table, merges) == expected, counts
        assert learn_merges_reference(table, merges=merges) == expected, counts


@pytest.mark.parametrize("text", ["aaaa", "aaaaa aaa", "ab ab", "x", "ababab abab", "zz" * 40])
def test_overlaps_and_early_stop_equal_reference(native: ModuleType, text: str) -> None:
    ref = train_reference(text, merges=50, pretokenizer=TEACHING)
    assert len(ref) < 50  # every case runs out of pairs before 50 merges
    table = _table(text)
    assert _c(native, table, 50) == ref
    assert learn_merges_reference(table, merges=50) == ref


@pytest.mark.slow
@pytest.mark.parametrize("lang", PUD_LANGS)
def test_pud_compiled_equals_reference(native: ModuleType, lang: str) -> None:
    text = pud_text(lang)
    table = _table(text)
    # 500 merges: the reference learner rescans the table per merge (~20 s for 2000 here).
    compiled = _c(native, table, 500)
    assert len(compiled) == 500
    assert _first_difference(compiled, learn_merges_reference(table, merges=500)) is None
    # The reference rescans the corpus per merge: a slice keeps it to seconds.
    head = "".join(text.splitlines(keepends=True)[:60])
    ref = train_reference(head, merges=120, pretokenizer=TEACHING)
    head_table = _table(head)
    assert _first_difference(_c(native, head_table, 120), ref) is None
    assert _first_difference(learn_merges_reference(head_table, merges=120), ref) is None


@pytest.mark.slow
def test_ruslit40_compiled_equals_reference(native: ModuleType, ruslit_text: str) -> None:
    # Its first million characters (30k distinct chunks) and 1000 merges: the reference
    # learner on all of RusLit-40 (217k distinct chunks, 4096 merges) would take an hour.
    table = _table(ruslit_text[:1_000_000])
    compiled = _c(native, table, 1000)
    assert len(compiled) == 1000
    assert _first_difference(compiled, learn_merges_reference(table, merges=1000)) is None


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=120), merges=st.integers(0, 30))
def test_tie_heavy_text_equals_reference(native: ModuleType, text: str, merges: int) -> None:
    """Two letters: nearly every step is a tie, which only first encounter decides."""
    ref = train_reference(text, merges=merges, pretokenizer=TEACHING)
    table = _table(text) if text else ChunkTable.from_counts({})
    assert _c(native, table, merges) == ref
    assert learn_merges_reference(table, merges=merges) == ref


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.binary(min_size=1, max_size=24).map(lambda b: bytes(x % 3 for x in b)),
            st.integers(1, 4),
        ),
        max_size=12,
    ),
    merges=st.integers(0, 40),
)
def test_tie_heavy_tables_equal_python(
    native: ModuleType, entries: list[tuple[bytes, int]], merges: int
) -> None:
    """Tables straight from chunks: three byte values, small equal multiplicities, long runs."""
    counts = dict(entries)
    table = ChunkTable.from_counts(counts)
    assert _c(native, table, merges) == learn_merges_reference(table, merges=merges)


def test_progress_calls_once_per_merge(native: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(pud_text("ru")[:20000])
    calls: list[int] = []
    for merges in (0, 1, 31, 32, 33, 100):
        calls.clear()
        assert len(learn_merges(table, merges=merges, on_merge=lambda: calls.append(1))) == merges
        assert len(calls) == merges
    # Early stop: as many calls as merges learned, on both paths.
    small = ChunkTable.from_counts({b"abcd": 1})
    for forced in ("0", "1"):
        monkeypatch.setenv("TOKEMBED_PURE_PYTHON", forced)
        calls.clear()
        assert len(learn_merges(small, merges=50, on_merge=lambda: calls.append(1))) == 3
        assert len(calls) == 3
    # The compiled progress: bursts of `every`, then the rest, adding up to the merges.
    bursts: list[int] = []
    native.learn(table.data, table.offsets, table.counts, 100, progress=bursts.append, every=32)
    assert bursts == [32, 32, 32, 4]


def test_pure_python_forced_takes_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    seen: list[ChunkTable] = []
    real = learn_module.learn_merges_reference

    def spy(
        table: ChunkTable, *, merges: int, on_merge: Callable[[], None] | None = None
    ) -> _Pairs:
        seen.append(table)
        return real(table, merges=merges, on_merge=on_merge)

    monkeypatch.setattr(learn_module, "learn_merges_reference", spy)
    table = ChunkTable.from_counts({b"abab": 2})
    assert learn_merges(table, merges=2) == [(97, 98), (256, 256)]
    assert seen == [table]


def test_compiled_rejects_malformed_tables(native: ModuleType) -> None:
    good = ChunkTable.from_counts({b"ab": 1, b"ba": 2})
    with pytest.raises(TypeError, match="int64"):
        native.learn(good.data, good.offsets.astype(np.int32), good.counts, 1)
    with pytest.raises(ValueError, match="one entry more"):
        native.learn(good.data, good.offsets[:-1], good.counts, 1)
    with pytest.raises(ValueError, match="end at len"):
        native.learn(good.data + b"x", good.offsets, good.counts, 1)
    with pytest.raises(ValueError, match="counts must be positive"):
        native.learn(good.data, good.offsets, np.array([1, 0], dtype=np.int64), 1)
    with pytest.raises(ValueError, match="merges"):
        native.learn(good.data, good.offsets, good.counts, -1)
    # A request far beyond what the table can give allocates only what it can give.
    assert native.learn(good.data, good.offsets, good.counts, 2**40) == [(98, 97), (97, 98)]
    # 2**62 occurrences of a 3-byte chunk: 2**63 adjacent pairs, one more than int64 holds.
    huge = ChunkTable(b"abc", np.array([0, 3], dtype=np.int64), np.array([2**62], dtype=np.int64))
    with pytest.raises(OverflowError, match="2\\*\\*63"):
        native.learn(huge.data, huge.offsets, huge.counts, 1)
    # Just below the bound the counts are exact.
    fits = ChunkTable(
        b"abc", np.array([0, 3], dtype=np.int64), np.array([2**62 - 1], dtype=np.int64)
    )
    assert native.learn(fits.data, fits.offsets, fits.counts, 2) == [(97, 98), (256, 99)]


def test_progress_exception_propagates(native: ModuleType) -> None:
    table = _table(pud_text("en")[:20000])

    def boom(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        native.learn(table.data, table.offsets, table.counts, 100, progress=boom, every=8)


def _last_encounter(table: ChunkTable, merges: int) -> _Pairs:
    """A deliberately wrong learner: among the most frequent pairs it takes the one met last."""

    def last_met(chunks: list[str], pairs: set[str]) -> str:
        found = [(w, chunk.rfind(p), p) for w, chunk in enumerate(chunks) for p in pairs]
        return max(f for f in found if f[1] >= 0)[2]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reference_module, "_first_met", last_met)
        return learn_merges_reference(table, merges=merges)


def test_equality_check_catches_last_encounter_ties(native: ModuleType) -> None:
    """The comparisons above can fail: a learner breaking ties by last encounter is caught."""
    text = "".join(pud_text("ru").splitlines(keepends=True)[:60])
    table = _table(text)
    pairs = _last_encounter(table, 120)
    ref = train_reference(text, merges=120, pretokenizer=TEACHING)
    assert _first_difference(_c(native, table, 120), ref) is None
    diverges = _first_difference(pairs, ref)
    assert diverges is not None
    # Equal up to the first tie it breaks the other way.
    assert pairs[:diverges] == ref[:diverges]


def test_native_start_must_spell_every_chunk(native: ModuleType) -> None:
    table = ChunkTable.from_counts({b"abc": 2, b"ab": 1})
    pieces = np.array([1] * 256 + [2], dtype=np.int64)  # id 256 = "ab"
    ids = np.zeros(5, dtype=np.int32)
    ids[[0, 1, 3]] = [256, 99, 256]
    lens = np.array([2, 1], dtype=np.int64)
    start = {"ids": ids, "lens": lens, "pieces": pieces}
    args = (table.data, table.offsets, table.counts, 5)
    assert native.learn(*args, **start) == [(256, 99)]  # the new id is len(pieces)
    with pytest.raises(ValueError, match="chunk 1"):
        native.learn(*args, **{**start, "lens": np.array([2, 2], dtype=np.int64)})
    bad = ids.copy()
    bad[1] = 300  # not below len(pieces)
    with pytest.raises(ValueError, match="id 300"):
        native.learn(*args, **{**start, "ids": bad})
    with pytest.raises(TypeError, match="together"):
        native.learn(*args, ids=ids)
    with pytest.raises(TypeError, match="int32"):
        native.learn(*args, **{**start, "ids": ids.astype(np.int64)})
