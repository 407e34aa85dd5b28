"""The compiled preset scanner (``_native/scan.c``) splits exactly like ``Pretokenizer.split``.

Every preset under both engines, on the 13 PUD languages, a slice of RusLit-40 and
hypothesis texts built from the characters where the patterns branch (letters of
each case group, marks, numbers of every kind, apostrophes and the long s, CR/LF,
every whitespace character, '/', and code points the engines' tables classify
differently from the ``regex`` module's). The class tables it reads are
regenerated and compared with the committed header.
"""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.tokenizer import Pretokenizer
from tokembed.tokenizer._dialect import ENGINES, Engine
from tokembed.tokenizer._native import load

PRESETS = ("teaching", "r50k", "cl100k", "o200k", "gpt2-hf")
_PRESET_ID = {name: i for i, name in enumerate(PRESETS)}  # scan.h's TK_PRESET_* order
_ENGINE_ID = {name: i for i, name in enumerate(ENGINES)}  # TK_ENGINE_* order
CASES = [(p, e) for p in PRESETS for e in ENGINES]


def compiled_count() -> ModuleType:
    """The compiled ``_count`` module; skip without it, but fail under ``CI=true``."""
    module = load("_count")
    if module is None:
        reason = "tokembed.tokenizer._native._count is not built (pip install -e . compiles it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return module


def c_split(text: str, preset: str, engine: Engine) -> list[str]:
    data = text.encode("utf-8")
    ends = compiled_count().piece_ends(data, _PRESET_ID[preset], _ENGINE_ID[engine])
    starts = [0, *ends][: len(ends)]
    return [data[a:b].decode("utf-8") for a, b in zip(starts, ends, strict=True)]


def test_compiled_module_is_built() -> None:
    assert compiled_count().Counter is not None


def test_header_matches_the_engines_tables() -> None:
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    from tokembed.tokenizer._native import gen_classes

    assert gen_classes.HEADER.read_text(encoding="utf-8") == gen_classes.render()


@pytest.mark.parametrize(("preset", "engine"), CASES)
def test_pud_languages(preset: str, engine: Engine) -> None:
    pre = Pretokenizer.preset(preset, engine=engine)
    for lang in PUD_LANGS:
        text = pud_text(lang)
        assert c_split(text, preset, engine) == pre.split(text), lang


@pytest.mark.parametrize(("preset", "engine"), CASES)
def test_ruslit_slice(preset: str, engine: Engine, ruslit_text: str) -> None:
    text = ruslit_text[:1_000_000]
    assert c_split(text, preset, engine) == Pretokenizer.preset(preset, engine=engine).split(text)


# Where the patterns branch: Lu, Ll, Lt (U+01C5), Lm (U+02B0), Lo (U+00AA, U+05D0), marks
# (U+0301, U+0903), numbers Nd/No/Nl, apostrophes, contraction letters in both cases and the
# long s (case-folds to s), CR/LF and every other whitespace, '/', C0 separators (U+001C, not
# whitespace here), and code points where the engines' tables differ from `regex`'s (U+0295,
# U+0558, recent CJK U+323B0, U+3DEC5, U+3FC3F).
_ALPHABET = (
    "aAzZsSdDmMtTlLvVeErRkK\u017f\u212a'\u2019 \t\n\r\x0b\x0c\x1c\x85\xa0\u2000\u2028\u3000"
    '/.,!?-\u2014()"\u00e9\u0416\u0436\u01c5\u02b0\u00aa\u05d0\u0627\u4e2d\u0e01'
    "\u0301\u0903\u093f0123456789\u00b2\u0663\u2160\U0001f600"
    "\u0295\u0558\U000323b0\U0003dec5\U0003fc3f"
)
_TEXTS = st.lists(
    st.one_of(
        st.text(alphabet=_ALPHABET, max_size=12),
        st.sampled_from(["'s", "'LL", "'Ve", "'\u017f", " 'd", "\r\n", "  \n ", "123456", "//\n/"]),
        st.text(max_size=4).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS)
def test_stress_texts(text: str) -> None:
    for preset, engine in CASES:
        assert c_split(text, preset, engine) == Pretokenizer.preset(preset, engine=engine).split(
            text
        ), (preset, engine)


@settings(max_examples=300, deadline=None)
@given(text=_TEXTS, at=st.integers(0, 200))
def test_safe_cut_keeps_the_pieces(text: str, at: int) -> None:
    data = text.encode("utf-8")
    for engine in ENGINES:
        cut = compiled_count().safe_cut(data, _ENGINE_ID[engine], at)
        assert cut >= min(at, len(data))
        if cut == len(data):
            continue
        head, tail = data[:cut].decode("utf-8"), data[cut:].decode("utf-8")
        for preset in PRESETS:
            pre = Pretokenizer.preset(preset, engine=engine)
            assert pre.split(head) + pre.split(tail) == pre.split(text), (preset, engine, cut)


def test_safe_cut_positions() -> None:
    mod = compiled_count()
    text = b"ab\n cd\n/ef\n\ngh \nij\nkl"
    # Not cuts: a line starting with a space or '/', an empty line, a line ending in a space.
    assert mod.safe_cut(text, 0, 0) == text.index(b"kl")
    assert mod.safe_cut(text, 1, text.index(b"kl") + 1) == len(text)
    assert mod.safe_cut(b"a\nb", 0, 0) == 2


def test_stop_early_and_empty() -> None:
    assert compiled_count().piece_ends(b"", 0, 0) == []
    assert c_split("x", "o200k", "tiktoken") == ["x"]
