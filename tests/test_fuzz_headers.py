"""Crafted safetensors and GGUF headers: every reader refuses with a code or reads for real.

:mod:`test_fuzz_readers` damages valid files at random; here the headers are *built*
field by field, so that each class of malformed header the format allows is reached
often: wrong JSON types in any field, offsets that overlap, leave gaps or run past the
file, shapes whose bytes are not there, deep nesting, a tokembed record with a field of
the wrong type; for GGUF, unknown value types, nested arrays, too many dimensions,
tensors past the end, overlapping tensors. Two properties per file:

* every reader (``read_safetensors_header``, ``verify_checkpoint``, ``load_checkpoint``;
  ``read_gguf_header``, ``read_gguf_tensor``, the admission check's ``facts_of``) raises
  nothing but a ``TokembedError``;
* what the one header validator admits, the ``safetensors`` library reads in full (every
  tensor), and a GGUF file it admits has every tensor's bytes inside the file.

Budget: the ``TOKEMBED_FUZZ`` profile of :mod:`test_fuzz_readers` (``ci``: the numbers of
examples below, a few seconds each; ``release``: 5000 each).
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokembed.artifacts.gguf_reader import read_gguf_header, read_gguf_tensor
from tokembed.artifacts.safetensors_header import CHECKPOINT_META_KEY, read_safetensors_header
from tokembed.checkpoint import load_checkpoint, save_checkpoint, verify_checkpoint
from tokembed.errors import TokembedError

_RELEASE = os.environ.get("TOKEMBED_FUZZ", "ci") == "release"
SAFETENSORS_CASES = 5000 if _RELEASE else 300
GGUF_CASES = 5000 if _RELEASE else 200
_SETTINGS: dict[str, Any] = {
    "deadline": timedelta(seconds=10),
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "database": None,
}


class _Tiny(torch.nn.Module):
    """Two tables that a crafted alias map may try to tie, and a bias."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(3, 2)
        self.head = torch.nn.Linear(2, 3)


def _record_seed() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        model = _Tiny()
        adam = torch.optim.Adam(model.parameters())
        model.head(model.embed(torch.tensor([0, 2]))).sum().backward()
        adam.step()
        path = save_checkpoint(model, Path(d) / "c.safetensors", optimizer=adam, digests=True)
        header = read_safetensors_header(path)
    record: dict[str, Any] = json.loads(header["__metadata__"][CHECKPOINT_META_KEY])
    return record


_RECORD = _record_seed()
_DTYPES = ["F32", "F16", "BF16", "I64", "I8", "U8", "BOOL", "F64", "F4", "F33", "f32", ""]
_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 1 << 65) | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
_WIDTH = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I8": 1, "U8": 1, "BOOL": 1, "F64": 8}


@st.composite
def _entry(draw: st.DrawFn, at: int) -> tuple[Any, int]:
    """One tensor entry starting at data offset ``at`` (often honest, often not), and its end."""
    dtype = draw(st.sampled_from(_DTYPES))
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    count = 1
    for d in shape:
        count *= d
    size = count * _WIDTH.get(dtype, 4)
    begin = at + draw(st.sampled_from([0, 0, 0, -4, 4]))
    end = begin + size + draw(st.sampled_from([0, 0, 0, -1, 1, 8]))
    entry: Any = {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}
    damage = draw(st.sampled_from(["none", "none", "field", "drop", "whole"]))
    if damage == "field":
        entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))] = draw(_junk)
    elif damage == "drop":
        del entry[draw(st.sampled_from(["dtype", "shape", "data_offsets"]))]
    elif damage == "whole":
        entry = draw(_junk)
    return entry, max(end, at)


@st.composite
def _record(draw: st.DrawFn, names: list[str]) -> str:
    """The tokembed record, naming the crafted tensors, with one field changed or not."""
    record = json.loads(json.dumps(_RECORD))
    record["tensors"] = {n: {"shape": [2], "dtype": "float32"} for n in names}
    record["aliases"] = draw(
        st.sampled_from([{}, {"head.weight": "embed.weight"}, {"embed.weight": "head.weight"}])
    )
    if draw(st.booleans()):
        key = draw(st.sampled_from(sorted(record)))
        record[key] = draw(_junk)
    if draw(st.integers(0, 9)) == 0:
        return "[" * 5000 + "]" * 5000
    return json.dumps(record)


@st.composite
def _safetensors_file(draw: st.DrawFn) -> bytes:
    names = draw(
        st.lists(
            st.sampled_from(["embed.weight", "head.weight", "head.bias", "x", "optimizer/x/s"]),
            max_size=4,
            unique=True,
        )
    )
    header: dict[str, Any] = {}
    at = 0
    for name in names:
        header[name], at = draw(_entry(at))
    metadata = draw(st.sampled_from(["none", "format", "record", "junk"]))
    if metadata == "format":
        header["__metadata__"] = {"format": "pt"}
    elif metadata == "record":
        header["__metadata__"] = {"format": "pt", CHECKPOINT_META_KEY: draw(_record(names))}
    elif metadata == "junk":
        header["__metadata__"] = draw(_junk)
    text = json.dumps(header).encode()
    if draw(st.integers(0, 19)) == 0:
        text = b'{"a":' * 3000 + b"1" + b"}" * 3000  # nesting deeper than the parser goes
    data = bytes(draw(st.integers(0, 255)) for _ in range(at)) if at < 64 else b"\0" * at
    data = data[: len(data) + draw(st.sampled_from([0, 0, 0, -1, 1]))] + (
        b"\0" if draw(st.booleans()) and not data else b""
    )
    length = len(text) + draw(st.sampled_from([0, 0, 0, 0, -1, 3, 1 << 40]))
    return struct.pack("<Q", max(length, 0)) + text + data


