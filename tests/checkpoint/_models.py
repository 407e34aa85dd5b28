"""Small models shared by the checkpoint tests: a plain tied LM and config-built HF models."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

V, H = 11, 4


class TinyLM(nn.Module):
    """embed [V, H] -> tanh(linear) -> lm_head [V, H]; tied by one visible assignment."""

    def __init__(self, *, tied: bool = True, seed: int = 0, dtype: torch.dtype = torch.float32):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(V, H, dtype=dtype)
        self.body = nn.Linear(H, H, dtype=dtype)
        self.lm_head = nn.Linear(H, V, bias=False, dtype=dtype)
        self.register_buffer("position", torch.arange(3, dtype=torch.int64))
        if tied:
            self.lm_head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(torch.tanh(self.body(self.embed(ids))))  # [*, V]

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head


IDS = torch.tensor([[1, 4, 9, 2], [0, 7, 7, 10]])
TARGETS = torch.tensor([[4, 9, 2, 3], [7, 7, 10, 5]])


def lm_loss(model: nn.Module) -> torch.Tensor:
    logits = model(IDS)
    return F.cross_entropy(logits.reshape(-1, V), TARGETS.reshape(-1))


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int = 2) -> None:
    for _ in range(steps):
        optimizer.zero_grad()
        lm_loss(model).backward()
        optimizer.step()


def llama(*, tied: bool, seed: int = 0) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=tied,
    )
    return LlamaForCausalLM(config).eval()
