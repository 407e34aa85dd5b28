"""Decoding: bytes, strict/replace text, streams; round trip for every valid str."""

from __future__ import annotations

import pytest
from _core_data import pud_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import TokenizerError, UsageError

П = [208, 159]  # "П" is D0 9F: two byte tokens


@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_round_trip_any_valid_str(text: str) -> None:
    tok = pud_tokenizer()
    ids = tok.encode_ordinary(text)
    assert tok.decode(ids) == text
    assert tok.decode_bytes(ids) == text.encode("utf-8")
    assert ids == tok.encode_ordinary_reference(text)


@settings(max_examples=100, deadline=None)
@given(
    prefix=st.text(max_size=10),
    surrogate=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    suffix=st.text(max_size=10),
)
def test_lone_surrogates_refused(prefix: str, surrogate: str, suffix: str) -> None:
    tok = pud_tokenizer()
    with pytest.raises(TokenizerError) as e:
        tok.encode(prefix + surrogate + suffix)
    assert e.value.code == "LONE_SURROGATE"
    assert e.value.value == len(prefix)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_stream_decoder_equals_decode(text: str, cuts: list[int]) -> None:
    tok = pud_tokenizer()
    ids = tok.encode_ordinary(text)
    stream = tok.stream_decoder()
    out, pos = [], 0
    for cut in [*sorted(c % (len(ids) + 1) for c in cuts), len(ids)]:
        out.append(stream.feed(ids[pos:cut]))
        pos = cut
    out.append(stream.flush())
    assert "".join(out) == text


def test_stream_holds_an_incomplete_character() -> None:
    tok = pud_tokenizer()
    stream = tok.stream_decoder()
    assert stream.feed([П[0]]) == ""
    assert stream.feed([П[1], 33]) == "П!"
    assert stream.feed([П[0]]) == ""
    with pytest.raises(TokenizerError) as e:
        stream.flush()
    assert e.value.code == "INVALID_UTF8"
    assert e.value.value == 3  # byte offset of the unfinished D0 in the whole stream
    lenient = tok.stream_decoder(errors="replace")
    assert lenient.feed([П[0]]) + lenient.flush() == "\ufffd"


def test_strict_and_replace() -> None:
    tok = pud_tokenizer()
    with pytest.raises(TokenizerError) as e:
        tok.decode([65, 66, 0xFF, 67])
    assert e.value.code == "INVALID_UTF8"
    assert e.value.value == 2
    assert tok.decode([65, 0xFF], errors="replace") == "A\ufffd"
    assert tok.decode_bytes([65, 0xFF]) == b"A\xff"
    assert tok.decode([65, 0xFF, 66], errors="ignore") == "AB"  # tiktoken's third policy
    with pytest.raises(UsageError) as e2:
        tok.decode([65], errors="surrogateescape")  # type: ignore[arg-type]
    assert e2.value.code == "INVALID_ARGUMENT"


def test_unknown_ids() -> None:
    tok = pud_tokenizer()
    for bad in (-1, 2258, 4999, 10**9):
        with pytest.raises(KeyError) as e:  # what tiktoken raises, so its callers catch ours
            tok.decode([65, bad])
        assert isinstance(e.value, TokenizerError)
        assert e.value.code == "UNKNOWN_TOKEN_ID"
        assert e.value.value == bad
    assert tok.piece(256) == tok.tables.pieces[256]
    assert tok.piece(2256) == b"<|endoftext|>"


def test_decode_refuses_floats_and_bools_and_reads_integer_tensors() -> None:
    import numpy as np
    import torch

    tok = pud_tokenizer()
    ids = tok.encode("Привет")
    assert tok.decode(torch.tensor(ids)) == "Привет"
    assert tok.decode(np.array(ids, dtype=np.int64)) == "Привет"
    for bad in (
        [float(ids[0])],
        [True],
        torch.tensor([float(i) for i in ids]),
        torch.tensor([ids]),
    ):
        with pytest.raises(UsageError) as e:
            tok.decode(bad)
        assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(TokenizerError) as e2:
        tok.decode(torch.tensor([10**9]))
    assert (e2.value.code, e2.value.value) == ("UNKNOWN_TOKEN_ID", 10**9)
