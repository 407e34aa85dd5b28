"""Encoding text to ids: the one check every text passes first, and the reference encoder.

Every encoder applies, inside every pre-tokenization chunk, byte-level BPE's rule: start
from byte ids, repeatedly join the leftmost present pair with the smallest merge rank,
one join at a time, until no learned pair is present (HF's BPE; tiktoken's rule on rank
files). Two implementations produce the ids: the compiled core
(:class:`~.compiled.CompiledEncoder`) and the reference written out here,
:func:`encode_chunk_reference` (the same rule over a heap of pairs). :class:`ReferenceEncoder` is that reference behind a plain dict of
chunk → ids (natural text repeats its chunks: RusLit-40 has ~8M chunks but ~217k distinct
ones); it is the encoder wherever the compiled core is not built or
``TOKEMBED_PURE_PYTHON=1`` asks for the reference.

A text is checked once, before an encoder sees it (:class:`TextCheck`): a surrogate
pair (``"\\ud83d\\udc4d"``, as JSON decoding yields) becomes the character it stands for;
a lone surrogate raises LONE_SURROGATE and a character needing a byte the vocabulary has
no id for raises UNREPRESENTABLE_BYTE, each naming its offset. Nothing is dropped, and
encoders take checked text only, except an encoder that refuses on its own whatever the
check would find (``Encoder.refusals``): it is given the text first, and the check runs
only after it refuses.

Example::

    >>> from tokembed.tokenizer.model import BPETables
    >>> from tokembed.tokenizer.pretokenize import Pretokenizer
    >>> t = BPETables.byte_level(merges=[(97, 98)])
    >>> encode_ordinary_reference(t, Pretokenizer.preset("teaching"), "abab ab")
    [256, 256, 32, 256]
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tokembed.errors import TokenizerError
from tokembed.tokenizer._native import load
from tokembed.tokenizer._utf8 import lone_surrogate_error, utf8_lines
from tokembed.tokenizer.merges import NO_RANK
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "Encoder",
    "ReferenceEncoder",
    "TextCheck",
    "encode_chunk_reference",
    "encode_ordinary_reference",
    "flat_ids",
    "join_flat_reference",
    "join_surrogate_pairs",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
_LONE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
_NONE = (NO_RANK, -1)
# The reference's memo is emptied at this many chunks (RusLit-40 needs ~217k), and holds
# chunks of at most _MEMO_CHUNK characters: longer ones rarely repeat and would pin memory.
_MEMO_LIMIT = 1 << 21
_MEMO_CHUNK = 1 << 12


class Encoder(Protocol):
    """What a tokenizer needs of an encoder (:class:`ReferenceEncoder`, ``CompiledEncoder``).

    Each method takes text that passed :class:`TextCheck`, or any text where
    :attr:`refusals` is not empty.
    """

    @property
    def implementation(self) -> str:
        """``"compiled"`` or ``"reference"``: which code computes the ids."""
        ...

    @property
    def refusals(self) -> tuple[type[Exception], ...]:
        """What the encoder raises on unchecked text wherever :class:`TextCheck` would
        find a problem (and only there), so that a caller may encode first and check
        only after one of these; empty: the encoder needs checked text."""
        ...

    def encode(self, text: str) -> list[int]: ...

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]: ...

    def encode_numpy(self, text: str) -> NDArray[np.uint32]: ...

    def encode_many_numpy(
        self, texts: Sequence[str]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """All texts' ids in one array, and the ``len(texts) + 1`` offsets that cut it."""
        ...

    def encode_lines_numpy(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """:meth:`encode_many_numpy` of :func:`~tokembed.tokenizer._utf8.utf8_lines` of
        ``data`` (whose every byte has an id)."""
        ...

    def join_flat(
        self, runs: Sequence[tuple[NDArray[np.uint32], NDArray[np.int64]]]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """Results of :meth:`encode_many_numpy` on runs of texts, in order, as the one result
        of all their texts (see :func:`join_flat_reference`)."""
        ...


def join_flat_reference(
    runs: Sequence[tuple[NDArray[np.uint32], NDArray[np.int64]]],
) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """``(ids, offsets)`` results of runs of texts (offsets from 0, one more than the run's
    texts), in order, as one: the ids concatenated, each run's offsets moved past the ids
    before it.

    Example::

        >>> one = (np.array([1, 2], np.uint32), np.array([0, 2]))
        >>> two = (np.array([3], np.uint32), np.array([0, 0, 1]))
        >>> ids, offsets = join_flat_reference([one, two])
        >>> ids.tolist(), offsets.tolist()
        ([1, 2, 3], [0, 2, 2, 3])
    """
    ids = np.concatenate([np.zeros(0, np.uint32), *(flat for flat, _ in runs)])
    offsets = [np.zeros(1, np.int64)]
    shift = 0
    for flat, cuts in runs:
        offsets.append(np.asarray(cuts[1:], np.int64) + shift)
        shift += len(flat)
    return ids.astype(np.uint32, copy=False), np.concatenate(offsets)


def flat_ids(lists: Sequence[Sequence[int]]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
    """Lists of ids as one ``uint32`` array and the ``len(lists) + 1`` offsets that cut it."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(ids) for ids in lists], out=offsets[1:])
    flat = np.fromiter((i for ids in lists for i in ids), dtype=np.uint32, count=int(offsets[-1]))
    return flat, offsets


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each high+low surrogate pair replaced by the character it encodes.

    JSON's ``"\\ud83d\\udc4d"`` decodes to such a pair; tiktoken encodes it as 👍 and so do we.

    Raises:
        TokenizerError(LONE_SURROGATE): a surrogate without its partner, at its offset in ``text``.
    """
    lone = _LONE.search(text)
    if lone is not None:
        raise lone_surrogate_error(text, lone.start())
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _utf8_bytes() -> tuple[np.ndarray, list[np.ndarray]]:
    """Every code point that has a UTF-8 form, and its UTF-8 bytes (one array per position)."""
    cp = np.arange(0x110000, dtype=np.int64)
    cp = cp[(cp < 0xD800) | (cp > 0xDFFF)]
    size = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)
    lead = np.select(
        [size == 1, size == 2, size == 3],
        [cp, 0xC0 | (cp >> 6), 0xE0 | (cp >> 12)],
        0xF0 | (cp >> 18),
    )
    # Continuation byte k (k = 1 is the last) holds bits 6(k-1)..6k-1; -1 where it does not exist.
    conts = [np.where(size > k, 0x80 | ((cp >> (6 * (k - 1))) & 0x3F), -1) for k in (1, 2, 3)]
    return cp, [lead, *conts]


@cache
def _bad_points(missing: tuple[int, ...]) -> np.ndarray:
    """The code points whose UTF-8 holds a byte of ``missing``, sorted."""
    cp, positions = _utf8_bytes()
    bad = np.zeros(cp.size, dtype=bool)
    for column in positions:
        bad |= np.isin(column, missing)
    return cp[bad]


@cache
def _bmp_bitmap(missing: tuple[int, ...]) -> bytes:
    """The same answer for U+0000..U+FFFF as 65,536 bits (empty when no byte is missing)."""
    if not missing:
        return b""
    bits = np.zeros(0x10000, dtype=bool)
    points = _bad_points(missing)
    bits[points[points < 0x10000]] = True
    return np.packbits(bits, bitorder="little").tobytes()


@cache
def _unrepresentable(missing: tuple[int, ...]) -> re.Pattern[str] | None:
    """A class of the characters whose UTF-8 holds a byte of ``missing`` (None: no such character)."""
    if not missing:
        return None
    points = _bad_points(missing)
    if points.size == 0:
        return None  # bytes such as 0xFF that no UTF-8 text holds
    breaks = np.flatnonzero(np.diff(points) != 1)
    starts = np.concatenate(([points[0]], points[breaks + 1])).tolist()
    ends = np.concatenate((points[breaks], [points[-1]])).tolist()
    body = "".join(f"\\U{s:08x}-\\U{e:08x}" for s, e in zip(starts, ends, strict=True))
    return re.compile(f"[{body}]")


# What a scan of a text finds first (the compiled ``scan_text`` answers the same codes).
_FINE, _SURROGATE_FOUND, _MISSING_FOUND = 0, 1, 2


class TextCheck:
    """The one check a text passes before any encoder sees it (see the module docstring).

    Built from the bytes a vocabulary has no id for (``BPETables.missing_bytes()``); calling
    it returns the text to encode (surrogate pairs joined) or raises. The search runs in C
    where the compiled module is built (``_encode.scan_text``, a pass over the text's code
    points), else with ``re``; both find the same.

    Example::

        >>> TextCheck([0x04])("ok \\ud83d\\udc4d")
        'ok 👍'

    Raises (when called):
        TokenizerError(LONE_SURROGATE): a surrogate without its partner, at its offset.
        TokenizerError(UNREPRESENTABLE_BYTE): a character needs a missing byte; the message
            names the character, its offset and the byte.
    """

    def __init__(self, missing_bytes: Iterable[int]) -> None:
        self.missing = tuple(sorted(set(missing_bytes)))
        self._flags = bytes(b in self.missing for b in range(256))
        self._bmp = _bmp_bitmap(self.missing)
        self._ascii_bad = any(b < 0x80 for b in self.missing)
        self._compiled = load("_encode")

    def __call__(self, text: str) -> str:
        if text.isascii() and not self._ascii_bad:
            return text
        problem, offset = self.find(text)
        if problem == _SURROGATE_FOUND:
            text = join_surrogate_pairs(text)  # raises for a lone one
            problem, offset = self.find(text)  # what is left to find: a missing byte
        if problem == _MISSING_FOUND:
            raise self._error(text, offset)
        return text

    def many(self, texts: Sequence[str]) -> list[str]:
        """``[self(t) for t in texts]``, checked as one joined text when that finds nothing
        (a batch of short documents paid a call per text: ~8% of tokenizing a corpus of
        lines); any finding sends every text through :meth:`__call__`, which names it."""
        joined = "".join(texts)
        if (joined.isascii() and not self._ascii_bad) or self.find(joined)[0] == 0:
            return list(texts)
        return [self(text) for text in texts]

    def find(self, text: str) -> tuple[int, int]:
        """``(1, i)``: the first surrogate is at ``i``; else ``(2, i)``: the character at ``i``
        needs a missing byte; else ``(0, -1)``."""
        if self._compiled is not None:
            found: tuple[int, int] = self._compiled.scan_text(text, self._flags, self._bmp)
            return found
        return self.find_reference(text)

    def find_reference(self, text: str) -> tuple[int, int]:
        """:meth:`find` with ``re`` (what runs where the compiled module is not built)."""
        surrogate = _SURROGATE.search(text)
        if surrogate is not None:
            return _SURROGATE_FOUND, surrogate.start()
        bad = _unrepresentable(self.missing)
        found = None if bad is None else bad.search(text)
        return (_FINE, -1) if found is None else (_MISSING_FOUND, found.start())

    def _error(self, text: str, offset: int) -> TokenizerError:
        ch = text[offset]
        byte = next(b for b in ch.encode("utf-8") if b in self.missing)
        return TokenizerError(
            "UNREPRESENTABLE_BYTE",
            f"character {ch!r} (U+{ord(ch):04X}) at offset {offset} needs byte "
            f"0x{byte:02X}, which this vocabulary has no id for",
            value=offset,
            fix="remove or replace that character, or use a vocabulary with all 256 bytes",
        )


def encode_chunk_reference(tables: BPETables, data: bytes) -> list[int]:
    """Ids of one chunk's bytes by the plain rule (a full pass per merge); with
    ``tables.ignore_merges``, a chunk that is one piece is that piece's id.

    Raises:
        TokenizerError(UNREPRESENTABLE_BYTE): a byte has no id (its offset in ``data``).
    """
    byte_ids = tables.byte_ids
    ids: list[int] = [byte_ids[b] for b in data]  # type: ignore[misc]
    if None in ids:
        offset = ids.index(None)  # type: ignore[arg-type]
        raise TokenizerError(
            "UNREPRESENTABLE_BYTE",
            f"byte 0x{data[offset]:02X} at byte offset {offset} has no id in this vocabulary",
            value=offset,
            fix="remove that byte, or use a vocabulary with all 256 bytes",
        )
    whole = tables.piece_ids.get(data) if tables.ignore_merges else None
    if whole is not None:
        return [whole]
    return _join_leftmost_lowest(ids, tables.pair_ranks)


def _join_leftmost_lowest(
    ids: list[int], ranks: dict[tuple[int, int], tuple[int, int]]
) -> list[int]:
    """Join, one at a time, the leftmost adjacent pair of the lowest merge rank, until none is left.

    That is HF's BPE and tiktoken's rule. (Joining every occurrence of a pair at once
    differs where a piece ranks below one of its parts: "aaaa" with aaa < aa gives aaa + a,
    not aa + aa.) A heap of (rank, position) keeps long chunks (a run of 10^5 spaces)
    at O(n log n); entries whose pair has changed since they were pushed are skipped.
    """
    n = len(ids)
    nxt = list(range(1, n + 1))
    prv = list(range(-1, n - 1))
    live = list(ids)
    heap = [(ranks[p][0], i) for i, p in enumerate(pairwise(ids)) if p in ranks]
    heapq.heapify(heap)
    while heap:
        rank, i = heapq.heappop(heap)
        j = nxt[i]
        if live[i] < 0 or j >= n or ranks.get((live[i], live[j]), _NONE)[0] != rank:
            continue  # stale: position i was joined into its left neighbour, or changed
        live[i] = ranks[live[i], live[j]][1]
        live[j] = -1
        nxt[i] = nxt[j]
        if nxt[i] < n:
            prv[nxt[i]] = i
        for left in (prv[i], i):
            if left >= 0 and nxt[left] < n:
                pair = (live[left], live[nxt[left]])
                if pair in ranks:
                    heapq.heappush(heap, (ranks[pair][0], left))
    return [x for x in live if x >= 0]


def encode_ordinary_reference(
    tables: BPETables, pretokenizer: Pretokenizer, text: str
) -> list[int]:
    """Ids of ``text`` with no special-token handling: the check, then
    :func:`encode_chunk_reference` on every chunk.

    Raises:
        TokenizerError(LONE_SURROGATE, UNREPRESENTABLE_BYTE): see :class:`TextCheck`.
    """
    text = TextCheck(tables.missing_bytes())(text)
    return [
        i
        for chunk in pretokenizer.split(text)
        for i in encode_chunk_reference(tables, chunk.encode())
    ]


class ReferenceEncoder:
    """:func:`encode_chunk_reference` on every chunk, each distinct chunk computed once."""

    implementation = "reference"
    refusals: tuple[type[Exception], ...] = ()  # the plain reference: checked text only

    def __init__(self, tables: BPETables, pretokenizer: Pretokenizer) -> None:
        self.tables = tables
        self.pretokenizer = pretokenizer
        self._memo: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        """Ids of a checked text."""
        memo, tables = self._memo, self.tables
        out: list[int] = []
        for chunk in self.pretokenizer.split(text):
            ids = memo.get(chunk)
            if ids is None:
                ids = encode_chunk_reference(tables, chunk.encode())
                if len(chunk) <= _MEMO_CHUNK:
                    if len(memo) >= _MEMO_LIMIT:
                        memo.clear()
                    memo[chunk] = ids
            out += ids
        return out

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` of each checked text."""
        return [self.encode(text) for text in texts]

    def encode_numpy(self, text: str) -> NDArray[np.uint32]:
        """:meth:`encode` as a ``uint32`` array."""
        return np.asarray(self.encode(text), dtype=np.uint32)

    def encode_many_numpy(
        self, texts: Sequence[str]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """:meth:`encode_many` as one ``uint32`` array and its offsets (see :func:`flat_ids`)."""
        return flat_ids(self.encode_many(texts))

    def encode_lines_numpy(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """The non-empty lines of UTF-8 ``data`` through :meth:`encode_many_numpy`."""
        return self.encode_many_numpy(utf8_lines(data))

    def join_flat(
        self, runs: Sequence[tuple[NDArray[np.uint32], NDArray[np.int64]]]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """:func:`join_flat_reference`."""
        return join_flat_reference(runs)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_memo": {}}  # the memo is rebuilt on demand
