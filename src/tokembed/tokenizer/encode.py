"""Encoding text to ids: the plain reference and the fast cached encoder.

Both apply, inside every pre-tokenization chunk, byte-level BPE's rule: start
from byte ids, repeatedly take the present pair with the smallest merge rank and
replace its non-overlapping occurrences left to right, until no learned pair is
present (``merges``). They differ only in speed:

* :func:`encode_ordinary_reference` runs that loop on every chunk, as written;
* :class:`FastEncoder` caches chunk → ids (natural text repeats chunks: RusLit40
  has ~8M chunks but ~217k unique ones), merges a long chunk with a heap
  (``merges.merge_all``, O(n log n) where the reference is quadratic) and, when
  the vocabulary fits tiktoken's model (see ``_tiktoken_backend``), runs on
  tiktoken's Rust core instead, except for text with a whitespace run long
  enough to overflow that core's stack (``_long_runs``): such text takes our
  own path, which gives the same ids.

Errors: a lone surrogate raises LONE_SURROGATE; a byte without an id raises
UNREPRESENTABLE_BYTE naming the character and its offset. Nothing is dropped.

Example::

    >>> from tokembed.tokenizer.model import BPETables
    >>> from tokembed.tokenizer.pretokenize import Pretokenizer
    >>> t = BPETables.byte_level(merges=[(97, 98)])
    >>> encode_ordinary_reference(t, Pretokenizer.preset("teaching"), "abab ab")
    [256, 256, 32, 256]
"""

from __future__ import annotations

import re
from itertools import pairwise, repeat

from tokembed.errors import TokenizerError
from tokembed.tokenizer._long_runs import has_long_whitespace
from tokembed.tokenizer._tiktoken_backend import tiktoken_encoding
from tokembed.tokenizer._utf8 import lone_surrogate_error, utf8
from tokembed.tokenizer.merges import (
    NO_RANK,
    merge_all,
    replace_pair,
)
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = ["FastEncoder", "encode_chunk_reference", "encode_ordinary_reference"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_NONE = (NO_RANK, -1)
# ~2M chunks x ~150 bytes ≈ 300 MB at worst; RusLit40 needs 217k entries.
_CACHE_LIMIT = 1 << 21
# Longer chunks are not cached: they rarely repeat and would pin memory.
_CACHED_CHUNK = 1 << 12


class _MissingByte(Exception):
    """Internal: a chunk holds a byte the vocabulary cannot spell."""


def _byte_ids(tables: BPETables, data: bytes) -> list[int]:
    byte_ids = tables.byte_ids
    ids = [byte_ids[b] for b in data]
    if None in ids:
        raise _MissingByte
    return ids  # type: ignore[return-value]


def _check_text(tables: BPETables, text: str) -> None:
    """Raise the located error a text would hit: LONE_SURROGATE or UNREPRESENTABLE_BYTE."""
    m = _SURROGATE.search(text)
    if m is not None:
        raise lone_surrogate_error(text, m.start())
    missing = set(tables.missing_bytes())
    if not missing:
        return
    for offset, ch in enumerate(text):
        bad = [b for b in ch.encode("utf-8") if b in missing]
        if bad:
            raise TokenizerError(
                "UNREPRESENTABLE_BYTE",
                f"character {ch!r} (U+{ord(ch):04X}) at offset {offset} needs byte "
                f"0x{bad[0]:02X}, which this vocabulary has no id for",
                value=offset,
                fix="remove or replace that character, or use a vocabulary with all 256 bytes",
            )


def encode_chunk_reference(tables: BPETables, data: bytes) -> list[int]:
    """Ids of one chunk's bytes by the plain rule (a full pass per merge)."""
    ids = _byte_ids(tables, data)
    ranks = tables.pair_ranks
    while len(ids) > 1:
        # (rank, result) of every adjacent pair; _NONE for pairs that are not merges.
        rank, result = min(map(ranks.get, pairwise(ids), repeat(_NONE)))
        if result < 0:
            break
        ids = replace_pair(ids, tables.merges[rank][:2], result)
    return ids


def encode_ordinary_reference(
    tables: BPETables, pretokenizer: Pretokenizer, text: str
) -> list[int]:
    """Ids of ``text`` with no special-token handling, by :func:`encode_chunk_reference`."""
    out: list[int] = []
    try:
        for chunk in pretokenizer.split(text):
            out.extend(encode_chunk_reference(tables, utf8(chunk)))
    except (_MissingByte, TokenizerError):
        _check_text(tables, text)
        raise
    return out


class FastEncoder:
    """Chunk-cached encoder equal to the reference; uses tiktoken's core when it is exact."""

    def __init__(
        self,
        tables: BPETables,
        pretokenizer: Pretokenizer,
        *,
        use_tiktoken: bool = True,
        verified: bool = False,
    ) -> None:
        self.tables = tables
        self.pretokenizer = pretokenizer
        self._tiktoken = (
            tiktoken_encoding(tables, pretokenizer, verified=verified) if use_tiktoken else None
        )
        self._cache: dict[str, list[int]] = {}
        self._rank = {pair: rank for pair, (rank, _) in tables.pair_ranks.items()}
        self._merges = tables.merges

    @property
    def backend(self) -> str:
        """``"tiktoken"`` or ``"cached"``: which engine encodes ordinary text."""
        return "cached" if self._tiktoken is None else "tiktoken"

    def _encode_chunk(self, data: bytes) -> list[int]:
        """Same result as the reference, in O(n log n) for long chunks."""
        return merge_all(_byte_ids(self.tables, data), self._rank.get, self._merges)

    def encode_ordinary(self, text: str) -> list[int]:
        if self._tiktoken is not None:
            if _SURROGATE.search(text) is not None:
                _check_text(self.tables, text)
            if not has_long_whitespace(text):
                return self._tiktoken.encode_ordinary(text)
        cache = self._cache
        out: list[int] = []
        try:
            for chunk in self.pretokenizer.split(text):
                ids = cache.get(chunk)
                if ids is None:
                    ids = self._encode_chunk(utf8(chunk))
                    if len(chunk) <= _CACHED_CHUNK:
                        if len(cache) >= _CACHE_LIMIT:
                            cache.clear()
                        cache[chunk] = ids
                out += ids
        except (_MissingByte, TokenizerError):
            _check_text(self.tables, text)
            raise
        return out
