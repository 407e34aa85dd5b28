"""Compression curves: metrics at many merge counts from one training run, without retraining.

The first ``n`` merges of a trained merge list are themselves a tokenizer
(:meth:`Tokenizer.truncated`). Measuring it naively re-encodes the corpus once per
``n``. We encode once, with the largest ``n``, and derive every smaller ``n``:

* In a *trained* merge list every merge joins ids that are bytes or results of
  earlier merges. Then encoding applies merges in non-decreasing rank order (a new
  pair always contains the id just created, whose merges come later), so encoding
  with the first ``n`` merges is the full encoding stopped before the first merge
  of rank ``>= n``.
* Each applied merge removes one token. The merges applied to produce a final token
  are exactly the internal nodes of its merge tree. Hence
  ``tokens(n) = bytes - #{applied merges of rank < n}``, and the applied merges of a
  whole text follow from its id histogram by pushing counts down the merge trees
  in decreasing rank order (:func:`_rank_histogram`).
* A distinct word is one token at ``n`` iff it is one token at the largest count
  and that token's own rank is ``< n`` (or it is a byte).

Merge lists without that property (some imported files) fall back to the
reference, :func:`compression_curve_reference`, which encodes with
``tok.truncated(n)`` for every ``n``; tests prove both equal on PUD.

Example::

    >>> pts = compression_curve(tok, {"ru-eval": ru_eval}, [0, 256, 1024])  # doctest: +SKIP
    >>> [round(p.measurement.bytes_per_token, 2) for p in pts]  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokembed.errors import UsageError
from tokembed.files.atomic import write_bytes_atomic
from tokembed.measure.corpus import Corpus
from tokembed.measure.metrics import (
    Encode,
    Measurement,
    WordDefinition,
    _bytes_bar,
    _utf8_bytes,
    measure,
    single_token_ids,
)

if TYPE_CHECKING:
    import numpy as np

    from tokembed.tokenizer import BPETables, Tokenizer

__all__ = [
    "CurvePoint",
    "compression_curve",
    "compression_curve_reference",
    "curve_csv",
    "plot_curve",
    "plot_format",
]

_CSV_FIELDS = (
    "partition",
    "n_merges",
    "bytes",
    "chars",
    "tokens",
    "words",
    "bytes_per_token",
    "chars_per_token",
    "fertility",
    "retention",
    "tokens_per_sentence",
    "bits_per_byte",
)

_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_DASHES = ("-", "--", ":", "-.")

_LABELS = {
    "bytes_per_token": "bytes/token",
    "chars_per_token": "chars/token",
    "fertility": "tokens/word",
    "retention": "single-token retention",
    "tokens_per_sentence": "tokens/sentence",
    "bits_per_byte": "bits/byte",
}


@dataclass(frozen=True)
class CurvePoint:
    """The measurement of the first ``n_merges`` merges on one labelled corpus."""

    label: str
    n_merges: int
    measurement: Measurement


def _check_counts(tok: Tokenizer, merge_counts: Sequence[int]) -> list[int]:
    counts = sorted(set(merge_counts))
    if not counts or counts[0] < 0 or counts[-1] > tok.n_merges:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"merge counts must lie in 0..{tok.n_merges} for this tokenizer",
            value=list(merge_counts),
            fix=f"pass merge counts between 0 and {tok.n_merges}",
        )
    return counts


def _options(
    tok: Tokenizer, merge_counts: Sequence[int], words: WordDefinition | None, name: str | None
) -> tuple[list[int], WordDefinition, str]:
    """Checked merge counts, the word definition and the name the curve's points carry."""
    label = name or tok.name or "tokenizer"
    return _check_counts(tok, merge_counts), words or WordDefinition(), label


def _rank_histogram(tables: BPETables, ids: Sequence[int], n_merges: int) -> np.ndarray:
    """hist[k] = how many times merge k was applied while encoding to ``ids``."""
    # NumPy is imported where a curve is computed, so that importing tokembed.measure (for
    # `tokembed memory`, say) does not pay for it.
    import numpy as np

    size = max(tables.id_range, 1)
    # asarray of a list is C-speed; fromiter over a Python iterator is ~10x slower (7M ids).
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=size).tolist()
    hist = [0] * n_merges
    merges = tables.merges
    for k in range(n_merges - 1, -1, -1):
        left, right, result = merges[k]
        c = counts[result]
        if c:
            hist[k] = c
            counts[left] += c
            counts[right] += c
    return np.asarray(hist, dtype=np.int64)


