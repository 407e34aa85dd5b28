"""Distributed checkpoint folders on disk: their metadata and the tokembed record, checked first.

A ``torch.distributed.checkpoint`` (DCP) folder holds ``.metadata`` (a pickle of
torch's ``Metadata``: each tensor's global shape, dtype and chunks, and for each
chunk the data file, offset and length of its bytes) and the data files
``__<rank>_<n>.distcp``. A folder tokembed writes also holds ``tokembed.json``
(:data:`RECORD_NAME`): the same record a single-file checkpoint carries in its
header (alias map, tensors with shape and dtype, the tokenizer's address hash,
the optimizer's description) plus the SHA-256 of the ``.metadata`` it belongs to
and the layout the tables had when they were saved.

Everything a loader needs to decide whether to trust a folder is read here before
any tensor byte: :func:`read_dcp_metadata` unpickles ``.metadata`` with an
allow-list of the classes DCP's metadata is made of (a damaged or foreign pickle
is refused, never run), checks that every chunk lies inside its tensor and that
every data file it names exists and holds the recorded bytes;
:func:`read_dcp_record` reads the record and checks that it belongs to this
``.metadata`` and names exactly the stored tensors. torch is imported when these
are called, not with this module.

Example::

    >>> meta = read_dcp_metadata("run/step-100")  # doctest: +SKIP
    >>> read_dcp_record("run/step-100", metadata=meta)["aliases"]  # doctest: +SKIP
    {'head.weight': 'emb.weight'}

Raises UsageError FILE_NOT_FOUND; CheckpointError MALFORMED_CHECKPOINT (a damaged
or foreign ``.metadata`` or record) and CHECKPOINT_SHARD_MISSING (a data file
absent or shorter than its recorded bytes).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from pathlib import Path
from typing import Any

from tokembed.artifacts.safetensors_header import CHECKPOINT_META_KEY, CHECKPOINT_VERSION
from tokembed.errors import CheckpointError, UsageError

__all__ = [
    "METADATA_NAME",
    "RECORD_NAME",
    "is_dcp_folder",
    "metadata_digest",
    "read_dcp_metadata",
    "read_dcp_record",
]

METADATA_NAME = ".metadata"
RECORD_NAME = "tokembed.json"

# What DCP's metadata pickle is made of (torch 2.13): its own dataclasses, the file
# layout of FileSystemWriter, torch's Size/dtype/layout and the checkpoint path.
_ALLOWED_MODULES = {"torch.distributed.checkpoint.metadata"}
_ALLOWED = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch._utils", "_get_layout"),
    ("torch.serialization", "_get_layout"),
    ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib", "PureWindowsPath"),
    ("pathlib", "Path"),
}


def _malformed(folder: Path, message: str) -> CheckpointError:
    return CheckpointError(
        "MALFORMED_CHECKPOINT",
        f"{folder}: {message}",
        value=str(folder),
        fix="re-save the checkpoint with tokembed.checkpoint.save_checkpoint",
    )


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickle only the classes DCP metadata consists of; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module in _ALLOWED_MODULES or (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch":
            found = getattr(torch, name, None)
            if found is torch.Size or isinstance(
                found, torch.dtype | torch.layout | torch.memory_format
            ):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a checkpoint's metadata")


def is_dcp_folder(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder holding a DCP ``.metadata`` file."""
    return Path(path).is_dir() and (Path(path) / METADATA_NAME).is_file()


def metadata_digest(folder: str | os.PathLike[str]) -> str:
    """``"sha256:<hex>"`` of the folder's ``.metadata`` bytes (what the record is bound to)."""
    data = (Path(folder) / METADATA_NAME).read_bytes()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _load_metadata(folder: Path) -> Any:
    if not folder.exists():
        raise UsageError("FILE_NOT_FOUND", f"no such checkpoint: {folder}", value=str(folder))
    path = folder / METADATA_NAME
    if not path.is_file():
        raise _malformed(folder, f"no {METADATA_NAME}: not a distributed checkpoint folder")
    from torch.distributed.checkpoint.metadata import Metadata

    try:
        meta = _MetadataUnpickler(io.BytesIO(path.read_bytes())).load()
    except Exception as error:  # a damaged pickle raises anything a constructor may raise
        raise _malformed(
            folder, f"{METADATA_NAME} is damaged ({type(error).__name__}: {str(error)[:200]})"
        ) from None
    # a damaged pickle may restore a Metadata without the field (its state is a plain dict)
    if not isinstance(meta, Metadata) or not isinstance(
        getattr(meta, "state_dict_metadata", None), dict
    ):
        raise _malformed(folder, f"{METADATA_NAME} does not hold DCP metadata")
    return meta


def _check_chunks(folder: Path, meta: Any) -> list[Any]:
    """Every chunk inside its tensor; returns the MetadataIndex of every stored chunk."""
    from torch.distributed.checkpoint.metadata import MetadataIndex, TensorStorageMetadata

    indices = []
    for name, entry in meta.state_dict_metadata.items():
        if not isinstance(entry, TensorStorageMetadata):
            indices.append(MetadataIndex(name))
            continue
        size = tuple(entry.size)
        for chunk in entry.chunks:
            ends = [o + s for o, s in zip(chunk.offsets, chunk.sizes, strict=False)]
            if len(chunk.offsets) != len(size) or any(
                o < 0 or e > n for o, e, n in zip(chunk.offsets, ends, size, strict=True)
            ):
                raise _malformed(
                    folder, f"{name!r}: chunk at {list(chunk.offsets)} lies outside {list(size)}"
                )
            indices.append(MetadataIndex(name, chunk.offsets))
    return indices


