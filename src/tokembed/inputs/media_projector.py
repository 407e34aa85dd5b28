"""Media projectors with a declared contract: which encoder in, which model's space out, trained or frozen.

A projector is the learned alignment between one encoder's feature space and one
language model's input space, not a reshape. Its contract therefore names both
ends (:class:`ProjectorContract`): the source representation (encoder checkpoint
and layer, width ``d_media``), the target model (width ``d_model``) and whether
the declared set-up trains or freezes it. :class:`MediaProjector` (a linear map,
or a two-layer GELU MLP as in LLaVA-1.5) checks incoming features against the
source and declares its output rows as projected media of the target; consumers
call :meth:`ProjectorContract.check_target`, and a training script calls
:func:`check_trainability` with its optimizer before step 0.

Example::

    >>> clip = Representation(kind=Kind.CONTEXTUAL, model="clip-vit-l-14-336", layer=23)
    >>> c = ProjectorContract(source=clip, d_media=1024, target="vicuna-7b", d_model=4096,
    ...                       trainability=Trainability.TRAINED)
    >>> MediaProjector(c)(media).rows.shape  # media: MediaRows of declared CLIP features  # doctest: +SKIP
    torch.Size([1, 576, 4096])
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch
from torch import nn

from tokembed.embedding.variants.projector import FeatureProjector
from tokembed.errors import HandoffError, UsageError
from tokembed.inputs.kinds import Kind, Representation, declare, representation_of
from tokembed.inputs.rows import MediaRows

__all__ = [
    "MediaProjector",
    "ProjectorContract",
    "Trainability",
    "check_trainability",
]


class Trainability(enum.Enum):
    """What the declared set-up does with the projector's parameters."""

    FROZEN = "frozen"  # loaded and kept fixed (e.g. a released connector under a new LM)
    TRAINED = "trained"  # updated by the optimizer (LLaVA stage 1 trains only this)


@dataclass(frozen=True, kw_only=True)
class ProjectorContract:
    """Both ends of a projector and its place in the training set-up.

    Attributes:
        source: the representation the projector was trained on (encoder checkpoint
            and layer; the "feature space").
        d_media: the encoder's feature width.
        target: the model whose input space the output rows live in.
        d_model: that model's width.
        trainability: frozen or trained in the declared set-up.

    Raises:
        UsageError INVALID_ARGUMENT: a non-positive width, an empty target, or a
            source that is itself projected media or lookup rows.
    """

    source: Representation
    d_media: int
    target: str
    d_model: int
    trainability: Trainability

    def __post_init__(self) -> None:
        if self.d_media < 1 or self.d_model < 1 or not self.target:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a projector needs positive widths and a target model, got d_media="
                f"{self.d_media}, d_model={self.d_model}, target={self.target!r}",
                value=(self.d_media, self.d_model, self.target),
                fix="declare the encoder width, the model width and the model id",
            )
        if self.source.kind in (Kind.PROJECTED_MEDIA, Kind.LOOKUP):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"a projector's source is an encoder's features, not {self.source.kind.value} rows",
                value=self.source.kind,
                fix="declare the encoder layer the projector reads (Kind.CONTEXTUAL)",
            )
        if not isinstance(self.trainability, Trainability):
            raise UsageError(
                "INVALID_ARGUMENT",
                f"trainability is a Trainability, got {self.trainability!r}",
                value=self.trainability,
                fix="pass Trainability.FROZEN or Trainability.TRAINED",
            )

    @property
    def output(self) -> Representation:
        """The representation of the rows this projector produces."""
        return Representation(
            kind=Kind.PROJECTED_MEDIA, model=self.target, encoder=self.source.space
        )

    def check_features(self, media: MediaRows) -> None:
        """Refuse features this projector was not trained on.

        Raises:
            HandoffError PROJECTOR_WIDTH_MISMATCH: their width is not ``d_media``.
            HandoffError PROJECTOR_ENCODER_MISMATCH: they are undeclared, or declared
                from another encoder or layer (even at the same width).
        """
        width = media.rows.shape[-1]
        if width != self.d_media:
            hint = " (model-width rows: already projected?)" if width == self.d_model else ""
            raise HandoffError(
                "PROJECTOR_WIDTH_MISMATCH",
                f"features have width {width} but the projector reads d_media={self.d_media}"
                f" from {self.source.model}{hint}",
                value=width,
                fix="pass the encoder's features, or the projector built for this width",
            )
        rep = representation_of(media.rows)
        if rep != self.source:
            raise HandoffError(
                "PROJECTOR_ENCODER_MISMATCH",
                f"features are {rep.space if rep else 'undeclared'} but the projector was"
                f" trained on {self.source.space}; an equal width hides a different"
                " feature distribution",
                value=rep.differences(self.source) if rep else None,
                fix="use the projector trained for this encoder, or declare the features"
                " where the encoder produced them",
            )

    def check_target(self, *, model: str, d_model: int) -> None:
        """Refuse a consumer model this projector does not feed.

        Raises:
            HandoffError PROJECTOR_WIDTH_MISMATCH: ``d_model`` differs (e.g. the
                contract took the encoder's width for the model's).
            HandoffError PROJECTOR_SPACE_MISMATCH: the width fits but ``model`` is not
                the model the projector was aligned to.
        """
        if d_model != self.d_model:
            hint = " (that is d_media)" if self.d_model == self.d_media else ""
            raise HandoffError(
                "PROJECTOR_WIDTH_MISMATCH",
                f"{model} expects rows of width {d_model}; the projector emits"
                f" {self.d_model}{hint}",
                value=(self.d_model, d_model),
                fix="build the projector with the language model's hidden size as d_model",
            )
        if model != self.target:
            raise HandoffError(
                "PROJECTOR_SPACE_MISMATCH",
                f"the projector maps into {self.target}'s input space, not {model}'s; both"
                f" are {d_model} wide, so only this declaration tells them apart",
                value=(self.target, model),
                fix="use the projector trained with this language model, or train one",
            )


