"""The streamed safetensors writer: what it writes, safetensors and our header reader read back."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from tokembed.artifacts.safetensors_header import DTYPE_CODES, read_safetensors_header
from tokembed.artifacts.safetensors_writer import write_safetensors


def test_streamed_file_reads_back_in_safetensors_for_every_dtype_and_layout(tmp_path: Path) -> None:
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    tensors = {name: base.to(getattr(torch, name)) for name in DTYPE_CODES}
    tensors["transposed"] = base.t()  # non-contiguous: written in row blocks
    tensors["scalar"] = torch.tensor(3.5)
    tensors["empty"] = torch.zeros(0, 3)
    path = tmp_path / "all.safetensors"
    write_safetensors(path, tensors, metadata={"format": "pt"})
    back = load_file(str(path))
    assert back.keys() == tensors.keys()
    for name, t in tensors.items():
        assert (back[name].dtype, back[name].shape) == (t.dtype, t.shape)
        raw = (
            back[name].reshape(-1).view(torch.uint8)
        )  # bitwise, so NaN-free ints/bools compare too
        assert torch.equal(raw, t.contiguous().reshape(-1).view(torch.uint8)), name


def test_metadata_and_header_are_what_readers_expect(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"b": torch.ones(2, 2), "a": torch.zeros(3)}, metadata={"k": "v"})
    header = read_safetensors_header(path)  # sizes and offsets add up to the file
    assert header["__metadata__"] == {"k": "v"}
    assert header["a"] == {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}  # name order
    assert header["b"]["data_offsets"] == [12, 28]
    assert (path.stat().st_size - 8 - 28) % 8 == 0  # data starts 8-byte aligned
    with safe_open(str(path), "pt") as f:
        assert f.metadata() == {"k": "v"}


def test_a_dtype_without_a_code_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        write_safetensors(
            tmp_path / "c.safetensors", {"c": torch.zeros(2, dtype=torch.complex64)}, metadata={}
        )
