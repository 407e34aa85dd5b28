"""Finding the texts tiktoken's core must not see: those with a very long run of one class.

tiktoken 0.14 has two pathological inputs, both long pre-tokenization chunks:
its BPE on one chunk is quadratic in the chunk's length (100 KB of 'a' runs at
about 0.3 MB/s, 1 MB would take tens of seconds), and its regex engine
overflows its stack (a PanicException) on a whitespace run near a million
characters. Every preset pattern keeps a chunk within one run of a single class
(letters with marks, digits, whitespace, or everything else) plus a character
or a second run at most, so a text with no run longer than ``LIMIT`` code
points has no chunk longer than about ``2 * LIMIT``: such a text is safe, and
the others go to our own encoder (linear, same ids).

Classes are read from tiktoken's own Unicode tables (probed once per process),
and runs are measured with NumPy over the text's code points: about 15 ms per
million characters, a small fraction of encoding them.

Example::

    >>> has_long_run("a" * 5000)  # doctest: +SKIP
    True
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["LIMIT", "has_long_run"]

LIMIT = 1024  # code points; tiktoken's quadratic merge of 4 KB takes a few milliseconds
_BLOCK = 1 << 22  # code points per NumPy pass, so memory stays bounded on huge texts


@lru_cache(maxsize=1)
def _classes() -> np.ndarray:
    """Class of every code point by tiktoken's tables: 0 other, 1 letter/mark, 2 digit, 3 space."""
    from tokembed.tokenizer._dialect import _PROBES, _every_codepoint

    every, probe = _every_codepoint(), _PROBES["tiktoken"]
    table = np.zeros(0x110000, dtype=np.uint8)
    for value, atom in ((1, r"[\p{L}\p{M}]"), (2, r"\p{N}"), (3, r"\s")):
        table[probe(atom, every)] = value
    return table


def has_long_run(text: str) -> bool:
    """Whether ``text`` holds more than ``LIMIT`` consecutive code points of one class.

    The text must have a UTF-8 form (no lone surrogates).
    """
    if len(text) <= LIMIT:
        return False
    table = _classes()
    # Blocks overlap by LIMIT: a run longer than LIMIT has its first LIMIT + 1
    # code points inside one block.
    step = _BLOCK - LIMIT - 1
    for start in range(0, max(len(text) - LIMIT, 1), step):
        points = np.frombuffer(text[start : start + _BLOCK].encode("utf-32-le"), dtype="<u4")
        cls = table[points]
        edges = np.flatnonzero(cls[1:] != cls[:-1])
        bounds = np.concatenate(([-1], edges, [cls.size - 1]))
        if int(np.diff(bounds).max()) > LIMIT:
            return True
    return False
