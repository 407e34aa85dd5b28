"""tiktoken rank files: real encodings equal tiktoken's ids on 13 languages; malformed files refused."""

from __future__ import annotations

import base64
import os
import random
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from _formats_data import TIKTOKEN_NAMES, pud_texts, real_tokenizer, tokenizer_path
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import FormatError, UsageError
from tokembed.tokenizer.formats import (
    encoding_spec,
    export_hf,
    export_tiktoken,
    load_tokenizer,
    parse_ranks,
    ranks_to_tables,
    tables_to_ranks,
)
from tokembed.tokenizer.formats.ranks import lowest_rank_split
from tokembed.tokenizer.model import BPETables
from tokembed.tokenizer.pretokenize import Pretokenizer
from tokembed.tokenizer.tokenizer import Tokenizer

tiktoken = pytest.importorskip("tiktoken")


def _tiktoken_encoding(name: str):  # type: ignore[no-untyped-def]
    from tiktoken.load import load_tiktoken_bpe

    spec = encoding_spec(name)
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pattern,
        mergeable_ranks=load_tiktoken_bpe(tokenizer_path(name)),
        special_tokens=dict(spec.specials),
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", TIKTOKEN_NAMES)
def test_real_rank_files_encode_like_tiktoken_on_pud(name: str) -> None:
    tok, enc = real_tokenizer(name), _tiktoken_encoding(name)
    for lang, text in pud_texts().items():
        assert tok.encode(text) == enc.encode(text), (name, lang)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "qwen"])
def test_derived_merges_alone_reproduce_tiktoken(name: str) -> None:
    """The derived merge list through the reference encoder on a slice of every language."""
    tok, enc = real_tokenizer(name), _tiktoken_encoding(name)
    for lang, text in pud_texts().items():
        sample = text[:1500]
        assert tok.encode_ordinary_reference(sample) == enc.encode_ordinary(sample), lang


def _reference_split(ranks: dict[bytes, int], piece: bytes) -> list[bytes]:
    """tiktoken's loop inside one piece: rescan all pairs, join the lowest rank, stop at two."""
    parts = [bytes([b]) for b in piece]
    while len(parts) > 2:
        found = [
            (ranks[parts[i] + parts[i + 1]], i)
            for i in range(len(parts) - 1)
            if parts[i] + parts[i + 1] in ranks
        ]
        if not found:
            return parts
        _, i = min(found)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def test_split_search_equals_reference_on_r50k() -> None:
    ranks = parse_ranks(Path(tokenizer_path("r50k_base")).read_bytes())
    for piece in ranks:
        if len(piece) > 1:
            expected = _reference_split(ranks, piece)
            got = lowest_rank_split(ranks, piece)
            assert got is not None, piece
            assert list(got) == expected, piece


