"""One self-contained HTML report: corpora, metrics, compression curve, vocabulary sizes, memory.

The file needs no server and no network: CSS is inline, the plot is inline SVG,
there are no scripts and no external links. All text is escaped (see ``_html``);
the only unescaped markup is the SVG that matplotlib writes.

:func:`build_report` measures and collects; :func:`render_html` only formats a
:class:`ReportData`; :func:`write_report` writes it atomically.
:func:`write_demo_report` is what ``tokembed demo`` calls after training.

Example::

    >>> data = build_report(tokenizers={"ours": tok}, corpora={"ru": ru})  # doctest: +SKIP
    >>> write_report(data, "out/report.html")  # doctest: +SKIP
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tokembed._atomic import write_atomic
from tokembed.measure import _html
from tokembed.measure.corpus import JOIN_RULES, Corpus, CorpusRecord, documents_corpus
from tokembed.measure.curves import CurvePoint, compression_curve, curve_csv, plot_curve
from tokembed.measure.metrics import Measurement, WordDefinition, compare
from tokembed.measure.session import premiums_by_side
from tokembed.measure.sources import SourceText, holdout_split
from tokembed.measure.tables import corpus_rows, measurement_rows, vocab_rows
from tokembed.measure.vocab_sizes import (
    EmbeddingMemory,
    VocabSizes,
    embedding_memory,
    vocab_sizes_of,
)

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_SAMPLES",
    "LLAMA_31_8B",
    "ReportData",
    "TokenView",
    "build_report",
    "render_html",
    "write_demo_report",
    "write_report",
]

# The lecture's probes (§5.3, §5.4): one Russian and one English phrase, code, numbers.
DEFAULT_SAMPLES = (
    "Внимание — это всё, что вам нужно.",
    "Attention is all you need.",
    "def encode(text):\n    return [merges.get(p, p) for p in pairs(text)]",
    "1234 + 5678 = 6912; 2026-07-04 🚀",
)
# §11.3's historical example: untied input and output tables, 2·V·d ≈ 1.05 B parameters.
LLAMA_31_8B = embedding_memory(name="Llama-3.1-8B (§11.3)", rows=128_256, width=4_096)


@dataclass(frozen=True)
class TokenView:
    """One sample text as one tokenizer splits it: ids and their byte pieces."""

    tokenizer: str
    text: str
    ids: tuple[int, ...]
    pieces: tuple[bytes, ...]


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything the HTML shows; each field may be empty (its section is then omitted)."""

    title: str = "tokembed report"
    corpora: Sequence[CorpusRecord] = ()
    measurements: Sequence[Measurement] = ()
    premiums: Mapping[tuple[str, str], float] = field(default_factory=dict)
    reference: str | None = None
    curve: Sequence[CurvePoint] = ()
    curve_svg: str = ""
    vocab: Sequence[VocabSizes] = ()
    memory: Sequence[EmbeddingMemory] = ()
    views: Sequence[TokenView] = ()
    notes: Sequence[str] = ()


def _gib(n: int) -> str:
    return f"{n / 2**30:.3f}"


def _memory_rows(memory: Sequence[EmbeddingMemory]) -> tuple[list[str], list[list[str]]]:
    headers = ["model / tokenizer", "V", "d", "V·d", "tied params", "untied params (2·V·d)"]
    headers += ["tied bf16 GiB", "untied bf16 GiB", "tied fp32 GiB", "untied fp32 GiB"]
    rows = []
    for m in memory:
        rows.append(
            [
                m.name,
                f"{m.rows:,}",
                f"{m.width:,}",
                f"{m.table_parameters:,}",
                f"{m.tied_parameters:,}",
                f"{m.untied_parameters:,}",
                _gib(m.bytes(tied=True, bytes_per_parameter=2)),
                _gib(m.bytes(tied=False, bytes_per_parameter=2)),
                _gib(m.bytes(tied=True, bytes_per_parameter=4)),
                _gib(m.bytes(tied=False, bytes_per_parameter=4)),
            ]
        )
    return headers, rows


def _curve_rows(points: Sequence[CurvePoint]) -> tuple[list[str], list[list[str]]]:
    lines = curve_csv(points).strip().split("\n")
    return lines[0].split(","), [line.split(",") for line in lines[1:]]


def render_html(data: ReportData) -> str:
    """The report as one HTML string (see module docstring)."""
    parts = [f"<h1>{html.escape(data.title)}</h1>"]
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in data.notes]
    if data.corpora:
        body = _html.table(*corpus_rows(data.corpora))
        files = sorted({(f.path, f.sha256, f.bytes) for r in data.corpora for f in r.files})
        if files:
            rows = [[p, h, f"{b:,}"] for p, h, b in files]
            body += _html.table(["file", "sha256", "bytes"], rows)
        joins = sorted({r.join_rule for r in data.corpora})
        note = (
            "Every number below is measured on exactly these texts (sha256 of the UTF-8 text). "
            + " ".join(f"Join {j}: {JOIN_RULES[j]}." for j in joins)
        )
        parts.append(_html.section("Corpora", body, anchor="corpora", note=note))
    if data.measurements:
        premiums = data.premiums or None
        body = _html.table(*measurement_rows(data.measurements, premiums), cls="metrics")
        note = (
            f"Word = {data.measurements[0].word_definition}. tok/sent encodes each sentence alone "
            "without an added LF. bits/byte = tokens·⌈log2 R⌉/bytes."
        )
        if premiums:
            note += f" premium = sentence-wise tokens / those of {data.reference} on parallel text."
        parts.append(
            _html.section("Metrics per corpus and tokenizer", body, anchor="metrics", note=note)
        )
    if data.curve:
        body = f'<div class="plot">{data.curve_svg}</div>' + _html.table(*_curve_rows(data.curve))
        note = "One training run evaluated at several merge counts by truncating its merge list."
        parts.append(_html.section("Compression curve", body, anchor="curve", note=note))
    if data.vocab:
        note = "|I| defined unique ids; R = max id + 1; V the model's rows (config.json)."
        parts.append(
            _html.section(
                "Vocabulary sizes", _html.table(*vocab_rows(data.vocab)), anchor="vocab", note=note
            )
        )
    if data.memory:
        note = "Weights only (no gradients, optimizer state or output bias); 1 GiB = 2^30 bytes."
        parts.append(
            _html.section(
                "Embedding-table memory",
                _html.table(*_memory_rows(data.memory)),
                anchor="memory",
                note=note,
            )
        )
    if data.views:
        body = ""
        for v in data.views:
            body += f"<h3>{html.escape(v.tokenizer)} · {len(v.ids)} tokens</h3>"
            body += _html.token_spans(v.ids, v.pieces)
        note = (
            "Hover a token for its id and bytes; pieces that are not whole UTF-8 are shown as hex."
        )
        parts.append(_html.section("Token view", body, anchor="tokens", note=note))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(data.title)}</title><style>{_html.CSS}</style></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )


