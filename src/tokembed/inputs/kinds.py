"""Representation kinds: which "embedding" a tensor is, carried on the tensor itself.

Four objects share the name "embedding" and often the shape ``[B, L, d]``:
context-free lookup rows, contextual hidden states of one layer of one
checkpoint, pooled task vectors made by a pooling head under an objective, and
media rows projected into a model's input space. Shape cannot tell them apart,
so a producer declares a :class:`Representation` with :func:`declare`, and a
consumer asks for the kind it needs (:func:`require_contextual`,
:func:`require_same_space`, :func:`retrieval_scores`).

The declaration is a plain attribute on the tensor object, like the scale and
position stamps of :mod:`tokembed.embedding.stamps`: free, and gone on any new
tensor that arithmetic makes. Rows that carry one of those stamps came from the
lookup path, so they count as lookup rows even when nobody declared them.

Example::

    >>> h = declare(torch.zeros(1, 3, 4), Representation(kind=Kind.CONTEXTUAL, model="gpt2", layer=6))
    >>> require_contextual(h, consumer="probe").space
    'contextual model=gpt2 layer=6'
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F

from tokembed.embedding.stamps import row_stamp
from tokembed.errors import HandoffError, UsageError

__all__ = [
    "Kind",
    "Representation",
    "declare",
    "declare_hidden_states",
    "representation_of",
    "require_contextual",
    "require_same_space",
    "retrieval_scores",
]

_ATTRIBUTE = "_tokembed_representation"


class Kind(enum.Enum):
    """The four objects the word "embedding" names."""

    LOOKUP = "lookup"  # E[ids]: the same row for a token in every context
    CONTEXTUAL = "contextual"  # the output of block `layer` of a stack
    POOLED = "pooled"  # one vector per item, made by a pooling head under an objective
    PROJECTED_MEDIA = "projected_media"  # media rows mapped into a model's input space


# Which optional fields each kind requires (True), forbids (False) or leaves free (None).
_FIELDS: dict[Kind, dict[str, bool | None]] = {
    Kind.LOOKUP: {"layer": False, "pooling": False, "encoder": False},
    Kind.CONTEXTUAL: {"layer": True, "pooling": False, "encoder": False},
    Kind.POOLED: {"layer": None, "pooling": True, "encoder": False, "objective": True},
    Kind.PROJECTED_MEDIA: {"layer": False, "pooling": False, "encoder": True},
}


@dataclass(frozen=True, kw_only=True)
class Representation:
    """A declared representation: its kind and the coordinate system it lives in.

    Two tensors share a coordinate system only when every field is equal: the same
    width from another layer, pooling head, checkpoint or objective is another space.

    Attributes:
        kind: which object this is.
        model: the checkpoint that produced it (for projected media: the model whose
            input space the projector maps into).
        layer: contextual states: the block index, counted from 1 (0 is the lookup
            output, which is not contextual); pooled vectors: the layer pooled, if known.
        pooling: pooled vectors: the pooling rule or head ("cls", "mean+dense").
        objective: what trained the space ("causal-lm", "contrastive"); required
            for pooled vectors.
        encoder: projected media: the source encoder the projector was trained on.
        similarity: True only when ``objective`` trained the space so that cosine
            between its vectors is a retrieval score; pooled vectors only.

    Raises:
        UsageError INVALID_ARGUMENT: a field the kind requires is missing, or one it
            forbids is set.
    """

    kind: Kind
    model: str
    layer: int | None = None
    pooling: str | None = None
    objective: str | None = None
    encoder: str | None = None
    similarity: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.kind, Kind) or not self.model:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a representation needs a Kind and a model name, got {self.kind!r}, {self.model!r}",
                value=(self.kind, self.model),
                fix="pass kind=Kind.CONTEXTUAL (etc.) and model='<checkpoint id>'",
            )
        for name, rule in _FIELDS[self.kind].items():
            present = getattr(self, name) not in (None, "")
            if rule is not None and present != rule:
                raise UsageError(
                    "INVALID_ARGUMENT",
                    f"a {self.kind.value} representation {'needs' if rule else 'has no'} {name}",
                    value=getattr(self, name),
                    fix=f"{'set' if rule else 'drop'} {name}= for kind {self.kind.value}",
                )
        if self.kind is Kind.CONTEXTUAL and (self.layer is None or self.layer < 1):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"contextual states come from a block, counted from 1; got layer {self.layer}",
                value=self.layer,
                fix="layer 0 is the lookup output: declare it as Kind.LOOKUP",
            )
        if self.similarity and self.kind is not Kind.POOLED:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"only pooled vectors are trained as retrieval scores, not {self.kind.value}",
                value=self.kind,
                fix="pool the rows under a retrieval objective, then declare similarity=True",
            )

    @property
    def space(self) -> str:
        """The coordinate system as one line, e.g. ``'contextual model=gpt2 layer=6'``."""
        parts = [self.kind.value]
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if value is not None and value is not False:  # layer 0 is shown, False is not
                parts.append(f.name if value is True else f"{f.name}={value}")
        return " ".join(parts)

    def differences(self, other: Representation) -> list[str]:
        """Names of the fields in which ``other`` lies in another space."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def representation_of(tensor: torch.Tensor) -> Representation | None:
    """The representation declared on ``tensor`` (None when none was)."""
    rep = getattr(tensor, _ATTRIBUTE, None)
    assert rep is None or isinstance(rep, Representation)
    return rep


