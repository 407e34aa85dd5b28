"""Encoding: the compiled encoder, the reference encoder (memo of chunks) and the plain reference
give the same ids on real data; a text is checked once, up front."""

from __future__ import annotations

import itertools
from functools import cache

import pytest
from _core_data import pud_tokenizer, ruslit_tokenizer
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer, _batch, address_hash
from tokembed.tokenizer._native import load
from tokembed.tokenizer.encode import ReferenceEncoder, TextCheck

# The implementation every vocabulary gets: compiled when built, else the reference.
OWN = "compiled" if load("_encode") is not None else "reference"


@pytest.fixture
def pud_tok() -> Tokenizer:
    return pud_tokenizer()


@pytest.fixture
def ruslit_tok(ruslit_text: str) -> Tokenizer:
    return ruslit_tokenizer(ruslit_text)


def _reference(tok: Tokenizer) -> ReferenceEncoder:
    """The encoder a machine without the compiled core gets (the reference, chunks memoized)."""
    return ReferenceEncoder(tok.tables, tok.pretokenizer)


def _checked_reference(tok: Tokenizer, text: str) -> list[int]:
    return _reference(tok).encode(TextCheck(tok.tables.missing_bytes())(text))


def test_trained_vocabulary_implementations(pud_tok: Tokenizer) -> None:
    assert pud_tok.implementation == OWN
    assert _reference(pud_tok).implementation == "reference"


@pytest.mark.parametrize("lang", PUD_LANGS)
def test_encoders_equal_reference_on_pud(pud_tok: Tokenizer, lang: str) -> None:
    text = pud_text(lang)
    ref = pud_tok.encode_ordinary_reference(text)
    assert pud_tok.encode_ordinary(text) == ref
    assert _checked_reference(pud_tok, text) == ref
    assert pud_tok.decode(ref) == text


@pytest.mark.slow
def test_encoders_equal_reference_on_ruslit(ruslit_tok: Tokenizer, ruslit_text: str) -> None:
    """All of RusLit40 (~40 MB, ~4.7M chunks) through both encoders.

    The reference runs on the ~217k UNIQUE chunks only: encoding is a function of
    the chunk alone (merges never cross chunk boundaries), so checking every
    unique chunk checks every position of the text, ~20x faster.
    """
    reference = _reference(ruslit_tok)  # encode_chunk_reference once per distinct chunk
    expected = reference.encode(ruslit_text)
    assert len(reference._memo) > 200_000
    assert ruslit_tok.implementation == OWN
    assert ruslit_tok.encode_ordinary(ruslit_text) == expected


@pytest.mark.slow
def test_o200k_equals_tiktoken_and_reference() -> None:
    """o200k_base loaded from its rank file: our reference, our fast path and tiktoken agree."""
    import tiktoken

    from conftest import data_path
    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.ranks import parse_ranks

    path = data_path("tokenizers", "o200k_base.tiktoken")
    tok = load_tokenizer(path, encoding="o200k_base")
    peer = tiktoken.Encoding(
        "o200k",
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=parse_ranks(path.read_bytes()),
        special_tokens={},
    )
    assert tok.implementation == OWN
    for lang in ("ru", "zh", "hi", "en"):
        text = pud_text(lang)[:20000]
        expected = peer.encode_ordinary(text)
        assert tok.encode_ordinary(text) == expected
        assert tok.encode_ordinary_reference(text) == expected


def _duplicate_tables() -> BPETables:
    """Two ids spell "abc": 257 = ab + c and 259 = a + bc. tiktoken cannot hold that."""
    return BPETables.byte_level(merges=[(97, 98), (256, 99), (98, 99), (97, 258)])


def test_duplicate_pieces_encode_like_the_reference() -> None:
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=_duplicate_tables())
    assert tok.tables.pieces[257] == tok.tables.pieces[259] == b"abc"
    assert tok.implementation == OWN
    text = "abc bc xabcab bcabc"
    ids = tok.encode_ordinary(text)
    assert ids == tok.encode_ordinary_reference(text)
    assert 257 in ids
    assert tok.decode(ids) == text


def test_inconsistent_merge_order_follows_the_merge_list() -> None:
    # "abc" = ab + c, but with ranks bc < ab tiktoken's rule would reach it as a + bc.
    tables = BPETables.byte_level(merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258)])
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    assert tok.implementation == OWN
    assert tok.encode_ordinary("abc") == tok.encode_ordinary_reference("abc") == [97, 256]
    assert _checked_reference(tok, "abc") == [97, 256]


