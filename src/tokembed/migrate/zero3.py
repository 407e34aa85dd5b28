"""Vocabulary migration of a DeepSpeed ZeRO-3 engine: gather, migrate in one process, rebuild.

Under ZeRO-3 (DeepSpeed 0.19.8) every rank keeps a flat slice of each parameter,
and the fp32 master weights and the optimizer's per-element state (AdamW's
``exp_avg`` / ``exp_avg_sq``) live in flat fp32 buffers whose sizes, offsets and
gradient buckets are fixed when ``deepspeed.initialize`` builds the engine. A
table cannot change its row count inside them: resizing the module's Parameter
in place leaves the optimizer's partitions at the old size (transformers#41959:
the grown head of an untied model gets empty shards). So
:func:`migrate_zero3` rebuilds the engine:

1. gathers each parameter's fp32 master value and per-element optimizer state
   with DeepSpeed's ``safe_get_full_fp32_param`` / ``safe_get_full_optimizer_state``
   (collectives: every rank calls it) into ``model``, a copy of the architecture
   that DeepSpeed does not wrap (for example built again from the same config);
2. migrates that model with :func:`~tokembed.migrate.apply.migrate_model` and an
   optimizer holding the gathered state, so table, head and moments follow the
   row map exactly as in one process (exact rows bit for bit, new rows' moments
   zero, the step kept);
3. builds a new engine on the grown model with the same config and writes the
   migrated fp32 masters, moments, the optimizer's step and the engine's step
   counters into it (``safe_set_full_*``).

Every rank holds the full model and its moments while it migrates (DeepSpeed then
partitions the grown model again); the old engine is left as it was and should
be dropped.

Example::

    engine, migration = migrate_zero3(
        engine, row_map(change), model=LlamaForCausalLM(config),
        config=ds_config, optimizer=lambda params: torch.optim.AdamW(params, lr=1e-3),
    )

Raises UsageError INVALID_ARGUMENT (not a ZeRO-3 engine, a tensor-parallel
engine, NVMe-swapped optimizer state, per-subgroup steps that differ),
EmbeddingError SHAPE_MISMATCH (``model`` is another architecture), and the codes of
:func:`~tokembed.migrate.apply.migrate_model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import nn

from tokembed.errors import EmbeddingError, UsageError
from tokembed.migrate.apply import Migration, migrate_model
from tokembed.migrate.rowmap import RowMap

__all__ = ["migrate_zero3"]

OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]


def _refuse_engine(engine: Any) -> None:
    from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

    stage = engine.zero_optimization_stage() if hasattr(engine, "zero_optimization_stage") else None
    if stage != 3:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"migrate_zero3 needs a ZeRO-3 engine, this one runs ZeRO stage {stage}",
            value=stage,
            fix="below ZeRO-3 save the engine, migrate the gathered model with migrate_model "
            "and build the engine again",
        )
    if any(isinstance(m, VocabParallelEmbedding) for m in engine.module.modules()):
        raise UsageError(
            "INVALID_ARGUMENT",
            "the engine's input embedding is vocabulary-parallel (AutoTP): its row blocks "
            "are split over the tensor-parallel group, not only partitioned by ZeRO-3",
            value="VocabParallelEmbedding",
            fix="convert to a universal checkpoint, migrate at TP 1 and load it again",
        )
    if getattr(engine.optimizer, "swap_optimizer", False):
        raise UsageError(
            "INVALID_ARGUMENT",
            "the engine swaps optimizer state to NVMe: its moments are not in memory to migrate",
            value="offload_optimizer.device=nvme",
            fix="migrate with the optimizer state in CPU or accelerator memory",
        )


def _check_architecture(engine: Any, model: nn.Module) -> None:
    ours = {n: tuple(p.ds_shape) for n, p in engine.module.named_parameters()}
    theirs = {n: tuple(p.shape) for n, p in model.named_parameters()}
    if ours != theirs:
        diff = sorted(set(ours.items()) ^ set(theirs.items()))
        raise EmbeddingError(
            "SHAPE_MISMATCH",
            f"model does not have the engine's parameters (first difference: {diff[0]})",
            value=diff[0],
            fix="pass a model of the engine's architecture at the old vocabulary, "
            "e.g. built again from the same config",
        )


def _inner_state(engine: Any) -> tuple[list[str], dict[str, Any]]:
    """The optimizer's per-element state keys and its scalar state (step), one value each."""
    zero = engine.optimizer
    flats = zero.fp32_partitioned_groups_flat
    states = [zero.optimizer.state.get(flat, {}) for flat in flats]
    if not any(states):
        return [], {}
    elementwise = [
        k for k, v in states[0].items() if isinstance(v, torch.Tensor) and v.shape == flats[0].shape
    ]
    scalars: dict[str, Any] = {}
    for key in (k for k in states[0] if k not in elementwise):
        values = {float(s[key]) for s in states}
        if len(values) > 1:
            raise UsageError(
                "INVALID_ARGUMENT",
                f"the optimizer's {key!r} differs between ZeRO-3 subgroups ({sorted(values)}): "
                "one parameter's state would mix two ages",
                value=sorted(values),
                fix="migrate an engine whose parameter groups stepped together",
            )
        value = states[0][key]
        scalars[key] = value.clone() if isinstance(value, torch.Tensor) else value
    return elementwise, scalars


