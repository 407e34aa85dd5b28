"""Quantized role packs of a tied table: derived from one source, or not tied at all.

A serving runtime may quantize the input role (row lookup) and the output role
(classifier) of a tied table into separate packs. That is still one logical
table only if both packs are *derived* from the same source tensor by a
recorded rule and can be regenerated from it; two packs quantized from
different copies, with independent scales or calibrations, are two physical
tables that merely share a name.

:func:`derive_pack` makes an int8 pack with one absmax scale per row
(``scale_v = max|E_v| / 127``, ``q = round(E / scale)``) and records the source
digest. :func:`check_packs_tied` re-derives every pack from the source and
refuses any that does not match bit for bit.

Example::

    >>> packs = [derive_pack(E, role="input"), derive_pack(E, role="output")]
    >>> check_packs_tied(E, packs)          # passes; a pack of another copy raises
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from tokembed.artifacts.digest import tensor_digest
from tokembed.errors import CheckpointError

__all__ = ["RolePack", "check_packs_tied", "derive_pack"]

_QMAX = 127  # symmetric int8: [-127, 127], so +-max maps to +-127 exactly


@dataclass(frozen=True, kw_only=True, eq=False)
class RolePack:
    """One role's quantized table: int8 rows [V, H], fp32 scales [V], and its provenance."""

    role: str
    data: torch.Tensor
    scale: torch.Tensor
    source_sha256: str
    rule: str = "int8-absmax-per-row"


def derive_pack(source: torch.Tensor, *, role: str) -> RolePack:
    """Quantize ``source`` [V, H] for ``role`` with per-row absmax int8; deterministic."""
    table = source.detach().float()
    scale = table.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / _QMAX  # [V]
    data = torch.round(table / scale[:, None]).clamp(-_QMAX, _QMAX).to(torch.int8)  # [V, H]
    return RolePack(role=role, data=data, scale=scale, source_sha256=tensor_digest(source))


def check_packs_tied(source: torch.Tensor, packs: Sequence[RolePack]) -> None:
    """Require every pack to be the pack :func:`derive_pack` makes from ``source``.

    Raises:
        CheckpointError QUANTIZED_PACKS_NOT_TIED: a pack records another source,
            another rule, or differs from its re-derivation (independent scales
            or calibration, or edited packed values).
    """
    digest = tensor_digest(source)
    expected = derive_pack(source, role="check")
    for pack in packs:
        if (
            pack.source_sha256 != digest
            or pack.rule != expected.rule
            or not torch.equal(pack.scale, expected.scale)
            or not torch.equal(pack.data, expected.data)
        ):
            raise CheckpointError(
                "QUANTIZED_PACKS_NOT_TIED",
                f"the {pack.role!r} pack is not derived from the tied source table "
                f"(source {pack.source_sha256[:19]} vs {digest[:19]}, rule {pack.rule!r})",
                value=pack.role,
                fix="derive every role's pack from the one logical table (derive_pack) and "
                "regenerate packs after each update, or declare the runtime untied",
            )
