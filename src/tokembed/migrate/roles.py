"""Which tensors of a model are indexed by vocabulary, which tokenizer owns their rows, and ties.

A migration must move every vocabulary-indexed role together: the input table,
an untied output head, the output bias. :class:`VocabRoles` names them by
parameter name (``vocab_roles(model)`` finds them on a ``transformers`` model);
a factorization bridge has no vocabulary axis and is never a role.

A tie is checked by identity (one Parameter object, one storage), never by
equal values: two equal tensors diverge at the next update. Tables of a model
with several vocabularies (seq2seq source and target) are bound to the address
hash of the tokenizer that owns their rows, so a swapped or mis-sized table is
caught before any row is written.

Example::

    >>> roles = vocab_roles(model)  # doctest: +SKIP
    >>> roles.input, roles.output, roles.tied  # doctest: +SKIP
    ('model.embed_tokens.weight', 'lm_head.weight', True)

Raises CheckpointError TIE_NOT_SHARED, ROW_COUNT_MISMATCH, TABLE_ROLE_SWAPPED,
TABLE_SIZED_FOR_OTHER_VOCAB, VOCAB_AXIS_STALE; EmbeddingError ADDRESS_HASH_MISMATCH;
UsageError INVALID_ARGUMENT (a name that is not a parameter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from tokembed.artifacts.models import parameter_owner
from tokembed.errors import CheckpointError, EmbeddingError, UsageError

__all__ = [
    "VocabRoles",
    "check_bindings",
    "check_vocab_axes",
    "parameter",
    "require_bound",
    "vocab_roles",
]


@dataclass(frozen=True, kw_only=True)
class VocabRoles:
    """Parameter names of the vocabulary-indexed roles; ``tied``: output is the input table."""

    input: str
    output: str | None = None
    bias: str | None = None
    tied: bool = False

    def __post_init__(self) -> None:
        if self.tied and self.output is None:
            raise UsageError(
                "INVALID_ARGUMENT",
                "a tie needs an output role",
                value=self.input,
                fix="name the output parameter that shares the input table",
            )

    def names(self) -> tuple[str, ...]:
        """Names of the canonical tensors (a tied output is not a second tensor)."""
        out = [self.input]
        if self.output is not None and not self.tied:
            out.append(self.output)
        if self.bias is not None:
            out.append(self.bias)
        return tuple(out)


def parameter(model: nn.Module, name: str) -> nn.Parameter:
    """The live Parameter registered under ``name`` (tied aliases included)."""
    module, attr = parameter_owner(model, name)
    param: nn.Parameter = getattr(module, attr)
    return param


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    # A tie is one object reading one memory region; equal values in two storages are not.
    from tokembed.checkpoint.alias import same_storage

    return a is b and same_storage(a, b)


def _require_tie(model: nn.Module, roles: VocabRoles) -> None:
    """Refuse (TIE_NOT_SHARED) a declared tie whose two names are not one Parameter."""
    assert roles.output is not None
    a, b = parameter(model, roles.input), parameter(model, roles.output)
    if not _same_storage(a, b):
        equal = a.shape == b.shape and bool(torch.equal(a.detach(), b.detach()))
        raise CheckpointError(
            "TIE_NOT_SHARED",
            f"{roles.output!r} is declared tied to {roles.input!r} but is a separate tensor"
            + (" (equal values today, independent updates tomorrow)" if equal else ""),
            value=(roles.input, roles.output),
            fix="assign the input Parameter to the output module (one object), or declare "
            "the model untied and migrate both tables",
        )


def vocab_roles(model: nn.Module) -> VocabRoles:
    """The roles of a ``transformers`` model (get_input/output_embeddings), tie by identity."""
    get_in = getattr(model, "get_input_embeddings", None)
    if not callable(get_in):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{type(model).__name__} has no get_input_embeddings()",
            value=type(model).__name__,
            fix="pass VocabRoles(input=..., output=..., bias=...) naming the parameters",
        )
    inp = get_in()
    get_out = getattr(model, "get_output_embeddings", None)
    out = get_out() if callable(get_out) else None
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
    in_name = names[id(inp)] + ".weight"
    if out is None:
        return VocabRoles(input=in_name)
    bias = getattr(out, "bias", None)
    return VocabRoles(
        input=in_name,
        output=names[id(out)] + ".weight",
        bias=names[id(out)] + ".bias" if isinstance(bias, nn.Parameter) else None,
        tied=out.weight is inp.weight,
    )


def check_vocab_axes(model: nn.Module, roles: VocabRoles, rows: int) -> None:
    """Every role (and a declared tie) has ``rows`` rows; refuse VOCAB_AXIS_STALE otherwise."""
    names = [roles.input, *(n for n in (roles.output, roles.bias) if n is not None)]
    for name in names:
        found = parameter(model, name).shape[0]
        if found != rows:
            raise CheckpointError(
                "VOCAB_AXIS_STALE",
                f"{name!r} has {found} rows but the vocabulary has {rows}",
                value=(name, found),
                fix="migrate every vocabulary-indexed role (input, output head, bias) together",
            )
    if roles.tied:
        _require_tie(model, roles)


def check_bindings(
    model: nn.Module, bindings: Mapping[str, str], vocabularies: Mapping[str, int]
) -> None:
    """Each bound table has the rows of the tokenizer it is bound to.

    ``bindings``: parameter name -> address hash of the tokenizer owning its rows;
    ``vocabularies``: address hash -> that tokenizer's row count.

    Raises:
        CheckpointError TABLE_SIZED_FOR_OTHER_VOCAB: the table has another declared
            vocabulary's row count (e.g. a target generator built with V_src).
        CheckpointError ROW_COUNT_MISMATCH: any other disagreement.
    """
    for name, owner in bindings.items():
        rows = parameter(model, name).shape[0]
        want = vocabularies[owner]
        if rows == want:
            continue
        others = [h for h, n in vocabularies.items() if h != owner and n == rows]
        if others:
            raise CheckpointError(
                "TABLE_SIZED_FOR_OTHER_VOCAB",
                f"{name!r} has {rows} rows, the size of vocabulary {others[0][:19]}…, but its "
                f"rows belong to {owner[:19]}… with {want}",
                value=(name, rows, want),
                fix="build the table from its own vocabulary's size (target tables from V_tgt)",
            )
        raise CheckpointError(
            "ROW_COUNT_MISMATCH",
            f"{name!r} has {rows} rows but its tokenizer has {want}",
            value=(name, rows, want),
            fix="resize the table through a migration, or load the matching tokenizer",
        )


def require_bound(bindings: Mapping[str, str], name: str, address_hash: str) -> None:
    """Refuse to treat ``name`` as a table of the tokenizer ``address_hash`` unless bound to it.

    Raises:
        CheckpointError TABLE_ROLE_SWAPPED: another table is bound to that tokenizer
            and this one to another (source and target swapped).
        EmbeddingError ADDRESS_HASH_MISMATCH: the table belongs to another tokenizer.
    """
    bound = bindings.get(name)
    if bound == address_hash:
        return
    holders = [n for n, h in bindings.items() if h == address_hash]
    if holders:
        raise CheckpointError(
            "TABLE_ROLE_SWAPPED",
            f"{name!r} holds rows of {str(bound)[:19]}…; the table of {address_hash[:19]}… is "
            f"{holders[0]!r}",
            value=(name, holders[0]),
            fix=f"migrate {holders[0]!r} for this tokenizer (the roles are swapped)",
        )
    raise EmbeddingError(
        "ADDRESS_HASH_MISMATCH",
        f"{name!r} was trained for tokenizer {bound}, not {address_hash}",
        value=bound,
        fix="migrate from the tokenizer the model was trained with",
    )
