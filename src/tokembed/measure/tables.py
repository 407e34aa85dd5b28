"""Plain-text tables of measurements and vocabulary sizes (what the CLI prints).

Each ``*_rows`` function returns ``(headers, rows)`` of strings so that the text
table here and the HTML report show the same cells; :func:`format_table` aligns them.

Example::

    >>> print(format_table(["a", "bb"], [["1", "22"]]))
    a  bb
    -  --
    1  22
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tokembed.measure.corpus import CorpusRecord
from tokembed.measure.metrics import Measurement
from tokembed.measure.vocab_sizes import VocabSizes

__all__ = [
    "corpus_rows",
    "format_table",
    "measurement_rows",
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


def measurement_rows(
    measurements: Sequence[Measurement], premiums: Mapping[tuple[str, str], float] | None = None
) -> Rows:
    """One row per (corpus, tokenizer); ``premiums[(tokenizer, corpus)]`` adds a premium column."""
    headers = [
        "corpus",
        "part",
        "tokenizer",
        "bytes",
        "tokens",
        "bytes/tok",
        "chars/tok",
        "fertility",
        "retention",
        "tok/sent",
        "bits/byte",
    ]
    if premiums is not None:
        headers.append("premium")
    rows = []
    for m in measurements:
        row = [
            m.corpus,
            (m.partition or "all").split(":")[-1],
            m.tokenizer,
            f"{m.bytes:,}",
            f"{m.tokens:,}",
            _f(m.bytes_per_token),
            _f(m.chars_per_token),
            _f(m.fertility),
            _f(m.retention),
            _f(m.tokens_per_sentence, 1),
            _f(m.bits_per_byte),
        ]
        if premiums is not None:
            row.append(_f(premiums.get((m.tokenizer, m.corpus))))
        rows.append(row)
    return headers, rows


def vocab_rows(sizes: Sequence[VocabSizes]) -> Rows:
    headers = [
        "tokenizer",
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