def test_ignore_merges_gives_a_chunk_that_is_one_piece_its_id() -> None:
    # "abc" (258) is a piece no merge rebuilds from its bytes (a + bc wins, as above).
    plain = BPETables.byte_level(merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258)])
    whole = BPETables(pieces=plain.pieces, merges=plain.merges, ignore_merges=True)
    pre = Pretokenizer.preset("teaching")
    for tables, abc in ((plain, [97, 256]), (whole, [258])):
        tok = Tokenizer(pretokenizer=pre, tables=tables)
        assert tok.implementation == OWN
        for text, expected in (
            ("abc", abc),
            ("abcab", [97, 256, 257]),
            ("abc\nabc", [*abc, 10, *abc]),
            ("ab abc", [257, 32, 97, 256]),
        ):
            assert tok.encode_ordinary(text) == expected, (tables.ignore_merges, text)
            assert tok.encode_ordinary_reference(text) == expected
            assert _checked_reference(tok, text) == expected
    assert whole.piece_ids[b"abc"] == 258
    assert plain.piece_ids == {}


def test_ignore_merges_needs_one_id_per_piece_and_names_its_own_address() -> None:
    dup = _duplicate_tables()
    with pytest.raises(TokenizerError) as e:
        BPETables(pieces=dup.pieces, merges=dup.merges, ignore_merges=True)
    assert e.value.code == "INVALID_MERGES"
    assert e.value.value == 1
    plain = BPETables.byte_level(merges=[(97, 98), (256, 99)])
    whole = BPETables(pieces=plain.pieces, merges=plain.merges, ignore_merges=True)
    assert "ignore_merges" not in plain.to_canonical()
    assert whole.to_canonical() == {**plain.to_canonical(), "ignore_merges": True}
    assert address_hash(whole, ["x"]) != address_hash(plain, ["x"])
    assert whole.truncated(1).ignore_merges
    assert not plain.truncated(1).ignore_merges


def test_user_regex_keeps_gaps(pud_tok: Tokenizer) -> None:
    tok = Tokenizer(pretokenizer=Pretokenizer.preset(r"\p{L}+"), tables=pud_tok.tables)
    assert tok.implementation == OWN
    text = pud_text("ru")[:5000]
    ids = tok.encode_ordinary(text)
    assert ids == tok.encode_ordinary_reference(text)
    assert tok.decode(ids) == text


@pytest.mark.parametrize("compiled", [True, False])
def test_unrepresentable_byte_is_located(compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not compiled:  # the reference encoder, and the check's own search in Python
        monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    pieces = {i: bytes([i]) for i in range(256) if i != 0xD0}  # no lead byte of А..п
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=BPETables(pieces=pieces))
    assert tok.implementation == (OWN if compiled else "reference")
    for encode in (tok.encode_ordinary, tok.encode_ordinary_reference, tok.encode_to_numpy):
        with pytest.raises(TokenizerError) as e:
            encode("ok, Дом")
        assert e.value.code == "UNREPRESENTABLE_BYTE"
        assert e.value.value == 4
        assert "'Д'" in str(e.value)
        assert "0xD0" in str(e.value)
    assert tok.encode_ordinary("ok, ё") == tok.encode_ordinary_reference("ok, ё")  # ё is D1 91


