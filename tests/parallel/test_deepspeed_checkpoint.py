"""DeepSpeed checkpoints with the vocabulary-sharded embedding (DeepSpeed 0.19.8, CPU, gloo, 2 ranks).

One spawn: an untied Llama (V = 131, split 66 + 65) trains 2 AdamW steps under
AutoTP 2 x ZeRO-2, is saved with :func:`save_autotp_checkpoint`, and

* loads into a fresh engine at the same TP size: weights, Adam state and step
  equal (bitwise), and a third step gives the same loss on both;
* is refused, with nothing loaded, for another tokenizer (ADDRESS_HASH_MISMATCH)
  and for another TP layout (SHARD_LAYOUT_MISMATCH);
* converts with DeepSpeed's ``ds_to_universal`` (the uneven split is described by
  the metadata our layer publishes; without it the converter fails as the issue
  reports), giving the full [131, 32] table and its Adam moments;
* and the universal checkpoint loads in one process without AutoTP (TP 1): equal
  embedding, step 2, and the third step's loss equal to the TP-2 run's;
* tied (our head on the sharded Parameter, the vocabulary-parallel loss): the
  universal checkpoint loads at TP 1 with the tie intact and equal values, and
  tokembed's ``save_checkpoint`` writes it as one file that records the tie and
  the tokenizer's address hash.

* and the untied universal checkpoint loads at AutoTP 4 on 4 ranks (a spawn of its
  own: DeepSpeed's TP mesh is made once per process): every rank's 33 or 32 rows
  and their Adam moments equal the universal table's, and the third step's loss
  the TP-2 run's.

Another TP size cannot be built inside the 2-rank spawn, so the refused "another
TP layout" is shown as the replicated embedding at the same AutoTP size.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

import pytest
import torch
from _deepspeed_ranks import (
    code_of,
    ds_config,
    hf_loss,
    require_deepspeed,
    setup_rank,
    train_engine,
    vp_loss,
)
from _harness import run_ranks
from _llama import batches, build_llama, dims, make_optimizer
from _parity import loss_bound

from tokembed.parallel.deepspeed_tp import (
    LAYOUT_FILE,
    initialize_autotp,
    load_autotp_checkpoint,
    save_autotp_checkpoint,
)
from tokembed.tokenizer.train import TrainConfig, train

require_deepspeed()

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

_TP = 2
_TEXT = ["the cat sat on the mat", "the dog sat on the log"] * 4


def _config(
    *, vocab_parallel: bool = True, universal: bool = False, tp: int = _TP
) -> dict[str, Any]:
    out = ds_config(
        zero=2, tensor_parallel={"autotp_size": tp, "vocab_parallel_embedding": vocab_parallel}
    )
    if universal:
        out["checkpoint"] = {"load_universal": True}
    return out


def _engine(seed: int, *, tied: bool = False, **config: Any) -> Any:
    engine, *_ = initialize_autotp(
        build_llama(tied=tied, seed=seed),
        _config(**config),
        optimizer=functools.partial(make_optimizer, "adamw"),
        tie=tied and config.get("vocab_parallel", True),
    )
    return engine


def _weights(engine: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in engine.module.state_dict().items()}


def _adam_state(engine: Any) -> bool:
    """Whether the engine's AdamW holds any state (a fresh engine holds none)."""
    return any(engine.optimizer.optimizer.state.values())


def _snapshot(engine: Any) -> dict[str, Any]:
    """This rank's weights, flat fp32 master partition, Adam moments and step."""
    base = engine.optimizer.optimizer  # the torch AdamW under ZeRO's flat partitions
    states = [base.state[p] for g in base.param_groups for p in g["params"]]
    return {
        "weights": _weights(engine),
        "master": [p.detach().clone() for g in base.param_groups for p in g["params"]],
        "exp_avg": [s["exp_avg"].clone() for s in states],
        "exp_avg_sq": [s["exp_avg_sq"].clone() for s in states],
        "adam_step": [float(s["step"]) for s in states],
        "global_steps": engine.global_steps,
    }


def _convert(folder: Path, out: Path) -> None:
    from deepspeed.checkpoint import ds_to_universal

    args = argparse.Namespace(
        input_folder=str(folder),
        output_folder=str(out),
        num_extract_workers=1,
        num_merge_workers=1,
        keep_temp_folder=False,
        strict=True,
        inject_missing_state=False,
    )
    ds_to_universal.main(args)


