"""Weight indicators of under-trained rows (Land & Bartolo, "Fishing for Magikarp", 2024).

A row that (almost) never received a positive target keeps moving only with the
softmax's push-down on every non-target token, which is nearly the same direction
for all of them; such output rows end up close to one another. The recipe:

1. the output table ``U [V, d]`` in float64; its first principal direction ``c`` (of the
   centred rows) is a direction every row shares (frequency, a common offset) and
   would dominate any cosine, so each row loses its component along it:
   ``u' = u - (u·c) c``;
2. ``m`` = the mean of the reference unused rows of ``U'`` (rows known never to be
   trained, see :func:`reference_rows`);
3. the indicator of row ``i`` is ``cos(u'_i, m)``: near 1 for rows that look like the
   unused ones, lower for trained rows.

For an untied model the input table carries a second, independent signal: a row that
never appears as input keeps (about) its initial norm, well below trained rows, so
the L2 norm of each input row is reported too (low is suspicious).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tokembed.audit._categories import TokenCategories
from tokembed.errors import AuditError

__all__ = ["input_norms", "reference_rows", "unembedding_indicator", "without_first_component"]


def without_first_component(table: torch.Tensor) -> torch.Tensor:
    """``table`` (float64) with each row's component along the first principal direction removed.

    The direction is the top eigenvector of the centred rows' scatter matrix ``XᵀX`` (d×d,
    so the cost is one pass over the table plus a small eigen-decomposition).
    """
    x = table.to(torch.float64)
    centred = x - x.mean(dim=0)
    _, vectors = torch.linalg.eigh(centred.T @ centred)
    c = vectors[:, -1]  # eigh sorts eigenvalues ascending: the last is the largest
    return x - torch.outer(x @ c, c)


def unembedding_indicator(table: torch.Tensor, reference: Sequence[int]) -> torch.Tensor:
    """Cosine of each row of ``table`` (after :func:`without_first_component`) to the mean
    of the ``reference`` rows; float64 ``[V]``.

    A zero row (some checkpoints zero unused rows) has cosine 0, not NaN.
    """
    projected = without_first_component(table)
    mean = projected[list(reference)].mean(dim=0)
    norms = projected.norm(dim=1) * mean.norm()
    dots = projected @ mean
    tiny = torch.finfo(torch.float64).tiny
    return torch.where(norms > tiny, dots / norms.clamp_min(tiny), torch.zeros_like(dots))


def input_norms(table: torch.Tensor) -> torch.Tensor:
    """L2 norm of each input row, float64 ``[V]``."""
    return table.to(torch.float64).norm(dim=1)


def reference_rows(
    categories: TokenCategories,
    *,
    rows: int,
    explicit: Sequence[int] | None = None,
    never_seen: Sequence[int] = (),
) -> tuple[tuple[int, ...], str]:
    """The reference unused rows and where they come from.

    In order: ``explicit`` ids (the caller knows them, e.g. reserved tokens); else the
    rows no text can address (holes, rows past R, unreachable pieces); else, with a
    corpus, the ids that never occur in it. Among the never-seen ids most are merely
    rare in that corpus and point in scattered directions, while the under-trained ones
    share one direction, so their mean still points at the under-trained cluster.

    Raises:
        AuditError(AUDIT_REFERENCE_INVALID): an explicit id outside ``[0, rows)``.
        AuditError(AUDIT_NO_REFERENCE): none of the three sources gives a row.
    """
    if explicit:
        bad = sorted(i for i in explicit if not 0 <= i < rows)
        if bad:
            raise AuditError(
                "AUDIT_REFERENCE_INVALID",
                f"reference unused ids {bad[:5]} name no row of the output table ({rows} rows)",
                value=bad,
                fix=f"give reference ids in [0, {rows})",
            )
        return tuple(sorted(set(explicit))), "given"
    unaddressed = categories.unaddressed()
    if unaddressed:
        return unaddressed, "unaddressed rows (holes, rows past R, unreachable pieces)"
    if never_seen:
        return tuple(sorted(never_seen)), "ids that never occur in the corpus"
    raise AuditError(
        "AUDIT_NO_REFERENCE",
        "the tokenizer addresses every row (no holes, rows past R or unreachable pieces), "
        "so there is no reference of unused rows to compare with",
        value=categories.model_rows,
        fix="give a corpus (its never-occurring ids become the reference) or name known "
        "unused ids as the reference",
    )
