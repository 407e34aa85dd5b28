"""classify_change on real tokenizers read from three formats."""

from __future__ import annotations

import pytest
from _smollm2 import ADDED, extended, tokenizer

from conftest import data_path
from tokembed.errors import CheckpointError
from tokembed.migrate import classify_change, row_map
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
from tokembed.tokenizer.formats import load_tokenizer


def test_smollm2_with_added_specials_is_append_only() -> None:
    old = tokenizer()
    change = classify_change(old, extended(old))
    assert change.kind == "append-only"
    assert change.added == tuple(range(49152, 49152 + len(ADDED)))
    assert len(change.exact) == 49152
    assert row_map(change).is_prefix


def test_smollm2_with_a_moved_special_is_not_append_only() -> None:
    old = tokenizer()
    specials = dict(old.tables.specials)
    name = next(n for n, i in specials.items() if i == 0)
    specials[name] = 49152  # the special at id 0 moves past the end: every shape stays valid
    moved = Tokenizer(
        pretokenizer=old.pretokenizer,
        tables=BPETables(pieces=old.tables.pieces, merges=old.tables.merges, specials=specials),
    )
    change = classify_change(old, moved)
    assert (change.kind, change.moved_specials) == ("permutation", (name,))
    with pytest.raises(CheckpointError) as err:
        change.require_append_only()
    assert err.value.code == "NOT_APPEND_ONLY"


def test_gpt2_files_vs_r50k_ranks_is_dialect_only_with_the_identity_map() -> None:
    # Same 50,257 symbols at the same ids and the same merges (identical vocabulary digest);
    # only the regex and whose engine reads it differ (tiktoken's r50k pattern vs Hugging
    # Face's form of GPT-2's). Their Unicode tables agree on every class these patterns use,
    # so no code point splits differently, and the map is the identity, no accept_overlap.
    gpt2 = load_tokenizer(data_path("tokenizers", "gpt2-hf"))
    r50k = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    assert (gpt2.pretokenizer.dialect, r50k.pretokenizer.dialect) == ("huggingface", "tiktoken")
    for old, new in ((gpt2, r50k), (r50k, gpt2)):
        change = classify_change(old, new)
        assert (change.kind, change.pretokenizer_changed, len(change.exact)) == (
            "dialect-only",
            True,
            50257,
        )
        assert (change.added, change.removed, change.moved, change.dialect_points) == (
            (),
            (),
            (),
            (),
        )
        assert change.old_vocab_digest == change.new_vocab_digest
        evidence = change.evidence()
        assert (evidence["kind"], evidence["dialect_points"]) == ("dialect-only", 0)
        rows = row_map(change)  # no accept_overlap needed
        assert (rows.source, rows.is_prefix) == (tuple(range(50257)), True)
        with pytest.raises(CheckpointError) as err:
            change.require_append_only()
        assert err.value.code == "NOT_APPEND_ONLY"
        assert "regex engine changed" in err.value.message
    text = "Hello, мир! 12345 中文 😀\n\n  x"
    assert gpt2.encode_ordinary(text) == r50k.encode_ordinary(text)


def test_same_pattern_in_another_dialect_lists_where_the_engines_split_differently() -> None:
    # \w is one class the two engines' tables disagree on: Oniguruma (Hugging Face) counts
    # superscript digits, vulgar fractions and the zero-width joiners as word characters,
    # Rust's regex (tiktoken) does not. r50k's table under such a pattern in both dialects.
    r50k = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    stages = (r"\w+|\s+|[^\w\s]+",)
    ours = Tokenizer(pretokenizer=Pretokenizer(stages=stages), tables=r50k.tables)
    hf = Tokenizer(
        pretokenizer=Pretokenizer(stages=stages, dialect="huggingface"), tables=r50k.tables
    )
    change = classify_change(ours, hf)
    assert (change.kind, change.pretokenizer_changed) == ("dialect-only", True)
    assert change.dialect_points == (0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE, 0x200C, 0x200D)
    assert change.evidence()["first_dialect_points"] == [
        "U+00B2",
        "U+00B3",
        "U+00B9",
        "U+00BC",
        "U+00BD",
    ]
    for c in change.dialect_points:  # each one really splits differently
        assert ours.pretokenizer.split(f"a{chr(c)}b") != hf.pretokenizer.split(f"a{chr(c)}b")
    assert row_map(change).source == tuple(range(50257))
    # The same dialect on both sides is no change at all.
    assert classify_change(ours, ours).kind == "append-only"


def test_another_grammar_on_the_same_table_stays_a_replacement() -> None:
    # cl100k's pattern splits digits in threes: another grammar, not another engine.
    r50k = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    other = Tokenizer(pretokenizer=Pretokenizer.preset("cl100k"), tables=r50k.tables)
    change = classify_change(r50k, other)
    assert (change.kind, change.dialect_points) == ("replacement", ())
    with pytest.raises(CheckpointError) as err:
        row_map(change)
    assert err.value.code == "SEMANTICS_CHANGED"
    assert len(row_map(change, accept_overlap=True).pairs) == 50257
