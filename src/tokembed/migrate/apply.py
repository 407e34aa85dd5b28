"""Migrate every vocabulary-indexed tensor of a model, and its optimizer state, by one row map.

:func:`migrate_model` converts the canonical tensors one at a time: the input
table, an untied output head, the output bias. Each new table is
``R @ old + diag(1 - m) @ init``: exact rows are copied through the row map (and
verified bit for bit), initialized rows come from :mod:`tokembed.migrate.init`.
A tied output is not converted twice: the one canonical table is migrated and
then assigned to the output module, and the tie is proved by identity. Module
metadata follows (``num_embeddings``, ``out_features``, ``padding_idx`` through
the map, ``config.vocab_size``). With an optimizer, each table's state moves
to the new Parameter right after the table, the step is kept and new rows'
moments are zero. Each replaced Parameter is emptied as soon as its table is
migrated, so the peak is the model plus one table (keep a clone if you need
the old values).

What it refuses before writing anything: a model bound to another tokenizer
(``model_hash``), tables whose roles or sizes disagree with their bindings, a
declared tie that is two tensors, a table whose rows are not the map's old rows.

Example::

    >>> change = classify_change(old_tok, new_tok)  # doctest: +SKIP
    >>> result = migrate_model(model, row_map(change), optimizer=opt)  # doctest: +SKIP
    >>> result.tensors  # doctest: +SKIP
    ('model.embed_tokens.weight',)

Raises CheckpointError ZERO3_PARTITIONED_TABLE (a DeepSpeed ZeRO-3 engine's model:
use :func:`~tokembed.migrate.zero3.migrate_zero3`), ROW_COUNT_MISMATCH, TIE_NOT_SHARED, TABLE_ROLE_SWAPPED,
TABLE_SIZED_FOR_OTHER_VOCAB, PRESERVED_ROW_CHANGED, VOCAB_AXIS_STALE;
EmbeddingError ADDRESS_HASH_MISMATCH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from tokembed.artifacts.models import parameter_owner
from tokembed.errors import CheckpointError, EmbeddingError
from tokembed.migrate.init import InitRecord, NewRows, bias_rows, init_records, init_rows
from tokembed.migrate.optimizer import check_preserved, copy_exact_, move_state
from tokembed.migrate.roles import (
    VocabRoles,
    _require_tie,
    check_bindings,
    check_vocab_axes,
    parameter,
    require_bound,
    vocab_roles,
)
from tokembed.migrate.rowmap import RowMap

__all__ = ["Migration", "migrate_model", "migrate_rows"]


@dataclass(frozen=True, kw_only=True)
class Migration:
    """What :func:`migrate_model` did: the map, the roles, the init ledger, the state moved."""

    row_map: RowMap
    roles: VocabRoles
    tensors: tuple[str, ...]
    records: tuple[InitRecord, ...]
    optimizer_states: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "old_rows": self.row_map.old_rows,
            "new_rows": self.row_map.new_rows,
            "exact_rows": len(self.row_map.pairs),
            "initialized_rows": len(self.row_map.new_row_ids),
            "row_map_digest": self.row_map.digest,
            "roles": {
                "input": self.roles.input,
                "output": self.roles.output,
                "bias": self.roles.bias,
                "tied": self.roles.tied,
            },
            "tensors": list(self.tensors),
            "optimizer_states": list(self.optimizer_states),
            "init_ledger": [r.to_json() for r in self.records],
        }


def migrate_rows(
    old: torch.Tensor,
    rows: RowMap,
    values: torch.Tensor,
    *,
    name: str = "table",
    verify: bool = True,
) -> torch.Tensor:
    """``new[v] = old[source[v]]`` for exact rows, ``values`` (in ``rows.new_row_ids`` order) else."""
    if old.shape[0] != rows.old_rows:
        raise CheckpointError(
            "ROW_COUNT_MISMATCH",
            f"{name} has {old.shape[0]} rows but the row map expects {rows.old_rows}",
            value=(name, old.shape[0]),
            fix="build the row map for this table's row count (row_map(change, old_rows=...))",
        )
    new = old.detach().new_empty((rows.new_rows, *old.shape[1:]))
    copy_exact_(new, old.detach(), rows)
    with torch.no_grad():
        ids = rows.new_row_ids
        if ids and ids == tuple(range(ids[0], rows.new_rows)):
            new[ids[0] :].copy_(values)
        elif ids:
            new.index_copy_(0, torch.tensor(ids, dtype=torch.int64), values.to(new.dtype))
    if verify:
        check_preserved(old, new, rows, name)
    return new


def _check_model(
    model: nn.Module,
    roles: VocabRoles,
    rows: RowMap,
    *,
    old_hash: str | None,
    model_hash: str | None,
    bindings: Mapping[str, str] | None,
    vocabularies: Mapping[str, int] | None,
) -> None:
    if model_hash is not None and old_hash is not None and model_hash != old_hash:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"the model was trained for tokenizer {model_hash}, the old tokenizer is {old_hash}",
            value=model_hash,
            fix="migrate from the tokenizer the checkpoint records",
        )
    if bindings is not None:
        if vocabularies is not None:
            check_bindings(model, bindings, vocabularies)
        if old_hash is not None:
            for name in roles.names():
                require_bound(bindings, name, old_hash)
    if roles.tied:
        _require_tie(model, roles)
    for role in (n for n in (roles.input, roles.output, roles.bias) if n is not None):
        found = parameter(model, role).shape[0]
        if found != rows.old_rows:
            raise CheckpointError(
                "ROW_COUNT_MISMATCH",
                f"{role!r} has {found} rows, the old vocabulary has {rows.old_rows}",
                value=(role, found),
                fix="build the row map with old_rows equal to the model's table rows",
            )


def _refuse_partitioned(model: nn.Module) -> None:
    """A ZeRO-3 module's Parameters are flat slices inside buffers sized at initialize.

    Their visible shape is empty between forwards, so without this check the
    migration would report a table of 0 rows; and a resized Parameter would leave
    the optimizer's partitions at the old size (transformers#41959).
    """
    partitioned = next((n for n, p in model.named_parameters() if hasattr(p, "ds_id")), None)
    if partitioned is not None:
        raise CheckpointError(
            "ZERO3_PARTITIONED_TABLE",
            f"{partitioned!r} is partitioned by DeepSpeed ZeRO-3: a table's rows cannot "
            "change inside the engine's flat partitions",
            value=partitioned,
            fix="migrate the engine with tokembed.migrate.migrate_zero3, which gathers the "
            "model and its optimizer state, migrates them and builds a new engine",
        )


def _set_metadata(module: nn.Module, rows: RowMap) -> None:
    if isinstance(module, nn.Embedding):
        module.num_embeddings = rows.new_rows
        if module.padding_idx is not None:
            new_pad = [v for j, v in rows.pairs if j == module.padding_idx]
            module.padding_idx = new_pad[0] if new_pad else None
    elif isinstance(module, nn.Linear):
        module.out_features = rows.new_rows


def migrate_model(
    model: nn.Module,
    rows: RowMap,
    *,
    roles: VocabRoles | None = None,
    init: NewRows | None = None,
    output_init: NewRows | None = None,
    bias: str = "mean",
    bias_value: float = 0.0,
    sources: Mapping[int, Sequence[int]] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    row_age: bool = False,
    old_hash: str | None = None,
    model_hash: str | None = None,
    bindings: Mapping[str, str] | None = None,
    vocabularies: Mapping[str, int] | None = None,
    verify: bool = True,
) -> Migration:
    """Migrate ``model`` (and ``optimizer``) in place from ``rows.old_rows`` to ``rows.new_rows``.

    ``init`` fills new input rows (default ``mean``), ``output_init`` new rows of an
    untied head (default: ``init``), ``bias``/``bias_value`` the new bias entries.
    ``old_hash`` is the old tokenizer's address hash, ``model_hash`` the one the
    checkpoint records; ``bindings``/``vocabularies`` bind tables of a multi-vocabulary
    model (see :func:`~tokembed.migrate.roles.check_bindings`).
    """
    _refuse_partitioned(model)
    roles = vocab_roles(model) if roles is None else roles
    init = NewRows() if init is None else init
    output_init = init if output_init is None else output_init
    _check_model(
        model,
        roles,
        rows,
        old_hash=old_hash,
        model_hash=model_hash,
        bindings=bindings,
        vocabularies=vocabularies,
    )
    plan: list[tuple[str, NewRows | str]] = [(roles.input, init)]
    if roles.output is not None and not roles.tied:
        plan.append((roles.output, output_init))
    if roles.bias is not None:
        plan.append((roles.bias, bias))
    records: list[InitRecord] = []
    moved: list[str] = []
    # Every new row is computed and checked before the first table changes: a refusal
    # (a non-finite row, a bad bias value) leaves the model as it was.
    new_values: dict[str, torch.Tensor] = {}
    for name, rule in plan:
        module, attr = parameter_owner(model, name)
        old = getattr(module, attr)
        if isinstance(rule, NewRows):
            values = init_rows(old.detach(), rows, rule, sources=sources)
            records += init_records(rows, rule, sources=sources, embedding_dim=old.shape[1])
        else:
            values = bias_rows(old.detach(), rows, rule, value=bias_value)
            records += [InitRecord(row=v, initializer=f"bias_{rule}") for v in rows.new_row_ids]
        if values.numel() and not bool(torch.isfinite(values).all()):
            raise EmbeddingError(
                "NON_FINITE_VALUES",
                f"the new rows of {name!r} hold NaN or infinity ({rule if isinstance(rule, str) else rule.name} "
                "initializer): they would be written into the migrated model",
                value=name,
                fix="repair the non-finite rows of the old table, or choose another initializer",
            )
        new_values[name] = values
        del values, old
    for name, _rule in plan:
        module, attr = parameter_owner(model, name)
        old = getattr(module, attr)
        values = new_values.pop(name)
        new = nn.Parameter(
            migrate_rows(old, rows, values, name=name, verify=verify),
            requires_grad=old.requires_grad,
        )
        del values
        setattr(module, attr, new)
        _set_metadata(module, rows)
        if name == roles.input and roles.tied:
            assert roles.output is not None
            out_module, out_attr = parameter_owner(model, roles.output)
            setattr(out_module, out_attr, new)  # restore the tie: one Parameter, not a copy
            _set_metadata(out_module, rows)
        # Release the replaced table now, not when the optimizer lets go of it: the
        # moments moved next then peak at one extra table, not two.
        shape = old.shape
        old.data = old.data.new_empty((0, *shape[1:]))
        if optimizer is not None and move_state(
            optimizer, old, new, rows, name=name, row_age=row_age, verify=verify, shape=shape
        ):
            moved.append(name)
        del old, new
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "vocab_size"):
        config.vocab_size = rows.new_rows
    check_vocab_axes(model, roles, rows.new_rows)
    return Migration(
        row_map=rows,
        roles=roles,
        tensors=tuple(name for name, _ in plan),
        records=tuple(records),
        optimizer_states=tuple(moved),
    )
