"""The on-disk form of a tokembed checkpoint, and checking a file against it.

A checkpoint is one safetensors file. Tensors: one per logical parameter or
buffer (an alias group is stored once, under its canonical name), plus the
optimizer's per-parameter state under ``optimizer/<name>/<key>``. Its header
metadata carries ``"format": "pt"`` (so transformers' ``from_pretrained``
accepts the file) and ``"tokembed.checkpoint"``: a JSON object with

* ``version`` (1), ``aliases`` ``{alias: canonical}``,
* ``tensors`` ``{name: {"shape", "dtype"[, "sha256"]}}`` for every stored tensor,
* ``address_hash`` of the tokenizer the rows belong to (or null),
* ``shards`` ``{table: {"num_embeddings", "start", "end", "world_size"}}`` for
  row-sharded tables (each rank saves its own file),
* ``optimizer``: class, param groups by parameter name, non-tensor state.

:func:`verify_checkpoint` reads only the header (and, when digests were
recorded, the tensors) and refuses a file whose bytes, tensors or alias map
disagree with that metadata.

Example::

    >>> verify_checkpoint("run/step-100.safetensors").tensors
    3
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokembed.checkpoint._writer import DTYPE_CODES
from tokembed.errors import CheckpointError, UsageError

__all__ = [
    "META_KEY",
    "VERSION",
    "CheckpointSummary",
    "metadata_of",
    "read_header",
    "read_metadata",
    "verify_checkpoint",
]

META_KEY = "tokembed.checkpoint"
VERSION = 1


def _malformed(path: Path, message: str, value: object = None) -> CheckpointError:
    return CheckpointError(
        "MALFORMED_CHECKPOINT",
        f"{path}: {message}",
        value=value if value is not None else str(path),
        fix="re-save the checkpoint with tokembed.checkpoint.save_checkpoint",
    )


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The safetensors JSON header of ``path`` (tensor entries and ``__metadata__``).

    Raises:
        UsageError FILE_NOT_FOUND: no such file.
        CheckpointError MALFORMED_CHECKPOINT: not a safetensors file, or truncated.
    """
    p = Path(path)
    if not p.is_file():
        raise UsageError("FILE_NOT_FOUND", f"no such checkpoint: {p}", value=str(p))
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _malformed(p, "shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)  # little-endian u64 header length
        if length > size - 8:
            raise _malformed(p, f"header claims {length} bytes, file has {size}")
        try:
            header = json.loads(f.read(length))
        except ValueError:
            raise _malformed(p, "header is not JSON") from None
    if not isinstance(header, dict):
        raise _malformed(p, "header is not a JSON object")
    ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"]
    if 8 + length + max(ends, default=0) != size:
        raise _malformed(
            p, f"tensor data ends at {8 + length + max(ends, default=0)}, file is {size}"
        )
    return header


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``tokembed.checkpoint`` metadata of ``path``, or None for a foreign safetensors file.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: present but not valid JSON of version 1.
    """
    return metadata_of(read_header(path), path)


def metadata_of(header: Mapping[str, Any], path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """:func:`read_metadata` of a header already read (``path`` names it in errors)."""
    metadata = header.get("__metadata__") or {}
    raw = metadata.get(META_KEY)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        raise _malformed(Path(path), f"{META_KEY} metadata is not JSON") from None
    if not isinstance(meta, dict) or meta.get("version") != VERSION:
        raise _malformed(Path(path), f"unsupported {META_KEY} version", value=raw[:80])
    return meta


@dataclass(frozen=True, kw_only=True)
class CheckpointSummary:
    """What a verified checkpoint holds."""

    path: str
    tensors: int
    parameters: int
    aliases: dict[str, str]
    address_hash: str | None
    optimizer: str | None
    shards: dict[str, Any]
    digests_checked: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def format(self) -> str:
        tied = ", ".join(f"{a} -> {c}" for a, c in self.aliases.items()) or "none"
        return (
            f"{self.path}: ok — {self.tensors} tensors ({self.parameters:,} parameter values), "
            f"aliases: {tied}, optimizer: {self.optimizer or 'none'}, "
            f"address hash: {self.address_hash or 'none'}, digests checked: {self.digests_checked}"
        )


def verify_checkpoint(path: str | os.PathLike[str]) -> CheckpointSummary:
    """Check a checkpoint file against its own metadata.

    Every recorded tensor exists with the recorded shape and dtype and nothing
    else is stored; alias targets are stored and aliases are not; recorded
    SHA-256 digests match the bytes.

    Raises:
        UsageError FILE_NOT_FOUND; CheckpointError MALFORMED_CHECKPOINT naming
        the first disagreement.
    """
    p = Path(path)
    header = read_header(p)
    meta = read_metadata(p)
    if meta is None:
        raise _malformed(p, f"no {META_KEY} metadata (not saved by tokembed)")
    stored = {k: v for k, v in header.items() if k != "__metadata__"}
    recorded: dict[str, Any] = meta.get("tensors", {})
    if set(stored) != set(recorded):
        extra, lost = sorted(set(stored) - set(recorded)), sorted(set(recorded) - set(stored))
        raise _malformed(p, f"tensors not in metadata {extra}, recorded but absent {lost}")
    for name, entry in recorded.items():
        found = {"shape": stored[name]["shape"], "dtype": _dtype_name(stored[name]["dtype"])}
        if [entry["shape"], entry["dtype"]] != [found["shape"], found["dtype"]]:
            raise _malformed(p, f"{name!r} is {found}, metadata says {entry}", value=name)
    aliases: dict[str, str] = meta.get("aliases", {})
    for alias, canonical in aliases.items():
        if canonical not in stored or alias in stored:
            raise _malformed(p, f"alias {alias!r} -> {canonical!r} is not one stored tensor")
    checked = _check_digests(p, recorded)
    numel = 0
    for name, entry in recorded.items():
        if not name.startswith("optimizer/"):
            n = 1
            for s in entry["shape"]:
                n *= s
            numel += n
    optimizer = meta.get("optimizer")
    return CheckpointSummary(
        path=str(p),
        tensors=len(stored),
        parameters=numel,
        aliases=aliases,
        address_hash=meta.get("address_hash"),
        optimizer=None if optimizer is None else optimizer.get("class"),
        shards=meta.get("shards", {}),
        digests_checked=checked,
    )


_DTYPES = {code: str(dtype).removeprefix("torch.") for dtype, code in DTYPE_CODES.items()}


def _dtype_name(code: str) -> str:
    return _DTYPES.get(code, code.lower())


def _check_digests(path: Path, recorded: dict[str, Any]) -> int:
    wanted = {k: e["sha256"] for k, e in recorded.items() if "sha256" in e}
    if not wanted:
        return 0
    from safetensors import safe_open

    from tokembed.embedding.materialize import tensor_sha256

    with safe_open(str(path), "pt", device="cpu") as f:
        for name, digest in wanted.items():
            if tensor_sha256(f.get_tensor(name)) != digest:
                raise _malformed(path, f"{name!r} bytes differ from their recorded SHA-256", name)
    return len(wanted)
