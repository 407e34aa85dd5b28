"""What the tokenizer alone says about each id of a model's vocabulary (never imports torch).

Before any weight is read, some rows can already be named as never (or hardly ever)
trained, because no text the tokenizer produces addresses them:

* ``special`` — ids of named special tokens (they appear only where a protocol puts them);
* ``beyond_range`` — rows ``R <= id < V`` that the model allocates and no id reaches;
* ``hole`` — ids below ``R`` that neither an ordinary piece nor a special token defines;
* ``unreachable`` — an ordinary piece whose own bytes, encoded, give other ids (BPE on
  its bytes never ends in it, so no training text ever produced it);
* ``partial_utf8`` — an ordinary piece whose bytes are not UTF-8 on their own (part of a
  multi-byte character): such a token can occur, but only inside the characters it
  starts or ends, and it cannot be asked for as text.

A piece can be both unreachable and a partial UTF-8 piece; :meth:`TokenCategories.label`
gives one label per id in the order above, for tables and plot colours.

Example::

    >>> cats = token_categories(tok, model_rows=50_304)   # doctest: +SKIP
    >>> len(cats.partial_utf8), len(cats.beyond_range)    # doctest: +SKIP
    (344, 47)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from tokembed.errors import AuditError

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = ["CATEGORY_ORDER", "TokenCategories", "token_categories"]

# Priority of the per-id label; "never_seen" and "ok" are only labels, decided by the
# corpus (an ordinary, reachable piece with no occurrence) and by elimination.
CATEGORY_ORDER = (
    "special",
    "beyond_range",
    "hole",
    "unreachable",
    "partial_utf8",
    "never_seen",
    "ok",
)


@dataclass(frozen=True, kw_only=True)
class TokenCategories:
    """The tokenizer-only categories of one tokenizer against a model with ``model_rows`` rows."""

    unique_ids: int  # |I|: ordinary and special ids
    id_range: int  # R = max id + 1
    model_rows: int  # V
    special: tuple[int, ...]
    beyond_range: tuple[int, ...]
    hole: tuple[int, ...]
    unreachable: tuple[int, ...]
    partial_utf8: tuple[int, ...]

    def label(self, i: int, *, never_seen: bool = False) -> str:
        """One category per id, the first of :data:`CATEGORY_ORDER` that applies."""
        for name in CATEGORY_ORDER[:5]:
            if i in self._sets[name]:
                return name
        return "never_seen" if never_seen else "ok"

    @cached_property
    def _sets(self) -> dict[str, frozenset[int]]:
        return {name: frozenset(getattr(self, name)) for name in CATEGORY_ORDER[:5]}

    def counts(self) -> dict[str, int]:
        """Size of each tokenizer-only category (overlaps counted in each)."""
        return {name: len(getattr(self, name)) for name in CATEGORY_ORDER[:5]}

    def unaddressed(self) -> tuple[int, ...]:
        """Rows no text can address by construction: holes, rows past R, unreachable pieces."""
        return tuple(sorted({*self.hole, *self.beyond_range, *self.unreachable}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "unique_ids": self.unique_ids,
            "id_range": self.id_range,
            "model_rows": self.model_rows,
            "counts": self.counts(),
            **{name: list(getattr(self, name)) for name in CATEGORY_ORDER[:5]},
        }


def _encodes_to(tok: Tokenizer, piece: bytes) -> tuple[list[int], bool]:
    """The ids ``piece`` encodes to as ordinary input, and whether it is UTF-8 on its own."""
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        # Bytes that are not text go through the byte-level entry point (tiktoken's
        # _encode_bytes contract), so a partial piece is judged by the same BPE.
        return tok._encode_bytes(piece), False
    return tok.encode_ordinary(text), True


def _pieces(tok: Tokenizer) -> Iterator[tuple[int, bytes]]:
    yield from sorted(tok.tables.pieces.items())


def token_categories(tok: Tokenizer, *, model_rows: int | None = None) -> TokenCategories:
    """Tokenizer-only categories of every id below ``model_rows`` (default: the id range R).

    Encodes each ordinary piece once (about 2–5 s for a 50,000-piece vocabulary).

    Raises:
        AuditError(AUDIT_VOCAB_MISMATCH): ``model_rows`` < R (some id has no row).
    """
    from tokembed.measure.vocab_sizes import vocab_sizes_of

    tables = tok.tables
    sizes = vocab_sizes_of(tok)  # |I|, R and the holes, counted as everywhere else
    id_range = sizes.id_range
    rows = id_range if model_rows is None else model_rows
    if rows < id_range:
        raise AuditError(
            "AUDIT_VOCAB_MISMATCH",
            f"the model has {rows} vocabulary rows but the tokenizer's ids reach "
            f"{id_range - 1} (R={id_range}); ids {rows}..{id_range - 1} have no row",
            value=(rows, id_range),
            fix="audit the model with the tokenizer it was trained with",
        )
    unreachable: list[int] = []
    partial: list[int] = []
    for i, piece in _pieces(tok):
        ids, is_text = _encodes_to(tok, piece)
        if not is_text:
            partial.append(i)
        if ids != [i]:
            unreachable.append(i)
    return TokenCategories(
        unique_ids=sizes.unique_ids,
        id_range=id_range,
        model_rows=rows,
        special=tuple(sorted(set(tables.specials.values()))),
        beyond_range=tuple(range(id_range, rows)),
        hole=tuple(i for a, b in sizes.hole_ranges for i in range(a, b + 1)),
        unreachable=tuple(unreachable),
        partial_utf8=tuple(partial),
    )
