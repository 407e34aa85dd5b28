"""The generated tables are current: regenerating each checked-in file gives the same file."""

from __future__ import annotations

import pytest

from tokembed.tokenizer import _gen_tables as gen_tables


def test_presets_header_follows_the_preset_table() -> None:
    text = gen_tables.PRESETS_HEADER.read_text(encoding="utf-8")
    assert text == gen_tables.render_presets_header()
    # The scanner's numbers are positions in patterns.SCANNED, which the Python side uses.
    assert "TK_PRESET_QWEN,\n    TK_NPRESETS" in text


def test_classes_header_follows_the_unicode_tables() -> None:
    assert (
        gen_tables.CLASSES_HEADER.read_text(encoding="utf-8") == gen_tables.render_classes_header()
    )


@pytest.mark.slow
def test_unicode_tables_match_the_engines() -> None:
    """Runs tiktoken's and Hugging Face's regex engines on every code point (about a minute)."""
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    assert gen_tables.TABLES_MODULE.read_text(encoding="utf-8") == gen_tables.render_tables_module()
