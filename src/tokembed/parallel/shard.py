"""Shard a whole model's vocabulary tables in place: input embedding, output head, or both.

The model stays single-device code; these functions apply the plan (as
torchtitan's ``parallelize`` does). :func:`shard_input_embedding` replaces a
Hugging Face-style model's untied input embedding (``get_input_embeddings()``,
an nn.Embedding or a TokenEmbedding) by a
:class:`~tokembed.parallel.vocab_embedding.VocabParallelEmbedding` holding this
rank's rows and the same lookup contract (a TokenEmbedding's address binding,
PAD policy and input scale are kept); :func:`shard_lm_head` replaces the output
head by a :class:`~tokembed.parallel.lm_head.VocabParallelLMHead` over the same
row intervals, and for a tied model shards both together so that the head's
local weight *is* the embedding's local Parameter: two Parameters would each
get half of the gradient and drift apart.

Admission refuses, with codes, what would silently break the model:

* TIED_WITHOUT_SHARDED_HEAD — the embedding's Parameter is shared with another
  module (a tied head): sharding it alone would untie it.
* ALREADY_PARALLELIZED — the embedding is another tensor-parallel layer
  (DeepSpeed ``TensorParallel_Layer``, Megatron-Core, DTensor parameters,
  tokembed's routed or column layers).
* HIDDEN_DIM_SHARDED — the table was sliced on the hidden dimension (width !=
  ``config.hidden_size``, or DeepSpeed's hidden-slice metadata on the weight).
* NOT_AN_EMBEDDING — anything that is not a plain ``nn.Embedding`` or
  TokenEmbedding (subclasses with their own forward, e.g. scaled embeddings,
  or parametrized weights).

Run these before building the optimizer: an optimizer built earlier still
steps the old full Parameter, updating every rank's copy of rows it does not
own while forward reads the shards (check_owned_step refuses that).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.distributed import ProcessGroup
from torch.nn.utils import parametrize

from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.lookup_config import LookupConfig
from tokembed.errors import ParallelError, UsageError
from tokembed.parallel._sharded_lookup import table_source
from tokembed.parallel.lm_head import VocabParallelLMHead
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = ["shard_input_embedding", "shard_lm_head"]

# DeepSpeed AutoTP's hidden-dimension slice (_slice_embedding in 0.19.8) tags the new
# weight with this attribute and partition_dim 1 (deepspeed.checkpoint.constants).
_DS_SLICE_META = "ds_autotp_universal_checkpoint_meta"


def _is_foreign_tensor_parallel(module: nn.Module) -> str | None:
    """Name the tensor-parallel framework that already owns ``module``, if any."""
    for cls in type(module).__mro__:
        if cls.__name__ == "TensorParallel_Layer" and cls.__module__.startswith("deepspeed"):
            return f"DeepSpeed {type(module).__name__}"
    root = type(module).__module__.split(".")[0]
    if root == "megatron":
        return f"Megatron-Core {type(module).__name__}"
    if type(module).__module__.startswith("tokembed.parallel"):
        return f"tokembed {type(module).__name__}"
    from torch.distributed.tensor import DTensor

    for param in module.parameters():
        if isinstance(param, DTensor):
            return f"DTensor-parametrized {type(module).__name__}"
        if getattr(param, "tensor_model_parallel", False):  # Megatron's marker
            return f"tensor_model_parallel {type(module).__name__}"
    return None


def _is_foreign_vocab_parallel(module: Any) -> bool:
    """DeepSpeed's or Megatron-Core's VocabParallelEmbedding: already row-sharded by V."""
    cls = type(module)
    return cls.__name__ == "VocabParallelEmbedding" and cls.__module__.split(".")[0] in (
        "deepspeed",
        "megatron",
    )


def _expected_width(model: nn.Module) -> int | None:
    config = getattr(model, "config", None)
    if config is None:
        return None
    # Some configs (Gemma3, multimodal wrappers) keep the text model's fields apart.
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    width = getattr(text, "hidden_size", None)
    return int(width) if width is not None else None


def _check_embedding(model: nn.Module, emb: Any) -> nn.Embedding | TokenEmbedding:
    """Admission of the module returned by ``get_input_embeddings()``; returns it typed."""
    foreign = _is_foreign_tensor_parallel(emb) if isinstance(emb, nn.Module) else None
    if foreign is not None:
        raise ParallelError(
            "ALREADY_PARALLELIZED",
            f"the input embedding is already a tensor-parallel layer ({foreign})",
            value=type(emb).__name__,
            fix="shard the embedding once: leave it to that framework, or keep it a plain "
            "nn.Embedding (e.g. exclude it from the AutoTP/DTensor plan)",
        )
    table_source(emb, allow_max_norm=True)  # NOT_AN_EMBEDDING, unshardable options
    assert isinstance(emb, nn.Embedding | TokenEmbedding)
    base = TokenEmbedding if isinstance(emb, TokenEmbedding) else nn.Embedding
    if type(emb).forward is not base.forward or parametrize.is_parametrized(emb):
        raise ParallelError(
            "NOT_AN_EMBEDDING",
            f"{type(emb).__name__} changes {base.__name__}'s lookup (own forward or a "
            "parametrized weight); a masked row lookup would drop that behaviour",
            value=type(emb).__name__,
            fix="shard a plain nn.Embedding (or a TokenEmbedding with input_scale) and apply "
            "other extras outside it",
        )
    width = _expected_width(model)
    meta = getattr(emb.weight, _DS_SLICE_META, None)
    sliced_meta = isinstance(meta, dict) and meta.get("partition_dim") == 1
    if sliced_meta or (width is not None and emb.embedding_dim != width):
        raise ParallelError(
            "HIDDEN_DIM_SHARDED",
            f"the input embedding is [{emb.num_embeddings}, {emb.embedding_dim}] but the "
            f"model's hidden size is {width}: it was already sliced on the hidden dimension",
            value=(emb.embedding_dim, width),
            fix="shard the full table once, on the vocabulary dimension: drop the "
            "hidden-dimension partition spec for the embedding",
        )
    return emb


def _names_of(model: nn.Module, param: torch.Tensor) -> list[str]:
    return [n for n, p in model.named_parameters(remove_duplicate=False) if p is param]


def shard_input_embedding(
    model: nn.Module, *, group: ProcessGroup | None = None, tie: bool = False
) -> VocabParallelEmbedding | None:
    """Replace ``model.get_input_embeddings()`` by its vocabulary-parallel shard, in place.

    Every rank of ``group`` must call this with the same full table (same seed or
    the same checkpoint); rank r keeps rows ``row_intervals(V, R)[r]``. A
    TokenEmbedding keeps its whole lookup contract on the shard (address-hash
    binding, PAD policy, ``-1`` diagnosis, one-hot guard, input scale). With
    ``tie=True`` a tied output head is sharded together with the embedding (see
    :func:`shard_lm_head`), so the pair stays one Parameter per rank.

    Returns the new layer, or None when the embedding already is a
    VocabParallelEmbedding: ours (e.g. sharded earlier by :func:`shard_lm_head`),
    DeepSpeed's (a tied pair sharded by AutoTP's ``vocab_parallel_lm_head``) or
    Megatron-Core's.

    Example::

        model = LlamaForCausalLM(LlamaConfig(vocab_size=131, hidden_size=32, ...))
        emb = shard_input_embedding(model, group=tp_group)   # rank 1 of 2: rows [66, 131)
        optimizer = torch.optim.AdamW(model.parameters())   # after sharding

    Raises:
        ParallelError: TIED_WITHOUT_SHARDED_HEAD, ALREADY_PARALLELIZED,
            HIDDEN_DIM_SHARDED or NOT_AN_EMBEDDING (see the module docstring).
        UsageError: INVALID_ARGUMENT for ``tie=True`` on a model that is not tied.
    """
    emb = model.get_input_embeddings()  # type: ignore[operator]
    if isinstance(emb, VocabParallelEmbedding) or _is_foreign_vocab_parallel(emb):
        return None
    emb = _check_embedding(model, emb)
    sharers = _names_of(model, emb.weight)
    tied = len(sharers) > 1
    if tie:
        if not tied:
            raise UsageError(
                "INVALID_ARGUMENT",
                "tie=True but the input embedding's weight is not shared with an output head",
                value=sharers,
                fix="call shard_lm_head(model, group=group) to shard an untied head separately",
            )
        shard_lm_head(model, group=group)
        out = model.get_input_embeddings()  # type: ignore[operator]
        assert isinstance(out, VocabParallelEmbedding)
        return out
    if tied:
        raise ParallelError(
            "TIED_WITHOUT_SHARDED_HEAD",
            f"the input embedding's weight is shared by {sharers}; sharding it alone would "
            "untie it from the output head",
            value=sharers,
            fix="pass tie=True (or call shard_lm_head first) to shard head and embedding together",
        )
    vpe = VocabParallelEmbedding.from_embedding(emb, group=group)
    model.set_input_embeddings(vpe)  # type: ignore[operator]
    return vpe


def _check_head(head: Any) -> nn.Linear:
    if isinstance(head, nn.Module) and _is_foreign_tensor_parallel(head) is not None:
        raise ParallelError(
            "ALREADY_PARALLELIZED",
            f"the output head is already a tensor-parallel layer ({type(head).__name__})",
            value=type(head).__name__,
            fix="leave the head to that framework or keep it a plain nn.Linear",
        )
    if type(head) is not nn.Linear or head.bias is not None:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"the output head is {type(head).__name__}"
            + (" with a bias" if isinstance(head, nn.Linear) and head.bias is not None else "")
            + "; only a bias-free nn.Linear(hidden, V) can be vocabulary-sharded",
            value=type(head).__name__,
            fix="shard a bias-free nn.Linear output head, or leave the head replicated",
        )
    return head


def shard_lm_head(model: nn.Module, *, group: ProcessGroup | None = None) -> VocabParallelLMHead:
    """Replace ``model.get_output_embeddings()`` by a vocabulary-parallel head, in place.

    Untied model: the head keeps its own Parameter, rows ``row_intervals(V, R)[r]``
    copied from the full ``[V, d]`` head. Tied model (head weight is the input
    embedding's weight): the embedding is sharded too and the head is built with
    ``tie_to`` it, so ``head.weight is emb.weight`` on every rank and both roles
    accumulate into one local gradient.

    The head returns local logits ``[..., V_r]``: compute the loss with
    :func:`~tokembed.parallel.cross_entropy.vocab_parallel_cross_entropy`
    (see :func:`~tokembed.parallel.causal_lm.causal_lm_loss`), not the model's own
    full-vocabulary loss.

    Raises:
        ParallelError: as :func:`shard_input_embedding` for the tied embedding;
            ALREADY_PARALLELIZED for a head replaced by another framework.
        UsageError: INVALID_ARGUMENT for a head that is not a bias-free nn.Linear.
    """
    head = model.get_output_embeddings()  # type: ignore[operator]
    if isinstance(head, VocabParallelLMHead):
        return head
    head = _check_head(head)
    emb_module = model.get_input_embeddings()  # type: ignore[operator]
    tied = isinstance(emb_module, nn.Module) and getattr(emb_module, "weight", None) is head.weight
    if tied:
        emb = _check_embedding(model, emb_module)
        vpe = VocabParallelEmbedding.from_embedding(emb, group=group)
        new_head = VocabParallelLMHead(head.in_features, head.out_features, group=group, tie_to=vpe)
        assert new_head.weight is vpe.weight
        model.set_input_embeddings(vpe)  # type: ignore[operator]
    else:
        # An untied head addresses the same vocabulary: it inherits the embedding's binding.
        config = getattr(emb_module, "config", None)
        bound = config.address_hash if isinstance(config, LookupConfig) else None
        new_head = VocabParallelLMHead.from_linear(head, group=group, address_hash=bound)
    model.set_output_embeddings(new_head)  # type: ignore[operator]
    return new_head
