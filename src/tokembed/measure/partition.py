"""Deterministic document-level train/eval partitions with a named rule.

A rule decides, for each *document id*, whether the document goes to evaluation;
whole documents therefore stay together, and since a parallel corpus shares
document ids across languages (PUD: the first six characters of the sentence id),
the same documents land on the same side in every language.

Rules (the name is recorded with every partitioned corpus):

* ``sha256-mod<K>`` — evaluation iff ``int(sha256(doc_id UTF-8).hexdigest()[:8], 16) % K == 0``
  (the first 32 bits of the hash, big-endian).
* ``every<K>`` — evaluation iff the document's index (order of first appearance) is
  ``≡ K-1 (mod K)``: documents K-1, 2K-1, …
* ``lecture`` — alias of ``sha256-mod5``. A systematic search over document-level
  candidates (every K-th document for K = 2..11 at each offset; the first or last N
  documents; SHA-256 (whole digest or its first 32/64 bits), SHA-1, MD5, BLAKE2b and
  CRC32 of the document id, modulo K = 2..11 at each residue, as a fraction threshold,
  or as a sort order with the first/last N) found exactly one rule reproducing the
  lecture's teaching partition of PUD: this one. It gives train 833 sentences from
  331 documents (180,112 Russian bytes) and evaluation 167 sentences from 66
  documents (33,654 Russian and 18,168 English bytes).

Example::

    >>> rule = PartitionRule.parse("lecture")
    >>> rule.name, rule.is_eval("n01001", 0)
    ('sha256-mod5', False)
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tokembed.errors import MeasureError
from tokembed.measure.corpus import Corpus

__all__ = ["ALIASES", "Partition", "PartitionRule", "partition", "partition_parallel"]

ALIASES: dict[str, str] = {"lecture": "sha256-mod5"}


@dataclass(frozen=True, kw_only=True)
class PartitionRule:
    """A named document-level rule (see module docstring for the kinds)."""

    kind: Literal["sha256-mod", "every"]
    modulus: int

    def __post_init__(self) -> None:
        if self.kind not in ("sha256-mod", "every") or self.modulus < 2:
            raise MeasureError(
                "INVALID_PARTITION",
                f"unknown partition rule {self.kind!r} with modulus {self.modulus}",
                value=(self.kind, self.modulus),
                fix="use 'lecture', 'sha256-mod<K>' or 'every<K>' with K >= 2",
            )

    @property
    def name(self) -> str:
        return f"{self.kind}{self.modulus}"

    @classmethod
    def parse(cls, spec: str) -> PartitionRule:
        """Rule from its name (``lecture``, ``sha256-mod5``, ``every6``).

        Raises MeasureError(INVALID_PARTITION) for anything else.
        """
        name = ALIASES.get(spec, spec)
        for kind in ("sha256-mod", "every"):
            rest = name.removeprefix(kind)
            if rest != name and rest.isdigit():
                return cls(kind=kind, modulus=int(rest))
        raise MeasureError(
            "INVALID_PARTITION",
            f"unknown partition rule {spec!r}",
            value=spec,
            fix=f"use one of {sorted(ALIASES)}, 'sha256-mod<K>' or 'every<K>' (K >= 2)",
        )

    def is_eval(self, doc_id: str, index: int) -> bool:
        """Whether document ``doc_id`` (the ``index``-th in order of appearance) is evaluation."""
        if self.kind == "every":
            return index % self.modulus == self.modulus - 1
        digest = hashlib.sha256(doc_id.encode("utf-8")).hexdigest()
        return int(digest[:8], 16) % self.modulus == 0

    def split(self, doc_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """(train, eval) document ids, order kept. Raises INVALID_PARTITION if a side is empty."""
        train: list[str] = []
        held: list[str] = []
        for k, doc in enumerate(doc_ids):
            (held if self.is_eval(doc, k) else train).append(doc)
        if not train or not held:
            raise MeasureError(
                "INVALID_PARTITION",
                f"rule {self.name} puts all {len(doc_ids)} documents on one side",
                value=self.name,
                fix="use a corpus with more documents or a different modulus",
            )
        return train, held


@dataclass(frozen=True)
class Partition:
    """The two sides of one corpus under one rule."""

    rule: str
    train: Corpus
    eval: Corpus


def partition(corpus: Corpus, rule: PartitionRule | str) -> Partition:
    """Split ``corpus`` by documents; each side is labelled ``"<rule>:train"`` / ``":eval"``."""
    rule = PartitionRule.parse(rule) if isinstance(rule, str) else rule
    train, held = rule.split(corpus.documents)
    return Partition(
        rule=rule.name,
        train=corpus.select(train, partition=f"{rule.name}:train"),
        eval=corpus.select(held, partition=f"{rule.name}:eval"),
    )


def partition_parallel(
    corpora: Mapping[str, Corpus], rule: PartitionRule | str
) -> dict[str, Partition]:
    """Partition aligned corpora with the *first* corpus's document ids for every language.

    Call :func:`tokembed.measure.corpus.align` first; this keeps sentence pairs together
    even where files disagree on document ids (their sentence ids agree).
    """
    rule = PartitionRule.parse(rule) if isinstance(rule, str) else rule
    items = list(corpora.items())
    if not items:
        return {}
    ref = items[0][1]
    _, eval_docs = rule.split(ref.documents)
    held = set(eval_docs)
    eval_sids = {s.sent_id for s in ref.sentences if s.doc_id in held}
    out: dict[str, Partition] = {}
    for name, corpus in items:
        by_doc = [(s.doc_id, s.sent_id in eval_sids) for s in corpus.sentences]
        ev = {d for d, e in by_doc if e}
        tr = {d for d, e in by_doc if not e}
        if ev & tr:
            raise MeasureError(
                "UNALIGNED_PARALLEL_CORPUS",
                f"{name}: documents {sorted(ev & tr)[:3]} would be split across train and eval",
                value=name,
                fix="use a document rule that groups every language the same way (sent-prefix:N)",
            )
        out[name] = Partition(
            rule=rule.name,
            train=corpus.select(tr, partition=f"{rule.name}:train"),
            eval=corpus.select(ev, partition=f"{rule.name}:eval"),
        )
    return out
