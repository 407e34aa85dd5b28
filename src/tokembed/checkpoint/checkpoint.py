"""Save and load checkpoints that keep their alias graph: one file, or a DCP folder.

:func:`save_checkpoint` stores one tensor per alias group (its canonical name),
the alias map, shapes and dtypes, the tokenizer's address hash and the
optimizer's per-parameter state. An unsharded model goes to one safetensors file
(format in :mod:`tokembed.checkpoint.format`, written by
:mod:`tokembed.artifacts.safetensors_writer`); a sharded one (FSDP2, DTensor plans,
vocabulary-parallel tables) to a ``torch.distributed.checkpoint`` folder with the
same record (:mod:`tokembed.checkpoint.distributed`). Either is written to a
temporary sibling, fsynced and renamed; inputs are never overwritten.

:func:`load_checkpoint` restores the topology before any value: the aliases
recorded in the file, those the model already has and those its transformers
config claims are applied, values are copied into the canonical Parameters, and
identity is proven afterwards. It refuses, each with a code:

* two stored keys of one alias group with different values (a checkpoint that
  holds both ``embed_tokens`` and ``lm_head`` while the model ties them) —
  DIVERGENT_ALIAS_VALUES;
* a key the model needs and the file lacks (never a silently fresh row) —
  MISSING_KEY; a key the model does not know — UNEXPECTED_KEY (with
  ``strict=False`` both are reported instead);
* a lossy dtype cast — UNSAFE_CAST; another shape — SHAPE_MISMATCH;
* another tokenizer than the one in use — ADDRESS_HASH_MISMATCH;
* a single file loaded into a row-sharded table (a file holds whole tables;
  sharded state lives in distributed checkpoint folders) — SHARD_LAYOUT_MISMATCH;
* an optimizer that holds a replaced Parameter or one Parameter twice.

Large tensors are copied into the model in row blocks straight from the
memory-mapped file, so loading needs no second copy of a table.

Example::

    >>> save_checkpoint(model, "ckpt.safetensors", optimizer=adam, tokenizer=tok)
    >>> fresh = build_model()                     # independently constructed, untied
    >>> report = load_checkpoint(fresh, "ckpt.safetensors", tokenizer=tok, retie=True)
    >>> report.retied, fresh.lm_head.weight is fresh.embed.weight
    (['lm_head.weight'], True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.artifacts.digest import tensor_digest
from tokembed.artifacts.recorded_hash import address_hash_of
from tokembed.artifacts.safetensors_header import (
    CHECKPOINT_META_KEY,
    CHECKPOINT_VERSION,
    dtype_name,
    malformed_checkpoint,
    read_checkpoint_metadata,
)
from tokembed.artifacts.safetensors_writer import write_safetensors
from tokembed.checkpoint.alias import (
    alias_graph,
    apply_aliases,
    check_aliases,
    verify_aliases,
)
from tokembed.checkpoint.binding import (
    LoadReport,
    check_source,
    check_tokenizer,
    is_sharded,
    refuse_hidden_sharing,
    restore_graph,
    row_tables,
)
from tokembed.checkpoint.distributed import load_distributed, save_distributed
from tokembed.checkpoint.optimizer import (
    PREFIX,
    check_optimizer_state,
    optimizer_tensors,
    restore_optimizer,
)
from tokembed.errors import CheckpointError, EmbeddingError, ParallelError, UsageError
from tokembed.files.atomic import check_output, replace_with

__all__ = ["load_checkpoint", "save_checkpoint"]

# Row blocks of at most 64 MiB: large enough that the copy runs at memory bandwidth,
# small enough that loading a 2 GiB table adds a few percent of it to the peak.
_BLOCK_BYTES = 64 << 20


def save_checkpoint(
    model: nn.Module,
    path: str | os.PathLike[str],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Any = None,
    digests: bool = False,
    inputs: Iterable[str | os.PathLike[str]] = (),
    distributed: bool | None = None,
    group: ProcessGroup | None = None,
) -> Path:
    """Write ``model`` (and ``optimizer``'s state): one safetensors file, or a DCP folder.

    A model that holds sharded state (FSDP2 or DTensor parameters, vocabulary-
    parallel tables) is written as a distributed checkpoint folder ``path``
    (:func:`~tokembed.checkpoint.distributed.save_distributed`: collective over
    ``group``, every rank calls it); any other model as one safetensors file.
    ``distributed=True`` writes a folder for an unsharded model too (loadable at
    any world size). Returns the path.

    Args:
        tokenizer: a tokenizer (its ``address_hash``) or the hash string the
            rows belong to; recorded and checked by :func:`load_checkpoint`.
        digests: also record each tensor's SHA-256 digest
            (:func:`~tokembed.artifacts.digest.tensor_digest`; ``tokembed checkpoint
            verify`` then checks the bytes; costs one pass over the data). Files only.
        inputs: paths this save must not overwrite.

    Raises:
        UsageError OUTPUT_EXISTS: ``path`` is one of ``inputs`` or a folder (an
            existing folder for a distributed checkpoint).
        UsageError INVALID_ARGUMENT: ``distributed=False`` for a sharded model, or
            ``digests=True`` for a distributed checkpoint.
        CheckpointError UNDECLARED_TIE: two distinct Parameters share storage.
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
    """
    sharded = is_sharded(model)
    if distributed is None:
        distributed = sharded
    if (sharded and not distributed) or (distributed and digests):
        raise UsageError(
            "INVALID_ARGUMENT",
            "a sharded model is saved as a distributed checkpoint folder"
            if sharded and not distributed
            else "digests are recorded in single-file checkpoints only",
            value=str(path),
            fix="save sharded state with distributed=True (the default for a sharded "
            "model) and without digests=True",
        )
    if distributed:
        return save_distributed(
            model, path, optimizer=optimizer, tokenizer=tokenizer, inputs=inputs, group=group
        )
    target = check_output(Path(path), inputs=[str(p) for p in inputs])
    graph = alias_graph(model)
    aliases = graph.aliases()
    tensors = {k: v.detach() for k, v in model.state_dict().items() if k not in aliases}
    refuse_hidden_sharing(tensors)
    opt_meta = None
    if optimizer is not None:
        state, opt_meta = optimizer_tensors(model, optimizer)
        tensors.update(state)
    meta = {
        "version": CHECKPOINT_VERSION,
        "aliases": aliases,
        "tensors": {
            k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
            | ({"sha256": tensor_digest(v)} if digests else {})
            for k, v in tensors.items()
        },
        "address_hash": address_hash_of(tokenizer),
        "optimizer": opt_meta,
    }
    metadata = {"format": "pt", CHECKPOINT_META_KEY: json.dumps(meta, sort_keys=True)}
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_with(target, lambda tmp: write_safetensors(tmp, tensors, metadata=metadata))
    return target


def _refuse_row_shards(path: str | os.PathLike[str], model: nn.Module) -> None:
    # A file holds whole [V, d] tables; a rank of a row-sharded table holds [s, e) of it.
    sharded = row_tables(model)
    if sharded:
        name, rows = next(iter(sharded.items()))
        raise ParallelError(
            "SHARD_LAYOUT_MISMATCH",
            f"{path} is a single-file checkpoint, but this rank holds rows"
            f" [{rows['start']}, {rows['end']}) of {name!r}",
            value=name,
            fix="convert the file with file_to_dcp(file, folder) and load the folder on every rank",
        )


def _check_source(dst: torch.Tensor, f: Any, key: str) -> None:
    """Refuse saved ``key`` for ``dst`` on another shape or a lossy cast (nothing is copied)."""
    sl = f.get_slice(key)
    saved = (tuple(sl.get_shape()), _torch_dtype(sl.get_dtype()))
    check_source(key, saved, (tuple(dst.shape), dst.dtype))


def _copy_into(dst: torch.Tensor, f: Any, key: str) -> None:
    """Copy saved ``key`` (already checked by :func:`_check_source`) into ``dst``, in row blocks."""
    with torch.no_grad():
        if dst.dim() == 0 or dst.numel() * dst.element_size() <= _BLOCK_BYTES:
            dst.copy_(f.get_tensor(key))
            return
        sl = f.get_slice(key)
        rows = max(1, _BLOCK_BYTES // (dst[0].numel() * dst.element_size()))
        for start in range(0, dst.shape[0], rows):
            dst[start : start + rows].copy_(sl[start : start + rows])


def _check_digests(f: Any, meta: dict[str, Any] | None, path: Any) -> None:
    stored = set(f.keys())
    for key, entry in ((meta or {}).get("tensors") or {}).items():
        if "sha256" not in entry or key not in stored:
            continue
        if tensor_digest(f.get_tensor(key)) != entry["sha256"]:
            raise malformed_checkpoint(
                path, f"{key!r} bytes differ from their recorded SHA-256", value=key
            )


def _torch_dtype(code: str) -> torch.dtype:
    dtype: torch.dtype = getattr(torch, dtype_name(code))
    return dtype


def _same_values(f: Any, keys: list[str]) -> bool:
    first = f.get_tensor(keys[0])
    return all(torch.equal(first, f.get_tensor(k)) for k in keys[1:])


def _target(model: nn.Module, name: str) -> torch.Tensor:
    path, _, leaf = name.rpartition(".")
    module = model.get_submodule(path) if path else model
    found: torch.Tensor | None = module._parameters.get(leaf)
    if found is None:
        found = module._buffers.get(leaf)
    assert found is not None, name
    return found


def _refuse_replaced(
    model: nn.Module, optimizer: torch.optim.Optimizer, pending: list[str]
) -> None:
    """Refuse an optimizer that holds a Parameter the load is about to replace by an alias."""
    replaced = {id(_target(model, alias)): alias for alias in pending}
    for g, group in enumerate(optimizer.param_groups):
        for i, param in enumerate(group["params"]):
            if id(param) in replaced:
                raise CheckpointError(
                    "STALE_OPTIMIZER_PARAMETER",
                    f"param_groups[{g}]['params'][{i}] is {replaced[id(param)]!r}, which this "
                    "load replaces by its alias: the optimizer would step a Parameter the model "
                    "no longer uses",
                    value=(g, i),
                    fix="restore aliases first (load_checkpoint without optimizer), then build "
                    "the optimizer from model.parameters() and load its state",
                )


def load_checkpoint(
    model: nn.Module,
    path: str | os.PathLike[str],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Any = None,
    strict: bool = True,
    group: ProcessGroup | None = None,
    retie: bool = False,
) -> LoadReport:
    """Restore aliases, then values, then (optionally) optimizer state; prove the aliases.

    A folder is read as a distributed checkpoint
    (:func:`~tokembed.checkpoint.distributed.load_distributed`: into a model sharded
    at any world size and layout, or into one process; a sharded model's ranks of
    ``group`` call it together and refuse together). A file is one safetensors
    checkpoint. Also reads foreign files (e.g. transformers' ``model.safetensors``)
    and folders written by plain ``dcp.save``:
    their ties come from the model and its config. ``optimizer`` must be built
    from the model after its aliases exist (load once without it first when
    the model is freshly constructed and untied).

    Every check runs before any value, alias or optimizer state changes, so a
    refused load leaves ``model`` and ``optimizer`` as they were. An alias the
    file records between two independent Parameters that neither the model nor
    its transformers config ties is refused unless ``retie=True``.

    Raises:
        CheckpointError UNDECLARED_TIE: the file ties two independent Parameters of
            the model (without ``retie=True``) or ones its config unties.
        CheckpointError DIVERGENT_ALIAS_VALUES, ALIAS_GRAPH_LOST,
            STALE_OPTIMIZER_PARAMETER, DUPLICATE_OPTIMIZER_REGISTRATION,
            OPTIMIZER_STATE_MISMATCH, MALFORMED_CHECKPOINT (also: a recorded SHA-256
            digest that the stored bytes do not match).
        EmbeddingError MISSING_KEY / UNEXPECTED_KEY (strict), SHAPE_MISMATCH,
            UNSAFE_CAST, ADDRESS_HASH_MISMATCH.
        ParallelError SHARD_LAYOUT_MISMATCH: a file loaded into a row-sharded table.
        And as :func:`~tokembed.checkpoint.distributed.load_distributed` for a folder.
    """
    from safetensors import safe_open

    if Path(path).is_dir():
        return load_distributed(
            model,
            path,
            optimizer=optimizer,
            tokenizer=tokenizer,
            strict=strict,
            group=group,
            retie=retie,
        )
    # Everything is checked before anything changes: a refused load leaves the model (its
    # values, its aliases) and the optimizer exactly as they were.
    meta = read_checkpoint_metadata(path)
    check_tokenizer(meta, tokenizer)
    _refuse_row_shards(path, model)
    graph = restore_graph(model, meta, retie=retie)
    pending = check_aliases(model, graph)
    names = list(model.state_dict().keys())
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(graph.canonical(name), []).append(name)
    for canonical in list(groups):
        groups[canonical] = list(dict.fromkeys([canonical, *groups[canonical]]))
    missing: list[str] = []
    with safe_open(str(path), "pt", device="cpu") as f:
        keys = set(f.keys())
        sources: dict[str, str] = {}
        for canonical, members in groups.items():
            present = [m for m in members if m in keys]
            if not present:
                missing.extend(members)
            elif len(present) > 1 and not _same_values(f, present):
                raise CheckpointError(
                    "DIVERGENT_ALIAS_VALUES",
                    f"{present} are one tied parameter in the model but hold different values in "
                    f"{path}: an untied or corrupted checkpoint",
                    value=present,
                    fix="untie the model before loading (tokembed.checkpoint.untie), or choose "
                    "the canonical values explicitly with tokembed.checkpoint.tie(keep=...)",
                )
            else:
                sources[canonical] = present[0]
        unexpected = sorted(k for k in keys - set(names) if not k.startswith(PREFIX))
        if strict and missing:
            raise EmbeddingError(
                "MISSING_KEY",
                f"{path} lacks {missing[:5]}{' ...' if len(missing) > 5 else ''}: loading would "
                "leave freshly initialized values",
                value=missing,
                fix="load the checkpoint that holds these tensors, or pass strict=False and "
                "initialize them on purpose",
            )
        if strict and unexpected:
            raise EmbeddingError(
                "UNEXPECTED_KEY",
                f"{path} holds tensors the model does not know: {unexpected[:5]}",
                value=unexpected,
                fix="load into the architecture it was saved from, or pass strict=False",
            )
        for canonical, key in sources.items():
            _check_source(_target(model, canonical), f, key)
        _check_digests(f, meta, path)
        opt_meta: dict[str, Any] | None = None
        shapes: dict[str, tuple[int, ...]] = {}
        if optimizer is not None:
            opt_meta = (meta or {}).get("optimizer")
            if opt_meta is None:
                raise CheckpointError(
                    "OPTIMIZER_STATE_MISMATCH",
                    f"{path} holds no optimizer state",
                    value=str(path),
                    fix="load without optimizer=, or save with save_checkpoint(optimizer=...)",
                )
            _refuse_replaced(model, optimizer, pending)
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in keys if k.startswith(PREFIX)}
            check_optimizer_state(model, optimizer, opt_meta, shapes)
        retied = apply_aliases(model, graph)
        for canonical, key in sources.items():
            _copy_into(_target(model, canonical), f, key)
        verify_aliases(model, graph)
        if optimizer is not None and opt_meta is not None:
            restore_optimizer(model, optimizer, opt_meta, f.get_tensor, keys, shapes)
    return LoadReport(
        states={n: "fresh" if n in missing else "exact_load" for n in names},
        missing=tuple(missing),
        unexpected=tuple(unexpected),
        retied=tuple(retied),
        aliases=graph.aliases(),
        address_hash=(meta or {}).get("address_hash"),
        optimizer_restored=optimizer is not None,
    )
