"""The HTML report: self-contained, escaped, every table naming its tokenizer, memory from configs."""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path

import pytest
from _measure_data import lecture_split, loaded, ru_tokenizer, tokenizer_path

from tokembed.errors import UsageError
from tokembed.measure.artifacts import inspect_paths
from tokembed.measure.demo import DemoConfig, run_demo
from tokembed.measure.memory import load_table_config, table_parameters
from tokembed.measure.report import (
    LLAMA_31_8B,
    ReportData,
    TokenView,
    build_report,
    render_html,
    write_demo_report,
    write_report,
)
from tokembed.measure.tables import memory_rows
from tokembed.text.sources import SourceText

SAMPLES = ['Привет, <b>мир</b> & "друзья" 🚀', "Attention is all you need."]


@cache
def report_data() -> ReportData:
    """The report of the PUD teaching split: ru1024 and GPT-2, curve, SmolLM2 inspected."""
    split = lecture_split()
    return build_report(
        tokenizers={"ru1024": ru_tokenizer(), "gpt2": loaded("gpt2-hf")},
        corpora={"ru/eval": split["ru"].eval, "en/eval": split["en"].eval},
        reference="en/eval",
        curve_tokenizer="ru1024",
        curve_corpora={"ru-train": split["ru"].train, "ru-eval": split["ru"].eval},
        merge_counts=[0, 256, 512, 1024],
        vocab=inspect_paths([tokenizer_path("smollm2-135m")]),
        width=768,
        samples=SAMPLES,
    )


def test_report_is_self_contained_and_escaped(tmp_path: Path) -> None:
    page = write_report(report_data(), tmp_path / "sub" / "report.html").read_text("utf-8")
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
    assert "1,050,673,152" in page  # Llama-3.1-8B untied parameters
    assert "§" not in page


def test_every_table_and_the_plot_name_the_tokenizer_and_its_hash() -> None:
    data = report_data()
    ours = ru_tokenizer().address_hash[:19]
    page = render_html(data)
    assert "ours" not in page
    assert data.curve_svg.count("ru1024") >= 1  # the plot's title
    assert ours in data.curve_svg
    sections = dict(re.findall(r'<section id="(\w+)">(.*?)</section>', page, flags=re.S))
    for anchor in ("metrics", "curve", "vocab", "memory", "tokens"):
        assert "ru1024" in sections[anchor], anchor
        assert ours in sections[anchor], anchor
    assert loaded("gpt2-hf").address_hash[:19] in sections["metrics"]


def test_memory_table_uses_each_models_own_width() -> None:
    data = report_data()
    rows = {r.name: r for r in data.memory}
    smol = rows["smollm2-135m"]
    # SmolLM2's config says hidden_size 576, not the 768 given for models without a config
    assert smol.table == load_table_config(tokenizer_path("smollm2-135m"))
    assert (smol.table.hidden_size, smol.width_from, smol.tied_in_config) == (
        576,
        "config.json",
        True,
    )
    assert table_parameters(smol.table).total == 28_311_552
    assert (rows["ru1024"].table.hidden_size, rows["ru1024"].width_from) == (768, "given width")
    assert rows["ru1024"].table.vocab_size == ru_tokenizer().tables.id_range
    headers, cells = memory_rows(data.memory)
    by_name = {c[0]: dict(zip(headers, c, strict=True)) for c in cells}
    assert by_name["smollm2-135m"]["d"] == "576"
    assert by_name["smollm2-135m"]["params tied"] == "28,311,552"
    assert by_name["Llama-3.1-8B"]["params untied"] == "1,050,673,152"
    assert by_name["Llama-3.1-8B"]["bf16 GiB untied"] == "1.957"
    assert data.memory[-1] == LLAMA_31_8B


def test_curve_table_is_formatted_like_the_metrics_table() -> None:
    page = render_html(report_data())
    curve = page[page.index('<section id="curve">') :].split("</section>")[0]
    assert "<th>bytes/tok</th>" in curve
    assert "180,112" in curve  # thousands separators, as in the other tables
    assert re.search(r"<td>\d\.\d{3}</td>", curve)
    assert "0.000000" not in curve
    assert ",0," not in curve


def test_token_view_shows_text_and_hex_only_for_partial_characters() -> None:
    from tokembed.measure._html import token_spans, token_view

    byte_level = ru_tokenizer().truncated(0)
    ids = byte_level.encode_ordinary("П")  # two bytes, neither valid UTF-8 alone
    html = token_spans(ids, [byte_level.piece(i) for i in ids])
    assert ids == [0xD0, 0x9F]
    assert html.count('<span class="hex">') == 2
    assert "⟨d0⟩" in html
    assert 'title="id 208 · 1 byte: d0"' in html
    assert html.count("<ruby") == 1  # the two tokens spell one letter, shown above them
    assert "<rt>П</rt>" in html
    # a piece with a whole character and half of another: text for the first, hex for the rest
    mixed = token_spans([1], ["дП".encode()[:3]])
    assert '">д<span class="hex">⟨d0⟩</span></span>' in mixed
    assert token_spans([2], [b"hello"]).count("hex") == 0
    emoji = "🚀".encode()
    rocket = token_spans([1, 2, 3], [b" " + emoji[:1], emoji[1:3], emoji[3:] + b"!"])
    assert rocket.count("<ruby") == 1
    assert "<rt> 🚀!</rt>" in rocket
    lone = token_spans([1, 2], [b"\xff", b"ok"])  # a byte no character starts with
    assert "<ruby" not in lone
    assert "⟨ff⟩" in lone
    view = token_view("a <b>", [1, 2], [b"a ", b"<b>"])
    assert '<pre class="source">a &lt;b&gt;</pre>' in view
    assert "2 tokens" in view


