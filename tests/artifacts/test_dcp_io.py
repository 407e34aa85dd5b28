"""Writing pieces of logical tensors as a DCP folder and reading blocks of any other layout back."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tokembed.artifacts.dcp_io import TensorPiece, read_dcp, read_dcp_tensor, write_dcp
from tokembed.artifacts.dcp_metadata import RECORD_NAME, read_dcp_record
from tokembed.errors import TokembedError

FULL = torch.arange(131 * 4, dtype=torch.float64).reshape(131, 4)


def _pieces(cuts: list[int]) -> list[TensorPiece]:
    """FULL as row blocks [cuts[i], cuts[i+1]): the pieces several ranks would hold."""
    return [
        TensorPiece(name="w", shape=(131, 4), offset=(a, 0), tensor=FULL[a:b].clone())
        for a, b in itertools.pairwise(cuts)
    ]


def test_pieces_written_in_one_layout_are_read_in_another(tmp_path: Path) -> None:
    scalar = TensorPiece(name="step", shape=(), offset=(), tensor=torch.tensor(3.0))
    folder = write_dcp(tmp_path / "ck", [*_pieces([0, 66, 131]), scalar], record={"aliases": {}})
    assert sorted(p.name for p in folder.iterdir()) == [".metadata", "__0_0.distcp", RECORD_NAME]
    record = read_dcp_record(folder)
    assert record is not None
    assert record["tensors"] == {
        "step": {"shape": [], "dtype": "float32"},
        "w": {"shape": [131, 4], "dtype": "float64"},
    }
    targets = [TensorPiece(name=p.name, shape=p.shape, offset=p.offset, tensor=torch.empty_like(p.tensor)) for p in _pieces([0, 33, 66, 99, 131])]  # fmt: skip
    read_dcp(folder, targets)
    assert torch.equal(torch.cat([t.tensor for t in targets]), FULL)
    assert torch.equal(read_dcp_tensor(folder, "w", rows=(60, 70)), FULL[60:70])
    assert float(read_dcp_tensor(folder, "step")) == 3.0
    # Plain DCP reads what we wrote.
    plain = {"w": torch.zeros(131, 4, dtype=torch.float64)}
    dcp.load(plain, checkpoint_id=folder, no_dist=True)
    assert torch.equal(plain["w"], FULL)


def test_data_produced_while_writing(tmp_path: Path) -> None:
    meta = TensorPiece(name="w", shape=(131, 4), offset=(0, 0), tensor=FULL.to("meta"))
    folder = write_dcp(tmp_path / "ck", [meta], record={}, produce=lambda piece: FULL)
    assert torch.equal(read_dcp_tensor(folder, "w"), FULL)


def test_bad_pieces_and_requests_are_coded(tmp_path: Path) -> None:
    with pytest.raises(TokembedError) as info:
        TensorPiece(name="w", shape=(4, 4), offset=(2, 0), tensor=torch.zeros(3, 4))
    assert info.value.code == "INVALID_ARGUMENT"
    folder = write_dcp(tmp_path / "ck", _pieces([0, 131]), record={})
    with pytest.raises(TokembedError) as info:
        write_dcp(folder, _pieces([0, 131]), record={})
    assert info.value.code == "OUTPUT_EXISTS"
    with pytest.raises(TokembedError) as info:
        read_dcp_tensor(folder, "nope")
    assert info.value.code == "MALFORMED_CHECKPOINT"
    with pytest.raises(TokembedError) as info:
        read_dcp_tensor(folder, "w", rows=(100, 200))
    assert info.value.code == "INVALID_ARGUMENT"
    other = TensorPiece(name="w", shape=(130, 4), offset=(0, 0), tensor=torch.zeros(130, 4))
    with pytest.raises(TokembedError) as info:
        read_dcp(folder, [other])
    assert info.value.code == "SHAPE_MISMATCH"
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary folder left behind
    assert json.loads((folder / RECORD_NAME).read_text())["format"]
