"""Byte pairs joined before merging (``_native/encode_prejoin.h``).

The compiled encoder merges a short new chunk starting from pairs of its bytes already joined
(two-byte letters such as Cyrillic ones, frequent ASCII pairs such as "in") where three
conditions on the vocabulary and the pair's neighbours say that BPE from the bytes makes the
same ids: for rank files, on token ranks; for merge lists, on merge ranks. Checked three ways:
the pairs ``Tables.prejoined`` joins are exactly those an exact-set Python version of the
conditions allows; BPE from those pairs equals BPE from the bytes, in Python, on real chunks and
on crafted vocabularies built to break the conditions; and the encoder's ids equal tiktoken's
(rank files), HF tokenizers' and the reference encoder's (merge lists) on real text and on the
crafted vocabularies, with joining on and off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _core_data import (
    NO_TOKEN,
    assert_switch_keeps_ids,
    encode_module,
    hf_peer,
    rank_bpe,
    rank_file_of,
    rank_vocab,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import data_path, pud_text
from tokembed.tokenizer import BPETables, Pretokenizer
from tokembed.tokenizer.compiled import CompiledEncoder, compiled_tables
from tokembed.tokenizer.encode import encode_ordinary_reference

RANK_FILES = ("o200k_base", "cl100k_base", "qwen")
# PUD languages with two-byte letters, alone or among ASCII ones, and English
LANGS = ("ru", "ar", "de", "en", "es", "fi", "fr", "tr")
SIXTEEN = 0xFFFF  # ranks are kept in 16 bits: a pair of this rank or above is never joined
TINY = 32  # TK_TINY: longer chunks are backtracked, not merged


def _lead(c: int) -> bool:
    return 0xC2 <= c <= 0xDF


def _left_to_right(joins: Callable[[bytes, int], bool], c: bytes) -> list[int]:
    """The offsets of the pairs joined first: each offset where ``joins`` holds, left to
    right, the byte after a joined pair skipped."""
    out, p = [], 0
    while p < len(c):
        if joins(c, p):
            out.append(p)
            p += 1
        p += 1
    return out


class _Rule:
    """When a pair L = (a, b) at p may be joined first, with exact sets: L is a token of rank r
    below 2^16 - 1; every other token holding a b ranks above r; every token of two bytes or
    more that ends with a where the chunk does at p ranks above r, and every one that starts
    with b where the chunk does at p + 1 ranks at or above r (at r it is L again, to the
    right, which L goes before)."""

    def __init__(self, ranks: dict[bytes, int]) -> None:
        self.ranks = ranks
        self.holding: dict[bytes, int] = {}
        self.tail: dict[bytes, int] = {}
        self.head: dict[bytes, int] = {}
        for t, r in ranks.items():
            if len(t) < 2:
                continue
            self.tail[t[-2:]] = min(r, self.tail.get(t[-2:], NO_TOKEN))
            self.head[t[:2]] = min(r, self.head.get(t[:2], NO_TOKEN))
            for i in range(len(t) - 1) if len(t) > 2 else ():
                self.holding[t[i : i + 2]] = min(r, self.holding.get(t[i : i + 2], NO_TOKEN))

    def joins(self, c: bytes, p: int) -> bool:
        if p + 1 >= len(c):
            return False
        r = self.ranks.get(c[p : p + 2], NO_TOKEN)
        return (
            r < SIXTEEN
            and r < self.holding.get(c[p : p + 2], NO_TOKEN)
            and (p == 0 or r < self.tail.get(c[p - 1 : p + 1], NO_TOKEN))
            and (p + 2 == len(c) or r <= self.head.get(c[p + 1 : p + 3], NO_TOKEN))
        )

    def pairs(self, c: bytes) -> list[int]:
        return _left_to_right(self.joins, c)


def _bpe(c: bytes, ranks: dict[bytes, int], start: list[int]) -> tuple[list[int], int]:
    """tiktoken's rule from the bytes, with the two bytes at each offset in ``start`` joined
    first; the ids and the joins made."""
    parts: list[bytes] = []
    p = 0
    while p < len(c):
        w = 2 if p in start else 1
        parts.append(c[p : p + w])
        p += w
    merged, made = rank_bpe(ranks, parts)
    return [ranks[t] for t in merged], made


def _short_chunks(name: str, text: str) -> list[bytes]:
    """The distinct chunks of 2 to TINY bytes that are no token (those a new word merges)."""
    _, ranks, tok = rank_vocab(name)
    chunks = {c.encode() for c in tok.pretokenizer.split(text)}
    return sorted(c for c in chunks if 2 <= len(c) <= TINY and c not in ranks)


@pytest.mark.parametrize("name", RANK_FILES)
def test_the_pairs_joined_are_the_rules_and_bpe_from_them_is_bpe(name: str) -> None:
    data, ranks, _ = rank_vocab(name)
    tables = encode_module().Tables.from_ranks(data)
    rule = _Rule(ranks)
    letters = joined_letters = saved = joins = 0
    for lang in LANGS:
        chunks = _short_chunks(name, pud_text(lang))
        for c in chunks:
            at = tables.prejoined(c)
            assert at == rule.pairs(c), (lang, c)
            if lang == "ru":
                letters += sum(_lead(x) for x in c)
                joined_letters += sum(_lead(c[p]) for p in at)
        for c in chunks[:: max(1, len(chunks) // 300)]:  # Python BPE is slow: 300 per language
            ids, made = _bpe(c, ranks, rule.pairs(c))
            expected, all_joins = _bpe(c, ranks, [])
            assert ids == expected, (lang, c)
            if lang in ("de", "es", "fi", "fr", "tr"):
                saved += all_joins - made
                joins += all_joins
    # most Russian letters start merging joined (RusLit-40: o200k 86%, cl100k and qwen 80%);
    # in Latin-script words about half of the joins are pairs joined first (49-51%)
    assert joined_letters > 0.7 * letters, (joined_letters, letters)
    assert saved > 0.4 * joins, (saved, joins)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_pairs_first_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch, ruslit_text: str
) -> None:
    text = ruslit_text[:300_000] + "".join(pud_text(lang) for lang in LANGS)
    word = " сказал".encode()
    assert_switch_keeps_ids(
        monkeypatch, name, "TOKEMBED_PREJOIN", text, lambda tables: bool(tables.prejoined(word))
    )


# ---- crafted vocabularies ---------------------------------------------------------------
# two-byte letters ("а" and "б" share their lead byte), a space, ASCII letters that repeat
ALPHABET = "абé aaib"


@st.composite
def _crafted(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A rank file whose longer pieces are byte slices of short strings of the alphabet, so
    many end with a lead byte, start with a continuation byte, hold a pair or repeat a byte, in
    shuffled rank order (a pair may rank above a piece holding it); chunks of the alphabet."""
    pieces: list[bytes] = []
    for _ in range(draw(st.integers(0, 40))):
        s = "".join(draw(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=5))).encode()
        i = draw(st.integers(0, max(0, len(s) - 2)))
        j = draw(st.integers(min(i + 2, len(s)), len(s)))
        if j - i >= 2 and s[i:j] not in pieces:
            pieces.append(s[i:j])
    chunks = draw(
        st.lists(
            st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=20).map("".join),
            min_size=1,
            max_size=6,
        )
    )
    return rank_file_of(*pieces), chunks


