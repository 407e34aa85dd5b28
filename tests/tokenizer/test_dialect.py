"""One pre-tokenization whichever engine runs it: ours agrees with the format's engine on
every code point (tiktoken for rank files, Hugging Face for tokenizer.json), from tables
generated from the engines, with no engine asked at run time."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import regex
from _core_data import hf_peer

from conftest import data_path
from tokembed.errors import UsageError
from tokembed.tokenizer import PATTERNS, Pretokenizer, Tokenizer, TrainConfig, train
from tokembed.tokenizer import dialect as dialect_module
from tokembed.tokenizer.compiled import CompiledEncoder, compiled_tables
from tokembed.tokenizer.dialect import class_members, dialect_pattern, table_atoms
from tokembed.tokenizer.encode import ReferenceEncoder

EXAMPLE = "\U0008a1f8\U0003dec5$j"  # a code point tiktoken's tables leave unassigned, then "$j"


@cache
def _tok(name: str) -> Tokenizer:
    from tokembed.tokenizer import load_tokenizer

    path = data_path("tokenizers", name)
    if path.suffix == ".tiktoken":
        return load_tokenizer(path, encoding=path.stem)
    return load_tokenizer(path)


def _probe(atom: str, engine: str) -> np.ndarray:
    """The code points ``atom`` matches when ``engine`` itself runs it (needs the engine)."""
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    from tokembed.tokenizer._gen_tables import probe

    return probe(atom, engine)  # type: ignore[arg-type]


def _membership(atom: str, engine: str) -> np.ndarray:
    """Boolean array over every code point: does ``atom`` match it in ``engine`` (or ``regex``)?"""
    hits = dialect_module._regex_members(atom) if engine == "regex" else _probe(atom, engine)
    out = np.zeros(0x110000, dtype=bool)
    out[hits] = True
    return out


def _reference(tok: Tokenizer, text: str) -> list[int]:
    """Ids of the Python splitter's chunks (the dialect rewrite), merged by the compiled
    encoder where it is built, else by the reference."""
    native = compiled_tables(tok.tables)
    if native is None:
        return ReferenceEncoder(tok.tables, tok.pretokenizer).encode(text)
    encoder = CompiledEncoder(native, tok.pretokenizer).encoder()
    ids: list[int] = encoder.encode_chunks(text, tok.pretokenizer.split(text))
    return ids


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
    assert _reference(tok, text) == expected
    assert tok.encode_ordinary(text) == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_hf_files_split_like_hugging_face_on_every_class_boundary(name: str) -> None:
    tok = _tok(name)
    assert tok.pretokenizer.dialect == "huggingface"
    peer = hf_peer(name)
    text = "".join(
        _boundary_text(s, "huggingface", tok.tables.missing_bytes())
        for s in tok.pretokenizer.stages
    )
    expected = peer.encode(text, add_special_tokens=False).ids
    assert _reference(tok, text) == expected
    assert tok.encode_ordinary(text) == expected


def test_the_reported_example_gives_tiktokens_ids() -> None:
    tok = _tok("cl100k_base.tiktoken")
    ids = tok.encode_ordinary(EXAMPLE)
    assert ids[-2:] == [3, 73]  # "$", "j": the unassigned code point does not take the "$"
    assert tok.encode_ordinary_reference(EXAMPLE) == ids
    assert _reference(tok, EXAMPLE) == ids


def test_patterns_are_rewritten_only_where_engines_differ() -> None:
    pre = Pretokenizer.preset("cl100k")
    assert pre.dialect == "tiktoken"
    assert pre.patterns[0] == dialect_pattern(PATTERNS["cl100k"], "tiktoken")
    assert pre.split(EXAMPLE) == [EXAMPLE[:3], "j"]
    assert regex.findall(PATTERNS["cl100k"], EXAMPLE) == [EXAMPLE[:2], "$j"]
    ascii_only = r"[\r\n]+|[a-z]+| "
    assert table_atoms(ascii_only) == []
    assert dialect_pattern(ascii_only, "tiktoken") == ascii_only


def test_training_splits_like_the_engine_it_exports_to() -> None:
    text = (EXAMPLE + " ") * 5
    for dialect in ("tiktoken", "huggingface"):
        config = TrainConfig(merges=40, pattern="cl100k", dialect=dialect, progress=False)  # type: ignore[arg-type]
        tok = train([text], config=config)
        assert tok.pretokenizer.dialect == dialect
        pieces = list(tok.tables.pieces.values())
        # U+3DEC5 ends in byte 0x85: it shares a chunk with "$", which never meets "j".
        assert any(p.endswith(b"\x85$") for p in pieces)
        assert not any(b"$j" in p for p in pieces)
    with pytest.raises(UsageError) as e:
        TrainConfig(merges=3, dialect="onig")  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT"


def test_native_files_record_the_dialect(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tokembed.tokenizer import load_tokenizer, save_tokenizer

    tok = train(["ab ab"], config=TrainConfig(merges=1, dialect="huggingface", progress=False))
    path = save_tokenizer(tok, tmp_path / "t.json")
    assert load_tokenizer(path).pretokenizer.dialect == "huggingface"


def test_plain_stage_is_used_only_where_it_splits_like_the_rewrite() -> None:
    # The stage as written runs on text without any code point where the engines differ;
    # with one, the rewrite runs. Both must split exactly like the rewrite alone.
    import numpy as np
    import regex

    from tokembed.tokenizer.dialect import contains_any, dialect_pattern, dialect_trigger

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


# Compositions a user may write (the presets' own classes are checked through their
# chunks, class boundary by class boundary, above), and two of the presets' brackets.
_ATOMS = (
    r"[^\w\s]", r"[\p{L}\p{N}_'-]", r"\W", r"[^\d]", r"\P{L}", r"[\x00-\x1f\p{Zs}]",
    r"[a-z\d]", r"[^\p{P}\p{S}]", r"[^\r\n\p{L}\p{N}]", r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",
)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["tiktoken", "huggingface"])
def test_the_tables_give_each_class_the_engines_own_code_points(dialect: str) -> None:
    """What the generated tables say a class matches is what the engine itself matches."""
    for atom in _ATOMS:
        members = class_members(atom, dialect)  # type: ignore[arg-type]
        assert members is not None, atom
        assert np.array_equal(members, _probe(atom, dialect)), (dialect, atom)


def test_a_class_outside_the_tables_is_read_by_the_regex_module() -> None:
    """Scripts, long property names and the brace-less form are left as written (documented)."""
    for atom in (r"\p{Greek}", r"\p{Letter}", r"\pL", r"[\p{Greek}a]", r"[[:alpha:]]"):
        assert class_members(atom, "tiktoken") is None, atom
        pattern = f"{atom}+|\\s+"
        assert dialect_pattern(pattern, "tiktoken") == pattern
        text = "αβγ  ΔΕ "  # only characters every one of these classes and \s+ match
        assert Pretokenizer.preset(pattern).split(text) == regex.findall(pattern, text)
    assert class_members(r"\p{L&}", "tiktoken") is not None  # a category: in the tables


def test_splitting_imports_no_engine() -> None:
    """The dialects come from the generated tables: splitting asks neither tiktoken nor HF."""
    import subprocess
    import sys

    code = (
        "import sys; from tokembed.tokenizer import Pretokenizer; "
        "Pretokenizer.preset('o200k', dialect='huggingface').split('x \\U0003dec5$j'); "
        "print(sorted(m for m in ('tiktoken', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
