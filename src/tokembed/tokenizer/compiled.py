"""The compiled encoder: one vocabulary and pre-tokenizer on the C core, with threads for long texts.

:class:`CompiledEncoder` holds a vocabulary's compiled tables (``_native/_encode``: explicit
merges, or a rank file's bytes → rank table under tiktoken's rule, which needs no merge
list; a chunk that is one piece is that piece's id without merging wherever the tables
carry ``ignore_merges``, as every rank file does) and gives the ids of checked text (:class:`~.encode.TextCheck`). When the
pre-tokenizer is one of the scanned patterns (:data:`~.patterns.SCANNED`), splitting
happens in C too, and both run without the GIL; any other pre-tokenizer splits in Python
and hands the chunks over. Each encoder answers repeated short chunks (up to 32 bytes and 7
ids) from a front cache of its own: 4 MiB, grown once to 16 MiB between calls when a text has
more distinct short chunks than it holds. Behind it, a sharded chunk → ids cache is
shared by the threads that encode with one tokenizer: a chunk merged by one is a hit for the
others. A chunk enters that cache only when it is merged a second time, since the front holds
most repeats and most other chunks (sentences of CJK or Thai, rare words) never come back.

One long text may take several threads: when the scanner splits and the text's UTF-8 is at
least :data:`PARALLEL_MIN_BYTES`, it is cut at the scanner's safe cuts (``tk_safe_cut``:
a line feed after a non-space, before a character that is neither space nor ``/``, or the
last space before a letter after a space or line feed; both sides split exactly like the
whole) into up to :data:`PARTS_PER_THREAD` parts per thread, which up to ``threads``
threads take in turn, and joined; the ids are those of one thread.
:func:`set_encode_threads` sets the process default (``None``: ``min(os.cpu_count(), 4)``;
``1``: one thread, like tiktoken's ``encode``); ``CompiledEncoder(threads=...)`` overrides it
for one encoder.

Example::

    >>> set_encode_threads(1)   # one thread for every encode in this process
    >>> set_encode_threads(None)  # back to min(cpu_count, 4)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import count, pairwise
from typing import TYPE_CHECKING, Any

import numpy as np

from tokembed.errors import UsageError
from tokembed.tokenizer._native import load
from tokembed.tokenizer._utf8 import utf8_lines
from tokembed.tokenizer.dialect import DIALECTS
from tokembed.tokenizer.encode import flat_ids
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.patterns import scanner_id
from tokembed.tokenizer.pretokenize import Pretokenizer

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "CACHE_LIMIT",
    "PARALLEL_MIN_BYTES",
    "PARTS_PER_THREAD",
    "CompiledEncoder",
    "DeferredTables",
    "compiled_pieces",
    "compiled_rank_tables",
    "compiled_tables",
    "run_threaded",
    "set_encode_threads",
]

# The shared cache holds chunks of up to 256 bytes with their ids (u32) in 64-byte slots
# kept at most half full, plus an arena for chunks too long to sit in a slot that is cleared
# beyond 64 bytes per entry, so 1M entries stay under ~200 MB at any chunk length. A chunk
# enters on its second merge, and one that fits the encoder's front cache only where that cannot
# keep it (encode_core.c, short_cached), so RusLit-40's first 4 MB leaves 40 entries (o200k). Each
# thread's encoder adds a 4 MiB front cache (16 MiB once a call on text with more distinct
# short chunks than it holds has displaced a quarter of them), 128 KiB of doorkeeper bits
# and a 256 KiB window for a str's UTF-8 (_native/encode_front.h, encode_core.c), made on its
# first call.
CACHE_LIMIT = 1 << 20
# Texts shorter than this take one thread. Cutting costs tens of microseconds, but a cold
# text's parts each start with an empty memo and a cache the other thread is still filling:
# on two cores, 0.6 MB of CJK ran at 0.79-1.72x of one thread over five vocabularies (three
# slower), while 2 MB and more gained 1.4-2.1x. Threads must never make a call slower.
PARALLEL_MIN_BYTES = 1 << 20
# Beyond 4 threads the shared cache's shards and memory bandwidth gain little per thread.
_MAX_THREADS = 4
# Parts per thread of one long text. A text's first stretch costs most (its words are new
# to the cache, later ones hit), so two equal halves left one thread with most of the work
# (4 MB of RusLit-40 on o200k: 221 ms for the first half, 47 ms for the second); in smaller
# parts taken in turn, the threads finish together.
PARTS_PER_THREAD = 4

_default_threads: int | None = None
_pool_lock = threading.Lock()
_pool: Any = None


def _check_threads(threads: int | None) -> None:
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"threads must be None or an integer >= 1, got {threads!r}",
            value=threads,
            fix="pass threads=1 for one thread, or None for min(os.cpu_count(), 4)",
        )


def set_encode_threads(threads: int | None) -> None:
    """Set how many threads one long ``encode_ordinary`` call may use, process-wide.

    ``None`` (the default) means ``min(os.cpu_count(), 4)``; ``1`` keeps every call
    on the calling thread (tiktoken's ``encode`` is single-threaded too). Ids never
    depend on it. Raises UsageError INVALID_ARGUMENT for anything but None or an int >= 1.

    Example::

        >>> set_encode_threads(1); set_encode_threads(None)
    """
    global _default_threads
    _check_threads(threads)
    _default_threads = threads


def _forget_pool() -> None:
    # A forked child has none of the parent's pool threads, but the pool would count
    # them as idle and queue work that never runs (DataLoader workers fork).
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def _pool_threads() -> int:
    """Threads of the process-wide pool: one fewer than the CPUs (the caller works too)."""
    return max(os.cpu_count() or 1, _MAX_THREADS) - 1


def _thread_pool() -> Any:
    """One process-wide pool: its threads keep their per-thread compiled encoders."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(_pool_threads(), thread_name_prefix="tokembed-encode")
        return _pool


def run_threaded(n: int, run: Callable[[int], Any], *, threads: int) -> list[Any]:
    """``[run(i) for i in range(n)]`` on up to ``threads`` threads: the calling thread and
    the process-wide pool's (at most one per CPU), each taking the next ``i`` as it
    finishes one. The first failing item's error (in index order) is raised after all ran.

    The pool's threads live as long as the process and keep their per-thread compiled
    encoders, so a call neither starts threads nor builds encoders (a new pool per batch
    did both, and left the calling thread idle; the speed of a single cold batch did not
    change measurably: qwen on 2 MB of 13 languages, 2 threads, 30.4 -> 32.4 MB/s, median
    of 5).

    Example::

        >>> run_threaded(3, lambda i: i * i, threads=2)
        [0, 1, 4]
    """
    results: list[Any] = [None] * n
    failed: list[BaseException | None] = [None] * n
    taken = count()  # next() on it is atomic under the GIL

    def work() -> None:
        while (i := next(taken)) < n:
            try:
                results[i] = run(i)
            except Exception as error:  # raised below, in index order
                failed[i] = error

    k = min(threads, n, _pool_threads() + 1)
    pool = _thread_pool() if k > 1 else None
    futures = [pool.submit(work) for _ in range(k - 1)] if pool is not None else []
    work()
    for future in futures:
        future.result()
    for error in failed:
        if error is not None:
            raise error
    return results


def compiled_pieces(tables: BPETables) -> list[tuple[int, bytes]]:
    """The ``(id, bytes)`` pieces the compiled tables are given: every one but an empty token
    (HF loads "" as one), which is never a chunk's piece, since chunks are never empty, and
    the compiled piece table holds one byte or more.

    Example::

        >>> compiled_pieces(BPETables.byte_level(merges=[(97, 98)]))[-1]
        (256, b'ab')
    """
    return [(i, piece) for i, piece in tables.pieces.items() if piece]


def compiled_tables(tables: BPETables) -> Any | None:
    """The compiled encoder's tables for explicit merges, or None when it is not built
    (or ids do not fit its 31-bit slots). The compiled tables get the pieces too, so that a
    chunk that is one piece takes one lookup instead of its merges: every piece where
    ``tables.ignore_merges`` holds, else those the merges rebuild from their own bytes (found
    once here, ~50 ms for GPT-2's 50k pieces), so that the ids stay those of merging."""
    native = load("_encode")
    if native is None:
        return None
    try:
        return native.Tables.from_merges(
            tables.byte_ids,
            tables.merges,
            pieces=compiled_pieces(tables),
            ignore_merges=tables.ignore_merges,
        )
    except OverflowError:
        return None


def compiled_rank_tables(data: bytes) -> Any | None:
    """The compiled encoder's tables for the contents of a ``.tiktoken`` rank file (tiktoken's
    rule, no merge list), or None when it is not built or its strict parser refuses the file
    (then the Python parser decides: it names the bad line, or reads a corner case)."""
    native = load("_encode")
    if native is None:
        return None
    try:
        return native.Tables.from_ranks(data)
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class DeferredTables:
    """A rank file's compiled tables (``native``, from ``_encode.Tables.from_ranks``) to encode
    with at once, and ``build``, a picklable function that makes the explicit
    :class:`BPETables` (with exactly ``specials``) when something first needs them;
    ``pieces`` gives the id -> bytes map alone (a linear parse, no merges derived),
    all that decoding needs; ``id_range`` is R (largest id + 1, specials included);
    ``address_hash(stages)`` is :func:`~.model.address_hash` of the built tables (a
    cache may answer it without building them).

    It pickles as its functions: the receiving process compiles ``remake()`` (the rank
    file again, ~0.1 s for o200k) instead of unpickling 200k explicit merges and checking
    them (~1 s). ``native`` is None there when that process has no compiled module.
    """

    native: Any
    build: Callable[[], BPETables]
    specials: Mapping[str, int]
    pieces: Callable[[], Mapping[int, bytes]]
    remake: Callable[[], Any]
    id_range: int
    address_hash: Callable[[Sequence[str]], str]

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _remade,
            (self.remake, self.build, self.specials, self.pieces, self.id_range, self.address_hash),
        )


