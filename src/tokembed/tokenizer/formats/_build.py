"""Turning parsed file contents into validated tokenizer parts, with file-level error codes.

Readers collect plain dicts and lists; these helpers build the
:class:`BPETables` and :class:`Pretokenizer`, converting a validation failure
into :class:`~tokembed.errors.FormatError` so that a bad file is refused whole
under a file-format code, never half-loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tokembed.errors import FormatError, TokenizerError, UsageError
from tokembed.tokenizer.dialect import Dialect
from tokembed.tokenizer.model import ID_LIMIT, BPETables
from tokembed.tokenizer.patterns import PATTERNS
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = [
    "build_pretokenizer",
    "build_tables",
    "malformed",
    "require_distinct_pieces",
    "require_version",
]


def malformed(source: str, message: str, *, value: object = None) -> FormatError:
    """The standard refusal of a file whose shape is wrong."""
    return FormatError(
        "MALFORMED_TOKENIZER_FILE",
        f"{source}: {message}",
        value=value,
        fix="pass an unmodified tokenizer file written by tokembed, tiktoken or Hugging Face",
    )


def require_version(source: str, what: str, found: object, supported: int, *, fix: str) -> None:
    """Refuse a file whose declared ``what`` version (``found``) is not the one read here."""
    if found != supported:
        raise FormatError(
            "UNSUPPORTED_VERSION",
            f"{source}: {what} version {found!r}; this tokembed reads {supported}",
            value=found,
            fix=fix,
        )


def require_distinct_pieces(tables: BPETables, why: str, *, fix: str) -> None:
    """Refuse to export ``tables`` to a format that names a token by its bytes or spelling
    when two ids share one byte piece (``why`` ends the message: what the format does).
    """
    shared = len(tables.pieces) - len(set(tables.pieces.values()))
    if shared:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER", f"two ids share one byte piece{why}", value=shared, fix=fix
        )


# Ordinary ids index 32-bit arrays in the encoder (and tiktoken's u32 ranks).
_ID_LIMIT = ID_LIMIT  # the one limit, tokembed.tokenizer.model.ID_LIMIT


def build_tables(
    source: str,
    *,
    pieces: Mapping[int, bytes],
    merges: Sequence[tuple[int, int, int]],
    specials: Mapping[str, int],
    ignore_merges: bool = False,
) -> BPETables:
    """Validated tables; an inconsistency becomes MALFORMED_TOKENIZER_FILE naming the file.

    An empty special-token name is refused here: every text contains the empty string,
    so no encode could ever tell a special token from ordinary text.
    """
    if any(not name for name in specials):
        raise malformed(source, "a special token's name is empty", value=specials.get(""))
    too_big = max(pieces, default=0)
    if too_big >= _ID_LIMIT:  # the encoder keeps ordinary ids in 32-bit arrays
        raise malformed(source, f"token id {too_big} is not below 2^32", value=too_big)
    try:
        return BPETables(
            pieces=pieces, merges=tuple(merges), specials=specials, ignore_merges=ignore_merges
        )
    except TokenizerError as exc:
        raise malformed(source, f"{exc.code}: {exc.message}", value=exc.value) from exc


def build_pretokenizer(
    source: str, stages: Sequence[str], *, name: str | None = None, dialect: Dialect
) -> Pretokenizer:
    """Validated pre-tokenizer; a single stage equal to a preset gets the preset's name.

    ``dialect`` is the format's regex reading: ``"tiktoken"`` for rank files,
    ``"huggingface"`` for Hugging Face files, the recorded one for ours.
    """
    if name is None and len(stages) == 1:
        name = next((k for k, v in sorted(PATTERNS.items()) if v == stages[0]), None)
    try:
        return Pretokenizer(stages=tuple(stages), name=name, dialect=dialect)
    except UsageError as exc:
        raise malformed(source, f"{exc.code}: {exc.message}", value=exc.value) from exc
