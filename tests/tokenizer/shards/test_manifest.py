"""Manifests: written and read back field for field; every malformed one refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokembed.errors import FormatError
from tokembed.tokenizer.shards import (
    InputRecord,
    Manifest,
    ShardEntry,
    manifest_bytes,
    read_manifest,
)


def _manifest() -> Manifest:
    return Manifest(
        address_hash="sha256:" + "1" * 64,
        tokenizer_name="gpt2",
        id_range=50257,
        eot_id=50256,
        format="megatron",
        dtype="uint16",
        doc="line",
        field="text",
        input_format="auto",
        errors="strict",
        shard_bytes=1024,
        inputs=(InputRecord(path="a.txt", sha256="2" * 64, bytes=10),),
        shards=(
            ShardEntry(name="shard-00000", ranges=((0, 0, 5),), documents=2, tokens=9, text_bytes=5,
                       files={"shard-00000.bin": "3" * 64, "shard-00000.idx": "4" * 64}),
            ShardEntry(name="shard-00001", ranges=((0, 5, None),)),
        ),
    )  # fmt: skip


def test_round_trip(tmp_path: Path) -> None:
    m = _manifest()
    (tmp_path / "manifest.json").write_bytes(manifest_bytes(m))
    back = read_manifest(tmp_path)
    assert back == m
    assert not back.complete
    assert (back.documents, back.tokens) == (2, 9)
    assert manifest_bytes(back) == manifest_bytes(m)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda d: d.pop("inputs"), "'inputs' is missing"),
        (lambda d: d.update(version=2), "not a version 1"),
        (lambda d: d["tokenizer"].update(address_hash="md5:00"), "address_hash"),
        (lambda d: d.update(dtype="float32"), "unknown shard format"),
        (lambda d: d["shards"][0].update(name="../x"), "is not a file name"),
        (lambda d: d["shards"][0].update(ranges=[[9, 0, None]]), "bad entry"),
        (lambda d: d["shards"][0].update(documents=-1), "negative"),
        (lambda d: d["shards"][0].update(tokens="9"), "wrong type"),
        (lambda d: d["shards"][0]["files"].pop("shard-00000.idx"), "files are not"),
        (lambda d: d["shards"].append(dict(d["shards"][1])), "share a name"),
    ],
)
def test_malformed_manifests_are_refused(tmp_path: Path, edit: object, why: str) -> None:
    data = json.loads(manifest_bytes(_manifest()))
    edit(data)  # type: ignore[operator]
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(FormatError) as info:
        read_manifest(tmp_path)
    assert info.value.code == "MALFORMED_SHARDS"
    assert why in info.value.message


def test_missing_or_not_json(tmp_path: Path) -> None:
    for content in (None, "{", "[]"):
        if content is not None:
            (tmp_path / "manifest.json").write_text(content)
        with pytest.raises(FormatError) as info:
            read_manifest(tmp_path)
        assert info.value.code == "MALFORMED_SHARDS"
