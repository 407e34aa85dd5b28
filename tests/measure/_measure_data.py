"""Cached real inputs shared by the measure tests (computed once per test process).

Plain cached functions instead of a second ``conftest.py``: the root conftest is
imported as ``conftest`` by other test folders, and a nested one would shadow it.
"""

from __future__ import annotations

from functools import cache

from conftest import data_path, pud_file
from tokembed.measure.corpus import Corpus, align, load_corpus
from tokembed.measure.partition import Partition, partition_parallel
from tokembed.tokenizer import Tokenizer, TrainConfig, train

__all__ = ["lecture_split", "loaded", "pud", "ru_tokenizer", "tokenizer_path"]


@cache
def pud(*langs: str) -> dict[str, Corpus]:
    """Aligned PUD corpora labelled by language."""
    return align({lang: load_corpus(pud_file(lang), name=lang) for lang in langs})


@cache
def lecture_split() -> dict[str, Partition]:
    return partition_parallel(pud("ru", "en"), rule="lecture")


@cache
def ru_tokenizer() -> Tokenizer:
    """BBPE trained on the Russian training side of the teaching split only (1,024 merges)."""
    return train(
        [lecture_split()["ru"].train.text], config=TrainConfig(merges=1024, progress=False)
    )


def tokenizer_path(name: str) -> str:
    return str(data_path("tokenizers", name))


@cache
def loaded(name: str, encoding: str | None = None) -> Tokenizer:
    from tokembed.tokenizer.formats import load_tokenizer

    return load_tokenizer(tokenizer_path(name), encoding=encoding)
