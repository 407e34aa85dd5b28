"""Tables of measurements, curves, vocabulary sizes and table memory (CLI text and HTML report).

Each ``*_rows`` function returns ``(headers, rows)`` of strings so that the text
table here and the HTML report show the same cells, formatted the same way
(thousands separators, three decimals); :func:`format_table` aligns them. Every
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
    "MemoryRow",
    "corpus_rows",
    "curve_rows",
    "format_table",
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