@pytest.mark.parametrize("compiled", [True, False])
def test_lone_surrogate_refused(
    pud_tok: Tokenizer, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not compiled:
        monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    tok = Tokenizer(pretokenizer=pud_tok.pretokenizer, tables=pud_tok.tables)
    assert tok.implementation == (OWN if compiled else "reference")
    for encode in (tok.encode_ordinary, tok.encode_ordinary_reference):
        with pytest.raises(TokenizerError) as e:
            encode("abc \udc80 def")
        assert e.value.code == "LONE_SURROGATE"
        assert e.value.value == 4
        assert encode("ok \ud83d\udc4d") == encode("ok 👍")  # a pair is the character it spells


def test_empty_text_is_empty_list(pud_tok: Tokenizer) -> None:
    assert pud_tok.encode("") == pud_tok.encode_ordinary("") == []


@pytest.mark.parametrize("implementation", [OWN, "reference"])
def test_encode_batch_in_threads_and_processes(
    pud_tok: Tokenizer, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled batches run in threads, the reference's in processes: same ids."""
    from tokembed.tokenizer import TrainConfig, train

    tok = pud_tok
    if implementation == "reference":  # a user regex, on the reference encoder
        config = TrainConfig(
            merges=300, pattern=r"\S+|\s+", specials={"<|endoftext|>": None}, progress=False
        )
        tok = train([pud_text("ru")], config=config)
        # Set after training (the reference learner would take a minute); the spawned
        # workers inherit the switch that keeps them off the compiled encoder too.
        monkeypatch.setenv("TOKEMBED_PURE_PYTHON", "1")
    assert tok.implementation == implementation
    # Small enough to take one thread by default: make the compiled batch use two.
    monkeypatch.setattr("tokembed.tokenizer._batch._THREADED_MIN_CHARS", 0)
    texts = [*pud_text("ru").splitlines()[:200], "", "<|endoftext|> x"]
    one = tok.encode_batch(texts, allowed_special="all", progress=False)
    two = tok.encode_batch(texts, workers=2, allowed_special="all", progress=False)
    assert one == two == [tok.encode(t, allowed_special="all") for t in texts]
    with pytest.raises(TokenizerError) as e:
        tok.encode_batch(texts, workers=2, progress=False)
    assert e.value.code == "SPECIAL_TOKEN_DISALLOWED"


def test_truncated_equals_shorter_training(pud_tok: Tokenizer) -> None:
    from tokembed.tokenizer import TrainConfig, train

    short = train([pud_text("ru")], config=TrainConfig(merges=300, progress=False))
    cut = pud_tok.truncated(300)
    assert cut.tables.merges == short.tables.merges
    text = pud_text("ru")[:3000]
    assert cut.encode_ordinary(text) == short.encode_ordinary(text)


def test_address_hash(pud_tok: Tokenizer) -> None:
    assert pud_tok.address_hash == address_hash(pud_tok.tables, pud_tok.pretokenizer.stages)
    assert pud_tok.address_hash.startswith("sha256:")
    assert pud_tok.truncated(1999).address_hash != pud_tok.address_hash
    renamed = Tokenizer(
        pretokenizer=pud_tok.pretokenizer, tables=pud_tok.tables, name="x", metadata={"a": "b"}
    )
    assert renamed.address_hash == pud_tok.address_hash


@cache
def _real(name: str) -> Tokenizer:
    """A real vocabulary from the shared data, by its file name."""
    from tokembed.tokenizer.formats import load_tokenizer

    path = data_path("tokenizers", name)
    if path.suffix == ".tiktoken":
        return load_tokenizer(path, encoding=path.stem)
    return load_tokenizer(path)


def _long_texts() -> list[str]:
    # One chunk each for every pattern: a run of one character, CJK, digits, whitespace.
    return ["a" * 1500, "中" * 700, "1" * 1500, " " * 1500 + "x", "\n" * 900, "ab" * 700]


@pytest.mark.parametrize("name", ["qwen.tiktoken", "smollm2-135m"])
def test_long_chunks_equal_reference(name: str) -> None:
    tok = _real(name)
    assert tok.implementation == OWN
    for text in _long_texts():
        ref = tok.encode_ordinary_reference(text)
        assert tok.encode_ordinary(text) == _checked_reference(tok, text) == ref, text[:3]


def test_long_lines_of_real_text_equal_reference(pud_tok: Tokenizer) -> None:
    """Whole lines as chunks (up to ~600 bytes) from every PUD language, heap vs reference."""
    tok = Tokenizer(pretokenizer=Pretokenizer.preset(r"[^\n]+|\n"), tables=pud_tok.tables)
    assert tok.implementation == OWN
    for lang in PUD_LANGS:
        text = "".join(pud_text(lang).splitlines(keepends=True)[:25])
        ref = tok.encode_ordinary_reference(text)
        assert tok.encode_ordinary(text) == _checked_reference(tok, text) == ref, lang


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "ab", " ", "中", "1", "\n", "ё", "!"]), max_size=300))
def test_runs_equal_reference_on_qwen(parts: list[str]) -> None:
    tok = _real("qwen.tiktoken")
    text = "".join(p * 7 for p in parts)
    assert tok.encode_ordinary(text) == tok.encode_ordinary_reference(text)


