"""One self-contained HTML report: metrics, adaptation, curve, corpora, vocabulary sizes, memory.

The page leads with its results: a headline (what was measured, bytes/token per corpus
and tokenizer), then the metrics table and the curve. The corpora follow, each summarised
in one row; the per-file provenance (path, sha256, bytes of every input file) is folded in
a ``<details>`` whose summary gives the file count, their bytes and one digest of the list
(:func:`tokembed.artifacts.data_digest`).

The file needs no server and no network: CSS is inline, the plot is inline SVG,
there are no scripts and no external links. All text is escaped (see ``_html``);
the only unescaped markup is the SVG that matplotlib writes (and the under-trained
token audit's plot, a PNG inlined as base64). Every table and the
plot name their tokenizer and the start of its address hash; wide tables scroll
inside their own box, so the page fits a 900 px window.

:func:`build_report` measures and collects; :func:`render_html` only formats a
:class:`ReportData`; :func:`write_report` writes it atomically.
:func:`write_demo_report` is what ``tokembed demo`` calls after training: it
reuses the demo's own measurements, so the page and the terminal agree.

Example::

    >>> data = build_report(tokenizers={"ru4096": tok}, corpora={"ru": ru})  # doctest: +SKIP
    >>> write_report(data, "out/report.html")  # doctest: +SKIP
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokembed.artifacts.digest import data_digest
from tokembed.errors import UsageError
from tokembed.files.atomic import write_atomic
from tokembed.measure import _html
from tokembed.measure.corpus import JOIN_RULES, Corpus, CorpusRecord
from tokembed.measure.curves import CurvePoint, compression_curve, plot_curve
from tokembed.measure.memory import TableConfig
from tokembed.measure.metrics import Measurement, WordDefinition, compare
from tokembed.measure.session import premiums_by_side
from tokembed.measure.tables import (
    AdaptationRow,
    MemoryRow,
    adaptation_rows,
    corpus_rows,
    curve_rows,
    measurement_rows,
    memory_rows,
    short_hash,
    vocab_rows,
)
from tokembed.measure.vocab_sizes import VocabSizes, vocab_sizes_of

if TYPE_CHECKING:
    from tokembed.measure.demo import DemoResult
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_SAMPLES",
    "GENERATOR_TAG",
    "LLAMA_31_8B",
    "ReportData",
    "TokenView",
    "build_report",
    "is_tokembed_report",
    "render_html",
    "write_demo_report",
    "write_report",
]

# Marks a page as ours, so a default report path never replaces someone else's report.html.
GENERATOR_TAG = '<meta name="generator" content="tokembed">'


def is_tokembed_report(path: Path) -> bool:
    """True when ``path`` is missing or is an HTML report tokembed wrote (it carries the tag)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return GENERATOR_TAG.encode() in head


# Probes that show a tokenizer's character: Russian and English prose, code, numbers
# with an emoji (a four-byte character).
DEFAULT_SAMPLES = (
    "Внимание — это всё, что вам нужно.",
    "Attention is all you need.",
    "def encode(text):\n    return [merges.get(p, p) for p in pairs(text)]",
    "1234 + 5678 = 6912; 2026-07-04 🚀",
)
# A well-known reference point: Llama-3.1-8B's published config (V = 128,256,
# hidden_size = 4,096, untied), whose two tables hold 2·V·d ≈ 1.05 B parameters.
LLAMA_31_8B = MemoryRow(
    name="Llama-3.1-8B",
    table=TableConfig(vocab_size=128_256, hidden_size=4_096, tied=False),
    width_from="published config",
    tied_in_config=False,
)


