"""Classify the change between two ordered vocabularies before any tensor is touched.

Two tokenizers with the same size can assign different meanings to the same id,
and a file that still contains every old string can have moved some of them.
:func:`classify_change` compares the two address spaces symbol by symbol (an
ordinary id's byte piece, a special id's names) and returns the kind of change
with its evidence:

* ``append-only``: every old id keeps its bytes or its special names, every new
  id lies past the old id range, the pre-tokenizer is unchanged and the old
  merges are the first merges of the new list (old text still encodes to the
  same ids). Proved, never assumed from "the new file contains the old strings";
* ``permutation``: the same symbols at other ids;
* ``removal``: some old symbols are gone, none were added;
* ``split``: removed pieces are now spelled by several new pieces;
* ``merge``: new pieces are spelled by several removed old pieces;
* ``dialect-only``: the same table (every id keeps its symbol, the same merges in the
  same order) under a pre-tokenizer that differs only in whose regex engine reads it
  (tiktoken's or Hugging Face's Unicode tables): r50k's rank file and GPT-2's
  ``vocab.json`` + ``merges.txt``. Each id still means the same bytes, so the row map
  is the identity and needs no ``accept_overlap``; ``dialect_points`` lists the code
  points on which the two engines split text differently (text holding none of them
  encodes to the same ids under both). The two patterns are compared on a built-in
  probe of short strings over every character class they use; a pattern that splits
  any probe differently is another pre-tokenizer (``replacement``);
* ``replacement``: another pre-tokenizer, or most of the vocabulary changed;
* ``mixed``: any other combination (additions with moved ids, reordered merges).

What it does not decide: whether a new row is a good warm start (the
initializer's business) or whether the model was trained on the old tokenizer
(the address-hash check in :mod:`tokembed.migrate.apply`).

Example::

    >>> change = classify_change(old_tok, new_tok)  # doctest: +SKIP
    >>> change.kind, change.added  # doctest: +SKIP
    ('append-only', (49152, 49153))

Raises (from :meth:`VocabularyChange.require_append_only`): CheckpointError
NOT_APPEND_ONLY with the first moved, removed or rewritten id.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokembed.errors import CheckpointError

if TYPE_CHECKING:
    from tokembed.tokenizer import Pretokenizer, Tokenizer

__all__ = ["KINDS", "VocabularyChange", "classify_change", "ordered_vocab_digest", "symbols"]

KINDS: tuple[str, ...] = (
    "append-only",
    "permutation",
    "removal",
    "split",
    "merge",
    "dialect-only",
    "replacement",
    "mixed",
)

# One id's meaning: ("piece", bytes) for an ordinary id, ("special", names) for a special id.
Symbol = tuple[str, bytes | tuple[str, ...]]


def symbols(tok: Tokenizer) -> dict[int, Symbol]:
    """Every defined id of ``tok`` and its symbol (pieces by bytes, specials by sorted names)."""
    out: dict[int, Symbol] = {i: ("piece", p) for i, p in tok.tables.pieces.items()}
    names: dict[int, list[str]] = {}
    for name, sid in tok.tables.specials.items():
        names.setdefault(sid, []).append(name)
    for sid, ns in names.items():
        out[sid] = ("special", tuple(sorted(ns)))
    return out


def ordered_vocab_digest(tok: Tokenizer) -> str:
    """SHA-256 of the ordered id -> symbol list alone (no merges, no pre-tokenizer)."""
    rows = []
    for i, (kind, value) in sorted(symbols(tok).items()):
        rows.append([i, kind, value.hex() if isinstance(value, bytes) else list(value)])
    blob = json.dumps(rows, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return "sha256:" + hashlib.sha256(blob).hexdigest()


@dataclass(frozen=True, kw_only=True)
class VocabularyChange:
    """The classified change from an old to a new ordered vocabulary, with its evidence.

    ``exact`` holds the proved (old id, new id) pairs of equal symbols, sorted by
    new id; ``added`` the new ids without an old symbol; ``removed`` the old ids
    without a new one; ``moved`` the exact pairs whose id changed.
    """

    kind: str
    old_ids: int  # the old tokenizer's id range R0
    new_ids: int  # the new tokenizer's id range R1
    exact: tuple[tuple[int, int], ...]
    added: tuple[int, ...]
    removed: tuple[int, ...]
    moved: tuple[tuple[int, int], ...]
    moved_specials: tuple[str, ...]
    pretokenizer_changed: bool
    merges_extend: bool
    split: tuple[tuple[int, tuple[int, ...]], ...]  # removed old id -> new ids spelling it
    merged: tuple[tuple[int, tuple[int, ...]], ...]  # added new id -> old ids spelling it
    old_hash: str
    new_hash: str
    old_vocab_digest: str
    new_vocab_digest: str
    # dialect-only: the code points on which the two pre-tokenizers split differently.
    dialect_points: tuple[int, ...] = ()

    @property
    def is_append_only(self) -> bool:
        return self.kind == "append-only"

    def require_append_only(self) -> None:
        """Refuse (NOT_APPEND_ONLY) unless the change is proved append-only."""
        if self.is_append_only:
            return
        value: object
        if self.moved:
            why, value = f"old id {self.moved[0][0]} moved to {self.moved[0][1]}", self.moved[0]
        elif self.removed:
            why, value = (
                f"old id {self.removed[0]} has no symbol in the new vocabulary",
                self.removed[0],
            )
        elif self.kind == "dialect-only":
            why, value = (
                "the pre-tokenizer's regex engine changed (the same table and merges)",
                self.new_hash,
            )
        elif self.pretokenizer_changed:
            why, value = "the pre-tokenizer changed", self.new_hash
        elif not self.merges_extend:
            why, value = "the old merges are not the first merges of the new tokenizer", None
        else:
            inside = [i for i in self.added if i < self.old_ids]
            why, value = f"new id {inside[0]} lies inside the old id range", inside[0]
        raise CheckpointError(
            "NOT_APPEND_ONLY",
            f"the change is {self.kind}, not append-only: {why}",
            value=value,
            fix="migrate through the exact row map (migrate_model handles any injective map) "
            "and retokenize persisted ids; never reuse old ids as if unchanged",
        )

    def evidence(self) -> dict[str, object]:
        """JSON-ready summary for reports and manifests (counts plus first examples)."""
        return {
            "kind": self.kind,
            "old_ids": self.old_ids,
            "new_ids": self.new_ids,
            "exact": len(self.exact),
            "added": len(self.added),
            "removed": len(self.removed),
            "moved": len(self.moved),
            "first_added": list(self.added[:5]),
            "first_removed": list(self.removed[:5]),
            "first_moved": [list(p) for p in self.moved[:5]],
            "moved_specials": list(self.moved_specials),
            "pretokenizer_changed": self.pretokenizer_changed,
            "merges_extend": self.merges_extend,
            "split": len(self.split),
            "merged": len(self.merged),
            "old_hash": self.old_hash,
            "new_hash": self.new_hash,
            "old_vocab_digest": self.old_vocab_digest,
            "new_vocab_digest": self.new_vocab_digest,
            "dialect_points": len(self.dialect_points),
            "first_dialect_points": [f"U+{c:04X}" for c in self.dialect_points[:5]],
        }


def _exact_pairs(old: dict[int, Symbol], new: dict[int, Symbol]) -> list[tuple[int, int]]:
    """Pair equal symbols; duplicates of one byte string pair up in id order."""
    by_symbol: dict[Symbol, list[int]] = {}
    for i in sorted(new):
        by_symbol.setdefault(new[i], []).append(i)
    pairs = []
    for j in sorted(old):
        targets = by_symbol.get(old[j])
        if targets:
            pairs.append((j, targets.pop(0)))
    return sorted(pairs, key=lambda p: p[1])


def _spell(tok: Tokenizer, data: bytes) -> tuple[int, ...] | None:
    """Ids ``tok`` gives these bytes as one chunk (None when a byte has no id)."""
    from tokembed.tokenizer.encode import encode_chunk_reference

    if not data or any(tok.tables.byte_ids[b] is None for b in data):
        return None
    return tuple(encode_chunk_reference(tok.tables, data))


def _merge_pairs(tok: Tokenizer) -> list[tuple[bytes, bytes]]:
    pieces = tok.tables.pieces
    return [(pieces[left], pieces[right]) for left, right, _ in tok.tables.merges]


# One character of each class the presets' patterns tell apart: whitespace of several
# kinds, ASCII and other letters (cased, uncased, combining marks), digits, punctuation,
# the contraction letters, an emoji. Every string of up to 3 of them (up to 4 of the
# first 8) is split by both pre-tokenizers: a pattern that differs on any of them is a
# different grammar, not the same one read by another engine.
_PROBE = (" ", "\n", "a", "s", "'", "1", "!", "\t", "\r", "t", "\u00a0",
          "\u3000", "Z", "\u00e9", "\u0301", "\u0663", "-", "\u044f", "\u4e2d",
          "\U0001f600")  # fmt: skip


def _probe_texts() -> Iterator[str]:
    for n in (1, 2, 3):
        for chars in itertools.product(_PROBE, repeat=n):
            yield "".join(chars)
    for chars in itertools.product(_PROBE[:8], repeat=4):
        yield "".join(chars)
    yield "Hello, world! It's 2024 -- naïve café, Привет мир 中文 😀\n\n  x \t\r\n"


def _dialect_points(old: Pretokenizer, new: Pretokenizer) -> tuple[int, ...] | None:
    """Code points where ``old`` and ``new`` split differently, or None for another grammar.

    None when the two split some probe string differently (see ``_PROBE``). Otherwise the
    candidates are the code points that some character class of either pattern holds
    in one dialect's Unicode tables and not in the other's; each is kept when a short
    text around it (beside a letter, a digit, punctuation and spaces) splits differently.
    """
    import numpy as np

    from tokembed.tokenizer.dialect import class_members, table_atoms

    if any(old.split(text) != new.split(text) for text in _probe_texts()):
        return None
    atoms = {s[a:b] for s in (*old.stages, *new.stages) for a, b in table_atoms(s)}
    differ = np.zeros(0x110000, dtype=bool)
    for atom in atoms:
        in_old, in_new = class_members(atom, old.dialect), class_members(atom, new.dialect)
        if in_old is not None and in_new is not None:
            mask_old, mask_new = np.zeros_like(differ), np.zeros_like(differ)
            mask_old[in_old], mask_new[in_new] = True, True
            differ |= mask_old != mask_new
    points = []
    for c in np.flatnonzero(differ).tolist():
        text = "a{0}a 1{0}1 !{0}! {0}  {0}\n".format(chr(c))
        if old.split(text) != new.split(text):
            points.append(c)
    return tuple(points)


def _kind(
    *,
    old_ids: int,
    added: list[int],
    removed: list[int],
    moved: list[tuple[int, int]],
    split: dict[int, tuple[int, ...]],
    merged: dict[int, tuple[int, ...]],
    exact: int,
    rewritten: bool,
    merges_extend: bool,
    same_grammar: bool = False,
) -> str:
    if rewritten:
        return "dialect-only" if same_grammar else "replacement"
    if not removed and not moved:
        inside = any(i < old_ids for i in added)
        return "append-only" if merges_extend and not inside else "mixed"
    if not removed and not added:
        return "permutation"
    if removed and not added:
        return "removal"
    if not added or not removed:  # additions with moved ids
        return "mixed"
    added_set, removed_set = set(added), set(removed)
    if set(split) == removed_set and added_set <= {i for ids in split.values() for i in ids}:
        return "split"
    if set(merged) == added_set and removed_set <= {j for ids in merged.values() for j in ids}:
        return "merge"
    # Fewer exact rows than changed ones: the vocabulary was replaced, overlap rows only.
    return "replacement" if exact < len(added) + len(removed) else "mixed"


def classify_change(old: Tokenizer, new: Tokenizer) -> VocabularyChange:
    """Classify ``old`` -> ``new`` (any tokenizers ``load_tokenizer`` reads) with its evidence.

    Example::

        >>> classify_change(tok, tok).kind  # doctest: +SKIP
        'append-only'
        >>> classify_change(load_tokenizer("r50k_base.tiktoken"),
        ...                 load_tokenizer("gpt2/")).kind  # doctest: +SKIP
        'dialect-only'
    """
    sym0, sym1 = symbols(old), symbols(new)
    exact = _exact_pairs(sym0, sym1)
    kept_old = {j for j, _ in exact}
    kept_new = {v for _, v in exact}
    added = sorted(set(sym1) - kept_new)
    removed = sorted(set(sym0) - kept_old)
    moved = [(j, v) for j, v in exact if j != v]
    moved_specials = sorted(
        name for j, _ in moved if isinstance(names := sym0[j][1], tuple) for name in names
    )
    pieces0, pieces1 = old.tables.pieces, new.tables.pieces
    split = {}
    for j in removed:
        if j in pieces0 and (spelled := _spell(new, pieces0[j])) and len(spelled) > 1:
            split[j] = spelled
    merged = {}
    for v in added:
        if v in pieces1 and (spelled := _spell(old, pieces1[v])) and len(spelled) > 1:
            merged[v] = spelled
    old_merges = _merge_pairs(old)
    new_merges = _merge_pairs(new)
    merges_extend = new_merges[: len(old_merges)] == old_merges
    rewritten = tuple(old.pretokenizer.stages) != tuple(new.pretokenizer.stages)
    points: tuple[int, ...] | None = None
    same_table = not (added or removed or moved) and new_merges == old_merges
    dialect_changed = old.pretokenizer.dialect != new.pretokenizer.dialect
    if same_table and (rewritten or dialect_changed):
        # The same table: is the pre-tokenizer another grammar, or the same one read
        # by another engine?
        points = _dialect_points(old.pretokenizer, new.pretokenizer)
        if not rewritten:
            # The same pattern text in another dialect changes the pre-tokenizer only
            # where the two engines split it differently.
            rewritten = bool(points)
            points = points or None
    kind = _kind(
        old_ids=old.tables.id_range,
        added=added,
        removed=removed,
        moved=moved,
        split=split,
        merged=merged,
        exact=len(exact),
        rewritten=rewritten,
        merges_extend=merges_extend,
        same_grammar=points is not None,  # computed only for the same table and merges
    )
    return VocabularyChange(
        kind=kind,
        old_ids=old.tables.id_range,
        new_ids=new.tables.id_range,
        exact=tuple(exact),
        added=tuple(added),
        removed=tuple(removed),
        moved=tuple(moved),
        moved_specials=tuple(moved_specials),
        pretokenizer_changed=rewritten,
        merges_extend=merges_extend,
        split=tuple(sorted(split.items())),
        merged=tuple(sorted(merged.items())),
        old_hash=old.address_hash,
        new_hash=new.address_hash,
        old_vocab_digest=ordered_vocab_digest(old),
        new_vocab_digest=ordered_vocab_digest(new),
        dialect_points=points or (),
    )
