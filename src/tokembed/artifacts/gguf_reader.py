"""A GGUF header reader that stops at what an admission check needs.

``gguf.GGUFReader`` decodes every metadata value, including the tokenizer's
token and merge lists (about 100,000 strings for SmolLM2), which takes seconds;
an admission check needs the scalar fields, the length of the token list and the
tensor infos. This reader walks the same layout (little-endian: magic, version,
counts, typed key/values, tensor infos, aligned data) and keeps scalars, string
values and array *lengths*; one tensor's bytes are read on request and decoded
by the ``gguf`` package's own dequantizer, which is imported only when a file is
read (``pip install 'tokembed[gguf]'``). The tests compare it with ``GGUFReader``
and transformers' GGUF loader on a real file.

Example::

    >>> header = read_gguf_header("SmolLM2-135M-Instruct.Q4_1.gguf")  # doctest: +SKIP
    >>> header.fields["tokenizer.ggml.tokens"], header.tensors["token_embd.weight"].shape
    (49152, (49152, 576))
    >>> read_gguf_tensor(header, "token_embd.weight").dtype  # doctest: +SKIP
    torch.float32
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tokembed.errors import CheckpointError, UsageError
from tokembed.files.os_errors import input_error

if TYPE_CHECKING:
    import torch

__all__ = ["GGUFHeader", "GGUFTensor", "read_gguf_header", "read_gguf_tensor"]

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True, kw_only=True)
class GGUFTensor:
    """Where one tensor of a GGUF file is and how it is encoded (its bytes are not read)."""

    name: str
    shape: tuple[int, ...]  # torch order (GGUF lists the fastest axis first)
    type_name: str
    offset: int  # absolute byte offset in the file


@dataclass(frozen=True, kw_only=True)
class GGUFHeader:
    """A GGUF file's metadata fields and tensor infos, as :func:`read_gguf_header` read them."""

    path: Path
    fields: dict[str, Any]  # scalars and strings as values; arrays as their length
    tensors: dict[str, GGUFTensor]
    strings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # arrays asked for


def _bad(path: Path, why: str) -> CheckpointError:
    return CheckpointError(
        "MALFORMED_CHECKPOINT",
        f"{path}: not a readable GGUF file ({why})",
        value=str(path),
        fix="pass an intact .gguf file (llama.cpp format, version 2 or 3)",
    )


class _Stream:
    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        raw = self.f.read(size)
        if len(raw) != size:
            raise _bad(self.path, "truncated")
        return struct.unpack(fmt, raw)[0]

    def string(self) -> str:
        n = self.take("<Q")
        if n > self.size - self.f.tell():  # checked before reading: a damaged length is huge
            raise _bad(self.path, "a string runs past the end")
        raw = self.f.read(n)
        if len(raw) != n:
            raise _bad(self.path, "truncated string")
        return raw.decode("utf-8", errors="replace")

    def value(self, kind: int, keep: list[str] | None = None) -> Any:
        """The value of ``kind`` (an array: its length; its strings appended to ``keep``)."""
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, count = self.take("<I"), self.take("<Q")
            if inner in _SCALARS:  # fixed width: skip without decoding
                width = count * struct.calcsize(_SCALARS[inner])
                if width > self.size - self.f.tell():  # a damaged count would seek past 2**63
                    raise _bad(self.path, "an array runs past the end")
                self.f.seek(width, 1)
            elif inner == _STRING and keep is not None:
                for _ in range(count):
                    keep.append(self.string())
            else:
                for _ in range(count):
                    self.value(inner)
            return count
        raise _bad(self.path, f"unknown value type {kind}")


def _gguf_package() -> Any:
    try:
        import gguf
    except ImportError:
        raise UsageError(
            "INVALID_ARGUMENT",
            "reading a .gguf model needs the gguf package, which is not installed",
            value="gguf",
            fix="pip install 'tokembed[gguf]' (or pass a folder with config.json and safetensors)",
        ) from None
    return gguf


