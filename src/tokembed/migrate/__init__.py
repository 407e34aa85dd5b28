"""Vocabulary change as a migration of model, optimizer and release state (torch).

Classify the change between two tokenizers (:func:`classify_change`), build the
exact row map (:func:`row_map`), initialize the other rows (:class:`NewRows`),
migrate every vocabulary-indexed tensor and its optimizer state
(:func:`migrate_model`), freeze rows (:func:`freeze_rows`), measure what the
new rows did to the output distribution (:func:`probability_shift`) and bind
it all in a release manifest (:mod:`tokembed.migrate.release`). Vocabulary-parallel
tables: :mod:`tokembed.migrate.shards` (imported on its own; it needs torch.distributed).
"""

from __future__ import annotations

from tokembed.migrate.apply import Migration, migrate_model, migrate_rows
from tokembed.migrate.classify import KINDS, VocabularyChange, classify_change, ordered_vocab_digest
from tokembed.migrate.freeze import RowFreeze, check_frozen, freeze_rows
from tokembed.migrate.init import (
    InitRecord,
    NewRows,
    bias_for_mass,
    bias_rows,
    decompositions,
    init_records,
    init_rows,
)
from tokembed.migrate.measure import ShiftReport, model_logits, probability_shift
from tokembed.migrate.optimizer import check_state_migration, move_state, snapshot_state
from tokembed.migrate.release import (
    PackRecord,
    ReleaseManifest,
    VersionPair,
    admit_pair,
    build_manifest,
    check_packs,
    check_rollback,
    next_stage,
)
from tokembed.migrate.roles import (
    VocabRoles,
    check_bindings,
    check_vocab_axes,
    require_bound,
    vocab_roles,
)
from tokembed.migrate.rowmap import RowMap, check_row_map, row_map

__all__ = [
    "KINDS",
    "InitRecord",
    "Migration",
    "NewRows",
    "PackRecord",
    "ReleaseManifest",
    "RowFreeze",
    "RowMap",
    "ShiftReport",
    "VersionPair",
    "VocabRoles",
    "VocabularyChange",
    "admit_pair",
    "bias_for_mass",
    "bias_rows",
    "build_manifest",
    "check_bindings",
    "check_frozen",
    "check_packs",
    "check_rollback",
    "check_row_map",
    "check_state_migration",
    "check_vocab_axes",
    "classify_change",
    "decompositions",
    "freeze_rows",
    "init_records",
    "init_rows",
    "migrate_model",
    "migrate_rows",
    "model_logits",
    "move_state",
    "next_stage",
    "ordered_vocab_digest",
    "probability_shift",
    "require_bound",
    "row_map",
    "snapshot_state",
    "vocab_roles",
]
