"""The HTML report: self-contained, escaped, and rendered by headless Chromium with its content."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _measure_data import lecture_split, loaded, ru_tokenizer

from tokembed.measure._html import token_spans
from tokembed.measure.report import ReportData, TokenView, build_report, render_html, write_report


def _report(tmp_path: Path) -> Path:
    split = lecture_split()
    tok = ru_tokenizer()
    data = build_report(
        tokenizers={"ours": tok, "gpt2": loaded("gpt2-hf")},
        corpora={"ru/eval": split["ru"].eval, "en/eval": split["en"].eval},
        reference="en/eval",
        curve_tokenizer=tok,
        curve_corpora={"ru-train": split["ru"].train, "ru-eval": split["ru"].eval},
        merge_counts=[0, 256, 512, 1024],
        width=576,
        samples=['Привет, <b>мир</b> & "друзья" 🚀', "Attention is all you need."],
    )
    return write_report(data, tmp_path / "sub" / "report.html")


def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    page = _report(tmp_path).read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "<link", "@import", "<iframe", "<img"):
        assert forbidden not in page
    assert re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", page) is None
    assert "url(http" not in page
    # the sample's markup is split across tokens and escaped piece by piece
    assert "&lt;" in page
    assert "&amp;" in page
    assert "<b>" not in page
    for anchor in ("corpora", "metrics", "curve", "vocab", "memory", "tokens"):
        assert f'<section id="{anchor}">' in page
    assert "33,654" in page
    assert "1,050,673,152" in page  # §11.3 Llama-3.1-8B untied parameters


def test_token_view_shows_partial_utf8_as_hex() -> None:
    byte_level = ru_tokenizer().truncated(0)
    ids = byte_level.encode_ordinary("П")  # two bytes, neither valid UTF-8 alone
    html = token_spans(ids, [byte_level.piece(i) for i in ids])
    assert ids == [0xD0, 0x9F]
    assert html.count('class="tok hex"') == 2
    assert "⟨d0⟩" in html
    assert 'title="id 208 · 1 byte: d0"' in html


def test_escaping_of_every_field() -> None:
    evil = "<script>alert(1)</script>"
    page = render_html(
        ReportData(title=evil, notes=[evil], views=[TokenView(evil, evil, (1,), (evil.encode(),))])
    )
    assert "<script" not in page
    assert page.count("&lt;script&gt;") >= 4


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = "Debian `chromium` is not installed (the Makefile's test target installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return exe


_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.mark.slow
def test_chromium_renders_tables_plot_and_tokens(tmp_path: Path) -> None:
    import matplotlib.image

    exe = _chromium()
    report = _report(tmp_path)
    url = report.resolve().as_uri()
    profile = ["--user-data-dir=" + str(tmp_path / "profile")]
    dom = subprocess.run(
        [exe, *_FLAGS, *profile, "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count("<table") >= 5
    assert '<table class="metrics">' in dom
    assert "<svg" in dom
    assert "<path" in dom  # plotted lines
    assert dom.count('class="tok') > 20
    shot = tmp_path / "shot.png"
    subprocess.run(
        [exe, *_FLAGS, *profile, f"--screenshot={shot}", "--window-size=1280,2000", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = matplotlib.image.imread(str(shot))[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    non_white = float(np.mean(pixels.min(axis=2) < 0.95))
    assert non_white > 0.05  # text, table borders, plot lines and coloured tokens
    assert float(pixels.std()) > 0.05


def test_demo_report_covers_both_sides(tmp_path: Path) -> None:
    from tokembed.measure.report import write_demo_report
    from tokembed.measure.sources import SourceText

    sources = [
        SourceText(name=f"f{i}.txt", text=f"Строка номер {i}.\nLine {i} of text.\n")
        for i in range(10)
    ]
    path = write_demo_report(
        ru_tokenizer(), sources=sources, holdout=0.2, path=tmp_path / "demo.html"
    )
    page = path.read_text(encoding="utf-8")
    assert "8 training files, 2 held-out files" in page
    assert page.count('<section id="') == 6
    assert ">held-out<" in page
