"""A rank file's pair table (``pairs_of_ranks`` in ``_native/encode_core.c``): every split of a
piece into two pieces, so that backtracking's validity checks ask (left, right) ids instead of
hashing the joined bytes. Tiktoken's rule joins two parts exactly when their bytes together are
a piece, so the table must hold every such split and nothing else, and the ids must not change
with it on or off, whichever way each chunk is encoded.

The table is built by default where a vocabulary's pieces that start with a two-byte letter are
short (cl100k, r50k), and ``TOKEMBED_PAIRS`` (read when tables are made) forces it on ("1") or
off ("0").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _core_data import encode_module, rank_peer, rank_vocab, real_text

from conftest import data_path
from tokembed.tokenizer.compiled import CompiledEncoder

RANK_FILES = ["cl100k_base", "o200k_base", "qwen"]


def _tables(monkeypatch: pytest.MonkeyPatch, data: bytes, *, pairs: str, backtrack: str) -> Any:
    """Rank-file tables made with TOKEMBED_PAIRS and TOKEMBED_BACKTRACK set ("" unsets)."""
    for variable, value in (("TOKEMBED_PAIRS", pairs), ("TOKEMBED_BACKTRACK", backtrack)):
        if value:
            monkeypatch.setenv(variable, value)
        else:
            monkeypatch.delenv(variable, raising=False)
    return encode_module().Tables.from_ranks(data)


def _splits(ranks: dict[bytes, int]) -> set[tuple[int, int, int]]:
    """Every (left, right, joined) with both parts and their join pieces, by brute force."""
    return {
        (ranks[piece[:k]], ranks[piece[k:]], rank)
        for piece, rank in ranks.items()
        for k in range(1, len(piece))
        if piece[:k] in ranks and piece[k:] in ranks
    }


@pytest.mark.parametrize("name", RANK_FILES)
def test_the_pair_table_holds_every_split_of_a_piece_and_nothing_else(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, ranks, _ = rank_vocab(name)
    raw = _tables(monkeypatch, data, pairs="1", backtrack="").rank_pairs()
    assert raw is not None
    found = np.frombuffer(raw, dtype=np.uint32).reshape(-1, 3)
    as_set = {(int(a), int(b), int(c)) for a, b, c in found}
    assert len(as_set) == len(found)  # no split twice
    assert as_set == _splits(ranks)


def test_the_default_builds_it_for_short_two_byte_letter_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = {}
    for name in ("cl100k_base", "r50k_base", "o200k_base", "qwen"):
        tables = _tables(monkeypatch, rank_vocab(name)[0], pairs="", backtrack="")
        built[name] = (tables.rank_pairs() is not None, tables.backtrack[0])
    # mean bytes of pieces starting with a two-byte letter: cl100k 4.9, qwen 7.5, o200k 8.2
    assert built == {
        "cl100k_base": (True, (33, 9, 9)),
        "r50k_base": (True, (33, 9, 9)),
        "o200k_base": (False, (33, 33, 9)),
        "qwen": (False, (33, 33, 9)),
    }
    data = rank_vocab("cl100k_base")[0]
    off = _tables(monkeypatch, data, pairs="0", backtrack="")
    assert off.rank_pairs() is None
    assert off.backtrack[0] == (33, 33, 9)


def test_merge_lists_have_no_rank_pair_table() -> None:
    from tokembed.tokenizer.compiled import compiled_tables
    from tokembed.tokenizer.formats import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", "gpt2-hf"))
    native = compiled_tables(tok.tables)
    assert native is not None
    assert native.rank_pairs() is None


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_pairs_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, _, tok = rank_vocab(name)
    text = real_text()
    expected = rank_peer(name).encode_ordinary(text)
    for pairs in ("1", "0"):
        for backtrack in ("", "always"):
            tables = _tables(monkeypatch, data, pairs=pairs, backtrack=backtrack)
            assert (tables.rank_pairs() is not None) == (pairs == "1")
            ids = CompiledEncoder(tables, tok.pretokenizer, threads=1).encode(text)
            assert ids == expected, (pairs, backtrack)
