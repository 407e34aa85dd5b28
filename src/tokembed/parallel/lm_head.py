"""Vocabulary-parallel output head: local logits for this rank's rows.

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

The head's rows address the same vocabulary as the embedding's, so it carries
a :class:`~tokembed.embedding.lookup_config.LookupConfig` too: a tied head
shares the embedding's config (address hash included), and an untied head may
be bound to a tokenizer with ``address_hash``; tying a head to an embedding
bound to another tokenizer is refused.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.embedding.init import Initializer, new_table
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.errors import EmbeddingError, ParallelError, UsageError
from tokembed.parallel._autograd import copy_to_group
from tokembed.parallel._row_shard import RowIntervals, copy_owned_rows
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
            becomes this head's weight (same Parameter object) and its config
            this head's config.
        address_hash: the tokenizer the rows belong to ("sha256:<64 hex>");
            with ``tie_to``, it must be the embedding's.

    Example::

        >>> emb = VocabParallelEmbedding(10, 4)
        >>> head = VocabParallelLMHead(4, 10, tie_to=emb)
        >>> head.weight is emb.weight, head(torch.zeros(2, 4)).shape   # rank 1 of 4
        (True, torch.Size([2, 3]))

    Raises:
        EmbeddingError SHAPE_MISMATCH: ``tie_to`` has another V or d.
        EmbeddingError ADDRESS_HASH_MISMATCH: ``tie_to`` is bound to another tokenizer.
        ParallelError GROUP_CONFLATION: ``tie_to`` is sharded over another group
            (its rows would not line up with this head's).
        UsageError INVALID_ARGUMENT: malformed shape or hash.
    """

    def __init__(
        self,
        embedding_dim: int,
        num_embeddings: int,
        *,
        group: ProcessGroup | None = None,
        tie_to: VocabParallelEmbedding | None = None,
        address_hash: str | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.config = LookupConfig(
            num_embeddings=num_embeddings, embedding_dim=embedding_dim, address_hash=address_hash
        )
        self.group = group
        self.ownership = RowOwnership.for_group(num_embeddings, group=group)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if tie_to is None:
            # std 1/sqrt(d): unit-variance hidden states give unit-variance initial logits.
            init = Initializer(name="normal", std=embedding_dim**-0.5)
            self.weight = new_table(
                self.ownership.rows, embedding_dim, init=init, dtype=dtype, device=device
            )  # [V_r, d]
            mark_rows(self.weight, self.ownership)
            return
        if (tie_to.num_embeddings, tie_to.embedding_dim) != (num_embeddings, embedding_dim):
            raise EmbeddingError(
                "SHAPE_MISMATCH",
                f"head is [{num_embeddings}, {embedding_dim}] but the tied embedding is "
                f"[{tie_to.num_embeddings}, {tie_to.embedding_dim}]",
                value=(tie_to.num_embeddings, tie_to.embedding_dim),
                fix="tie only a head with the embedding's V and d",
            )
        if address_hash is not None and tie_to.config.address_hash != address_hash:
            raise EmbeddingError(
                "ADDRESS_HASH_MISMATCH",
                f"the head is declared for {address_hash} but the tied embedding is bound to"
                f" {tie_to.config.address_hash}; one Parameter cannot serve two address spaces",
                value=tie_to.config.address_hash,
                fix="bind the embedding and the head to the same tokenizer",
            )
        if tie_to.intervals != self.intervals or tie_to.group is not group:
            raise ParallelError(
                "GROUP_CONFLATION",
                "the tied embedding is sharded over a different group than the head",
                value=(tie_to.intervals[tie_to.rank], (self.vocab_start, self.vocab_end)),
                fix="build the head with group=emb.group so input and output rows coincide",
            )
        self.config = tie_to.config
        self.weight = tie_to.weight  # one Parameter: the tie is identity, not equal values

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        *,
        group: ProcessGroup | None = None,
        address_hash: str | None = None,
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
            address_hash=address_hash,
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
