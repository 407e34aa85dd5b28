"""Sharded models and their optimizers saved as distributed checkpoints, ties and all.

A model trained at scale keeps its tables as blocks: FSDP2 and DTensor plans make
every Parameter a ``DTensor`` holding one row range per rank, tokembed's
vocabulary-parallel tables hold rows ``[s_r, e_r)`` of ``[V, d]`` on each rank of
the tensor-parallel group, and FSDP2 on top of them (a 2-D mesh) cuts each of
those again. :func:`save_distributed` writes all of them as one
``torch.distributed.checkpoint`` folder (:func:`~tokembed.artifacts.dcp_io.write_dcp`)
in which every logical tensor has its global shape: a tied table once, under its
canonical name; optimizer state per logical parameter (``optimizer/<name>/<key>``);
and the tokembed record beside DCP's ``.metadata``: the alias map, the tokenizer's
address hash, the optimizer's param groups and the table layout at save time.

:func:`load_distributed` loads such a folder into a model sharded any other way
(another world size, another tensor-parallel degree, one process), checking
everything before any value is copied, with the single-file path's codes:
ADDRESS_HASH_MISMATCH, UNDECLARED_TIE (a recorded tie the config denies),
DIVERGENT_ALIAS_VALUES (both names of a tie stored with different values),
MISSING_KEY / UNEXPECTED_KEY, SHAPE_MISMATCH, UNSAFE_CAST, OPTIMIZER_STATE_MISMATCH,
MALFORMED_CHECKPOINT and CHECKPOINT_SHARD_MISSING (a damaged folder). Then it
reads the values into staging copies of this rank's blocks (and into the
optimizer's new moments), and only when every read succeeded restores the ties,
copies the values in and proves the ties: bytes damaged in place (DCP's data files
carry no checksum) fail while reading and leave the model as it was, at the price
of one extra copy of the rank's blocks while loading. On a sharded model the ranks of
``group`` agree: if one refuses, all raise the same code.

Example::

    >>> save_checkpoint(model_dp2_tp2, "step-100", optimizer=adam, tokenizer=tok)  # 4 ranks
    >>> load_checkpoint(model_tp4, "step-100", tokenizer=tok)       # 4 ranks, tp = 4
    >>> load_checkpoint(plain_model, "step-100", tokenizer=tok)     # one process
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.artifacts.dcp_io import TensorPiece, read_dcp, write_dcp
from tokembed.artifacts.dcp_metadata import read_dcp_metadata, read_dcp_record
from tokembed.artifacts.recorded_hash import address_hash_of
from tokembed.checkpoint.alias import (
    AliasGraph,
    alias_graph,
    apply_aliases,
    local_tensor,
    placement,
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
from tokembed.checkpoint.optimizer import (
    PREFIX,
    check_saved_groups,
    optimizer_tensors,
    restore_options,
)
from tokembed.errors import CheckpointError, EmbeddingError, TokembedError

__all__ = [
    "dcp_to_file",
    "dcp_to_model_folder",
    "file_to_dcp",
    "load_distributed",
    "model_pieces",
    "save_distributed",
]


def _rows_of(model: nn.Module) -> dict[str, tuple[int, int]]:
    """Every name of a row-sharded table's weight -> (V, first global row held here)."""
    tables = row_tables(model)
    out: dict[str, tuple[int, int]] = {}
    by_id = {
        id(model.get_parameter(n)): (t["num_embeddings"], t["start"]) for n, t in tables.items()
    }
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in by_id:
            out[name] = by_id[id(param)]
    return out


