"""Model folders on disk: their tie report, and writing one whole or not at all.

**Reading.** What the config claims against what the file stores.

``from_pretrained`` re-ties by config, so a loaded model cannot show that its
weights file disagreed with its config. :func:`folder_tie_report` looks at the
folder itself: the architecture is built on the meta device (names and tie
declarations, no memory), the claims come from its config, and for each
claimed or structural pair the safetensors file is read:

* one key stored, the other absent — ``stored_once``: the file relies on the
  alias (fine when the config claims the tie; UNDECLARED_TIE when it denies it,
  since the absent role would load freshly initialized);
* both keys stored — compared bit for bit: equal values are a tie stored twice,
  different values under a claimed tie are DIVERGENT_ALIAS_VALUES;
* a tokembed checkpoint's recorded alias map counts as stored once.

**Writing.** :func:`save_model_folder` writes ``model.safetensors`` through
:func:`~tokembed.checkpoint.save_checkpoint` (each tied table stored once with the
alias map and the tokenizer address hash the rows belong to, so
:func:`~tokembed.checkpoint.load_checkpoint` and transformers' ``from_pretrained``
re-tie it and a foreign tokenizer is refused), the model's ``config.json`` and any
extra files. The folder is written into a temporary sibling and renamed into
place: a reader sees no folder or a complete one.

Example::

    >>> print(folder_tie_report("models/smollm2").format())
    model.embed_tokens.weight <-> lm_head.weight: stored_once, claimed tied ...: ok — ...
    >>> save_model_folder(Path("migrated"), model, address_hash=tok.address_hash,
    ...                   extra={}, inputs=[])  # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokembed.artifacts.models import instantiate_from_config
from tokembed.artifacts.safetensors_header import read_checkpoint_metadata
from tokembed.checkpoint._hf import find_weights, hf_claims
from tokembed.checkpoint.alias import alias_graph
from tokembed.checkpoint.checkpoint import save_checkpoint
from tokembed.checkpoint.ties import TieKind, TiePair, TieReport
from tokembed.files.atomic import (
    check_new_folder,
    new_temp_folder,
    publish_folder,
    write_bytes_atomic,
)

__all__ = ["folder_tie_report", "save_model_folder"]


def folder_tie_report(folder: str | os.PathLike[str]) -> TieReport:
    """Check a transformers model folder's weights file against its config's tie claims.

    Raises:
        UsageError FILE_NOT_FOUND: no ``config.json`` or no single safetensors file.
        UsageError INVALID_ARGUMENT: transformers does not know the architecture.
    """
    from safetensors import safe_open

    model = instantiate_from_config(folder)
    weights = find_weights(folder)
    recorded = (read_checkpoint_metadata(weights) or {}).get("aliases", {})
    pairs: dict[frozenset[str], tuple[str, str, bool | None, str]] = {}
    for (alias, source), hf_tied in hf_claims(model).items():
        pairs[frozenset((alias, source))] = (source, alias, hf_tied, "config.tie_word_embeddings")
    for group in alias_graph(model).groups:
        for alias in group[1:]:
            pairs.setdefault(frozenset((group[0], alias)), (group[0], alias, None, "architecture"))
    result = []
    with safe_open(str(weights), "pt", device="cpu") as f:
        keys = set(f.keys())
        for left, right, claimed, source in pairs.values():
            result.append(_pair(f, keys, recorded, left, right, claimed, source))
    return TieReport(pairs=tuple(result))


def _pair(
    f: object,
    keys: set[str],
    recorded: dict[str, str],
    left: str,
    right: str,
    claimed: bool | None,
    source: str,
) -> TiePair:
    get = f.get_tensor  # type: ignore[attr-defined]
    stored = [n for n in (left, right) if n in keys]
    shapes = [tuple(get(n).shape) if n in keys else () for n in (left, right)]
    kind: TieKind = "stored_once"
    code: str | None = None
    equal: bool | None = None
    if len(stored) == 2:
        a, b = get(left), get(right)
        equal = a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
        kind = "equal_values" if equal else "distinct"
        detail = "both keys stored, equal values" if equal else "both keys stored, values differ"
        if claimed and not equal:
            code = "DIVERGENT_ALIAS_VALUES"
    elif len(stored) == 1:
        shapes = [shapes[0] or shapes[1]] * 2
        via = "recorded alias map" if recorded.get(right) == left else "one key"
        detail = f"stored once ({stored[0]}, {via})"
        if claimed is False:
            code = "UNDECLARED_TIE"
            detail += ": the config unties the pair, so the absent role would load fresh values"
    else:
        kind, detail = "distinct", "neither key is stored"
    return TiePair(
        left=left,
        right=right,
        kind=kind,
        left_shape=shapes[0],
        right_shape=shapes[1],
        same_object=len(stored) == 1,
        same_storage=len(stored) == 1,
        equal_values=equal,
        claimed=claimed,
        claim_source=source,
        code=code,
        detail=detail,
    )


def save_model_folder(
    out: str | os.PathLike[str],
    model: nn.Module,
    *,
    address_hash: str,
    extra: Mapping[str, bytes],
    inputs: Iterable[str | Path],
) -> list[Path]:
    """Write model.safetensors, config.json and ``extra`` files into a new folder ``out``.

    ``extra`` maps file names to their bytes (a tokenizer, a manifest, a report);
    ``inputs`` are the paths the caller read, which ``out`` must not be. Returns
    the written files, ``model.safetensors`` first.

    Raises:
        UsageError OUTPUT_EXISTS: ``out`` exists or is one of ``inputs``.
        UsageError: the other codes of :func:`tokembed.files.atomic.write_files_atomic`.
        CheckpointError: as :func:`~tokembed.checkpoint.save_checkpoint`.
    """
    target = check_new_folder(Path(out), inputs=inputs)
    files: dict[str, bytes] = {}
    config: Any = getattr(model, "config", None)
    if config is not None:
        files["config.json"] = config.to_json_string().encode()
    files.update(extra)
    tmp = new_temp_folder(target)
    try:
        save_checkpoint(model, tmp / "model.safetensors", tokenizer=address_hash)
        for name, data in files.items():
            write_bytes_atomic(tmp / name, data)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish_folder(tmp, target)
    return [target / "model.safetensors", *(target / name for name in files)]
