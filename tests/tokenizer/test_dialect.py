"""One pre-tokenization whichever engine runs it: ours agrees with the format's engine on
every code point (tiktoken for rank files, Hugging Face for tokenizer.json)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import regex

from conftest import data_path
from tokembed.errors import UsageError
from tokembed.tokenizer import PATTERNS, Pretokenizer, Tokenizer, TrainConfig, train
from tokembed.tokenizer._dialect import (
    _PROBES,
    _every_codepoint,
    _ours,
    dialect_pattern,
    table_atoms,
)
from tokembed.tokenizer.encode import FastEncoder

EXAMPLE = "\U0008a1f8\U0003dec5$j"  # a code point tiktoken's tables leave unassigned, then "$j"


@cache
def _tok(name: str) -> Tokenizer:
    from tokembed.tokenizer import load_tokenizer

    path = data_path("tokenizers", name)
    if path.suffix == ".tiktoken":
        return load_tokenizer(path, encoding=path.stem)
    return load_tokenizer(path)


def _membership(atom: str, engine: str) -> np.ndarray:
    """Boolean array over every code point: does ``atom`` match it in ``engine`` (or ``regex``)?"""
    every = _every_codepoint()
    hits = _ours(atom, every) if engine == "regex" else _PROBES[engine](atom, every)
    out = np.zeros(0x110000, dtype=bool)
    out[hits] = True
    return out


def _boundary_text(pattern: str, engine: str, missing: list[int]) -> str:
    """Every code point where a class of ``pattern`` changes, in ``regex`` or in ``engine``,
    and its predecessor, each in contexts that make the class decide the chunking."""
    edges = np.zeros(0x110000, dtype=bool)
    for start, end in table_atoms(pattern):
        for who in ("regex", engine):
            m = _membership(pattern[start:end], who)
            edges[1:] |= m[1:] != m[:-1]
    points = np.flatnonzero(edges | np.roll(edges, -1))
    points = points[(points < 0xD800) | (points > 0xDFFF)]
    bad = {b for b in missing}
    chars = [chr(c) for c in points.tolist() if not bad.intersection(chr(c).encode())]
    return "".join(f"{c}$j{c}{c} 1{c}a{c}\n{c}" for c in chars)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["cl100k_base.tiktoken", "o200k_base.tiktoken", "r50k_base.tiktoken", "qwen.tiktoken"]
)
def test_rank_files_split_like_tiktoken_on_every_class_boundary(name: str) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    tok = _tok(name)
    stage = tok.pretokenizer.stages[0]
    text = _boundary_text(stage, "tiktoken", [])
    assert len(text) > 10_000
    peer = tiktoken.Encoding(
        name,
        pat_str=stage,
        mergeable_ranks=parse_ranks(data_path("tokenizers", name).read_bytes()),
        special_tokens={},
    )
    expected = peer.encode_ordinary(text)
    own = FastEncoder(tok.tables, tok.pretokenizer, use_tiktoken=False)
    assert own.encode_ordinary(text) == expected
    assert tok.encode_ordinary(text) == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_hf_files_split_like_hugging_face_on_every_class_boundary(name: str) -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    tok = _tok(name)
    assert tok.pretokenizer.engine == "huggingface"
    folder = data_path("tokenizers", name)
    if (folder / "tokenizer.json").is_file():
        peer = HFTokenizer.from_file(str(folder / "tokenizer.json"))
    else:
        peer = HFTokenizer(
            models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"))
        )
        peer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        peer.decoder = decoders.ByteLevel()
    text = "".join(
        _boundary_text(s, "huggingface", tok.tables.missing_bytes())
        for s in tok.pretokenizer.stages
    )
    expected = peer.encode(text, add_special_tokens=False).ids
    own = FastEncoder(tok.tables, tok.pretokenizer, use_tiktoken=False)
    assert own.encode_ordinary(text) == expected
    assert tok.encode_ordinary(text) == expected


def test_the_reported_example_gives_tiktokens_ids() -> None:
    tok = _tok("cl100k_base.tiktoken")
    ids = tok.encode_ordinary(EXAMPLE)
    assert ids[-2:] == [3, 73]  # "$", "j": the unassigned code point does not take the "$"
    assert tok.encode_ordinary_reference(EXAMPLE) == ids
    assert (
        FastEncoder(tok.tables, tok.pretokenizer, use_tiktoken=False).encode_ordinary(EXAMPLE)
        == ids
    )


def test_patterns_are_rewritten_only_where_engines_differ() -> None:
    pre = Pretokenizer.preset("cl100k")
    assert pre.engine == "tiktoken"
    assert pre.patterns[0] == dialect_pattern(PATTERNS["cl100k"], "tiktoken")
    assert pre.split(EXAMPLE) == [EXAMPLE[:3], "j"]
    assert regex.findall(PATTERNS["cl100k"], EXAMPLE) == [EXAMPLE[:2], "$j"]
    ascii_only = r"[\r\n]+|[a-z]+| "
    assert table_atoms(ascii_only) == []
    assert dialect_pattern(ascii_only, "tiktoken") == ascii_only


def test_training_splits_like_the_engine_it_exports_to() -> None:
    text = (EXAMPLE + " ") * 5
    for engine in ("tiktoken", "huggingface"):
        config = TrainConfig(merges=40, pattern="cl100k", regex_engine=engine, progress=False)  # type: ignore[arg-type]
        tok = train([text], config=config)
        assert tok.pretokenizer.engine == engine
        pieces = list(tok.tables.pieces.values())
        # U+3DEC5 ends in byte 0x85: it shares a chunk with "$", which never meets "j".
        assert any(p.endswith(b"\x85$") for p in pieces)
        assert not any(b"$j" in p for p in pieces)
    with pytest.raises(UsageError) as e:
        TrainConfig(merges=3, regex_engine="onig")  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT"


def test_native_files_record_the_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tokembed.tokenizer import load_tokenizer, save_tokenizer

    tok = train(["ab ab"], config=TrainConfig(merges=1, regex_engine="huggingface", progress=False))
    path = save_tokenizer(tok, tmp_path / "t.json")
    assert load_tokenizer(path).pretokenizer.engine == "huggingface"


def test_plain_stage_is_used_only_where_it_splits_like_the_rewrite() -> None:
    # The stage as written runs on text without any code point where the engines differ;
    # with one, the rewrite runs. Both must split exactly like the rewrite alone.
    import numpy as np
    import regex

    from tokembed.tokenizer._dialect import contains_any, dialect_pattern, dialect_trigger
    from tokembed.tokenizer.pretokenize import PATTERNS, Pretokenizer

    stage = PATTERNS["cl100k"]
    points = dialect_trigger(stage, "tiktoken")
    assert points.size > 0
    assert bool(np.all(np.diff(points.astype(np.int64)) > 0))
    odd = chr(int(points[len(points) // 2]))
    assert contains_any(f"abc {odd} d", points)
    assert not contains_any("abc привет 123", points)
    rewritten = regex.compile(dialect_pattern(stage, "tiktoken"))
    pre = Pretokenizer.preset("cl100k")
    for text in ("Hello, мир! 12345  \n", f"x{odd}y $j {odd}{odd}", "\U0008a1f8\U0003dec5$j"):
        assert pre.split(text) == rewritten.findall(text)
