"""Weight tying and checkpoints that keep their alias graph (safetensors underneath).

* :func:`tie_report` / :func:`require_ties` — is every claimed tie one
  Parameter (object and storage), and is every shared table claimed?
* :func:`save_checkpoint` / :func:`load_checkpoint` — one tensor per alias
  group plus the alias map, tokenizer address hash, shard layout and
  per-logical-parameter optimizer state; loading restores the aliases first
  and proves them afterwards; :func:`verify_checkpoint` checks a file.
* :func:`untie`, :func:`tie`, :func:`factorize_tied`, :func:`defactorize` —
  tying-mode changes as explicit conversions with a manifest.
* :func:`derive_pack` / :func:`check_packs_tied` — quantized role packs of one
  logical table.
* :func:`check_output_head` — an output head's vocabulary axis and layout
  against the input table.
"""

from __future__ import annotations

from tokembed.checkpoint.alias import (
    AliasGraph,
    alias_graph,
    apply_aliases,
    same_storage,
    verify_aliases,
)
from tokembed.checkpoint.checkpoint import LoadReport, load_checkpoint, save_checkpoint
from tokembed.checkpoint.convert import Conversion, role_pair, tie, untie
from tokembed.checkpoint.factorize import FactorizedHead, defactorize, factorize_tied
from tokembed.checkpoint.format import CheckpointSummary, verify_checkpoint
from tokembed.checkpoint.heads import check_output_head
from tokembed.checkpoint.optimizer import check_registration
from tokembed.checkpoint.packs import RolePack, check_packs_tied, derive_pack
from tokembed.checkpoint.ties import (
    TiePair,
    TieReport,
    check_replica_groups,
    require_ties,
    tie_report,
)

__all__ = [
    "AliasGraph",
    "CheckpointSummary",
    "Conversion",
    "FactorizedHead",
    "LoadReport",
    "RolePack",
    "TiePair",
    "TieReport",
    "alias_graph",
    "apply_aliases",
    "check_output_head",
    "check_packs_tied",
    "check_registration",
    "check_replica_groups",
    "defactorize",
    "derive_pack",
    "factorize_tied",
    "load_checkpoint",
    "require_ties",
    "role_pair",
    "same_storage",
    "save_checkpoint",
    "tie",
    "tie_report",
    "untie",
    "verify_aliases",
    "verify_checkpoint",
]
