"""UTF-8 conversion with located errors: lone surrogates refused (train, encode), bytes that
are not UTF-8 refused (decode, encoding lines of bytes)."""

from __future__ import annotations

import re

from tokembed.errors import TokenizerError

__all__ = [
    "invalid_utf8_error",
    "lone_surrogate_error",
    "refuse_surrogates",
    "utf8",
    "utf8_lines",
]


def lone_surrogate_error(text: str, offset: int) -> TokenizerError:
    """The LONE_SURROGATE error for the code point at ``offset`` of ``text``."""
    return TokenizerError(
        "LONE_SURROGATE",
        f"text has a lone surrogate U+{ord(text[offset]):04X} at character offset {offset}; "
        "it has no UTF-8 form",
        value=offset,
        fix="repair the text (e.g. decode its source with errors='replace') before encoding",
    )


def invalid_utf8_error(offset: int, reason: str, *, what: str, fix: str) -> TokenizerError:
    """The INVALID_UTF8 error for ``what`` (``"decoded bytes"``) at byte ``offset``."""
    return TokenizerError(
        "INVALID_UTF8",
        f"{what} are not UTF-8 at byte offset {offset} ({reason})",
        value=offset,
        fix=fix,
    )


# What to do about bytes given as lines that are not UTF-8.
_LINES_FIX = "decode the bytes with errors='replace' and encode the lines as text"


def utf8_lines(data: bytes | bytearray | memoryview) -> list[str]:
    """The non-empty lines of UTF-8 ``data``: cut at line feeds, a carriage return that
    ends a line dropped (``b"a\\r\\n\\nb"`` gives ``["a", "b"]``).

    Raises:
        TokenizerError(INVALID_UTF8): ``data`` is not UTF-8 (value: the first bad byte's offset).
    """
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_utf8_error(exc.start, exc.reason, what="lines", fix=_LINES_FIX) from None
    return [line for raw in text.split("\n") if (line := raw.removesuffix("\r"))]


def utf8(text: str) -> bytes:
    """``text.encode('utf-8')``, raising TokenizerError(LONE_SURROGATE) with the offset."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise lone_surrogate_error(text, exc.start) from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_surrogates(text: str) -> str:
    """``text`` itself when it has a UTF-8 form; else TokenizerError(LONE_SURROGATE) at the
    first surrogate (training refuses surrogate pairs too: a corpus is read as UTF-8)."""
    if not text.isascii() and (found := _SURROGATE.search(text)) is not None:
        raise lone_surrogate_error(text, found.start())
    return text
