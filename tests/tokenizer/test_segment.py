"""Cutting long chunks of three-byte letters (``_native/encode_segment.h``).

The compiled encoder cuts a long chunk of CJK, Hangul, Thai or Devanagari letters at the
boundaries no token of the vocabulary crosses and encodes the parts one after the other. That
is exact only if no token crosses a cut and a part that is a token BPE does not build from its
own bytes is still merged. Checked here three ways: every cut ``Tables.cuts`` gives is crossed
by no token (found by brute force over the chunk), the cuts are the ones the rule in the header
allows (an exact-set version of it in Python, less the few a hash collision keeps), and the ids
equal tiktoken's and HF ``tokenizers``' on real text and on crafted vocabularies full of pieces
that split letters or that BPE cannot build.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from _core_data import (
    LETTER_LANGS,
    assert_switch_keeps_ids,
    encode_module,
    hf_peer,
    rank_file_of,
    rank_vocab,
    three_byte_letter,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import data_path, pud_text
from tokembed.tokenizer import Tokenizer
from tokembed.tokenizer.compiled import CompiledEncoder, compiled_tables

RANK_FILES = ("qwen", "o200k_base", "cl100k_base")
PAIR_BITS = 20  # TK_SEG_PAIR_BITS


def _lead(c: int) -> bool:
    return 0xE0 <= c <= 0xEF


def _cont(c: int) -> bool:
    return 0x80 <= c <= 0xBF


def _boundaries(chunk: bytes) -> list[int]:
    """Offsets between two three-byte letters, scanning as the encoder does."""
    out, after, i = [], 0, 0
    while i + 3 <= len(chunk):
        if not three_byte_letter(chunk, i):
            i += 1
            continue
        if after == i and i > 0:
            out.append(i)
        i += 3
        after = i
    return out


class _Rule:
    """The cut rule with exact sets: pairs of letters inside some token, and the bytes around
    every place a token could cross a boundary with a partial letter at one end."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pairs: set[bytes] = set()
        self.win: set[bytes] = set()
        self.wild: set[bytes] = set()
        for t in pieces:
            for q in range(1, len(t)):
                if not _lead(t[q]) or not _cont(t[q - 1]):
                    continue
                if q + 1 < len(t) and not _cont(t[q + 1]):
                    continue
                if q >= 3 and three_byte_letter(t, q - 3) and three_byte_letter(t, q):
                    self.pairs.add(t[q - 3 : q + 3])
                elif q + 1 < len(t):
                    self.win.add(t[q - 1 : q + 2])
                else:
                    self.wild.add(t[q - 1 : q + 1])

    def cuts(self, chunk: bytes) -> list[int]:
        return [
            p
            for p in _boundaries(chunk)
            if chunk[p - 3 : p + 3] not in self.pairs
            and chunk[p - 1 : p + 2] not in self.win
            and chunk[p - 1 : p + 1] not in self.wild
        ]


def _crossed(by_head: dict[bytes, list[bytes]], chunk: bytes) -> set[int]:
    """Every offset some occurrence of a token of two bytes or more crosses (brute force)."""
    out: set[int] = set()
    for i in range(len(chunk) - 1):
        for t in by_head.get(chunk[i : i + 2], ()):
            if chunk.startswith(t, i):
                out.update(range(i + 1, i + len(t)))
    return out


def _by_head(pieces: list[bytes]) -> dict[bytes, list[bytes]]:
    heads: dict[bytes, list[bytes]] = defaultdict(list)
    for t in pieces:
        if len(t) > 1:
            heads[t[:2]].append(t)
    return heads


def _long_chunks(tok: Tokenizer, lang: str) -> list[bytes]:
    chunks = (c.encode() for c in tok.pretokenizer.split(pud_text(lang)))
    return [c for c in chunks if len(c) >= 9 and _lead(c[1] if c[0] == 0x20 else c[0])]


@pytest.mark.parametrize("name", RANK_FILES)
def test_cuts_are_crossed_by_no_token_and_are_the_rules_on_real_text(name: str) -> None:
    data, ranks, tok = rank_vocab(name)
    tables = encode_module().Tables.from_ranks(data)
    pieces = list(ranks)
    rule, heads = _Rule(pieces), _by_head(pieces)
    kept_by_hash = 1 - (1 - 2.0**-PAIR_BITS) ** len(rule.pairs)  # pair bits set
    for lang in LETTER_LANGS:
        boundaries = 0
        allowed: set[bytes] = set()  # a cut depends only on the two letters' six bytes
        kept: set[bytes] = set()
        for chunk in _long_chunks(tok, lang):
            cuts, allowed_here = tables.cuts(chunk), rule.cuts(chunk)
            assert set(cuts) <= set(allowed_here), chunk.decode()
            assert not set(allowed_here) & _crossed(heads, chunk), chunk.decode()
            allowed.update(chunk[p - 3 : p + 3] for p in allowed_here)
            kept.update(chunk[p - 3 : p + 3] for p in set(allowed_here) - set(cuts))
            boundaries += len(_boundaries(chunk))
        # a pair whose bit another pair set is kept, with probability kept_by_hash
        assert len(kept) <= 3 * kept_by_hash * len(allowed) + 3, (lang, len(kept), len(allowed))
        if lang == "zh":  # most boundaries of Chinese are crossed by no token
            cut = sum(len(tables.cuts(c)) for c in _long_chunks(tok, lang))
            assert cut > boundaries / 2, (cut, boundaries)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_cuts_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pud_text(lang) for lang in LETTER_LANGS)
    chunk = "北京大学图书馆".encode()
    assert_switch_keeps_ids(
        monkeypatch, name, "TOKEMBED_SEGMENT", text, lambda tables: bool(tables.cuts(chunk))
    )


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_merge_lists_cut_and_equal_hf_tokenizers(name: str) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", name))
    text = "".join(pud_text(lang) for lang in LETTER_LANGS)
    encode_module()
    tables: Any = compiled_tables(tok.tables)
    cuts: list[int] = [len(tables.cuts(c)) for c in _long_chunks(tok, "zh")]
    assert sum(cuts) > 10_000
    expected = hf_peer(name).encode(text, add_special_tokens=False).ids
    assert CompiledEncoder(tables, tok.pretokenizer, threads=1).encode(text) == expected


