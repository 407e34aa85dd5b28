"""One shard written: ids equal the tokenizer's per document, digests equal the files' bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from _corpus import gpt2_path, write_corpus

from tokembed.tokenizer import load_tokenizer
from tokembed.tokenizer.shards import (
    ShardJob,
    TokenizeConfig,
    encode_shard,
    plan_shards,
    shard_digests,
)


def test_one_shard_of_long_documents_in_pieces(tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "c")
    tok = load_tokenizer(gpt2_path())
    cfg = TokenizeConfig(doc="file", format="bin")
    big = tmp_path / "c" / "book.txt"
    big.write_text(files[0].read_text() * 2)  # 1.4M characters: more than one batch
    names = (str(big),)
    (entry,) = plan_shards(list(names), cfg)
    job = ShardJob(entry=entry, names=names, folder=str(tmp_path), config=cfg, dtype="uint16",
                   eot_id=50256, address_hash=tok.address_hash)  # fmt: skip
    seen: list[int] = []
    done = encode_shard(job, tok, on_bytes=seen.append)
    text = big.read_text()
    assert len(seen) > 1  # a 1.4M-character document leaves in several batches
    assert sum(seen) == len(text.encode())
    ids = np.fromfile(tmp_path / "shard-00000.bin", dtype="<u2").tolist()
    assert ids == [*tok.encode_ordinary(text), 50256]
    assert (done.documents, done.tokens) == (1, len(ids))
    assert done.files is not None
    assert shard_digests(tmp_path, list(done.files)) == done.files
    assert (
        done.files["shard-00000.bin"]
        == hashlib.sha256((tmp_path / "shard-00000.bin").read_bytes()).hexdigest()
    )
