"""The single-device lookup contract, carried by every sharded table.

A sharded table holds a :class:`~tokembed.embedding.lookup_config.LookupConfig`
with the *global* shape and runs the same per-batch checks as
:class:`~tokembed.embedding.lookup.TokenEmbedding`
(:func:`~tokembed.embedding.lookup_checks.admit_lookup_ids`): address-hash
binding and stamped :class:`~tokembed.embedding.addressed.AddressedIds`, PAD
policy, the ``-1`` diagnosis, the one-hot guard, the PAD-row-zero policy on the
rank that holds the PAD row, and the input scale applied once (stamped) after
the collective. Only the options a shard cannot reproduce exactly are refused:
``sparse`` and ``scale_grad_by_freq`` (a shard would count only the positions
it owns) and, for column shards, ``max_norm`` (a row's norm spans every rank).

When ranks can disagree about a batch (each rank brings its own ids, or only
the PAD row's holder can see it is not zero) the checks run under
:func:`~tokembed.parallel.collectives.agree_on_error`, so every rank raises at
the same point instead of leaving its peers blocked in the next collective.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

import torch
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.embedding.addressed import AddressedIds, SupportsAddressHash
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_checks import (
    admit_lookup_ids,
    bind_config,
    check_pad_row,
    refuse_non_finite_weight,
    refuse_nonzero_pad_row,
)
from tokembed.embedding.lookup_config import LookupConfig, config_of
from tokembed.errors import ParallelError, UsageError
from tokembed.parallel.collectives import agree_on_error

__all__ = ["ShardedLookup", "require_shardable", "table_source"]


def _refuse_options(sparse: bool, scale_grad_by_freq: bool, max_norm: float | None) -> None:
    if sparse or scale_grad_by_freq or max_norm is not None:
        raise UsageError(
            "INVALID_ARGUMENT",
            "this sharded lookup supports neither sparse=True nor scale_grad_by_freq"
            + ("" if max_norm is None else " nor max_norm (a row norm spans every rank)"),
            value=(sparse, scale_grad_by_freq, max_norm),
            fix="build the table with sparse=False and scale_grad_by_freq=False"
            + ("" if max_norm is None else "; use row sharding for max_norm tables"),
        )


def require_shardable(config: LookupConfig, *, allow_max_norm: bool) -> LookupConfig:
    """Return ``config`` if a sharded lookup reproduces it exactly.

    Raises:
        UsageError INVALID_ARGUMENT: sparse=True or scale_grad_by_freq (a shard
            would count only the positions it owns), or max_norm where the
            schedule cannot renormalize a whole row.
    """
    _refuse_options(
        config.sparse, config.scale_grad_by_freq, None if allow_max_norm else config.max_norm
    )
    return config


def table_source(emb: object, *, allow_max_norm: bool) -> tuple[LookupConfig, torch.Tensor]:
    """The config and the full ``[V, d]`` weight of a table to shard.

    ``emb`` is an nn.Embedding (its five options become the config) or a
    TokenEmbedding (its whole config, contract included, is kept).

    Raises:
        ParallelError NOT_AN_EMBEDDING: anything else.
        UsageError INVALID_ARGUMENT: options a shard cannot reproduce (see
            :func:`require_shardable`).
    """
    if isinstance(emb, nn.Embedding):
        # Refuse before config_of: its count-scope check would name the wrong problem.
        max_norm = None if allow_max_norm else emb.max_norm
        _refuse_options(emb.sparse, emb.scale_grad_by_freq, max_norm)
    elif not isinstance(emb, TokenEmbedding):
        raise ParallelError(
            "NOT_AN_EMBEDDING",
            f"expected an nn.Embedding or a TokenEmbedding, got {type(emb).__name__}",
            value=type(emb).__name__,
            fix="shard the model's input embedding module itself",
        )
    config = require_shardable(config_of(emb), allow_max_norm=allow_max_norm)
    return config, emb.weight


class ShardedLookup:
    """The contract half of a sharded table: its config, checks and nn.Embedding attributes.

    Subclasses (nn.Modules) set ``self.config`` before anything reads it, set
    ``self.group`` and ``self.weight``, define ``local_padding_idx`` (the PAD
    row's index in ``weight``, None where this rank holds none) and call
    :meth:`_guard_pad_row_on_load` once.
    """

    config: LookupConfig
    group: ProcessGroup | None
    weight: nn.Parameter

    @property
    def num_embeddings(self) -> int:
        return self.config.num_embeddings

    @property
    def embedding_dim(self) -> int:
        return self.config.embedding_dim

    @property
    def padding_idx(self) -> int | None:
        """The global PAD id (a row of the global table)."""
        return self.config.padding_idx

    @property
    def max_norm(self) -> float | None:
        return self.config.max_norm

    @property
    def norm_type(self) -> float:
        return self.config.norm_type

    @property
    @abstractmethod
    def local_padding_idx(self) -> int | None:
        """The PAD row's index among this rank's rows, None when it holds none; each table
        defines it from its own layout (a row interval, or every row of a column shard)."""

    def _held_pad_row(self) -> torch.Tensor | None:
        pad = self.local_padding_idx
        return None if pad is None else self.weight.detach()[pad]

    def _guard_pad_row_on_load(self) -> None:
        assert isinstance(self, nn.Module)
        self.register_load_state_dict_pre_hook(refuse_nonzero_pad_row)
        self.register_load_state_dict_pre_hook(refuse_non_finite_weight)

    def bind_address(
        self, source: SupportsAddressHash | str, *, id_range: int | None = None
    ) -> None:
        """Bind the table to a tokenizer's address space, as TokenEmbedding.bind_address.

        Raises:
            EmbeddingError ID_OUT_OF_RANGE: the tokenizer's id range exceeds V.
            UsageError INVALID_ARGUMENT: malformed hash.
        """
        self.config = bind_config(self.config, source, id_range=id_range)

    def check_pad_row(self) -> None:
        """Raise PAD_ROW_NOT_ZERO when ``zero_pad_row`` holds and the held PAD row is not zero."""
        check_pad_row(self._held_pad_row(), self.config)

    def _admit(
        self,
        ids: torch.Tensor | AddressedIds,
        *,
        agree: bool,
        also: Callable[[torch.Tensor], None] | None = None,
    ) -> torch.Tensor:
        """The raw ids after the lookup contract (and ``also``), agreed over the group if asked."""
        admitted: list[torch.Tensor] = []

        def check() -> None:
            raw = admit_lookup_ids(
                ids, self.config, device=self.weight.device, pad_row=self._held_pad_row()
            )
            if also is not None:
                also(raw)
            admitted.append(raw)

        if agree:
            agree_on_error(check, group=self.group)
        else:
            check()
        return admitted[0]
