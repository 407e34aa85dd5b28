"""Shared by the scanner and counter tests: the preset x dialect cases, the compiled module
(required under CI), and hypothesis texts built from the characters where the presets branch."""

from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import strategies as st

from tokembed.tokenizer import Pretokenizer
from tokembed.tokenizer._native import load
from tokembed.tokenizer.dialect import DIALECTS, Dialect
from tokembed.tokenizer.patterns import PATTERNS, SCANNED

__all__ = [
    "CASES",
    "DIALECT_ID",
    "PRESETS",
    "PRESET_ID",
    "STRESS_ALPHABET",
    "STRESS_TEXTS",
    "c_split",
    "compiled_count",
    "pretokenizer",
]

# The Pretokenizer presets and "qwen", the pattern of Qwen's rank file (not a named preset).
PRESETS = ("teaching", "r50k", "cl100k", "o200k", "gpt2-hf", "qwen")
assert tuple(name for name, _ in SCANNED) == PRESETS
PRESET_ID = {name: i for i, name in enumerate(PRESETS)}  # scan_presets.h's TK_PRESET_* order
DIALECT_ID = {name: i for i, name in enumerate(DIALECTS)}  # TK_DIALECT_* order
CASES = [(p, d) for p in PRESETS for d in DIALECTS]


def compiled_count() -> ModuleType:
    """The compiled ``_count`` module; skip without it, but fail under ``CI=true``."""
    module = load("_count")
    if module is None:
        reason = "tokembed.tokenizer._native._count is not built (pip install -e . compiles it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return module


def pretokenizer(preset: str, dialect: Dialect = "tiktoken") -> Pretokenizer:
    """The Python splitter of a scanner preset (``qwen``: the qwen encoding's pattern)."""
    pattern = dict(SCANNED)[preset] if preset not in PATTERNS else preset
    return Pretokenizer.preset(pattern, dialect=dialect)


def c_split(text: str, preset: str, dialect: Dialect) -> list[str]:
    data = text.encode("utf-8")
    ends = compiled_count().piece_ends(data, PRESET_ID[preset], DIALECT_ID[dialect])
    starts = [0, *ends][: len(ends)]
    return [data[a:b].decode("utf-8") for a, b in zip(starts, ends, strict=True)]


# Where the patterns branch: Lu, Ll, Lt (U+01C5), Lm (U+02B0), Lo (U+00AA, U+05D0), marks
# (U+0301, U+0903), numbers Nd/No/Nl, apostrophes, contraction letters in both cases and the
# long s (case-folds to s), CR/LF and every other whitespace, '/', C0 separators (U+001C, not
# whitespace here), and code points where the engines' tables differ from `regex`'s (U+0295,
# U+0558, recent CJK U+323B0, U+3DEC5, U+3FC3F), and the ASCII bytes just outside the ranges of
# letters and digits that runs read eight bytes at a time ('@', '[', '`', '{', ':').
STRESS_ALPHABET = (
    "aAzZsSdDmMtTlLvVeErRkK\u017f\u212a'\u2019 \t\n\r\x0b\x0c\x1c\x85\xa0\u2000\u2028\u3000"
    "@[`{:"
    '/.,!?-\u2014()"\u00e9\u0416\u0436\u01c5\u02b0\u00aa\u05d0\u0627\u4e2d\u0e01'
    "\u0301\u0903\u093f0123456789\u00b2\u0663\u2160\U0001f600"
    "\u0295\u0558\U000323b0\U0003dec5\U0003fc3f"
)
STRESS_TEXTS = st.lists(
    st.one_of(
        st.text(alphabet=STRESS_ALPHABET, max_size=12),
        st.sampled_from(["'s", "'LL", "'Ve", "'\u017f", " 'd", "\r\n", "  \n ", "123456", "//\n/"]),
        st.text(max_size=4).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)),
    ),
    max_size=12,
).map("".join)
