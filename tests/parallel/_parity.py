"""Is a recorded sharded training run the single-process run? Every tolerance is a formula of the dtype's eps and the sizes involved.

:func:`assert_parity` compares two records of :func:`_llama.train` (the
sharded run and the unsharded reference, same initial weights and batches)
and raises AssertionError naming the first quantity out of bounds. Every bound
is a formula of ``torch.finfo(dtype).eps``, the model's dimensions and the
reference's own magnitudes; :class:`Dims` holds the dimensions.

Why the bounds have this shape (first-order rounding analysis):

1. Reordering an addition of ``n`` terms (a sum split over shards, threads or
   an all-reduce) changes it by at most ``2 (n - 1) u sum|x_i|`` with unit
   roundoff ``u = eps / 2``: each order is within ``gamma_(n-1) sum|x_i|`` of
   the exact sum. A value computed through a chain of such reductions
   accumulates these terms; :meth:`Dims.chain` counts the additions on the
   longest chain of one forward and backward pass (``K``). With the magnitude
   ``M`` of the quantity's terms, one step's loss and gradients then agree to
   ``K eps M``. For gradients ``M`` is the largest gradient entry of the step
   (entries near zero arise by cancellation of terms of that size).
2. SGD applies ``lr g``: a gradient difference ``d`` moves weights by ``lr d``.
   A weight difference ``W`` at the start of a step reaches the next gradient
   through the curvature; SGD is stable only while ``lr`` times the curvature
   is below 2, so one step at most doubles an existing difference:
   ``W_t = 2 W_(t-1) + lr d_t``.
3. AdamW applies ``lr m/(sqrt(v) + e)`` per entry (bias-corrected). With
   gradients within ``d``, ``|m - m'| <= d`` and ``|sqrt(v) - sqrt(v')| <= d``
   (both are normalized averages of the gradients), and ``|m| <= c_t sqrt(v)``,
   so the update moves by at most ``lr d (1 + c_t) / (sqrt(v) + e)``: small
   for entries with real gradient, up to the whole step for entries whose
   gradient is rounding noise. An update never exceeds ``lr c_t`` in size, so
   two runs' updates never differ by more than ``2 lr c_t``; the per-entry
   bound is capped there. ``c_t = sqrt(sum a_k^2 / b_k)`` over the
   bias-corrected moment weights ``a_k`` (beta1) and ``b_k`` (beta2).
4. A later step's loss sees weights that differ by ``W``: to first order it
   moves by ``sum_i |g_i| W_i`` on top of its own rounding.
5. Adam's moments are running averages of the gradients and their squares: with
   gradients within ``d`` per step, ``exp_avg`` moves by at most
   ``B_m = beta1 B_m + (1 - beta1) d`` and ``exp_avg_sq`` by
   ``B_v = beta2 B_v + (1 - beta2) (2 |g| d + d^2)`` per entry.

A run interrupted by a change of the tables (a vocabulary migration) is checked
in two calls: the first returns its :class:`Bounds`, the caller moves them with
the rows, and the second starts from them (``start``, ``first_step``).

These are first-order estimates with generous counts, not proofs; what keeps
them honest in both directions is that the runs pass them on any thread
count (the reference is also checked with a different one) and that the same
checks fail runs with injected bugs (test_llama_parity).

Bitwise equality is not claimed here: it holds by construction only for the
masked lookup itself (exactly one rank contributes a non-zero row, the others
add exact zeros), which the module tests assert with ``atol=0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "Bounds",
    "Dims",
    "adam_ratio",
    "assert_first_step_gradients",
    "assert_parity",
    "loss_bound",
]


@dataclass(frozen=True, kw_only=True)
class Dims:
    """The sizes that set how many additions a value of the model passes through."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    seq: int
    tokens: int

    def chain(self) -> int:
        """Additions on the longest chain of one forward + backward pass (``K``).

        Forward, per decoder layer: RMSNorm (hidden), q/k/v (hidden), scores
        (head dim <= hidden), attention-weighted values (seq), o_proj (hidden),
        RMSNorm (hidden), gate/up (hidden), down (intermediate); then the final
        norm and the head (hidden each), the softmax sum (vocab) and the mean
        over tokens. Backward runs the same chain in reverse and adds the sum
        over tokens of every weight gradient.
        """
        layer = 6 * self.hidden + self.intermediate + self.seq
        forward = self.layers * layer + 2 * self.hidden + self.vocab + self.tokens
        return 2 * forward + self.tokens


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """Per-entry bounds on the difference of two runs after some steps, by parameter name.

    ``weight``: the weights; ``exp_avg`` / ``exp_avg_sq``: Adam's raw moments (empty
    for SGD). A value is a tensor of the parameter's shape or a float for all entries.
    """

    weight: dict[str, Any]
    exp_avg: dict[str, Any]
    exp_avg_sq: dict[str, Any]


