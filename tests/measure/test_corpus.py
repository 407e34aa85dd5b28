"""Corpora and records: document rules, golden PUD counts, hashes, alignment."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from pathlib import Path

import pytest
from _measure_data import pud

from conftest import PUD_LANGS, data_path, pud_file, pud_text
from tokembed.errors import MeasureError, UsageError
from tokembed.measure.corpus import align, load_corpus, text_corpus

_BLOCK = "# sent_id = {sid}\n# text = {text}\n1\tx\tx\tX\t_\t_\t0\troot\t_\t_\n\n"


def test_russian_pud_golden_counts_and_hash() -> None:
    rec = pud("ru")["ru"].record()
    assert (rec.bytes, rec.sentences, rec.documents) == (213_766, 1000, 397)
    assert rec.join_rule == "lf+final"
    assert rec.doc_rule == "sent-prefix:6"
    expected = pud_text("ru").encode("utf-8")
    assert rec.text_sha256 == hashlib.sha256(expected).hexdigest()
    assert rec.chars == len(pud_text("ru"))


def test_file_hashes_equal_the_provenance_table() -> None:
    with data_path("ud-pud-2.15", "PROVENANCE.tsv").open(encoding="utf-8") as f:
        table = {row["file"]: row for row in csv.DictReader(f, delimiter="\t")}
    rec = load_corpus(pud_file("fi")).record()
    (file,) = rec.files
    assert file.sha256 == table["fi_pud-ud-test.conllu"]["sha256"]
    assert file.bytes == int(table["fi_pud-ud-test.conllu"]["bytes"])


@pytest.mark.parametrize("lang", PUD_LANGS)
def test_every_pud_language_has_1000_sentences_in_397_documents(lang: str) -> None:
    # newdoc lines differ (per sentence in ar/zh, absent in id/ko/th); sent-prefix:6 does not.
    rec = load_corpus(pud_file(lang)).record()
    assert (rec.sentences, rec.documents) == (1000, 397)


def test_all_thirteen_languages_are_parallel() -> None:
    corpora = align([load_corpus(pud_file(lang), name=lang) for lang in PUD_LANGS])
    assert list(corpora) == list(PUD_LANGS)


def test_newdoc_rule_follows_the_file_and_shows_why_pud_needs_prefixes() -> None:
    zh = load_corpus(pud_file("zh"), doc_rule="newdoc").record()
    ko = load_corpus(pud_file("ko"), doc_rule="newdoc").record()
    ru = load_corpus(pud_file("ru"), doc_rule="newdoc").record()
    assert ru.documents == 397
    assert ko.documents == 1  # no newdoc lines: the whole file is one document
    assert zh.documents == 397  # repeated per sentence, but with the same ids


def test_plain_text_and_gzip_are_verbatim(tmp_path: Path) -> None:
    body = "first line\n\nsecond  line"  # no final LF, an empty line: kept as is
    (tmp_path / "a.txt").write_text(body, encoding="utf-8")
    with gzip.open(tmp_path / "a.txt.gz", "wt", encoding="utf-8") as f:
        f.write(body)
    for name in ("a.txt", "a.txt.gz"):
        c = load_corpus(tmp_path / name)
        rec = c.record()
        assert c.text == body
        assert rec.join_rule == "verbatim"
        assert (rec.bytes, rec.sentences, rec.documents) == (len(body), 2, 1)
        assert rec.files[0].sha256 == hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()


def test_empty_corpus(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "empty.conllu").write_text("# newdoc id = d\n\n", encoding="utf-8")
    for name in ("empty.txt", "empty.conllu"):
        with pytest.raises(MeasureError) as e:
            load_corpus(tmp_path / name)
        assert e.value.code == "EMPTY_INPUT"


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(MeasureError) as e:
        load_corpus(tmp_path / "latin1.txt")
    assert e.value.code == "INPUT_NOT_UTF8"


def test_gzip_by_content_whatever_the_name(tmp_path: Path) -> None:
    block = _BLOCK.format(sid="s1", text="Привет.")
    (tmp_path / "packed.conllu").write_bytes(gzip.compress(block.encode()))
    (tmp_path / "plain.conllu.gz").write_text(block, encoding="utf-8")
    for name in ("packed.conllu", "plain.conllu.gz"):
        c = load_corpus(tmp_path / name)
        assert (c.format, c.text) == ("conllu", "Привет.\n")
    (tmp_path / "cut.txt.gz").write_bytes(gzip.compress(b"hello world\n")[:-6])
    with pytest.raises(MeasureError) as e:
        load_corpus(tmp_path / "cut.txt.gz")
    assert e.value.code == "UNREADABLE_INPUT"


def test_a_folder_is_one_corpus_with_a_document_per_file(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.txt").write_text("second\n", encoding="utf-8")
    (tmp_path / "d" / "a.txt.gz").write_bytes(gzip.compress(b"first\nline two\n"))
    c = load_corpus(tmp_path / "d")
    assert c.name == "d"
    assert c.documents == (str(tmp_path / "d" / "a.txt.gz"), str(tmp_path / "d" / "b.txt"))
    assert c.text == "first\nline two\nsecond\n"
    assert c.units == ("first\nline two\n", "second\n")  # each file encoded on its own
    assert [f.path for f in c.record().files] == list(c.documents)
    glob = load_corpus(str(tmp_path / "d" / "*.txt"))
    assert (glob.name, glob.text) == (str(tmp_path / "d" / "*.txt"), "second\n")


def test_conllu_files_of_a_folder_and_mixed_folders(tmp_path: Path) -> None:
    (tmp_path / "a.conllu").write_text(_BLOCK.format(sid="s1", text="x"), encoding="utf-8")
    (tmp_path / "b.conllu").write_text(_BLOCK.format(sid="s2", text="y"), encoding="utf-8")
    c = load_corpus(tmp_path)
    assert (c.format, c.sentence_ids, c.text) == ("conllu", ("s1", "s2"), "x\ny\n")
    (tmp_path / "c.txt").write_text("z\n", encoding="utf-8")
    with pytest.raises(UsageError) as e:
        load_corpus(tmp_path)
    assert e.value.code == "INVALID_ARGUMENT"


def test_stdin_is_a_corpus() -> None:
    c = load_corpus("-", stdin=io.BytesIO("из stdin\n".encode()))
    assert (c.name, c.text, c.join) == ("stdin", "из stdin\n", "verbatim")


def test_missing_file() -> None:
    with pytest.raises(UsageError) as e:
        load_corpus("/nonexistent/file.conllu")
    assert e.value.code == "FILE_NOT_FOUND"


def test_unaligned_parallel_files_name_the_first_difference(tmp_path: Path) -> None:
    a = tmp_path / "a.conllu"
    b = tmp_path / "b.conllu"
    a.write_text(_BLOCK.format(sid="s1", text="x") + _BLOCK.format(sid="s2", text="y"))
    b.write_text(_BLOCK.format(sid="s1", text="x") + _BLOCK.format(sid="s3", text="y"))
    with pytest.raises(MeasureError) as e:
        align([load_corpus(a), load_corpus(b)])
    assert e.value.code == "UNALIGNED_PARALLEL_CORPUS"
    assert "'s2'" in e.value.message
    assert "'s3'" in e.value.message
    short = tmp_path / "c.conllu"
    short.write_text(_BLOCK.format(sid="s1", text="x"))
    with pytest.raises(MeasureError) as e:
        align([load_corpus(a), load_corpus(short)])
    assert e.value.code == "UNALIGNED_PARALLEL_CORPUS"


def test_text_corpus_lines_are_sentences() -> None:
    c = text_corpus("t", "a\nb\n")
    assert [s.text for s in c.sentences] == ["a", "b"]
    assert c.record().bytes == 4