def _id_ranges(tables: BPETables, counts: list[int]) -> dict[int, int]:
    """R of ``tables.truncated(n)`` for each ``n``, without building the truncated tables."""
    results = [m[2] for m in tables.merges]
    made = set(results)
    base = max(
        [i for i in tables.pieces if i not in made] + list(tables.specials.values()), default=-1
    )
    out = {}
    for n in counts:
        out[n] = max([base, *results[:n]]) + 1
    return out


def _tokens_at(total_bytes: int, hist: np.ndarray, counts: list[int]) -> list[int]:
    import numpy as np

    applied = np.concatenate([[0], np.cumsum(hist)])
    return [total_bytes - int(applied[n]) for n in counts]


def _line_ids(encode: Encode, lines: Sequence[str]) -> list[int]:
    """The ids of every line encoded on its own, concatenated (a repeated line's ids repeat).

    Each distinct line is encoded once: RusLit-40 has 120,039 distinct lines of 131,043.
    """
    out: list[int] = []
    for line, k in Counter(lines).items():
        ids = encode(line)
        out += ids
        if k > 1:
            out += list(ids) * (k - 1)
    return out


def _fast_points(
    tok: Tokenizer,
    label: str,
    corpus: Corpus,
    counts: list[int],
    words: WordDefinition,
    name: str,
    advance: Callable[[int], object] | None = None,
) -> list[CurvePoint]:
    import numpy as np

    corpus.require_text()
    top = tok.truncated(counts[-1])
    tables, encode = top.tables, top.encode_ordinary
    text = corpus.text
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The word regex and tiktoken's encoder release the GIL: on RusLit-40 finding
        # words (1.0 s, plus 0.36 s for the set) overlaps the two encodes (2 x 2.1 s)
        # instead of adding to them. Same result, computed concurrently.
        counted = pool.submit(words.count_distinct, text, corpus=corpus.name)
        try:
            n_bytes = len(text.encode("utf-8"))
            unit_ids: list[int] = []
            for unit in corpus.units:
                unit_ids += encode(unit)
                if advance is not None:
                    advance(_utf8_bytes(unit))
            text_hist = _rank_histogram(tables, unit_ids, counts[-1])
            sentences = [s.text for s in corpus.sentences]
            sent_bytes = len("".join(sentences).encode("utf-8"))
            sent_hist = _rank_histogram(tables, _line_ids(encode, sentences), counts[-1])
        finally:  # a word error (EMPTY_WORD_DEFINITION) wins, as in measure()
            n_words, distinct = counted.result()
    # Rank of the single token of each one-token word (-1 for a byte: one token at every n).
    rank_of = {result: k for k, (_, _, result) in enumerate(tables.merges)}
    pieces = frozenset(tables.pieces.values())
    singles = [rank_of.get(i, -1) for i in single_token_ids(encode, distinct, words, pieces=pieces)]
    single_ranks = np.sort(np.asarray(singles, dtype=np.int64))
    tokens = _tokens_at(n_bytes, text_hist, counts)
    sent_tokens = _tokens_at(sent_bytes, sent_hist, counts)
    id_ranges = _id_ranges(tok.tables, counts)
    points = []
    for n, t, st in zip(counts, tokens, sent_tokens, strict=True):
        m = Measurement(
            tokenizer=name,
            corpus=corpus.name,
            partition=corpus.partition,
            bytes=n_bytes,
            chars=len(text),
            tokens=t,
            words=n_words,
            distinct_words=len(distinct),
            single_token_words=int(np.searchsorted(single_ranks, n, side="left")),
            sentences=len(corpus.sentences),
            sentence_tokens=st,
            id_range=id_ranges[n],
            word_definition=words.describe(),
        )
        points.append(CurvePoint(label, n, m))
    return points


def compression_curve_reference(
    tok: Tokenizer,
    corpora: Mapping[str, Corpus],
    merge_counts: Sequence[int],
    *,
    words: WordDefinition | None = None,
    name: str | None = None,
) -> list[CurvePoint]:
    """The obviously correct curve: ``measure(tok.truncated(n).encode_ordinary, ...)`` per ``n``."""
    counts, words, name = _options(tok, merge_counts, words, name)
    points = []
    for label, corpus in corpora.items():
        for n in counts:
            small = tok.truncated(n)
            m = measure(
                small.encode_ordinary,
                corpus,
                tokenizer=name,
                words=words,
                id_range=small.tables.id_range,
            )
            points.append(CurvePoint(label, n, m))
    return points


