"""A 2-layer Llama built from a config, its batches, and unsharded single-process training.

Shared by the whole-model parity tests (plain torch.distributed and DeepSpeed
AutoTP). V = 131 is prime, so it splits unevenly at every tensor-parallel size
(66 + 65 over 2, 33 + 33 + 33 + 32 over 4). The batches are drawn so that every
row shard at size 2 and 4 sees tokens, and the reference is the same model
trained in one process on the same batches (fp32).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from tokembed.parallel.intervals import row_intervals

__all__ = [
    "BATCH",
    "HIDDEN",
    "STEPS",
    "TINY_VOCAB",
    "VOCAB",
    "batches",
    "build_llama",
    "make_optimizer",
    "reference_training",
    "train",
]

VOCAB = 131
# V = 9 leaves the last of 4 ranks an empty shard: ceil chunks [0,3) [3,6) [6,9) [9,9).
TINY_VOCAB = 9
HIDDEN = 32
BATCH = (4, 12)  # [batch, seq] per step; split into halves for data parallelism
STEPS = 2
_LR = {"sgd": 0.5, "adamw": 0.01}


def build_llama(*, tied: bool, vocab: int = VOCAB, seed: int = 0) -> nn.Module:
    """Same weights on every rank for a given seed: ranks shard this full model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).float()
    model.train()
    return model


def batches(*, vocab: int = VOCAB, steps: int = STEPS, seed: int = 1) -> list[torch.Tensor]:
    """``steps`` batches of ids [4, 12] whose tokens reach every non-empty shard at sizes 2, 4."""
    g = torch.Generator().manual_seed(seed)
    out = [torch.randint(0, vocab, BATCH, generator=g) for _ in range(steps)]
    for b in out:
        for size in (2, 4):
            for start, end in row_intervals(vocab, size):
                assert start == end or bool(((b >= start) & (b < end)).any()), (size, start)
    return out


def make_optimizer(kind: str, params: Any, *, lr: float | None = None) -> torch.optim.Optimizer:
    lr = _LR[kind] if lr is None else lr
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    assert kind == "adamw", kind
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.1)


def reference_training(
    *, tied: bool, kind: str, steps: int = STEPS, lr: float | None = None, vocab: int = VOCAB
) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Losses of ``steps`` steps and the final state dict, unsharded, one process."""
    model = build_llama(tied=tied, vocab=vocab)
    opt = make_optimizer(kind, model.parameters(), lr=lr)
    losses = []
    for ids in batches(vocab=vocab)[:steps]:
        loss = model(input_ids=ids, labels=ids).loss
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return losses, state


def train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    data: list[torch.Tensor],
    loss_fn: Callable[[nn.Module, torch.Tensor], torch.Tensor],
    *,
    after_backward: Callable[[], None] | None = None,
) -> list[float]:
    """Plain training loop; ``after_backward`` hooks a data-parallel gradient reduction."""
    losses = []
    for ids in data:
        loss = loss_fn(model, ids)
        losses.append(loss.item())
        loss.backward()
        if after_backward is not None:
            after_backward()
        opt.step()
        opt.zero_grad()
    return losses
