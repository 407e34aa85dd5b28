"""Counting a text cut into windows, and joining neighbouring windows exactly at their seam.

Used by both parallel counters: worker processes of this machine (``_count``, for a pattern
the compiled scanner does not run) and a Dask cluster (``_dask_count``). Training
pre-tokenizes each text on its own, so a cut inside a text must not change its chunks.

A window is its own text plus ``extra``, the text past its end, which its scan also reads.
:func:`count_window` splits the whole window once (with the first regex stage) and keeps
three parts: the *head*, the chunks starting in the window's first ``head_chars``
characters, which wait for the left neighbour's scan; the *tail*, the chunks that end past
the window's own end; and the counts of the chunks between, in first-encounter order
(:class:`Partial`). :func:`combine` joins a tail to the next head at the first position
where both scans end a chunk: from a common chunk end a regex without look-behind resumes
the same search, so from there the right scan is the truth. The two scans must agree up to
the end of the head, or the seam is refused (``refused`` names the text), and the caller
counts that text whole instead. A pattern that looks behind its start is never cut
(:data:`LOOKS_BACK`).

Partials combine left before right, in any tree shape; the table then lists chunks in the
order one left-to-right scan meets them, so the learner breaks ties as in one process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import regex

from tokembed.tokenizer.chunks import ChunkTable
from tokembed.tokenizer.dialect import Dialect
from tokembed.tokenizer.pretokenize import Pretokenizer

__all__ = [
    "EMPTY",
    "LOOKS_BACK",
    "Partial",
    "Spec",
    "combine",
    "count_window",
    "first_stage",
    "packed",
    "refine",
]

# Constructs that look before the scan position (look-behind, \b, anchors at a start):
# a scan started at a cut cannot reproduce them, so such patterns are never cut.
LOOKS_BACK = regex.compile(r"\(\?<[=!]|\\[bBAGKZ]|(?<![\[\\])\^")

# A chunk near a cut: (start, end, text), in characters from the cut.
_Piece = tuple[int, int, str]
# What a worker needs to rebuild the pre-tokenizer: its stages and dialect.
Spec = tuple[tuple[str, ...], Dialect]


@dataclass(frozen=True, kw_only=True)
class Partial:
    """What a run of consecutive windows counted; ``head``/``tail`` None at a text's edge."""

    head: tuple[_Piece, ...] | None  # chunks the left neighbour's scan must confirm
    table: ChunkTable  # the chunks between, in first-encounter order
    tail: tuple[_Piece, ...] | None  # this scan's chunks past the last window's end
    tail_file: int  # index of the text the last window belongs to (-1: none)
    refused: tuple[int, ...] = ()  # texts whose seams did not join

    def __sizeof__(self) -> int:
        # Dask sizes results with sys.getsizeof; without this it would count 56 bytes a
        # partial, and its transfer logs and memory limits would not see the tables.
        pieces = (self.head or ()) + (self.tail or ())
        return self.table.nbytes + sum(24 + len(p[2]) for p in pieces)


EMPTY = ChunkTable.from_lists([], [])


def packed(counts: Counter[str]) -> ChunkTable:
    """A counter of chunk texts as a table (its order kept)."""
    return ChunkTable.from_lists([c.encode() for c in counts], counts.values())


@lru_cache(maxsize=8)
def first_stage(spec: Spec) -> Pretokenizer:
    """The pre-tokenizer of a spec's first stage (what windows are split with)."""
    stages, dialect = spec
    return Pretokenizer(stages=stages[:1], dialect=dialect)


def count_window(
    text: str,
    extra: str,
    *,
    first: bool,
    last: bool,
    stage: Pretokenizer,
    index: int,
    head_chars: int,
) -> Partial:
    """The partial of one window: ``text`` (the window's own characters), ``extra`` (the
    characters after it that its scan reads), whether it starts and ends its text.

    Raises:
        TokenizerError(INVALID_PATTERN): the stage ran past its time limit.
    """
    chunks = stage.split(text + extra)  # they tile the window: positions are running sums
    n = len(text)
    head: list[_Piece] = []
    if not first:
        head_end, pos = min(head_chars, n), 0  # never into the overlap: the next window's
        while len(head) < len(chunks) and pos < head_end:
            chunk = chunks[len(head)]
            head.append((pos, pos + len(chunk), chunk))
            pos += len(chunk)
    tail: list[_Piece] = []  # chunks ending past the window (the first may straddle its end)
    if not last:
        end = n + len(extra)
        while len(tail) < len(chunks) and end > n:
            chunk = chunks[len(chunks) - 1 - len(tail)]
            tail.append((end - len(chunk) - n, end - n, chunk))
            end -= len(chunk)
        tail.reverse()
    tail_start = len(chunks) - len(tail)
    # A chunk in both head and tail spans the head region and the window's end: the two
    # seams would both count it. Such a window is refused, and its text counted whole.
    refused = (index,) if tail_start < len(head) else ()
    return Partial(
        head=None if first else tuple(head),
        table=packed(Counter(chunks[len(head) : tail_start])),
        tail=None if last else tuple(tail),
        tail_file=index,
        refused=refused,
    )


def _join(tail: tuple[_Piece, ...], head: tuple[_Piece, ...]) -> list[str] | None:
    """The seam's chunks in order, or None when the two scans do not provably agree.

    Any position where both scans end a chunk is one where both resume the same search;
    from the first such position the right scan is the truth.
    """
    tail_ends = {p[1] for p in tail}
    q = next((p[1] for p in head if p[1] in tail_ends), None)
    if q is None:
        return None
    limit = head[-1][0]
    if [p for p in tail if q <= p[0] <= limit] != [p for p in head if q <= p[0] <= limit]:
        return None
    return [p[2] for p in tail if p[0] < q] + [p[2] for p in head if p[0] >= q]


def combine(left: Partial, right: Partial) -> Partial:
    """The partial of ``left``'s windows followed by ``right``'s (never commutative)."""
    refused = left.refused + right.refused
    seam: list[str] | None = []
    if left.tail is not None:
        assert right.head is not None, "a window that ends mid-text is followed by its own text"
        seam = _join(left.tail, right.head)
        if seam is None:
            refused += (left.tail_file,)
    if refused:  # the table is recounted; stop merging it
        table = EMPTY
    else:
        assert seam is not None
        table = ChunkTable.concat([left.table, packed(Counter(seam)), right.table])
    return Partial(
        head=left.head, table=table, tail=right.tail, tail_file=right.tail_file, refused=refused
    )


def refine(table: ChunkTable, pretokenizer: Pretokenizer) -> ChunkTable:
    """Later stages split each first-stage chunk in order; the table of all stages.

    This gives the table of splitting every text with all stages, because refining
    distributes over concatenation in order.
    """
    if len(pretokenizer.stages) == 1:
        return table
    rest = Pretokenizer(stages=pretokenizer.stages[1:], dialect=pretokenizer.dialect)
    refined: Counter[str] = Counter()
    for chunk, n in zip(table.chunks(), table.counts.tolist(), strict=True):
        for sub in rest.split(chunk.decode()):
            refined[sub] += n
    return packed(refined)
