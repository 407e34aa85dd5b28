"""The per-batch contract of a checked lookup, shared by every table that takes a LookupConfig.

:class:`~tokembed.embedding.lookup.TokenEmbedding` and the sharded tables of
:mod:`tokembed.parallel` call these functions, so a sharded table refuses
exactly what the single-device table refuses, with the same codes:

* :func:`admit_lookup_ids` — the batch's address hash and PAD id agree with
  the table (ADDRESS_HASH_MISMATCH, PAD_ID_INVALID), the ids are int32/int64
  on the table's device or routed there by ``id_route="copy"``
  (INDEX_DTYPE_MISMATCH, DEVICE_MISMATCH), inside ``[0, V)`` (ID_OUT_OF_RANGE;
  a ``-1`` is named PAD_ID_INVALID because it is the LLaMA-style PAD
  convention, not a row), with ``one_hot_guard`` not one-hot selectors
  (OPERATOR_CONTRACT_MISMATCH),
  and, with ``zero_pad_row``, the PAD row the caller holds is still zero
  (PAD_ROW_NOT_ZERO);
* :func:`scale_lookup` — the input scale, applied once and stamped;
* :func:`bind_config` — a config bound to a tokenizer's address space;
* :func:`refuse_nonzero_pad_row` — a load hook refusing a checkpoint whose PAD
  row is not zero under ``zero_pad_row``.

Cost: the range check, the one-hot guard and the PAD-row check share one fused
``aminmax`` and one host read; nothing is copied. Under torch.compile
and torch.export (or with ``checks="async"``) the same checks are
tensor asserts (``torch._assert_async``) in the graph, raising torch's
RuntimeError with the code in its message; meta, fake and vmap-batched ids skip
the checks that need values (see :data:`~tokembed.embedding.lookup_config.CheckMode`).

Example::

    >>> config = LookupConfig(num_embeddings=8, embedding_dim=3)
    >>> admit_lookup_ids(torch.tensor([[1, 4]]), config, device=torch.device("cpu")).tolist()
    [[1, 4]]
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NoReturn, Protocol

import torch

from tokembed.embedding.addressed import AddressedIds, SupportsAddressHash, admit_ids
from tokembed.embedding.contracts import (
    assert_in_range,
    check_index_tensor,
    raise_out_of_range,
    same_device,
    value_check_mode,
)
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.embedding.stamps import apply_input_scale
from tokembed.errors import EmbeddingError, UsageError

__all__ = [
    "admit_lookup_ids",
    "bind_config",
    "check_finite",
    "check_pad_row",
    "raise_pad_row_not_zero",
    "refuse_non_finite_weight",
    "refuse_nonzero_pad_row",
    "scale_lookup",
    "supplied_weight",
    "table_shape",
]


def raise_pad_row_not_zero(config: LookupConfig) -> NoReturn:
    """Raise PAD_ROW_NOT_ZERO for ``config``'s PAD row."""
    p = config.padding_idx
    raise EmbeddingError(
        "PAD_ROW_NOT_ZERO",
        f"row {p} (padding_idx) must be zero under zero_pad_row=True but is not"
        " (supplied weight, checkpoint, initializer or optimizer wrote it)",
        value=p,
        fix="zero the PAD row after loading (weight[padding_idx] = 0) or drop zero_pad_row",
    )


def check_pad_row(pad_row: torch.Tensor | None, config: LookupConfig) -> None:
    """Raise PAD_ROW_NOT_ZERO when ``zero_pad_row`` holds and ``pad_row`` (the held PAD row,
    None on a shard that does not hold it) is not zero."""
    if config.zero_pad_row and pad_row is not None and bool(pad_row.any()):
        raise_pad_row_not_zero(config)


class _PadRowTable(Protocol):
    config: LookupConfig

    @property
    def local_padding_idx(self) -> int | None: ...


def refuse_nonzero_pad_row(module: Any, state_dict: Any, prefix: str, *_: Any) -> None:
    """``load_state_dict`` pre-hook: refuse a saved ``weight`` whose held PAD row is not zero.

    ``module`` has a ``config`` and a ``local_padding_idx`` (the PAD row's index in
    the rows this module holds, None when it holds none). A checkpoint may have
    trained the PAD row; refusing it before the copy keeps the table unchanged.
    Shape problems are left to ``load_state_dict``'s own error.
    """
    table: _PadRowTable = module
    saved = state_dict.get(prefix + "weight")
    pad = table.local_padding_idx
    if not (table.config.zero_pad_row and pad is not None and isinstance(saved, torch.Tensor)):
        return
    if saved.dim() == 2 and pad < saved.shape[0] and bool(saved[pad].any()):
        raise_pad_row_not_zero(table.config)


