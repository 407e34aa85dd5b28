"""A model from its files: loaded with weights, or built on the meta device from its config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokembed.artifacts.models import instantiate_from_config, load_model
from tokembed.errors import UsageError

_LLAMA = {
    "model_type": "llama", "vocab_size": 32, "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
    "tie_word_embeddings": True,
}  # fmt: skip


def test_a_config_builds_its_architecture_without_memory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(_LLAMA))
    model = instantiate_from_config(tmp_path)  # no architectures: the causal-LM head
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.get_input_embeddings().weight.device.type == "meta"
    assert model.get_input_embeddings().weight.shape == (32, 8)


def test_an_unknown_architecture_and_a_missing_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**_LLAMA, "architectures": ["NoSuchLM"]}))
    with pytest.raises(UsageError) as e:
        instantiate_from_config(tmp_path)
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(UsageError) as e:
        instantiate_from_config(tmp_path / "absent")
    assert e.value.code == "FILE_NOT_FOUND"


def test_a_saved_model_loads_back_in_eval_mode(tmp_path: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    saved = LlamaForCausalLM(LlamaConfig(**_LLAMA))
    saved.save_pretrained(tmp_path)
    model = load_model(tmp_path)
    assert not model.training
    assert torch.equal(model.get_input_embeddings().weight, saved.get_input_embeddings().weight)
    with pytest.raises(UsageError) as e:
        load_model(tmp_path / "absent")
    assert e.value.code == "FILE_NOT_FOUND"