# ---- crafted vocabularies ---------------------------------------------------------------
LETTERS = "中文字한"  # three-byte letters; "a" and "é" break runs of them


@st.composite
def _crafted(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A rank file whose longer pieces are slices of short letter strings (so many split a
    letter), in shuffled rank order (some BPE cannot build), and chunks made of the letters,
    a few of them the pieces that are whole letters, met before and after the long ones."""
    alphabet = LETTERS + "aé"
    pieces: list[bytes] = []
    for _ in range(draw(st.integers(0, 40))):
        s = "".join(draw(st.lists(st.sampled_from(alphabet), min_size=1, max_size=5))).encode()
        i = draw(st.integers(0, len(s) - 2)) if len(s) > 1 else 0
        j = draw(st.integers(i + 2, len(s))) if len(s) >= i + 2 else len(s)
        if j - i >= 2 and s[i:j] not in pieces:
            pieces.append(s[i:j])
    letters = st.sampled_from(LETTERS + LETTERS + "a")
    chunks = draw(
        st.lists(st.lists(letters, min_size=3, max_size=40).map("".join), min_size=1, max_size=4)
    )
    whole = [p.decode() for p in pieces if _decodes(p)]
    return rank_file_of(*pieces), whole + chunks + whole + chunks


def _decodes(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


# "中文" is a piece BPE cannot build (文's bytes never merge): a part that is "中文" is merged
_ZW = "中文".encode()
_ZHONG = "中".encode()


@settings(max_examples=400, deadline=None)
@given(_crafted())
@example((rank_file_of(_ZHONG[:2], _ZHONG, _ZW), ["中文", "中文字字中文字中文"] * 2))
@example((rank_file_of(_ZW[2:5], _ZW[:4]), ["中文中文字中文字"]))
def test_crafted_rank_files_cut_and_equal_tiktoken(case: tuple[bytes, list[str]]) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    data, chunks = case
    ranks = parse_ranks(data)
    peer = tiktoken.Encoding("crafted", pat_str=r"[^\n]+", mergeable_ranks=ranks, special_tokens={})
    tables = encode_module().Tables.from_ranks(data)
    heads = _by_head(list(ranks))
    for c in chunks:
        assert not set(tables.cuts(c.encode())) & _crossed(heads, c.encode()), c
    enc = encode_module().Encoder(tables, cache_limit=1 << 10)
    expected = [i for c in chunks for i in peer._encode_single_piece(c.encode())]
    assert enc.encode_chunks("".join(chunks), chunks) == expected


def test_the_switch_turns_cutting_off(monkeypatch: pytest.MonkeyPatch) -> None:
    data, _, _ = rank_vocab("o200k_base")
    chunk = "北京大学图书馆".encode()
    module: Any = encode_module()
    monkeypatch.delenv("TOKEMBED_SEGMENT", raising=False)
    assert module.Tables.from_ranks(data).cuts(chunk) == [6, 12, 15, 18]  # 北京|大学|图|书|馆
    monkeypatch.setenv("TOKEMBED_SEGMENT", "0")
    assert module.Tables.from_ranks(data).cuts(chunk) == []


@pytest.mark.parametrize("name", ["o200k_base", "qwen"])
def test_a_long_run_cut_into_a_part_per_letter_equals_tiktoken(name: str) -> None:
    """A run of one letter with no token of two of it is cut at every boundary: 200,000 parts,
    their front keys held in a ring of 16 (``TK_PART_AHEAD``), not one per part."""
    import tiktoken

    data, ranks, _ = rank_vocab(name)
    tables = encode_module().Tables.from_ranks(data)
    run = "中" * 200_001
    assert tables.cuts(run.encode()) == list(range(3, 3 * 200_001, 3))
    peer = tiktoken.Encoding(name, pat_str=r"[^\n]+", mergeable_ranks=ranks, special_tokens={})
    enc = encode_module().Encoder(tables, cache_limit=1 << 10)
    assert enc.encode_chunks(run, [run]) == peer._encode_single_piece(run.encode())
