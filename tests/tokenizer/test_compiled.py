"""The compiled encoder (``compiled.py`` on ``_native/encode_core.c``) against the reference,
tiktoken and HF tokenizers.

Explicit-merge mode and rank mode (a rank file's bytes → rank table with tiktoken's
rule) are each compared with the pure-Python reference, with each other where both
apply, and with the peer that defines the vocabulary, on all 13 PUD languages and on
hypothesis texts; the cache, batches in threads, missing bytes and long chunks too.
"""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import sysconfig
from collections import Counter
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from _core_data import encode_module, hf_peer, pud_tokenizer, rank_file_of
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, data_path, pud_text
from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
from tokembed.tokenizer.compiled import (
    PARALLEL_MIN_BYTES,
    PARTS_PER_THREAD,
    CompiledEncoder,
    compiled_tables,
    run_threaded,
    set_encode_threads,
)
from tokembed.tokenizer.encode import (
    encode_chunk_reference,
    encode_ordinary_reference,
    flat_ids,
    join_flat_reference,
)
from tokembed.tokenizer.patterns import QWEN

RANK_FILES = ("o200k_base", "cl100k_base", "r50k_base")


@cache
def _rank_file(name: str) -> tuple[Any, Any, Tokenizer]:
    """(tiktoken peer, compiled rank-mode tables, our tokenizer with explicit merges)."""
    import tiktoken

    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.ranks import parse_ranks

    path = data_path("tokenizers", f"{name}.tiktoken")
    data = path.read_bytes()
    tok = load_tokenizer(path, encoding=name)
    peer = tiktoken.Encoding(
        name,
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=parse_ranks(data),
        special_tokens={},
    )
    return peer, encode_module().Tables.from_ranks(data), tok


def _encoder(tables: Any, *, cache_limit: int = 1 << 20) -> Any:
    return encode_module().Encoder(tables, cache_limit=cache_limit)


def _chunked(enc: Any, pre: Pretokenizer, text: str) -> list[int]:
    ids: list[int] = enc.encode_chunks(text, pre.split(text))
    return ids


@pytest.mark.parametrize("lang", PUD_LANGS)
def test_merge_mode_equals_reference_on_pud(lang: str) -> None:
    encode_module()
    tok = pud_tokenizer()
    text = pud_text(lang)
    enc = _encoder(compiled_tables(tok.tables))
    assert _chunked(enc, tok.pretokenizer, text) == tok.encode_ordinary_reference(text)


@pytest.mark.parametrize("name", RANK_FILES)
def test_rank_mode_equals_tiktoken_and_merge_mode_on_pud(name: str) -> None:
    peer, ranks, tok = _rank_file(name)
    by_rank, by_merge = _encoder(ranks), _encoder(compiled_tables(tok.tables))
    for lang in PUD_LANGS:
        text = pud_text(lang)
        expected = peer.encode_ordinary(text)
        assert _chunked(by_rank, tok.pretokenizer, text) == expected, lang
        assert _chunked(by_merge, tok.pretokenizer, text) == expected, lang
        assert tok.encode_ordinary(text) == expected, lang  # split by the compiled scanner


@pytest.mark.parametrize("name", ["gpt2-hf", "smollm2-135m"])
def test_hf_vocabularies_equal_hf_tokenizers_on_pud(name: str) -> None:
    from tokembed.tokenizer.formats import load_tokenizer

    encode_module()
    tok = load_tokenizer(data_path("tokenizers", name))
    assert tok.implementation == "compiled"
    peer = hf_peer(name)
    for lang in PUD_LANGS:
        text = pud_text(lang)
        expected = peer.encode(text, add_special_tokens=False).ids
        assert tok.encode_ordinary(text) == expected, lang


def test_qwen_rank_mode_equals_merge_mode_and_tiktoken() -> None:
    """Qwen's vocabulary is not tiktoken-exact as explicit merges; as a rank file it is.
    Its pattern is split by the compiled scanner (TK_PRESET_QWEN), checked against the
    Python splitter's chunks, tiktoken and the reference."""
    import tiktoken

    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.ranks import parse_ranks

    module = encode_module()
    path = data_path("tokenizers", "qwen.tiktoken")
    tok = load_tokenizer(path)
    assert tok.pretokenizer.stages == (QWEN,)
    assert tok.implementation == "compiled"
    assert tok._engine.scanner is not None
    peer = tiktoken.Encoding(
        "qwen",
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=parse_ranks(path.read_bytes()),
        special_tokens={},
    )
    by_rank = _encoder(module.Tables.from_ranks(path.read_bytes()))
    by_merge = _encoder(compiled_tables(tok.tables))
    for lang in PUD_LANGS:
        text = pud_text(lang)
        ids = tok.encode_ordinary(text)
        assert ids == peer.encode_ordinary(text) == _chunked(by_merge, tok.pretokenizer, text)
        assert ids == _chunked(by_rank, tok.pretokenizer, text), lang
        assert ids == tok.encode_ordinary_reference(text), lang


_ALPHABET = st.sampled_from(
    [
        "a",
        "b",
        "ab",
        " ",
        "  ",
        "\n",
        "\t",
        "1",
        "123",
        "ё",
        "Дом",
        "中",
        "文",
        "🙂",
        "'s",
        "!",
        "é",
    ]
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_ALPHABET, max_size=80), st.integers(1, 40))
def test_hypothesis_texts_equal_reference_in_both_modes(parts: list[str], repeat: int) -> None:
    peer, ranks, tok = _rank_file("cl100k_base")
    text = "".join(p * (repeat if i % 3 == 0 else 1) for i, p in enumerate(parts))
    expected = peer.encode_ordinary(text)
    assert _chunked(_encoder(ranks), tok.pretokenizer, text) == expected
    pud = pud_tokenizer()
    ref = encode_ordinary_reference(pud.tables, pud.pretokenizer, text)
    assert _chunked(_encoder(compiled_tables(pud.tables)), pud.pretokenizer, text) == ref


def _unordered_tables() -> BPETables:
    # Merges out of dependency order and a duplicate piece: bc < ab, and "abc" twice.
    return BPETables.byte_level(
        merges=[(98, 99, 256), (97, 98, 257), (257, 99, 258), (97, 256, 259), (259, 259, 260)]
    )


@pytest.mark.parametrize("unit", ["abc", "ab", "aab", "abcabc ", "cab"])
@pytest.mark.parametrize("length", [3, 40, 200, 3000])
def test_heap_and_small_loop_equal_reference_on_unordered_tables(unit: str, length: int) -> None:
    """Long chunks (heap) and short ones (rescanning loop) of a table the trainer could not make."""
    tables = _unordered_tables()
    pre = Pretokenizer.preset(r"[^\n]+|\n")
    text = (unit * length)[: length * 2] + "\n" + unit * 5
    ref = encode_ordinary_reference(tables, pre, text)
    assert _chunked(_encoder(compiled_tables(tables)), pre, text) == ref


@pytest.mark.parametrize("name", RANK_FILES)
def test_long_pathological_chunks_in_rank_mode(name: str) -> None:
    peer, ranks, tok = _rank_file(name)
    for text in ["a" * 5000, "中" * 3000, "1" * 4000, "ab" * 3000, " " * 4000 + "x", "\n" * 2000]:
        # tiktoken's own regex overflows on long whitespace; our splitter gives the same chunks.
        chunks = tok.pretokenizer.split(text)
        expected = [i for c in chunks for i in peer._encode_single_piece(c.encode())]
        assert _encoder(ranks).encode_chunks(text, chunks) == expected, text[:3]


