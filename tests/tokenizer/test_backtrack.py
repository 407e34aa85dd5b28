"""Backtracking (``_native/encode_backtrack.h``) against merging and the peers.

The compiled encoder reaches a chunk's ids two ways: by replaying its merges, or by
backtracking over a trie of the tokens with a pair-validity test. By default long chunks take
the second way (from 9 to 33 bytes by vocabulary and script); ``TOKEMBED_BACKTRACK``, read when compiled tables are made, makes every chunk
take it (``always``) or none (``0``), so that each way is tested on its own: id for id with
tiktoken and HF ``tokenizers`` on real text, with merging and the pure-Python reference on
crafted vocabularies (ranks out of merge order, tokens no merge builds, repeated results) and on
the long runs that make a tokenizer slow.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _core_data import encode_module, hf_peer, rank_file_of, rank_peer, rank_vocab, real_text
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import data_path
from tokembed.tokenizer import BPETables, Pretokenizer
from tokembed.tokenizer.compiled import CompiledEncoder, compiled_tables
from tokembed.tokenizer.encode import encode_ordinary_reference

RANK_FILES = ("o200k_base", "cl100k_base", "qwen", "r50k_base")


@contextmanager
def _engine(mode: str) -> Iterator[None]:
    """Compiled tables made inside take ``mode`` ("always", "0" or "" for the default)."""
    before = os.environ.get("TOKEMBED_BACKTRACK")
    if mode:
        os.environ["TOKEMBED_BACKTRACK"] = mode
    else:
        os.environ.pop("TOKEMBED_BACKTRACK", None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKEMBED_BACKTRACK", None)
        else:
            os.environ["TOKEMBED_BACKTRACK"] = before


def _rank_tables(data: bytes, mode: str) -> Any:
    with _engine(mode):
        return encode_module().Tables.from_ranks(data)


def _merge_tables(tables: BPETables, mode: str) -> Any:
    encode_module()
    with _engine(mode):
        return compiled_tables(tables)


def _ids(tables: Any, pre: Pretokenizer, text: str) -> list[int]:
    return CompiledEncoder(tables, pre, threads=1).encode(text)


def test_the_default_backtracks_long_chunks_and_the_switch_turns_it_off_or_on() -> None:
    data, _, _ = rank_vocab("r50k_base")
    shortest, tokens = _rank_tables(data, "").backtrack
    # chunks starting in ASCII, a two-byte letter, a longer one (two-byte letters from 9: r50k's
    # pieces of them are short, so its tables have a pair table, see test_rank_pairs.py)
    assert shortest == (33, 9, 9)
    assert tokens == 50_256  # every r50k piece is built from its bytes
    assert _rank_tables(data, "always").backtrack[0] == (2, 2, 2)
    assert _rank_tables(data, "0").backtrack == ((0, 0, 0), 0)
    # a merge list backtracks two-byte letters from 9 too; ASCII and Latin letters with a
    # diacritic from 33 in every table (in a cold call the trie's nodes come from memory)
    merge_list = _merge_tables(BPETables.byte_level(merges=[(97, 98)]), "")
    assert merge_list.backtrack == ((33, 9, 9), 257)


def test_a_word_led_by_a_quote_or_dash_is_classed_by_its_first_letter() -> None:
    r50k = _rank_tables(rank_vocab("r50k_base")[0], "")  # two-byte letters from 9 (pairs)
    o200k = _rank_tables(rank_vocab("o200k_base")[0], "")  # from 33
    quoted_latin = "\u201eAusschuss".encode()  # 12 bytes: a mark of U+2000-U+207F, then Latin
    assert not r50k.backtracks(quoted_latin)
    assert not o200k.backtracks(quoted_latin)
    assert r50k.backtracks(("\u2014" + "a" * 30).encode())  # 33 bytes, classed as ASCII
    quoted_cyrillic = "\u201c\u0421\u043b\u043e\u0432\u043e".encode()  # 13 bytes
    assert r50k.backtracks(quoted_cyrillic)
    assert not o200k.backtracks(quoted_cyrillic)
    # a three-byte letter after the mark, or a mark that is not one of those (U+2190, an
    # arrow), keeps the longer letters' threshold of 9
    assert o200k.backtracks("\u201c\u4e2d\u534e".encode())
    assert o200k.backtracks(("\u2190" + "abcdef").encode())
    # 11 bytes: classed by the mark's lead byte, as CJK, it was backtracked from 9
    assert not o200k.backtracks(("\u201c" + "abcdefgh").encode())
    text = "\u201eAusschuss\u201c \u201cNous\u201d \u2014Slovo \u201c\u0421\u043b\u043e\u0432\u043e"
    for name in ("o200k_base", "r50k_base"):
        tok = rank_vocab(name)[2]
        tables = _rank_tables(rank_vocab(name)[0], "")
        assert _ids(tables, tok.pretokenizer, text) == rank_peer(name).encode_ordinary(text)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_backtracked_equal_merged_and_tiktoken_on_real_text(name: str) -> None:
    data, _, tok = rank_vocab(name)
    text = real_text()
    pre = tok.pretokenizer
    expected = rank_peer(name).encode_ordinary(text)
    for mode in ("always", "", "0"):
        tables = _rank_tables(data, mode)
        assert (tables.backtrack[0][2] > 0) == (mode != "0")
        assert _ids(tables, pre, text) == expected, mode


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_merge_lists_backtracked_equal_hf_tokenizers_on_real_text(name: str) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", name))
    peer = hf_peer(name)
    text = real_text()
    expected = peer.encode(text, add_special_tokens=False).ids
    for mode in ("always", ""):
        tables = _merge_tables(tok.tables, mode)
        assert tables.backtrack[1] > 40_000  # nearly every token is built from its bytes
        assert _ids(tables, tok.pretokenizer, text) == expected, mode


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_long_runs_backtracked_equal_tiktoken(name: str) -> None:
    import tiktoken

    data, ranks, tok = rank_vocab(name)
    peer = tiktoken.Encoding(
        name,
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=ranks,
        special_tokens={},
    )
    enc = encode_module().Encoder(_rank_tables(data, "always"), cache_limit=1 << 16)
    runs = ["a" * 5000, "中" * 3000, "1" * 4000, "ab" * 3000, "ñ" * 2500, "🙂" * 1000, "\t" * 3000]
    for text in [*runs, " " * 4000 + "x", "ab" * 2000 + "a", "Ё" * 999]:
        chunks = tok.pretokenizer.split(text)
        expected = [i for c in chunks for i in peer._encode_single_piece(c.encode())]
        assert enc.encode_chunks(text, chunks) == expected, text[:3]


# ---- crafted vocabularies ---------------------------------------------------------------
@st.composite
def _crafted_ranks(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A rank file over three letters whose longer pieces take shuffled ranks (a piece may rank
    below its parts, or have no parts at all), and a text of up to 120 letters as one chunk."""
    longer = draw(
        st.lists(
            st.binary(min_size=2, max_size=5).map(lambda b: bytes(97 + x % 3 for x in b)),
            max_size=30,
            unique=True,
        )
    )
    text = bytes(draw(st.lists(st.sampled_from(b"abc"), min_size=2, max_size=120)))
    return rank_file_of(*longer), text


