"""A small byte-level tokenizer with known categories and tiny models whose rows are planted."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer

__all__ = ["PLANTED", "CopyLM", "V", "anisotropic_head", "llama", "plant", "tokenizer"]

# Ids 0..255 bytes; 256 "ab", 257 "bc", 258 "abc" = "a" + "bc". Encoding "abc" merges
# "ab" first (rank 0) and (256, "c") is no merge, so 258 is unreachable. One special at
# 300 leaves holes 259..299; a model with V = 320 rows has rows 301..319 past R = 301.
V = 320
UNREACHABLE = 258
SPECIAL = 300
HOLES = tuple(range(259, 300))
BEYOND = tuple(range(301, 320))
# Ordinary, reachable ids that the test corpus never contains; their rows are planted.
PLANTED = (ord("Q"), ord("X"), ord("Z"), ord("J"), 0xF0)


def tokenizer() -> Tokenizer:
    tables = BPETables.byte_level(merges=[(97, 98), (98, 99), (97, 257)])
    tables = BPETables(pieces=tables.pieces, merges=tables.merges, specials={"<|end|>": SPECIAL})
    return Tokenizer(pretokenizer=Pretokenizer.preset("gpt2"), tables=tables, name="tiny")


def plant(table: torch.Tensor, ids: tuple[int, ...], *, seed: int, scale: float = 1.0) -> None:
    """Rows ``ids`` of ``table`` := one shared vector + noise 1/100 of its size, times ``scale``."""
    g = torch.Generator().manual_seed(seed)
    d = table.shape[1]
    common = torch.randn(d, generator=g, dtype=torch.float64)
    with torch.no_grad():
        for i in ids:
            row = common + 0.01 * torch.randn(d, generator=g, dtype=torch.float64)
            table[i] = (scale * row).to(table.dtype)


def anisotropic_head(table: torch.Tensor, ids: tuple[int, ...], *, seed: int) -> None:
    """Fill ``table`` like a trained head: random rows plus a strong shared direction ``w``
    with a per-row amount (the first principal component); rows ``ids`` share one unit
    vector (+ noise 1/100 of it) plus their own amount of ``w``. Before ``w`` is removed,
    those rows disagree in cosine; after, they are one cluster."""
    g = torch.Generator().manual_seed(seed)
    rows, d = table.shape
    w = torch.randn(d, generator=g, dtype=torch.float64)
    w /= w.norm()
    amount = 4.0 * torch.randn(rows, 1, generator=g, dtype=torch.float64)
    full = torch.randn(rows, d, generator=g, dtype=torch.float64)
    common = torch.randn(d, generator=g, dtype=torch.float64)
    common /= common.norm()
    for i in ids:
        full[i] = common + 0.01 * torch.randn(d, generator=g, dtype=torch.float64) / d**0.5
    with torch.no_grad():
        table.copy_((full + amount * w).to(table.dtype))


def llama(*, tied: bool, seed: int = 0) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
    )
    return LlamaForCausalLM(config).to(torch.float64).eval()


class CopyLM(nn.Module):
    """logits = E[last id] · Eᵀ: a trained row (norm 4, nearly orthogonal to the others)
    predicts itself; a small planted row predicts nearly uniformly."""

    def __init__(self, *, planted: tuple[int, ...], d: int = 512, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        table = torch.randn(V, d, generator=g, dtype=torch.float64)
        table = 4.0 * table / table.norm(dim=1, keepdim=True)
        self.embed = nn.Embedding(V, d, dtype=torch.float64)
        self.head = nn.Linear(d, V, bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.embed.weight.copy_(table)
        self.head.weight = self.embed.weight
        plant(self.embed.weight, planted, seed=seed + 1, scale=0.01)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(input_ids))

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def get_output_embeddings(self) -> nn.Module:
        return self.head
