"""A str's UTF-8 written a window at a time (``_native/utf8_write.h``, ``tk_encode_ucs``).

The writer against ``str.encode`` on hypothesis texts of every storage kind, at window sizes
down to one character; the cuts found in the code points against the scanner's rule on the
whole UTF-8; the windowed encode against the same text encoded from Python's whole UTF-8 (and
tiktoken) on PUD and RusLit-40 for four rank files; windows with no cut, errors past the first
window.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pytest
from _core_data import encode_module, rank_peer, rank_vocab, real_text
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tokembed.errors import TokenizerError
from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer
from tokembed.tokenizer.compiled import CompiledEncoder

WINDOW = 256 << 10  # the encoder's window (encode_core.c, TK_WINDOW)

# Runs of one character: ASCII, Latin-1, two-byte (Cyrillic, Arabic, the last one), three-byte
# (the first one, CJK, Thai, Hangul, the last before the surrogates, private use, the last),
# four-byte. Runs fill whole blocks of eight of one width, and cross them.
_RUN_CHARS = "a \n\x7f\x80é\xffяب\u07ff\u0800中ก한\ud7ff\ue000\uffff\U0001f600\U0010ffff"


def _scanned(tok: Tokenizer) -> CompiledEncoder:
    """The tokenizer's compiled engine, whose scanner splits in C."""
    engine = tok._engine
    assert isinstance(engine, CompiledEncoder)
    assert engine.scanner is not None
    return engine


def _runs() -> st.SearchStrategy[str]:
    run = st.tuples(st.sampled_from(_RUN_CHARS), st.integers(1, 20)).map(lambda r: r[0] * r[1])
    return st.lists(run, max_size=30).map("".join)


def _any_text() -> st.SearchStrategy[str]:
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=80)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(_runs(), _any_text()), cap=st.integers(4, 70))
def test_windows_write_what_str_encode_does(text: str, cap: int) -> None:
    windows = encode_module().utf8_windows
    assert windows(text, cap) == text.encode()
    latin = text.encode("latin-1", "ignore").decode("latin-1")  # a str of one byte each
    assert windows(latin, cap) == latin.encode()


@settings(max_examples=200, deadline=None)
@given(
    text=_runs(),
    at=st.integers(0, 10**6),
    surrogate=st.sampled_from("\ud800\udbff\udc00\udfff"),
    wide=st.booleans(),
)
def test_a_surrogate_is_named_by_its_index(text: str, at: int, surrogate: str, wide: bool) -> None:
    """A surrogate has no UTF-8: the writer stops at it, in a str of two bytes a character
    and of four (an astral character before it), whichever block it falls in."""
    text = ("\U0001f600" if wide else "") + text
    at = at % (len(text) + 1)
    with pytest.raises(ValueError, match=f"surrogate at {at}$"):
        encode_module().utf8_windows(text[:at] + surrogate + text[at:], 64)


