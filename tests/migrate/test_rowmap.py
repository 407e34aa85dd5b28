"""RowMap: exact edges only, injective, with padding rows kept and a JSON round trip."""

from __future__ import annotations

import pytest
import torch
from _fixtures import base, make
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import CheckpointError
from tokembed.migrate import RowMap, check_row_map, classify_change, row_map

H, I, BANG = 104, 105, 33


def test_append_only_map_is_a_prefix_and_lists_new_rows() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300, "<|im|>": 302})
    rows = row_map(classify_change(base(), new))
    assert (rows.old_rows, rows.new_rows, rows.new_row_ids, rows.is_prefix) == (
        301,
        303,
        (301, 302),
        True,
    )
    # Holes 258..299 are named by neither side: kept at their index.
    assert rows.source[258:300] == tuple(range(258, 300))


def test_padded_model_keeps_padding_rows_and_grows_into_them() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300, "<|im|>": 301})
    rows = row_map(classify_change(base(), new), old_rows=320)
    assert rows.new_rows == 320  # the new id fits in the old padding
    assert rows.new_row_ids == (301,)
    assert rows.source[302:] == tuple(range(302, 320))


def test_permutation_map_moves_rows_and_maps_ids() -> None:
    new = make([(H, I, 257), (BANG, BANG, 256)], {"<|end|>": 300})
    rows = row_map(classify_change(base(), new))
    assert (rows.source[256], rows.source[257], rows.is_prefix) == (257, 256, False)
    assert rows.map_ids(torch.tensor([256, 257, 300])).tolist() == [257, 256, 300]


def test_dropped_id_cannot_be_mapped() -> None:
    old = base()
    from tokembed.tokenizer import Tokenizer

    new = Tokenizer(pretokenizer=old.pretokenizer, tables=old.tables.truncated(1))
    rows = row_map(classify_change(old, new), new_rows=301)
    with pytest.raises(CheckpointError) as err:
        rows.map_ids(torch.tensor([5, 257]))
    assert (err.value.code, err.value.value) == ("ROW_MAP_INVALID", 257)


def test_not_injective_is_refused() -> None:
    with pytest.raises(CheckpointError) as err:
        RowMap(old_rows=3, new_rows=3, source=(0, 0, 1))
    assert err.value.code == "ROW_MAP_INVALID"


@pytest.mark.failure_lab("3.1")
def test_table_smaller_than_its_tokenizer_is_refused() -> None:
    """Tokenizer vocabulary and embedding row count mismatch."""
    with pytest.raises(CheckpointError) as err:
        row_map(classify_change(base(), base()), old_rows=300)
    assert (err.value.code, err.value.value) == ("ROW_COUNT_MISMATCH", (300, 301))


def test_pretokenizer_change_needs_a_declared_overlap() -> None:
    new = make([(H, I, 256), (BANG, BANG, 257)], {"<|end|>": 300}, preset="cl100k")
    change = classify_change(base(), new)
    with pytest.raises(CheckpointError) as err:
        row_map(change)
    assert err.value.code == "SEMANTICS_CHANGED"
    assert len(row_map(change, accept_overlap=True).pairs) == 301


@pytest.mark.failure_lab("3.7")
def test_hand_added_edge_between_different_symbols_is_refused() -> None:
    """An approximate initializer is recorded as an exact row copy."""
    new = make([(H, I, 256), (BANG, BANG, 257), (256, BANG, 301)], {"<|end|>": 300})
    rows = row_map(classify_change(base(), new))
    check_row_map(rows, base(), new)
    # "hi!" (301) is close to "hi" (256), but not the same symbol: not an exact edge.
    source = list(rows.source)
    source[301], source[256] = 256, -1
    forged = RowMap(old_rows=rows.old_rows, new_rows=rows.new_rows, source=tuple(source))
    with pytest.raises(CheckpointError) as err:
        check_row_map(forged, base(), new)
    assert (err.value.code, err.value.value) == ("APPROXIMATE_AS_EXACT", (256, 301))


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_json_round_trip(data: st.DataObject) -> None:
    old_rows = data.draw(st.integers(0, 30))
    new_rows = data.draw(st.integers(0, 30))
    targets = data.draw(st.permutations(list(range(new_rows))))
    kept = data.draw(st.integers(0, min(old_rows, new_rows)))
    olds = data.draw(st.permutations(list(range(old_rows))))[:kept]
    source = [-1] * new_rows
    for j, v in zip(olds, targets[:kept], strict=True):
        source[v] = j
    rows = RowMap(old_rows=old_rows, new_rows=new_rows, source=tuple(source))
    back = RowMap.from_json(rows.to_json())
    assert back.source == rows.source
    assert back.digest == rows.digest
