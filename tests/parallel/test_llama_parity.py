"""Sharded 2-layer Llama training equals unsharded single-process training (gloo, 2 and 4 ranks).

Every rank holds the full model except the vocabulary tables; V = 131 splits
unevenly at both sizes and every shard sees tokens. Losses of 2 SGD and 2 AdamW
steps and the gathered weights after them are compared with the same model
trained in this process (fp32). Variants: untied input embedding sharded
(model's own loss), tied embedding + head sharded together (vocab-parallel
cross-entropy), untied embedding and head both sharded.
"""

from __future__ import annotations

import functools

import pytest
import torch
from _llama import TINY_VOCAB, reference_training
from _whole_model import KINDS, world_results

pytestmark = [pytest.mark.distributed, pytest.mark.xdist_group("tokembed-whole-model")]

# Masked lookup + all-reduce adds exact zeros, so the untied run is bitwise.
# The vocabulary-parallel loss reorders the softmax sums: losses and SGD weights
# agree to fp32 rounding (measured <= 1e-6, 3e-8). AdamW divides by sqrt(v), which
# turns that rounding in near-zero gradient entries into up to 8e-6 of an lr=0.01
# step (measured), hence its wider weight tolerance.
_TOL = {"untied": 0.0, "tied": 2e-6, "untied-head": 2e-6}
_ADAMW_WEIGHT_TOL = 2e-5
_REFERENCE_TIED = {"untied": False, "tied": True, "untied-head": False}


@functools.cache
def _reference(tied: bool, kind: str) -> tuple[list[float], dict[str, torch.Tensor]]:
    return reference_training(tied=tied, kind=kind)


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("variant", list(_TOL))
def test_sharded_training_matches_single_process(world_size: int, kind: str, variant: str) -> None:
    ref_losses, ref_state = _reference(_REFERENCE_TIED[variant], kind)
    tol = _TOL[variant]
    weight_tol = _ADAMW_WEIGHT_TOL if kind == "adamw" and tol else tol
    for result in world_results(world_size):
        run = result["parity"][f"{variant}-{kind}"]
        torch.testing.assert_close(run["losses"], ref_losses, rtol=0.0, atol=tol)
        assert run["state"].keys() >= ref_state.keys()
        for key, expected in ref_state.items():
            torch.testing.assert_close(
                run["state"][key], expected, rtol=0.0, atol=weight_tol, msg=key
            )
    # The run trained: weights moved away from the initialization.
    assert ref_losses[0] != ref_losses[1]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_tiny_vocabulary_with_an_empty_shard_matches(world_size: int, tied: bool) -> None:
    # V = 9: 5 + 4 rows at 2 ranks; 3 + 3 + 3 + 0 at 4 ranks (rank 3 owns nothing).
    ref_losses, ref_state = reference_training(tied=tied, kind="adamw", vocab=TINY_VOCAB)
    tol = 2e-6 if tied else 0.0
    for result in world_results(world_size):
        run = result["parity"][f"tiny-{'tied' if tied else 'untied'}-adamw"]
        torch.testing.assert_close(run["losses"], ref_losses, rtol=0.0, atol=tol)
        for key, expected in ref_state.items():
            weight_tol = _ADAMW_WEIGHT_TOL if tied else 0.0
            torch.testing.assert_close(
                run["state"][key], expected, rtol=0.0, atol=weight_tol, msg=key
            )


# --- tensor x data parallelism (4 ranks: TP pairs {0,1},{2,3}, DP pairs {0,2},{1,3}) ---


@pytest.mark.parametrize("name", ["untied-sgd", "untied-adamw", "tied-adamw"])
def test_tp_by_dp_matches_single_process(name: str) -> None:
    tied, kind = name.startswith("tied"), name.split("-")[1]
    ref_losses, ref_state = _reference(tied, kind)
    results = [r["tp_dp"][name] for r in world_results(4)]
    # Replica d trains on half d of every batch; the mean of the two halves' means is
    # the full batch's mean (equal token counts), and the AVG all-reduce makes the
    # gradient the full batch's.
    for tp_index in (0, 1):
        replicas = [results[tp_index], results[2 + tp_index]]
        mean = [
            (a + b) / 2 for a, b in zip(replicas[0]["losses"], replicas[1]["losses"], strict=True)
        ]
        torch.testing.assert_close(mean, ref_losses, rtol=0.0, atol=2e-6)
    weight_tol = _ADAMW_WEIGHT_TOL if kind == "adamw" else 2e-6
    for result in results:
        for key, expected in ref_state.items():
            torch.testing.assert_close(
                result["state"][key], expected, rtol=0.0, atol=weight_tol, msg=key
            )


def test_double_averaging_shrinks_the_step_by_the_dp_size() -> None:
    # AVG all-reduce of a loss already divided by the DP size = SGD at half the rate.
    _, halved = reference_training(tied=False, kind="sgd", steps=1, lr=0.25)
    _, intended = reference_training(tied=False, kind="sgd", steps=1)
    for result in world_results(4):
        got = result["tp_dp"]["double_averaging"]["embedding"]
        torch.testing.assert_close(got, halved["model.embed_tokens.weight"], rtol=0.0, atol=1e-6)
        assert not torch.allclose(got, intended["model.embed_tokens.weight"], atol=1e-4)


def test_group_and_ownership_mistakes_are_refused_in_a_whole_model() -> None:
    for result in world_results(4):
        refusals = result["tp_dp"]["refusals"]
        assert refusals["tp_as_dp"] == "GROUP_CONFLATION"
        assert refusals["world_as_dp"] == "GROUP_CONFLATION"
        assert refusals["avg_of_global_mean"] == "DOUBLE_AVERAGING"
        assert refusals["stale_optimizer"] == "NON_OWNER_STEP"
        assert refusals["fresh_optimizer"] is None
