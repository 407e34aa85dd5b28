"""Contiguous row intervals: which rank owns which vocabulary rows (row-sharded schedules).

Rank ``r`` of ``R`` owns rows ``[s_r, e_r)`` of a ``V``-row table. The split uses
ceil chunks of ``c = ceil(V / R)`` rows: every rank but the tail holds exactly
``c`` rows, the last non-empty rank holds the remainder, and ranks past the end
hold an empty interval. The vocabulary is never padded: ``V = 10`` over 4 ranks
gives ``[0,3) [3,6) [6,9) [9,10)``, and ``V = 9`` over 4 gives
``[0,3) [3,6) [6,9) [9,9)``; no rank allocates a row that does not exist.

A cover is valid when the intervals are sorted, non-overlapping and leave no
gap in ``[0, V)``: a gap leaves ids no rank can look up, an overlap gives a row two
optimizer updates.

Example::

    >>> row_intervals(10, 4)
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    >>> owner_of(7, row_intervals(10, 4))
    2
"""

from __future__ import annotations

from collections.abc import Sequence

from tokembed.errors import ParallelError, UsageError

__all__ = ["owner_of", "row_intervals", "validate_cover"]


def row_intervals(num_embeddings: int, world_size: int) -> list[tuple[int, int]]:
    """Split ``[0, num_embeddings)`` into ``world_size`` contiguous ceil-chunk intervals.

    Example::

        >>> row_intervals(131, 4)
        [(0, 33), (33, 66), (66, 99), (99, 131)]

    Raises:
        UsageError INVALID_ARGUMENT: ``num_embeddings < 0`` or ``world_size < 1``.
    """
    if num_embeddings < 0 or world_size < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"cannot split {num_embeddings} rows over {world_size} ranks",
            value=(num_embeddings, world_size),
            fix="pass num_embeddings >= 0 and world_size >= 1",
        )
    chunk = -(-num_embeddings // world_size)  # ceil(V / R)
    return [
        (min(r * chunk, num_embeddings), min((r + 1) * chunk, num_embeddings))
        for r in range(world_size)
    ]


def validate_cover(intervals: Sequence[tuple[int, int]], num_embeddings: int) -> None:
    """Require ``intervals`` (in rank order) to cover ``[0, num_embeddings)`` exactly once.

    Empty intervals ``(s, s)`` are allowed anywhere the cover is continuous.

    Example::

        >>> validate_cover([(0, 3), (3, 6), (6, 9), (9, 10)], 10)
        >>> validate_cover([(0, 3), (4, 10)], 10)
        Traceback (most recent call last):
        ...
        tokembed.errors.ParallelError: SHARD_GAP: rows [3, 4) have no owner ...

    Raises:
        ParallelError SHARD_GAP: some row has no owner (a hole between
            intervals, or the cover stops before V / starts after 0).
        ParallelError SHARD_OVERLAP: some row has two owners, or an interval
            runs backwards or past V.
    """
    expected = 0  # the first row not yet owned
    for rank, (start, end) in enumerate(intervals):
        if end < start or start < 0 or end > num_embeddings:
            raise ParallelError(
                "SHARD_OVERLAP",
                f"rank {rank} interval [{start}, {end}) is not inside [0, {num_embeddings})",
                value=(rank, start, end),
                fix="build intervals with row_intervals(V, world_size)",
            )
        if start > expected:
            raise ParallelError(
                "SHARD_GAP",
                f"rows [{expected}, {start}) have no owner (rank {rank} starts at {start})",
                value=(expected, start),
                fix="make each interval start where the previous one ends",
            )
        if start < expected and end > start:
            raise ParallelError(
                "SHARD_OVERLAP",
                f"rows [{start}, {min(end, expected)}) are owned twice (rank {rank} and an "
                "earlier rank)",
                value=(start, min(end, expected)),
                fix="make each interval start where the previous one ends",
            )
        expected = max(expected, end)
    if expected != num_embeddings:
        raise ParallelError(
            "SHARD_GAP",
            f"rows [{expected}, {num_embeddings}) have no owner",
            value=(expected, num_embeddings),
            fix="extend the last interval to V",
        )


def owner_of(row: int, intervals: Sequence[tuple[int, int]]) -> int:
    """Rank whose interval holds global ``row`` (intervals as from :func:`row_intervals`).

    Raises:
        ParallelError SHARD_GAP: no interval holds ``row``.
    """
    for rank, (start, end) in enumerate(intervals):
        if start <= row < end:
            return rank
    raise ParallelError(
        "SHARD_GAP",
        f"row {row} has no owner in {list(intervals)}",
        value=row,
        fix="check the row against [0, V) before asking for its owner",
    )