def test_cache_limit_bounds_entries_and_keeps_ids() -> None:
    tok = pud_tokenizer()
    text = pud_text("de")
    tables = compiled_tables(tok.tables)
    expected = encode_ordinary_reference(tok.tables, tok.pretokenizer, text)
    small, none, big = (
        _encoder(tables, cache_limit=50),
        _encoder(tables, cache_limit=0),
        _encoder(tables),
    )
    for _ in range(2):
        assert _chunked(small, tok.pretokenizer, text) == expected
        assert _chunked(none, tok.pretokenizer, text) == expected
        assert _chunked(big, tok.pretokenizer, text) == expected
    assert 0 < small.cache_size <= 50
    assert small.cache_clears > 0
    assert none.cache_size == 0
    assert big.cache_size > 1000
    assert big.cache_clears == 0
    big.clear_cache()
    assert big.cache_size == 0
    assert _chunked(big, tok.pretokenizer, text) == expected
    with pytest.raises(ValueError, match="cache_limit"):
        encode_module().Encoder(tables, cache_limit=-1)


def test_long_chunks_are_not_cached() -> None:
    module = encode_module()
    tok = pud_tokenizer()
    enc = _encoder(compiled_tables(tok.tables))
    pre = Pretokenizer.preset(r"[^\n]+|\n")
    enc.encode_chunks("x" * (module.CACHED_CHUNK + 1), ["x" * (module.CACHED_CHUNK + 1)])
    assert enc.cache_size == 0
    enc.encode_chunks("x" * module.CACHED_CHUNK, pre.split("x" * module.CACHED_CHUNK))
    assert enc.cache_size == 0  # like every chunk, it waits for its second merge
    enc.encode_chunks("x" * module.CACHED_CHUNK, pre.split("x" * module.CACHED_CHUNK))
    assert enc.cache_size == 1


def test_a_chunk_enters_the_cache_when_it_is_merged_again() -> None:
    tok = pud_tokenizer()
    enc = _encoder(compiled_tables(tok.tables))
    word = "Donaudampfschifffahrtsgesellschaftskapitän"  # over 32 bytes: no front slot
    short = " xq"  # Latin letters in a Russian vocabulary: 2 or 3 ids, one front slot
    expected = encode_ordinary_reference(tok.tables, tok.pretokenizer, word)
    assert enc.encode_chunks(word, [word]) == expected
    assert enc.cache_size == 0
    assert enc.encode_chunks(word, [word]) == expected
    assert enc.cache_size == 1
    assert enc.encode_chunks(word, [word]) == expected  # now a hit
    assert enc.cache_size == 1
    enc.clear_cache()  # forgets what it saw, too
    enc.encode_chunks(word, [word])
    assert enc.cache_size == 0
    ids = enc.encode_chunks(short, [short])
    assert 2 <= len(ids) <= 3
    assert enc.encode_chunks(short, [short]) == ids  # from the front: never merged again
    assert enc.cache_size == 0


def test_short_chunks_enter_the_cache_only_where_the_front_cannot_keep_them() -> None:
    """A chunk a front slot holds (up to 32 bytes and 7 ids) stays out of the chunk cache while
    the front has not grown, even merged again after the front lost it; one of more ids than a
    slot holds, once such chunks are common (an eighth of those merged), enters on its second
    merge as a long chunk does."""
    peer, ranks, tok = _rank_file("o200k_base")
    rng = random.Random(3)
    words = sorted(
        {"".join(rng.choice("bcdfghklmnprstvz") for _ in range(6)) for _ in range(12_000)}
    )
    order = words * 2
    rng.shuffle(order)
    text = " ".join(order)
    enc = _encoder(ranks)
    chunks = tok.pretokenizer.split(text)
    assert max(len(c.encode()) for c in chunks) <= 7  # every one fits a slot, key and ids
    assert enc.encode_chunks(text, chunks) == peer.encode_ordinary(text)
    # 12,000 words twice in 65,536 slots: some are lost and merged again, none is cached
    assert enc.front_slots == 1 << 16
    assert enc.cache_size == 0
    small = _encoder(compiled_tables(pud_tokenizer().tables))  # Russian merges, Latin words
    first, word = " vvkxqzjw", " qwjzxkvfy"
    assert len(small.encode_chunks(first, [first])) > 7  # such chunks are common here
    ids = small.encode_chunks(word, [word])
    assert len(ids) > 7  # more than a front slot holds
    assert small.cache_size == 0
    assert small.encode_chunks(word, [word]) == ids
    assert small.cache_size == 1
    assert small.encode_chunks(word, [word]) == ids  # now a hit
    assert small.cache_size == 1


