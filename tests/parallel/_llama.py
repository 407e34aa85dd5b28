"""A 2-layer Llama built from a config, its batches, and a training loop that records each step.

Shared by the whole-model parity tests (plain torch.distributed and DeepSpeed
AutoTP). V = 131 is prime, so it splits unevenly at every tensor-parallel size
(66 + 65 over 2, 33 + 33 + 33 + 32 over 4). The batches are drawn so that every
row shard at size 2 and 4 sees tokens. The single-process reference is the same
model trained on the same batches *inside a rank* (a copy taken before
sharding), so that it runs under the ranks' thread settings; :func:`train`
records what the parity checks compare: the loss of every step, the gradients
before the optimizer steps, the weights after, and AdamW's second moments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from _parity import Dims
from torch import nn

from tokembed.parallel.intervals import row_intervals

__all__ = [
    "BATCH",
    "HIDDEN",
    "PAD",
    "STEPS",
    "TINY_VOCAB",
    "VOCAB",
    "batches",
    "build_llama",
    "dims",
    "full_loss",
    "labels_for",
    "make_optimizer",
    "optimizer_settings",
    "train",
]

# gather(p, local): the full [V, ...] tensor of sharded parameter p's per-row
# ``local`` tensor (its gradient, its optimizer state), None when p is replicated.
GradGather = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | None"]

VOCAB = 131
# V = 9 leaves the last of 4 ranks an empty shard: ceil chunks [0,3) [3,6) [6,9) [9,9).
TINY_VOCAB = 9
HIDDEN = 32
BATCH = (4, 12)  # [batch, seq] per step; split into halves for data parallelism
STEPS = 2
# A PAD id inside the batches (owned by rank 1 of 2 and rank 2 of 4): its lookup
# gradient must stay zero and its label is ignored, as a padded batch's would be.
PAD = 70
_PAD_COLUMNS = (4, 9)
LR = {"sgd": 0.5, "adamw": 0.01}
_INTERMEDIATE, _LAYERS = 64, 2


def dims(*, vocab: int = VOCAB) -> Dims:
    """The sizes the parity tolerances are derived from (see _parity)."""
    return Dims(
        vocab=vocab,
        hidden=HIDDEN,
        intermediate=_INTERMEDIATE,
        layers=_LAYERS,
        seq=BATCH[1],
        tokens=BATCH[0] * BATCH[1],
    )


def build_llama(
    *,
    tied: bool,
    vocab: int = VOCAB,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    pad: int | None = None,
) -> nn.Module:
    """Same weights on every rank for a given seed: ranks shard this full model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=_INTERMEDIATE,
        num_hidden_layers=_LAYERS,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        pad_token_id=pad,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(dtype)
    model.train()
    return model


def batches(
    *, vocab: int = VOCAB, steps: int = STEPS, seed: int = 1, pad: int | None = None
) -> list[torch.Tensor]:
    """``steps`` batches of ids [4, 12] whose tokens reach every non-empty shard at sizes 2, 4.

    With ``pad``, two columns of every batch are PAD (mid-sequence, so later
    positions attend to them and the PAD row would receive gradient if unmasked).
    """
    g = torch.Generator().manual_seed(seed)
    out = [torch.randint(0, vocab, BATCH, generator=g) for _ in range(steps)]
    if pad is not None:
        for b in out:
            b[:, list(_PAD_COLUMNS)] = pad
    for b in out:
        for size in (2, 4):
            for start, end in row_intervals(vocab, size):
                assert start == end or bool(((b >= start) & (b < end)).any()), (size, start)
    return out


def labels_for(ids: torch.Tensor, pad: int | None) -> torch.Tensor:
    """Labels of a padded batch: the ids, with PAD positions ignored (-100)."""
    return ids if pad is None else ids.masked_fill(ids == pad, -100)


def make_optimizer(kind: str, params: Any, *, lr: float | None = None) -> torch.optim.Optimizer:
    lr = LR[kind] if lr is None else lr
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    assert kind == "adamw", kind
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.1)


def optimizer_settings(kind: str) -> dict[str, Any]:
    """The param group :func:`make_optimizer` builds (lr, betas, eps, weight_decay...)."""
    group = make_optimizer(kind, [torch.zeros(1, requires_grad=True)]).param_groups[0]
    return {k: v for k, v in group.items() if k != "params"}


def full_loss(model: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross entropy from full logits, in the model's dtype.

    The model's own ``.loss`` casts logits to fp32 first, which would cap a
    float64 comparison at fp32 rounding.
    """
    logits = model(input_ids=ids).logits  # [B, L, V]
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def _grads(model: nn.Module, gather: GradGather | None) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        out[name] = _full(p, p.grad, gather)
    return out


def train(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    data: list[torch.Tensor],
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    pad: int | None = None,
    after_backward: Callable[[], None] | None = None,
    gather: GradGather | None = None,
    state: Callable[[nn.Module], dict[str, torch.Tensor]] | None = None,
    first_step: int = 1,
) -> dict[str, Any]:
    """Plain training loop that records every step.

    ``after_backward`` hooks a data-parallel gradient reduction; ``gather``
    rebuilds full tensors of sharded parameters (see GradGather);
    ``state(model)`` returns the full state dict. Returns ``losses`` [steps],
    ``grads`` [steps] of {name: full gradient before the optimizer step},
    ``state`` (final full state dict) and, for Adam-type optimizers,
    ``second_moments`` [steps] of {name: bias-corrected exp_avg_sq after the step}
    and ``moments`` (the final raw ``exp_avg`` and ``exp_avg_sq``, {key: {name: tensor}}).
    ``first_step`` numbers the first step (a run continuing from an optimizer that
    already stepped: its bias correction counts the earlier steps).
    """
    names = {id(p): name for name, p in model.named_parameters()}
    losses, grads, moments = [], [], []
    for step, ids in enumerate(data, start=first_step):
        loss = loss_fn(model, ids, labels_for(ids, pad))
        losses.append(loss.item())
        loss.backward()
        if after_backward is not None:
            after_backward()
        grads.append(_grads(model, gather))
        opt.step()
        opt.zero_grad()
        inner = getattr(opt, "optimizer", opt)  # under an ownership-checking wrapper
        if isinstance(inner, torch.optim.AdamW):
            beta2 = inner.param_groups[0]["betas"][1]
            moments.append(
                {
                    names[id(p)]: _full(p, inner.state[p]["exp_avg_sq"], gather) / (1 - beta2**step)
                    for group in inner.param_groups
                    for p in group["params"]
                }
            )
    final = state(model) if state is not None else model.state_dict()
    inner = getattr(opt, "optimizer", opt)
    adam = isinstance(inner, torch.optim.AdamW)
    return {
        "losses": losses,
        "grads": grads,
        "state": {k: v.detach().clone() for k, v in final.items()},
        "second_moments": moments,
        "moments": {
            key: {
                names[id(p)]: _full(p, inner.state[p][key], gather)
                for group in inner.param_groups
                for p in group["params"]
            }
            for key in (("exp_avg", "exp_avg_sq") if adam else ())
        },
    }


def _full(p: torch.Tensor, local: torch.Tensor, gather: GradGather | None) -> torch.Tensor:
    """``local`` (a per-parameter tensor of ``p``'s shape) gathered like p's gradient."""
    if gather is None:
        return local.detach().clone()
    full = gather(p, local)
    return (local if full is None else full).detach().clone()
