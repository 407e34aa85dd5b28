"""JSON Lines input: one JSON object per line, whose text is one named field.

A file is read as JSON Lines when its name ends in ``.jsonl`` or ``.ndjson`` (``.gz``
after either is recognised by content, as for every file, see :mod:`.sources`), or when
the caller says so. Each non-blank line must be a JSON object whose ``field`` is a
string; that string is one record's text. Lines are read from the streamed text (see
:func:`~tokembed.text.ranges.iter_range_text`), so a file of any size is never held.

Example::

    >>> list(jsonl_texts(['{"text": "Hi."}\\n{"text": "Ещё."}\\n'], field="text", name="x.jsonl"))
    ['Hi.', 'Ещё.']
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from tokembed.errors import MeasureError
from tokembed.text.sources import iter_lines

__all__ = ["JSONL_SUFFIXES", "is_jsonl", "jsonl_texts", "record_text"]

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
_SHOWN = 60  # characters of a bad line echoed in the error


def is_jsonl(name: str) -> bool:
    """Whether the file ``name`` is read as JSON Lines by its name (``.jsonl``, ``.ndjson``, + ``.gz``)."""
    return name.endswith(JSONL_SUFFIXES)


def _malformed(name: str, line_no: int, why: str, line: str) -> MeasureError:
    shown = line if len(line) <= _SHOWN else line[:_SHOWN] + "…"
    return MeasureError(
        "MALFORMED_JSONL",
        f"{name}:{line_no}: {why}: {shown!r}",
        value=(name, line_no),
        fix="give every line a JSON object whose text field is a string, or name the field",
    )


def record_text(line: str, *, field: str, name: str = "<jsonl>", line_no: int = 1) -> str | None:
    """The text of one JSON Lines line: ``field`` of its object; None for a blank line.

    Raises:
        MeasureError(MALFORMED_JSONL): the line is not a JSON object, lacks ``field``, or
            its ``field`` is not a string (the message names the file and line).
    """
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not JSON"
        raise _malformed(name, line_no, f"not JSON ({why})", line) from None
    if not isinstance(record, dict):
        raise _malformed(name, line_no, f"a JSON {type(record).__name__}, not an object", line)
    if field not in record:
        raise _malformed(name, line_no, f"no field {field!r}", line)
    text = record[field]
    if not isinstance(text, str):
        kind = "null" if text is None else type(text).__name__
        raise _malformed(name, line_no, f"field {field!r} is {kind}, not a string", line)
    return text


def jsonl_texts(
    pieces: Iterable[str], *, field: str, name: str, first_line: int = 1
) -> Iterator[str]:
    """The records' texts of JSON Lines text given in pieces (cut anywhere), in order.

    ``first_line`` numbers the first line in error messages (a range that starts inside
    its file knows where it starts). Blank lines are skipped.

    Raises:
        MeasureError(MALFORMED_JSONL): see :func:`record_text`.
    """
    for line_no, line in enumerate(iter_lines(pieces), first_line):
        text = record_text(line, field=field, name=name, line_no=line_no)
        if text is not None:
            yield text