def declare(tensor: torch.Tensor, representation: Representation) -> torch.Tensor:
    """Declare what ``tensor`` is; returns the same tensor object.

    Example::

        >>> rows = declare(torch.ones(2, 3, 4), Representation(kind=Kind.LOOKUP, model="gpt2"))
        >>> representation_of(rows).kind
        <Kind.LOOKUP: 'lookup'>

    Raises:
        HandoffError REPRESENTATION_SPACE_MISMATCH: the tensor already carries another
            declaration (one tensor is one object; relabelling launders it).
    """
    old = representation_of(tensor)
    if old is not None and old != representation:
        raise HandoffError(
            "REPRESENTATION_SPACE_MISMATCH",
            f"the tensor is already declared as {old.space}; it cannot also be"
            f" {representation.space}",
            value=old.differences(representation),
            fix="declare a tensor once, where it is produced",
        )
    setattr(tensor, _ATTRIBUTE, representation)
    return tensor


def declare_hidden_states(
    hidden_states: Sequence[torch.Tensor], *, model: str, objective: str | None = None
) -> tuple[torch.Tensor, ...]:
    """Declare a stack's ``output_hidden_states`` (Hugging Face layout) layer by layer.

    Entry 0 is the embedding output: context-free lookup rows (plus position rows
    where the architecture adds them there); entry l is the output of block l.

    Example::

        >>> out = model(ids, output_hidden_states=True)  # doctest: +SKIP
        >>> hs = declare_hidden_states(out.hidden_states, model="gpt2")  # doctest: +SKIP
    """
    declared = [declare(hidden_states[0], Representation(kind=Kind.LOOKUP, model=model))]
    for layer, h in enumerate(hidden_states[1:], start=1):
        rep = Representation(kind=Kind.CONTEXTUAL, model=model, layer=layer, objective=objective)
        declared.append(declare(h, rep))
    return tuple(declared)


