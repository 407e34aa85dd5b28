"""Vocabulary growth of a DeepSpeed ZeRO-3 engine (DeepSpeed 0.19.8, CPU, gloo, 2 ranks, no AutoTP).

An untied and a tied Llama (V = 1,001) train 2 AdamW steps under ZeRO-3 on 2
data-parallel ranks (each on its half of every batch), grow by 37 rows
(``mean`` initializer) with :func:`migrate_zero3`, and train 2 more steps on
batches that use the new ids. One process does the same with plain AdamW and
:func:`migrate_model`. Compared within the bounds :mod:`_parity` derives from
fp32's eps: the loss of all four steps, the final table and head, and their Adam
moments (``exp_avg``, ``exp_avg_sq``); the new rows right after the migration;
each rank's partition of the grown head is not empty (transformers#41959) and
the step counters continue. ``migrate_model`` on the engine's module itself is
refused with ZERO3_PARTITIONED_TABLE (its rows cannot change inside ZeRO-3's
flat partitions); an engine below ZeRO-3 and an AutoTP engine (vocabulary-parallel
table) with INVALID_ARGUMENT.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import _gloo  # noqa: F401  (puts tests/parallel on the path)
import pytest
import torch
from _deepspeed_ranks import (
    EMBED_KEY,
    code_of,
    ds_config,
    require_deepspeed,
    setup_rank,
    train_data_parallel,
)
from _harness import run_ranks
from _llama import batches, build_llama, dims, full_loss, make_optimizer, optimizer_settings, train
from _parity import Bounds, assert_parity

from tokembed.migrate import NewRows, RowMap, migrate_model, migrate_zero3
from tokembed.parallel.deepspeed_tp import initialize_autotp

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_WORLD = 2
_OLD, _GROWTH = 1001, 37
_NEW = _OLD + _GROWTH
_EMB, _HEAD = EMBED_KEY, "lm_head.weight"
_KEYS = ("exp_avg", "exp_avg_sq")


def _config(stage: int = 3, **tensor_parallel: Any) -> dict[str, Any]:
    # At the default threshold ZeRO-3 keeps tables this small whole on every rank; the
    # default reduce bucket (5e8 fp32 elements, 2 GB) is allocated by every engine.
    zero = {"stage": stage, "stage3_param_persistence_threshold": 0, "reduce_bucket_size": 2**20}
    sections = {"tensor_parallel": tensor_parallel} if tensor_parallel else {}
    return ds_config(zero=stage, micro_batch=2, zero_optimization=zero, **sections)


def _rows() -> RowMap:
    return RowMap(old_rows=_OLD, new_rows=_NEW, source=(*range(_OLD), *([-1] * _GROWTH)))


def _grown_batches() -> list[torch.Tensor]:
    """Batches over the grown vocabulary; column 3 names new ids on every row (both ranks)."""
    out = batches(vocab=_NEW, seed=2)
    for step, b in enumerate(out):
        b[:, 3] = torch.arange(b.shape[0]) + _OLD + b.shape[0] * step
    return out


def _keys(tied: bool) -> list[str]:
    return [_EMB] if tied else [_EMB, _HEAD]


def _gathered(engine: Any, tied: bool) -> dict[str, Any]:
    """The full table(s) and their Adam moments (collectives: every rank)."""
    import deepspeed
    from deepspeed.utils import safe_get_full_optimizer_state

    params = dict(engine.module.named_parameters())
    chosen = [params[k] for k in _keys(tied)]
    with deepspeed.zero.GatheredParameters(chosen):
        state = {k: p.detach().clone() for k, p in zip(_keys(tied), chosen, strict=True)}
    moments = {
        key: {
            k: safe_get_full_optimizer_state(p, key).clone()
            for k, p in zip(_keys(tied), chosen, strict=True)
        }
        for key in _KEYS
    }
    return {"state": state, "moments": moments}


def _reference(model: Any, tied: bool) -> dict[str, Any]:
    """One process: AdamW 2 steps, migrate_model with the optimizer, 2 more steps."""
    opt = make_optimizer("adamw", model.parameters())
    first = train(model, opt, batches(vocab=_OLD), full_loss)
    migrate_model(model, _rows(), init=NewRows(name="mean"), optimizer=opt)
    params = dict(model.named_parameters())
    after = {k: params[k].detach()[_OLD:].clone() for k in _keys(tied)}
    second = train(model, opt, _grown_batches(), full_loss, first_step=3)
    return {"first": first, "after": after, "second": second}


def _checks(rank: int, world_size: int) -> dict[str, Any]:
    setup_rank(rank, world_size)
    import deepspeed

    optimizer = functools.partial(make_optimizer, "adamw")
    out: dict[str, Any] = {}
    for tied in (False, True):
        model = build_llama(tied=tied, vocab=_OLD)
        full = copy.deepcopy(model)
        engine, *_ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), optimizer=optimizer, config=_config()
        )
        first = train_data_parallel(engine, full_loss, batches(vocab=_OLD), rank, world_size)
        in_place = code_of(lambda: migrate_model(engine.module, _rows()))  # noqa: B023
        new, migration = migrate_zero3(
            engine,
            _rows(),
            model=build_llama(tied=tied, vocab=_OLD, seed=5),  # other values: all replaced
            config=_config(),
            optimizer=optimizer,
            init=NewRows(name="mean"),
        )
        params = dict(new.module.named_parameters())
        head = new.module.lm_head.weight
        with deepspeed.zero.GatheredParameters([params[k] for k in _keys(tied)]):
            after = {k: params[k].detach()[_OLD:].clone() for k in _keys(tied)}
        run = {
            "first": first,
            "in_place": in_place,
            "tensors": migration.tensors,
            "after": after,
            "head_partition": head.ds_tensor.numel(),
            "head_shape": tuple(head.ds_shape),
            "vocab_size": new.module.config.vocab_size,
            "tie": head is new.module.get_input_embeddings().weight,
            "steps": (engine.global_steps, new.global_steps),
            "second": train_data_parallel(new, full_loss, _grown_batches(), rank, world_size),
            **_gathered(new, tied),
        }
        run["ref"] = _reference(full, tied) if rank == 0 else None
        out["tied" if tied else "untied"] = run
    low, *_ = deepspeed.initialize(
        model=build_llama(tied=False, vocab=_OLD),
        optimizer=optimizer,
        model_parameters=None,
        config=_config(stage=1),
    )
    out["below_zero3"] = code_of(
        lambda: migrate_zero3(low, _rows(), model=build_llama(tied=False, vocab=_OLD), config={})
    )
    # Last: AutoTP's mesh, once made, stays for the rest of the process.
    autotp, *_ = initialize_autotp(
        build_llama(tied=False, vocab=_OLD),
        _config(autotp_size=world_size),
        optimizer=optimizer,
    )
    out["vocab_parallel"] = code_of(
        lambda: migrate_zero3(autotp, _rows(), model=build_llama(tied=False, vocab=_OLD), config={})
    )
    return out


@functools.cache
def _results() -> list[dict[str, Any]]:
    return run_ranks(_checks, _WORLD, timeout=500.0)


def _grow(bounds: Bounds, after: dict[str, torch.Tensor]) -> Bounds:
    """Move the bounds with the rows: exact rows keep theirs; a new row is a mean of old rows.

    ``|mean(a) - mean(b)| <= mean|a - b|``, plus each run's rounding of the mean to
    fp32 (half an eps of the value each); new rows' moments are zero in both runs.
    """
    eps = torch.finfo(torch.float32).eps
    weight = {}
    for key, w in bounds.weight.items():
        if key not in after:
            weight[key] = w
            continue
        w = torch.as_tensor(w, dtype=torch.float64).expand(_OLD, after[key].shape[1])
        new = w.mean(dim=0) + eps * after[key].double().abs()
        weight[key] = torch.cat([w, new])

    def zeros(moment: dict[str, Any]) -> dict[str, Any]:
        out = dict(moment)
        for key, rows in after.items():
            old = torch.as_tensor(moment[key], dtype=torch.float64).expand(_OLD, rows.shape[1])
            out[key] = torch.cat([old, old.new_zeros(_GROWTH, rows.shape[1])])
        return out

    return Bounds(weight=weight, exp_avg=zeros(bounds.exp_avg), exp_avg_sq=zeros(bounds.exp_avg_sq))


@pytest.mark.parametrize("name", ["untied", "tied"])
def test_grown_zero3_engine_trains_as_one_process(name: str) -> None:
    tied = name == "tied"
    ref = _results()[0][name]["ref"]
    settings = optimizer_settings("adamw")
    for result in _results():
        run = result[name]
        bounds = assert_parity(
            {"losses": run["first"]},
            ref["first"],
            dtype=torch.float32,
            dims=dims(vocab=_OLD),
            optimizer=settings,
            keys=[],
        )
        grown = _grow(bounds, ref["after"])
        for key in _keys(tied):  # the new rows, right after the migration
            diff = (run["after"][key].double() - ref["after"][key].double()).abs()
            assert bool((diff <= grown.weight[key][_OLD:]).all()), key
        assert_parity(
            {"losses": run["second"], "state": run["state"], "moments": run["moments"]},
            ref["second"],
            dtype=torch.float32,
            dims=dims(vocab=_NEW),
            optimizer=settings,
            keys=_keys(tied),
            start=grown,
            first_step=3,
            moments=True,
        )


@pytest.mark.parametrize("name", ["untied", "tied"])
def test_grown_head_has_rows_on_every_rank(name: str) -> None:
    for result in _results():
        run = result[name]
        assert run["head_shape"] == (_NEW, 32)
        assert run["head_partition"] > 0  # transformers#41959: empty shards after a resize
        assert run["vocab_size"] == _NEW
        assert run["tie"] == (name == "tied")
        assert run["steps"] == (2, 2)
        assert run["tensors"] == ((_EMB,) if name == "tied" else (_EMB, _HEAD))
        # The new rows are the mean initializer's values: finite and not all zero.
        for rows in run["after"].values():
            assert rows.shape == (_GROWTH, 32)
            assert bool(torch.isfinite(rows).all())
            assert bool(rows.abs().sum() > 0)


def test_what_cannot_be_done_is_refused_with_a_code() -> None:
    for result in _results():
        assert result["untied"]["in_place"] == "ZERO3_PARTITIONED_TABLE"
        assert result["tied"]["in_place"] == "ZERO3_PARTITIONED_TABLE"
        assert result["below_zero3"] == "INVALID_ARGUMENT"
        assert result["vocab_parallel"] == "INVALID_ARGUMENT"