def _piece(name: str, tensor: torch.Tensor, rows: tuple[int, int] | None) -> TensorPiece:
    """The block ``tensor`` holds of logical tensor ``name`` (``rows``: a row-sharded table's)."""
    from torch.distributed.tensor import DTensor

    shape = tuple(tensor.shape)
    if isinstance(tensor, DTensor):
        offset = tuple(tensor.__create_chunk_list__()[0].offsets)
    else:
        offset = (0,) * tensor.dim()
    if rows is not None:  # this rank's rows of the [V, ...] table, then FSDP2's block of them
        shape, offset = (rows[0], *shape[1:]), (rows[1] + offset[0], *offset[1:])
    return TensorPiece(name=name, shape=shape, offset=offset, tensor=local_tensor(tensor))


def model_pieces(
    model: nn.Module, tensors: dict[str, torch.Tensor], *, owners: dict[str, str] | None = None
) -> list[TensorPiece]:
    """This rank's pieces of ``tensors`` (state-dict entries of ``model``, DTensor or local).

    ``owners`` maps an optimizer-state key to its parameter name: a row-shaped state
    tensor of a row-sharded table is placed at the table's rows.
    """
    rows, owners = _rows_of(model), owners or {}
    pieces = []
    for name, tensor in tensors.items():
        param = owners.get(name, name)
        table = rows.get(param)
        if table is not None and name != param:
            # Optimizer state sits at the table's rows only when it is shaped like the table.
            shaped = local_tensor(tensor).shape == local_tensor(model.get_parameter(param)).shape
            table = table if shaped else None
        pieces.append(_piece(name, tensor, table))
    return pieces


def _layout(model: nn.Module, aliases: dict[str, str]) -> dict[str, Any]:
    """The tables' layout at save time (informational: a folder loads at any layout)."""
    tables: dict[str, Any] = {}
    for name, module in model.named_modules():
        key = f"{name}.weight" if name else "weight"
        weight = module._parameters.get("weight")
        if key in aliases or weight is None:
            continue
        if getattr(module, "vocab_start", None) is not None:  # a row-sharded table
            tables[key] = {
                "num_embeddings": int(module.num_embeddings),
                "intervals": [list(iv) for iv in module.intervals],
                "placement": placement(weight) or "local rows",
            }
        elif isinstance(module, nn.Embedding) and placement(weight):
            tables[key] = {
                "num_embeddings": int(module.num_embeddings),
                "placement": placement(weight),
            }
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    return {"world_size": world, "tables": tables}


def save_distributed(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Any = None,
    inputs: Iterable[str | os.PathLike[str]] = (),
    group: ProcessGroup | None = None,
) -> Path:
    """Write ``model`` (and ``optimizer``) as a new DCP folder; collective over ``group``.

    Raises:
        UsageError OUTPUT_EXISTS: ``folder`` exists or is one of ``inputs``.
        CheckpointError UNDECLARED_TIE: two distinct Parameters share storage.
        CheckpointError STALE_OPTIMIZER_PARAMETER / DUPLICATE_OPTIMIZER_REGISTRATION.
    """
    aliases = alias_graph(model).aliases()
    tensors = {k: v for k, v in model.state_dict().items() if k not in aliases}
    refuse_hidden_sharing(tensors)
    opt_meta, owners = None, {}
    if optimizer is not None:
        state, opt_meta = optimizer_tensors(model, optimizer)
        owners = {key: key[len(PREFIX) :].rsplit("/", 1)[0] for key in state}
        tensors.update(state)
    config: Any = getattr(model, "config", None)
    record = {
        "aliases": aliases,
        "address_hash": address_hash_of(tokenizer),
        "optimizer": opt_meta,
        "layout": _layout(model, aliases),
        "config": config.to_dict() if hasattr(config, "to_dict") else None,
    }
    pieces = model_pieces(model, tensors, owners=owners)
    return write_dcp(folder, pieces, record=record, group=group, inputs=inputs)


def _target(model: nn.Module, name: str) -> torch.Tensor:
    path, _, leaf = name.rpartition(".")
    module = model.get_submodule(path) if path else model
    found: torch.Tensor | None = module._parameters.get(leaf)
    if found is None:
        found = module._buffers.get(leaf)
    assert found is not None, name
    return found


