"""Decoding ids to bytes and text, at once or as a stream.

Bytes are joined before they are read as UTF-8, because one token may hold only
part of a character (a Cyrillic letter is 2 bytes, an emoji 4). A special id
decodes to its name's spelling (the first registered name for an alias).

Example::

    >>> from tokembed.tokenizer.model import BPETables
    >>> d = DecodeTable.from_tables(BPETables.byte_level(merges=[(208, 159)]))
    >>> s = d.stream(); (s.feed([208]), s.feed([159, 33]), s.flush())
    ('', 'П!', '')
"""

from __future__ import annotations

import codecs
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from tokembed.errors import TokenizerError, UnknownTokenError, UsageError, require_choice
from tokembed.tokenizer._utf8 import invalid_utf8_error
from tokembed.tokenizer.model import BPETables

__all__ = ["DecodeTable", "StreamDecoder"]

# "strict" is our default (tiktoken's is "replace"): a token sequence that ends inside
# a character is reported with its byte offset instead of silently showing U+FFFD.
Errors = Literal["strict", "replace", "ignore"]
_POLICIES = ("strict", "replace", "ignore")


def _check_errors(errors: str) -> None:
    require_choice(
        errors,
        _POLICIES,
        "decode error policy",
        fix="pass errors='strict', 'replace' (U+FFFD) or 'ignore' (drop invalid bytes)",
    )


def _invalid(offset: int, reason: str) -> TokenizerError:
    return invalid_utf8_error(
        offset,
        reason,
        what="decoded bytes",
        fix="decode with errors='replace' to show U+FFFD, or use decode_bytes() for the raw bytes",
    )


def _as_ids(ids: Iterable[int]) -> list[int]:
    """``ids`` as a list of Python ints; a tensor or array is read through ``tolist()``.

    An element of a tensor is itself a tensor that hashes by identity, so without this it
    would be reported as an unknown id although its value is known.
    """
    tolist = getattr(ids, "tolist", None)
    items = tolist() if callable(tolist) and not isinstance(ids, list | tuple) else ids
    out = [items] if isinstance(items, int) else list(items)
    for pos, i in enumerate(out):
        if type(i) is int:
            continue
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"id {i!r} at position {pos} is a {type(i).__name__}, not an integer",
                value=i,
                fix="decode a flat sequence of integer ids (a 1-D integer tensor is accepted)",
            )
        out[pos] = operator.index(i)
    return out


@dataclass(frozen=True)
class DecodeTable:
    """id → bytes for ordinary and special ids."""

    pieces: Mapping[int, bytes]

    @classmethod
    def from_tables(cls, tables: BPETables) -> DecodeTable:
        return cls.from_pieces(tables.pieces, tables.specials)

    @classmethod
    def from_pieces(cls, pieces: Mapping[int, bytes], specials: Mapping[str, int]) -> DecodeTable:
        """Ordinary pieces plus each special id spelled as its name's UTF-8."""
        table: dict[int, bytes] = dict(pieces)
        for name, sid in specials.items():
            table.setdefault(sid, name.encode("utf-8"))
        return cls(table)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes; raises UnknownTokenError(UNKNOWN_TOKEN_ID) naming id and position
        (also a ``KeyError``, as in tiktoken), UsageError(INVALID_ARGUMENT) for an id that is
        not an integer (a float or a bool would otherwise pass as the id it equals)."""
        ids = _as_ids(ids)
        pieces = self.pieces
        try:
            return b"".join([pieces[i] for i in ids])
        except (KeyError, TypeError):
            pos = next(k for k, i in enumerate(ids) if i not in pieces)
            raise UnknownTokenError(
                "UNKNOWN_TOKEN_ID",
                f"id {ids[pos]!r} at position {pos} is not defined by this tokenizer",
                value=ids[pos],
                fix="decode ids produced by this tokenizer (check its address hash)",
            ) from None

    def decode(self, ids: Iterable[int], *, errors: Errors = "strict") -> str:
        """Text of ``ids``; strict decoding raises TokenizerError(INVALID_UTF8) with the offset."""
        _check_errors(errors)
        data = self.decode_bytes(ids)
        try:
            return data.decode("utf-8", errors)
        except UnicodeDecodeError as exc:
            raise _invalid(exc.start, exc.reason) from None

    def stream(self, *, errors: Errors = "strict") -> StreamDecoder:
        return StreamDecoder(self, errors=errors)


class StreamDecoder:
    """Incremental decoder: ``feed(ids)`` returns the text completed so far, holding an
    unfinished UTF-8 suffix (at most 3 bytes) until later ids complete it; ``flush()``
    ends the stream (strict: an unfinished suffix raises INVALID_UTF8).
    """

    def __init__(self, table: DecodeTable, *, errors: Errors = "strict") -> None:
        _check_errors(errors)
        self._table = table
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)
        self._fed = 0  # bytes fed so far, for absolute error offsets

    def _run(self, data: bytes, *, final: bool) -> str:
        pending = len(self._decoder.getstate()[0])
        try:
            text = self._decoder.decode(data, final=final)
        except UnicodeDecodeError as exc:
            # exc.start is relative to (held suffix + data).
            raise _invalid(self._fed - pending + exc.start, exc.reason) from None
        self._fed += len(data)
        return text

    def feed(self, ids: Iterable[int]) -> str:
        return self._run(self._table.decode_bytes(ids), final=False)

    def flush(self) -> str:
        return self._run(b"", final=True)
