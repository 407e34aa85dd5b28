"""The plain byte-level BPE trainer: the specification the compiled learner is tested against.

The state is a list of chunks (one per pre-tokenization chunk, in corpus order),
each a list of ids; ids 0..255 are bytes. Each step counts every adjacent pair
inside every chunk (overlapping, as ``zip(ids, ids[1:])`` does), takes the most
frequent pair, breaking ties by the first pair met in a left-to-right scan of
the current state, and replaces its non-overlapping occurrences left to right
by the next id (256, 257, ...). Training stops early when no pair is left.

Continuing a trained tokenizer (``base_merges`` / ``base``) changes only the start: each
chunk is first rewritten by the base's merges, and learned merge ``k`` makes id
``first_id + k``, past every id the base defines; the steps are the same.

:func:`learn_merges_reference` runs the same steps on a
:class:`~tokembed.tokenizer.chunks.ChunkTable` (each distinct chunk once, with its
multiplicity, in first-encounter order: the first chunk of the table holding a pair is
the first chunk of the corpus holding it, so ties fall the same way). It is the learner
wherever the compiled one is not built.

Ids are kept as characters, so a step's replacement is ``str.replace`` and a pair is a
two-character string; pair counts are updated only for the chunks a step changes, and a
tie is settled by scanning the chunks in order. Each step still looks at every chunk (cost
merges x chunks), which is why the compiled learner exists; this module stays small on
purpose.

Example::

    >>> from tokembed.tokenizer.pretokenize import Pretokenizer
    >>> train_reference("ababab", merges=2, pretokenizer=Pretokenizer.preset("teaching"))
    [(97, 98), (256, 256)]
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from itertools import compress, pairwise

from tokembed.errors import UsageError
from tokembed.tokenizer._utf8 import utf8
from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.encode import encode_chunk_reference
from tokembed.tokenizer.merges import replace_pair
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = ["learn_merges_reference", "train_reference"]


# Ids are characters (chr(id)) so that a chunk is a str: one step's replacement is then
# str.replace, which takes non-overlapping occurrences left to right, as the rule says. Ids
# therefore stay below 0x110000 (o200k_harmony's 201,088 ids leave room for 900k merges).


def _add_pairs(counts: dict[str, int], chunk: str, weight: int) -> None:
    """Add ``weight`` per adjacent pair of ``chunk`` (overlapping) to ``counts``; a pair whose
    count falls to 0 is removed."""
    for a, b in pairwise(chunk):
        pair = a + b
        count = counts.get(pair, 0) + weight
        if count:
            counts[pair] = count
        else:
            del counts[pair]


def _first_met(chunks: list[str], pairs: set[str]) -> str:
    """The pair of ``pairs`` met first in a left-to-right scan of ``chunks``."""
    # An alternation finds the leftmost position holding any of them; two pairs never start
    # at one position, so that position names one pair.
    anyone = re.compile("|".join(map(re.escape, sorted(pairs))))
    for chunk in chunks:
        found = anyone.search(chunk)
        if found is not None:
            return found.group()
    raise AssertionError("a counted pair occurs in no chunk")


def _learn(
    chunks: list[str],
    weights: list[int],
    merges: int,
    on_merge: Callable[[], None] | None,
    first_id: int = 256,
) -> list[tuple[int, int]]:
    """The steps of the module docstring; pair counts are kept up to date chunk by chunk."""
    if merges < 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the number of merges must be >= 0, got {merges}",
            value=merges,
            fix="pass merges=0 or more",
        )
    if first_id + min(merges, 1) > 0x110000:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the reference learner keeps ids as characters, below 0x110000; merges would "
            f"start at id {first_id}",
            value=first_id,
            fix="learn with the compiled learner (build the extension)",
        )
    counts: dict[str, int] = {}
    for chunk, weight in zip(chunks, weights, strict=True):
        _add_pairs(counts, chunk, weight)
    learned: list[tuple[int, int]] = []
    for k in range(min(merges, 0x110000 - first_id)):
        if not counts:
            break
        top = max(counts.values())
        if operator.countOf(counts.values(), top) == 1:
            best = max(counts, key=counts.__getitem__)
        else:  # a tie: the first pair met in the corpus (compress picks the tied pairs in C)
            best = _first_met(chunks, set(compress(counts, map(top.__eq__, counts.values()))))
        new = chr(first_id + k)
        for w, chunk in enumerate(chunks):
            if best in chunk:
                _add_pairs(counts, chunk, -weights[w])
                chunks[w] = chunk.replace(best, new)
                _add_pairs(counts, chunks[w], weights[w])
        learned.append((ord(best[0]), ord(best[1])))
        if on_merge is not None:
            on_merge()
    return learned


def train_reference(
    text: str,
    *,
    merges: int,
    pretokenizer: Pretokenizer,
    base_merges: Sequence[tuple[int, int]] = (),
) -> list[tuple[int, int]]:
    """The learned pairs in order; pair ``k`` produced id ``256 + len(base_merges) + k``.

    ``base_merges`` (pairs a previous run of this function learned, pair ``j`` making id
    ``256 + j``) are applied first to every chunk, in their order, each by the step's
    replacement: learning then continues where that run would have, on this text.

    Example::

        >>> pre = Pretokenizer.preset("teaching")
        >>> train_reference("abcabc", merges=1, pretokenizer=pre, base_merges=[(97, 98)])
        [(256, 99)]

    Raises:
        UsageError(INVALID_ARGUMENT): ``merges`` is negative.
        TokenizerError(LONE_SURROGATE): the text has no UTF-8 form.
    """
    states = [list(utf8(chunk)) for chunk in pretokenizer.split(text)]  # ids 0..255
    for j, pair in enumerate(base_merges):
        states = [replace_pair(ids, pair, 256 + j) for ids in states]
    chunks = ["".join(map(chr, ids)) for ids in states]
    return _learn(chunks, [1] * len(chunks), merges, None, 256 + len(base_merges))


def learn_merges_reference(
    table: ChunkTable,
    *,
    merges: int,
    on_merge: Callable[[], None] | None = None,
    base: BPETables | None = None,
) -> list[tuple[int, int]]:
    """The pairs :func:`train_reference` learns from the corpus ``table`` was counted from;
    ``on_merge`` is called after each one.

    With ``base``, every chunk starts as the base's ids of it (its merges applied by the
    BPE rule, :func:`~tokembed.tokenizer.encode.encode_chunk_reference`) and pair ``k``
    makes id ``base.id_range + k``; for a base :func:`train_reference` learned, that is
    its ``base_merges`` continuation.

    Example::

        >>> learn_merges_reference(ChunkTable.from_counts({b"abab": 2, b"ab": 1}), merges=5)
        [(97, 98), (256, 256)]

    Raises:
        UsageError(INVALID_ARGUMENT): ``merges`` is negative.
        TokenizerError(UNREPRESENTABLE_BYTE): a chunk holds a byte the base has no id for.
    """
    if base is None:
        chunks = [chunk.decode("latin-1") for chunk in table.chunks()]  # one character per byte
        return _learn(chunks, table.counts.tolist(), merges, on_merge)
    first_id = base.id_range
    chunks = ["".join(map(chr, encode_chunk_reference(base, chunk))) for chunk in table.chunks()]
    return _learn(chunks, table.counts.tolist(), merges, on_merge, first_id)
