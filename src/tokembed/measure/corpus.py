"""Named corpora and their records: which files, which rule, which exact text was measured.

A :class:`Corpus` is an ordered tuple of sentences, each with a document id and a
sentence id, plus the files it came from (read by :mod:`tokembed.text.sources`: files, folders,
globs, ``-``, gzip recognised by content). Two formats exist:

* CoNLL-U (``.conllu``, ``.conllu.gz``): sentences are the ``# text`` lines; the
  measured text joins them with LF and adds a final LF (join rule ``lf+final``);
* plain text (any other name): the measured text is the files' contents unchanged,
  in order (join rule ``verbatim``); each file is one document and its non-empty
  lines are its sentences. Each file is encoded on its own (:attr:`Corpus.units`).

:meth:`Corpus.record` states everything a reader needs to reproduce a number: file
paths with their SHA-256 (of the bytes on disk), the document and join rules, byte,
character (code point), sentence and document counts, and the SHA-256 of the exact
UTF-8 text measured. :func:`align` checks that corpora are parallel (the same
sentence ids in the same order).

Example::

    >>> ru = load_corpus(".../ud-pud-2.15/ru_pud-ud-test.conllu")  # doctest: +SKIP
    >>> ru.record().bytes, ru.record().sentences, ru.record().documents  # doctest: +SKIP
    (213766, 1000, 397)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO, Literal

from tokembed.errors import MeasureError, UsageError, require_choice
from tokembed.text.conllu import Sentence, conllu_sentences, is_conllu
from tokembed.text.sources import (
    MAX_DECOMPRESSED_BYTES,
    STDIN,
    FileRecord,
    expand_paths,
    read_source,
)

__all__ = [
    "JOIN_RULES",
    "Corpus",
    "CorpusRecord",
    "align",
    "documents_corpus",
    "load_corpus",
    "text_corpus",
]

JoinRule = Literal["lf+final", "verbatim"]
JOIN_RULES: dict[str, str] = {
    "lf+final": "sentences joined by LF, plus a final LF",
    "verbatim": "file contents unchanged, concatenated in the order given",
}


@dataclass(frozen=True, kw_only=True)
class CorpusRecord:
    """What was measured, precisely enough to reproduce it (see module docstring)."""

    name: str
    format: str
    files: tuple[FileRecord, ...]
    doc_rule: str
    join_rule: str
    bytes: int
    chars: int
    sentences: int
    documents: int
    text_sha256: str
    partition: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["files"] = [asdict(f) for f in self.files]
        d["join_description"] = JOIN_RULES[self.join_rule]
        return d


@dataclass(frozen=True, kw_only=True)
class Corpus:
    """Sentences with document/sentence ids, the files they came from and the rules used."""

    name: str
    sentences: tuple[Sentence, ...]
    files: tuple[FileRecord, ...] = ()
    format: str = "conllu"
    doc_rule: str = "newdoc"
    join: JoinRule = "lf+final"
    partition: str | None = None
    # For ``verbatim`` corpora: (document id, its exact text), in order.
    raw: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        require_choice(self.join, JOIN_RULES, "join rule", fix=f"use one of {sorted(JOIN_RULES)}")

    @cached_property
    def text(self) -> str:
        """The exact text measured (see :data:`JOIN_RULES`)."""
        if self.join == "verbatim":
            return "".join(t for _, t in self.raw)
        if not self.sentences:
            return ""
        return "\n".join(s.text for s in self.sentences) + "\n"

    @cached_property
    def units(self) -> tuple[str, ...]:
        """The texts encoded one at a time; their token counts add up to the corpus's.

        Each document of a ``verbatim`` corpus is a unit of its own (files are
        independent, so no token spans two of them); sentences joined by LF form one
        unit, the text above.
        """
        if self.join == "verbatim":
            return tuple(t for _, t in self.raw if t)
        return (self.text,) if self.text else ()

    @cached_property
    def documents(self) -> tuple[str, ...]:
        """Document ids in order of first appearance (every file of a plain-text corpus,
        an empty one included)."""
        if self.join == "verbatim":
            return tuple(dict.fromkeys(d for d, _ in self.raw))
        return tuple(dict.fromkeys(s.doc_id for s in self.sentences))

    @property
    def sentence_ids(self) -> tuple[str, ...]:
        return tuple(s.sent_id for s in self.sentences)

    def select(self, doc_ids: Iterable[str], *, partition: str) -> Corpus:
        """The sub-corpus of the given documents (order kept), labelled ``partition``."""
        keep = set(doc_ids)
        return Corpus(
            name=self.name,
            sentences=tuple(s for s in self.sentences if s.doc_id in keep),
            files=self.files,
            format=self.format,
            doc_rule=self.doc_rule,
            join=self.join,
            partition=partition,
            raw=tuple((d, t) for d, t in self.raw if d in keep),
        )

    def record(self) -> CorpusRecord:
        data = self.text.encode("utf-8")
        return CorpusRecord(
            name=self.name,
            format=self.format,
            files=self.files,
            doc_rule=self.doc_rule,
            join_rule=self.join,
            bytes=len(data),
            chars=len(self.text),
            sentences=len(self.sentences),
            documents=len(self.documents),
            text_sha256=hashlib.sha256(data).hexdigest(),
            partition=self.partition,
        )

    def require_text(self) -> None:
        """Raise MeasureError(EMPTY_INPUT) when there is nothing to measure."""
        if not self.text:
            raise MeasureError(
                "EMPTY_INPUT",
                f"corpus {self.name!r}"
                + (f" ({self.partition})" if self.partition else "")
                + " has no text to measure",
                value=[f.path for f in self.files],
                fix="pass a file with at least one sentence or non-empty line",
            )


def _label(source: str) -> str:
    """A corpus name from its argument: the file or folder name without format suffixes."""
    if source == STDIN:
        return "stdin"
    if any(c in source for c in "*?["):  # a glob names no single file
        return source
    name = Path(source).name
    for suffix in (".gz", ".conllu", ".txt"):
        name = name.removesuffix(suffix)
    return name


def documents_corpus(
    name: str, documents: Sequence[tuple[str, str]], *, files: tuple[FileRecord, ...] = ()
) -> Corpus:
    """A verbatim corpus of ``(document id, text)`` pairs; non-empty lines are the sentences.

    The measured text is the documents' texts concatenated unchanged.
    """
    sentences = tuple(
        Sentence(doc, f"{doc}:{k}", line)
        for doc, text in documents
        for k, line in enumerate((line for line in text.split("\n") if line), 1)
    )
    return Corpus(
        name=name,
        sentences=sentences,
        files=files,
        format="text",
        doc_rule="file",
        join="verbatim",
        raw=tuple(documents),
    )


def text_corpus(
    name: str, text: str, *, doc_id: str | None = None, files: tuple[FileRecord, ...] = ()
) -> Corpus:
    """A verbatim corpus of one document (see :func:`documents_corpus`)."""
    return documents_corpus(name, [(doc_id or name, text)], files=files)


def load_corpus(
    source: str | Path,
    *,
    doc_rule: str = "auto",
    name: str | None = None,
    allow_empty: bool = False,
    stdin: BinaryIO | None = None,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> Corpus:
    """Read a CoNLL-U or plain-text corpus from a file, folder, glob or ``"-"``.

    Files are read by :func:`~tokembed.text.sources.read_source` (gzip by content).
    CoNLL-U is recognised by name (``.conllu``, ``.conllu.gz``); everything else is
    plain text, one document per file (see module docstring). A folder or glob gives
    one corpus of all its files; it may not mix CoNLL-U and plain text.

    Raises:
        UsageError(FILE_NOT_FOUND); UsageError(INVALID_ARGUMENT): CoNLL-U and plain
        text mixed. MeasureError(MALFORMED_CONLLU, UNREADABLE_INPUT, INPUT_TOO_LARGE,
        INPUT_NOT_UTF8), MeasureError(EMPTY_INPUT) unless ``allow_empty``.
    """
    source = str(source)
    sources = [
        read_source(n, stdin=stdin, max_decompressed_bytes=max_decompressed_bytes)
        for n in expand_paths([source])
    ]
    records = tuple(s.record for s in sources if s.record is not None)
    label = name or _label(source)
    kinds = {is_conllu(s.name) for s in sources}
    if kinds == {True, False}:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{source} mixes CoNLL-U and plain-text files",
            value=source,
            fix="pass the CoNLL-U files and the plain-text files as separate corpora",
        )
    if kinds == {True}:
        sentences: list[Sentence] = []
        rules = []
        for s in sources:
            rule, file_sentences = conllu_sentences(s, doc_rule=doc_rule)
            rules.append(rule)
            sentences += file_sentences
        corpus = Corpus(
            name=label,
            sentences=tuple(sentences),
            files=records,
            doc_rule="+".join(dict.fromkeys(rules)),
        )
    else:
        corpus = documents_corpus(label, [(s.name, s.text) for s in sources], files=records)
    if not allow_empty:
        corpus.require_text()
    return corpus


def align(corpora: Mapping[str, Corpus] | Sequence[Corpus]) -> dict[str, Corpus]:
    """Check that corpora are parallel: the same sentence ids in the same order.

    Returns the corpora keyed by name. Documents follow the first corpus's ids
    (with PUD's ``sent-prefix:6`` rule they agree in every language).

    Raises:
        MeasureError(UNALIGNED_PARALLEL_CORPUS): counts or ids differ; the message
            names the first differing position and both ids.
    """
    named = dict(corpora) if isinstance(corpora, Mapping) else {c.name: c for c in corpora}
    items = list(named.items())
    if not items:
        return named
    ref_name, ref = items[0]
    ref_ids = ref.sentence_ids
    for name, corpus in items[1:]:
        ids = corpus.sentence_ids
        if ids == ref_ids:
            continue
        pos = next((k for k, (a, b) in enumerate(zip(ref_ids, ids, strict=False)) if a != b), None)
        if pos is None:
            detail = f"{ref_name} has {len(ref_ids)} sentences, {name} has {len(ids)}"
        else:
            detail = f"sentence #{pos}: {ref_name} has {ref_ids[pos]!r}, {name} has {ids[pos]!r}"
        raise MeasureError(
            "UNALIGNED_PARALLEL_CORPUS",
            f"{name} is not parallel to {ref_name}: {detail}",
            value=(ref_name, name, pos),
            fix="pass translations of the same sentences with the same sentence ids in the same order",
        )
    return named
