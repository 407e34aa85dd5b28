"""Finding the texts tiktoken's core must not see: those with a very long whitespace run.

tiktoken 0.14's regex engine (fancy-regex) backtracks through a whitespace run
for the presets' ``\\s+(?!\\S)`` and fails with a stack overflow near 970,000
characters of spaces or tabs (500,000 ``" \\n"`` pairs with r50k); tiktoken
unwraps that error into a PanicException, a BaseException that ``except
Exception`` does not catch. Runs of letters, digits, CJK or punctuation up to
2 MB pass (checked for cl100k, o200k and r50k), and tiktoken stays faster than
our encoder on them, so only whitespace is routed away. ``LIMIT`` is a
fifteenth of the failing length.

Runs are measured with NumPy over the text's code points (a lookup table of the
25 ``\\s`` code points, which tiktoken's and the ``regex`` module's tables
agree on): about 15 ms per million characters.

Example::

    >>> has_long_whitespace(" " * 70_000)
    True
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import regex

__all__ = ["LIMIT", "has_long_whitespace"]

LIMIT = 1 << 16  # code points
_BLOCK = 1 << 22  # code points per NumPy pass, so memory stays bounded on huge texts


@lru_cache(maxsize=1)
def _is_space() -> np.ndarray:
    table = np.zeros(0x110000, dtype=bool)
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    table[[ord(c) for c in regex.findall(r"\s", every)]] = True
    return table


def has_long_whitespace(text: str) -> bool:
    """Whether ``text`` holds more than ``LIMIT`` consecutive whitespace code points.

    The text must have a UTF-8 form (no lone surrogates).
    """
    if len(text) <= LIMIT:
        return False
    table = _is_space()
    # Blocks overlap by LIMIT: a run longer than LIMIT has its first LIMIT + 1
    # code points inside one block.
    step = _BLOCK - LIMIT - 1
    for start in range(0, max(len(text) - LIMIT, 1), step):
        points = np.frombuffer(text[start : start + _BLOCK].encode("utf-32-le"), dtype="<u4")
        space = np.concatenate(([False], table[points], [False]))
        edges = np.flatnonzero(space[1:] != space[:-1])  # run starts and ends, alternating
        if edges.size and int((edges[1::2] - edges[::2]).max()) > LIMIT:
            return True
    return False
