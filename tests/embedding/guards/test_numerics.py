"""Numerical state observed from live modules and optimizers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from tokembed.embedding.guards.numerics import observe_numerics, write_numerical_state
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.errors import EmbeddingError

IDS = torch.tensor([[1, 4, 1, 0], [4, 6, 1, 4]])
D = 16


def _step(emb: nn.Module, opt: torch.optim.Optimizer, weight: torch.Tensor | None = None) -> None:
    emb(IDS).float().pow(2).sum().backward()
    if weight is not None:  # explicit master: copy the low-precision gradient up, step, copy down
        grad = emb.weight.grad
        assert grad is not None
        weight.grad = grad.float()
    opt.step()
    if weight is not None:
        with torch.no_grad():
            emb.weight.copy_(weight)


def test_fp32_table_with_adamw() -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(8, D)
    opt = torch.optim.AdamW(emb.parameters())
    before = observe_numerics(emb, IDS, optimizer=opt)
    assert (before.gradient_layout, before.first_moment_dtype) == (None, None)
    _step(emb, opt)
    state = observe_numerics(emb, IDS, optimizer=opt, checkpoint_dtype=torch.float32)
    assert state.parameter_storage_dtype == state.lookup_output_dtype == "float32"
    assert (state.gradient_layout, state.gradient_dtype) == ("dense", "float32")
    assert (state.optimizer, state.first_moment_dtype, state.second_moment_dtype) == (
        "AdamW",
        "float32",
        "float32",
    )
    assert state.optimizer_state == {"exp_avg": "float32", "exp_avg_sq": "float32"}
    assert (state.master_weight, state.scale_application_count) == ("none", 0)


def test_bf16_storage_with_explicit_fp32_master_and_cpu_autocast() -> None:
    # A typical mixed-precision manifest: fp32 checkpoint, bf16 storage, sqrt(d) once, AdamW on an fp32 master.
    torch.manual_seed(0)
    scale = math.sqrt(D)
    emb = TokenEmbedding(8, D, input_scale=scale, dtype=torch.bfloat16)
    master = nn.Parameter(emb.weight.detach().float())
    opt = torch.optim.AdamW([master])
    _step(emb, opt, weight=master)
    state = observe_numerics(
        emb, IDS, input_scale=scale, optimizer=opt, checkpoint_dtype=torch.float32,
        autocast_dtype=torch.bfloat16, master_weight=master, declared_master=True,
    )  # fmt: skip
    assert state.checkpoint_dtype == "float32"
    assert state.parameter_storage_dtype == state.lookup_output_dtype == "bfloat16"
    assert (state.input_scale, state.scale_application_count) == (scale, 1)
    assert state.autocast_lookup_policy == "follows_parameter_storage"
    assert (state.gradient_layout, state.gradient_dtype) == ("dense", "bfloat16")
    assert (state.first_moment_dtype, state.second_moment_dtype) == ("float32", "float32")
    assert state.master_weight == "explicit_float32_copy"


def test_autocast_does_not_convert_an_fp32_lookup_but_does_convert_a_linear() -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(8, D)
    state = observe_numerics(emb, IDS, autocast_dtype=torch.bfloat16)
    assert (state.autocast_enabled, state.autocast_dtype) == (True, "bfloat16")
    assert (state.autocast_lookup_dtype, state.autocast_lookup_policy) == (
        "float32",
        "follows_parameter_storage",
    )
    assert state.parameter_storage_dtype == "float32"  # entering autocast converted nothing
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert nn.Linear(D, 2)(emb(IDS)).dtype == torch.bfloat16  # autocast is per operator


def test_sparse_gradient_and_sparse_adam_state() -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(8, D, sparse=True)
    opt = torch.optim.SparseAdam(emb.parameters())
    _step(emb, opt)
    state = observe_numerics(emb, IDS, optimizer=opt, grad_scaler=torch.amp.GradScaler("cpu"))
    assert (state.gradient_layout, state.gradient_dtype, state.grad_scaler) == (
        "sparse",
        "float32",
        True,
    )
    assert state.first_moment_dtype == "float32"


def test_double_scaling_is_refused() -> None:
    torch.manual_seed(0)
    scale = math.sqrt(D)
    emb = TokenEmbedding(8, D, input_scale=scale)
    # The wrapper scales, and the caller (unaware) scales again: observed scale^2.
    with pytest.raises(EmbeddingError) as e:
        observe_numerics(emb, IDS, forward=lambda ids: emb(ids) * scale, input_scale=scale)
    assert (e.value.code, e.value.value) == ("DOUBLE_SCALING", 2)
    bf16 = TokenEmbedding(8, D, input_scale=scale, dtype=torch.bfloat16)
    with pytest.raises(EmbeddingError) as e:
        observe_numerics(bf16, IDS, forward=lambda ids: bf16(ids) * scale, input_scale=scale)
    assert e.value.code == "DOUBLE_SCALING"


@pytest.mark.failure_lab("7.1")
def test_declared_scale_must_match_the_observed_one() -> None:
    """Missing sqrt(d_model)."""
    torch.manual_seed(0)
    emb = nn.Embedding(8, D)
    with pytest.raises(EmbeddingError) as e:  # declared sqrt(d), nothing applies it
        observe_numerics(emb, IDS, input_scale=math.sqrt(D))
    assert e.value.code == "SCALE_MISMATCH"
    with pytest.raises(EmbeddingError) as e:  # declared none, the caller scales by 3
        observe_numerics(emb, IDS, forward=lambda ids: emb(ids) * 3.0)
    assert e.value.code == "SCALE_MISMATCH"


@pytest.mark.failure_lab("7.9")
def test_assumed_master_copies_are_refused() -> None:
    """Equating autocast with converted parameters or fp32 master weights."""
    torch.manual_seed(0)
    emb = nn.Embedding(8, D)
    opt = torch.optim.AdamW(emb.parameters())
    cases = [
        None,  # declared, absent
        emb.weight,  # the parameter itself
        emb.weight.detach()[:],  # a view of it
        emb.weight.detach().to(torch.bfloat16),  # not fp32
        torch.zeros(4, D),  # wrong shape
        emb.weight.detach().clone(),  # a copy the optimizer does not step
    ]
    for master in cases:
        with pytest.raises(EmbeddingError) as e:
            observe_numerics(emb, IDS, optimizer=opt, master_weight=master, declared_master=True)
        assert e.value.code == "MASTER_COPY_ASSUMED"


def test_numerical_state_json_is_written_atomically(tmp_path: Path) -> None:
    torch.manual_seed(0)
    emb = nn.Embedding(8, D)
    state = observe_numerics(emb, IDS, autocast_dtype=torch.bfloat16)
    path = tmp_path / "numerics.json"
    path.write_text("old")
    assert write_numerical_state(state, path) == path
    data = json.loads(path.read_text())
    assert data == state.to_dict()
    assert data["autocast"]["observed_lookup_policy"] == "follows_parameter_storage"
    assert data["optimizer"]["master_weight"] == "none"
    assert [p.name for p in tmp_path.iterdir()] == ["numerics.json"]  # no temp file left
    # A missing folder is created (as for every file tokembed writes), and again no temp
    # file is left beside the result.
    nested = write_numerical_state(state, tmp_path / "absent" / "numerics.json")
    assert json.loads(nested.read_text()) == state.to_dict()
    assert [p.name for p in nested.parent.iterdir()] == ["numerics.json"]
