"""The unique pre-tokenization chunks of a corpus with their multiplicities, packed.

This is what a BPE trainer learns from: every counter (in this process, in the
compiled core, on a cluster) produces one, and the merge learner consumes one.
Order is part of the value: chunks are listed in the order a single
left-to-right scan of the corpus first meets them, because the trainer breaks
frequency ties by first encounter. Packing (one byte string plus two int64
arrays) keeps millions of chunks at a few bytes of overhead each, passes to C
without copying, and travels between processes as three buffers.

Example::

    >>> t = ChunkTable.from_counts({b"ab": 2, b" c": 1})
    >>> t2 = ChunkTable.concat([t, ChunkTable.from_counts({b" c": 4, b"d": 1})])
    >>> t2.to_dict()
    {b'ab': 2, b' c': 5, b'd': 1}
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["ChunkTable"]


@dataclass(frozen=True, eq=False)
class ChunkTable:
    """Chunk ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (UTF-8) and occurs ``counts[i]`` times.

    Attributes:
        data: the chunks' bytes, concatenated in first-encounter order.
        offsets: int64 array of ``len + 1`` non-decreasing offsets, ``offsets[0] == 0``
            and ``offsets[-1] == len(data)``.
        counts: int64 array of positive multiplicities.
    """

    data: bytes
    offsets: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        assert self.offsets.dtype == np.int64
        assert self.counts.dtype == np.int64
        assert len(self.offsets) == len(self.counts) + 1
        assert int(self.offsets[0]) == 0
        assert int(self.offsets[-1]) == len(self.data)

    @classmethod
    def from_counts(cls, counts: Mapping[bytes, int]) -> ChunkTable:
        """Pack a mapping whose iteration order is the first-encounter order."""
        return cls.from_lists(list(counts), list(counts.values()))

    @classmethod
    def from_lists(cls, chunks: Iterable[bytes], counts: Iterable[int]) -> ChunkTable:
        """Pack parallel lists of distinct chunks and their multiplicities."""
        chunks = list(chunks)
        offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in chunks], out=offsets[1:])
        return cls(b"".join(chunks), offsets, np.fromiter(counts, np.int64, len(chunks)))

    @classmethod
    def concat(cls, tables: Iterable[ChunkTable]) -> ChunkTable:
        """The table of the tables' corpora read one after the other (counts of equal chunks add)."""
        total: dict[bytes, int] = {}
        for table in tables:
            for chunk, n in zip(table.chunks(), table.counts.tolist(), strict=True):
                total[chunk] = total.get(chunk, 0) + n
        return cls.from_counts(total)

    def __len__(self) -> int:
        return len(self.counts)

    def chunk(self, i: int) -> bytes:
        return self.data[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def chunks(self) -> list[bytes]:
        """The chunks as separate ``bytes`` objects, in order."""
        data, ends = self.data, self.offsets.tolist()
        return [data[a:b] for a, b in itertools.pairwise(ends)]

    def to_dict(self) -> dict[bytes, int]:
        """Chunk → multiplicity, in first-encounter order."""
        return dict(zip(self.chunks(), self.counts.tolist(), strict=True))

    @property
    def nbytes(self) -> int:
        """Bytes held by the three buffers."""
        return len(self.data) + self.offsets.nbytes + self.counts.nbytes