def _check(data: bytes, chunks: list[str], joins: Callable[[list[int]], object]) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    ranks = parse_ranks(data)
    tables = encode_module().Tables.from_ranks(data)
    rule = _Rule(ranks)
    for c in chunks:
        b = c.encode()
        assert tables.prejoined(b) == rule.pairs(b), c
        assert _bpe(b, ranks, rule.pairs(b))[0] == _bpe(b, ranks, [])[0], c
        joins(tables.prejoined(b))
    peer = tiktoken.Encoding("crafted", pat_str=r"[^\n]+", mergeable_ranks=ranks, special_tokens={})
    enc = encode_module().Encoder(tables, cache_limit=1 << 10)
    expected = [i for c in chunks for i in peer._encode_single_piece(c.encode())]
    assert enc.encode_chunks("".join(chunks), chunks) == expected


A, B = "а".encode(), "б".encode()  # d0 b0, d0 b1


@settings(max_examples=400, deadline=None)
@given(_crafted())
# " \xd0" ranks below "а": the space takes the lead byte, so "а" after a space is not joined
@example((rank_file_of(b" \xd0", A, B, b" \xd0\xb1"), ["  ааб", " аб", " а", "аа"]))
# "\xb0\xd0" (across two letters) and "аб" rank below "а" and "б": neither is joined
@example((rank_file_of(b"\xb0\xd0", A + B, A, B), ["абаб", "ааа", "бб"]))
# a repeated byte: "ii" at 0 goes before "ii" at 1, which may not be joined first
@example((rank_file_of(b"ii", b"ai", b"iii"), ["iii", "aiii", "iiii", "aiiii"]))
def test_crafted_rank_files_join_pairs_and_equal_tiktoken(case: tuple[bytes, list[str]]) -> None:
    data, chunks = case
    _check(data, chunks, lambda at: None)


