"""Parts of a cut chunk merged from their letters (``_native/encode_atoms.h``).

The compiled encoder merges most parts of a long chunk of CJK or Hangul letters starting from
whole letters, through two small tables: the letters that may start whole (atoms) and the joins
of whole-letter parts. That is exact only where the conditions in the header hold. Checked
three ways: the tables ``Tables.atoms`` gives are exactly those an exact-set Python version of
the conditions builds (BPE over each token's own letters, in Python, for the joins); the ids
equal tiktoken's on real text with atoms on and off; and they equal tiktoken's on crafted rank
files built to break the conditions (letters whose bytes never merge, tokens of whole letters
ranked below their letters, tokens holding part of a letter, bytes without an id).
"""

from __future__ import annotations

import array
from typing import Any

import pytest
from _core_data import (
    LETTER_LANGS,
    NO_TOKEN,
    assert_switch_keeps_ids,
    encode_module,
    rank_bpe,
    rank_file_of,
    rank_vocab,
    three_byte_letter,
)
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import pud_text

RANK_FILES = ("qwen", "o200k_base", "cl100k_base")
NO_ATOM = 0xFFFFFFFF


def _letters(t: bytes) -> list[bytes] | None:
    """The three-byte letters ``t`` is made of, or None."""
    if len(t) % 3 or not all(three_byte_letter(t, i) for i in range(0, len(t), 3)):
        return None
    return [t[i : i + 3] for i in range(0, len(t), 3)]


def _code(c: bytes) -> int:
    return (c[0] & 15) << 12 | (c[1] & 63) << 6 | (c[2] & 63)


def _rule(ranks: dict[bytes, int]) -> tuple[dict[int, int], set[tuple[int, int, int]]]:
    """The atoms (letter code -> rank) and joins (left, right, joined) the header's conditions
    allow, with exact sets."""
    own: dict[bytes, int] = {}  # the later of the two joins that make a letter
    for t, r in ranks.items():
        whole = len(t) == 3 and _letters(t) and all(bytes([b]) in ranks for b in t)
        if whole and rank_bpe(ranks, [bytes([b]) for b in t])[0] == [t]:
            own[t] = max(r, min(ranks.get(t[:2], NO_TOKEN), ranks.get(t[1:], NO_TOKEN)))
    atoms = dict(own)
    multi = {t: r for t, r in ranks.items() if len(t) > 3 and _letters(t)}
    for t, r in multi.items():
        for c in _letters(t) or ():
            if c in atoms and r <= own[c]:
                del atoms[c]
    joins = set()
    for t, r in multi.items():
        letters = _letters(t) or []
        if all(c in atoms for c in letters):
            split, _ = rank_bpe(ranks, letters, stop=2)
            if len(split) == 2:
                joins.add((ranks[split[0]], ranks[split[1]], r))
    return {_code(c): ranks[c] for c in atoms}, joins


def _tables_atoms(tables: Any) -> tuple[dict[int, int], set[tuple[int, int, int]]]:
    letters, joins = tables.atoms()
    by_code = {c: r for c, r in enumerate(array.array("I", letters)) if r != NO_ATOM}
    flat = array.array("I", joins)
    return by_code, {tuple(flat[i : i + 3]) for i in range(0, len(flat), 3)}  # type: ignore[misc]


