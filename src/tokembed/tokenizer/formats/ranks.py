"""tiktoken rank files and the conversion between ranks and explicit merges.

A ``.tiktoken`` file lists ``base64(piece) rank`` per line. tiktoken encodes by
repeatedly joining the adjacent pair whose *concatenation* has the lowest rank;
:class:`~tokembed.tokenizer.model.BPETables` instead stores explicit merges
``(left, right, result)``. :func:`ranks_to_tables` finds, for every multi-byte
piece, the two parts that tiktoken's own procedure leaves in it when every rank
but the piece's own takes part (:func:`lowest_rank_split`). Encoding with those
merges equals tiktoken's encoding: inside the span of any piece, merges happen in
the same order as when the piece is encoded alone, so the last join before the
piece appears is always that split.

A piece whose joining does not end in two parts gets no merge; tiktoken still
gives its id to a chunk that is exactly that piece (a chunk that is a piece is
never merged), so the tables carry ``ignore_merges``, the same rule (none of the
four real files in ``shared/data/tokenizers`` has such a piece).

Replaying the joining by rescanning every pair costs O(n^2) for a piece of n
bytes, which a crafted file of ever longer pieces turns into the cube of its
longest piece; the compiled deriver (``_native/ranks_core.c``) keeps the candidate
pairs in a heap instead (O(n log n)), so a file costs about its size. It gives the
same merges as :func:`lowest_rank_split`, the reference it is tested against.

Example::

    >>> ranks = {b"a": 0, b"b": 1, b"ab": 2}
    >>> ranks_to_tables(ranks).merges
    ((0, 1, 2),)
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

from tokembed.errors import FormatError
from tokembed.tokenizer.formats._build import require_distinct_pieces
from tokembed.tokenizer.merges import compiled_rank_merges
from tokembed.tokenizer.model import BPETables

# tiktoken's core keeps ranks as u32.
_RANK_LIMIT = 2**32

__all__ = [
    "format_ranks",
    "lowest_rank_split",
    "parse_ranks",
    "ranks_to_tables",
    "tables_to_ranks",
]

_NO_MERGE = 1 << 62  # above every rank a file can hold (ids are 32-bit)


def _bad_line(source: str, lineno: int, why: str, line: bytes) -> FormatError:
    return FormatError(
        "MALFORMED_RANKS",
        f"{source} line {lineno}: {why}",
        value=line[:80],
        fix="each line must be '<base64 bytes> <rank>' with unique bytes and unique ranks",
    )


def parse_ranks(data: bytes, *, source: str = "<ranks>") -> dict[bytes, int]:
    """``{piece: rank}`` from the contents of a ``.tiktoken`` file (empty lines skipped).

    Raises:
        FormatError(MALFORMED_RANKS): a line is not two fields, the base64 is invalid,
            the rank is not an integer in [0, 2^32), a piece or rank repeats, or
            there is no line at all.
    """
    ranks: dict[bytes, int] = {}
    seen_ranks: set[int] = set()
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise _bad_line(source, lineno, f"expected 2 fields, found {len(fields)}", line)
        try:
            piece = base64.b64decode(fields[0], validate=True)
        except binascii.Error:
            raise _bad_line(source, lineno, "invalid base64", line) from None
        if not fields[1].isdigit():
            raise _bad_line(source, lineno, "rank is not a non-negative integer", line)
        rank = int(fields[1])
        if rank >= _RANK_LIMIT:
            raise _bad_line(source, lineno, "rank is not below 2^32 (tiktoken stores u32)", line)
        if not piece:
            raise _bad_line(source, lineno, "empty piece", line)
        if piece in ranks or rank in seen_ranks:
            raise _bad_line(source, lineno, "duplicate piece or rank", line)
        ranks[piece] = rank
        seen_ranks.add(rank)
    if not ranks:
        raise FormatError(
            "MALFORMED_RANKS",
            f"{source} holds no ranks",
            value=source,
            fix="pass a non-empty .tiktoken file",
        )
    return ranks


def format_ranks(ranks: Mapping[bytes, int]) -> bytes:
    """The ``.tiktoken`` text for ``ranks``, sorted by rank (what tiktoken's loader reads)."""
    lines = [
        base64.b64encode(piece) + b" " + str(rank).encode("ascii")
        for piece, rank in sorted(ranks.items(), key=lambda kv: kv[1])
    ]
    return b"\n".join(lines) + b"\n"


def lowest_rank_split(ranks: Mapping[bytes, int], piece: bytes) -> tuple[bytes, bytes] | None:
    """The two parts tiktoken's BPE leaves in ``piece`` before joining them into ``piece``.

    Every rank but the piece's own takes part, in tiktoken's order (lowest rank,
    leftmost first), including ranks above the piece's: in a file where ``abc``
    ranks below ``ab``, tiktoken joins ``a b`` first and then ``ab c``. Whatever the
    context, the parts covering a piece's bytes evolve as they do in the piece
    alone until the piece forms, so this split is the one merge that makes it.

    Returns None when more than two parts remain: no merge makes the piece, and
    tiktoken produces it only for a chunk that is exactly the piece.
    """
    if len(piece) == 2:  # two bytes: nothing can merge before the pair itself
        return piece[:1], piece[1:]
    parts = [piece[i : i + 1] for i in range(len(piece))]
    get = ranks.get
    # pair_rank[i] is the rank of parts[i] + parts[i+1]; _NO_MERGE stands for "none".
    # The whole piece is a pair only once two parts remain, where the loop stops.
    pair_rank = [get(parts[i] + parts[i + 1], _NO_MERGE) for i in range(len(parts) - 1)]
    while len(parts) > 2:
        best = min(pair_rank)
        if best == _NO_MERGE:
            return None
        i = pair_rank.index(best)  # leftmost lowest rank, as tiktoken
        merged = parts[i] + parts[i + 1]
        parts[i : i + 2] = [merged]
        del pair_rank[i]
        if i > 0:
            pair_rank[i - 1] = get(parts[i - 1] + merged, _NO_MERGE)
        if i < len(pair_rank):
            pair_rank[i] = get(merged + parts[i + 1], _NO_MERGE)
    return parts[0], parts[1]


def _reference_merges(
    ranks: Mapping[bytes, int], pieces: Mapping[int, bytes]
) -> list[tuple[int, int, int]]:
    merges: list[tuple[int, int, int]] = []
    for rank in sorted(pieces):
        piece = pieces[rank]
        if len(piece) < 2:
            continue
        split = lowest_rank_split(ranks, piece)
        if split is not None:
            merges.append((ranks[split[0]], ranks[split[1]], rank))
    return merges


def ranks_to_tables(
    ranks: Mapping[bytes, int], *, specials: Mapping[str, int] | None = None
) -> BPETables:
    """Explicit-merge tables that encode exactly like tiktoken with ``ranks``; ids = ranks,
    ``ignore_merges`` set (tiktoken emits a chunk that is a piece as that piece).

    The splits come from the compiled deriver where it is built (O(n log n) for a piece
    of n bytes), else from :func:`lowest_rank_split` run for every piece (the reference
    twin: the same splits, O(n^2) per piece).

    Raises:
        TokenizerError(SPECIAL_TOKEN_CONFLICT): a special id is also a rank.
    """
    pieces = {rank: piece for piece, rank in ranks.items()}
    merges = compiled_rank_merges(pieces)
    if merges is None:
        merges = _reference_merges(ranks, pieces)
    return BPETables(
        pieces=pieces, merges=tuple(merges), specials=dict(specials or {}), ignore_merges=True
    )


def tables_to_ranks(tables: BPETables) -> dict[bytes, int]:
    """tiktoken ranks (id → rank) that encode exactly like ``tables``.

    tiktoken has no explicit merges, so this holds only when the merges are
    the ones :func:`ranks_to_tables` would derive back; that is checked. tiktoken
    also gives a chunk that is one piece that piece's id, so tables without
    ``ignore_merges`` must have every piece of two or more bytes made by a merge.

    Raises:
        FormatError(UNSUPPORTED_TOKENIZER): a byte has no id, two ids share one
            piece, or tiktoken's rank-based joining would encode differently.
    """
    missing = tables.missing_bytes()
    if missing:
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"tiktoken needs an id for every byte; {len(missing)} are missing "
            f"(first: 0x{missing[0]:02x})",
            value=missing,
            fix="export this tokenizer with --format hf instead",
        )
    require_distinct_pieces(
        tables,
        ", which a rank file cannot express",
        fix="export this tokenizer with --format hf or keep the native format",
    )
    ranks = {piece: i for i, piece in tables.pieces.items()}
    if not tables.ignore_merges:
        made = {m[2] for m in tables.merges}
        loose = sorted(i for i, p in tables.pieces.items() if len(p) > 1 and i not in made)
        if loose:
            raise FormatError(
                "UNSUPPORTED_TOKENIZER",
                f"{len(loose)} pieces no merge makes (first: id {loose[0]}) would be one "
                "token in tiktoken wherever a chunk spells one, and are not here",
                value=loose[:10],
                fix="export this tokenizer with --format hf or keep the native format",
            )
    back = ranks_to_tables(ranks).merges
    if back != tables.merges:
        first = next(
            (k for k, (a, b) in enumerate(zip(back, tables.merges, strict=False)) if a != b),
            min(len(back), len(tables.merges)),
        )
        raise FormatError(
            "UNSUPPORTED_TOKENIZER",
            f"tiktoken's rank-based joining differs from this tokenizer's merges at merge #{first}",
            value=first,
            fix="export this tokenizer with --format hf or keep the native format",
        )
    return ranks
