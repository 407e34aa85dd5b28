"""Media rows and row maps: metadata that follows the rows, exact values."""

from __future__ import annotations

import pytest
import torch

from tokembed.errors import EmbeddingError, HandoffError, UsageError
from tokembed.inputs.rows import MediaRows, RowMap, RowType, pad_media, row_map_of

PAIRS = RowMap(n_in=4, sources=((0, 1), (2, 3)))


def test_row_map_shape_and_order() -> None:
    assert (PAIRS.r, PAIRS.keeps_order) == (2, False)
    assert RowMap(n_in=3, sources=((0,), (1,))).keeps_order  # a prefix keeps order
    assert not RowMap(n_in=2, sources=((1,), (0,))).keeps_order


@pytest.mark.parametrize("sources", [(), ((),), ((0, 4),), ((-1,),)])
def test_invalid_row_maps(sources: tuple[tuple[int, ...], ...]) -> None:
    with pytest.raises(UsageError) as e:
        RowMap(n_in=4, sources=sources)
    assert e.value.code == "INVALID_ARGUMENT"


def test_carried_mask_and_geometry_are_exact_and_stamped() -> None:
    mask = torch.tensor([[True, True, False, False], [False, True, False, False]])
    carried = PAIRS.carry_mask(mask)
    assert carried.tolist() == [[True, False], [True, False]]
    assert row_map_of(carried) is PAIRS
    geometry = torch.tensor([[[0.0], [1.0], [2.0], [4.0]]])  # times of four audio frames
    moved = PAIRS.carry_geometry(geometry)
    assert moved.tolist() == [[[0.5], [3.0]]]
    assert row_map_of(moved) is PAIRS


def test_pad_media_builds_the_mask_and_pads_geometry() -> None:
    items = [torch.full((3, 2), 1.5), torch.full((1, 2), -2.0)]
    times = [torch.tensor([[0.0], [0.25], [0.5]]), torch.tensor([[0.0]])]  # seconds
    media = pad_media(items, row_type=RowType.AUDIO, geometry=times)
    assert media.mask is not None
    assert media.geometry is not None
    assert media.mask.tolist() == [[True, True, True], [True, False, False]]
    assert media.rows[1].tolist() == [[-2.0, -2.0], [0.0, 0.0], [0.0, 0.0]]
    assert media.geometry[:, :, 0].tolist() == [[0.0, 0.25, 0.5], [0.0, 0.0, 0.0]]
    with pytest.raises(UsageError):
        pad_media([torch.ones(2, 3), torch.ones(2, 4)], row_type=RowType.AUDIO)


def test_with_rows_keeps_metadata_and_row_map() -> None:
    rows = PAIRS.stamp(torch.ones(1, 2, 3))
    media = MediaRows(
        rows=rows, row_type=RowType.IMAGE, mask=PAIRS.carry_mask(torch.ones(1, 4, dtype=torch.bool))
    )
    moved = media.with_rows(torch.full((1, 2, 5), 2.0))
    assert moved.row_map is PAIRS
    assert moved.mask is media.mask
    assert moved.rows.shape == (1, 2, 5)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"rows": torch.ones(2, 3)}, "INVALID_ARGUMENT"),
        ({"rows": torch.ones(1, 2, 3, dtype=torch.int64)}, "INVALID_ARGUMENT"),
        ({"row_type": RowType.TEXT}, "INVALID_ARGUMENT"),
        ({"mask": torch.ones(1, 2)}, "INVALID_ARGUMENT"),  # a float mask
        ({"mask": torch.ones(1, 3, dtype=torch.bool)}, "SHAPE_MISMATCH"),
        ({"geometry": torch.zeros(1, 2, 1)}, "SHAPE_MISMATCH"),  # images carry (row, column)
    ],
)
def test_media_rows_validation(kwargs: dict[str, object], code: str) -> None:
    fields: dict[str, object] = {"rows": torch.ones(1, 2, 3), "row_type": RowType.IMAGE} | kwargs
    with pytest.raises((UsageError, EmbeddingError)) as e:
        MediaRows(**fields)  # type: ignore[arg-type]
    assert e.value.code == code


def test_unmasked_batch_with_zero_tail_is_padding() -> None:
    rows = torch.ones(2, 3, 4)
    rows[1, 2] = 0.0  # pad_sequence's fill at the end of the shorter item
    with pytest.raises(HandoffError) as e:
        MediaRows(rows=rows, row_type=RowType.IMAGE)
    assert e.value.code == "X0_MEDIA_MASK_MISSING"
    assert e.value.value == [0, 1]
    inner = torch.ones(1, 3, 4)
    inner[0, 1] = 0.0  # a zero row that is not trailing is not the padding pattern
    assert MediaRows(rows=inner, row_type=RowType.IMAGE).mask is None
    # A zero-initialised projector makes every row of every item zero: not ragged padding.
    assert MediaRows(rows=torch.zeros(2, 3, 4), row_type=RowType.IMAGE).mask is None
