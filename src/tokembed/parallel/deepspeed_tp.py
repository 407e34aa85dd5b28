"""Vocabulary-parallel input embedding as an add-on to DeepSpeed AutoTP training.

DeepSpeed 0.19.8 AutoTP shards a model's linear layers during
``deepspeed.initialize`` and leaves an untied input embedding replicated on every
tensor-parallel rank (the HF Llama tp_plan names no ``embed_tokens`` entry).
:func:`initialize_autotp` shards that embedding with
:func:`~tokembed.parallel.shard.shard_input_embedding` first, over the very
group AutoTP will use, then hands the model to ``deepspeed.initialize``: AutoTP
walks ``nn.Linear``/``nn.Embedding`` modules and leaves our
VocabParallelEmbedding (a plain ``nn.Module``) alone, and the optimizer is built
on the sharded Parameter.

Config: the ``tensor_parallel`` section takes ``"vocab_parallel_embedding": true``
(as proposed for DeepSpeed itself); this module removes the key before DeepSpeed
validates the config. ``gradient_clipping`` defaults to 1.0 in DeepSpeed; set it
to 0 to compare losses with unclipped single-process training.

Example::

    config = {"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 0.0,
              "optimizer": {"type": "SGD", "params": {"lr": 0.5}},
              "tensor_parallel": {"autotp_size": 2, "vocab_parallel_embedding": True}}
    engine, *_ = initialize_autotp(model, config)
    loss = engine(input_ids=ids, labels=ids).loss; engine.backward(loss); engine.step()

Why not ``deepspeed.tp_model_init(model, tp_size, dtype, tp_group=...)``: in
0.19.8 the recorded group lands in the config that rank 0 prints as JSON, and
``deepspeed.initialize`` fails with "Object of type ProcessGroup is not JSON
serializable". :func:`autotp_group` instead creates DeepSpeed's own TP mesh
early (the call ``deepspeed.initialize`` makes, which is idempotent).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.distributed import ProcessGroup

from tokembed.errors import CheckpointError, EmbeddingError, ParallelError, UsageError
from tokembed.files.atomic import write_bytes_atomic
from tokembed.files.os_errors import read_file_bytes
from tokembed.parallel.shard import shard_input_embedding
from tokembed.parallel.vocab_embedding import VocabParallelEmbedding

__all__ = [
    "LAYOUT_FILE",
    "autotp_group",
    "initialize_autotp",
    "load_autotp_checkpoint",
    "save_autotp_checkpoint",
]

_FLAG = "vocab_parallel_embedding"
LAYOUT_FILE = "tokembed_vocab_layout.json"
"""Written beside DeepSpeed's files in each checkpoint tag folder: the vocabulary layout."""


def autotp_group(tp_size: int) -> ProcessGroup:
    """DeepSpeed's tensor-parallel group of this rank, created now if needed.

    ``deepspeed.initialize`` later finds the mesh already built and reuses it, so
    the embedding shards and AutoTP's linear shards reduce over one group.

    Raises:
        UsageError: INVALID_ARGUMENT when ``tp_size`` does not divide the world size.
    """
    import deepspeed
    import torch.distributed as dist
    from deepspeed.utils import groups

    if not deepspeed.comm.is_initialized():
        # Adopts the torch.distributed group when one exists (no second rendezvous).
        deepspeed.init_distributed(
            dist_backend=dist.get_backend() if dist.is_initialized() else "gloo"
        )
    world = dist.get_world_size()
    if tp_size < 1 or world % tp_size:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"autotp_size {tp_size} does not divide the world size {world}",
            value=tp_size,
            fix="choose an autotp_size that divides the number of ranks",
        )
    # deepspeed.initialize calls exactly this (runtime/engine.py, 0.19.8); it returns
    # early once the groups exist, so our group and AutoTP's are the same object.
    groups._init_tp_mesh_device(tensor_model_parallel_size=tp_size)
    group: ProcessGroup = groups.get_tensor_model_parallel_group()
    return group