@dataclass(frozen=True)
class TokenView:
    """One sample text as one tokenizer splits it: ids and their byte pieces."""

    tokenizer: str
    text: str
    ids: tuple[int, ...]
    pieces: tuple[bytes, ...]
    address_hash: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything the HTML shows; each field may be empty (its section is then omitted).

    ``curve_tokenizer`` / ``curve_address`` name the tokenizer whose merge list the
    curve truncates.
    """

    title: str = "tokembed report"
    corpora: Sequence[CorpusRecord] = ()
    measurements: Sequence[Measurement] = ()
    premiums: Mapping[tuple[str, str], float] = field(default_factory=dict)
    reference: str | None = None
    curve: Sequence[CurvePoint] = ()
    curve_svg: str = ""
    curve_tokenizer: str = ""
    curve_address: str | None = None
    vocab: Sequence[VocabSizes] = ()
    memory: Sequence[MemoryRow] = ()
    views: Sequence[TokenView] = ()
    notes: Sequence[str] = ()
    # ``TokenAudit.to_dict()`` of tokembed.audit (plain data; measure/ never imports torch),
    # optionally with "plot_png_base64".
    token_audit: Mapping[str, Any] | None = None
    # One row per initializer of a vocabulary adaptation (examples/adapt_smollm2.py).
    adaptation: Sequence[AdaptationRow] = ()
    adaptation_note: str = ""


def _table(rows: tuple[list[str], list[list[str]]], *, cls: str = "") -> str:
    return _html.scroll(_html.table(*rows, cls=cls))


def _headline(data: ReportData) -> str:
    """What was measured and its main figures, in a few lines above everything else."""
    tokenizers = list(dict.fromkeys(m.tokenizer for m in data.measurements))
    corpus_bytes = {m.corpus: m.bytes for m in data.measurements}  # the curve's are not here
    corpora = list(corpus_bytes)
    text_bytes = sum(corpus_bytes.values())
    lead = (
        f"Measured {len(tokenizers)} tokenizer{'s' if len(tokenizers) != 1 else ''} "
        f"({', '.join(tokenizers)}) on {len(corpora)} "
        f"corp{'ora' if len(corpora) != 1 else 'us'} ({', '.join(corpora)})"
    )
    if text_bytes:
        lead += f", {text_bytes:,} bytes of text"
    items = "".join(
        f"<li><strong>{html.escape(m.corpus)}</strong> · {html.escape(m.tokenizer)} "
        f"<code>{html.escape(short_hash(m.address_hash))}</code>: "
        f"<strong>{m.bytes_per_token:.3f}</strong> bytes/token, {m.tokens:,} tokens, "
        f"{m.fertility:.3f} tokens/word</li>"
        for m in data.measurements
    )
    return f'<div class="headline"><p>{html.escape(lead)}.</p><ul>{items}</ul></div>'


def _files_details(data: ReportData) -> str:
    """Every input file (path, sha256, bytes), folded under a one-line summary of the list."""
    files = sorted({(f.path, f.sha256, f.bytes) for r in data.corpora for f in r.files})
    if not files:
        return ""
    total = sum(b for _, _, b in files)
    digest = data_digest([list(f) for f in files])
    summary = (
        f"{len(files):,} input file{'s' if len(files) != 1 else ''}, {total:,} bytes; "
        f"digest of the list (path, sha256, bytes) <code>{html.escape(digest)}</code>"
    )
    rows = _table((["file", "sha256", "bytes"], [[p, h, f"{b:,}"] for p, h, b in files]))
    return f'<details class="files"><summary>{summary}</summary>{rows}</details>'


def _corpora_section(data: ReportData) -> str:
    body = _table(corpus_rows(data.corpora)) + _files_details(data)
    joins = sorted({r.join_rule for r in data.corpora})
    note = (
        "Every number in this report is measured on exactly these texts (sha256 of the UTF-8 "
        "text); the files they were read from are listed, folded, under their summary. "
    )
    note += " ".join(f"Join {j}: {JOIN_RULES[j]}." for j in joins)
    return _html.section("Corpora", body, anchor="corpora", note=note)


def _metrics_section(data: ReportData) -> str:
    premiums = data.premiums or None
    body = _table(measurement_rows(data.measurements, premiums=premiums), cls="metrics")
    note = (
        f"Word = {data.measurements[0].word_definition}. tok/sent encodes each sentence alone "
        "without an added LF. bits/byte = tokens·⌈log2 R⌉/bytes. address = the start of the "
        "tokenizer's address hash (its ids mean the same thing wherever this hash is equal)."
    )
    if premiums:
        note += f" premium = sentence-wise tokens / those of {data.reference} on parallel text."
    return _html.section("Metrics per corpus and tokenizer", body, anchor="metrics", note=note)


def _curve_section(data: ReportData) -> str:
    body = f'<div class="plot">{data.curve_svg}</div>' + _table(curve_rows(data.curve))
    note = (
        f"The first n merges of {data.curve_tokenizer} ({short_hash(data.curve_address)}), "
        "one training run evaluated at several merge counts by truncating its merge list."
    )
    return _html.section("Compression curve", body, anchor="curve", note=note)


def _views_section(views: Sequence[TokenView]) -> str:
    body = ""
    for v in views:
        body += (
            f"<h3>{html.escape(v.tokenizer)} <code>{html.escape(short_hash(v.address_hash))}</code>"
            f" · {len(v.ids)} tokens</h3>"
        )
        body += _html.token_view(v.text, v.ids, v.pieces)
    note = (
        "Each sample's text beside its tokens. Hover a token for its id and bytes; "
        "only bytes that are part of an unfinished UTF-8 character are shown as hex, with "
        "the letters such tokens spell together written above them."
    )
    return _html.section("Token view", body, anchor="tokens", note=note)


_BASE64 = re.compile(r"[A-Za-z0-9+/=]*")


def _token_audit_section(audit: Mapping[str, Any]) -> str:
    """Under-trained tokens: the summary, the plot and the ranked table of an audit's dict."""
    s = audit["summary"]
    facts = [
        ("rows V / id range R / defined |I|", f"{s['model_rows']} / {s['id_range']} / {s['unique_ids']}"),
        ("tables", "tied" if s["tied"] else "untied"),
        *((f"category: {k}", str(v)) for k, v in s["counts"].items()),
        ("reference unused rows", f"{s['reference_rows']} ({s['reference_source']})"),
        ("corpus tokens", "-" if s["corpus_tokens"] is None else str(s["corpus_tokens"])),
        ("verified / confirmed", f"{s['verified']} / {s['confirmed']} (max p < {s['confirm_below']:g})"),
    ]  # fmt: skip
    body = _table((["", "value"], [list(f) for f in facts]))
    png = audit.get("plot_png_base64", "")
    if png and _BASE64.fullmatch(png):  # only base64 characters reach the page unescaped
        body += f'<p class="plot"><img style="max-width:100%" alt="indicator by token id" src="data:image/png;base64,{png}"></p>'
    heads = ["rank", "id", "piece", "category", "count", "cosine", "in-norm", "max p", "confirmed"]
    rows = [
        [
            str(r["rank"]), str(r["id"]), r["piece"], r["category"],
            "-" if r["occurrences"] is None else str(r["occurrences"]),
            f"{r['indicator']:.4f}",
            "-" if r["input_norm"] is None else f"{r['input_norm']:.4f}",
            "-" if r["max_probability"] is None else f"{r['max_probability']:.2e}",
            {None: "-", True: "yes", False: "no"}[r["confirmed"]],
        ]
        for r in audit["rows"]
    ]  # fmt: skip
    body += _table((heads, rows))
    note = (
        "Rows ranked by the cosine of their output row to the mean of the reference unused "
        "rows, first principal component removed (Land & Bartolo 2024); confirmed: the model, "
        "asked to repeat the token, never gave it the stated probability."
    )
    return _html.section("Under-trained tokens", body, anchor="undertrained", note=note)


