"""Hugging Face files: SmolLM2 and GPT-2 load and encode like `tokenizers`; our exports load there."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from _formats_data import our_ids, pud_texts, real_tokenizer, tokenizer_path

from tokembed.errors import FormatError, TokenizerError
from tokembed.tokenizer.formats import export_hf, load_tokenizer
from tokembed.tokenizer.formats.hf import from_hf_document
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.patterns import PATTERNS
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer
from tokembed.tokenizer.train import TrainConfig, train

tokenizers = pytest.importorskip("tokenizers")

SMOL_SPECIALS = 17
# Bytes SmolLM2's vocabulary lacks: 13 never occur in UTF-8 (C0, C1, F5–FF) plus 8 that can.
SMOL_MISSING = [4, 6, 19, 20, 22, 29, 192, 193, 241, 242, *range(245, 256)]


def _smol_doc() -> dict[str, Any]:
    return json.loads(Path(tokenizer_path("smollm2-135m"), "tokenizer.json").read_text())


def _hf_ids(hf: Any, text: str) -> list[int]:
    return list(hf.encode(text, add_special_tokens=False).ids)


def _hf_pud_ids(hf: Any) -> dict[str, list[int]]:
    """HF's ids of every PUD language (one batch call: HF spreads it over the cores)."""
    texts = pud_texts()
    encodings = hf.encode_batch(list(texts.values()), add_special_tokens=False)
    return {lang: list(e.ids) for lang, e in zip(texts, encodings, strict=True)}


def test_smollm2_encodes_like_hf_on_pud() -> None:
    hf = tokenizers.Tokenizer.from_file(str(Path(tokenizer_path("smollm2-135m"), "tokenizer.json")))
    for lang, ids in _hf_pud_ids(hf).items():
        assert list(our_ids("smollm2-135m", lang)) == ids, lang


def test_smollm2_quirks_specials_first_and_missing_bytes() -> None:
    tok = real_tokenizer("smollm2-135m")
    assert sorted(tok.tables.specials.values()) == list(range(SMOL_SPECIALS))
    assert tok.tables.specials["<|im_start|>"] == 1
    assert tok.tables.missing_bytes() == SMOL_MISSING
    assert min(tok.tables.pieces) == SMOL_SPECIALS
    assert tok.tables.id_range == 49_152


def test_smollm2_refuses_a_byte_hf_would_drop() -> None:
    hf = tokenizers.Tokenizer.from_file(str(Path(tokenizer_path("smollm2-135m"), "tokenizer.json")))
    assert hf.decode(_hf_ids(hf, "a\x04b")) == "ab"  # HF loses the 0x04 silently
    with pytest.raises(TokenizerError) as e:
        real_tokenizer("smollm2-135m").encode("a\x04b")
    assert e.value.code == "UNREPRESENTABLE_BYTE"


def test_digits_and_byte_level_sequence_maps_to_two_stages() -> None:
    doc = _smol_doc()
    doc["pre_tokenizer"] = {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {**doc["pre_tokenizer"]},
        ],
    }
    tok = from_hf_document(doc, source="smol-digits")
    assert tok.pretokenizer.stages == (r"\p{N}", PATTERNS["gpt2-hf"])
    hf = tokenizers.Tokenizer.from_str(json.dumps(doc))
    for lang in ("en", "hi", "th", "zh"):
        text = pud_texts()[lang] + " 12345 ١٢٣ ৪৫"
        assert tok.encode(text) == _hf_ids(hf, text), lang


def test_gpt2_vocab_merges_encode_like_hf_and_tiktoken_r50k() -> None:
    tok = real_tokenizer("gpt2-hf")
    folder = Path(tokenizer_path("gpt2-hf"))
    hf = tokenizers.Tokenizer(
        tokenizers.models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
    )
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    assert tok.tables.specials == {"<|endoftext|>": 50256}
    for lang, hf_ids in _hf_pud_ids(hf).items():
        ids = tok.encode(pud_texts()[lang])
        assert ids == hf_ids, lang
        assert tuple(ids) == our_ids("r50k_base", lang), lang


