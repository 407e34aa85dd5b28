"""Real tokenizers and PUD text shared by the format tests, loaded once per process.

Loading o200k derives ~200k merges (seconds), so every load is cached here
rather than in per-module fixtures.
"""

from __future__ import annotations

import functools

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.tokenizer.formats import load_tokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

__all__ = ["TIKTOKEN_NAMES", "our_ids", "pud_texts", "real_tokenizer", "tokenizer_path"]

TIKTOKEN_NAMES = ("r50k_base", "cl100k_base", "o200k_base", "qwen")


def tokenizer_path(name: str) -> str:
    """Path of a real artifact: a rank file for tiktoken names, else a folder."""
    file = f"{name}.tiktoken" if name in TIKTOKEN_NAMES else name
    return str(data_path("tokenizers", file))


@functools.cache
def real_tokenizer(name: str) -> Tokenizer:
    encoding = name if name in TIKTOKEN_NAMES else None
    return load_tokenizer(tokenizer_path(name), encoding=encoding)


@functools.cache
def pud_texts() -> dict[str, str]:
    return {lang: pud_text(lang) for lang in PUD_LANGS}


@functools.cache
def our_ids(name: str, lang: str) -> tuple[int, ...]:
    """Our ids of one PUD language under a real tokenizer (several tests compare them)."""
    return tuple(real_tokenizer(name).encode(pud_texts()[lang]))