def _refuse_stale_optimizer(optimizer: Any, full: torch.Tensor | None) -> None:
    if full is None or not isinstance(optimizer, torch.optim.Optimizer):
        return
    for group in optimizer.param_groups:
        if any(p is full for p in group["params"]):
            raise ParallelError(
                "NON_OWNER_STEP",
                "the optimizer holds the full input-embedding Parameter that sharding "
                "replaces by this rank's rows: it would step rows this rank does not own",
                value=tuple(full.shape),
                fix="build the optimizer after sharding: pass a callable "
                "(lambda params: AdamW(params)) or an optimizer section in the config",
            )


def _refuse_hidden_slice_spec(model: nn.Module, tp: Mapping[str, Any], full: torch.Tensor) -> None:
    """A partition_config/preset spec that also matches the embedding would double-shard it.

    AutoTP slices a matched ``nn.Embedding`` on the hidden dimension (0.19.8
    ``_slice_embedding``) and hands other 2-D modules to its pattern router; either
    way the vocabulary shard would be partitioned a second time.
    """
    from deepspeed.runtime.tensor_parallel.config import TPTrainingConfig

    partition = TPTrainingConfig(**tp).get_partition_config_object()
    if partition is None:
        return
    # Every name of the table: a tied head's spec slices the same Parameter (DeepSpeed's
    # row-parallel head would then demand an nn.Embedding sliced on the hidden dimension).
    names = [n for n, p in model.named_parameters(remove_duplicate=False) if p is full]
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    for name in names:
        spec = partition.find_matching_spec(name, str(model_type).lower() if model_type else None)
        if spec is None or spec.partition_type.value == "skip":
            continue
        raise ParallelError(
            "HIDDEN_DIM_SHARDED",
            f"tensor_parallel.partition_config spec {spec.patterns} ({spec.partition_type.value}) "
            f"also partitions {name}: AutoTP would slice it on the hidden dimension",
            value=name,
            fix="remove the embedding (and a head tied to it) from the partition_config, "
            "or mark it 'skip', when vocab_parallel_embedding is on",
        )


def _follows_hf_plan(model: nn.Module) -> bool:
    """Whether the model's Hugging Face tp_plan shards its input embedding by rows.

    The plan DeepSpeed reads (config, class and instance plans merged): an entry
    ``embedding_rowwise`` whose pattern names the input embedding's module.
    """
    import re

    from deepspeed.runtime.tensor_parallel.config import _get_hf_tp_plan

    plan = _get_hf_tp_plan(model) or {}
    emb = model.get_input_embeddings()  # type: ignore[operator]
    names = [n for n, m in model.named_modules() if m is emb]
    for pattern, style in plan.items():
        if str(style).lower() != "embedding_rowwise":
            continue
        # HF plan keys are module paths with '*' for any one component; the merged plan
        # may drop the 'model.' prefix.
        regex = re.compile(r"(.*\.)?" + re.escape(pattern).replace(r"\*", r"[^.]+") + "$")
        if any(regex.match(name) for name in names):
            return True
    return False


def _refuse_unsupported_layout(cfg: Mapping[str, Any], tp_size: int) -> None:
    """Refuse, before any change, a TP size this world cannot hold."""
    import torch.distributed as dist

    if dist.is_initialized() and (tp_size < 1 or dist.get_world_size() % tp_size):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"autotp_size {tp_size} does not divide the world size {dist.get_world_size()}",
            value=tp_size,
            fix="choose an autotp_size that divides the number of ranks",
        )
    # No ZeRO-3 refusal: DeepSpeed 0.19.8 trains AutoTP under ZeRO-3 (engine.py says so and
    # test_deepspeed_zero runs it with this embedding); its gathered parameters are a
    # deepspeed.zero.GatheredParameters context away.