def _only_coded(read: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return read(*args, **kwargs)
    except TokembedError:
        return None


@settings(max_examples=SAFETENSORS_CASES, **_SETTINGS)
@given(raw=_safetensors_file())
def test_crafted_safetensors_headers(raw: bytes) -> None:
    from safetensors import safe_open

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.safetensors"
        path.write_bytes(raw)
        header = _only_coded(read_safetensors_header, path)
        if header is not None:  # admitted: the library itself reads every tensor
            with safe_open(str(path), "pt", device="cpu") as f:
                for key in f.keys():  # noqa: SIM118 (safe_open has no __contains__)
                    f.get_tensor(key)
        _only_coded(verify_checkpoint, path)
        _only_coded(load_checkpoint, _Tiny(), path, strict=False)
        _only_coded(load_checkpoint, _Tiny(), path, strict=False, retie=True)


_GGUF_TYPES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 99]
_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q",
        11: "<q", 12: "<d"}  # fmt: skip


def _gstr(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


@st.composite
def _gvalue(draw: st.DrawFn, kind: int, depth: int = 0) -> bytes:
    if kind in _FMT:
        fmt = _FMT[kind]
        bits = struct.calcsize(fmt) * 8
        value = draw(st.integers(0, (1 << bits) - 1))
        unsigned = {"b": "B", "h": "H", "i": "I", "q": "Q", "f": "I", "d": "Q"}
        return struct.pack("<" + unsigned.get(fmt[1], fmt[1]), value)
    if kind == 8:
        if draw(st.integers(0, 9)) == 0:
            return struct.pack("<Q", draw(st.sampled_from([1 << 62, 10_000])))  # a lying length
        return _gstr(draw(st.text(max_size=6)))
    if kind == 9:
        inner = draw(st.sampled_from(_GGUF_TYPES if depth < 3 else [4, 8]))
        if draw(st.integers(0, 9)) == 0:
            return struct.pack("<IQ", inner, draw(st.sampled_from([1 << 61, 1 << 30])))
        items = [draw(_gvalue(inner, depth + 1)) for _ in range(draw(st.integers(0, 3)))]
        return struct.pack("<IQ", inner, len(items)) + b"".join(items)
    return b""  # an unknown type: the reader must stop here


@st.composite
def _gguf_file(draw: st.DrawFn) -> bytes:
    fields: list[bytes] = []
    tokens = draw(st.integers(0, 6))
    fields.append(_gstr("general.architecture") + struct.pack("<I", 8) + _gstr("llama"))
    fields.append(
        _gstr("tokenizer.ggml.tokens")
        + struct.pack("<IIQ", 9, 8, tokens)
        + b"".join(_gstr(f"t{i}") for i in range(tokens))
    )
    fields.append(_gstr("llama.embedding_length") + struct.pack("<II", 4, 4))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(_GGUF_TYPES))
        fields.append(
            _gstr(draw(st.sampled_from(["general.alignment", "x", "tokenizer.ggml.bos_token_id"])))
            + struct.pack("<I", kind)
            + draw(_gvalue(kind))
        )
    infos: list[bytes] = []
    offset, data_size = 0, 0
    for name in draw(st.lists(st.sampled_from(["token_embd.weight", "output.weight", "b"]),
                              max_size=3)):  # fmt: skip
        dims = draw(st.lists(st.integers(0, 8), min_size=0, max_size=5))
        kind = draw(st.sampled_from([0, 0, 1, 2, 8, 30, 99]))  # F32, F16, Q4_0, Q8_0, BF16
        count = 1
        for dim in dims:
            count *= dim
        width = {0: 4 * count, 1: 2 * count, 30: 2 * count}.get(kind, count)
        at = offset + draw(st.sampled_from([0, 0, 0, -32, 32]))
        infos.append(
            _gstr(name)
            + struct.pack("<I", len(dims))
            + b"".join(struct.pack("<Q", x) for x in dims)
            + struct.pack("<IQ", kind, max(at, 0))
        )
        offset = -(-(max(at, 0) + width) // 32) * 32
        data_size = max(data_size, max(at, 0) + width)
    magic = draw(st.sampled_from([b"GGUF", b"GGUF", b"GGUF", b"GGML"]))
    version = draw(st.sampled_from([3, 3, 2, 1, 7]))
    n_tensors = len(infos) + draw(st.sampled_from([0, 0, 0, 1, 1 << 40]))
    n_fields = len(fields) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    head = magic + struct.pack("<IQQ", version, n_tensors, max(n_fields, 0))
    body = head + b"".join(fields) + b"".join(infos)
    body += b"\0" * (-len(body) % 32)
    data = b"\x3c" * (data_size + draw(st.sampled_from([0, 0, 0, -1, -(data_size // 2), 7])))
    return body + data


@settings(max_examples=GGUF_CASES, **_SETTINGS)
@given(raw=_gguf_file())
def test_crafted_gguf_headers(raw: bytes) -> None:
    from tokembed.audit._source import facts_of

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.gguf"
        path.write_bytes(raw)
        header = _only_coded(read_gguf_header, path)
        if header is not None:  # admitted: every tensor's bytes are in the file
            for name in header.tensors:
                _only_coded(read_gguf_tensor, header, name)
        facts = _only_coded(facts_of, path)
        if facts is not None:
            _only_coded(facts.table_values)