def render_html(data: ReportData) -> str:
    """The report as one HTML string (see module docstring)."""
    # Results lead: the headline, the metrics and the curve; where the texts came from
    # (a row per input file, thousands for the demo) follows them, folded.
    parts = [f"<h1>{html.escape(data.title)}</h1>"]
    if data.measurements:
        parts.append(_headline(data))
    parts += [f'<p class="note">{html.escape(n)}</p>' for n in data.notes]
    if data.measurements:
        parts.append(_metrics_section(data))
    if data.adaptation:
        body = _table(adaptation_rows(data.adaptation))
        note = data.adaptation_note or (
            "bpb: model bits per byte (negative log-likelihood) on held-out text, before: the "
            "old model and tokenizer, after: the migrated model and the new tokenizer, no "
            "training. KL and new-token mass: the distribution over old tokens on other text. "
            "audit flags: new ids among the audit's top ranks, as many ranks as new rows."
        )
        parts.append(_html.section("Adaptation per initializer", body, anchor="adapt", note=note))
    if data.curve:
        parts.append(_curve_section(data))
    if data.corpora:
        parts.append(_corpora_section(data))
    if data.vocab:
        note = "|I| defined unique ids; R = max id + 1; V the model's rows (config.json)."
        body = _table(vocab_rows(data.vocab))
        parts.append(_html.section("Vocabulary sizes", body, anchor="vocab", note=note))
    if data.memory:
        note = (
            "Weights only (no gradients, optimizer state or output bias); 1 GiB = 2^30 bytes. "
            "d is the model's own width from its config.json where there is one."
        )
        body = _table(memory_rows(data.memory))
        parts.append(_html.section("Embedding-table memory", body, anchor="memory", note=note))
    if data.views:
        parts.append(_views_section(data.views))
    if data.token_audit is not None:
        parts.append(_token_audit_section(data.token_audit))
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">{GENERATOR_TAG}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
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
            pieces = tuple(tok.piece(i) for i in ids)
            out.append(TokenView(name, text, tuple(ids), pieces, tok.address_hash))
    return out


def _memory(sizes: Sequence[VocabSizes], width: int | None) -> list[MemoryRow]:
    """A row per tokenizer: its model's own V and width when a config gives them, else
    ``width`` (if any) with V = the model's rows or the tokenizer's id range R."""
    out = []
    for s in sizes:
        model = s.model
        if model is not None and model.hidden_size is not None:
            d = model.embedding_size
            table = TableConfig(
                vocab_size=model.vocab_size,
                hidden_size=model.hidden_size,
                tied=bool(model.tied),
                embedding_dim=d if d != model.hidden_size else None,
            )
            source = Path(model.path).name if model.path else "config"
        elif width is not None:
            table = TableConfig(vocab_size=s.model_rows or s.id_range, hidden_size=width, tied=True)
            source = "given width"
        else:
            continue
        tied = None if model is None else model.tied
        out.append(
            MemoryRow(
                name=s.name,
                table=table,
                width_from=source,
                tied_in_config=tied,
                address_hash=s.address_hash,
            )
        )
    return [*out, LLAMA_31_8B] if out else []


