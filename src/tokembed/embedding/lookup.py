"""TokenEmbedding: nn.Embedding semantics with every address contract checked.

What it checks, per batch, before the gather (the shared contract of
:mod:`tokembed.embedding.lookup_checks`, configured by a
:class:`~tokembed.embedding.lookup_config.LookupConfig`):

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
data-parallel group, because the objective's count spans every rank's batch).

The state dict is nn.Embedding's (one ``weight`` key), so either loads the other.
The sharded tables of :mod:`tokembed.parallel` take the same config and run the
same checks (``shard_input_embedding`` keeps a TokenEmbedding's contract).

Example::

    >>> emb = TokenEmbedding(8, 3, padding_idx=0)
    >>> emb(torch.tensor([[1, 4, 6, 2], [1, 5, 2, 0]])).shape
    torch.Size([2, 4, 3])
"""

from __future__ import annotations

from typing import Unpack

import torch
import torch.nn.functional as F
from torch import nn

from tokembed.embedding.addressed import AddressedIds, SupportsAddressHash
from tokembed.embedding.frequency import global_frequency_embedding
from tokembed.embedding.init import Initializer, initialize_, new_table
from tokembed.embedding.lookup_checks import (
    admit_lookup_ids,
    bind_config,
    check_finite,
    check_pad_row,
    refuse_non_finite_weight,
    refuse_nonzero_pad_row,
    scale_lookup,
)
from tokembed.embedding.lookup_config import LookupConfig, LookupPolicy, config_of
from tokembed.errors import EmbeddingError, UsageError

__all__ = ["TokenEmbedding"]


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
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        **policy: Unpack[LookupPolicy],
    ) -> None:
        super().__init__()
        self.config = LookupConfig(
            num_embeddings=num_embeddings, embedding_dim=embedding_dim, **policy
        )
        shape = (num_embeddings, embedding_dim)
        if weight is None:
            self.weight = new_table(
                *shape, padding_idx=self.config.padding_idx, dtype=dtype, device=device
            )
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
            check_finite(weight, what="supplied weight")
            self.check_pad_row()
        self.last_renormalized_rows: torch.Tensor | None = None
        # A checkpoint may have trained the PAD row: refuse it before copying it in.
        self.register_load_state_dict_pre_hook(refuse_nonzero_pad_row)
        self.register_load_state_dict_pre_hook(refuse_non_finite_weight)

    @classmethod
    def from_config(
        cls,
        config: LookupConfig,
        *,
        weight: torch.Tensor | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> TokenEmbedding:
        """Build from a validated config (``weight``, ``device``, ``dtype`` as in __init__)."""
        return cls(
            config.num_embeddings,
            config.embedding_dim,
            weight=weight,
            device=device,
            dtype=dtype,
            **config.policy(),
        )

    @classmethod
    def from_embedding(
        cls, embedding: nn.Embedding, **policy: Unpack[LookupPolicy]
    ) -> TokenEmbedding:
        """Wrap an nn.Embedding, sharing its weight Parameter and copying its options.

        ``policy`` adds or overrides fields (e.g. ``zero_pad_row=True``).
        """
        return cls.from_config(config_of(embedding, **policy), weight=embedding.weight)

    # nn.Embedding-compatible read-only attributes -----------------------------------
    num_embeddings = property(lambda self: self.config.num_embeddings)
    embedding_dim = property(lambda self: self.config.embedding_dim)
    padding_idx = property(lambda self: self.config.padding_idx)
    max_norm = property(lambda self: self.config.max_norm)
    norm_type = property(lambda self: self.config.norm_type)
    scale_grad_by_freq = property(lambda self: self.config.scale_grad_by_freq)
    sparse = property(lambda self: self.config.sparse)

    @property
    def local_padding_idx(self) -> int | None:
        """The PAD row's index in ``weight``: ``padding_idx`` (this table holds every row)."""
        return self.config.padding_idx

    def reset_parameters(self) -> None:
        """nn.Embedding's fresh initialization: N(0, 1) rows, PAD row zeroed."""
        initialize_(
            self.weight,
            Initializer(name="constructor_default"),
            padding_idx=self.config.padding_idx,
        )

    def bind_address(
        self, source: SupportsAddressHash | str, *, id_range: int | None = None
    ) -> None:
        """Bind the table to a tokenizer's address space (its ``address_hash``).

        ``id_range`` (R = max id + 1) defaults to ``source.tables.id_range`` when the
        source is a tokembed Tokenizer; R > V is refused because the tokenizer would
        emit ids the table cannot address.

        Raises:
            EmbeddingError ID_OUT_OF_RANGE: R > V.
            UsageError INVALID_ARGUMENT: malformed hash.
        """
        self.config = bind_config(self.config, source, id_range=id_range)

    def check_pad_row(self) -> None:
        """Raise PAD_ROW_NOT_ZERO when ``zero_pad_row`` holds and the PAD row is not zero."""
        pad = self.config.padding_idx
        check_pad_row(None if pad is None else self.weight.detach()[pad], self.config)

    def extra_repr(self) -> str:
        c = self.config
        text = f"{c.num_embeddings}, {c.embedding_dim}"
        for name in ("padding_idx", "max_norm", "input_scale", "count_scope", "address_hash"):
            if getattr(c, name) is not None:
                text += f", {name}={getattr(c, name)}"
        return text + (", sparse=True" if c.sparse else "")

    def forward(
        self, ids: torch.Tensor | AddressedIds, *, row_counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        c = self.config
        pad_row = self.weight.detach()[c.padding_idx] if c.zero_pad_row else None
        raw = admit_lookup_ids(ids, c, device=self.weight.device, pad_row=pad_row)
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
                raise UsageError(
                    "INVALID_ARGUMENT",
                    "row_counts is only read with count_scope='global'",
                    value=None,
                    fix="drop row_counts, or build the table with count_scope='global'",
                )
            out = F.embedding(
                raw,
                self.weight,
                c.padding_idx,
                c.max_norm,
                c.norm_type,
                c.scale_grad_by_freq,
                c.sparse,
            )
        return scale_lookup(out, c, by=type(self).__name__)

    def _record_renormalized(self, ids: torch.Tensor) -> None:
        # Rows F.embedding will rescale in place: selected and with norm > max_norm.
        # unique + boolean mask cost a second sync; only tables with max_norm pay it.
        selected = torch.unique(ids)
        norms = torch.linalg.vector_norm(
            self.weight.detach()[selected], ord=self.config.norm_type, dim=-1
        )
        self.last_renormalized_rows = selected[norms > self.config.max_norm]