def _agree(check: Callable[[], Any], group: ProcessGroup | None, sharded: bool) -> Any:
    """Run ``check`` on every rank of ``group``; if any rank refused, every rank raises."""
    error: TokembedError | None = None
    result = None
    try:
        result = check()
    except TokembedError as exc:
        error = exc
    if sharded and dist.is_available() and dist.is_initialized():
        errors: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(errors, error, group=group)
        error = error or next((e for e in errors if e is not None), None)
    if error is not None:
        raise error
    return result


def _refuse_fsdp_retie(model: nn.Module, graph: AliasGraph) -> None:
    from torch.distributed.fsdp import FSDPModule

    for alias, canonical in graph.aliases().items():
        if model.get_parameter(alias) is model.get_parameter(canonical):
            continue
        if any(isinstance(m, FSDPModule) for m in model.modules()):
            raise CheckpointError(
                "ALIAS_GRAPH_LOST",
                f"the checkpoint ties {alias!r} to {canonical!r} but the FSDP2 model holds two "
                "Parameters: re-pointing a sharded Parameter would leave FSDP2 managing a stale one",
                value=alias,
                fix="tie the modules before fully_shard (apply_aliases, or load into the "
                "unsharded model first), then shard them in one group",
            )


def _source_keys(
    model: nn.Module, graph: AliasGraph, stored: set[str]
) -> tuple[dict[str, list[str]], list[str]]:
    """Canonical name -> stored keys of its group (first is read), and names nothing holds."""
    groups: dict[str, list[str]] = {}
    for name in model.state_dict():
        groups.setdefault(graph.canonical(name), []).append(name)
    present, missing = {}, []
    for canonical, members in groups.items():
        found = [m for m in dict.fromkeys([canonical, *members]) if m in stored]
        if found:
            present[canonical] = found
        else:
            missing.extend(members)
    return present, missing


def _global(model: nn.Module, name: str, rows: dict[str, tuple[int, int]]) -> tuple[int, ...]:
    shape = tuple(_target(model, name).shape)
    return (rows[name][0], *shape[1:]) if name in rows else shape


def _check_values(model: nn.Module, meta: Any, sources: dict[str, list[str]]) -> None:
    rows = _rows_of(model)
    for canonical, keys in sources.items():
        target = _target(model, canonical)
        for key in keys:
            saved = meta.state_dict_metadata[key]
            shape, dtype = tuple(saved.size), saved.properties.dtype
            check_source(key, (shape, dtype), (_global(model, canonical, rows), target.dtype))


def _divergent(
    model: nn.Module, folder: Path, meta: Any, sources: dict[str, list[str]]
) -> list[str] | None:
    """The first group whose stored keys hold different values on this rank's rows."""
    rows = _rows_of(model)
    for canonical, keys in sources.items():
        if len(keys) < 2:
            continue
        target = _target(model, canonical)
        copies = [torch.empty_like(local_tensor(target).detach()) for _ in keys]
        base = _piece(canonical, target.detach(), rows.get(canonical))
        pieces = [
            TensorPiece(name=k, shape=base.shape, offset=base.offset, tensor=c)
            for k, c in zip(keys, copies, strict=True)
        ]
        read_dcp(folder, pieces, metadata=meta)
        if not all(torch.equal(copies[0], c) for c in copies[1:]):
            return keys
    return None


