"""Regex spelling between `regex` and Oniguruma: the translated pattern chunks text identically."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.tokenizer.oniguruma import from_onig, to_onig
from tokembed.tokenizer.patterns import PATTERNS

tokenizers = pytest.importorskip("tokenizers")


def _hf_chunks(pattern: str, text: str) -> list[str]:
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
    return [piece for piece, _ in split.pre_tokenize_str(text)]


def _our_chunks(pattern: str, text: str) -> list[str]:
    out, pos = [], 0
    for m in regex.finditer(pattern, text):
        if m.start() == m.end():
            continue
        if m.start() > pos:
            out.append(text[pos : m.start()])
        out.append(m.group())
        pos = m.end()
    return out + ([text[pos:]] if pos < len(text) else [])


def test_known_rewrites() -> None:
    assert to_onig(r"\p{N}{1,3}+") == r"(?>\p{N}{1,3})"
    assert to_onig(r"\s++$") == r"\s++\Z"
    assert to_onig(r"[$]{2}+\$") == r"(?>[$]{2})\$"
    assert from_onig(r"\d{1,3}+$") == r"(?:\d{1,3})+(?m:$)"
    assert to_onig(PATTERNS["o200k"]) == PATTERNS["o200k"]  # nothing to change


@pytest.mark.parametrize("text", ["12345 678\n", "a  \n\n  b \n", "x 1234567890 \t\n", "  \n"])
@pytest.mark.parametrize("preset", ["cl100k", "r50k", "teaching"])
def test_presets_chunk_the_same_in_both_engines(preset: str, text: str) -> None:
    assert _hf_chunks(to_onig(PATTERNS[preset]), text) == _our_chunks(PATTERNS[preset], text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab1 \n\t.Я5", max_size=30))
def test_cl100k_chunks_agree_on_random_text(text: str) -> None:
    pattern = PATTERNS["cl100k"]
    assert _hf_chunks(to_onig(pattern), text) == _our_chunks(pattern, text)