def require_contextual(states: torch.Tensor, *, consumer: str) -> Representation:
    """The declaration of ``states``, which must be contextual; for probes and readouts.

    Raises:
        HandoffError REPRESENTATION_NOT_CONTEXTUAL: the rows are lookup rows (declared,
            or carrying a lookup-path scale/position stamp) or are not declared at all.
    """
    rep = representation_of(states)
    if rep is not None and rep.kind is Kind.CONTEXTUAL:
        return rep
    if rep is not None:
        what = f"declared {rep.space}"
    elif row_stamp(states) is not None:
        what = "rows from the lookup path (they carry its scale/position stamp)"
    else:
        what = "rows with no representation declared"
    raise HandoffError(
        "REPRESENTATION_NOT_CONTEXTUAL",
        f"{consumer} needs contextual states, got {what}: before the first block a token"
        " has the same row in every sentence",
        value=rep.kind.value if rep is not None else None,
        fix="run the stack and pass a declared block output (declare_hidden_states)",
    )


def require_same_space(*tensors: torch.Tensor, purpose: str) -> Representation:
    """The one representation that all ``tensors`` declare; refuse mixed spaces.

    Raises:
        HandoffError REPRESENTATION_SPACE_MISMATCH: two tensors are undeclared or declare
            different spaces (another layer, pooling head, checkpoint or objective).
    """
    reps = [representation_of(t) for t in tensors]
    first = reps[0]
    for i, rep in enumerate(reps):
        if rep is None or first is None or rep != first:
            diff = ["undeclared"] if rep is None or first is None else first.differences(rep)
            raise HandoffError(
                "REPRESENTATION_SPACE_MISMATCH",
                f"{purpose}: tensor 0 is {first.space if first else 'undeclared'} but tensor"
                f" {i} is {rep.space if rep else 'undeclared'}; equal widths do not make"
                " one coordinate system",
                value=diff,
                fix="compare representations from one layer, head, checkpoint and objective",
            )
    assert first is not None
    return first


def _require_scorable(vectors: torch.Tensor, role: str) -> Representation:
    rep = representation_of(vectors)
    # Projected media rows are a sequence of model inputs whatever their rank; a pooled
    # declaration on a [B, N, d] tensor means the pooling never happened.
    sequence = rep is not None and (
        rep.kind is Kind.PROJECTED_MEDIA or (rep.kind is Kind.POOLED and vectors.dim() != 2)
    )
    if sequence:
        assert rep is not None
        raise HandoffError(
            "ROWS_NOT_POOLED",
            f"the {role} is a sequence of rows {tuple(vectors.shape)} ({rep.space}), not one"
            " vector per item [B, d]",
            value=tuple(vectors.shape),
            fix="score pooled vectors from a retrieval head; projected rows are model inputs",
        )
    if rep is None or rep.kind is not Kind.POOLED or not rep.similarity:
        raise HandoffError(
            "SCORE_NOT_CALIBRATED",
            f"the {role} is {rep.space if rep else 'undeclared'}; cosine between such vectors"
            " is computable but no objective made it a retrieval score",
            value=rep.space if rep else None,
            fix="use vectors pooled under a retrieval objective (declared similarity=True);"
            " call F.cosine_similarity directly for a diagnostic number",
        )
    return rep


def retrieval_scores(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """Cosine scores ``[Bq, Bk]`` between retrieval vectors of one space.

    Both sides must be pooled vectors ``[B, d]`` declared ``similarity=True`` in the
    same space.

    Example::

        >>> rep = Representation(kind=Kind.POOLED, model="m", pooling="mean",
        ...                      objective="contrastive", similarity=True)
        >>> q = declare(torch.tensor([[1.0, 0.0]]), rep)
        >>> retrieval_scores(q, declare(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), rep)).tolist()
        [[1.0, 0.0]]

    Raises:
        HandoffError ROWS_NOT_POOLED: a side is a sequence of (projected) rows.
        HandoffError SCORE_NOT_CALIBRATED: a side was not trained as a retrieval space.
        HandoffError REPRESENTATION_SPACE_MISMATCH: the sides are different spaces.
    """
    _require_scorable(queries, "query side")
    _require_scorable(keys, "key side")
    require_same_space(queries, keys, purpose="retrieval scores")
    return F.normalize(queries, dim=-1) @ F.normalize(keys, dim=-1).T
