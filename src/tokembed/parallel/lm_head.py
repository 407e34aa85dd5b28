"""Vocabulary-parallel output head: local logits for this rank's rows (spec 0x0A).

Rank r owns the same rows ``[vocab_start, vocab_end)`` as the input embedding,
and computes ``Z_r = C E_r^T``: the [..., V_r] block of the logits. Hidden
states arrive replicated on every rank, so the forward needs no collective;
the gradient of the hidden states is the sum of every shard's partial
``dZ_r E_r`` and is all-reduced in backward (:func:`copy_to_group`).

Tied heads reuse the embedding's local Parameter object (``head.weight is
emb.weight``): one storage, one optimizer entry, the input and output
gradients add into one ``.grad``. Feed the local logits to
:func:`~tokembed.parallel.cross_entropy.vocab_parallel_cross_entropy`, which
never materializes [N, V] on one rank.
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.errors import ParallelError, UsageError
from tokembed.parallel._autograd import copy_to_group
from tokembed.parallel._collectives import ProcessGroup
from tokembed.parallel._row_shard import RowIntervals, check_table_args, copy_owned_rows
from tokembed.parallel.ownership import RowOwnership, mark_rows
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = ["VocabParallelLMHead"]


class VocabParallelLMHead(RowIntervals, nn.Module):
    """A bias-free ``nn.Linear(d, V)`` whose output rows are split like the embedding's.

    Args:
        embedding_dim: hidden width d.
        num_embeddings: global vocabulary rows V.
        group: tensor-parallel process group (default: the world).
        tie_to: a VocabParallelEmbedding to share rows with; its weight
            becomes this head's weight (same Parameter object).

    Example::

        >>> emb = VocabParallelEmbedding(10, 4)
        >>> head = VocabParallelLMHead(4, 10, tie_to=emb)
        >>> head.weight is emb.weight, head(torch.zeros(2, 4)).shape   # rank 1 of 4
        (True, torch.Size([2, 3]))

    Raises:
        ParallelError SHAPE_MISMATCH: ``tie_to`` has another V or d.
        ParallelError GROUP_CONFLATION: ``tie_to`` is sharded over another group
            (its rows would not line up with this head's).
    """

    def __init__(
        self,
        embedding_dim: int,
        num_embeddings: int,
        *,
        group: ProcessGroup | None = None,
        tie_to: VocabParallelEmbedding | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        check_table_args(num_embeddings, embedding_dim, None)
        self.group = group
        self.ownership = RowOwnership.for_group(num_embeddings, group=group)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if tie_to is None:
            self.weight = nn.Parameter(
                torch.empty(
                    self.vocab_end - self.vocab_start, embedding_dim, dtype=dtype, device=device
                )
            )  # [V_r, d]
            mark_rows(self.weight, self.ownership)
            nn.init.normal_(self.weight, std=embedding_dim**-0.5)
            return
        if (tie_to.num_embeddings, tie_to.embedding_dim) != (num_embeddings, embedding_dim):
            raise ParallelError(
                "SHAPE_MISMATCH",
                f"head is [{num_embeddings}, {embedding_dim}] but the tied embedding is "
                f"[{tie_to.num_embeddings}, {tie_to.embedding_dim}]",
                value=(tie_to.num_embeddings, tie_to.embedding_dim),
                fix="tie only a head with the embedding's V and d",
            )
        if tie_to.intervals != self.intervals or tie_to.group is not group:
            raise ParallelError(
                "GROUP_CONFLATION",
                "the tied embedding is sharded over a different group than the head",
                value=(tie_to.intervals[tie_to.rank], (self.vocab_start, self.vocab_end)),
                fix="build the head with group=emb.group so input and output rows coincide",
            )
        self.weight = tie_to.weight  # one Parameter: the tie is identity, not equal values

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, *, group: ProcessGroup | None = None
    ) -> VocabParallelLMHead:
        """Shard a bias-free ``nn.Linear(d, V)`` (same on every rank): copy this rank's rows.

        Raises:
            UsageError INVALID_ARGUMENT: the linear layer has a bias.
        """
        if linear.bias is not None:
            raise UsageError(
                "INVALID_ARGUMENT",
                "the output layer has a bias; VocabParallelLMHead is bias-free",
                value=tuple(linear.bias.shape),
                fix="shard a bias-free output layer (nn.Linear(d, V, bias=False))",
            )
        head = cls(
            linear.in_features,
            linear.out_features,
            group=group,
            dtype=linear.weight.dtype,
            device=linear.weight.device,
        )
        copy_owned_rows(head.weight, linear.weight, head.ownership)
        return head

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Replicated hidden [..., d] -> this rank's logits [..., vocab_end - vocab_start]."""
        hidden = copy_to_group(hidden, group=self.group)
        return hidden @ self.weight.t()  # [..., d] @ [d, V_r] -> [..., V_r]

    def extra_repr(self) -> str:
        return (
            f"{self.embedding_dim} -> {self.num_embeddings}, rows=[{self.vocab_start}, "
            f"{self.vocab_end}) of {self.world_size} ranks"
        )
