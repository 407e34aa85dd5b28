"""The shared merge helpers, and the compiled merge against the plain one-join-at-a-time rule and HF."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from _core_data import encode_module
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tokembed.tokenizer.compiled import compiled_tables
from tokembed.tokenizer.merges import NO_RANK, merges_ordered
from tokembed.tokenizer.model import BPETables


def _plain(ids: list[int], tables: BPETables) -> list[int]:
    """The rule as stated: join the leftmost pair of the smallest rank, once; repeat."""
    ranks = tables.pair_ranks
    ids = list(ids)
    while True:
        present = [(ranks[p], i) for i, p in enumerate(pairwise(ids)) if p in ranks]
        if not present:
            return ids
        (_, result), at = min(present)
        ids[at : at + 2] = [result]


def _hf(ids: list[int], tables: BPETables) -> list[int]:
    """HF ``tokenizers``' BPE model with the same merges in rank order, on the same letters."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    vocab = {
        tables.pieces[i].decode("ascii"): i
        for i in (*range(97, 101), *(m[2] for m in tables.merges))
    }
    merges = [
        (tables.pieces[a].decode("ascii"), tables.pieces[b].decode("ascii"))
        for a, b, _ in tables.merges
    ]
    hf = Tokenizer(BPE(vocab=vocab, merges=merges))
    return list(hf.encode(bytes(ids).decode("ascii")).ids) if ids else []


def _heap(ids: list[int], tables: BPETables) -> list[int]:
    """The compiled merge (a heap for chunks of more than 64 bytes) on one chunk of bytes."""
    module = encode_module()
    text = bytes(ids).decode("ascii")  # the tests' ids are ASCII bytes
    encoder = module.Encoder(compiled_tables(tables), cache_limit=0)
    merged: list[int] = encoder.encode_chunks(text, [text])
    return merged


def test_pinned_examples() -> None:
    # "abab" -> ab ab -> (ab ab): the second merge sees the first merge's result twice.
    t = BPETables.byte_level(merges=[(97, 98), (256, 256)])
    assert _heap([97, 98, 97, 98, 97], t) == [257, 97]
    # Overlapping occurrences: "aaa" with a+a merges the left pair only, left to right.
    t = BPETables.byte_level(merges=[(97, 97)])
    assert _heap([97, 97, 97], t) == [256, 97]
    assert _heap([97] * 7, t) == [256, 256, 256, 97]
    assert _heap([], t) == []
    assert _heap([97], t) == [97]
    assert NO_RANK > 10**15


def test_an_unordered_table_joins_a_lower_rank_pair_as_soon_as_it_appears() -> None:
    # Rank 0 joins ab+a, a piece made only at rank 1: joining the first "ab" of "abab"
    # exposes (ab, a) of rank 0, which HF joins next: [aba, b], not [ab, ab].
    pieces = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"aba"}
    t = BPETables(pieces=pieces, merges=((256, 97, 257), (97, 98, 256)))
    assert not merges_ordered(t)
    assert _heap([97, 98, 97, 98], t) == _plain([97, 98, 97, 98], t) == [257, 98]
    assert _hf([97, 98, 97, 98], t) == [257, 98]
    assert _heap([97, 98, 97], t) == [257]


def test_long_run_is_exact() -> None:
    t = BPETables.byte_level(merges=[(97, 97), (256, 256), (257, 257), (258, 97)])
    for n in (1, 2, 3, 7, 8, 9, 1000, 1001):
        assert _heap([97] * n, t) == _plain([97] * n, t)


