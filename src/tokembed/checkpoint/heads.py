"""The output head against the input table: one vocabulary axis, in the layout the head declares.

Logits are ``hidden @ W_out^T``; ``nn.Linear(d, V)`` stores ``W_out`` as [V, d],
the same layout as the input table E [V, d], which is what lets a tie alias the
two. An untied head still scores the input table's vocabulary, so its row
count must be the input table's V (or a declared output vocabulary), and a
hand-written head that stores [d, V] and multiplies ``hidden @ W`` has another
layout that neither a tie nor a checkpoint written for nn.Linear can take
as is. :func:`check_output_head` checks both on any pair of tensors or
modules; ties themselves are checked by :mod:`tokembed.checkpoint.ties`.

Example::

    >>> check_output_head(torch.nn.Embedding(11, 4), torch.nn.Linear(4, 11, bias=False))
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.errors import CheckpointError, UsageError

__all__ = ["check_output_head"]


def _weight(obj: nn.Module | torch.Tensor, role: str) -> torch.Tensor:
    if isinstance(obj, torch.Tensor):
        weight = obj
    else:
        found = getattr(obj, "weight", None)
        if not isinstance(found, torch.Tensor):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"the {role} ({type(obj).__name__}) has no weight tensor",
                value=type(obj).__name__,
                fix=f"pass the {role}'s weight tensor or a module with .weight",
            )
        weight = found
    if weight.dim() != 2:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the {role} weight must be 2-D, got shape {tuple(weight.shape)}",
            value=tuple(weight.shape),
        )
    return weight


def check_output_head(
    input_table: nn.Module | torch.Tensor,
    head: nn.Module | torch.Tensor,
    *,
    vocab_size: int | None = None,
    hidden_size: int | None = None,
) -> None:
    """Check that ``head``'s weight is [V, d] (nn.Linear layout) for the input table's V and d.

    ``vocab_size`` declares an output vocabulary other than the input table's
    row count (None: the same V); ``hidden_size`` the width the head reads (None:
    the input table's width, as for an unfactorized model).

    Raises:
        CheckpointError HEAD_LAYOUT_MISMATCH: the head stores [d, V] (transposed)
            or has another width than ``hidden_size``.
        CheckpointError HEAD_VOCAB_MISMATCH: the head's rows are not V: input
            lookup works, but logits have another vocabulary axis.
        UsageError INVALID_ARGUMENT: an argument without a 2-D weight.
    """
    table = _weight(input_table, "input table")
    out = _weight(head, "output head")
    vocab = table.shape[0] if vocab_size is None else vocab_size
    width = table.shape[1] if hidden_size is None else hidden_size
    rows, cols = out.shape
    if (rows, cols) == (width, vocab) and width != vocab:
        raise CheckpointError(
            "HEAD_LAYOUT_MISMATCH",
            f"the head weight is [{rows}, {cols}] = [d, V]; nn.Linear(d, V) stores [V, d] ="
            f" [{vocab}, {width}] and computes hidden @ W.T",
            value=(rows, cols),
            fix="store the head as [V, d] (transpose once when converting), or declare the"
            " custom layout and never tie or load it as an nn.Linear weight",
        )
    if cols != width:
        raise CheckpointError(
            "HEAD_LAYOUT_MISMATCH",
            f"the head reads width {cols} but the hidden rows are {width} wide",
            value=(rows, cols),
            fix="pass hidden_size= for a factorized model, or build the head as nn.Linear(d, V)",
        )
    if rows != vocab:
        raise CheckpointError(
            "HEAD_VOCAB_MISMATCH",
            f"the head scores {rows} ids but the input table has {vocab} rows: logit v"
            " and row v would not name one token",
            value=(rows, vocab),
            fix="resize the head with the input table (migrate every vocabulary-indexed role),"
            " or declare vocab_size= for a deliberately different output vocabulary",
        )
