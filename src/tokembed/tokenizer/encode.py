"""Encoding text to ids: the plain reference and the fast cached encoder.

Both apply, inside every pre-tokenization chunk, byte-level BPE's rule: start
from byte ids, repeatedly take the present pair with the smallest merge rank and
replace its non-overlapping occurrences left to right, until no learned pair is
present (``merges``). They differ only in speed:

* :func:`encode_ordinary_reference` runs that loop on every chunk, as written;
* :class:`FastEncoder` caches chunk → ids (natural text repeats chunks: RusLit40
  has ~8M chunks but ~217k unique ones) and merges a long chunk with a heap
  (O(n log n) where the reference is quadratic). Its engines, first available
  first: the compiled encoder (``_native/encode.c``: merges, cache and, for
  preset pre-tokenizers when built with the scanner, splitting too, all
  without the GIL); tiktoken's Rust core when the vocabulary fits tiktoken's
  model (``_tiktoken_backend``) and the compiled encoder is absent, except for
  text with a whitespace run long enough to overflow that core's stack
  (``_long_runs``); and the same rule in Python (``merges.merge_all``).

A rank file's tokenizer may come without explicit merges: the compiled encoder
then applies tiktoken's rule (join the pair whose bytes have the lowest rank)
to the file's table, and the merge list is derived only when asked for.

Errors: a lone surrogate raises LONE_SURROGATE; a byte without an id raises
UNREPRESENTABLE_BYTE naming the character and its offset. Nothing is dropped.

One long text may take several threads: when the compiled encoder also splits
(a preset pattern) and the text's UTF-8 is at least ``PARALLEL_MIN_BYTES``, it is
cut at the scanner's safe cuts (``tk_safe_cut``: points where both sides split
exactly like the whole) into up to ``threads`` parts, encoded at once and joined;
the ids are those of one thread. :func:`set_encode_threads` sets the process
default (``None``: ``min(os.cpu_count(), 4)``; ``1``: one thread, like tiktoken's
``encode``); ``FastEncoder(threads=...)`` overrides it for one encoder.

Example::

    >>> from tokembed.tokenizer.model import BPETables
    >>> from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer
    >>> t = BPETables.byte_level(merges=[(97, 98)])
    >>> encode_ordinary_reference(t, Pretokenizer.preset("teaching"), "abab ab")
    [256, 256, 32, 256]
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise, repeat
from typing import TYPE_CHECKING, Any

from tokembed.errors import TokenizerError
from tokembed.tokenizer._long_runs import has_long_whitespace
from tokembed.tokenizer._native import load
from tokembed.tokenizer._threads import (
    PARALLEL_MIN_BYTES,
    check_threads,
    set_encode_threads,
    split_for_threads,
    thread_pool,
)
from tokembed.tokenizer._tiktoken_backend import tiktoken_encoding
from tokembed.tokenizer._utf8 import lone_surrogate_error, utf8
from tokembed.tokenizer.merges import (
    NO_RANK,
    merge_all,
    replace_pair,
)
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "NATIVE_CACHE_LIMIT",
    "PARALLEL_MIN_BYTES",
    "DeferredTables",
    "FastEncoder",
    "encode_chunk_reference",
    "encode_ordinary_reference",
    "native_tables",
    "set_encode_threads",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
_NONE = (NO_RANK, -1)
# ~2M chunks x ~150 bytes ≈ 300 MB at worst; RusLit40 needs 217k entries.
_CACHE_LIMIT = 1 << 21
# The compiled cache holds chunks of up to 256 bytes with their ids (u32), so
# 1M entries stay under ~300 MB even at that length; RusLit40 fills ~217k.
NATIVE_CACHE_LIMIT = 1 << 20
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


def _check_text(tables: BPETables | Callable[[], BPETables], text: str) -> None:
    """Raise the located error a text would hit: LONE_SURROGATE or UNREPRESENTABLE_BYTE."""
    m = _SURROGATE.search(text)
    if m is not None:
        raise lone_surrogate_error(text, m.start())
    if callable(tables):
        tables = tables()
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


# Preset name -> the scanner's name for it (scan.h's TK_PRESET_* enum); "qwen" is the pattern
# of Qwen's rank file (formats.encodings), which is not a Pretokenizer preset.
_SCAN_PRESETS = {
    "teaching": "TEACHING",
    "r50k": "R50K",
    "cl100k": "CL100K",
    "o200k": "O200K",
    "gpt2-hf": "GPT2_HF",
    "qwen": "QWEN",
}


@cache
def _scan_patterns() -> dict[str, str]:
    """Pattern -> the scanner's name for it. Read on first use: formats imports this module."""
    from tokembed.tokenizer.formats.encodings import OWN_ENCODINGS

    def pattern(name: str) -> str:
        return PATTERNS[name] if name in PATTERNS else OWN_ENCODINGS[name].pattern

    return {pattern(name): scan_name for name, scan_name in _SCAN_PRESETS.items()}


