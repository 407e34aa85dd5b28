"""Migrate a distributed checkpoint folder offline, one table at a time, without a model.

A model trained at scale is saved as a ``torch.distributed.checkpoint`` folder
(:func:`tokembed.checkpoint.save_checkpoint` of a sharded model). Changing its
vocabulary does not need the model nor its ranks: :func:`migrate_checkpoint`
reads the folder in one process and writes the migrated folder, tensor by
tensor. A vocabulary-indexed table (input table, untied output head, output
bias) is read whole, migrated as :func:`~tokembed.migrate.apply.migrate_model`
migrates it on one process (exact rows copied through the row map and verified
bit for bit, new rows from the same initializers), and written; then its
optimizer moments get the same rows (new rows' moments zero, the step kept).
Every other tensor is copied through. At any moment the process holds one
source tensor and its migrated version: the peak is bounded by one table, not
the model. The result loads at any world size with
:func:`~tokembed.checkpoint.load_checkpoint` and equals, bit for bit, loading the
old folder in one process and migrating the model there.

The record follows: the alias map (a tied head stays the input table's alias),
the new tokenizer's address hash, the optimizer's description, the config's
``vocab_size``, and the migration itself (row map digest and sizes, the init
ledger) under ``"migration"``.

Example::

    >>> rows = row_map(classify_change(old_tok, new_tok))  # doctest: +SKIP
    >>> migrate_checkpoint("step-100", "step-100-v2", rows,  # doctest: +SKIP
    ...                    roles=VocabRoles(input="emb.weight", output="head.weight", tied=True),
    ...                    old_hash=old_tok.address_hash, new_hash=new_tok.address_hash)

Raises EmbeddingError ADDRESS_HASH_MISMATCH (the folder records another old
tokenizer); CheckpointError ROW_COUNT_MISMATCH (a role's rows are not the map's old
rows), TIE_NOT_SHARED (a tie the record does not hold), MALFORMED_CHECKPOINT (a role
the folder lacks) and as :func:`~tokembed.artifacts.dcp_metadata.read_dcp_metadata`;
UsageError OUTPUT_EXISTS.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from tokembed.artifacts.dcp_io import TensorPiece, read_dcp_tensor, write_dcp
from tokembed.artifacts.dcp_metadata import read_dcp_metadata, read_dcp_record
from tokembed.checkpoint.optimizer import PREFIX
from tokembed.errors import CheckpointError, EmbeddingError
from tokembed.migrate.apply import migrate_rows
from tokembed.migrate.init import InitRecord, NewRows, bias_rows, init_records, init_rows
from tokembed.migrate.optimizer import check_preserved, copy_exact_
from tokembed.migrate.roles import VocabRoles
from tokembed.migrate.rowmap import RowMap

__all__ = ["migrate_checkpoint"]


def _check(
    root: Path,
    record: Mapping[str, Any],
    meta: Any,
    roles: VocabRoles,
    rows: RowMap,
    old_hash: str | None,
) -> None:
    found = record.get("address_hash")
    if old_hash is not None and found is not None and found != old_hash:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"{root} was trained for tokenizer {found}, the old tokenizer is {old_hash}",
            value=found,
            fix="migrate from the tokenizer the checkpoint records",
        )
    aliases = record.get("aliases", {})
    if roles.tied and aliases.get(str(roles.output)) != roles.input:
        raise CheckpointError(
            "TIE_NOT_SHARED",
            f"roles declare {roles.output!r} tied to {roles.input!r}, but {root} stores "
            "them as two tensors",
            value=(roles.input, roles.output),
            fix="declare the roles untied (tied=False), or migrate a checkpoint of the tied model",
        )
    for name in roles.names():
        saved = meta.state_dict_metadata.get(name)
        if saved is None or not hasattr(saved, "size"):
            raise CheckpointError(
                "MALFORMED_CHECKPOINT",
                f"{root} holds no tensor {name!r} (a role of the migration)",
                value=name,
                fix="name the roles as the checkpoint stores them (its canonical names)",
            )
        if int(saved.size[0]) != rows.old_rows:
            raise CheckpointError(
                "ROW_COUNT_MISMATCH",
                f"{name!r} has {int(saved.size[0])} rows, the old vocabulary has {rows.old_rows}",
                value=(name, int(saved.size[0])),
                fix="build the row map with old_rows equal to the checkpoint's table rows",
            )


def migrate_checkpoint(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    rows: RowMap,
    *,
    roles: VocabRoles,
    init: NewRows | None = None,
    output_init: NewRows | None = None,
    bias: str = "mean",
    bias_value: float = 0.0,
    sources: Mapping[int, Sequence[int]] | None = None,
    old_hash: str | None = None,
    new_hash: str | None = None,
    verify: bool = True,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> dict[str, Any]:
    """Write the migrated copy of the DCP folder ``folder`` as the new folder ``out``.

    ``roles`` names the vocabulary-indexed tensors by their stored (canonical) names;
    ``init``/``output_init``/``bias``/``bias_value``/``sources`` as for
    :func:`~tokembed.migrate.apply.migrate_model`. Runs in one process (no
    process group). Returns the ``"migration"`` entry written into the record.

    Raises:
        As the module docstring lists; nothing is written when a check fails.
    """
    root = Path(folder)
    meta = read_dcp_metadata(root)
    record = read_dcp_record(root, metadata=meta) or {}
    _check(root, record, meta, roles, rows, old_hash)
    init = NewRows() if init is None else init
    output_init = init if output_init is None else output_init
    rules: dict[str, NewRows | str] = {roles.input: init}
    if roles.output is not None and not roles.tied:
        rules[roles.output] = output_init
    if roles.bias is not None:
        rules[roles.bias] = bias
    ledger: list[InitRecord] = []
    for name, rule in rules.items():  # the init ledger, as migrate_model records it
        if isinstance(rule, NewRows):
            width = int(meta.state_dict_metadata[name].size[1])
            ledger += init_records(rows, rule, sources=sources, embedding_dim=width)
        else:
            ledger += [InitRecord(row=v, initializer=f"bias_{rule}") for v in rows.new_row_ids]

    def owner(name: str) -> str | None:
        """The role whose optimizer state ``name`` is, if any."""
        if not name.startswith(PREFIX):
            return None
        param = name[len(PREFIX) :].rsplit("/", 1)[0]
        return param if param in rules else None

    pieces = []
    for name, saved in sorted(meta.state_dict_metadata.items()):
        shape = tuple(int(n) for n in saved.size)
        param = owner(name)
        if (name in rules or param is not None) and shape and shape[0] == rows.old_rows:
            shape = (rows.new_rows, *shape[1:])
        empty = torch.empty(shape, dtype=saved.properties.dtype, device="meta")
        pieces.append(TensorPiece(name=name, shape=shape, offset=(0,) * len(shape), tensor=empty))

    def produce(piece: TensorPiece) -> torch.Tensor:
        old = read_dcp_tensor(root, piece.name, metadata=meta)
        rule, param = rules.get(piece.name), owner(piece.name)
        if rule is not None:
            if isinstance(rule, NewRows):
                values = init_rows(old, rows, rule, sources=sources)
            else:
                values = bias_rows(old, rows, rule, value=bias_value)
            return migrate_rows(old, rows, values, name=piece.name, verify=verify)
        if param is not None and old.dim() and old.shape[0] == rows.old_rows:
            grown = old.new_zeros((rows.new_rows, *old.shape[1:]))
            copy_exact_(grown, old, rows)
            if verify:
                check_preserved(old, grown, rows, f"{param}:{piece.name.rsplit('/', 1)[1]}")
            return grown
        return old

    migration: dict[str, Any] = {
        "old_rows": rows.old_rows,
        "new_rows": rows.new_rows,
        "exact_rows": len(rows.pairs),
        "initialized_rows": len(rows.new_row_ids),
        "row_map_digest": rows.digest,
        "tensors": list(roles.names()),
        "init_ledger": [r.to_json() for r in ledger],
    }
    config = record.get("config")
    if isinstance(config, dict) and "vocab_size" in config:
        config = {**config, "vocab_size": rows.new_rows}
    new_record = {
        "aliases": record.get("aliases", {}),
        "address_hash": new_hash,
        "optimizer": record.get("optimizer"),
        "layout": {"world_size": 1, "tables": {}},
        "config": config,
        "migration": migration,
    }
    write_dcp(out, pieces, record=new_record, produce=produce, inputs=[root, *inputs])
    return migration
