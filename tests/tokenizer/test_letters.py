"""Two-byte letters joined before merging (``_native/encode_letters.h``).

For a rank file, the compiled encoder merges a short new chunk starting from its two-byte
letters (Cyrillic, Greek, Arabic, Latin with diacritics) where three conditions on the
vocabulary and the letter's neighbours say that BPE from the bytes makes the same ids. Checked
three ways: the letters ``Tables.letters`` joins are exactly those an exact-set Python version
of the conditions allows; BPE from those letters equals BPE from the bytes, in Python, on real
chunks and on crafted vocabularies built to break the conditions; and the encoder's ids equal
tiktoken's on real text and on the crafted vocabularies, with joining on and off.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _core_data import encode_module, rank_file_of, rank_peer, rank_vocab, switched_tables
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import pud_text
from tokembed.tokenizer.compiled import CompiledEncoder

RANK_FILES = ("o200k_base", "cl100k_base", "qwen")
# PUD languages with two-byte letters, alone or among ASCII ones
LANGS = ("ru", "ar", "de", "es", "fi", "fr", "tr")
NONE = 1 << 40  # no token: above every rank
TINY = 32  # TK_TINY: longer chunks are backtracked, not merged


def _lead(c: int) -> bool:
    return 0xC2 <= c <= 0xDF


def _cont(c: int) -> bool:
    return 0x80 <= c <= 0xBF


class _Rule:
    """When a letter L = (a, b) at p may be joined first, with exact sets: L is a token of rank
    r; every other token holding a b ranks above r; every token of two bytes or more that ends
    with a where the chunk does at p, or starts with b where it does at p + 1, ranks above r."""

    def __init__(self, ranks: dict[bytes, int]) -> None:
        self.ranks = ranks
        self.holding: dict[bytes, int] = {}
        self.tail: dict[bytes, int] = {}
        self.head: dict[bytes, int] = {}
        for t, r in ranks.items():
            if len(t) < 2:
                continue
            if _lead(t[-1]):
                self.tail[t[-2:]] = min(r, self.tail.get(t[-2:], NONE))
            if _cont(t[0]):
                self.head[t[:2]] = min(r, self.head.get(t[:2], NONE))
            for i in range(len(t) - 1) if len(t) > 2 else ():
                if _lead(t[i]) and _cont(t[i + 1]):
                    self.holding[t[i : i + 2]] = min(r, self.holding.get(t[i : i + 2], NONE))

    def joins(self, c: bytes, p: int) -> bool:
        if not (_lead(c[p]) and p + 1 < len(c) and _cont(c[p + 1])):
            return False
        r = self.ranks.get(c[p : p + 2], NONE)
        return (
            r < self.holding.get(c[p : p + 2], NONE)
            and (p == 0 or r < self.tail.get(c[p - 1 : p + 1], NONE))
            and (p + 2 == len(c) or r < self.head.get(c[p + 1 : p + 3], NONE))
        )

    def letters(self, c: bytes) -> list[int]:
        out, p = [], 0
        while p < len(c):
            if self.joins(c, p):
                out.append(p)
                p += 1
            p += 1
        return out


def _bpe(c: bytes, ranks: dict[bytes, int], start: list[int]) -> list[int]:
    """tiktoken's rule (join the leftmost pair of lowest rank) from the bytes, with the two
    bytes at each offset in ``start`` joined first."""
    parts: list[bytes] = []
    p = 0
    while p < len(c):
        w = 2 if p in start else 1
        parts.append(c[p : p + w])
        p += w
    while len(parts) > 1:
        joined = [ranks.get(parts[i] + parts[i + 1], NONE) for i in range(len(parts) - 1)]
        best = min(joined)
        if best == NONE:
            break
        i = joined.index(best)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return [ranks[t] for t in parts]


def _short_chunks(name: str, text: str) -> list[bytes]:
    """The distinct chunks of up to TINY bytes that hold a two-byte letter."""
    _, _, tok = rank_vocab(name)
    chunks = {c.encode() for c in tok.pretokenizer.split(text)}
    return sorted(c for c in chunks if len(c) <= TINY and any(_lead(x) for x in c))


@pytest.mark.parametrize("name", RANK_FILES)
def test_the_letters_joined_are_the_rules_and_bpe_from_them_is_bpe(name: str) -> None:
    data, ranks, _ = rank_vocab(name)
    tables = encode_module().Tables.from_ranks(data)
    rule = _Rule(ranks)
    letters = joined = 0
    for lang in LANGS:
        chunks = _short_chunks(name, pud_text(lang))
        for c in chunks:
            at = tables.letters(c)
            assert at == rule.letters(c), (lang, c)
            if lang == "ru":
                letters += sum(_lead(x) for x in c)
                joined += len(at)
        for c in chunks[:: max(1, len(chunks) // 300)]:  # Python BPE is slow: 300 per language
            assert _bpe(c, ranks, rule.letters(c)) == _bpe(c, ranks, []), (lang, c)
    # most Russian letters start merging joined (RusLit-40: o200k 86%, cl100k and qwen 80%)
    assert joined > 0.7 * letters, (joined, letters)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_letters_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch, ruslit_text: str
) -> None:
    data, _, tok = rank_vocab(name)
    text = ruslit_text[:300_000] + "".join(pud_text(lang) for lang in LANGS)
    pre = tok.pretokenizer
    expected = rank_peer(name).encode_ordinary(text)
    for on in (True, False):
        tables = switched_tables(monkeypatch, "TOKEMBED_LETTERS", on, data)
        assert bool(tables.letters(" сказал".encode())) == on
        assert CompiledEncoder(tables, pre, threads=1).encode(text) == expected, on


def test_merge_tables_join_nothing() -> None:
    module = encode_module()
    tables = module.Tables.from_merges([*range(256)], [(208, 190, 256)])
    assert tables.letters("оо".encode()) == []


# ---- crafted vocabularies ---------------------------------------------------------------
ALPHABET = "абé a"  # two-byte letters ("а" and "б" share their lead byte), a space, an ASCII one


@st.composite
def _crafted(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A rank file whose longer pieces are byte slices of short strings of the alphabet, so
    many end with a lead byte, start with a continuation byte or hold a letter, in shuffled
    rank order (a letter may rank above a piece holding it); chunks of the alphabet."""
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
        assert tables.letters(b) == rule.letters(b), c
        assert _bpe(b, ranks, rule.letters(b)) == _bpe(b, ranks, []), c
        joins(tables.letters(b))
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
def test_crafted_rank_files_join_letters_and_equal_tiktoken(case: tuple[bytes, list[str]]) -> None:
    data, chunks = case
    _check(data, chunks, lambda at: None)


