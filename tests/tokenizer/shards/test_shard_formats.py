"""Shard index files: Megatron-Core reads ours; every damaged index is refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokembed.errors import FormatError
from tokembed.tokenizer.shards import index_files, read_document_ends, shard_files

_HASH = "sha256:" + "ab" * 32


def _write(folder: Path, name: str, fmt: str, dtype: str, docs: list[list[int]]) -> None:
    ids = np.array([i for d in docs for i in d], dtype=dtype)
    (folder / f"{name}.bin").write_bytes(ids.astype(np.dtype(dtype).newbyteorder("<")).tobytes())
    lengths = np.array([len(d) for d in docs])
    for file, data in index_files(name, fmt, dtype=dtype, lengths=lengths, address_hash=_HASH):
        (folder / file).write_bytes(data)


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_megatron_reads_our_index(tmp_path: Path, dtype: str) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    docs = [[1, 2, 3], [40_000], [], [5, 6]] if dtype == "uint16" else [[199_999, 0], [7]]
    _write(tmp_path, "s", "megatron", dtype, docs)
    ds = IndexedDataset(str(tmp_path / "s"))
    assert [ds[i].tolist() for i in range(len(ds))] == docs
    assert ds.index.dtype == np.dtype(dtype)
    ends = read_document_ends(tmp_path, "s", "megatron", dtype)
    assert ends.tolist() == np.cumsum([len(d) for d in docs]).tolist()


def test_flat_files_and_their_sidecar(tmp_path: Path) -> None:
    _write(tmp_path, "s", "bin", "uint32", [[1, 2], [70_000]])
    assert shard_files("s", "bin") == ("s.bin", "s.json", "s.ends.npy")
    assert read_document_ends(tmp_path, "s", "bin", "uint32").tolist() == [2, 3]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda f: (f / "s.idx").write_bytes(b"MMIDIDX"), "too short"),
        (
            lambda f: (f / "s.idx").write_bytes(b"X" + (f / "s.idx").read_bytes()[1:]),
            "not a Megatron index",
        ),
        (lambda f: (f / "s.idx").write_bytes((f / "s.idx").read_bytes()[:-8]), "disagree"),
        (
            lambda f: (f / "s.bin").write_bytes((f / "s.bin").read_bytes()[:-2]),
            "bytes, but the index",
        ),
        (lambda f: (f / "s.bin").unlink(), "missing"),
        (lambda f: (f / "s.idx").unlink(), "cannot be read"),
    ],
)
def test_damaged_megatron_shards_are_refused(tmp_path: Path, damage: object, why: str) -> None:
    _write(tmp_path, "s", "megatron", "uint16", [[1, 2, 3], [4]])
    damage(tmp_path)  # type: ignore[operator]
    with pytest.raises(FormatError) as info:
        read_document_ends(tmp_path, "s", "megatron", "uint16")
    assert info.value.code == "MALFORMED_SHARDS"
    assert why in info.value.message


def test_another_dtype_than_the_manifests_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "s", "megatron", "uint16", [[1]])
    with pytest.raises(FormatError) as info:
        read_document_ends(tmp_path, "s", "megatron", "int32")
    assert info.value.code == "MALFORMED_SHARDS"
