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
:func:`bits_per_byte` scores text with such logits: the total negative log-likelihood
in bits of every token after each sequence's context, over the text's UTF-8 bytes, so
models with different tokenizers are compared on the same bytes (a migrated model
before any training: what its initializer alone gives).

Example::

    >>> report = probability_shift(old_logits, new_logits, row_map)  # doctest: +SKIP
    >>> report.max_kl <= report.mean_init_bound  # doctest: +SKIP
    True

Raises CheckpointError PROBABILITY_SHIFT (:meth:`ShiftReport.check`), UsageError
INVALID_ARGUMENT (an old row without a new row, mismatched shapes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from tokembed.errors import CheckpointError, UsageError
from tokembed.migrate.roles import VocabRoles, parameter, vocab_roles
from tokembed.migrate.rowmap import RowMap

__all__ = ["BitsPerByte", "ShiftReport", "bits_per_byte", "model_logits", "probability_shift"]


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


@dataclass(frozen=True, kw_only=True)
class BitsPerByte:
    """Negative log-likelihood of a text under a model: ``bits`` over ``bytes``."""

    bits: float  # sum of -log2 p(token | earlier tokens) over the scored tokens
    tokens: int  # scored tokens (every id after each sequence's context)
    bytes: int  # UTF-8 bytes of the text the scored tokens spell

    @property
    def bits_per_byte(self) -> float:
        return self.bits / self.bytes

    @property
    def bits_per_token(self) -> float:
        return self.bits / self.tokens

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "bits_per_byte": self.bits_per_byte}


def bits_per_byte(
    model: nn.Module,
    sequences: Sequence[Sequence[int]],
    n_bytes: int,
    *,
    context: int = 1,
    roles: VocabRoles | None = None,
) -> BitsPerByte:
    """Bits per byte of a causal LM on ``sequences`` that spell ``n_bytes`` bytes of text.

    Each sequence is scored on its own: its first ``context`` ids (e.g. the BOS token)
    condition the model and are not scored; every later id costs
    ``-log2 softmax(logits)[id]`` with float64 :func:`model_logits` of the ids before it.
    ``n_bytes`` is the UTF-8 length of the text the scored ids spell (the caller's
    texts, so two tokenizers of one text are compared on one denominator). A sequence
    must fit the model's positions; split long texts first. A model whose logits are
    all equal gives ``log2(V) * tokens / n_bytes``.

    Example::

        >>> ids = [[bos, *tok.encode_ordinary(t)] for t in texts]  # doctest: +SKIP
        >>> bits_per_byte(model, ids, sum(len(t.encode()) for t in texts)).bits_per_byte  # doctest: +SKIP

    Raises:
        UsageError INVALID_ARGUMENT: ``n_bytes`` < 1, ``context`` < 1, or no sequence
            has an id to score.
    """
    if n_bytes < 1 or context < 1:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"bits per byte needs n_bytes >= 1 and context >= 1 (got {n_bytes}, {context})",
            value=(n_bytes, context),
            fix="pass the UTF-8 byte count of the text and at least one context id (a BOS)",
        )
    roles = vocab_roles(model) if roles is None else roles
    nats = 0.0
    tokens = 0
    for seq in sequences:
        if len(seq) <= context:
            continue
        ids = torch.tensor([list(seq)], dtype=torch.int64)  # [1, T]
        logits = model_logits(model, ids, roles=roles)[0, :-1]  # [T-1, V]: predicts ids[1:]
        logp = torch.log_softmax(logits, dim=-1)
        target = ids[0, 1:, None]  # [T-1, 1]
        scored = logp.gather(1, target)[context - 1 :, 0]  # positions after the context
        nats -= float(scored.sum())
        tokens += int(scored.numel())
    if tokens == 0:
        raise UsageError(
            "INVALID_ARGUMENT",
            f"no sequence is longer than its {context} context id(s): nothing to score",
            value=len(sequences),
            fix="pass sequences of context ids followed by the text's ids",
        )
    return BitsPerByte(bits=nats / math.log(2), tokens=tokens, bytes=n_bytes)
