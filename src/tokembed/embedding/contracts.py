"""Admission checks for integer ids before they address an embedding table.

An id is a row address, not a number with meaning: the only
questions a lookup may ask of it are "is it an integer address?", "is the row
inside [0, V)?" and "does it live where the table lives?". This module answers
those three and nothing else; binding ids to a tokenizer (address hashes),
PAD policy and scaling live in :mod:`tokembed.embedding.lookup_checks`.

Cost: one fused ``aminmax`` reduction over the ids and one host read of its two
results. The ids are never copied, cast or moved. Only when the range check
fails does a second pass locate the first bad position for the message.

Example::

    >>> import torch
    >>> validate_ids(torch.tensor([[1, 4, 6, 2]]), 8)
    >>> validate_ids(torch.tensor([[1, 9]]), 8)
    Traceback (most recent call last):
    ...
    tokembed.errors.EmbeddingError: ID_OUT_OF_RANGE: ids[0, 1] = 9 is outside [0, 8) — ...
"""

from __future__ import annotations

import warnings
from typing import Literal, NoReturn

import torch
from torch._subclasses.fake_tensor import is_fake

from tokembed.errors import EmbeddingError, UsageError

__all__ = [
    "INDEX_DTYPES",
    "assert_in_range",
    "check_index_tensor",
    "first_bad_position",
    "raise_out_of_range",
    "same_device",
    "validate_ids",
    "value_check_mode",
]

# F.embedding / nn.Embedding accept exactly these index dtypes (torch 2.x
# embedding kernel dispatches on Int and Long); anything else is either not an
# address (float features, bool masks, one-hot rows) or would need a cast copy.
INDEX_DTYPES: frozenset[torch.dtype] = frozenset({torch.int32, torch.int64})


def value_check_mode(
    ids: torch.Tensor, checks: Literal["auto", "async", "off"] = "auto"
) -> Literal["eager", "assert", "skip"]:
    """How checks that need ``ids``' values run here: read back ("eager"), as traced
    tensor asserts ("assert": torch.compile, torch.export, or ``checks="async"``), or
    not at all ("skip": ``checks="off"``, meta, fake and vmap-batched tensors, which
    have no values to read). Under torch.jit.trace the example input is checked
    eagerly and a TracerWarning says the traced graph will not hold the checks.

    Example::

        >>> value_check_mode(torch.tensor([1]))
        'eager'
    """
    if checks == "off":
        return "skip"
    # is_compiling first: dynamo folds it to a constant and never traces what follows.
    # It is also true while torch.export traces, strict or not.
    if torch.compiler.is_compiling():
        return "assert"
    if torch.jit.is_tracing():
        # TorchScript's tracer drops aten::_assert_async (it has no output), so the
        # checks cannot live in a traced graph: check the example, and say so.
        warnings.warn(
            "torch.jit.trace does not record tokembed's value checks (range, PAD row,"
            " one-hot); the traced module keeps only the gather's own bounds check."
            " Use torch.export or torch.compile to keep them",
            torch.jit.TracerWarning,
            stacklevel=3,
        )
        return "skip" if checks == "off" else "eager"
    # vmap: aten._assert_async has no batching rule and a batched tensor no host
    # values; the gather's own bounds check still refuses an out-of-range id there.
    if torch._C._functorch.is_batchedtensor(ids) or ids.device.type == "meta" or is_fake(ids):
        return "skip"
    return "assert" if checks == "async" else "eager"


def assert_in_range(ids: torch.Tensor, num_embeddings: int, *, what: str = "ids") -> None:
    """The range check as a tensor assert (no host read; traced by compile and export).

    Raises torch's RuntimeError whose message starts with ID_OUT_OF_RANGE, when it runs.
    """
    if ids.numel() == 0:
        return
    low, high = torch.aminmax(ids)
    torch._assert_async(
        (low >= 0) & (high < num_embeddings),
        f"ID_OUT_OF_RANGE: an entry of {what} is outside [0, {num_embeddings}) (a -1 is"
        " the LLaMA-style PAD convention, not a row)",
    )


def same_device(a: torch.device, b: torch.device) -> bool:
    """True when ``a`` and ``b`` name the same device ("cuda" equals "cuda:<current>")."""
    if a.type != b.type:
        return False
    if a.type == "cpu" or a.index == b.index:
        return True
    # An unindexed accelerator device means the current one, as when a tensor is made there.
    current = torch.accelerator.current_device_index()
    return (current if a.index is None else a.index) == (current if b.index is None else b.index)