def _publish_universal_metadata(model: nn.Module, emb: VocabParallelEmbedding) -> None:
    """Describe the vocabulary-sharded weight the way DeepSpeed's own AutoTP layers do.

    ``deepspeed.initialize`` collects each parameter's ``ds_autotp_universal_checkpoint_meta``
    into the checkpoint's universal-checkpoint info, which ``ds_to_universal`` reads to
    merge the ranks' slices. Without it the shard counts as replicated and an uneven
    split (66 + 65 rows) is refused by the converter. Same schema as DeepSpeed's
    VocabParallelEmbedding (a dim-0 split with the exact per-rank row counts).
    """
    from deepspeed.checkpoint.affine import contiguous_split_map
    from deepspeed.checkpoint.constants import DS_AUTOTP_UC_META
    from deepspeed.module_inject.layers import _build_param_uc_restore_meta

    shape = (emb.num_embeddings, emb.embedding_dim)
    sizes = tuple(end - start for start, end in emb.ownership.intervals)
    meta = _build_param_uc_restore_meta(
        partition_type="column",  # DeepSpeed's label for a dim-0 split
        partition_dim=0,
        logical_shape=shape,
        output_shape=shape,
        partition_sizes=sizes,
        target_partition_shape=tuple(emb.weight.shape),
        original_shape=shape,
        affine_map=contiguous_split_map(shape, list(sizes), 0),
    )
    setattr(emb.weight, DS_AUTOTP_UC_META, meta)


def _address(tokenizer: Any) -> str | None:
    """A tokenizer's ``address_hash``, or the hash itself when given as a str."""
    if tokenizer is None or isinstance(tokenizer, str):
        return tokenizer
    found = getattr(tokenizer, "address_hash", None)
    if not isinstance(found, str):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"{type(tokenizer).__name__} has no address_hash",
            value=type(tokenizer).__name__,
            fix="pass a tokenizer or its address_hash",
        )
    return found


def _layout(engine: Any, tokenizer: Any) -> dict[str, Any]:
    emb = engine.module.get_input_embeddings()
    if not isinstance(emb, VocabParallelEmbedding):
        weight = emb.weight
        return {
            "format": 1,
            "sharded": False,
            "vocab_rows": int(weight.shape[0]),
            "address_hash": _address(tokenizer),
        }
    return {
        "format": 1,
        "sharded": True,
        "vocab_rows": emb.num_embeddings,
        "tp_size": emb.world_size,
        "intervals": [list(iv) for iv in emb.ownership.intervals],
        "address_hash": _address(tokenizer) or emb.config.address_hash,
    }


def _tag_folder(directory: str | os.PathLike[str], tag: str | None) -> Path:
    folder = Path(directory)
    if tag is None:
        latest = folder / "latest"
        if not latest.is_file():
            raise CheckpointError(
                "MALFORMED_CHECKPOINT",
                f"{folder} has no 'latest' file naming a checkpoint tag",
                value=str(folder),
                fix="pass tag= or load from a folder engine.save_checkpoint wrote",
            )
        tag = read_file_bytes(latest).decode().strip()
    return folder / tag


def save_autotp_checkpoint(
    engine: Any,
    save_dir: str | os.PathLike[str],
    tag: str | None = None,
    *,
    tokenizer: Any = None,
    **save_kwargs: Any,
) -> Path:
    """``engine.save_checkpoint`` plus the vocabulary layout the load checks first.

    Beside DeepSpeed's files, :data:`LAYOUT_FILE` records the vocabulary rows,
    the tensor-parallel size and row intervals of the sharded embedding, and the
    tokenizer's ``address_hash`` (``tokenizer``, a Tokenizer or its hash, or the
    table's own binding). Every rank calls it; returns the tag folder.

    Example::

        folder = save_autotp_checkpoint(engine, "ckpt", tag="step2", tokenizer=tok)
        load_autotp_checkpoint(engine, "ckpt", tag="step2", tokenizer=tok)
    """
    import torch.distributed as dist

    engine.save_checkpoint(str(save_dir), tag=tag, **save_kwargs)
    if tag is None:
        tag = f"global_step{engine.global_steps}"
    folder = Path(save_dir) / tag
    if not dist.is_initialized() or dist.get_rank() == 0:
        layout = json.dumps(_layout(engine, tokenizer), indent=1, sort_keys=True)
        write_bytes_atomic(folder / LAYOUT_FILE, layout.encode())
    if dist.is_initialized():
        dist.barrier()
    return folder