def test_real_files_have_the_documented_sizes() -> None:
    o200k = real_tokenizer("o200k_base")
    assert len(o200k.tables.pieces) == 199_998
    assert o200k.tables.specials == {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
    assert o200k.tables.id_range == 200_019  # R = max(I) + 1 with 19 holes
    assert o200k.n_merges == 199_998 - 256  # every multi-byte piece is reachable
    qwen = real_tokenizer("qwen")
    assert qwen.tables.specials["<|endoftext|>"] == 151_643
    assert qwen.tables.specials["<|extra_204|>"] == 151_850
    assert len(qwen.tables.specials) == 208


def test_o200k_harmony_names_ids_and_alias() -> None:
    """o200k_harmony: 1,091 names, 1,090 ids, <|endofprompt|> and <|reserved_200018|> share 200018."""
    spec = encoding_spec("o200k_harmony")
    assert len(spec.specials) == 1091
    assert len(set(spec.specials.values())) == 1090
    assert spec.specials["<|endofprompt|>"] == spec.specials["<|reserved_200018|>"] == 200018
    assert 199_998 + len(set(spec.specials.values())) == 201_088
    assert spec.pattern == encoding_spec("o200k_base").pattern


def test_harmony_tokenizer_encodes_allowed_specials_like_tiktoken() -> None:
    o200k = real_tokenizer("o200k_base")  # harmony = o200k ranks and pattern + its specials
    spec = encoding_spec("o200k_harmony")
    tables = BPETables(
        pieces=o200k.tables.pieces, merges=o200k.tables.merges, specials=spec.specials
    )
    tok = Tokenizer(pretokenizer=o200k.pretokenizer, tables=tables)
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding(
        name="h",
        pat_str=spec.pattern,
        mergeable_ranks=load_tiktoken_bpe(tokenizer_path("o200k_base")),
        special_tokens=dict(spec.specials),
    )
    text = "<|start|>user<|message|>Привет<|end|><|reserved_200018|><|endofprompt|>"
    assert tok.encode(text, allowed_special="all") == enc.encode(text, allowed_special="all")


def test_harmony_by_name_loads_all_specials(tmp_path: Path) -> None:
    # A tiny rank file stands in for o200k's ranks; the names come from tiktoken's code.
    path = tmp_path / "bytes.tiktoken"
    path.write_bytes(b"".join(_b64(bytes([b])) + b" %d\n" % b for b in range(256)))
    tok = load_tokenizer(path, encoding="o200k_harmony")
    assert len(tok.tables.specials) == 1091
    assert tok.name == "o200k_harmony"


def _small() -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    ranks |= {b"ab": 256, b"abc": 257}
    return ranks


def _write(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _b64(piece: bytes) -> bytes:
    return base64.b64encode(piece)


@pytest.mark.parametrize(
    "lines",
    [
        [_b64(b"a") + b" 0", b"!!notbase64 1"],  # bad base64
        [_b64(b"a") + b" 0", _b64(b"b") + b" 0"],  # duplicate rank
        [_b64(b"a") + b" 0", _b64(b"a") + b" 1"],  # duplicate piece
        [_b64(b"a") + b" -1"],  # negative rank
        [_b64(b"a") + b" 0 extra"],  # three fields
    ],
)
def test_malformed_rank_files_are_refused(tmp_path: Path, lines: list[bytes]) -> None:
    with pytest.raises(FormatError) as e:
        load_tokenizer(_write(tmp_path, lines), encoding="r50k_base")
    assert e.value.code == "MALFORMED_RANKS"


def test_rank_file_without_pattern_or_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mystery.tiktoken"
    path.write_bytes(b"".join(_b64(bytes([b])) + b" %d\n" % b for b in range(256)))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"
    with pytest.raises(UsageError) as e:
        load_tokenizer(path, encoding="no_such_encoding")
    assert e.value.code == "UNKNOWN_ENCODING"


def test_encoding_option_for_a_json_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("{}")
    with pytest.raises(UsageError) as e:
        load_tokenizer(path, encoding="r50k_base")
    assert e.value.code == "INVALID_ARGUMENT"


def test_ranks_to_tables_derives_the_lowest_rank_split() -> None:
    tables = ranks_to_tables(_small())
    assert tables.merges == ((97, 98, 256), (256, 99, 257))


def test_export_tiktoken_round_trip_and_tiktoken_reads_it(tmp_path: Path) -> None:
    tok = real_tokenizer("r50k_base")
    path = export_tiktoken(tok, tmp_path)
    back = load_tokenizer(path)  # sidecar beside it supplies pattern and specials
    assert back.address_hash == tok.address_hash
    import json

    from tiktoken.load import load_tiktoken_bpe

    sidecar = json.loads(path.with_name(path.name + ".json").read_text())
    enc = tiktoken.Encoding(
        name=sidecar["name"],
        pat_str=sidecar["pat_str"],
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens=sidecar["special_tokens"],
    )
    text = pud_texts()["de"]
    assert enc.encode(text) == tok.encode(text)


def test_export_refuses_merges_tiktoken_would_not_reproduce(tmp_path: Path) -> None:
    # "aaa" as a + aa: tiktoken joins the leftmost pair first and reaches aa + a.
    tables = BPETables.byte_level(merges=[(97, 97), (97, 256)])
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    with pytest.raises(FormatError) as e:
        tables_to_ranks(tables)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"
    with pytest.raises(FormatError):
        export_tiktoken(tok, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_export_refuses_missing_bytes(tmp_path: Path) -> None:
    with pytest.raises(FormatError) as e:
        export_tiktoken(real_tokenizer("smollm2-135m"), tmp_path)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"


def test_export_never_overwrites_its_input(tmp_path: Path) -> None:
    tok = real_tokenizer("r50k_base")
    first = export_tiktoken(tok, tmp_path)
    with pytest.raises(UsageError) as e:
        export_tiktoken(tok, tmp_path, inputs=[first])
    assert e.value.code == "OUTPUT_EXISTS"


def test_sidecar_with_unknown_version_is_refused(tmp_path: Path) -> None:
    path = export_tiktoken(real_tokenizer("r50k_base"), tmp_path)
    sidecar = path.with_name(path.name + ".json")
    import json

    doc = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**doc, "version": 99}))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "UNSUPPORTED_VERSION"


