"""When (and how) tiktoken's Rust core can encode exactly like our explicit merge list.

This is the fallback engine for a machine where the compiled encoder
(``_native/encode.c``) was not built: it is faster than our Python path there,
but only for vocabularies and presets it reproduces exactly. With the compiled
encoder built, that encoder serves every vocabulary (and is faster than
tiktoken's core on one thread), so this module is not consulted.

tiktoken has no merge list: it merges the adjacent pair whose concatenated bytes
have the smallest rank. Our rule merges the pair with the smallest explicit
merge rank. With ``rank(bytes) = id`` they agree on every input when

1. every byte 0..255 has an id (tiktoken cannot encode a byte it has no rank for),
2. ids have distinct bytes (tiktoken's table is bytes → rank) and every
   multi-byte piece is a merge result (else tiktoken could build it),
3. merge results have increasing ids (rank order = merge order), and
4. each merge ``k = (l, r) → p`` is the one tiktoken would make: encoding the
   bytes of ``p`` with merges ``< k`` gives exactly ``[l, r]``. By induction on
   ``k`` the two rules then coincide on the ranks below ``k``, so tiktoken never
   forms a piece from parts other than its explicit ones.

and the pre-tokenizer is one of our presets (one stage that covers all text, so
tiktoken's match-only split equals our isolated split). Anything else (a
trainer's duplicate pieces, SmolLM2's missing bytes, a user regex) stays on our
own cached encoder. Tests check equality with the reference on real data.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from tokembed.tokenizer._dialect import dialect_pattern
from tokembed.tokenizer.merges import merge_all, merges_ordered
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer

__all__ = ["tiktoken_encoding"]

_EXACT_PATTERNS = frozenset(PATTERNS.values())


def _merge_consistent(tables: BPETables) -> bool:
    # For ordered tables the merges applied to a piece's bytes have increasing
    # ranks, so "the state before rank k is [l, r]" is the same as "full BPE of
    # piece k's bytes ends as [result k]" (the last step must be merge k).
    if not merges_ordered(tables):
        return False
    get = {(l, r): k for k, (l, r, _) in enumerate(tables.merges)}.get
    byte_ids, pieces, merges = tables.byte_ids, tables.pieces, tables.merges
    for _, _, result in merges:
        ids: list[int] = [byte_ids[b] for b in pieces[result]]  # type: ignore[misc]
        if merge_all(ids, get, merges) != [result]:
            return False
    return True


def _tiktoken_ranks(tables: BPETables, *, verified: bool = False) -> dict[bytes, int] | None:
    """``mergeable_ranks`` for tiktoken when conditions 1–4 hold, else None.

    ``verified=True`` skips condition 4 (seconds for o200k's 200k merges); only for
    tables this process or its parent already checked.
    """
    if None in tables.byte_ids:
        return None
    ranks = {piece: i for i, piece in tables.pieces.items()}
    if len(ranks) != len(tables.pieces):
        return None  # two ids share one byte string
    results = [m[2] for m in tables.merges]
    if any(b <= a for a, b in pairwise(results)):
        return None
    multi = {i for i, p in tables.pieces.items() if len(p) > 1}
    if multi != set(results):
        return None
    if not verified and not _merge_consistent(tables):
        return None
    return ranks


def tiktoken_encoding(
    tables: BPETables, pretokenizer: Pretokenizer, *, verified: bool = False
) -> Any | None:
    """A ``tiktoken.Encoding`` exact for these tables and pre-tokenizer, or None.

    A pre-tokenizer whose truth is another engine runs here only when that
    engine's Unicode tables agree with tiktoken's on the stage's every class.
    """
    if len(pretokenizer.stages) != 1 or pretokenizer.stages[0] not in _EXACT_PATTERNS:
        return None
    if pretokenizer.engine != "tiktoken":
        stage = pretokenizer.stages[0]
        if dialect_pattern(stage, pretokenizer.engine) != dialect_pattern(stage, "tiktoken"):
            return None
    try:
        import tiktoken
    except ImportError:
        return None
    ranks = _tiktoken_ranks(tables, verified=verified)
    if ranks is None:
        return None
    return tiktoken.Encoding(
        "tokembed", pat_str=pretokenizer.stages[0], mergeable_ranks=ranks, special_tokens={}
    )