class MediaProjector(nn.Module):
    """A count-preserving projector ``[B, n, d_media] -> [B, n, d_model]`` under a contract.

    ``hidden=None`` is one affine map (:class:`FeatureProjector`); an int builds
    Linear -> GELU -> Linear with that inner width. Parameters start with
    ``requires_grad`` set from the contract's trainability.

    Raises (forward):
        HandoffError PROJECTOR_WIDTH_MISMATCH, PROJECTOR_ENCODER_MISMATCH: see
            :meth:`ProjectorContract.check_features`.
    """

    def __init__(self, contract: ProjectorContract, *, hidden: int | None = None) -> None:
        super().__init__()
        self.contract = contract
        first = FeatureProjector(contract.d_media, hidden or contract.d_model)
        self.proj: nn.Module = (
            first
            if hidden is None
            else nn.Sequential(first, nn.GELU(), nn.Linear(hidden, contract.d_model))
        )
        self.requires_grad_(contract.trainability is Trainability.TRAINED)

    def forward(self, media: MediaRows) -> MediaRows:
        self.contract.check_features(media)
        rows = self.proj(media.rows)  # [B, n, d_media] -> [B, n, d_model]
        return media.with_rows(declare(rows, self.contract.output))


def check_trainability(
    module: nn.Module,
    contract: ProjectorContract,
    *,
    optimizer: torch.optim.Optimizer | None,
) -> None:
    """Check ``module``'s parameters against the declared trainability before training.

    TRAINED: every parameter requires grad and sits in an optimizer group with
    ``lr > 0``. FROZEN: none requires grad and none sits in such a group (a frozen
    parameter in a decaying group still moves under decoupled weight decay once
    anything gives it a gradient). Parameters are matched by identity.

    Example::

        >>> check_trainability(proj, proj.contract, optimizer=torch.optim.AdamW(proj.parameters()))  # doctest: +SKIP

    Raises:
        HandoffError PROJECTOR_TRAINABILITY_MISMATCH: the first parameter that
            contradicts the declaration, named.
    """
    stepped: set[int] = set()
    if optimizer is not None:
        for group in optimizer.param_groups:
            if group.get("lr", 0.0) > 0:
                stepped.update(id(p) for p in group["params"])
    trained = contract.trainability is Trainability.TRAINED
    for name, p in module.named_parameters():
        problems = []
        if p.requires_grad != trained:
            problems.append(f"requires_grad={p.requires_grad}")
        if (id(p) in stepped) != trained:
            problems.append("in an optimizer group with lr > 0" if not trained else "not stepped")
        if problems:
            raise HandoffError(
                "PROJECTOR_TRAINABILITY_MISMATCH",
                f"the set-up declares the projector {contract.trainability.value}, but {name}"
                f" is {' and '.join(problems)}",
                value=name,
                fix=(
                    "requires_grad_(True) and add its parameters to the optimizer"
                    if trained
                    else "requires_grad_(False) and leave its parameters out of the optimizer"
                ),
            )