def _optimizer_targets(
    model: nn.Module, optimizer: torch.optim.Optimizer, record: dict[str, Any] | None, meta: Any
) -> dict[str, tuple[torch.nn.Parameter, str, torch.Tensor]]:
    """``{key: (param, moment, destination)}`` for every saved optimizer tensor, checked."""
    opt_meta = (record or {}).get("optimizer")
    if opt_meta is None:
        raise CheckpointError(
            "OPTIMIZER_STATE_MISMATCH",
            "the checkpoint holds no optimizer state",
            value=None,
            fix="load without optimizer=, or save with save_checkpoint(optimizer=...)",
        )
    names = check_saved_groups(model, optimizer, opt_meta)
    rows = _rows_of(model)
    out = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            name = names[id(param)]
            prefix = f"{PREFIX}{name}/"
            for key in (k for k in meta.state_dict_metadata if k.startswith(prefix)):
                saved = meta.state_dict_metadata[key]
                shape = tuple(saved.size)
                if shape and shape != _global(model, name, rows):
                    raise CheckpointError(
                        "OPTIMIZER_STATE_MISMATCH",
                        f"{key!r} is {list(shape)}, the parameter is {list(_global(model, name, rows))}",
                        value=key,
                        fix="load optimizer state saved for this model's shapes",
                    )
                dest = (
                    torch.zeros_like(param.detach())
                    if shape
                    else torch.empty((), dtype=saved.properties.dtype)
                )
                out[key] = (param, key[len(prefix) :], dest)
    return out


def load_distributed(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    optimizer: torch.optim.Optimizer | None = None,
    tokenizer: Any = None,
    strict: bool = True,
    group: ProcessGroup | None = None,
    retie: bool = False,
) -> LoadReport:
    """Check, restore ties, read values (and optimizer state) from a DCP folder; prove ties.

    ``retie`` as for :func:`~tokembed.checkpoint.load_checkpoint`: a recorded tie
    between two independent Parameters of ``model`` is refused without it.

    Non-collective reads: each rank reads only the saved chunks that overlap its
    blocks. A sharded model's ranks of ``group`` exchange one verdict before
    anything is copied, so they refuse together.

    Raises:
        As the module docstring lists; CheckpointError ALIAS_GRAPH_LOST when the
        checkpoint ties two Parameters that an FSDP2 model holds apart.
    """
    root = Path(folder)
    sharded = is_sharded(model)

    def check() -> tuple[Any, ...]:
        meta = read_dcp_metadata(root)
        record = read_dcp_record(root, metadata=meta)
        check_tokenizer(record, tokenizer)
        graph = restore_graph(model, record, retie=retie)
        stored = set(meta.state_dict_metadata)
        sources, missing = _source_keys(model, graph, stored)
        names = set(model.state_dict())
        unexpected = sorted(k for k in stored - names if not k.startswith(PREFIX))
        if strict and missing:
            raise EmbeddingError(
                "MISSING_KEY",
                f"{root} lacks {missing[:5]}{' ...' if len(missing) > 5 else ''}: loading would "
                "leave freshly initialized values",
                value=missing,
                fix="load the checkpoint that holds these tensors, or pass strict=False and "
                "initialize them on purpose",
            )
        if strict and unexpected:
            raise EmbeddingError(
                "UNEXPECTED_KEY",
                f"{root} holds tensors the model does not know: {unexpected[:5]}",
                value=unexpected,
                fix="load into the architecture it was saved from, or pass strict=False",
            )
        _refuse_fsdp_retie(model, graph)
        _check_values(model, meta, sources)
        moments = _optimizer_targets(model, optimizer, record, meta) if optimizer else {}
        divergent = _divergent(model, root, meta, sources)
        if divergent is not None:
            raise CheckpointError(
                "DIVERGENT_ALIAS_VALUES",
                f"{divergent} are one tied parameter in the model but hold different values "
                f"in {root}: an untied or corrupted checkpoint",
                value=divergent,
                fix="untie the model before loading (tokembed.checkpoint.untie), or choose "
                "the canonical values explicitly with tokembed.checkpoint.tie(keep=...)",
            )
        return meta, record, graph, sources, missing, unexpected, moments

    meta, record, graph, sources, missing, unexpected, moments = _agree(check, group, sharded)
    targets = {c: keys[0] for c, keys in sources.items()}
    rows = _rows_of(model)
    live = [
        _piece(key, _target(model, canonical).detach(), rows.get(canonical))
        for canonical, key in targets.items()
    ]
    # Values are read into staging copies (one extra copy of this rank's blocks at peak):
    # DCP's data files carry no checksum, so bytes damaged in place surface only while
    # reading, and by then a direct read would have overwritten earlier parameters.
    staged = [replace(p, tensor=torch.empty_like(p.tensor)) for p in live]
    with torch.no_grad():
        moment_pieces = [
            _piece(k, dest, _moment_rows(rows, model, p, dest))
            for k, (p, _, dest) in moments.items()
        ]
        read_dcp(root, staged + moment_pieces, metadata=meta)
        retied = apply_aliases(model, graph)  # ties before values: aliases share the copy
        for dest, source in zip(live, staged, strict=True):
            dest.tensor.copy_(source.tensor)
    verify_aliases(model, graph)
    if optimizer is not None:
        _install(model, optimizer, record, moments)
    return LoadReport(
        states={n: "fresh" if n in missing else "exact_load" for n in model.state_dict()},
        missing=tuple(missing),
        unexpected=tuple(unexpected),
        retied=tuple(retied),
        aliases=graph.aliases(),
        address_hash=(record or {}).get("address_hash"),
        optimizer_restored=optimizer is not None,
    )


