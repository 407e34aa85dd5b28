"""The recorded tokenizer address hash: written by save_checkpoint, found in a folder's headers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from tokembed.artifacts.recorded_hash import (
    address_hash_of,
    folder_address_hash,
    recorded_address_hash,
)
from tokembed.artifacts.safetensors_header import read_safetensors_header
from tokembed.checkpoint import save_checkpoint
from tokembed.errors import CheckpointError

HASH = "sha256:" + "ab" * 32


class _Tok:
    address_hash = HASH


def test_a_tokenizer_or_its_hash_is_what_is_recorded() -> None:
    assert address_hash_of(_Tok()) == address_hash_of(HASH) == HASH
    assert address_hash_of(None) is None


def test_the_hash_save_checkpoint_records_is_found_in_the_folder(tmp_path: Path) -> None:
    save_file({"w": torch.zeros(1)}, str(tmp_path / "a.safetensors"))  # foreign, first in order
    path = save_checkpoint(nn.Linear(2, 2), tmp_path / "model.safetensors", tokenizer=_Tok())
    assert folder_address_hash(tmp_path) == HASH
    headers = {p: read_safetensors_header(p) for p in sorted(tmp_path.glob("*.safetensors"))}
    assert recorded_address_hash(headers) == (HASH, path)


def test_only_the_checkpoint_record_counts(tmp_path: Path) -> None:
    # A bare metadata key is no record: only save_checkpoint's versioned record names a hash.
    save_file(
        {"w": torch.zeros(1)}, str(tmp_path / "m.safetensors"), {"tokembed.address_hash": HASH}
    )
    assert folder_address_hash(tmp_path) is None


def test_no_record_no_folder_and_a_damaged_file(tmp_path: Path) -> None:
    save_file({"w": torch.zeros(1)}, str(tmp_path / "m.safetensors"))
    assert folder_address_hash(tmp_path) is None
    assert folder_address_hash(tmp_path / "m.safetensors") is None  # a file, not a folder
    assert folder_address_hash(tmp_path / "absent") is None
    (tmp_path / "z.safetensors").write_bytes(b"\x00")
    with pytest.raises(CheckpointError) as e:
        folder_address_hash(tmp_path)
    assert e.value.code == "MALFORMED_CHECKPOINT"
