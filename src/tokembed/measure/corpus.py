"""Named corpora and their records: which files, which rule, which exact text was measured.

A :class:`Corpus` is an ordered tuple of sentences, each with a document id and a
sentence id, plus the files it came from. Two readers exist:

* CoNLL-U (``.conllu``, ``.conllu.gz``): sentences are the ``# text`` lines; the
  measured text joins them with LF and adds a final LF (join rule ``lf+final``);
* plain text (anything else, ``.gz`` decompressed): the measured text is the file
  content unchanged (join rule ``verbatim``); its non-empty lines are the
  sentences and the whole file is one document.

:meth:`Corpus.record` states everything a reader needs to reproduce a number: file
paths with their SHA-256 (of the bytes on disk), the document and join rules, byte,
character (code point), sentence and document counts, and the SHA-256 of the exact
UTF-8 text measured. :func:`align` checks that corpora are parallel (the same
sentence ids in the same order).

Example::

    >>> ru = load_corpus(".../ud-pud-2.15/ru_pud-ud-test.conllu")  # doctest: +SKIP
    >>> ru.record().bytes, ru.record().sentences, ru.record().documents
    (213766, 1000, 397)
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from tokembed.errors import MeasureError, UsageError
from tokembed.measure.conllu import Sentence, parse_conllu, resolve_doc_rule

__all__ = [
    "JOIN_RULES",
    "Corpus",
    "CorpusRecord",
    "FileRecord",
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


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A source file: its path, the SHA-256 of its bytes on disk, and their count."""

    path: str
    sha256: str
    bytes: int


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
        if self.join not in JOIN_RULES:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"unknown join rule {self.join!r}",
                value=self.join,
                fix=f"use one of {sorted(JOIN_RULES)}",
            )

    @cached_property
    def text(self) -> str:
        """The exact text measured (see :data:`JOIN_RULES`)."""
        if self.join == "verbatim":
            return "".join(t for _, t in self.raw)
        if not self.sentences:
            return ""
        return "\n".join(s.text for s in self.sentences) + "\n"

    @cached_property
    def documents(self) -> tuple[str, ...]:
        """Document ids in order of first appearance."""
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
        """Raise MeasureError(EMPTY_CORPUS) when there is nothing to measure."""
        if not self.text:
            raise MeasureError(
                "EMPTY_CORPUS",
                f"corpus {self.name!r}"
                + (f" ({self.partition})" if self.partition else "")
                + " has no text to measure",
                value=[f.path for f in self.files],
                fix="pass a file with at least one sentence or non-empty line",
            )


def _read(path: Path) -> tuple[str, FileRecord]:
    if not path.is_file():
        raise UsageError(
            "FILE_NOT_FOUND", f"no such file: {path}", value=str(path), fix="check the path"
        )
    try:
        data = path.read_bytes()
        record = FileRecord(
            path=str(path), sha256=hashlib.sha256(data).hexdigest(), bytes=len(data)
        )
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # unreadable, or a damaged/not-gzip .gz
        raise MeasureError(
            "UNREADABLE_INPUT",
            f"cannot read {path}: {exc}",
            value=str(path),
            fix="check the file's permissions, or re-create a damaged .gz",
        ) from None
    try:
        return data.decode("utf-8"), record
    except UnicodeDecodeError as exc:
        raise MeasureError(
            "INVALID_UTF8",
            f"{path} is not UTF-8 (byte {exc.start})",
            value=str(path),
            fix="convert the file to UTF-8",
        ) from None


def _stem(path: Path) -> str:
    name = path.name
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
    path: str | Path, *, doc_rule: str = "auto", name: str | None = None, allow_empty: bool = False
) -> Corpus:
    """Read a CoNLL-U or plain-text corpus (format chosen by file name, see module docstring).

    Raises:
        UsageError(FILE_NOT_FOUND); MeasureError(MALFORMED_CONLLU), MeasureError(INVALID_UTF8),
        MeasureError(EMPTY_CORPUS) unless ``allow_empty``.
    """
    path = Path(path)
    text, record = _read(path)
    label = name or _stem(path)
    if path.name.endswith((".conllu", ".conllu.gz")):
        rule = resolve_doc_rule(doc_rule, path)
        sentences = parse_conllu(text.removeprefix("\ufeff"), source=str(path), doc_rule=rule)
        corpus = Corpus(name=label, sentences=tuple(sentences), files=(record,), doc_rule=rule)
    else:
        corpus = text_corpus(label, text, doc_id=path.name, files=(record,))
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
