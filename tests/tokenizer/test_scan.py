"""The compiled preset scanner (``_native/scan.c``) splits exactly like ``Pretokenizer.split``.

Every preset and Qwen's rank-file pattern under both dialects, on the 13 PUD languages, a slice of RusLit-40 and
hypothesis texts built from the characters where the patterns branch (letters of
each case group, marks, numbers of every kind, apostrophes and the long s, CR/LF,
every whitespace character, '/', and code points the engines' tables classify
differently from the ``regex`` module's). The generated tables it reads are
regenerated and compared with the committed files (``test_gen_tables.py``).
"""

from __future__ import annotations

import pytest
from _scan_cases import (
    CASES,
    DIALECT_ID,
    PRESETS,
    STRESS_ALPHABET,
    STRESS_TEXTS,
    c_split,
    compiled_count,
    pretokenizer,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.tokenizer.dialect import DIALECTS, Dialect


def test_compiled_module_is_built() -> None:
    assert compiled_count().Counter is not None


@pytest.mark.parametrize(("preset", "dialect"), CASES)
def test_pud_languages(preset: str, dialect: Dialect) -> None:
    pre = pretokenizer(preset, dialect)
    for lang in PUD_LANGS:
        text = pud_text(lang)
        assert c_split(text, preset, dialect) == pre.split(text), lang


@pytest.mark.parametrize(("preset", "dialect"), CASES)
def test_ruslit_slice(preset: str, dialect: Dialect, ruslit_text: str) -> None:
    text = ruslit_text[:1_000_000]
    assert c_split(text, preset, dialect) == pretokenizer(preset, dialect).split(text)


@settings(max_examples=300, deadline=None)
@given(text=STRESS_TEXTS)
def test_stress_texts(text: str) -> None:
    for preset, dialect in CASES:
        assert c_split(text, preset, dialect) == pretokenizer(preset, dialect).split(text), (
            preset,
            dialect,
        )


@settings(max_examples=300, deadline=None)
@given(text=STRESS_TEXTS, at=st.integers(0, 200))
def test_safe_cut_keeps_the_pieces(text: str, at: int) -> None:
    data = text.encode("utf-8")
    for dialect in DIALECTS:
        cut = compiled_count().safe_cut(data, DIALECT_ID[dialect], at)
        assert cut >= min(at, len(data))
        if cut == len(data):
            continue
        head, tail = data[:cut].decode("utf-8"), data[cut:].decode("utf-8")
        for preset in PRESETS:
            pre = pretokenizer(preset, dialect)
            assert pre.split(head) + pre.split(tail) == pre.split(text), (preset, dialect, cut)


def test_safe_cut_positions() -> None:
    mod = compiled_count()
    text = b"ab\n cd\n/ef\n\ngh \nij\nkl"
    # A cut: before the space of a letter's piece at a line's start. Not cuts: a line
    # starting with '/', an empty line, a line ending in a space.
    assert mod.safe_cut(text, 0, 0) == text.index(b" cd")
    assert mod.safe_cut(text, 0, text.index(b" cd") + 1) == text.index(b"kl")
    assert mod.safe_cut(text, 1, text.index(b"kl") + 1) == len(text)
    assert mod.safe_cut(b"a\nb", 0, 0) == 2
    # An indented line: before the last space of the indent, not before a digit or a mark.
    assert mod.safe_cut(b"a,\n  word", 0, 0) == 4
    marked = "a  1 \u0301x".encode()
    assert mod.safe_cut(marked, 0, 0) == len(marked)


@pytest.mark.parametrize(
    "run",
    [
        "abcdefghijklmnopqrst",
        "ABCDEFGHIJKLMNOPQRST",
        "AbCdEfGhIjKlMnOpQrSt",
        "01234567890123456789",
    ],
)
def test_ascii_runs_end_at_every_byte(run: str) -> None:
    """Runs of ASCII letters, of one case and of digits are read eight bytes at a time: each
    ASCII character and a few others, at every offset of a 20-character run (so across two
    words), end it exactly where the regex ends it, and a non-ASCII letter inside it joins."""
    stoppers = [chr(c) for c in range(0x80)] + [
        "\u00e9",
        "\u0416",
        "\u4e2d",
        "\u0301",
        "\U0001f600",
    ]
    texts = [run[:k] + c + run[k:] for c in stoppers for k in range(0, 18)]
    texts += [" " + t for t in texts[:: len(texts) // 40]]
    for preset, dialect in CASES:
        pre = pretokenizer(preset, dialect)
        for text in texts:
            assert c_split(text, preset, dialect) == pre.split(text), (preset, dialect, text)


@pytest.mark.parametrize(
    "run",
    [
        "абвгдежзийклмнопрстуфхцчшщъыьэюяёђѓєѕ",  # lower case, U+0430-U+045F
        "АБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯЁЂЃЄЅ",  # upper case, U+0400-U+042F
        "ПриветМирЪѠѡѢѣѤѥѦѧѨѩѪѫѬѭѮѯѰѱѲѳѴѵѶѷѸѹѺѻѼѽѾѿ",  # mixed, and U+0460-U+047F
    ],
)
def test_cyrillic_runs_end_at_every_character(run: str) -> None:
    """Runs of two-byte Cyrillic letters are read sixteen bytes at a time: a character of
    every other kind (ASCII, the other Cyrillic case, the non-letters U+0482 and U+0483 right
    after the letters, Greek, Latin-1, CJK, an emoji), at every offset of a 38-letter run (so
    past two blocks), ends or joins it exactly where the regex does, for every preset."""
    stoppers = [" ", ",", "a", "Z", "7", "'", "\n", "\u0482", "\u0483", "\u0488", "\u048a"]
    stoppers += ["\u0416", "\u0436", "\u0460", "\u0461", "\u03b1", "\u00e9", "\u4e2d"]
    stoppers += ["\U0001f600"]
    texts = [run[:k] + c + run[k:] for c in stoppers for k in range(0, len(run) + 1)]
    texts += [" " + t for t in texts[::7]]
    texts += [run[:k] for k in range(1, len(run) + 1)]  # a run that reaches the end
    for preset, dialect in CASES:
        pre = pretokenizer(preset, dialect)
        for text in texts:
            assert c_split(text, preset, dialect) == pre.split(text), (preset, dialect, text)


# Long texts of mostly ASCII: every preset reads them 64 bytes at a time (scan_bits.h), a
# block taking up to 12 other characters (letters, punctuation), so every rule's case must meet
# every offset of a block and its end. Parts where the rules branch (contractions in both
# cases, a space or a second mark before punctuation, blank and CR/LF runs, digit runs past
# three; o200k's capitals after small letters, contractions that end a word and those that
# follow one, '/' after punctuation's line breaks), Latin letters of both cases and punctuation
# of two or three bytes, marks, and characters that send a block to the matcher (the long s
# after an apostrophe, NBSP, an Arabic digit, a modifier letter and other letters of no case,
# the stress alphabet's numbers and whitespace).
_ASCII_PARTS = st.one_of(
    st.text(alphabet="aAsSdDmMtTlLvVeErRxy'  \t\n\r\x0b\x0c.,(\"-/0123456789", max_size=20),
    st.text(
        alphabet=STRESS_ALPHABET
        + "\u00e0\u00fc\u00df\u0131\u0141\u00ab\u00bb\u00bf\u00a7\u2026\u00ad",
        max_size=3,
    ),
    st.sampled_from(
        [
            *("'s", "'ll", "'VE", "'re ", " 'd", "\r\n", "  \n ", "\n\n  ", "1234567", ". \n"),
            *(".\n\n", "  ", "   x", "''s", "x's", "(x", " (x", "\u00e9", "\u017f", "'\u017f"),
            *("\u00a0", "\u0663", " \u00abx", "\u00abx", "\u00ab\u00abx", "'\u00e9", "\u2019s"),
            *("x'rE", "a'd's", "x'sY", "DON'T", "'Ll", ".\n/", ";\n//x", "aB", "ABc"),
            *("\u00c9t\u00e9", "a\u00c0b", "\u00aa", "\u02b0", "e\u0301", "\u0130i", "x'\u00c9"),
        ]
    ),
)
ASCII_TEXTS = st.lists(_ASCII_PARTS, min_size=1, max_size=60).map("".join)
BLOCK_PRESETS = ("teaching", "cl100k", "qwen", "r50k", "gpt2-hf", "o200k")


@settings(max_examples=1000, deadline=None)
@given(text=ASCII_TEXTS)
def test_ascii_blocks(text: str) -> None:
    for preset in BLOCK_PRESETS:
        for dialect in DIALECTS:
            pre = pretokenizer(preset, dialect)
            assert c_split(text, preset, dialect) == pre.split(text), (preset, dialect)


def test_ascii_block_edges() -> None:
    """Each case of the block rules at every offset across the first block's end (and the
    second's start): a filler of words before it, of 40 to 80 bytes, and after it."""
    cases = [
        "\n  \n  x",
        "a 'll",
        "x  y",
        ".\n\n z",
        "12345678",
        " (x",
        "\r\n \r\n ",
        "'s'",
        "  \t(",
    ]
    cases += [".\n\n", " 9 9", "''s", "x\t\n", "a.b", "  \n\n  \n", "    ", "\n\n\n", " 'll", "'Sx"]
    cases += ["x'll", "a're", "\u00abx", "x(\u00ab", "\u00e9\u00e9"]
    cases += ["x'rE", "a'd's", ".\n/x", "aB", "x'", "\u00e9'S", "\u00e9\u00c9"]
    filler = "one two, three (four) five's 'six' 77 "
    for case in cases:
        texts = [(filler * 3)[:k] + case + filler for k in range(40, 81)]
        texts += [(filler * 3)[:k] + case for k in range(40, 81)]  # the case ends the text
        for preset in BLOCK_PRESETS:
            for dialect in DIALECTS:
                pre = pretokenizer(preset, dialect)
                for text in texts:
                    assert c_split(text, preset, dialect) == pre.split(text), (preset, text)


def test_stop_early_and_empty() -> None:
    assert compiled_count().piece_ends(b"", 0, 0) == []
    assert c_split("x", "o200k", "tiktoken") == ["x"]


def test_qwen_takes_one_number_and_every_line_break() -> None:
    """Qwen's pattern differs from cl100k's in \\p{N} (one number, not up to three) and
    \\s*[\\r\\n]+ (all the line breaks of a run, as \\s*[\\r\\n] ends after the last)."""
    text = "Qwen 2024 ab\r\n\n  x²³ 's"
    want = ["Qwen", " ", "2", "0", "2", "4", " ab", "\r\n\n", " ", " x", "²", "³", " '", "s"]
    for dialect in DIALECTS:
        assert c_split(text, "qwen", dialect) == want == pretokenizer("qwen", dialect).split(text)
    assert c_split(text, "cl100k", "tiktoken")[2] == "202"
