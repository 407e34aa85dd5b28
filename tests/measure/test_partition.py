"""Document-level partitions: the lecture's teaching split reproduced exactly, rules by name."""

from __future__ import annotations

import pytest
from _measure_data import lecture_split, pud

from tokembed.errors import MeasureError
from tokembed.measure.corpus import text_corpus
from tokembed.measure.partition import PartitionRule, partition, partition_parallel


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
    again = partition(ru, "lecture")
    assert again.eval.text == lecture_split()["ru"].eval.text


def test_every_k_rule_counts() -> None:
    p = partition(pud("ru", "en")["ru"], "every6")
    assert len(p.eval.documents) == 66  # documents 5, 11, ..., 395 of 397
    assert p.eval.documents[0] == pud("ru", "en")["ru"].documents[5]


@pytest.mark.parametrize("spec", ["random", "sha256-mod1", "every", "every0", "mod5"])
def test_unknown_rules(spec: str) -> None:
    with pytest.raises(MeasureError) as e:
        PartitionRule.parse(spec)
    assert e.value.code == "INVALID_PARTITION"


def test_a_single_document_cannot_be_partitioned() -> None:
    with pytest.raises(MeasureError) as e:
        partition(text_corpus("one", "only one document\n"), "every2")
    assert e.value.code == "INVALID_PARTITION"


def test_parallel_partition_of_nothing_is_empty() -> None:
    assert partition_parallel({}, "lecture") == {}


def test_simple_every_k_rules_do_not_reproduce_the_lecture_split() -> None:
    # Part of the systematic search recorded in partition.py: only sha256-mod5 matches.
    ru = pud("ru", "en")["ru"]
    target = (833, 331, 180_112)
    for k in range(2, 12):
        train = partition(ru, f"every{k}").train.record()
        assert (train.sentences, train.documents, train.bytes) != target
    for k in (2, 3, 4, 6, 7):
        train = partition(ru, f"sha256-mod{k}").train.record()
        assert (train.sentences, train.documents, train.bytes) != target