def first_bad_position(mask: torch.Tensor) -> tuple[int, ...]:
    """Row-major coordinates of the first True entry of a boolean ``mask`` (which has one)."""
    flat = int(mask.reshape(-1).nonzero()[0, 0])
    coords: list[int] = []
    for size in reversed(mask.shape):
        coords.append(flat % size)
        flat //= size
    return tuple(reversed(coords))


def _format_position(what: str, position: tuple[int, ...]) -> str:
    return f"{what}[{', '.join(str(i) for i in position)}]"


def check_index_tensor(
    ids: torch.Tensor, *, device: torch.device | None = None, what: str = "ids"
) -> None:
    """The sync-free half of :func:`validate_ids`: type, dtype and device only.

    Raises:
        EmbeddingError INDEX_DTYPE_MISMATCH, DEVICE_MISMATCH: as in :func:`validate_ids`.
    """
    if not isinstance(ids, torch.Tensor):
        raise EmbeddingError(
            "INDEX_DTYPE_MISMATCH",
            f"{what} must be an integer tensor of row addresses, got {type(ids).__name__}",
            value=type(ids).__name__,
            fix="tokenize text into ids first and pass torch.tensor(ids, dtype=torch.int64)",
        )
    if ids.dtype not in INDEX_DTYPES:
        hint = (
            "for continuous features use a projector, not a lookup"
            if ids.dtype.is_floating_point
            else "cast the addresses to torch.int64"
        )
        raise EmbeddingError(
            "INDEX_DTYPE_MISMATCH",
            f"{what} has dtype {ids.dtype}; a lookup takes int32 or int64 row addresses",
            value=ids.dtype,
            fix=hint,
        )
    if device is not None and not same_device(ids.device, device):
        raise EmbeddingError(
            "DEVICE_MISMATCH",
            f"{what} live on {ids.device} but the table lives on {device}",
            value=(str(ids.device), str(device)),
            fix="move the ids with .to(table.weight.device), or declare a route explicitly",
        )


def raise_out_of_range(
    ids: torch.Tensor, num_embeddings: int, *, low: int, high: int, what: str = "ids"
) -> NoReturn:
    """Raise ID_OUT_OF_RANGE naming the first bad position (failure path: a second pass)."""
    position = first_bad_position((ids < 0) | (ids >= num_embeddings))
    value = int(ids[position])
    raise EmbeddingError(
        "ID_OUT_OF_RANGE",
        f"{_format_position(what, position)} = {value} is outside [0, {num_embeddings})"
        f" (batch min {low}, max {high})",
        value=value,
        fix="use the tokenizer the table was built for, or grow the table to cover its id range",
    )


def validate_ids(
    ids: torch.Tensor,
    num_embeddings: int,
    *,
    device: torch.device | None = None,
    what: str = "ids",
) -> None:
    """Refuse ids that cannot address a table of ``num_embeddings`` rows.

    Contract: ``ids`` is an int32/int64 tensor of any shape whose every entry
    lies in ``[0, num_embeddings)``, and, when ``device`` is given, lives on it.
    Empty tensors pass. Nothing is copied; at most one host synchronization.

    Example::

        >>> validate_ids(torch.tensor([0, 7]), 8, device=torch.device("cpu"))

    Raises:
        EmbeddingError INDEX_DTYPE_MISMATCH: not a tensor, or not int32/int64
            (strings, floats, bool masks, one-hot rows).
        EmbeddingError DEVICE_MISMATCH: ``ids`` is not on ``device``.
        EmbeddingError ID_OUT_OF_RANGE: an entry is negative or >= V; the
            message names the first bad position (row-major) and its value.
        UsageError INVALID_ARGUMENT: ``num_embeddings`` is negative.
    """
    if num_embeddings < 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"num_embeddings must be >= 0, got {num_embeddings}",
            value=num_embeddings,
            fix="pass the table's row count V",
        )
    check_index_tensor(ids, device=device, what=what)
    if ids.numel() == 0:
        return
    mode = value_check_mode(ids)
    if mode != "eager":
        if mode == "assert":
            assert_in_range(ids, num_embeddings, what=what)
        return
    # One fused reduction gives both bounds; reading its two results together is
    # the single host sync. On CUDA an unchecked bad id becomes a device-side
    # assert that poisons the context, and on CPU an IndexError without position,
    # so one sync per batch is the price of a usable message.
    low, high = torch.aminmax(ids)
    low_value, high_value = torch.stack((low, high)).tolist()
    if low_value < 0 or high_value >= num_embeddings:
        raise_out_of_range(ids, num_embeddings, low=low_value, high=high_value, what=what)