@pytest.mark.parametrize("name", RANK_FILES)
def test_atoms_and_joins_are_the_rules(name: str) -> None:
    data, ranks, _ = rank_vocab(name)
    letters, joins = _tables_atoms(encode_module().Tables.from_ranks(data))
    assert (letters, joins) == _rule(ranks)
    if name == "qwen":  # most Chinese letters and words of two or more letters are in
        assert (len(letters), len(joins)) == (14_828, 20_684)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_files_with_and_without_atoms_equal_tiktoken(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "".join(pud_text(lang) for lang in LETTER_LANGS)
    assert_switch_keeps_ids(
        monkeypatch, name, "TOKEMBED_ATOMS", text, lambda tables: tables.atoms() is not None
    )


# ---- crafted vocabularies ---------------------------------------------------------------
LETTERS = [c.encode() for c in "中文字한"]


@st.composite
def _crafted(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A rank file of four letters, some of their two-byte halves, tokens of two to four whole
    letters and tokens holding part of a letter, in shuffled rank order (so tokens of whole
    letters often rank below their letters, and some letters never form), with chunks of the
    letters, some after a space or an ASCII letter."""
    pieces: list[bytes] = []
    for c in LETTERS:
        pieces += [h for h in (c[:2], c[1:]) if draw(st.booleans())]
        if draw(st.integers(0, 3)):
            pieces.append(c)
    word = st.lists(st.sampled_from(LETTERS), min_size=2, max_size=4).map(b"".join)
    pieces += draw(st.lists(word, max_size=12))
    for _ in range(draw(st.integers(0, 3))):  # part of a letter at one end or both
        w = draw(word)
        i, j = draw(st.integers(0, 2)), draw(st.integers(len(w) - 2, len(w)))
        pieces.append(w[i:j])
    pieces = list(dict.fromkeys(p for p in pieces if len(p) >= 2))
    pieces = draw(st.permutations(pieces))
    text = st.lists(st.sampled_from(LETTERS), min_size=1, max_size=24).map(b"".join)
    lead = st.sampled_from(["", " ", "a"])
    chunks = draw(st.lists(st.tuples(lead, text).map(lambda t: t[0] + t[1].decode()), min_size=1))
    return rank_file_of(*pieces), chunks


_ZHONG, _WEN, _ZI, _SHU = (c.encode() for c in "中文字书")
# "文字" and "字书" rank below "文" itself: from the bytes "字书" is made before "文" is whole;
# from whole letters "文字" would go first
_EARLY = (_ZI[:2], _ZI, _SHU[:2], _SHU, _WEN + _ZI, _ZI + _SHU, _WEN[:2], _WEN)
# a token ends inside "文", made before "文" is: the boundary before "文" may not hold letters
_PARTIAL = (_ZHONG[:2], _ZHONG, _ZHONG + _WEN[:1], _WEN[1:], _WEN)


@settings(max_examples=400, deadline=None)
@given(_crafted())
@example((rank_file_of(_ZHONG[:2], _ZHONG, _WEN[:2], _WEN), ["中文中文中中文字"]))  # no joins
@example((rank_file_of(*_EARLY), ["文字书", "中文字书文字"]))
@example((rank_file_of(*_PARTIAL), ["中文文中文"]))
def test_crafted_rank_files_merge_from_letters_and_equal_tiktoken(
    case: tuple[bytes, list[str]],
) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    data, chunks = case
    ranks = parse_ranks(data)
    tables = encode_module().Tables.from_ranks(data)
    assert _tables_atoms(tables) == _rule(ranks)
    peer = tiktoken.Encoding("crafted", pat_str=r"[^\n]+", mergeable_ranks=ranks, special_tokens={})
    expected = [i for c in chunks for i in peer._encode_single_piece(c.encode())]
    enc = encode_module().Encoder(tables, cache_limit=1 << 10)
    assert enc.encode_chunks("".join(chunks), chunks) == expected
    assert enc.encode_chunks("".join(chunks), chunks) == expected  # the front cache's turn


def test_a_letter_with_a_byte_without_an_id_is_no_atom() -> None:
    """A chunk holding a byte without an id fails whatever its merges, with atoms as without,
    naming the byte's offset."""
    from tokembed.tokenizer.formats.ranks import parse_ranks

    module = encode_module()
    data = rank_file_of(_ZHONG[:2], _ZHONG, _WEN[:2], _WEN, without=_WEN[2:])
    tables = module.Tables.from_ranks(data)
    letters, _ = _tables_atoms(tables)
    zhong = parse_ranks(data)[_ZHONG]
    assert letters == {_code(_ZHONG): zhong}
    enc = module.Encoder(tables, cache_limit=1 << 10)
    assert enc.encode_chunks("中中中", ["中中中"]) == [zhong] * 3
    with pytest.raises(module.MissingByte) as err:
        enc.encode_chunks("中中中文", ["中中中文"])
    assert err.value.args == (11,)  # the last byte of "文"
