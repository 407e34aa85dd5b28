"""Document-level partitions: PUD's teaching split reproduced exactly, file holdout, rules by name."""

from __future__ import annotations

import hashlib

import pytest
from _measure_data import lecture_split, pud

from tokembed.errors import MeasureError
from tokembed.measure.corpus import documents_corpus, text_corpus
from tokembed.measure.partition import ALIASES, PartitionRule, partition, partition_parallel


def test_lecture_partition_golden_numbers() -> None:
    split = lecture_split()
    ru_train, ru_eval = split["ru"].train.record(), split["ru"].eval.record()
    en_eval = split["en"].eval.record()
    assert (ru_train.sentences, ru_train.documents, ru_train.bytes) == (833, 331, 180_112)
    assert (ru_eval.sentences, ru_eval.documents, ru_eval.bytes) == (167, 66, 33_654)
    assert (en_eval.sentences, en_eval.documents, en_eval.bytes) == (167, 66, 18_168)
    assert ru_eval.partition == "sha256-mod5:eval"


def test_lecture_is_the_named_hash_rule() -> None:
    rule = PartitionRule.parse("lecture")
    assert rule == PartitionRule.parse("sha256-mod5")
    assert rule.name == "sha256-mod5"


def test_documents_and_sentence_pairs_stay_together_across_languages() -> None:
    split = lecture_split()
    for lang in ("ru", "en"):
        train_docs = set(split[lang].train.documents)
        assert not train_docs & set(split[lang].eval.documents)
    assert split["ru"].eval.sentence_ids == split["en"].eval.sentence_ids
    assert split["ru"].train.sentence_ids == split["en"].train.sentence_ids


def test_partition_is_deterministic_and_matches_single_corpus_split() -> None:
    ru = pud("ru", "en")["ru"]
    again = partition(ru, rule="lecture")
    assert again.eval.text == lecture_split()["ru"].eval.text


def test_every_k_rule_counts() -> None:
    p = partition(pud("ru", "en")["ru"], rule="every6")
    assert len(p.eval.documents) == 66  # documents 5, 11, ..., 395 of 397
    assert p.eval.documents[0] == pud("ru", "en")["ru"].documents[5]


@pytest.mark.parametrize(
    "spec",
    ["random", "sha256-mod1", "every", "every0", "mod5", "holdout1", "holdout-0.1", "holdoutx"],
)
def test_unknown_rules(spec: str) -> None:
    with pytest.raises(MeasureError) as e:
        PartitionRule.parse(spec)
    assert e.value.code == "INVALID_PARTITION"
    assert "sha256-mod<K>" in e.value.fix
    assert not any(alias in e.value.fix for alias in ALIASES)  # aliases are not advertised


def test_a_single_document_cannot_be_partitioned() -> None:
    with pytest.raises(MeasureError) as e:
        partition(text_corpus("one", "only one document\n"), rule="every2")
    assert e.value.code == "INVALID_PARTITION"


def test_parallel_partition_of_nothing_is_empty() -> None:
    assert partition_parallel({}, rule="lecture") == {}


def test_simple_every_k_rules_do_not_reproduce_the_lecture_split() -> None:
    # Part of the systematic search recorded in partition.py: only sha256-mod5 matches.
    ru = pud("ru", "en")["ru"]
    target = (833, 331, 180_112)
    for k in range(2, 12):
        train = partition(ru, rule=f"every{k}").train.record()
        assert (train.sentences, train.documents, train.bytes) != target
    for k in (2, 3, 4, 6, 7):
        train = partition(ru, rule=f"sha256-mod{k}").train.record()
        assert (train.sentences, train.documents, train.bytes) != target


def _files(n: int) -> list[tuple[str, str]]:
    return [(f"f{i}.txt", f"text {i}\n") for i in range(n)]


def test_holdout_keeps_whole_files_out_deterministically_and_order_free() -> None:
    corpus = documents_corpus("c", _files(50))
    p = partition(corpus, rule="holdout0.1")
    assert p.rule == "holdout0.1"
    assert (len(p.train.documents), len(p.eval.documents)) == (45, 5)
    assert set(p.train.documents) | set(p.eval.documents) == set(corpus.documents)
    assert p.eval.partition == "holdout0.1:eval"
    # the choice depends on the file names, not on their order
    reverse = partition(documents_corpus("c", _files(50)[::-1]), rule="holdout0.1")
    assert set(reverse.eval.documents) == set(p.eval.documents)
    # the held-out files are the five with the smallest SHA-256 of their names
    by_hash = sorted(corpus.documents, key=lambda d: hashlib.sha256(d.encode()).hexdigest())
    assert set(p.eval.documents) == set(by_hash[:5])


def test_holdout_edges() -> None:
    one = partition(documents_corpus("c", _files(1)), rule=PartitionRule.holdout(0.5))
    assert (one.train.documents, one.eval.documents) == (("f0.txt",), ())  # nothing to hold out
    two = partition(documents_corpus("c", _files(2)), rule=PartitionRule.holdout(0.01))
    assert len(two.eval.documents) == 1  # at least one file when there are two
    none = partition(documents_corpus("c", _files(5)), rule=PartitionRule.holdout(0.0))
    assert len(none.train.documents) == 5
    assert none.eval.text == ""
    with pytest.raises(MeasureError) as e:
        PartitionRule.holdout(1.0)
    assert e.value.code == "INVALID_PARTITION"
    with pytest.raises(MeasureError) as e:
        PartitionRule.parse("holdout0.5").split([])
    assert e.value.code == "INVALID_PARTITION"
    assert PartitionRule.parse("holdout0.25") == PartitionRule.holdout(0.25)


def test_rule_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        partition(text_corpus("t", "a\n"), "every2")  # type: ignore[misc]


def test_empty_files_are_documents_too() -> None:
    # An empty __init__.py is still a file of the corpus: the holdout counts it, as the demo
    # always has (the share is of files, not of non-empty files).
    corpus = documents_corpus("c", [*_files(9), ("empty.txt", "")])
    assert len(corpus.documents) == 10
    p = partition(corpus, rule="holdout0.2")
    assert len(p.train.documents) + len(p.eval.documents) == 10
    assert len(p.eval.documents) == 2