def _moment_rows(
    rows: dict[str, tuple[int, int]], model: nn.Module, param: torch.Tensor, dest: torch.Tensor
) -> tuple[int, int] | None:
    if dest.dim() == 0:
        return None
    name = next((n for n, p in model.named_parameters(remove_duplicate=False) if p is param), "")
    return rows.get(name)


def _install(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    record: dict[str, Any] | None,
    moments: dict[str, tuple[torch.nn.Parameter, str, torch.Tensor]],
) -> None:
    opt_meta = (record or {})["optimizer"]
    names = check_saved_groups(model, optimizer, opt_meta)
    scalars = opt_meta.get("scalars", {})
    for group, saved in zip(optimizer.param_groups, opt_meta["param_groups"], strict=True):
        restore_options(group, saved)
        for param in group["params"]:
            optimizer.state.pop(param, None)
            state: dict[str, Any] = dict(scalars.get(names[id(param)], {}))
            state.update({m: d for p, m, d in moments.values() if p is param})
            if state:
                optimizer.state[param] = state


def dcp_to_file(
    folder: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    optimizer: bool = True,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Convert a DCP checkpoint folder into one single-file safetensors checkpoint.

    The tensors keep their names (a tie stays one tensor under its canonical name),
    and the record keeps the alias map, the tokenizer's address hash and (with
    ``optimizer=True``) the optimizer state and its description, so
    :func:`~tokembed.checkpoint.load_checkpoint` restores the same model either way.
    Runs in one process; the folder is checked (as :func:`load_distributed` does)
    before anything is written.

    Example::

        >>> dcp_to_file("step-100", "step-100.safetensors")  # doctest: +SKIP

    Raises:
        UsageError OUTPUT_EXISTS: ``path`` is one of ``inputs`` or a folder.
        CheckpointError MALFORMED_CHECKPOINT / CHECKPOINT_SHARD_MISSING: a damaged folder.
    """
    from tokembed.artifacts.dcp_io import read_dcp_tensor
    from tokembed.artifacts.safetensors_header import CHECKPOINT_META_KEY, CHECKPOINT_VERSION
    from tokembed.artifacts.safetensors_writer import write_safetensors
    from tokembed.files.atomic import check_output, replace_with

    root = Path(folder)
    meta = read_dcp_metadata(root)
    record = read_dcp_record(root, metadata=meta) or {}
    target = check_output(Path(path), inputs=[str(p) for p in [root, *inputs]])
    names = [n for n in sorted(meta.state_dict_metadata) if optimizer or not n.startswith(PREFIX)]
    tensors = {n: read_dcp_tensor(root, n, metadata=meta) for n in names}
    header = {
        "version": CHECKPOINT_VERSION,
        "aliases": record.get("aliases", {}),
        "tensors": {
            k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
            for k, v in tensors.items()
        },
        "address_hash": record.get("address_hash"),
        "optimizer": record.get("optimizer") if optimizer else None,
    }
    metadata = {"format": "pt", CHECKPOINT_META_KEY: json.dumps(header, sort_keys=True)}
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_with(target, lambda tmp: write_safetensors(tmp, tensors, metadata=metadata))
    return target


def dcp_to_model_folder(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Convert a DCP checkpoint into a model folder: ``model.safetensors`` + ``config.json``.

    The weights (no optimizer state) become the folder's single-file checkpoint
    with its alias map, so a tie stays one tensor; ``config.json`` is the model
    config recorded at save time (absent when the model had none). The folder is
    what :func:`~tokembed.checkpoint.save_model_folder` writes, read by
    ``transformers`` ``from_pretrained`` and by :func:`file_to_dcp`.

    Raises:
        UsageError OUTPUT_EXISTS: ``out`` exists or is one of ``inputs``.
        As :func:`dcp_to_file`.
    """
    import shutil

    from tokembed.files.atomic import (
        check_new_folder,
        new_temp_folder,
        publish_folder,
        write_bytes_atomic,
    )

    root = Path(folder)
    record = read_dcp_record(root) or {}
    target = check_new_folder(Path(out), inputs=[root, *(Path(p) for p in inputs)])
    tmp = new_temp_folder(target)
    try:
        dcp_to_file(root, tmp / "model.safetensors", optimizer=False)
        if record.get("config") is not None:
            text = json.dumps(record["config"], indent=2, sort_keys=True) + "\n"
            write_bytes_atomic(tmp / "config.json", text.encode())
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish_folder(tmp, target)
    return target