def _many_words(n: int, seed: int) -> list[str]:
    """n distinct words of 2-40 UTF-8 bytes (Latin, Cyrillic, CJK letters), seeded. Among
    them, 6,000 start with the same 8, 16 or 24 bytes as a chunk (after its space) and have
    one length per family and few ids, so that chunks differing only in one later word of
    the front key meet in one slot."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдежзиклмнопрстуфхцчшщыэюя中文字的是"
    words: set[str] = set()
    for shared in ("informat", "informationinfor", "informationinformationi"):
        family: set[str] = set()
        while len(family) < 2000:
            family.add(shared + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in "123"))
        words |= family
    while len(words) < n:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, 16)))
        if 2 <= len(word.encode()) <= 40:
            words.add(word)
    return sorted(words)


@pytest.mark.parametrize("name", ["o200k_base", "r50k_base"])
def test_front_cache_conflicts_and_text_ends_keep_ids(name: str) -> None:
    """The encoder's front cache (65,536 one-line slots, 262,144 once a call has displaced a
    quarter of them) keeps exact ids when more distinct chunks than slots evict each other,
    across its growth, when a chunk of up to 32 bytes (the front key) ends the text or the
    slot is read past it, and around the key's size."""
    peer, ranks, tok = _rank_file(name)
    words = _many_words(100_000, seed=7)
    order = words * 3
    random.Random(8).shuffle(order)
    text = " ".join(order)
    by_rank, by_merge = _encoder(ranks), _encoder(compiled_tables(tok.tables))
    expected = peer.encode_ordinary(text)
    assert by_rank.front_slots == by_merge.front_slots == 0  # made on the first chunk
    # The first pass fills the front and displaces; the second starts by growing it (the
    # first's survivors moved to new slots, the lost ones merged again); the third runs on it.
    for slots in (1 << 16, 1 << 18, 1 << 18):
        assert _chunked(by_rank, tok.pretokenizer, text) == expected
        assert _chunked(by_merge, tok.pretokenizer, text) == expected
        assert by_rank.front_slots == by_merge.front_slots == slots
    short, head = _encoder(ranks), text[:20_000]
    for _ in range(3):  # a text with few distinct chunks never grows it
        assert _chunked(short, tok.pretokenizer, head) == peer.encode_ordinary(head)
    assert short.front_slots == 1 << 16
    for n in (2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40):
        for word in ("x" * n, "я" * (n // 2) + "q" * (n % 2)):
            for end in ("", " tail", "!" * 40):  # the chunk ends the text, or bytes follow
                sample = f"{word}{end}"
                assert by_rank.encode_text(sample, *tok._engine.scanner) == peer.encode_ordinary(
                    sample
                ), (n, end)


def test_chunks_must_tile_the_text() -> None:
    enc = _encoder(compiled_tables(pud_tokenizer().tables))
    with pytest.raises(ValueError, match="tile"):
        enc.encode_chunks("abc", ["ab"])


def test_missing_byte_raises_with_the_offset_of_today() -> None:
    pieces = {i: bytes([i]) for i in range(256) if i != 0xD0}
    tables = BPETables(pieces=pieces)
    module = encode_module()
    with pytest.raises(module.MissingByte) as raw:
        _encoder(compiled_tables(tables)).encode_chunks("ok, Дом", ["ok", ",", " Дом"])
    assert raw.value.args == (4,)  # byte offset of D0 in b"ok, \xd0\x94..."
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("teaching"), tables=tables)
    assert tok.implementation == "compiled"
    for encode in (tok.encode_ordinary, tok.encode_ordinary_reference, tok.encode_to_numpy):
        with pytest.raises(TokenizerError) as e:
            encode("ok, Дом")
        assert e.value.code == "UNREPRESENTABLE_BYTE"
        assert e.value.value == 4


def test_a_range_of_a_text_encodes_as_that_part_and_cuts_between_characters() -> None:
    """``encode_text(..., start=, end=)`` encodes bytes [start, end) of the text's UTF-8 (with
    ``chars=True`` characters [start, end)) as the str of them would; ``safe_cuts`` gives
    increasing character cuts then the text's length, and the UTF-8's length; an offset inside
    a character or past the end is refused."""
    module = encode_module()
    tok = pud_tokenizer()
    engine = tok._engine
    assert engine.scanner is not None
    enc = engine.encoder()
    text = pud_text("ru")[:20_000] + "\n" + pud_text("zh")[:20_000]
    data = text.encode()
    ends, size = module.safe_cuts(text, engine.scanner[1], 6)
    assert ends[-1] == len(text)
    assert size == len(data)
    assert 2 <= len(ends) <= 6
    assert ends == sorted(set(ends))
    whole: list[int] = []
    for start, end in pairwise([0, *ends]):
        part = enc.encode_text(text, *engine.scanner, start=start, end=end, chars=True)
        assert part == enc.encode_text(text[start:end], *engine.scanner)
        a, b = len(text[:start].encode()), len(text[:end].encode())
        assert part == enc.encode_text(text, *engine.scanner, start=a, end=b)
        whole += part
    assert whole == tok.encode_ordinary(text)
    inside = len("Д".encode()) // 2  # the second byte of a two-byte character
    for start, end in ((inside, -1), (0, inside), (3, 2), (-1, 4), (0, len("Дом".encode()) + 1)):
        with pytest.raises(ValueError, match="character boundaries"):
            enc.encode_text("Дом", *engine.scanner, start=start, end=end)
    for start, end in ((3, 2), (-1, 2), (0, 4)):
        with pytest.raises(ValueError, match="character offsets"):
            enc.encode_text("Дом", *engine.scanner, start=start, end=end, chars=True)
    assert module.safe_cuts("no line feed at all", engine.scanner[1], 4) == ([19], 19)
    assert module.safe_cuts("нет перевода строки", engine.scanner[1], 4) == ([19], 36)


def test_join_lists_moves_the_items_of_lists_no_one_else_holds() -> None:
    """The parts' id lists are joined by moving their items: a part only the argument holds
    is left empty, one held elsewhere keeps its items, and the result is the concatenation."""
    module = encode_module()
    held = [7, 8]
    parts = [list(range(300, 305)), held, [], list(range(1000, 1003))]
    expected = [*range(300, 305), 7, 8, *range(1000, 1003)]
    assert module.join_lists(parts) == expected
    assert parts == [[], [7, 8], [], []]
    assert held == [7, 8]
    assert module.join_lists([]) == []
    with pytest.raises(TypeError):
        module.join_lists([[1], (2,)])


def test_long_id_lists_are_exact_and_keep_no_slack() -> None:
    """A list of half a million ids or more is made with room to spare (its pages then come
    from huge pages) and gives that room back once filled: its items are the ids, its
    allocation its length, and it grows as any list does; joined lists the same."""
    module = encode_module()
    tables = BPETables(pieces={i: bytes([i]) for i in range(256)})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("o200k"), tables=tables)
    text = "ab " * 200_000  # 600,000 ids, above the 524,288 where the slack starts
    ids = tok.encode_ordinary(text)
    assert ids == list(text.encode())
    assert sys.getsizeof(ids) == sys.getsizeof([]) + 8 * len(ids)
    ids.append(7)
    assert ids[-1] == 7
    assert len(ids) == 600_001
    joined = module.join_lists([ids, [1, 2]])
    assert len(joined) == 600_003
    assert joined[:3] == [97, 98, 32]
    assert joined[-3:] == [7, 1, 2]
    assert sys.getsizeof(joined) == sys.getsizeof([]) + 8 * len(joined)


def _refs(objs: list[int]) -> list[int]:
    return [sys.getrefcount(o) for o in objs]


