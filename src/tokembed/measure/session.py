"""From command-line style inputs to measurements: what ``tokembed measure`` and ``report`` run.

* :func:`load_corpora` — files, folders, globs or ``-`` → labelled corpora (one per
  argument, read by :func:`~tokembed.measure.corpus.load_corpus`). Labels are the language prefix of
  PUD-style names (``ru_pud-ud-test.conllu`` → ``ru``) when those are distinct, else the
  file stem. Several CoNLL-U files are checked to be parallel (:func:`align`). With a
  partition rule every corpus is split by documents and labelled ``ru/train``, ``ru/eval``;
* :func:`run_measure` — metrics of every tokenizer on every corpus, token premiums over
  a reference language (per side) and, optionally, a compression curve of the first
  tokenizer (which must be a trained merge list; see :mod:`.curves`).

Example::

    >>> toks = {"o200k": load_tokenizer("o200k_base.tiktoken")}  # doctest: +SKIP
    >>> result = run_measure(toks, load_corpora(["ru_pud-ud-test.conllu"]))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokembed.errors import UsageError
from tokembed.files.atomic import check_output, write_atomic
from tokembed.measure.corpus import Corpus, CorpusRecord, align, load_corpus
from tokembed.measure.curves import CurvePoint, compression_curve
from tokembed.measure.metrics import Measurement, WordDefinition, compare, token_premium
from tokembed.measure.partition import partition_parallel

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = [
    "MeasureResult",
    "load_corpora",
    "premiums_by_side",
    "run_measure",
    "save_texts",
]


def _labels(corpora: Sequence[Corpus]) -> list[str]:
    prefixes = [c.name.split("_", 1)[0] for c in corpora]
    if all("_" in c.name for c in corpora) and len(set(prefixes)) == len(prefixes):
        return prefixes
    names = [c.name for c in corpora]
    return [f"{n}#{k}" if names.count(n) > 1 else n for k, n in enumerate(names)]


def load_corpora(
    paths: Sequence[str], *, partition: str | None = None, doc_rule: str = "auto"
) -> dict[str, Corpus]:
    """Labelled corpora (see module docstring), split by ``partition`` when given.

    Raises:
        UsageError(INVALID_ARGUMENT): no paths. MeasureError(EMPTY_INPUT,
        MALFORMED_CONLLU, UNALIGNED_PARALLEL_CORPUS, INVALID_PARTITION).
    """
    if not paths:
        raise UsageError(
            "INVALID_ARGUMENT", "no corpus given", value=None, fix="pass a corpus file"
        )
    loaded = [load_corpus(p, doc_rule=doc_rule) for p in paths]
    named = {
        label: replace(c, name=label) for label, c in zip(_labels(loaded), loaded, strict=True)
    }
    conllu = {k: c for k, c in named.items() if c.format == "conllu"}
    if len(conllu) > 1:
        align(conllu)
    if partition is None:
        return named
    out: dict[str, Corpus] = {}
    parts = partition_parallel(conllu, rule=partition) if conllu else {}
    for label, c in named.items():
        p = parts.get(label) or partition_parallel({label: c}, rule=partition)[label]
        out[f"{label}/train"] = replace(p.train, name=f"{label}/train")
        out[f"{label}/eval"] = replace(p.eval, name=f"{label}/eval")
    return out


def premiums_by_side(
    measurements: Sequence[Measurement], *, reference: str
) -> dict[tuple[str, str], float]:
    """Token premium over ``reference`` per tokenizer, within each side (``/train``, ``/eval``)."""
    out: dict[tuple[str, str], float] = {}
    groups: dict[tuple[str, str], dict[str, Measurement]] = {}
    for m in measurements:
        side = m.corpus.rpartition("/")[2] if "/" in m.corpus else ""
        groups.setdefault((m.tokenizer, side), {})[m.corpus] = m
    for (tok, side), group in groups.items():
        ref = reference if reference in group or not side else f"{reference}/{side}"
        for corpus, value in token_premium(group, reference=ref).items():
            out[(tok, corpus)] = value
    return out


@dataclass(frozen=True, kw_only=True)
class MeasureResult:
    records: list[CorpusRecord]
    measurements: list[Measurement]
    premiums: dict[tuple[str, str], float]
    curve: list[CurvePoint]

    def to_dict(self) -> dict[str, Any]:
        return {
            "corpora": [r.to_dict() for r in self.records],
            "measurements": [m.to_dict() for m in self.measurements],
            "premiums": [
                {"tokenizer": t, "corpus": c, "premium": p} for (t, c), p in self.premiums.items()
            ],
            "curve": [
                {"label": p.label, "n_merges": p.n_merges, **p.measurement.to_dict()}
                for p in self.curve
            ],
        }


def run_measure(
    tokenizers: Mapping[str, Tokenizer],
    corpora: Mapping[str, Corpus],
    *,
    reference: str | None = None,
    merge_counts: Sequence[int] = (),
    words: WordDefinition | None = None,
    progress: bool = False,
) -> MeasureResult:
    """Measure every tokenizer on every corpus; premiums when ``reference`` names a corpus label.

    ``progress`` shows bars counting the bytes each tokenizer has encoded (stderr, only on a
    terminal).

    Raises: as :func:`measure` and :func:`compression_curve`; UsageError(INVALID_ARGUMENT)
    when ``reference`` is not a corpus label.
    """
    if merge_counts and not tokenizers:
        raise UsageError(
            "INVALID_ARGUMENT",
            "a compression curve needs a tokenizer",
            value=list(merge_counts),
            fix="pass the trained tokenizer first with -t",
        )
    measurements = compare(tokenizers, corpora, words=words, progress=progress)
    premiums = premiums_by_side(measurements, reference=reference) if reference else {}
    curve: list[CurvePoint] = []
    if merge_counts:
        name, first = next(iter(tokenizers.items()))
        curve = compression_curve(
            first, corpora, merge_counts, words=words, name=name, progress=progress
        )
    return MeasureResult(
        records=[c.record() for c in corpora.values()],
        measurements=measurements,
        premiums=premiums,
        curve=curve,
    )


def save_texts(
    corpora: Mapping[str, Corpus], directory: str | Path, *, inputs: Iterable[str | Path] = ()
) -> list[Path]:
    """Write each corpus's exact measured text to ``directory/<label>.txt`` (``/`` → ``.``).

    With ``--partition sha256-mod5`` on PUD this gives ``ru.train.txt``, the training side
    of its 833/167-sentence split.

    Raises:
        UsageError(OUTPUT_EXISTS): a file to write is one of ``inputs`` (checked before any write).
    """
    folder = Path(directory)
    paths = {label: folder / (label.replace("/", ".") + ".txt") for label in corpora}
    inputs = list(inputs)
    for path in paths.values():
        check_output(path, inputs=inputs)
    for label, path in paths.items():
        write_atomic(path, corpora[label].text.encode("utf-8"), inputs=inputs)
    return list(paths.values())
