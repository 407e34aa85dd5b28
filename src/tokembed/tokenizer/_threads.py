"""Cutting one long text for several threads of the compiled encoder, and the threads themselves.

A text of at least :data:`PARALLEL_MIN_BYTES` is cut at the scanner's safe cuts
(a line feed after a non-space, before a character that is neither space nor
``/``: both halves pre-tokenize exactly like the whole), so its parts can be
encoded on different threads (the compiled encoder releases the GIL) and their
ids concatenated. ``set_encode_threads(1)`` keeps every call on the caller's
thread, as tiktoken's ``encode`` does.

Example::

    >>> set_encode_threads(1)   # one thread for every encode in this process
    >>> set_encode_threads(None)  # back to min(cpu_count, 4)
"""

from __future__ import annotations

import os
import threading
from itertools import pairwise
from typing import Any

from tokembed.errors import UsageError
from tokembed.tokenizer._native import load

__all__ = [
    "PARALLEL_MIN_BYTES",
    "check_threads",
    "set_encode_threads",
    "split_for_threads",
    "thread_pool",
]

# Texts shorter than this take one thread. The compiled encoder runs at tens of
# MB/s, so 256 KiB is several milliseconds of work, while the extra cost of
# cutting (a UTF-8 copy, one decode per part, a hand-off to a pool thread) is tens
# of microseconds: below about that size the split would cost more than it saves.
PARALLEL_MIN_BYTES = 1 << 18
# Beyond 4 parts the shared cache's shards and memory bandwidth gain little per thread.
_MAX_THREADS = 4
_default_threads: int | None = None
_pool_lock = threading.Lock()
_pool: Any = None


def check_threads(threads: int | None) -> None:
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
    check_threads(threads)
    _default_threads = threads


def _resolve_threads(threads: int | None) -> int:
    if threads is None:
        threads = _default_threads
    if threads is None:
        return min(os.cpu_count() or 1, _MAX_THREADS)
    return threads


# Characters of text handed to the scanner's safe-cut search at a time.
_CUT_WINDOW = 1 << 12


def _utf8_length(text: str) -> int:
    """UTF-8 length (a lone surrogate counts 3 bytes; the encoder reports it later)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _safe_cut(counter: Any, engine: int, text: str, start: int) -> int | None:
    """The first character index >= ``start`` (and > 1) where the scanner allows a cut, or None.

    ``tk_safe_cut`` decides from the bytes around a position only (the line feed
    before it, the characters on either side), so it runs on short windows of
    the text, each starting on a character, instead of on the whole text's UTF-8.
    """
    while start < len(text):
        lo = max(0, start - 2)
        window = text[lo : lo + _CUT_WINDOW]
        try:
            data = window.encode("utf-8")
        except UnicodeEncodeError:
            return None  # the one-thread path reports the lone surrogate where it is
        from_byte = len(window[: start - lo].encode("utf-8"))
        cut = counter.safe_cut(data, engine, from_byte)
        if cut < len(data):
            return lo + len(data[:cut].decode("utf-8"))
        # Every position before the window's end was tried; the next window starts
        # two characters earlier so the line feed and the character before it are seen.
        start = lo + len(window)
    return None


def _forget_pool() -> None:
    # A forked child has none of the parent's pool threads, but the pool would count
    # them as idle and queue work that never runs (DataLoader workers fork).
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def thread_pool() -> Any:
    """One process-wide pool: its threads keep their per-thread compiled encoders."""
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(_MAX_THREADS - 1, thread_name_prefix="tokembed-encode")
        return _pool


def split_for_threads(
    text: str, *, engine: int, threads: int | None, min_bytes: int
) -> list[str] | None:
    """``text`` cut into 2..threads parts at safe cuts, or None when one thread is due
    (a short text, one thread allowed, no compiled scanner, or no safe cut at all)."""
    if len(text) * 4 < min_bytes:
        return None
    k = _resolve_threads(threads)
    counter = load("_count")
    if k < 2 or counter is None:
        return None
    if len(text) < min_bytes and _utf8_length(text) < min_bytes:
        return None
    k = min(k, _MAX_THREADS)
    cuts = [0]
    for i in range(1, k):
        cut = _safe_cut(counter, engine, text, max(cuts[-1] + 1, len(text) * i // k))
        if cut is None:
            break
        cuts.append(cut)
    if len(cuts) < 2:
        return None  # no safe cut (one giant line): one part
    cuts.append(len(text))
    return [text[a:b] for a, b in pairwise(cuts)]