def test_each_condition_keeps_a_letter_as_its_bytes() -> None:
    seen: list[list[int]] = []
    # all three hold: every letter is joined
    _check(rank_file_of(A, B, A + B), ["абаб"], seen.append)
    assert seen[-1] == [0, 2, 4, 6]
    # a token holding "а" ranks below it: "а" stays two bytes, "б" is joined
    _check(rank_file_of(A + b"a", A, B), ["аб"], seen.append)
    assert seen[-1] == [2]
    # " \xd0" ends where the chunk does at "а"'s lead byte and ranks below "а"
    _check(rank_file_of(b" \xd0", A, B), [" аб"], seen.append)
    assert seen[-1] == [3]
    # ... ranked above it, it never joins before "а" does
    _check(rank_file_of(A, b" \xd0", B), [" аб"], seen.append)
    assert seen[-1] == [1, 3]
    # "\xb0 " starts where the chunk does after "а" and ranks below it
    _check(rank_file_of(b"\xb0 ", A), ["а а"], seen.append)
    assert seen[-1] == [3]
    # no token "б": it is never joined first
    _check(rank_file_of(A), ["аб"], seen.append)
    assert seen[-1] == [0]


def test_the_switch_turns_joining_off(monkeypatch: pytest.MonkeyPatch) -> None:
    data, _, _ = rank_vocab("o200k_base")
    module = encode_module()
    monkeypatch.delenv("TOKEMBED_LETTERS", raising=False)
    assert module.Tables.from_ranks(data).letters(" сказал".encode()) == [1, 3, 5, 7, 9, 11]
    monkeypatch.setenv("TOKEMBED_LETTERS", "0")
    assert module.Tables.from_ranks(data).letters(" сказал".encode()) == []
