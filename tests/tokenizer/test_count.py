"""Chunk counting: the compiled counter equals the Python reference (chunks, order, counts),
workers equal one worker on both paths, and memory follows distinct chunks, not the corpus."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _scan_cases import CASES, PRESETS, STRESS_TEXTS, compiled_count, pretokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

import tokembed.tokenizer._count as count_module
from conftest import PUD_LANGS, pud_text
from tokembed.errors import TokenizerError
from tokembed.tokenizer import Pretokenizer
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.dialect import Dialect
from tokembed.tokenizer.patterns import PATTERNS


def _items(table: ChunkTable) -> list[tuple[bytes, int]]:
    return list(zip(table.chunks(), table.counts.tolist(), strict=True))


def _count(texts: list[str], pre: Pretokenizer, workers: int = 1) -> ChunkTable:
    return count_module.count_chunks(iter(texts), pre, workers=workers, progress=False)


def _python(
    texts: list[str], pre: Pretokenizer, mp: pytest.MonkeyPatch, workers: int = 1
) -> ChunkTable:
    with mp.context() as m:
        m.setenv("TOKEMBED_PURE_PYTHON", "1")
        return _count(texts, pre, workers)


@pytest.mark.parametrize(("preset", "dialect"), CASES)
def test_compiled_equals_python_on_pud(
    preset: str, dialect: Dialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled_count()
    pre = pretokenizer(preset, dialect)
    texts = [pud_text(lang) for lang in PUD_LANGS]
    assert count_module._native_counter(pre) is not None
    assert _items(_count(texts, pre)) == _items(_python(texts, pre, monkeypatch))


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(STRESS_TEXTS, max_size=6))
def test_compiled_equals_python_on_stress_texts(texts: list[str]) -> None:
    compiled_count()
    mp = pytest.MonkeyPatch()
    for preset, dialect in CASES:
        pre = pretokenizer(preset, dialect)
        assert _items(_count(texts, pre)) == _items(_python(texts, pre, mp)), (preset, dialect)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["teaching", "o200k"])
def test_compiled_equals_python_on_ruslit(
    preset: str, ruslit_text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled_count()
    pre = Pretokenizer.preset(preset)
    ours = _count([ruslit_text], pre)
    assert _items(ours) == _items(_python([ruslit_text], pre, monkeypatch))
    # the pieces' bytes add up to the text's: every byte was counted once
    assert int((np.diff(ours.offsets) * ours.counts).sum()) == len(ruslit_text.encode("utf-8"))


def test_compiled_workers_equal_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small blocks force many cuts inside texts and many groups of texts."""
    compiled_count()
    monkeypatch.setattr(count_module, "_NATIVE_BLOCK", 4096)
    texts = [pud_text("ru"), "  \n\n x" * 500, "", pud_text("ko"), "a\nb\n" * 3000]
    texts += [pud_text("en")[i : i + 100] for i in range(0, 20000, 100)]
    for preset in ("teaching", "r50k", "o200k"):
        pre = Pretokenizer.preset(preset)
        one = _items(_count(texts, pre, 1))
        assert _items(_count(texts, pre, 2)) == one
        assert _items(_count(texts, pre, 3)) == one


