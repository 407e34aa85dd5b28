"""Lines of UTF-8 bytes encoded as documents (``Tokenizer.encode_lines_to_numpy``).

The compiled line encoder cuts, checks (``_native/utf8_check.h``: 16 bytes at a time, then
a byte loop for the offset) and encodes in one call; each answer is compared with decoding
the bytes in Python, cutting the lines and encoding them as a batch, and with the pure-Python
engine: on real text, on the line rule's edge cases and on hypothesis bytes built to break
UTF-8 at every position of a 16-byte block.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.errors import TokenizerError
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer, load_tokenizer
from tokembed.tokenizer._utf8 import utf8_lines
from tokembed.tokenizer.encode import ReferenceEncoder


@cache
def _o200k() -> Tokenizer:
    return load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"))


def _by_lines(tok: Tokenizer, data: bytes) -> tuple[list[int], list[int]]:
    ids, offsets = tok.encode_ordinary_batch_to_numpy(utf8_lines(data))
    return ids.tolist(), offsets.tolist()


def _lines(tok: Tokenizer, data: bytes) -> tuple[list[int], list[int]]:
    ids, offsets = tok.encode_lines_to_numpy(data)
    assert ids.dtype == np.uint32
    assert offsets.dtype == np.int64
    return ids.tolist(), offsets.tolist()


def test_the_line_rule_cases() -> None:
    tok = _o200k()
    data = "hello world\r\n\r\n  \nПривет, мир\n\rx\r\r\n\nlast\r".encode()
    assert utf8_lines(data) == ["hello world", "  ", "Привет, мир", "\rx\r", "last"]
    assert _lines(tok, data) == _by_lines(tok, data)
    ids, offsets = _lines(tok, data)
    assert offsets[0] == 0
    assert len(offsets) == 6
    assert offsets[-1] == len(ids)
    for data in (b"", b"\n", b"\r\n\n\r", b"one", b"one\n", b"\xef\xbb\xbfbom\n"):
        assert _lines(tok, data) == _by_lines(tok, data), data
    assert _lines(tok, b"\n\r\n")[1] == [0]  # no document: one offset


@pytest.mark.parametrize("lang", PUD_LANGS)
def test_real_text_equals_its_lines_encoded(lang: str) -> None:
    tok = _o200k()
    data = pud_text(lang).encode()
    assert _lines(tok, data) == _by_lines(tok, data)


def test_ruslit_equals_its_lines_and_the_reference(ruslit_text: str) -> None:
    tok = _o200k()
    data = ruslit_text[:3_000_000].encode()
    assert _lines(tok, data) == _by_lines(tok, data)
    ref = ReferenceEncoder(tok.tables, tok.pretokenizer)
    small = ruslit_text[:100_000].encode()
    ids, offsets = ref.encode_lines_numpy(small)
    assert (ids.tolist(), offsets.tolist()) == _lines(tok, small)


def _error(call: object, data: bytes) -> TokenizerError | None:
    try:
        call(data)  # type: ignore[operator]
    except TokenizerError as exc:
        return exc
    return None


# Sequences of 1-4 bytes, well-formed or broken in each way UTF-8 can be: a lone or extra
# continuation, an overlong form, a surrogate, past U+10FFFF, a lead with no continuation.
_PIECES = [
    b"a", b" ", b"\n", b"\r", b"\xc2\x80", b"\xd0\x94", b"\xdf\xbf", b"\xe0\xa0\x80",
    b"\xe2\x82\xac", b"\xed\x9f\xbf", b"\xee\x80\x80", b"\xf0\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf0\x80\x80\x80", b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80",
    b"\xf8", b"\xff", b"\xc2", b"\xe2\x82", b"\xf0\x90\x80", b"\xe2", b"\xf0",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES[:13]), max_size=40),
    st.integers(0, 40),
    st.sampled_from(_PIECES),
)
@example([b"a"] * 15, 15, b"\xf0")  # a lead as the last byte of a 16-byte block
@example([b"a"] * 14, 14, b"\xe2\x82")  # cut across a block end
@example([b"a"] * 16, 16, b"\xed\xa0\x80")  # a surrogate starting a block
def test_utf8_is_refused_exactly_where_python_refuses_it(
    good: list[bytes], at: int, piece: bytes
) -> None:
    tok = _o200k()
    data = b"".join([*good[:at], piece, *good[at:]])
    try:
        data.decode("utf-8")
        expected = None
    except UnicodeDecodeError as exc:
        expected = exc.start
    compiled = _error(tok.encode_lines_to_numpy, data)
    reference = _error(ReferenceEncoder(tok.tables, tok.pretokenizer).encode_lines_numpy, data)
    if expected is None:
        assert compiled is None
        assert reference is None
        assert _lines(tok, data) == _by_lines(tok, data)
        return
    assert compiled is not None
    assert reference is not None
    assert compiled.code == reference.code == "INVALID_UTF8"
    assert compiled.value == reference.value == expected
    assert str(compiled) == str(reference)


def test_a_byte_without_an_id_is_named_as_the_batch_names_it() -> None:
    tables = BPETables(pieces={i: bytes([i]) for i in range(256) if i != 0xD0})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    data = "ok\nok, Дом\n".encode()
    with pytest.raises(TokenizerError) as lines:
        tok.encode_lines_to_numpy(data)
    with pytest.raises(TokenizerError) as batch:
        tok.encode_ordinary_batch_to_numpy(["ok", "ok, Дом"])
    assert lines.value.code == batch.value.code == "UNREPRESENTABLE_BYTE"
    assert str(lines.value) == str(batch.value)


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m", "qwen.tiktoken"])
def test_other_vocabularies_and_pretokenizers(name: str) -> None:
    tok = load_tokenizer(data_path("tokenizers", name))
    data = "\n".join(pud_text(lang)[:3000] for lang in PUD_LANGS).encode()
    assert _lines(tok, data) == _by_lines(tok, data)
