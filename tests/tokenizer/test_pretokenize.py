"""The findall fast path of Pretokenizer.split equals the match-and-gap scan it replaces."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.tokenizer import PATTERNS, Pretokenizer


def _scan(pattern: str, text: str) -> list[str]:
    """The general match-and-gap scan: a capturing group around the whole pattern keeps
    every match the same but disables the findall fast path (it needs no groups)."""
    return Pretokenizer.preset(f"({pattern})").split(text)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_presets_on_pud(name: str) -> None:
    pre = Pretokenizer.preset(name)
    for lang in PUD_LANGS:
        text = pud_text(lang)[:20000]
        assert pre.split(text) == _scan(PATTERNS[name], text)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab \n1'.", max_size=40))
def test_gappy_and_empty_matching_patterns(text: str) -> None:
    for pattern in (r"a+", r"a*", r"b|(?=a)", r"\s+(?!\S)|\s+", PATTERNS["teaching"]):
        assert Pretokenizer.preset(pattern).split(text) == _scan(pattern, text)


def test_catastrophic_backtracking_is_bounded_with_a_clear_error() -> None:
    import time

    from tokembed.errors import UsageError
    from tokembed.tokenizer.pretokenize import time_limit

    pre = Pretokenizer.preset(r"(a|a)+$")
    assert time_limit(r"(a|a)+$", 100) == 2.002
    assert time_limit(PATTERNS["cl100k"], 10**9) is None
    start = time.monotonic()
    with pytest.raises(UsageError) as e:
        pre.split("a" * 40 + "!")
    assert e.value.code == "INVALID_PATTERN"
    assert "backtracks" in str(e.value)
    assert time.monotonic() - start < 60  # unbounded, this takes about 2^40 steps
    assert pre.split("aaa") == ["aaa"]  # the same pattern on benign text still works


def test_a_stage_whose_dialect_rewrite_does_not_compile_is_refused_when_made() -> None:
    """A fuzzed rank-file sidecar's split pattern: ``regex`` compiles it as written, but its
    rewrite for the tiktoken dialect (a group put where ``regex`` reads a class) does not, so
    splitting failed with regex's own error on the first text; it is refused when made."""
    from tokembed.errors import UsageError
    from tokembed.tokenizer.dialect import dialect_pattern

    stage = "():\\]s\\p[L\\\\p{}\\p{N}!]()S\\\\\\ss"
    assert dialect_pattern(stage, "tiktoken") != stage
    with pytest.raises(UsageError) as e:
        Pretokenizer(stages=(stage,))
    assert e.value.code == "INVALID_PATTERN"
    assert e.value.value == stage
    assert Pretokenizer(stages=(r"\p{N}+|[^\p{N}]+",)).split("a1b22") == ["a", "1", "b", "22"]