def test_python_workers_equal_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small windows force many seams; merges and chunk order must not change."""
    monkeypatch.setattr(count_module, "_BLOCK", 3000)
    monkeypatch.setattr(count_module, "_OVERLAP", 512)
    monkeypatch.setattr(count_module, "_HEAD_CHARS", 256)
    texts = [pud_text("ru")[:40000], "  \n\n x" * 500, pud_text("ko")[:20000]]
    for pattern in ("teaching", "cl100k", "o200k"):
        pre = Pretokenizer.preset(pattern)
        seq = _python(texts, pre, monkeypatch, 1)
        assert _items(_python(texts, pre, monkeypatch, 2)) == _items(seq)


def test_python_workers_recount_a_text_whose_seams_never_join(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pairs of characters: a window starting at an odd offset never ends a match where the
    # full scan does, so that text is counted again in this process.
    monkeypatch.setattr(count_module, "_BLOCK", 3001)
    monkeypatch.setattr(count_module, "_OVERLAP", 512)
    monkeypatch.setattr(count_module, "_HEAD_CHARS", 256)
    texts = ["ab" * 5000, "xy" * 4000 + "z"]
    pre = Pretokenizer.preset("(?s)..")
    calls: list[str] = []

    def recount(text: str) -> ChunkTable:
        calls.append(text)
        return count_module.count_chunks_reference([text], pre)

    spec = (pre.stages, pre.dialect)
    whole = count_module._count_parallel(iter(texts), spec, 2, recount)
    assert calls == texts
    assert _items(whole) == [(b"ab", 5000), (b"xy", 4000), (b"z", 1)]
    assert _items(_python(texts, pre, monkeypatch, 2)) == [(b"ab", 5000), (b"xy", 4000), (b"z", 1)]


def test_lone_surrogate_is_refused_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    pre = Pretokenizer.preset("teaching")
    for count in (
        lambda: _count(["ok", "ok \ud800"], pre),
        lambda: _python(["ok \ud800"], pre, monkeypatch),
    ):
        with pytest.raises(TokenizerError) as e:
            count()
        assert e.value.code == "LONE_SURROGATE"


def _corpus(text: str, times: int) -> Iterator[str]:
    for _ in range(times):
        yield text  # generated on demand: the corpus never exists as a whole


@pytest.mark.parametrize("native", [True, False])
def test_memory_follows_distinct_chunks_not_corpus(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if native:
        compiled_count()
    else:
        monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    text = pud_text("ru")
    pre = Pretokenizer.preset("teaching")
    once = count_module.count_chunks(_corpus(text, 1), pre, workers=1, progress=False)
    times = 100
    tracemalloc.start()
    try:
        many = count_module.count_chunks(_corpus(text, times), pre, workers=1, progress=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Same distinct chunks, counts scaled: the table does not grow with the corpus.
    assert many.chunks() == once.chunks()
    assert many.counts.tolist() == [times * n for n in once.counts.tolist()]
    # Python allocations at the peak: a few copies of one text, its pieces (the Python
    # path splits a text into a list of str of ~100 bytes each) and the table's chunks,
    # never the corpus (times * text).
    n_bytes, n_pieces = len(text.encode("utf-8")), int(once.counts.sum())
    assert peak < 4 * n_bytes + 100 * n_pieces + 200 * len(once) < times * n_bytes // 2


def test_compiled_counter_size_is_fixed_by_distinct_chunks() -> None:
    mod = compiled_count()
    text = pud_text("fi").encode("utf-8")
    counter = mod.Counter(0, 0)
    counter.add(text)
    size, held = len(counter), counter.nbytes
    for _ in range(50):
        counter.add(text)
    assert (len(counter), counter.nbytes) == (size, held)
    with pytest.raises(ValueError, match="itself"):
        counter.merge(counter)


def test_only_single_preset_stages_use_the_compiled_counter() -> None:
    compiled_count()
    assert count_module._native_counter(Pretokenizer.preset(PATTERNS["o200k"])) is not None
    assert count_module._native_counter(Pretokenizer.preset(r"\w+|\W")) is None
    qwen = count_module._native_counter(pretokenizer("qwen", "huggingface"))
    assert qwen is not None
    assert qwen[1:] == (5, 1)  # TK_PRESET_QWEN, TK_ENGINE_HUGGINGFACE
    with pytest.raises(ValueError, match="unknown preset 6"):
        compiled_count().Counter(6, 0)
    two = Pretokenizer(stages=(PATTERNS["teaching"], r"\w+|\W"))
    assert count_module._native_counter(two) is None


@pytest.mark.parametrize("preset", PRESETS)
def test_streamed_blocks_count_like_whole_files(preset: str, tmp_path: Path) -> None:
    """Files read as blocks (cut where no preset's pieces change) count like whole files."""
    from tokembed.text.sources import iter_text_blocks

    compiled_count()
    whole = []
    for lang in PUD_LANGS:
        text = pud_text(lang).replace("\n", " \n", 7).replace("\n", "\n/", 3)
        (tmp_path / f"{lang}.txt").write_text(text, encoding="utf-8")
        whole.append(text)
    pre = pretokenizer(preset)
    blocks = [b.text for b in iter_text_blocks([tmp_path], block_chars=300)]
    assert len(blocks) > 10 * len(whole)
    assert _items(_count(blocks, pre)) == _items(_count(whole, pre))


@pytest.mark.slow
def test_streamed_ruslit_counts_like_the_whole_text(ruslit_text: str) -> None:
    from conftest import data_path
    from tokembed.text.sources import iter_text_blocks

    compiled_count()
    path = data_path("ruslit", "ruslit40.txt.gz")
    for preset in ("r50k", "cl100k"):
        pre = Pretokenizer.preset(preset)
        blocks = (b.text for b in iter_text_blocks([path], block_chars=1 << 20))
        streamed = count_module.count_chunks(blocks, pre, workers=1, progress=False)
        assert _items(streamed) == _items(_count([ruslit_text], pre))