def check_finite(t: torch.Tensor, *, what: str) -> None:
    """Raise NON_FINITE_VALUES when the floating tensor ``t`` holds NaN or infinity.

    One NaN row spreads to every output that touches it and, through the gradient,
    to the optimizer state, so a table never admits one. The message names the first bad row.

    Raises:
        EmbeddingError(NON_FINITE_VALUES): e.g. ``check_finite(torch.tensor([[inf]]), what="w")``.
    """
    if not (t.dtype.is_floating_point or t.dtype.is_complex) or bool(torch.isfinite(t).all()):
        return
    rows = (~torch.isfinite(t)).reshape(t.shape[0], -1).any(dim=1) if t.dim() else None
    bad = 0 if rows is None else int(rows.nonzero()[0, 0])
    raise EmbeddingError(
        "NON_FINITE_VALUES",
        f"{what} contains NaN or infinity (first in row {bad})",
        value=bad,
        fix="repair or replace the checkpoint; never load non-finite rows",
    )


def refuse_non_finite_weight(module: Any, state_dict: Any, prefix: str, *_: Any) -> None:
    """``load_state_dict`` pre-hook: refuse a saved ``weight`` holding NaN or infinity.

    Runs before the copy, so a refused load leaves the table unchanged.
    """
    saved = state_dict.get(prefix + "weight")
    if isinstance(saved, torch.Tensor):
        check_finite(saved, what=f"{prefix}weight")


def bind_config(
    config: LookupConfig, source: SupportsAddressHash | str, *, id_range: int | None = None
) -> LookupConfig:
    """``config`` bound to ``source``'s address space (a tokenizer or its ``address_hash``).

    ``id_range`` (R = max id + 1) defaults to ``source.tables.id_range`` when the
    source is a tokembed Tokenizer; R > V is refused because the tokenizer would
    emit ids the table cannot address.

    Raises:
        EmbeddingError ID_OUT_OF_RANGE: R > V (the value is the largest id, R - 1).
        UsageError INVALID_ARGUMENT: malformed hash.
    """
    address_hash = source if isinstance(source, str) else source.address_hash
    if id_range is None and not isinstance(source, str):
        id_range = getattr(getattr(source, "tables", None), "id_range", None)
    if id_range is not None and id_range > config.num_embeddings:
        raise EmbeddingError(
            "ID_OUT_OF_RANGE",
            f"the tokenizer emits ids up to {id_range - 1} but the table has"
            f" {config.num_embeddings} rows",
            value=id_range - 1,
            fix=f"allocate at least {id_range} rows (grow the table)",
        )
    return replace(config, address_hash=address_hash)


def _looks_one_hot_shape(ids: torch.Tensor, config: LookupConfig) -> bool:
    v = config.num_embeddings
    return config.one_hot_guard and ids.dim() >= 2 and ids.shape[-1] == v > 2


def _one_hot_error(ids: torch.Tensor, config: LookupConfig) -> EmbeddingError:
    return EmbeddingError(
        "OPERATOR_CONTRACT_MISMATCH",
        f"ids of shape {tuple(ids.shape)} look like one-hot selectors over"
        f" V = {config.num_embeddings}; a lookup takes the ids themselves",
        value=tuple(ids.shape),
        fix="pass selectors.argmax(-1), use one_hot_lookup, or build with one_hot_guard=False",
    )


def _assert_values(ids: torch.Tensor, config: LookupConfig, pad_row: torch.Tensor | None) -> None:
    # The same checks as tensor asserts: traced into the graph (compile, export),
    # no host read. They raise torch's RuntimeError carrying the code.
    assert_in_range(ids, config.num_embeddings, what=config.role)
    if config.zero_pad_row and pad_row is not None:
        torch._assert_async(
            ~pad_row.detach().any(),
            f"PAD_ROW_NOT_ZERO: row {config.padding_idx} must be zero under zero_pad_row=True",
        )
    if _looks_one_hot_shape(ids, config):
        one_hot = (ids.amax() <= 1) & (ids.sum(-1) == 1).all()
        torch._assert_async(~one_hot, str(_one_hot_error(ids, config)))


