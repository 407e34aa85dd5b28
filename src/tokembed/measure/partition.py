"""Deterministic document-level train/eval partitions with a named rule.

A rule decides which *documents* go to evaluation; whole documents stay together.
A parallel corpus shares document ids across languages (PUD: the first six
characters of the sentence id), so the same documents land on the same side in
every language. A plain-text corpus of several files has one document per file,
so a rule there holds out whole files (what ``tokembed demo`` does).

Rules (the name is recorded with every partitioned corpus):

* ``sha256-mod<K>`` — evaluation iff ``int(sha256(doc_id UTF-8).hexdigest()[:8], 16) % K == 0``
  (the first 32 bits of the hash, big-endian). On PUD, ``sha256-mod5`` gives train 833
  sentences from 331 documents (180,112 Russian bytes) and evaluation 167 sentences from
  66 documents (33,654 Russian and 18,168 English bytes).
* ``every<K>`` — evaluation iff the document's index (order of first appearance) is
  ``≡ K-1 (mod K)``: documents K-1, 2K-1, …
* ``holdout<F>`` — a share ``F`` in [0, 1) of the documents, at least one and never
  all: the ``round(F·n)`` documents whose ids have the smallest SHA-256 (a fixed
  pseudo-random choice that does not depend on the order of the documents). With
  one document, or ``F = 0``, nothing is held out.

:data:`ALIASES` maps other accepted names to these; the name recorded is always the
rule's own (``sha256-mod5``, never an alias).

Example::

    >>> rule = PartitionRule.parse("sha256-mod5")
    >>> ids = ["n01001", "n01002", "n01003", "n01004", "n01005", "n01006"]
    >>> rule.name, rule.split(ids)[1]
    ('sha256-mod5', ['n01004'])
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tokembed.errors import MeasureError
from tokembed.measure.corpus import Corpus

__all__ = ["ALIASES", "Partition", "PartitionRule", "partition", "partition_parallel"]

# Names accepted for a rule besides its own. "lecture" is what sha256-mod5 was first called:
# the split of PUD (833/167 sentences) that our reference material uses (docs/design.md). A
# search over simple document-level rules (every K-th document, first/last N, SHA-256, SHA-1,
# MD5, BLAKE2b and CRC32 of the id modulo K = 2..11, thresholds and sort orders) found no
# other rule that yields that split. Kept so that scripts using the old name still run.
ALIASES: dict[str, str] = {"lecture": "sha256-mod5"}
_KINDS = ("sha256-mod", "every", "holdout")
_FIX = "use 'sha256-mod<K>' or 'every<K>' with K >= 2, or 'holdout<F>' with 0 <= F < 1"


def _sha256(doc_id: str) -> str:
    return hashlib.sha256(doc_id.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, kw_only=True)
class PartitionRule:
    """A named document-level rule (see module docstring for the kinds).

    ``modulus`` belongs to ``sha256-mod`` and ``every``; ``fraction`` to ``holdout``.

    Raises:
        MeasureError(INVALID_PARTITION): an unknown kind, a modulus below 2, or a
            fraction outside [0, 1).
    """

    kind: Literal["sha256-mod", "every", "holdout"]
    modulus: int = 0
    fraction: float = 0.0

    def __post_init__(self) -> None:
        valid = (
            0.0 <= self.fraction < 1.0 and self.modulus == 0
            if self.kind == "holdout"
            else self.kind in _KINDS and self.modulus >= 2 and self.fraction == 0.0
        )
        if not valid:
            raise MeasureError(
                "INVALID_PARTITION",
                f"invalid partition rule {self.kind!r} with modulus {self.modulus} "
                f"and fraction {self.fraction}",
                value=(self.kind, self.modulus, self.fraction),
                fix=_FIX,
            )

    @classmethod
    def holdout(cls, fraction: float) -> PartitionRule:
        """The rule that holds out a share ``fraction`` of the documents."""
        return cls(kind="holdout", fraction=fraction)

    @property
    def name(self) -> str:
        return (
            f"holdout{self.fraction:g}" if self.kind == "holdout" else f"{self.kind}{self.modulus}"
        )

    @classmethod
    def parse(cls, spec: str) -> PartitionRule:
        """Rule from its name (``sha256-mod5``, ``every6``, ``holdout0.1``) or an alias of one.

        Raises MeasureError(INVALID_PARTITION) for anything else.
        """
        name = ALIASES.get(spec, spec)
        for kind in ("sha256-mod", "every"):
            rest = name.removeprefix(kind)
            if rest != name and rest.isdigit():
                return cls(kind=kind, modulus=int(rest))
        rest = name.removeprefix("holdout")
        if rest != name:
            try:
                return cls.holdout(float(rest))
            except ValueError:
                pass
        raise MeasureError(
            "INVALID_PARTITION",
            f"unknown partition rule {spec!r}",
            value=spec,
            fix=_FIX,
        )

    def _held_out(self, doc_ids: Sequence[str]) -> set[int]:
        """Positions of the evaluation documents."""
        n = len(doc_ids)
        if self.kind == "every":
            return {k for k in range(n) if k % self.modulus == self.modulus - 1}
        if self.kind == "sha256-mod":
            return {k for k, d in enumerate(doc_ids) if int(_sha256(d)[:8], 16) % self.modulus == 0}
        share = round(self.fraction * n)
        count = min(max(share, 1 if self.fraction > 0 else 0), n - 1) if n >= 2 else 0
        return set(sorted(range(n), key=lambda k: _sha256(doc_ids[k]))[:count])

    def split(self, doc_ids: Sequence[str]) -> tuple[list[str], list[str]]:
        """(train, eval) document ids, order kept.

        Raises:
            MeasureError(INVALID_PARTITION): a ``sha256-mod``/``every`` rule leaves a side
                empty, or there are no documents.
        """
        held = self._held_out(doc_ids)
        train = [d for k, d in enumerate(doc_ids) if k not in held]
        evaluation = [d for k, d in enumerate(doc_ids) if k in held]
        if not train or (not evaluation and self.kind != "holdout"):
            raise MeasureError(
                "INVALID_PARTITION",
                f"rule {self.name} puts all {len(doc_ids)} documents on one side",
                value=self.name,
                fix="use a corpus with more documents or a different rule",
            )
        return train, evaluation


@dataclass(frozen=True)
class Partition:
    """The two sides of one corpus under one rule."""

    rule: str
    train: Corpus
    eval: Corpus


def partition(corpus: Corpus, *, rule: PartitionRule | str) -> Partition:
    """Split ``corpus`` by documents; each side is labelled ``"<rule>:train"`` / ``":eval"``.

    Example::

        >>> from tokembed.measure.corpus import documents_corpus
        >>> files = documents_corpus("c", [(f"f{i}.txt", f"text {i}\\n") for i in range(10)])
        >>> p = partition(files, rule="holdout0.2")
        >>> len(p.train.documents), p.eval.documents
        (8, ('f4.txt', 'f9.txt'))

    Raises:
        MeasureError(INVALID_PARTITION): see :meth:`PartitionRule.split`.
    """
    rule = PartitionRule.parse(rule) if isinstance(rule, str) else rule
    train, held = rule.split(corpus.documents)
    return Partition(
        rule=rule.name,
        train=corpus.select(train, partition=f"{rule.name}:train"),
        eval=corpus.select(held, partition=f"{rule.name}:eval"),
    )


def partition_parallel(
    corpora: Mapping[str, Corpus], *, rule: PartitionRule | str
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