@pytest.mark.parametrize("name", ["cl100k_base.tiktoken", "r50k_base.tiktoken"])
def test_long_whitespace_gets_tiktokens_ids(name: str) -> None:
    """Whitespace runs far longer than any chunk tiktoken's tests hold: tiktoken's ids."""
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    tok = _real(name)
    assert tok.implementation == OWN
    peer = tiktoken.Encoding(
        "peer",
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=parse_ranks(data_path("tokenizers", name).read_bytes()),
        special_tokens={},
    )
    limit = 1 << 16
    text = "x" + " " * (limit + 10) + "a\n\t" + "\t" * limit + "b \n" * 100
    ids = tok.encode_ordinary(text)
    assert ids == peer.encode_ordinary(text) == tok.encode_ordinary_reference(text)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["cl100k_base.tiktoken", "r50k_base.tiktoken", "o200k_base.tiktoken"]
)
def test_a_megabyte_of_whitespace_encodes(name: str) -> None:
    """tiktoken 0.14 overflows its stack (PanicException) on these texts; we must not."""
    tok = _real(name)
    text = " " * 1_000_000 + ("" if name.startswith("o200k") else "a")
    ids = tok.encode(text)
    assert tok.decode(ids) == text


def test_the_check_finds_what_its_reference_finds() -> None:
    """The compiled search of the one check (``_encode.scan_text``) answers as its ``re`` form."""
    missing = [0x04, 0xD0, 0x85, 0xF1]  # ASCII, a lead byte, a continuation byte, a 4-byte lead
    check = TextCheck(missing)
    texts = ["", "ok", "a\x04b", "Дом", "é\u0105", "x\U00040000", "ab \udc80", "\ud83d\udc4d Д"]
    texts += [pud_text(lang)[:3000] for lang in PUD_LANGS]
    for text in texts:
        assert check.find(text) == check.find_reference(text), text[:20]
    assert check.find("ab \udc80 \x04") == (1, 3)  # a surrogate is reported before a byte
    assert check.find("Д\x04") == (2, 0)


def test_a_batch_is_checked_like_each_of_its_texts() -> None:
    """The one joined check of a batch finds nothing exactly when no text has a finding; a
    surrogate pair cut between two texts or a missing byte still raises as for that text."""
    check = TextCheck([0x04])
    clean = [pud_text(lang)[:500] for lang in PUD_LANGS]
    assert check.many(clean) == clean
    assert check.many(["a", "\ud83d\udc4d", "b"]) == ["a", "\U0001f44d", "b"]
    cases = (
        (["ok", "\ud83d", "\udc4d"], "LONE_SURROGATE"),
        (["ok", "a\x04"], "UNREPRESENTABLE_BYTE"),
    )
    for bad, code in cases:
        with pytest.raises(TokenizerError) as one:
            [check(t) for t in bad]
        with pytest.raises(TokenizerError) as joined:
            check.many(bad)
        assert joined.value.code == one.value.code == code
        assert str(joined.value) == str(one.value)


@pytest.mark.parametrize("name", ["o200k_base.tiktoken", "gpt2-hf", "smollm2-135m"])
def test_batch_to_numpy_equals_each_texts_ids(name: str) -> None:
    from tokembed.tokenizer import load_tokenizer

    tok = load_tokenizer(data_path("tokenizers", name))
    lines = [line for lang in PUD_LANGS for line in pud_text(lang).split("\n")[:200]]
    lines[5:5] = ["", " ", "\n\n"]  # empty and whitespace-only texts keep their slot
    ids, offsets = tok.encode_ordinary_batch_to_numpy(lines)
    assert ids.dtype.name == "uint32"
    assert offsets.tolist()[0] == 0
    assert len(offsets) == len(lines) + 1
    expected = [tok.encode_ordinary(line) for line in lines]
    assert [ids[a:b].tolist() for a, b in itertools.pairwise(offsets)] == expected
    ref_ids, ref_offsets = _reference(tok).encode_many_numpy(lines)
    assert ref_ids.tolist() == ids.tolist()
    assert ref_offsets.tolist() == offsets.tolist()
    # runs of texts on threads (the batch is long enough for them), joined in order
    assert sum(map(len, lines)) >= _batch._THREADED_MIN_CHARS
    for threads in (2, 3):
        t_ids, t_offsets = tok.encode_ordinary_batch_to_numpy(lines, num_threads=threads)
        assert t_ids.tolist() == ids.tolist()
        assert t_offsets.tolist() == offsets.tolist()
    for bad in (0, True, 1.5):
        with pytest.raises(UsageError) as err:
            tok.encode_ordinary_batch_to_numpy(lines, num_threads=bad)  # type: ignore[arg-type]
        assert err.value.code == "INVALID_ARGUMENT"
