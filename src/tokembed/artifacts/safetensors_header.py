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
import stat
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokembed.errors import CheckpointError, UsageError
from tokembed.files.os_errors import input_error

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


# Bits per element of every dtype code the safetensors format defines (sub-byte float
# formats included): a tensor entry's byte range must hold exactly its elements.
_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip
# The safetensors library refuses headers above 100 MB; so does every reader here.
_MAX_HEADER = 100_000_000


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_entry(p: Path, name: str, entry: object) -> tuple[int, int]:
    """The (begin, end) data offsets of one tensor entry whose fields all have their types."""
    if not isinstance(entry, dict):
        raise malformed_checkpoint(p, f"tensor {name!r} is not a JSON object", value=name)
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _BITS:
        raise malformed_checkpoint(p, f"tensor {name!r} has dtype {dtype!r}", value=name)
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise malformed_checkpoint(p, f"tensor {name!r} has shape {shape!r}", value=name)
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise malformed_checkpoint(p, f"tensor {name!r} has data_offsets {offsets!r}", value=name)
    count = 1
    for d in shape:
        count *= d
    if count * _BITS[dtype] != 8 * (offsets[1] - offsets[0]):
        raise malformed_checkpoint(
            p,
            f"tensor {name!r} {shape} {dtype} needs {count * _BITS[dtype] / 8:g} bytes, "
            f"its data_offsets hold {offsets[1] - offsets[0]}",
            value=name,
        )
    return offsets[0], offsets[1]


def read_safetensors_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The safetensors JSON header of ``path`` (tensor entries and ``__metadata__``), validated.

    The one validator every reader of the project uses (checkpoints, migration,
    admission checks): a header passes only if the ``safetensors`` library would
    read every tensor of the file. It checks that the header fits in the file and
    is a JSON object; that ``__metadata__``, if present, maps strings to strings;
    that every tensor entry is an object with a known ``dtype``, a ``shape`` of
    non-negative integers and integer ``data_offsets`` holding exactly the
    shape's bytes; and that the byte ranges tile the data section: no overlap,
    no gap, ending exactly where the file does.

    Example::

        >>> sorted(read_safetensors_header("model.safetensors"))  # doctest: +SKIP
        ['__metadata__', 'lm_head.weight', 'model.embed_tokens.weight']

    Raises:
        UsageError FILE_NOT_FOUND: no such file.
        UsageError FILE_UNREADABLE: a folder, a FIFO or a device, or unreadable.
        CheckpointError MALFORMED_CHECKPOINT: not a safetensors file, truncated,
            or any of the checks above fails.
    """
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError("FILE_NOT_FOUND", f"no such checkpoint: {p}", value=str(p)) from None
    except OSError as exc:  # a folder on the way may not be searched, a name too long
        raise input_error(exc, p) from None
    if not stat.S_ISREG(mode):
        raise UsageError(
            "FILE_UNREADABLE",
            f"{p} is not a regular file (a folder, FIFO or device)",
            value=str(p),
            fix="pass the .safetensors file itself",
        )
    size = p.stat().st_size
    try:
        with open(p, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise malformed_checkpoint(p, "shorter than a safetensors header")
            (length,) = struct.unpack("<Q", head)  # little-endian u64 header length
            if length > size - 8 or length > _MAX_HEADER:
                raise malformed_checkpoint(p, f"header claims {length} bytes, file has {size}")
            raw = f.read(length)
    except OSError as exc:
        raise input_error(exc, p) from None
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser goes
        raise malformed_checkpoint(p, "header is not JSON") from None
    if not isinstance(header, dict):
        raise malformed_checkpoint(p, "header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise malformed_checkpoint(p, "__metadata__ is not a map of strings to strings")
    ranges = sorted(
        (_check_entry(p, name, entry), name)
        for name, entry in header.items()
        if name != "__metadata__"
    )
    end = 0
    for (begin, stop), name in ranges:
        if begin != end:
            why = "overlaps the tensor before it" if begin < end else "leaves a gap before it"
            raise malformed_checkpoint(
                p, f"tensor {name!r} starts at data offset {begin}, which {why}", value=name
            )
        end = stop
    if 8 + length + end != size:
        raise malformed_checkpoint(p, f"tensor data ends at {8 + length + end}, file is {size}")
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
    except RecursionError:
        raise malformed_checkpoint(
            path, f"{CHECKPOINT_META_KEY} metadata nests too deeply"
        ) from None
    if not isinstance(meta, dict) or meta.get("version") != CHECKPOINT_VERSION:
        raise malformed_checkpoint(
            path, f"unsupported {CHECKPOINT_META_KEY} version", value=raw[:80]
        )
    why = _record_problem(meta)
    if why is not None:
        raise malformed_checkpoint(path, f"{CHECKPOINT_META_KEY} metadata: {why}", value=why)
    return meta


def _str_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _record_problem(meta: dict[str, Any]) -> str | None:
    """What is of the wrong JSON type in a tokembed record (None: every field has its type).

    Readers index the record without further checks, so every field they use is checked here.
    """
    if not _str_map(meta.get("aliases", {})):
        return "aliases is not a map of names to names"
    tensors = meta.get("tensors", {})
    if not isinstance(tensors, dict):
        return "tensors is not a map"
    for name, entry in tensors.items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("shape"), list)
            or not all(_is_count(d) for d in entry["shape"])
            or not isinstance(entry.get("dtype"), str)
            or not isinstance(entry.get("sha256", ""), str)
        ):
            return f"tensor {name!r} is not {{shape, dtype[, sha256]}}"
    if not isinstance(meta.get("address_hash"), str | None):
        return "address_hash is not a string"
    shards = meta.get("shards") or {}
    if not isinstance(shards, dict) or not all(
        isinstance(e, dict) and all(_is_count(e.get(k)) for k in ("num_embeddings", "start", "end"))
        for e in shards.values()
    ):
        return "shards is not a map of row intervals"
    optimizer = meta.get("optimizer")
    if optimizer is None:
        return None
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    if (
        not isinstance(groups, list)
        or not all(
            isinstance(g, dict)
            and isinstance(g.get("params"), list)
            and all(isinstance(n, str) for n in g["params"])
            and isinstance(g.get("options"), dict)
            for g in groups
        )
        or not isinstance(optimizer.get("scalars", {}), dict)
        or not all(isinstance(v, dict) for v in optimizer.get("scalars", {}).values())
    ):
        return "optimizer is not {class, param_groups, scalars}"
    return None


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
