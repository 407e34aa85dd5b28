"""Our JSON format: exact round trips, hash verification, refusal of damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _formats_data import pud_texts, real_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.formats import load_tokenizer, save_tokenizer
from tokembed.tokenizer.formats.native import from_document, to_document
from tokembed.tokenizer.model import BPETables, address_hash
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer
from tokembed.tokenizer.train import TrainConfig, train


def _trained() -> Tokenizer:
    text = pud_texts()["en"] + pud_texts()["ru"]
    return train([text], config=TrainConfig(merges=200, specials={"<|end|>": None}, progress=False))


def test_round_trip_keeps_ids_hash_name_and_metadata(tmp_path: Path) -> None:
    tok = _trained()
    tok.name = "demo"
    path = save_tokenizer(tok, tmp_path / "t.json")
    back = load_tokenizer(path)
    assert back.address_hash == tok.address_hash
    assert back.tables.merges == tok.tables.merges
    assert back.tables.specials == tok.tables.specials
    assert (back.name, back.metadata) == ("demo", tok.metadata)
    text = pud_texts()["fi"]
    assert back.encode(text) == tok.encode(text)


def test_round_trip_keeps_the_whole_piece_rule_of_a_rank_file(tmp_path: Path) -> None:
    tok = real_tokenizer("r50k_base")
    assert tok.tables.ignore_merges
    doc = to_document(tok)
    assert doc["ignore_merges"] is True
    assert "ignore_merges" not in to_document(_trained())
    back = load_tokenizer(save_tokenizer(tok, tmp_path / "r50k.json"))
    assert back.tables.ignore_merges
    assert back.address_hash == tok.address_hash


def test_smollm2_round_trip_keeps_holes_and_low_special_ids(tmp_path: Path) -> None:
    tok = real_tokenizer("smollm2-135m")
    back = load_tokenizer(save_tokenizer(tok, tmp_path / "smol.json"))
    assert back.address_hash == tok.address_hash
    assert back.tables.missing_bytes() == tok.tables.missing_bytes()


def test_address_hash_changes_with_any_part() -> None:
    base = BPETables.byte_level(merges=[(104, 105)], specials={"<|e|>": 300})
    stages = ["\\s+|\\S+"]
    same = BPETables.byte_level(merges=[(104, 105)], specials={"<|e|>": 300})
    assert address_hash(base, stages) == address_hash(same, stages)
    variants = [
        (BPETables.byte_level(merges=[(105, 104)], specials={"<|e|>": 300}), stages),
        (BPETables.byte_level(merges=[(104, 105)], specials={"<|e|>": 301}), stages),
        (BPETables.byte_level(merges=[(104, 105)], specials={"<|f|>": 300}), stages),
        (base, ["\\S+|\\s+"]),
    ]
    hashes = {address_hash(t, s) for t, s in variants}
    assert len(hashes) == 4
    assert address_hash(base, stages) not in hashes


def _doc_edit(tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    doc = to_document(_trained())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        (lambda d: d.update(version=2), "UNSUPPORTED_VERSION"),
        (lambda d: d["merges"].__setitem__(0, [256, 1, 9999]), "MERGE_UNKNOWN_PIECE"),
        (lambda d: d["merges"].pop(), "HASH_MISMATCH"),
        (lambda d: d["specials"].update({"<|end|>": 5000}), "HASH_MISMATCH"),
        (lambda d: d.update(address_hash="sha256:00"), "HASH_MISMATCH"),
        (lambda d: d.update(surprise=True), "MALFORMED_TOKENIZER_FILE"),
        (lambda d: d["pieces"].__setitem__(0, [0, "zz"]), "MALFORMED_TOKENIZER_FILE"),
        (lambda d: d.update(merges="nope"), "MALFORMED_TOKENIZER_FILE"),
        (lambda d: d.update(ignore_merges="yes"), "MALFORMED_TOKENIZER_FILE"),
        (lambda d: d.update(ignore_merges=True), "HASH_MISMATCH"),
    ],
)
def test_damaged_files_are_refused_with_a_code(tmp_path: Path, edit, code: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FormatError) as e:
        load_tokenizer(_doc_edit(tmp_path, edit))
    assert e.value.code == code


def test_name_and_metadata_are_outside_the_hash(tmp_path: Path) -> None:
    def rename(d: dict) -> None:  # type: ignore[type-arg]
        d["name"], d["metadata"] = "renamed", {"note": "x"}

    tok = load_tokenizer(_doc_edit(tmp_path, rename))
    assert tok.name == "renamed"


def test_truncated_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(save_tokenizer(_trained(), tmp_path / "ok.json").read_bytes()[:500])
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def test_save_is_atomic_and_never_overwrites_an_input(tmp_path: Path) -> None:
    tok = _trained()
    path = save_tokenizer(tok, tmp_path / "t.json")
    before = path.read_bytes()
    with pytest.raises(UsageError) as e:
        save_tokenizer(tok, path, inputs=[path])
    assert e.value.code == "OUTPUT_EXISTS"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]  # no temp file left


@settings(max_examples=30, deadline=None)
@given(
    merges=st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255)), max_size=12, unique=True),
    stage=st.sampled_from(["teaching", "cl100k", "o200k", "\\w+|\\W"]),
    text=st.text(max_size=40),
)
def test_document_round_trip_property(merges: list[tuple[int, int]], stage: str, text: str) -> None:
    tables = BPETables.byte_level(merges=merges, specials={"<|x|>": 256 + len(merges)})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset(stage), tables=tables)
    back = from_document(json.loads(json.dumps(to_document(tok))), source="mem")
    assert back.address_hash == tok.address_hash
    assert back.encode_ordinary(text) == tok.encode_ordinary(text)  # st.text has no surrogates


def test_formats_import_no_optional_peer() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tokembed.tokenizer.formats, tokembed.text.sources, tokembed.cli;"
        "print(sorted(m for m in ('tiktoken', 'tokenizers', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_empty_special_name_is_refused_at_load(tmp_path: Path) -> None:
    tables = BPETables.byte_level(merges=[], specials={"": 256})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    path = save_tokenizer(tok, tmp_path / "t.json")
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def test_json_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"a":' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def test_a_name_too_long_is_coded(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        load_tokenizer(tmp_path / ("n" * 300 + ".json"))
    assert e.value.code == "NAME_TOO_LONG"
