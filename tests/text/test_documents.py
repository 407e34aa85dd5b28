"""Documents cut from streamed text equal the same rule applied to the whole text."""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import MeasureError, UsageError
from tokembed.text.documents import (
    input_format_of,
    iter_document_pieces,
    parse_doc_rule,
    split_documents,
)
from tokembed.text.ranges import ByteRange, split_ranges


def _whole(text: str, spec: str) -> list[str]:
    """The rule applied to the whole text, as plainly as it can be written."""
    if spec == "file":
        return [text] if text else []
    if spec == "line":
        return [x.removesuffix("\r") for x in text.split("\n") if x.removesuffix("\r")]
    if spec.startswith("sep:"):
        return [x for x in text.split(spec[4:]) if x]
    docs, para = [], []
    for line in text.split("\n"):
        if line.strip(" \t\r"):
            para.append(line.removesuffix("\r"))
        elif para:
            docs.append("\n".join(para))
            para = []
    if para:
        docs.append("\n".join(para))
    return docs


def _cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


_RULES = ["line", "blank-line", "file", "sep:|", "sep:||", "sep:aa", "sep:<|endoftext|>"]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ab \n\r\t|<>endoftxt", max_size=80),
    points=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    spec=st.sampled_from(_RULES),
)
def test_pieces_cut_anywhere_give_the_whole_texts_documents(
    text: str, points: list[int], spec: str
) -> None:
    assert list(split_documents(_cut(text, points), parse_doc_rule(spec))) == _whole(text, spec)


def test_rules_parse_and_refuse() -> None:
    assert parse_doc_rule("sep:<|endoftext|>").sep == "<|endoftext|>"
    assert parse_doc_rule("blank-line").spec == "blank-line"
    for bad in ("lines", "sep:", "", "paragraph"):
        with pytest.raises(UsageError) as info:
            parse_doc_rule(bad)
        assert info.value.code == "INVALID_ARGUMENT"


def test_cut_points_never_cut_a_document() -> None:
    assert parse_doc_rule("line").cut_after == b"\n"
    assert parse_doc_rule("blank-line").cut_after == b"\n\n"
    assert parse_doc_rule("sep:<|endoftext|>").cut_after == b"<|endoftext|>"
    assert parse_doc_rule("sep:aa").cut_after is None  # occurrences can overlap
    assert parse_doc_rule("file").cut_after is None


def test_input_format_by_name() -> None:
    assert input_format_of("x.jsonl") == "jsonl"
    assert input_format_of("x.ndjson.gz") == "jsonl"
    assert input_format_of("x.conllu") == "conllu"
    assert input_format_of("x.txt") == "text"
    assert input_format_of("x.txt", "jsonl") == "jsonl"
    with pytest.raises(UsageError) as info:
        input_format_of("x.txt", "csv")
    assert info.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("spec", ["line", "blank-line", "sep:<|endoftext|>"])
def test_ranges_of_a_real_file_give_its_documents(tmp_path: Path, spec: str) -> None:
    from conftest import PUD_LANGS, pud_text

    # 13 languages' sentences; every 7th line ends a paragraph and a separated document
    lines = "".join(pud_text(lang) for lang in PUD_LANGS).splitlines()
    text = "".join(
        line + ("\n\n<|endoftext|>" if i % 7 == 6 else "\n") for i, line in enumerate(lines)
    )
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    rule = parse_doc_rule(spec)
    assert rule.cut_after is not None
    ranges = split_ranges([path], target_bytes=50_000, delimiter=rule.cut_after)
    assert len(ranges) >= 3
    got: list[str] = []
    for r in ranges:
        held = ""
        for piece, ends in iter_document_pieces(r, rule=rule, max_piece_chars=3_000):
            held += piece
            if ends:
                got.append(held)
                held = ""
        assert held == ""
    assert got == _whole(text, spec)


def test_long_document_leaves_in_safe_pieces(tmp_path: Path) -> None:
    from conftest import pud_text

    text = pud_text("ru") + pud_text("zh")
    path = tmp_path / "book.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    r = ByteRange(path=str(path), index=0, start=0, stop=None)
    pieces = list(iter_document_pieces(r, rule=parse_doc_rule("file"), max_piece_chars=10_000))
    assert len(pieces) > 10
    assert [ends for _, ends in pieces] == [False] * (len(pieces) - 1) + [True]
    assert "".join(p for p, _ in pieces) == text
    assert all(len(p) <= 10_000 + 1_000 for p, _ in pieces)  # cut at the first safe point


def test_jsonl_records_are_documents_and_errors_name_the_file_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    lines = [f'{{"text": "record {i}\\nsecond line", "id": {i}}}' for i in range(2000)]
    lines[1500] = '{"txt": "wrong field"}'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ranges = split_ranges([path], target_bytes=20_000)
    assert len(ranges) > 2
    docs: list[str] = []

    def read_all() -> None:
        for r in ranges:
            docs.extend(t for t, _ in iter_document_pieces(r, rule=parse_doc_rule("blank-line")))

    with pytest.raises(MeasureError) as info:
        read_all()
    assert info.value.code == "MALFORMED_JSONL"
    assert f"{path}:1501:" in info.value.message  # counted from the file's start
    assert docs[:2] == ["record 0\nsecond line", "record 1\nsecond line"]


def test_conllu_sentences_are_lines(tmp_path: Path) -> None:
    from conftest import pud_file

    r = ByteRange(path=str(pud_file("en")), index=0, start=0, stop=None)
    docs = [t for t, _ in iter_document_pieces(r, rule=parse_doc_rule("line"))]
    assert len(docs) == 1000  # PUD: 1,000 sentences per language
    assert docs[0].startswith("“While much of the digital transition")