def write_report(data: ReportData, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write :func:`render_html` to ``path`` atomically (parent folders created); returns it.

    Raises:
        UsageError(OUTPUT_EXISTS): ``path`` is one of ``inputs`` or a folder.
    """
    return write_atomic(Path(path), render_html(data).encode("utf-8"), inputs=inputs)


def _views(tokenizers: Mapping[str, Tokenizer], samples: Sequence[str]) -> list[TokenView]:
    out = []
    for name, tok in tokenizers.items():
        for text in samples:
            ids = tok.encode_ordinary(text)
            out.append(TokenView(name, text, tuple(ids), tuple(tok.piece(i) for i in ids)))
    return out


def build_report(
    *,
    tokenizers: Mapping[str, Tokenizer],
    corpora: Mapping[str, Corpus],
    reference: str | None = None,
    curve_tokenizer: Tokenizer | None = None,
    curve_corpora: Mapping[str, Corpus] | None = None,
    merge_counts: Sequence[int] = (),
    vocab: Sequence[VocabSizes] = (),
    width: int | None = None,
    samples: Sequence[str] = DEFAULT_SAMPLES,
    words: WordDefinition | None = None,
    title: str = "tokembed report",
    notes: Sequence[str] = (),
) -> ReportData:
    """Measure ``tokenizers`` on ``corpora`` and collect every report section.

    ``reference`` (a corpus label such as ``en``) adds token premiums per side
    (corpora must be parallel);
    ``curve_tokenizer`` with ``merge_counts`` adds the compression curve on
    ``curve_corpora`` (default: ``corpora``); ``width`` adds embedding memory for each
    tokenizer's V (its model rows, else R) next to §11.3's Llama-3.1-8B example.
    """
    measurements = compare(tokenizers, corpora, words=words)
    premiums = premiums_by_side(measurements, reference=reference) if reference else {}
    curve: list[CurvePoint] = []
    svg = ""
    if curve_tokenizer is not None and merge_counts:
        curve = compression_curve(
            curve_tokenizer, curve_corpora or corpora, merge_counts, words=words
        )
        svg = plot_curve(
            curve, title=f"bytes/token of {curve_tokenizer.name or 'ours'} by merge count"
        )
    sizes = list(vocab) or [vocab_sizes_of(t, name=n) for n, t in tokenizers.items()]
    memory: list[EmbeddingMemory] = []
    if width is not None:
        for s in sizes:
            memory.append(
                embedding_memory(name=s.name, rows=s.model_rows or s.id_range, width=width)
            )
        memory.append(LLAMA_31_8B)
    labelled = {**corpora, **(curve_corpora or {})}
    records = [replace(c, name=label).record() for label, c in labelled.items()]
    return ReportData(
        title=title,
        corpora=records,
        measurements=measurements,
        premiums=premiums,
        reference=reference,
        curve=curve,
        curve_svg=svg,
        vocab=sizes,
        memory=memory,
        views=_views(tokenizers, samples),
        notes=notes,
    )


def write_demo_report(
    tok: Tokenizer,
    *,
    sources: Sequence[SourceText],
    holdout: float,
    path: str | Path,
    width: int = 768,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """The demo's report: ``tok`` on its training and held-out files, with its compression curve.

    The files are split again with :func:`~tokembed.measure.sources.holdout_split` and
    ``holdout`` (deterministic, so the sides are the ones ``run_demo`` trained and
    held out). Returns the written path.
    """
    train_side, held_side = holdout_split(list(sources), fraction=holdout)
    corpora = {
        label: documents_corpus(label, [(s.name, s.text) for s in side])
        for label, side in (("train", train_side), ("held-out", held_side))
        if any(s.text for s in side)
    }
    n = tok.n_merges
    counts = sorted({0, *(n * k // 8 for k in range(1, 9))})
    data = build_report(
        tokenizers={"ours": tok},
        corpora=corpora,
        curve_tokenizer=tok,
        merge_counts=counts,
        width=width,
        title="tokembed demo report",
        notes=[
            f"{len(train_side)} training files, {len(held_side)} held-out files (whole files). "
            "Each side is measured as its files concatenated, so token counts can differ by a "
            "few from encoding every file alone (chunks can join across a file boundary)."
        ],
    )
    return write_report(data, path, inputs=inputs)