def _gather(engine: Any, model: nn.Module, keys: list[str]) -> dict[str, dict[str, torch.Tensor]]:
    """Write the engine's fp32 masters into ``model``; return each parameter's gathered state."""
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state

    mine = dict(model.named_parameters())
    states: dict[str, dict[str, torch.Tensor]] = {}
    for name, p in engine.module.named_parameters():
        target = mine[name]
        if p.requires_grad:
            full = safe_get_full_fp32_param(p)
            states[name] = {k: safe_get_full_optimizer_state(p, k).cpu() for k in keys}
        else:  # no master copy: the partitioned weight itself
            with deepspeed.zero.GatheredParameters([p]):
                full = p.detach().clone()
        with torch.no_grad():
            target.data = full.detach().to("cpu", torch.float32).reshape(p.ds_shape).clone()
    own = dict(model.named_buffers())
    for name, b in engine.module.named_buffers():  # ZeRO-3 never partitions buffers
        own[name].data = b.detach().cpu().clone()
    return states


def _load(
    new: Any,
    values: Mapping[str, torch.Tensor],
    states: Mapping[str, Mapping[str, torch.Tensor]],
    keys: list[str],
    scalars: Mapping[str, Any],
) -> None:
    from deepspeed.utils import safe_set_full_fp32_param, safe_set_full_optimizer_state

    zero = new.optimizer
    if keys:
        # torch creates Adam state at the first step; make it now so the moments have a home.
        for flat in zero.fp32_partitioned_groups_flat:
            zero.optimizer.state[flat] = {
                **{
                    k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in scalars.items()
                },
                **{k: torch.zeros_like(flat) for k in keys},
            }
    for name, p in new.module.named_parameters():
        if not p.requires_grad:
            continue
        safe_set_full_fp32_param(p, values[name].to(torch.float32))
        for key in keys:
            safe_set_full_optimizer_state(p, states[name][key], key)


def migrate_zero3(
    engine: Any,
    rows: RowMap,
    *,
    model: nn.Module,
    config: Mapping[str, Any],
    optimizer: OptimizerFactory | None = None,
    initialize_kwargs: Mapping[str, Any] | None = None,
    **migrate_kwargs: Any,
) -> tuple[Any, Migration]:
    """Migrate a ZeRO-3 engine's model and optimizer state by ``rows``; return a new engine.

    ``model``: a module of the engine's architecture at the old vocabulary that
    DeepSpeed does not wrap (its values are replaced by the engine's). ``config``
    and ``optimizer`` (a callable, or None for the config's optimizer section) build
    the new engine; ``migrate_kwargs`` go to :func:`migrate_model` (``init``,
    ``output_init``, ``old_hash``...). Every rank calls it. Returns the new engine
    and what :func:`migrate_model` did; the old engine is not changed.

    Example::

        engine, migration = migrate_zero3(engine, rows, model=build(), config=cfg,
                                          optimizer=partial(torch.optim.AdamW, lr=1e-3))

    Raises:
        UsageError: INVALID_ARGUMENT for an engine below ZeRO-3, a vocabulary-parallel
            (AutoTP) embedding, NVMe-swapped optimizer state or subgroups whose steps differ.
        EmbeddingError: SHAPE_MISMATCH when ``model`` has other parameters than the engine.
        CheckpointError / EmbeddingError: the codes of :func:`migrate_model`, before
            anything is built.
    """
    import deepspeed

    _refuse_engine(engine)
    _check_architecture(engine, model)
    keys, scalars = _inner_state(engine)
    gathered = _gather(engine, model, keys)

    # A stand-in optimizer carries the gathered state through migrate_model's move_state.
    params = dict(model.named_parameters())
    holder = torch.optim.SGD([p for p in params.values() if p.requires_grad], lr=0.0)
    for name, state in gathered.items():
        if keys:
            holder.state[params[name]] = {
                **{
                    k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in scalars.items()
                },
                **{k: state[k].reshape(params[name].shape) for k in keys},
            }
    del gathered
    migration = migrate_model(model, rows, optimizer=holder, **migrate_kwargs)

    grown = dict(model.named_parameters())
    # References, not copies: DeepSpeed replaces each Parameter's data when it partitions
    # (and casts for bf16), so these keep the fp32 values to write into the masters.
    values = {name: p.data for name, p in grown.items()}
    states = {
        name: {k: holder.state[p][k] for k in keys}
        for name, p in grown.items()
        if p in holder.state
    }
    del holder
    new, *_ = deepspeed.initialize(
        model=model,
        model_parameters=[p for p in model.parameters() if p.requires_grad],
        optimizer=optimizer,
        config=dict(config),
        **dict(initialize_kwargs or {}),
    )
    _load(new, values, states, keys, scalars)
    for counter in ("global_steps", "global_samples", "micro_steps"):
        setattr(new, counter, getattr(engine, counter))
    if engine.lr_scheduler is not None and new.lr_scheduler is not None:
        new.lr_scheduler.load_state_dict(engine.lr_scheduler.state_dict())
    return new, migration
