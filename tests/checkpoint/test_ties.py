"""tie_report/require_ties on plain and config-built transformers models (single process)."""

from __future__ import annotations

import pytest
import torch
from _models import TinyLM, llama
from torch import nn

from tokembed.checkpoint import require_ties, tie_report
from tokembed.errors import CheckpointError


def _only(report):  # type: ignore[no-untyped-def]
    assert len(report.pairs) == 1, report.format()
    return report.pairs[0]


def test_tied_model_is_one_parameter() -> None:
    pair = _only(tie_report(TinyLM(tied=True)))
    assert (pair.left, pair.right, pair.kind) == (
        "embed.weight",
        "lm_head.weight",
        "same_parameter",
    )
    assert (pair.same_object, pair.same_storage, pair.equal_values, pair.code) == (
        True,
        True,
        True,
        None,
    )


def test_untied_distinct_tables_are_not_reported_without_a_claim() -> None:
    assert tie_report(TinyLM(tied=False)).pairs == ()


def test_equal_copies_are_reported_as_equal_values_not_a_tie() -> None:
    model = TinyLM(tied=False)
    with torch.no_grad():
        model.lm_head.weight.copy_(model.embed.weight)
    pair = _only(tie_report(model))
    assert (pair.kind, pair.equal_values, pair.same_storage, pair.code) == (
        "equal_values", True, False, None,
    )  # fmt: skip


def test_shared_storage_without_shared_object_is_a_storage_tie() -> None:
    model = TinyLM(tied=False)
    model.lm_head.weight = nn.Parameter(model.embed.weight.data)  # same bytes, new object
    pair = _only(tie_report(model))
    assert (pair.kind, pair.same_object, pair.same_storage) == ("shared_storage", False, True)


@pytest.mark.failure_lab("12.2")
@pytest.mark.parametrize(
    ("tied", "claim", "code"),
    [(True, True, None), (False, False, None), (False, True, "TIE_NOT_SHARED"),
     (True, False, "UNDECLARED_TIE")],
)  # fmt: skip
def test_hf_config_claims_are_checked_against_storage(
    tied: bool, claim: bool, code: str | None
) -> None:
    """Assuming tied weights when the implementation does not tie."""
    model = llama(tied=tied)
    model.config.tie_word_embeddings = claim
    pair = _only(tie_report(model))
    assert (pair.left, pair.right) == ("model.embed_tokens.weight", "lm_head.weight")
    assert (pair.claimed, pair.claim_source, pair.code) == (
        claim, "config.tie_word_embeddings", code,
    )  # fmt: skip
    if code is None:
        require_ties(model)
    else:
        with pytest.raises(CheckpointError) as e:
            require_ties(model)
        assert e.value.code == code


def test_caller_claims_override_and_shape_mismatches_have_their_own_codes() -> None:
    model = TinyLM(tied=False)
    report = tie_report(model, claims={("embed.weight", "lm_head.weight"): True})
    assert _only(report).code == "TIE_NOT_SHARED"
    model.extra = nn.Embedding(7, 4)
    report = tie_report(model, claims={("embed.weight", "extra.weight"): True})
    assert [p.code for p in report.problems] == ["TIE_SHAPE_MISMATCH"]


def test_report_serializes() -> None:
    report = tie_report(TinyLM(tied=True))
    d = report.to_dict()
    assert d["ok"] is True
    assert d["pairs"][0]["kind"] == "same_parameter"
    assert "embed.weight <-> lm_head.weight: same_parameter" in report.format()


@pytest.mark.failure_lab("1.3")
def test_equal_values_after_loading_are_not_a_tie() -> None:
    """Tied weights accepted from equal values.

    A tied checkpoint loaded into a model that builds two tables: equal now, two tables.
    """
    untied = TinyLM(tied=False)
    untied.load_state_dict(TinyLM(tied=True).state_dict())
    assert torch.equal(untied.embed.weight, untied.lm_head.weight)
    claims = {("embed.weight", "lm_head.weight"): True}
    with pytest.raises(CheckpointError) as e:
        require_ties(untied, claims=claims)
    assert e.value.code == "TIE_NOT_SHARED"
    sgd = torch.optim.SGD(untied.parameters(), lr=0.1)
    untied(torch.tensor([[1, 2]])).sum().backward()
    sgd.step()  # the two tables receive different gradients and part on the first step
    assert not torch.equal(untied.embed.weight, untied.lm_head.weight)
