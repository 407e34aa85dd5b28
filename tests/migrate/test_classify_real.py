"""classify_change on real tokenizers read from three formats."""

from __future__ import annotations

import pytest
from _smollm2 import ADDED, extended, tokenizer

from conftest import data_path
from tokembed.errors import CheckpointError
from tokembed.migrate import classify_change, row_map
from tokembed.tokenizer import BPETables, Tokenizer
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


def test_gpt2_files_vs_r50k_ranks_is_a_replacement_with_full_overlap() -> None:
    # Same 50,257 symbols at the same ids, but another pre-tokenizer regex: equal pieces
    # are only an overlap until the pre-tokenizers are proved equal, so no exact map by default.
    gpt2 = load_tokenizer(data_path("tokenizers", "gpt2-hf"))
    r50k = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    change = classify_change(gpt2, r50k)
    assert (change.kind, change.pretokenizer_changed, len(change.exact)) == (
        "replacement",
        True,
        50257,
    )
    assert (change.added, change.removed, change.moved) == ((), (), ())
    with pytest.raises(CheckpointError) as err:
        row_map(change)
    assert err.value.code == "SEMANTICS_CHANGED"
    assert len(row_map(change, accept_overlap=True).pairs) == 50257
