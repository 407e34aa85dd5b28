"""The BPE address space: which id is which byte piece, which merges exist, which names are special.

:class:`BPETables` is the one in-memory representation every tokenizer source
converts to: our trained files, tiktoken rank files and Hugging Face
``tokenizer.json``. It is deliberately more general than tiktoken's model:

* ordinary ids need not be dense or start at 0 (SmolLM2 puts specials at 0–16);
* single bytes may be missing (SmolLM2 lacks 21 of them); encoding such a byte
  is an error, never a silent drop;
* two ids may share one byte string (our trainer can produce that), because
  each merge names its result id explicitly.

A merge's rank is its index in ``merges``. This module validates the tables
and derives lookup structures; encoding lives in ``encode.py``.

Example::

    >>> t = BPETables.byte_level(merges=[(104, 105, 256)])  # "h" + "i"
    >>> t.pieces[256]
    b'hi'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokembed.errors import FormatError, TokenizerError

__all__ = ["ID_LIMIT", "BPETables", "address_hash"]

# Every id (piece or special) must fit a uint32: that is how the compiled encoder,
# ``encode_to_numpy`` and every export store ids. One limit, checked here, where every
# tokenizer of every format (and every trained one) is built.
ID_LIMIT = 2**32


@dataclass(frozen=True, kw_only=True, eq=False)
class BPETables:
    """Validated id ↔ bytes map, ordered merges and special tokens.

    Attributes:
        pieces: ordinary (mergeable) id → its byte string.
        merges: ``(left, right, result)`` ids in rank order; ``pieces[result]``
            equals ``pieces[left] + pieces[right]``.
        specials: special-token name → id; several names may share an id (aliases).
        ignore_merges: a chunk whose bytes are one piece encodes as that piece's id
            without merging. That is tiktoken's rule (it holds for every rank file) and
            Hugging Face's ``ignore_merges``; it differs from plain merging only for a
            piece the merges do not rebuild from its own bytes (one appended to a
            vocabulary without a merge, say). Needs distinct pieces.

    Raises:
        TokenizerError(INVALID_MERGES): a merge names an unknown id, its result
            bytes differ from the concatenation, a result id is produced twice,
            or the same pair appears twice; ``ignore_merges`` with two ids of one piece.
        TokenizerError(SPECIAL_TOKEN_CONFLICT): a special id is also an ordinary id
            or is negative.
    """

    pieces: Mapping[int, bytes]
    merges: tuple[tuple[int, int, int], ...] = ()
    specials: Mapping[str, int] = field(default_factory=dict)
    ignore_merges: bool = False
    # Derived lookups, filled in __post_init__.
    byte_ids: tuple[int | None, ...] = field(init=False, repr=False)
    pair_ranks: dict[tuple[int, int], tuple[int, int]] = field(init=False, repr=False)
    # piece -> id where ignore_merges holds (empty otherwise)
    piece_ids: dict[bytes, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pieces", dict(self.pieces))
        object.__setattr__(self, "merges", tuple(tuple(m) for m in self.merges))
        object.__setattr__(self, "specials", dict(self.specials))
        pieces = self.pieces
        pair_ranks: dict[tuple[int, int], tuple[int, int]] = {}
        produced: set[int] = set()
        for rank, (left, right, result) in enumerate(self.merges):
            for role, i in (("left", left), ("right", right), ("result", result)):
                if i not in pieces:
                    raise TokenizerError(
                        "INVALID_MERGES",
                        f"merge #{rank} names {role} id {i}, which has no byte piece",
                        value=(left, right, result),
                        fix="every merge must join two defined ids into a defined id",
                    )
            if pieces[result] != pieces[left] + pieces[right]:
                raise TokenizerError(
                    "INVALID_MERGES",
                    f"merge #{rank}: piece of {result} is not piece {left} + piece {right}",
                    value=(left, right, result),
                    fix="the result id's bytes must be the concatenation of its parts",
                )
            if result in produced or (left, right) in pair_ranks:
                raise TokenizerError(
                    "INVALID_MERGES",
                    f"merge #{rank} repeats a result id or a pair",
                    value=(left, right, result),
                    fix="each pair and each result id may appear in one merge only",
                )
            produced.add(result)
            pair_ranks[(left, right)] = (rank, result)
        for i in pieces:
            if not 0 <= i < ID_LIMIT:
                raise TokenizerError(
                    "INVALID_MERGES",
                    f"piece id {i} is outside [0, 2**32): ids are stored as 32-bit integers",
                    value=i,
                    fix="number the pieces below 2**32",
                )
        for name, sid in self.specials.items():
            if sid >= ID_LIMIT:
                raise FormatError(  # the code's one class, as the exports raise it
                    "SPECIAL_ID_UNREPRESENTABLE",
                    f"special token {name!r} has id {sid}, outside [0, 2**32): ids are stored "
                    "as 32-bit integers (the compiled encoder, encode_to_numpy, every export)",
                    value=(name, sid),
                    fix="give special tokens ids below 2**32",
                )
            if sid < 0 or sid in pieces:
                raise TokenizerError(
                    "SPECIAL_TOKEN_CONFLICT",
                    f"special token {name!r} has id {sid}, "
                    + ("which is negative" if sid < 0 else "which is an ordinary id"),
                    value=(name, sid),
                    fix="give special tokens ids that no byte piece uses",
                )
        byte_ids: list[int | None] = [None] * 256
        # Lowest id wins when several ids spell one byte: deterministic and what
        # tiktoken/HF do (a single byte has one rank there).
        for i in sorted(pieces):
            piece = pieces[i]
            if len(piece) == 1 and byte_ids[piece[0]] is None:
                byte_ids[piece[0]] = i
        object.__setattr__(self, "byte_ids", tuple(byte_ids))
        object.__setattr__(self, "pair_ranks", pair_ranks)
        piece_ids = {p: i for i, p in pieces.items()} if self.ignore_merges else {}
        if len(piece_ids) != (len(pieces) if self.ignore_merges else 0):
            raise TokenizerError(
                "INVALID_MERGES",
                f"{len(pieces) - len(piece_ids)} byte pieces have two ids: ignore_merges "
                "could not tell which id a chunk spelling one of them gets",
                value=len(pieces) - len(piece_ids),
                fix="give every byte piece one id, or encode without ignore_merges",
            )
        object.__setattr__(self, "piece_ids", piece_ids)

    @classmethod
    def byte_level(
        cls,
        *,
        merges: Iterable[tuple[int, int]] | Iterable[tuple[int, int, int]],
        specials: Mapping[str, int] | None = None,
    ) -> BPETables:
        """Tables for ids 0..255 = bytes plus merges; ``(a, b)`` pairs get ids 256, 257, …"""
        pieces: dict[int, bytes] = {i: bytes([i]) for i in range(256)}
        full: list[tuple[int, int, int]] = []
        for k, m in enumerate(merges):
            left, right, result = (m[0], m[1], m[2]) if len(m) == 3 else (m[0], m[1], 256 + k)
            if left not in pieces or right not in pieces:
                raise TokenizerError(
                    "INVALID_MERGES",
                    f"merge #{k} names an id not defined before it",
                    value=tuple(m),
                    fix="merges must only use bytes or earlier merge results",
                )
            pieces[result] = pieces[left] + pieces[right]
            full.append((left, right, result))
        return cls(pieces=pieces, merges=tuple(full), specials=dict(specials or {}))

    # --- derived facts ----------------------------------------------------
    @property
    def special_ids(self) -> set[int]:
        return set(self.specials.values())

    @property
    def defined_ids(self) -> set[int]:
        """I: the union of ordinary and special ids."""
        return set(self.pieces) | self.special_ids

    @property
    def id_range(self) -> int:
        """R = max(I) + 1 (0 for an empty table)."""
        ids = self.defined_ids
        return max(ids) + 1 if ids else 0

    def missing_bytes(self) -> list[int]:
        """Byte values that no single-byte piece spells."""
        return [b for b, i in enumerate(self.byte_ids) if i is None]

    def truncated(self, n_merges: int) -> BPETables:
        """The tokenizer defined by the first ``n_merges`` merges (pieces of later results dropped)."""
        if n_merges < 0:
            raise TokenizerError(
                "INVALID_MERGES",
                "cannot keep a negative number of merges",
                value=n_merges,
                fix="pass 0 <= n_merges <= len(merges)",
            )
        dropped = {m[2] for m in self.merges[n_merges:]}
        pieces = {i: p for i, p in self.pieces.items() if i not in dropped}
        return BPETables(
            pieces=pieces,
            merges=self.merges[:n_merges],
            specials=self.specials,
            ignore_merges=self.ignore_merges,
        )

    def to_canonical(self) -> dict[str, Any]:
        """JSON-ready canonical description; the address hash is computed over it.

        ``ignore_merges`` appears only when set, so tables without it keep the hash they
        had before the flag existed."""
        canon: dict[str, Any] = {
            "pieces": [[i, self.pieces[i].hex()] for i in sorted(self.pieces)],
            "merges": [list(m) for m in self.merges],
            "specials": sorted([name, sid] for name, sid in self.specials.items()),
        }
        if self.ignore_merges:
            canon["ignore_merges"] = True
        return canon


def address_hash(tables: BPETables, pretokenizer_stages: Iterable[str]) -> str:
    """SHA-256 naming an address space: equal iff stages, pieces, merges, specials and
    ``ignore_merges`` are equal.

    Metadata (names, dates, descriptions) is deliberately excluded: two files that
    map every text to the same ids carry the same hash.

    Example::

        >>> address_hash(BPETables.byte_level(merges=[]), ["\\\\s+"])[:7]  # doctest: +SKIP
        '3b0c8f1'
    """
    canon = {"stages": list(pretokenizer_stages), **tables.to_canonical()}
    blob = json.dumps(canon, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(blob.encode("ascii")).hexdigest()
