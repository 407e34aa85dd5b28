"""JSON Lines records: the text field of each object, every bad line refused with its place."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import MeasureError
from tokembed.text.jsonl import is_jsonl, jsonl_texts, record_text


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(max_size=30), max_size=10),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_records_streamed_in_any_pieces(texts: list[str], cuts: list[int]) -> None:
    data = "".join(json.dumps({"text": t, "n": 1}, ensure_ascii=False) + "\n" for t in texts)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    pieces = [data[a:b] for a, b in itertools.pairwise(bounds)]
    assert list(jsonl_texts(pieces, field="text", name="x.jsonl")) == texts


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("not json", "not JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"body": "x"}', "no field 'text'"),
        ('{"text": null}', "field 'text' is null"),
        ('{"text": 3}', "field 'text' is int"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_bad_lines_are_refused_with_file_and_line(line: str, why: str) -> None:
    with pytest.raises(MeasureError) as info:
        list(jsonl_texts(['{"text": "ok"}\n', line + "\n"], field="text", name="c.jsonl"))
    assert info.value.code == "MALFORMED_JSONL"
    assert info.value.message.startswith(f"c.jsonl:2: {why}")
    assert info.value.value == ("c.jsonl", 2)


def test_blank_lines_and_names() -> None:
    assert record_text("   ", field="text") is None
    assert record_text('{"content": "x"}', field="content") == "x"
    assert is_jsonl("a.jsonl")
    assert is_jsonl("a.ndjson.gz")
    assert not is_jsonl("a.json")