def test_lists_of_ids_hold_exact_references_to_the_tables_ints() -> None:
    """A list's items are the tables' own int objects, their references taken from a reserve
    the tables hold rather than written to each int: making a list leaves every int's count as
    it was, a reserve used up (65,536 items of one id) is refilled, and once the tables are gone
    each int has exactly its holders' references; the ids are the reference encoder's. A debug
    or free-threaded build has no reserves: there a list adds its items to the counts."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = {i: bytes([i]) for i in range(256)}
    merges = []
    for a in letters:
        for b in letters:
            merges.append((ord(a), ord(b), len(pieces)))
            pieces[len(pieces)] = (a + b).encode()
    tables = BPETables(pieces=pieces, merges=tuple(merges))
    pre = Pretokenizer.preset("cl100k")
    tok = Tokenizer(pretokenizer=pre, tables=tables)
    rng = random.Random(5)
    words = ["".join(rng.choices(letters, k=rng.randint(1, 9))) for _ in range(20_000)]
    words += ["zz"] * 140_000  # one id past two reserves of 65,536
    rng.shuffle(words)
    text = " ".join(words)
    ids = tok.encode_ordinary(text)
    assert ids == encode_ordinary_reference(tables, pre, text)
    probes = sorted({i: i for i in ids if i > 256}.values())  # the tables' own int objects
    uses = Counter(ids)
    counts = [uses[p] for p in probes]
    del uses
    assert max(counts) > 2 * 65_536
    assert len(probes) > 600
    before = _refs(probes)
    again = tok.encode_ordinary(text)  # zz's reserve runs out and is refilled twice more
    # an int whose reserve lasts is not written to: its count stays as it was
    reserves = not hasattr(sys, "gettotalrefcount") and not sysconfig.get_config_var(
        "Py_GIL_DISABLED"
    )
    lasting = [k for k, c in enumerate(counts) if 2 * c < 65_536]
    assert len(lasting) == len(probes) - 1
    after = _refs(probes)
    added = [0 if reserves else counts[k] for k in lasting]
    assert [after[k] - before[k] for k in lasting] == added
    del again
    del tok, tables
    gc.collect()
    held = _refs(probes)
    del ids
    fresh = [int(str(p)) for p in probes]  # ints of the same values that no list holds
    assert _refs(probes) == _refs(fresh)
    assert [h - f for h, f in zip(held, _refs(fresh), strict=True)] == counts


def test_a_missing_byte_is_found_in_the_chunk_that_holds_it_however_many_follow() -> None:
    """The scanner's chunks are encoded in batches of 64 after the scan (their cache lines
    load meanwhile); a chunk that needs a missing byte is still named by its own offset,
    whether chunks were scanned after it, it ends the text, line or batch, or it comes in a
    later batch, first or last in it."""
    module = encode_module()
    tables = BPETables(pieces={i: bytes([i]) for i in range(256) if i != 0xD0})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("o200k"), tables=tables)
    engine = tok._engine
    assert isinstance(engine, CompiledEncoder)
    assert engine.scanner is not None
    enc = engine.encoder()
    for before, after in (
        ("", ""),
        ("ok, ", ""),
        ("a b c d e f ", " g h i j k l m"),
        ("x" * 40, " y"),
        ("w" + " w" * 62, ""),  # the missing byte's chunk is the 64th: last of the first batch
        ("w" + " w" * 63, " z" * 70),  # the 65th: first of the second, more batches after
        ("w" + " w" * 200, " z"),
    ):
        text = f"{before}Дом{after}"
        at = len(before.encode())
        with pytest.raises(module.MissingByte) as one:
            enc.encode_text(text, *engine.scanner)
        assert one.value.args == (at,), text
        with pytest.raises(module.MissingByte) as part:  # a range counts from the text's start
            enc.encode_text(f"a\n{text}", *engine.scanner, start=2)
        assert part.value.args == (at + 2,), text
        with pytest.raises(module.MissingByte) as many:
            enc.encode_texts(["fine text", text], *engine.scanner)
        assert many.value.args == (at,), text
        with pytest.raises(module.MissingByte) as lines:
            enc.encode_lines(f"fine\n{text}\nmore".encode(), *engine.scanner)
        assert lines.value.args == (at + len("fine\n"),), text
    assert enc.encode_text("a b c d e f g", *engine.scanner) == tok.encode_ordinary_reference(
        "a b c d e f g"
    )


def test_a_batch_leaves_garbage_collection_as_it_found_it() -> None:
    """The compiled batch builds its lists with the collector paused (each list would
    otherwise count towards a collection that walks every id placed); it is on again after,
    and stays off for a caller that had turned it off."""
    import gc

    encode_module()
    tok = pud_tokenizer()
    texts = [line for line in pud_text("ru").splitlines()[:300] if line]
    expected = [tok.encode_ordinary_reference(t) for t in texts]
    assert gc.isenabled()
    assert tok.encode_ordinary_batch(texts, progress=False) == expected
    assert gc.isenabled()
    gc.disable()
    try:
        assert tok.encode_ordinary_batch(texts, progress=False) == expected
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_batch_in_threads_equals_sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    encode_module()
    # These batches are small enough to take one thread by default; make them use two.
    monkeypatch.setattr("tokembed.tokenizer._batch._THREADED_MIN_CHARS", 0)
    tok = pud_tokenizer()
    assert tok.implementation == "compiled"
    texts = [line for lang in PUD_LANGS for line in pud_text(lang).splitlines()[:40]]
    one = tok.encode_batch(texts, progress=False)
    two = tok.encode_batch(texts, workers=2, progress=False)
    assert one == two == [tok.encode_ordinary_reference(t) for t in texts]
    # Ordinary batches go through one compiled call per slice; a surrogate pair sends its
    # slice back to the per-text path (which joins the pair), a lone one still raises.
    odd = [*texts[:50], "abc \ud83d\udc4d", *texts[50:100]]
    expected = [tok.encode_ordinary(t) for t in odd]
    assert tok.encode_ordinary_batch(odd, num_threads=2, progress=False) == expected
    assert tok.encode_ordinary_batch(odd, progress=False) == expected
    with pytest.raises(TokenizerError) as e:
        tok.encode_ordinary_batch([*texts[:10], "x \udc80"], num_threads=2, progress=False)
    assert e.value.code == "LONE_SURROGATE"


def test_small_batch_takes_one_thread_with_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threaded size a batch asked for two threads runs on the calling one."""
    from tokembed.tokenizer import _batch

    tok = pud_tokenizer()
    texts = pud_text("en").splitlines()[:50]
    asked: list[tuple[int, int]] = []  # (items, threads) of each threaded run

    def noted(n: int, run: Any, *, threads: int) -> list[Any]:
        asked.append((n, threads))
        return run_threaded(n, run, threads=threads)

    monkeypatch.setattr(_batch, "run_threaded", noted)
    assert sum(map(len, texts)) < _batch._THREADED_MIN_CHARS
    small = tok.encode_ordinary_batch(texts, num_threads=2, progress=False)
    assert asked == []
    big = texts * (_batch._THREADED_MIN_CHARS // sum(map(len, texts)) + 1)
    tok.encode_ordinary_batch(big, num_threads=2, progress=False)
    (items, threads), *more = asked  # the control: a large batch does take two threads
    assert more == []
    assert items > 1
    assert threads == 2
    assert small == [tok.encode_ordinary(t) for t in texts]


def test_a_batch_is_short_below_the_threaded_size_and_reads_no_further() -> None:
    """``_short`` counts characters up to the threaded size and stops there: whatever follows
    the text that reaches it is never asked its length."""
    from tokembed.tokenizer._batch import _THREADED_MIN_CHARS, _short

    size = _THREADED_MIN_CHARS
    assert _short([])
    assert _short(["x" * (size - 1)])
    assert _short(["x" * (size - 2), "é"])
    assert not _short(["x" * size])
    assert not _short(["x" * (size - 1), "é"])
    assert not _short(["x" * size, None])  # type: ignore[list-item]  # len(None) would raise


def test_run_threaded_keeps_order_and_raises_the_first_error() -> None:
    """Results come back in index order from at most ``threads`` threads (the caller and
    the process-wide pool's); every item runs even when some fail, and the lowest failing
    index's error is the one raised."""
    import threading

    ran: dict[int, str] = {}

    def square(i: int) -> int:
        ran[i] = threading.current_thread().name
        return i * i

    assert run_threaded(64, square, threads=3) == [i * i for i in range(64)]
    names = set(ran.values())
    assert len(names) <= 3
    assert names <= {threading.current_thread().name} | {
        t.name for t in threading.enumerate() if t.name.startswith("tokembed-encode")
    }
    ran.clear()
    assert run_threaded(5, square, threads=1) == [0, 1, 4, 9, 16]
    assert set(ran.values()) == {threading.current_thread().name}
    assert run_threaded(0, square, threads=2) == []

    def fails(i: int) -> int:
        ran[i] = threading.current_thread().name
        if i in (7, 3):
            raise ValueError(f"item {i}")
        return i

    ran.clear()
    with pytest.raises(ValueError, match=r"^item 3$"):
        run_threaded(20, fails, threads=2)
    assert sorted(ran) == list(range(20))


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.lists(st.lists(st.integers(0, 2**32 - 1), max_size=6), max_size=5), max_size=6)
)
def test_compiled_join_of_flat_runs_equals_the_reference(runs: list[list[list[int]]]) -> None:
    """The compiled join of runs' flat results (a threaded batch's) equals numpy's, and the
    flat result of all their texts at once: ids, offsets and dtypes."""
    import numpy as np

    engine = pud_tokenizer()._engine
    assert isinstance(engine, CompiledEncoder)
    parts = [flat_ids(texts) for texts in runs]
    want_ids, want_offsets = flat_ids([one for texts in runs for one in texts])
    for ids, offsets in (engine.join_flat(parts), join_flat_reference(parts)):
        assert (ids.dtype, offsets.dtype) == (np.uint32, np.int64)
        assert ids.tolist() == want_ids.tolist()
        assert offsets.tolist() == want_offsets.tolist()


