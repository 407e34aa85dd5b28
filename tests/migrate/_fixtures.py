"""Small tokenizers and models for the migration tests.

``base()`` is a byte-level tokenizer with two merges ("hi" = 256, "!!" = 257) and
one special at 300, so its id range is 301 with holes at 258..299. The variants
change it in one declared way each. ``llama(...)`` builds a 1-layer Llama from a
config (transformers), with an optional output bias.
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.tokenizer import BPETables, Pretokenizer, Tokenizer

__all__ = ["HIDDEN", "base", "llama", "make", "populate_adam"]

HIDDEN = 16
_H, _I, _BANG = 104, 105, 33


def make(
    merges: list[tuple[int, int, int]], specials: dict[str, int], preset: str = "teaching"
) -> Tokenizer:
    pieces = {i: bytes([i]) for i in range(256)}
    for left, right, result in merges:
        pieces[result] = pieces[left] + pieces[right]
    tables = BPETables(pieces=pieces, merges=tuple(merges), specials=specials)
    return Tokenizer(pretokenizer=Pretokenizer.preset(preset), tables=tables)


def base() -> Tokenizer:
    return make([(_H, _I, 256), (_BANG, _BANG, 257)], {"<|end|>": 300})


def llama(vocab: int, *, tied: bool, bias: bool = False, seed: int = 0) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).float()
    if bias:
        head = nn.Linear(HIDDEN, vocab, bias=True)
        with torch.no_grad():
            head.weight.copy_(model.lm_head.weight)
            head.bias.normal_(0.0, 0.5)
        model.lm_head = head
    return model


def populate_adam(
    model: nn.Module, ids: torch.Tensor, *, steps: int = 2, lr: float = 1e-2
) -> torch.optim.AdamW:
    """AdamW with real state: a few training steps of next-token loss on ``ids``."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    for _ in range(steps):
        opt.zero_grad()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
    return opt
