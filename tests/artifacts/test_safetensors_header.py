"""Reading a safetensors header and the tokembed record in it: damaged files are coded errors."""

from __future__ import annotations

import json
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