def load_autotp_checkpoint(
    engine: Any,
    load_dir: str | os.PathLike[str],
    tag: str | None = None,
    *,
    tokenizer: Any = None,
    **load_kwargs: Any,
) -> tuple[Any, Any]:
    """Check the saved vocabulary layout against ``engine``, then ``engine.load_checkpoint``.

    Nothing is loaded when a check fails. A checkpoint from another tensor-parallel
    layout loads only through DeepSpeed's universal conversion
    (``ds_to_universal``, then ``load_universal_checkpoint`` in the config).

    Raises:
        CheckpointError: MALFORMED_CHECKPOINT without a readable layout file.
        ParallelError: SHARD_LAYOUT_MISMATCH for another vocabulary size, TP size or row split.
        EmbeddingError: ADDRESS_HASH_MISMATCH when the checkpoint was saved for
            another tokenizer than ``tokenizer`` (or the table's binding).
    """
    folder = _tag_folder(load_dir, tag)
    path = folder / LAYOUT_FILE
    try:
        saved = json.loads(read_file_bytes(path))
    except (UsageError, ValueError) as error:
        raise CheckpointError(
            "MALFORMED_CHECKPOINT",
            f"{path} is missing or not JSON: the checkpoint's vocabulary layout is unknown",
            value=str(path),
            fix="save with save_autotp_checkpoint, which writes the layout beside DeepSpeed's files",
        ) from error
    mine = _layout(engine, tokenizer)
    for key in ("vocab_rows", "sharded", "tp_size", "intervals"):
        if saved.get(key) != mine.get(key):
            raise ParallelError(
                "SHARD_LAYOUT_MISMATCH",
                f"the checkpoint's {key} is {saved.get(key)} but this engine's is "
                f"{mine.get(key)}: its shards would load into the wrong rows",
                value={"saved": saved.get(key), "engine": mine.get(key)},
                fix="convert it with DeepSpeed's ds_to_universal and load with "
                '"checkpoint": {"load_universal": true} in the config',
            )
    theirs, ours = saved.get("address_hash"), mine.get("address_hash")
    if theirs and ours and theirs != ours:
        raise EmbeddingError(
            "ADDRESS_HASH_MISMATCH",
            f"the checkpoint was saved for tokenizer {theirs} but this run uses {ours}: "
            "its rows belong to other ids",
            value=theirs,
            fix="load it with the tokenizer it was saved with, or migrate the "
            "vocabulary (tokembed.migrate) before training on",
        )
    load_path, client_state = engine.load_checkpoint(str(load_dir), tag=folder.name, **load_kwargs)
    return load_path, client_state


