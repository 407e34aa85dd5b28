"""Shards read back: documents and windows equal the ids written; another tokenizer's table refuses them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tokenizer" / "shards"))
from _corpus import gpt2_path, write_corpus

from tokembed.embedding import AddressedIds, TokenEmbedding, open_shards
from tokembed.errors import EmbeddingError, FormatError, UsageError
from tokembed.tokenizer import load_tokenizer
from tokembed.tokenizer.shards import TokenizeConfig, tokenize_corpus


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[int]]]:
    root = tmp_path_factory.mktemp("shards")
    files = write_corpus(root / "c")[:1]
    tok = load_tokenizer(gpt2_path())
    out = root / "out"
    tokenize_corpus(files, tokenizer=tok, output=out, config=TokenizeConfig(shard_bytes=100_000))
    docs = [[*tok.encode_ordinary(x), tok.eot_token] for x in files[0].read_text().split("\n") if x]
    return out, docs


def test_documents_and_windows(written: tuple[Path, list[list[int]]]) -> None:
    out, docs = written
    shards = open_shards(out)
    assert len(shards.manifest.shards) > 3
    assert len(shards) == len(docs)
    assert shards[0].tolist() == docs[0]
    assert shards[-1].tolist() == docs[-1]
    assert shards[3000].dtype == torch.int64
    assert [shards[i].tolist() for i in range(len(shards))] == docs
    stream = [i for d in docs for i in d]
    assert shards.tokens == len(stream)
    first = shards.manifest.shards[0].tokens
    batch = shards.window(first - 100, 64, rows=4)  # crosses the first shard's end
    assert batch.shape == (4, 64)
    assert batch.ids.flatten().tolist() == stream[first - 100 : first - 100 + 256]
    assert batch.address_hash == shards.address_hash == load_tokenizer(gpt2_path()).address_hash


def test_out_of_range_is_an_index_error(written: tuple[Path, list[list[int]]]) -> None:
    shards = open_shards(written[0])
    for bad in (
        lambda: shards[len(shards)],
        lambda: shards.window(shards.tokens - 5, 10),
        lambda: shards.window(0, 0),
    ):
        with pytest.raises(IndexError) as info:
            bad()
        assert isinstance(info.value, UsageError)
        assert info.value.code == "INVALID_ARGUMENT"


def test_a_table_bound_to_another_tokenizer_refuses_the_batch(
    written: tuple[Path, list[list[int]]],
) -> None:
    shards = open_shards(written[0])
    batch = shards.window(0, 16, rows=2)
    ours = TokenEmbedding(50257, 8, address_hash=shards.address_hash)
    assert ours(batch).shape == (2, 16, 8)
    other = TokenEmbedding(50257, 8, address_hash="sha256:" + "0" * 64)
    with pytest.raises(EmbeddingError) as info:
        other(batch)
    assert info.value.code == "ADDRESS_HASH_MISMATCH"
    assert isinstance(batch, AddressedIds)


def test_unfinished_or_damaged_folders_are_refused(
    tmp_path: Path, written: tuple[Path, list[list[int]]]
) -> None:
    import json
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(written[0], copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["shards"][1]["files"] = None
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatError) as info:
        open_shards(copy)
    assert info.value.code == "SHARDS_INCOMPLETE"
    shutil.rmtree(copy)
    shutil.copytree(written[0], copy)
    (copy / "shard-00002.idx").write_bytes((copy / "shard-00002.idx").read_bytes()[:-3])
    with pytest.raises(FormatError) as info:
        open_shards(copy)
    assert info.value.code == "MALFORMED_SHARDS"