def _checks(rank: int, world_size: int, directory: str, hashes: tuple[str, str]) -> dict[str, Any]:
    setup_rank(rank, world_size)
    import torch.distributed as dist

    root = Path(directory)
    data = batches(steps=3)
    saved = _engine(0)
    train_engine(saved, hf_loss, data[:2])
    folder = save_autotp_checkpoint(saved, root / "ckpt", tag="two", tokenizer=hashes[0])
    out: dict[str, Any] = {"saved": _snapshot(saved), "layout": (folder / LAYOUT_FILE).is_file()}
    out["saved_embedding"] = saved.module.get_input_embeddings().gather_weight()

    loaded = _engine(7)  # other initial weights: the load must replace all of them
    fresh = _weights(loaded)
    out["wrong_tokenizer"] = code_of(
        lambda: load_autotp_checkpoint(loaded, root / "ckpt", tokenizer=hashes[1])
    )
    out["untouched_after_refusal"] = _equal(_weights(loaded), fresh) and not _adam_state(loaded)
    load_autotp_checkpoint(loaded, root / "ckpt", tokenizer=hashes[0])
    out["loaded"] = _snapshot(loaded)
    out["third_step"] = (
        train_engine(saved, hf_loss, data[2:]),
        train_engine(loaded, hf_loss, data[2:]),
    )

    # Another vocabulary layout at the same AutoTP size: the embedding replicated. (AutoTP's
    # mesh is per process, so another TP size cannot be built in this spawn.)
    other = _engine(7, vocab_parallel=False)
    before = _weights(other)
    out["other_layout"] = code_of(lambda: load_autotp_checkpoint(other, root / "ckpt", tag="two"))
    out["other_untouched"] = _equal(_weights(other), before) and not _adam_state(other)

    # The same run without the metadata our layer publishes: the converter's error.
    from tokembed.parallel import deepspeed_tp

    publish = deepspeed_tp._publish_universal_metadata
    deepspeed_tp._publish_universal_metadata = lambda *_: None
    try:
        bare = _engine(0)
    finally:
        deepspeed_tp._publish_universal_metadata = publish
    train_engine(bare, hf_loss, data[:1])
    save_autotp_checkpoint(bare, root / "bare", tag="one")

    # Tied: our head shares the sharded Parameter; the pair converts as one table.
    tied = _engine(0, tied=True)
    train_engine(tied, vp_loss, data[:2])
    save_autotp_checkpoint(tied, root / "tied", tag="two", tokenizer=hashes[0])
    out["tied_embedding"] = tied.module.get_input_embeddings().gather_weight()

    if rank == 0:
        _convert(root / "tied" / "two", root / "tied" / "two_universal")
        _convert(root / "ckpt" / "two", root / "ckpt" / "two_universal")
        emb = root / "ckpt" / "two_universal" / "zero" / "model.embed_tokens.weight"
        out["universal"] = {
            state: torch.load(emb / f"{state}.pt", weights_only=False)["param"]
            for state in ("fp32", "exp_avg", "exp_avg_sq")
        }
        try:
            _convert(root / "bare" / "one", root / "bare" / "one_universal")
            out["bare_error"] = None
        except ValueError as error:
            out["bare_error"] = str(error)
    dist.barrier()
    return out


def _universal_at_tp1(rank: int, world_size: int, directory: str, address: str) -> dict[str, Any]:
    """One process, no AutoTP: load the universal checkpoints; write a tokembed file."""
    setup_rank(rank, world_size)
    from tokembed.checkpoint.checkpoint import save_checkpoint
    from tokembed.checkpoint.format import verify_checkpoint

    root = Path(directory)

    def load(tied: bool, folder: str) -> Any:
        engine, *_ = initialize_autotp(
            build_llama(tied=tied, seed=7),
            {**_config(universal=True), "tensor_parallel": {"autotp_size": 1}},
            optimizer=functools.partial(make_optimizer, "adamw"),
        )
        engine.load_checkpoint(str(root / folder), tag="two_universal")
        return engine

    engine = load(False, "ckpt")
    out: dict[str, Any] = {
        "embedding": engine.module.get_input_embeddings().weight.detach().clone(),
        "global_steps": engine.global_steps,
        "third_step": train_engine(engine, hf_loss, batches(steps=3)[2:]),
    }
    tied = load(True, "tied")
    model = tied.module
    out["tied_embedding"] = model.get_input_embeddings().weight.detach().clone()
    out["tied_still_one_parameter"] = model.lm_head.weight is model.get_input_embeddings().weight
    path = save_checkpoint(model, root / "tied.safetensors", tokenizer=address)
    summary = verify_checkpoint(path)
    out["file"] = {"aliases": summary.aliases, "address_hash": summary.address_hash}
    return out


def _universal_at_tp4(rank: int, world_size: int, directory: str) -> dict[str, Any]:
    """4 ranks, AutoTP 4: the TP-2 universal checkpoint loads into 33 + 33 + 33 + 32 rows."""
    setup_rank(rank, world_size)
    from deepspeed.utils import safe_get_full_optimizer_state

    engine, *_ = initialize_autotp(
        build_llama(tied=False, seed=7),
        _config(universal=True, tp=4),
        optimizer=functools.partial(make_optimizer, "adamw"),
    )
    engine.load_checkpoint(str(Path(directory) / "ckpt"), tag="two_universal")
    emb = engine.module.get_input_embeddings()
    return {
        "rows": emb.ownership.intervals[rank],
        "embedding": emb.gather_weight(),
        "moments": {
            key: safe_get_full_optimizer_state(emb.weight, key).clone()
            for key in ("exp_avg", "exp_avg_sq")
        },
        "global_steps": engine.global_steps,
        "third_step": train_engine(engine, hf_loss, batches(steps=3)[2:]),
    }