def loss_bound(dtype: torch.dtype, dims: Dims, loss: float) -> float:
    """Rounding bound of one step's loss under reordered reductions: ``K eps |loss|``."""
    return dims.chain() * torch.finfo(dtype).eps * max(abs(loss), 1.0)


def _grad_bound(dtype: torch.dtype, dims: Dims, grads: dict[str, torch.Tensor]) -> float:
    magnitude = max(float(g.abs().max()) for g in grads.values() if g.numel())
    return dims.chain() * torch.finfo(dtype).eps * magnitude


def adam_ratio(beta1: float, beta2: float, step: int) -> float:
    """``c_t``: the largest ``|m| / sqrt(v)`` of bias-corrected Adam moments after ``step``."""
    a = [(1 - beta1) * beta1 ** (step - k) / (1 - beta1**step) for k in range(1, step + 1)]
    b = [(1 - beta2) * beta2 ** (step - k) / (1 - beta2**step) for k in range(1, step + 1)]
    return math.sqrt(sum(x * x / y for x, y in zip(a, b, strict=True)))


def _close(what: str, got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor | float) -> None:
    """``|got - want| <= bound`` elementwise, compared in float64."""
    diff = (got.double() - want.double()).abs()
    bound_t = torch.as_tensor(bound, dtype=torch.float64).expand_as(diff)
    bad = diff > bound_t
    if bool(bad.any()):
        where = int(((diff - bound_t) / bound_t.clamp_min(1e-300)).argmax())
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {diff.numel()} entries out of bounds; worst at "
            f"flat index {where}: |{float(got.flatten()[where])!r} - "
            f"{float(want.flatten()[where])!r}| = {float(diff.flatten()[where]):.3e} > "
            f"{float(bound_t.flatten()[where]):.3e}"
        )


def assert_first_step_gradients(
    run: dict[str, Any],
    ref: dict[str, Any],
    *,
    dtype: torch.dtype,
    dims: Dims,
    scale: float = 1.0,
) -> None:
    """The first step's gradients (same weights on both sides) are ``scale`` x the reference's.

    ``scale`` is 1 for parity, or a known bug's factor to show which bug was caught.
    """
    grads = ref["grads"][0]
    assert run["grads"][0].keys() == grads.keys(), sorted(run["grads"][0].keys() ^ grads.keys())
    d = abs(scale) * _grad_bound(dtype, dims, grads)
    for key, want in grads.items():
        _close(f"gradient of {key} at step 1", run["grads"][0][key], scale * want, d)


