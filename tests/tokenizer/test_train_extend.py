"""Continuing a trained tokenizer (``TrainConfig(base=...)``, ``tokembed train --extend``).

The specification: the base's merges are applied to every chunk of the new corpus, then
merges are learned by the reference rule (``train_reference(base_merges=...)``); the compiled
learner, the reference learner and that must agree merge for merge; every base id keeps its
symbol (``classify_change`` proves append-only); the exports load in tiktoken and HF.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import data_path, pud_file, pud_text
from tokembed.cli import main
from tokembed.errors import TokenizerError, UsageError
from tokembed.migrate import classify_change
from tokembed.tokenizer import (
    BPETables,
    ChunkTable,
    Pretokenizer,
    Tokenizer,
    TrainConfig,
    load_tokenizer,
    reserved_ids,
    train,
    train_reference,
)
from tokembed.tokenizer._count import count_chunks
from tokembed.tokenizer.learn import learn_merges
from tokembed.tokenizer.train_reference import learn_merges_reference

_PRE = Pretokenizer.preset("teaching")


def _reference_base(text: str, merges: int) -> tuple[Tokenizer, list[tuple[int, int]]]:
    pairs = train_reference(text, merges=merges, pretokenizer=_PRE)
    return Tokenizer(pretokenizer=_PRE, tables=BPETables.byte_level(merges=pairs)), pairs


def _new_pairs(tok: Tokenizer, base: Tokenizer) -> list[tuple[int, int]]:
    return [(a, b) for a, b, _ in tok.tables.merges[base.n_merges :]]


def _expanded(tok: Tokenizer, base: Tokenizer, ids: list[int]) -> list[int]:
    """``ids`` with every new id replaced by the base ids it joins (its merge, recursively)."""
    made = {result: (a, b) for a, b, result in tok.tables.merges[base.n_merges :]}
    out: list[int] = []
    stack = list(reversed(ids))
    while stack:
        i = stack.pop()
        if i in made:
            stack += reversed(made[i])
        else:
            out.append(i)
    return out


def _smollm2() -> Path:
    return data_path("tokenizers", "smollm2-135m")


@pytest.mark.parametrize(("old", "new"), [("en", "ru"), ("de", "fi")])
def test_extension_equals_training_base_merges_then_new_corpus_merges(old: str, new: str) -> None:
    base, base_pairs = _reference_base(pud_text(old), 400)
    tok = train([pud_text(new)], config=TrainConfig(merges=300, base=base, progress=False))
    expected = train_reference(pud_text(new), merges=300, pretokenizer=_PRE, base_merges=base_pairs)
    assert _new_pairs(tok, base) == expected
    assert [m[2] for m in tok.tables.merges[400:]] == list(range(656, 956))
    assert classify_change(base, tok).kind == "append-only"


def test_compiled_learner_equals_reference_from_smollm2(ruslit_text: str) -> None:
    # A real HF base: non-dense ids, specials at 0-16, 21 single bytes missing.
    base = load_tokenizer(_smollm2()).tables
    table = count_chunks(
        [ruslit_text[:150_000]], load_tokenizer(_smollm2()).pretokenizer, workers=1, progress=False
    )
    compiled = learn_merges(table, merges=150, base=base)
    assert compiled == learn_merges_reference(table, merges=150, base=base)
    assert len(compiled) == 150


def test_pure_python_extension_equals_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    base = load_tokenizer(_smollm2())
    config = TrainConfig(merges=100, base=base, progress=False)
    compiled = train([pud_text("ru")], config=config)
    monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    reference = train([pud_text("ru")], config=config)
    assert reference.tables.merges == compiled.tables.merges
    assert reference.address_hash == compiled.address_hash


def test_extension_of_a_trained_tokenizer_keeps_its_specials() -> None:
    base = train(
        [pud_text("en")],
        config=TrainConfig(
            merges=200, specials={"<|endoftext|>": None, "<|pad|>": 900}, progress=False
        ),
    )
    tok = train(
        [pud_text("ru")],
        config=TrainConfig(merges=100, base=base, specials={"<|im_start|>": None}, progress=False),
    )
    assert tok.special_tokens == {"<|endoftext|>": 456, "<|pad|>": 900, "<|im_start|>": 1001}
    assert [m[2] for m in tok.tables.merges[200:]] == list(range(901, 1001))
    assert tok.metadata["merges_learned"] == "100"
    assert classify_change(base, tok).kind == "append-only"


def test_specials_alone_with_no_merges_read_no_text() -> None:
    base, _ = _reference_base(pud_text("en"), 50)

    def no_text() -> object:
        raise AssertionError("merges=0 must not read the texts")
        yield ""  # pragma: no cover

    tok = train(
        no_text(),  # type: ignore[arg-type]
        config=TrainConfig(merges=0, base=base, specials={"<|a|>": None, "<|b|>": None}),
    )
    assert tok.special_tokens == {"<|a|>": 306, "<|b|>": 307}
    assert tok.tables.merges == base.tables.merges


def test_fewer_merges_than_asked_returns_what_exists() -> None:
    base, _ = _reference_base("ab ab cd", 1)
    tok = train(["ab cd cd"], config=TrainConfig(merges=50, base=base, progress=False))
    assert tok.metadata["merges_learned"] == str(len(_new_pairs(tok, base))) == "2"


def _harmony() -> Tokenizer:
    return load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"), encoding="o200k_harmony")


def test_reserved_slot_is_taken_over_and_other_ids_kept() -> None:
    base = _harmony()
    slots = reserved_ids(base.tables.specials)
    assert 200018 not in slots  # <|endofprompt|> shares it: in use
    slot = min(slots)
    tok = train([], config=TrainConfig(merges=0, base=base, specials={"<|tool|>": slot}))
    assert tok.special_tokens["<|tool|>"] == slot
    assert f"<|reserved_{slot}|>" not in tok.special_tokens
    assert len(tok.special_tokens) == len(base.special_tokens)
    kept = {n: i for n, i in base.special_tokens.items() if i != slot}
    assert kept.items() <= tok.special_tokens.items()


@pytest.mark.parametrize(
    ("sid", "why"),
    [(200018, "the special '<|endofprompt|>'"), (100, "an ordinary id"), (300_000, "not an id")],
)
def test_reserved_id_taken_or_not_reserved_is_refused(sid: int, why: str) -> None:
    with pytest.raises(TokenizerError) as e:
        TrainConfig(merges=0, base=_harmony(), specials={"<|tool|>": sid})
    assert e.value.code == "RESERVED_ID_UNAVAILABLE"
    assert why in str(e.value)
    assert e.value.fix


def test_two_names_for_one_reserved_id_are_refused() -> None:
    with pytest.raises(TokenizerError) as e:
        TrainConfig(merges=0, base=_harmony(), specials={"<|a|>": 200000, "<|b|>": 200000})
    assert e.value.code == "RESERVED_ID_UNAVAILABLE"


def test_bad_extension_requests_are_coded() -> None:
    base, _ = _reference_base("ab ab cd", 4)  # every chunk of it is one token
    with pytest.raises(UsageError) as usage:
        TrainConfig(merges=0, base=base)
    assert usage.value.code == "NOTHING_TO_ADD"
    with pytest.raises(UsageError) as pattern:
        TrainConfig(merges=5, base=base, pattern="gpt2")
    assert pattern.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as not_tok:
        TrainConfig(merges=5, base="o200k_base")  # type: ignore[arg-type]
    assert not_tok.value.code == "INVALID_ARGUMENT"
    named = train(["ab"], config=TrainConfig(merges=1, specials={"<|e|>": None}))
    with pytest.raises(TokenizerError) as again:
        TrainConfig(merges=1, base=named, specials={"<|e|>": None})
    assert again.value.code == "SPECIAL_TOKEN_CONFLICT"
    with pytest.raises(TokenizerError) as none:
        train(["ab ab cd cd"], config=TrainConfig(merges=5, base=base, progress=False))
    assert none.value.code == "NO_NEW_MERGE"
    assert "0 of 5" in str(none.value)


def test_a_byte_the_base_lacks_is_refused() -> None:
    base = load_tokenizer(_smollm2())
    table = ChunkTable.from_counts({b"a\x04b": 1})
    with pytest.raises(TokenizerError) as e:
        learn_merges(table, merges=3, base=base.tables)
    assert e.value.code == "UNREPRESENTABLE_BYTE"


# --- exports: tiktoken and HF tokenizers read them with every old id in place --------------


@pytest.fixture(scope="module")
def o200k_extended(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ext") / "o200k-ru"
    corpus = str(pud_file("ru"))
    base = str(data_path("tokenizers", "o200k_base.tiktoken"))
    args = ["--quiet", "train", corpus, "--extend", base, "--merges", "200", "-o", str(out)]
    assert main([*args, "--special", "<|im_start|>"]) == 0
    return out / "o200k_base-extended.tiktoken"


def test_rank_file_extension_loads_in_tiktoken_with_old_ranks(o200k_extended: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    old = load_tiktoken_bpe(str(data_path("tokenizers", "o200k_base.tiktoken")))
    new = load_tiktoken_bpe(str(o200k_extended))
    assert {p: new[p] for p in old} == old  # every old piece at its old rank
    added = sorted(r for p, r in new.items() if p not in old)
    assert added == list(range(200019, 200219))  # past o200k's specials 199999 and 200018
    side = json.loads(o200k_extended.with_name(o200k_extended.name + ".json").read_text())
    assert side["special_tokens"] == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018,
                                      "<|im_start|>": 200219}  # fmt: skip
    enc = tiktoken.Encoding(
        name=side["name"], pat_str=side["pat_str"], mergeable_ranks=new,
        special_tokens=side["special_tokens"],
    )  # fmt: skip
    base = tiktoken.Encoding(name="o200k", pat_str=side["pat_str"], mergeable_ranks=old,
                             special_tokens={})  # fmt: skip
    ours = load_tokenizer(o200k_extended)
    ru, en = pud_text("ru"), pud_text("en")
    assert enc.encode(ru) == ours.encode(ru)
    assert sum(i >= 200019 for i in enc.encode(ru)) > 500  # the new merges are used
    assert len(enc.encode(ru)) < len(base.encode(ru))
    # New ids only join runs of old ids: split back, every text has the base's ids.
    old_tok = load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"))
    for text in (ru, en):
        assert _expanded(ours, old_tok, enc.encode(text)) == base.encode(text)


@pytest.fixture(scope="module")
def smollm2_extended(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ext") / "smollm2-ru"
    args = ["--quiet", "train", str(pud_file("ru")), "--extend", str(_smollm2())]
    assert main([*args, "--merges", "300", "-o", str(out), "--special", "<|tool|>"]) == 0
    return out / "tokenizer.json"


def test_tokenizer_json_extension_loads_in_hf_with_old_ids(smollm2_extended: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    old = tokenizers.Tokenizer.from_file(str(_smollm2() / "tokenizer.json"))
    new = tokenizers.Tokenizer.from_file(str(smollm2_extended))
    old_vocab, new_vocab = old.get_vocab(), new.get_vocab()
    assert {t: new_vocab[t] for t in old_vocab} == old_vocab
    assert sorted(set(new_vocab.values()) - set(old_vocab.values())) == list(range(49152, 49453))
    assert new.token_to_id("<|tool|>") == 49452
    ru, en = pud_text("ru"), pud_text("en")
    ours, base = load_tokenizer(smollm2_extended), load_tokenizer(_smollm2())
    assert new.encode(ru).ids == ours.encode(ru)
    assert sum(i >= 49152 for i in new.encode(ru).ids) > 1000
    # New ids only join runs of old ids: split back, every text has the base's ids.
    for text in (ru, en):
        assert _expanded(ours, base, new.encode(text).ids) == old.encode(text).ids
    doc, base_doc = (
        json.loads(smollm2_extended.read_text()),
        json.loads((_smollm2() / "tokenizer.json").read_text()),
    )
    for key in ("pre_tokenizer", "normalizer", "decoder", "post_processor"):
        assert doc[key] == base_doc[key]
    assert doc["added_tokens"][:17] == base_doc["added_tokens"]


def test_cli_adds_chat_tokens_into_reserved_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = f"{data_path('tokenizers', 'o200k_base.tiktoken')}@o200k_harmony"
    args = ["train", "--extend", base, "--merges", "0", "-o", str(tmp_path / "h"), "--json"]
    assert main([*args, "--special", "<|tool|>=200001", "--special", "<|x|>"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kind"] == "append-only"
    assert report["merges_learned"] == 0
    assert report["specials_added"] == {"<|tool|>": 200001, "<|x|>": 201088}
    tok = load_tokenizer(Path(report["output"]))
    assert tok.special_tokens["<|tool|>"] == 200001


def _code(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) != 0
    return capsys.readouterr().err


def test_cli_refusals_are_coded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ru, smol = str(pud_file("ru")), str(_smollm2())
    out = ["-o", str(tmp_path / "out")]
    fmt = ["train", ru, "--extend", smol, "--merges", "5", "--format", "tiktoken", *out]
    assert "BASE_PRETOKENIZER_UNREPRODUCIBLE" in _code(fmt, capsys)
    nothing = ["train", "--extend", smol, "--merges", "0", *out]
    assert "NOTHING_TO_ADD" in _code(nothing, capsys)
    damaged = tmp_path / "tokenizer.json"
    damaged.write_bytes((_smollm2() / "tokenizer.json").read_bytes()[:100_000])
    assert "MALFORMED_TOKENIZER_FILE" in _code(
        ["train", ru, "--extend", str(damaged), "--merges", "5", *out], capsys
    )
    ranks = tmp_path / "o200k_base.tiktoken"
    ranks.write_bytes(data_path("tokenizers", "o200k_base.tiktoken").read_bytes()[:5000] + b"!!\n")
    assert "MALFORMED_RANKS" in _code(
        ["train", ru, "--extend", str(ranks), "--merges", "5", *out], capsys
    )
    taken = ["train", "--extend", smol, "--merges", "0", "--special", "<|t|>=5", *out]
    assert "RESERVED_ID_UNAVAILABLE" in _code(taken, capsys)
    assert not (tmp_path / "out").exists()


# --- property: small random corpora -------------------------------------------------------

_TEXT = st.text(alphabet="abcd ябв\n", min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(_TEXT, _TEXT, st.integers(0, 12), st.integers(1, 12))
def test_extension_is_append_only_and_equals_reference(old: str, new: str, m: int, n: int) -> None:
    base, base_pairs = _reference_base(old, m)
    expected = train_reference(new, merges=n, pretokenizer=_PRE, base_merges=base_pairs)
    table = count_chunks([new], _PRE, workers=1, progress=False)
    assert learn_merges(table, merges=n, base=base.tables) == expected
    assert learn_merges_reference(table, merges=n, base=base.tables) == expected
    config = TrainConfig(merges=n, base=base, progress=False)
    if not expected:
        with pytest.raises(TokenizerError, match="no new merge exists"):
            train([new], config=config)
        return
    tok = train([new], config=config)
    assert _new_pairs(tok, base) == expected
    assert classify_change(base, tok).kind == "append-only"
