"""Special tokens: id assignment, aliases, and tiktoken's encode-time policy."""

from __future__ import annotations

from typing import Any

import pytest
from _core_data import pud_tokenizer

from tokembed.errors import TokenizerError
from tokembed.tokenizer.special import aliases, assign_special_ids

TEXTS = [
    "plain text only",
    "a<|endoftext|>b",
    "<|fim|><|endoftext|>",
    "x <|a|> y <|b|>",
    "<|endoftext",  # incomplete spelling: ordinary text
    "two <|endoftext|><|endoftext|> в тексте",
]
POLICIES: list[dict[str, Any]] = [
    {},
    {"allowed_special": "all"},
    {"allowed_special": {"<|endoftext|>"}},
    {"disallowed_special": ()},
    {"allowed_special": {"<|fim|>"}, "disallowed_special": ()},
    {"disallowed_special": {"<|fim|>"}},
    {"allowed_special": {"<|a|>", "<|endoftext|>"}, "disallowed_special": {"<|fim|>"}},
]


def test_assign_ids_skips_explicit_ones() -> None:
    assert assign_special_ids({"a": None, "b": 10, "c": None}, first_free=10) == {
        "a": 11,
        "b": 10,
        "c": 12,
    }
    assert aliases({"x": 3, "y": 4, "z": 3}) == {3: ("x", "z")}


@pytest.fixture(scope="module")
def pair() -> tuple[Any, Any]:
    import tiktoken

    tok = pud_tokenizer()
    ranks = {piece: i for i, piece in tok.tables.pieces.items()}
    peer = tiktoken.Encoding(
        "peer",
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=ranks,
        special_tokens=tok.special_tokens,
    )
    return tok, peer


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("text", TEXTS)
def test_policy_matches_tiktoken(pair: tuple[Any, Any], policy: dict[str, Any], text: str) -> None:
    tok, peer = pair
    try:
        expected = peer.encode(text, **policy)
    except ValueError as exc:
        peer_message = str(exc)
    else:
        assert tok.encode(text, **policy) == expected
        return
    # ValueError is what tiktoken raises, so code written for it catches ours.
    with pytest.raises(ValueError, match="SPECIAL_TOKEN_DISALLOWED") as e:
        tok.encode(text, **policy)
    assert isinstance(e.value, TokenizerError)
    assert e.value.code == "SPECIAL_TOKEN_DISALLOWED"
    assert repr(e.value.value) in peer_message  # the same token is named
    assert "allowed_special" in str(e.value)
    assert "disallowed_special=()" in str(e.value)


def test_ordinary_ignores_specials_and_alias_ids() -> None:
    tok = pud_tokenizer()
    assert tok.encode_ordinary("<|a|>") == tok.encode("<|a|>", disallowed_special=())
    assert tok.encode("<|a|><|b|>", allowed_special="all") == [5000, 5000]
    assert tok.aliases == {5000: ("<|a|>", "<|b|>")}
    assert tok.decode([5000, 2256]) == "<|a|><|endoftext|>"
    assert tok.special_tokens["<|endoftext|>"] == 2256  # first id after the 2000 merges


def test_unknown_special_names_are_refused() -> None:
    tok = pud_tokenizer()
    for kwargs in ({"allowed_special": {"<|nope|>"}}, {"disallowed_special": {"<|nope|>"}}):
        with pytest.raises(TokenizerError) as e:
            tok.encode("x", **kwargs)
        assert e.value.code == "UNKNOWN_SPECIAL_TOKEN"
    with pytest.raises(TokenizerError) as e2:
        tok.special_id("<|nope|>")
    assert e2.value.code == "UNKNOWN_SPECIAL_TOKEN"
    assert tok.special_id("<|fim|>") == 2257
