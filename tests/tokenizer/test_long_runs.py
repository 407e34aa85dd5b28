"""Which texts are kept away from tiktoken's core: whitespace runs longer than LIMIT."""

from __future__ import annotations

from tokembed.tokenizer._long_runs import _BLOCK, LIMIT, has_long_whitespace


def test_threshold_is_exact_for_any_whitespace() -> None:
    for unit in (" ", "\n", "\t", "\u3000", "\x0b"):
        assert not has_long_whitespace("x" + unit * LIMIT + "x")
        assert has_long_whitespace("x" + unit * (LIMIT + 1) + "x")
    assert has_long_whitespace(" \n\t" * (LIMIT // 3 + 1))


def test_other_runs_and_ordinary_text_stay_on_tiktoken() -> None:
    for unit in ("a", "7", "!", "中", "\x1c"):  # \x1c: str.isspace() says yes, \s says no
        assert not has_long_whitespace(unit * (2 * LIMIT))
    assert not has_long_whitespace("Hello, world 123! Привет мир 中文\n   " * 20_000)


def test_a_run_across_a_block_edge_is_found() -> None:
    head = "a1" * ((_BLOCK - LIMIT // 2) // 2)
    assert has_long_whitespace(head + " " * (LIMIT + 1) + "x")
    assert not has_long_whitespace(head + " " * LIMIT + "x")
