"""Reading a model for migration and writing the migrated folder (private, replaceable).

The project's checkpoint package will own model files; until it lands, the
migration command reads a ``transformers`` model (a folder, or a ``.gguf`` file
read through the ``gguf`` package) and writes the migrated one as one
safetensors file plus ``config.json``. The safetensors file holds each tied
table once (safetensors refuses shared storage) and records in its metadata the
tokenizer address hash the rows belong to and the alias map, so a loader can
re-tie by name and refuse a foreign tokenizer.

The whole output folder is written into a temporary sibling and renamed into
place: a reader sees no folder or a complete one.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokembed._atomic import check_output, write_bytes_atomic
from tokembed.errors import UsageError

__all__: list[str] = []

_HASH_KEY = "tokembed.address_hash"
_ALIAS_KEY = "tokembed.aliases"


def _load_model(path: Path) -> nn.Module:
    """A ``transformers`` causal LM from a folder or a ``.gguf`` file, in its stored dtype."""
    from transformers import AutoModelForCausalLM

    if not path.exists():
        raise UsageError(
            "FILE_NOT_FOUND",
            f"model {path} does not exist",
            value=str(path),
            fix="pass a transformers model folder or a .gguf file",
        )
    if path.suffix == ".gguf":
        model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
    return model.eval()


def _model_hash(path: Path) -> str | None:
    """The tokenizer address hash recorded in a folder's safetensors metadata, if any."""
    from safetensors import safe_open

    for file in sorted(path.glob("*.safetensors")) if path.is_dir() else ():
        with safe_open(str(file), framework="pt") as f:
            found = (f.metadata() or {}).get(_HASH_KEY)
        if found:
            return found
    return None


def _canonical(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """State dict with each shared tensor once, and the alias -> canonical name map."""
    tensors: dict[str, torch.Tensor] = {}
    aliases: dict[str, str] = {}
    first: dict[int, str] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in first:
            aliases[name] = first[id(t)]
            continue
        first[id(t)] = name
        tensors[name] = t.detach().contiguous()
    return tensors, aliases


def _write_folder(
    out: Path,
    model: nn.Module,
    *,
    address_hash: str,
    extra: Mapping[str, bytes],
    inputs: Iterable[str | Path],
) -> list[Path]:
    """Write model.safetensors, config.json and ``extra`` files into a new folder ``out``."""
    from safetensors.torch import save

    target = check_output(out, inputs=inputs)
    if target.exists():
        raise UsageError(
            "OUTPUT_EXISTS",
            f"refusing to write {out}: it exists",
            value=str(out),
            fix="choose a new output folder",
        )
    tensors, aliases = _canonical(model)
    meta = {
        "format": "pt",
        _HASH_KEY: address_hash,
        _ALIAS_KEY: json.dumps(aliases, sort_keys=True),
    }
    files: dict[str, bytes] = {"model.safetensors": save(tensors, metadata=meta)}
    config: Any = getattr(model, "config", None)
    if config is not None:
        files["config.json"] = config.to_json_string().encode()
    files.update(extra)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            write_bytes_atomic(tmp / name, data)
        os.chmod(tmp, 0o755)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [target / name for name in files]