_CUT_PIECES = [*_RUN_CHARS, "\n", "\n\n", "x\ny", " \n", "  a", "/", "Я\n", "中\nb"]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(_CUT_PIECES)).map("".join), dialect=st.integers(0, 1))
@example(text="я\nя\nя\nя", dialect=0)  # cuts at 2, 4 and 6: from the middle (3) on, 4
def test_cuts_of_code_points_are_the_cuts_of_the_utf8(text: str, dialect: int) -> None:
    """``safe_cuts`` finds its cut in the code points (a window of UTF-8 at a time) where the
    scanner's own rule finds it in the whole UTF-8: from the middle character on, the first."""
    from tokembed.tokenizer._native import load

    count = load("_count")
    assert count is not None
    ends, size = encode_module().safe_cuts(text, dialect, 2)
    data = text.encode()
    assert (size, ends[-1]) == (len(data), len(text))
    middle = max(len(text) // 2, 1)
    if middle < len(text):
        expected = count.safe_cut(data, dialect, len(text[:middle].encode()))
        got = len(text[: ends[0]].encode()) if len(ends) == 2 else len(data)
        assert got == expected
    else:
        assert ends == [len(text)]


@pytest.mark.parametrize("name", ["qwen", "cl100k_base", "o200k_base", "r50k_base"])
def test_windowed_encode_equals_whole_utf8(name: str) -> None:
    """PUD's 13 languages and 300,000 characters of RusLit-40 (2.6 MB of UTF-8, ten windows
    and more), from the code points and from Python's whole UTF-8 (a part that is the whole
    text), equal each other and tiktoken."""
    engine = _scanned(rank_vocab(name)[2])
    assert engine.scanner is not None
    enc = engine.encoder()
    text = real_text().encode().decode()  # a new str, its UTF-8 not yet made
    windowed = enc.encode_text(text, *engine.scanner)
    assert enc.window_bytes == WINDOW
    whole = enc.encode_text(text, *engine.scanner, start=0, end=len(text.encode()))
    assert windowed == whole == rank_peer(name).encode_ordinary(text)


def test_a_window_without_a_cut_grows() -> None:
    """Text with no safe cut (one line of CJK, no spaces) fills a window that doubles until the
    text ends; one grown past 4 MiB is given back after the call."""
    engine = _scanned(rank_vocab("cl100k_base")[2])
    assert engine.scanner is not None
    peer = rank_peer("cl100k_base")
    for chars, kept in ((200_000, 1 << 20), (2_000_000, 0)):  # 0.6 MB, 6 MB of UTF-8
        enc = encode_module().Encoder(engine.encoder().tables)  # a window never grown
        text = "中文" * (chars // 2) + " end"
        assert enc.encode_text(text, *engine.scanner) == peer.encode_ordinary(text)
        assert enc.window_bytes == kept


def _missing_d0() -> tuple[Tokenizer, Any]:
    tables = BPETables(pieces={i: bytes([i]) for i in range(256) if i != 0xD0})
    tok = Tokenizer(pretokenizer=Pretokenizer.preset("o200k"), tables=tables)
    return tok, _scanned(tok)


def test_errors_past_the_first_window() -> None:
    """A byte without an id is named by its offset in the whole text's UTF-8, a lone surrogate
    by its character; a surrogate pair past the first window still encodes as its character."""
    module = encode_module()
    tok, engine = _missing_d0()
    assert engine.scanner is not None
    head = "é x y\n" * 60_000  # 420 KB: past the first window
    at = len(head.encode())
    with pytest.raises(module.MissingByte) as raw:
        engine.encoder().encode_text(f"{head}Дом", *engine.scanner)
    assert raw.value.args == (at,)
    with pytest.raises(TokenizerError) as bad:
        tok.encode_ordinary(f"{head}Дом")
    assert bad.value.code == "UNREPRESENTABLE_BYTE"
    with pytest.raises(TokenizerError) as lone:
        tok.encode_ordinary(f"{head}a\udc80b")
    assert lone.value.code == "LONE_SURROGATE"
    assert str(len(head) + 1) in str(lone.value)
    pair = f"{head}a \ud83d\udc4d"
    assert tok.encode_ordinary(pair) == tok.encode_ordinary(f"{head}a \U0001f44d")


def _keep_utf8(text: str) -> str:
    """``text``, its UTF-8 made by Python and kept beside it (``encode_chunks`` asks for it)."""
    _scanned(rank_vocab("cl100k_base")[2]).encoder().encode_chunks(text, [text])
    return text


def test_a_batch_reads_kept_utf8_in_place_and_writes_the_rest_from_code_points() -> None:
    """``encode_texts`` takes each str as Python holds it: ASCII and a str whose UTF-8 Python
    already made are read as UTF-8, any other from its code points through the window (one
    longer than the window, one with no cut that grows it past 4 MiB, given back after the
    call). Every kind of str gives the ids it gives alone and tiktoken's, as lists and flat."""
    module = encode_module()
    engine = _scanned(rank_vocab("cl100k_base")[2])
    assert engine.scanner is not None
    peer = rank_peer("cl100k_base")
    enc = module.Encoder(engine.encoder().tables)  # a window never grown
    kept = _keep_utf8("Дом, который построил Джек")
    texts = [
        "plain ASCII, one byte a character",
        "café crème, naïve: one byte a character, not ASCII",
        kept,
        "Ещё один дом — два байта",
        "中文的句子，三个字节",
        "wide \U0001f44d and \U0001f600 four bytes",
        "",
        real_text()[:300_000].encode().decode(),  # a new str, longer than the window
        "中文" * 1_000_000 + " end",  # no cut: 6 MB of UTF-8 in one window
    ]
    # tiktoken makes and keeps the UTF-8 of a str it is given: it gets copies
    alone = [peer.encode_ordinary(t.encode().decode()) for t in texts]
    assert enc.encode_texts(texts, *engine.scanner) == alone
    assert enc.window_bytes == 0
    flat, ends = enc.encode_texts(texts[:-1], *engine.scanner, as_bytes=True)
    assert list(memoryview(flat).cast("I")) == [i for ids in alone[:-1] for i in ids]
    assert list(memoryview(ends).cast("Q")) == list(accumulate(len(ids) for ids in alone[:-1]))
    assert enc.window_bytes == WINDOW
    # ASCII and kept UTF-8 are read in place: a new encoder never makes its window for them
    in_place = module.Encoder(engine.encoder().tables)
    assert in_place.encode_texts([texts[0], kept], *engine.scanner) == [alone[0], alone[2]]
    assert in_place.window_bytes == 0


def test_a_batch_names_a_missing_byte_and_a_surrogate_in_the_text_that_holds_them() -> None:
    """A byte without an id in a text read from its code points is named by its offset in that
    text's UTF-8, as in the same text read as UTF-8; a surrogate raises Python's own error."""
    module = encode_module()
    _, engine = _missing_d0()
    assert engine.scanner is not None
    enc = engine.encoder()
    for text in ("é x Дом", "x Дом 中", "wide \U0001f44d Дом"):
        from_code_points = text.encode().decode()
        as_utf8 = _keep_utf8(text.encode().decode())
        offsets = []
        for same in (from_code_points, as_utf8):
            with pytest.raises(module.MissingByte) as raw:
                enc.encode_texts(["fine", same, "never reached"], *engine.scanner)
            offsets.append(raw.value.args)
        assert offsets == [(text.encode().index(0xD0),)] * 2
    with pytest.raises(UnicodeEncodeError):
        enc.encode_texts(["fine", "x \udc80 y"], *engine.scanner)
