"""GPT-2's vocab.json + merges.txt: files that define no tokenizer are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokembed.errors import FormatError
from tokembed.tokenizer.bytes_unicode import BYTE_TO_CHAR
from tokembed.tokenizer.formats import load_tokenizer


@pytest.mark.parametrize("merges", ["", "#version: 0.2\n", "\n\n"])
def test_empty_merges_file_is_refused(tmp_path: Path, merges: str) -> None:
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text(merges)
    with pytest.raises(FormatError) as e:
        load_tokenizer(tmp_path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"
    assert "no merges" in e.value.message


def test_a_byte_id_past_2_to_the_32_is_refused(tmp_path: Path) -> None:
    # Found by fuzzing: it loaded, then encoding overflowed in tiktoken's core.
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)} | {"hi": 256}
    vocab["&"] = 33_333_333_338
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("h i\n")
    with pytest.raises(FormatError) as e:
        load_tokenizer(tmp_path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"
