"""Optimizer state follows the rows: Adam moments moved by the row map, the step kept.

PyTorch keys optimizer state by the live Parameter object and reloads it by
position without further checks, so a migration must move the state of each
vocabulary table onto its new Parameter itself. :func:`move_state` does that
for any optimizer whose per-row state has the parameter's shape (Adam/AdamW
``exp_avg`` and ``exp_avg_sq``, Adagrad's ``sum``): exact rows keep their
moments bit for bit, initialized rows start at zero, and scalar state (``step``)
is kept as it was. Resetting the step would switch every old row to a different
bias correction ``1 - beta^t`` just to make the new rows young. The optional
``row_step`` record ([V1], the old step on exact rows, 0 on new rows) documents
per-row age; stock optimizers ignore it, a row-age optimizer can read it.

:func:`snapshot_state` + :func:`check_state_migration` are the optimizer gate
for migrations done elsewhere (another tool, a hand-written script).

Example::

    >>> move_state(opt, old_weight, new_weight, row_map)  # doctest: +SKIP
    True

Raises CheckpointError OPTIMIZER_STEP_RESET, PRESERVED_ROW_CHANGED.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from tokembed.errors import CheckpointError
from tokembed.migrate.rowmap import RowMap

__all__ = [
    "check_preserved",
    "check_state_migration",
    "copy_exact_",
    "move_state",
    "snapshot_state",
]

# Bytes per chunk when copying or comparing through an index: a few MB of temporary
# memory instead of a second table (and small enough to be returned to the OS at once).
_CHUNK_BYTES = 4 << 20


def _chunk_rows(t: torch.Tensor) -> int:
    row_bytes = max(1, t[0].numel() * t.element_size()) if t.shape[0] else 1
    return max(1, _CHUNK_BYTES // row_bytes)


def as_bits(t: torch.Tensor) -> torch.Tensor:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().view(width)


def copy_exact_(new: torch.Tensor, old: torch.Tensor, rows: RowMap) -> torch.Tensor:
    """Write ``old[j]`` into ``new[v]`` for every exact edge (j, v); returns ``new``."""
    with torch.no_grad():
        if rows.is_prefix:
            new[: rows.old_rows].copy_(old)
            return new
        src, dst = rows.index_tensors()
        step = _chunk_rows(old)
        for k in range(0, len(src), step):
            new.index_copy_(0, dst[k : k + step], old.index_select(0, src[k : k + step]))
    return new


def check_preserved(old: torch.Tensor, new: torch.Tensor, rows: RowMap, name: str) -> None:
    """Refuse (PRESERVED_ROW_CHANGED) unless every exact edge copied its row bit for bit."""
    src, dst = rows.index_tensors()
    step = _chunk_rows(old)
    for k in range(0, len(src), step):
        if rows.is_prefix:  # compare views: no temporary copies
            a = as_bits(old[k : k + step])
            b = as_bits(new[k : k + a.shape[0]])
        else:
            a = as_bits(old.index_select(0, src[k : k + step]))
            b = as_bits(new.index_select(0, dst[k : k + step]))
        if not torch.equal(a, b):
            bad = int((a != b).reshape(a.shape[0], -1).any(dim=1).nonzero()[0, 0]) + k
            raise CheckpointError(
                "PRESERVED_ROW_CHANGED",
                f"{name}: old row {int(src[bad])} differs from its copy at new row {int(dst[bad])}",
                value=(name, int(src[bad]), int(dst[bad])),
                fix="copy exact rows unchanged; only initialized rows may take new values",
            )


def _rows_of(value: object, shape: torch.Size) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape == shape


def move_state(
    optimizer: torch.optim.Optimizer,
    old: torch.nn.Parameter,
    new: torch.nn.Parameter,
    rows: RowMap,
    *,
    name: str = "table",
    row_age: bool = False,
    verify: bool = True,
    shape: torch.Size | None = None,
) -> bool:
    """Re-register ``new`` in place of ``old`` and move ``old``'s state by ``rows``.

    Returns False when the optimizer does not hold ``old`` (nothing to do). The
    old moments are released one by one, so the peak is one extra moment table.
    ``shape`` is ``old``'s shape when its storage was already released.
    """
    shape = old.shape if shape is None else shape
    groups = [g for g in optimizer.param_groups if any(p is old for p in g["params"])]
    if not groups:
        return False
    for group in groups:
        group["params"] = [new if p is old else p for p in group["params"]]
    state = optimizer.state.pop(old, None)
    if not state:
        return True
    moved: dict[str, object] = {}
    for key in list(state):
        value = state.pop(key)
        if _rows_of(value, shape):
            assert isinstance(value, torch.Tensor)
            grown = value.new_zeros((rows.new_rows, *value.shape[1:]))
            copy_exact_(grown, value, rows)
            if verify:
                check_preserved(value, grown, rows, f"{name}:{key}")
            moved[key] = grown
        else:
            moved[key] = value  # step and other scalars: the same object, the same age
        del value
    if row_age and "step" in moved:
        age = torch.zeros(rows.new_rows, dtype=torch.float32)
        _, dst = rows.index_tensors()
        age[dst] = float(moved["step"])  # type: ignore[arg-type]
        moved["row_step"] = age
    optimizer.state[new] = moved
    return True


def snapshot_state(
    optimizer: torch.optim.Optimizer, params: Iterable[torch.nn.Parameter]
) -> dict[int, dict[str, object]]:
    """Copies of the state of ``params`` (keyed by their position), for a later gate."""
    out: dict[int, dict[str, object]] = {}
    for k, p in enumerate(params):
        state = optimizer.state.get(p, {})
        out[k] = {
            key: v.detach().clone() if isinstance(v, torch.Tensor) else v
            for key, v in state.items()
        }
    return out


def check_state_migration(
    before: dict[str, object],
    optimizer: torch.optim.Optimizer,
    new: torch.nn.Parameter,
    rows: RowMap,
    *,
    name: str = "table",
) -> None:
    """The optimizer gate: step kept, every old moment row at its new row, new rows zero.

    ``before`` is one entry of :func:`snapshot_state` taken before the migration.

    Raises:
        CheckpointError OPTIMIZER_STEP_RESET: the state is gone, a key is missing, or
            ``step`` differs from before.
        CheckpointError PRESERVED_ROW_CHANGED: a moment row differs from its source,
            or an initialized row's moment is not zero.
    """
    after = optimizer.state.get(new)
    if not after or any(key not in after for key in before):
        missing = sorted(set(before) - set(after or {}))
        raise CheckpointError(
            "OPTIMIZER_STEP_RESET",
            f"{name}: the migrated optimizer state lacks {missing or 'everything'}",
            value=missing,
            fix="move the old state onto the new Parameter (move_state) instead of a fresh optimizer",
        )
    if "step" in before and float(after["step"]) != float(before["step"]):  # type: ignore[arg-type]
        raise CheckpointError(
            "OPTIMIZER_STEP_RESET",
            f"{name}: step went from {float(before['step'])} to {float(after['step'])}",  # type: ignore[arg-type]
            value=(float(before["step"]), float(after["step"])),  # type: ignore[arg-type]
            fix="keep the parameter's step: resetting it changes every old row's bias correction",
        )
    new_ids = torch.tensor(rows.new_row_ids, dtype=torch.int64)
    for key, old in before.items():
        if not isinstance(old, torch.Tensor) or old.dim() == 0 or key == "row_step":
            continue
        grown = after[key]
        assert isinstance(grown, torch.Tensor)
        if grown.shape[0] != rows.new_rows:
            raise CheckpointError(
                "OPTIMIZER_STEP_RESET",
                f"{name}:{key} has {grown.shape[0]} rows, the table {rows.new_rows}",
                value=(key, grown.shape[0]),
                fix="move the moments with the row map",
            )
        check_preserved(old, grown, rows, f"{name}:{key}")
        if len(new_ids) and bool(grown.index_select(0, new_ids).any()):
            raise CheckpointError(
                "PRESERVED_ROW_CHANGED",
                f"{name}:{key}: initialized rows carry nonzero moments",
                value=key,
                fix="start new rows' moments at zero, or declare a warm start",
            )
