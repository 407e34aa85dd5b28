"""CoNLL-U sentences: text kept exactly, ids, malformed blocks, document rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokembed.errors import MeasureError, UsageError
from tokembed.text.conllu import conllu_sentences, is_conllu, parse_conllu, resolve_doc_rule
from tokembed.text.sources import SourceText

_BLOCK = "# sent_id = {sid}\n# text = {text}\n1\tx\tx\tX\t_\t_\t0\troot\t_\t_\n\n"


def test_parse_keeps_text_exactly_and_ids() -> None:
    text = (
        "# newdoc id = d1\n"
        + _BLOCK.format(sid="s1", text=" two  spaces ")
        + _BLOCK.format(sid="s2", text="x")
    )
    sents = parse_conllu(text, source="t.conllu", doc_rule="newdoc")
    assert [(s.doc_id, s.sent_id, s.text) for s in sents] == [
        ("d1", "s1", " two  spaces "),
        ("d1", "s2", "x"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "# text = no id\n1\tx\n\n",
        "# sent_id = a\n1\tx\n\n",
        "# sent_id = a\n# text = one\n# text = two\n\n",
    ],
)
def test_malformed_conllu(text: str) -> None:
    with pytest.raises(MeasureError) as e:
        parse_conllu(text, source="bad.conllu", doc_rule="newdoc")
    assert e.value.code == "MALFORMED_CONLLU"


def test_unknown_doc_rule() -> None:
    with pytest.raises(UsageError) as e:
        resolve_doc_rule("sent-prefix:x", Path("a.conllu"))
    assert e.value.code == "INVALID_ARGUMENT"


def test_conllu_is_told_by_name_and_sentences_drop_a_bom() -> None:
    assert [is_conllu(n) for n in ("a.conllu", "a.conllu.gz", "a.txt", "a.conllu.txt")] == [
        True,
        True,
        False,
        False,
    ]
    block = _BLOCK.format(sid="n01001011", text="Hi.")
    source = SourceText(name="en_pud-ud-test.conllu", text="\ufeff" + block)
    rule, sents = conllu_sentences(source)
    assert rule == "sent-prefix:6"  # auto, for a PUD file
    assert [(s.doc_id, s.sent_id, s.text) for s in sents] == [("n01001", "n01001011", "Hi.")]
    rule, sents = conllu_sentences(SourceText(name="x.conllu", text=block), doc_rule="newdoc")
    assert (rule, sents[0].doc_id) == ("newdoc", "x.conllu")