@settings(max_examples=400, deadline=None)
@given(_crafted_ranks())
# "abc" ranks below its only parts' "ab": BPE builds it, backtracking has no history for it
@example((rank_file_of(b"abc", b"ab"), b"abcabcab"))
@example((rank_file_of(b"bc", b"ab", b"abc"), b"abcbcabc" * 6))
@example((rank_file_of(b"aa", b"aaa", b"aaaa"), b"a" * 101))
def test_crafted_rank_files_backtracked_equal_tiktoken(case: tuple[bytes, bytes]) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    data, text = case
    peer = tiktoken.Encoding(
        "crafted", pat_str=r"[^\n]+", mergeable_ranks=parse_ranks(data), special_tokens={}
    )
    chunk = text.decode()
    enc = encode_module().Encoder(_rank_tables(data, "always"), cache_limit=0)
    assert enc.encode_chunks(chunk, [chunk]) == peer.encode_ordinary(chunk)


@st.composite
def _crafted_merges(draw: st.DrawFn) -> tuple[BPETables, str]:
    """Up to 30 merges over three letters and what they made, in any order a list may hold
    (a later merge may make the bytes an earlier one made, under a new id), and a text of up
    to 120 letters."""
    ids = [97, 98, 99]
    merges: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 30))):
        pair = (draw(st.sampled_from(ids)), draw(st.sampled_from(ids)))
        if pair not in merges:  # a pair merges once
            merges.append(pair)
            ids.append(255 + len(merges))
    text = "".join(draw(st.lists(st.sampled_from("abc"), min_size=2, max_size=120)))
    return BPETables.byte_level(merges=merges), text


@settings(max_examples=400, deadline=None)
@given(_crafted_merges())
@example((BPETables.byte_level(merges=[(98, 99), (97, 98), (257, 99), (97, 256)]), "abcabc"))
def test_crafted_merge_lists_backtracked_equal_reference(case: tuple[BPETables, str]) -> None:
    tables, text = case
    pre = Pretokenizer.preset(r"[^\n]+")
    expected = encode_ordinary_reference(tables, pre, text)
    compiled = _merge_tables(tables, "always")
    if len(set(tables.pieces.values())) == len(tables.pieces):
        assert compiled.backtrack[0] == (2, 2, 2)  # else two ids share bytes: all are merged
    assert _ids(compiled, pre, text) == expected


def test_a_token_bpe_builds_only_out_of_rank_order_is_left_to_merging() -> None:
    """Here "abc" ranks below its only parts, "ab" + "c": BPE joins "ab" first, then "abc".
    Backtracking has no history for it (its trie holds the bytes and "ab"), cannot tile a chunk
    BPE gives "abc" in, and hands that chunk to merging."""
    data = rank_file_of(b"abc", b"ab")
    tables = _rank_tables(data, "always")
    assert tables.backtrack == ((2, 2, 2), 257)
    enc = encode_module().Encoder(tables, cache_limit=0)
    for chunk, ids in (("abc", [256]), ("abcab", [256, 257]), ("cab", [99, 257])):
        assert enc.encode_chunks(chunk, [chunk]) == ids, chunk


def test_a_byte_without_a_token_is_named_as_when_merging() -> None:
    module = encode_module()
    data = rank_file_of(b"ab", b"abc", without=b"z")
    chunk = "abcabcz" + "ab" * 20
    for mode in ("always", "0"):
        enc = module.Encoder(_rank_tables(data, mode), cache_limit=0)
        with pytest.raises(module.MissingByte) as err:
            enc.encode_chunks(chunk, [chunk])
        assert err.value.args == (6,)  # the offset of "z"
