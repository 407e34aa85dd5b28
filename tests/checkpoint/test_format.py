"""verify_checkpoint: a file is checked against its own metadata."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from _models import TinyLM, train_steps
from safetensors.torch import save_file

from tokembed.checkpoint import save_checkpoint, verify_checkpoint
from tokembed.errors import CheckpointError, UsageError


def test_verify_summarizes_a_good_file(tmp_path: Path) -> None:
    model = TinyLM(tied=True)
    adam = torch.optim.Adam(model.parameters())
    train_steps(model, adam)
    path = save_checkpoint(model, tmp_path / "c.safetensors", optimizer=adam, digests=True)
    summary = verify_checkpoint(path)
    assert (summary.tensors, summary.parameters, summary.optimizer) == (
        13,
        11 * 4 + 16 + 4 + 3,
        "Adam",
    )
    assert summary.aliases == {"lm_head.weight": "embed.weight"}
    assert summary.digests_checked == 13


def _rewrite_header(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    edit(header)
    new = json.dumps(header, separators=(",", ":")).encode()
    new += b" " * (n - len(new))  # keep the length so offsets still hold
    assert len(new) == n
    path.write_bytes(raw[:8] + new + raw[8 + n :])


def test_truncated_file_and_foreign_file_are_refused(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors")
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(CheckpointError) as e:
        verify_checkpoint(path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
    foreign = tmp_path / "f.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(CheckpointError) as e:
        verify_checkpoint(foreign)
    assert "not saved by tokembed" in e.value.message
    with pytest.raises(UsageError) as e2:
        verify_checkpoint(tmp_path / "absent.safetensors")
    assert e2.value.code == "FILE_NOT_FOUND"


def test_metadata_that_disagrees_with_the_tensors_is_refused(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors")

    def lie(header: dict) -> None:  # type: ignore[type-arg]
        meta = json.loads(header["__metadata__"]["tokembed.checkpoint"])
        meta["aliases"] = {"lm_head.weight": "embed.wei"}
        header["__metadata__"]["tokembed.checkpoint"] = json.dumps(meta)

    _rewrite_header(path, lie)
    with pytest.raises(CheckpointError) as e:
        verify_checkpoint(path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
    assert "alias" in e.value.message


def test_changed_bytes_fail_their_digest(tmp_path: Path) -> None:
    path = save_checkpoint(TinyLM(), tmp_path / "c.safetensors", digests=True)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x40  # flip one bit of the last tensor
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError) as e:
        verify_checkpoint(path)
    assert "SHA-256" in e.value.message