def _unique(sizes: Iterable[VocabSizes]) -> list[VocabSizes]:
    seen: dict[tuple[str, str | None, str | None], VocabSizes] = {}
    for s in sizes:
        seen.setdefault((s.name, s.address_hash, s.config), s)
    return list(seen.values())


def build_report(
    *,
    tokenizers: Mapping[str, Tokenizer],
    corpora: Mapping[str, Corpus],
    reference: str | None = None,
    curve_tokenizer: str | None = None,
    curve_corpora: Mapping[str, Corpus] | None = None,
    merge_counts: Sequence[int] = (),
    vocab: Sequence[VocabSizes] = (),
    width: int | None = None,
    samples: Sequence[str] = DEFAULT_SAMPLES,
    words: WordDefinition | None = None,
    title: str = "tokembed report",
    notes: Sequence[str] = (),
    measurements: Sequence[Measurement] | None = None,
    progress: bool = False,
) -> ReportData:
    """Measure ``tokenizers`` on ``corpora`` and collect every report section.

    ``reference`` (a corpus label such as ``en``) adds token premiums per side
    (corpora must be parallel); ``curve_tokenizer`` (a key of ``tokenizers``) with
    ``merge_counts`` adds the compression curve on ``curve_corpora`` (default:
    ``corpora``). ``vocab`` adds inspected tokenizers (with their model configs) to
    the measured ones. The memory table uses each model's own V and width from its
    config; ``width`` fills in for tokenizers without one; Llama-3.1-8B is the
    reference row. ``measurements`` already taken of ``tokenizers`` on ``corpora``
    (the demo's) are used as they are instead of measuring again. ``progress`` shows
    bars counting the bytes each tokenizer (and the curve) has encoded (stderr, only on
    a terminal).

    Raises:
        UsageError(INVALID_ARGUMENT): ``curve_tokenizer`` is not a key of ``tokenizers``.
        As :func:`~tokembed.measure.metrics.compare` and
        :func:`~tokembed.measure.curves.compression_curve`.
    """
    if curve_tokenizer is not None and curve_tokenizer not in tokenizers:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"curve tokenizer {curve_tokenizer!r} is not among the measured tokenizers",
            value=curve_tokenizer,
            fix=f"choose one of {sorted(tokenizers)}",
        )
    if measurements is None:
        measurements = compare(tokenizers, corpora, words=words, progress=progress)
    premiums = premiums_by_side(measurements, reference=reference) if reference else {}
    curve: list[CurvePoint] = []
    svg, address = "", None
    if curve_tokenizer is not None and merge_counts:
        tok = tokenizers[curve_tokenizer]
        address = tok.address_hash
        curve = compression_curve(
            tok,
            curve_corpora or corpora,
            merge_counts,
            words=words,
            name=curve_tokenizer,
            progress=progress,
        )
        svg = plot_curve(
            curve,
            title=f"bytes/token of {curve_tokenizer} ({short_hash(address)}) by merge count",
        )
    sizes = _unique([*(vocab_sizes_of(t, name=n) for n, t in tokenizers.items()), *vocab])
    labelled = {**corpora, **(curve_corpora or {})}
    return ReportData(
        title=title,
        corpora=[replace(c, name=label).record() for label, c in labelled.items()],
        measurements=measurements,
        premiums=premiums,
        reference=reference,
        curve=curve,
        curve_svg=svg,
        curve_tokenizer=curve_tokenizer or "",
        curve_address=address,
        vocab=sizes,
        memory=_memory(sizes, width),
        views=_views(tokenizers, samples),
        notes=notes,
    )


def write_demo_report(
    result: DemoResult,
    *,
    path: str | Path,
    width: int = 768,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """The demo's report: its tokenizer on the training and held-out files, with its curve.

    The sides and their measurements are the ones ``run_demo`` printed (no second
    split, no second measurement). Returns the written path.
    """
    tok = result.tokenizer
    name = tok.name or "demo"
    n = tok.n_merges
    parts = result.partition
    data = build_report(
        tokenizers={name: tok},
        corpora=result.corpora,
        measurements=result.measurements,
        curve_tokenizer=name,
        merge_counts=sorted({0, *(n * k // 8 for k in range(1, 9))}),
        width=width,
        title=f"tokembed demo report: {name}",
        notes=[
            f"{len(parts.train.documents)} training files, {len(parts.eval.documents)} "
            f"held-out files (whole files, rule {parts.rule}). Each file is encoded on its own."
        ],
    )
    return write_report(data, path, inputs=inputs)