def initialize_autotp(
    model: nn.Module,
    config: Mapping[str, Any],
    *,
    optimizer: torch.optim.Optimizer
    | Callable[[Iterable[torch.nn.Parameter]], torch.optim.Optimizer]
    | None = None,
    tie: bool = False,
    **initialize_kwargs: Any,
) -> tuple[Any, ...]:
    """Shard the input embedding over AutoTP's group, then ``deepspeed.initialize``.

    ``config["tensor_parallel"]["vocab_parallel_embedding"]`` turns the add-on on:
    True (the default) or False, or None to follow the model's Hugging Face tp_plan
    (on when it names the input embedding ``embedding_rowwise``, as transformers
    does for Llama); ``tie=True`` also shards a tied output head with it (then compute the
    loss with :func:`~tokembed.parallel.causal_lm.causal_lm_loss`). ``optimizer``
    must be a callable or None: an Optimizer built before sharding would step the
    replaced full table. Returns what ``deepspeed.initialize`` returns.

    Raises:
        ParallelError: NON_OWNER_STEP for an optimizer holding the replaced table;
            HIDDEN_DIM_SHARDED when a partition_config spec would also slice the
            embedding or a head tied to it; the codes of
            :func:`~tokembed.parallel.shard.shard_input_embedding`.
        UsageError: INVALID_ARGUMENT without ``tensor_parallel.autotp_size`` or with
            one that does not divide the world size, with DeepCompile's ``autotp``
            pass (which does not support vocabulary-parallel embeddings), or with a
            ``vocab_parallel_embedding`` that is not true, false or null.
    """
    cfg = copy.deepcopy(dict(config))
    tp = dict(cfg.get("tensor_parallel", {}))
    flag = tp.pop(_FLAG, True)
    if flag is not None and not isinstance(flag, bool):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"tensor_parallel.{_FLAG} must be true, false or null, not {flag!r}",
            value=flag,
            fix="true shards the embedding, false leaves it replicated, null follows the "
            "model's Hugging Face tp_plan",
        )
    enabled = _follows_hf_plan(model) if flag is None else flag
    cfg["tensor_parallel"] = tp
    tp_size = tp.get("autotp_size")
    if not isinstance(tp_size, int):
        raise UsageError(
            "INVALID_ARGUMENT",
            "config has no integer tensor_parallel.autotp_size",
            value=tp_size,
            fix='add "tensor_parallel": {"autotp_size": <tp size>} to the DeepSpeed config',
        )
    _refuse_unsupported_layout(cfg, tp_size)
    compile_section = cfg.get("compile", {})
    if (
        enabled
        and compile_section.get("deepcompile")
        and "autotp" in compile_section.get("passes", ())
    ):
        # DeepSpeed keeps embeddings replicated under this pass (its HF tp_plan branch
        # says the pass "does not support vocabulary-parallel embeddings"), so the two
        # settings would shard the embedding twice or not at all.
        raise UsageError(
            "INVALID_ARGUMENT",
            "vocab_parallel_embedding cannot be combined with DeepCompile's 'autotp' pass",
            value=compile_section.get("passes"),
            fix="drop 'autotp' from compile.passes or set vocab_parallel_embedding to false",
        )
    import deepspeed

    emb = model.get_input_embeddings()  # type: ignore[operator]
    full = getattr(emb, "weight", None)
    head = model.get_output_embeddings()  # type: ignore[operator]
    # A tied pair under AutoTP's own vocab_parallel_lm_head is sharded by DeepSpeed
    # (its VocabParallelLinear + VocabParallelEmbedding share one shard); our call
    # after initialize then finds a VocabParallelEmbedding and does nothing.
    deepspeed_shards_pair = bool(tp.get("vocab_parallel_lm_head")) and (
        full is not None and getattr(head, "weight", None) is full
    )
    if enabled and tp_size > 1 and not deepspeed_shards_pair:
        _refuse_stale_optimizer(optimizer, full)
        if full is not None:
            _refuse_hidden_slice_spec(model, tp, full)
        sharded = shard_input_embedding(model, group=autotp_group(tp_size), tie=tie)
        if sharded is not None:
            _publish_universal_metadata(model, sharded)
    out = tuple(
        deepspeed.initialize(
            model=model,
            model_parameters=[p for p in model.parameters() if p.requires_grad],
            optimizer=optimizer,
            config=cfg,
            **initialize_kwargs,
        )
    )
    if enabled and deepspeed_shards_pair:
        sharded = shard_input_embedding(out[0].module, group=autotp_group(tp_size))
        assert sharded is None, "AutoTP left the tied embedding unsharded"
    return out