def _parse(
    p: Path, strings: dict[str, list[str]]
) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], str, int]], int]:
    quant_type = _gguf_package().GGMLQuantizationType

    size = p.stat().st_size
    with open(p, "rb") as f:
        s = _Stream(f, p, size)
        if f.read(4) != b"GGUF":
            raise _bad(p, "no GGUF magic")
        version = s.take("<I")
        if version not in (2, 3):
            raise _bad(p, f"version {version}")
        n_tensors, n_fields = s.take("<Q"), s.take("<Q")
        fields: dict[str, Any] = {}
        for _ in range(n_fields):
            key = s.string()
            fields[key] = s.value(
                s.take("<I"), strings.setdefault(key, []) if key in strings else None
            )
        infos = []
        for _ in range(n_tensors):
            name = s.string()
            n_dims = s.take("<I")
            if not 1 <= n_dims <= 4:  # GGML_MAX_DIMS
                raise _bad(p, f"tensor {name!r} has {n_dims} dimensions")
            dims = [s.take("<Q") for _ in range(n_dims)]
            kind, offset = s.take("<I"), s.take("<Q")
            try:
                type_name = quant_type(kind).name
            except ValueError:
                raise _bad(p, f"tensor {name!r} has unknown type {kind}") from None
            infos.append((name, tuple(reversed(dims)), type_name, offset))
        align = fields.get("general.alignment", 32)
        if not isinstance(align, int) or isinstance(align, bool) or align < 1:
            raise _bad(p, f"alignment {align!r}")
        start = -(-f.tell() // align) * align
    _check_extents(p, infos, start, size)
    return fields, infos, start


def _check_extents(
    p: Path, infos: list[tuple[str, tuple[int, ...], str, int]], start: int, size: int
) -> None:
    """Every tensor's bytes lie inside the file, one after another, none overlapping another.

    A file truncated anywhere in its data (by half, by one byte) fails here, before any
    reader trusts a tensor it lists.
    """
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    extents = []
    names: set[str] = set()
    for name, shape, type_name, offset in infos:
        if name in names:
            raise _bad(p, f"tensor {name!r} is listed twice")
        names.add(name)
        block, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType[type_name]]
        count = 1
        for d in shape:
            count *= d
        if shape and shape[-1] % block:
            raise _bad(p, f"tensor {name!r} {list(shape)} is not whole {type_name} blocks")
        extents.append((start + offset, start + offset + count // block * nbytes, name))
    end = start
    for begin, stop, name in sorted(extents):
        if begin < end:
            raise _bad(p, f"tensor {name!r} overlaps the tensor before it")
        end = stop
    if end > size:
        raise _bad(p, f"tensor data ends at byte {end}, the file has {size} (truncated)")


def read_gguf_header(path: str | Path, *, strings: tuple[str, ...] = ()) -> GGUFHeader:
    """Fields and tensor infos of a GGUF file; the string arrays named in ``strings`` in full.

    ``strings=("tokenizer.ggml.tokens",)`` also keeps the token list (in
    :attr:`GGUFHeader.strings`), which an admission check compares with a tokenizer.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: not GGUF, an unknown version or value type,
            truncated (a tensor's bytes end past the file), overlapping tensors.
        UsageError INVALID_ARGUMENT: the ``gguf`` package is not installed.
        UsageError FILE_NOT_FOUND, FILE_UNREADABLE, NAME_TOO_LONG: the OS refused the file.
    """
    p = Path(path)
    kept: dict[str, list[str]] = {key: [] for key in strings}
    try:
        fields, infos, start = _parse(p, kept)
    except RecursionError:  # arrays nested deeper than any real file
        raise _bad(p, "arrays nested too deeply") from None
    except OSError as exc:  # the OS refused the file: unreadable, a folder, a name too long
        raise input_error(exc, p) from None
    tensors = {
        n: GGUFTensor(name=n, shape=shape, type_name=t, offset=start + o)
        for n, shape, t, o in infos
    }
    found = {k: tuple(v) for k, v in kept.items() if k in fields}
    return GGUFHeader(path=p, fields=fields, tensors=tensors, strings=found)


def read_gguf_tensor(header: GGUFHeader, name: str) -> torch.Tensor:
    """The float32 values of one tensor (dequantized by the ``gguf`` package), as torch.

    Raises:
        CheckpointError MALFORMED_CHECKPOINT: the tensor's bytes do not fit in the file.
        KeyError: the header lists no tensor ``name``.
    """
    import numpy as np
    import torch
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize

    t = header.tensors[name]
    qtype = GGMLQuantizationType[t.type_name]
    block, nbytes = GGML_QUANT_SIZES[qtype]
    count = 1
    for d in t.shape:
        count *= d
    size = header.path.stat().st_size
    if count == 0 or t.shape[-1] % block or t.offset + count // block * nbytes > size:
        raise _bad(
            header.path, f"tensor {name!r} {list(t.shape)} {t.type_name} does not fit the file"
        )
    raw = np.fromfile(header.path, dtype=np.uint8, count=count // block * nbytes, offset=t.offset)
    rows = raw.reshape(*t.shape[:-1], t.shape[-1] // block * nbytes)
    values = dequantize(rows, qtype).astype(np.float32, copy=False)
    return torch.from_numpy(np.ascontiguousarray(values).reshape(t.shape))
