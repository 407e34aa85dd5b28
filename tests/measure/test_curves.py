"""Compression curves: the one-pass derivation equals re-encoding with every truncated tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
from _measure_data import lecture_split, pud, ru_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import UsageError
from tokembed.measure.corpus import text_corpus
from tokembed.measure.curves import (
    compression_curve,
    compression_curve_reference,
    curve_csv,
    plot_curve,
)
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
from tokembed.tokenizer.merges import merges_ordered

_COUNTS = [0, 1, 2, 10, 100, 333, 1000, 1024]


def _lecture_corpora() -> dict[str, object]:
    split = lecture_split()
    return {"ru-train": split["ru"].train, "ru-eval": split["ru"].eval, "en-eval": split["en"].eval}


def test_fast_curve_equals_truncated_reencoding_on_pud() -> None:
    tok = ru_tokenizer()
    corpora = _lecture_corpora()
    fast = compression_curve(tok, corpora, _COUNTS)  # type: ignore[arg-type]
    slow = compression_curve_reference(tok, corpora, _COUNTS)  # type: ignore[arg-type]
    assert fast == slow
    assert len(fast) == 3 * len(_COUNTS)


def test_curve_shape_on_the_lecture_partition() -> None:
    points = compression_curve(ru_tokenizer(), _lecture_corpora(), _COUNTS)  # type: ignore[arg-type]
    by = {(p.label, p.n_merges): p.measurement for p in points}
    for label in ("ru-train", "ru-eval", "en-eval"):
        assert by[(label, 0)].bytes_per_token == 1.0
        tokens = [by[(label, n)].tokens for n in _COUNTS]
        assert tokens == sorted(tokens, reverse=True)
    # At the full merge count training text compresses better than unseen Russian,
    # and English (not trained on) stays far lower.
    assert by[("ru-train", 1024)].bytes_per_token > by[("ru-eval", 1024)].bytes_per_token
    assert by[("en-eval", 1024)].bytes_per_token < 1.2


@settings(max_examples=25, deadline=None)
@given(
    st.text(alphabet="абвгд еёжз xyzab 0123\n.,!", min_size=1).filter(
        lambda t: any(c.isalnum() for c in t)
    )
)
def test_fast_equals_reference_on_arbitrary_text(text: str) -> None:
    corpora = {"t": text_corpus("t", text)}
    tok = ru_tokenizer()
    counts = [0, 3, 50, 700, 1024]
    assert compression_curve(tok, corpora, counts) == compression_curve_reference(
        tok, corpora, counts
    )


def test_repeated_lines_are_counted_each_time() -> None:
    # The fast path encodes each distinct line once and repeats its ids (RusLit-40 has
    # 11k repeated lines); tokens/sentence must still count every occurrence.
    lines = pud("ru")["ru"].text.splitlines()[:40]
    corpora = {"t": text_corpus("t", "\n".join(lines * 3 + lines[:7]) + "\n")}
    tok = ru_tokenizer()
    counts = [0, 100, 1024]
    fast = compression_curve(tok, corpora, counts)
    assert fast == compression_curve_reference(tok, corpora, counts)
    assert fast[-1].measurement.sentences == 127


def test_tables_outside_the_derivation_fall_back_to_the_reference() -> None:
    # Byte 0xff has no id (as in SmolLM2, which lacks 21 bytes): counts cannot start from bytes.
    pieces = {i: bytes([i]) for i in range(255)} | {256: b"ab"}
    tables = BPETables(pieces=pieces, merges=((97, 98, 256),))
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    assert merges_ordered(tables)
    assert tables.missing_bytes() == [255]
    assert merges_ordered(ru_tokenizer().tables)
    assert not ru_tokenizer().tables.missing_bytes()
    corpora = {"t": text_corpus("t", "abc abcabc ab\n")}
    points = compression_curve(tok, corpora, [0, 1])
    assert points == compression_curve_reference(tok, corpora, [0, 1])
    assert [p.measurement.tokens for p in points] == [14, 10]


@pytest.mark.parametrize("counts", [[-1], [2000], []])
def test_merge_counts_out_of_range(counts: list[int]) -> None:
    with pytest.raises(UsageError) as e:
        compression_curve(ru_tokenizer(), {"t": text_corpus("t", "ab\n")}, counts)
    assert e.value.code == "INVALID_ARGUMENT"


def test_csv_and_plots(tmp_path: Path) -> None:
    points = compression_curve(ru_tokenizer(), _lecture_corpora(), [0, 512, 1024])  # type: ignore[arg-type]
    lines = curve_csv(points).splitlines()
    assert lines[0].startswith("partition,n_merges,bytes,chars,tokens")
    assert len(lines) == 1 + 9
    assert lines[1].startswith("ru-train,0,180112,")
    svg = plot_curve(points, tmp_path / "curve.png")
    assert svg.startswith("<svg")
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot_curve(points, tmp_path / "curve.svg")
    assert "ru-eval" in (tmp_path / "curve.svg").read_text(encoding="utf-8")


def test_plot_replaces_atomically_and_refuses_a_fifo(tmp_path: Path) -> None:
    import os
    import stat

    points = compression_curve(ru_tokenizer(), _lecture_corpora(), [0, 1024])  # type: ignore[arg-type]
    target = tmp_path / "curve.svg"
    target.write_text("old plot")
    plot_curve(points, target)
    assert "ru-eval" in target.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["curve.svg"]  # no temporary file left
    fifo = tmp_path / "pipe.svg"
    os.mkfifo(fifo)
    with pytest.raises(UsageError) as e:
        plot_curve(points, fifo)
    assert e.value.code == "OUTPUT_NOT_A_FILE"
    assert stat.S_ISFIFO(fifo.stat().st_mode)