@pytest.mark.parametrize("rule", [True, False])
def test_ignore_merges_follows_hf_for_a_token_no_merge_makes(rule: bool, tmp_path: Path) -> None:
    """SmolLM2 with a vocabulary entry that no merge makes ("Ġhelloworldtokembed"): with
    ``ignore_merges`` HF gives a word spelling it that id, without it the merges' ids; so do
    we (the compiled merge tables and the reference)."""
    doc = _smol_doc()
    new_id = max(doc["model"]["vocab"].values()) + 1
    doc["model"]["vocab"]["Ġhelloworldtokembed"] = new_id
    doc["model"]["ignore_merges"] = rule
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    hf = tokenizers.Tokenizer.from_file(str(path))
    tok = load_tokenizer(path)
    assert tok.tables.ignore_merges is rule
    text = pud_texts()["en"][:4000] + " helloworldtokembed helloworldtokembeds helloworldtokembed"
    want = _hf_ids(hf, text)
    assert want.count(new_id) == (2 if rule else 0)
    assert tok.encode(text) == want
    assert tok.encode_ordinary_reference(text) == want
    assert from_hf_document(json.loads(export_hf(tok, tmp_path / "out.json").read_text()),
                            source="out").address_hash == tok.address_hash  # fmt: skip


def _assert_export_loads_in_hf(tok: Any, tmp_path: Path, ids: Any) -> None:
    path = export_hf(tok, tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(path))
    for lang, hf_ids in _hf_pud_ids(hf).items():
        assert hf_ids == list(ids(lang)), lang
    assert load_tokenizer(path).address_hash == tok.address_hash
    specials = "x".join(tok.tables.specials) + " ok"  # ids after the vocabulary's holes
    assert _hf_ids(hf, specials) == tok.encode(specials, allowed_special="all")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "smollm2-135m"])
def test_export_hf_encodes_like_us_on_pud(name: str, tmp_path: Path) -> None:
    """r50k's `$` and cl100k's `{1,3}+` read differently in Oniguruma; the export rewrites them.

    SmolLM2 adds specials at 0-16 and missing bytes. (o200k and qwen patterns need no rewrite.)
    """
    _assert_export_loads_in_hf(real_tokenizer(name), tmp_path, lambda lang: our_ids(name, lang))


def test_export_hf_of_a_trained_tokenizer(tmp_path: Path) -> None:
    text = "".join(pud_texts().values())
    config = TrainConfig(merges=300, specials={"<|end|>": None}, progress=False)
    tok = train([text[::7]], config=config)
    _assert_export_loads_in_hf(tok, tmp_path, lambda lang: tok.encode(pud_texts()[lang]))


def test_export_hf_refuses_special_aliases(tmp_path: Path) -> None:
    tables = BPETables.byte_level(merges=[], specials={"<|a|>": 256, "<|b|>": 256})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    with pytest.raises(FormatError) as e:
        export_hf(tok, tmp_path)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"
    assert list(tmp_path.iterdir()) == []


def _refused(doc: dict[str, Any]) -> FormatError:
    with pytest.raises(FormatError) as e:
        from_hf_document(doc, source="x.json")
    return e.value


@pytest.mark.parametrize(
    ("edit", "code", "named"),
    [
        (lambda d: d.update(normalizer={"type": "NFKC"}), "UNSUPPORTED_TOKENIZER", "NFKC"),
        (
            lambda d: d["pre_tokenizer"].update(add_prefix_space=True),
            "UNSUPPORTED_TOKENIZER",
            "add_prefix_space",
        ),
        (lambda d: d["pre_tokenizer"].update(shiny=1), "UNSUPPORTED_TOKENIZER", "shiny"),
        (
            lambda d: d.update(pre_tokenizer={"type": "Metaspace"}),
            "UNSUPPORTED_TOKENIZER",
            "Metaspace",
        ),
        (lambda d: d["model"].update(byte_fallback=True), "UNSUPPORTED_TOKENIZER", "byte_fallback"),
        (lambda d: d["model"].update(type="WordPiece"), "UNSUPPORTED_TOKENIZER", "WordPiece"),
        (lambda d: d.update(extra_key=1), "MALFORMED_TOKENIZER_FILE", "extra_key"),
        (lambda d: d["model"]["merges"].append(["Ġt", "zzzz"]), "MERGE_UNKNOWN_PIECE", "zzzz"),
        (lambda d: d["added_tokens"][0].update(special=False), "UNSUPPORTED_TOKENIZER", "special"),
    ],
)
def test_unsupported_or_malformed_components_are_named(edit: Any, code: str, named: str) -> None:
    doc = copy.deepcopy(_SMOL)
    edit(doc)
    err = _refused(doc)
    assert err.code == code
    assert named in str(err)


