"""The exact row map: which new row is a bit-for-bit copy of which old row.

A migration writes every new row in one of two ways: it copies exactly one old
row whose symbol is proved identical, or it initializes the row. :class:`RowMap`
holds only the first kind, as ``source[v]`` = the old row copied into new row
``v`` (or -1), so that each new row has at most one exact source and each old
row at most one destination (the map is injective). How the other rows got
their values is a separate ledger (:mod:`tokembed.migrate.init`); a
decomposition average or a semantic neighbour never becomes an edge here.

Rows that no tokenizer id names (padding rows past the id range, or holes) are
copied to the same index when neither vocabulary gives that index a symbol,
so a padded model keeps its padding rows.

Example::

    >>> m = RowMap(old_rows=3, new_rows=4, source=(0, 1, 2, -1))
    >>> m.new_row_ids, m.is_prefix
    ((3,), True)

Raises CheckpointError ROW_MAP_INVALID (out of range, not injective),
APPROXIMATE_AS_EXACT (an edge joins two different symbols), SEMANTICS_CHANGED
(a pre-tokenizer change without ``accept_overlap=True``, unless the change is
``dialect-only``: the same table read by another regex engine).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from tokembed.errors import CheckpointError
from tokembed.migrate.classify import VocabularyChange, symbols

if TYPE_CHECKING:
    import torch

    from tokembed.tokenizer import Tokenizer

__all__ = ["RowMap", "check_row_map", "row_map"]


@dataclass(frozen=True, kw_only=True, eq=False)
class RowMap:
    """``source[v]``: the old row copied exactly into new row ``v``, or -1 (initialized)."""

    old_rows: int
    new_rows: int
    source: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", tuple(int(s) for s in self.source))
        if len(self.source) != self.new_rows or self.old_rows < 0:
            raise CheckpointError(
                "ROW_MAP_INVALID",
                f"a map for {self.new_rows} new rows has {len(self.source)} entries",
                value=(self.new_rows, len(self.source)),
                fix="give one source (old row or -1) per new row",
            )
        seen: set[int] = set()
        for v, j in enumerate(self.source):
            if j < -1 or j >= self.old_rows:
                raise CheckpointError(
                    "ROW_MAP_INVALID",
                    f"new row {v} copies old row {j}, outside [0, {self.old_rows})",
                    value=(v, j),
                    fix="use -1 for a row that is initialized, not copied",
                )
            if j >= 0 and j in seen:
                raise CheckpointError(
                    "ROW_MAP_INVALID",
                    f"old row {j} is copied into two new rows (the second is {v})",
                    value=(v, j),
                    fix="an exact map is injective: initialize the second row instead",
                )
            seen.add(j)

    @cached_property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """The exact edges (old row, new row), ordered by new row."""
        return tuple((j, v) for v, j in enumerate(self.source) if j >= 0)

    @cached_property
    def new_row_ids(self) -> tuple[int, ...]:
        """New rows without an exact source: the ones an initializer must fill."""
        return tuple(v for v, j in enumerate(self.source) if j < 0)

    @cached_property
    def dropped(self) -> tuple[int, ...]:
        """Old rows with no destination."""
        kept = {j for j, _ in self.pairs}
        return tuple(j for j in range(self.old_rows) if j not in kept)

    @cached_property
    def is_prefix(self) -> bool:
        """True when old row j lands at new row j for every j (pure growth)."""
        return self.new_rows >= self.old_rows and self.source[: self.old_rows] == tuple(
            range(self.old_rows)
        )

    def index_tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(old rows, new rows) of the exact edges as int64 tensors, ordered by new row."""
        return self._index

    @cached_property
    def _index(self) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        edges = torch.tensor(self.pairs, dtype=torch.int64).reshape(-1, 2)  # [E, 2]
        # Cached for the many copy and compare passes of one migration; callers only read them.
        return edges[:, 0].clone(), edges[:, 1].clone()

    def map_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Old ids -> new ids; raises ROW_MAP_INVALID for an old id that was dropped."""
        import torch

        table = torch.full((self.old_rows,), -1, dtype=torch.int64)
        old, new = self.index_tensors()
        table[old] = new
        out = table[ids.to(torch.int64)]
        if bool((out < 0).any()):
            bad = int(ids.reshape(-1)[(out < 0).reshape(-1).nonzero()[0, 0]])
            raise CheckpointError(
                "ROW_MAP_INVALID",
                f"old id {bad} has no row in the new vocabulary",
                value=bad,
                fix="retokenize the source text with the new tokenizer",
            )
        return out

    def to_json(self) -> dict[str, object]:
        # Runs of consecutive edges keep the file small: [[old_start, new_start, length], ...].
        runs: list[list[int]] = []
        for j, v in self.pairs:
            if runs and runs[-1][0] + runs[-1][2] == j and runs[-1][1] + runs[-1][2] == v:
                runs[-1][2] += 1
            else:
                runs.append([j, v, 1])
        return {"old_rows": self.old_rows, "new_rows": self.new_rows, "exact_runs": runs}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RowMap:
        new_rows = int(data["new_rows"])  # type: ignore[call-overload]
        source = [-1] * new_rows
        for j, v, n in data["exact_runs"]:  # type: ignore[attr-defined]
            for k in range(n):
                source[v + k] = j + k
        return cls(old_rows=int(data["old_rows"]), new_rows=new_rows, source=tuple(source))  # type: ignore[call-overload]

    @cached_property
    def digest(self) -> str:
        blob = json.dumps(self.to_json(), separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()


def row_map(
    change: VocabularyChange,
    *,
    old_rows: int | None = None,
    new_rows: int | None = None,
    accept_overlap: bool = False,
) -> RowMap:
    """The exact map of ``change`` over model tables of ``old_rows`` and ``new_rows`` rows.

    ``old_rows`` defaults to the old id range; ``new_rows`` to the new id range,
    or to ``old_rows`` when the old table is padded and the new ids fit in it.

    Raises:
        CheckpointError SEMANTICS_CHANGED: the pre-tokenizer changed (equal bytes are not
            the same symbol any more) and ``accept_overlap`` was not given. A
            ``dialect-only`` change (the same table read by another regex engine) is not
            refused: its map is the identity.
        CheckpointError ROW_COUNT_MISMATCH: a table is smaller than its tokenizer's ids.
    """
    old_rows = change.old_ids if old_rows is None else old_rows
    if new_rows is None:
        new_rows = change.new_ids if old_rows == change.old_ids else max(change.new_ids, old_rows)
    for which, rows, ids in (("old", old_rows, change.old_ids), ("new", new_rows, change.new_ids)):
        if rows < ids:
            raise CheckpointError(
                "ROW_COUNT_MISMATCH",
                f"the {which} table has {rows} rows but its tokenizer emits ids up to {ids - 1}",
                value=(rows, ids),
                fix=f"give the {which} table at least {ids} rows",
            )
    # dialect-only: the same table and merges, the same grammar read by another regex
    # engine; every id keeps its bytes and meaning, so its exact pairs are proved.
    if change.pretokenizer_changed and change.kind != "dialect-only" and not accept_overlap:
        raise CheckpointError(
            "SEMANTICS_CHANGED",
            "the pre-tokenizer changed: equal pieces are only an overlap, not proved equal symbols",
            value=change.new_hash,
            fix="pass accept_overlap=True to reuse overlapping rows as a declared policy",
        )
    source = [-1] * new_rows
    for j, v in change.exact:
        source[v] = j
    named_old = {j for j, _ in change.exact} | set(change.removed)
    named_new = {v for _, v in change.exact} | set(change.added)
    # Unnamed rows (padding, holes) keep their index when neither side names it.
    for j in range(min(old_rows, new_rows)):
        if j not in named_old and j not in named_new and source[j] < 0:
            source[j] = j
    return RowMap(old_rows=old_rows, new_rows=new_rows, source=tuple(source))


def check_row_map(rows: RowMap, old: Tokenizer, new: Tokenizer) -> None:
    """Refuse (APPROXIMATE_AS_EXACT) an edge whose old and new rows name different symbols.

    An edge between two unnamed rows (padding) is admitted.
    """
    sym0, sym1 = symbols(old), symbols(new)
    for j, v in rows.pairs:
        if sym0.get(j) != sym1.get(v):
            raise CheckpointError(
                "APPROXIMATE_AS_EXACT",
                f"the map copies old row {j} ({sym0.get(j)!r}) into new row {v} "
                f"({sym1.get(v)!r}), which names another symbol",
                value=(j, v),
                fix="record that row with an initializer (init ledger), not as an exact copy",
            )
