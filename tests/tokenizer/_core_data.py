"""Tokenizers trained once per test process, shared by the tokenizer-core tests."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from itertools import pairwise
from typing import Any

import pytest

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.tokenizer import Tokenizer, TrainConfig, train

NO_TOKEN = 1 << 40  # the rank of a byte string that is no token: above every rank
LETTER_LANGS = ("zh", "ko", "th", "hi")  # PUD languages written in three-byte letters


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


@cache
def real_text() -> str:
    """Every PUD language, then 300,000 characters of RusLit-40: the text the encoder's switches
    are tested on, each way against the peers."""
    import gzip

    with gzip.open(data_path("ruslit", "ruslit40.txt.gz"), "rt", encoding="utf-8") as f:
        ruslit = f.read(300_000)
    return "".join(pud_text(lang) for lang in PUD_LANGS) + ruslit


@cache
def rank_vocab(name: str) -> tuple[bytes, dict[bytes, int], Tokenizer]:
    """A shared rank file by name (``o200k_base``, ``qwen``...): its bytes, its pieces' ranks
    and the tokenizer loaded from it."""
    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.ranks import parse_ranks

    path = data_path("tokenizers", f"{name}.tiktoken")
    data = path.read_bytes()
    return data, parse_ranks(data), load_tokenizer(path)


@cache
def rank_peer(name: str) -> Any:
    """tiktoken on a shared rank file, with the split pattern our loader reads for it."""
    import tiktoken

    _, ranks, tok = rank_vocab(name)
    pattern = tok.pretokenizer.stages[0]
    return tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def switched_tables(monkeypatch: pytest.MonkeyPatch, variable: str, on: bool, data: bytes) -> Any:
    """A rank file's compiled tables with an encoder switch that is read when tables are made
    (``TOKEMBED_SEGMENT``, ``TOKEMBED_PREJOIN``: "0" is off) set on or off."""
    monkeypatch.setenv(variable, "1" if on else "0")
    return encode_module().Tables.from_ranks(data)


def assert_switch_keeps_ids(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    variable: str,
    text: str,
    on: Callable[[Any], bool],
) -> None:
    """The encoder's ids of ``text`` on the shared rank file ``name`` equal tiktoken's with the
    switch ``variable`` on and off; ``on(tables)`` tells the switch's state from the tables.
    Each encoder runs the text twice: the second time most chunks come from its caches."""
    from tokembed.tokenizer.compiled import CompiledEncoder

    data, _, tok = rank_vocab(name)
    expected = rank_peer(name).encode_ordinary(text)
    for state in (True, False):
        tables = switched_tables(monkeypatch, variable, state, data)
        assert on(tables) == state
        enc = CompiledEncoder(tables, tok.pretokenizer, threads=1)
        assert enc.encode(text) == expected, state
        assert enc.encode(text) == expected, state


def three_byte_letter(b: bytes, i: int) -> bool:
    """Whether b[i:i+3] is a three-byte UTF-8 letter's bytes: a lead 0xE0-0xEF and two
    continuation bytes (CJK, kana, Hangul, Thai, Devanagari...)."""
    return (
        i + 3 <= len(b)
        and 0xE0 <= b[i] <= 0xEF
        and 0x80 <= b[i + 1] <= 0xBF
        and 0x80 <= b[i + 2] <= 0xBF
    )


def rank_bpe(
    ranks: dict[bytes, int], parts: list[bytes], *, stop: int = 1
) -> tuple[list[bytes], int]:
    """tiktoken's rule over ``parts`` (join the leftmost adjacent pair whose bytes have the
    lowest rank) until ``stop`` parts are left or no pair is a token: the parts and the number
    of joins made."""
    parts = list(parts)
    made = 0
    while len(parts) > stop:
        joined = [ranks.get(a + b, NO_TOKEN) for a, b in pairwise(parts)]
        best = min(joined)
        if best == NO_TOKEN:
            break
        i = joined.index(best)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
        made += 1
    return parts, made


def rank_file_of(*longer: bytes, without: bytes = b"") -> bytes:
    """A rank file: every byte but those in ``without``, in byte order, then ``longer`` in the
    order given (ranks from 0)."""
    import base64

    pieces = [bytes([i]) for i in range(256) if i not in without] + list(longer)
    return b"".join(base64.b64encode(p) + f" {r}\n".encode() for r, p in enumerate(pieces))


def encode_module() -> Any:
    """The compiled encoder module; skip where it is not built, except under CI, where its
    absence fails (the build must have compiled it)."""
    from tokembed.tokenizer._native import load

    module = load("_encode")
    if module is None:
        reason = "tokembed.tokenizer._native._encode is not built (no compiler, or pure Python)"
        if os.environ.get("CI") == "true" and os.environ.get("TOKEMBED_PURE_PYTHON", "") in (
            "",
            "0",
        ):
            pytest.fail(reason)
        pytest.skip(reason)
    return module


def hf_peer(name: str) -> Any:
    """HF ``tokenizers`` on one of the shared tokenizer folders: its tokenizer.json, or GPT-2's
    vocab.json + merges.txt with the byte-level pre-tokenizer."""
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    folder = data_path("tokenizers", name)
    if (folder / "tokenizer.json").is_file():
        return HFTokenizer.from_file(str(folder / "tokenizer.json"))
    peer = HFTokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    peer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    peer.decoder = decoders.ByteLevel()
    return peer