def _remade(
    remake: Callable[[], Any],
    build: Callable[[], BPETables],
    specials: Mapping[str, int],
    pieces: Callable[[], Mapping[int, bytes]],
    id_range: int,
    address_hash: Callable[[Sequence[str]], str],
) -> DeferredTables:
    return DeferredTables(
        native=remake(),
        build=build,
        specials=specials,
        pieces=pieces,
        remake=remake,
        id_range=id_range,
        address_hash=address_hash,
    )


class CompiledEncoder:
    """Ids from the C core (see the module docstring); ``tables`` are compiled tables
    (:func:`compiled_tables`, or a :class:`DeferredTables`' ``native``).

    Raises:
        UsageError(INVALID_ARGUMENT): ``threads`` is not None or an integer >= 1.
    """

    implementation = "compiled"

    def __init__(
        self,
        tables: Any,
        pretokenizer: Pretokenizer,
        *,
        threads: int | None = None,
        parallel_min_bytes: int = PARALLEL_MIN_BYTES,
        cache_limit: int = CACHE_LIMIT,
    ) -> None:
        _check_threads(threads)
        module = load("_encode")
        assert module is not None, "compiled tables come from the compiled module"
        self.threads = threads
        self.parallel_min_bytes = parallel_min_bytes
        self.pretokenizer = pretokenizer
        self.tables = tables
        self._module = module
        # Unchecked text fails here exactly where the check would find something: a
        # surrogate (paired or lone) has no strict UTF-8, so the C side's conversion raises,
        # and the core raises MissingByte for any byte without an id, wherever it sits.
        self.refusals: tuple[type[Exception], ...] = (UnicodeEncodeError, module.MissingByte)
        # (preset, dialect) numbers when the compiled scanner splits this pre-tokenizer.
        preset = scanner_id(pretokenizer.stages[0]) if len(pretokenizer.stages) == 1 else None
        self.scanner = None if preset is None else (preset, DIALECTS.index(pretokenizer.dialect))
        self._shared = module.SharedCache(tables, cache_limit=cache_limit)
        self._local = threading.local()

    def encoder(self) -> Any:
        """This thread's compiled encoder (one per thread: each holds scratch space and a lock)."""
        enc = getattr(self._local, "encoder", None)
        if enc is None:
            enc = self._module.Encoder(self.tables, cache=self._shared)
            self._local.encoder = enc
        return enc

    def _run(self, text: str, *, as_bytes: bool) -> Any:
        parts = self.parts(text)
        if parts is not None:
            return self._encode_parts(text, parts, as_bytes=as_bytes)
        enc = self.encoder()
        if self.scanner is not None:
            return enc.encode_text(text, *self.scanner, as_bytes=as_bytes)
        return enc.encode_chunks(text, self.pretokenizer.split(text), as_bytes=as_bytes)

    def encode(self, text: str) -> list[int]:
        """Ids of a checked text."""
        ids: list[int] = self._run(text, as_bytes=False)
        return ids

    def encode_numpy(self, text: str) -> NDArray[np.uint32]:
        """The ids as a ``uint32`` array straight from the compiled encoder's buffer."""
        return np.frombuffer(bytearray(self._run(text, as_bytes=True)), dtype=np.uint32)

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each checked text; one compiled call when the scanner splits."""
        if self.scanner is None:
            return [self.encode(text) for text in texts]
        many: list[list[int]] = self.encoder().encode_texts(texts, *self.scanner)
        return many

    def encode_many_numpy(
        self, texts: Sequence[str]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """Ids of the checked texts as one ``uint32`` array and the ``len(texts) + 1`` offsets
        that cut it; straight from the compiled buffer when the scanner splits."""
        if self.scanner is None:
            return flat_ids(self.encode_many(texts))
        flat, ends = self.encoder().encode_texts(texts, *self.scanner, as_bytes=True)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        offsets[1:] = np.frombuffer(ends, dtype=np.uint64)
        return np.frombuffer(flat, dtype=np.uint32), offsets

    def join_flat(
        self, runs: Sequence[tuple[NDArray[np.uint32], NDArray[np.int64]]]
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """:func:`~tokembed.tokenizer.encode.join_flat_reference`, in C: the ids copied into
        memory faulted in by one call, the offsets moved there too (numpy's join of two
        threads' runs was a new array's page faults and a copy, and a Python loop over the
        runs, after both threads were done)."""
        pairs = [
            (np.ascontiguousarray(flat, np.uint32), np.ascontiguousarray(cuts, np.int64))
            for flat, cuts in runs
        ]
        flat, cuts = self._module.join_flat(pairs)
        return np.frombuffer(flat, dtype=np.uint32), np.frombuffer(cuts, dtype=np.int64)

    def encode_lines_numpy(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """The non-empty lines of UTF-8 ``data`` as documents, cut, checked and encoded in one
        compiled call (no ``str`` per line) when the scanner splits."""
        if self.scanner is None:
            return self.encode_many_numpy(utf8_lines(data))
        try:
            flat, ends = self.encoder().encode_lines(data, *self.scanner)
        except UnicodeDecodeError:
            utf8_lines(data)  # raises the decoder's own error, as the reference path does
            raise AssertionError("the compiled UTF-8 check refused text Python decodes") from None
        offsets = np.zeros(len(ends) // 8 + 1, dtype=np.int64)
        offsets[1:] = np.frombuffer(ends, dtype=np.uint64)
        return np.frombuffer(flat, dtype=np.uint32), offsets

    def _encode_parts(self, text: str, parts: list[tuple[int, int]], *, as_bytes: bool) -> Any:
        """The parts on up to ``threads`` threads (:func:`run_threaded`), joined in order."""
        assert self.scanner is not None
        scanner = self.scanner

        def part(i: int) -> Any:
            start, end = parts[i]
            return self.encoder().encode_text(
                text, *scanner, as_bytes=as_bytes, start=start, end=end, chars=True
            )

        results = run_threaded(len(parts), part, threads=self._thread_count())
        if as_bytes:
            return b"".join(results)
        return self._module.join_lists(results)

    def _thread_count(self) -> int:
        threads = self.threads if self.threads is not None else _default_threads
        k = min(os.cpu_count() or 1, _MAX_THREADS) if threads is None else threads
        return min(k, _MAX_THREADS)

    def parts(self, text: str) -> list[tuple[int, int]] | None:
        """``text`` cut at safe cuts into parts for ``threads`` threads (up to
        :data:`PARTS_PER_THREAD` each), as ``(start, end)`` character offsets that tile it;
        or None when one thread is due (a short text, one thread allowed, no compiled
        scanner, or no safe cut at all). The parts share the text: no part is a new ``str``,
        and Python's UTF-8 of it is never made (each part's is written a window at a time)."""
        if self.scanner is None or len(text) * 4 < self.parallel_min_bytes:
            return None
        k = self._thread_count()
        if k < 2:
            return None
        ends, size = self._module.safe_cuts(text, self.scanner[1], k * PARTS_PER_THREAD)
        if size < self.parallel_min_bytes or len(ends) < 2:
            return None  # short, or no safe cut (one giant line): one part
        return list(pairwise([0, *ends]))
