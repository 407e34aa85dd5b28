"""Tokenizer specs: PATH@ENCODING and NAME@ENCODING split once, by one rule, for every caller."""

from __future__ import annotations

from pathlib import Path

from tokembed.tokenizer.formats.specs import split_spec


def test_a_spec_that_does_not_exist_splits_at_its_last_at(tmp_path: Path) -> None:
    rank_file = tmp_path / "o200k_base.tiktoken"
    rank_file.write_text("YQ== 0\n")
    assert split_spec(f"{rank_file}@o200k_harmony") == (str(rank_file), "o200k_harmony")
    assert split_spec("o200k_base@o200k_harmony") == ("o200k_base", "o200k_harmony")  # a name
    assert split_spec("a@b@qwen") == ("a@b", "qwen")


def test_a_spec_that_exists_or_has_an_empty_side_stays_whole(tmp_path: Path) -> None:
    odd = tmp_path / "vocab@v2.json"
    odd.write_text("{}")
    assert split_spec(str(odd)) == (str(odd), None)
    for spec in ("o200k_base", "x@", "@qwen", "@"):
        assert split_spec(spec) == (spec, None)
