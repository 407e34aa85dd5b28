"""Tables of measurements, curves, vocabulary sizes, table memory and adaptations (text, HTML).

Each ``*_rows`` function returns ``(headers, rows)`` of strings so that the text
table here, the Markdown table and the HTML report show the same cells, formatted
the same way (thousands separators, three decimals); :func:`format_table` aligns
them, :func:`markdown_table` writes them for a README. Every
table that shows a tokenizer shows its name and the start of its address hash.

Example::

    >>> print(format_table(["a", "bb"], [["1", "22"]]))
    a  bb
    -  --
    1  22
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tokembed.measure.corpus import CorpusRecord
from tokembed.measure.curves import CurvePoint
from tokembed.measure.memory import GIB, TableConfig, table_parameters
from tokembed.measure.metrics import Measurement
from tokembed.measure.vocab_sizes import VocabSizes

__all__ = [
    "AdaptationRow",
    "MemoryRow",
    "adaptation_rows",
    "corpus_rows",
    "curve_rows",
    "format_table",
    "markdown_table",
    "measurement_rows",
    "memory_rows",
    "short_hash",
    "vocab_rows",
]

Rows = tuple[list[str], list[list[str]]]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned text columns separated by two spaces, with a dashed rule."""
    widths = [
        max(len(h), *(len(r[k]) for r in rows)) if rows else len(h) for k, h in enumerate(headers)
    ]
    lines = [
        "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The same cells as a GitHub Markdown table (``|`` in a cell escaped).

    Example::

        >>> print(markdown_table(["a", "b"], [["1", "x|y"]]))
        | a | b |
        |---|---|
        | 1 | x\\|y |
    """

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)])


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def short_hash(address_hash: str | None) -> str:
    """``sha256:`` and the first 12 hex digits of an address hash (``-`` when unknown)."""
    return "-" if not address_hash else address_hash[:19]


_METRIC_HEADERS = ["bytes/tok", "chars/tok", "fertility", "retention", "tok/sent", "bits/byte"]


def _metric_cells(m: Measurement) -> list[str]:
    return [
        _f(m.bytes_per_token),
        _f(m.chars_per_token),
        _f(m.fertility),
        _f(m.retention),
        _f(m.tokens_per_sentence, 1),
        _f(m.bits_per_byte),
    ]


def measurement_rows(
    measurements: Sequence[Measurement], *, premiums: Mapping[tuple[str, str], float] | None = None
) -> Rows:
    """One row per (corpus, tokenizer); ``premiums[(tokenizer, corpus)]`` adds a premium column."""
    headers = ["corpus", "part", "tokenizer", "address", "bytes", "tokens", *_METRIC_HEADERS]
    if premiums is not None:
        headers.append("premium")
    rows = []
    for m in measurements:
        row = [
            m.corpus,
            (m.partition or "all").split(":")[-1],
            m.tokenizer,
            short_hash(m.address_hash),
            f"{m.bytes:,}",
            f"{m.tokens:,}",
            *_metric_cells(m),
        ]
        if premiums is not None:
            row.append(_f(premiums.get((m.tokenizer, m.corpus))))
        rows.append(row)
    return headers, rows


def curve_rows(points: Sequence[CurvePoint]) -> Rows:
    """One row per (corpus, merge count); the tokenizer is the first ``merges`` of the named one."""
    headers = ["corpus", "tokenizer", "merges", "R", "bytes", "tokens", *_METRIC_HEADERS]
    rows = [
        [
            p.label,
            p.measurement.tokenizer,
            f"{p.n_merges:,}",
            "-" if p.measurement.id_range is None else f"{p.measurement.id_range:,}",
            f"{p.measurement.bytes:,}",
            f"{p.measurement.tokens:,}",
            *_metric_cells(p.measurement),
        ]
        for p in points
    ]
    return headers, rows


def vocab_rows(sizes: Sequence[VocabSizes]) -> Rows:
    headers = [
        "tokenizer",
        "address",
        "mergeable",
        "special names",
        "special ids",
        "aliases",
        "|I|",
        "R",
        "holes",
        "V",
        "V-|I|",
    ]
    rows = []
    for s in sizes:
        aliases = "; ".join(f"{i}={'/'.join(n)}" for i, n in s.aliases.items()) or "-"
        holes = f"{s.holes:,}"
        if s.hole_ranges:
            shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in s.hole_ranges[:3])
            holes += f" ({shown}{', …' if len(s.hole_ranges) > 3 else ''})"
        rows.append(
            [
                s.name,
                short_hash(s.address_hash),
                f"{s.mergeable_ids:,}",
                f"{s.special_names:,}",
                f"{s.special_ids:,}",
                aliases,
                f"{s.unique_ids:,}",
                f"{s.id_range:,}",
                holes,
                "-" if s.model_rows is None else f"{s.model_rows:,}",
                "-" if s.unreached_rows is None else f"{s.unreached_rows:,}",
            ]
        )
    return headers, rows


def corpus_rows(records: Sequence[CorpusRecord]) -> Rows:
    headers = [
        "corpus",
        "part",
        "bytes",
        "chars",
        "sentences",
        "documents",
        "join",
        "doc rule",
        "text sha256",
    ]
    rows = [
        [
            r.name,
            (r.partition or "all").split(":")[-1],
            f"{r.bytes:,}",
            f"{r.chars:,}",
            f"{r.sentences:,}",
            f"{r.documents:,}",
            r.join_rule,
            r.doc_rule,
            r.text_sha256[:16] + "…",
        ]
        for r in records
    ]
    return headers, rows


@dataclass(frozen=True, kw_only=True)
class MemoryRow:
    """One line of the memory table: a model's tables and where its width came from."""

    name: str
    table: TableConfig
    width_from: str  # "config.json", "--width", or where a published figure comes from
    tied_in_config: bool | None = None  # None: no config says
    address_hash: str | None = None


def _gib(n: int) -> str:
    return f"{n / GIB:.3f}"


def memory_rows(entries: Sequence[MemoryRow]) -> Rows:
    """Parameters and GiB of each model's tables, tied (one table) and untied (two).

    Sizes come from :func:`tokembed.measure.memory.table_parameters`, the calculator
    ``tokembed memory`` uses; "tied in config" is what the model actually does.
    """
    headers = ["model / tokenizer", "address", "V", "d", "d from", "tied in config"]
    headers += ["params tied", "params untied", "bf16 GiB tied", "bf16 GiB untied"]
    headers += ["fp32 GiB tied", "fp32 GiB untied"]
    rows = []
    for e in entries:
        tied = table_parameters(replace(e.table, tied=True)).total
        untied = table_parameters(replace(e.table, tied=False, shared_bridge=False)).total
        rows.append(
            [
                e.name,
                short_hash(e.address_hash),
                f"{e.table.vocab_size:,}",
                f"{e.table.hidden_size:,}",
                e.width_from,
                {True: "yes", False: "no", None: "-"}[e.tied_in_config],
                f"{tied:,}",
                f"{untied:,}",
                _gib(2 * tied),
                _gib(2 * untied),
                _gib(4 * tied),
                _gib(4 * untied),
            ]
        )
    return headers, rows


@dataclass(frozen=True, kw_only=True)
class AdaptationRow:
    """One initializer of a vocabulary adaptation, measured before any training.

    ``bpb_before`` is the unmigrated model with the old tokenizer, ``bpb_after`` the
    migrated model with the new tokenizer, on the same held-out text (model bits per
    byte: negative log-likelihood, not the fixed-width id code of the metrics table).
    ``mean_kl`` / ``max_kl`` / ``new_mass`` are the shift of the distribution over old
    tokens on another text; ``flagged`` is how many of the ``new_rows`` new ids the
    under-trained-token audit ranks among its top ``new_rows``.
    """

    initializer: str
    new_rows: int
    init_seconds: float
    bpb_before: float
    bpb_after: float
    mean_kl: float
    max_kl: float
    new_mass: float
    flagged: int


def adaptation_rows(entries: Sequence[AdaptationRow], *, seconds: bool = True) -> Rows:
    """Cells of the adaptation table, one row per initializer (``seconds``: show init time)."""
    headers = ["initializer", "new rows", "bpb before", "bpb after", "Δ bpb"]
    headers += ["mean KL", "max KL", "new-token mass", "audit flags"]
    if seconds:
        headers.append("init s")
    rows = []
    for e in entries:
        row = [
            e.initializer,
            f"{e.new_rows:,}",
            f"{e.bpb_before:.3f}",
            f"{e.bpb_after:.3f}",
            f"{e.bpb_after - e.bpb_before:+.3f}",
            f"{e.mean_kl:.2e}",
            f"{e.max_kl:.2e}",
            f"{e.new_mass:.2e}",
            f"{e.flagged:,} / {e.new_rows:,}",
        ]
        if seconds:
            row.append(f"{e.init_seconds:.3f}")
        rows.append(row)
    return headers, rows
