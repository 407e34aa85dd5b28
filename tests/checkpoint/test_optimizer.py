"""Optimizer state per logical parameter: Adam round trip, stale and duplicate registrations."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _models import TinyLM, lm_loss, train_steps

from tokembed.artifacts.safetensors_header import read_checkpoint_metadata
from tokembed.checkpoint import check_registration, load_checkpoint, save_checkpoint
from tokembed.checkpoint.optimizer import optimizer_tensors
from tokembed.errors import CheckpointError


def _adam(model: torch.nn.Module) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.95))


def test_state_is_keyed_by_canonical_name_one_entry_per_tie() -> None:
    model = TinyLM(tied=True)
    adam = _adam(model)
    train_steps(model, adam)
    tensors, meta = optimizer_tensors(model, adam)
    assert sorted(tensors) == [
        f"optimizer/{n}/{k}"
        for n in ("body.bias", "body.weight", "embed.weight")
        for k in ("exp_avg", "exp_avg_sq", "step")
    ]
    assert meta["param_groups"][0]["params"] == ["embed.weight", "body.weight", "body.bias"]
    assert meta["param_groups"][0]["options"]["betas"] == [0.8, 0.95]


def test_adam_round_trip_equal_moments_step_and_next_update(tmp_path: Path) -> None:
    source = TinyLM(tied=True, seed=1)
    adam = _adam(source)
    train_steps(source, adam, steps=3)
    path = save_checkpoint(source, tmp_path / "c.safetensors", optimizer=adam)
    target = TinyLM(tied=False, seed=9)
    load_checkpoint(target, path, retie=True)  # aliases first ...
    restored = _adam(target)  # ... then the optimizer, from the tied model
    load_checkpoint(target, path, optimizer=restored)
    assert len(restored.param_groups[0]["params"]) == 3  # one registration per logical table
    for p_src, p_dst in zip(source.parameters(), target.parameters(), strict=True):
        a, b = adam.state[p_src], restored.state[p_dst]
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), k
    train_steps(source, adam, steps=1)
    train_steps(target, restored, steps=1)
    assert torch.equal(source.embed.weight, target.embed.weight)  # same next step, bit for bit
    assert torch.equal(lm_loss(source), lm_loss(target))


def test_optimizer_built_before_aliases_were_restored_is_stale(tmp_path: Path) -> None:
    source = TinyLM(tied=True)
    adam = _adam(source)
    train_steps(source, adam)
    path = save_checkpoint(source, tmp_path / "c.safetensors", optimizer=adam)
    target = TinyLM(tied=False)
    early = _adam(target)  # holds the untied lm_head Parameter that loading replaces
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, path, optimizer=early, retie=True)
    assert e.value.code == "STALE_OPTIMIZER_PARAMETER"


def test_tied_parameter_registered_twice_is_refused() -> None:
    model = TinyLM(tied=True)
    # A list of every role's weight names the tied table twice; torch only warns.
    with pytest.warns(UserWarning, match="duplicate parameters"):
        twice = torch.optim.SGD(
            [model.embed.weight, model.lm_head.weight, model.body.weight], lr=0.1
        )
    with pytest.raises(CheckpointError) as e:
        check_registration(model, twice)
    assert e.value.code == "DUPLICATE_OPTIMIZER_REGISTRATION"
    assert e.value.value == "embed.weight"


def test_another_optimizer_or_grouping_is_a_mismatch(tmp_path: Path) -> None:
    source = TinyLM()
    adam = _adam(source)
    train_steps(source, adam)
    path = save_checkpoint(source, tmp_path / "c.safetensors", optimizer=adam)
    target = TinyLM()
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, path, optimizer=torch.optim.SGD(target.parameters(), lr=0.1))
    assert e.value.code == "OPTIMIZER_STATE_MISMATCH"
    no_state = save_checkpoint(source, tmp_path / "plain.safetensors")
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, no_state, optimizer=_adam(target))
    assert e.value.code == "OPTIMIZER_STATE_MISMATCH"
    assert read_checkpoint_metadata(no_state)["optimizer"] is None  # type: ignore[index]


def test_a_zero_dim_adam_moment_is_refused_and_leaves_the_optimizer_as_it_was(
    tmp_path: Path,
) -> None:
    source = TinyLM(tied=True)
    adam = _adam(source)
    train_steps(source, adam)
    state = adam.state[source.embed.weight]
    state["exp_avg"] = torch.tensor(0.5)  # a scalar moment would broadcast in the next step
    path = save_checkpoint(source, tmp_path / "c.safetensors", optimizer=adam)
    target = TinyLM(tied=True, seed=2)
    restored = _adam(target)
    train_steps(target, restored, steps=1)
    kept = {k: v.clone() for k, v in restored.state[target.embed.weight].items()}
    before = target.embed.weight.detach().clone()
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target, path, optimizer=restored)
    assert e.value.code == "OPTIMIZER_STATE_MISMATCH"
    assert "exp_avg" in e.value.message
    assert torch.equal(target.embed.weight, before)
    now = restored.state[target.embed.weight]
    assert all(torch.equal(now[k], v) for k, v in kept.items())