def _check_values(ids: torch.Tensor, config: LookupConfig, pad_row: torch.Tensor | None) -> None:
    if ids.numel() == 0:
        return
    mode = value_check_mode(ids, config.checks)
    if mode == "skip":
        return
    if mode == "assert":
        _assert_values(ids, config, pad_row)
        return
    # One fused aminmax + one host read: range, -1 and one-hot guards all use it, and
    # the PAD-row flag rides along (stack) so zero_pad_row costs no second sync.
    low, high = torch.aminmax(ids)
    parts = [low, high]
    watch_pad = config.zero_pad_row and pad_row is not None
    if watch_pad:
        assert pad_row is not None
        parts.append(pad_row.detach().any().to(ids.dtype))
    values = torch.stack(parts).tolist()
    low_v, high_v = values[0], values[1]
    if low_v < 0 or high_v >= config.num_embeddings:
        try:
            raise_out_of_range(ids, config.num_embeddings, low=low_v, high=high_v, what=config.role)
        except EmbeddingError as error:
            if error.value != -1 or not config.name_pad_convention:
                raise
            raise EmbeddingError(
                "PAD_ID_INVALID",
                f"{error.message.split(' is outside')[0]}: -1 is a tokenizer PAD"
                " convention (LLaMA-style), not a row address",
                value=-1,
                fix=f"replace -1 with padding_idx ({config.padding_idx}) and mask those positions",
            ) from error
    if watch_pad and values[2]:
        raise_pad_row_not_zero(config)
    # With one_hot_guard: values in {0, 1} along a last axis of width V look like
    # one-hot selectors fed to a lookup (which would read rows 0 and 1 V times); row
    # sums confirm it (a second pass, only then).
    if _looks_one_hot_shape(ids, config) and high_v <= 1 and bool((ids.sum(-1) == 1).all()):
        raise _one_hot_error(ids, config)


def admit_lookup_ids(
    ids: torch.Tensor | AddressedIds,
    config: LookupConfig,
    *,
    device: torch.device,
    pad_row: torch.Tensor | None = None,
) -> torch.Tensor:
    """The raw ids of ``ids``, on ``device``, after every check of ``config``'s contract.

    ``device`` is where the table lives; ``pad_row`` is the PAD row the caller
    holds (read only under ``zero_pad_row``; None when it holds no PAD row).

    Raises:
        EmbeddingError ADDRESS_HASH_MISMATCH, PAD_ID_INVALID, INDEX_DTYPE_MISMATCH,
        DEVICE_MISMATCH, ID_OUT_OF_RANGE, OPERATOR_CONTRACT_MISMATCH, PAD_ROW_NOT_ZERO.
    """
    raw = admit_ids(
        ids,
        address_hash=config.address_hash,
        padding_idx=config.padding_idx,
        require_address=config.require_address,
    )
    if config.id_route == "copy":
        check_index_tensor(raw, what=config.role)
        if not same_device(raw.device, device):
            raw = raw.to(device, non_blocking=True)  # the declared route: an explicit copy
    else:
        check_index_tensor(raw, device=device, what=config.role)
    _check_values(raw, config, pad_row)
    return raw


def scale_lookup(rows: torch.Tensor, config: LookupConfig, *, by: str) -> torch.Tensor:
    """``rows`` times ``config.input_scale``, stamped as scaled by ``by`` (unchanged without one).

    Raises:
        EmbeddingError SCALE_APPLIED_TWICE: ``rows`` already carry a scale stamp.
    """
    if config.input_scale is None:
        return rows
    return apply_input_scale(rows, config.input_scale, by=by)


def supplied_weight(
    weight: torch.Tensor | None, _weight: torch.Tensor | None, shape: tuple[int, int]
) -> torch.Tensor | None:
    """The table a constructor was handed: ``weight`` (this package's name) or torch's ``_weight``.

    None when neither was given; otherwise the tensor, as is, after checking it is
    ``shape`` = ``(num_embeddings, embedding_dim)``.

    Example::

        >>> supplied_weight(None, torch.zeros(4, 3), (4, 3)).shape
        torch.Size([4, 3])

    Raises:
        UsageError INVALID_ARGUMENT: both were given.
        EmbeddingError SHAPE_MISMATCH: the tensor is not ``shape``.
    """
    if weight is not None and _weight is not None:
        raise UsageError(
            "INVALID_ARGUMENT",
            "both weight and _weight were given",
            value=None,
            fix="pass one of them (weight is tokembed's name for torch's _weight)",
        )
    table = _weight if weight is None else weight
    if table is not None and tuple(table.shape) != shape:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"supplied weight has shape {tuple(table.shape)}, expected {shape}",
            value=tuple(table.shape),
            fix="pass a [num_embeddings, embedding_dim] table",
        )
    return table


def table_shape(embeddings: torch.Tensor) -> tuple[int, int]:
    """``(V, d)`` of a table given to ``from_pretrained``.

    Raises:
        EmbeddingError SHAPE_MISMATCH: ``embeddings`` is not 2-D.
    """
    if embeddings.dim() != 2:
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"embeddings must be 2-D [V, d], got shape {tuple(embeddings.shape)}",
            value=tuple(embeddings.shape),
            fix="pass a [num_embeddings, embedding_dim] tensor",
        )
    rows, cols = embeddings.shape
    return int(rows), int(cols)