def test_compiled_join_of_flat_runs_refuses_what_is_not_a_run() -> None:
    import numpy as np

    module = encode_module()
    ids = np_u32([1, 2])
    for cuts in ([], [1, 2], [0, 1]):  # none; not from 0; not to the ids' count
        with pytest.raises(ValueError, match="offsets int64 from 0 to the ids' count"):
            module.join_flat([(ids, np.array(cuts, np.int64))])
    with pytest.raises(ValueError, match="ids are uint32"):
        module.join_flat([(b"\x01\x02\x03", bytes(8))])
    with pytest.raises(TypeError, match="pairs"):
        module.join_flat([(ids,)])
    # every buffer taken is given back, on success and on each refusal: a bytearray whose
    # buffer were still held could not grow
    held = bytearray(np.array([0, 2], np.int64).tobytes())
    assert module.join_flat([(ids, held)])[0] == ids.tobytes()
    for bad in ([(ids, held), (ids, b"")], [(ids, held), (ids,)], [(bytes(3), held)]):
        with pytest.raises((ValueError, TypeError)):
            module.join_flat(bad)
    held.extend(b"x")


def np_u32(values: list[int]) -> Any:
    import numpy as np

    return np.array(values, dtype=np.uint32)


def test_encode_to_numpy_equals_list() -> None:
    import numpy as np

    encode_module()
    tok = pud_tokenizer()
    text = pud_text("fi")
    arr = tok.encode_to_numpy(text)
    assert arr.dtype == np.uint32
    assert arr.flags.writeable
    assert arr.tolist() == tok.encode_ordinary(text)
    joined = "abc \ud83d\udc4d"  # a surrogate pair (JSON decoding) is the character it spells
    assert tok.encode_to_numpy(joined).tolist() == tok.encode_ordinary(joined)


def test_rank_file_loads_without_merges_and_derives_them_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a rank file parses it in C; the merge list is derived on first use of the
    tables and then read back from the digest-keyed cache by a later load."""
    import hashlib

    from tokembed.tokenizer.formats import load_tokenizer, tiktoken_files
    from tokembed.tokenizer.formats.ranks import parse_ranks, ranks_to_tables

    encode_module()
    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path))
    path = data_path("tokenizers", "r50k_base.tiktoken")
    tok = load_tokenizer(path, encoding="r50k_base")
    assert tok._tables is None
    assert tok.implementation == "compiled"
    assert tok.encode("hello world") == [31373, 995]
    assert tok._tables is None  # encoding needed no merge list
    eager = ranks_to_tables(parse_ranks(path.read_bytes()))
    assert tok.tables.merges == eager.merges
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    stored = tmp_path / "rank-merges" / f"{digest}.merges"
    assert stored.is_file()

    def refuse(*_: object) -> object:
        raise AssertionError("derived again although the cache holds the merges")

    monkeypatch.setattr(tiktoken_files, "ranks_to_tables", refuse)
    again = load_tokenizer(path, encoding="r50k_base")
    assert again.tables.merges == eager.merges
    # A damaged cache file is ignored (and rewritten), never trusted.
    stored.write_bytes(stored.read_bytes()[:-12])
    monkeypatch.undo()
    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path))
    third = load_tokenizer(path, encoding="r50k_base")
    assert third.tables.merges == eager.merges
    assert len(stored.read_bytes()) > len(eager.merges) * 12


def test_deferred_tokenizer_pickles_with_its_tables() -> None:
    """A rank-file tokenizer pickles as its file (a worker compiles it again, no merge list
    travels or is derived); a process without the compiled module builds the tables."""
    import pickle

    encode_module()
    _, _, tok = _rank_file("r50k_base")
    from tokembed.tokenizer.formats import load_tokenizer

    lazy = load_tokenizer(data_path("tokenizers", "r50k_base.tiktoken"), encoding="r50k_base")
    blob = pickle.dumps(lazy)
    back = pickle.loads(blob)
    text = pud_text("en")[:2000]
    assert back.encode_ordinary(text) == lazy.encode_ordinary(text) == tok.encode_ordinary(text)
    assert back._tables is None
    assert back._deferred is not None
    assert back.address_hash == tok.address_hash
    assert back.n_vocab == tok.n_vocab == 50257
    assert back._tables is None
    assert len(blob) < 2 * len(data_path("tokenizers", "r50k_base.tiktoken").read_bytes())
    probe = (
        "import pickle, sys; t = pickle.loads(sys.stdin.buffer.read()); "
        "print(t.implementation, t._deferred is None, t.encode_ordinary('hello world'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        input=blob,
        capture_output=True,
        check=True,
        env={**os.environ, "TOKEMBED_PURE_PYTHON": "1"},
    )
    assert out.stdout.decode().split(maxsplit=2) == ["reference", "True", "[31373, 995]\n"]


def test_rank_file_address_hash_and_id_range_need_no_merge_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R and the address hash of a rank file come without deriving its merges' tables in
    the process: the hash is computed once per file, pattern and specials, then read back."""
    from tokembed.tokenizer.formats import load_tokenizer, tiktoken_files
    from tokembed.tokenizer.model import address_hash

    encode_module()
    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path))
    path = data_path("tokenizers", "r50k_base.tiktoken")
    eager = _rank_file("r50k_base")[2]
    expected = address_hash(eager.tables, eager.pretokenizer.stages)
    for encoding in ("r50k_base", "p50k_edit"):  # other special tokens: another key, R 50284
        lazy = load_tokenizer(path, encoding=encoding)
        assert lazy.n_vocab == lazy.tables.id_range
        first = load_tokenizer(path, encoding=encoding)
        assert first.address_hash == address_hash(lazy.tables, lazy.pretokenizer.stages)
        assert first._tables is None
    assert load_tokenizer(path, encoding="r50k_base").address_hash == expected
    stored = sorted((tmp_path / "rank-address").iterdir())
    assert len(stored) == 2
    assert load_tokenizer(path, encoding="p50k_edit").n_vocab == 50284

    def refuse(*_: object) -> object:
        raise AssertionError("tables built although the cache holds the hash")

    monkeypatch.setattr(tiktoken_files, "_rank_file_tables", refuse)
    assert load_tokenizer(path, encoding="r50k_base").address_hash == expected
    # A damaged file is ignored and rewritten, never trusted.
    (mine,) = [f for f in stored if f.read_text(encoding="ascii").endswith(expected)]
    mine.write_text("tokembed-rank-address-v1 sha256:" + "0" * 63 + "x", encoding="ascii")
    monkeypatch.undo()
    monkeypatch.setenv("TOKEMBED_CACHE_DIR", str(tmp_path))
    assert load_tokenizer(path, encoding="r50k_base").address_hash == expected
    assert mine.read_text(encoding="ascii").endswith(expected)


