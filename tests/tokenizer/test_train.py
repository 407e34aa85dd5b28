"""Training: the fast trainer gives exactly the reference's merges on the six-merge toy corpus, PUD and tie-heavy corpora."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PUD_LANGS, pud_text
from tokembed.errors import TokenizerError, UsageError
from tokembed.tokenizer import Pretokenizer, TrainConfig, train, train_reference

TOY = "низко низко летали ласточки, ласточки летали низко"
# The six toy merges: и (D0 B8), space + first byte of a Cyrillic letter, к, о, " л" and " лD0".
TOY_MERGES = [(208, 184), (32, 208), (208, 186), (208, 190), (257, 187), (260, 208)]
TEACHING = Pretokenizer.preset("teaching")


def _fast(
    text: str, merges: int, pattern: str = "teaching", workers: int = 1
) -> list[tuple[int, int]]:
    tok = train(
        [text], config=TrainConfig(merges=merges, pattern=pattern, workers=workers, progress=False)
    )
    return [(left, right) for left, right, _ in tok.tables.merges]


def test_toy_corpus_six_merges_pinned() -> None:
    assert sum(len(c.encode()) for c in TEACHING.split(TOY)) == 93
    assert train_reference(TOY, merges=6, pretokenizer=TEACHING) == TOY_MERGES
    tok = train([TOY], config=TrainConfig(merges=6, progress=False))
    assert [m[:2] for m in tok.tables.merges] == TOY_MERGES
    assert [m[2] for m in tok.tables.merges] == list(range(256, 262))
    assert tok.tables.pieces[256].decode() == "и"
    assert len(tok.encode_ordinary(TOY)) == len(tok.encode_ordinary_reference(TOY)) == 62


def test_ababab_one_merge_halves_the_sequence() -> None:
    assert train_reference("ababab", merges=1, pretokenizer=TEACHING) == [(97, 98)]
    tok = train(["ababab"], config=TrainConfig(merges=1, progress=False))
    assert tok.encode_ordinary("ababab") == [256, 256, 256]


def test_stops_early_when_no_pair_is_left() -> None:
    assert train_reference("ab ab", merges=10, pretokenizer=TEACHING) == [(97, 98), (32, 256)]
    tok = train(["ab ab"], config=TrainConfig(merges=10, progress=False))
    assert tok.n_merges == 2
    assert tok.metadata["merges_learned"] == "2"


@pytest.fixture(scope="session")
def pud_reference() -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Reference merges on the first 150 sentences of every PUD language (reference is O(N·corpus))."""
    out = {}
    for lang in PUD_LANGS:
        text = "".join(pud_text(lang).splitlines(keepends=True)[:150])
        out[lang] = (text, train_reference(text, merges=120, pretokenizer=TEACHING))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lang", PUD_LANGS)
def test_fast_equals_reference_on_pud(lang: str, pud_reference: dict) -> None:
    text, ref = pud_reference[lang]
    for n in (1, 17, 60, 120):
        assert _fast(text, n) == ref[:n], n


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab \n", max_size=40), min_size=1, max_size=4),
    merges=st.integers(0, 25),
)
def test_fast_equals_reference_with_many_ties(texts: list[str], merges: int) -> None:
    """Over a 2-letter alphabet nearly every step is a tie: first encounter must decide."""
    text = "".join(texts)
    if not text:
        return
    assert _fast(text, merges) == train_reference(text, merges=merges, pretokenizer=TEACHING)


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="abc", min_size=1, max_size=60), merges=st.integers(0, 20))
def test_fast_equals_reference_user_regex(text: str, merges: int) -> None:
    """User regexes that leave gaps: the gaps are chunks too (isolated splitting)."""
    for pattern in ("b+", "ab|c"):
        pre = Pretokenizer.preset(pattern)
        assert _fast(text, merges, pattern=pattern) == train_reference(
            text, merges=merges, pretokenizer=pre
        )


def test_multi_text_chunks_never_join() -> None:
    # Across two texts "ab" + "ab" are separate chunks; joined they'd be one.
    tok = train(["a", "b"], config=TrainConfig(merges=5, progress=False))
    assert tok.n_merges == 0


def test_parallel_training_equals_sequential() -> None:
    texts = [pud_text("ru")[:40000], "  \n\n x" * 500, pud_text("ko")[:20000]]
    a = train(texts, config=TrainConfig(merges=300, workers=1, progress=False))
    b = train(texts, config=TrainConfig(merges=300, workers=2, progress=False))
    assert a.tables.merges == b.tables.merges


def test_specials_after_merges_explicit_and_alias() -> None:
    tok = train(
        [TOY],
        config=TrainConfig(
            merges=6, specials={"<|end|>": None, "<|pad|>": 1000, "<|eot|>": 1000}, progress=False
        ),
    )
    assert tok.special_tokens == {"<|end|>": 262, "<|pad|>": 1000, "<|eot|>": 1000}
    assert tok.aliases == {1000: ("<|pad|>", "<|eot|>")}
    assert tok.tables.id_range == 1001


def test_special_on_ordinary_id_conflicts() -> None:
    with pytest.raises(TokenizerError) as e:
        train([TOY], config=TrainConfig(merges=6, specials={"<|x|>": 100}, progress=False))
    assert e.value.code == "SPECIAL_TOKEN_CONFLICT"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"merges": -1},
        {"merges": 3, "workers": 0},
        {"merges": 3, "specials": {"x": -2}},
        {"merges": 1.5},
    ],
)
def test_config_validation(kwargs: dict) -> None:
    with pytest.raises(UsageError) as e:
        TrainConfig(**kwargs)
    assert e.value.code == "INVALID_ARGUMENT"


def test_bad_pattern_and_empty_corpus_and_surrogate() -> None:
    with pytest.raises(UsageError) as e:
        TrainConfig(merges=1, pattern="(")
    assert e.value.code == "INVALID_PATTERN"
    with pytest.raises(TokenizerError) as e2:
        train(["", ""], config=TrainConfig(merges=1, progress=False))
    assert e2.value.code == "EMPTY_CORPUS"
    with pytest.raises(TokenizerError) as e3:
        train(["ok \ud800"], config=TrainConfig(merges=1, progress=False))
    assert e3.value.code == "LONE_SURROGATE"
    with pytest.raises(UsageError) as e4:
        train_reference("x", merges=-1, pretokenizer=TEACHING)
    assert e4.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("a" * 5000, "teaching"),
        (" " * 5000 + "x", "cl100k"),
        ("ab" * 2500 + " " + "abc" * 900, "teaching"),
        ("1" * 4000, r"\p{N}+|\P{N}+"),
    ],
)
def test_long_chunks_equal_reference(text: str, pattern: str) -> None:
    """One chunk of thousands of bytes: rebuilt once per merge, not shifted per occurrence."""
    expected = train_reference(text, merges=40, pretokenizer=Pretokenizer.preset(pattern))
    assert _fast(text, 40, pattern) == expected


def test_whole_text_as_one_chunk_equals_reference() -> None:
    # A pattern that matches nothing leaves the whole text as one chunk (a gap).
    text = "".join(pud_text("ru").splitlines(keepends=True)[:20])
    expected = train_reference(text, merges=60, pretokenizer=Pretokenizer.preset("(?!)"))
    assert _fast(text, 60, "(?!)") == expected