def native_tables(tables: BPETables) -> Any | None:
    """The compiled encoder's tables for explicit merges, or None when it is not built
    (or ids do not fit its 31-bit slots)."""
    native = load("_encode")
    if native is None:
        return None
    try:
        return native.Tables.from_merges(tables.byte_ids, tables.merges)
    except OverflowError:
        return None


def _scan_args(native: Any, pretokenizer: Pretokenizer) -> tuple[int, int] | None:
    """(preset, engine) for the compiled scanner when it splits exactly like ``pretokenizer``."""
    if native is None or not native.HAVE_SCAN or len(pretokenizer.stages) != 1:
        return None
    scan_name = _scan_patterns().get(pretokenizer.stages[0])
    if scan_name is None:
        return None
    engine = getattr(native, f"ENGINE_{pretokenizer.engine.upper()}", None)
    preset = getattr(native, f"PRESET_{scan_name}", None)
    return None if engine is None or preset is None else (preset, engine)


@dataclass(frozen=True, kw_only=True)
class DeferredTables:
    """A rank file's compiled tables (``native``, from ``_encode.Tables.from_ranks``) to encode
    with at once, and ``build``, a picklable function that makes the explicit
    :class:`BPETables` (with exactly ``specials``) when something first needs them."""

    native: Any
    build: Callable[[], BPETables]
    specials: Mapping[str, int]