def test_each_condition_keeps_a_pair_as_its_bytes() -> None:
    seen: list[list[int]] = []
    # all three hold: every letter is joined
    _check(rank_file_of(A, B, A + B), ["абаб"], seen.append)
    assert seen[-1] == [0, 2, 4, 6]
    # a token holding "а" ranks below it: "а" stays two bytes, "б" is joined
    _check(rank_file_of(A + b"a", A, B), ["аб"], seen.append)
    assert seen[-1] == [2]
    # " \xd0" ends where the chunk does at "а"'s lead byte and ranks below "а" (and is itself
    # joined first: no token holds it, and "\xd0\xb0" starting after it ranks above it)
    _check(rank_file_of(b" \xd0", A, B), [" аб"], seen.append)
    assert seen[-1] == [0, 3]
    # ... ranked above it, it never joins before "а" does
    _check(rank_file_of(A, b" \xd0", B), [" аб"], seen.append)
    assert seen[-1] == [1, 3]
    # "\xb0 " starts where the chunk does after "а" and ranks below it (and is joined first
    # itself, before the second "а")
    _check(rank_file_of(b"\xb0 ", A), ["а а"], seen.append)
    assert seen[-1] == [1, 3]
    # no token "б": it is never joined first
    _check(rank_file_of(A), ["аб"], seen.append)
    assert seen[-1] == [0]
    # a repeated byte: the left "ii" is joined, the one after it may not be
    _check(rank_file_of(b"ii"), ["iii"], seen.append)
    assert seen[-1] == [0]
    _check(rank_file_of(b"ii"), ["aiii"], seen.append)
    assert seen[-1] == [1]


def test_the_switch_turns_joining_off(monkeypatch: pytest.MonkeyPatch) -> None:
    data, _, _ = rank_vocab("o200k_base")
    module = encode_module()
    monkeypatch.delenv("TOKEMBED_PREJOIN", raising=False)
    assert module.Tables.from_ranks(data).prejoined(" сказал".encode()) == [1, 3, 5, 7, 9, 11]
    assert module.Tables.from_ranks(data).prejoined(b" being") == [0, 3]
    monkeypatch.setenv("TOKEMBED_PREJOIN", "0")
    assert module.Tables.from_ranks(data).prejoined(" сказал".encode()) == []
    assert module.Tables.from_ranks(data).prejoined(b" being") == []


# ---- merge lists --------------------------------------------------------------------------
class _MergeRule:
    """The same, for a merge list, with exact sets: the two bytes' ids have a merge of rank r
    below 2^16 - 1, making z; every merge with z as a part ranks above r; every merge of a part
    ending with byte x (the byte before the pair) and a's id ranks above r, and every merge of
    b's id and a part starting with byte y (the byte after it) at or above r."""

    def __init__(self, tables: BPETables) -> None:
        self.byte_ids = tables.byte_ids
        self.rank = {(left, right): k for k, (left, right, _) in enumerate(tables.merges)}
        self.made = {(left, right): z for left, right, z in tables.merges}
        self.used: dict[int, int] = {}
        self.tail: dict[tuple[int, int], int] = {}
        self.head: dict[tuple[int, int], int] = {}
        byte_of = {i: b for b, i in enumerate(tables.byte_ids) if i is not None}
        for k, (left, right, _) in enumerate(tables.merges):
            for part in (left, right):
                self.used[part] = min(k, self.used.get(part, NO_TOKEN))
            if right in byte_of:
                key = (tables.pieces[left][-1], byte_of[right])
                self.tail[key] = min(k, self.tail.get(key, NO_TOKEN))
            if left in byte_of:
                key = (byte_of[left], tables.pieces[right][0])
                self.head[key] = min(k, self.head.get(key, NO_TOKEN))

    def joins(self, c: bytes, p: int) -> bool:
        if p + 1 >= len(c):
            return False
        pair = (self.byte_ids[c[p]], self.byte_ids[c[p + 1]])
        r = self.rank.get(pair, NO_TOKEN)  # type: ignore[arg-type]
        return (
            r < SIXTEEN
            and r < self.used.get(self.made[pair], NO_TOKEN)  # type: ignore[index]
            and (p == 0 or r < self.tail.get((c[p - 1], c[p]), NO_TOKEN))
            and (p + 2 == len(c) or r <= self.head.get((c[p + 1], c[p + 2]), NO_TOKEN))
        )

    def pairs(self, c: bytes) -> list[int]:
        return _left_to_right(self.joins, c)

    def bpe(self, c: bytes, start: list[int]) -> tuple[list[int], int]:
        """HF's rule (join the leftmost pair of the lowest merge rank) from the bytes' ids, with
        the pairs at ``start`` joined first; the ids and the joins made."""
        parts: list[int] = []
        p = 0
        while p < len(c):
            ids = (self.byte_ids[c[p]], self.byte_ids[c[p + 1]]) if p in start else None
            parts.append(self.made[ids] if ids else self.byte_ids[c[p]])  # type: ignore[index,arg-type]
            p += 2 if ids else 1
        made = 0
        while len(parts) > 1:
            ranks = [
                self.rank.get((parts[i], parts[i + 1]), NO_TOKEN) for i in range(len(parts) - 1)
            ]
            best = min(ranks)
            if best == NO_TOKEN:
                break
            i = ranks.index(best)
            parts[i : i + 2] = [self.made[(parts[i], parts[i + 1])]]
            made += 1
        return parts, made