@st.composite
def _tables_and_ids(draw: st.DrawFn) -> tuple[BPETables, list[int]]:
    """Random merges over a 4-letter alphabet, in tree order or shuffled ranks."""
    pieces = {i: bytes([i]) for i in range(256)}
    alphabet = [97, 98, 99, 100]
    ids_so_far = list(alphabet)
    merges: list[tuple[int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    for k in range(draw(st.integers(0, 12))):
        left, right = draw(st.sampled_from(ids_so_far)), draw(st.sampled_from(ids_so_far))
        if (left, right) in seen:
            continue
        seen.add((left, right))
        result = 256 + k
        pieces[result] = pieces[left] + pieces[right]
        merges.append((left, right, result))
        ids_so_far.append(result)
    if draw(st.booleans()):
        merges = draw(st.permutations(merges))
    text = draw(st.lists(st.sampled_from(alphabet), max_size=150))  # past 64: the heap path
    return BPETables(pieces=pieces, merges=tuple(merges)), text


@settings(max_examples=400, deadline=None)
@given(_tables_and_ids())
def test_compiled_merge_equals_the_plain_rule_and_hf(case: tuple[BPETables, list[int]]) -> None:
    from tokembed.tokenizer.encode import encode_chunk_reference

    tables, ids = case
    expected = _plain(ids, tables)
    assert _heap(ids, tables) == expected
    assert encode_chunk_reference(tables, bytes(ids)) == expected
    assert _hf(ids, tables) == expected


@st.composite
def _tables_with_loose_pieces(draw: st.DrawFn) -> tuple[BPETables, list[int]]:
    """The tables above with ignore_merges and pieces no merge makes; the chunk is often one
    of their pieces, where the rule decides."""
    tables, text = draw(_tables_and_ids())
    pieces = dict(tables.pieces)
    for k in range(draw(st.integers(0, 4))):
        letters = draw(st.lists(st.sampled_from([97, 98, 99, 100]), min_size=2, max_size=6))
        pieces[300 + k] = bytes(letters)
    assume(len(set(pieces.values())) == len(pieces))
    longer = sorted(p for p in pieces.values() if len(p) > 1)
    if longer and draw(st.booleans()):
        text = list(draw(st.sampled_from(longer)))
    return BPETables(pieces=pieces, merges=tables.merges, ignore_merges=True), text


def _hf_ignoring_merges(ids: list[int], tables: BPETables) -> list[int]:
    """HF's BPE model with ``ignore_merges=True`` and every piece of the tables."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE

    vocab = {p.decode("latin-1"): i for i, p in tables.pieces.items()}
    merges = [
        (tables.pieces[a].decode("latin-1"), tables.pieces[b].decode("latin-1"))
        for a, b, _ in tables.merges
    ]
    hf = Tokenizer(BPE(vocab=vocab, merges=merges, ignore_merges=True))
    return list(hf.encode(bytes(ids).decode("ascii")).ids) if ids else []


@settings(max_examples=300, deadline=None)
@given(_tables_with_loose_pieces())
def test_ignore_merges_equals_hf_and_the_plain_rule_elsewhere(
    case: tuple[BPETables, list[int]],
) -> None:
    from tokembed.tokenizer.encode import encode_chunk_reference

    tables, ids = case
    whole = tables.piece_ids.get(bytes(ids)) if len(ids) > 1 else None
    expected = [whole] if whole is not None else _plain(ids, tables)
    assert _heap(ids, tables) == expected
    assert encode_chunk_reference(tables, bytes(ids)) == expected
    assert _hf_ignoring_merges(ids, tables) == expected


# --- limits (issue 25.7): every id is a 32-bit id, refused with a code beyond ------------
def test_a_special_id_beyond_32_bits_is_refused_wherever_it_comes_from(tmp_path: Path) -> None:
    import json

    from tokembed.errors import FormatError, TokembedError
    from tokembed.tokenizer.formats import export_hf, load_tokenizer
    from tokembed.tokenizer.model import ID_LIMIT, BPETables

    with pytest.raises(FormatError) as e:
        BPETables.byte_level(merges=[], specials={"<|x|>": ID_LIMIT})
    assert e.value.code == "SPECIAL_ID_UNREPRESENTABLE"
    BPETables.byte_level(merges=[], specials={"<|x|>": ID_LIMIT - 1})  # the largest id still fits
    from tokembed.tokenizer import Pretokenizer, Tokenizer

    tok = Tokenizer(
        pretokenizer=Pretokenizer.preset("gpt2"), tables=BPETables.byte_level(merges=[])
    )
    path = export_hf(tok, tmp_path / "tokenizer.json")
    doc = json.loads(path.read_text())
    doc["added_tokens"] = [{"id": 2**32 + 5, "content": "<|big|>", "special": True}]
    path.write_text(json.dumps(doc))
    with pytest.raises(TokembedError) as e2:
        load_tokenizer(tmp_path)
    assert e2.value.code in ("SPECIAL_ID_UNREPRESENTABLE", "MALFORMED_TOKENIZER_FILE")


def test_merges_and_special_ids_beyond_32_bits_are_refused_by_train() -> None:
    from tokembed.errors import UsageError
    from tokembed.tokenizer.train import TrainConfig

    for kwargs in ({"merges": 10**20}, {"merges": 2**32}, {"merges": 5, "specials": {"a": 2**32}}):
        with pytest.raises(UsageError) as e:
            TrainConfig(**kwargs)  # type: ignore[arg-type]
        assert e.value.code == "INVALID_ARGUMENT", kwargs


def test_compiled_objects_made_without_init_refuse_instead_of_crashing() -> None:
    import subprocess
    import sys

    probe = (
        "from tokembed.tokenizer._native import _count, _encode\n"
        "for cls in (_encode.Encoder, _encode.SharedCache, _count.Counter):\n"
        "    o = cls.__new__(cls)\n"
        "    for name in dir(o):\n"
        "        if name.startswith('__'): continue\n"
        "        try:\n"
        "            v = getattr(o, name)\n"
        "            v('x', 0, 0) if callable(v) else None\n"
        "        except (RuntimeError, TypeError, ValueError): pass\n"
        "    del o\n"
        "print('alive')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert (proc.returncode, proc.stdout) == (0, "alive\n"), proc.stderr
