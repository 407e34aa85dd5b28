"""GPT-2's reversible byte ↔ printable-character table, used by Hugging Face byte-level files.

Hugging Face ``vocab.json``/``merges.txt`` and ``tokenizer.json`` spell every byte
as one printable Unicode character so that token strings survive JSON and the
space-separated ``merges.txt``: the 188 printable Latin-1 bytes stand for
themselves and the other 68 (controls, space, 0x7F–0xA0, 0xAD) are moved to
U+0100… in byte order. For example the space 0x20 becomes ``"Ġ"`` (U+0120).

This module only converts spellings; it knows nothing about vocabularies.

Example::

    >>> bytes_to_token_text(b" hi")
    'Ġhi'
    >>> token_text_to_bytes("Ġhi")
    b' hi'
"""

from __future__ import annotations

from tokembed.errors import FormatError

__all__ = ["BYTE_TO_CHAR", "bytes_to_token_text", "token_text_to_bytes"]


def _build_table() -> tuple[str, ...]:
    # Printable ranges kept as themselves: '!'..'~', '¡'..'¬', '®'..'ÿ' (188 bytes).
    kept = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table: dict[int, str] = {b: chr(b) for b in kept}
    moved = [b for b in range(256) if b not in table]
    for k, b in enumerate(moved):
        table[b] = chr(0x100 + k)
    return tuple(table[b] for b in range(256))


BYTE_TO_CHAR: tuple[str, ...] = _build_table()
_CHAR_TO_BYTE: dict[str, int] = {c: b for b, c in enumerate(BYTE_TO_CHAR)}


def bytes_to_token_text(piece: bytes) -> str:
    """The Hugging Face byte-level spelling of ``piece`` (one character per byte)."""
    return "".join(BYTE_TO_CHAR[b] for b in piece)


def token_text_to_bytes(text: str) -> bytes:
    """Inverse of :func:`bytes_to_token_text`.

    Raises:
        FormatError(MALFORMED_TOKENIZER_FILE): a character is not in the byte table.
    """
    try:
        return bytes(_CHAR_TO_BYTE[c] for c in text)
    except KeyError as exc:
        raise FormatError(
            "MALFORMED_TOKENIZER_FILE",
            f"token {text!r} contains {exc.args[0]!r}, which is not a byte-level character",
            value=text,
            fix="byte-level vocabularies spell bytes with GPT-2's 256-character table only",
        ) from None
