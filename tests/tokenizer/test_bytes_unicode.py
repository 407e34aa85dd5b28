"""GPT-2's byte ↔ character table: a bijection on 256 bytes with the published anchors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokembed.errors import FormatError
from tokembed.tokenizer.bytes_unicode import (
    BYTE_TO_CHAR,
    bytes_to_token_text,
    token_text_to_bytes,
)


def test_table_anchors() -> None:
    assert len(set(BYTE_TO_CHAR)) == 256
    assert BYTE_TO_CHAR[0x20] == "Ġ"  # U+0120: the space every GPT-2 word token starts with
    assert BYTE_TO_CHAR[0x0A] == "Ċ"  # U+010A
    assert BYTE_TO_CHAR[0x00] == "Ā"  # U+0100: first moved byte
    assert BYTE_TO_CHAR[ord("A")] == "A"
    assert BYTE_TO_CHAR[0xAD] == "Ń"  # soft hyphen is moved (U+0143), 0xAE stays
    assert BYTE_TO_CHAR[0xAE] == "®"


@given(st.binary(max_size=64))
def test_round_trip(data: bytes) -> None:
    assert token_text_to_bytes(bytes_to_token_text(data)) == data


def test_foreign_character_is_refused() -> None:
    with pytest.raises(FormatError) as e:
        token_text_to_bytes("a▁b")
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"
