"""What binds a checkpoint to the model it is loaded into, whatever its format.

A single safetensors file and a distributed checkpoint folder record the same
facts, and both loaders check them the same way, with the same codes:

* the alias graph to restore before any value is copied: the aliases recorded at
  save time, those the model already has and those its transformers config claims
  (:func:`restore_graph`; a recorded tie the config denies is UNDECLARED_TIE);
* the tokenizer the rows belong to (:func:`check_tokenizer`: ADDRESS_HASH_MISMATCH);
* the row layout of vocabulary-sharded tables (:func:`row_tables`), and whether a
  model holds sharded state at all (:func:`is_sharded`: DTensor parameters of
  FSDP2 or a tensor-parallel plan, or tokembed's row-sharded tables);
* two distinct Parameters that share storage are refused at save time
  (:func:`refuse_hidden_sharing`: UNDECLARED_TIE).

:class:`LoadReport` is what either loader returns.

Example::

    >>> graph = restore_graph(model, {"aliases": {"head.weight": "emb.weight"}})
    >>> graph.aliases()
    {'head.weight': 'emb.weight'}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from tokembed.artifacts.recorded_hash import address_hash_of
from tokembed.checkpoint._hf import hf_claims
from tokembed.checkpoint.alias import AliasGraph, alias_graph, local_tensor
from tokembed.embedding.materialize import is_safe_cast
from tokembed.errors import CheckpointError, EmbeddingError

__all__ = [
    "LoadReport",
    "check_source",
    "check_tokenizer",
    "is_sharded",
    "refuse_hidden_sharing",
    "restore_graph",
    "row_tables",
]


@dataclass(frozen=True, kw_only=True)
class LoadReport:
    """What a load did: keys missing or unexpected (``strict=False``), aliases re-pointed.

    ``states`` names each state-dict entry's materialization: ``"exact_load"``
    (copied from the checkpoint) or ``"fresh"`` (missing under ``strict=False``: it
    keeps the values the constructor gave it, and the caller must treat it as new).
    """

    states: dict[str, str]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    retied: tuple[str, ...]
    aliases: dict[str, str]
    address_hash: str | None
    optimizer_restored: bool


def row_tables(model: nn.Module) -> dict[str, dict[str, int]]:
    """``{weight name: {"num_embeddings", "start", "end", "world_size"}}`` of row-sharded tables.

    Row-sharded tables (VocabParallelEmbedding, VocabParallelLMHead, RowRoutedEmbedding)
    hold rows ``[start, end)`` of a ``num_embeddings``-row table on this rank.
    """
    layout = {}
    for name, module in model.named_modules():
        start, end = getattr(module, "vocab_start", None), getattr(module, "vocab_end", None)
        if start is not None and end is not None and "weight" in module._parameters:
            layout[f"{name}.weight" if name else "weight"] = {
                "num_embeddings": int(module.num_embeddings),
                "start": int(start),
                "end": int(end),
                "world_size": len(module.intervals),
            }
    return layout


def is_sharded(model: nn.Module) -> bool:
    """True when ``model`` holds DTensor parameters or buffers, or row-sharded tables."""
    from torch.distributed.tensor import DTensor

    tensors = [*model.parameters(), *model.buffers()]
    return any(isinstance(t, DTensor) for t in tensors) or bool(row_tables(model))


def refuse_hidden_sharing(tensors: Mapping[str, torch.Tensor]) -> None:
    """Refuse two entries that share storage but are not one declared alias.

    Raises:
        CheckpointError UNDECLARED_TIE: naming both entries.
    """
    seen: dict[tuple[int, int], str] = {}
    for name, t in tensors.items():
        local = local_tensor(t)
        if local.numel() == 0 or local.device.type == "meta":
            continue
        key = (local.untyped_storage().data_ptr(), int(local.storage_offset()))
        if key in seen:
            raise CheckpointError(
                "UNDECLARED_TIE",
                f"{name!r} shares storage with {seen[key]!r} but they are two Parameter objects",
                value=(seen[key], name),
                fix="make them one Parameter (a declared alias) or clone one of them",
            )
        seen[key] = name


def restore_graph(
    model: nn.Module, record: Mapping[str, Any] | None, *, retie: bool = False
) -> AliasGraph:
    """The aliases to restore: recorded ones, the model's own and its config's claims.

    A recorded alias between two independent Parameters of ``model`` that neither
    the model nor its config ties would change the architecture because a file says
    so: refused unless ``retie`` (the caller asks the checkpoint to re-point them).

    Raises:
        CheckpointError UNDECLARED_TIE: the checkpoint ties two names the config
            unties, or two independent Parameters nothing declares tied (without
            ``retie``).
        CheckpointError MALFORMED_CHECKPOINT: the recorded alias groups overlap.
    """
    saved = AliasGraph.from_aliases(record.get("aliases", {})) if record else AliasGraph(groups=())
    claims = hf_claims(model)
    names = dict(model.named_parameters(remove_duplicate=False))
    for alias, canonical in saved.aliases().items():
        a, c = names.get(alias), names.get(canonical)
        undeclared = claims.get((alias, canonical)) is None
        if not retie and undeclared and a is not None and c is not None and a is not c:
            raise CheckpointError(
                "UNDECLARED_TIE",
                f"the checkpoint ties {alias!r} to {canonical!r} but in the model they are two "
                "independent Parameters and nothing in it declares the tie: loading would "
                "change the architecture because the file says so",
                value=(alias, canonical),
                fix="tie them in the model before loading, or pass retie=True to let the "
                "checkpoint's alias map re-point them",
            )
        if claims.get((alias, canonical)) is False:
            raise CheckpointError(
                "UNDECLARED_TIE",
                f"the checkpoint ties {alias!r} to {canonical!r} but the model's config unties "
                "them: restoring the alias would change the architecture silently",
                value=(alias, canonical),
                fix="set config.tie_word_embeddings=True and rebuild the model, or load into a "
                "tied model and convert with tokembed.checkpoint.untie",
            )
    claimed = AliasGraph.from_aliases({a: c for (a, c), tied in claims.items() if tied})
    return saved.merged(alias_graph(model)).merged(claimed)


def check_tokenizer(record: Mapping[str, Any] | None, tokenizer: Any) -> None:
    """Refuse a checkpoint whose rows belong to another tokenizer than ``tokenizer``.

    ``tokenizer``: a tokenizer, its address hash, or None (no check).

    Raises:
        EmbeddingError ADDRESS_HASH_MISMATCH: the recorded hash differs (or is absent).
    """
    expected, found = address_hash_of(tokenizer), (record or {}).get("address_hash")
    if expected is not None and found != expected:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"the checkpoint's rows belong to tokenizer {found!r}, the one in use is {expected!r}",
            value=found,
            fix="load with the tokenizer the checkpoint was trained with, or migrate the "
            "vocabulary explicitly",
        )


def check_source(
    key: str,
    saved: tuple[tuple[int, ...], torch.dtype],
    target: tuple[tuple[int, ...], torch.dtype],
) -> None:
    """Refuse saved ``key`` (shape, dtype) for a target of another shape or a lossy cast.

    Raises:
        EmbeddingError SHAPE_MISMATCH: the saved global shape is not the target's.
        EmbeddingError UNSAFE_CAST: the target dtype would lose information.
    """
    (shape, dtype), (want, into) = saved, target
    if shape != want:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"{key!r} is saved as {list(shape)}, the model has {list(want)}",
            value=(key, shape),
            fix="load into the architecture the checkpoint was saved from; use growth for a "
            "larger vocabulary",
        )
    if not is_safe_cast(dtype, into):
        raise EmbeddingError(
            "UNSAFE_CAST",
            f"{key!r} is saved as {dtype}; the model's {into} would lose information",
            value=(key, str(dtype), str(into)),
            fix=f"build the model in {dtype} (or wider), or convert explicitly and record it",
        )
