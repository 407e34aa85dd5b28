"""Reading a safetensors file's header, and the tokembed record it may carry (torch-free).

A safetensors file is an 8-byte little-endian header length, a JSON header
(``{name: {"dtype", "shape", "data_offsets"}}`` plus an optional string map
``__metadata__``), then the tensors' bytes. Everything a reader needs to decide
whether to trust a file is in that header, so it is read here with the standard
library alone: no tensor byte is touched and neither torch nor safetensors is
imported. Every reader of the project (checkpoints, migration, admission
checks) reads headers through :func:`read_safetensors_header`, so a file is
refused with the same code whoever reads it.

A file written by :func:`tokembed.checkpoint.save_checkpoint` carries a JSON
object under the metadata key :data:`CHECKPOINT_META_KEY` (version
:data:`CHECKPOINT_VERSION`): the alias map, each tensor's shape, dtype and
optional digest, the tokenizer's address hash, the shard layout and the
optimizer's description (:mod:`tokembed.checkpoint.format` describes the fields).

Example::

    >>> header = read_safetensors_header("model.safetensors")  # doctest: +SKIP
    >>> checkpoint_metadata(header, "model.safetensors") is None  # a foreign file  # doctest: +SKIP
    True
    >>> dtype_name("BF16")
    'bfloat16'
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokembed.errors import CheckpointError, UsageError

__all__ = [
    "CHECKPOINT_META_KEY",
    "CHECKPOINT_VERSION",
    "DTYPE_CODES",
    "checkpoint_metadata",
    "dtype_name",
    "malformed_checkpoint",
    "read_checkpoint_metadata",
    "read_safetensors_header",
]

CHECKPOINT_META_KEY = "tokembed.checkpoint"
CHECKPOINT_VERSION = 1

# torch dtype name (``str(dtype)`` without "torch.") -> safetensors dtype code. Keyed by
# name, not by torch.dtype, so that reading a header never needs torch.
DTYPE_CODES: dict[str, str] = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}
_NAMES = {code: name for name, code in DTYPE_CODES.items()}


def dtype_name(code: str) -> str:
    """The torch dtype name of a safetensors dtype code (``"F32"`` -> ``"float32"``).

    A code torch has no dtype for here is returned in lower case (``"U16"`` -> ``"u16"``),
    so a report can still name it.
    """
    return _NAMES.get(code, code.lower())


def malformed_checkpoint(
    path: str | os.PathLike[str], message: str, *, value: object = None
) -> CheckpointError:
    """The MALFORMED_CHECKPOINT error every safetensors reader raises (``message`` says why).

    ``value`` defaults to the path. Example::

        >>> malformed_checkpoint("c.safetensors", "header is not JSON").code
        'MALFORMED_CHECKPOINT'
    """
    return CheckpointError(
        "MALFORMED_CHECKPOINT",
        f"{Path(path)}: {message}",
        value=value if value is not None else str(Path(path)),
        fix="re-save the checkpoint with tokembed.checkpoint.save_checkpoint",
    )


def read_safetensors_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The safetensors JSON header of ``path`` (tensor entries and ``__metadata__``).

    Checks that the header fits in the file, is a JSON object, and that the last
    tensor's bytes end exactly where the file does.

    Example::

        >>> sorted(read_safetensors_header("model.safetensors"))  # doctest: +SKIP
        ['__metadata__', 'lm_head.weight', 'model.embed_tokens.weight']

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
            raise malformed_checkpoint(p, "shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)  # little-endian u64 header length
        if length > size - 8:
            raise malformed_checkpoint(p, f"header claims {length} bytes, file has {size}")
        try:
            header = json.loads(f.read(length))
        except ValueError:
            raise malformed_checkpoint(p, "header is not JSON") from None
    if not isinstance(header, dict):
        raise malformed_checkpoint(p, "header is not a JSON object")
    ends = [e["data_offsets"][1] for k, e in header.items() if k != "__metadata__"]
    if 8 + length + max(ends, default=0) != size:
        raise malformed_checkpoint(
            p, f"tensor data ends at {8 + length + max(ends, default=0)}, file is {size}"
        )
    return header


def checkpoint_metadata(
    header: Mapping[str, Any], path: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """The tokembed record of a header already read, or None for a foreign file.

    ``path`` only names the file in errors.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: present but not JSON of version 1.
    """
    metadata = header.get("__metadata__") or {}
    raw = metadata.get(CHECKPOINT_META_KEY)
    if raw is None:
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        raise malformed_checkpoint(path, f"{CHECKPOINT_META_KEY} metadata is not JSON") from None
    if not isinstance(meta, dict) or meta.get("version") != CHECKPOINT_VERSION:
        raise malformed_checkpoint(
            path, f"unsupported {CHECKPOINT_META_KEY} version", value=raw[:80]
        )
    return meta


def read_checkpoint_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The tokembed record of the file ``path``, or None for a foreign safetensors file.

    Example::

        >>> read_checkpoint_metadata("ckpt.safetensors")["aliases"]  # doctest: +SKIP
        {'lm_head.weight': 'embed.weight'}

    Raises:
        UsageError FILE_NOT_FOUND; CheckpointError MALFORMED_CHECKPOINT: as
            :func:`read_safetensors_header` and :func:`checkpoint_metadata`.
    """
    return checkpoint_metadata(read_safetensors_header(path), path)
