"""check_pad_masks: PAD id, padding_idx, attention mask and label mask agree or are refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tokembed.embedding.guards import check_pad_masks
from tokembed.errors import EmbeddingError, UsageError

# Two right-padded rows, PAD id 0; the second row is two tokens long.
IDS = torch.tensor([[5, 6, 7], [8, 9, 0]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
LABELS = torch.tensor([[5, 6, 7], [8, 9, -100]])


def _code(**kwargs: object) -> tuple[str, object]:
    args: dict[str, object] = {
        "pad_id": 0, "padding_idx": 0, "attention_mask": MASK, "labels": LABELS,
    }  # fmt: skip
    args.update(kwargs)
    ids = args.pop("ids", IDS)
    with pytest.raises(EmbeddingError) as e:
        check_pad_masks(ids, **args)  # type: ignore[arg-type]
    return e.value.code, e.value.value


def test_agreeing_conventions_pass() -> None:
    check_pad_masks(IDS, pad_id=0, padding_idx=0, attention_mask=MASK, labels=LABELS)
    check_pad_masks(IDS[:1], pad_id=0, padding_idx=None, attention_mask=MASK[:1])  # no padding
    # GPT-2 pads with its end-of-text id, which is also content: allowed without padding_idx.
    eot = torch.tensor([[50256, 11, 50256], [3, 50256, 50256]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    with pytest.raises(EmbeddingError):  # ...but not with the row frozen as padding_idx
        check_pad_masks(eot, pad_id=50256, padding_idx=50256, attention_mask=mask)


@pytest.mark.failure_lab("4.1")
def test_masks_that_disagree_with_the_pad_positions_are_refused() -> None:
    """PAD ID, padding_idx, attention mask, and label mask disagree."""
    hides_content = torch.tensor([[1, 1, 0], [1, 1, 0]])  # masks the real token 7
    assert _code(attention_mask=hides_content) == ("PAD_MASK_MISMATCH", (0, 2))
    supervised = torch.tensor([[5, 6, 7], [8, 9, 0]])  # the PAD position keeps label 0
    assert _code(labels=supervised) == ("PAD_MASK_MISMATCH", (1, 2))
    assert _code(pad_id=1, padding_idx=1) == ("PAD_MASK_MISMATCH", (1, 2))  # ids pad with 0


@pytest.mark.failure_lab("4.3")
def test_padding_without_its_padding_idx_trains_the_pad_row() -> None:
    """PAD row updates unexpectedly.

    The batch pads with 0; the table has no padding_idx (or another one).
    """
    assert _code(padding_idx=None) == ("PAD_ID_INVALID", (0, None))
    assert _code(padding_idx=3) == ("PAD_ID_INVALID", (0, 3))
    table = torch.zeros(10, 2, requires_grad=True)
    F.embedding(IDS, table).sum().backward()  # what the refused set-up would do
    assert table.grad is not None
    assert table.grad[0].tolist() == [1.0, 1.0]  # the PAD row trains like content


@pytest.mark.failure_lab("4.4")
def test_a_content_token_frozen_as_padding_is_refused() -> None:
    """PAD row frozen when intended as content.

    Row 5 is frozen by padding_idx but the text uses token 5 at attended positions.
    """
    assert _code(padding_idx=5, pad_id=5, ids=torch.tensor([[5, 6, 7], [8, 9, 5]])) == (
        "PAD_ROW_AS_CONTENT", (0, 0),
    )  # fmt: skip
    table = torch.zeros(10, 2, requires_grad=True)
    F.embedding(IDS, table, padding_idx=5).sum().backward()
    assert table.grad is not None
    assert table.grad[5].tolist() == [0.0, 0.0]  # the content token's row never trains


def test_misaligned_masks_are_a_usage_error() -> None:
    with pytest.raises(UsageError) as e:
        check_pad_masks(IDS, pad_id=0, padding_idx=0, attention_mask=MASK[:, :2])
    assert e.value.code == "INVALID_ARGUMENT"
