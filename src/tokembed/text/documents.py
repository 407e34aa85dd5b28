"""Documents in text input: where one ends and the next begins, read as a stream.

A *document rule* says how a text file is cut into documents:

* ``"line"`` — every line is a document (its line feed, and a carriage return before
  it, belong to no document);
* ``"blank-line"`` — documents are separated by one or more blank lines (lines of
  nothing but spaces, tabs or a carriage return); a document's lines are joined by
  line feeds;
* ``"file"`` — each file is one document, its text exactly as read;
* ``"sep:STRING"`` — documents are the pieces between occurrences of ``STRING``
  (``sep:<|endoftext|>``), as ``str.split`` cuts them; the separator belongs to none.

A JSON Lines file (:mod:`.jsonl`) has one document per record whatever the rule; a
CoNLL-U file contributes its sentences' texts, one per line, and the rule cuts those
lines. Empty documents are skipped everywhere. :func:`iter_document_pieces` reads a
:class:`~tokembed.text.ranges.ByteRange` and yields each document as one or more
pieces: with ``max_piece_chars`` a document longer than that is cut where every
pre-tokenizer preset splits the parts like the whole (:func:`~.sources.safe_cut`), so a
file-sized document is never held. :attr:`DocumentRule.cut_after` names the bytes after
which a file may be cut into ranges without cutting a document.

Example::

    >>> rule = parse_doc_rule("blank-line")
    >>> list(split_documents(["one\\ntwo\\n\\n", "\\nthree\\n"], rule))
    ['one\\ntwo', 'three']
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from tokembed.errors import MeasureError, UsageError
from tokembed.text.conllu import conllu_sentences, is_conllu
from tokembed.text.jsonl import is_jsonl, jsonl_texts
from tokembed.text.ranges import ByteRange, iter_range_text
from tokembed.text.sources import iter_lines, read_source, safe_cut

__all__ = [
    "DOC_RULES",
    "INPUT_FORMATS",
    "DocumentRule",
    "input_format_of",
    "iter_document_pieces",
    "parse_doc_rule",
    "split_documents",
]

DOC_RULES = ("line", "blank-line", "file", "sep:STRING")
# How a file's bytes become documents: by its name ("auto"), or as said for every file.
INPUT_FORMATS = ("auto", "text", "jsonl", "conllu")
_BLANK = " \t\r"


@dataclass(frozen=True, slots=True)
class DocumentRule:
    """A parsed document rule: ``kind`` is line, blank-line, file or sep (with ``sep``)."""

    kind: str
    sep: str = ""

    @property
    def spec(self) -> str:
        """The rule as written (``"sep:<|endoftext|>"``)."""
        return f"sep:{self.sep}" if self.kind == "sep" else self.kind

    @property
    def cut_after(self) -> bytes | None:
        """Bytes after which a file may be cut into ranges without cutting a document.

        None when no such cut exists: one document per file, or a separator that can
        overlap itself (``"aa"``), where a cut found from the middle of a file might not
        be one that splitting from its start finds.
        """
        if self.kind == "line":
            return b"\n"
        if self.kind == "blank-line":
            return b"\n\n"  # an empty line: the document before has ended
        if self.kind == "sep" and not _has_border(self.sep):
            return self.sep.encode("utf-8", "surrogatepass")
        return None


def _has_border(sep: str) -> bool:
    """Whether a proper prefix of ``sep`` is also its suffix (then occurrences can overlap)."""
    return any(sep[:k] == sep[-k:] for k in range(1, len(sep)))


def parse_doc_rule(text: str) -> DocumentRule:
    """The :class:`DocumentRule` that ``text`` names (see the module docstring).

    Raises:
        UsageError(INVALID_ARGUMENT): an unknown rule, or ``sep:`` with nothing after it.
    """
    if text in ("line", "blank-line", "file"):
        return DocumentRule(kind=text)
    if isinstance(text, str) and text.startswith("sep:") and len(text) > 4:
        return DocumentRule(kind="sep", sep=text[4:])
    raise UsageError(
        "INVALID_ARGUMENT",
        f"unknown document rule {text!r}",
        value=text,
        fix="use line, blank-line, file or sep:STRING (e.g. sep:<|endoftext|>)",
    )


def input_format_of(name: str, input_format: str = "auto") -> str:
    """How the file ``name`` is read: ``"jsonl"``, ``"conllu"`` or ``"text"``.

    Raises:
        UsageError(INVALID_ARGUMENT): ``input_format`` is not one of :data:`INPUT_FORMATS`.
    """
    if input_format not in INPUT_FORMATS:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"unknown input format {input_format!r}",
            value=input_format,
            fix="use auto (by file name), text, jsonl or conllu",
        )
    if input_format != "auto":
        return input_format
    if is_jsonl(name):
        return "jsonl"
    return "conllu" if is_conllu(name) else "text"


def _separated(pieces: Iterable[str], sep: str) -> Iterator[tuple[str, bool]]:
    """``str.split(sep)`` of the joined pieces, as (text, ends_document) without holding it.

    The last part of each split stays pending (the next piece may continue it or the
    separator); splitting the rest of the text from there finds what splitting the whole
    finds, because an occurrence that starts inside the pending part but beyond the last
    one found cannot end before the pieces do.
    """
    buf = ""
    for piece in pieces:
        start = max(len(buf) - len(sep) + 1, 0)
        buf += piece
        if buf.find(sep, start) < 0:
            continue
        *done, buf = buf.split(sep)
        for text in done:
            yield text, True
    yield buf, True


def _documents(pieces: Iterable[str], rule: DocumentRule) -> Iterator[tuple[str, bool]]:
    if rule.kind == "file":
        for piece in pieces:
            yield piece, False
        yield "", True
    elif rule.kind == "sep":
        yield from _separated(pieces, rule.sep)
    elif rule.kind == "line":
        for line in iter_lines(pieces):
            yield line.removesuffix("\r"), True
    else:
        paragraph: list[str] = []
        for line in iter_lines(pieces):
            if line.strip(_BLANK):
                paragraph.append(line.removesuffix("\r"))
            elif paragraph:
                yield "\n".join(paragraph), True
                paragraph = []
        if paragraph:
            yield "\n".join(paragraph), True


def _cut_long(
    parts: Iterable[tuple[str, bool]], max_piece_chars: int | None
) -> Iterator[tuple[str, bool]]:
    """Join a document's parts; one longer than ``max_piece_chars`` leaves at safe cuts."""
    held, searched = "", 0
    for text, ends in parts:
        held += text
        while max_piece_chars is not None and len(held) > max_piece_chars:
            cut = safe_cut(held, max(max_piece_chars, searched - 2))
            if cut is None or cut >= len(held):
                searched = len(held)  # search only the new text next time
                break
            yield held[:cut], False
            held, searched = held[cut:], 0
        if ends:
            if held:
                yield held, True
            held, searched = "", 0


