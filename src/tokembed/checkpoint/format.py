"""The on-disk form of a tokembed checkpoint, and checking a file against it.

A checkpoint is one safetensors file. Tensors: one per logical parameter or
buffer (an alias group is stored once, under its canonical name), plus the
optimizer's per-parameter state under ``optimizer/<name>/<key>``. Its header
metadata carries ``"format": "pt"`` (so transformers' ``from_pretrained``
accepts the file) and ``"tokembed.checkpoint"``: a JSON object with

* ``version`` (1), ``aliases`` ``{alias: canonical}``,
* ``tensors`` ``{name: {"shape", "dtype"[, "sha256"]}}`` for every stored tensor
  (``sha256``: :func:`~tokembed.artifacts.digest.tensor_digest` of its values),
* ``address_hash`` of the tokenizer the rows belong to (or null),
* ``optimizer``: class, param groups by parameter name, non-tensor state.

The header and this record are read by :mod:`tokembed.artifacts.safetensors_header`.
:func:`verify_checkpoint` reads only the header (and, when digests were
recorded, the tensors) and refuses a file whose bytes, tensors or alias map
disagree with that metadata.

Example::

    >>> verify_checkpoint("run/step-100.safetensors").tensors
    3
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokembed.artifacts.digest import tensor_digest
from tokembed.artifacts.safetensors_header import (
    CHECKPOINT_META_KEY,
    checkpoint_metadata,
    dtype_name,
    malformed_checkpoint,
    read_safetensors_header,
)

__all__ = ["CheckpointSummary", "verify_checkpoint"]


@dataclass(frozen=True, kw_only=True)
class CheckpointSummary:
    """What a verified checkpoint holds."""

    path: str
    tensors: int
    parameters: int
    aliases: dict[str, str]
    address_hash: str | None
    optimizer: str | None
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
    header = read_safetensors_header(p)
    meta = checkpoint_metadata(header, p)
    if meta is None:
        raise malformed_checkpoint(p, f"no {CHECKPOINT_META_KEY} metadata (not saved by tokembed)")
    stored = {k: v for k, v in header.items() if k != "__metadata__"}
    recorded: dict[str, Any] = meta.get("tensors", {})
    if set(stored) != set(recorded):
        extra, lost = sorted(set(stored) - set(recorded)), sorted(set(recorded) - set(stored))
        raise malformed_checkpoint(
            p, f"tensors not in metadata {extra}, recorded but absent {lost}"
        )
    for name, entry in recorded.items():
        found = {"shape": stored[name]["shape"], "dtype": dtype_name(stored[name]["dtype"])}
        if [entry["shape"], entry["dtype"]] != [found["shape"], found["dtype"]]:
            raise malformed_checkpoint(p, f"{name!r} is {found}, metadata says {entry}", value=name)
    aliases: dict[str, str] = meta.get("aliases", {})
    for alias, canonical in aliases.items():
        if canonical not in stored or alias in stored:
            raise malformed_checkpoint(
                p, f"alias {alias!r} -> {canonical!r} is not one stored tensor"
            )
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
        digests_checked=checked,
    )


def _check_digests(path: Path, recorded: dict[str, Any]) -> int:
    wanted = {k: e["sha256"] for k, e in recorded.items() if "sha256" in e}
    if not wanted:
        return 0
    from safetensors import safe_open

    with safe_open(str(path), "pt", device="cpu") as f:
        for name, digest in wanted.items():
            if tensor_digest(f.get_tensor(name)) != digest:
                raise malformed_checkpoint(
                    path, f"{name!r} bytes differ from their recorded SHA-256", value=name
                )
    return len(wanted)
