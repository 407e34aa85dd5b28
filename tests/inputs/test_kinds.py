"""Representation kinds: lookup rows, contextual states, pooled vectors and projected rows told apart."""

from __future__ import annotations

import pytest
import torch

from tokembed.embedding.variants.sinusoidal import ScaledSinusoidalEmbedding
from tokembed.errors import HandoffError, UsageError
from tokembed.inputs.kinds import (
    Kind,
    Representation,
    declare,
    declare_hidden_states,
    representation_of,
    require_contextual,
    require_same_space,
    retrieval_scores,
)
from tokembed.inputs.media_projector import MediaProjector, ProjectorContract, Trainability
from tokembed.inputs.rows import MediaRows, RowType

SBERT = Representation(
    kind=Kind.POOLED, model="sbert", pooling="mean", objective="contrastive", similarity=True
)


def _tiny_gpt2_states(ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=32, n_positions=8, n_embd=16, n_layer=2, n_head=2)
    model = GPT2Model(config).eval()
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    return declare_hidden_states(out.hidden_states, model="tiny-gpt2", objective="causal-lm")


def test_space_names_every_field_and_differences_name_the_split() -> None:
    h6 = Representation(kind=Kind.CONTEXTUAL, model="gpt2", layer=6)
    assert h6.space == "contextual model=gpt2 layer=6"
    assert SBERT.space == "pooled model=sbert pooling=mean objective=contrastive similarity"
    assert h6.differences(Representation(kind=Kind.CONTEXTUAL, model="gpt2", layer=7)) == ["layer"]


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": Kind.CONTEXTUAL, "model": "gpt2", "layer": 0},  # layer 0 is the lookup output
        {"kind": Kind.CONTEXTUAL, "model": "gpt2"},
        {"kind": Kind.LOOKUP, "model": "gpt2", "layer": 3},
        {"kind": Kind.POOLED, "model": "m", "pooling": "cls"},  # objective missing
        {"kind": Kind.CONTEXTUAL, "model": "m", "layer": 2, "similarity": True},
        {"kind": Kind.PROJECTED_MEDIA, "model": "m"},  # encoder missing
        {"kind": Kind.LOOKUP, "model": ""},
    ],
)
def test_inconsistent_declarations_are_usage_errors(fields: dict[str, object]) -> None:
    with pytest.raises(UsageError) as e:
        Representation(**fields)  # type: ignore[arg-type]
    assert e.value.code == "INVALID_ARGUMENT"


def test_declare_returns_the_same_tensor_and_refuses_relabelling() -> None:
    rows = torch.ones(1, 2, 4)
    lookup = Representation(kind=Kind.LOOKUP, model="gpt2")
    assert declare(rows, lookup) is rows
    assert declare(rows, lookup) is rows  # the same declaration again is harmless
    with pytest.raises(HandoffError) as e:
        declare(rows, Representation(kind=Kind.CONTEXTUAL, model="gpt2", layer=1))
    assert e.value.code == "REPRESENTATION_SPACE_MISMATCH"
    assert e.value.value == ["kind", "layer"]
    assert representation_of(rows * 1.0) is None  # arithmetic makes a new, undeclared object


def test_hidden_states_of_a_real_stack_are_declared_layer_by_layer() -> None:
    # Same token (7) at the same position after different first tokens.
    hs = _tiny_gpt2_states(torch.tensor([[5, 7], [9, 7]]))
    assert [representation_of(h).space for h in hs] == [  # type: ignore[union-attr]
        "lookup model=tiny-gpt2",
        "contextual model=tiny-gpt2 layer=1 objective=causal-lm",
        "contextual model=tiny-gpt2 layer=2 objective=causal-lm",
    ]
    # The declaration tells the truth: entry 0 ignores context, block outputs do not.
    assert torch.equal(hs[0][0, 1], hs[0][1, 1])
    assert not torch.allclose(hs[1][0, 1], hs[1][1, 1])
    assert require_contextual(hs[2], consumer="probe").layer == 2


@pytest.mark.failure_lab("9.1")
def test_lookup_rows_as_contextual_states() -> None:
    """Treating lookup rows as contextual states.

    Entry 0 of a real stack's hidden states, and rows from the lookup path that
    carry its scale/position stamp, are refused where contextual states are needed.
    """
    hs = _tiny_gpt2_states(torch.tensor([[5, 7]]))
    with pytest.raises(HandoffError) as e:
        require_contextual(hs[0], consumer="a probing classifier")
    assert e.value.code == "REPRESENTATION_NOT_CONTEXTUAL"
    assert e.value.value == "lookup"
    harvard = ScaledSinusoidalEmbedding(32, 8, dropout=0.0)
    with pytest.raises(HandoffError) as e:
        require_contextual(harvard(torch.tensor([[5, 7]])), consumer="a probing classifier")
    assert e.value.code == "REPRESENTATION_NOT_CONTEXTUAL"
    assert "scale/position stamp" in e.value.message
    with pytest.raises(HandoffError) as e:
        require_contextual(torch.ones(1, 2, 8), consumer="a probe")
    assert e.value.code == "REPRESENTATION_NOT_CONTEXTUAL"


