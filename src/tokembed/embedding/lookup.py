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

It is an ``nn.Embedding`` (a subclass, so ``isinstance`` checks and
``transformers``' ``resize_token_embeddings`` accept it) with nn.Embedding's
constructor, positional arguments included, ``from_pretrained``, ``_weight`` /
``_freeze``, a forward argument named ``input``, and settable ``padding_idx``,
``max_norm``, ``norm_type``, ``scale_grad_by_freq`` and ``sparse``. The id range
is the current weight's row count. The state dict is nn.Embedding's (one
``weight`` key), so either loads the other. Under torch.compile and torch.export the
value checks are traced tensor asserts (see
:data:`~tokembed.embedding.lookup_config.CheckMode`); torch.jit.trace checks the
example input and warns that its graph cannot hold them; ``torch.jit.script`` is not
supported (the forward takes :class:`AddressedIds` and a keyword-only argument,
which TorchScript cannot type); trace or export instead.
The sharded tables of :mod:`tokembed.parallel` take the same config and run the
same checks (``shard_input_embedding`` keeps a TokenEmbedding's contract).

Example::

    >>> emb = TokenEmbedding(8, 3, padding_idx=0)
    >>> emb(torch.tensor([[1, 4, 6, 2], [1, 5, 2, 0]])).shape
    torch.Size([2, 4, 3])
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Unpack

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
    supplied_weight,
    table_shape,
)
from tokembed.embedding.lookup_config import (
    LookupConfig,
    LookupPolicy,
    TablePolicy,
    config_of,
    normalize_padding_idx,
)
from tokembed.errors import UsageError

__all__ = ["TokenEmbedding"]


def _option(name: str) -> property:
    # nn.Embedding's plain attributes, backed by the validated config: setting one
    # revalidates the whole config, so a table cannot hold an invalid combination.
    def get(self: TokenEmbedding) -> Any:
        return getattr(self.config, name)

    def set_(self: TokenEmbedding, value: Any) -> None:
        self._set_option(name, value)

    return property(get, set_, doc=f"nn.Embedding's ``{name}`` (settable).")


class TokenEmbedding(nn.Embedding):
    """A checked ``[V, d]`` lookup table: an nn.Embedding with its address contract checked.

    ``TokenEmbedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
    norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False,
    device=None, dtype=None, *, weight=None, **policy)``: nn.Embedding's signature,
    with the same meanings, plus the keyword-only fields of :class:`LookupPolicy`.
    ``forward(input | AddressedIds, *, row_counts=None) -> [*input.shape, d]``; see the
    module docstring for every check. ``config`` holds the full :class:`LookupConfig`;
    ``last_renormalized_rows`` (int64 ids, or None without ``max_norm`` and under
    compile, export and trace) names the rows the latest forward rescaled in place.

    Example::

        >>> emb = TokenEmbedding(3, 2, _weight=torch.tensor([[1.0, 0], [2, 0], [0, 1]]))
        >>> emb(torch.tensor([0, 2, 0])).tolist()
        [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]

    Raises (forward): INDEX_DTYPE_MISMATCH, ID_OUT_OF_RANGE, DEVICE_MISMATCH,
    ADDRESS_HASH_MISMATCH, PAD_ID_INVALID, PAD_ROW_NOT_ZERO,
    OPERATOR_CONTRACT_MISMATCH, FREQ_COUNT_SCOPE_UNDECLARED (all EmbeddingError, each
    also the built-in type torch raises there, e.g. IndexError for ranges).
    """

    config: LookupConfig

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: torch.Tensor | None = None,
        _freeze: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        weight: torch.Tensor | None = None,
        **policy: Unpack[TablePolicy],
    ) -> None:
        # nn.Embedding.__init__ is skipped on purpose: it assigns the options one by one,
        # which here are properties over one validated config.
        nn.Module.__init__(self)
        shape = (num_embeddings, embedding_dim)
        weight = supplied_weight(weight, _weight, shape)
        if scale_grad_by_freq and policy.get("count_scope") is None:
            policy["count_scope"] = "invocation"  # nn.Embedding's meaning: this call's counts
        self.config = LookupConfig(
            num_embeddings=num_embeddings,
            embedding_dim=embedding_dim,
            padding_idx=normalize_padding_idx(padding_idx, num_embeddings),
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
            **policy,
        )
        if weight is None:
            self.weight = new_table(
                *shape, padding_idx=self.config.padding_idx, dtype=dtype, device=device
            )
        else:
            # Like nn.Embedding(_weight=...): the tensor is used as is (no copy, PAD row kept).
            if not isinstance(weight, nn.Parameter):
                # requires_grad decided here: an integer table cannot require gradients.
                weight = nn.Parameter(weight, requires_grad=not _freeze)
            check_finite(weight, what="supplied weight")
            self.weight = weight
            self.check_pad_row()
        if _freeze:
            self.weight.requires_grad_(False)
        self.last_renormalized_rows: torch.Tensor | None = None
        # A checkpoint may have trained the PAD row: refuse it before copying it in.
        self.register_load_state_dict_pre_hook(refuse_nonzero_pad_row)
        self.register_load_state_dict_pre_hook(refuse_non_finite_weight)

    @classmethod
    def from_pretrained(
        cls,
        embeddings: torch.Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        **policy: Unpack[TablePolicy],
    ) -> TokenEmbedding:
        """nn.Embedding.from_pretrained: a table over ``embeddings`` (shared, not copied).

        Example::

            >>> TokenEmbedding.from_pretrained(torch.eye(3))(torch.tensor([2])).tolist()
            [[0.0, 0.0, 1.0]]

        Raises:
            EmbeddingError SHAPE_MISMATCH: ``embeddings`` is not 2-D.
        """
        rows, cols = table_shape(embeddings)
        return cls(
            rows,
            cols,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight=embeddings,
            _freeze=freeze,
            **policy,
        )

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

    # nn.Embedding's attributes, settable as there ----------------------------------
    num_embeddings = _option("num_embeddings")
    embedding_dim = _option("embedding_dim")
    padding_idx = _option("padding_idx")
    max_norm = _option("max_norm")
    norm_type = _option("norm_type")
    scale_grad_by_freq = _option("scale_grad_by_freq")
    sparse = _option("sparse")

    def _set_option(self, name: str, value: Any) -> None:
        changes: dict[str, Any] = {name: value}
        if name == "padding_idx":
            changes[name] = normalize_padding_idx(value, self.config.num_embeddings)
        elif name == "scale_grad_by_freq":
            # nn.Embedding's meaning (this call's counts) unless a scope was declared.
            scope = self.config.count_scope
            changes["count_scope"] = (scope or "invocation") if value else None
        self.config = replace(self.config, **changes)

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
        # nn.Embedding's form first, then this table's own policies.
        c = self.config
        text = f"{c.num_embeddings}, {c.embedding_dim}"
        if c.padding_idx is not None:
            text += f", padding_idx={c.padding_idx}"
        if c.max_norm is not None:
            text += f", max_norm={c.max_norm}"
        if c.norm_type != 2:
            text += f", norm_type={c.norm_type}"
        if c.scale_grad_by_freq:
            text += ", scale_grad_by_freq=True"
        if c.sparse:
            text += ", sparse=True"
        for name in ("input_scale", "count_scope", "address_hash"):
            if getattr(c, name) is not None and (name, getattr(c, name)) != (
                "count_scope",
                "invocation",
            ):
                text += f", {name}={getattr(c, name)}"
        if c.checks != "auto":
            text += f", checks={c.checks!r}"
        return text

    def _live_config(self) -> LookupConfig:
        # The id range is the current weight's: a larger table assigned after
        # construction (weight.data = ..., as resize_token_embeddings does) addresses
        # its new rows at once.
        c = self.config
        rows, cols = self.weight.shape
        if (rows, cols) == (c.num_embeddings, c.embedding_dim):
            return c
        return replace(c, num_embeddings=rows, embedding_dim=cols)

    def forward(
        self, input: torch.Tensor | AddressedIds, *, row_counts: torch.Tensor | None = None
    ) -> torch.Tensor:
        c = self._live_config()
        pad_row = self.weight.detach()[c.padding_idx] if c.zero_pad_row else None
        raw = admit_lookup_ids(input, c, device=self.weight.device, pad_row=pad_row)
        if c.max_norm is not None:
            self._record_renormalized(raw, c)
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

    def _record_renormalized(self, ids: torch.Tensor, c: LookupConfig) -> None:
        # Rows F.embedding will rescale in place: selected and with norm > max_norm.
        # unique + boolean mask cost a second sync; only tables with max_norm pay it.
        # Their sizes depend on values, so traced graphs (compile, export, trace) and
        # value-less tensors do not record them.
        if torch.compiler.is_compiling() or torch.jit.is_tracing():
            return
        if ids.device.type == "meta" or torch._C._functorch.is_batchedtensor(ids):
            self.last_renormalized_rows = None
            return
        assert c.max_norm is not None
        selected = torch.unique(ids)
        norms = torch.linalg.vector_norm(self.weight.detach()[selected], ord=c.norm_type, dim=-1)
        self.last_renormalized_rows = selected[norms > c.max_norm]