def test_folder_without_a_tokenizer_is_file_not_found(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UsageError) as e:
        load_tokenizer(tmp_path)
    assert e.value.code == "FILE_NOT_FOUND"


def test_export_refuses_a_special_id_tiktoken_cannot_hold(tmp_path: Path) -> None:
    # Since issue 25.7 no tokenizer holds such an id: the tables refuse it, with the code
    # the export used to give, before any file could be written.
    with pytest.raises(FormatError) as e:
        BPETables.byte_level(merges=[], specials={"<|end|>": 2**32})
    assert e.value.code == "SPECIAL_ID_UNREPRESENTABLE"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "holds no ranks"),
        (b"\n\n", "holds no ranks"),
        (b"".join(_b64(bytes([b])) + b" %d\n" % b for b in range(255)), "no rank for 1 single"),
        (
            b"".join(_b64(bytes([b])) + b" %d\n" % b for b in range(256))
            + _b64(b"ab")
            + b" 4294967296\n",
            "below 2^32",
        ),
    ],
)
def test_empty_incomplete_and_overflowing_rank_files_are_refused(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = tmp_path / "r.tiktoken"
    path.write_bytes(data)
    with pytest.raises(FormatError) as e:
        load_tokenizer(path, encoding="r50k_base")
    assert (e.value.code, why in e.value.message) == ("MALFORMED_RANKS", True)


def test_sidecar_with_an_empty_special_name_is_refused(tmp_path: Path) -> None:
    import json

    tables = BPETables.byte_level(merges=[], specials={"<|end|>": 256})
    path = export_tiktoken(Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables),
                           tmp_path)  # fmt: skip
    sidecar = path.with_name(path.name + ".json")
    doc = json.loads(sidecar.read_text())
    doc["special_tokens"] = {"": 256}
    sidecar.write_text(json.dumps(doc))
    with pytest.raises(FormatError) as e:
        load_tokenizer(path)
    assert e.value.code == "MALFORMED_TOKENIZER_FILE"


def _below_its_part(tmp_path: Path) -> tuple[Path, dict[bytes, int]]:
    # ``abc`` ranks below its own part ``ab``: tiktoken joins a+b (257), then ab+c (256).
    ranks = {bytes([b]): b for b in range(256)} | {b"abc": 256, b"ab": 257}
    path = tmp_path / "below.tiktoken"
    path.write_bytes(b"".join(base64.b64encode(p) + b" %d\n" % r for p, r in ranks.items()))
    return path, ranks