@pytest.mark.parametrize("preset", ["teaching", "r50k", "cl100k", "o200k", "gpt2-hf", "qwen"])
@pytest.mark.parametrize("dialect", ["tiktoken", "huggingface"])
def test_compiled_split_equals_python_split(preset: str, dialect: str) -> None:
    """Whole texts split by scan.c give the ids of the Python pre-tokenizer's chunks
    (``qwen``: the pattern of Qwen's rank file, used here with our own tables)."""
    encode_module()
    tok = pud_tokenizer()
    pattern = QWEN if preset == "qwen" else preset
    pre = Pretokenizer.preset(pattern, dialect=dialect)  # type: ignore[arg-type]
    fast = CompiledEncoder(compiled_tables(tok.tables), pre)
    assert fast.scanner is not None
    enc = fast.encoder()
    for lang in PUD_LANGS:
        text = pud_text(lang) + " \n\n  x  \t\r\n 12345 'S 's ?!.. \u00a0\u2028"
        assert fast.encode(text) == _chunked(enc, pre, text), lang


@pytest.mark.slow
def test_ruslit_in_both_modes(ruslit_text: str) -> None:
    """All of RusLit-40: o200k's rank mode against tiktoken, SmolLM2's merge mode against the
    reference on every unique chunk (merges never cross chunks, so that covers every position)."""
    from tokembed.tokenizer.formats import load_tokenizer

    encode_module()
    peer, _, _ = _rank_file("o200k_base")
    o200k = load_tokenizer(data_path("tokenizers", "o200k_base.tiktoken"))
    assert o200k._engine.scanner is not None
    assert o200k.encode_ordinary(ruslit_text) == peer.encode_ordinary(ruslit_text)
    smol = load_tokenizer(data_path("tokenizers", "smollm2-135m"))
    chunks = smol.pretokenizer.split(ruslit_text)
    ref = {c: encode_chunk_reference(smol.tables, c.encode()) for c in dict.fromkeys(chunks)}
    assert smol.encode_ordinary(ruslit_text) == [i for c in chunks for i in ref[c]]


def test_shared_cache_serves_every_encoder_of_its_tables() -> None:
    module = encode_module()
    tok = pud_tokenizer()
    tables = compiled_tables(tok.tables)
    shared = module.SharedCache(tables, cache_limit=1000)
    one, two = module.Encoder(tables, cache=shared), module.Encoder(tables, cache=shared)
    text = pud_text("es")
    expected = encode_ordinary_reference(tok.tables, tok.pretokenizer, text)
    assert _chunked(one, tok.pretokenizer, text) == expected
    filled = shared.cache_size
    assert 0 < filled <= 1000 + 63  # the limit is split evenly over 64 shards
    assert _chunked(two, tok.pretokenizer, text) == expected
    assert one.cache_size == two.cache_size == 0  # their private caches stay unused
    with pytest.raises(ValueError, match="same tables"):
        module.Encoder(compiled_tables(tok.tables), cache=shared)


# --- one long text over several threads (cut at the scanner's safe cuts) ------------------
_PARALLEL_VOCABS = ("o200k_base", "cl100k_base", "smollm2-135m", "gpt2-hf")


@cache
def _parallel_tokenizer(name: str) -> Tokenizer:
    from tokembed.tokenizer.formats import load_tokenizer

    encode_module()
    if name.endswith("_base"):
        return load_tokenizer(data_path("tokenizers", f"{name}.tiktoken"))
    return load_tokenizer(data_path("tokenizers", name))


def _one_and_parallel(name: str, text: str, *, threads: int, min_bytes: int) -> tuple[Any, Any]:
    """(ids on one thread, ids with ``threads`` parts), and the parts' count checked >= 2."""
    tok = _parallel_tokenizer(name)
    fast = tok._engine
    assert fast.scanner is not None
    text = tok._check(text)
    fast.threads, fast.parallel_min_bytes = 1, min_bytes
    assert fast.parts(text) is None
    one = fast.encode(text)
    fast.threads = threads
    try:
        return one, (fast.encode(text), fast.parts(text))
    finally:
        fast.threads, fast.parallel_min_bytes = None, PARALLEL_MIN_BYTES


def _assert_tiles(parts: list[tuple[int, int]], text: str) -> None:
    """The parts are character ranges that tile the text."""
    assert parts[0][0] == 0
    assert parts[-1][1] == len(text)
    for (_, end), (start, _) in pairwise(parts):
        assert end == start
    assert all(a < b for a, b in parts)


@pytest.mark.parametrize("name", _PARALLEL_VOCABS)
def test_parallel_encode_equals_one_thread_on_all_pud(name: str) -> None:
    text = "\n".join(pud_text(lang) for lang in PUD_LANGS)
    assert len(text.encode()) > PARALLEL_MIN_BYTES  # the default threshold applies
    for threads in (2, 4):
        one, (many, parts) = _one_and_parallel(
            name, text, threads=threads, min_bytes=PARALLEL_MIN_BYTES
        )
        assert len(parts) == threads * PARTS_PER_THREAD
        _assert_tiles(parts, text)
        assert many == one
    fast = _parallel_tokenizer(name)._engine
    assert fast.encode_numpy(text).tolist() == one


@pytest.mark.parametrize("name", ["o200k_base", "smollm2-135m"])
def test_parallel_encode_equals_one_thread_on_ruslit_slice(name: str) -> None:
    import gzip

    with gzip.open(data_path("ruslit", "ruslit40.txt.gz"), "rt", encoding="utf-8") as f:
        text = f.read(2_300_000)  # mostly Cyrillic: ~4.1 MB of UTF-8
    assert len(text.encode()) > 4_000_000
    one, (many, parts) = _one_and_parallel(name, text, threads=4, min_bytes=PARALLEL_MIN_BYTES)
    assert len(parts) == 4 * PARTS_PER_THREAD
    assert many == one


_CUT_ALPHABET = _ALPHABET | st.sampled_from(["/", "\n\n", "x\ny", " \n", "\r\n", "a\n/b", "Я\n"])


@pytest.mark.parametrize("name", _PARALLEL_VOCABS)
@settings(max_examples=60, deadline=None)
@given(st.lists(_CUT_ALPHABET, max_size=120), st.integers(2, 4))
def test_parallel_encode_equals_one_thread_on_hypothesis_texts(
    name: str, pieces: list[str], threads: int
) -> None:
    text = "".join(pieces)
    one, (many, parts) = _one_and_parallel(name, text, threads=threads, min_bytes=1)
    assert many == one
    if parts is not None:
        _assert_tiles(parts, text)
        assert 2 <= len(parts) <= threads * PARTS_PER_THREAD


def test_parallel_encode_keeps_one_part_without_a_safe_cut() -> None:
    text = "word " * 100_000  # 500 kB on one line: no line feed to cut after
    one, (many, parts) = _one_and_parallel("o200k_base", text, threads=4, min_bytes=1)
    assert parts is None
    assert many == one


