"""Which texts are kept away from tiktoken's core: runs longer than LIMIT of one class."""

from __future__ import annotations

from tokembed.tokenizer._long_runs import _BLOCK, LIMIT, has_long_run


def test_threshold_is_exact_for_every_class() -> None:
    for unit in ("a", "7", " ", "\n", "!", "中", "\u0301"):
        assert not has_long_run(unit * LIMIT)
        assert has_long_run("x1" + unit * (LIMIT + 1) + "x1")
    # Letters and combining marks form one class, as the o200k pattern joins them.
    assert has_long_run("e\u0301" * (LIMIT // 2 + 1))


def test_mixed_text_has_no_long_run() -> None:
    text = "Hello, world 123! Привет мир 中文\n" * 10_000
    assert len(text) > _BLOCK // 20
    assert not has_long_run(text)


def test_a_run_across_a_block_edge_is_found() -> None:
    head = "a1" * ((_BLOCK - LIMIT // 2) // 2)
    assert has_long_run(head + " " * (LIMIT + 1) + "x")
    assert not has_long_run(head + " " * LIMIT + "x")
