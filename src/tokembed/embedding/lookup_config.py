"""LookupConfig: every policy of one checked lookup table, validated in one place.

The same frozen object configures the single-device
:class:`~tokembed.embedding.lookup.TokenEmbedding` and every sharded table of
:mod:`tokembed.parallel`, so sharding a table cannot drop its contract: PAD
policy, input scale, tokenizer binding and the role named in errors travel
with the config. :class:`LookupPolicy` is the typed keyword form of the same
fields (everything but the shape), used by constructors that take
``**policy``; :func:`config_of` reads the config of an existing table.

Example::

    >>> c = LookupConfig(num_embeddings=8, embedding_dim=3, padding_idx=0, zero_pad_row=True)
    >>> c.policy()["padding_idx"]
    0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal, TypedDict, Unpack

from tokembed.embedding.addressed import check_address_hash
from tokembed.embedding.frequency import CountScope
from tokembed.errors import EmbeddingError, UsageError, require_choice

if TYPE_CHECKING:
    from torch import nn

__all__ = [
    "CheckMode",
    "IdRoute",
    "LookupConfig",
    "LookupPolicy",
    "TablePolicy",
    "check_sparse_options",
    "config_of",
    "normalize_padding_idx",
]

IdRoute = Literal["refuse", "copy"]
# How the checks that need the ids' values run: "auto" reads them back once per batch
# and raises coded errors in eager mode, and emits traceable tensor asserts
# (torch._assert_async) under torch.compile and torch.export;
# "async" emits those asserts in eager mode too (no host read); "off" leaves only
# the checks that need no values (type, dtype, device), as nn.Embedding.
CheckMode = Literal["auto", "async", "off"]


def normalize_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    """nn.Embedding's reading of ``padding_idx``: a negative k names row V + k.

    Example::

        >>> normalize_padding_idx(-1, 8)
        7

    Raises:
        EmbeddingError PAD_ID_INVALID: outside [-V, V) (torch asserts the same range).
    """
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise EmbeddingError(
            "PAD_ID_INVALID",
            f"padding_idx={padding_idx} is not a row of a {num_embeddings}-row table",
            value=padding_idx,
            fix="pick a real row for PAD (often 0; a negative k means row V + k)",
        )
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def check_sparse_options(*, sparse: bool, scale_grad_by_freq: bool) -> None:
    """Refuse sparse gradients with frequency scaling before any backward runs.

    torch's sparse embedding backward rejects scale_grad_by_freq (it fails at the first
    backward, not at construction); and the count is rank-local anyway (it counts one
    rank's batch), so it needs its own verified reduction. :class:`LookupConfig` and
    :func:`~tokembed.embedding.gradients.admit_gradient` both refuse the pair here.

    Example::

        >>> check_sparse_options(sparse=True, scale_grad_by_freq=False)

    Raises:
        EmbeddingError SPARSE_WITH_FREQ_SCALING: both are set.
    """
    if sparse and scale_grad_by_freq:
        raise EmbeddingError(
            "SPARSE_WITH_FREQ_SCALING",
            "sparse=True cannot be combined with scale_grad_by_freq=True: PyTorch's sparse"
            " embedding backward rejects it",
            value=(sparse, scale_grad_by_freq),
            fix="drop sparse=True or scale_grad_by_freq=True",
        )


def _invalid(message: str, value: object, fix: str) -> UsageError:
    return UsageError("INVALID_ARGUMENT", message, value=value, fix=fix)


class TablePolicy(TypedDict, total=False):
    """The policy fields nn.Embedding lacks, as keyword arguments (all optional)."""

    zero_pad_row: bool
    count_scope: CountScope | None
    input_scale: float | None
    address_hash: str | None
    require_address: bool
    id_route: IdRoute
    role: str
    checks: CheckMode
    name_pad_convention: bool
    one_hot_guard: bool


class LookupPolicy(TablePolicy, total=False):
    """The policy fields of :class:`LookupConfig` as keyword arguments (all optional):
    nn.Embedding's five options plus :class:`TablePolicy`."""

    padding_idx: int | None
    max_norm: float | None
    norm_type: float
    scale_grad_by_freq: bool
    sparse: bool


@dataclass(frozen=True, kw_only=True)
class LookupConfig:
    """Every policy of one checked lookup table; validated here and nowhere else.

    Fields mirror nn.Embedding (``padding_idx`` … ``sparse``) plus: ``zero_pad_row``
    (the PAD row must stay zero, checked every forward), ``count_scope`` (required
    with ``scale_grad_by_freq``), ``input_scale`` (content multiplier such as
    sqrt(d_model), applied once), ``address_hash`` / ``require_address`` (tokenizer
    binding), ``id_route`` ("refuse" ids on another device, or "copy" them) and
    ``role`` (what the ids address, e.g. "position_ids": the name errors use),
    ``checks`` (:data:`CheckMode`), ``name_pad_convention`` (a ``-1`` id is refused
    as PAD_ID_INVALID, naming the LLaMA-style PAD convention, rather than as a plain
    ID_OUT_OF_RANGE) and ``one_hot_guard`` (refuse an integer batch whose last axis
    has width V and holds exactly one 1 per row: one-hot selectors passed as ids;
    off by default because such a batch is also a valid id batch).

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
    checks: CheckMode = "auto"
    name_pad_convention: bool = True
    one_hot_guard: bool = False

    def __post_init__(self) -> None:
        for name in ("num_embeddings", "embedding_dim"):
            size = getattr(self, name)
            # nn.Embedding accepts empty tables (zero rows or zero width).
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise _invalid(f"{name} must be an int >= 0, got {size!r}", size, "pass >= 0")
        self._check_pad()
        # As torch: max_norm=0 renormalizes every selected row to zero; norm_type=inf is
        # the max-abs norm.
        if self.max_norm is not None and not self.max_norm >= 0:
            raise _invalid(f"max_norm must be >= 0, got {self.max_norm}", self.max_norm, "or None")
        if not self.norm_type > 0:
            raise _invalid(f"norm_type must be > 0, got {self.norm_type}", self.norm_type, "use 2")
        require_choice(self.checks, ("auto", "async", "off"), "checks mode", fix="auto|async|off")
        self._check_frequency()
        if self.input_scale is not None and not (
            math.isfinite(self.input_scale) and self.input_scale > 0
        ):
            raise _invalid(f"input_scale must be > 0, got {self.input_scale}", self.input_scale, "")
        if self.address_hash is not None:
            check_address_hash(self.address_hash)
        if self.require_address and self.address_hash is None:
            raise _invalid("require_address=True needs an address_hash", None, "bind one")
        require_choice(self.id_route, ("refuse", "copy"), "id_route", fix="refuse|copy")

    def _check_pad(self) -> None:
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

    def _check_frequency(self) -> None:
        check_sparse_options(sparse=self.sparse, scale_grad_by_freq=self.scale_grad_by_freq)
        if self.scale_grad_by_freq and self.count_scope is None:
            raise EmbeddingError(
                "FREQ_COUNT_SCOPE_UNDECLARED",
                "scale_grad_by_freq divides by a row count, but whose count is undeclared",
                value=None,
                fix="pass count_scope='invocation' (this call's batch) or 'global' (+ row_counts)",
            )
        require_choice(self.count_scope, (None, "invocation", "global"), "count_scope", fix="")
        if self.count_scope is not None and not self.scale_grad_by_freq:
            raise _invalid("count_scope without scale_grad_by_freq", self.count_scope, "drop it")

    def policy(self) -> LookupPolicy:
        """Every field but the shape, as keyword arguments for a table constructor."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        del values["num_embeddings"], values["embedding_dim"]
        return LookupPolicy(**values)  # type: ignore[typeddict-item]


def config_of(table: nn.Module, **policy: Unpack[LookupPolicy]) -> LookupConfig:
    """The :class:`LookupConfig` of an existing table, with ``policy`` fields overriding it.

    A module with a ``config`` (TokenEmbedding, the sharded tables) gives its own;
    an nn.Embedding gives its shape and its five options (``padding_idx``,
    ``max_norm``, ``norm_type``, ``scale_grad_by_freq``, ``sparse``).

    Example::

        >>> config_of(nn.Embedding(8, 3, padding_idx=0), zero_pad_row=True).zero_pad_row
        True

    Raises:
        UsageError INVALID_ARGUMENT: ``table`` is neither; as LookupConfig otherwise.
    """
    from dataclasses import replace

    from torch import nn

    own = getattr(table, "config", None)
    if isinstance(own, LookupConfig):
        return replace(own, **policy)
    if not isinstance(table, nn.Embedding):
        raise _invalid(
            f"{type(table).__name__} is not a lookup table",
            type(table).__name__,
            "pass an nn.Embedding or a TokenEmbedding",
        )
    options = LookupPolicy(
        padding_idx=table.padding_idx,
        max_norm=table.max_norm,
        norm_type=table.norm_type,
        scale_grad_by_freq=table.scale_grad_by_freq,
        sparse=table.sparse,
    )
    options.update(policy)
    return LookupConfig(
        num_embeddings=table.num_embeddings, embedding_dim=table.embedding_dim, **options
    )
