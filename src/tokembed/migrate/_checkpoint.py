"""Reading a model for migration and writing the migrated folder (private, replaceable).

The migration command reads a ``transformers`` model (a folder, or a ``.gguf``
file read through the ``gguf`` package) and writes the migrated one through
:func:`tokembed.checkpoint.save_checkpoint` plus ``config.json``: each tied table
is stored once with the alias map and the tokenizer address hash the rows belong
to, so :func:`~tokembed.checkpoint.load_checkpoint` (and transformers'
``from_pretrained``) re-tie it and a foreign tokenizer is refused.

The whole output folder is written into a temporary sibling and renamed into
place: a reader sees no folder or a complete one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tokembed.errors import UsageError
from tokembed.files.atomic import check_output, write_bytes_atomic

__all__: list[str] = []

_HASH_KEY = "tokembed.address_hash"


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

    from tokembed.checkpoint.format import read_metadata

    for file in sorted(path.glob("*.safetensors")) if path.is_dir() else ():
        ours = read_metadata(file)  # written by save_checkpoint
        found = ours.get("address_hash") if ours else None
        if not found:  # a file written before migrations went through save_checkpoint
            with safe_open(str(file), framework="pt") as f:
                found = (f.metadata() or {}).get(_HASH_KEY)
        if found:
            return str(found)
    return None


def _write_folder(
    out: Path,
    model: nn.Module,
    *,
    address_hash: str,
    extra: Mapping[str, bytes],
    inputs: Iterable[str | Path],
) -> list[Path]:
    """Write model.safetensors, config.json and ``extra`` files into a new folder ``out``."""
    from tokembed.checkpoint import save_checkpoint

    target = check_output(out, inputs=inputs)
    if target.exists():
        raise UsageError(
            "OUTPUT_EXISTS",
            f"refusing to write {out}: it exists",
            value=str(out),
            fix="choose a new output folder",
        )
    files: dict[str, bytes] = {}
    config: Any = getattr(model, "config", None)
    if config is not None:
        files["config.json"] = config.to_json_string().encode()
    files.update(extra)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        save_checkpoint(model, tmp / "model.safetensors", tokenizer=address_hash)
        for name, data in files.items():
            write_bytes_atomic(tmp / name, data)
        os.chmod(tmp, 0o755)
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [target / "model.safetensors", *(target / name for name in files)]
