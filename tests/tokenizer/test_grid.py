"""The grid of pair ranks (``encode_tables.h``): joins of two ids below its side are answered
from it (a bit per cell, the joining cells' ranks packed) instead of a table lookup, so every
cell, read back through the encoder's own lookup, must be exactly the rank the tables would
give, and the ids must not change with the grid on or off.

Every cell is checked by brute force against the vocabulary itself: for a rank file, the
rank of the two pieces' bytes joined (tiktoken's rule); for a merge list, the first merge of
that pair (HF's rule).
"""

from __future__ import annotations

import numpy as np
import pytest
from _core_data import assert_switch_keeps_ids, encode_module, hf_peer, rank_vocab, switched_tables

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.tokenizer.compiled import compiled_tables
from tokembed.tokenizer.formats import load_tokenizer

RANK_FILES = ["cl100k_base", "o200k_base", "qwen"]
NEVER = 0xFFFFFFFF


def _cells(tables: object) -> np.ndarray:
    found = tables.grid()  # type: ignore[attr-defined]
    assert found is not None, "a vocabulary of over 1,024 ranks has a grid"
    dim, cells = found
    return np.frombuffer(cells, dtype=np.uint32).reshape(dim, dim)


@pytest.mark.parametrize("name", RANK_FILES)
def test_every_cell_of_a_rank_file_grid_is_the_rank_of_the_joined_bytes(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, ranks, _ = rank_vocab(name)
    grid = _cells(switched_tables(monkeypatch, "TOKEMBED_GRID", True, data))
    dim = grid.shape[0]
    piece = {r: p for p, r in ranks.items() if r < dim}
    expected = np.full((dim, dim), NEVER, dtype=np.uint32)
    for a in range(dim):
        for b in range(dim):
            expected[a, b] = ranks.get(piece[a] + piece[b], NEVER)
    assert np.array_equal(grid, expected)
    assert 0 < int((grid != NEVER).sum()) < dim * dim  # joins and non-joins both present


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_every_cell_of_a_merge_list_grid_is_the_first_merge_of_the_pair(name: str) -> None:
    tok = load_tokenizer(data_path("tokenizers", name))
    native = compiled_tables(tok.tables)
    assert native is not None
    grid = _cells(native)
    dim = grid.shape[0]
    expected = np.full((dim, dim), NEVER, dtype=np.uint32)
    for rank, (left, right, _) in enumerate(tok.tables.merges):
        if left < dim and right < dim and expected[left, right] == NEVER:
            expected[left, right] = rank
    assert np.array_equal(grid, expected)
    assert int((grid != NEVER).sum()) > 100


def test_small_vocabularies_and_the_switch_have_no_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    from _core_data import rank_file_of

    module = encode_module()
    assert module.Tables.from_ranks(rank_file_of(b"ab", b"abc")).grid() is None
    data, _, _ = rank_vocab("cl100k_base")
    assert switched_tables(monkeypatch, "TOKEMBED_GRID", False, data).grid() is None


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_the_grid_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pud_text(lang) for lang in PUD_LANGS)
    assert_switch_keeps_ids(
        monkeypatch, name, "TOKEMBED_GRID", text, lambda tables: tables.grid() is not None
    )


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_merge_lists_with_and_without_the_grid_equal_hf_tokenizers(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pud_text(lang) for lang in PUD_LANGS)
    expected = hf_peer(name).encode(text, add_special_tokens=False).ids
    for on in (True, False):
        monkeypatch.setenv("TOKEMBED_GRID", "1" if on else "0")
        tok = load_tokenizer(data_path("tokenizers", name))
        native = compiled_tables(tok.tables)
        assert native is not None
        assert (native.grid() is not None) == on
        assert tok.encode_ordinary(text) == expected, on