def test_escaping_of_every_field() -> None:
    evil = "<script>alert(1)</script>"
    page = render_html(
        ReportData(title=evil, notes=[evil], views=[TokenView(evil, evil, (1,), (evil.encode(),))])
    )
    assert "<script" not in page
    assert page.count("&lt;script&gt;") >= 5


def test_curve_tokenizer_must_be_a_measured_one() -> None:
    with pytest.raises(UsageError) as e:
        build_report(tokenizers={}, corpora={}, curve_tokenizer="nope", merge_counts=[0])
    assert e.value.code == "INVALID_ARGUMENT"


def test_demo_report_shows_the_demos_own_measurements(tmp_path: Path) -> None:
    sources = [
        SourceText(name=f"f{i}.txt", text=f"Строка номер {i}.\nLine {i} of text.\n")
        for i in range(10)
    ]
    result = run_demo(
        sources, config=DemoConfig(merges=40, holdout=0.2, progress=False, name="demo40")
    )
    assert result.held_out is not None
    assert (result.train.corpus, result.held_out.corpus) == ("train", "held-out")
    # the held-out figure is the sum over whole files, each encoded on its own
    held = [t for _, t in result.partition.eval.raw]
    assert len(held) == 2
    assert result.held_out.tokens == sum(len(result.tokenizer.encode_ordinary(t)) for t in held)
    page = write_demo_report(result, path=tmp_path / "demo.html").read_text("utf-8")
    assert "8 training files, 2 held-out files" in page
    assert page.count('<section id="') == 6
    assert ">held-out<" in page
    assert f"<td>{result.held_out.tokens:,}</td><td>{result.held_out.bytes_per_token:.3f}" in page
    assert "demo40" in page
    assert result.tokenizer.address_hash[:19] in page


def test_report_leads_with_its_results_and_folds_the_files(tmp_path: Path) -> None:
    from tokembed.artifacts import data_digest

    data = report_data()
    page = render_html(data)
    body = page[page.index("<body>") :]
    # The headline, the metrics and the curve come before any provenance.
    order = [body.index(s) for s in ('class="headline"', 'id="metrics"', 'id="curve"',
                                      'id="corpora"', "<details")]  # fmt: skip
    assert order == sorted(order)
    headline = body[body.index('<div class="headline">') : body.index("</div>")]
    assert (
        "Measured 2 tokenizers (ru1024, gpt2) on 2 corpora (ru/eval, en/eval), 51,822 bytes "
        "of text." in headline
    )
    m = next(m for m in data.measurements if (m.tokenizer, m.corpus) == ("ru1024", "ru/eval"))
    assert (
        f"<li><strong>ru/eval</strong> · ru1024 <code>{m.address_hash[:19]}</code>: "
        f"<strong>{m.bytes_per_token:.3f}</strong> bytes/token, {m.tokens:,} tokens, "
        f"{m.fertility:.3f} tokens/word</li>"
    ) in headline
    # Every input file stays, folded under its count, bytes and one digest of the list.
    files = sorted({(f.path, f.sha256, f.bytes) for r in data.corpora for f in r.files})
    assert len(files) == 2  # the ru and en PUD files
    summary = (
        f'<details class="files"><summary>2 input files, {sum(b for *_, b in files):,} bytes; '
        "digest of the list (path, sha256, bytes) "
        f"<code>{data_digest([list(f) for f in files])}</code></summary>"
    )
    assert summary in body
    for path, sha, _ in files:
        assert body.index(sha) > body.index(summary)
        assert body.index(html.escape(path)) > body.index(summary)


def test_demo_report_puts_the_held_out_figure_first(tmp_path: Path) -> None:
    from tokembed.text.sources import read_texts

    for i in range(10):
        (tmp_path / f"f{i}.txt").write_text(f"Line {i} of text.\n", encoding="utf-8")
    sources = read_texts(sorted(str(p) for p in tmp_path.glob("f*.txt")))
    result = run_demo(sources, config=DemoConfig(merges=20, holdout=0.2, progress=False))
    page = write_demo_report(result, path=tmp_path / "demo.html").read_text("utf-8")
    assert result.held_out is not None
    held = f"<li><strong>held-out</strong> · {result.tokenizer.name or 'demo'} "
    assert page.index(held) < page.index('<section id="metrics">')
    assert page.index('<section id="curve">') < page.index('<details class="files">')
    assert "<summary>10 input files, 160 bytes; digest of the list" in page