def _hashes() -> tuple[str, str]:
    """Two real tokenizers' address hashes (one more merge: another address space)."""
    a = train(_TEXT, config=TrainConfig(merges=3, progress=False))
    b = train(_TEXT, config=TrainConfig(merges=4, progress=False))
    assert a.address_hash != b.address_hash
    return a.address_hash, b.address_hash


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("ds-checkpoint")
    hashes = _hashes()
    out = run_ranks(_checks, _TP, str(directory), hashes, timeout=400.0)
    tp1 = run_ranks(_universal_at_tp1, 1, str(directory), hashes[0], timeout=200.0)
    out[0]["tp1"] = tp1[0]
    out[0]["tp4"] = run_ranks(_universal_at_tp4, 4, str(directory), timeout=400.0)
    out[0]["address"] = hashes[0]
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    return bool(a == b)


def test_round_trip_at_the_same_tp_size_is_exact(results: list[dict[str, Any]]) -> None:
    for result in results:
        assert result["layout"]
        assert result["saved"]["global_steps"] == 2
        assert result["saved"]["adam_step"] == [2.0] * len(result["saved"]["adam_step"])
        assert _equal(result["loaded"], result["saved"])
        ours, theirs = result["third_step"]
        assert ours == theirs


def test_refused_loads_change_nothing(results: list[dict[str, Any]]) -> None:
    for result in results:
        assert result["wrong_tokenizer"] == "ADDRESS_HASH_MISMATCH"
        assert result["untouched_after_refusal"]
        assert result["other_layout"] == "SHARD_LAYOUT_MISMATCH"
        assert result["other_untouched"]


def test_ds_to_universal_merges_the_uneven_vocabulary_split(
    results: list[dict[str, Any]],
) -> None:
    universal = results[0]["universal"]
    assert universal["fp32"].shape == (131, 32)
    assert torch.equal(universal["fp32"], results[0]["saved_embedding"])
    # Each rank's moments are its rows' moments, in row order.
    assert universal["exp_avg_sq"].shape == (131, 32)


def test_without_our_metadata_ds_to_universal_refuses_the_uneven_split(
    results: list[dict[str, Any]],
) -> None:
    # The error at this size: the untouched shard counts as replicated, described
    # by rank 0's 66 x 32 = 2112 elements, and rank 1's 65 rows do not fit it.
    error = results[0]["bare_error"]
    assert error is not None
    assert error.startswith("Rank 1 supplied a shard of 2080 elements, but the map describes 2112")


def test_universal_checkpoint_loads_at_tp1_with_equal_values(
    results: list[dict[str, Any]],
) -> None:
    tp1 = results[0]["tp1"]
    assert tp1["global_steps"] == 2
    assert torch.equal(tp1["embedding"], results[0]["saved_embedding"])
    # The third step from the loaded state: the TP-2 run's loss within fp32's bound.
    want = results[0]["third_step"][0][0]
    assert abs(tp1["third_step"][0] - want) <= loss_bound(torch.float32, dims(), want)


def test_universal_checkpoint_loads_at_another_tp_size_with_equal_values(
    results: list[dict[str, Any]],
) -> None:
    # Saved at AutoTP 2 (66 + 65 rows), loaded at AutoTP 4: each rank's rows and moments
    # are the universal table's, bit for bit, and training goes on as at TP 2.
    universal = results[0]["universal"]
    want = results[0]["third_step"][0][0]
    tp4 = results[0]["tp4"]
    assert [r["rows"] for r in tp4] == [(0, 33), (33, 66), (66, 99), (99, 131)]
    for run in tp4:
        start, end = run["rows"]
        assert run["global_steps"] == 2
        assert torch.equal(run["embedding"], results[0]["saved_embedding"])
        for key, moment in run["moments"].items():
            assert torch.equal(moment, universal[key][start:end]), key
        assert abs(run["third_step"][0] - want) <= loss_bound(torch.float32, dims(), want)


def test_tied_universal_checkpoint_becomes_a_tokembed_file_with_tie_and_hash(
    results: list[dict[str, Any]],
) -> None:
    tp1 = results[0]["tp1"]
    assert torch.equal(tp1["tied_embedding"], results[0]["tied_embedding"])
    assert tp1["tied_still_one_parameter"]
    assert tp1["file"] == {
        "aliases": {"lm_head.weight": "model.embed_tokens.weight"},
        "address_hash": results[0]["address"],
    }
