"""classify_change: each kind of vocabulary change is named, with its evidence."""

from __future__ import annotations

import pytest
from _fixtures import base, make

from tokembed.errors import CheckpointError, EmbeddingError
from tokembed.migrate import classify_change, ordered_vocab_digest
from tokembed.tokenizer import BPETables, Tokenizer

H, I, BANG = 104, 105, 33


def test_identical_tokenizers_are_append_only_with_nothing_added() -> None:
    change = classify_change(base(), base())
    assert (change.kind, change.added, change.removed, change.moved) == ("append-only", (), (), ())
    assert len(change.exact) == 256 + 2 + 1
    change.require_append_only()


def test_appended_merge_and_special_are_append_only() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300, "<|im|>": 302})
    change = classify_change(base(), new)
    assert change.kind == "append-only"
    assert change.added == (301, 302)
    assert change.merges_extend
    assert change.merged == ((301, (256, BANG)),)  # evidence: "hi!" was two old ids


@pytest.mark.failure_lab("3.6")
def test_reordered_vocabulary_is_never_called_append_only() -> None:
    """A reordered vocabulary is called append-only."""
    # Same pieces and merges, ids of "hi" and "!!" swapped: every shape stays valid.
    new = make([(H, I, 257), (BANG, BANG, 256)], {"<|end|>": 300})
    change = classify_change(base(), new)
    assert change.kind == "permutation"
    assert change.moved == ((257, 256), (256, 257))
    with pytest.raises(CheckpointError) as err:
        change.require_append_only()
    assert err.value.code == "NOT_APPEND_ONLY"
    assert err.value.value == (257, 256)


def test_moved_special_is_reported_by_name() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 258})
    change = classify_change(base(), new)
    assert (change.kind, change.moved_specials, change.moved) == (
        "permutation",
        ("<|end|>",),
        ((300, 258),),
    )


def test_added_special_inside_the_old_id_range_is_not_append_only() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300, "<|im|>": 280})
    change = classify_change(base(), new)
    assert change.kind == "mixed"
    with pytest.raises(CheckpointError, match="inside the old id range"):
        change.require_append_only()


def test_reordered_merges_are_not_append_only() -> None:
    new = make([(BANG, BANG, 257), (H, I, 256)], {"<|end|>": 300})
    change = classify_change(base(), new)
    assert (change.kind, change.merges_extend) == ("mixed", False)


def test_removal() -> None:
    old = base()
    new = Tokenizer(pretokenizer=old.pretokenizer, tables=old.tables.truncated(1))
    change = classify_change(old, new)
    assert (change.kind, change.removed, change.added) == ("removal", (257,), ())


def test_split() -> None:
    old = make([(H, I, 256), (256, BANG, 257)], {})  # "hi", "hi!"
    new = make([(I, BANG, 258)], {})  # "i!": "hi!" is now h + "i!"
    change = classify_change(old, new)
    assert change.kind == "split"
    assert dict(change.split) == {256: (H, I), 257: (H, 258)}


def test_merge() -> None:
    old = make([(H, I, 256), (BANG, BANG, 257)], {})  # "hi", "!!"
    new = make([(H, I, 256), (256, BANG, 258), (258, BANG, 259)], {})  # "hi!", "hi!!"
    change = classify_change(old, new)
    assert change.kind == "merge"
    assert dict(change.merged)[259] == (256, 257)


def test_another_pretokenizer_is_a_replacement() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300}, preset="cl100k")
    change = classify_change(base(), new)
    assert (change.kind, change.pretokenizer_changed) == ("replacement", True)


def test_equal_size_other_assignment_has_another_vocab_digest() -> None:
    """Equal id ranges with another assignment have another ordered-vocabulary digest."""
    swapped = make([(H, I, 257), (BANG, BANG, 256)], {"<|end|>": 300})
    assert swapped.tables.id_range == base().tables.id_range
    assert ordered_vocab_digest(swapped) != ordered_vocab_digest(base())


@pytest.mark.failure_lab("1.2")
def test_equal_size_tables_are_not_address_compatible() -> None:
    """Equal vocabulary size admitted as address compatibility.

    A table bound to one tokenizer refuses ids from another of the same V.
    """
    from tokembed.embedding import AddressedIds, TokenEmbedding

    old, swapped = base(), make([(H, I, 257), (BANG, BANG, 256)], {"<|end|>": 300})
    assert swapped.tables.id_range == old.tables.id_range  # same V, same shapes
    table = TokenEmbedding(old.tables.id_range, 4)
    table.bind_address(old)
    ids = swapped.encode("hi!!")
    assert table(AddressedIds.from_lists([ids], source=old)).shape == (1, len(ids), 4)
    with pytest.raises(EmbeddingError) as err:
        table(AddressedIds.from_lists([ids], source=swapped))
    assert err.value.code == "ADDRESS_HASH_MISMATCH"


def test_aliases_keep_their_id() -> None:
    tables = BPETables.byte_level(merges=[], specials={"<|a|>": 256, "<|b|>": 256})
    old = Tokenizer(pretokenizer=base().pretokenizer, tables=tables)
    assert classify_change(old, old).kind == "append-only"