def test_a_piece_ranked_below_its_part_gives_one_answer_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pickle

    from tokenizers import Tokenizer as HFTokenizer

    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path / "cache"))
    path, ranks = _below_its_part(tmp_path)
    pattern = encoding_spec("r50k_base").pattern
    enc = tiktoken.Encoding(name="below", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    text = "abc abc ab cab"
    want = enc.encode_ordinary(text)
    assert want[:3] == [256, 32, 256]
    tok = load_tokenizer(path, encoding="r50k_base")
    assert tok.encode_ordinary(text) == want  # compiled, before the merges exist
    assert (257, 99, 256) in tok.tables.merges
    assert tok.encode_ordinary(text) == want  # after .tables was touched
    assert tok.encode_ordinary_reference(text) == want
    assert pickle.loads(pickle.dumps(tok)).encode_ordinary(text) == want  # worker processes
    again = load_tokenizer(path, encoding="r50k_base")  # merges now from the cache
    assert again.tables.merges == tok.tables.merges
    hf = HFTokenizer.from_file(str(export_hf(tok, tmp_path / "tokenizer.json")))
    assert hf.encode(text, add_special_tokens=False).ids == want


def test_decoding_a_rank_file_derives_no_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path / "cache"))
    path, _ = _below_its_part(tmp_path)
    tok = load_tokenizer(path, encoding="r50k_base")
    assert tok.decode([256, 32, 257]) == "abc ab"
    assert not (tmp_path / "cache" / "rank-merges").exists()  # written when merges are derived
    tok.tables  # noqa: B018 - deriving them now
    assert len(list((tmp_path / "cache" / "rank-merges").iterdir())) == 1


_WORDS = st.lists(st.text("abc", min_size=2, max_size=6), min_size=1, max_size=8)


@settings(max_examples=120, deadline=None)
@given(words=_WORDS, order=st.randoms(use_true_random=False), text=st.text("ab c", max_size=40))
def test_crafted_rank_orders_give_tiktokens_ids_on_every_path(
    words: list[str], order: random.Random, text: str
) -> None:
    # Every prefix of some words as a piece, in any rank order: pieces often rank below
    # their own parts (abc before ab), and every path must still give tiktoken's ids.
    pieces = sorted({w[:k].encode() for w in words for k in range(2, len(w) + 1)})
    order.shuffle(pieces)
    ranks = _bytes_and(pieces)
    tok = _every_path_gives_tiktokens_ids(ranks, text)
    # The merges every path used came from the compiled deriver: the reference's.
    assert tok.tables.merges == _reference_merges(ranks)


def _every_path_gives_tiktokens_ids(ranks: dict[bytes, int], text: str) -> Tokenizer:
    """Our tokenizer of the rank file ``ranks`` (r50k's pattern), after checking that the
    compiled rank tables, the reference (derived merges) and the compiled merge tables give
    tiktoken's ids for ``text``, and that the tiktoken export gives ``ranks`` back."""
    pattern = encoding_spec("r50k_base").pattern
    enc = tiktoken.Encoding(
        name="crafted", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    want = enc.encode_ordinary(text)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "crafted.tiktoken"
        path.write_bytes(b"".join(base64.b64encode(p) + b" %d\n" % r for p, r in ranks.items()))
        with mock.patch.dict(os.environ, {"TOKEMBED_CACHE_DIR": folder}):
            tok = load_tokenizer(path, encoding="r50k_base")
            assert tok.encode_ordinary(text) == want  # compiled, before the merges exist
            assert tok.encode_ordinary_reference(text) == want  # derived merges + the rule
            assert tok.encode_ordinary(text) == want  # compiled merge tables
            assert tables_to_ranks(tok.tables) == ranks  # the tiktoken export round-trips
    return tok


@settings(max_examples=80, deadline=None)
@given(words=_WORDS, order=st.randoms(use_true_random=False), picks=st.lists(st.integers(0, 7)))
def test_pieces_no_merge_makes_give_tiktokens_ids_on_every_path(
    words: list[str], order: random.Random, picks: list[int]
) -> None:
    # Whole words (and " word") as pieces without their prefixes: most are pieces no merge
    # makes, which tiktoken still gives a chunk spelling one of them; the text spells them.
    pieces = sorted({p for w in words for p in (w.encode(), b" " + w.encode())})
    order.shuffle(pieces)
    text = " ".join(words[i % len(words)] for i in picks) + " " + "".join(words)
    _every_path_gives_tiktokens_ids(_bytes_and(pieces), text)


def test_export_refuses_a_piece_no_merge_makes_without_the_whole_piece_rule(
    tmp_path: Path,
) -> None:
    base = BPETables.byte_level(merges=[(97, 98)])
    tables = BPETables(pieces={**base.pieces, 300: b"xyz"}, merges=base.merges)
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("gpt2"), tables=tables)
    with pytest.raises(FormatError) as e:
        export_tiktoken(tok, tmp_path)
    assert e.value.code == "UNSUPPORTED_TOKENIZER"
    assert e.value.value == [300]
    assert not list(tmp_path.iterdir())
    rule = BPETables(pieces=tables.pieces, merges=tables.merges, ignore_merges=True)
    back = load_tokenizer(
        export_tiktoken(Tokenizer(pretokenizer=tok.pretokenizer, tables=rule), tmp_path)
    )
    assert back.encode_ordinary("xyz ab") == [300, 32, 256]