def test_retrieval_scores_are_exact_cosines_of_one_declared_space() -> None:
    q = declare(torch.tensor([[3.0, 4.0]]), SBERT)
    k = declare(torch.tensor([[3.0, 4.0], [4.0, -3.0], [-6.0, -8.0]]), SBERT)
    assert retrieval_scores(q, k).tolist() == [[1.0, 0.0, -1.0]]


@pytest.mark.failure_lab("9.2")
def test_hidden_state_cosine_as_a_retrieval_score() -> None:
    """Using arbitrary hidden-state cosine as a calibrated retrieval score.

    Mean-pooled states of a causal LM (no retrieval objective) and raw block outputs
    give a computable cosine, but retrieval_scores refuses to call it a score.
    """
    hs = _tiny_gpt2_states(torch.tensor([[5, 7], [9, 7]]))
    mean = Representation(
        kind=Kind.POOLED, model="tiny-gpt2", layer=2, pooling="mean", objective="causal-lm"
    )
    pooled = declare(hs[2].mean(dim=1), mean)  # [2, 16]
    with pytest.raises(HandoffError) as e:
        retrieval_scores(pooled, pooled)
    assert e.value.code == "SCORE_NOT_CALIBRATED"
    with pytest.raises(HandoffError) as e:
        retrieval_scores(hs[2][:, -1], hs[2][:, -1])  # slicing makes an undeclared tensor
    assert e.value.code == "SCORE_NOT_CALIBRATED"
    with pytest.raises(HandoffError) as e:
        retrieval_scores(hs[2], declare(torch.ones(1, 16), SBERT))
    assert e.value.code == "SCORE_NOT_CALIBRATED"


@pytest.mark.failure_lab("9.3")
def test_projected_patch_rows_as_one_image_embedding() -> None:
    """Calling projected patch rows a single image embedding.

    A projector's [B, N, d_model] output is a sequence of model inputs, not one
    retrieval vector per image.
    """
    clip = Representation(kind=Kind.CONTEXTUAL, model="clip-vit-b-32", layer=11)
    contract = ProjectorContract(
        source=clip, d_media=6, target="tiny-lm", d_model=4, trainability=Trainability.FROZEN
    )
    features = declare(torch.rand(2, 3, 6) + 0.5, clip)
    rows = MediaProjector(contract)(MediaRows(rows=features, row_type=RowType.IMAGE)).rows
    with pytest.raises(HandoffError) as e:
        retrieval_scores(rows, declare(torch.ones(1, 4), SBERT))
    assert e.value.code == "ROWS_NOT_POOLED"
    assert e.value.value == (2, 3, 4)
    pooled_rows = declare(torch.ones(2, 3, 2), SBERT)  # declared pooled but still [B, N, d]
    with pytest.raises(HandoffError) as e:
        retrieval_scores(pooled_rows, pooled_rows)
    assert e.value.code == "ROWS_NOT_POOLED"


@pytest.mark.failure_lab("9.4")
def test_equal_width_representations_as_interchangeable() -> None:
    """Treating equal-width downstream representations as interchangeable.

    Layers of one checkpoint, two pooling heads, and two checkpoints all give
    16-wide vectors; none of them shares a coordinate system with another.
    """
    hs = _tiny_gpt2_states(torch.tensor([[5, 7]]))
    with pytest.raises(HandoffError) as e:
        require_same_space(hs[1], hs[2], purpose="a layer-1 probe applied to layer 2")
    assert e.value.code == "REPRESENTATION_SPACE_MISMATCH"
    assert e.value.value == ["layer"]
    cls_head = Representation(
        kind=Kind.POOLED, model="sbert", pooling="cls", objective="contrastive", similarity=True
    )
    with pytest.raises(HandoffError) as e:
        retrieval_scores(declare(torch.ones(1, 4), SBERT), declare(torch.ones(3, 4), cls_head))
    assert e.value.code == "REPRESENTATION_SPACE_MISMATCH"
    assert e.value.value == ["pooling"]
    other_ckpt = Representation(
        kind=Kind.POOLED, model="sbert-v2", pooling="mean", objective="contrastive", similarity=True
    )
    with pytest.raises(HandoffError) as e:
        retrieval_scores(declare(torch.ones(1, 4), SBERT), declare(torch.ones(3, 4), other_ckpt))
    assert e.value.code == "REPRESENTATION_SPACE_MISMATCH"
    assert e.value.value == ["model"]
    assert require_same_space(hs[2], hs[2], purpose="same layer") == representation_of(hs[2])
