"""Reading sentences out of CoNLL-U files, keeping document and sentence ids.

Only the comment lines matter here: ``# newdoc id = …`` (optional), ``# sent_id = …``
and ``# text = …``. Token lines are skipped; the measured text is the ``# text``
line exactly as written (nothing is rebuilt from tokens or ``SpaceAfter``).

A *document rule* names how each sentence gets its document id, and is recorded
with the corpus:

* ``"newdoc"`` — the most recent ``# newdoc id`` (sentences before any such line
  belong to a document named after the file);
* ``"sent-prefix:N"`` — the first ``N`` characters of the sentence id. PUD needs
  ``sent-prefix:6`` because its ``newdoc`` lines differ by language (repeated per
  sentence in Arabic and Chinese, absent in Indonesian, Korean and Thai);
* ``"auto"`` — ``sent-prefix:6`` for a PUD file (``*_pud-*``), else ``newdoc``.

:func:`is_conllu` tells a CoNLL-U file by its name (``.conllu``, ``.conllu.gz``; whether it
is compressed is read from its content, see :mod:`.sources`); :func:`conllu_sentences` gives the
sentences of such a file once read. Nothing here reads files, joins texts or hashes them.

Example::

    >>> s = parse_conllu("# sent_id = n01001011\\n# text = Hi.\\n1\\tHi\\n", source="x",
    ...                  doc_rule="sent-prefix:6")
    >>> s[0]
    Sentence(doc_id='n01001', sent_id='n01001011', text='Hi.')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import regex

from tokembed.errors import MeasureError, UsageError
from tokembed.text.sources import SourceText

__all__ = ["Sentence", "conllu_sentences", "is_conllu", "parse_conllu", "resolve_doc_rule"]

_NEWDOC = regex.compile(r"#\s*newdoc(?:\s+id\s*=\s*(.*))?")
_SENT_ID = regex.compile(r"#\s*sent_id\s*=\s*(.*)")
_TEXT = regex.compile(r"#\s*text\s*=\s?(.*)")


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence (or line) of a corpus with the ids that group it."""

    doc_id: str
    sent_id: str
    text: str


def resolve_doc_rule(rule: str, path: Path) -> str:
    """The concrete rule (``newdoc`` or ``sent-prefix:N``) that ``rule`` means for ``path``."""
    if rule == "auto":
        return "sent-prefix:6" if "_pud-" in path.name else "newdoc"
    if rule == "newdoc":
        return rule
    digits = rule.removeprefix("sent-prefix:")
    if digits != rule and digits.isdigit() and int(digits) > 0:
        return rule
    raise UsageError(
        "INVALID_ARGUMENT",
        f"unknown document rule {rule!r}",
        value=rule,
        fix="use 'auto', 'newdoc' or 'sent-prefix:N' with N > 0",
    )


def parse_conllu(text: str, *, source: str, doc_rule: str) -> list[Sentence]:
    """Sentences of CoNLL-U ``text`` under a concrete ``doc_rule`` (see module docstring).

    Raises:
        MeasureError(MALFORMED_CONLLU): a sentence block lacks ``# sent_id`` or
            ``# text``, or has either twice.
    """
    prefix = int(doc_rule.split(":", 1)[1]) if doc_rule.startswith("sent-prefix:") else 0
    newdoc = Path(source).name
    out: list[Sentence] = []
    sent_id: str | None = None
    sent_text: str | None = None
    has_tokens = False
    line_no = 0

    def finish() -> None:
        nonlocal sent_id, sent_text, has_tokens
        if sent_id is None and sent_text is None and not has_tokens:
            return
        if sent_id is None or sent_text is None:
            missing = "# sent_id" if sent_id is None else "# text"
            raise MeasureError(
                "MALFORMED_CONLLU",
                f"{source}: the sentence ending at line {line_no} has no {missing} line",
                value=source,
                fix="give every sentence block a '# sent_id = …' and a '# text = …' line",
            )
        doc = sent_id[:prefix] if prefix else newdoc
        out.append(Sentence(doc_id=doc, sent_id=sent_id, text=sent_text))
        sent_id, sent_text, has_tokens = None, None, False

    for line_no, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            finish()
            continue
        if not line.startswith("#"):
            has_tokens = True
            continue
        if (m := _NEWDOC.fullmatch(line)) is not None:
            finish()
            newdoc = (m.group(1) or "").strip() or f"{Path(source).name}#{line_no}"
        elif (m := _SENT_ID.fullmatch(line)) is not None:
            if sent_id is not None:
                finish()  # a new sentence started without a blank line
            sent_id = m.group(1).strip()
        elif (m := _TEXT.fullmatch(line)) is not None:
            if sent_text is not None:
                raise MeasureError(
                    "MALFORMED_CONLLU",
                    f"{source}:{line_no}: a second '# text' line in one sentence",
                    value=source,
                    fix="separate sentences by a blank line",
                )
            sent_text = m.group(1)
    finish()
    return out


def is_conllu(name: str) -> bool:
    """Whether the file ``name`` is read as CoNLL-U: it ends in ``.conllu`` or ``.conllu.gz``."""
    return name.endswith((".conllu", ".conllu.gz"))


def conllu_sentences(source: SourceText, *, doc_rule: str = "auto") -> tuple[str, list[Sentence]]:
    """The concrete document rule for ``source`` and its sentences under it.

    A byte-order mark before the first line is dropped.

    Example::

        >>> from tokembed.text.sources import read_source
        >>> rule, sents = conllu_sentences(read_source("ru_pud-ud-test.conllu"))  # doctest: +SKIP
        >>> rule, len(sents)  # doctest: +SKIP
        ('sent-prefix:6', 1000)

    Raises:
        UsageError(INVALID_ARGUMENT): an unknown ``doc_rule`` (see :func:`resolve_doc_rule`).
        MeasureError(MALFORMED_CONLLU): see :func:`parse_conllu`.
    """
    rule = resolve_doc_rule(doc_rule, Path(source.name))
    text = source.text.removeprefix("\ufeff")
    return rule, parse_conllu(text, source=source.name, doc_rule=rule)
