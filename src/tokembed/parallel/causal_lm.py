"""Next-token loss of a causal LM whose output head is vocabulary-parallel.

A Hugging Face ``*ForCausalLM`` computes its loss from full-vocabulary logits.
After :func:`~tokembed.parallel.shard.shard_lm_head` the head returns local
logits ``[B, L, V_r]`` instead, and the model's own loss would read them as a
``V_r``-way classifier. This module runs the decoder, the sharded head and
:func:`~tokembed.parallel.cross_entropy.vocab_parallel_cross_entropy` with the
same convention as the model's loss: position t predicts label t+1, labels
equal to ``ignore_index`` are skipped, mean over the remaining positions.

Example::

    shard_input_embedding(model, group=tp_group, tie=True)  # tied head sharded too
    loss = causal_lm_loss(model, ids)                    # == model(ids, labels=ids).loss unsharded
    loss.backward()
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.errors import UsageError
from tokembed.parallel.cross_entropy import vocab_parallel_cross_entropy
from tokembed.parallel.lm_head import VocabParallelLMHead

__all__ = ["causal_lm_loss"]


def causal_lm_loss(
    model: nn.Module,
    input_ids: torch.Tensor,
    *,
    labels: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    ignore_index: int = -100,
) -> torch.Tensor:
    """Mean next-token cross-entropy of ``model`` on ``input_ids`` [B, L] (labels default to ids).

    The decoder is ``model.base_model`` (``model.model`` for Llama); the head is
    ``model.get_output_embeddings()`` and must be a VocabParallelLMHead, whose
    group the loss reduces over.

    Raises:
        UsageError: INVALID_ARGUMENT when the head is not vocabulary-parallel (use
            the model's own loss then).
    """
    head = model.get_output_embeddings()  # type: ignore[operator]
    if not isinstance(head, VocabParallelLMHead):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the output head is {type(head).__name__}, not a VocabParallelLMHead",
            value=type(head).__name__,
            fix="call shard_lm_head(model, group=group) first, or use model(ids, labels=ids).loss",
        )
    labels = input_ids if labels is None else labels
    hidden = model.base_model(  # type: ignore[operator]
        input_ids=input_ids, attention_mask=attention_mask
    ).last_hidden_state  # [B, L, d]
    local_logits = head(hidden[:, :-1])  # [B, L-1, V_r]
    # No cast here: the loss promotes half precision to fp32 itself and keeps fp64 as fp64.
    return vocab_parallel_cross_entropy(
        local_logits,
        labels[:, 1:],
        group=head.group,
        vocab_start=head.vocab_start,
        ignore_index=ignore_index,
    )
