"""A DCP folder's .metadata and tokembed record are checked before any tensor byte is read."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tokembed.artifacts.dcp_io import TensorPiece, write_dcp
from tokembed.artifacts.dcp_metadata import (
    RECORD_NAME,
    is_dcp_folder,
    metadata_digest,
    read_dcp_metadata,
    read_dcp_record,
)
from tokembed.errors import TokembedError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    piece = TensorPiece(name="w", shape=(5, 2), offset=(0, 0), tensor=torch.ones(5, 2))
    return write_dcp(tmp_path / "ck", [piece], record={"aliases": {"v": "w"}})


def _code(path: Path) -> str:
    with pytest.raises(TokembedError) as info:
        read_dcp_record(path)
    assert "\n" not in str(info.value)
    return info.value.code


def test_a_folder_we_wrote_reads_back(folder: Path) -> None:
    assert is_dcp_folder(folder)
    assert not is_dcp_folder(folder / RECORD_NAME)
    meta = read_dcp_metadata(folder)
    assert list(meta.state_dict_metadata) == ["w"]
    record = read_dcp_record(folder, metadata=meta)
    assert record is not None
    assert record["aliases"] == {"v": "w"}
    assert record["metadata_sha256"] == metadata_digest(folder)


def test_a_plain_dcp_folder_has_no_record(tmp_path: Path) -> None:
    dcp.save({"w": torch.ones(3)}, checkpoint_id=tmp_path / "plain", no_dist=True)
    assert read_dcp_record(tmp_path / "plain") is None


def test_a_pickle_outside_the_allow_list_is_refused_not_run(folder: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(marker),))

    (folder / ".metadata").write_bytes(pickle.dumps(Payload()))
    assert _code(folder) == "MALFORMED_CHECKPOINT"
    assert not marker.exists()


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ("no_folder", "FILE_NOT_FOUND"),
        ("no_metadata", "MALFORMED_CHECKPOINT"),
        ("metadata_field_renamed", "MALFORMED_CHECKPOINT"),
        ("no_data", "CHECKPOINT_SHARD_MISSING"),
        ("short_data", "CHECKPOINT_SHARD_MISSING"),
        ("record_not_json", "MALFORMED_CHECKPOINT"),
        ("record_wrong_type", "MALFORMED_CHECKPOINT"),
        ("record_other_tensors", "MALFORMED_CHECKPOINT"),
    ],
)
def test_each_damage_has_its_code(folder: Path, change: str, code: str) -> None:
    record = folder / RECORD_NAME
    data = next(folder.glob("*.distcp"))
    if change == "no_folder":
        shutil.rmtree(folder)
    elif change == "no_metadata":
        (folder / ".metadata").unlink()
    elif change == "metadata_field_renamed":  # unpickles to a Metadata without that field
        meta = folder / ".metadata"
        meta.write_bytes(
            meta.read_bytes().replace(b"state_dict_metadata", b"\x00tate_dict_metadata")
        )
    elif change == "no_data":
        data.unlink()
    elif change == "short_data":
        data.write_bytes(data.read_bytes()[:-1])
    elif change == "record_not_json":
        record.write_text("{")
    else:
        content = json.loads(record.read_text())
        if change == "record_wrong_type":
            content["aliases"] = ["v", "w"]
        else:
            content["tensors"]["w"]["shape"] = [6, 2]
        record.write_text(json.dumps(content))
    assert _code(folder) == code
