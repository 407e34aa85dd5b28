"""Encodings by name through tiktoken's cache: equal to tiktoken, and clear when unavailable."""

from __future__ import annotations

from pathlib import Path

import pytest
from _formats_data import pud_texts

from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.formats import (
    encoding_for_model,
    get_encoding,
    list_encoding_names,
    load_tokenizer,
    tiktoken_cache_dir,
)


def test_name_loads_through_tiktokens_cache_like_tiktoken(tiktoken_cache: Path) -> None:
    import tiktoken

    assert tiktoken_cache_dir() == tiktoken_cache
    tok = load_tokenizer("cl100k_base")
    assert tok is get_encoding("cl100k_base")  # loaded once per process, as tiktoken does
    enc = tiktoken.get_encoding("cl100k_base")
    assert (tok.name, tok.n_vocab, tok.special_tokens) == (
        "cl100k_base",
        100_277,
        enc._special_tokens,
    )
    for lang in ("ru", "zh", "hi"):
        text = pud_texts()[lang]
        assert tok.encode(text) == enc.encode(text)
    assert encoding_for_model("gpt-4").name == "cl100k_base"


def test_name_with_another_encodings_specials(tiktoken_cache: Path) -> None:
    tok = load_tokenizer("o200k_base", encoding="o200k_harmony")
    assert tok.name == "o200k_harmony"
    assert tok.encode("<|start|>user<|message|>Привет", allowed_special="all") == [
        200006, 1428, 200008, 23881, 131903,
    ]  # fmt: skip


def test_offline_error_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(UsageError) as e:
        load_tokenizer("r50k_base")
    assert e.value.code == "ENCODING_UNAVAILABLE"
    # tiktoken's cache key: SHA-1 of the address it downloads from
    assert str(tmp_path / "0ea1e91bbb3a60f729a8dc8f777fd2fc07cd8df4") in str(e.value)
    assert "r50k_base.tiktoken" in str(e.value.fix)


def test_unknown_names_are_usage_errors_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        load_tokenizer("o200k_bse")
    assert (e.value.code, e.value.exit_code) == ("UNKNOWN_ENCODING", 2)
    assert "did you mean 'o200k_base'" in str(e.value)
    with pytest.raises(UsageError) as e:
        encoding_for_model("no-such-model")
    assert e.value.code == "UNKNOWN_ENCODING"
    with pytest.raises(UsageError) as e:
        load_tokenizer("qwen")  # a pattern and specials, no published ranks
    assert e.value.code == "ENCODING_UNAVAILABLE"
    with pytest.raises(UsageError) as e:
        load_tokenizer(tmp_path / "missing.json")
    assert e.value.code == "FILE_NOT_FOUND"
    assert set(list_encoding_names()) >= {"gpt2", "r50k_base", "cl100k_base", "o200k_base"}


def test_a_text_file_is_not_called_a_rank_file(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Hello world, this is a corpus.\n")
    with pytest.raises(FormatError) as e:
        load_tokenizer(corpus)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"
    assert "is not a tokenizer file" in str(e.value)
    assert "rank file" not in e.value.message
