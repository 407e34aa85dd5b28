"""Shards on a Dask cluster: the same files as one process; an unreachable scheduler is coded."""

from __future__ import annotations

from pathlib import Path

import pytest
from _corpus import gpt2_path, write_corpus

from tokembed.errors import TokenizerError
from tokembed.tokenizer import load_tokenizer
from tokembed.tokenizer.shards import TokenizeConfig, tokenize_corpus


def test_an_in_process_cluster_writes_what_one_process_writes(tmp_path: Path) -> None:
    from distributed import LocalCluster

    files = write_corpus(tmp_path / "c")[:1]
    tok = load_tokenizer(gpt2_path())
    with LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster:
        cfg = TokenizeConfig(
            engine="dask", scheduler=cluster.scheduler_address, shard_bytes=100_000
        )
        tokenize_corpus(files, tokenizer=tok, output=tmp_path / "dask", config=cfg)
    tokenize_corpus(
        files, tokenizer=tok, output=tmp_path / "one", config=TokenizeConfig(shard_bytes=100_000)
    )
    one = {p.name: p.read_bytes() for p in (tmp_path / "one").iterdir()}
    assert {p.name: p.read_bytes() for p in (tmp_path / "dask").iterdir()} == one
    assert len(one) > 3


def test_no_scheduler_answers(tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "c")[:1]
    tok = load_tokenizer(gpt2_path())
    cfg = TokenizeConfig(engine="dask", scheduler="tcp://127.0.0.1:1")
    with pytest.raises(TokenizerError) as info:
        tokenize_corpus(files, tokenizer=tok, output=tmp_path / "o", config=cfg)
    assert info.value.code == "SCHEDULER_UNREACHABLE"