def assert_parity(
    run: dict[str, Any],
    ref: dict[str, Any],
    *,
    dtype: torch.dtype,
    dims: Dims,
    optimizer: dict[str, Any],
    keys: list[str] | None = None,
    start: Bounds | None = None,
    first_step: int = 1,
    moments: bool = False,
) -> Bounds:
    """Raise AssertionError unless ``run`` trained as ``ref`` did, within derived bounds.

    ``optimizer``: the reference optimizer's param group ("lr", and for AdamW
    "betas" and "eps"). Compares the first step's gradients when ``run``
    recorded them (same weights on both sides), every step's loss, the
    final weights (all of them, or only ``keys``) and, with ``moments=True``,
    Adam's final moments of the names in ``run["moments"]``
    ({"exp_avg": {name: tensor}, "exp_avg_sq": ...}). ``start``: the bounds the runs already differ by (a continued run whose
    first step is ``first_step``). Returns the bounds after the last step.
    """
    eps = torch.finfo(dtype).eps
    lr = optimizer["lr"]
    adam = "betas" in optimizer
    if keys is None:
        missing = sorted(ref["state"].keys() - run["state"].keys())
        assert not missing, f"the run lacks {missing}"
    steps = len(ref["losses"])
    assert len(run["losses"]) == steps, (len(run["losses"]), steps)
    if "grads" in run and start is None:
        assert_first_step_gradients(run, ref, dtype=dtype, dims=dims)
    names = list(ref["grads"][0])
    weight: dict[str, Any] = {k: start.weight[k] if start else 0.0 for k in names}
    m_bound: dict[str, Any] = {k: start.exp_avg.get(k, 0.0) if start else 0.0 for k in names}
    v_bound: dict[str, Any] = {k: start.exp_avg_sq.get(k, 0.0) if start else 0.0 for k in names}
    for t in range(steps):
        grads = ref["grads"][t]
        # First-order effect on this step's loss of the weight differences so far.
        spread = sum(
            float((grads[k].double().abs() * torch.as_tensor(weight[k])).sum()) for k in grads
        )
        _close(
            f"loss of step {t + 1}",
            torch.tensor(run["losses"][t]),
            torch.tensor(ref["losses"][t]),
            loss_bound(dtype, dims, ref["losses"][t]) + spread,
        )
        d = _grad_bound(dtype, dims, grads)
        for key in grads:
            if adam:
                beta1, beta2 = optimizer["betas"]
                c = adam_ratio(beta1, beta2, first_step + t)
                root = ref["second_moments"][t][key].double().sqrt()
                update = (lr * d * (1 + c) / (root + optimizer["eps"])).clamp_max(2 * lr * c)
                g = grads[key].double().abs()
                m_bound[key] = beta1 * m_bound[key] + (1 - beta1) * d
                v_bound[key] = beta2 * v_bound[key] + (1 - beta2) * (2 * g * d + d * d)
            else:
                update = torch.tensor(lr * d)
            weight[key] = 2 * weight[key] + update
    for key in keys if keys is not None else list(ref["state"]):
        want = ref["state"][key]
        # A tied head's state entry is the embedding's Parameter under a second name.
        param = key if key in weight else _same_tensor(ref["state"], key, weight)
        # The weight bound, plus the rounding of the updates themselves.
        rounding = steps * eps * want.double().abs()
        bound = (weight[param] if param is not None else 0.0) + rounding
        _close(f"{key} after {steps} steps", run["state"][key], want, bound)
    for kind, moment in (("exp_avg", m_bound), ("exp_avg_sq", v_bound)):
        for key, got in run["moments"][kind].items() if moments else ():
            want = ref["moments"][kind][key]
            # Plus one rounding of the running average per step.
            _close(
                f"{kind} of {key} after {steps} steps",
                got,
                want,
                moment[key] + steps * eps * want.double().abs(),
            )
    return Bounds(weight=weight, exp_avg=m_bound, exp_avg_sq=v_bound)


def _same_tensor(state: dict[str, torch.Tensor], key: str, params: dict[str, Any]) -> str | None:
    """The parameter name whose final value is ``state[key]`` (a tied alias), else None."""
    for name in params:
        if state[name].shape == state[key].shape and torch.equal(state[name], state[key]):
            return name
    return None