_SMOL: dict[str, Any] = {}


@pytest.fixture(autouse=True, scope="module")
def _load_smol_doc() -> None:
    _SMOL.update(_smol_doc())


def test_string_merges_load_like_list_merges() -> None:
    doc = copy.deepcopy(_SMOL)
    doc["model"]["merges"] = [" ".join(pair) for pair in doc["model"]["merges"]]
    tok = from_hf_document(doc, source="strings.json")
    assert tok.address_hash == real_tokenizer("smollm2-135m").address_hash


def test_bad_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": {')
    with pytest.raises(FormatError) as e:
        load_tokenizer(tmp_path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def test_component_type_that_is_a_list_is_refused(tmp_path: Path) -> None:
    tok = Tokenizer(
        pretokenizer=Pretokenizer.preset("gpt2"), tables=BPETables.byte_level(merges=[])
    )
    path = export_hf(tok, tmp_path / "tokenizer.json")
    doc = json.loads(Path(path).read_text())
    doc["pre_tokenizer"]["type"] = ["Sequence"]
    Path(path).write_text(json.dumps(doc))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"


def test_empty_special_name_is_refused(tmp_path: Path) -> None:
    tables = BPETables.byte_level(merges=[], specials={"<|end|>": 256})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("gpt2"), tables=tables)
    path = export_hf(tok, tmp_path / "tokenizer.json")
    doc = json.loads(Path(path).read_text())
    doc["added_tokens"][0]["content"] = ""
    Path(path).write_text(json.dumps(doc))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"hi": 256', '"hi": 1000000000000'),  # an id the encoder's 32-bit arrays cannot hold
        ('"hi": 256', '"hi": ' + "9" * 5000),  # past Python's 4300-digit int conversion limit
    ],
)
def test_ids_out_of_any_vocabulary_are_refused(tmp_path: Path, old: str, new: str) -> None:
    tok = Tokenizer(
        pretokenizer=Pretokenizer.preset("gpt2"), tables=BPETables.byte_level(merges=[(104, 105)])
    )
    path = export_hf(tok, tmp_path / "tokenizer.json")
    text = json.dumps(json.loads(Path(path).read_text()))
    assert old in text
    Path(path).write_text(text.replace(old, new))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


@pytest.mark.parametrize("token", [None, 3, "x", []])
def test_an_added_token_that_is_not_an_object_is_refused(tmp_path: Path, token: Any) -> None:
    # Found by fuzzing: "added_tokens": [null] raised AttributeError.
    tok = Tokenizer(
        pretokenizer=Pretokenizer.preset("gpt2"), tables=BPETables.byte_level(merges=[])
    )
    path = export_hf(tok, tmp_path / "tokenizer.json")
    doc = json.loads(Path(path).read_text())
    doc["added_tokens"] = [token]
    Path(path).write_text(json.dumps(doc))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def test_an_empty_vocabulary_entry_loads_encodes_and_decodes_like_hf(tmp_path: Path) -> None:
    """HF accepts "" as a token (it decodes to nothing, and no text encodes to it); the
    compiled tables, which hold pieces of one byte or more, leave it out."""
    doc = _smol_doc()
    doc["model"]["vocab"][""] = 49_152
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok = load_tokenizer(tmp_path)
    assert tok.implementation == "compiled"
    text = pud_texts()["en"][:20_000]
    assert tok.encode_ordinary(text) == _hf_ids(hf, text)
    assert tok.decode([49_152]) == hf.decode([49_152]) == ""
    assert tok.decode_single_token_bytes(49_152) == b""