def _check_files(folder: Path, meta: Any, indices: list[Any]) -> None:
    storage = meta.storage_data
    if not isinstance(storage, dict):
        raise _malformed(folder, f"{METADATA_NAME} names no data files")
    sizes: dict[str, int | None] = {}
    ends: dict[str, int] = {}
    for index in indices:
        info = storage.get(index)
        if info is None:
            raise _malformed(folder, f"{index.fqn!r} has a chunk with no data file")
        name = str(getattr(info, "relative_path", ""))
        if not name or Path(name).name != name or name in (".", ".."):
            raise _malformed(folder, f"data file name {name!r} leaves the checkpoint folder")
        if name not in sizes:
            path = folder / name
            sizes[name] = path.stat().st_size if path.is_file() else None
        have, need = sizes[name], int(info.offset) + int(info.length)
        ends[name] = max(ends.get(name, 0), need)
        if have is None or have < need:
            raise CheckpointError(
                "CHECKPOINT_SHARD_MISSING",
                f"{folder}: data file {name} "
                + ("is missing" if have is None else f"holds {have} bytes, {need} are recorded")
                + f" (it holds {index.fqn!r}); nothing was loaded",
                value=name,
                fix="copy every data file of the checkpoint folder (one per saving rank), "
                "or load an intact checkpoint",
            )
    for name, end in ends.items():
        # DCP writes each data file as its items back to back: a longer file is another save's.
        if sizes[name] != end:
            raise _malformed(
                folder,
                f"data file {name} holds {sizes[name]} bytes, {end} are recorded "
                "(a file of another save)",
            )


def read_dcp_metadata(folder: str | os.PathLike[str]) -> Any:
    """The checked ``Metadata`` of a DCP folder (``torch.distributed.checkpoint.Metadata``).

    Example::

        >>> sorted(read_dcp_metadata("ckpt").state_dict_metadata)  # doctest: +SKIP
        ['emb.weight', 'optimizer/emb.weight/exp_avg', ...]

    Raises:
        UsageError FILE_NOT_FOUND: no such folder.
        CheckpointError MALFORMED_CHECKPOINT: no ``.metadata``, a damaged one, one that
            holds other objects than DCP's metadata, a chunk outside its tensor, a
            chunk without a data file, a data file name outside the folder, or a data
            file longer than its recorded chunks (one of another save).
        CheckpointError CHECKPOINT_SHARD_MISSING: a data file is absent or truncated.
    """
    root = Path(folder)
    meta = _load_metadata(root)
    try:
        _check_files(root, meta, _check_chunks(root, meta))
    except (CheckpointError, UsageError):
        raise
    except Exception as error:  # fields of the wrong type inside an unpickled Metadata
        raise _malformed(
            root, f"{METADATA_NAME} is damaged ({type(error).__name__}: {str(error)[:200]})"
        ) from None
    return meta


def _check_record(folder: Path, record: Any) -> dict[str, Any]:
    if not isinstance(record, dict) or record.get("version") != CHECKPOINT_VERSION:
        raise _malformed(folder, f"{RECORD_NAME} is not a version {CHECKPOINT_VERSION} record")
    aliases, tensors = record.get("aliases", {}), record.get("tensors")
    types_ok = (
        record.get("format") == CHECKPOINT_META_KEY
        and isinstance(aliases, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in aliases.items())
        and isinstance(tensors, dict)
        and all(
            isinstance(e, dict)
            and isinstance(e.get("shape"), list)
            and isinstance(e.get("dtype"), str)
            for e in tensors.values()
        )
        and isinstance(record.get("address_hash"), str | None)
        and isinstance(record.get("optimizer"), dict | None)
        and isinstance(record.get("layout", {}), dict)
        and isinstance(record.get("metadata_sha256"), str)
    )
    if not types_ok:
        raise _malformed(folder, f"{RECORD_NAME} has fields of the wrong type")
    return record


def read_dcp_record(
    folder: str | os.PathLike[str], *, metadata: Any = None
) -> dict[str, Any] | None:
    """The tokembed record of a DCP folder, or None for a folder written by plain DCP.

    ``metadata`` is the folder's :func:`read_dcp_metadata` (read when not given).

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: a record that is not JSON of version 1,
            has fields of the wrong type, was written for another ``.metadata`` (the
            folder mixes two saves), or lists other tensors, shapes or dtypes than
            ``.metadata`` holds.
        As :func:`read_dcp_metadata` when ``metadata`` is not given.
    """
    root = Path(folder)
    meta = read_dcp_metadata(root) if metadata is None else metadata
    path = root / RECORD_NAME
    if not path.is_file():
        return None
    try:
        record = _check_record(root, json.loads(path.read_bytes().decode("utf-8")))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise _malformed(root, f"{RECORD_NAME} is not JSON") from None
    if record["metadata_sha256"] != metadata_digest(root):
        raise _malformed(
            root,
            f"{METADATA_NAME} is not the one {RECORD_NAME} was written with (changed or "
            "replaced by another save)",
        )
    stored = {}
    for name, entry in meta.state_dict_metadata.items():
        size = getattr(entry, "size", None)
        dtype = getattr(getattr(entry, "properties", None), "dtype", None)
        stored[name] = None if size is None else [list(size), str(dtype).removeprefix("torch.")]
    recorded = {n: [e["shape"], e["dtype"]] for n, e in record["tensors"].items()}
    if stored != recorded:
        differ = sorted(
            n for n in stored.keys() | recorded.keys() if stored.get(n) != recorded.get(n)
        )
        raise _malformed(root, f"{RECORD_NAME} and {METADATA_NAME} disagree on {differ[:5]}")
    return record
