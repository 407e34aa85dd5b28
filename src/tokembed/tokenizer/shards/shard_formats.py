"""The files of one shard in the two formats training code reads: Megatron-Core's and a flat ``.bin``.

Both keep the ids of a shard's documents one after another in ``NAME.bin`` (little-endian,
the shard's dtype, each document followed by its end-of-text id when the run appends one).
What says where documents end differs:

* ``"megatron"``: ``NAME.idx``, Megatron-Core's index (``MMIDIDX``, version 1): the dtype
  code, one sequence per document (int32 lengths, int64 byte pointers) and the document
  indices ``0..n``. ``megatron.core.datasets.indexed_dataset.IndexedDataset("NAME")``
  reads the pair; its dtype is ``uint16`` or ``int32``.
* ``"bin"``: nanoGPT's format, where training code memory-maps ``NAME.bin`` alone
  (``np.memmap(path, dtype=np.uint16)``), so shards concatenated with ``cat`` are one
  stream; ``NAME.json`` beside it records dtype, counts and the tokenizer's address hash,
  and ``NAME.ends.npy`` the int64 end offset of each document.

:func:`index_files` makes a shard's index files from its document lengths;
:func:`read_document_ends` reads them back and checks them against the ids file.

Example::

    >>> files = index_files("shard-00000", "megatron", dtype="uint16",
    ...                     lengths=np.array([3, 2]), address_hash="sha256:" + "0" * 64)
    >>> [name for name, _ in files]
    ['shard-00000.idx']
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from tokembed.errors import FormatError

__all__ = [
    "DTYPES",
    "MAX_MEGATRON_DOCUMENT_TOKENS",
    "document_too_long",
    "ids_file",
    "index_files",
    "malformed_shards",
    "read_document_ends",
    "shard_files",
]

# Megatron's DType codes (indexed_dataset.DType) for the id types a shard uses.
_MEGATRON_CODES = {"uint16": 8, "int32": 4}
DTYPES = ("uint16", "uint32", "int32")
_HEADER = b"MMIDIDX\x00\x00"
_PREFIX = struct.Struct("<9sQBQQ")  # header, version, dtype code, sequences, documents
# Megatron's index counts a sequence's tokens in an int32.
MAX_MEGATRON_DOCUMENT_TOKENS = (1 << 31) - 1
_SIDECAR = "tokembed-flat-bin"


def ids_file(name: str) -> str:
    """The file of a shard's ids."""
    return f"{name}.bin"


def shard_files(name: str, format: str) -> tuple[str, ...]:
    """Every file of the shard ``name`` in ``format``, the ids file first."""
    if format == "megatron":
        return (ids_file(name), f"{name}.idx")
    return (ids_file(name), f"{name}.json", f"{name}.ends.npy")


def _megatron_index(dtype: str, lengths: np.ndarray[Any, Any]) -> bytes:
    n = len(lengths)
    itemsize = np.dtype(dtype).itemsize
    pointers = np.zeros(n, dtype="<i8")
    if n:
        np.cumsum(lengths[:-1] * itemsize, out=pointers[1:])
    out = io.BytesIO()
    out.write(_PREFIX.pack(_HEADER, 1, _MEGATRON_CODES[dtype], n, n + 1))
    out.write(np.asarray(lengths, dtype="<i4").tobytes())
    out.write(pointers.tobytes())
    out.write(np.arange(n + 1, dtype="<i8").tobytes())
    return out.getvalue()


def index_files(
    name: str,
    format: str,
    *,
    dtype: str,
    lengths: np.ndarray[Any, Any],
    address_hash: str,
    eot_id: int | None = None,
) -> list[tuple[str, bytes]]:
    """The index files of a shard whose documents have ``lengths`` tokens, as (name, bytes).

    Raises:
        FormatError(DOCUMENT_TOO_LONG): a Megatron document of more than 2**31 - 1 tokens.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if format == "megatron":
        if len(lengths) and int(lengths.max()) > MAX_MEGATRON_DOCUMENT_TOKENS:
            raise document_too_long(int(lengths.max()), MAX_MEGATRON_DOCUMENT_TOKENS)
        return [(f"{name}.idx", _megatron_index(dtype, lengths))]
    ends = np.cumsum(lengths, dtype="<i8")
    buffer = io.BytesIO()
    np.save(buffer, ends, allow_pickle=False)
    sidecar = {
        "format": _SIDECAR,
        "version": 1,
        "ids": ids_file(name),
        "dtype": dtype,
        "tokens": int(ends[-1]) if len(ends) else 0,
        "documents": len(ends),
        "address_hash": address_hash,
        "eot_id": eot_id,
        "document_ends": f"{name}.ends.npy",
    }
    text = json.dumps(sidecar, indent=2) + "\n"
    return [(f"{name}.json", text.encode()), (f"{name}.ends.npy", buffer.getvalue())]


def document_too_long(tokens: int, limit: int) -> FormatError:
    """The DOCUMENT_TOO_LONG error for a document of ``tokens`` tokens where an index counts at most ``limit``."""
    return FormatError(
        "DOCUMENT_TOO_LONG",
        f"a document has {tokens:,} tokens; Megatron's index counts at most {limit:,} per document",
        value=tokens,
        fix="cut the corpus into smaller documents (--doc line or blank-line), or use --format bin",
    )


def malformed_shards(path: Path, why: str) -> FormatError:
    """The MALFORMED_SHARDS error for the shard folder's file ``path``, saying ``why``."""
    return FormatError(
        "MALFORMED_SHARDS",
        f"{path}: {why}",
        value=str(path),
        fix="re-create the shards (tokembed tokenize ... --overwrite)",
    )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise malformed_shards(path, f"cannot be read ({exc.strerror or exc})") from None


