"""Metric arithmetic on exact toy encoders, and equality of counts with peer tokenizers on PUD."""

from __future__ import annotations

import pytest
from _measure_data import lecture_split, loaded, pud, ru_tokenizer, tokenizer_path
from hypothesis import given, settings
from hypothesis import strategies as st

from tokembed.errors import MeasureError, UsageError
from tokembed.measure.corpus import text_corpus
from tokembed.measure.metrics import WordDefinition, compare, measure, token_premium


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def test_byte_encoder_arithmetic() -> None:
    m = measure(_bytes, text_corpus("t", "ab cd\nПривет 12\n"), id_range=256)
    assert (m.bytes, m.chars, m.tokens) == (22, 16, 22)
    assert m.words == 4  # ab, cd, Привет, 12
    assert m.fertility == 22 / 4
    assert m.chars_per_token == 16 / 22
    assert m.bits_per_id == 8
    assert m.bits_per_byte == 8.0
    # sentences encoded one by one, no LF: "ab cd" (5) + "Привет 12" (15)
    assert (m.sentences, m.sentence_tokens) == (2, 20)


@pytest.mark.parametrize(
    ("id_range", "bits"), [(256, 8), (257, 9), (200_019, 18), (201_088, 18), (49_152, 16)]
)
def test_bits_per_id_is_ceil_log2_r(id_range: int, bits: int) -> None:
    m = measure(_bytes, text_corpus("t", "a\n"), id_range=id_range)
    assert m.bits_per_id == bits


def test_retention_depends_on_the_leading_space_policy() -> None:
    vocab = {" the": 1000, "cat": 1001}

    def encode(text: str) -> list[int]:
        return [vocab[text]] if text in vocab else _bytes(text)

    corpus = text_corpus("t", "the cat the\n")
    spaced = measure(encode, corpus, words=WordDefinition(leading_space="space"))
    bare = measure(encode, corpus, words=WordDefinition(leading_space="bare"))
    assert (spaced.distinct_words, spaced.single_token_words) == (2, 1)  # " the"
    assert (bare.distinct_words, bare.single_token_words) == (2, 1)  # "cat"
    assert spaced.retention == 0.5


def test_word_definition_that_matches_nothing() -> None:
    with pytest.raises(MeasureError) as e:
        measure(_bytes, text_corpus("t", "no digits here\n"), words=WordDefinition(pattern=r"\d+"))
    assert e.value.code == "EMPTY_WORD_DEFINITION"


def test_bad_word_options() -> None:
    with pytest.raises(UsageError) as e:
        WordDefinition(pattern="(")
    assert e.value.code == "INVALID_PATTERN"
    with pytest.raises(UsageError) as e:
        WordDefinition(leading_space="tab")  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT"


def test_empty_corpus_is_refused() -> None:
    with pytest.raises(MeasureError) as e:
        measure(_bytes, text_corpus("t", ""))
    assert e.value.code == "EMPTY_INPUT"


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1).filter(lambda t: any(c.isalpha() for c in t)))
def test_byte_encoder_gives_one_byte_per_token(text: str) -> None:
    text = text.encode("utf-8", "replace").decode("utf-8")  # drop lone surrogates
    m = measure(_bytes, text_corpus("t", text), words=WordDefinition(pattern=r"\w+"))
    assert m.bytes_per_token == 1.0
    assert m.tokens == len(text.encode("utf-8"))


def test_token_premium_on_the_lecture_eval_side() -> None:
    tok = ru_tokenizer()
    split = lecture_split()
    ms = {lang: measure(tok.encode_ordinary, split[lang].eval) for lang in ("ru", "en")}
    premium = token_premium(ms, reference="en")
    assert premium["en"] == 1.0
    # Per-sentence RU token count well below EN for the RU-trained vocabulary.
    assert premium["ru"] == ms["ru"].sentence_tokens / ms["en"].sentence_tokens
    assert premium["ru"] < 0.6
    # encoding sentences alone differs from the joined text (no LF, different chunks)
    assert ms["ru"].sentence_tokens != ms["ru"].tokens
    with pytest.raises(UsageError) as e:
        token_premium(ms, reference="de")
    assert e.value.code == "INVALID_ARGUMENT"