def _merge_tables(tables: BPETables, on: bool) -> Any:
    """Compiled tables of a merge list, made with joining first on or off."""
    encode_module()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOKEMBED_PREJOIN", "1" if on else "0")
        return compiled_tables(tables)


@pytest.mark.parametrize("name", ["smollm2-135m", "gpt2-hf"])
def test_merge_lists_join_the_rules_pairs_and_equal_hf(name: str) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", name))
    rule = _MergeRule(tok.tables)
    compiled = _merge_tables(tok.tables, True)
    saved = joins = 0
    for lang in LANGS:
        chunks = sorted({c.encode() for c in tok.pretokenizer.split(pud_text(lang))})
        chunks = [c for c in chunks if 2 <= len(c) <= 64]
        for c in chunks:
            assert compiled.prejoined(c) == rule.pairs(c), (lang, c)
        for c in chunks[:: max(1, len(chunks) // 200)]:
            ids, made = rule.bpe(c, rule.pairs(c))
            expected, all_joins = rule.bpe(c, [])
            assert ids == expected, (lang, c)
            saved += all_joins - made
            joins += all_joins
    assert saved > 0.3 * joins, (saved, joins)
    text = "".join(pud_text(lang) for lang in LANGS)
    expected_ids = hf_peer(name).encode(text, add_special_tokens=False).ids
    for on in (True, False):
        tables = _merge_tables(tok.tables, on)
        assert bool(tables.prejoined(b" being")) == on
        assert CompiledEncoder(tables, tok.pretokenizer, threads=1).encode(text) == expected_ids


@st.composite
def _crafted_merges(draw: st.DrawFn) -> tuple[BPETables, list[str]]:
    """Up to 30 merges over three letters and what they made, in any order a list may hold
    (a merge may use a part a later merge makes), and chunks of up to 20 letters."""
    ids = [97, 98, 105]  # a b i
    merges: list[tuple[int, int]] = []
    for _ in range(draw(st.integers(0, 30))):
        pair = (draw(st.sampled_from(ids)), draw(st.sampled_from(ids)))
        if pair not in merges:
            merges.append(pair)
            ids.append(255 + len(merges))
    order = draw(st.permutations(range(len(merges))))
    chunks = draw(st.lists(st.text("abi", min_size=1, max_size=20), min_size=1, max_size=6))
    built = BPETables.byte_level(merges=merges)  # results keep their ids; ranks are shuffled
    return BPETables(pieces=built.pieces, merges=[built.merges[k] for k in order]), chunks


@settings(max_examples=300, deadline=None)
@given(_crafted_merges())
@example(
    (
        BPETables.byte_level(merges=[(105, 105), (97, 105), (256, 105)]),
        ["iii", "aiii", "iiii", "aiiii"],
    )
)
def test_crafted_merge_lists_join_the_rules_pairs_and_equal_the_reference(
    case: tuple[BPETables, list[str]],
) -> None:
    tables, chunks = case
    rule = _MergeRule(tables)
    compiled = _merge_tables(tables, True)
    pre = Pretokenizer.preset(r"[^\n]+")
    for c in chunks:
        b = c.encode()
        assert compiled.prejoined(b) == rule.pairs(b), c
        assert rule.bpe(b, rule.pairs(b))[0] == rule.bpe(b, [])[0], c
        assert CompiledEncoder(compiled, pre, threads=1).encode(c) == encode_ordinary_reference(
            tables, pre, c
        ), c


def test_a_pair_whose_token_a_lower_merge_uses_is_not_joined_first() -> None:
    """Here the merge of "ab" with "c" ranks below the merge making "ab" (a list BPE training
    would not write): the pair a b is never joined first, since a merge of what it makes ranks
    below it, and a chunk's ids stay the reference's."""
    tables = BPETables(
        pieces={**BPETables.byte_level(merges=[]).pieces, 256: b"ab", 257: b"abc"},
        merges=[(256, 99, 257), (97, 98, 256)],
    )
    compiled = _merge_tables(tables, True)
    assert compiled.prejoined(b"abc") == []  # "ab" is used by a merge below its own
    pre = Pretokenizer.preset(r"[^\n]+")
    for c in ("abc", "abab", "cab"):
        expected = encode_ordinary_reference(tables, pre, c)
        assert CompiledEncoder(compiled, pre, threads=1).encode(c) == expected, c