def split_documents(pieces: Iterable[str], rule: DocumentRule) -> Iterator[str]:
    """The documents of text given in pieces (cut anywhere) under ``rule``; empty ones skipped."""
    for text, _ in _cut_long(_documents(pieces, rule), None):
        yield text


def _line_number(r: ByteRange, line_no: int) -> int:
    """``line_no`` counted in its range, counted from the start of its file instead."""
    if r.start == 0:
        return line_no
    with open(r.path, "rb") as f:
        before, left = 0, r.start
        while left:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            before += block.count(b"\n")
            left -= len(block)
    return before + line_no


def iter_document_pieces(
    r: ByteRange,
    *,
    rule: DocumentRule,
    input_format: str = "auto",
    field: str = "text",
    errors: str = "strict",
    max_piece_chars: int | None = None,
    stdin: BinaryIO | None = None,
) -> Iterator[tuple[str, bool]]:
    """The documents of one range as ``(text, ends_document)`` pieces, in order.

    A document is one piece unless ``max_piece_chars`` is set and it is longer: then it
    leaves in pieces cut at :func:`~.sources.safe_cut` points, the last with
    ``ends_document`` True. Empty documents are skipped. A CoNLL-U file is read whole
    (it is one range).

    Example::

        >>> r = ByteRange(path="c.jsonl", index=0, start=0, stop=None)  # doctest: +SKIP
        >>> list(iter_document_pieces(r, rule=parse_doc_rule("line")))  # doctest: +SKIP
        [('first record', True), ('second', True)]

    Raises:
        UsageError(FILE_NOT_FOUND, INVALID_ARGUMENT): no such file, an unknown format.
        MeasureError(UNREADABLE_INPUT, INPUT_NOT_UTF8, INPUT_TOO_LARGE): see :mod:`.ranges`.
        MeasureError(MALFORMED_JSONL, MALFORMED_CONLLU): a record or sentence block is bad.
    """
    kind = input_format_of(r.path, input_format)
    if kind == "conllu":
        source = read_source(r.path, stdin=stdin, errors=errors)
        _, sentences = conllu_sentences(source)
        texts: Iterable[str] = (s.text + "\n" for s in sentences)
        yield from _cut_long(_documents(texts, rule), max_piece_chars)
        return
    pieces = iter_range_text(r, errors=errors, stdin=stdin)
    if kind == "text":
        yield from _cut_long(_documents(pieces, rule), max_piece_chars)
        return
    try:
        for text in jsonl_texts(pieces, field=field, name=r.path):
            if text:
                yield from _cut_long([(text, True)], max_piece_chars)
    except MeasureError as exc:
        if exc.code != "MALFORMED_JSONL" or r.start == 0 or not Path(r.path).is_file():
            raise
        name, line_no = cast("tuple[str, int]", exc.value)
        line = _line_number(r, line_no)
        message = exc.message.replace(f"{name}:{line_no}:", f"{name}:{line}:", 1)
        raise MeasureError(exc.code, message, value=(name, line), fix=exc.fix) from None
