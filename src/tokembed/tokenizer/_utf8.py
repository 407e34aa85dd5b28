"""UTF-8 conversion that refuses lone surrogates with a located error (shared by train/encode)."""

from __future__ import annotations

import re

from tokembed.errors import TokenizerError

__all__ = ["lone_surrogate_error", "refuse_surrogates", "utf8"]


def lone_surrogate_error(text: str, offset: int) -> TokenizerError:
    """The LONE_SURROGATE error for the code point at ``offset`` of ``text``."""
    return TokenizerError(
        "LONE_SURROGATE",
        f"text has a lone surrogate U+{ord(text[offset]):04X} at character offset {offset}; "
        "it has no UTF-8 form",
        value=offset,
        fix="repair the text (e.g. decode its source with errors='replace') before encoding",
    )


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