def file_to_dcp(
    source: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Convert a single-file checkpoint, or a model folder, into a DCP checkpoint folder.

    ``source`` is a safetensors checkpoint (ours, with its record, or a foreign
    file: then no aliases are recorded) or a folder holding ``model.safetensors``
    (and ``config.json``, kept in the record). Tensors are read one at a time
    while they are written. The result loads at any world size with
    :func:`~tokembed.checkpoint.load_checkpoint`. Run it in one process with no
    process group initialized (DCP's writer turns collective once one exists).

    Raises:
        UsageError OUTPUT_EXISTS / FILE_NOT_FOUND.
        CheckpointError MALFORMED_CHECKPOINT: a damaged file.
    """
    from safetensors import safe_open

    from tokembed.artifacts.safetensors_header import (
        checkpoint_metadata,
        read_safetensors_header,
    )

    src = Path(source)
    config = None
    if src.is_dir():
        if (src / "config.json").is_file():
            config = json.loads((src / "config.json").read_text(encoding="utf-8"))
        src = src / "model.safetensors"
    header = read_safetensors_header(src)
    meta = checkpoint_metadata(header, src) or {}
    dtypes = {
        "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
        "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
        "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
    }  # fmt: skip
    pieces = []
    for name, entry in sorted(header.items()):
        if name == "__metadata__":
            continue
        shape = tuple(int(n) for n in entry["shape"])
        empty = torch.empty(shape, dtype=dtypes[entry["dtype"]], device="meta")
        pieces.append(TensorPiece(name=name, shape=shape, offset=(0,) * len(shape), tensor=empty))

    with safe_open(str(src), framework="pt") as handle:

        def produce(piece: TensorPiece) -> torch.Tensor:
            tensor: torch.Tensor = handle.get_tensor(piece.name)
            return tensor

        record = {
            "aliases": meta.get("aliases", {}),
            "address_hash": meta.get("address_hash"),
            "optimizer": meta.get("optimizer"),
            "layout": {"world_size": 1, "tables": {}},
            "config": config,
        }
        return write_dcp(folder, pieces, record=record, produce=produce, inputs=[source, *inputs])
