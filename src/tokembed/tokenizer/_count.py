"""Counting unique pre-tokenization chunks in order of first occurrence.

The order matters: the trainer breaks frequency ties by first encounter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = ["count_chunks"]


def count_chunks(
    texts: Iterable[str], pretokenizer: Pretokenizer, *, workers: int, progress: bool
) -> tuple[list[bytes], list[int]]:
    """Unique chunks as UTF-8 bytes (first-occurrence order) and their multiplicities."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(pretokenizer.split(text))
    return [utf8(c) for c in counts], list(counts.values())
