"""What new output rows do to the distribution over the old vocabulary.

With the hidden state and old output rows unchanged, the old raw logits ``z_i``
are preserved exactly, but M new rows with logits ``a_j`` add
``A = sum_j exp(a_j)`` to the softmax denominator ``Z = sum_i exp(z_i)``. Every old
probability is scaled by ``Z / (Z + A)``: the new tokens take
``q_new = A / (Z + A)`` and ``KL(P0 || P1) = log(1 + A / Z)`` over the old
coordinates. For M rows initialized to the mean old row (with a compatible bias),
Jensen's inequality bounds ``A <= M Z / V0``, so the KL is at most ``log(1 + M/V0)``
per context.

:func:`probability_shift` computes these in float64 from two logit tensors, both
from the closed form and directly from the two distributions, and reports the
largest old-logit change separately from the largest old-probability change:
preserved logits are never reported as preserved probabilities.
:func:`model_logits` gets float64 logits of a ``transformers`` causal LM from its
last hidden state and its output role, so the comparison is not blurred by a
matmul kernel choosing another summation order for a wider head.

Example::

    >>> report = probability_shift(old_logits, new_logits, row_map)  # doctest: +SKIP
    >>> report.max_kl <= report.mean_init_bound  # doctest: +SKIP
    True

Raises CheckpointError PROBABILITY_SHIFT (:meth:`ShiftReport.check`), UsageError
INVALID_ARGUMENT (an old row without a new row, mismatched shapes).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from tokembed.errors import CheckpointError, UsageError
from tokembed.migrate.roles import VocabRoles, parameter, vocab_roles
from tokembed.migrate.rowmap import RowMap

__all__ = ["ShiftReport", "model_logits", "probability_shift"]


@dataclass(frozen=True, kw_only=True)
class ShiftReport:
    """Per-context figures of the change, aggregated over N contexts (float64)."""

    contexts: int
    old_rows: int
    new_rows: int
    mean_new_mass: float  # mean over contexts of q_new = A / (Z + A)
    max_new_mass: float
    mean_kl: float  # mean of KL(P0 || P1) measured directly
    max_kl: float
    max_kl_formula_gap: (
        float  # |direct KL - log(1 + A/Z)|: zero up to rounding when logits are kept
    )
    mean_init_bound: float  # log(1 + M / V0)
    max_old_logit_change: float
    max_old_prob_change: float

    @property
    def logits_preserved(self) -> bool:
        return self.max_old_logit_change == 0.0

    @property
    def within_mean_bound(self) -> bool:
        return self.max_kl <= self.mean_init_bound

    def check(self, *, max_kl: float) -> None:
        """Refuse (PROBABILITY_SHIFT) when the largest per-context KL exceeds ``max_kl``."""
        if self.max_kl > max_kl:
            kept = "preserved bit for bit" if self.logits_preserved else "changed"
            raise CheckpointError(
                "PROBABILITY_SHIFT",
                f"old logits {kept}, yet new rows took up to {self.max_new_mass:.3g} of the "
                f"probability: KL(P0||P1) up to {self.max_kl:.3g} > budget {max_kl:.3g}",
                value=self.max_kl,
                fix="initialize new output rows at the old mean or lower their bias "
                "(bias_for_mass), then measure again",
            )

    def to_json(self) -> dict[str, object]:
        return {
            **asdict(self),
            "logits_preserved": self.logits_preserved,
            "within_mean_bound": self.within_mean_bound,
        }


def probability_shift(
    old_logits: torch.Tensor, new_logits: torch.Tensor, rows: RowMap
) -> ShiftReport:
    """Compare old logits [..., V0] with migrated logits [..., V1] on the same contexts."""
    if old_logits.shape[-1] != rows.old_rows or new_logits.shape[-1] != rows.new_rows:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"logits of width {old_logits.shape[-1]} and {new_logits.shape[-1]} do not match the "
            f"map's {rows.old_rows} -> {rows.new_rows} rows",
            value=(old_logits.shape[-1], new_logits.shape[-1]),
        )
    if rows.dropped:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"old row {rows.dropped[0]} has no new row: KL over the old vocabulary is undefined",
            value=rows.dropped[0],
            fix="measure changes that keep every old row (append-only or permutation)",
        )
    z = old_logits.detach().to(torch.float64).reshape(-1, rows.old_rows)  # [N, V0]
    full = new_logits.detach().to(torch.float64).reshape(-1, rows.new_rows)  # [N, V1]
    src, dst = rows.index_tensors()
    kept = torch.empty_like(z)
    kept[:, src] = full[:, dst]  # new logits of the old rows, in old order
    added = full[:, torch.tensor(rows.new_row_ids, dtype=torch.int64)]  # [N, M]
    log_z = torch.logsumexp(z, dim=-1)
    log_p0 = z - log_z[:, None]
    log_p1 = kept - torch.logsumexp(full, dim=-1)[:, None]  # old coordinates of P1
    kl = (log_p0.exp() * (log_p0 - log_p1)).sum(dim=-1)
    if added.shape[1]:
        log_a = torch.logsumexp(added, dim=-1)
        formula = torch.log1p(torch.exp(log_a - log_z))
        mass = torch.exp(log_a - torch.logaddexp(torch.logsumexp(kept, dim=-1), log_a))
    else:
        formula = torch.zeros_like(kl)
        mass = torch.zeros_like(kl)
    return ShiftReport(
        contexts=z.shape[0],
        old_rows=rows.old_rows,
        new_rows=rows.new_rows,
        mean_new_mass=float(mass.mean()),
        max_new_mass=float(mass.max()),
        mean_kl=float(kl.mean()),
        max_kl=float(kl.max()),
        max_kl_formula_gap=float((kl - formula).abs().max()),
        mean_init_bound=math.log1p(len(rows.new_row_ids) / rows.old_rows),
        max_old_logit_change=float((kept - z).abs().max()),
        max_old_prob_change=float((log_p1.exp() - log_p0.exp()).abs().max()),
    )


@torch.no_grad()
def model_logits(
    model: nn.Module, ids: torch.Tensor, *, roles: VocabRoles | None = None
) -> torch.Tensor:
    """Float64 logits [B, T, V] of a causal LM: last hidden state @ output rows + bias."""
    roles = vocab_roles(model) if roles is None else roles
    if roles.output is None:
        raise UsageError(
            "INVALID_ARGUMENT",
            "the model has no output role to score the vocabulary",
            value=roles.input,
            fix="measure a model with an output head (or a tied one)",
        )
    out = model(input_ids=ids, output_hidden_states=True)
    hidden = out.hidden_states[-1].to(torch.float64)  # [B, T, H]
    logits = hidden @ parameter(model, roles.output).detach().to(torch.float64).T  # [B, T, V]
    if roles.bias is not None:
        logits = logits + parameter(model, roles.bias).detach().to(torch.float64)
    scale = getattr(getattr(model, "config", None), "logit_scale", None)
    return logits * scale if isinstance(scale, int | float) else logits