def _compiled_deriver() -> None:
    """Fail under CI when the compiled deriver is missing (the build must have made it)."""
    from tokembed.tokenizer._native import load

    if load("_learn") is None:
        reason = "the compiled deriver _native/_learn is not built (or TOKEMBED_PURE_PYTHON is set)"
        if os.environ.get("CI") == "true" and not os.environ.get("TOKEMBED_PURE_PYTHON"):
            pytest.fail(reason)
        pytest.skip(reason)


def _reference_merges(ranks: dict[bytes, int]) -> tuple[tuple[int, int, int], ...]:
    """The merges of the pure-Python reference (``lowest_rank_split`` for every piece)."""
    with mock.patch.dict(os.environ, {"TOKEMBED_PURE_PYTHON": "1"}):
        return ranks_to_tables(ranks).merges


def _bytes_and(pieces: list[bytes]) -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for piece in pieces:
        ranks.setdefault(piece, len(ranks))
    return ranks


@pytest.mark.slow
@pytest.mark.parametrize("name", TIKTOKEN_NAMES)
def test_compiled_derivation_equals_the_reference_on_real_files(name: str) -> None:
    _compiled_deriver()
    ranks = parse_ranks(Path(tokenizer_path(name)).read_bytes())
    assert ranks_to_tables(ranks).merges == _reference_merges(ranks)


_LONG_WORDS = st.lists(st.text("ab", min_size=2, max_size=90), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(words=_LONG_WORDS, order=st.randoms(use_true_random=False))
def test_compiled_derivation_equals_the_reference_on_shuffled_long_pieces(
    words: list[str], order: random.Random
) -> None:
    # Long prefixes of few letters in any rank order: parts longer than the compiled
    # deriver's memo threshold (32 bytes), pieces below their parts, unreachable pieces.
    _compiled_deriver()
    pieces = sorted({w[:k].encode() for w in words for k in range(2, len(w) + 1)})
    order.shuffle(pieces)
    ranks = _bytes_and(pieces)
    assert ranks_to_tables(ranks).merges == _reference_merges(ranks)


def test_a_chain_of_ever_longer_pieces_derives_in_about_its_size() -> None:
    """``a^2 .. a^1000`` (a 675 KB rank file): the rescanning reference takes seconds (the
    cube of the longest piece); the compiled heap replay a fraction of one."""
    import time

    _compiled_deriver()
    ranks = _bytes_and([b"a" * k for k in range(2, 1001)])
    started = time.perf_counter()
    merges = ranks_to_tables(ranks).merges
    assert time.perf_counter() - started < 2.0
    assert len(merges) == 999
    short = _bytes_and([b"a" * k for k in range(2, 201)])
    assert ranks_to_tables(short).merges == _reference_merges(short)