def compression_curve(
    tok: Tokenizer,
    corpora: Mapping[str, Corpus],
    merge_counts: Sequence[int],
    *,
    words: WordDefinition | None = None,
    name: str | None = None,
    progress: bool = False,
) -> list[CurvePoint]:
    """Metrics of ``tok.truncated(n)`` for every ``n`` and every labelled corpus (one encode each).

    Equal to :func:`compression_curve_reference`; points are ordered by label, then ``n``.
    Each measurement's ``tokenizer`` is ``name`` (default: ``tok.name``). With
    ``progress`` (and stderr a terminal) a bar counts the bytes encoded, named
    ``curve of NAME on CORPUS``.

    Raises:
        UsageError(INVALID_ARGUMENT): a merge count outside ``0..tok.n_merges``.
        MeasureError(EMPTY_INPUT), MeasureError(EMPTY_WORD_DEFINITION).
    """
    counts, words, name = _options(tok, merge_counts, words, name)
    from tokembed.tokenizer.merges import merges_ordered

    if not merges_ordered(tok.tables) or tok.tables.missing_bytes():
        return compression_curve_reference(tok, corpora, counts, words=words, name=name)
    points: list[CurvePoint] = []
    total = sum(_utf8_bytes(u) for c in corpora.values() for u in c.units)
    bar = _bytes_bar(total, show=progress)
    try:
        for label, corpus in corpora.items():
            if bar is not None:
                bar.set_description(f"curve of {name} on {label}")
            advance = None if bar is None else bar.update
            points += _fast_points(tok, label, corpus, counts, words, name, advance)
    finally:
        if bar is not None:
            bar.refresh()  # the last count, whatever tqdm's redraw interval skipped
            bar.close()
    return points


def curve_csv(points: Sequence[CurvePoint]) -> str:
    """CSV text: one row per (label, merge count) with counts and ratios."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_CSV_FIELDS)
    for p in points:
        d = p.measurement.to_dict()
        d["partition"], d["n_merges"] = p.label, p.n_merges
        writer.writerow([f"{d[f]:.6f}" if isinstance(d[f], float) else d[f] for f in _CSV_FIELDS])
    return out.getvalue()


def plot_format(path: str | Path) -> str:
    """The image format a plot written to ``path`` gets (its suffix; no suffix: ``"png"``).

    Every plot of the project (curves, the audit's indicator) is written through this
    check, and the command line calls it before any work, so an unknown suffix is a
    coded refusal, not matplotlib's error after the work is done.

    Example::

        >>> plot_format("curve.SVG"), plot_format("out")
        ('svg', 'png')

    Raises:
        UsageError INVALID_ARGUMENT: a suffix matplotlib cannot write (``.bmp``).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    kind = Path(path).suffix.lstrip(".").lower() or "png"
    known = FigureCanvasAgg.get_supported_filetypes()
    if kind not in known:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"cannot write a plot as .{kind}: {path}",
            value=str(path),
            fix=f"name the plot with one of .{', .'.join(sorted(known))} (e.g. .png or .svg)",
        )
    return kind


def plot_curve(
    points: Sequence[CurvePoint],
    path: str | Path | None = None,
    *,
    metric: str = "bytes_per_token",
    title: str | None = None,
) -> str:
    """Plot ``metric`` against the merge count (linear axis), one line per label.

    Writes ``path`` (format from its suffix, :func:`plot_format`) when given and returns the
    SVG text, which the HTML report embeds inline. matplotlib is imported here only.

    Raises:
        UsageError INVALID_ARGUMENT: ``path`` has a suffix no plot can be written as.
    """
    kind = None if path is None else plot_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=100)
    try:
        labels = list(dict.fromkeys(p.label for p in points))
        for k, label in enumerate(labels):
            xs = [p.n_merges for p in points if p.label == label]
            ys = [getattr(p.measurement, metric) for p in points if p.label == label]
            # Lines that coincide (train and eval often do at small merge counts) stay
            # distinguishable: each gets its own marker and dash pattern, and earlier
            # lines get larger hollow markers so a later one shows inside them.
            ax.plot(
                xs,
                ys,
                marker=_MARKERS[k % len(_MARKERS)],
                linestyle=_DASHES[k % len(_DASHES)],
                markersize=4 + 2.5 * (len(labels) - 1 - k),
                markerfacecolor="none",
                markeredgewidth=1.3,
                linewidth=1.5,
                label=label,
            )
        ax.set_xlabel("merges (linear axis)")
        label = _LABELS.get(metric, metric)
        ax.set_ylabel(label)
        ax.set_title(title or f"{label} vs merge count")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        if path is not None:
            # Rendered in memory and renamed into place: a kill leaves the old plot whole.
            image = io.BytesIO()
            fig.savefig(image, format=kind)
            write_bytes_atomic(Path(path), image.getvalue())
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
    finally:
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.index("<svg") :]
