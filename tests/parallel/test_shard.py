"""shard_input_embedding / shard_lm_head: admission refusals by code, identity of the tie.

Refusals happen before any collective, so they run in this process on the
single-device model; what needs a group (the no-op on an already sharded
embedding, the tie's object identity, a DTensor-parallelized embedding) comes
from the shared whole-model spawn.
"""

from __future__ import annotations

import pytest
import torch
from _llama import HIDDEN, VOCAB, build_llama
from _whole_model import world_results
from torch import nn
from torch.nn.utils import parametrize

from tokembed.errors import ParallelError, TokembedError, UsageError
from tokembed.parallel.intervals import row_intervals
from tokembed.parallel.shard import shard_input_embedding, shard_lm_head


def _code(fn: object, *args: object, **kwargs: object) -> str:
    with pytest.raises(TokembedError) as e:
        fn(*args, **kwargs)  # type: ignore[operator]
    return e.value.code


class _ScaledEmbedding(nn.Embedding):
    """Like Gemma's scaled word embedding: a forward of its own."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * HIDDEN**0.5


class _Double(nn.Module):
    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return 2 * weight


def test_tied_embedding_without_sharded_head_is_refused() -> None:
    model = build_llama(tied=True)
    with pytest.raises(ParallelError) as e:
        shard_input_embedding(model)
    assert e.value.code == "TIED_WITHOUT_SHARDED_HEAD"
    assert e.value.value == ["model.embed_tokens.weight", "lm_head.weight"]
    # Nothing was replaced: the model is still tied, single-device.
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


def test_hidden_dim_slice_is_refused() -> None:
    model = build_llama(tied=False)
    model.set_input_embeddings(nn.Embedding(VOCAB, HIDDEN // 2))  # [V, H/tp] as a hidden slice
    assert _code(shard_input_embedding, model) == "HIDDEN_DIM_SHARDED"


def test_deepspeed_hidden_slice_metadata_is_refused() -> None:
    # DeepSpeed 0.19.8 AutoTP _slice_embedding tags the sliced weight like this.
    model = build_llama(tied=False)
    meta = {"partition_type": "row", "partition_dim": 1, "logical_shape": (VOCAB, 2 * HIDDEN)}
    model.get_input_embeddings().weight.ds_autotp_universal_checkpoint_meta = meta
    assert _code(shard_input_embedding, model) == "HIDDEN_DIM_SHARDED"


@pytest.mark.parametrize(
    "replacement",
    [
        lambda: nn.Linear(HIDDEN, VOCAB, bias=False),
        lambda: _ScaledEmbedding(VOCAB, HIDDEN),
        lambda: parametrize.register_parametrization(
            nn.Embedding(VOCAB, HIDDEN), "weight", _Double()
        ),
    ],
    ids=["linear", "own-forward", "parametrized"],
)
def test_anything_but_a_plain_embedding_is_refused(replacement: object) -> None:
    model = build_llama(tied=False)
    model.set_input_embeddings(replacement())  # type: ignore[operator]
    assert _code(shard_input_embedding, model) == "NOT_AN_EMBEDDING"


def test_tie_flag_on_an_untied_model_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as e:
        shard_input_embedding(build_llama(tied=False), tie=True)
    assert e.value.code == "INVALID_ARGUMENT"


def test_head_with_bias_is_refused() -> None:
    model = build_llama(tied=False)
    model.set_output_embeddings(nn.Linear(HIDDEN, VOCAB, bias=True))
    assert _code(shard_lm_head, model) == "INVALID_ARGUMENT"


# --- real groups ----------------------------------------------------------------


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
@pytest.mark.parametrize("world_size", [2, 4])
def test_sharded_models_keep_the_tie_and_the_row_intervals(world_size: int) -> None:
    for rank, result in enumerate(world_results(world_size)):
        facts = result["facts"]
        start, end = row_intervals(VOCAB, world_size)[rank]
        assert facts["interval"] == (start, end)
        assert facts["local_rows"] == end - start
        # The head's local weight IS the embedding's local Parameter, registered once.
        assert facts["tied_same_parameter"] is True
        assert facts["tied_param_count"] == facts["tied_named_params"]
        assert facts["first_is_vpe"] is True
        assert facts["second_call"] is None  # already a VocabParallelEmbedding
        assert facts["after_head_call"] is None  # shard_lm_head sharded the tied pair
        assert facts["tied_refusal"] == "TIED_WITHOUT_SHARDED_HEAD"


@pytest.mark.distributed
@pytest.mark.xdist_group("tokembed-whole-model")
@pytest.mark.parametrize("world_size", [2, 4])
def test_dtensor_parallelized_embedding_is_refused(world_size: int) -> None:
    for result in world_results(world_size):
        assert result["facts"]["dtensor_refusal"] == "ALREADY_PARALLELIZED"


def test_heavy_optional_packages_load_only_when_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tokembed.parallel; "
        "print(sorted(m for m in ('deepspeed', 'transformers', 'safetensors', 'megatron') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