def _megatron_ends(path: Path, dtype: str) -> np.ndarray[Any, Any]:
    data = _read(path)
    if len(data) < _PREFIX.size:
        raise malformed_shards(path, "too short for a Megatron index")
    header, version, code, n, docs = _PREFIX.unpack_from(data)
    if header != _HEADER or version != 1:
        raise malformed_shards(path, "not a Megatron index (MMIDIDX, version 1)")
    if code != _MEGATRON_CODES.get(dtype):
        raise malformed_shards(path, f"dtype code {code} is not the manifest's {dtype}")
    if docs != n + 1 or len(data) != _PREFIX.size + n * 4 + n * 8 + docs * 8:
        raise malformed_shards(
            path, "its counts disagree with its size, or with one sequence per document"
        )
    at = _PREFIX.size
    lengths = np.frombuffer(data, dtype="<i4", count=n, offset=at).astype(np.int64)
    pointers = np.frombuffer(data, dtype="<i8", count=n, offset=at + 4 * n)
    documents = np.frombuffer(data, dtype="<i8", count=docs, offset=at + 12 * n)
    itemsize = np.dtype(dtype).itemsize
    ends = np.cumsum(lengths)
    starts = np.concatenate([[0], ends[:-1]]) if n else ends
    if (lengths < 0).any() or not np.array_equal(pointers, starts * itemsize):
        raise malformed_shards(path, "sequence lengths and pointers disagree")
    if not np.array_equal(documents, np.arange(docs)):
        raise malformed_shards(path, "document indices are not one sequence per document")
    return ends


def _flat_ends(folder: Path, name: str, dtype: str) -> np.ndarray[Any, Any]:
    path = folder / f"{name}.json"
    try:
        sidecar = json.loads(_read(path))
    except (ValueError, RecursionError):
        raise malformed_shards(path, "not JSON") from None
    if not isinstance(sidecar, dict) or sidecar.get("format") != _SIDECAR:
        raise malformed_shards(path, f"not a {_SIDECAR} sidecar")
    if sidecar.get("dtype") != dtype:
        raise malformed_shards(
            path, f"dtype {sidecar.get('dtype')!r} is not the manifest's {dtype}"
        )
    ends_path = folder / f"{name}.ends.npy"
    try:
        ends = np.load(io.BytesIO(_read(ends_path)), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise malformed_shards(ends_path, f"not a NumPy array file ({exc})") from None
    if ends.dtype != np.dtype("<i8") or ends.ndim != 1:
        raise malformed_shards(ends_path, "not a 1-D int64 array")
    if len(ends) and (ends[0] < 0 or (np.diff(ends) < 0).any()):
        raise malformed_shards(ends_path, "document ends go backwards")
    tokens = int(ends[-1]) if len(ends) else 0
    if sidecar.get("tokens") != tokens or sidecar.get("documents") != len(ends):
        raise malformed_shards(path, "its counts disagree with the document ends")
    return ends.astype(np.int64)


def read_document_ends(folder: Path, name: str, format: str, dtype: str) -> np.ndarray[Any, Any]:
    """The end offset (in tokens) of each document of a shard, checked against its ids file.

    Raises:
        FormatError(MALFORMED_SHARDS): an index file is missing, malformed, of another
            dtype, or the ids file's size is not the tokens it counts.
    """
    folder = Path(folder)
    if dtype not in DTYPES:
        raise malformed_shards(folder / name, f"unknown dtype {dtype!r}")
    if format == "megatron":
        ends = _megatron_ends(folder / f"{name}.idx", dtype)
    else:
        ends = _flat_ends(folder, name, dtype)
    tokens = int(ends[-1]) if len(ends) else 0
    ids = folder / ids_file(name)
    try:
        size = ids.stat().st_size
    except OSError:
        raise malformed_shards(ids, "the ids file is missing") from None
    if size != tokens * np.dtype(dtype).itemsize:
        raise malformed_shards(ids, f"{size:,} bytes, but the index counts {tokens:,} {dtype} ids")
    return ends