def test_premium_needs_parallel_measurements() -> None:
    a = measure(_bytes, text_corpus("a", "x\ny\n"))
    b = measure(_bytes, text_corpus("b", "x\n"))
    with pytest.raises(MeasureError) as e:
        token_premium({"a": a, "b": b}, reference="a")
    assert e.value.code == "UNALIGNED_PARALLEL_CORPUS"


def test_counts_equal_tiktoken_on_pud() -> None:
    import base64

    import tiktoken

    from tokembed.tokenizer import PATTERNS

    with open(tokenizer_path("cl100k_base.tiktoken"), "rb") as f:
        ranks = {
            base64.b64decode(p): int(r) for p, r in (line.split() for line in f if line.strip())
        }
    peer = tiktoken.Encoding(
        name="cl100k_peer", pat_str=PATTERNS["cl100k"], mergeable_ranks=ranks, special_tokens={}
    )
    ru = pud("ru", "en")["ru"]
    m = measure(loaded("cl100k_base.tiktoken").encode_ordinary, ru)
    assert m.tokens == len(peer.encode_ordinary(ru.text))
    assert m.sentence_tokens == sum(len(peer.encode_ordinary(s.text)) for s in ru.sentences)


def test_counts_equal_hf_tokenizers_on_pud() -> None:
    from tokenizers import Tokenizer as HFTokenizer

    peer = HFTokenizer.from_file(tokenizer_path("smollm2-135m/tokenizer.json"))
    ru = pud("ru", "en")["ru"]
    ours = loaded("smollm2-135m")
    m = measure(ours.encode_ordinary, ru)
    assert m.tokens == len(peer.encode(ru.text, add_special_tokens=False).ids)


def test_compare_orders_by_corpus_then_tokenizer() -> None:
    split = lecture_split()
    toks = {"ours": ru_tokenizer(), "gpt2": loaded("gpt2-hf")}
    corpora = {"ru": split["ru"].eval, "en": split["en"].eval}
    ms = compare(toks, corpora)
    assert [(m.corpus, m.tokenizer) for m in ms] == [
        ("ru", "ours"),
        ("ru", "gpt2"),
        ("en", "ours"),
        ("en", "gpt2"),
    ]
    assert ms[1].id_range == 50_257
    assert ms[0].bytes == 33_654
    assert ms[2].bytes == 18_168


@pytest.mark.parametrize("leading_space", ["space", "bare"])
def test_retention_piece_lookup_equals_encoding_every_word(leading_space: str) -> None:
    # single_token_ids(pieces=...) looks the vocabulary's pieces up among the words
    # instead of encoding each word; both must find the same one-token words.
    from tokembed.measure.metrics import single_token_ids

    tok = ru_tokenizer()
    words = WordDefinition(leading_space=leading_space)  # type: ignore[arg-type]
    distinct = set(words.words(pud("ru")["ru"].text))
    pieces = frozenset(tok.tables.pieces.values())
    slow = single_token_ids(tok.encode_ordinary, distinct, words)
    fast = single_token_ids(tok.encode_ordinary, distinct, words, pieces=pieces)
    assert sorted(fast) == sorted(slow)
    assert len(slow) > 50  # 96 bare, more with a space (PUD ru, 1,024 merges)


def test_each_file_of_a_plain_text_corpus_is_encoded_on_its_own() -> None:
    from tokembed.measure.corpus import documents_corpus

    def pairs(text: str) -> list[int]:  # one token per two bytes: joins across a boundary
        data = text.encode()
        return list(range((len(data) + 1) // 2))

    corpus = documents_corpus("c", [("a.txt", "abc"), ("b.txt", "de")])
    m = measure(pairs, corpus, words=WordDefinition(pattern=r"\w+"))
    assert m.tokens == 2 + 1  # not 3 ("abcde" as one text)
    assert m.bytes == 5