def test_parallel_encode_reports_a_lone_surrogate_like_one_thread() -> None:
    text = pud_text("en") + "\ud800" + pud_text("ru")
    tok = _parallel_tokenizer("smollm2-135m")
    fast = tok._engine
    errors = []
    for threads in (1, 4):
        fast.threads, fast.parallel_min_bytes = threads, 1
        with pytest.raises(TokenizerError) as info:
            tok.encode_ordinary(text)
        errors.append((info.value.code, str(info.value)))
    fast.threads, fast.parallel_min_bytes = None, PARALLEL_MIN_BYTES
    assert errors[0] == errors[1]
    assert errors[0][0] == "LONE_SURROGATE"


def _check_error(tok: Tokenizer, text: str) -> tuple[str, str]:
    with pytest.raises(TokenizerError) as info:
        tok._check(text)
    return info.value.code, str(info.value)


@pytest.mark.parametrize("threads", [1, 4])
@pytest.mark.parametrize(
    "bad", ["\x04", chr(0xD800), chr(0xDC4D)], ids=["missing-byte", "lone-high", "lone-low"]
)
def test_unchecked_text_fails_as_the_check_does_on_every_entry_point(
    bad: str, threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled encoder sees a text before the check (it refuses on its own what the
    check finds), so every entry point, one long call in parts or a threaded batch, must
    still raise the check's error, naming the same offset; SmolLM2 has no id for 0x04."""
    tok = _parallel_tokenizer("smollm2-135m")
    assert tok.implementation == "compiled"
    assert tok._engine.refusals
    monkeypatch.setattr("tokembed.tokenizer._batch._THREADED_MIN_CHARS", 0)
    fast = tok._engine
    fast.threads, fast.parallel_min_bytes = threads, 1
    try:
        text = pud_text("en") + bad + pud_text("ru")
        expected = _check_error(tok, text)
        assert expected[0] == ("UNREPRESENTABLE_BYTE" if bad == "\x04" else "LONE_SURROGATE")
        lines = ["fine", "", text, "fine too"]
        calls = [
            lambda: tok.encode_ordinary(text),
            lambda: tok.encode(text),
            lambda: tok.encode_to_numpy(text),
            lambda: tok.encode_ordinary_batch_to_numpy(lines, num_threads=threads),
            lambda: tok.encode_batch(lines, workers=threads, progress=False),
        ]
        for call in calls:
            with pytest.raises(TokenizerError) as info:
                call()
            assert (info.value.code, str(info.value)) == expected
    finally:
        fast.threads, fast.parallel_min_bytes = None, PARALLEL_MIN_BYTES


@pytest.mark.parametrize("threads", [1, 4])
def test_surrogate_pairs_encode_as_their_characters_on_every_entry_point(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pair is refused by the compiled encoder's UTF-8 conversion, joined by the check,
    and encoded again: the ids are those of the character it spells."""
    tok = _parallel_tokenizer("o200k_base")
    monkeypatch.setattr("tokembed.tokenizer._batch._THREADED_MIN_CHARS", 0)
    fast = tok._engine
    fast.threads, fast.parallel_min_bytes = threads, 1
    try:
        paired = pud_text("en") + "\ud83d\udc4d" + pud_text("zh")
        joined = pud_text("en") + "\U0001f44d" + pud_text("zh")
        want = tok.encode_ordinary_reference(joined)
        assert tok.encode_ordinary(paired) == want
        assert tok.encode_to_numpy(paired).tolist() == want
        ids, offsets = tok.encode_ordinary_batch_to_numpy(["a", paired], num_threads=threads)
        assert ids[offsets[1] :].tolist() == want
        assert tok.encode_batch(["a", paired], workers=threads, progress=False)[1] == want
    finally:
        fast.threads, fast.parallel_min_bytes = None, PARALLEL_MIN_BYTES


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "2"])
def test_threads_option_rejects_non_positive_integers(bad: Any) -> None:
    tok = pud_tokenizer()
    with pytest.raises(UsageError) as info:
        set_encode_threads(bad)
    assert info.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as info:
        CompiledEncoder(compiled_tables(tok.tables), tok.pretokenizer, threads=bad)
    assert info.value.code == "INVALID_ARGUMENT"


def test_set_encode_threads_one_keeps_every_call_on_one_thread() -> None:
    fast = _parallel_tokenizer("o200k_base")._engine
    text = "\n".join(pud_text(lang) for lang in PUD_LANGS)
    try:
        set_encode_threads(1)
        assert fast.parts(text) is None
        set_encode_threads(3)
        assert len(fast.parts(text) or []) == 3 * PARTS_PER_THREAD
    finally:
        set_encode_threads(None)


def test_parallel_encode_works_in_a_forked_child_after_the_parent_used_threads() -> None:
    import multiprocessing

    text = "\n".join(pud_text(lang) for lang in PUD_LANGS)
    tok = _parallel_tokenizer("gpt2-hf")
    one, (_, parts) = _one_and_parallel("gpt2-hf", text, threads=2, min_bytes=1)
    assert parts is not None  # the parent's pool now has a thread
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply_async(_encode_with_threads, (tok, text)).get(timeout=120) == one


def _encode_with_threads(tok: Tokenizer, text: str) -> list[int]:
    fast = tok._engine
    fast.threads = 2
    assert fast.parts(text) is not None
    return fast.encode(text)


# A fresh process: qwen's rank file loaded, then the first encode makes the front cache.
_HUGE_PAGES_PROBE = """
import sys
from tokembed.tokenizer.compiled import set_encode_threads
from tokembed.tokenizer.formats import load_tokenizer

def huge_kib():
    with open("/proc/self/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))

tok = load_tokenizer(sys.argv[1])
set_encode_threads(1)
before = huge_kib()
tok.encode_ordinary("hello world")
print(huge_kib() - before)
"""


def test_a_new_encoders_front_cache_is_on_huge_pages() -> None:
    """A process's first encoder puts its 4 MiB front cache on huge pages where the kernel
    grants them on request, although loading a rank file leaves freed blocks whose pages malloc
    hands back already touched (on small pages each chunk's random line risks a TLB miss)."""
    encode_module()
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    if not (thp / "enabled").is_file() or not Path("/proc/self/smaps_rollup").is_file():
        pytest.skip("this kernel reports no transparent huge pages")
    modes = [(thp / name).read_text() for name in ("enabled", "defrag") if (thp / name).is_file()]
    if any("[never]" in mode for mode in modes):
        pytest.skip("transparent huge pages are not granted on request on this machine")
    path = data_path("tokenizers", "qwen.tiktoken")
    out = subprocess.run(
        [sys.executable, "-c", _HUGE_PAGES_PROBE, str(path)],
        capture_output=True,
        check=True,
        text=True,
    )
    # KiB: at least one of the front's two 2 MiB pages (small pages add none)
    assert int(out.stdout) >= 2048


def test_a_piece_no_merge_makes_is_one_id_where_a_chunk_spells_it_as_in_tiktoken(
    tmp_path: Path,
) -> None:
    """A piece appended to a rank file without a merge (a vocabulary extension does that):
    tiktoken gives a chunk that is exactly the piece its id, and so do the compiled rank
    tables, the compiled merge tables (explicit merges, ``ignore_merges``) and the reference."""
    import base64

    import tiktoken

    from tokembed.tokenizer.formats import load_tokenizer
    from tokembed.tokenizer.formats.ranks import lowest_rank_split, parse_ranks

    piece, rank = b" helloworldtokembed", 50257
    data = data_path("tokenizers", "r50k_base.tiktoken").read_bytes()
    assert lowest_rank_split(parse_ranks(data), piece) is None  # no merge makes it
    data += base64.b64encode(piece) + f" {rank}\n".encode()
    path = tmp_path / "r50k_base.tiktoken"
    path.write_bytes(data)
    tok = load_tokenizer(path, encoding="r50k_base")
    assert tok.tables.ignore_merges
    peer = tiktoken.Encoding(
        "r50k_plus",
        pat_str=tok.pretokenizer.stages[0],
        mergeable_ranks=parse_ranks(data),
        special_tokens={},
    )
    text = pud_text("en")[:5000] + " helloworldtokembed helloworldtokembeds helloworldtokembed"
    expected = peer.encode_ordinary(text)
    assert expected.count(rank) == 2
    by_rank = _encoder(encode_module().Tables.from_ranks(data))
    assert _chunked(by_rank, tok.pretokenizer, text) == expected
    by_merge = _encoder(compiled_tables(tok.tables))
    assert _chunked(by_merge, tok.pretokenizer, text) == expected
    assert tok.encode_ordinary(text) == expected
    assert tok.encode_ordinary_reference(text) == expected
    assert tok.implementation == "compiled"


def test_compiled_tables_say_whether_they_follow_the_whole_piece_rule() -> None:
    module = encode_module()
    assert module.Tables.from_ranks(b"YQ== 0\nYg== 1\nYWI= 2\n").ignore_merges
    plain = BPETables.byte_level(merges=[(97, 98)])
    assert not compiled_tables(plain).ignore_merges
    whole = BPETables(pieces=plain.pieces, merges=plain.merges, ignore_merges=True)
    assert compiled_tables(whole).ignore_merges
    twice = [(1, b"ab"), (2, b"ab")]
    with pytest.raises(ValueError, match="share their bytes"):
        module.Tables.from_merges(plain.byte_ids, plain.merges, pieces=twice, ignore_merges=True)
    # without the rule only the piece the merges rebuild (256) is looked up: no conflict
    enc = _encoder(module.Tables.from_merges(plain.byte_ids, plain.merges, pieces=twice))
    assert enc.encode_chunks("ab", ["ab"]) == [256]
    with pytest.raises(TypeError):
        module.Tables.from_merges(plain.byte_ids, plain.merges, pieces=[(1, "ab")])


@st.composite
def _crafted_ranks(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A rank file over four letters whose longer pieces take shuffled ranks (a piece may rank
    below its own parts), and a text of up to 150 letters: one chunk for the short, list and
    heap paths of rank mode (up to 32, up to 64, longer)."""
    longer = draw(
        st.lists(
            st.binary(min_size=2, max_size=6).map(lambda b: bytes(97 + x % 4 for x in b)),
            max_size=24,
            unique=True,
        )
    )
    text = bytes(draw(st.lists(st.sampled_from(b"abcd"), min_size=1, max_size=150)))
    if longer and draw(st.booleans()):
        text = draw(st.sampled_from(longer))  # a chunk that is one piece: the whole-piece rule
    return rank_file_of(*longer), text


@settings(max_examples=300, deadline=None)
@given(_crafted_ranks())
# joining "bc" makes "abc" possible on its left: the left pair's rank must be asked again
@example((rank_file_of(b"bc", b"abc"), b"abcd"))
@example((rank_file_of(b"ab", b"abc", b"cd"), b"abcdabcd" * 5))
def test_rank_mode_equals_tiktoken_on_crafted_rank_files(case: tuple[bytes, bytes]) -> None:
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    data, text = case
    peer = tiktoken.Encoding(
        "crafted", pat_str=r"[^\n]+", mergeable_ranks=parse_ranks(data), special_tokens={}
    )
    chunk = text.decode()
    by_rank = _encoder(encode_module().Tables.from_ranks(data))
    assert by_rank.encode_chunks(chunk, [chunk]) == peer.encode_ordinary(chunk)


@pytest.mark.parametrize("length", range(9, 28))
def test_a_chunk_one_byte_off_a_piece_is_not_that_piece(length: int) -> None:
    """A piece's slot holds its first 24 bytes as words (the last one overlapping the one
    before), the blob the rest: at every length either side of 16 and 24, each piece that
    differs from a word in one byte is found whole, and the word itself (no piece) comes out
    as its bytes. (The next test makes the lookups meet the wrong piece's slot.)"""
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    word = bytes(97 + (7 * i) % 26 for i in range(length))
    near = [word[:k] + b"~" + word[k + 1 :] for k in range(length)]
    data = rank_file_of(*near)
    peer = tiktoken.Encoding(
        "near", pat_str=r"[^\n]+", mergeable_ranks=parse_ranks(data), special_tokens={}
    )
    encoder = _encoder(encode_module().Tables.from_ranks(data))
    for chunk in [word.decode(), *(piece.decode() for piece in near)]:
        got = encoder.encode_chunks(chunk, [chunk])
        assert got == peer.encode_ordinary(chunk), chunk
        assert len(got) == (length if chunk == word.decode() else 1)


@pytest.mark.parametrize(
    ("length", "spots"), [(14, (9, 12)), (20, (17, 19)), (24, (18, 22)), (40, (30, 35))]
)
def test_pieces_alike_but_for_their_last_bytes_are_never_mixed_up(
    length: int, spots: tuple[int, int]
) -> None:
    """1,600 pieces of one length that share their first 8 bytes and differ only at two
    positions past them, and 1,600 chunks that differ from every one of them there: a table of
    this size puts some chunks' lookups onto a slot of such a piece (a Bloom false hit, then a
    probe run through it), where only the words past the head, or the blob past 24 bytes, can
    tell them apart. Every chunk must come out as its bytes, every piece as itself."""
    import tiktoken

    from tokembed.tokenizer.formats.ranks import parse_ranks

    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
    word = bytearray(97 + (7 * i) % 26 for i in range(length))

    def spelled(a: int, b: int, at: tuple[int, int]) -> bytes:
        out = bytearray(word)
        out[at[0]], out[at[1]] = letters[a], letters[b]
        return bytes(out)

    pieces = [spelled(a, b, spots) for a in range(40) for b in range(40)]
    pieces = [p for p in pieces if p != bytes(word)]
    moved = (spots[0] - 1, spots[1])  # still past the first 8 bytes
    chunks = {spelled(a, b, moved) for a in range(40) for b in range(40)} - set(pieces)
    data = rank_file_of(*pieces)
    peer = tiktoken.Encoding(
        "alike", pat_str=r"[^\n]+", mergeable_ranks=parse_ranks(data), special_tokens={}
    )
    encoder = _encoder(encode_module().Tables.from_ranks(data), cache_limit=0)
    for raw in sorted(chunks):
        chunk = raw.decode()
        assert encoder.encode_chunks(chunk, [chunk]) == peer.encode_ordinary(chunk), chunk
    for raw in pieces[::37]:
        chunk = raw.decode()
        assert (
            encoder.encode_chunks(chunk, [chunk])
            == peer.encode_ordinary(chunk)
            == [256 + pieces.index(raw)]
        )
