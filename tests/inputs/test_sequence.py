"""Input sequence assembly: rows joined on dim=1 in the declared order, with types, masks and geometry exact."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tokembed.errors import EmbeddingError, HandoffError, UsageError
from tokembed.inputs.kinds import Kind, Representation, declare
from tokembed.inputs.media_projector import MediaProjector, ProjectorContract, Trainability
from tokembed.inputs.rows import MediaRows, RowType, pad_media
from tokembed.inputs.sequence import (
    InputSequence,
    SequenceLayout,
    Span,
    TextRows,
    assemble_sequence,
)

NAN = float("nan")
VIT = Representation(kind=Kind.CONTEXTUAL, model="tiny-vit", layer=2)
LAYOUT = SequenceLayout(order=(RowType.IMAGE, RowType.TEXT), model="tiny-lm", d_model=4)


def _projector(target: str = "tiny-lm") -> MediaProjector:
    torch.manual_seed(0)
    contract = ProjectorContract(
        source=VIT, d_media=6, target=target, d_model=4, trainability=Trainability.FROZEN
    )
    return MediaProjector(contract)


def _image(target: str = "tiny-lm") -> MediaRows:
    """Two images: two patches and one patch, padded and masked."""
    items = [torch.rand(2, 6) + 0.5, torch.rand(1, 6) + 0.5]
    coords = [torch.tensor([[0.0, 0.0], [0.0, 1.0]]), torch.tensor([[0.0, 0.0]])]
    media = pad_media(items, row_type=RowType.IMAGE, geometry=coords)
    declare(media.rows, VIT)
    return _projector(target)(media)


def _text() -> TextRows:
    rows = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    return TextRows(rows=rows, mask=torch.tensor([[True, True, True], [True, True, False]]))


def test_text_and_image_batch_assembles_exactly() -> None:
    image, text = _image(), _text()
    seq = assemble_sequence([image, text], layout=LAYOUT)
    assert torch.equal(seq.states, torch.cat([image.rows, text.rows], dim=1))
    assert seq.row_types.tolist() == [[2, 2, 1, 1, 1], [2, 0, 1, 1, 0]]  # type: ignore[union-attr]
    assert seq.mask.tolist() == [[True, True, True, True, True], [True, False, True, True, False]]
    expected_geometry = torch.tensor(
        [
            [[0.0, 0.0], [0.0, 1.0], [0.0, NAN], [1.0, NAN], [2.0, NAN]],
            [[0.0, 0.0], [NAN, NAN], [0.0, NAN], [1.0, NAN], [NAN, NAN]],
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(seq.geometry, expected_geometry, rtol=0, atol=0, equal_nan=True)
    assert seq.spans == (
        Span(row_type=RowType.IMAGE, start=0, stop=2),
        Span(row_type=RowType.TEXT, start=2, stop=5),
    )


@pytest.mark.failure_lab("11.1")
def test_text_and_media_concatenated_along_the_feature_axis() -> None:
    """Text and media concatenated along the feature axis.

    [B, n, d] + [B, n, d] on dim=-1 is [B, n, 2d]: a valid tensor, another object.
    """
    image, text = _image(), _text()
    joined = torch.cat([image.rows[:, :2], text.rows[:, :2]], dim=-1)  # [2, 2, 8]
    with pytest.raises(HandoffError) as e:
        InputSequence(
            layout=LAYOUT,
            states=joined,
            row_types=torch.ones(2, 2, dtype=torch.int64),
            mask=torch.ones(2, 2, dtype=torch.bool),
            geometry=torch.zeros(2, 2, 2, dtype=torch.float64),
            spans=(),
        )
    assert e.value.code == "X0_FEATURE_AXIS_CONCAT"
    assert e.value.value == 8
    with pytest.raises(HandoffError) as e:
        assemble_sequence([image, TextRows(rows=joined)], layout=LAYOUT)
    assert e.value.code == "X0_FEATURE_AXIS_CONCAT"


@pytest.mark.failure_lab("11.2")
def test_rows_have_correct_shape_but_wrong_order() -> None:
    """Rows have correct shape but wrong order.

    Training put the image before the question; text first gives the same
    [B, 5, d_model] with every row in another place.
    """
    image, text = _image(), _text()
    with pytest.raises(HandoffError) as e:
        assemble_sequence([text, image], layout=LAYOUT)
    assert e.value.code == "X0_ROW_ORDER_MISMATCH"
    assert e.value.value == ["TEXT", "IMAGE"]
    seq = assemble_sequence([image, text], layout=LAYOUT)
    with pytest.raises(HandoffError) as e:
        replace(seq, spans=seq.spans[::-1])
    assert e.value.code == "X0_ROW_ORDER_MISMATCH"


@pytest.mark.failure_lab("11.3")
def test_row_type_metadata_lost() -> None:
    """Row-type metadata lost.

    A bare tensor segment, or a state passed on without its row types, no longer
    says which rows are image, text or PAD.
    """
    image, text = _image(), _text()
    with pytest.raises(HandoffError) as e:
        assemble_sequence([image, text.rows], layout=LAYOUT)
    assert e.value.code == "X0_ROW_TYPES_MISSING"
    assert e.value.value == 1
    seq = assemble_sequence([image, text], layout=LAYOUT)
    with pytest.raises(HandoffError) as e:
        replace(seq, row_types=None)
    assert e.value.code == "X0_ROW_TYPES_MISSING"


@pytest.mark.failure_lab("11.4")
def test_geometry_metadata_dropped_at_concat() -> None:
    """Geometry metadata dropped at concat.

    Image rows without their patch coordinates, or a state without its geometry,
    are refused.
    """
    image, text = _image(), _text()
    with pytest.raises(HandoffError) as e:
        assemble_sequence([replace(image, geometry=None), text], layout=LAYOUT)
    assert e.value.code == "X0_GEOMETRY_MISSING"
    assert e.value.value == "IMAGE"
    seq = assemble_sequence([image, text], layout=LAYOUT)
    with pytest.raises(HandoffError) as e:
        replace(seq, geometry=None)
    assert e.value.code == "X0_GEOMETRY_MISSING"


@pytest.mark.failure_lab("11.5")
def test_ragged_media_padded_without_media_masks() -> None:
    """Ragged media batches padded without media masks.

    pad_sequence fills the shorter item with zero rows; without a mask they would be
    projected and attended to as evidence.
    """
    items = [torch.rand(2, 6) + 0.5, torch.rand(1, 6) + 0.5]
    padded = torch.nn.utils.rnn.pad_sequence(items, batch_first=True)  # [2, 2, 6]
    with pytest.raises(HandoffError) as e:
        MediaRows(rows=declare(padded, VIT), row_type=RowType.IMAGE, geometry=torch.zeros(2, 2, 2))
    assert e.value.code == "X0_MEDIA_MASK_MISSING"
    assert e.value.value == [0, 1]


def test_media_rows_of_another_model_or_unprojected_are_refused() -> None:
    text = _text()
    with pytest.raises(HandoffError) as e:
        assemble_sequence([_image(target="other-lm"), text], layout=LAYOUT)
    assert e.value.code == "PROJECTOR_SPACE_MISMATCH"
    raw = MediaRows(
        rows=declare(torch.rand(2, 2, 6) + 0.5, VIT),
        row_type=RowType.IMAGE,
        geometry=torch.zeros(2, 2, 2),
    )
    with pytest.raises(HandoffError) as e:
        assemble_sequence([raw, text], layout=LAYOUT)
    assert e.value.code == "PROJECTOR_WIDTH_MISMATCH"
    same_width = MediaRows(
        rows=torch.rand(2, 2, 4) + 0.5, row_type=RowType.IMAGE, geometry=torch.zeros(2, 2, 2)
    )
    with pytest.raises(HandoffError) as e:  # model-wide but never projected into this model
        assemble_sequence([same_width, text], layout=LAYOUT)
    assert e.value.code == "PROJECTOR_SPACE_MISMATCH"


def test_batch_sizes_must_agree() -> None:
    with pytest.raises(EmbeddingError) as e:
        assemble_sequence([_image(), TextRows(rows=torch.ones(3, 2, 4))], layout=LAYOUT)
    assert e.value.code == "SHAPE_MISMATCH"


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"rows": torch.ones(2, 3, dtype=torch.int64)}, "INVALID_ARGUMENT"),  # ids, not rows
        ({"mask": torch.ones(2, 3)}, "INVALID_ARGUMENT"),
        ({"mask": torch.ones(2, 4, dtype=torch.bool)}, "SHAPE_MISMATCH"),
        ({"positions": torch.arange(3)}, "SHAPE_MISMATCH"),
    ],
)
def test_text_rows_validation(kwargs: dict[str, object], code: str) -> None:
    fields: dict[str, object] = {"rows": torch.ones(2, 3, 4)} | kwargs
    with pytest.raises((UsageError, EmbeddingError)) as e:
        TextRows(**fields)  # type: ignore[arg-type]
    assert e.value.code == code


def test_declared_text_positions_become_geometry() -> None:
    text = TextRows(rows=torch.ones(1, 2, 4), positions=torch.tensor([[7, 8]]))
    layout = SequenceLayout(order=(RowType.TEXT,), model="tiny-lm", d_model=4)
    assert assemble_sequence([text], layout=layout).geometry[0, :, 0].tolist() == [7.0, 8.0]  # type: ignore[index]


def test_sequence_feeds_a_real_model_and_its_mask_hides_media_padding() -> None:
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(vocab_size=16, n_positions=8, n_embd=4, n_layer=1, n_head=1))
    model.eval()
    seq = assemble_sequence([_image(), _text()], layout=LAYOUT)
    real = seq.mask[1]  # item 1: row 1 is image padding, row 4 text padding

    def run(states: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        with torch.no_grad():
            out = model(inputs_embeds=states, attention_mask=mask).last_hidden_state
        return out[1, real]

    noisy = seq.states.detach().clone()
    noisy[1, 1] = 100.0  # change only the padding row's content
    # With the mask, padding content cannot reach real rows; without it, it does.
    assert torch.equal(run(seq.states, seq.mask.long()), run(noisy, seq.mask.long()))
    assert not torch.allclose(run(seq.states, None), run(noisy, None))


def test_spans_must_tile_the_rows() -> None:
    seq = assemble_sequence([_image(), _text()], layout=LAYOUT)
    with pytest.raises(EmbeddingError) as e:
        replace(seq, spans=(seq.spans[0], replace(seq.spans[1], start=3)))  # a gap at row 2
    assert e.value.code == "SHAPE_MISMATCH"
    assert e.value.value == [(0, 2), (3, 5)]
