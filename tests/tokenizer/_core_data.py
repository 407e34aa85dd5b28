"""Tokenizers trained once per test process, shared by the tokenizer-core tests."""

from __future__ import annotations

from functools import cache

from conftest import pud_text
from tokembed.tokenizer import Tokenizer, TrainConfig, train


@cache
def pud_tokenizer() -> Tokenizer:
    """2000 merges on PUD Russian, with two automatic specials and an alias pair."""
    return train(
        [pud_text("ru")],
        config=TrainConfig(
            merges=2000,
            specials={"<|endoftext|>": None, "<|fim|>": None, "<|a|>": 5000, "<|b|>": 5000},
            progress=False,
        ),
    )


@cache
def ruslit_tokenizer(ruslit_text: str) -> Tokenizer:
    """4096 merges on the first 1M characters of RusLit40 (training on all of it takes ~1 min)."""
    return train([ruslit_text[:1_000_000]], config=TrainConfig(merges=4096, progress=False))
