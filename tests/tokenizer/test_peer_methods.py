"""tiktoken's and HF tokenizers' names on Tokenizer, checked against those libraries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import data_path, pud_text
from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer import Tokenizer
from tokembed.tokenizer._peer_methods import char_offsets
from tokembed.tokenizer.encode import join_surrogate_pairs
from tokembed.tokenizer.formats import export_hf, get_encoding, load_tokenizer


@pytest.fixture(scope="module")
def cl100k(tiktoken_cache: Path) -> tuple[Tokenizer, object]:
    import tiktoken

    return get_encoding("cl100k_base"), tiktoken.get_encoding("cl100k_base")


def test_char_offsets_of_split_characters() -> None:
    assert char_offsets([b"a", b"\xd0", b"\x9f", b"b"]) == [0, 1, 1, 2]
    assert char_offsets([b"\xf0\x9f", b"\x91\x8d", b"!"]) == [0, 0, 1]


@given(st.text())
def test_surrogate_pairs_join_to_the_same_text(text: str) -> None:
    as_pairs = text.encode("utf-16-le").decode("utf-16-le", "surrogatepass")
    assert join_surrogate_pairs(as_pairs) == text


def test_lone_surrogate_is_located() -> None:
    with pytest.raises(TokenizerError) as e:
        join_surrogate_pairs("ok \udc4d\ud83d\udc4d")
    assert (e.value.code, e.value.value) == ("LONE_SURROGATE", 3)


def test_tiktoken_attributes_equal_tiktokens(cl100k: tuple[Tokenizer, object]) -> None:
    tok, enc = cl100k
    assert (tok.n_vocab, tok.max_token_value, tok.eot_token) == (100_277, 100_276, 100_257)
    assert (tok.n_vocab, tok.max_token_value, tok.eot_token) == (
        enc.n_vocab, enc.max_token_value, enc.eot_token,  # type: ignore[attr-defined]
    )  # fmt: skip
    assert tok.special_tokens_set == enc.special_tokens_set  # type: ignore[attr-defined]
    assert tok.token_byte_values() == enc.token_byte_values()  # type: ignore[attr-defined]
    text = pud_text("ko")[:3000]
    ids = tok.encode(text)
    np.testing.assert_array_equal(tok.encode_to_numpy(text), enc.encode_to_numpy(text))  # type: ignore[attr-defined]
    assert tok.encode_to_numpy(text).dtype == np.uint32
    assert tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)  # type: ignore[attr-defined]
    assert tok.decode_with_offsets(ids) == enc.decode_with_offsets(ids)  # type: ignore[attr-defined]
    cut = [ids[:7], ids[7:20]]
    assert tok.decode_bytes_batch(cut) == enc.decode_bytes_batch(cut)  # type: ignore[attr-defined]
    assert tok.decode([ids[0], 0x80 - 33, ids[1]], errors="ignore") == enc.decode(  # type: ignore[attr-defined]
        [ids[0], 0x80 - 33, ids[1]], errors="ignore"
    )
    with pytest.raises(KeyError):
        tok.decode_single_token_bytes(100_256)  # a hole in cl100k's id range
    with pytest.raises(KeyError):
        tok.encode_single_token("hello world")


@pytest.mark.parametrize(
    "text", ["hello fanta", "hello world ", "hello\n\n", "привет ми", "x", "a <|endoftext|>"]
)
def test_encode_with_unstable_equals_tiktoken(cl100k: tuple[Tokenizer, object], text: str) -> None:
    tok, enc = cl100k
    stable, completions = tok.encode_with_unstable(text, allowed_special="all")
    theirs = enc.encode_with_unstable(text, allowed_special="all")  # type: ignore[attr-defined]
    assert (stable, completions) == (theirs[0], {tuple(c) for c in theirs[1]})
    for c in completions:
        assert tok.decode_bytes(stable + list(c)).startswith(text.encode())


def test_encode_batch_num_threads_is_workers(cl100k: tuple[Tokenizer, object]) -> None:
    tok, enc = cl100k
    texts = [pud_text(lang)[:2000] for lang in ("en", "ru", "zh")]
    ours = tok.encode_batch(texts, num_threads=2, progress=False)
    assert ours == enc.encode_batch(texts, num_threads=2)  # type: ignore[attr-defined]
    assert tok.decode_batch(ours) == texts
    with pytest.raises(UsageError) as e:
        tok.encode_batch(texts, workers=2, num_threads=3)
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("name", ["smollm2-135m", "gpt2-hf"])
def test_hf_names_equal_hf_tokenizers(name: str, tmp_path: Path) -> None:
    from tokenizers import Tokenizer as HFTokenizer

    tok = load_tokenizer(data_path("tokenizers", name))
    hf = HFTokenizer.from_file(str(export_hf(tok, tmp_path)))
    assert tok.get_vocab_size() == hf.get_vocab_size()
    assert tok.get_vocab_size(with_added_tokens=False) == hf.get_vocab_size(with_added_tokens=False)
    assert tok.get_vocab() == hf.get_vocab()
    for i in [0, 1, 2, 50, 255, 256, 1000, tok.max_token_value]:
        assert tok.id_to_token(i) == hf.id_to_token(i)
        token = tok.id_to_token(i)
        assert token is not None
        assert tok.token_to_id(token) == hf.token_to_id(token)
    assert tok.token_to_id("no such token ☃") is hf.token_to_id("no such token ☃") is None
    assert tok.id_to_token(10**7) is hf.id_to_token(10**7) is None
    doc = json.loads((tmp_path / "tokenizer.json").read_text())
    assert doc["model"]["type"] == "BPE"
