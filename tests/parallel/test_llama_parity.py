"""Sharded 2-layer Llama training equals unsharded single-process training (gloo, 2 and 4 ranks).

Every rank holds the full model except the vocabulary tables; V = 131 splits
unevenly at both sizes and every shard sees tokens; two columns of every batch
are PAD. The reference is the same model trained on rank 0 from a copy taken
before sharding, so it runs under the ranks' thread settings (or, in one test,
under another thread count on purpose). Variants: untied input embedding
sharded (model's own loss), tied embedding + head sharded together
(vocab-parallel cross-entropy), untied embedding and head both sharded; SGD and
AdamW; fp32 and fp64. Each run is checked by :func:`_parity.assert_parity`:
first-step gradients, every loss and the final weights within bounds derived
from the dtype's eps (see that module); the same check rejects runs with a
wrong shard offset, an unmasked PAD row or double averaging.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _harness import rank_threads
from _llama import TINY_VOCAB, VOCAB, dims, optimizer_settings
from _parity import assert_first_step_gradients, assert_parity, loss_bound
from _whole_model import DTYPES, KINDS, world_results

pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group("tokembed-whole-model")]

_VARIANTS = ("untied", "tied", "untied-head")


def _check(case: dict[str, Any], ref: dict[str, Any], *, dtype: str, kind: str, vocab: int) -> None:
    assert_parity(
        case["run"],
        ref,
        dtype=DTYPES[dtype],
        dims=dims(vocab=vocab),
        optimizer=optimizer_settings(kind),
    )


def _check_world(results: list[dict[str, Any]], section: str, name: str, **how: Any) -> None:
    """Every rank's run against the reference rank 0 trained."""
    ref = results[0][section][name]["ref"]
    for result in results:
        _check(result[section][name], ref, **how)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", _VARIANTS)
def test_sharded_training_matches_single_process(
    world_size: int, kind: str, variant: str, dtype: str
) -> None:
    results = world_results(world_size)
    _check_world(
        results, "parity", f"{variant}-{kind}-{dtype}", dtype=dtype, kind=kind, vocab=VOCAB
    )
    # The run trained: weights moved away from the initialization.
    ref = results[0]["parity"][f"{variant}-{kind}-{dtype}"]["ref"]
    assert ref["losses"][0] != ref["losses"][1]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_tiny_vocabulary_with_an_empty_shard_matches(
    world_size: int, tied: bool, dtype: str
) -> None:
    # V = 9: 5 + 4 rows at 2 ranks; 3 + 3 + 3 + 0 at 4 ranks (rank 3 owns nothing).
    name = f"tiny-{'tied' if tied else 'untied'}-adamw-{dtype}"
    _check_world(
        world_results(world_size), "parity", name, dtype=dtype, kind="adamw", vocab=TINY_VOCAB
    )


@pytest.mark.parametrize("variant", ["tied", "untied-head"])
def test_float64_sharded_loss_keeps_float64_precision(variant: str) -> None:
    # The vocabulary-parallel loss once cast logits to fp32: an fp64 run then agreed
    # with its fp64 reference only to fp32 rounding (~1e-7), far outside this bound.
    bound = loss_bound(torch.float64, dims(), 5.0)
    assert bound < 2e-12 < loss_bound(torch.float32, dims(), 5.0)
    for result in world_results(2):
        run = result["parity"][f"{variant}-sgd-fp64"]["run"]
        ref = world_results(2)[0]["parity"][f"{variant}-sgd-fp64"]["ref"]
        assert all(g.dtype == torch.float64 for g in run["grads"][0].values())
        for got, want in zip(run["losses"], ref["losses"], strict=True):
            assert abs(got - want) <= loss_bound(torch.float64, dims(), want)


@pytest.mark.parametrize("world_size", [2, 4])
def test_parity_holds_when_the_reference_uses_other_threads(world_size: int) -> None:
    # The reference runs with one intra-op thread more than the ranks: its reductions
    # split differently, and the derived bounds must still hold.
    results = world_results(world_size, rank_threads() + 1)
    for name in results[0]["parity"]:
        variant, kind, dtype = name.rsplit("-", 2)
        vocab = TINY_VOCAB if variant.startswith("tiny") else VOCAB
        _check_world(results, "parity", name, dtype=dtype, kind=kind, vocab=vocab)


# --- tensor x data parallelism (4 ranks: TP pairs {0,1},{2,3}, DP pairs {0,2},{1,3}) ---


def _full_batch_runs(results: list[dict[str, Any]], key: str, *, summed: bool) -> list[Any]:
    """Each rank's run with the full batch's loss of each step in place of its half's.

    Replica d trains on half d of every batch. Its recorded loss is the mean over
    its half (``summed=False``: the full batch's mean is the two replicas' mean, the
    halves hold equal label counts), or that mean already divided by the DP size
    (``summed=True``: the full batch's mean is their sum).
    """
    out = []
    for rank, result in enumerate(results):
        run = result[key]["run"]
        peer = results[(rank + 2) % 4][key]["run"]  # the other replica of this TP index
        pairs = zip(run["losses"], peer["losses"], strict=True)
        losses = [(a + b) if summed else (a + b) / 2 for a, b in pairs]
        out.append({"run": {**run, "losses": losses}})
    return out


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", ["untied-sgd", "untied-adamw", "tied-adamw"])
def test_tp_by_dp_matches_single_process(name: str, dtype: str) -> None:
    # The AVG all-reduce of per-replica means makes every gradient the full batch's.
    results = [r["tp_dp"] for r in world_results(4)]
    key = f"{name}-{dtype}"
    ref = results[0][key]["ref"]
    for case in _full_batch_runs(results, key, summed=False):
        _check(case, ref, dtype=dtype, kind=name.split("-")[1], vocab=VOCAB)


# --- the same checks reject real bugs ------------------------------------------------------


@pytest.mark.parametrize("bug", ["wrong_offset", "pad_unmasked"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_parity_check_rejects_an_injected_bug(world_size: int, bug: str) -> None:
    # fp32 AdamW: the widest bounds of the suite, and still every rank's run fails.
    results = world_results(world_size)
    ref = results[0]["bugs"][bug]["ref"]
    for result in results:
        with pytest.raises(AssertionError):
            _check(result["bugs"][bug], ref, dtype="fp32", kind="adamw", vocab=VOCAB)


def test_parity_check_rejects_double_averaging() -> None:
    # AVG all-reduce of a loss already divided by the DP size: the loss is right, but
    # every gradient is half the full batch's (shown within the same bound), so the
    # parity check fails.
    results = [r["tp_dp"] for r in world_results(4)]
    ref = results[0]["double_averaging"]["ref"]
    for case in _full_batch_runs(results, "double_averaging", summed=True):
        assert_first_step_gradients(case["run"], ref, dtype=torch.float32, dims=dims(), scale=0.5)
        with pytest.raises(AssertionError, match="gradient"):
            _check(case, ref, dtype="fp32", kind="adamw", vocab=VOCAB)


@pytest.mark.failure_lab("5.11")
def test_group_and_ownership_mistakes_are_refused_in_a_whole_model() -> None:
    """A non-owner rank steps a row shard."""
    for result in world_results(4):
        refusals = result["tp_dp"]["refusals"]
        assert refusals["tp_as_dp"] == "GROUP_CONFLATION"
        assert refusals["world_as_dp"] == "GROUP_CONFLATION"
        assert refusals["avg_of_global_mean"] == "DOUBLE_AVERAGING"
        assert refusals["stale_optimizer"] == "NON_OWNER_STEP"
        assert refusals["fresh_optimizer"] is None
