"""TokenEmbedding: nn.Embedding semantics with every address contract checked.

What it checks, per batch, before the gather (spec 0x02A/0x02B, 0x03B, 0x05, 0x0D):

* ids are int32/int64 (not strings, floats, bools, one-hot selectors),
  inside [0, V), on the table's device (or routed there by a declared
  ``id_route="copy"``) — INDEX_DTYPE_MISMATCH, ID_OUT_OF_RANGE, DEVICE_MISMATCH,
  OPERATOR_CONTRACT_MISMATCH; a ``-1`` is named PAD_ID_INVALID because it is the
  LLaMA-style PAD convention, not a row;
* a table bound to a tokenizer's address hash refuses an :class:`AddressedIds`
  batch stamped with another hash (and, with ``require_address=True``, any
  unstamped tensor) — ADDRESS_HASH_MISMATCH;
* the batch's PAD id agrees with ``padding_idx``, and with ``zero_pad_row=True``
  the PAD row is still zero — PAD_ID_INVALID, PAD_ROW_NOT_ZERO.

What it changes: nothing beyond nn.Embedding, except that ``input_scale`` is
applied once and stamped (:mod:`tokembed.embedding.stamps`), that ``max_norm``
reports the rows its forward renormalized in ``last_renormalized_rows``, and
that ``scale_grad_by_freq`` needs a declared count scope ("invocation": PyTorch's
per-call counts; "global": counts the caller passes, e.g. all-reduced over a
data-parallel group, spec 0x04A).

Cost: the range check, the one-hot guard and the PAD-row check share one fused
``aminmax`` and one host read; nothing is copied. The state dict is nn.Embedding's
(one ``weight`` key), so either loads the other.

Example::

    >>> emb = TokenEmbedding(8, 3, padding_idx=0)
    >>> emb(torch.tensor([[1, 4, 6, 2], [1, 5, 2, 0]])).shape
    torch.Size([2, 4, 3])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.addressed import (
    AddressedIds,
    SupportsAddressHash,
    admit_ids,
    check_address_hash,
)
from tokembed.embedding.contracts import check_index_tensor, raise_out_of_range, same_device
from tokembed.embedding.frequency import CountScope, global_frequency_embedding
from tokembed.embedding.stamps import apply_input_scale
from tokembed.errors import EmbeddingError, MeasureError, UsageError

__all__ = ["CountScope", "IdRoute", "LookupConfig", "TokenEmbedding"]

IdRoute = Literal["refuse", "copy"]


def _invalid(message: str, value: object, fix: str) -> UsageError:
    return UsageError("INVALID_ARGUMENT", message, value=value, fix=fix)


@dataclass(frozen=True, kw_only=True)
class LookupConfig:
    """Every policy of one checked lookup table; validated here and nowhere else.

    Fields mirror nn.Embedding (``padding_idx`` … ``sparse``) plus: ``zero_pad_row``
    (the PAD row must stay zero, checked every forward), ``count_scope`` (required
    with ``scale_grad_by_freq``), ``input_scale`` (content multiplier such as
    sqrt(d_model), applied once), ``address_hash`` / ``require_address`` (tokenizer
    binding), ``id_route`` ("refuse" ids on another device, or "copy" them) and
    ``role`` (what the ids address, e.g. "position_ids": the name errors use).

    Raises:
        UsageError INVALID_ARGUMENT, EmbeddingError PAD_ID_INVALID,
        FREQ_COUNT_SCOPE_UNDECLARED, SPARSE_WITH_FREQ_SCALING.
    """

    num_embeddings: int
    embedding_dim: int
    padding_idx: int | None = None
    zero_pad_row: bool = False
    max_norm: float | None = None
    norm_type: float = 2.0
    scale_grad_by_freq: bool = False
    count_scope: CountScope | None = None
    sparse: bool = False
    input_scale: float | None = None
    address_hash: str | None = None
    require_address: bool = False
    id_route: IdRoute = "refuse"
    role: str = "ids"

    def __post_init__(self) -> None:
        for name in ("num_embeddings", "embedding_dim"):
            size = getattr(self, name)
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise _invalid(f"{name} must be a positive int, got {size!r}", size, "pass >= 1")
        pad = self.padding_idx
        if pad is not None and not 0 <= pad < self.num_embeddings:
            raise EmbeddingError(
                "PAD_ID_INVALID",
                f"padding_idx={pad} is not a row of a {self.num_embeddings}-row table"
                + (" (-1 is a tokenizer PAD convention, not an address)" if pad == -1 else ""),
                value=pad,
                fix="pick a real row for PAD (often 0) and map the tokenizer's PAD to it",
            )
        if self.zero_pad_row and pad is None:
            raise _invalid("zero_pad_row=True needs a padding_idx", None, "set padding_idx")
        if self.max_norm is not None and not (math.isfinite(self.max_norm) and self.max_norm > 0):
            raise _invalid(f"max_norm must be > 0, got {self.max_norm}", self.max_norm, "or None")
        if not (math.isfinite(self.norm_type) and self.norm_type > 0):
            raise _invalid(f"norm_type must be > 0, got {self.norm_type}", self.norm_type, "use 2")
        if self.scale_grad_by_freq and self.sparse:
            raise EmbeddingError(
                "SPARSE_WITH_FREQ_SCALING",
                "PyTorch's sparse embedding backward rejects scale_grad_by_freq",
                value=(True, True),
                fix="drop sparse=True or scale_grad_by_freq=True",
            )
        if self.scale_grad_by_freq and self.count_scope is None:
            raise EmbeddingError(
                "FREQ_COUNT_SCOPE_UNDECLARED",
                "scale_grad_by_freq divides by a row count, but whose count is undeclared",
                value=None,
                fix="pass count_scope='invocation' (this call's batch) or 'global' (+ row_counts)",
            )
        if self.count_scope not in (None, "invocation", "global"):
            raise _invalid(f"unknown count_scope {self.count_scope!r}", self.count_scope, "")
        if self.count_scope is not None and not self.scale_grad_by_freq:
            raise _invalid("count_scope without scale_grad_by_freq", self.count_scope, "drop it")
        if self.input_scale is not None and not (
            math.isfinite(self.input_scale) and self.input_scale > 0
        ):
            raise _invalid(f"input_scale must be > 0, got {self.input_scale}", self.input_scale, "")
        if self.address_hash is not None:
            check_address_hash(self.address_hash)
        if self.require_address and self.address_hash is None:
            raise _invalid("require_address=True needs an address_hash", None, "bind one")
        if self.id_route not in ("refuse", "copy"):
            raise _invalid(f"unknown id_route {self.id_route!r}", self.id_route, "refuse|copy")


def _refuse_nonzero_pad_row(module: TokenEmbedding, state_dict: Any, prefix: str, *_: Any) -> None:
    saved = state_dict.get(prefix + "weight")
    c = module.config
    # Shape problems are left to load_state_dict's own SHAPE error.
    pad = c.padding_idx
    if not (c.zero_pad_row and pad is not None and isinstance(saved, torch.Tensor)):
        return
    if saved.dim() == 2 and pad < saved.shape[0] and bool(saved[pad].any()):
        module._raise_pad_row()


class TokenEmbedding(nn.Module):
    """A checked ``[V, d]`` lookup table with nn.Embedding semantics and state-dict keys.

    ``forward(ids | AddressedIds, *, row_counts=None) -> [*ids.shape, d]``; see the
    module docstring for every check. Attributes ``num_embeddings``,
    ``embedding_dim``, ``padding_idx``, ``max_norm``, ``norm_type``,
    ``scale_grad_by_freq`` and ``sparse`` read like nn.Embedding's; ``config`` holds
    the full :class:`LookupConfig`; ``last_renormalized_rows`` (int64 ids, or None
    without ``max_norm``) names the rows the latest forward rescaled in place.

    Example::

        >>> emb = TokenEmbedding(3, 2, weight=torch.tensor([[1.0, 0], [2, 0], [0, 1]]))
        >>> emb(torch.tensor([0, 2, 0])).tolist()
        [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]

    Raises (forward): INDEX_DTYPE_MISMATCH, ID_OUT_OF_RANGE, DEVICE_MISMATCH,
    ADDRESS_HASH_MISMATCH, PAD_ID_INVALID, PAD_ROW_NOT_ZERO,
    OPERATOR_CONTRACT_MISMATCH, FREQ_COUNT_SCOPE_UNDECLARED (all EmbeddingError).
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        *,
        weight: torch.Tensor | None = None,
        padding_idx: int | None = None,
        zero_pad_row: bool = False,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        count_scope: CountScope | None = None,
        sparse: bool = False,
        input_scale: float | None = None,
        address_hash: str | None = None,
        require_address: bool = False,
        id_route: IdRoute = "refuse",
        role: str = "ids",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.config = LookupConfig(
            num_embeddings=num_embeddings,
            embedding_dim=embedding_dim,
            padding_idx=padding_idx,
            zero_pad_row=zero_pad_row,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            count_scope=count_scope,
            sparse=sparse,
            input_scale=input_scale,
            address_hash=address_hash,
            require_address=require_address,
            id_route=id_route,
            role=role,
        )
        shape = (num_embeddings, embedding_dim)
        if weight is None:
            self.weight = nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            if tuple(weight.shape) != shape:
                raise EmbeddingError(
                    "SHAPE_MISMATCH",
                    f"supplied weight has shape {tuple(weight.shape)}, expected {shape}",
                    value=tuple(weight.shape),
                    fix="pass a [num_embeddings, embedding_dim] table",
                )
            # Like nn.Embedding(_weight=...): the tensor is used as is (no copy, PAD row kept).
            self.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight)
            self.check_pad_row()
        self.last_renormalized_rows: torch.Tensor | None = None
        # A checkpoint may carry a nonzero PAD row (0x03B): refuse it before copying it in.
        self.register_load_state_dict_pre_hook(_refuse_nonzero_pad_row)

    @classmethod
    def from_config(
        cls, config: LookupConfig, *, weight: torch.Tensor | None = None, **kwargs: Any
    ) -> TokenEmbedding:
        """Build from a validated config (``weight``, ``device``, ``dtype`` as in __init__)."""
        policy = {f.name: getattr(config, f.name) for f in fields(config)}
        v, d = policy.pop("num_embeddings"), policy.pop("embedding_dim")
        return cls(v, d, weight=weight, **kwargs, **policy)

    @classmethod
    def from_embedding(cls, embedding: nn.Embedding, **policy: Any) -> TokenEmbedding:
        """Wrap an nn.Embedding, sharing its weight Parameter and copying its options."""
        options: dict[str, Any] = {
            "padding_idx": embedding.padding_idx,
            "max_norm": embedding.max_norm,
            "norm_type": embedding.norm_type,
            "scale_grad_by_freq": embedding.scale_grad_by_freq,
            "sparse": embedding.sparse,
        }
        options.update(policy)
        return cls(
            embedding.num_embeddings, embedding.embedding_dim, weight=embedding.weight, **options
        )

    # nn.Embedding-compatible read-only attributes -----------------------------------
    num_embeddings = property(lambda self: self.config.num_embeddings)
    embedding_dim = property(lambda self: self.config.embedding_dim)
    padding_idx = property(lambda self: self.config.padding_idx)
    max_norm = property(lambda self: self.config.max_norm)
    norm_type = property(lambda self: self.config.norm_type)
    scale_grad_by_freq = property(lambda self: self.config.scale_grad_by_freq)
    sparse = property(lambda self: self.config.sparse)

    def reset_parameters(self) -> None:
        """nn.Embedding's fresh initialization: N(0, 1) rows, PAD row zeroed."""
        nn.init.normal_(self.weight)
        if self.config.padding_idx is not None:
            with torch.no_grad():
                self.weight[self.config.padding_idx].fill_(0)

    def bind_address(
        self, source: SupportsAddressHash | str, *, id_range: int | None = None
    ) -> None:
        """Bind the table to a tokenizer's address space (its ``address_hash``).

        ``id_range`` (R = max id + 1) defaults to ``source.tables.id_range`` when the
        source is a tokembed Tokenizer; R > V is refused because the tokenizer would
        emit ids the table cannot address.

        Raises:
            MeasureError VOCAB_BELOW_ID_RANGE: R > V.
            UsageError INVALID_ARGUMENT: malformed hash.
        """
        address_hash = source if isinstance(source, str) else source.address_hash
        if id_range is None and not isinstance(source, str):
            id_range = getattr(getattr(source, "tables", None), "id_range", None)
        if id_range is not None and id_range > self.config.num_embeddings:
            raise MeasureError(
                "VOCAB_BELOW_ID_RANGE",
                f"the tokenizer emits ids up to {id_range - 1} but the table has"
                f" {self.config.num_embeddings} rows",
                value=id_range,
                fix=f"allocate at least {id_range} rows (grow the table)",
            )
        self.config = replace(self.config, address_hash=address_hash)

    def check_pad_row(self) -> None:
        """Raise PAD_ROW_NOT_ZERO when ``zero_pad_row`` holds and the PAD row is not zero."""
        if self.config.zero_pad_row and bool(self.weight[self.config.padding_idx].any()):
            self._raise_pad_row()

    def _raise_pad_row(self) -> None:
        p = self.config.padding_idx
        raise EmbeddingError(
            "PAD_ROW_NOT_ZERO",
            f"row {p} (padding_idx) must be zero under zero_pad_row=True but is not"
            " (supplied weight, checkpoint, initializer or optimizer wrote it)",
            value=p,
            fix="zero the PAD row after loading (weight[padding_idx] = 0) or drop zero_pad_row",
        )

    def extra_repr(self) -> str:
        c = self.config
        text = f"{c.num_embeddings}, {c.embedding_dim}"
        for name in ("padding_idx", "max_norm", "input_scale", "count_scope", "address_hash"):
            if getattr(c, name) is not None:
                text += f", {name}={getattr(c, name)}"
        return text + (", sparse=True" if c.sparse else "")

    # forward ------------------------------------------------------------------------
    def _check_values(self, ids: torch.Tensor) -> None:
        c = self.config
        if ids.numel() == 0:
            return
        # One fused aminmax + one host read: range, -1 and one-hot guards all use it, and
        # the PAD-row flag rides along (stack) so zero_pad_row costs no second sync.
        low, high = torch.aminmax(ids)
        parts = [low, high]
        if c.zero_pad_row:
            parts.append(self.weight.detach()[c.padding_idx].any().to(ids.dtype))
        values = torch.stack(parts).tolist()
        low_v, high_v = values[0], values[1]
        if low_v < 0 or high_v >= c.num_embeddings:
            try:
                raise_out_of_range(ids, c.num_embeddings, low=low_v, high=high_v, what=c.role)
            except EmbeddingError as error:
                if error.value != -1:
                    raise
                raise EmbeddingError(
                    "PAD_ID_INVALID",
                    f"{error.message.split(' is outside')[0]}: -1 is a tokenizer PAD"
                    " convention (LLaMA-style), not a row address",
                    value=-1,
                    fix=f"replace -1 with padding_idx ({c.padding_idx}) and mask those positions",
                ) from error
        if c.zero_pad_row and values[2]:
            self._raise_pad_row()
        # Values in {0, 1} along a last axis of width V: one-hot selectors (0x04 "wrong:
        # nn.Embedding(one_hot(ids))"), confirmed by row sums (a second pass, only then).
        looks_one_hot = ids.dim() >= 2 and ids.shape[-1] == c.num_embeddings > 2 and high_v <= 1
        if looks_one_hot and bool((ids.sum(-1) == 1).all()):
            raise EmbeddingError(
                "OPERATOR_CONTRACT_MISMATCH",
                f"ids of shape {tuple(ids.shape)} look like one-hot selectors over V ="
                f" {c.num_embeddings}; a lookup takes the ids themselves",
                value=tuple(ids.shape),
                fix="pass selectors.argmax(-1), or use one_hot_lookup for the conceptual form",
            )

    def forward(
        self, ids: torch.Tensor | AddressedIds, *, row_counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        c = self.config
        raw = admit_ids(
            ids,
            address_hash=c.address_hash,
            padding_idx=c.padding_idx,
            require_address=c.require_address,
        )
        device = self.weight.device
        if c.id_route == "copy":
            check_index_tensor(raw, what=c.role)
            if not same_device(raw.device, device):
                raw = raw.to(device, non_blocking=True)  # the declared route: an explicit copy
        else:
            check_index_tensor(raw, device=device, what=c.role)
        self._check_values(raw)
        if c.max_norm is not None:
            self._record_renormalized(raw)
        if c.count_scope == "global":
            out = global_frequency_embedding(
                raw,
                self.weight,
                row_counts,
                padding_idx=c.padding_idx,
                max_norm=c.max_norm,
                norm_type=c.norm_type,
            )
        else:
            if row_counts is not None:
                raise _invalid("row_counts is only read with count_scope='global'", None, "")
            out = F.embedding(
                raw,
                self.weight,
                c.padding_idx,
                c.max_norm,
                c.norm_type,
                c.scale_grad_by_freq,
                c.sparse,
            )
        if c.input_scale is not None:
            out = apply_input_scale(out, c.input_scale, by=type(self).__name__)
        return out

    def _record_renormalized(self, ids: torch.Tensor) -> None:
        # Rows F.embedding will rescale in place: selected and norm > max_norm (0x03B).
        # unique + boolean mask cost a second sync; only tables with max_norm pay it.
        selected = torch.unique(ids)
        norms = torch.linalg.vector_norm(
            self.weight.detach()[selected], ord=self.config.norm_type, dim=-1
        )
        self.last_renormalized_rows = selected[norms > self.config.max_norm]
