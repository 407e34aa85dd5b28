"""PAD agreement: the PAD id, the table's padding_idx, the attention mask and the label mask.

Four things decide what a padded position does, and each is owned by a
different component: the tokenizer's PAD id fills the positions, the table's
``padding_idx`` freezes one row's lookup gradient, the attention mask hides
positions from the model and the label mask (``ignore_index``) hides them from
the loss. A lookup runs whatever they say, so a disagreement shows only in
training: PAD rows attended or supervised, PAD training like content, or a
content token frozen as PAD. :func:`check_pad_masks` takes the attention mask
as the statement of which positions are padding and checks the other three
against it.

Example::

    >>> ids = torch.tensor([[5, 6, 0]])
    >>> check_pad_masks(ids, pad_id=0, padding_idx=0, attention_mask=ids.ne(0),
    ...                 labels=torch.tensor([[5, 6, -100]]))
"""

from __future__ import annotations

import torch

from tokembed.embedding.contracts import first_bad_position
from tokembed.errors import EmbeddingError, UsageError

__all__ = ["check_pad_masks"]


def check_pad_masks(
    ids: torch.Tensor,
    *,
    pad_id: int,
    padding_idx: int | None,
    attention_mask: torch.Tensor,
    labels: torch.Tensor | None = None,
    ignore_index: int = -100,
) -> None:
    """Check a padded batch's four PAD conventions against each other.

    Padding positions are those where ``attention_mask`` is False (0). Content
    positions may hold ``pad_id`` (GPT-2 pads with its end-of-text token), but
    not a row that ``padding_idx`` freezes.

    Raises:
        EmbeddingError PAD_MASK_MISMATCH: a masked position holds an id other than
            ``pad_id`` (content hidden), or its label is not ``ignore_index``
            (PAD supervised).
        EmbeddingError PAD_ID_INVALID: the batch pads, but ``padding_idx`` is None
            or another row (the PAD row trains like content).
        EmbeddingError PAD_ROW_AS_CONTENT: an attended position reads the
            ``padding_idx`` row (a content token whose row never trains).
        UsageError INVALID_ARGUMENT: masks or labels of another shape than ``ids``.
    """
    for name, other in (("attention_mask", attention_mask), ("labels", labels)):
        if other is not None and other.shape != ids.shape:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"{name} has shape {tuple(other.shape)} but the ids are {tuple(ids.shape)}",
                value=tuple(other.shape),
                fix=f"pass {name} aligned with the ids, one entry per position",
            )
    attended = attention_mask.bool()
    padding = ~attended
    hidden_content = padding & ids.ne(pad_id)
    if hidden_content.any():
        where = first_bad_position(hidden_content)
        raise EmbeddingError(
            "PAD_MASK_MISMATCH",
            f"position {list(where)} is masked out but holds id {int(ids[where])}, not the PAD"
            f" id {pad_id}: the attention mask hides content",
            value=where,
            fix="build the attention mask from the PAD positions the tokenizer filled",
        )
    if labels is not None:
        supervised = padding & labels.ne(ignore_index)
        if supervised.any():
            where = first_bad_position(supervised)
            raise EmbeddingError(
                "PAD_MASK_MISMATCH",
                f"PAD position {list(where)} has label {int(labels[where])}; the loss would"
                f" supervise padding",
                value=where,
                fix=f"set labels to ignore_index={ignore_index} wherever the attention mask is 0",
            )
    if padding.any() and padding_idx != pad_id:
        raise EmbeddingError(
            "PAD_ID_INVALID",
            f"the batch pads with id {pad_id} but the table's padding_idx is {padding_idx}:"
            f" row {pad_id} receives lookup gradient from padding like a content row",
            value=(pad_id, padding_idx),
            fix="build the table with padding_idx equal to the tokenizer's PAD id",
        )
    if padding_idx is not None:
        frozen_content = attended & ids.eq(padding_idx)
        if frozen_content.any():
            where = first_bad_position(frozen_content)
            raise EmbeddingError(
                "PAD_ROW_AS_CONTENT",
                f"attended position {list(where)} reads row {padding_idx}, which padding_idx"
                f" freezes: a content token whose row never receives lookup gradient",
                value=where,
                fix="give padding its own id (not a token the text uses), or drop padding_idx"
                " if the row is content",
            )
