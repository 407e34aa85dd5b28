"""The plain byte-level BPE trainer: the specification the fast trainer is tested against.

The state is a list of chunks (one per pre-tokenization chunk, in corpus order),
each a list of ids; ids 0..255 are bytes. Each step counts every adjacent pair
inside every chunk (overlapping, as ``zip(ids, ids[1:])`` does), takes the most
frequent pair, breaking ties by the first pair met in a left-to-right scan of
the current state, and replaces its non-overlapping occurrences left to right
by the next id (256, 257, ...). Training stops early when no pair is left.

It rescans the whole corpus at every step (cost merges x corpus), which is why
:func:`tokembed.tokenizer.train.train` exists; this module stays small on purpose.

Example::

    >>> from tokembed.tokenizer.pretokenize import Pretokenizer
    >>> train_reference("ababab", merges=2, pretokenizer=Pretokenizer.preset("teaching"))
    [(97, 98), (256, 256)]
"""

from __future__ import annotations

import itertools
from collections import Counter

from tokembed.errors import UsageError
from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.merges import replace_pair
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = ["train_reference"]


def _count_pairs(state: list[list[int]]) -> Counter[tuple[int, int]]:
    """Adjacent-pair counts; the Counter's key order is the order of first encounter."""
    counts: Counter[tuple[int, int]] = Counter()
    for ids in state:
        counts.update(itertools.pairwise(ids))
    return counts


def train_reference(text: str, *, merges: int, pretokenizer: Pretokenizer) -> list[tuple[int, int]]:
    """The learned pairs in order; pair ``k`` produced id ``256 + k``.

    Raises:
        UsageError(INVALID_ARGUMENT): ``merges`` is negative.
    """
    if merges < 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the number of merges must be >= 0, got {merges}",
            value=merges,
            fix="pass merges=0 or more",
        )
    state = [list(utf8(chunk)) for chunk in pretokenizer.split(text)]
    learned: list[tuple[int, int]] = []
    for k in range(merges):
        counts = _count_pairs(state)
        if not counts:
            break
        # max() returns the first maximal key in iteration order = first encounter.
        best = max(counts, key=counts.__getitem__)
        state = [replace_pair(ids, best, 256 + k) for ids in state]
        learned.append(best)
    return learned
