"""Reading a safetensors header and the tokembed record in it: damaged files are coded errors."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tokembed.artifacts.safetensors_header import (
    CHECKPOINT_META_KEY,
    DTYPE_CODES,
    checkpoint_metadata,
    dtype_name,
    read_checkpoint_metadata,
    read_safetensors_header,
)
from tokembed.errors import CheckpointError, UsageError


def _file(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_a_safetensors_file_reads_without_touching_its_tensors(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    save_file({"w": torch.zeros(2, 3, dtype=torch.bfloat16)}, str(path), metadata={"a": "b"})
    header = read_safetensors_header(path)
    assert header["w"]["dtype"] == "BF16"
    assert header["w"]["shape"] == [2, 3]
    assert header["__metadata__"] == {"a": "b"}
    assert read_checkpoint_metadata(path) is None  # a foreign file carries no tokembed record


@pytest.mark.parametrize(
    ("header", "data", "why"),
    [
        (b"{", b"", "header is not JSON"),
        (b"[1]", b"", "header is not a JSON object"),
        (b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', b"\0" * 4,
         "tensor data ends at"),
    ],
)  # fmt: skip
def test_damaged_headers_are_refused(tmp_path: Path, header: bytes, data: bytes, why: str) -> None:
    with pytest.raises(CheckpointError) as e:
        read_safetensors_header(_file(tmp_path / "x.safetensors", header, data))
    assert e.value.code == "MALFORMED_CHECKPOINT"
    assert why in e.value.message


def test_short_files_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(CheckpointError) as e:
        read_safetensors_header(tmp_path / "short.safetensors")
    assert "shorter than a safetensors header" in e.value.message
    (tmp_path / "long.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(CheckpointError) as e:
        read_safetensors_header(tmp_path / "long.safetensors")
    assert "header claims" in e.value.message
    with pytest.raises(UsageError) as e2:
        read_safetensors_header(tmp_path / "absent.safetensors")
    assert e2.value.code == "FILE_NOT_FOUND"


def test_the_tokembed_record_is_json_of_version_one(tmp_path: Path) -> None:
    def header(record: str) -> dict[str, object]:
        return {"__metadata__": {CHECKPOINT_META_KEY: record}}

    assert checkpoint_metadata(header('{"version": 1, "aliases": {}}'), "c") == {
        "version": 1,
        "aliases": {},
    }
    for record, why in (("{", "metadata is not JSON"), ('{"version": 2}', "unsupported")):
        with pytest.raises(CheckpointError) as e:
            checkpoint_metadata(header(record), tmp_path / "c.safetensors")
        assert e.value.code == "MALFORMED_CHECKPOINT"
        assert why in e.value.message
        assert e.value.message.startswith(str(tmp_path / "c.safetensors"))
    path = _file(tmp_path / "r.safetensors", json.dumps(header('{"version": 1}')).encode())
    assert read_checkpoint_metadata(path) == {"version": 1}


def test_dtype_codes_name_torch_dtypes() -> None:
    for name, code in DTYPE_CODES.items():
        assert isinstance(getattr(torch, name), torch.dtype)
        assert dtype_name(code) == name
    assert dtype_name("U16") == "u16"  # a code without a torch dtype here is still named


_F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def _entry(**change: object) -> dict[str, object]:
    return {**_F32_2, **change}


# Each header is one that safetensors itself cannot read (or a reader would index blindly):
# one validator refuses all of them with one code, for every reader of the project.
_MALFORMED = [
    ({"a": _F32_2, "b": _entry(data_offsets=[4, 12])}, 12, "overlaps"),
    ({"a": _F32_2, "b": _entry(data_offsets=[12, 20])}, 20, "gap"),
    ({"w": _entry(shape=[3])}, 8, "needs 12 bytes"),
    ({"w": _entry(data_offsets=["0", "8"])}, 8, "data_offsets"),
    ({"w": _entry(data_offsets=[0])}, 8, "data_offsets"),
    ({"w": _entry(data_offsets=[8, 0])}, 8, "data_offsets"),
    ({"w": {"dtype": "F32", "shape": [2]}}, 8, "data_offsets"),
    ({"w": [1, 2]}, 8, "not a JSON object"),
    ({"w": "F32"}, 8, "not a JSON object"),
    ({"w": {"shape": [2], "data_offsets": [0, 8]}}, 8, "dtype"),
    ({"w": _entry(dtype="F33")}, 8, "dtype"),
    ({"w": _entry(dtype=4)}, 8, "dtype"),
    ({"w": _entry(shape=[-2])}, 8, "shape"),
    ({"w": _entry(shape=[True, 2])}, 8, "shape"),
    ({"w": _entry(shape="2")}, 8, "shape"),
    ({"w": _F32_2, "__metadata__": ["a"]}, 8, "__metadata__"),
    ({"w": _F32_2, "__metadata__": {"format": 1}}, 8, "__metadata__"),
]


@pytest.mark.parametrize(("header", "data", "why"), _MALFORMED)
def test_every_header_safetensors_cannot_read_is_malformed(
    tmp_path: Path, header: dict[str, object], data: int, why: str
) -> None:
    path = _file(tmp_path / "x.safetensors", json.dumps(header).encode(), b"\0" * data)
    with pytest.raises(CheckpointError) as e:
        read_safetensors_header(path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
    assert why in e.value.message


def test_deep_nesting_is_malformed_not_a_recursion_error(tmp_path: Path) -> None:
    path = _file(tmp_path / "x.safetensors", b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(CheckpointError) as e:
        read_safetensors_header(path)
    assert e.value.code == "MALFORMED_CHECKPOINT"


def test_headers_safetensors_reads_pass_zero_sized_and_sub_byte_included(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    tensors = {
        "a": torch.zeros(0, 3),
        "b": torch.ones(2, 2, dtype=torch.int8),
        "c": torch.zeros(()),
    }
    save_file(tensors, str(path))
    assert sorted(read_safetensors_header(path)) == ["a", "b", "c"]


def test_a_fifo_or_device_is_unreadable_not_missing(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null"), tmp_path):
        with pytest.raises(UsageError) as e:
            read_safetensors_header(path)
        assert e.value.code == "FILE_UNREADABLE", path


@pytest.mark.parametrize(
    "record",
    [
        {"aliases": ["x"]},
        {"aliases": {"a": 1}},
        {"tensors": []},
        {"tensors": {"w": {"shape": "2", "dtype": "float32"}}},
        {"tensors": {"w": {"shape": [2]}}},
        {"tensors": {"w": {"shape": [2], "dtype": "float32", "sha256": 5}}},
        {"address_hash": 3},
        {"shards": {"w": {"start": "0"}}},
        {"optimizer": []},
        {"optimizer": {"class": "Adam", "param_groups": [{"params": "w"}]}},
    ],
)
def test_a_record_field_of_the_wrong_json_type_is_malformed(record: dict[str, object]) -> None:
    header = {"__metadata__": {CHECKPOINT_META_KEY: json.dumps({"version": 1, **record})}}
    with pytest.raises(CheckpointError) as e:
        checkpoint_metadata(header, "c.safetensors")
    assert e.value.code == "MALFORMED_CHECKPOINT"
