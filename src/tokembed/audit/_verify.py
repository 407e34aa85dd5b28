"""Verification of candidate rows on the model: can it repeat the token when asked to?

A trained model copies a token it has just seen with high probability when the
context asks for a copy. For each candidate id the prompts below are built as ids:
the text around the token is encoded once, and the candidate's id is put in place
of the token, so even a token that text can never produce (unreachable, partial
UTF-8, special) is tested. The model then continues greedily for a few steps; the
probability it gives the candidate at each step is recorded, and the maximum over
steps and prompts is the candidate's score. Continuing a few steps lets a model
that first emits a space or a quote still show that it can produce the token.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from tokembed.tokenizer import Tokenizer

__all__ = ["PROMPTS", "max_repeat_probability", "prompt_ids"]

# (text before the token, text after it) per prompt; the model should continue with
# the token. The first asks for an echo, the second shows one worked echo of an
# ordinary word first (small models follow an example better than an instruction),
# the third is the token repeated, which even a weak model continues.
PROMPTS: tuple[tuple[str, str], ...] = (
    ("Please echo back exactly what is between the arrows.\nText: →", "←\nEcho: →"),
    ("Copy each word.\nWord: «house»\nCopy: «house»\nWord: «", "»\nCopy: «"),
)
_RUN = 8  # copies of the token in the repetition prompt


def prompt_ids(tok: Tokenizer, token: int) -> list[list[int]]:
    """The id sequences of every prompt for ``token`` (the model's next id should be it)."""
    out = []
    for before, after in PROMPTS:
        out.append([*tok.encode_ordinary(before), token, *tok.encode_ordinary(after)])
    out.append([token] * _RUN)
    return out


def _logits(output: Any) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else output.logits


def _cache_argument(model: nn.Module) -> str | None:
    """The keyword a transformers model takes its key/value cache by (renamed from
    ``past_key_values`` to ``cache`` in transformers 5.x), or None for other modules."""
    if getattr(getattr(model, "config", None), "use_cache", None) is None:
        return None
    parameters = inspect.signature(model.forward).parameters
    return next((n for n in ("cache", "past_key_values") if n in parameters), None)


def _step_probabilities(
    model: nn.Module, ids: torch.Tensor, targets: torch.Tensor, steps: int
) -> torch.Tensor:
    """``[B, steps]`` probability of ``targets`` at each of ``steps`` greedy steps."""
    probs = []
    cache_name = _cache_argument(model)
    past = None
    feed = ids
    for _ in range(steps):
        if cache_name is not None:
            # Each step feeds only the new id; the cache holds the prompt's keys and values.
            out = model(input_ids=feed, use_cache=True, **{cache_name: past})
            past = getattr(out, cache_name)
        else:
            out = model(input_ids=ids)
        last = _logits(out)[:, -1, :].to(torch.float64)
        p = torch.softmax(last, dim=-1)
        probs.append(p.gather(1, targets[:, None])[:, 0])
        nxt = last.argmax(dim=-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        feed = nxt
    return torch.stack(probs, dim=1)


@torch.no_grad()
def max_repeat_probability(
    model: nn.Module,
    tok: Tokenizer,
    candidates: Sequence[int],
    *,
    steps: int,
    batch_size: int,
) -> list[float]:
    """For each candidate, the largest probability the model gives it over every prompt
    and greedy step (see module docstring)."""
    if not candidates:
        return []
    device = next(model.parameters()).device
    best = torch.zeros(len(candidates), dtype=torch.float64)
    per_prompt = [prompt_ids(tok, c) for c in candidates]
    for k in range(len(PROMPTS) + 1):
        # One prompt shape at a time: every candidate's prompt has the same length, so
        # a batch needs no padding and no attention mask.
        for start in range(0, len(candidates), batch_size):
            chunk = range(start, min(start + batch_size, len(candidates)))
            ids = torch.tensor([per_prompt[j][k] for j in chunk], device=device)
            targets = torch.tensor([candidates[j] for j in chunk], device=device)
            p = _step_probabilities(model, ids, targets, steps).max(dim=1).values.cpu()
            best[start : chunk.stop] = torch.maximum(best[start : chunk.stop], p)
    return [float(x) for x in best]