class FastEncoder:
    """Chunk-cached encoder equal to the reference; compiled when built, else tiktoken's
    core when it is exact, else Python.

    ``tables`` may be a function that builds them (a rank file's merge list is derived
    on first use); ``native`` then gives the compiled tables it encodes with meanwhile.
    """

    def __init__(
        self,
        tables: BPETables | Callable[[], BPETables],
        pretokenizer: Pretokenizer,
        *,
        use_native: bool = True,
        use_tiktoken: bool = True,
        verified: bool = False,
        native: Any | None = None,
        cache_limit: int = NATIVE_CACHE_LIMIT,
        threads: int | None = None,
        parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    ) -> None:
        check_threads(threads)
        self.threads = threads
        self.parallel_min_bytes = parallel_min_bytes
        self._tables_or_build = tables
        self.pretokenizer = pretokenizer
        module = load("_encode") if use_native else None
        if module is not None and native is None:
            native = native_tables(self.tables)
        self._native = native if module is not None else None
        self._module = module
        self._scan = _scan_args(module, pretokenizer) if self._native is not None else None
        # Threads (batches) share one sharded chunk cache: a chunk merged by one is a
        # hit for the others, where private caches would each pay for the same misses.
        self._shared = None
        if module is not None and self._native is not None:
            self._shared = module.SharedCache(self._native, cache_limit=cache_limit)
        self._local = threading.local()
        self._tiktoken = None
        if use_tiktoken and self._native is None:
            self._tiktoken = tiktoken_encoding(self.tables, pretokenizer, verified=verified)
        self._cache: dict[str, list[int]] = {}
        self._rank: dict[tuple[int, int], int] | None = None

    @property
    def tables(self) -> BPETables:
        """The explicit tables (built now when they were given as a function)."""
        if callable(self._tables_or_build):
            self._tables_or_build = self._tables_or_build()
        return self._tables_or_build

    @property
    def backend(self) -> str:
        """``"native"`` (compiled), ``"tiktoken"`` or ``"cached"`` (Python): who encodes ordinary text."""
        if self._native is not None:
            return "native"
        return "cached" if self._tiktoken is None else "tiktoken"

    @property
    def native_split(self) -> bool:
        """True when the compiled encoder also splits the text (a preset, scanner built)."""
        return self._scan is not None

    def native_encoder(self) -> Any:
        """This thread's compiled encoder (one per thread: each holds a cache and a lock)."""
        enc = getattr(self._local, "encoder", None)
        if enc is None:
            assert self._module is not None
            enc = self._module.Encoder(self._native, cache=self._shared)
            self._local.encoder = enc
        return enc

    def _encode_chunk(self, data: bytes) -> list[int]:
        """Same result as the reference, in O(n log n) for long chunks."""
        if self._rank is None:
            self._rank = {pair: rank for pair, (rank, _) in self.tables.pair_ranks.items()}
        return merge_all(_byte_ids(self.tables, data), self._rank.get, self.tables.merges)

    def _parts(self, text: str) -> list[str] | None:
        """``text`` cut at safe cuts into 2..threads parts, or None when one thread is due."""
        if self._scan is None:
            return None
        return split_for_threads(
            text, engine=self._scan[1], threads=self.threads, min_bytes=self.parallel_min_bytes
        )

    def _encode_native(self, text: str, *, as_bytes: bool) -> Any:
        assert self._module is not None
        parts = self._parts(text)
        if parts is not None:
            try:
                return self._encode_parts(parts, as_bytes=as_bytes)
            except (UnicodeEncodeError, self._module.MissingByte):
                pass  # the one-thread path below reports it located in the whole text
        enc = self.native_encoder()
        try:
            if self._scan is not None:
                return enc.encode_text(text, *self._scan, as_bytes=as_bytes)
            return enc.encode_chunks(text, self.pretokenizer.split(text), as_bytes=as_bytes)
        except (UnicodeEncodeError, self._module.MissingByte):
            _check_text(lambda: self.tables, text)
            raise  # _check_text raises for every such text; this line is a safety net

    def _encode_parts(self, parts: list[str], *, as_bytes: bool) -> Any:
        """Each part on its own thread (the first on this one), joined in order."""
        assert self._scan is not None
        scan = self._scan

        def one(part: str) -> Any:
            return self.native_encoder().encode_text(part, *scan, as_bytes=as_bytes)

        pool = thread_pool()
        futures = [pool.submit(one, part) for part in parts[1:]]
        first = one(parts[0])
        rest = [f.result() for f in futures]
        if as_bytes:
            return b"".join([first, *rest])
        out: list[int] = first
        for ids in rest:
            out += ids
        return out

    def encode_ordinary_many(self, texts: Sequence[str]) -> list[list[int]] | None:
        """Ids of each text in one compiled call (split by the scanner), or None when that
        path is not in use or a text needs the located error of :meth:`encode_ordinary`."""
        if self._scan is None:
            return None
        assert self._module is not None
        try:
            many: list[list[int]] = self.native_encoder().encode_texts(texts, *self._scan)
        except (UnicodeEncodeError, self._module.MissingByte):
            return None
        return many

    def encode_ordinary_numpy(self, text: str) -> np.ndarray[Any, np.dtype[np.uint32]] | None:
        """The ids as a ``uint32`` array straight from the compiled encoder's buffer, or None
        when it is not in use or the text holds surrogates (``Tokenizer`` joins pairs)."""
        import numpy as np

        if self._native is None:
            return None
        try:
            data: bytes = self._encode_native(text, as_bytes=True)
        except TokenizerError as exc:
            if exc.code != "LONE_SURROGATE":
                raise
            return None
        return np.frombuffer(bytearray(data), dtype=np.uint32)

    def encode_ordinary(self, text: str) -> list[int]:
        if self._native is not None:
            native_ids: list[int] = self._encode_native(text, as_bytes=False)
            return native_ids
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
