"""The direct <-> factorized bridge for a tied vocabulary table.

A direct tied model reads one [V, H] table ``E`` in both roles. Its factorized
counterpart (ALBERT's masked-LM pattern) keeps a lexical table ``A`` [V, D],
an input bridge ``P_in`` [D, H] (``X = A[ids] P_in``) and an output bridge
``R_out`` [H, D] that maps hidden states back to lexical width before the
decoder, whose [V, D] weight *is* ``A``: logits ``Z = (C R_out) A^T``. Only the
[V, D] table is tied; the two bridges are separate parameters.

:func:`factorize_tied` derives ``A, P_in, R_out`` from ``E`` by a truncated SVD
``E ~ U_D S_D V_D^T``: ``A = U_D S_D``, ``P_in = V_D^T``, ``R_out = V_D``, so
both roles reproduce ``U_D S_D V_D^T`` — exactly ``E`` when ``D >= rank(E)``,
otherwise the best rank-D approximation (the manifest records the relative
Frobenius error). :func:`defactorize` goes back: ``E_in = A P_in`` and
``E_out = A R_out^T``; the direct pair stays tied only if those are equal.

Example::

    >>> emb, head, c = factorize_tied(E, lexical_dim=2)      # E: [5, 4] of rank 2
    >>> head.decoder_weight is emb.lookup.weight, c.changes["relative_error"] < 1e-6
    (True, True)
"""

from __future__ import annotations

import torch
from torch import nn

from tokembed.checkpoint.convert import Conversion
from tokembed.embedding.lookup import TokenEmbedding
from tokembed.embedding.variants.factorized import FactorizedEmbedding
from tokembed.errors import CheckpointError, UsageError

__all__ = ["FactorizedHead", "defactorize", "factorize_tied"]


class FactorizedHead(nn.Module):
    """``hidden [*, H] -> bridge [*, D] -> logits [*, V]`` against a tied [V, D] lexical table.

    Raises:
        CheckpointError TIE_WIDTH_MISMATCH: the table is not ``bridge``'s output width wide.
    """

    def __init__(self, lexical: TokenEmbedding | nn.Embedding, hidden_dim: int) -> None:
        super().__init__()
        lexical_dim = lexical.weight.shape[1]
        self.bridge = nn.Linear(
            hidden_dim, lexical_dim, bias=False, dtype=lexical.weight.dtype
        )  # weight [D, H] = R_out^T
        self.decoder_weight = lexical.weight  # the tie: one [V, D] Parameter

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.decoder_weight.shape[1] != self.bridge.out_features:
            raise CheckpointError(
                "TIE_WIDTH_MISMATCH",
                f"the decoder table is {list(self.decoder_weight.shape)} but the bridge emits "
                f"width {self.bridge.out_features}",
                value=(tuple(self.decoder_weight.shape), self.bridge.out_features),
                fix="tie the head to the [V, D] lexical table its bridge maps into",
            )
        lexical = self.bridge(hidden)  # [*, H] -> [*, D]
        return lexical @ self.decoder_weight.t()  # [*, D] @ [D, V] -> [*, V]


def factorize_tied(
    table: torch.Tensor, *, lexical_dim: int
) -> tuple[FactorizedEmbedding, FactorizedHead, Conversion]:
    """Factor a direct tied [V, H] table into a tied [V, D] lexical table and two bridges.

    Raises:
        UsageError INVALID_ARGUMENT: ``lexical_dim`` outside [1, min(V, H)].
    """
    v, h = table.shape
    if not 1 <= lexical_dim <= min(v, h):
        raise UsageError(
            "INVALID_ARGUMENT",
            f"lexical_dim={lexical_dim} for a [{v}, {h}] table",
            value=lexical_dim,
            fix=f"pick 1 <= lexical_dim <= {min(v, h)}",
        )
    work = table.detach().double()
    u, s, vh = torch.linalg.svd(work, full_matrices=False)  # u [V, r], s [r], vh [r, H]
    a = u[:, :lexical_dim] * s[:lexical_dim]  # [V, D]
    p_in = vh[:lexical_dim]  # [D, H]
    approx = a @ p_in  # [V, H]
    rel = float(torch.linalg.norm(approx - work) / torch.linalg.norm(work).clamp_min(1e-300))
    emb = FactorizedEmbedding(v, lexical_dim, h, dtype=table.dtype)
    head = FactorizedHead(emb.lookup, h)
    with torch.no_grad():
        emb.lookup.weight.copy_(a.to(table.dtype))
        emb.bridge.weight.copy_(p_in.t().to(table.dtype))  # Linear(D, H) stores P_in^T [H, D]
        head.bridge.weight.copy_(p_in.to(table.dtype))  # Linear(H, D) stores R_out^T = V_D^T
    conversion = Conversion(
        kind="direct_to_factorized",
        changes={
            "vocab_rows": v,
            "hidden_dim": h,
            "lexical_dim": lexical_dim,
            "relative_error": rel,
            "discarded_singular_values": int(s.numel() - lexical_dim),
            "tied": "lexical [V, D] table shared by lookup and decoder; bridges separate",
            "parameters_before": v * h,
            "parameters_after": v * lexical_dim + 2 * lexical_dim * h,
        },
    )
    return emb, head, conversion


def defactorize(
    embedding: FactorizedEmbedding, head: FactorizedHead
) -> tuple[TokenEmbedding, nn.Linear, Conversion]:
    """Multiply the bridges back in: a direct [V, H] embedding and head, tied when equal.

    Raises:
        CheckpointError ALIAS_GRAPH_LOST: ``head`` is not tied to ``embedding``'s table.
    """
    a = embedding.lookup.weight
    if head.decoder_weight is not a:
        raise CheckpointError(
            "ALIAS_GRAPH_LOST",
            "the factorized head's decoder is not the embedding's lexical table",
            value=(tuple(head.decoder_weight.shape), tuple(a.shape)),
            fix="build the head with FactorizedHead(embedding.lookup, hidden_dim)",
        )
    with torch.no_grad():
        e_in = a.double() @ embedding.bridge.weight.double().t()  # [V, D] @ [D, H]
        e_out = a.double() @ head.bridge.weight.double()  # [V, D] @ [D, H]
    diff = float((e_in - e_out).abs().max())
    v, h = e_in.shape
    emb = TokenEmbedding(v, h, weight=nn.Parameter(e_in.to(a.dtype)))
    linear = nn.Linear(h, v, bias=False, dtype=a.dtype)
    tied = bool(torch.equal(e_in.to(a.dtype), e_out.to(a.dtype)))
    if tied:
        linear.weight = emb.weight
    else:
        with torch.no_grad():
            linear.weight.copy_(e_out.to(a.dtype))
    conversion = Conversion(
        kind="factorized_to_direct",
        changes={
            "vocab_rows": v,
            "hidden_dim": h,
            "lexical_dim": a.shape[1],
            "max_abs_difference_in_out": diff,
            "tied": tied,
            "note": "tied only when A P_in equals A R_out^T; otherwise the head is untied",
        },
    )
    return emb, linear, conversion
